"""Structured results of a check. Every report is rendered from these."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Mapping, Optional

from .graph import SourceLocation, paused_gc

VERDICTS = ("npu", "cpu", "unsupported", "folded")
SEVERITY = {"npu": 0, "folded": 0, "cpu": 1, "unsupported": 2}
_FALLBACK = frozenset(("cpu", "unsupported"))  # the verdicts of a node that falls back
_VERDICT = attrgetter("verdict")


# What a reason's rule rests on: run on the real toolchain (a probe model compiled or placed by it),
# read in the vendor's documentation, or inferred (ONNX semantics, the checker's own analysis, a
# table's default for an op it does not list).
BASES = ("probed", "documented", "inferred")


def source_basis(source: Optional[str]) -> str:
    """The basis of a table source key: ``probe:...`` probed, ``doc:...`` documented, else inferred."""
    if source:
        if source.startswith("probe:"):
            return "probed"
        if source.startswith("doc:"):
            return "documented"
    return "inferred"


def basis_label(basis: str) -> str:
    """How reports tag a reason: ``[probed]``, ``[documented]``, ``[inferred]``."""
    return f"[{basis}]"


def reason_text(reason: Mapping[str, Any]) -> str:
    """A reason of the JSON report as the reports print it: its message, tagged with its basis."""
    basis = reason.get("basis")
    return f"{reason['message']} {basis_label(basis)}" if basis else str(reason["message"])


DOCUMENTATION_ONLY = "documentation only"


def documentation_only(table: Mapping[str, Any]) -> bool:
    """Whether a target's table (its JSON header) was never run on the real toolchain (CANN, SNPE):
    every verdict is the vendor's documentation, unchecked; reports say so beside the target."""
    return table.get("provenance") == "documented"


@dataclass(frozen=True)
class Reason:
    """Why a node gets a verdict: the rule, its message and the verdict it alone leads to."""

    rule: str
    message: str
    verdict: str  # the verdict this reason alone leads to
    category: str = "op"
    basis: str = "inferred"  # BASES: what the rule rests on
    source: Optional[str] = None  # the table's source key (provenance.sources) it comes from

    def to_json(self) -> dict[str, Any]:
        return {"rule": self.rule, "message": self.message, "verdict": self.verdict, "category": self.category,
                "basis": self.basis, "source": self.source}


@dataclass(frozen=True, slots=True)
class NodeResult:
    """One node's verdict on one target, with its reasons and where the node comes from."""

    index: int
    name: str
    op_type: str
    domain: str
    verdict: str
    reasons: tuple[Reason, ...] = ()
    graph: str = ""
    source: Optional[SourceLocation] = None
    fused_into: Optional[str] = None

    @property
    def falls_back(self) -> bool:
        return self.verdict in _FALLBACK

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name, "op_type": self.op_type, "domain": self.domain, "verdict": self.verdict,
            "reasons": [{"rule": r.rule, "message": r.message, "verdict": r.verdict, "category": r.category,
                         "basis": r.basis, "source": r.source}
                        for r in self.reasons] if self.reasons else [],  # Reason.to_json, inlined (9,000 nodes)
        }
        if self.graph:
            out["graph"] = self.graph
        if self.fused_into:
            out["fused_into"] = self.fused_into
        source = self.source
        out["source"] = dict(source._json) if source else None  # SourceLocation.to_json, inlined
        return out


class NodeResultDraft:
    """A NodeResult being filled: the same slots, without the frozen ``__setattr__``. The matcher
    makes one per node of every table (26,394 for issue 29's encoder): it sets the fields as plain
    slot stores and then turns the draft into a NodeResult (``draft.__class__ = NodeResult``, allowed
    as both classes lay out the same slots). Built so, a result costs ~0.3 us, against ~0.7 us for an
    object.__new__ and a ``__dict__`` filled (the dict alone is half of that) and more for the
    generated __init__, which sets each field through object.__setattr__."""

    __slots__ = NodeResult.__slots__  # type: ignore[attr-defined]


