"""A Softmax off the last axis of a scaled input (issue 22). Ids start with ``q.``.

GroupViT's group assignment (``hf_groupvit``, both exporters) computes q @ k^T (1, 64, 4), multiplies it
by a rank-0 scale and takes the Softmax over the queries (axis -2); onnxruntime-qnn then fails to finalize
the QNN graph (QNN_COMMON_ERROR_MEM_ALLOC) and no session is created. Cut down by bisecting the model's
nodes (the failing prefix ends at that Softmax, the failing suffix starts at the assignment's projections).
``scaled_softmax_extra`` varies what decides it: the Softmax axis (last or not) and rank, the scale's
shape (rank 0, (1,), (1, 1, 1), per channel), its operand position, Div instead of Mul, no scale, a Mul
another node also reads, and the MatMul in front.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Any, Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: label -> (input shape, Softmax axis, options)
FORMS: dict[str, tuple[tuple[int, ...], int, dict[str, Any]]] = {
    "mul.ax=m2": ((1, 64, 4), -2, {}),  # GroupViT's assignment
    "mul.ax=1": ((1, 64, 4), 1, {}),
    "mul.ax=m1": ((1, 64, 4), -1, {}),
    "mul.ax=0.rank2": ((64, 4), 0, {}),
    "mul.ax=1.rank4": ((1, 2, 64, 4), 1, {}),
    "mul.ax=m2.rank4": ((1, 2, 64, 4), -2, {}),
    "mul.ax=m2.unit_axis": ((1, 1, 4), -2, {}),
    "mul.ax=m2.scale_first": ((1, 64, 4), -2, {"scale_first": True}),
    "mul.ax=m2.scale=1": ((1, 64, 4), -2, {"scale_shape": (1,)}),
    "mul.ax=m2.scale=1x1x1": ((1, 64, 4), -2, {"scale_shape": (1, 1, 1)}),
    "mul.ax=m2.scale=channel": ((1, 64, 4), -2, {"scale_shape": (4,)}),
    "mul.ax=m2.fanout": ((1, 64, 4), -2, {"fanout": True}),
    "mul.ax=m2.matmul": ((1, 64, 32), -2, {"matmul": True}),
    "div.ax=m2": ((1, 64, 4), -2, {"op": "Div"}),
    "none.ax=m2": ((1, 64, 4), -2, {"op": None}),
}


def _form(label: str) -> GraphBuilder:
    shape, axis, o = FORMS[label]
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", list(shape))
    if o.get("matmul"):  # q (1, 64, 32) @ k^T (32, 4), as in GroupViT
        x = gb.node("MatMul", [x, gb.weight([shape[-1], 4])], name="pre_matmul")
    op = o.get("op", "Mul")
    y = x
    if op:
        import numpy as np

        s = gb.const(np.full(o.get("scale_shape", ()), 0.17, np.float32), name="scale")
        y = gb.node(op, [s, x] if o.get("scale_first") else [x, s], name="pre_scale")
    out = gb.node("Softmax", [y], name="focus_softmax", axis=axis)
    gb.output(out)
    if o.get("fanout"):
        gb.output(gb.node("Relu", [y], name="side_relu"))
    return gb


def scaled_softmax_extra(c: Collector) -> None:
    """Softmaxes of a scaled input along the last axis or another, and their controls (FORMS)."""
    for label in FORMS:
        c.add("q.Softmax.ctx=scaled.%s.f32.r%d" % (label, len(FORMS[label][0])), "Softmax", _form(label),
              kind="context", focus=["focus_softmax"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [scaled_softmax_extra]
