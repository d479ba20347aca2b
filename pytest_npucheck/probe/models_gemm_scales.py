"""A per-feature scale folded into the next Gemm (issue 22, item 4: a rejection the static check missed).

* ``gemm_input_scale_extra``: ``Mul(x, w[K]) -> Gemm(A, B[K, N], transB=0)``, as ImageGPT's own
  RMS-style LayerNorm (``x / sqrt(mean(x * x) + eps) * weight``) feeds GPT-2's ``Conv1D`` (an
  ``addmm``: a Gemm whose weight is stored [K, N]). rknn-toolkit2 2.5.0's rewrite
  ``fuse_mul_into_gemm`` folds the scale into the weight and broadcasts the [K] vector along the
  wrong axis of the [K, N] weight: build() raises ("operands could not be broadcast together with
  shapes (K,N) (K,)") unless N == K. Variants: the output width N, transB=1 (weight [N, K]), the
  scale's shape ([K], [1, K]) and input order, and a Reshape between the Mul and the Gemm (the
  toolkit moves the Mul behind the Reshape, ``swap_mul_reshape``, only after it turned an RMS norm
  into its own op), with the norm, a Relu, or the x^2 norm written with Pow in front.

Built with :mod:`.builder` like every family and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

K = 32

#: (label, keyword arguments of _scaled_gemm)
SCALED_GEMM = (
    ("direct.n=96", {}),
    ("direct.n=64", {"n": 64}),
    ("direct.n=16", {"n": 16}),
    ("direct.n=32", {"n": 32}),
    ("direct.n=96.transB=1", {"trans_b": 1}),
    ("direct.n=96.scale=1xk", {"scale_shape": (1, K)}),
    ("direct.n=96.scale_first", {"scale_first": True}),
    ("direct.n=96.pre=rmsnorm", {"pre": "rmsnorm"}),
    ("reshape.n=96.pre=rmsnorm", {"reshape": True, "pre": "rmsnorm"}),
    ("reshape.n=32.pre=rmsnorm", {"reshape": True, "pre": "rmsnorm", "n": 32}),
    ("reshape.n=16.pre=rmsnorm", {"reshape": True, "pre": "rmsnorm", "n": 16}),
    ("reshape.n=96.pre=rmsnorm.transB=1", {"reshape": True, "pre": "rmsnorm", "trans_b": 1}),
    ("reshape.n=96.pre=rmsnorm_pow", {"reshape": True, "pre": "rmsnorm_pow"}),
    ("reshape.n=96.pre=relu", {"reshape": True}),
    ("reshape.n=96.pre=relu_rmsnorm", {"reshape": True, "pre": "rmsnorm", "norm_of": "relu"}),
    ("reshape.n=96.pre=add_rmsnorm", {"reshape": True, "pre": "rmsnorm", "norm_of": "add"}),
    ("reshape.n=32.pre=add_rmsnorm", {"reshape": True, "pre": "rmsnorm", "norm_of": "add", "n": 32}),
    ("reshape.n=96.pre=add_rmsnorm_pow", {"reshape": True, "pre": "rmsnorm_pow", "norm_of": "add"}),
    ("reshape.n=96.pre=add_rmsnorm.transB=1", {"reshape": True, "pre": "rmsnorm", "norm_of": "add", "trans_b": 1}),
)


def _scaled_gemm(n: int = 96, trans_b: int = 0, scale_shape: tuple[int, ...] = (K,), scale_first: bool = False,
                 pre: str = "relu", reshape: bool = False, norm_of: str = "input") -> GraphBuilder:
    """``pre(x) -> Mul(., w) [-> Reshape to (-1, K)] -> Gemm(., B, bias) -> Reshape``; x is [16, K], or
    [1, 16, K] with the Reshape; the norm of the input itself, of ``Relu(x)`` or of ``x + x2`` (a
    second input, as a residual sum)."""
    gb = GraphBuilder(17)
    shape = [1, 16, K] if reshape else [16, K]
    x = gb.input("x", "float32", shape)
    if norm_of == "relu":
        x = gb.node("Relu", [x], name="pre_act")
    elif norm_of == "add":
        x = gb.node("Add", [x, gb.input("x2", "float32", shape)], name="pre_residual")
    if pre == "relu":
        h = gb.node("Relu", [x], name="pre_relu")
    else:
        sq = (gb.node("Pow", [x, gb.const(np.float32(2.0))], name="pre_pow") if pre == "rmsnorm_pow"
              else gb.node("Mul", [x, x], name="pre_square"))
        mean = gb.node("ReduceMean", [sq], axes=[-1], keepdims=1, name="pre_mean")
        root = gb.node("Sqrt", [gb.node("Add", [mean, gb.const(np.float32(1e-5))], name="pre_eps")], name="pre_sqrt")
        h = gb.node("Div", [x, root], name="pre_div")
    w = gb.const(np.linspace(0.5, 1.5, K, dtype=np.float32).reshape(scale_shape))
    m = gb.node("Mul", [w, h] if scale_first else [h, w], name="pre_scale")
    if reshape:
        m = gb.node("Reshape", [m, gb.ints([-1, K])], name="pre_flat")
    b = gb.weight([n, K] if trans_b else [K, n])
    y = gb.node("Gemm", [m, b, gb.weight([n])], transB=trans_b or None, name="focus_gemm")
    gb.output(gb.node("Reshape", [y, gb.ints([1, 16, n])], name="post_unflat"))
    return gb


def gemm_input_scale_extra(c: Collector) -> None:
    """A per-feature Mul in front of a Gemm (SCALED_GEMM)."""
    for label, kw in SCALED_GEMM:
        c.add("x.Gemm.ctx=input_scale.%s.f32.r2" % label, "Gemm", _scaled_gemm(**kw), kind="context",
              focus=["focus_gemm"])


FAMILIES: list[Callable[[Collector], None]] = [gemm_input_scale_extra]
