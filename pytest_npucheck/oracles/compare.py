"""Static verdicts vs a real toolchain's placement, node by node.

A disagreement is a table bug: the static check said NPU where the compiler put the node on the
CPU (a missed fallback, the worst kind), or the other way round (a false alarm).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..result import TargetResult

# what each static verdict predicts the toolchain does with the node
_PREDICTS = {"npu": "npu", "folded": "npu", "cpu": "cpu", "unsupported": "unsupported"}


@dataclass(frozen=True)
class Disagreement:
    node: str
    op_type: str
    static: str
    real: str
    reasons: tuple[str, ...] = ()

    @property
    def kind(self) -> str:
        if self.real in ("cpu", "unsupported") and self.static in ("npu", "folded"):
            return "missed_fallback"
        if self.static in ("cpu", "unsupported") and self.real == "npu":
            return "false_alarm"
        return "wrong_kind"

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "static": self.static, "real": self.real,
                "kind": self.kind, "reasons": list(self.reasons)}


@dataclass
class Agreement:
    target: str
    nodes: int = 0
    agree: int = 0
    model_status_static: str = ""
    model_status_real: str = ""
    disagreements: list[Disagreement] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.agree / self.nodes if self.nodes else 1.0

    @property
    def missed_fallbacks(self) -> list[Disagreement]:
        return [d for d in self.disagreements if d.kind == "missed_fallback"]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "nodes": self.nodes, "agree": self.agree, "rate": round(self.rate, 6),
                "model_status_static": self.model_status_static, "model_status_real": self.model_status_real,
                "disagreements": [d.to_json() for d in self.disagreements]}


def compare(result: TargetResult, placement: Mapping[str, str], build_ok: bool) -> Agreement:
    """Compare one static result with the real per-node placement (``npu``/``cpu``).

    When the real build failed, every node counts as ``unsupported`` on the real side; the static
    side agrees on a node only if it also predicted that the model is rejected.
    """
    agreement = Agreement(target=result.target)
    agreement.model_status_static = "rejected" if result.verdict == "unsupported" else "compiles"
    agreement.model_status_real = "compiles" if build_ok else "rejected"
    rejected_static = result.verdict == "unsupported"
    for node in result.nodes:
        if node.graph:  # RKNN/QNN report top-level nodes only
            continue
        real = placement.get(node.name, "npu" if build_ok else "unsupported")
        if not build_ok:
            real = "unsupported"
        predicted = _PREDICTS[node.verdict]
        if rejected_static and not build_ok:
            ok = True  # both say the compiler rejects the model
        elif predicted == "unsupported" and build_ok:
            ok = False
        else:
            ok = predicted == real
        agreement.nodes += 1
        if ok:
            agreement.agree += 1
        else:
            agreement.disagreements.append(Disagreement(node.name, node.op_type, node.verdict, real,
                                                        tuple(r.message for r in node.reasons)))
    return agreement
