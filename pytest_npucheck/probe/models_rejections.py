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


# ------------------------------------------------------------------------------------------------
# RKNN: LayerNormalization over three or more axes (swap_reshape_norm)
# ------------------------------------------------------------------------------------------------

#: (input shape, axis, what follows): torch's nn.LayerNorm([C, H, W]) after a Conv writes axis=-3 on
#: a rank-4 input (nn_layernorm_chw); the others vary the rank, the number of normalised axes and
#: their sizes (how many elements are normalised, a size-1 last or channel axis, batch 2)
LAYERNORM_AXES = (
    ([1, 16, 16, 16], 1, "relu"),
    ([1, 8, 16, 16], 1, "relu"),
    ([1, 8, 8, 8], 1, "relu"),
    ([1, 8, 4, 8], -3, "relu"),
    ([1, 4, 8, 8], 1, "relu"),
    ([1, 2, 16, 16], 1, "relu"),
    ([1, 16, 4, 8], 1, "relu"),
    ([1, 32, 4, 4], 1, "relu"),
    ([1, 64, 2, 2], 1, "relu"),
    ([1, 64, 4, 4], 1, "relu"),
    ([1, 4, 16, 16], 1, "relu"),
    ([1, 8, 16, 1], 1, "relu"),
    ([1, 4, 16, 2], 1, "relu"),
    ([1, 4, 2, 32], 1, "relu"),
    ([1, 4, 6, 8], 1, "relu"),
    ([1, 4, 8, 4], 1, "relu"),
    ([1, 4, 5, 16], 1, "relu"),
    ([1, 4, 7, 7], 1, "relu"),
    ([1, 4, 4, 16], 1, "relu"),
    ([1, 4, 8, 2], 1, "relu"),
    ([1, 4, 9, 4], 1, "relu"),
    ([1, 4, 12, 4], 1, "relu"),
    ([1, 96, 14, 14], 1, "relu"),
    ([1, 4, 24, 4], 1, "relu"),
    ([1, 4, 40, 3], 1, "relu"),
    ([1, 8, 56, 56], 1, "relu"),
    ([1, 1, 4, 4], 1, "relu"),
    ([1, 8, 32, 2], 1, "relu"),
    ([1, 1, 16, 16], 1, "relu"),
    ([1, 1, 16, 16], 1, "none"),
    ([1, 1, 8, 8], 1, "relu"),
    ([2, 8, 8, 8], 1, "relu"),
    ([2, 16, 16, 16], 1, "relu"),
    ([1, 8, 8, 8], 0, "relu"),
    ([1, 4, 4, 8], 0, "relu"),
    ([1, 8, 8, 8], 2, "relu"),
    ([1, 8, 32, 32], 2, "relu"),
    ([1, 16, 16, 16], 1, "none"),
    ([2, 16, 32], 0, "relu"),
    ([2, 16, 32], 1, "relu"),
    ([1, 32, 64], 0, "relu"),
    ([1, 4, 4, 8, 8], 2, "relu"),
    ([1, 4, 4, 8, 8], 1, "relu"),
    ([1, 8, 8, 16, 16], 1, "relu"),
    ([1, 4, 4, 8, 8], 3, "relu"),
    ([4, 32], 0, "relu"),
)


