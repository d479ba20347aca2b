"""Markdown summary of a run, for the GitHub step summary ($GITHUB_STEP_SUMMARY) and a PR comment.

Formats the run view (``view.build``): the headline, then what fails the run (each failing test
with its NEW fallbacks, the checked fixes beside them, the failing numeric outputs and budgets;
stale baseline entries, loosened budgets, table bugs, errors), then folded in ``<details>`` the
accepted fallbacks, every test and target, the numerics tables and the oracles.

A size budget keeps the document under :data:`LIMIT` characters whatever the suite size (GitHub
refuses a PR comment over 65,536): parts are added most important first, and what does not fit
is counted in one line pointing to the HTML or JSON report. Names come from models: every cell is
escaped (``formatting.md``: Markdown and HTML specials, pipes, control and bidi characters) and capped.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from . import formatting as F
from .view import INTERRUPTED, RunView, TestView, build, documentation_note
from .rows import fmt

LIMIT = 60_000
MAX_CELL = 160
MAX_NEW_ROWS = 50  # per failing target: the first of them in graph order, the rest counted
_RESERVE = 1_500  # the closing lines: what was left out and the footer


def esc(text: Any, limit: int = MAX_CELL) -> str:
    """Safe inside a table cell: no line breaks, no markup, no HTML, bounded length."""
    return F.md(text, limit)


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _head(header: Sequence[str]) -> list[str]:
    return [_row(header), "|" + "|".join("---" for _ in header) + "|"]


class _Budget:
    """Lines added while they fit in ``limit`` characters; what is left out is counted."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.size = 0
        self.lines: list[str] = []
        self.left_out: list[str] = []

        self.cap = limit  # a folded section's share of what is left

    def room(self) -> int:
        return min(self.limit, self.cap) - self.size

    def add(self, lines: Sequence[str]) -> bool:
        size = sum(len(x) + 1 for x in lines)
        if size > self.room():
            return False
        self.lines += lines
        self.size += size
        return True

    def table(self, header: Sequence[str], rows: Sequence[str], what: str, tail: Sequence[str] = ()) -> None:
        """A table with as many rows as fit; the rest counted."""
        head = _head(header)
        if not self.add(["", *head]):
            self.left_out.append(f"{len(rows)} {what}")
            self.add(tail)
            return
        for k, r in enumerate(rows):
            if not self.add([r]):
                self.add(["", f"_... and {len(rows) - k} more {what}: see the HTML or JSON report_"])
                self.left_out.append(f"{len(rows) - k} {what}")
                break
        self.add(tail)


def _fix_lines(tr: Any, shown: Iterable[int]) -> list[str]:
    out = []
    for k in shown:
        f = tr.fixes[k]
        nodes = ", ".join(esc(n, 60) for n in f.nodes[:4])
        more = f" (+{len(f.nodes) - 4} more)" if len(f.nodes) > 4 else ""
        out.append(f"- fix {k + 1}: **{esc(f.title, 200)}** ({nodes}{more}): {esc(f.checked, 300)}. "
                   f"How: {esc(f.advice, 400)} Numerics: {esc(f.numerics, 200)}")
    if tr.combined_fix and tr.fixes:
        out.append(f"- with every checked fix together: {esc(tr.combined_fix, 300)}")
    return out


