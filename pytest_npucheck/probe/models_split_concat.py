"""Parallel Slices of an integer tensor concatenated on the next axis on RKNN (issue 22, LongT5 one block).

LongT5's ``_concatenate_3_blocks`` takes three Slices of the padded int64 block mask (1, nb + 2, blk) along
the block axis, ``[0:nb]``, ``[1:nb+1]``, ``[2:nb+2]``, and concatenates them on the next axis. With one
block (nb = 1) the three Slices tile the axis in pieces of one: rknn-toolkit2 2.5.0 rewrites them into one
Split (replace_parallel_slice_by_split) and the Split + Concat into one Reshape
(replace_split_concat_by_reshape), an int64 Reshape the NPU runs; with two or more blocks the Slices overlap
and run on the CPU (the generic integer rule).

``x.Slice.ctx=split_concat.*``: an int64 (1, R, w) input, ``focus_pad`` one row on each side of axis 1 (as
LongT5), P Slices ``focus_slice<i>`` of axis 1 (tiling it in pieces of 1 or 2, overlapping, or covering
part of it), ``focus_concat`` on axis 2, then LongT5's tail: Unsqueeze(-2) -> Cast bool -> Where -> Add to
float scores -> Softmax. w is 8 or 128.

Listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, rows R of the input before the Pad, the Slices as (start, end) on axis 1 of the padded tensor)
CASES = (("tile.p3.e1", 1, [(0, 1), (1, 2), (2, 3)]),
         ("tile.p4.e1", 2, [(0, 1), (1, 2), (2, 3), (3, 4)]),
         ("tile.p5.e1", 3, [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]),
         ("tile.p2.e2", 2, [(0, 2), (2, 4)]),
         ("overlap.p3.e2", 2, [(0, 2), (1, 3), (2, 4)]),
         ("part.p2.e1", 1, [(0, 1), (1, 2)]))


def _split_concat(rows: int, slices: list[tuple[int, int]], width: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("mask", "int64", [1, rows, width])
    p = gb.node("Pad", [x, gb.ints([0, 1, 0, 0, 1, 0]), gb.const(np.array(0, dtype=np.int64))],
                name="focus_pad", mode="constant")
    parts = [gb.node("Slice", [p, gb.ints([s]), gb.ints([e]), gb.ints([1]), gb.ints([1])], name="focus_slice%d" % i)
             for i, (s, e) in enumerate(slices)]
    cat = gb.node("Concat", parts, axis=2, name="focus_concat")
    extent = slices[0][1] - slices[0][0]
    u = gb.node("Unsqueeze", [cat, gb.ints([-2])], name="post_unsq")
    c = gb.node("Cast", [u], name="post_cast", to=9)
    w = gb.node("Where", [c, gb.const(np.array(0.0, dtype=np.float32)),
                          gb.const(np.array(-1e4, dtype=np.float32))], name="post_where")
    s = gb.node("Add", [gb.input("scores", "float32", [1, extent, 4, len(slices) * width]), w], name="post_add")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def split_concat_extra(c: Collector) -> None:
    """int64 Slices of one axis concatenated on the next: tiling in pieces of 1 (a Reshape), of 2, overlapping,
    covering part of the axis; 8 or 128 wide."""
    for label, rows, slices in CASES:
        for width in (8, 128):
            c.add("x.Slice.ctx=split_concat.%s.w%d.i64.r3" % (label, width), "Slice",
                  _split_concat(rows, slices, width), kind="context", dtype="int64",
                  focus=["focus_pad", *("focus_slice%d" % i for i in range(len(slices))), "focus_concat"])


FAMILIES: list[Callable[[Collector], None]] = [split_concat_extra]