def _layernorm_axes(shape: list[int], axis: int, post: str = "relu") -> GraphBuilder:
    """``[Conv ->] LayerNormalization(axis) [-> Relu]`` (the Conv on rank-4 inputs) with a weight
    and bias of the normalised shape, as torch writes nn.LayerNorm(shape[axis:])."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", shape)
    if len(shape) == 4:
        c = shape[1]
        x = gb.node("Conv", [x, gb.weight([c, c, 1, 1]), gb.weight([c])], name="pre_conv")
    norm = shape[axis:]
    y = gb.node("LayerNormalization", [x, gb.const(rand(norm, scale=1.0) + 1.0), gb.weight(norm)],
                axis=axis, epsilon=1e-5, name="focus_ln")
    gb.output(gb.node("Relu", [y], name="post_relu") if post == "relu" else y)
    return gb


def layernorm_axes_extra(c: Collector) -> None:
    """LayerNormalization over one to four trailing axes (LAYERNORM_AXES)."""
    for shape, axis, post in LAYERNORM_AXES:
        label = "axis=%s.shape=%s%s" % (str(axis).replace("-", "m"), "x".join(map(str, shape)),
                                        "" if post == "relu" else ".post=" + post)
        c.add("x.LayerNormalization.ctx=axes.%s.f32.r%d" % (label, len(shape)), "LayerNormalization",
              _layernorm_axes(list(shape), axis, post), kind="context", attributes={"axis": axis},
              focus=["focus_ln"])


# ------------------------------------------------------------------------------------------------
# RKNN: BatchNormalization in training mode (weight standardisation: BiT)
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _bn_training)
BN_TRAINING = (
    ("train=1.outputs=3.src=weight", {}),
    ("train=1.outputs=1.src=weight", {"outputs": 1}),
    ("train=1.outputs=1.src=conv", {"outputs": 1, "src": "conv"}),
    ("train=1.outputs=3.src=conv", {"src": "conv"}),
    ("train=0.outputs=1.src=conv", {"outputs": 1, "src": "conv", "training": 0}),
    ("train=0.outputs=1.src=weight", {"outputs": 1, "training": 0}),
)


def _bn_training(training: int = 1, outputs: int = 3, src: str = "weight") -> GraphBuilder:
    """BiT's weight standardisation as TorchScript writes ``F.batch_norm(w.reshape(1, O, -1),
    None, None, training=True, momentum=0.)``: the Conv weight reshaped to (1, O, I*k*k),
    BatchNormalization(training_mode=1, three outputs) over it, reshaped back and used by a Conv
    (``src='weight'``); or a BatchNormalization of a Conv's activation (``src='conv'``)."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 8, 16, 16])
    o = 8
    stats = [gb.const(np.ones([o], np.float32)), gb.const(np.zeros([o], np.float32)),
             gb.const(np.zeros([o], np.float32)), gb.const(np.ones([o], np.float32))]
    if src == "weight":
        w = gb.const(rand([o, 8, 3, 3], scale=1.0))
        flat = gb.node("Reshape", [w, gb.ints([1, o, -1])], name="pre_reshape")
        bn = gb.node("BatchNormalization", [flat, *stats], n_out=outputs, epsilon=1e-8, momentum=1.0,
                     training_mode=training, name="focus_bn")
        bn = bn[0] if outputs > 1 else bn
        w2 = gb.node("Reshape", [bn, gb.ints([o, 8, 3, 3])], name="post_reshape")
        gb.output(gb.node("Conv", [x, w2], pads=[1, 1, 1, 1], name="post_conv"))
    else:
        y = gb.node("Conv", [x, gb.weight([o, 8, 3, 3])], pads=[1, 1, 1, 1], name="pre_conv")
        bn = gb.node("BatchNormalization", [y, *stats], n_out=outputs, epsilon=1e-5, momentum=0.9,
                     training_mode=training, name="focus_bn")
        bn = bn[0] if outputs > 1 else bn
        gb.output(gb.node("Relu", [bn], name="post_relu"))
    return gb


def batchnorm_training_extra(c: Collector) -> None:
    """BatchNormalization with training_mode=1 and 0, of a weight and of an activation (BN_TRAINING)."""
    for label, kw in BN_TRAINING:
        c.add("x.BatchNormalization.ctx=%s.f32.r%d" % (label, 3 if kw.get("src", "weight") == "weight" else 4),
              "BatchNormalization", _bn_training(**kw), kind="context", focus=["focus_bn"])


# ------------------------------------------------------------------------------------------------
# RKNN: attention whose queries are constants (fuse_matmul_softmax_matmul_to_sdpa)
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _const_query_attention): DETR's decoder cross-attention first (learned
#: object queries, encoder keys, a mask Add and the scale Mul), then one change each
CONST_QUERY = (
    ("q=const.n=10.mask=const", {}),
    ("q=const.n=10.mask=input", {"mask": "input"}),
    ("q=const.n=10.mask=none", {"mask": "none"}),
    ("q=const.n=10.mask=none.scale=none", {"mask": "none", "scale": False}),
    ("q=const.n=1.mask=none", {"n": 1, "mask": "none"}),
    ("q=const.n=16.mask=none", {"n": 16, "mask": "none"}),
    ("q=const.n=10.h=1.mask=none", {"h": 1, "mask": "none"}),
    ("q=proj_const.n=10.mask=const", {"q": "proj_const"}),
    ("q=input.n=10.mask=const", {"q": "input"}),
    ("q=input.n=10.mask=none", {"q": "input", "mask": "none"}),
    ("q=input.n=1.mask=none", {"q": "input", "n": 1, "mask": "none"}),
    ("q=const_plus_input.n=10.mask=const", {"q": "const_plus_input"}),
    ("q=const.kv=const.n=10.mask=const", {"kv": "const"}),
)


