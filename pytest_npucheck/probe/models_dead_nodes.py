"""Nodes whose only readers fold away (issue 22). Ids start with ``q.``.

LED pads its int64 input ids to the attention window and reads only the padded tensor's shape:
onnxruntime folds the Shape of the statically shaped result, and the Pad, read by nothing any more,
never reaches an execution provider ("constant-folded" in the placement), although an int64 Pad
that is read runs on the CPU (q.Pad.ctx=dtype.int64). ``dead_nodes_extra`` places an int64 and a
float Pad, and a float Sigmoid, read only by a Shape, and the same Pad read by a Shape and a Relu.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder


def _dead(op: str, dtype: str, also_read: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    ids = gb.input("ids", dtype, [1, 16])
    x = gb.input("x", "float32", [1, 32])
    if op == "Pad":
        zero = np.int64(0) if dtype == "int64" else np.float32(0.0)
        y = gb.node("Pad", [ids, gb.ints([0, 0, 0, 16]), gb.const(zero)], mode="constant", name="focus_op")
    else:
        y = gb.node(op, [ids], name="focus_op")
    n = gb.node("Cast", [gb.node("Shape", [y], name="focus_shape")], to=1, name="post_cast")
    out = gb.node("Mul", [x, gb.node("ReduceMax", [n], keepdims=1, name="post_len")], name="post_mul")
    if also_read:
        gb.output(out, gb.node("Relu" if dtype != "int64" else "Neg", [y], name="post_reader"))
    else:
        gb.output(out)
    return gb


#: (label, op, dtype, also read by another node)
DEAD = (
    ("pad_i64.shape_only", "Pad", "int64", False),
    ("pad_f32.shape_only", "Pad", "float32", False),
    ("sigmoid_f32.shape_only", "Sigmoid", "float32", False),
    ("pad_i64.shape_and_reader", "Pad", "int64", True),
)


def dead_nodes_extra(c: Collector) -> None:
    """A node read only by a Shape of its static result, and one with a second reader (DEAD)."""
    for label, op, dtype, also in DEAD:
        c.add("q.%s.ctx=dead.%s.r2" % (op, label), op, _dead(op, dtype, also), kind="context",
              focus=["focus_op", "focus_shape"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [dead_nodes_extra]
