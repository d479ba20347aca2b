"""What changed between two support tables, as a user upgrading the SDK (or moving to another
SoC) wants to see it.

:func:`diff_tables` compares two loaded tables and returns a :class:`TableDiff`: a flat list of
:class:`Change` items, each in one of three groups a reader cares about:

* ``newly_supported``: an op whose verdict became NPU (an entry added, or its status changed from
  CPU/rejected, including an op that used to fall to the table's default verdict); a fused
  pattern added;
* ``no_longer_supported``: the reverse (NPU before, not now); a fused pattern removed;
* ``changed``: everything else a model can feel: constraints tightened, loosened or changed
  (in words, with the same rule descriptions the supported-ops pages print), opset ranges,
  dtype constraints, other status changes (CPU <-> rejected), patterns changed, pre-passes,
  the accepted opsets of the table, the default verdict and the precision.

Sources, notes and the probe lists behind an entry are provenance, not behaviour, and are not
compared. The renderers give text, JSON and Markdown of the same result.

Between two revisions of one table (the same toolchain, version and SoC: a released table is never
edited in place, a correction is a new revision), the diff also lists the errata the newer one
records for the revisions in between: what each correction changed and the evidence for it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..tables import Constraint, OpEntry, Pattern, Table

GROUPS = ("newly_supported", "no_longer_supported", "changed")
GROUP_TITLES = {"newly_supported": "Newly supported", "no_longer_supported": "No longer supported",
                "changed": "Changed constraints"}
_STATUS = {"npu": "NPU", "cpu": "CPU only", "unsupported": "rejected", "folded": "folded"}

#: params that say *what* a constraint is about; the others say what it allows
_IDENTITY_PARAMS = ("tensor", "index", "axis", "tensors", "attr", "input", "axes")


@dataclass(frozen=True)
class Change:
    """One difference between the two tables."""

    group: str      # one of GROUPS
    kind: str       # op_added, op_removed, status, opset, constraint_added, ... (see module doc)
    subject: str    # "ai.onnx:Pad", "pattern gelu_erf", "every node", "table"
    text: str       # the change in words
    before: Any = None
    after: Any = None

    def to_json(self) -> dict[str, Any]:
        return {"group": self.group, "kind": self.kind, "subject": self.subject, "text": self.text,
                "before": self.before, "after": self.after}


@dataclass
class TableDiff:
    old: str
    new: str
    old_package: Optional[str]
    new_package: Optional[str]
    changes: list[Change] = field(default_factory=list)
    old_revision: int = 1
    new_revision: int = 1
    errata: list[Mapping[str, Any]] = field(default_factory=list)  # corrections between the two revisions

    @property
    def empty(self) -> bool:
        return not self.changes and not self.errata

    def group(self, name: str) -> list[Change]:
        return [c for c in self.changes if c.group == name]

    def to_json(self) -> dict[str, Any]:
        counts = {g: len(self.group(g)) for g in GROUPS}
        return {"old": {"target": self.old, "revision": self.old_revision, "toolchain_package": self.old_package},
                "new": {"target": self.new, "revision": self.new_revision, "toolchain_package": self.new_package},
                "counts": counts, "changes": [c.to_json() for c in self.changes],
                "errata": [dict(e) for e in self.errata]}


# -- describing -------------------------------------------------------------------------------

def _describe(c: Constraint) -> str:
    from .docs import describe

    return describe(c)


def _op_name(key: str) -> str:
    return key.split(":", 1)[1] if key.startswith("ai.onnx:") else key


def _opset(rng: Optional[Sequence[int]]) -> str:
    return f"{rng[0]}-{rng[1]}" if rng else "any"


def _pattern_words(p: Pattern) -> str:
    ops = " -> ".join(op.split(":", 1)[1] for _, op, _ in p.nodes)
    return f"{ops} fused into {p.fused_op} ({_STATUS.get(p.status, p.status)})"


def _verdict(entry: Optional[OpEntry], table: Table) -> str:
    return entry.status if entry is not None else table.default_verdict


# -- constraints ------------------------------------------------------------------------------

def _identity(c: Constraint) -> tuple[Any, ...]:
    ident = {k: c.params[k] for k in _IDENTITY_PARAMS if k in c.params}
    return (c.rule, json.dumps(ident, sort_keys=True), tuple(sorted(c.only_ops or ())),
            tuple(sorted(c.except_ops)))


def _same(a: Constraint, b: Constraint) -> bool:
    return (a.rule == b.rule and dict(a.params) == dict(b.params) and a.on_fail == b.on_fail
            and a.only_ops == b.only_ops and a.except_ops == b.except_ops)


def _as_set(v: Any) -> set[str]:
    return {json.dumps(x, sort_keys=True) for x in (v or [])}


def _range_dir(a: Mapping[str, Any], b: Mapping[str, Any]) -> Optional[int]:
    """+1 when b's [min, max] contains a's, -1 when a's contains b's, 0 same, None otherwise."""
    inf = float("inf")
    alo, ahi = a.get("min", -inf), a.get("max", inf)
    blo, bhi = b.get("min", -inf), b.get("max", inf)
    alo, blo = (-inf if x is None else x for x in (alo, blo))
    ahi, bhi = (inf if x is None else x for x in (ahi, bhi))
    if (alo, ahi) == (blo, bhi):
        return 0
    if blo <= alo and bhi >= ahi:
        return 1
    if blo >= alo and bhi <= ahi:
        return -1
    return None


def _direction(a: Constraint, b: Constraint) -> str:
    """``loosened``, ``tightened`` or ``changed`` for two constraints on the same thing."""
    if a.on_fail != b.on_fail:
        return "changed"
    pa, pb = dict(a.params), dict(b.params)
    value_keys = sorted((set(pa) | set(pb)) - set(_IDENTITY_PARAMS))
    votes: set[int] = set()
    for k in value_keys:
        va, vb = pa.get(k), pb.get(k)
        if va == vb:
            continue
        if k in ("allowed", "values", "attrs"):
            sa, sb = _as_set(va), _as_set(vb)
            if sa == sb:
                continue
            grows = 1 if sb >= sa else -1 if sb <= sa else None
            if grows is None:
                return "changed"
            # more allowed values loosen; more forbidden values / attributes to keep tighten
            tighter_when_grows = k == "attrs" or a.rule == "attr_not_in"
            votes.add(-grows if tighter_when_grows else grows)
        elif k in ("min", "max"):
            continue  # judged together below
        else:
            return "changed"
    if any(k in value_keys for k in ("min", "max")):
        d = _range_dir(pa, pb)
        if d is None:
            return "changed"
        if d:
            votes.add(d)
    if votes == {1}:
        return "loosened"
    if votes == {-1}:
        return "tightened"
    return "changed"


def _constraint_changes(subject: str, old: Sequence[Constraint], new: Sequence[Constraint],
                        label: str) -> list[Change]:
    """Constraint changes of one op (or of the every-node constraints), paired by what they
    constrain (rule, tensor/attribute/axis, scope)."""
    rest_new = list(new)
    pairs: list[tuple[Constraint, Optional[Constraint]]] = []
    unmatched_old: list[Constraint] = []
    for c in old:
        exact = next((n for n in rest_new if _same(c, n)), None)
        if exact is not None:
            rest_new.remove(exact)
            continue
        unmatched_old.append(c)
    for c in unmatched_old:
        twin = next((n for n in rest_new if _identity(n) == _identity(c)), None)
        if twin is not None:
            rest_new.remove(twin)
        pairs.append((c, twin))
    out = []
    for c, twin in pairs:
        kind_prefix = "dtype" if c.rule == "dtype" else "constraint"
        if twin is None:
            out.append(Change("changed", f"{kind_prefix}_removed", subject,
                              f"{label}: constraint removed (loosened): {_describe(c)}",
                              before=_describe(c)))
        else:
            d = _direction(c, twin)
            out.append(Change("changed", f"{kind_prefix}_{d}", subject,
                              f"{label}: constraint {d}: was \"{_describe(c)}\", now \"{_describe(twin)}\"",
                              before=_describe(c), after=_describe(twin)))
    for n in rest_new:
        kind_prefix = "dtype" if n.rule == "dtype" else "constraint"
        out.append(Change("changed", f"{kind_prefix}_added", subject,
                          f"{label}: new constraint (tightened): {_describe(n)}", after=_describe(n)))
    return out


# -- the diff ---------------------------------------------------------------------------------

def errata_between(old: Table, new: Table) -> list[Mapping[str, Any]]:
    """The errata of the revisions after the older of two revisions of one table, up to the newer
    (oldest first); none for two different tables (an SDK upgrade or another SoC)."""
    if (old.toolchain, old.version, old.soc) != (new.toolchain, new.version, new.soc):
        return []
    low, high = sorted((old.revision, new.revision))
    later = new if new.revision >= old.revision else old
    return sorted((e for e in later.errata if low < e["revision"] <= high), key=lambda e: e["revision"])


def erratum_text(e: Mapping[str, Any]) -> str:
    return f"revision {e['revision']} ({', '.join(e['ops'])}): {e['change']} (evidence: {e['evidence']})"


def diff_tables(old: Table, new: Table) -> TableDiff:
    """Every behavioural difference from ``old`` to ``new`` (see the module docstring)."""
    d = TableDiff(old.target, new.target, old.provenance.get("toolchain_package"),
                  new.provenance.get("toolchain_package"), old_revision=old.revision, new_revision=new.revision)
    d.errata.extend(errata_between(old, new))
    ch = d.changes

    # table-wide facts
    for dom in sorted(set(old.opsets) | set(new.opsets)):
        a, b = old.opsets.get(dom), new.opsets.get(dom)
        if a != b:
            ch.append(Change("changed", "table_opsets", "table",
                             f"accepted {dom} opsets: {_opset(a) if a else 'none'} -> {_opset(b) if b else 'none'}",
                             before=list(a) if a else None, after=list(b) if b else None))
    if old.default_verdict != new.default_verdict:
        ch.append(Change("changed", "default_verdict", "table",
                         f"ops without an entry: {_STATUS[old.default_verdict]} -> {_STATUS[new.default_verdict]}",
                         before=old.default_verdict, after=new.default_verdict))
    pa, pb = dict(old.precision), dict(new.precision)
    if pa != pb:
        ch.append(Change("changed", "precision", "table",
                         f"precision: default {pa.get('default', '?')} (supported {', '.join(pa.get('supported', [])) or '?'}) "
                         f"-> default {pb.get('default', '?')} (supported {', '.join(pb.get('supported', [])) or '?'})",
                         before=pa, after=pb))
    for name in new.prepasses:
        if name not in old.prepasses:
            ch.append(Change("changed", "prepass_added", "table", f"pre-pass added: {name}", after=name))
    for name in old.prepasses:
        if name not in new.prepasses:
            ch.append(Change("changed", "prepass_removed", "table", f"pre-pass removed: {name}", before=name))
    ch.extend(_constraint_changes("every node", old.generic_constraints, new.generic_constraints,
                                  "every node"))

    # fused patterns, by name
    old_p = {p.name: p for p in old.patterns}
    new_p = {p.name: p for p in new.patterns}
    for name in sorted(set(old_p) | set(new_p)):
        a, b = old_p.get(name), new_p.get(name)
        if a is None:
            grp = "newly_supported" if b.status == "npu" else "changed"  # type: ignore[union-attr]
            ch.append(Change(grp, "pattern_added", f"pattern {name}",
                             f"pattern {name} added: {_pattern_words(b)}", after=_pattern_words(b)))  # type: ignore[arg-type]
        elif b is None:
            grp = "no_longer_supported" if a.status == "npu" else "changed"
            ch.append(Change(grp, "pattern_removed", f"pattern {name}",
                             f"pattern {name} removed (was: {_pattern_words(a)})", before=_pattern_words(a)))
        elif (a.nodes, a.positions, a.fused_op, a.status) != (b.nodes, b.positions, b.fused_op, b.status):
            grp = ("newly_supported" if b.status == "npu" and a.status != "npu" else
                   "no_longer_supported" if a.status == "npu" and b.status != "npu" else "changed")
            ch.append(Change(grp, "pattern_changed", f"pattern {name}",
                             f"pattern {name} changed: {_pattern_words(a)} -> {_pattern_words(b)}",
                             before=_pattern_words(a), after=_pattern_words(b)))

    # ops
    for key in sorted(set(old.ops) | set(new.ops), key=lambda k: (k.split(":")[0] != "ai.onnx", k)):
        a, b = old.ops.get(key), new.ops.get(key)
        va, vb = _verdict(a, old), _verdict(b, new)
        name = _op_name(key)
        if va != vb:
            grp = ("newly_supported" if vb == "npu" else "no_longer_supported" if va == "npu" else "changed")
            how = ("entry added" if a is None else "entry removed" if b is None else "status changed")
            kind = "op_added" if a is None else "op_removed" if b is None else "status"
            text = f"{name}: {_STATUS[va]} -> {_STATUS[vb]} ({how}"
            if b is not None:
                if a is None or a.opset != b.opset:
                    text += f", opsets {_opset(b.opset)}"
                if b.constraints and b.status == "npu":
                    text += "; " + " ".join(_describe(c) for c in b.constraints)
            text += ")"
            ch.append(Change(grp, kind, key, text, before=va, after=vb))
            continue  # with the verdict changed, its constraints are said above
        elif (a is None) != (b is None):
            # an entry appeared or went away without changing the verdict
            kind = "op_added" if a is None else "op_removed"
            ch.append(Change("changed", kind, key,
                             f"{name}: entry {'added' if a is None else 'removed'}, still {_STATUS[vb]}"
                             + (" (now the table's default verdict)" if b is None else ""),
                             before=va, after=vb))
        if a is None or b is None:
            continue
        if a.opset != b.opset:
            ch.append(Change("changed", "opset", key, f"{name}: opsets {_opset(a.opset)} -> {_opset(b.opset)}",
                             before=list(a.opset) if a.opset else None, after=list(b.opset) if b.opset else None))
        ch.extend(_constraint_changes(key, a.constraints, b.constraints, name))
    return d


# -- rendering --------------------------------------------------------------------------------

def _header(d: TableDiff) -> str:
    pkgs = ""
    if d.old_package or d.new_package:
        pkgs = f" ({d.old_package or '?'} -> {d.new_package or '?'})"
    return f"{d.old} revision {d.old_revision} -> {d.new} revision {d.new_revision}{pkgs}"


#: an opset bound moved the same way for at least this many ops: one line for all of them
COLLAPSE_AT = 3


def _shift(c: Change) -> Optional[tuple[str, int, int]]:
    """("max"|"min", old, new) when an op's opset change moves one bound only."""
    a, b = c.before, c.after
    if c.kind != "opset" or not a or not b:
        return None
    if a[0] == b[0] and a[1] != b[1]:
        return ("max", a[1], b[1])
    if a[1] == b[1] and a[0] != b[0]:
        return ("min", a[0], b[0])
    return None