@dataclass(frozen=True)
class TargetResult:
    """A model checked against one target: every node's verdict, the model's issues, the partition."""

    target: str
    table: Mapping[str, str]
    model: Mapping[str, Any]
    nodes: tuple[NodeResult, ...]
    model_issues: tuple[Reason, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    partition: Optional[Any] = None  # partition.Partition: subgraphs, transitions, MACs, fallback impact
    fixes: Optional[Any] = None  # fixes.FixPlan: suggestions, verified by re-checking a rewritten graph

    @property
    def summary(self) -> dict[str, int]:
        counts = dict.fromkeys(VERDICTS, 0)
        for verdict, count in Counter(map(_VERDICT, self.nodes)).items():  # counted in C (26,394 nodes: ~1 ms)
            if verdict not in counts:
                raise KeyError(verdict)
            counts[verdict] = count
        return counts

    def _passed_verdict(self, counts: Mapping[str, int]) -> tuple[bool, str]:
        """``passed`` and ``verdict`` from the ``summary`` counts (one pass over the nodes, not three)."""
        issues = bool(self.model_issues)
        verdict = "unsupported" if issues or counts["unsupported"] else "cpu" if counts["cpu"] else "npu"
        return not issues and not counts["cpu"] and not counts["unsupported"], verdict

    @property
    def passed(self) -> bool:
        # NodeResult.falls_back of every node, the verdicts gathered in C rather than a property call a node
        return not self.model_issues and not _FALLBACK.intersection(map(_VERDICT, self.nodes))

    @property
    def verdict(self) -> str:
        verdicts = set(map(_VERDICT, self.nodes))
        if self.model_issues or "unsupported" in verdicts:
            return "unsupported"
        if "cpu" in verdicts:
            return "cpu"
        return "npu"

    @property
    def fallbacks(self) -> list[NodeResult]:
        return [n for n in self.nodes if n.falls_back]

    def to_json(self, nodes_text: bool = False) -> dict[str, Any]:
        """The result as plain data. ``nodes_text``: "nodes" is a ``jsonio.EncodedList`` of each node's
        entry as its JSON text, for a caller that only writes the document with ``jsonio.dumps`` (the
        same text, made once per distinct op, verdict and reasons and once per source location)."""
        with paused_gc():  # one dict per node, all acyclic: collections during the build only rescan them
            return self._to_json(nodes_text)

    def _to_json(self, nodes_text: bool = False) -> dict[str, Any]:
        summary = self.summary
        passed, verdict = self._passed_verdict(summary)
        return {
            "target": self.target,
            "table": dict(self.table),
            "model": dict(self.model),
            "passed": passed,
            "verdict": verdict,
            "summary": summary,
            "model_issues": [r.to_json() for r in self.model_issues],
            "notes": list(self.notes),
            "partition": self.partition.to_json() if self.partition is not None else None,
            "fixes": self.fixes.to_json() if self.fixes is not None else None,
            "nodes": _nodes_text(self.nodes) if nodes_text else [n.to_json() for n in self.nodes],
        }


def _nodes_text(nodes: tuple[NodeResult, ...]) -> Any:
    """``jsonio.EncodedList`` of ``jsonio.compact(n.to_json())`` for every node, made without a dict or
    an encoding per node: against RKNN, the 26,394 nodes of issue 29's encoder have 24 distinct entries
    but for their names and sources, and 1,800 source locations. The text between the name and the source is made once per op,
    domain, verdict, reasons, body and fused op; the source's once per location."""
    from . import jsonio

    if jsonio._C_ENCODE is None:  # pragma: no cover - CPython always has the C encoder
        return jsonio.EncodedList(jsonio.compact(n.to_json()) for n in nodes)
    from json.encoder import encode_basestring  # what the C encoder writes a string with (ensure_ascii off)

    middles: dict[tuple[Any, ...], str] = {}
    by_value: dict[tuple[Any, ...], str] = {}
    sources: dict[int, str] = {}
    out = jsonio.EncodedList()
    append = out.texts.append
    for n in nodes:
        # the reasons by identity: the matcher shares one tuple between the nodes it judged alike, and
        # hashing a tuple of Reasons calls a Python __hash__ per reason (~3 ms for 14,700 folded nodes);
        # a tuple seen for the first time is looked up by value, so equal tuples still share one text
        reasons = n.reasons
        key = (n.op_type, n.domain, n.verdict, id(reasons), n.graph, n.fused_into)
        middle = middles.get(key)
        if middle is None:
            value = (n.op_type, n.domain, n.verdict, reasons, n.graph, n.fused_into)
            middle = by_value.get(value)
            if middle is None:
                entry = n.to_json()
                del entry["name"], entry["source"]
                middle = by_value[value] = jsonio.compact(entry)[1:-1]  # without its braces
            middles[key] = middle
        source = n.source
        text = sources.get(id(source))
        if text is None:
            text = sources[id(source)] = jsonio.compact(source._json) if source else "null"
        append(f'{{"name": {encode_basestring(n.name)}, {middle}, "source": {text}}}')  # one string built, not four
    return out
