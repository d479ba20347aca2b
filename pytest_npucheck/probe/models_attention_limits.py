"""Attention-shaped probes for the classes the held-out agreement run found on RKNN (issue 22).

* ``softmax_size_extra``: the Softmax H*W limit. The single-op probes put a [1, 1, 256, 257]
  Softmax on the CPU (65,792 elements > 65,536), while held-out vision transformers ran their
  257 x 257 and 302 x 302 attention Softmax on the NPU. The family sweeps the token count of the
  same Softmax alone, behind the q @ k^T MatMul, and inside a whole attention (MatMul -> scale ->
  Softmax -> MatMul, which RKNN fuses into exSDPAttention), with 1 and 4 heads.
* ``kv_repeat_expand_extra``: grouped/multi-query attention's key/value repeat
  (``Unsqueeze(2) -> Expand (B, kv, g, T, d) -> Reshape (B, kv*g, T, d)``) by rank and by which
  axes are broadcast: one K/V head (multi-query) vs two, the group axis vs the head axis, rank 4,
  5 and 6, a lone Expand and one feeding the attention.
* ``mask_cast_extra``: mask paths with casts: an int64 padding mask cast to bool (or float) and
  reshaped/unsqueezed to (B, 1, 1, T) before the Where/Add that masks the scores. RKNN moves the
  Cast behind the Reshape, so the Reshape runs on int64 data.

Built with :mod:`.builder` like every family and listed in FAMILIES (ids ``x.<Op>.ctx=<topic>.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import SHORT, Collector, GraphBuilder, llama_attention

# ------------------------------------------------------------------------------------------------
# Softmax size limit: alone, behind the scores MatMul, inside a fused attention
# ------------------------------------------------------------------------------------------------

#: (form, heads, tokens): token counts either side of sqrt(65536) = 256 and the held-out sizes
SOFTMAX_SIZES = (
    ("alone", 1, 257), ("alone", 1, 302),
    ("scores", 1, 256), ("scores", 1, 257), ("scores", 1, 302),
    ("sdpa", 1, 256), ("sdpa", 1, 257), ("sdpa", 1, 302), ("sdpa", 1, 400), ("sdpa", 1, 577),
    ("sdpa", 1, 1024),
    ("sdpa", 4, 257), ("sdpa", 4, 302), ("sdpa", 4, 577),
    ("sdpa_mask", 1, 257), ("sdpa_mask", 4, 302),
)


def _softmax_attention(form: str, heads: int, tokens: int, d: int = 32) -> GraphBuilder:
    """``[1, heads, T, T]`` scores: a graph input (alone), ``q @ k^T`` (scores), or the whole
    attention ``softmax(q @ k^T * s [+ mask]) @ v`` (sdpa, sdpa_mask)."""
    gb = GraphBuilder(17)
    if form == "alone":
        s = gb.input("x", "float32", [1, heads, tokens, tokens])
    else:
        q = gb.input("q", "float32", [1, heads, tokens, d])
        k = gb.input("k", "float32", [1, heads, d, tokens])
        s = gb.node("MatMul", [q, k], name="pre_scores")
        if form.startswith("sdpa"):
            s = gb.node("Mul", [s, gb.const(np.float32(d ** -0.5))], name="pre_scale")
        if form == "sdpa_mask":
            s = gb.node("Add", [s, gb.input("m", "float32", [1, 1, 1, tokens])], name="pre_mask")
    p = gb.node("Softmax", [s], axis=-1, name="focus_softmax")
    if form.startswith("sdpa"):
        p = gb.node("MatMul", [p, gb.input("v", "float32", [1, heads, tokens, d])], name="post_attn_v")
    gb.output(p)
    return gb


def softmax_size_extra(c: Collector) -> None:
    """The Softmax of [1, h, T, T] attention scores around the 65,536-element limit (SOFTMAX_SIZES)."""
    for form, heads, tokens in SOFTMAX_SIZES:
        c.add("x.Softmax.ctx=attn_size.%s.h=%d.t=%d.f32.r4" % (form, heads, tokens), "Softmax",
              _softmax_attention(form, heads, tokens), kind="context", focus=["focus_softmax"])


# ------------------------------------------------------------------------------------------------
# Key/value repeat of grouped / multi-query attention: Expand by rank and broadcast pattern
# ------------------------------------------------------------------------------------------------

#: (label, source shape, expanded shape, tail): the repeat as transformers' repeat_kv writes it
#: (Unsqueeze(2) -> Expand -> Reshape) and the other broadcast patterns of the same rank
KV_REPEAT = (
    ("mqa", [1, 1, 1, 32, 16], [1, 1, 4, 32, 16], "reshape"),
    ("mqa.g=2", [1, 1, 1, 32, 16], [1, 1, 2, 32, 16], "reshape"),
    ("mqa.t=15.d=64", [1, 1, 1, 15, 64], [1, 1, 4, 15, 64], "reshape"),
    ("gqa.kv=2", [1, 2, 1, 32, 16], [1, 2, 2, 32, 16], "reshape"),
    ("gqa.kv=4", [1, 4, 1, 32, 16], [1, 4, 2, 32, 16], "reshape"),
    ("head_axis", [1, 1, 1, 32, 16], [1, 4, 1, 32, 16], "reshape"),
    ("batch2.mqa", [2, 1, 1, 32, 16], [2, 1, 4, 32, 16], "reshape"),
    ("mqa", [1, 1, 32, 16], [1, 4, 32, 16], "none"),
    ("mqa", [1, 1, 1, 1, 32, 16], [1, 1, 1, 4, 32, 16], "reshape"),
    ("gqa.kv=2", [1, 1, 2, 1, 32, 16], [1, 1, 2, 2, 32, 16], "reshape"),
    ("mqa.attn", [1, 1, 1, 32, 16], [1, 1, 4, 32, 16], "attn"),
    ("gqa.kv=2.attn", [1, 2, 1, 32, 16], [1, 2, 2, 32, 16], "attn"),
    ("mqa.scores", [1, 1, 1, 32, 16], [1, 1, 4, 32, 16], "scores"),
    ("gqa.kv=2.scores", [1, 2, 1, 32, 16], [1, 2, 2, 32, 16], "scores"),
    ("mqa.from_transpose", [1, 1, 1, 32, 16], [1, 1, 4, 32, 16], "reshape.transpose"),
    ("gqa.kv=2.from_transpose", [1, 2, 1, 32, 16], [1, 2, 2, 32, 16], "reshape.transpose"),
    ("mqa.from_reshape", [1, 1, 1, 32, 16], [1, 1, 4, 32, 16], "reshape.reshape"),
)


def _kv_repeat(src: list[int], dst: list[int], tail: str) -> GraphBuilder:
    """Relu(K) of the source heads, Unsqueeze to the source shape, Expand, then Reshape to
    (B, heads, T, d) and a Relu (reshape), nothing (none), or the scores MatMul of an attention
    (attn: q @ k^T -> Softmax -> @ v)."""
    gb = GraphBuilder(17)
    t, d = src[-2], src[-1]
    if len(src) == 4:  # rank 4: the head axis itself is broadcast (no Unsqueeze)
        k = gb.node("Relu", [gb.input("k", "float32", src)], name="pre_relu")
    elif tail.endswith((".transpose", ".reshape")):  # K heads from a projection: (1, T, kv*d) -> (1, kv, T, d)
        kv, t_, d_ = src[1], src[-2], src[-1]
        k = gb.node("MatMul", [gb.input("k", "float32", [1, t_, 32]), gb.weight([32, kv * d_])], name="pre_proj")
        if tail.endswith(".transpose"):
            k = gb.node("Transpose", [gb.node("Reshape", [k, gb.ints([1, t_, kv, d_])], name="pre_view")],
                        perm=[0, 2, 1, 3], name="pre_heads")
        else:
            k = gb.node("Reshape", [k, gb.ints([1, kv, t_, d_])], name="pre_view")
        k = gb.node("Unsqueeze", [k, gb.ints([2])], name="pre_unsq")
        tail = tail.split(".")[0]
    else:  # the group axis (rank - 3) is unsqueezed, as repeat_kv does
        squeezed = [n for i, n in enumerate(src) if i != len(src) - 3]
        k = gb.node("Relu", [gb.input("k", "float32", squeezed)], name="pre_relu")
        k = gb.node("Unsqueeze", [k, gb.ints([len(src) - 3])], name="pre_unsq")
    e = gb.node("Expand", [k, gb.ints(dst)], name="focus_expand")
    heads = int(np.prod(dst[:-2])) // dst[0]
    if tail == "none" and len(dst) == 4:
        y = e
    else:
        y = gb.node("Reshape", [e, gb.ints([dst[0], heads, t, d])], name="post_reshape")
    if tail in ("attn", "scores"):
        q = gb.input("q", "float32", [dst[0], heads, t, d])
        kt = gb.node("Transpose", [y], perm=[0, 1, 3, 2], name="post_kt")
        y = gb.node("MatMul", [q, kt], name="post_scores")
    if tail == "attn":
        s = gb.node("Softmax", [y], axis=-1, name="post_softmax")
        y = gb.node("MatMul", [s, gb.input("v", "float32", [dst[0], heads, t, d])], name="post_attn_v")
    elif tail != "scores":
        y = gb.node("Relu", [y], name="post_relu")
    gb.output(y)
    return gb


#: (label, keyword arguments of builder.llama_attention): multi-query attention (one K/V head) in a
#: whole Llama block, beside the x.Expand.ctx=gqa_* probes (whose kv=1 forms ran their K repeat on the CPU)
LLAMA_KV1 = (
    ("k.h=4.attn=scores", {"q_heads": 4, "attn": "scores"}, "k_expand"),
    ("v.h=4", {"q_heads": 4}, "v_expand"),
    ("k.h=2", {"q_heads": 2}, "k_expand"),
    ("k.h=8", {"q_heads": 8, "dim": 128}, "k_expand"),
    ("k.h=4.t=15", {"q_heads": 4, "tokens": 15}, "k_expand"),
    ("k.h=4.noscale", {"q_heads": 4, "scale": False}, "k_expand"),
)


def kv_repeat_expand_extra(c: Collector) -> None:
    """The K/V repeat of grouped and multi-query attention, by rank and broadcast pattern (KV_REPEAT)."""
    for label, src, dst, tail in KV_REPEAT:
        c.add("x.Expand.ctx=kv_repeat.%s.f32.r%d" % (label, len(dst)), "Expand", _kv_repeat(src, dst, tail), kind="context",
              focus=["focus_expand"])
    for label, kw, focus in LLAMA_KV1:
        c.add("x.Expand.ctx=kv_repeat.llama.kv=1.%s.f32.r5" % label, "Expand",
              llama_attention(kv_heads=1, k_pre="none", **kw), kind="context", focus=[focus])


# ------------------------------------------------------------------------------------------------
# Mask paths with casts: int64 padding mask -> Cast -> Reshape/Unsqueeze -> Where/Add
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _mask_path): the transformers form first, then one change each
MASK_CAST = (
    ("i64.bool.reshape.where", {}),
    ("i64.bool.unsqueeze.where", {"layout": "unsqueeze"}),
    ("i64.bool.reshape.not_where", {"use": "not_where"}),
    ("i64.bool.reshape.expand_where", {"use": "expand_where"}),
    ("i64.bool.none.where", {"layout": "none"}),
    ("i64.f32.reshape.add", {"to": "float32", "use": "add"}),
    ("i32.bool.reshape.where", {"src": "int32"}),
    ("bool.bool.reshape.where", {"src": "bool"}),
    ("i64.bool.reshape.where.t=15", {"t": 15}),
    ("f32.greater.reshape.where", {"src": "float32", "to": "greater"}),
    ("bool.bool.none.where_full", {"src": "bool", "layout": "none", "use": "where_full"}),
    ("bool.bool.reshape.where_relu", {"src": "bool", "use": "where_relu"}),
    ("bool.bool.reshape.where_add_softmax", {"src": "bool", "use": "where_add"}),
    ("bool.bool.none.where_input", {"src": "bool", "layout": "input"}),
    ("i64.bool.unsqueeze.expand_where", {"layout": "unsqueeze", "use": "expand_where"}),
    ("i64.f32.unsqueeze.add", {"to": "float32", "layout": "unsqueeze", "use": "add"}),
    ("i32.bool.reshape.expand_where", {"src": "int32", "use": "expand_where"}),
    ("bool.f32.reshape.add", {"src": "bool", "to": "float32", "use": "add"}),
    ("i64.f32.reshape.add.t=15", {"to": "float32", "use": "add", "t": 15}),
    # a constant (B, 1, 1, T) mask straight into Where -> Softmax (SEW-D's relative-attention mask, held out)
    ("bool.bool.const.where", {"src": "bool", "layout": "const"}),
    ("bool.bool.const.not_where", {"src": "bool", "layout": "const", "use": "not_where"}),
    # ... a uniform one (SEW-D's: all False, Where(m, -big, scores) is the scores)
    ("bool.bool.const_false.where_big_first", {"src": "bool", "layout": "const_false", "use": "where_big_first"}),
    ("bool.bool.const_true.where", {"src": "bool", "layout": "const_true"}),
)

_ONNX_DTYPE = {"bool": 9, "float32": 1, "int64": 7, "int32": 6}


def _mask_path(src: str = "int64", to: str = "bool", layout: str = "reshape", use: str = "where",
               t: int = 32, h: int = 4) -> GraphBuilder:
    """``mask (1, T) -> Cast(to) -> Reshape/Unsqueeze (1, 1, 1, T) -> [Not] -> Where(m, scores,
    -big)`` (or ``Add((1 - m) * -big)`` for a float mask) -> Softmax over [1, h, T, T] scores."""
    gb = GraphBuilder(17)
    scores = gb.input("s", "float32", [1, h, t, t])
    if layout.startswith("const"):  # a constant bool (1, 1, 1, T) mask: its last quarter masked, or uniform
        keep = {"const": t - t // 4, "const_false": 0, "const_true": t}[layout]
        m = gb.const(np.arange(t).reshape(1, 1, 1, t) < keep)
        if use == "not_where":
            y = gb.node("Where", [gb.node("Not", [m], name="post_not"), gb.const(np.float32(-1e4)), scores],
                        name="post_where")
        elif use == "where_big_first":
            y = gb.node("Where", [m, gb.const(np.float32(-1e4)), scores], name="post_where")
        else:
            y = gb.node("Where", [m, scores, gb.const(np.float32(-1e4))], name="post_where")
        gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
        return gb
    mask = gb.input("mask", src, [1, 1, t, t] if use == "where_full" else [1, 1, 1, t] if layout == "input" else [1, t])
    if to == "greater":  # a bool mask computed from a float one, no integer anywhere
        m = gb.node("Greater", [mask, gb.const(np.float32(0.5))], name="focus_cast")
    else:
        m = mask if src == to else gb.node("Cast", [mask], to=_ONNX_DTYPE[to], name="focus_cast")
    if layout == "reshape":
        m = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="focus_reshape")
    elif layout == "unsqueeze":
        m = gb.node("Unsqueeze", [m, gb.ints([1, 2])], name="focus_reshape")
    if use == "add":
        inv = gb.node("Sub", [gb.const(np.float32(1.0)), m], name="post_inv")
        y = gb.node("Add", [scores, gb.node("Mul", [inv, gb.const(np.float32(-1e4))], name="post_big")],
                    name="post_add")
    else:
        if use == "expand_where":
            m = gb.node("Expand", [m, gb.ints([1, h, t, t])], name="post_expand")
        if use == "where_relu":  # the masked scores go to a Relu, not a Softmax
            gb.output(gb.node("Relu", [gb.node("Where", [m, scores, gb.const(np.float32(-1e4))], name="post_where")],
                              name="post_relu"))
            return gb
        if use == "where_add":  # Where(m, 0, -big) as an additive mask
            y = gb.node("Add", [scores, gb.node("Where", [m, gb.const(np.float32(0.0)), gb.const(np.float32(-1e4))],
                                                name="post_where")], name="post_add")
        elif use == "not_where":
            y = gb.node("Where", [gb.node("Not", [m], name="post_not"), gb.const(np.float32(-1e4)), scores],
                        name="post_where")
        else:
            y = gb.node("Where", [m, scores, gb.const(np.float32(-1e4))], name="post_where")
    gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
    return gb


#: (label, keyword arguments of _mask_lookup): the TorchScript export of transformers' padding-mask lookup
#: and its variants: with or without the Cast in front (int64 or float data through the chain), the mask
#: made by an Equal, a longer mask, the chain written as two Unsqueezes (``mask[:, None, None, :]``)
MASK_LOOKUP = (
    ("i64.cast.flatten.gather", {}),
    ("bool.flatten.gather", {"src": "bool"}),
    ("i64.cast.flatten.gather.no_tail", {"tail": "none"}),
    ("i64.cast.gather", {"flatten": False}),
    ("i64.flatten.gather", {"maker": "none"}),
    ("f32.flatten.gather", {"src": "float32", "maker": "none"}),
    ("i64.equal.flatten.gather", {"maker": "equal"}),
    ("i64.cast.flatten.gather.t=40", {"t": 40}),
    ("i64.cast.unsqueeze2", {"layout": "unsqueeze2"}),
    ("i64.unsqueeze2", {"layout": "unsqueeze2", "maker": "none"}),
)


def _mask_lookup(src: str = "int64", flatten: bool = True, tail: str = "where", t: int = 16, h: int = 4,
                 maker: str = "cast", layout: str = "lookup") -> GraphBuilder:
    """``mask (1, T) [-> Cast bool] -> Flatten (T, 1) -> Gather(indices (1, 1, 1, T)) -> Reshape (T) ->
    Reshape (1, 1, 1, T) -> Cast bool -> And(causal) -> Expand (1, h, T, T) -> Where -> Softmax``, as the
    TorchScript exporter writes ``padding_mask[batch_idx, kv_idx]`` with static shapes. ``maker``: what makes
    the bool mask in front of the chain (``cast``, ``equal``: ``mask == 1``, ``none``: the chain runs on the
    input's own data and the Cast after it makes the mask); ``layout="unsqueeze2"``: the chain is
    ``Unsqueeze(1) -> Unsqueeze(2)`` instead of the lookup."""
    gb = GraphBuilder(17)
    m = gb.input("mask", src, [1, t])
    if src != "bool" and maker == "cast":
        m = gb.node("Cast", [m], to=9, name="pre_cast")
    elif src != "bool" and maker == "equal":
        m = gb.node("Equal", [m, gb.const(np.array(1, dtype=np.int64))], name="pre_cast")
    idx = gb.const(np.arange(t, dtype=np.int64).reshape(1, 1, 1, t))
    if layout == "unsqueeze2":
        m = gb.node("Unsqueeze", [m, gb.ints([1])], name="pre_flatten")  # (1, 1, T)
        m = gb.node("Unsqueeze", [m, gb.ints([2])], name="focus_reshape")  # (1, 1, 1, T)
    else:
        if flatten:
            m = gb.node("Flatten", [m], axis=2, name="pre_flatten")  # (T, 1)
            m = gb.node("Gather", [m, idx], axis=0, name="pre_gather")  # (1, 1, 1, T, 1)
        else:
            m = gb.node("Gather", [m, idx], axis=1, name="pre_gather")
        m = gb.node("Reshape", [m, gb.ints([t])], name="pre_flat")
        m = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="focus_reshape")
    if tail == "where":
        m = gb.node("Cast", [m], to=9, name="post_cast")
        m = gb.node("And", [gb.const(np.tril(np.ones([t, t], dtype=bool))[None, None]), m], name="post_and")
        m = gb.node("Expand", [m, gb.ints([1, h, t, t])], name="post_expand")
        y = gb.node("Where", [m, gb.input("s", "float32", [1, h, t, t]), gb.const(np.float32(-1e4))],
                    name="post_where")
        gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
    else:
        gb.output(gb.node("Cast", [m], to=1, name="post_cast"))
    return gb


def mask_lookup_extra(c: Collector) -> None:
    """The TorchScript padding-mask lookup (MASK_LOOKUP); the nodes under test are the layout ops of the
    chain (RKNN merges them into one Reshape; on integer data it runs on the CPU)."""
    for label, kw in MASK_LOOKUP:
        gb = _mask_lookup(**kw)
        focus = [n.name for n in gb.nodes if n.name.startswith("pre_") and n.op_type not in ("Cast", "Equal")]
        c.add("x.Reshape.ctx=mask_lookup.%s.%s.r2" % (label, SHORT[kw.get("src", "int64")]), "Reshape", gb,
              kind="context", dtype=kw.get("src", "int64"), focus=focus + ["focus_reshape"])


def mask_cast_extra(c: Collector) -> None:
    """A padding mask cast and reshaped in front of the scores it masks (MASK_CAST)."""
    for label, kw in MASK_CAST:
        gb = _mask_path(**kw)
        focus = [n.name for n in gb.nodes if n.name.startswith("focus_")]
        op = "Reshape" if "focus_reshape" in focus else "Cast" if focus else "Where"
        focus = focus or ["post_where"]
        c.add("x.%s.ctx=mask_cast.%s.%s.r2" % (op, label, SHORT[kw.get("src", "int64")]), op, gb, kind="context", dtype=kw.get("src", "int64"),
              focus=focus)


# ------------------------------------------------------------------------------------------------
# Expand by how its shape input is written: the full result shape, or 1 wherever the input already
# has the size (bidirectional broadcasting, as the dynamo exporter writes repeat_interleave)
# ------------------------------------------------------------------------------------------------

#: (label, input shape, shape input of the Expand): "full" shapes spell out the result, "ones" shapes
#: write 1 for every axis that is not expanded; ranks 3 to 6, the expanded axis first/middle/last
EXPAND_SHAPE = (
    ("r5.kv=1.ones", [1, 1, 1, 8, 8], [1, 1, 4, 1, 1]),
    ("r5.kv=1.full", [1, 1, 1, 8, 8], [1, 1, 4, 8, 8]),
    ("r5.kv=2.ones", [1, 2, 1, 8, 8], [1, 1, 4, 1, 1]),
    ("r5.kv=2.full", [1, 2, 1, 8, 8], [1, 2, 4, 8, 8]),
    ("r5.kv=1.ones.t=32.d=16", [1, 1, 1, 32, 16], [1, 1, 4, 1, 1]),
    ("r5.kv=1.partial", [1, 1, 1, 8, 8], [1, 1, 4, 8, 1]),
    ("r5.kv=1.short", [1, 1, 1, 8, 8], [4, 1, 1]),
    ("r4.ones", [1, 1, 8, 8], [1, 4, 1, 1]),
    ("r4.full", [1, 1, 8, 8], [1, 4, 8, 8]),
    ("r4.ones.axis3", [1, 8, 8, 1], [1, 1, 1, 4]),
    ("r3.ones", [1, 8, 1], [1, 1, 4]),
    ("r3.ones.axis0", [1, 8, 8], [4, 1, 1]),
    ("r6.ones", [1, 1, 1, 1, 8, 8], [1, 1, 1, 4, 1, 1]),
)


def _expand_shape(src: list[int], shape: list[int], pre: str = "unsqueeze") -> GraphBuilder:
    """``x -> Relu [-> Unsqueeze] -> Expand(shape) -> Reshape (merge the expanded axis) -> Relu``; for the
    rank-5 key/value repeat the Relu output is rank 4 and Unsqueeze(2) makes the group axis, as
    repeat_interleave does."""
    gb = GraphBuilder(17)
    unsq = len(src) == 5 and src[2] == 1 and pre == "unsqueeze"
    x = gb.input("x", "float32", src[:2] + src[3:] if unsq else src)
    y = gb.node("Relu", [x], name="pre_relu")
    if unsq:
        y = gb.node("Unsqueeze", [y, gb.ints([2])], name="pre_unsq")
    e = gb.node("Expand", [y, gb.ints(shape)], name="focus_expand")
    out = list(np.broadcast_shapes(tuple(src), tuple(shape)))
    y = gb.node("Reshape", [e, gb.ints([int(np.prod(out[:-2])), out[-2], out[-1]])], name="post_reshape")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def expand_shape_extra(c: Collector) -> None:
    """Expand with its shape input written in full or with ones (EXPAND_SHAPE)."""
    for label, src, shape in EXPAND_SHAPE:
        c.add("x.Expand.ctx=expand_shape.%s.f32.r%d" % (label, len(src)), "Expand", _expand_shape(src, shape),
              kind="context", focus=["focus_expand"])


# ------------------------------------------------------------------------------------------------
# The K/V repeat between two MatMuls: the projection before, the attention product after
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _repeat_between): the multi-query repeat as the dynamo exporter writes
#: repeat_interleave (shape input with ones) between MatMuls first, then one change each
REPEAT_BETWEEN = (
    ("kv=1.ones", {}),
    ("kv=1.full", {"shape": "full"}),
    ("kv=2.ones", {"kv": 2}),
    ("kv=1.r4", {"rank": 4}),
    ("kv=1.pre=none", {"pre": "none"}),
    ("kv=1.post=none", {"post": "none"}),
    ("kv=1.pre=matmul_relu", {"pre": "matmul_relu"}),
    ("kv=1.pre=heads", {"pre": "heads"}),
    ("kv=2.pre=heads", {"pre": "heads", "kv": 2}),
    ("kv=1.post=transpose_mul", {"post": "transpose_mul"}),
)


def _repeat_between(kv: int = 1, rank: int = 5, shape: str = "ones", pre: str = "matmul", post: str = "matmul",
                    t: int = 8, d: int = 8, heads: int = 4) -> GraphBuilder:
    """``K (1, kv, T, d)`` computed by ``pre`` (a MatMul; none: a graph input; matmul_relu: a MatMul then
    a Relu; where: a Where of a bool input; relu: a Relu of the input; heads: a (1, T, kv*d) projection viewed as (1, T, kv, d) and transposed), repeated to
    ``heads`` (rank 5: Unsqueeze(2) -> Expand -> Reshape; rank 4: Expand of the head axis), then read
    by ``post`` (q @ K as a MatMul; transpose_mul: Transpose -> Mul scale -> MatMul; add_softmax: added to
    scores, then a Softmax; none: a Relu)."""
    gb = GraphBuilder(17)
    if pre == "heads":
        x = gb.node("MatMul", [gb.input("x", "float32", [1, t, 32]), gb.weight([32, kv * d])], name="pre_proj")
        k = gb.node("Transpose", [gb.node("Reshape", [x, gb.ints([1, t, kv, d])], name="pre_view")],
                    perm=[0, 2, 1, 3], name="pre_heads")
    else:
        k = gb.input("x", "float32", [1, kv, t, d])
        if pre.startswith("matmul"):
            k = gb.node("MatMul", [k, gb.weight([d, d])], name="pre_proj")
        if pre == "matmul_relu":
            k = gb.node("Relu", [k], name="pre_relu")
        if pre == "where":  # a mask computed in the graph (Doge's dynamic mask: Where(cond, x, -big))
            k = gb.node("Where", [gb.input("cond", "bool", [1, kv, t, d]), k, gb.const(np.float32(-1e4))],
                        name="pre_where")
        if pre == "relu":
            k = gb.node("Relu", [k], name="pre_relu")
    g = heads // kv
    if rank == 5:
        k = gb.node("Unsqueeze", [k, gb.ints([2])], name="pre_unsq")
        target = [1, 1, g, 1, 1] if shape == "ones" else [1, kv, g, t, d]
    else:
        target = [1, heads, 1, 1] if shape == "ones" else [1, heads, t, d]
    e = gb.node("Expand", [k, gb.ints(target)], name="focus_expand")
    y = gb.node("Reshape", [e, gb.ints([1, heads, t, d])], name="post_view")
    if post == "transpose_mul":
        y = gb.node("Mul", [gb.node("Transpose", [y], perm=[0, 1, 3, 2], name="post_kt"),
                            gb.const(np.float32(d ** -0.5))], name="post_scale")
        y = gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, d]), y], name="post_scores")
    elif post == "matmul":
        y = gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, t]), y], name="post_attn")
    elif post == "add_softmax":  # added to the attention scores as a mask, then Softmax
        y = gb.node("Softmax", [gb.node("Add", [gb.input("s", "float32", [1, heads, t, d]), y], name="post_add")],
                    axis=-1, name="post_softmax")
    else:
        y = gb.node("Relu", [y], name="post_relu")
    gb.output(y)
    return gb


def repeat_between_matmuls_extra(c: Collector) -> None:
    """The K/V repeat Expand between the projection and the attention MatMul (REPEAT_BETWEEN)."""
    for label, kw in REPEAT_BETWEEN:
        c.add("x.Expand.ctx=repeat_between.%s.f32.r%d" % (label, kw.get("rank", 5)), "Expand",
              _repeat_between(**kw), kind="context", focus=["focus_expand"])


def _where_reshape_softmax(mask: list[int], heads: int = 2, t: int = 16, merge: bool = True,
                           const_mask: bool = False) -> GraphBuilder:
    """FSMT's masked attention: ``q @ k -> Where(Cast(mask) to bool, -big, scores) -> Reshape (H, T, T) ->
    Softmax -> @ v``; the mask (1, 1, 1, T) or (1, 1, T, T); ``merge`` False: no Reshape but a Relu between
    the Where and the Softmax."""
    gb = GraphBuilder(17)
    s = gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, 8]), gb.input("k", "float32", [1, heads, 8, t])],
                name="pre_scores")
    if const_mask:  # SEW-D: a constant condition, all False (nothing masked)
        m = gb.const(np.zeros(mask, dtype=bool))
    else:
        m = gb.node("Cast", [gb.input("m", "int64", mask)], to=9, name="pre_mask")
    w = gb.node("Where", [m, gb.const(np.float32(-3.4e38)), s], name="pre_where")
    w = gb.node("Reshape", [w, gb.ints([heads, t, t])], name="pre_merge") if merge else \
        gb.node("Relu", [w], name="pre_relu")
    p = gb.node("Softmax", [w], axis=-1, name="focus_softmax")
    v = gb.input("v", "float32", [heads, t, 8] if merge else [1, heads, t, 8])
    gb.output(gb.node("MatMul", [p, v], name="post_pv"))
    return gb


def where_softmax_extra(c: Collector) -> None:
    """A Softmax behind a Where of a padding mask, through the Reshape that merges batch and heads (FSMT):
    the mask broadcast over the queries (1, 1, 1, T) or not (1, 1, T, T), 2 and 4 heads, and a Relu instead."""
    for label, mask, heads, merge in (("row_mask.h=2", [1, 1, 1, 16], 2, True), ("row_mask.h=4", [1, 1, 1, 16], 4, True),
                                      ("full_mask.h=2", [1, 1, 16, 16], 2, True),
                                      ("row_mask.relu.h=2", [1, 1, 1, 16], 2, False)):
        c.add("x.Softmax.ctx=where_mask.%s.f32.r3" % label, "Softmax", _where_reshape_softmax(mask, heads, merge=merge),
              kind="context", focus=["focus_softmax"])
    c.add("x.Softmax.ctx=where_mask.const_row_mask.h=2.f32.r3", "Softmax",
          _where_reshape_softmax([1, 1, 1, 16], 2, const_mask=True), kind="context", focus=["focus_softmax"])


FAMILIES: list[Callable[[Collector], None]] = [softmax_size_extra, kv_repeat_expand_extra, mask_cast_extra,
                                                expand_shape_extra, repeat_between_matmuls_extra, mask_lookup_extra,
                                                where_softmax_extra]
