"""RMSNorm with its weight, as the TorchScript exporter writes T5's and LLaMA's, and GPT-2's causal mask (session 9).

``x * (1 / sqrt(mean(x^2) + eps))`` followed by the multiplication with the learned weight, with
LLaMA's no-op ``Cast`` to float32 in between or without it (T5). rknn-toolkit2 2.2.0 dies building
it on RK3566, RK3576 and RK3588 ("invalid tensor malloc size, tensor name: , target: CPU, size: 0",
a segmentation fault), whichever operand order the weight Mul has; without the weight Mul, and
with ``Reciprocal`` instead of ``Div(1, .)`` (pattern.rmsnorm_decomposed), it builds. Cut down
from the T5 and LLaMA exports of the corpus: the first node prefix whose build crashes ends at
the weight Mul of the first RMSNorm in both. Built with :mod:`.builder` like every family and listed
in FAMILIES."""

from __future__ import annotations

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, keyword arguments of _rmsnorm): T5's form first, then one change each
VARIANTS = (
    ("base", {}),
    ("w_first", {"weight_first": True}),
    ("cast", {"cast": True, "weight_first": True}),
    ("t=32.d=64", {"t": 32, "d": 64}),
    ("reciprocal", {"reciprocal": True}),
    ("no_weight", {"weight": False}),
)


def _rmsnorm(t: int = 16, d: int = 32, weight: bool = True, weight_first: bool = False, cast: bool = False,
             reciprocal: bool = False) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, t, d])
    v = gb.node("ReduceMean", [gb.node("Pow", [x, gb.const(np.float32(2.0))], name="pre_pow")], axes=[-1],
                keepdims=1, name="pre_mean")
    s = gb.node("Sqrt", [gb.node("Add", [v, gb.const(np.float32(1e-6))], name="pre_eps")], name="pre_sqrt")
    r = (gb.node("Reciprocal", [s], name="pre_inv") if reciprocal
         else gb.node("Div", [gb.const(np.float32(1.0)), s], name="pre_inv"))
    y = gb.node("Mul", [x, r], name="focus_norm" if not weight else "pre_norm")
    if cast:  # LLaMA: hidden_states.to(input_dtype), float32 to float32
        y = gb.node("Cast", [y], to=1, name="pre_cast")
    if weight:
        w = gb.const(rand([d]))
        y = gb.node("Mul", [w, y] if weight_first else [y, w], name="focus_weight")
    gb.output(y)
    return gb


def rmsnorm_weight_extra(c: Collector) -> None:
    """The RMSNorm of T5 and LLaMA with its weight, and one change each (VARIANTS)."""
    for label, kw in VARIANTS:
        gb = _rmsnorm(**kw)
        # without the weight, the Div(1, .) counts too: whether the 6-node RMSNorm is fused is the question
        focus = ["pre_inv", "focus_norm"] if kw.get("weight") is False else ["focus_weight"]
        c.add("x.Mul.ctx=rmsnorm_weight.%s.f32.r3" % label, "Mul", gb, kind="context", focus=focus)


FAMILIES = [rmsnorm_weight_extra]


# ------------------------------------------------------------------------------------------------
# A causal mask made by Trilu on a constant bool matrix (GPT-2, TorchScript export)
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _causal_mask): GPT-2's form first, then one change each
TRILU_VARIANTS = (
    ("const", {}),
    ("nocast", {"cast": False}),
    ("lower", {"upper": 0, "k": None}),
    ("input", {"src": "input"}),
    ("mul", {"dtype": "float32"}),
)


def _causal_mask(t: int = 16, src: str = "const", dtype: str = "bool", upper: int = 1, k: int | None = 1,
                 cast: bool = True) -> GraphBuilder:
    """``Where(Trilu(ones), -inf, scores) -> Softmax`` as GPT-2's attention masks its scores (a float
    mask multiplies the scores instead)."""
    gb = GraphBuilder(17)
    scores = gb.input("x", "float32", [1, 1, t, t])
    ones = gb.input("m", dtype, [t, t]) if src == "input" else gb.const(np.ones([t, t], dtype=dtype))
    args = [ones] if k is None else [ones, gb.const(np.int64(k))]
    mask = gb.node("Trilu", args, upper=upper, name="focus_trilu")
    if dtype == "bool":
        if cast:  # the TorchScript exporter's .bool() of a bool
            mask = gb.node("Cast", [mask], to=9, name="post_cast")
        y = gb.node("Where", [mask, gb.const(np.float32(-1e4)), scores], name="post_where")
    else:
        y = gb.node("Mul", [scores, mask], name="post_mul")
    gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
    return gb


