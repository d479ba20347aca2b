"""The multi-query K/V repeat behind a long key path on RKNN (issue 22).

The rknn 2.5.0 table runs the K/V repeat Expand of multi-query attention (one K/V head) on the CPU
when the projection MatMul reaches it through element-wise and layout ops, walking at most 8 of
them. TorchScript exports of transformers decoders with QK-norm and rotary embeddings put more
between them: ``MatMul -> Reshape -> Cast -> RMSNorm (Pow, ReduceMean, Add, Sqrt, Div, Mul, Mul)
-> Cast -> Transpose -> rotary (Mul cos, rotate_half: Slice/Neg/Concat, Mul sin, Add) -> Cast ->
Unsqueeze -> Expand -> Reshape -> attention MatMul``, and the held-out models ran that Expand on
the CPU. The family builds the path piece by piece (norm, rotary, casts) with one and two K/V
heads.

Built like the families of models_extra.py and listed in FAMILIES (ids ``x.Expand.ctx=kv_path.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand as _rand

#: (label, keyword arguments of _kv_path): the longest path first, then one piece left out each
KV_PATHS = (
    ("norm.rotary.casts.kv=1", {}),
    ("norm.rotary.casts.kv=2", {"kv": 2}),
    ("norm.rotary.kv=1", {"casts": False}),
    ("rotary.casts.kv=1", {"norm": False}),
    ("norm.casts.kv=1", {"rotary": False}),
    ("rotary.kv=1", {"norm": False, "casts": False}),
    # Phi-3: one fused q/k/v projection sliced, and a rotary embedding over part of the head
    ("qkv.partial_rotary.kv=1", {"norm": False, "qkv": True, "partial": True}),
    ("qkv.partial_rotary.kv=2", {"norm": False, "qkv": True, "partial": True, "kv": 2}),
    ("qkv.rotary.kv=1", {"norm": False, "qkv": True}),
    # GPT-BigCode (dynamo): one fused k/v projection Split in two, no rotary
    ("kv_split.kv=1", {"norm": False, "rotary": False, "casts": False, "qkv": "split"}),
    ("kv_split.kv=2", {"norm": False, "rotary": False, "casts": False, "qkv": "split", "kv": 2}),
)


def _kv_path(kv: int = 1, norm: bool = True, rotary: bool = True, casts: bool = True, t: int = 16, d: int = 16,
             heads: int = 2, qkv: bool | str = False, partial: bool = False) -> GraphBuilder:
    """K = x @ Wk viewed as (1, T, kv, d) [-> Cast] [-> RMSNorm over d] [-> Cast] -> Transpose (1, kv, T, d)
    [-> rotary] [-> Cast] -> Unsqueeze(2) -> Expand (1, kv, heads/kv, T, d) -> Reshape (1, heads, T, d) ->
    Transpose -> q @ K^T -> Softmax. ``qkv``: K is a Slice of one (1, T, (heads + 2 kv) d) projection;
    ``qkv='split'``: K is the first output of a Split of one (1, T, 2 kv d) k/v projection; ``partial``: the
    rotary embedding turns the first half of the head only (Slice -> rotary -> Concat
    with the rest)."""
    gb = GraphBuilder(17)

    def cast(x: str, name: str) -> str:
        return gb.node("Cast", [x], to=1, name=name) if casts else x

    x = gb.input("x", "float32", [1, t, 32])
    if qkv == "split":
        kvp = gb.node("MatMul", [x, gb.weight([32, 2 * kv * d])], name="pre_proj")
        k = gb.node("Split", [kvp, gb.ints([kv * d, kv * d])], n_out=2, axis=2, name="pre_split")[0]
    elif qkv:
        k = gb.node("MatMul", [x, gb.weight([32, (heads + 2 * kv) * d])], name="pre_proj")
        k = gb.node("Slice", [k, gb.ints([heads * d]), gb.ints([(heads + kv) * d]), gb.ints([2])], name="pre_k")
    else:
        k = gb.node("MatMul", [x, gb.weight([32, kv * d])], name="pre_proj")
    k = cast(gb.node("Reshape", [k, gb.ints([1, t, kv, d])], name="pre_view"), "pre_cast0")
    if norm:
        var = gb.node("ReduceMean", [gb.node("Pow", [k, gb.const(np.float32(2.0))], name="pre_pow")], axes=[-1],
                      keepdims=1, name="pre_mean")
        rms = gb.node("Sqrt", [gb.node("Add", [var, gb.const(np.float32(1e-6))], name="pre_eps")], name="pre_sqrt")
        k = gb.node("Mul", [k, gb.node("Div", [gb.const(np.float32(1.0)), rms], name="pre_inv")], name="pre_scale")
        k = gb.node("Mul", [k, gb.const(_rand([d], scale=1.0) + 0.5)], name="pre_gamma")
        k = cast(k, "pre_cast1")
    k = gb.node("Transpose", [k], perm=[0, 2, 1, 3], name="pre_heads")
    if rotary:
        whole, rest = k, None
        r = d // 2 if partial else d
        if partial:
            rest = gb.node("Slice", [whole, gb.ints([r]), gb.ints([d]), gb.ints([3])], name="pre_pass")
            k = gb.node("Slice", [whole, gb.ints([0]), gb.ints([r]), gb.ints([3])], name="pre_rot_part")
        half = r // 2
        x1 = gb.node("Slice", [k, gb.ints([0]), gb.ints([half]), gb.ints([3])], name="pre_x1")
        x2 = gb.node("Slice", [k, gb.ints([half]), gb.ints([r]), gb.ints([3])], name="pre_x2")
        rot = gb.node("Concat", [gb.node("Neg", [x2], name="pre_neg"), x1], axis=-1, name="pre_rot")
        k = gb.node("Add", [gb.node("Mul", [k, gb.const(_rand([1, 1, t, r], scale=1.0))], name="pre_cos"),
                            gb.node("Mul", [rot, gb.const(_rand([1, 1, t, r], scale=1.0))], name="pre_sin")],
                    name="pre_rope")
        if rest is not None:
            k = gb.node("Concat", [k, rest], axis=-1, name="pre_join")
    k = cast(k, "pre_cast2")
    k = gb.node("Unsqueeze", [k, gb.ints([2])], name="pre_unsq")
    k = gb.node("Expand", [k, gb.ints([1, kv, heads // kv, t, d])], name="focus_expand")
    k = gb.node("Reshape", [k, gb.ints([1, heads, t, d])], name="post_view")
    kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="post_kt")
    s = gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, d]), kt], name="post_scores")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def kv_path_extra(c: Collector) -> None:
    """The K/V repeat Expand behind long key paths (KV_PATHS)."""
    for label, kw in KV_PATHS:
        c.add("x.Expand.ctx=kv_path.%s.f32.r5" % label, "Expand", _kv_path(**kw), kind="context",
              focus=["focus_expand"])


def _kv_tail(tail: str, kv: int = 1, t: int = 16, heads: int = 2, nope: int = 8, rope: int = 8,
             sub: bool = False) -> GraphBuilder:
    """The repeat read through ops after it. ``tail`` 'scatter' (multi-head latent attention as TorchScript
    writes DeepSeek-V3's key): k_pe = x @ Wr viewed (1, kv, T, rope) -> Mul(cos) -> Expand (1, heads, T, rope)
    -> ScatterND into the key after the per-head k_nope (two ScatterNDs into a constant buffer) ->
    Transpose -> q @ K^T; 'concat': the same key made by Concat(k_nope, k_pe) on the last axis (MiniCPM3's
    and the dynamo exporter's form); 'cast': the grouped repeat (Unsqueeze -> Expand rank 5 -> Reshape)
    read through a Cast (float32 -> float32) before the Transpose (FLINT). ``sub``: the rotary part
    ends in a Sub (x * cos - x * sin) before the Expand."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, t, 32])
    d = nope + rope
    if tail == "cast":
        k = gb.node("MatMul", [x, gb.weight([32, kv * d])], name="pre_proj")
        k = gb.node("Transpose", [gb.node("Reshape", [k, gb.ints([1, t, kv, d])], name="pre_view")],
                    perm=[0, 2, 1, 3], name="pre_heads")
        k = gb.node("Unsqueeze", [k, gb.ints([2])], name="pre_unsq")
        k = gb.node("Expand", [k, gb.ints([1, kv, heads // kv, t, d])], name="focus_expand")
        k = gb.node("Reshape", [k, gb.ints([1, heads, t, d])], name="post_view")
        k = gb.node("Cast", [k], to=1, name="post_cast")
    else:
        kn = gb.node("MatMul", [x, gb.weight([32, heads * nope])], name="pre_nope")
        kn = gb.node("Transpose", [gb.node("Reshape", [kn, gb.ints([1, t, heads, nope])], name="pre_nope_view")],
                     perm=[0, 2, 1, 3], name="pre_nope_heads")
        kr = gb.node("MatMul", [x, gb.weight([32, kv * rope])], name="pre_proj")
        kr = gb.node("Transpose", [gb.node("Reshape", [kr, gb.ints([1, t, kv, rope])], name="pre_view")],
                     perm=[0, 2, 1, 3], name="pre_heads")
        kr = gb.node("Mul", [kr, gb.const(_rand([1, 1, t, rope], scale=1.0))], name="pre_cos")
        if sub:  # DeepSeek-V3's interleaved rotary as TorchScript writes it: x * cos - x' * sin
            kr = gb.node("Sub", [kr, gb.node("Mul", [kr, gb.const(_rand([1, 1, t, rope], scale=1.0))],
                                             name="pre_sin")], name="pre_rot_sub")
        kr = gb.node("Expand", [kr, gb.ints([1, heads, t, rope])], name="focus_expand")
        if tail == "concat":
            k = gb.node("Concat", [kn, kr], axis=-1, name="post_join")
        else:
            idx = np.stack(np.meshgrid(np.arange(1), np.arange(heads), np.arange(t), np.arange(d), indexing="ij"), -1)
            buf = gb.const(np.zeros([1, heads, t, d], np.float32))
            k = gb.node("ScatterND", [buf, gb.const(idx[..., :nope, :].astype(np.int64)), kn], name="post_put_nope")
            k = gb.node("ScatterND", [k, gb.const(idx[..., nope:, :].astype(np.int64)), kr], name="post_put_rope")
    kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="post_kt")
    s = gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, d]), kt], name="post_scores")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def kv_tail_extra(c: Collector) -> None:
    """The K/V repeat read through a ScatterND, a Concat or a Cast on its way to the scores MatMul, with
    one K/V head and, for the grouped repeat, two as the control (the latent key's rotary part always has one)."""
    for tail in ("scatter", "concat", "cast"):
        for kv in ((1, 2) if tail == "cast" else (1,)):
            rank = 5 if tail == "cast" else 4
            c.add("x.Expand.ctx=kv_tail.%s.kv=%d.f32.r%d" % (tail, kv, rank), "Expand", _kv_tail(tail, kv, heads=4),
                  kind="context", focus=["focus_expand"])
    for tail in ("scatter", "concat"):
        c.add("x.Expand.ctx=kv_tail.%s.sub.kv=1.f32.r4" % tail, "Expand", _kv_tail(tail, 1, heads=4, sub=True),
              kind="context", focus=["focus_expand"])


FAMILIES: list[Callable[[Collector], None]] = [kv_path_extra, kv_tail_extra]
