"""Two classifier heads added (issue 22, item 4: a rejection the static check missed).

* ``dual_head_extra``: ``Gemm(x, W1) + Gemm(x, W2) [/ 2]``, as a distilled classifier's eval head
  exports (timm's RepViT, EfficientFormer, EfficientFormer-V2, LeViT: ``(head(x) + head_dist(x)) /
  2``). rknn-toolkit2 2.5.0 turns each Gemm into a 1x1 Conv (``convert_exmatmul_to_conv``), then its
  rewrite ``fuse_conv_conv_add`` raises on the pair ("'NoneType' object is unsliceable"). Variants:
  the input both Gemms read (one tensor, or two different ones, as DeiT's distilled head reads the
  class and the distillation token), the sizes (K, N), the batch, transB, the bias, the Div after,
  what is in front (a graph input, a ReduceMean pool, a BatchNormalization per head as RepViT and
  LeViT have), and MatMul + Add in place of the Gemm.

Built with :mod:`.builder` like every family and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _dual_head)
DUAL_HEAD = (
    ("same.k=384.n=1000", {}),
    ("same.k=32.n=16", {"k": 32, "n": 16}),
    ("same.k=32.n=32", {"k": 32, "n": 32}),
    ("same.k=32.n=16.b=2", {"k": 32, "n": 16, "batch": 2}),
    ("same.k=32.n=16.nodiv", {"k": 32, "n": 16, "div": False}),
    ("same.k=32.n=16.nobias", {"k": 32, "n": 16, "bias": False}),
    ("same.k=32.n=16.transB=0", {"k": 32, "n": 16, "trans_b": 0}),
    ("same.k=32.n=16.pre=relu", {"k": 32, "n": 16, "pre": "relu"}),
    ("same.k=32.n=16.pre=pool", {"k": 32, "n": 16, "pre": "pool"}),
    ("same.k=32.n=16.pre=bn", {"k": 32, "n": 16, "pre": "bn"}),
    ("same.k=32.n=16.matmul", {"k": 32, "n": 16, "matmul": True}),
    ("same.k=32.n=16.sub", {"k": 32, "n": 16, "combine": "Sub"}),
    ("same.k=32.n=16.mul", {"k": 32, "n": 16, "combine": "Mul"}),
    ("two.k=32.n=16", {"k": 32, "n": 16, "inputs": 2}),
    ("two.k=384.n=1000", {"inputs": 2}),
    ("one.k=32.n=16", {"k": 32, "n": 16, "heads": 1}),
    ("same.k=32.n=1", {"k": 32, "n": 1}),
    ("same.k=32.n=16.tokens=8.matmul", {"k": 32, "n": 16, "tokens": 8, "matmul": True}),
    ("same.k=32.n=16.conv1x1", {"k": 32, "n": 16, "conv": (1, 1)}),
    ("same.k=32.n=16.conv3x3_1x1", {"k": 32, "n": 16, "conv": (3, 1)}),
)


def _dual_head(k: int = 384, n: int = 1000, batch: int = 1, trans_b: int = 1, bias: bool = True, div: bool = True,
               pre: str = "none", matmul: bool = False, inputs: int = 1, heads: int = 2,
               combine: str = "Add", tokens: int = 0, conv: tuple[int, int] = ()) -> GraphBuilder:
    """``pre(x) -> Gemm(., W1, b1)``, ``pre(x or x2) -> Gemm(., W2, b2)``, ``Add`` (or ``combine``) ``[-> Div 2]``;
    x is [batch, K] ([batch, K, 4, 4] pooled by a ReduceMean with ``pre='pool'``). ``heads=1``: one Gemm plus
    a second input. ``tokens``: x is [batch, tokens, K] (MatMul only); ``conv``: two Convs of x [batch, K, 4, 4]
    with these kernel sizes (padded to keep the size) in place of the Gemms."""
    gb = GraphBuilder(17)
    shape = [batch, k, 4, 4] if pre == "pool" or conv else [batch, tokens, k] if tokens else [batch, k]
    srcs = [gb.input("x", "float32", shape)]
    if inputs == 2:
        srcs.append(gb.input("x2", "float32", shape))
    if pre == "pool":
        srcs = [gb.node("ReduceMean", [s], axes=[2, 3], keepdims=0, name="pre_pool%d" % i) for i, s in enumerate(srcs)]
    elif pre == "relu":
        srcs = [gb.node("Relu", [s], name="pre_relu%d" % i) for i, s in enumerate(srcs)]
    outs = []
    for h in range(heads):
        a = srcs[min(h, len(srcs) - 1)]
        if pre == "bn":
            a = gb.node("BatchNormalization", [a, gb.const(np.linspace(0.5, 1.5, k, dtype=np.float32)),
                                               gb.const(np.linspace(-0.1, 0.1, k, dtype=np.float32)),
                                               gb.const(np.linspace(-0.2, 0.2, k, dtype=np.float32)),
                                               gb.const(np.linspace(0.8, 1.2, k, dtype=np.float32))],
                        epsilon=1e-5, name="head%d_bn" % h)
        w = gb.weight([n, k] if trans_b else [k, n])
        if conv:
            ks = conv[h]
            y = gb.node("Conv", [a, gb.weight([n, k, ks, ks]), gb.weight([n])], kernel_shape=[ks, ks],
                        pads=[ks // 2] * 4, name="head%d_conv" % h)
        elif matmul:
            wt = gb.weight([k, n])
            y = gb.node("Add", [gb.node("MatMul", [a, wt], name="head%d_matmul" % h), gb.weight([n])], name="head%d_bias" % h)
        else:
            y = gb.node("Gemm", [a, w] + ([gb.weight([n])] if bias else []), transB=trans_b or None, name="head%d_gemm" % h)
        outs.append(y)
    if heads == 1:
        outs.append(gb.input("other", "float32", [batch, n]))
    s = gb.node(combine, outs, name="heads_sum")
    if div:
        s = gb.node("Div", [s, gb.const(np.float32(2.0))], name="heads_mean")
    gb.output(s)
    return gb


def dual_head_extra(c: Collector) -> None:
    """Two Gemm heads added (DUAL_HEAD)."""
    for label, kw in DUAL_HEAD:
        focus = ["head1_conv" if kw.get("conv") else "head1_matmul" if kw.get("matmul") else "head1_gemm"] if kw.get("heads", 2) == 2 else ["head0_gemm"]
        op = "Conv" if kw.get("conv") else "MatMul" if kw.get("matmul") else "Gemm"
        c.add("x.%s.ctx=dual_head.%s.f32.r%d" % (op, label, 3 if kw.get("tokens") else 4 if kw.get("conv") else 2), op, _dual_head(**kw), kind="context", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [dual_head_extra]
