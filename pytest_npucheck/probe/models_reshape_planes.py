"""Reshapes of rank-4 tensors by the size of their (H, W) plane on RKNN (issue 22).

The rknn 2.5.0 tables ran every float Reshape on the NPU. Held-out models showed CPU Reshapes of
rank-4 tensors whose last two dims hold few elements: MobileViT's unfold/fold of 2 x 2 patches
((1, 16, 4, 4) -> (32, 2, 2, 2) and back), an FPN head flattening a 2 x 2 map, and the relative
position shift of Conformer attention ((1, H, T, 2T - 1) viewed as (1, H, 2T - 1, T)). Probed
alone (Relu -> Reshape -> Relu), rknn-toolkit2 2.5.0 ran the Reshape on the NPU when H x W of its
rank-4 input (and of a rank-4 output) was a multiple of 8, or 1, and on the CPU otherwise (4, 12,
25, 180, 190 elements), whatever the rank of the other side, the batch or the channel count.

Built like the families of models_op_context.py and listed in FAMILIES (ids
``x.Reshape.ctx=plane.*``).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (input shape, output shape)
PLANES = (
    ([1, 4, 2, 2], [1, 4, 4]), ([1, 4, 4, 4], [1, 4, 16]), ([1, 32, 2, 2], [1, 32, 4]),
    ([1, 2, 19, 10], [1, 2, 10, 19]), ([1, 2, 20, 10], [1, 2, 10, 20]), ([1, 2, 18, 10], [1, 2, 10, 18]),
    ([1, 2, 16, 8], [1, 2, 8, 16]), ([1, 2, 19, 10], [1, 2, 190]), ([1, 2, 20, 10], [1, 2, 200]),
    ([1, 16, 4, 4], [32, 2, 2, 2]), ([32, 2, 2, 2], [1, 16, 4, 4]), ([1, 4, 4, 4], [2, 2, 4, 4]),
    ([1, 16, 4, 4], [1, 32, 2, 4]), ([1, 2, 12, 2], [1, 2, 24]), ([1, 2, 6, 2], [1, 2, 12]),
    ([1, 8, 3, 8], [1, 8, 24]), ([1, 4, 5, 5], [1, 4, 25]), ([1, 4, 3, 4], [1, 4, 12]),
    ([1, 4, 2, 2], [1, 16]), ([1, 4, 5, 5], [1, 100]), ([1, 16, 1, 1], [1, 16]), ([1, 8, 6, 1], [1, 48]),
    ([1, 8, 16, 1], [1, 128]), ([1, 8, 4, 4], [1, 8, 16, 1]), ([1, 8, 4, 4], [1, 8, 2, 8, 1]),
)


def _dims(shape: list[int]) -> str:
    return "x".join(str(d) for d in shape)


def plane_extra(c: Collector) -> None:
    """``Relu -> Reshape -> Relu`` for each pair of PLANES."""
    for src, dst in PLANES:
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", src)], name="pre_relu")
        y = gb.node("Reshape", [x, gb.ints(dst)], name="focus_reshape")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        c.add("x.Reshape.ctx=plane.%s_to_%s.f32.r%d" % (_dims(src), _dims(dst), len(src)), "Reshape", gb,
              kind="context", focus=["focus_reshape"])


def _unfold(c: int, p: int, n: int) -> GraphBuilder:
    """MobileViT's unfold of a (1, C, p n, p n) map into p x p patches, n per side: Reshape (C n, p, n, p) ->
    Transpose (0, 2, 1, 3) -> Reshape (1, C, n n, p p) -> Transpose (0, 3, 2, 1) -> Reshape (p p, n n, C). With
    one patch per side (n = 1) the first Transpose only moves an axis of size 1."""
    gb = GraphBuilder(17)
    s = p * n
    x = gb.node("Relu", [gb.input("x", "float32", [1, c, s, s])], name="pre_relu")
    a = gb.node("Reshape", [x, gb.ints([c * n, p, n, p])], name="focus_split")
    t = gb.node("Transpose", [a], perm=[0, 2, 1, 3], name="unfold_swap")
    b = gb.node("Reshape", [t, gb.ints([1, c, n * n, p * p])], name="focus_patches")
    t = gb.node("Transpose", [b], perm=[0, 3, 2, 1], name="unfold_tokens")
    r = gb.node("Reshape", [t, gb.ints([p * p, n * n, c])], name="unfold_view")
    gb.output(gb.node("Relu", [r], name="post_relu"))
    return gb


def plane_unfold_extra(c: Collector) -> None:
    """MobileViT's unfold with one and with two patches per side (the first Transpose trivial or not)."""
    for ch, p, n in ((32, 2, 1), (16, 2, 1), (8, 4, 1), (16, 2, 2), (8, 4, 2)):
        c.add("x.Reshape.ctx=plane_unfold.c=%d.p=%d.n=%d.f32.r4" % (ch, p, n), "Reshape", _unfold(ch, p, n),
              kind="context", focus=["focus_split", "focus_patches"])


FAMILIES: list[Callable[[Collector], None]] = [plane_extra, plane_unfold_extra]
