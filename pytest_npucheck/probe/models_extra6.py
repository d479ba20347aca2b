"""RMSNorm with its weight, as the TorchScript exporter writes T5's and LLaMA's, and GPT-2's causal mask (session 9).

``x * (1 / sqrt(mean(x^2) + eps))`` followed by the multiplication with the learned weight, with
LLaMA's no-op ``Cast`` to float32 in between or without it (T5). rknn-toolkit2 2.2.0 dies building
it on RK3566, RK3576 and RK3588 ("invalid tensor malloc size, tensor name: , target: CPU, size: 0",
a segmentation fault), whichever operand order the weight Mul has; without the weight Mul, and
with ``Reciprocal`` instead of ``Div(1, .)`` (pattern.rmsnorm_decomposed), it builds. Cut down
from the T5 and LLaMA exports of the corpus: the first node prefix whose build crashes ends at
the weight Mul of the first RMSNorm in both. Built like the families of models_extra.py and listed
in FAMILIES."""

from __future__ import annotations

import numpy as np

from pytest_npucheck.probe.models import GraphBuilder, _Collector, _rand

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
        w = gb.const(_rand([d]))
        y = gb.node("Mul", [w, y] if weight_first else [y, w], name="focus_weight")
    gb.output(y)
    return gb


def rmsnorm_weight_extra(c: _Collector) -> None:
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


def trilu_mask_extra(c: _Collector) -> None:
    """GPT-2's causal mask and one change each (TRILU_VARIANTS)."""
    for label, kw in TRILU_VARIANTS:
        dtype = kw.get("dtype", "bool")
        c.add("x.Trilu.ctx=causal_mask.%s.%s.r2" % (label, "bool" if dtype == "bool" else "f32"), "Trilu",
              _causal_mask(**kw), kind="context",
              dtype=dtype, focus=["focus_trilu"])


FAMILIES.append(trilu_mask_extra)
