"""A per-feature Mul in front of a Gemm whose weight is not transposed, on RKNN (issue 22, ImageGPT).

ImageGPT's layer norm ends in ``x * weight`` (a constant of shape (K,)), and its Conv1D projection is
``x.view(-1, K) @ W + b`` with W of shape (K, N): ``Mul -> Reshape -> Gemm(transB=0)``. rknn-toolkit2 2.5.0's
rewrite ``fuse_mul_into_gemm`` folds the Mul's constant into the Gemm's weight as if it were laid out (N, K)
and build() raises ("operands could not be broadcast together with shapes (32,96) (1,32)"). The family varies
the Gemm's transB, K against N, the Mul's constant (per-feature vector (K,) or (1, K), scalar, computed), the
Reshape in between and a MatMul instead of the Gemm.

Ids ``x.Gemm.ctx=mul_into_gemm.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, K, N, transB, Mul constant ("vec", "row", "scalar", "computed"), rank of the input (3: with a
#: Reshape to (T, K)), the layer op)
CASES = (("imagegpt", 32, 96, 0, "vec", 3, "Gemm"),
         ("transb1", 32, 96, 1, "vec", 3, "Gemm"),
         ("square", 32, 32, 0, "vec", 3, "Gemm"),
         ("narrow", 32, 16, 0, "vec", 3, "Gemm"),
         ("row", 32, 96, 0, "row", 3, "Gemm"),
         ("scalar", 32, 96, 0, "scalar", 3, "Gemm"),
         ("computed", 32, 96, 0, "computed", 3, "Gemm"),
         ("no_reshape", 32, 96, 0, "vec", 2, "Gemm"),
         ("no_reshape.transb1", 32, 96, 1, "vec", 2, "Gemm"),
         ("matmul", 32, 96, 0, "vec", 3, "MatMul"))


def _mul_gemm(k: int, n: int, trans_b: int, const: str, rank: int, op: str, t: int = 16, pre: str = "relu"
              ) -> GraphBuilder:
    """x (1, t, k) or (t, k) -> Relu (``pre`` "relu"; "rms": ImageGPT's norm x / sqrt(mean(x * x) + eps);
    "rms_res": the same with the Relu also read by a residual branch (an output) and the layer's result
    Reshaped back) -> focus_mul(.) [-> Reshape (t, k)] -> focus_gemm (W, b) -> Relu."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, t, k] if rank == 3 else [t, k])], name="pre_relu")
    res = x
    if pre in ("rms", "rms_res"):
        ms = gb.node("ReduceMean", [gb.node("Mul", [x, x], name="pre_square")], axes=[-1], keepdims=1,
                     name="pre_mean")
        rs = gb.node("Sqrt", [gb.node("Add", [ms, gb.const(np.array(1e-5, dtype=np.float32))], name="pre_eps")],
                     name="pre_sqrt")
        x = gb.node("Div", [x, rs], name="pre_div")
    if const == "computed":
        scale = gb.node("Sigmoid", [gb.input("s", "float32", [k])], name="pre_scale")
    else:
        scale = gb.const(rand({"vec": [k], "row": [1, k], "scalar": []}[const]) + 1.0)
    y = gb.node("Mul", [x, scale], name="focus_mul")
    if rank == 3:
        y = gb.node("Reshape", [y, gb.ints([t, k])], name="focus_flat")
    if op == "Gemm":
        w = gb.const(rand([n, k] if trans_b else [k, n]))
        y = gb.node("Gemm", [y, w, gb.const(rand([n]))], transB=trans_b, name="focus_gemm")
    else:
        y = gb.node("MatMul", [y, gb.const(rand([k, n]))], name="focus_gemm")
    if pre == "rms_res":  # the norm's input also read by the residual, the layer's result back at rank 3
        y = gb.node("Reshape", [y, gb.ints([1, t, n] if rank == 3 else [t, n])], name="post_unflat")
        gb.output(gb.node("Relu", [res], name="post_res"))
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def mul_into_gemm_extra(c: Collector) -> None:
    """CASES, behind a Relu and behind ImageGPT's norm."""
    for pre in ("relu", "rms", "rms_res"):
        for label, k, n, trans_b, const, rank, op in CASES:
            c.add("x.Gemm.ctx=mul_into_gemm.%s%s.k=%d.n=%d.f32.r%d" % ("" if pre == "relu" else pre + ".", label, k, n, rank),
                  "Gemm", _mul_gemm(k, n, trans_b, const, rank, op, pre=pre), kind="context",
                  focus=["focus_mul", "focus_gemm"])


FAMILIES: list[Callable[[Collector], None]] = [mul_into_gemm_extra]
