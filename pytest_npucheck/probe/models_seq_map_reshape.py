"""Reshapes between a sequence (N, C, L) and a map (N, C, H, W) on RKNN (issue 22).

timm's EfficientViM mixes a (1, C, H, W) map as a sequence: a 1x1 Conv1d over (1, C, H W), a
Reshape back to (1, C', H, W), a depthwise Conv, a Reshape to (1, C', H W) again. rknn-toolkit2
2.5.0 lays the rank-3 tensor out as (N, C, 1, L) and ran the Reshape (1, 147, 196) -> (1, 147, 14, 14)
on the CPU, while (1, 128, 196) -> (1, 128, 14, 14) in the same block ran on the NPU: the plane
(196 elements) is the same, so the rank-4 plane rule (x.Reshape.ctx=plane.*) does not say it. The
family varies the channel count (multiples of 8 and not), the plane (14 x 14, 16 x 16, 7 x 7,
10 x 10), the direction (sequence to map, map to sequence) and the neighbours (a Conv1d before and a
depthwise Conv after, as EfficientViM has them, or Relus).

Ids ``x.Reshape.ctx=seq_map.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (channels, height, width, direction, neighbours)
SEQ_MAP = (
    (147, 14, 14, "to_map", "conv"), (128, 14, 14, "to_map", "conv"), (144, 14, 14, "to_map", "conv"),
    (150, 14, 14, "to_map", "conv"), (12, 14, 14, "to_map", "conv"), (7, 14, 14, "to_map", "conv"),
    (147, 16, 16, "to_map", "conv"), (147, 7, 7, "to_map", "conv"), (20, 10, 10, "to_map", "conv"),
    (147, 14, 14, "to_map", "relu"), (128, 14, 14, "to_map", "relu"), (12, 16, 16, "to_map", "relu"),
    (147, 14, 14, "to_seq", "conv"), (128, 14, 14, "to_seq", "conv"), (12, 14, 14, "to_seq", "conv"),
    (147, 16, 16, "to_seq", "conv"), (147, 14, 14, "to_seq", "relu"), (128, 14, 14, "to_seq", "relu"),
    (24, 14, 14, "to_map", "conv"), (40, 14, 14, "to_map", "conv"), (8, 14, 14, "to_map", "conv"),
    (16, 14, 14, "to_map", "conv"), (48, 7, 7, "to_map", "conv"), (24, 10, 10, "to_map", "relu"),
    # SwiftFormer: the tokens (1, L, C) transposed to (1, C, L) and viewed as the map
    (220, 7, 7, "to_map", "transpose"), (112, 14, 14, "to_map", "transpose"), (147, 14, 14, "to_map", "transpose"),
    # Longformer's (2, 255, 255) -> (2, 1, 255, 255): a rank-3 tensor given a channel axis of one
    (1, 255, 255, "unsqueeze", "relu"), (1, 14, 14, "unsqueeze", "relu"), (1, 16, 16, "unsqueeze", "relu"),
)


def _seq_map(ch: int, h: int, w: int, direction: str, around: str) -> GraphBuilder:
    """``to_map``: x (1, 32, H W) -> [Conv1d 1x1 to C | Relu] -> Reshape (1, C, H, W) -> [depthwise Conv 3x3 |
    Relu], or (``transpose``) x (1, H W, C) -> Transpose -> Reshape (1, C, H, W) -> Relu; ``to_seq``: x (1, 32, H, W) -> [Conv 1x1 to C | Relu] -> Reshape (1, C, H W) -> [Conv1d 1x1 | Relu]."""
    gb = GraphBuilder(17)
    c_in = 32 if around == "conv" else ch
    if direction == "unsqueeze":  # x (2, H, W) -> Relu -> Reshape (2, 1, H, W) -> Relu
        x = gb.node("Relu", [gb.input("x", "float32", [2, h, w])], name="pre_relu")
        y = gb.node("Relu", [gb.node("Reshape", [x, gb.ints([2, 1, h, w])], name="focus_reshape")], name="post_relu")
    elif direction == "to_map" and around == "transpose":
        x = gb.node("Transpose", [gb.input("x", "float32", [1, h * w, ch])], perm=[0, 2, 1], name="pre_tp")
        y = gb.node("Relu", [gb.node("Reshape", [x, gb.ints([1, ch, h, w])], name="focus_reshape")], name="post_relu")
    elif direction == "to_map":
        x = gb.input("x", "float32", [1, c_in, h * w])
        if around == "conv":
            x = gb.node("Conv", [x, gb.weight([ch, c_in, 1])], kernel_shape=[1], name="pre_conv")
        else:
            x = gb.node("Relu", [x], name="pre_relu")
        y = gb.node("Reshape", [x, gb.ints([1, ch, h, w])], name="focus_reshape")
        if around == "conv":
            y = gb.node("Conv", [y, gb.weight([ch, 1, 3, 3])], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=ch,
                        name="post_conv")
        else:
            y = gb.node("Relu", [y], name="post_relu")
    else:
        x = gb.input("x", "float32", [1, c_in, h, w])
        if around == "conv":
            x = gb.node("Conv", [x, gb.weight([ch, c_in, 1, 1])], kernel_shape=[1, 1], name="pre_conv")
        else:
            x = gb.node("Relu", [x], name="pre_relu")
        y = gb.node("Reshape", [x, gb.ints([1, ch, h * w])], name="focus_reshape")
        if around == "conv":
            y = gb.node("Conv", [y, gb.weight([16, ch, 1])], kernel_shape=[1], name="post_conv")
        else:
            y = gb.node("Relu", [y], name="post_relu")
    gb.output(y)
    return gb


def seq_map_extra(c: Collector) -> None:
    """Sequence <-> map Reshapes (SEQ_MAP)."""
    for ch, h, w, direction, around in SEQ_MAP:
        rank = 4 if direction == "to_seq" else 3
        c.add("x.Reshape.ctx=seq_map.%s.c=%d.%dx%d.%s.f32.r%d" % (direction, ch, h, w, around, rank), "Reshape",
              _seq_map(ch, h, w, direction, around), kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [seq_map_extra]
