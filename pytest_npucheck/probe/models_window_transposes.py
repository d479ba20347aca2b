"""Rank-6 window/grid partition Transposes of MaxViT on RKNN (issue 22).

The Transpose rule (rank 6: at most 4 blocks of axes moved) calls CPU MaxViT's partition of a
(B, C, H, W) map into p x p windows, ``(B, C, nh, p, nw, p)`` with perm (0, 2, 4, 3, 5, 1), and its
departition ``(B, nh, nw, p, p, C)`` with perm (0, 5, 1, 3, 2, 4): 5 blocks each. The grid attention
is the same with (n, p) swapped. This family varies the direction, the channels, the window count and
size, the batch, and whether the Transpose stands alone (Relu -> Transpose -> Relu) or between the
partition's Reshapes as MaxViT writes it, ids ``x.Transpose.ctx=window6.*``.

Not registered in :mod:`.extra_families` yet: only 6 of its 36 probes finished on a loaded machine
(each on the CPU, as the table says; the rest timed out), so it has no complete results. Run it with
``--timeout 600`` on an idle machine, then append it to ``FAMILIES`` there, last.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (windows per side n, window size p): MaxViT-T's window (8 x 8 windows of 7) and grid (7 x 7 of 8)
#: partitions of a 56 x 56 map, and a small one
WINDOWS = ((8, 7), (7, 8), (4, 4))
PARTITION, DEPARTITION = [0, 2, 4, 3, 5, 1], [0, 5, 1, 3, 2, 4]


def _window(direction: str, c: int, n: int, p: int, batch: int, ctx: str) -> GraphBuilder:
    gb = GraphBuilder(17)
    s = n * p
    if direction == "partition":
        six, perm = [batch, c, n, p, n, p], PARTITION
        outer, after = [batch, c, s, s], [batch * n * n, p * p, c]
    else:
        six, perm = [batch, n, n, p, p, c], DEPARTITION
        outer, after = [batch * n * n, p * p, c], [batch, c, s, s]
    if ctx == "alone":
        x = gb.node("Relu", [gb.input("x", "float32", six)], name="pre_relu")
        y = gb.node("Transpose", [x], perm=perm, name="focus_transpose")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", outer)], name="pre_relu")
        x = gb.node("Reshape", [x, gb.ints(six)], name="pre_reshape")
        y = gb.node("Transpose", [x], perm=perm, name="focus_transpose")
        y = gb.node("Reshape", [y, gb.ints(after)], name="post_reshape")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def window6_extra(c: Collector) -> None:
    """Partition and departition Transposes, alone at batch 1 and between their Reshapes at batch 1 and 2."""
    for direction in ("partition", "departition"):
        for ch in (64, 12):
            for n, p in WINDOWS:
                for ctx, batch in (("alone", 1), ("window", 1), ("window", 2)):
                    c.add("x.Transpose.ctx=window6.%s.c=%d.n=%d.p=%d.b=%d.%s.f32.r6" % (direction, ch, n, p, batch, ctx),
                          "Transpose", _window(direction, ch, n, p, batch, ctx), kind="context",
                          focus=["focus_transpose"])


FAMILIES: list[Callable[[Collector], None]] = [window6_extra]