def trilu_mask_extra(c: Collector) -> None:
    """GPT-2's causal mask and one change each (TRILU_VARIANTS)."""
    for label, kw in TRILU_VARIANTS:
        dtype = kw.get("dtype", "bool")
        c.add("x.Trilu.ctx=causal_mask.%s.%s.r2" % (label, "bool" if dtype == "bool" else "f32"), "Trilu",
              _causal_mask(**kw), kind="context",
              dtype=dtype, focus=["focus_trilu"])


FAMILIES.append(trilu_mask_extra)


# ------------------------------------------------------------------------------------------------
# DistilBERT's attention mask Reshape behind a CPU Equal, and a Gemm anywhere in the graph
# ------------------------------------------------------------------------------------------------

#: (label, keyword arguments of _mask_with_head): DistilBERT's form first, then one change each
MASK_HEAD_VARIANTS = (
    ("gemm_attn", {}),
    ("gemm_indep", {"head": "gemm", "branch": "indep"}),
    ("layers=2.gemm_attn", {"layers": 2}),
    ("matmul_attn", {"head": "matmul"}),
    ("none", {"head": None}),
)


def _mask_with_head(layers: int = 1, head: str | None = "gemm", branch: str = "attn", t: int = 32, h: int = 4,
                    d: int = 64) -> GraphBuilder:
    """``Equal(mask, 0) -> Reshape (1, 1, 1, T) -> Expand -> Cast -> Where(., -big, scores) -> Softmax``
    per layer, the int64 mask compared on the CPU; then the [CLS] token of the attention result (or of
    an unrelated input) through a Gemm (or a MatMul), as DistilBERT's classifier."""
    gb = GraphBuilder(17)
    mask = gb.input("mask", "int64", [1, t])
    eq = gb.node("Equal", [mask, gb.const(np.int64(0))], name="pre_equal")
    y = None
    for i in range(layers):
        scores = gb.input(f"s{i}", "float32", [1, h, t, t])
        m = gb.node("Reshape", [eq, gb.ints([1, 1, 1, t])], name="focus_reshape" if i == 0 else f"post_reshape{i}")
        m = gb.node("Cast", [gb.node("Expand", [m, gb.ints([1, h, t, t])], name=f"post_expand{i}")], to=9,
                    name=f"post_cast{i}")
        y = gb.node("Softmax", [gb.node("Where", [m, gb.const(np.float32(-1e4)), scores], name=f"post_where{i}")],
                    axis=-1, name=f"post_softmax{i}")
        gb.output(y)
    if head is not None:
        if branch == "attn":
            av = gb.node("MatMul", [y, gb.input("v", "float32", [1, h, t, d // h])], name="post_av")
            x = gb.node("Reshape", [gb.node("Transpose", [av], perm=[0, 2, 1, 3], name="post_t"), gb.ints([1, t, d])],
                        name="post_merge")
        else:
            x = gb.input("hid", "float32", [1, t, d])
        cls = gb.node("Gather", [x, gb.const(np.int64(0))], axis=1, name="post_cls")
        if head == "gemm":
            out = gb.node("Gemm", [cls, gb.weight([d, d]), gb.weight([d])], transB=1, name="post_head")
        else:
            out = gb.node("MatMul", [cls, gb.weight([d, d])], name="post_head")
        gb.output(out)
    return gb


def mask_head_extra(c: Collector) -> None:
    """DistilBERT's mask Reshape with and without a Gemm in the graph (MASK_HEAD_VARIANTS)."""
    for label, kw in MASK_HEAD_VARIANTS:
        c.add("x.Reshape.ctx=mask_head.%s.b.r2" % label, "Reshape", _mask_with_head(**kw), kind="context",
              dtype="bool", focus=["focus_reshape"])


FAMILIES.append(mask_head_extra)