def _failure_block(t: TestView) -> list[str]:
    """A failing or errored test: its verdict per target, NEW fallbacks with fixes, failing numerics."""
    word = "ERROR" if t.errored else "FAIL"
    out = ["", f"#### {word} {esc(t.label, 300)}", ""]
    if t.error:
        out += [f"Error: {esc(t.error, 400)}", ""]
    for tr in t.targets:
        counts = f"{len(tr.new)} new, {len(tr.accepted)} accepted fallback(s)"
        out.append(f"- **{tr.word}** on {esc(tr.target)}{esc(documentation_note(tr))}: {counts}; NPU share "
                   f"{F.pct(tr.npu_share_nodes)} of nodes, {F.pct(tr.npu_share_macs)} of MACs")
        out += [f"  - model: {esc(i, 400)}" for i in tr.model_issues]
        out += [f"  - deployment budget: {esc(p, 300)}" for p in tr.budget_problems]
        if tr.refused:
            out.append(f"  - --npu-update-baseline refused {len(tr.refused)} unsupported node(s): the compiler "
                       "rejects the model")
    for tr in t.targets:
        if not tr.new:
            continue
        out += ["", f"New fallbacks on {esc(tr.target)} (they fail the check):", ""]
        out += _head(["op type", "node", "verdict", "source", "reason", "fix"])
        for fb in tr.new[:MAX_NEW_ROWS]:
            fixes = ", ".join(str(k + 1) for k in fb.fixes) or "-"
            out.append(_row([esc(fb.op_type, 40), esc(fb.name), fb.verdict, esc(fb.where), esc(fb.reasons, 300), fixes]))
        if len(tr.new) > MAX_NEW_ROWS:
            out += ["", f"_... and {len(tr.new) - MAX_NEW_ROWS} more new fallbacks: see the HTML or JSON report_"]
        used = sorted({k for fb in tr.new for k in fb.fixes} | set(range(len(tr.fixes))))
        if used:
            out += ["", f"Fixes for {esc(tr.target)} (each checked by re-running the verdict on a rewritten graph "
                        "where possible):", ""] + _fix_lines(tr, used)
    failing = t.failing_numerics
    if failing:
        out += ["", "Failing numeric outputs (the outputs that passed are in the numerics section):", ""]
        out += _head(["candidate", "target", "output", "max abs", "cosine", "SNR dB", "budget", "why"])
        out += [_row([esc(r["candidate"]), esc(r["target"]) or "-", esc(r["output"]) or "-", fmt(r.get("max_abs")),
                      F.number(r.get("cosine")), fmt(r.get("snr_db")), esc(r["budget"]), esc(r["reasons"], 300)])
                for r in failing]
    if t.numerics_error:
        out += ["", f"The numeric check could not run: {esc(t.numerics_error, 400)}"]
    budgets = [b for b in t.budget_rows if not b["passed"]]
    if budgets:
        out += ["", *[f"- deployment budget {esc(b['budget'])} on {esc(b['target'])}: {esc(b['limits'], 300)}: "
                      f"**FAIL** ({esc(b['problems'], 300)})" for b in budgets]]
    return out


def _folded(budget: _Budget, sections: Sequence[tuple[str, Any]]) -> None:
    """Sections folded in ``<details>``, each given an equal share of the room left (what one leaves
    unused goes to the next); each body adds what fits in its share."""
    for k, (summary, build_body) in enumerate(sections):
        budget.cap = budget.size + (budget.limit - budget.size - 20 * (len(sections) - k)) // (len(sections) - k)
        if budget.add(["", "<details>", f"<summary>{summary}</summary>", ""]):
            build_body()
            budget.cap = budget.limit
            budget.add(["", "</details>"])
        else:
            budget.left_out.append(summary)
    budget.cap = budget.limit


