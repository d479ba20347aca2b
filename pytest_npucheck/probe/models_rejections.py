"""Patterns that make a compiler crash or reject the whole model (issue 22, item 4).

* ``resize_cubic_extra`` (RKNN): a bicubic Resize as torch exports ``F.interpolate(...,
  mode='bicubic')`` inside a network (Conv -> Resize -> Conv), with scales or with sizes, with
  torch's ``cubic_coeff_a = -0.75`` and ONNX's default -0.5, align_corners or half-pixel.
  rknn-toolkit2 2.5.0 dies in build() on every single-op cubic probe (SIGSEGV); these show
  whether any form a real model writes builds.
* ``rmsnorm_finalize_extra`` (QNN, ids ``q.*``): the RMSNorm decompositions the dynamo exporter
  writes (opset 18: ReduceMean takes its axes as an input; LLaMA's ``weight * x``, torch.nn.RMSNorm's
  and Gemma's ``x * weight``), one change each, to find which of them make the HTP graph fail to
  finalize. On QNN 2.51.0 (v73, v68) exactly the weight-first forms fail (opset 17 and 18, into a
  Linear, a MatMul, a Relu, a residual Add or the graph output), which the existing pattern
  ``rmsnorm_reciprocal_weight_first`` predicts.

Built with :mod:`.builder` like every family and listed in FAMILIES / QNN_FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, keyword arguments of _cubic_net)
CUBIC = (
    ("scales.a=m0.75.half_pixel", {}),
    ("sizes.a=m0.75.half_pixel", {"by": "sizes"}),
    ("scales.a=m0.75.align_corners", {"ctm": "align_corners"}),
    ("scales.a=m0.5.half_pixel", {"a": -0.5}),
)


def _cubic_net(by: str = "scales", a: float = -0.75, ctm: str = "half_pixel", opset: int = 17) -> GraphBuilder:
    gb = GraphBuilder(opset)
    x = gb.input("x", "float32", [1, 8, 16, 16])
    y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3]), gb.weight([8])], pads=[1, 1, 1, 1], name="pre_conv")
    if by == "scales":
        ins = [y, "", gb.const(np.array([1, 1, 2, 2], np.float32))]
    else:
        ins = [y, "", "", gb.ints([1, 8, 32, 32])]
    y = gb.node("Resize", ins, mode="cubic", cubic_coeff_a=a, coordinate_transformation_mode=ctm,
                name="focus_resize")
    gb.output(gb.node("Conv", [y, gb.weight([8, 8, 3, 3]), gb.weight([8])], pads=[1, 1, 1, 1], name="post_conv"))
    return gb


def resize_cubic_extra(c: Collector) -> None:
    """Bicubic upsampling inside a network (CUBIC)."""
    for label, kw in CUBIC:
        c.add("x.Resize.ctx=cubic_net.%s.f32.r4" % label, "Resize", _cubic_net(**kw), kind="context",
              focus=["focus_resize"])


FAMILIES: list[Callable[[Collector], None]] = [resize_cubic_extra]


# ------------------------------------------------------------------------------------------------
# QNN: the RMSNorm decompositions of the dynamo exporter and graph finalisation
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _rmsnorm_dynamo): LLaMA's dynamo export at opset 18 first
RMSNORM_DYNAMO = (
    ("o18.w_first.linear", {}),
    ("o18.w_second.linear", {"weight": "second"}),
    ("o18.no_weight.linear", {"weight": None}),
    ("o18.w_first.out", {"tail": "out"}),
    ("o18.w_second.out", {"weight": "second", "tail": "out"}),
    ("o18.w_first.matmul", {"tail": "matmul"}),
    ("o18.w_second.d=256", {"weight": "second", "d": 256}),
    ("o18.w_second.t=128", {"weight": "second", "t": 128}),
    ("o17.w_first.linear", {"opset": 17}),
    ("o17.w_second.linear", {"opset": 17, "weight": "second"}),
    ("o18.w_second.div", {"weight": "second", "recip": False}),
    ("o18.w_second.r_first", {"weight": "second", "r_first": True}),
    ("o18.w_second.rsqrt_pow", {"weight": "second", "sqrt": "pow"}),
    ("o18.no_weight.out", {"weight": None, "tail": "out"}),
    ("o17.w_second.out", {"opset": 17, "weight": "second", "tail": "out"}),
    ("o18.w_second.div.out", {"weight": "second", "recip": False, "tail": "out"}),
    ("o18.w_second.relu", {"weight": "second", "tail": "relu"}),
    ("o18.w_second.residual", {"weight": "second", "tail": "residual"}),
    ("o18.w_first.residual", {"tail": "residual"}),
    ("o18.w_first.relu", {"tail": "relu"}),
)


def _rmsnorm_dynamo(opset: int = 18, weight: str | None = "first", tail: str = "linear", d: int = 64, t: int = 16,
                    recip: bool = True, r_first: bool = False, sqrt: str = "sqrt") -> GraphBuilder:
    """``Pow(x, 2) -> ReduceMean(-1) -> Add eps -> Sqrt -> Reciprocal -> Mul(x, r) -> Mul weight``
    as torch 2.13's dynamo exporter writes LLaMA's RMSNorm (opset 18: the axes are an input), then
    a Linear (MatMul + Add), a bare MatMul, or nothing."""
    gb = GraphBuilder(opset)
    x = gb.input("x", "float32", [1, t, d])
    sq = gb.node("Pow", [x, gb.const(np.float32(2.0))], name="pow")
    if opset >= 18:
        ms = gb.node("ReduceMean", [sq, gb.ints([-1])], keepdims=1, noop_with_empty_axes=0, name="mean")
    else:
        ms = gb.node("ReduceMean", [sq], axes=[-1], keepdims=1, name="mean")
    v = gb.node("Add", [ms, gb.const(np.float32(1e-6))], name="eps")
    if sqrt == "pow":  # rsqrt as Pow(v, -0.5)
        r = gb.node("Pow", [v, gb.const(np.float32(-0.5))], name="rsqrt")
        y = gb.node("Mul", [r, x] if r_first else [x, r], name="norm")
    elif recip:
        r = gb.node("Reciprocal", [gb.node("Sqrt", [v], name="sqrt")], name="rsqrt")
        y = gb.node("Mul", [r, x] if r_first else [x, r], name="norm")
    else:
        y = gb.node("Div", [x, gb.node("Sqrt", [v], name="sqrt")], name="norm")
    if weight is not None:
        w = gb.const(rand([d], scale=1.0) + 1.0, name="weight")
        y = gb.node("Mul", [w, y] if weight == "first" else [y, w], name="scale")
    if tail == "linear":
        y = gb.node("Add", [gb.node("MatMul", [y, gb.weight([d, d])], name="proj"), gb.weight([d])], name="proj_bias")
    elif tail == "matmul":
        y = gb.node("MatMul", [y, gb.weight([d, d])], name="proj")
    elif tail == "relu":
        y = gb.node("Relu", [y], name="post_relu")
    elif tail == "residual":
        y = gb.node("Add", [y, x], name="residual")
    gb.output(y)
    return gb


def rmsnorm_finalize_extra(c: Collector) -> None:
    """RMSNorm as the dynamo exporter writes it, one change each (RMSNORM_DYNAMO)."""
    for label, kw in RMSNORM_DYNAMO:
        gb = _rmsnorm_dynamo(**kw)
        c.add("q.pattern.dynamo_rmsnorm.%s.f32.r3" % label, "ReduceMean", gb, kind="pattern",
              focus=[n.name for n in gb.nodes])


QNN_FAMILIES: list[Callable[[Collector], None]] = [rmsnorm_finalize_extra]
