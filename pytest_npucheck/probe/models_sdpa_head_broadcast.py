"""Attention whose keys and values have fewer heads than its queries, broadcast by the MatMuls (issue 22).

timm's MobileNetV4 hybrid blocks (multi-query attention, ``MultiQueryAttention2d``) write the
K/V repeat as no op at all: the scores MatMul reads queries (1, H, N, d) and keys (1, 1, d, M), and
the output MatMul reads the probabilities (1, H, N, M) and values (1, 1, M, d), both broadcasting
the head axis. rknn-toolkit2 2.5.0 fuses ``MatMul -> Softmax -> MatMul`` into exSDPAttention
(``fuse_matmul_softmax_matmul_to_sdpa``) and inserts an Expand for each broadcast operand
(``<k>_expand``, ``<v>_tp_expand``), which it runs on the CPU. The family varies what matters:
query heads H, key/value heads (1 or H), which of the two MatMuls broadcasts, the
scale Mul, and the attention without its output MatMul (no fusion) as the control.

Ids ``x.MatMul.ctx=sdpa_bcast.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _attention)
SDPA_BCAST = (
    ("h=4.kv=1", {"heads": 4, "kv": 1}),
    ("h=2.kv=1", {"heads": 2, "kv": 1}),
    ("h=8.kv=1", {"heads": 8, "kv": 1}),
    ("h=1.kv=1", {"heads": 1, "kv": 1}),
    ("h=4.kv=4", {"heads": 4, "kv": 4}),
    ("h=4.kv=1.noscale", {"heads": 4, "kv": 1, "scale": False}),
    ("h=4.kv=1.k_only", {"heads": 4, "kv": 1, "v_heads": 4}),
    ("h=4.kv=1.v_only", {"heads": 4, "kv": 1, "k_heads": 4}),
    ("h=4.kv=1.no_pv", {"heads": 4, "kv": 1, "pv": False}),
    ("h=4.kv=1.t=64.d=64", {"heads": 4, "kv": 1, "t": 64, "d": 64}),
)


def _attention(heads: int, kv: int, k_heads: int | None = None, v_heads: int | None = None, t: int = 16,
               d: int = 16, scale: bool = True, pv: bool = True) -> GraphBuilder:
    """Self-attention over x (1, T, 32): q, k and v projected (MatMul -> Reshape -> Transpose) to (1, H, T, d),
    (1, Hk, d, T) and (1, Hv, T, d) (Hk, Hv default to ``kv``); q [* scale] @ k -> Softmax [-> @ v -> Transpose ->
    Reshape (1, T, H d)]."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, t, 32])

    def proj(h: int, nm: str, perm: list[int]) -> str:
        y = gb.node("MatMul", [x, gb.weight([32, h * d])], name=f"pre_{nm}_proj")
        y = gb.node("Reshape", [y, gb.ints([1, t, h, d])], name=f"pre_{nm}_heads")
        return gb.node("Transpose", [y], perm=perm, name=f"pre_{nm}_tp")

    q = proj(heads, "q", [0, 2, 1, 3])
    k = proj(k_heads or kv, "k", [0, 2, 3, 1])
    if scale:
        q = gb.node("Mul", [q, gb.const(np.array([1.0 / np.sqrt(d)], np.float32))], name="pre_scale")
    p = gb.node("Softmax", [gb.node("MatMul", [q, k], name="focus_scores")], axis=-1, name="focus_softmax")
    if pv:
        y = gb.node("MatMul", [p, proj(v_heads or kv, "v", [0, 2, 1, 3])], name="focus_pv")
        y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="post_tp")
        p = gb.node("Reshape", [y, gb.ints([1, t, heads * d])], name="post_merge")
    gb.output(p)
    return gb


def sdpa_bcast_extra(c: Collector) -> None:
    """Attention with fewer key/value heads than query heads, broadcast by its MatMuls (SDPA_BCAST)."""
    for label, kw in SDPA_BCAST:
        focus = ["focus_scores", "focus_softmax"] + (["focus_pv"] if kw.get("pv", True) else [])
        c.add("x.MatMul.ctx=sdpa_bcast.%s.f32.r4" % label, "MatMul", _attention(**kw), kind="context", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [sdpa_bcast_extra]
