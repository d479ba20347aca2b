"""Contractions over a data-dependent dim (issue 22). Ids start with ``q.``.

Longformer's sliding-window attention multiplies the attention probabilities by values gathered at
window indices a run-time NonZero decides (``Einsum_2``: ``(2, 2, 256, 768) x (2, 2, N, 16)``, the
768 and the N being one letter): ONNX's shape inference gives the product a static shape, since the
data-dependent dim is summed away, yet the QNN EP could not get the shape of the Reshape after it
("Cannot get shape"). ``datadep_contraction_extra`` places an Einsum, a MatMul and a ReduceSum that
sum over the (1, N, 8) rows a NonZero picks, each followed by a Reshape and a Sigmoid, to see which
of them gives the nodes after it a static shape again.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_common_subexpressions import _dynamic_rows  # the rows a run-time NonZero picks

_RNG = np.random.default_rng(23)


def _contraction(kind: str) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    a = _dynamic_rows(gb, x)
    b = gb.node("MatMul", [a, gb.const((_RNG.standard_normal((8, 4)) * 0.2).astype(np.float32))], name="pre_proj")
    if kind == "einsum":
        y = gb.node("Einsum", [a, b], equation="bnd,bne->bde", name="focus_op")  # (1, 8, 4)
    elif kind == "matmul":
        y = gb.node("MatMul", [gb.node("Transpose", [a], perm=[0, 2, 1], name="pre_transpose"), b],
                    name="focus_op")  # (1, 8, N) x (1, N, 4)
    else:
        y = gb.node("ReduceSum", [a, gb.ints([1])], keepdims=1, name="focus_op")  # (1, 1, 8)
    r = gb.node("Reshape", [y, gb.ints([1, -1])], name="focus_reshape")
    gb.output(gb.node("Sigmoid", [r], name="post_sigmoid"))
    return gb


CONTRACTIONS = ("einsum", "matmul", "reducesum")


def datadep_contraction_extra(c: Collector) -> None:
    """An Einsum, a MatMul and a ReduceSum over the data-dependent dim of NonZero-picked rows, then a
    Reshape (CONTRACTIONS)."""
    for kind in CONTRACTIONS:
        c.add("q.Reshape.ctx=datadep_contraction.%s.f32.r2" % kind, "Reshape", _contraction(kind),
              kind="context", focus=["focus_reshape", "post_sigmoid"])


def _contraction_unknown_width(kind: str) -> GraphBuilder:
    """As _contraction, the contracted rows (1, N, 8) widened by a broadcast Add of (1, 1, W): W is the length of
    the indices a NonZero of a constant (8 ones) gives, which the checker evaluates and onnxruntime does not (its
    shape inference then knows no dim of the sum but the first), as Longformer's window indices."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    picked = _dynamic_rows(gb, x)  # (1, N, 8)
    rows = gb.node("ReduceSum", [picked, gb.ints([2])], keepdims=1, name="pre_rowsum")  # (1, N, 1)
    idx = gb.node("NonZero", [gb.const(np.ones((1, 8), dtype=np.float32))], name="pre_const_nonzero")  # (2, 8)
    width = gb.node("Gather", [idx, gb.const(np.int64(1))], axis=0, name="pre_width")  # (8,)
    w = gb.node("Reshape", [gb.node("Cast", [width], to=1, name="pre_width_cast"), gb.ints([1, 1, -1])],
                name="pre_width_rs")  # (1, 1, W)
    a = gb.node("Add", [rows, w], name="pre_widen")  # (1, N, W)
    b = gb.node("MatMul", [picked, gb.const((_RNG.standard_normal((8, 4)) * 0.2).astype(np.float32))],
                name="pre_proj")  # (1, N, 4)
    if kind == "einsum":
        y = gb.node("Einsum", [a, b], equation="bnd,bne->bde", name="focus_op")  # (1, W, 4)
    else:
        y = gb.node("MatMul", [gb.node("Transpose", [a], perm=[0, 2, 1], name="pre_transpose"), b], name="focus_op")
    r = gb.node("Reshape", [y, gb.ints([1, -1])], name="focus_reshape")
    gb.output(gb.node("Sigmoid", [r], name="post_sigmoid"))
    return gb


def datadep_contraction_unknown_width_extra(c: Collector) -> None:
    """An Einsum and a MatMul over NonZero-picked rows widened to a width only the checker knows, then a Reshape."""
    for kind in ("einsum", "matmul"):
        c.add("q.Reshape.ctx=datadep_contraction.%s_unknown_width.f32.r2" % kind, "Reshape",
              _contraction_unknown_width(kind), kind="context", focus=["focus_op", "focus_reshape", "post_sigmoid"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [datadep_contraction_extra, datadep_contraction_unknown_width_extra]
