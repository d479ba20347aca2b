"""Normalisation divisions on RKNN (issue 22): Global Response Normalisation (ConvNeXt-V2).

GRN computes ``g = ||x||_2`` over the spatial axes, ``n = g / (mean_c(g) + eps)``, and returns
``gamma * (x * n) + beta + x``. The held-out ConvNeXt-V2 ran that Div on the CPU although the Div
entry says a float Div of two tensors runs on the NPU. The family varies what the Div divides:
GRN as ConvNeXt-V2 writes it (channels last, ReduceL2 or Pow/ReduceSum/Sqrt), the channels-first
form, without eps, ``x / mean(x)`` of a plain tensor, and a Div by a reduced tensor whose divisor
is not a mean. gamma and beta are non-zero (random initialisation of GRN zeroes them, and the
compiler then folds the whole branch away).

Built with :mod:`.builder` like every family and listed in FAMILIES (ids ``x.Div.ctx=norm_div.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, keyword arguments of _norm_div): GRN as ConvNeXt-V2 writes it first, then one change each
NORM_DIV = (
    ("grn.nhwc.l2", {}),
    ("grn.nhwc.powsum", {"norm": "powsum"}),
    ("grn.nhwc.no_eps", {"eps": False}),
    ("grn.nchw.l2", {"layout": "nchw"}),
    ("grn.nhwc.c=96", {"c": 96}),
    ("grn.nhwc.reciprocal", {"div": "reciprocal"}),
    ("x_over_mean", {"norm": "none"}),
    ("x_over_max", {"norm": "none", "reduce": "ReduceMax"}),
    ("l2_over_sum", {"reduce": "ReduceSum"}),
    ("grn.nhwc.c=128", {"c": 128}),
    ("grn.nhwc.c=256", {"c": 256}),
    ("grn.nhwc.linear.c=32", {"src": "linear"}),
    ("grn.nhwc.linear.c=128", {"src": "linear", "c": 128}),
    ("grn.nhwc.linear.c=128.hw=14", {"src": "linear", "c": 128, "hw": 14}),
    ("grn.nhwc.linear.c=64", {"src": "linear", "c": 64}),
    ("grn.nhwc.linear.c=256", {"src": "linear", "c": 256}),
    # the GRN result into ConvNeXt-V2's pwconv2 (a Linear): ran the Div on the CPU in the real block
    ("grn.mlp.c=128", {"src": "linear", "tail": "linear", "c": 128}),
    ("grn.mlp.c=32", {"src": "linear", "tail": "linear"}),
    ("grn.mlp.powsum", {"src": "linear", "tail": "linear", "norm": "powsum"}),
    ("grn.mlp.no_eps", {"src": "linear", "tail": "linear", "eps": False}),
    ("grn.conv.linear_tail", {"tail": "linear"}),
    ("grn.mlp.reciprocal", {"src": "linear", "tail": "linear", "div": "reciprocal"}),
    ("x_over_mean.mlp", {"src": "linear", "tail": "linear", "norm": "none"}),
    ("l2_over_max.mlp", {"src": "linear", "tail": "linear", "reduce": "ReduceMax"}),
    # the torch.nn zoo's GRN (nn_grn): channels last between two permutes of a Conv's map, by size
    ("grn.nhwc.to_nchw.c=16.hw=32", {"c": 16, "hw": 32, "tail": "nchw"}),
    ("grn.nhwc.to_nchw.c=16.hw=8", {"c": 16, "hw": 8, "tail": "nchw"}),
    ("grn.nhwc.to_nchw.c=32.hw=8", {"tail": "nchw"}),
    ("grn.nhwc.to_nchw.c=32.hw=32", {"hw": 32, "tail": "nchw"}),
    ("grn.nhwc.c=16.hw=32", {"c": 16, "hw": 32}),
    ("grn.nhwc.c=32.hw=32", {"hw": 32}),
    ("grn.nhwc.c=32.hw=16", {"hw": 16}),
)


def _norm_div(layout: str = "nhwc", norm: str = "l2", reduce: str = "ReduceMean", eps: bool = True,
              div: str = "div", c: int = 32, hw: int = 8, src: str = "conv", tail: str = "relu") -> GraphBuilder:
    """GRN (or ``x / reduce(x)`` with norm='none') on a [1, hw, hw, c] (nhwc) or [1, c, hw, hw]
    (nchw) tensor computed by a Conv (+ Transpose to channels last)."""
    gb = GraphBuilder(17)
    if src == "linear":  # ConvNeXt-V2's MLP: channels-last Linear (MatMul + Add) -> Relu, then GRN
        x = gb.input("x", "float32", [1, hw, hw, 32])
        x = gb.node("Add", [gb.node("MatMul", [x, gb.weight([32, c])], name="pre_pw1"), gb.weight([c])], name="pre_bias")
        x = gb.node("Relu", [x], name="pre_act")
    else:
        x = gb.input("x", "float32", [1, c, hw, hw])
        x = gb.node("Conv", [x, gb.weight([c, c, 3, 3]), gb.weight([c])], pads=[1, 1, 1, 1], name="pre_conv")
    if src == "linear":
        spatial, chan = [1, 2], -1
    elif layout == "nhwc":
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_nhwc")
        spatial, chan = [1, 2], -1
    else:
        spatial, chan = [2, 3], 1
    if norm == "l2":
        g = gb.node("ReduceL2", [x], axes=spatial, keepdims=1, name="pre_norm")
    elif norm == "powsum":
        sq = gb.node("Pow", [x, gb.const(np.float32(2.0))], name="pre_pow")
        g = gb.node("Sqrt", [gb.node("ReduceSum", [sq, gb.ints(spatial)], keepdims=1, name="pre_sum")],
                    name="pre_norm")
    else:
        g = x
    red_axes = [chan] if norm != "none" else spatial
    if reduce == "ReduceMax" and norm != "none":  # a per-channel divisor: the maximum over the spatial axes
        red_axes = spatial
    if reduce == "ReduceSum":  # axes is an input from opset 13
        m = gb.node(reduce, [g, gb.ints(red_axes)], keepdims=1, name="pre_mean")
    else:
        m = gb.node(reduce, [g], axes=red_axes, keepdims=1, name="pre_mean")
    if eps:
        m = gb.node("Add", [m, gb.const(np.float32(1e-6))], name="pre_eps")
    if div == "reciprocal":
        n = gb.node("Mul", [g, gb.node("Reciprocal", [m], name="pre_recip")], name="focus_div")
    else:
        n = gb.node("Div", [g, m], name="focus_div")
    if norm != "none":
        shape = [1, 1, 1, c] if layout == "nhwc" else [1, c, 1, 1]
        y = gb.node("Mul", [x, n], name="post_scale")
        y = gb.node("Mul", [gb.const(rand(shape, scale=1.0) + 0.5), y], name="post_gamma")
        y = gb.node("Add", [y, gb.const(rand(shape, scale=1.0))], name="post_beta")
        n = gb.node("Add", [y, x], name="post_residual")
    if tail == "linear":  # ConvNeXt-V2's pwconv2: channels-last Linear back to the block width
        n = gb.node("Add", [gb.node("MatMul", [n, gb.weight([c, 32])], name="post_pw2"), gb.weight([32])],
                    name="post_bias")
    if tail == "nchw":  # back to channels first, as the graph output
        gb.output(gb.node("Transpose", [n], perm=[0, 3, 1, 2], name="post_nchw"))
        return gb
    gb.output(gb.node("Relu", [n], name="post_relu"))
    return gb


def norm_div_extra(c: Collector) -> None:
    """The Div of a normalisation by a reduced tensor: GRN and its variants (NORM_DIV)."""
    for label, kw in NORM_DIV:
        gb = _norm_div(**kw)
        op = "Mul" if kw.get("div") == "reciprocal" else "Div"
        focus = ["focus_div", "pre_recip"] if op == "Mul" else ["focus_div"]
        c.add("x.%s.ctx=norm_div.%s.f32.r4" % (op, label), op, gb, kind="context", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [norm_div_extra]
