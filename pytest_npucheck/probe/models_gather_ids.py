"""Integer layout ops that make the indices of an embedding Gather on RKNN (issue 22).

The int_layout family (models_int_layout.py) showed an int64 Unsqueeze in front of a Gather's indices
on the CPU when it reads a graph input, and on the NPU (row 'Reshape INT64 NPU') behind an int64 Mul or
Add; the table calls both CPU. The zoo's Kosmos-2.5 computes its position ids (cumsum of the padding
mask, times the mask, plus the padding index: CumSum -> Mul -> Cast -> Add, CPU) and flattens them
with ``Reshape (1, T) -> (T,)`` in front of the position-embedding Gather: NPU. The family varies the
layout op and the shape it writes (Reshape to rank 1 and to rank 3, Unsqueeze, Squeeze), the producer
(a graph input, an int64 Add, Mul, CumSum, an int64 -> int64 Cast behind an Add, a float -> int64 Cast)
and the length (16 and 17).

Ids ``x.<Op>.ctx=gather_ids.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, input shape (t stands for the length), output shape)
GATHER_IDS_OPS = (
    ("reshape.r1", "Reshape", (1, "t"), ("t",)),
    ("reshape.r3", "Reshape", (1, "t"), (1, 1, "t")),
    ("unsqueeze.r3", "Unsqueeze", (1, "t"), (1, 1, "t")),
    ("squeeze.r2", "Squeeze", (1, 1, "t"), (1, "t")),
)

PRODUCERS = ("input", "add", "mul", "cumsum", "add_cast", "cast_f32")

LENGTHS = (16, 17)


def _gather_ids(op: str, in_shape: tuple, out_shape: tuple, producer: str, t: int) -> GraphBuilder:
    """``ids [-> producer] -> focus_layout <op> -> Gather(table (64, 32), indices) -> Relu``."""
    gb = GraphBuilder(17)
    shape = [t if d == "t" else d for d in in_shape]
    out = [t if d == "t" else d for d in out_shape]
    if producer == "cast_f32":
        x = gb.node("Cast", [gb.input("f", "float32", shape)], to=7, name="pre_cast")
    else:
        x = gb.input("ids", "int64", shape)
    if producer in ("add", "add_cast"):
        x = gb.node("Add", [x, gb.const(np.array(2, dtype=np.int64))], name="pre_add")
    if producer == "add_cast":
        x = gb.node("Cast", [x], to=7, name="pre_cast")
    elif producer == "mul":
        x = gb.node("Mul", [x, gb.input("m", "int64", shape)], name="pre_mul")
    elif producer == "cumsum":
        x = gb.node("CumSum", [x, gb.const(np.array(len(shape) - 1, dtype=np.int64))], name="pre_cumsum")
    if op == "Reshape":
        y = gb.node("Reshape", [x, gb.ints(out)], name="focus_layout")
    elif op == "Unsqueeze":
        y = gb.node("Unsqueeze", [x, gb.ints([0])], name="focus_layout")
    else:
        y = gb.node("Squeeze", [x, gb.ints([0])], name="focus_layout")
    g = gb.node("Gather", [gb.weight([64, 32]), y], axis=0, name="post_gather")
    gb.output(gb.node("Relu", [g], name="post_relu"))
    return gb


def gather_ids_extra(c: Collector) -> None:
    """GATHER_IDS_OPS behind each of PRODUCERS, for each of LENGTHS."""
    for label, op, in_shape, out_shape in GATHER_IDS_OPS:
        for producer in PRODUCERS:
            for t in LENGTHS:
                c.add("x.%s.ctx=gather_ids.%s.%s.t=%d.i64.r%d" % (op, label, producer, t, len(in_shape)), op,
                      _gather_ids(op, in_shape, out_shape, producer, t), kind="context", dtype="int64",
                      focus=["focus_layout"])


FAMILIES: list[Callable[[Collector], None]] = [gather_ids_extra]
