"""Per-release budgets: numeric tolerances per test/output and deployment limits per target.

A budgets file (strict JSON, schema ``schemas/budgets.schema.json``, format in
``docs/numerics.md``) lists releases; the release in force is the newest one not newer than the
version the glue passes (option, ini key or package version). Budgets may only tighten:

* across edits of the file: :func:`check_tightening(old_doc, new_doc)` compares the committed
  version (``git show HEAD:path``) with the working copy;
* within a release line (``1.2.0`` -> ``1.2.1``): a later release must not be looser than an
  earlier one for the same key (checked by :func:`check_tightening` on the new document alone).

A loosening is accepted only through an explicit, reviewable ``"loosened": {"reason": ...,
"approved_by": ...}`` record on the entry that is new (absent or different) in this change.

No pytest, no torch.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .errors import NpuCheckError
from .jsonio import load_strict
from .numerics import (
    Comparison,
    OutputComparison,
    Policy,
    json_float,
    policy_for,
    precision_key,
)

__all__ = [
    "BUDGET_FORMAT",
    "SCHEMA_PATH",
    "BudgetError",
    "Budgets",
    "TargetBudget",
    "TestBudget",
    "check_tightening",
    "load_budgets",
    "margins",
    "parse_version",
    "report_entry",
    "validate",
]

BUDGET_FORMAT = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "budgets.schema.json"

#: For each tolerance field: +1 if a larger value is tighter, -1 if smaller is tighter, and the
#: value ``None`` stands for (None disables a bound: loosest for most, tightest for snr_db_min,
#: which only adds an alternative way to pass).
_DIRECTION: dict[str, tuple[int, float]] = {
    "cosine_min": (+1, -math.inf),
    "norm_ratio_tol": (-1, math.inf),
    "atol": (-1, math.inf),
    "peak_atol": (-1, math.inf),
    "rtol": (-1, math.inf),
    "mismatch_fraction": (-1, math.inf),
    "snr_db_min": (+1, math.inf),
    "allow_nonfinite": (-1, math.inf),
}
_TARGET_DIRECTION: dict[str, tuple[int, float]] = {
    "max_cpu_fallback_nodes": (-1, math.inf),
    "min_npu_share": (+1, -math.inf),
    "min_npu_mac_share": (+1, -math.inf),
}
_PRECISIONS = ("fp32", "fp16", "int8")


class BudgetError(NpuCheckError):
    """The budgets file is invalid or names an unknown release."""


def parse_version(version: str) -> tuple[int, ...]:
    """``"1.2.3"``, ``"1.2.3.dev4"``, ``"1.2.3rc1"`` -> ``(1, 2, 3)`` (leading numeric parts)."""
    m = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(version))
    if not m:
        raise BudgetError(f"cannot read a version from {version!r}")
    return tuple(int(p) for p in m.group(1).split("."))


def _line(version: str) -> tuple[int, ...]:
    return parse_version(version)[:2]


def validate(doc: Any) -> list[str]:
    """Schema problems of a budgets document (empty when valid), each with its JSON path."""
    import jsonschema

    schema = load_strict(SCHEMA_PATH)
    validator = jsonschema.validators.validator_for(schema)(schema)
    problems = [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}"
                for e in sorted(validator.iter_errors(doc), key=lambda e: list(map(str, e.absolute_path)))]
    if problems:
        return problems
    for rel, entry in doc.get("releases", {}).items():
        for key, test in entry.get("tests", {}).items():
            try:
                _effective(test)
            except ValueError as exc:
                problems.append(f"releases/{rel}/tests/{key}: {exc}")
    return problems


def load_budgets(path: Path | str) -> Budgets:
    """Read and validate a budgets file (strict JSON: no duplicate keys, no NaN)."""
    path = Path(path)
    doc = load_strict(path)
    problems = validate(doc)
    if problems:
        raise BudgetError(f"invalid budgets file {path}: {len(problems)} problem(s)\n"
                          + "\n".join(f"  - {p}" for p in problems))
    return Budgets(doc, path)


# --------------------------------------------------------------------------- values


@dataclasses.dataclass(frozen=True)
class TestBudget:
    """The budget that applies to one test: the entry key that matched, its precision (optional:
    one for every target, per target pattern, or absent: each target's table default) and its
    tolerances, applied on top of the default policy of the precision each target runs at."""

    __test__ = False  # not a pytest test class despite the name

    release: str
    key: str
    precision: str | Mapping[str, str] | None
    default: Mapping[str, Any] | None = None
    outputs: Mapping[str, Mapping[str, Any]] | None = None
    loosened: Mapping[str, Any] | None = None

    def precision_for(self, target: str, table_default: str) -> tuple[str, str | None]:
        """(precision key, note) of one target: the entry's precision for it, else the table's default.
        The note says when the entry changes the target's default (never silently)."""
        default = precision_key(table_default)
        p = self.precision
        if isinstance(p, Mapping):
            chosen = next((v for k, v in p.items() if k == target), None) or next(
                (v for k, v in p.items() if fnmatch.fnmatchcase(target, k)), None)
        else:
            chosen = p
        if chosen is None:
            return default, None
        key = precision_key(chosen)
        if key == default:
            return key, None
        return key, (f"budget entry {self.key!r} (release {self.release}) sets precision {key} for {target}, "
                     f"whose table default is {default}")

    def policy_for(self, precision: str) -> Policy:
        """The default policy of ``precision`` with the entry's tolerances applied."""
        key = precision_key(precision)
        policy = policy_for(key).with_overrides(self.default, self.outputs)
        return dataclasses.replace(policy, name=f"{key}+budget")

    @property
    def policy(self) -> Policy:
        """The policy at the entry's one precision (an entry without one, or with one per target,
        has a policy per precision: :meth:`policy_for`)."""
        if not isinstance(self.precision, str):
            raise ValueError(f"budget entry {self.key!r} has no single precision; use policy_for(precision)")
        return self.policy_for(self.precision)

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "key": self.key,
                "precision": dict(self.precision) if isinstance(self.precision, Mapping) else self.precision,
                "loosened": dict(self.loosened) if self.loosened else None}


