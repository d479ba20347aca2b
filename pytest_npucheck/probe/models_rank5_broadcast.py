"""Rank-5 broadcasts of axis 1 behind a leading axis of size 1 on RKNN (issue 22).

timm's GCViT tiles its global query (1, 7, 7, C), unsqueezed to (1, 1, 7, 7, C), over the windows:
``Tile (1, B, 1, 1, 1)``. rknn-toolkit2 2.5.0 turns a Tile that repeats only axes of size 1 into an
Expand and, at rank 5, drops the leading axis of size 1: the repeat of axis 1 becomes a repeat of the
batch axis of a rank-4 tensor ('Expand (1, 64, 7, 7) -> (64, 64, 7, 7)'), which runs on the CPU, as the
table's batch rule says for axis 0. The family repeats axis 1 of rank-5 tensors with Tile and with
Expand, with axis 0 of size 1 and 2, axis 1 alone or with axis 2, and axis 2 alone as the control.

Ids ``x.Tile.ctx=rank5_axis1.*`` and ``x.Expand.ctx=rank5_axis1.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, input shape, repeats)
RANK5_AXIS1 = (
    ("gcvit", [1, 1, 7, 7, 16], [1, 8, 1, 1, 1]),
    ("a1", [1, 1, 4, 8, 8], [1, 4, 1, 1, 1]),
    ("a1.plane", [1, 1, 1, 8, 8], [1, 4, 1, 1, 1]),
    ("a1.batch2", [2, 1, 4, 8, 8], [1, 4, 1, 1, 1]),
    ("a1a2", [1, 1, 1, 8, 8], [1, 2, 4, 1, 1]),
    ("a2", [1, 2, 1, 8, 8], [1, 1, 4, 1, 1]),
)


def _broadcast(op: str, shape: list[int], repeats: list[int]) -> GraphBuilder:
    """``Relu(x) -> Tile(repeats) | Expand(shape * repeats) -> Mul(y)``, y of the repeated shape."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    out = [d * r for d, r in zip(shape, repeats)]
    t = gb.node(op, [x, gb.ints(repeats if op == "Tile" else out)], name="focus_op")
    gb.output(gb.node("Mul", [t, gb.input("y", "float32", out)], name="post_mul"))
    return gb


def rank5_axis1_extra(c: Collector) -> None:
    """Tile and Expand of RANK5_AXIS1."""
    for op in ("Tile", "Expand"):
        for label, shape, repeats in RANK5_AXIS1:
            c.add("x.%s.ctx=rank5_axis1.%s.f32.r5" % (op, label), op, _broadcast(op, shape, repeats), kind="context",
                  focus=["focus_op"])


FAMILIES: list[Callable[[Collector], None]] = [rank5_axis1_extra]
