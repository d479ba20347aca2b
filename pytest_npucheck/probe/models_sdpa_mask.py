"""The mask Reshape of a fused attention (session 8): torch's MultiheadAttention with a key padding
mask, as both exporters write it in Conformer. The [batch, keys] mask computed in the model
(``Where(pad, -inf, 0)``) is reshaped to [batch, 1, 1, keys] and expanded over the heads into the
scores of an attention whose q and k are scaled before their MatMul and whose result goes through
Transpose -> Reshape into the output projection (Gemm). rknn-toolkit2 2.3.2 fuses that attention
(exSDPAttention) and runs the Expand on the CPU on every SoC; on RK3566 the Reshape before it goes
to the CPU too (probe results of all 12 targets: tests/tables/test_rknn_tables.py). A mask that is a graph input, the scale after the MatMul, or an attention result
that ends without the projection keep the Reshape on the NPU. Built with
:mod:`.builder` like every family and listed in FAMILIES."""

from __future__ import annotations

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _attention): the Conformer case first, then one change each
VARIANTS = (
    ("base", {}),
    ("t=16", {"t": 16}),
    ("h=8.t=32", {"h": 8, "t": 32}),
    ("src=input", {"src": "input"}),
    ("src=relu", {"src": "relu"}),
    ("scale=post", {"scale": "post"}),
    ("tail=tr", {"tail": "tr"}),
    ("tail=none", {"tail": "none"}),
    ("tail=matmul", {"tail": "matmul"}),
    ("mask=plain", {"mask_reshapes": False}),
)


def _attention(t: int = 15, h: int = 4, d: int = 16, src: str = "where", scale: str = "qk", tail: str = "gemm",
               mask_reshapes: bool = True) -> GraphBuilder:
    gb = GraphBuilder(17)
    q = gb.input("q", "float32", [1, h, t, d])
    k = gb.input("k", "float32", [1, h, d, t])
    v = gb.input("v", "float32", [1, h, t, d])
    if src == "where":  # Conformer: the padded key positions get -inf
        pad = gb.input("pad", "bool", [1, t])
        m = gb.node("Where", [pad, gb.const(np.float32(-np.inf)), gb.const(np.zeros([1, t], np.float32))],
                    name="pre_where")
    elif src == "relu":
        m = gb.node("Relu", [gb.input("m", "float32", [1, t])], name="pre_relu")
    else:
        m = gb.input("m", "float32", [1, t])
    if scale == "qk":  # torch's scaled_dot_product_attention: q and k each times sqrt(scale)
        q = gb.node("Mul", [q, gb.const(np.float32(0.5))], name="pre_q_scale")
        k = gb.node("Mul", [k, gb.const(np.float32(0.5))], name="pre_k_scale")
        s = gb.node("MatMul", [q, k], name="pre_scores")
    else:
        s = gb.node("Mul", [gb.node("MatMul", [q, k], name="pre_scores"), gb.const(np.float32(0.25))],
                    name="pre_scale")
    mask = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="focus_reshape")
    e = gb.node("Expand", [mask, gb.ints([1, h, 1, t])], name="post_expand")
    if mask_reshapes:  # the TorchScript exporter's (heads, 1, keys) round trip
        e = gb.node("Reshape", [gb.node("Reshape", [e, gb.ints([h, 1, t])], name="post_mask_r1"),
                                gb.ints([1, h, 1, t])], name="post_mask_r2")
    y = gb.node("Add", [s, e], name="post_add")
    y = gb.node("Softmax", [y], axis=-1, name="post_softmax")
    y = gb.node("MatMul", [y, v], name="post_attn_v")
    if tail != "none":
        y = gb.node("Transpose", [y], perm=[2, 0, 1, 3], name="post_t")
        y = gb.node("Reshape", [y, gb.ints([t, h * d])], name="post_merge")
    if tail == "gemm":
        y = gb.node("Gemm", [y, gb.weight([h * d, h * d]), gb.weight([h * d])], transB=1, name="post_proj")
    elif tail == "matmul":
        y = gb.node("MatMul", [y, gb.weight([h * d, h * d])], name="post_proj")
    gb.output(y)
    return gb


def sdpa_mask_reshape_extra(c: Collector) -> None:
    """The key padding mask's Reshape in front of a fused attention, and one change each (VARIANTS)."""
    for label, kw in VARIANTS:
        c.add("x.Reshape.ctx=sdpa_mask.%s.f32.r2" % label, "Reshape", _attention(**kw), kind="context",
              focus=["focus_reshape"])


FAMILIES = [sdpa_mask_reshape_extra]
