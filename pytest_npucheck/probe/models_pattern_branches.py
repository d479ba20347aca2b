"""Fused groups with two branches from one tensor on RKNN (issue 22): interleaved rotary, SEW-D's GELU.

A pattern of the tables is a chain from its first node; these groups start with two nodes that read
the same tensor and meet again further on, which the compiler fuses all the same:

- **Interleaved rotary** (RoFormer, ERNIE 4.5, Helium; TorchScript and dynamo): ``x[..., 0::2]``
  and ``x[..., 1::2]`` of one tensor, one of them negated, stacked on a new last axis
  (``Unsqueeze(-1)`` each, ``Concat(axis=-1)``). rknn-toolkit2 2.5.0 rewrites the group into one
  Conv (``fuse_slice_slice_mul_concat_to_conv``, ``..._conv2``), so the two stride-2 Slices, which
  run on the CPU on their own (``Slice.axis=m1.step=2.f32.r3``), leave no CPU row. The family
  varies the rank, which slice is negated, the stacking order, and drops the negation.
- **GELU with the half on the input** (SEW-D): ``Mul(x, 0.5)`` beside ``x / sqrt(2) -> Erf -> + 1``,
  joined by one Mul in either operand order; and ``x * (1 + erf(x / sqrt(2)))`` without the half.

Built like the families of models_op_context.py and listed in FAMILIES (ids
``x.Slice.ctx=rotary_pair.*``, ``x.pattern.gelu_erf.x_half.*``).
"""

from __future__ import annotations

import math
from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, shape of the rotated tensor, which slice is negated, stack order, negation)
ROTARY = (
    ("heads.neg_odd", [1, 2, 16, 16], "odd", "neg_first", "neg"),
    ("heads.neg_even", [1, 2, 16, 16], "even", "neg_first", "neg"),
    ("heads.neg_last", [1, 2, 16, 16], "odd", "neg_last", "neg"),
    ("r3.neg_odd", [1, 16, 32], "odd", "neg_first", "neg"),
    ("heads.no_neg", [1, 2, 16, 16], "odd", "neg_first", "none"),
    ("heads.mul_m1", [1, 2, 16, 16], "odd", "neg_first", "mul"),
)


def _rotary(shape: list[int], negated: str, order: str, negation: str) -> GraphBuilder:
    """``Relu(x) -> {x[..., 0::2], x[..., 1::2]}``, one negated, ``stack(-1) -> Reshape -> Mul(sin)``,
    added to ``Mul(x, cos)`` as a rotary embedding does."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    big = 2 ** 62
    even = gb.node("Slice", [x, gb.ints([0]), gb.ints([big]), gb.ints([-1]), gb.ints([2])], name="rot_even")
    odd = gb.node("Slice", [x, gb.ints([1]), gb.ints([big]), gb.ints([-1]), gb.ints([2])], name="rot_odd")
    parts = {"even": even, "odd": odd}
    if negation == "neg":
        parts[negated] = gb.node("Neg", [parts[negated]], name="rot_neg")
    elif negation == "mul":
        parts[negated] = gb.node("Mul", [parts[negated], gb.const(np.float32(-1.0))], name="rot_neg")
    other = "even" if negated == "odd" else "odd"
    first, second = (parts[negated], parts[other]) if order == "neg_first" else (parts[other], parts[negated])
    u1 = gb.node("Unsqueeze", [first, gb.ints([-1])], name="rot_unsq0")
    u2 = gb.node("Unsqueeze", [second, gb.ints([-1])], name="rot_unsq1")
    st = gb.node("Concat", [u1, u2], name="rot_stack", axis=-1)
    r = gb.node("Reshape", [st, gb.ints(shape)], name="rot_flat")
    s = gb.node("Mul", [r, gb.weight(shape[-2:], scale=1.0)], name="post_sin")
    c = gb.node("Mul", [x, gb.weight(shape[-2:], scale=1.0)], name="post_cos")
    gb.output(gb.node("Add", [c, s], name="post_add"))
    return gb


def rotary_pair_extra(c: Collector) -> None:
    """The interleaved rotary group by rank, negated slice, stacking order and negation (ROTARY)."""
    for label, shape, negated, order, negation in ROTARY:
        gb = _rotary(shape, negated, order, negation)
        c.add("x.Slice.ctx=rotary_pair.%s.f32.r%d" % (label, len(shape)), "Slice", gb, kind="context",
              focus=["rot_even", "rot_odd"])


def _gelu_x_half(shape: list[int], form: str, ffn: bool) -> GraphBuilder:
    """``h -> Mul(h, 0.5)`` beside ``h / sqrt(2) -> Erf -> + 1``, joined by ``Mul(half, .)`` (form
    ``half_first``) or ``Mul(., half)`` (``half_second``); ``no_half``: ``Mul(h, .)`` without the 0.5."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", list(shape))
    h = x
    if ffn:
        h = gb.node("MatMul", [x, gb.weight([shape[-1], 64])], name="fc1")
        h = gb.node("Add", [gb.weight([64]), h], name="fc1_bias")
    half = h if form == "no_half" else gb.node("Mul", [h, gb.const(np.float32(0.5))], name="gelu_half")
    d = gb.node("Div", [h, gb.const(np.float32(math.sqrt(2)))], name="gelu_div")
    e = gb.node("Erf", [d], name="gelu_erf")
    a = gb.node("Add", [e, gb.const(np.float32(1.0))], name="gelu_add")
    y = gb.node("Mul", [a, half] if form == "half_second" else [half, a], name="gelu_mul")
    if ffn:
        y = gb.node("MatMul", [y, gb.weight([64, shape[-1]])], name="fc2")
    gb.output(y)
    return gb


def gelu_x_half_extra(c: Collector) -> None:
    """SEW-D's GELU, ``0.5 * x`` computed beside the Erf branch, in both operand orders, and without the half."""
    for form in ("half_first", "half_second", "no_half"):
        for shape, ffn in (([1, 16, 32], True), ([1, 8, 16, 16], False)):
            gb = _gelu_x_half(shape, form, ffn)
            c.add("x.pattern.gelu_erf.x_half.%s%s.f32.r%d" % (form, ".ffn" if ffn else "", len(shape)), "Erf", gb,
                  kind="pattern", focus=[n.name for n in gb.nodes if n.name.startswith("gelu_")])


FAMILIES: list[Callable[[Collector], None]] = [rotary_pair_extra, gelu_x_half_extra]
