"""One view of a run, built once from the run's JSON report document; every renderer formats it.

The terminal summary, the Markdown summary and the HTML report all read a :class:`RunView`, so a
test's verdict, what counts as an errored test, which fallbacks are new and which accepted, and
which checked fixes apply to a node are decided here and only here. No pytest, torch or onnx.

Verdicts:

* a test **errored** (:func:`errored`) when its entry says ``status: "error"`` or it carries an
  error and no target (a check that stopped before judging anything). An errored entry that still
  has targets keeps them (they are shown) but its verdict is ``error``, never ``passed``;
* a **target** passes its gate when the baseline accepts all of its fallbacks (without a
  baseline: when nothing leaves the NPU) and its deployment budget holds;
* a **test** fails when any target fails, its numerics fail, or its entry says failed;
* the **run** fails when a test fails or errored, or on a stale baseline entry in strict mode, a
  loosened budget without approval, or an interruption (``headline``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from ..result import DOCUMENTATION_ONLY, documentation_only, reason_text
from . import formatting as F
from .rows import disagreement_rows, numerics_context, numerics_rows, oracle_rows, target_budget_rows, test_label

__all__ = ["RunView", "TestView", "TargetView", "Fallback", "Fix", "build", "errored", "INTERRUPTED"]

INTERRUPTED = ("The run was interrupted: this report lists only the tests that ran before it stopped; "
               "the others were not checked.")

_FALLBACK = ("cpu", "unsupported")


def errored(test: Mapping[str, Any]) -> bool:
    """Whether a test entry errored: the one definition every renderer uses."""
    return test.get("status") == "error" or bool(test.get("error") and not test.get("targets"))


@dataclass(frozen=True)
class Fix:
    """A suggested fix of a target (``targets[].fixes.suggestions[]``), with what its check found."""

    title: str
    recipe: str
    nodes: tuple[str, ...]
    advice: str
    numerics: str
    checked: str  # what re-running the verdict on the rewritten graph found, in one sentence
    fully_on_npu: bool


@dataclass(frozen=True)
class Fallback:
    """A node that leaves the NPU, with its gate (new or accepted) and the fixes that name it."""

    index: int  # position in the target's node list (graph order)
    name: str
    op_type: str
    verdict: str  # cpu | unsupported
    new: bool
    where: str  # module at file:line (file name only)
    module: Optional[str]
    reasons: str
    accepted_because: str = ""
    link: str = ""
    fixes: tuple[int, ...] = ()  # positions in TargetView.fixes


@dataclass(frozen=True)
class TargetView:
    target: str
    passed: bool  # the gate: baseline and deployment budget
    verdict: str
    documentation_only: bool
    table: str  # toolchain/version/soc.json revision N (sha256 ...)
    table_sha256: str
    summary: Mapping[str, int]
    npu_share_nodes: Optional[float]
    npu_share_macs: Optional[float]
    fallbacks: tuple[Fallback, ...]  # graph order
    fixes: tuple[Fix, ...]
    combined_fix: str  # with every checked fix together, or ""
    model_issues: tuple[str, ...]
    notes: tuple[str, ...]
    partition: Mapping[str, Any]
    budget_problems: tuple[str, ...]
    refused: tuple[str, ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)  # nodes and edges for the graph picture

    @property
    def new(self) -> tuple[Fallback, ...]:
        return tuple(f for f in self.fallbacks if f.new)

    @property
    def accepted(self) -> tuple[Fallback, ...]:
        return tuple(f for f in self.fallbacks if not f.new)

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "FAIL"


@dataclass(frozen=True)
class TestView:
    __test__ = False  # not a pytest test class

    nodeid: str
    call: int
    label: str
    status: str  # passed | failed | error: the one verdict every renderer shows
    error: str  # first line of the error ("" when none)
    targets: tuple[TargetView, ...]
    numerics_enabled: bool
    numerics_passed: Optional[bool]
    numerics_error: str
    numerics_rows: tuple[Mapping[str, Any], ...]
    numerics_context: str
    budget_rows: tuple[Mapping[str, Any], ...]
    oracle_rows: tuple[Mapping[str, Any], ...]
    disagreements: tuple[Mapping[str, Any], ...]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def errored(self) -> bool:
        return self.status == "error"

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    @property
    def failing_numerics(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(r for r in self.numerics_rows if r["passed"] is False)


@dataclass(frozen=True)
class RunView:
    headline: str  # passed | failed | interrupted
    passed: bool
    interrupted: bool
    tests: tuple[TestView, ...]  # failing and errored first, then passing; each group by node id
    totals: Mapping[str, int]
    stale: tuple[Mapping[str, Any], ...]
    strict: bool
    baseline: Mapping[str, Any]
    loosened: tuple[str, ...]
    budgets: Mapping[str, Any]
    tool: str
    created: str

    @property
    def failing(self) -> tuple[TestView, ...]:
        return tuple(t for t in self.tests if not t.passed)

    @property
    def passing(self) -> tuple[TestView, ...]:
        return tuple(t for t in self.tests if t.passed)

    @property
    def new_count(self) -> int:
        return sum(len(tr.new) for t in self.tests for tr in t.targets)

    @property
    def accepted_count(self) -> int:
        return sum(len(tr.accepted) for t in self.tests for tr in t.targets)

    def verdicts(self) -> dict[tuple[str, str], str]:
        """(test label, target or "") -> PASS/FAIL/ERROR: what the renderers are compared on."""
        out: dict[tuple[str, str], str] = {}
        for t in self.tests:
            out[(t.label, "")] = t.status.upper() if t.status != "error" else "ERROR"
            for tr in t.targets:
                out[(t.label, tr.target)] = tr.word
        return out


def checked_text(v: Optional[Mapping[str, Any]]) -> str:
    """What the check of a fix found, in one sentence."""
    if v is None:
        return "not checked (no automatic rewrite)"
    if v.get("error"):
        return f"could not be checked ({v['error']})"
    if v.get("fully_on_npu"):
        return f"checked: the model would then be fully on the NPU ({v['fallbacks_before']} -> 0 fallbacks)"
    return (f"checked: {v['moved_to_npu']} of {v['targeted']} node(s) move to the NPU; "
            f"fallbacks {v['fallbacks_before']} -> {v['fallbacks_after']}")


def _gate(t: Mapping[str, Any]) -> Mapping[str, Any]:
    return t.get("baseline") or {"passed": t["passed"], "accepted": [],
                                 "new": [n["name"] for n in t.get("nodes", []) if n["verdict"] in _FALLBACK]}


def _table_name(table: Mapping[str, Any]) -> str:
    rev = f" revision {table['revision']}" if "revision" in table else ""
    path = f"{table.get('toolchain', '')}/{table.get('version', '')}/{table.get('soc', '')}.json"
    return f"{path}{rev} (sha256 {str(table.get('sha256', ''))[:12]})"


def _target(tr: Mapping[str, Any]) -> TargetView:
    g = _gate(tr)
    nodes = tr.get("nodes", [])
    fixes_doc = tr.get("fixes") or {}
    fixes = tuple(Fix(title=s.get("title", ""), recipe=s.get("recipe", ""), nodes=tuple(s.get("nodes") or ()),
                      advice=s.get("advice", ""), numerics=s.get("numerics", ""),
                      checked=checked_text(s.get("verified")),
                      fully_on_npu=bool((s.get("verified") or {}).get("fully_on_npu")))
                  for s in fixes_doc.get("suggestions") or [])
    fix_of: dict[str, list[int]] = {}
    for k, f in enumerate(fixes):
        for name in f.nodes:
            fix_of.setdefault(name, []).append(k)
    new = set(g["new"])
    accepted = {a["node"]: a for a in g.get("accepted") or []}
    index = {n["name"]: k for k, n in enumerate(nodes)}
    names = [n["name"] for n in nodes if n["name"] in new or n["name"] in accepted]
    # a name the gate lists but the node list lacks (never in practice) is still shown, last
    names += [x for x in list(g["new"]) + list(accepted) if x not in index and x not in names]
    fallbacks = []
    for name in names:
        k = index.get(name, len(nodes))
        n = nodes[k] if k < len(nodes) else {"name": name, "op_type": "?", "verdict": "?", "reasons": [], "source": None}
        a = accepted.get(name) if name not in new else None
        src = n.get("source")
        fallbacks.append(Fallback(index=k, name=name, op_type=n["op_type"], verdict=n["verdict"], new=a is None,
                                  where=F.location(src, file_name_only=True),
                                  module=(src or {}).get("module") if src else None,
                                  reasons="; ".join(reason_text(r) for r in n.get("reasons", [])) or n["verdict"],
                                  accepted_because=(a or {}).get("reason", ""), link=(a or {}).get("link") or "",
                                  fixes=tuple(fix_of.get(name, ()))))
    budget = tr.get("budget") or {}
    part = tr.get("partition") or {}
    table = tr.get("table") or {}
    return TargetView(
        target=tr["target"], passed=bool(g["passed"]), verdict=tr.get("verdict", ""),
        documentation_only=documentation_only(table), table=_table_name(table),
        table_sha256=str(table.get("sha256", "")), summary=tr.get("summary") or {},
        npu_share_nodes=part.get("npu_share_nodes"), npu_share_macs=part.get("npu_share_macs"),
        fallbacks=tuple(fallbacks), fixes=fixes,
        combined_fix=checked_text(fixes_doc["combined"]) if fixes_doc.get("combined") else "",
        model_issues=tuple(f"{i['verdict']}: {i['message']}" for i in tr.get("model_issues") or []),
        notes=tuple(tr.get("notes") or ()), partition=part, budget_problems=tuple(budget.get("problems") or ()),
        refused=tuple(g.get("refused") or ()), raw=tr)


def _test(t: Mapping[str, Any]) -> TestView:
    targets = tuple(_target(tr) for tr in t.get("targets") or [])
    num = t.get("numerics") or {}
    rows = tuple(numerics_rows(t))
    if errored(t):
        status = "error"
    elif (t.get("status") == "failed" or any(not tr.passed for tr in targets)
          or (num.get("enabled") and num.get("passed") is False) or any(r["passed"] is False for r in rows)):
        status = "failed"
    else:
        status = "passed"
    error = (t.get("error") or "").strip().splitlines()
    return TestView(nodeid=t["nodeid"], call=int(t.get("call", 1)), label=test_label(t), status=status,
                    error=error[0] if error else "", targets=targets,
                    numerics_enabled=bool(num.get("enabled")), numerics_passed=num.get("passed"),
                    numerics_error=num.get("error") or "", numerics_rows=rows,
                    numerics_context=numerics_context(t), budget_rows=tuple(target_budget_rows(t)),
                    oracle_rows=tuple(oracle_rows(t)), disagreements=tuple(disagreement_rows(t)), raw=t)


def build(doc: Mapping[str, Any]) -> RunView:
    """The view of a run document (``jsonreport.run_document`` plus the reporter's baseline and budgets)."""
    tests = [_test(t) for t in doc.get("tests", [])]
    rank = {"error": 0, "failed": 0, "passed": 1}
    tests.sort(key=lambda t: (rank[t.status], t.nodeid, t.call))
    base = doc.get("baseline") or {}
    budgets = doc.get("budgets") or {}
    stale = tuple(base.get("stale") or ())
    loosened = tuple(budgets.get("tightening_problems") or ())
    interrupted = bool(doc.get("interrupted"))
    ok = (not interrupted and all(t.passed for t in tests) and not (stale and base.get("strict"))
          and not loosened and not doc.get("totals", {}).get("failed", 0) and not doc.get("totals", {}).get("error", 0))
    totals = {"tests": len(tests), "passed": sum(t.status == "passed" for t in tests),
              "failed": sum(t.status == "failed" for t in tests), "error": sum(t.status == "error" for t in tests)}
    tool = doc.get("tool") or {}
    return RunView(headline="interrupted" if interrupted else ("passed" if ok else "failed"), passed=ok,
                   interrupted=interrupted, tests=tuple(tests), totals=totals, stale=stale,
                   strict=bool(base.get("strict")), baseline=base, loosened=loosened, budgets=budgets,
                   tool=f"{tool.get('name', 'pytest-npucheck')} {tool.get('version', '')}".strip(),
                   created=str(doc.get("created", "")))


def documentation_note(tr: TargetView) -> str:
    return f" ({DOCUMENTATION_ONLY})" if tr.documentation_only else ""
