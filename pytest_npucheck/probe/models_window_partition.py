"""Window partition and reverse of channels-last maps on RKNN (issue 22).

timm's EfficientViT-M (LocalWindowAttention) cuts a (1, C, H, W) map into w x w windows: Transpose to
(1, H, W, C) -> Reshape (1, H/w, w, W/w, w, C) -> Transpose (0, 1, 3, 2, 4, 5) -> Reshape (nW, w, w, C) ->
Transpose (nW, C, w, w), and back after the attention. rknn-toolkit2 2.5.0 merged the partition into
'Reshape (1, C, nW, w w) -> (C, nW, w, w)' and ran it on the CPU with 7 x 7 windows, and the reverse as
rank-5 CPU rows. The family varies the window (4, 5, 7, 8), the windows per side (2, 4) and the channels.

Ids ``x.Reshape.ctx=window.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (window, windows per side, channels)
WINDOWS = ((7, 2, 64), (8, 2, 64), (4, 2, 64), (5, 2, 64), (7, 4, 16), (7, 2, 16), (4, 4, 16))


def _window(w: int, n: int, c: int, direction: str) -> GraphBuilder:
    """``partition``: x (1, C, n w, n w) -> ... -> focus_merge Reshape (n n, w, w, C) -> Transpose -> Relu;
    ``reverse``: x (n n, C, w, w) -> Transpose (0, 2, 3, 1) -> Reshape (1, n, n, w, w, C) -> Transpose ->
    focus_merge Reshape (1, n w, n w, C) -> Transpose -> Relu."""
    gb = GraphBuilder(17)
    s = n * w
    if direction == "partition":
        x = gb.node("Relu", [gb.input("x", "float32", [1, c, s, s])], name="pre_relu")
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_nhwc")
        x = gb.node("Reshape", [x, gb.ints([1, n, w, n, w, c])], name="focus_split")
        x = gb.node("Transpose", [x], perm=[0, 1, 3, 2, 4, 5], name="focus_swap")
        x = gb.node("Reshape", [x, gb.ints([n * n, w, w, c])], name="focus_merge")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", [n * n, c, w, w])], name="pre_relu")
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_nhwc")
        x = gb.node("Reshape", [x, gb.ints([1, n, n, w, w, c])], name="focus_split")
        x = gb.node("Transpose", [x], perm=[0, 1, 3, 2, 4, 5], name="focus_swap")
        x = gb.node("Reshape", [x, gb.ints([1, s, s, c])], name="focus_merge")
    x = gb.node("Transpose", [x], perm=[0, 3, 1, 2], name="post_nchw")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def window_extra(c: Collector) -> None:
    """Window partitions and reverses (WINDOWS)."""
    for direction in ("partition", "reverse"):
        for w, n, ch in WINDOWS:
            c.add("x.Reshape.ctx=window.%s.w=%d.n=%d.c=%d.f32.r6" % (direction, w, n, ch), "Reshape",
                  _window(w, n, ch, direction), kind="context", focus=["focus_split", "focus_swap", "focus_merge"])


FAMILIES: list[Callable[[Collector], None]] = [window_extra]