@dataclasses.dataclass(frozen=True)
class TargetBudget:
    """Deployment limits for one target in the release in force (``None``: no limit).

    ``min_npu_share`` bounds the share of *nodes* on the NPU (one ArgMax on the CPU in a four-node
    graph is 0.75), ``min_npu_mac_share`` the share of *MACs* (the same model: 0.999)."""

    release: str
    key: str
    max_cpu_fallback_nodes: int | None
    min_npu_share: float | None
    min_npu_mac_share: float | None = None

    def problems(self, cpu_fallback_nodes: int, node_share: float, mac_share: float | None = None) -> list[str]:
        """Why the measured deployment breaks this budget (empty: within budget)."""
        out = []
        where = f"(release {self.release}, entry {self.key!r})"
        if self.max_cpu_fallback_nodes is not None and cpu_fallback_nodes > self.max_cpu_fallback_nodes:
            out.append(f"{cpu_fallback_nodes} CPU-fallback node(s) over max_cpu_fallback_nodes "
                       f"{self.max_cpu_fallback_nodes} {where}")
        if self.min_npu_share is not None and node_share < self.min_npu_share:
            by_macs = f"; by MACs it is {mac_share:.4g}" if mac_share is not None else ""
            out.append(f"NPU share by nodes {node_share:.4g} below min_npu_share {self.min_npu_share:.4g}{by_macs} "
                       f"{where}")
        if self.min_npu_mac_share is not None and (mac_share is None or mac_share < self.min_npu_mac_share):
            measured = "unknown" if mac_share is None else f"{mac_share:.4g}"
            out.append(f"NPU share by MACs {measured} below min_npu_mac_share {self.min_npu_mac_share:.4g} {where}")
        return out

    def measure(self, cpu_fallback_nodes: int, node_share: float, mac_share: float | None) -> dict[str, Any]:
        """The budget, what was measured, the margins and the problems, as report JSON."""
        out: dict[str, Any] = {**self.to_json(), "cpu_fallback_nodes": cpu_fallback_nodes,
                               "npu_share": round(node_share, 6),
                               "npu_mac_share": None if mac_share is None else round(mac_share, 6)}
        if self.max_cpu_fallback_nodes is not None:
            out["fallback_margin"] = self.max_cpu_fallback_nodes - cpu_fallback_nodes
        if self.min_npu_share is not None:
            out["npu_share_margin"] = json_float(round(node_share - self.min_npu_share, 6))
        if self.min_npu_mac_share is not None and mac_share is not None:
            out["npu_mac_share_margin"] = json_float(round(mac_share - self.min_npu_mac_share, 6))
        out["problems"] = self.problems(cpu_fallback_nodes, node_share, mac_share)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"release": self.release, "key": self.key, "max_cpu_fallback_nodes": self.max_cpu_fallback_nodes,
                "min_npu_share": self.min_npu_share, "min_npu_mac_share": self.min_npu_mac_share}


