"""Identical nodes that onnxruntime merges before partitioning (issue 22). Ids start with ``q.``.

TorchScript writes one Shape node per ``x.size(i)`` call, so a graph often holds several identical
Shape nodes of one tensor (FastSpeech2's decoder: five per attention block). onnxruntime's common
subexpression elimination keeps one node of each set of identical nodes (same op, inputs and
attributes): the others never reach the execution providers. ``duplicates_extra`` places pairs of
identical nodes (Shapes of a tensor with a data-dependent dim, which run on the CPU; Relus, which
run on the NPU; identical nodes one of whose outputs is a graph output; identical Relus one of which is reached
through a same-type Cast, which onnxruntime removes first) to see which are removed.
``duplicate_chains_extra`` asks whether the merge cascades: identical chains (three NonZeros of one
run-time mask, each followed by a Transpose and a GatherND, as TorchScript exports of HiggsAudio
write one per use of ``x[mask]``; three Relu -> Sigmoid chains) whose second nodes become identical
only once the first ones are merged.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder


def _dynamic_rows(gb: GraphBuilder, x: str) -> str:
    """The rows of x (1, 16, 8) that a run-time NonZero picks: (1, N, 8)."""
    mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                               gb.const(np.float32(0.0))], name="pre_mask")
    rows = gb.node("Gather", [gb.node("NonZero", [mask], name="pre_nonzero"), gb.const(np.int64(1))], axis=0,
                   name="pre_rows")
    return gb.node("Gather", [x, rows], axis=1, name="pre_gather")


def _pair(kind: str) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    if kind == "shape":
        picked = _dynamic_rows(gb, x)
        outs = []
        for k, idx in enumerate((2, 0)):
            shp = gb.node("Shape", [picked], name="focus_dup%d" % k)
            dim = gb.node("Gather", [shp, gb.const(np.int64(idx))], axis=0, name="post_read%d" % k)
            outs.append(gb.node("Cast", [dim], to=1, name="post_cast%d" % k))
        gb.output(gb.node("Mul", [gb.node("Mul", [x, outs[0]], name="post_mul0"), outs[1]], name="post_mul1"))
    else:
        a = gb.node("Relu", [x], name="focus_dup0")
        b = gb.node("Relu", [x], name="focus_dup1")
        if kind == "relu":
            gb.output(gb.node("Add", [gb.node("Sigmoid", [a], name="post_sig"), gb.node("Tanh", [b], name="post_tanh")],
                              name="post_add"))
        elif kind == "relu_cast":  # the later reader of the Add reaches focus_dup1 through a float->float Cast,
            t = gb.node("Tanh", [b], name="post_tanh")  # which onnxruntime removes before it merges
            s = gb.node("Sigmoid", [a], name="post_sig")
            gb.output(gb.node("Add", [s, gb.node("Cast", [t], to=1, name="post_cast")], name="post_add"))
        else:  # the second one is a graph output
            gb.output(gb.node("Sigmoid", [a], name="post_sig"), b)
    return gb


def duplicates_extra(c: Collector) -> None:
    """Pairs of identical nodes: Shapes of a data-dependent tensor, Relus, a Relu that is a graph output."""
    for kind, op in (("shape", "Shape"), ("relu", "Relu"), ("relu_output", "Relu"), ("relu_cast", "Relu")):
        c.add("q.%s.ctx=duplicate.%s.f32.r3" % (op, kind), op, _pair(kind), kind="context",
              focus=["focus_dup0", "focus_dup1"])


def _chains(kind: str) -> GraphBuilder:
    """Three identical chains of x (1, 16, 8): NonZero of a run-time mask -> Transpose -> GatherND
    (kind 'nonzero'), or Relu -> Sigmoid (kind 'relu'); the three ends are added up."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    ends = []
    if kind == "nonzero":
        mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                                   gb.const(np.float32(0.0))], name="pre_mask")
        for k in range(3):
            nz = gb.node("NonZero", [mask], name="focus_nonzero%d" % k)
            idx = gb.node("Transpose", [nz], perm=[1, 0], name="focus_transpose%d" % k)
            rows = gb.node("GatherND", [x, idx], name="focus_gathernd%d" % k)
            ends.append(gb.node("ReduceSum", [rows, gb.ints([0])], keepdims=1, name="post_reduce%d" % k))
    else:
        for k in range(3):
            r = gb.node("Relu", [x], name="focus_relu%d" % k)
            ends.append(gb.node("Sigmoid", [r], name="focus_sigmoid%d" % k))
    total = gb.node("Add", [gb.node("Add", [ends[0], ends[1]], name="post_add0"), ends[2]], name="post_add1")
    gb.output(total)
    return gb


def duplicate_chains_extra(c: Collector) -> None:
    """Three identical chains whose later nodes are identical only after the first ones merge."""
    for kind, op, focus in (("nonzero", "NonZero", ("focus_nonzero", "focus_transpose", "focus_gathernd")),
                            ("relu", "Relu", ("focus_relu", "focus_sigmoid"))):
        c.add("q.%s.ctx=duplicate_chain.%s.f32.r3" % (op, kind), op, _chains(kind), kind="context",
              focus=["%s%d" % (f, k) for f in focus for k in range(3)])


QNN_FAMILIES: list[Callable[[Collector], None]] = [duplicates_extra, duplicate_chains_extra]
