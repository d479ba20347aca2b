"""The key/value repeat of one K/V head and what the block around it is made of, on RKNN (issue 22).

The table runs the repeat of one K/V head between two MatMuls on the CPU (x.Expand.ctx=kv_repeat.*,
kv_path.*: the compiler expands the batch axis of (1, T, 1, d)). In the dynamo exports of FLINT, OLMo-2 and
OLMo-3 (one K/V head, two query heads) the value repeat ran on the NPU ('Expand (1, 16, 1, 16) -> (1, 16, 2,
16)', an expansion of axis 2) while the key repeat ran on the CPU, as both do in their TorchScript exports.
The dynamo graphs write one shape initializer that both Expands read; TorchScript computes one per Expand.
``kv_shared_extra`` builds the TorchScript-style Llama block of models_attention_limits (one K/V head, T = 16,
d = 16) with the shape constant of the two Expands separate or shared, 2 and 4 query heads, the key rotated or
not: every repeat ran on the CPU, shared or not. Cut down on the compiler, FLINT's dynamo block kept its value
repeat on the NPU only with its input RMSNorm in front of the projections, and only while that norm wrote
``rsqrt`` as Sqrt -> Reciprocal (dynamo) rather than Sqrt -> Div(1, .) (TorchScript). ``kv_norm_extra`` puts an
RMSNorm of either form (and none) in front of the same block.

Ids ``x.Expand.ctx=kv_shared.*``, ``x.Expand.ctx=kv_norm.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import helper, numpy_helper

from pytest_npucheck.probe.builder import Collector, GraphBuilder, llama_attention

#: (label, query heads, key path)
KV_SHARED = (
    ("h=2.k=none", 2, "none"),
    ("h=2.k=rotary", 2, "rotary"),
    ("h=4.k=none", 4, "none"),
    ("h=4.k=rotary", 4, "rotary"),
)


def _kv_repeat(heads: int, k_pre: str, shared: bool) -> GraphBuilder:
    """``llama_attention`` with one K/V head; ``shared``: the value Expand reads the key Expand's shape."""
    gb = llama_attention(tokens=16, dim=16 * heads, q_heads=heads, kv_heads=1, k_pre=k_pre, q_rot=False)
    if shared:
        expands = {n.name: n for n in gb.nodes if n.op_type == "Expand"}
        expands["v_expand"].input[1] = expands["k_expand"].input[1]
    return gb


def kv_shared_extra(c: Collector) -> None:
    """KV_SHARED with the Expands' shape separate and shared."""
    for label, heads, k_pre in KV_SHARED:
        for shape in ("separate", "shared"):
            c.add("x.Expand.ctx=kv_shared.%s.%s.f32.r5" % (shape, label), "Expand",
                  _kv_repeat(heads, k_pre, shape == "shared"), kind="context", focus=["k_expand", "v_expand"])


#: (label, query heads, tokens, key path)
KV_NORM = (
    ("h=2.t=16.k=none", 2, 16, "none"),
    ("h=2.t=16.k=rotary", 2, 16, "rotary"),
    ("h=4.t=16.k=none", 4, 16, "none"),
    ("h=2.t=32.k=none", 2, 32, "none"),
)

NORMS = ("reciprocal", "div", "none")


def _rms_norm(gb: GraphBuilder, src: str, prefix: str, form: str, width: int) -> list:
    """The nodes of an RMSNorm of ``src`` over its last axis (``width``): Pow 2 -> ReduceMean -> Add eps -> Sqrt ->
    Reciprocal (``reciprocal``) or Div(1, .) (``div``) -> Mul(src, .) -> Mul(weight, .), result ``<prefix>out``."""
    p = prefix
    gb.inits.extend([numpy_helper.from_array(np.array(2.0, np.float32), p + "two"),
                     numpy_helper.from_array(np.array(1e-6, np.float32), p + "eps"),
                     numpy_helper.from_array(np.array(1.0, np.float32), p + "one"),
                     numpy_helper.from_array(np.linspace(0.5, 1.5, width, dtype=np.float32), p + "weight")])
    return [helper.make_node("Pow", [src, p + "two"], [p + "sq"], name=p + "pow"),
            helper.make_node("ReduceMean", [p + "sq"], [p + "mean"], name=p + "mean", axes=[-1], keepdims=1),
            helper.make_node("Add", [p + "mean", p + "eps"], [p + "var"], name=p + "add"),
            helper.make_node("Sqrt", [p + "var"], [p + "std"], name=p + "sqrt"),
            helper.make_node("Reciprocal", [p + "std"], [p + "inv"], name=p + "rsqrt") if form == "reciprocal"
            else helper.make_node("Div", [p + "one", p + "std"], [p + "inv"], name=p + "rsqrt"),
            helper.make_node("Mul", [src, p + "inv"], [p + "x"], name=p + "scale"),
            helper.make_node("Mul", [p + "weight", p + "x"], [p + "out"], name=p + "weight_mul")]


def _kv_norm(heads: int, tokens: int, k_pre: str, norm: str, qk: str = "none") -> GraphBuilder:
    """``llama_attention`` (one K/V head, d = 16) behind an RMSNorm of x (:func:`_rms_norm` of ``norm`` form;
    ``none``: no norm), with per-head RMSNorms of q and k (OLMo-2, Qwen3, FLINT) of ``qk`` form between their
    Reshape to heads and their Transpose."""
    gb = llama_attention(tokens=tokens, dim=16 * heads, q_heads=heads, kv_heads=1, k_pre=k_pre, q_rot=False)
    if norm != "none":
        nodes = _rms_norm(gb, "x", "norm_", norm, 16 * heads)
        for n in gb.nodes:  # the projections read the norm's result instead of x
            n.input[:] = ["norm_out" if i == "x" else i for i in n.input]
        gb.nodes[:0] = nodes
    if qk != "none":
        for nm in ("q", "k"):
            t = next(n for n in gb.nodes if n.name == nm + "_heads")
            nodes = _rms_norm(gb, t.input[0], nm + "norm_", qk, 16)
            t.input[0] = nm + "norm_out"
            i = gb.nodes.index(t)
            gb.nodes[i:i] = nodes
    return gb


def kv_norm_extra(c: Collector) -> None:
    """KV_NORM behind each of NORMS; then the first of KV_NORM with q/k norms too, each form of both norms."""
    for label, heads, tokens, k_pre in KV_NORM:
        for norm in NORMS:
            c.add("x.Expand.ctx=kv_norm.%s.%s.f32.r5" % (norm, label), "Expand", _kv_norm(heads, tokens, k_pre, norm),
                  kind="context", focus=["k_expand", "v_expand"])
    label, heads, tokens, k_pre = KV_NORM[0]
    for norm in ("reciprocal", "div"):
        for qk in ("reciprocal", "div"):
            c.add("x.Expand.ctx=kv_norm.%s.qk=%s.%s.f32.r5" % (norm, qk, label), "Expand",
                  _kv_norm(heads, tokens, k_pre, norm, qk), kind="context", focus=["k_expand", "v_expand"])


FAMILIES: list[Callable[[Collector], None]] = [kv_shared_extra, kv_norm_extra]