def _texts(items: Sequence[Change]) -> list[str]:
    """The changes in words; opset bounds that moved alike for many ops are said once, with the
    ops named (the JSON keeps one change per op)."""
    shifts: dict[tuple[str, int, int], list[Change]] = {}
    for c in items:
        key = _shift(c)
        if key:
            shifts.setdefault(key, []).append(c)
    out: list[str] = []
    said: set[tuple[str, int, int]] = set()
    for c in items:
        key = _shift(c)
        if key is None or len(shifts[key]) < COLLAPSE_AT:
            out.append(c.text)
        elif key not in said:
            said.add(key)
            names = ", ".join(_op_name(x.subject) for x in shifts[key])
            out.append(f"{key[0]} opset {key[1]} -> {key[2]} for {len(shifts[key])} ops: {names}")
    return out


def render_text(d: TableDiff) -> str:
    lines = [_header(d)]
    if d.empty:
        lines.append("no differences")
        return "\n".join(lines) + "\n"
    for g in GROUPS:
        items = d.group(g)
        if not items:
            continue
        lines += ["", f"{GROUP_TITLES[g]} ({len(items)}):"]
        lines += [f"  - {t}" for t in _texts(items)]
    if d.errata:
        lines += ["", f"Errata ({len(d.errata)}):"]
        lines += [f"  - {erratum_text(e)}" for e in d.errata]
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_md(d: TableDiff) -> str:
    lines = [f"# Support table changes: {_md(_header(d))}", ""]
    if d.empty:
        return "\n".join(lines + ["No differences.", ""])
    for g in GROUPS:
        items = d.group(g)
        if not items:
            continue
        lines += [f"## {GROUP_TITLES[g]} ({len(items)})", ""]
        lines += [f"- {_md(t)}" for t in _texts(items)]
        lines.append("")
    if d.errata:
        lines += [f"## Errata ({len(d.errata)})", ""]
        lines += [f"- {_md(erratum_text(e))}" for e in d.errata]
        lines.append("")
    return "\n".join(lines)


def render_json(d: TableDiff) -> str:
    from ..jsonio import dumps

    return dumps(d.to_json())


RENDERERS = {"text": render_text, "json": render_json, "md": render_md}
