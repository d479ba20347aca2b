"""Mask Expands and broadcasting Muls of attention blocks on RKNN (issue 22: the misses of the zoo).

- ``x.Expand.ctx=sdpa_mask_cast.*``: the Expand of an additive mask in front of an attention RKNN fuses
  into exSDPAttention, with float Casts to float (no-ops the compiler removes) between the Softmax and
  the second MatMul, or between the Expand and the Add, as TorchScript exports Doge's attention
  (``Softmax -> Cast -> Cast -> MatMul``, the mask ``Where -> Unsqueeze -> Expand (rank 5) -> Reshape``).
- ``x.Expand.ctx=mask_cast_swap.*``: an integer padding mask Cast to bool (or float), laid out by
  Unsqueezes or a Reshape and Expanded over the heads, as the dynamo exporter writes Reformer's: the
  compiler moves the Cast behind the Expand, so that the Expand runs on the integer data.
- ``x.Mul.ctx=bcast3.*``: a rank-3 Mul whose computed operand is broadcast along its last axis by a full
  constant (WavLM's gated relative position bias ``(B*H, T, 1) * (B*H, T, T)``), with the variants that
  tell which part of the form matters.
- ``x.Mul.ctx=sdpa_bias.*``: the same Mul computing the additive bias of an attention RKNN fuses into
  exSDPAttention (WavLM's attention is of rank 3: ``(B*H, T, d)``).
- ``x.Reshape.ctx=flatten3.*``: a Conv's ``(1, C, H, W)`` map flattened to ``(1, C, H * W)`` in front of a
  Concat of the flattened levels (an FPN head), a Relu, a Transpose or an InstanceNormalization, by the
  size of the plane.

Built like the families of models_op_context.py and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, casts between the Softmax and the second MatMul, Cast between the Expand and the Add, rank-5 mask,
#: heads): the form of x.Expand.ctx=attn_mask_sdpa.* (models_op_context.py) with the Casts added
SDPA_MASK_CAST = (
    ("casts=0", 0, False, False, 4),
    ("casts=1", 1, False, False, 4),
    ("casts=2", 2, False, False, 4),
    ("casts=2.h=2", 2, False, False, 2),
    ("casts=0.mask_cast", 0, True, False, 4),
    ("casts=0.r5", 0, False, True, 4),
    ("casts=2.r5", 2, False, True, 4),
)


def _sdpa_mask_cast(casts: int, mask_cast: bool, rank5: bool, h: int = 4, t: int = 16) -> GraphBuilder:
    """``MatMul(q, k) -> Mul(scale) -> Add(Expand(mask)) -> Softmax -> [Cast float]*casts -> MatMul(v)``;
    the mask ``(1, T)`` is reshaped to ``(1, 1, 1, T)`` and Expanded over the heads (``rank5``: Unsqueezed to
    ``(1, 1, 1, 1, T)``, Expanded to ``(1, 1, h, 1, T)`` and Reshaped to ``(1, h, 1, T)``, as Doge's is).
    The Expand is ``focus_expand``."""
    gb = GraphBuilder(17)
    q = gb.input("q", "float32", [1, h, t, 16])
    k = gb.input("k", "float32", [1, h, 16, t])
    m = gb.input("m", "float32", [1, t])
    scores = gb.node("Mul", [gb.node("MatMul", [q, k], name="pre_matmul"), gb.const(np.float32(0.25))],
                     name="pre_scale")
    m = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="pre_reshape")
    if rank5:
        m = gb.node("Unsqueeze", [m, gb.ints([2])], name="pre_unsq")
        e = gb.node("Expand", [m, gb.ints([1, 1, h, 1, t])], name="focus_expand")
        e = gb.node("Reshape", [e, gb.ints([1, h, 1, t])], name="post_reshape")
    else:
        e = gb.node("Expand", [m, gb.ints([1, h, 1, t])], name="focus_expand")
    if mask_cast:
        e = gb.node("Cast", [e], to=1, name="post_mask_cast")
    y = gb.node("Softmax", [gb.node("Add", [scores, e], name="post_add")], axis=-1, name="post_softmax")
    for i in range(casts):
        y = gb.node("Cast", [y], to=1, name="post_cast%d" % i)
    v = gb.input("v", "float32", [1, h, t, 16])
    gb.output(gb.node("MatMul", [y, v], name="post_matmul"))
    return gb


#: (label, keyword arguments of _mask_cast_swap)
MASK_CAST_SWAP = (
    ("i64.bool.unsqueeze2", {}),
    ("i64.bool.reshape", {"layout": "reshape"}),
    ("i64.bool.none", {"layout": "none"}),
    ("i32.bool.unsqueeze2", {"src": "int32"}),
    ("bool.bool.unsqueeze2", {"src": "bool"}),
    ("i64.f32.unsqueeze2.add", {"to": "float32"}),
    ("i64.bool.unsqueeze2.t=15", {"t": 15}),
    ("i64.bool.unsqueeze2.computed", {"computed": True}),
)

_ONNX_DTYPE = {"bool": 9, "float32": 1}


def _mask_cast_swap(src: str = "int64", to: str = "bool", layout: str = "unsqueeze2", t: int = 16, h: int = 4,
                    computed: bool = False) -> GraphBuilder:
    """``mask (1, T) -> Cast(to) -> Unsqueeze(1) -> Unsqueeze(2) -> Expand (1, h, T, T) -> Where(m, scores, c)
    -> Softmax`` (a float mask: ``Add(scores, Expand)``). ``layout``: ``reshape`` (one Reshape to (1, 1, 1, T)),
    ``none`` (the mask input is (1, 1, 1, T) already); ``computed``: the mask is ``mask * mask`` (an integer
    op's result, not a graph input). The Expand is ``focus_expand``."""
    gb = GraphBuilder(17)
    scores = gb.input("s", "float32", [1, h, t, t])
    m = gb.input("mask", src, [1, 1, 1, t] if layout == "none" else [1, t])
    if computed:
        m = gb.node("Mul", [m, m], name="pre_mul")
    if src != to:
        m = gb.node("Cast", [m], to=_ONNX_DTYPE[to], name="pre_cast")
    if layout == "unsqueeze2":
        m = gb.node("Unsqueeze", [m, gb.ints([1])], name="pre_unsq1")
        m = gb.node("Unsqueeze", [m, gb.ints([2])], name="pre_unsq2")
    elif layout == "reshape":
        m = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="pre_reshape")
    e = gb.node("Expand", [m, gb.ints([1, h, t, t])], name="focus_expand")
    if to == "float32":
        y = gb.node("Add", [scores, e], name="post_add")
    else:
        y = gb.node("Where", [e, scores, gb.const(np.float32(-1e4))], name="post_where")
    gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
    return gb


#: (label, shape of the computed operand, shape of the other, the other a constant, rank-4 form)
BCAST3 = (
    ("lastdim.const", [2, 12, 1], [2, 12, 12], True),
    ("lastdim.const.t=16", [2, 16, 1], [2, 16, 16], True),
    ("lastdim.dyn", [2, 12, 1], [2, 12, 12], False),
    ("lastdim.const.b=1", [1, 12, 1], [1, 12, 12], True),
    ("lastdim.const_row", [2, 12, 1], [1, 1, 12], True),
    ("middle.const", [2, 1, 12], [2, 12, 12], True),
    ("same.const", [2, 12, 12], [2, 12, 12], True),
    ("lastdim.const.r4", [1, 2, 12, 1], [1, 2, 12, 12], True),
)


def _bcast3(a_shape, b_shape, b_const: bool) -> GraphBuilder:
    """``Relu(x) * other -> Add(y)``: ``other`` a constant or a second input; the Mul is ``focus_mul``."""
    gb = GraphBuilder(17)
    a = gb.node("Relu", [gb.input("x", "float32", a_shape)], name="pre_relu")
    b = gb.const(rand(b_shape, scale=1.0)) if b_const else gb.node("Relu", [gb.input("b", "float32", b_shape)],
                                                                    name="pre_relu_b")
    out = list(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    mul = gb.node("Mul", [a, b], name="focus_mul")
    gb.output(gb.node("Add", [mul, gb.input("y", "float32", out)], name="post_add"))
    return gb


#: (label, keyword arguments of _sdpa_bias): WavLM's form first ((B*H, T, 1) gate * (B*H, T, T) constant bias,
#: the attention of rank 3), then one change each
SDPA_BIAS = (
    ("mul.lastdim.r3", {}),
    ("mul.same.r3", {"gate": "full"}),
    ("add.lastdim.r3", {"op": "Add"}),
    ("mul.lastdim.no_sdpa.r3", {"sdpa": False}),
    ("mul.lastdim.r4", {"rank4": True}),
    ("mul.lastdim.t=16.r3", {"t": 16}),
    # the gate computed in rank 4, (1, B*H, T, 1), and Reshaped to (B*H, T, 1), as WavLM's is
    ("mul.lastdim.from_r4.r3", {"gate": "from_r4"}),
    ("mul.lastdim.from_r4.no_sdpa.r3", {"gate": "from_r4", "sdpa": False}),
    ("add.lastdim.from_r4.r3", {"gate": "from_r4", "op": "Add"}),
    ("mul.same.from_r4.r3", {"gate": "full_from_r4"}),
)


def _sdpa_bias(op: str = "Mul", gate: str = "lastdim", sdpa: bool = True, rank4: bool = False,
               bh: int = 2, t: int = 12, d: int = 16) -> GraphBuilder:
    """``MatMul(q * 0.25, k) -> Add(bias) -> Softmax [-> MatMul(v)]`` with ``bias = op(Relu(g), constant)``,
    ``g`` of shape ``(B*H, T, 1)`` (``gate="full"``: ``(B*H, T, T)``; ``from_r4``: computed as ``(1, B*H, T, 1)``
    and Reshaped); ``rank4``: every tensor with a leading 1.
    The bias op is ``focus_mul``."""
    lead = [1] if rank4 else []
    gb = GraphBuilder(17)
    q = gb.node("Mul", [gb.input("q", "float32", lead + [bh, t, d]), gb.const(np.float32(0.25))], name="pre_scale")
    scores = gb.node("MatMul", [q, gb.input("k", "float32", lead + [bh, d, t])], name="pre_matmul")
    if gate.endswith("from_r4"):
        last = t if gate.startswith("full") else 1
        g = gb.node("Relu", [gb.input("g", "float32", [1, bh, t, last])], name="pre_relu")
        g = gb.node("Reshape", [g, gb.ints([bh, t, last])], name="pre_reshape")
    else:
        g = gb.node("Relu", [gb.input("g", "float32", lead + [bh, t, t if gate == "full" else 1])], name="pre_relu")
    bias = gb.node(op, [g, gb.const(rand(lead + [bh, t, t], scale=1.0))], name="focus_mul")
    y = gb.node("Softmax", [gb.node("Add", [scores, bias], name="post_add")], axis=-1, name="post_softmax")
    if sdpa:
        y = gb.node("MatMul", [y, gb.input("v", "float32", lead + [bh, t, d])], name="post_matmul")
    gb.output(y)
    return gb


#: (H, W) of the flattened map
FLATTEN_PLANES = ((2, 2), (4, 4), (2, 4), (3, 3), (4, 6), (1, 1))
#: what reads the flattened map
FLATTEN_READERS = ("concat", "relu", "transpose", "instnorm")


def _flatten3(h: int, w: int, reader: str, c: int = 4, levels: tuple[tuple[int, int], ...] = ((8, 8),)
              ) -> GraphBuilder:
    """``Conv -> Reshape (1, C, H * W) -> reader``; ``concat``: joined on the last axis after the other
    ``levels`` (maps of these sizes, each a Conv's result flattened), then a Sigmoid. The Reshape is
    ``focus_reshape``."""
    gb = GraphBuilder(17)
    x = gb.node("Conv", [gb.input("x", "float32", [1, 8, h, w]), gb.weight([c, 8, 3, 3]), gb.weight([c])],
                pads=[1, 1, 1, 1], name="pre_conv")
    f = gb.node("Reshape", [x, gb.ints([1, c, h * w])], name="focus_reshape")
    if reader == "concat":
        others = []
        for i, (lh, lw) in enumerate(levels, start=2):
            o = gb.node("Conv", [gb.input("x%d" % i, "float32", [1, 8, lh, lw]), gb.weight([c, 8, 3, 3]),
                                 gb.weight([c])], pads=[1, 1, 1, 1], name="pre_conv%d" % i)
            others.append(gb.node("Reshape", [o, gb.ints([1, c, lh * lw])], name="pre_reshape%d" % i))
        y = gb.node("Sigmoid", [gb.node("Concat", [*others, f], axis=2, name="post_concat")], name="post_sigmoid")
    elif reader == "relu":
        y = gb.node("Relu", [f], name="post_relu")
    elif reader == "transpose":
        y = gb.node("Transpose", [f], perm=[0, 2, 1], name="post_transpose")
    else:
        y = gb.node("InstanceNormalization", [f, gb.weight([c]), gb.weight([c])], name="post_instnorm")
    gb.output(y)
    return gb


def sdpa_mask_cast_extra(c: Collector) -> None:
    for label, casts, mask_cast, rank5, heads in SDPA_MASK_CAST:
        c.add("x.Expand.ctx=sdpa_mask_cast.%s.f32.r%d" % (label, 5 if rank5 else 4), "Expand",
              _sdpa_mask_cast(casts, mask_cast, rank5, heads), kind="context", focus=["focus_expand"])


def mask_cast_swap_extra(c: Collector) -> None:
    for label, kw in MASK_CAST_SWAP:
        dtype = {"int64": "int64", "int32": "int32", "bool": "bool"}[kw.get("src", "int64")]
        c.add("x.Expand.ctx=mask_cast_swap.%s.r4" % label, "Expand", _mask_cast_swap(**kw), kind="context",
              dtype=dtype, focus=["focus_expand"])


def bcast3_extra(c: Collector) -> None:
    for label, a_shape, b_shape, b_const in BCAST3:
        c.add("x.Mul.ctx=bcast3.%s.f32.r%d" % (label, len(a_shape)), "Mul", _bcast3(a_shape, b_shape, b_const),
              kind="context", focus=["focus_mul"])


def sdpa_bias_extra(c: Collector) -> None:
    for label, kw in SDPA_BIAS:
        op = kw.get("op", "Mul")
        c.add("x.%s.ctx=sdpa_bias.%s" % (op, label), op, _sdpa_bias(**kw), kind="context", focus=["focus_mul"])


#: (the flattened map, the other levels of the Concat): rows of 4 (the FPN head), of 3, of 8
FLATTEN_LEVELS = (
    ((2, 2), ((16, 16), (8, 8), (4, 4))),
    ((2, 2), ((4, 4),)),
    ((3, 3), ((6, 6),)),
    ((6, 6), ((3, 3),)),
    ((4, 4), ((8, 8), (2, 2))),
    ((2, 4), ((4, 8),)),
    ((3, 8), ((4, 8),)),
)


def flatten3_extra(c: Collector) -> None:
    for h, w in FLATTEN_PLANES:
        for reader in FLATTEN_READERS:
            c.add("x.Reshape.ctx=flatten3.%dx%d.%s.f32.r4" % (h, w, reader), "Reshape", _flatten3(h, w, reader),
                  kind="context", focus=["focus_reshape"])
    for (h, w), levels in FLATTEN_LEVELS:
        label = "+".join("%dx%d" % lv for lv in levels)
        c.add("x.Reshape.ctx=flatten3.%dx%d.concat.levels=%s.f32.r4" % (h, w, label), "Reshape",
              _flatten3(h, w, "concat", levels=levels), kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [sdpa_mask_cast_extra, mask_cast_swap_extra, bcast3_extra,
                                               flatten3_extra, sdpa_bias_extra]
