"""Rank-4 Reshapes between a (1, C, H, W) map and (1, heads, C / heads, H W) on RKNN (issue 22).

The plane rule of ``models_reshape_planes`` (a float Reshape between two rank-4 tensors runs on the
NPU when the (H, W) plane of its input and of its output holds a multiple of 8 elements, or one) called
CPU the attention of convolutional vision transformers that rknn-toolkit2 2.5.0 ran on the NPU: CoaT's
convolutional relative position encoding, CoAtNet's and EfficientViT's (B) linear attention view a conv
map as heads, ``(1, C, H, W) -> (1, h, C / h, H W)``, and merge the heads back,
``(1, h, d, H W) -> (1, h d, H, W)``, on 14 x 14 and 7 x 7 maps (196 and 49 elements per plane, the
heads' plane d H W a multiple of 8). Only CoaT's split behind a Concat of three depthwise Convs and
in front of a Transpose ran on the CPU.

This family varies the direction (split, merge), the head width d, the map size and the op around it
(``Relu -> Reshape -> Relu``; a Conv producer; a Transpose(0, 1, 3, 2) reader, CoaT's; a Concat
producer), ids ``x.Reshape.ctx=heads.*``.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (heads, head width d, map side) of the convolutional attention the zoo showed, plus
#: head planes that are not multiples of 8 (d H W of 3 x 49, 5 x 25, 2 x 9)
HEADS = ((8, 32, 14), (8, 40, 7), (4, 96, 14), (8, 16, 7), (16, 32, 7), (2, 8, 5), (8, 3, 7), (4, 5, 5), (2, 2, 3))

#: (producer, reader) around the focus Reshape
CONTEXTS = ("relu.relu", "conv.relu", "relu.transpose", "concat.transpose")


def _heads(direction: str, h: int, d: int, s: int, ctx: str) -> GraphBuilder:
    """``direction`` split: (1, h d, s, s) -> (1, h, d, s s); merge: (1, h, d, s s) -> (1, h d, s, s)."""
    gb = GraphBuilder(17)
    c = h * d
    src = [1, c, s, s] if direction == "split" else [1, h, d, s * s]
    dst = [1, h, d, s * s] if direction == "split" else [1, c, s, s]
    producer, reader = ctx.split(".")
    x = gb.input("x", "float32", src)
    if producer == "relu":
        x = gb.node("Relu", [x], name="pre_relu")
    elif producer == "conv":  # a 1 x 1 Conv (merge: of the heads' map read as (1, h, d, s s))
        x = gb.node("Conv", [x, gb.weight([src[1], src[1], 1, 1]), gb.weight([src[1]])], name="pre_conv")
    else:  # CoaT: the map is a Concat of depthwise Convs of channel groups
        parts = [src[1] // 2, src[1] - src[1] // 2]
        split = gb.node("Split", [x, gb.ints(parts)], n_out=2, axis=1, name="pre_split")
        convs = [gb.node("Conv", [t, gb.weight([n, 1, 3, 3]), gb.weight([n])], group=n, pads=[1, 1, 1, 1],
                         name="pre_conv_%d" % i) for i, (t, n) in enumerate(zip(split, parts))]
        x = gb.node("Concat", convs, axis=1, name="pre_concat")
    y = gb.node("Reshape", [x, gb.ints(dst)], name="focus_reshape")
    if reader == "transpose":
        y = gb.node("Transpose", [y], perm=[0, 1, 3, 2], name="post_transpose")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def heads_extra(c: Collector) -> None:
    """Split and merge of heads for each HEADS row in each CONTEXT (a concat producer only for the split)."""
    for h, d, s in HEADS:
        for direction in ("split", "merge"):
            for ctx in CONTEXTS:
                if ctx.startswith("concat") and direction == "merge":
                    continue
                c.add("x.Reshape.ctx=heads.%s.h=%d.d=%d.s=%d.%s.f32.r4" % (direction, h, d, s, ctx), "Reshape",
                      _heads(direction, h, d, s, ctx), kind="context", focus=["focus_reshape"])


def _heads_transposed(direction: str, h: int, d: int, s: int, other: str) -> GraphBuilder:
    """The Reshape next to the Transpose(0, 1, 3, 2) of attention's (1, h, L, d) layout. merge: ``Relu ->
    Transpose -> Reshape (1, h d, s, s) -> other``; split: ``Relu -> Reshape (1, h, d, L) -> Transpose -> other``,
    ``other`` a Relu, a Mul with a second (1, h, L, d) input (CoaT's ``q * conv_v``) or a MatMul with a (d, d)
    weight."""
    gb = GraphBuilder(17)
    L = s * s
    if direction == "merge":
        x = gb.node("Relu", [gb.input("x", "float32", [1, h, L, d])], name="pre_relu")
        t = gb.node("Transpose", [x], perm=[0, 1, 3, 2], name="pre_transpose")
        y = gb.node("Reshape", [t, gb.ints([1, h * d, s, s])], name="focus_reshape")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        return gb
    x = gb.node("Relu", [gb.input("x", "float32", [1, h * d, s, s])], name="pre_relu")
    y = gb.node("Reshape", [x, gb.ints([1, h, d, L])], name="focus_reshape")
    t = gb.node("Transpose", [y], perm=[0, 1, 3, 2], name="post_transpose")
    if other == "mul":
        q = gb.node("Relu", [gb.input("q", "float32", [1, h, L, d])], name="q_relu")
        t = gb.node("Mul", [q, t], name="post_mul")
    elif other == "matmul":
        t = gb.node("MatMul", [t, gb.weight([d, d])], name="post_matmul")
    gb.output(gb.node("Relu", [t], name="post_relu"))
    return gb


def heads_transposed_extra(c: Collector) -> None:
    """Merges behind and splits in front of attention's Transpose(0, 1, 3, 2), for each HEADS row."""
    for h, d, s in HEADS:
        c.add("x.Reshape.ctx=heads_t.merge.h=%d.d=%d.s=%d.f32.r4" % (h, d, s), "Reshape",
              _heads_transposed("merge", h, d, s, ""), kind="context", focus=["focus_reshape"])
        for other in ("relu", "mul", "matmul"):
            c.add("x.Reshape.ctx=heads_t.split.h=%d.d=%d.s=%d.%s.f32.r4" % (h, d, s, other), "Reshape",
                  _heads_transposed("split", h, d, s, other), kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [heads_extra, heads_transposed_extra]
