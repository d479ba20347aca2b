"""Transposes of a CPU island that onnxruntime rewrites after partitioning (issue 22). Ids start with ``q.``.

A Conformer convolution module on a data-dependent length (FastSpeech2's decoder after its length
regulator) is ``x (B, T, C) -> Transpose -> Conv1d ... Conv1d -> Transpose -> + x``: every node of
it runs on the CPU ("Cannot get shape"). The QNN placement lists the second Transpose in no
partition, and a new ``Transpose_token_<n>`` node on the CPU in its place: onnxruntime's own
optimizations of the CPU nodes moved the Transpose, so a Transpose still runs on the CPU.
``cpu_transposes_extra`` places that module and a Transpose after a MatMul (VITS's decoder input),
on a static and on a data-dependent length, and records the helper nodes the placement reports.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_common_subexpressions import _dynamic_rows  # the rows a run-time NonZero picks

_RNG = np.random.default_rng(22)


def _w(*shape: int) -> np.ndarray:
    return (_RNG.standard_normal(shape) * 0.2).astype(np.float32)


def _rows(gb: GraphBuilder, x: str, dynamic: bool) -> str:
    """x (1, 16, 8), or the (1, N, 8) rows of it a run-time NonZero picks."""
    if not dynamic:
        return gb.node("Relu", [x], name="pre_relu")
    return _dynamic_rows(gb, x)


def _conv_module(dynamic: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    h = _rows(gb, gb.input("x", "float32", [1, 16, 8]), dynamic)
    t = gb.node("Transpose", [h], perm=[0, 2, 1], name="focus_transpose_in")
    c = gb.node("Conv", [t, gb.const(_w(8, 8, 1)), gb.const(_w(8))], kernel_shape=[1], name="focus_conv")
    s = gb.node("Sigmoid", [c], name="focus_act")
    c2 = gb.node("Conv", [s, gb.const(_w(8, 8, 1)), gb.const(_w(8))], kernel_shape=[1], name="focus_conv2")
    back = gb.node("Transpose", [c2], perm=[0, 2, 1], name="focus_transpose_out")
    gb.output(gb.node("Add", [back, h], name="post_residual"))
    return gb


def _matmul_transpose(dynamic: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    h = _rows(gb, gb.input("x", "float32", [1, 16, 8]), dynamic)
    m = gb.node("MatMul", [h, gb.const(_w(8, 8))], name="focus_matmul")
    t = gb.node("Transpose", [m], perm=[0, 2, 1], name="focus_transpose_out")
    gb.output(gb.node("Sigmoid", [t], name="post_sigmoid"))
    return gb


CPU_TRANSPOSES: tuple[tuple[str, Callable[[bool], GraphBuilder], tuple[str, ...]], ...] = (
    ("conv_module", _conv_module, ("focus_transpose_in", "focus_conv", "focus_act", "focus_conv2",
                                   "focus_transpose_out")),
    ("matmul_transpose", _matmul_transpose, ("focus_matmul", "focus_transpose_out")),
)


def cpu_transposes_extra(c: Collector) -> None:
    """A Conformer-style Transpose -> Conv -> Conv -> Transpose and a MatMul -> Transpose, on a static and
    on a data-dependent length (CPU_TRANSPOSES)."""
    for label, build, focus in CPU_TRANSPOSES:
        for dynamic in (False, True):
            c.add("q.Transpose.ctx=cpu_island.%s.%s.f32.r3" % (label, "datadep" if dynamic else "static"),
                  "Transpose", build(dynamic), kind="context", focus=list(focus))


QNN_FAMILIES: list[Callable[[Collector], None]] = [cpu_transposes_extra]