def _precisions(entry: Mapping[str, Any]) -> tuple[str, ...]:
    """The precisions an entry's tolerances apply at: its own, or every one a target may run at."""
    p = entry.get("precision")
    if isinstance(p, str):
        return (precision_key(p),)
    if isinstance(p, Mapping):
        for v in p.values():
            precision_key(v)  # an unknown name is an error
    return _PRECISIONS


def _effective(entry: Mapping[str, Any]) -> dict[str, Policy]:
    """Per precision the entry may apply at: the precision's default policy updated by the entry."""
    out = {}
    for key in _precisions(entry):
        policy = policy_for(key).with_overrides(entry.get("default"), entry.get("outputs"))
        out[key] = dataclasses.replace(policy, name=f"{key}+budget")
    return out


class Budgets:
    """A validated budgets document."""

    def __init__(self, doc: Mapping[str, Any], path: Path | None = None) -> None:
        self.doc = doc
        self.path = path

    @property
    def releases(self) -> list[str]:
        return sorted(self.doc.get("releases", {}), key=parse_version)

    def release_in_force(self, version: str) -> str | None:
        """The newest release not newer than ``version`` (None if every release is newer)."""
        v = parse_version(version)
        best = None
        for rel in self.releases:
            if parse_version(rel) <= v:
                best = rel
        return best

    def _release(self, version: str) -> tuple[str, Mapping[str, Any]] | None:
        rel = self.release_in_force(version)
        return (rel, self.doc["releases"][rel]) if rel is not None else None

    def for_test(self, version: str, test_id: str, model_name: str | None = None) -> TestBudget | None:
        """The test's budget in the release in force: an exact test-id key first, then the
        first pattern (``fnmatch``) in file order matching the test id or the model name."""
        found = self._release(version)
        if found is None:
            return None
        rel, entry = found
        tests = entry.get("tests", {})
        key = test_id if test_id in tests else next(
            (k for k in tests if fnmatch.fnmatchcase(test_id, k)
             or (model_name is not None and fnmatch.fnmatchcase(model_name, k))), None)
        if key is None:
            return None
        entry = tests[key]
        return TestBudget(rel, key, entry.get("precision"), entry.get("default"), entry.get("outputs"),
                          entry.get("loosened"))

    def for_target(self, version: str, target: str) -> TargetBudget | None:
        """The target's limits: exact key first, then a pattern (``rknn@*``)."""
        found = self._release(version)
        if found is None:
            return None
        rel, entry = found
        targets = entry.get("targets", {})
        key = target if target in targets else next(
            (k for k in targets if fnmatch.fnmatchcase(target, k)), None)
        if key is None:
            return None
        t = targets[key]
        return TargetBudget(rel, key, t.get("max_cpu_fallback_nodes"), t.get("min_npu_share"),
                            t.get("min_npu_mac_share"))

    def stale(self, version: str, used_keys: Iterable[str], tests: bool = True, targets: bool = True) -> list[str]:
        """Entries of the release in force that no test used (``tests/<key>``, ``targets/<key>``).

        ``used_keys`` are the ``key`` fields of the :class:`TestBudget`/:class:`TargetBudget`
        values handed out during the run (the glue collects them, across xdist workers);
        ``tests``/``targets`` say which kind the run could have used (test entries need numerics)."""
        found = self._release(version)
        if found is None:
            return []
        rel, entry = found
        used = set(used_keys)
        out = [f"releases/{rel}/tests/{k}" for k in entry.get("tests", {}) if tests and k not in used]
        out += [f"releases/{rel}/targets/{k}" for k in entry.get("targets", {}) if targets and k not in used]
        return out


