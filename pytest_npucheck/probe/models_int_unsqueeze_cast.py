"""An integer Unsqueeze to rank 4 read by a Cast on RKNN (issue 22, LongT5's block mask).

LongT5's block mask Unsqueezes the int64 (1, nb, 3 blk) key side on axis -2 and the (1, nb, blk) query side on
axis -1 in front of Casts to bool; rknn-toolkit2 2.5.0 ran the key side's Unsqueeze on the NPU (a Reshape
'INT64 NPU') and the query side's on the CPU in every x.Pad.ctx=block_mask probe.

``x.Unsqueeze.ctx=int_cast4.*``: an int64 (1, A, B) input, ``pre_pad`` one row on each side of axis 1 (a
computed tensor, as LongT5's), ``focus_unsq`` on axis 0, 1, 2 or 3 (rank 4), then Cast bool -> Where -> Add to
float scores -> Softmax; (A, B) = (1, 128), (3, 8), (2, 24).

Listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, rows A, width B)
SHAPES = (("a1.b128", 1, 128), ("a3.b8", 3, 8), ("a2.b24", 2, 24))


def _int_unsqueeze_cast(rows: int, width: int, axis: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("mask", "int64", [1, rows, width])
    p = gb.node("Pad", [x, gb.ints([0, 1, 0, 0, 1, 0]), gb.const(np.array(0, dtype=np.int64))],
                name="pre_pad", mode="constant")
    u = gb.node("Unsqueeze", [p, gb.ints([axis])], name="focus_unsq")
    c = gb.node("Cast", [u], name="post_cast", to=9)
    w = gb.node("Where", [c, gb.const(np.array(0.0, dtype=np.float32)),
                          gb.const(np.array(-1e4, dtype=np.float32))], name="post_where")
    shape = [1, rows + 2, width]
    shape.insert(axis, 1)
    s = gb.node("Add", [gb.input("scores", "float32", shape), w], name="post_add")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def int_unsqueeze_cast_extra(c: Collector) -> None:
    """int64 (1, A + 2, B) Unsqueezed on each of the four axes of rank 4 in front of a Cast to bool."""
    for label, rows, width in SHAPES:
        for axis in range(4):
            c.add("x.Unsqueeze.ctx=int_cast4.ax%d.%s.i64.r3" % (axis, label), "Unsqueeze",
                  _int_unsqueeze_cast(rows, width, axis), kind="context", dtype="int64", focus=["focus_unsq"])


FAMILIES: list[Callable[[Collector], None]] = [int_unsqueeze_cast_extra]