def render(doc: Mapping[str, Any], artefacts: Sequence[str] = (), limit: int = LIMIT,
           view: Optional[RunView] = None) -> str:
    """The Markdown summary of a run document; ``artefacts``: the other report files of the run (the
    HTML or JSON report that holds everything), named where something did not fit. ``view``: the
    document's ``view.build`` when the caller has it already (it renders other formats too)."""
    v: RunView = build(doc) if view is None else view
    b = _Budget(limit - _RESERVE)
    tt = v.totals
    b.add([f"## NPU check: {v.headline}", ""])
    if v.interrupted:
        b.add([f"**{INTERRUPTED}**", ""])
    b.add([f"{tt['tests']} checked test(s): {tt['passed']} passed, {tt['failed']} failed, {tt['error']} error; "
           f"{v.new_count} new fallback(s), {v.accepted_count} accepted, "
           f"{F.plural(len(v.stale), 'stale baseline entry', 'stale baseline entries')}."])
    base = v.baseline
    if base.get("updated"):
        b.add(["", f"Baseline {esc(base['path'])} updated by --npu-update-baseline: {len(base.get('added', []))} entr"
                   f"{'y' if len(base.get('added', [])) == 1 else 'ies'} added, {len(base.get('removed', []))} removed. "
                   "Review the reasons before committing it."])
    if base.get("error"):
        b.add(["", f"**Baseline {esc(base.get('path', ''))}: {esc(base['error'], 500)}**"])
    # 1) what fails the run
    if v.loosened:
        b.add(["", "### Budget loosenings without approval", "",
               f"The budgets file {esc(v.budgets.get('path', ''))} loosens these limits (against its committed version "
               "or an earlier release) with no `loosened` record: this fails the run.", ""]
              + [f"- {esc(p, 500)}" for p in v.loosened])
    def stale() -> None:
        if v.stale:
            b.add(["", "### Stale baseline entries", "",
                   "These accepted fallbacks no longer occur: remove them from the baseline (or run "
                   "`--npu-update-baseline`) so that they cannot come back silently"
                   + (" (strict: this fails the run)." if v.strict else ".")])
            b.table(["target", "test", "op type", "node", "location", "reason"],
                    [_row([esc(e["target"]), esc(e["test"]), esc(e["op_type"], 40), esc(e["node"]),
                           esc(F.location(e.get("location"))), esc(e["reason"], 300)]) for e in v.stale],
                    "stale entries")

    if v.strict:  # a stale entry fails a strict run: it comes with the failures; otherwise after them
        stale()
    failing = v.failing
    if failing:
        b.add(["", "### Failures", "",
               "Each failing test with its NEW fallbacks (not in the baseline), the fixes checked for them, and "
               "the numeric outputs over budget."])
        for k, t in enumerate(failing):
            if not b.add(_failure_block(t)):
                rest = len(failing) - k
                b.add(["", f"**... and {rest} more failing test(s) not shown here (size limit): see the HTML or "
                           "JSON report.**"])
                b.left_out.append(f"{rest} failing test(s)")
                break
    if not v.strict:
        stale()
    bugs = [(t, d) for t in v.tests for d in t.disagreements]
    if bugs:
        b.add(["", "### Table bugs found by the real toolchains", "",
               "The real toolchain placed these nodes differently from the support table (`--npu-oracle`)."])
        b.table(["target", "test", "op type", "node", "table says", "toolchain did", "kind", "toolchain said"],
                [_row([esc(d["target"]), esc(t.label), esc(d["op_type"], 40), esc(d["node"]), d["static"], d["real"],
                       d["kind"].replace("_", " "), esc(d["toolchain_said"] or "-", 300)]) for t, d in bugs],
                "table bugs")
    errors = [t for t in v.tests if t.errored]
    if errors:
        b.add(["", "### Errors"])
        b.table(["test", "status", "error"], [_row([esc(t.label), "error", esc(t.error, 300)]) for t in errors], "errors")
    # 2) folded: what passes or was accepted
    folded: list[tuple[str, Any]] = []
    acc = [(t, tr, fb) for t in v.tests for tr in t.targets for fb in tr.accepted]
    if acc:
        folded.append((f"Accepted fallbacks ({len(acc)})", lambda: b.table(
            ["target", "test", "op type", "node", "verdict", "source", "accepted because"],
            [_row([esc(tr.target), esc(t.label), esc(fb.op_type, 40), esc(fb.name), fb.verdict, esc(fb.where),
                   esc(fb.accepted_because, 300) + (f" ({esc(fb.link, 200)})" if fb.link else "")])
             for t, tr, fb in acc], "accepted fallbacks")))
    summary = [(t, tr) for t in v.tests for tr in t.targets]
    if summary:
        folded.append((f"Per target and test ({len(summary)}: {sum(not tr.passed for _, tr in summary)} failing)",
                       lambda: _per_target(b, v, summary)))
    num_tests = [t for t in v.tests if t.numerics_rows or t.budget_rows]
    if num_tests:
        folded.append((f"Numerics ({len(num_tests)} test(s))", lambda: _numerics(b, num_tests)))
    runs = [(t, r) for t in v.tests for r in t.oracle_rows]
    if runs:
        folded.append((f"Real toolchains (oracles) ({len(runs)})", lambda: b.table(
            ["target", "test", "toolchain", "status", "precision", "nodes agreeing", "disagreements", "note"],
            [_row([esc(r["target"]), esc(t.label), esc(r["tool"]), r["status"], r["precision"], r["agree"],
                   str(r["disagreements"]), esc(r["note"] or "-", 400)]) for t, r in runs], "oracle rows")))
    _folded(b, folded)
    lines = list(b.lines)
    if b.left_out:
        where = ", ".join(esc(a, 200) for a in artefacts) or "the HTML or JSON report (--npu-report=html:PATH, --npu-report=json:PATH)"
        lines += ["", f"_Left out to stay under {limit:,} characters: {esc('; '.join(b.left_out), 600)}. "
                      f"Everything is in {where}._"]
    lines += ["", f"<sub>{esc(v.tool)}, {esc(v.created)}</sub>", ""]
    return "\n".join(lines)