# --------------------------------------------------------------------------- tightening


def _flatten(entry_kind: str, key: str, entry: Mapping[str, Any]) -> dict[str, Any]:
    """Comparable values of one entry: ``{"<output>.<field>": value}`` for tests (with the
    precision defaults filled in), ``{"<field>": value}`` for targets."""
    if entry_kind == "targets":
        return {f: entry.get(f) for f in _TARGET_DIRECTION}
    policies = _effective(entry)
    out = {}
    for key, policy in policies.items():
        prefix = f"{key}:" if len(policies) > 1 else ""  # an entry without one precision: each it may run at
        out.update({f"{prefix}*.{f}": getattr(policy.default, f) for f in _DIRECTION})
        for name, tol in policy.overrides.items():
            out.update({f"{prefix}{name}.{f}": getattr(tol, f) for f in _DIRECTION})
    return out


def _looser(field: str, old: Any, new: Any, directions: Mapping[str, tuple[int, float]]) -> bool:
    sign, none_value = directions[field]
    o = none_value if old is None else float(old)
    n = none_value if new is None else float(new)
    return (n - o) * sign < 0 if not (math.isinf(o) and math.isinf(n) and o == n) else False


def _show(v: Any) -> str:
    if v is None or isinstance(v, (bool, int)):
        return str(v)
    return str(json_float(v))


def _entry_problems(where: str, kind: str, key: str, old: Mapping[str, Any], new: Mapping[str, Any],
                    approval_is_new: bool) -> list[str]:
    directions = _TARGET_DIRECTION if kind == "targets" else _DIRECTION
    try:
        fo, fn = _flatten(kind, key, old), _flatten(kind, key, new)
    except (ValueError, KeyError) as exc:
        return [f"{where}: cannot compare ({exc})"]
    problems = []
    if kind == "tests" and _precision_spec(old) != _precision_spec(new):
        if approval_is_new:
            return []
        return [f"{where}: precision changed {old.get('precision')!r} -> {new.get('precision')!r}" + _HOW_TO_LOOSEN]
    for k in sorted(set(fo) | set(fn)):
        field = k.split(".")[-1]
        prefix = k.split(":", 1)[0] + ":" if ":" in k else ""
        ov = fo.get(k, fo.get(f"{prefix}*.{field}") if kind == "tests" else None)
        nv = fn.get(k, fn.get(f"{prefix}*.{field}") if kind == "tests" else None)
        if _looser(field, ov, nv, directions):
            problems.append(f"{where}: {k} loosened {_show(ov)} -> {_show(nv)}")
    if problems and approval_is_new:
        return []
    return [p + _HOW_TO_LOOSEN for p in problems]


_HOW_TO_LOOSEN = (' (budgets only tighten; to loosen, add a new "loosened": {"reason": ..., "approved_by": ...} '
                  'record to this entry)')


def _precision_spec(entry: Mapping[str, Any]) -> Any:
    p = entry.get("precision")
    if isinstance(p, str):
        return precision_key(p)
    if isinstance(p, Mapping):
        return tuple(sorted((k, precision_key(v)) for k, v in p.items()))
    return None