def _const_query_attention(q: str = "const", n: int = 10, t: int = 16, h: int = 2, d: int = 16,
                           mask: str = "const", scale: bool = True, kv: str = "input") -> GraphBuilder:
    """Cross-attention of ``n`` queries over ``t`` keys: k and v projected from the input
    (MatMul -> Reshape -> Transpose); q a constant [1, h, n, d] (``q='const'``: learned queries, as
    DETR's decoder and AIMv2's attention pooling have them once the exporter or the compiler has
    folded the query projection), the projection of a constant (``proj_const``), of a second input
    (``input``), or of a constant plus the input (``const_plus_input``); then ``MatMul(q, k) [-> Mul
    scale] [-> Add mask] -> Softmax -> MatMul(., v) -> Transpose -> Reshape``; with ``kv='const'`` k
    and v are projections of a constant too (the whole attention constant) and the input is added
    to its result."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, t, h * d])
    src = x if kv == "input" else gb.const(rand([1, t, h * d], scale=1.0), name="memory")

    def heads(src: str, rows: int, nm: str, perm: list[int]) -> str:
        y = gb.node("MatMul", [src, gb.weight([h * d, h * d])], name=f"pre_{nm}_proj")
        y = gb.node("Reshape", [y, gb.ints([1, rows, h, d])], name=f"pre_{nm}_heads")
        return gb.node("Transpose", [y], perm=perm, name=f"pre_{nm}_tp")

    k = heads(src, t, "k", [0, 2, 3, 1])
    v = heads(src, t, "v", [0, 2, 1, 3])
    if q == "const":
        qq = gb.const(rand([1, h, n, d], scale=1.0), name="query")
    elif q == "proj_const":
        qq = heads(gb.const(rand([1, n, h * d], scale=1.0), name="query_embed"), n, "q", [0, 2, 1, 3])
    elif q == "input":
        qq = heads(gb.input("xq", "float32", [1, n, h * d]), n, "q", [0, 2, 1, 3])
    else:  # DETR's later layers: hidden state (an activation) plus the learned query position
        xq = gb.node("Add", [gb.input("xq", "float32", [1, n, h * d]), gb.const(rand([1, n, h * d], scale=1.0))],
                     name="pre_q_pos")
        qq = heads(xq, n, "q", [0, 2, 1, 3])
    s = gb.node("MatMul", [qq, k], name="focus_scores")
    if scale:
        s = gb.node("Mul", [s, gb.const(np.float32(d ** -0.5))], name="post_scale")
    if mask == "const":
        s = gb.node("Add", [s, gb.const(np.zeros([1, 1, n, t], np.float32))], name="post_mask")
    elif mask == "input":
        s = gb.node("Add", [s, gb.input("mask", "float32", [1, 1, n, t])], name="post_mask")
    p = gb.node("Softmax", [s], axis=-1, name="post_softmax")
    y = gb.node("MatMul", [p, v], name="post_attn_v")
    y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="post_tp")
    y = gb.node("Reshape", [y, gb.ints([1, n, h * d])], name="post_merge")
    if kv == "const":
        y = gb.node("Add", [y, gb.node("ReduceMean", [x], axes=[1], keepdims=1, name="post_mean")], name="post_add")
    gb.output(y)
    return gb


def sdpa_const_query_extra(c: Collector) -> None:
    """Attention with constant (learned) queries and with computed ones (CONST_QUERY)."""
    for label, kw in CONST_QUERY:
        c.add("x.MatMul.ctx=sdpa_query.%s.f32.r4" % label, "MatMul", _const_query_attention(**kw), kind="context",
              focus=["focus_scores"])


# ------------------------------------------------------------------------------------------------
# RKNN: the fused q/k/v projection split into heads (fuse_multihead_attention_reshape_to_gather_split)
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _qkv_split): GPT-1's TorchScript attention first (Conv1D as a Gemm
#: of the flattened tokens, Reshape back, Split into q/k/v), then one change each
QKV_SPLIT = (
    ("proj=gemm_reshape.attn", {}),
    ("proj=matmul.attn", {"proj": "matmul"}),
    ("proj=gemm_reshape.heads=1.attn", {"h": 1}),
    ("proj=gemm_reshape.no_attn", {"attn": False}),
    ("proj=gemm_reshape.slices.attn", {"split": "slice"}),
    ("proj=gemm_reshape.t=64.attn", {"t": 64}),
    ("proj=input.attn", {"proj": "input"}),
    ("proj=gemm_reshape.causal_mask.attn", {"mask": True}),
    ("pre=layernorm.proj=gemm_reshape.attn", {"pre": "layernorm"}),
    ("pre=relu.proj=gemm_reshape.attn", {"pre": "relu"}),
)


def _qkv_split(proj: str = "gemm_reshape", h: int = 2, d: int = 16, t: int = 16, attn: bool = True,
               split: str = "split", mask: bool = False, pre: str = "none", softmax_cast: bool = False,
               scores_cast: bool = False) -> GraphBuilder:
    """``x [1, T, D] -> (Reshape [T, D] -> Gemm -> Reshape [1, T, 3D]`` (``gemm_reshape``) ``| MatMul + Add``
    (``matmul``) ``| nothing`` (``input``: x is [1, T, 3D])) ``-> Split(axis 2) into q, k, v -> Reshape
    [1, T, H, d] -> Transpose`` (k to [1, H, d, T]) ``-> q @ k -> Softmax -> @ v`` (``attn``) or the three
    heads concatenated (no attention); with ``mask``, GPT-1's causal mask between the scale and the Softmax
    (``w * b + -1e4 * (1 - b)``: Mul, Add); ``softmax_cast``: a float Cast between the Softmax and the value
    MatMul (GPT-2's ``attn_weights.type(value.dtype)``); ``scores_cast``: one between the scale and the Softmax."""
    gb = GraphBuilder(17)
    dm = h * d
    if proj == "input":
        y = gb.input("x", "float32", [1, t, 3 * dm])
    else:
        x = gb.input("x", "float32", [1, t, dm])
        if pre == "layernorm":  # GPT-2's pre-norm block: ln_1 before the fused projection
            x = gb.node("LayerNormalization", [x, gb.const(np.ones([dm], np.float32)), gb.weight([dm])], axis=-1,
                        name="pre_ln")
        elif pre == "relu":
            x = gb.node("Relu", [x], name="pre_relu")
        if proj == "gemm_reshape":
            flat = gb.node("Reshape", [x, gb.ints([t, dm])], name="pre_flat")
            y = gb.node("Gemm", [flat, gb.weight([dm, 3 * dm]), gb.weight([3 * dm])], name="pre_gemm")
            y = gb.node("Reshape", [y, gb.ints([1, t, 3 * dm])], name="pre_unflat")
        else:
            y = gb.node("Add", [gb.node("MatMul", [x, gb.weight([dm, 3 * dm])], name="pre_mm"), gb.weight([3 * dm])],
                        name="pre_bias")
    if split == "split":
        q, k, v = gb.node("Split", [y, gb.ints([dm, dm, dm])], n_out=3, axis=2, name="focus_split")
    else:
        q, k, v = (gb.node("Slice", [y, gb.ints([i * dm]), gb.ints([(i + 1) * dm]), gb.ints([2])], name=f"focus_slice{i}")
                   for i in range(3))
    heads = [gb.node("Transpose", [gb.node("Reshape", [z, gb.ints([1, t, h, d])], name=f"post_heads{i}")],
                     perm=[0, 2, 3, 1] if i == 1 else [0, 2, 1, 3], name=f"post_tp{i}") for i, z in enumerate((q, k, v))]
    if attn:
        s = gb.node("Mul", [gb.node("MatMul", heads[:2], name="post_qk"), gb.const(np.float32(d ** -0.5))],
                    name="post_scale")
        if mask:
            b = np.tril(np.ones([t, t], np.float32)).reshape(1, 1, t, t)
            s = gb.node("Add", [gb.node("Mul", [s, gb.const(b)], name="post_mask_mul"),
                                gb.const(-1e4 * (1 - b))], name="post_mask_add")
        if scores_cast:
            s = gb.node("Cast", [s], to=1, name="post_scores_cast")
        p = gb.node("Softmax", [s], axis=-1, name="post_softmax")
        if softmax_cast:
            p = gb.node("Cast", [p], to=1, name="post_softmax_cast")
        y = gb.node("MatMul", [p, heads[2]], name="post_pv")
        y = gb.node("Reshape", [gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="post_merge_tp"),
                                gb.ints([1, t, dm])], name="post_merge")
    else:
        y = gb.node("Concat", [heads[0], heads[2]], axis=1, name="post_concat")
    gb.output(y)
    return gb


def qkv_split_extra(c: Collector) -> None:
    """The fused q/k/v projection split into heads (QKV_SPLIT)."""
    for label, kw in QKV_SPLIT:
        focus = ["focus_split"] if kw.get("split", "split") == "split" else ["focus_slice0"]
        c.add("x.Split.ctx=qkv_heads.%s.f32.r3" % label, "Split", _qkv_split(**kw), kind="context", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [resize_cubic_extra, layernorm_axes_extra, batchnorm_training_extra,
                                               sdpa_const_query_extra, qkv_split_extra]


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