def _per_target(b: _Budget, v: RunView, summary: Sequence[Any]) -> None:
    rows = [_row([esc(tr.target) + esc(documentation_note(tr)), esc(t.label), f"**{tr.word}**", tr.verdict,
                  f"{tr.summary.get('npu', 0)}/{tr.summary.get('cpu', 0)}/{tr.summary.get('unsupported', 0)}/"
                  f"{tr.summary.get('folded', 0)}", F.pct(tr.npu_share_nodes), F.pct(tr.npu_share_macs),
                  str(len(tr.new)), str(len(tr.accepted))])
            for t, tr in sorted(summary, key=lambda p: (p[1].passed, p[1].target, p[0].label))]
    tables = {tr.target: tr.table for _, tr in summary}
    b.table(["target", "test", "gate", "verdict", "npu/cpu/unsupported/folded", "NPU share (nodes)",
             "NPU share (MACs)", "new", "accepted"], rows, "target rows",
            tail=["", "Tables: " + "; ".join(f"{esc(t)}: {esc(name)}" for t, name in sorted(tables.items()))])


def _numerics(b: _Budget, tests: Sequence[TestView]) -> None:
    b.add(["Outputs of each candidate against the reference: the exported graph against PyTorch, the target's "
           "precision emulated against fp32, and the real toolchains' own runs (oracles). Margin: the room left "
           "on the check closest to its bound (negative: over budget)."])
    for k, t in enumerate(tests):
        word = "" if not t.numerics_enabled else (" (passed)" if t.numerics_passed else " (**failed**)")
        block = ["", f"#### {esc(t.label)}{word}", ""]
        if t.numerics_context:
            block += [esc(t.numerics_context, 600), ""]
        if t.numerics_rows:
            block += _head(["candidate", "target", "output", "result", "vs", "max abs", "mean abs", "cosine", "SNR dB",
                            "norm ratio", "budget", "tightest margin"])
            block += [_row([esc(r["candidate"]), esc(r["target"]) or "-", esc(r["output"]) or "-",
                            {True: "pass", False: "**FAIL**", None: "-"}[r["passed"]]
                            + (f" ({esc(r['reasons'], 200)})" if r.get("reasons") else ""),
                            esc(r["reference"]), fmt(r.get("max_abs")), fmt(r.get("mean_abs")), F.number(r.get("cosine")),
                            fmt(r.get("snr_db")), F.number(r.get("norm_ratio")), esc(r["budget"]), esc(r["margin"])])
                      for r in t.numerics_rows]
        if t.budget_rows:
            block += [""] + _head(["target", "deployment budget", "measured (limit)", "result", "margin"])
            block += [_row([esc(x["target"]), esc(x["budget"]), esc(x["limits"]),
                            "pass" if x["passed"] else f"**FAIL** ({esc(x['problems'], 300)})", esc(x["margin"])])
                      for x in t.budget_rows]
        if not b.add(block):
            b.add(["", f"_... and the numerics of {len(tests) - k} more test(s): see the HTML or JSON report_"])
            b.left_out.append(f"the numerics of {len(tests) - k} test(s)")
            return


__all__ = ["render", "esc", "LIMIT"]