def check_tightening(old_doc: Mapping[str, Any] | None, new_doc: Mapping[str, Any]) -> list[str]:
    """Every loosening without a new ``loosened`` record, as human-readable problems.

    * ``old_doc`` vs ``new_doc`` (old = the committed file, None when there is none): an entry of
      a release present in both may not loosen; an entry removed from a kept release counts as a
      loosening (removing a whole release retires it and is allowed).
    * within ``new_doc``: for each release line, each release vs the previous release of the line,
      for the keys both have.
    """
    problems: list[str] = []
    new_rel = new_doc.get("releases", {})
    if old_doc is not None:
        old_rel = old_doc.get("releases", {})
        for rel in sorted(set(old_rel) & set(new_rel), key=parse_version):
            for kind in ("tests", "targets"):
                old_entries = old_rel[rel].get(kind, {})
                new_entries = new_rel[rel].get(kind, {})
                for key, old in old_entries.items():
                    where = f"releases/{rel}/{kind}/{key}"
                    if key not in new_entries:
                        problems.append(f"{where}: entry removed from an existing release (a loosening);"
                                        " keep it, or retire the whole release")
                        continue
                    new = new_entries[key]
                    approval_new = bool(new.get("loosened")) and new.get("loosened") != old.get("loosened")
                    problems += _entry_problems(where, kind, key, old, new, approval_new)
    by_line: dict[tuple[int, ...], list[str]] = {}
    for rel in sorted(new_rel, key=parse_version):
        by_line.setdefault(_line(rel), []).append(rel)
    for rels in by_line.values():
        for prev, cur in zip(rels, rels[1:]):
            for kind in ("tests", "targets"):
                prev_entries = new_rel[prev].get(kind, {})
                for key, new in new_rel[cur].get(kind, {}).items():
                    if key not in prev_entries:
                        continue
                    where = f"releases/{cur}/{kind}/{key} (vs {prev})"
                    old = prev_entries[key]
                    approval_new = bool(new.get("loosened")) and new.get("loosened") != old.get("loosened")
                    problems += _entry_problems(where, kind, key, old, new, approval_new)
    return problems


# --------------------------------------------------------------------------- report


def margins(output: OutputComparison) -> dict[str, float | str | None]:
    """Room left per check: ``allowed - measured`` for "<=" bounds, ``measured - allowed`` for
    ">=" bounds; negative means over budget by that much."""
    out: dict[str, float | str | None] = {}
    for c in output.checks:
        if c.measured is None or c.allowed is None:
            out[c.metric] = None
            continue
        m = (c.allowed - c.measured) if c.op == "<=" else (c.measured - c.allowed)
        out[c.metric] = json_float(m)
    return out


def report_entry(test_id: str, comparison: Comparison, budget: TestBudget | None,
                 target: TargetBudget | None = None, cpu_fallback_nodes: int | None = None,
                 npu_share: float | None = None) -> dict[str, Any]:
    """The per-test JSON for the report: metrics, the budget applied and the margin left per
    output, plus the target limits when given. JSON-safe (no NaN/Infinity literals)."""
    entry: dict[str, Any] = {
        "test_id": test_id,
        "passed": comparison.passed,
        "budget": budget.to_json() if budget else None,
        "policy": comparison.policy,
        "outputs": [
            {"name": o.name, "passed": o.passed,
             "metrics": o.metrics.to_json() if o.metrics else None,
             "applied": o.tolerance.to_json(), "margin": margins(o),
             "reasons": list(o.reasons)}
            for o in comparison.outputs
        ],
        "missing": list(comparison.missing),
        "extra": list(comparison.extra),
    }
    if target is not None:
        t: dict[str, Any] = target.to_json()
        if cpu_fallback_nodes is not None and target.max_cpu_fallback_nodes is not None:
            t["cpu_fallback_nodes"] = cpu_fallback_nodes
            t["fallback_margin"] = target.max_cpu_fallback_nodes - cpu_fallback_nodes
        if npu_share is not None and target.min_npu_share is not None:
            t["npu_share"] = json_float(npu_share)
            t["npu_share_margin"] = json_float(npu_share - target.min_npu_share)
        if cpu_fallback_nodes is not None and npu_share is not None:
            t["problems"] = target.problems(cpu_fallback_nodes, npu_share, None)
        entry["target"] = t
    return entry
