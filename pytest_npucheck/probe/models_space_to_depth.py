"""Stride-2 Slices that make a space-to-depth on RKNN (issue 22): Swin's patch merging.

A stride-2 Slice alone runs on the CPU (``Slice.axis=*.step=2.*``). Swin (and Mask2Former's Swin
backbone, Donut, ...) merges patches as ``x[:, 0::2, 0::2, :]``, ``x[:, 1::2, 0::2, :]``,
``x[:, 0::2, 1::2, :]``, ``x[:, 1::2, 1::2, :]`` concatenated on the last axis of a channels-last
``(B, H, W, C)`` tensor; the TorchScript exporter writes two Slices per quadrant (rows, then
columns; the row Slices shared). rknn-toolkit2 2.5.0 fuses the whole block into one 2x2 stride-2
Conv (rewrite ``fuse_focus_slice2``), as it does YOLOv5's Focus (channels first, Concat on axis 1).

The family varies what makes the block: layout (channels last / first), where the tensor comes
from (a Linear, a Conv, a graph input), one Slice per quadrant with two axes, the quadrant order,
a block with only two quadrants or three, a Concat on the wrong axis, an extra Concat input, and a
strided pair that is not concatenated.

Built like the families of models_extra.py and listed in FAMILIES (ids ``x.Slice.ctx=s2d.*``).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

BIG = 9223372036854775807  # what TorchScript writes for an open end

#: Swin's quadrant order (row offset, column offset); YOLOv5's Focus uses the same
SWIN_ORDER = ((0, 0), (1, 0), (0, 1), (1, 1))

#: (label, keyword arguments of _space_to_depth): Swin's patch merging first, then one change each
SPACE_TO_DEPTH = (
    ("swin.nhwc.linear", {}),
    ("swin.nhwc.input", {"src": "input"}),
    ("swin.nhwc.linear.c=96.hw=16", {"c": 96, "hw": 16}),
    ("swin.nhwc.linear.two_axis", {"form": "two_axis"}),
    ("swin.nhwc.linear.order=rows_first", {"quads": ((0, 0), (0, 1), (1, 0), (1, 1))}),
    ("swin.nhwc.linear.quads=2", {"quads": ((0, 0), (1, 1))}),
    ("swin.nhwc.linear.quads=3", {"quads": ((0, 0), (1, 0), (0, 1))}),
    ("swin.nhwc.linear.concat_axis=1", {"concat_axis": 1}),
    ("swin.nhwc.linear.extra_input", {"extra": True}),
    ("swin.nhwc.linear.no_concat", {"quads": ((0, 0),), "tail": "relu"}),
    ("focus.nchw.conv", {"layout": "nchw", "src": "conv"}),
    ("focus.nchw.input", {"layout": "nchw", "src": "input"}),
    ("focus.nchw.conv.quads=2", {"layout": "nchw", "src": "conv", "quads": ((0, 0), (1, 1))}),
    ("swin.nhwc.linear.step=3", {"step": 3, "quads": tuple((r, c) for r in range(3) for c in range(3))}),
)


def _space_to_depth(layout: str = "nhwc", src: str = "linear", c: int = 32, hw: int = 8, form: str = "torch",
                    quads: tuple[tuple[int, int], ...] = SWIN_ORDER,
                    concat_axis: int | None = None, extra: bool = False, tail: str = "linear",
                    step: int = 2) -> GraphBuilder:
    """The quadrants ``x[..., r::step, c::step, ...]`` of a (1, hw, hw, c) (nhwc) or (1, c, hw, hw) (nchw)
    tensor concatenated on the channel axis (``concat_axis`` overrides), then a Linear
    (nhwc; Swin's LayerNorm in between is left out) or a Conv (nchw). The Slices are ``focus_*``; the Concat is ``post_concat``."""
    gb = GraphBuilder(17)
    if layout == "nhwc":
        if src == "linear":
            x = gb.input("x", "float32", [1, hw * hw, c])
            x = gb.node("Add", [gb.node("MatMul", [x, gb.weight([c, c])], name="pre_linear"), gb.weight([c])],
                        name="pre_bias")
            x = gb.node("Reshape", [x, gb.ints([1, hw, hw, c])], name="pre_grid")
        else:
            x = gb.input("x", "float32", [1, hw, hw, c])
        axes, chan = (1, 2), -1
    else:
        if src == "conv":
            x = gb.input("x", "float32", [1, c, hw, hw])
            x = gb.node("Conv", [x, gb.weight([c, c, 3, 3]), gb.weight([c])], pads=[1, 1, 1, 1], name="pre_conv")
        else:
            x = gb.input("x", "float32", [1, c, hw, hw])
        axes, chan = (2, 3), 1
    rows: dict[int, str] = {}
    parts = []
    for i, (r, col) in enumerate(quads):
        if form == "two_axis":
            parts.append(gb.node("Slice", [x, gb.ints([r, col]), gb.ints([BIG, BIG]), gb.ints(list(axes)),
                                           gb.ints([step, step])], name="focus_q%d" % i))
            continue
        if r not in rows:
            rows[r] = gb.node("Slice", [x, gb.ints([r]), gb.ints([BIG]), gb.ints([axes[0]]), gb.ints([step])],
                              name="focus_rows%d" % r)
        parts.append(gb.node("Slice", [rows[r], gb.ints([col]), gb.ints([BIG]), gb.ints([axes[1]]),
                                       gb.ints([step])], name="focus_q%d" % i))
    if tail == "relu":
        gb.output(gb.node("Relu", parts, name="post_relu"))
        return gb
    if extra:
        shape = [1, hw // step, hw // step, c] if layout == "nhwc" else [1, c, hw // step, hw // step]
        parts.append(gb.input("extra", "float32", shape))
    y = gb.node("Concat", parts, axis=chan if concat_axis is None else concat_axis, name="post_concat")
    if layout == "nhwc" and (concat_axis is None or concat_axis in (-1, 3)):
        width = c * (len(parts))
        y = gb.node("Add", [gb.node("MatMul", [y, gb.weight([width, 2 * c])], name="post_linear"),
                            gb.weight([2 * c])], name="post_bias")
    elif layout == "nchw":
        width = c * len(parts)
        y = gb.node("Conv", [y, gb.weight([c, width, 1, 1]), gb.weight([c])], name="post_conv")
    else:
        y = gb.node("Relu", [y], name="post_relu")
    gb.output(y)
    return gb


def space_to_depth_extra(c: Collector) -> None:
    """Stride-2 Slices concatenated into a space-to-depth, and near misses (SPACE_TO_DEPTH)."""
    for label, kw in SPACE_TO_DEPTH:
        gb = _space_to_depth(**kw)
        focus = [n.name for n in gb.nodes if n.op_type == "Slice"]
        c.add("x.Slice.ctx=s2d.%s.f32.r4" % label, "Slice", gb, kind="context", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [space_to_depth_extra]
