"""Revisions and errata of the generated tables (issue 22's table policy).

A table that shipped is never edited in place: a correction of its facts bumps a top-level integer
``revision`` (a table without the key is revision 1) and appends to a top-level ``errata`` list one
record per correction: ``{"revision", "ops", "change", "evidence"}``. The table builders
(:mod:`.rknn_table`, :mod:`.qnn_table`) keep the records of every target in their ``ERRATA`` dict and
stamp them on the table they build, so ``--write-table`` writes them and ``--check-table`` compares
against them like every other field.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["erratum", "stamp"]


def erratum(revision: int, ops: Sequence[str], change: str, evidence: str) -> dict[str, Any]:
    """One correction record (op keys as ``domain:op``, e.g. ``ai.onnx:GatherND``)."""
    if revision < 2:
        raise ValueError("an erratum belongs to revision 2 or later, not %d" % revision)
    bad = [op for op in ops if ":" not in op]
    if not ops or bad:
        raise ValueError("erratum ops must be domain:op keys, got %r" % (list(ops),))
    return {"revision": revision, "ops": list(ops), "change": change, "evidence": evidence}


def stamp(table: dict[str, Any], records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Put ``revision`` (the newest erratum's, at least 2) and ``errata`` on ``table`` right after
    its ``soc`` key; a table without records is left as revision 1 (no keys). Every op key an
    erratum names must be an entry of the table or of its patterns (``pattern:<name>``)."""
    if not records:
        return table
    known = set(table.get("ops", {})) | {"pattern:" + p["name"] for p in table.get("patterns", [])}
    for rec in records:
        missing = [op for op in rec["ops"] if op not in known]
        if missing:
            raise ValueError("erratum of revision %d names %s, which the %s %s/%s table lacks"
                             % (rec["revision"], missing, table.get("toolchain"), table.get("version"),
                                table.get("soc")))
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in ("revision", "errata"):
            continue
        out[key] = value
        if key == "soc":
            out["revision"] = max(int(r["revision"]) for r in records)
            out["errata"] = [dict(r) for r in records]
    return out
