"""Ops that produce an empty tensor (a dim of size 0) on QNN HTP (issue 22). Ids start with ``q.``.

A partial rotary embedding whose rotary dims are the whole head (GPT-NeoX-Japanese with
``rotary_pct=1``) slices the pass-through part ``q[..., rotary_dim:]``: a (1, 2, 16, 0) tensor that
a Concat joins back to the rotated part. onnxruntime-qnn 2.7.0 left that Slice on the CPU ("Failed
to add node.") and kept the Concat on the NPU. ``empty_extra`` asks which ops fail on an empty
output: a Slice of an empty range (its output read by a Concat, and read by nothing but the graph
output), a Split with a part of size 0, a CumSum and an elementwise op of an empty tensor, beside
the same Slice and CumSum with a non-empty result.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, the start of the sliced range on the last axis of x (1, 2, 16, 16))
EMPTY = (
    ("slice_concat", "Slice", 16),
    ("slice_concat.nonempty", "Slice", 8),
    ("slice_neg", "Slice", 16),
    ("split_zero", "Split", 16),
    ("cumsum", "CumSum", 16),
    ("cumsum.nonempty", "CumSum", 8),
)


def _empty(label: str, op: str, start: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 2, 16, 16])], name="pre_relu")
    if op == "Split":
        a, b = gb.node("Split", [x, gb.ints([16, 0])], n_out=2, axis=3, name="focus_op")
        gb.output(gb.node("Concat", [gb.node("Sigmoid", [a], name="post_sigmoid"), b], axis=3, name="post_concat"))
        return gb
    part = gb.node("Slice", [x, gb.ints([start]), gb.ints([16]), gb.ints([3])],
                   name="focus_op" if op == "Slice" else "pre_slice")
    if op == "CumSum":
        part = gb.node("CumSum", [part, gb.const(np.int64(3))], name="focus_op")
    elif label == "slice_neg":
        part = gb.node("Neg", [part], name="post_neg")
    head = gb.node("Slice", [x, gb.ints([0]), gb.ints([start]), gb.ints([3])], name="post_head")
    gb.output(gb.node("Concat", [gb.node("Sigmoid", [head], name="post_sigmoid"), part], axis=3, name="post_concat"))
    return gb


def empty_extra(c: Collector) -> None:
    """Slice, Split and CumSum with an empty output and with a non-empty one (EMPTY)."""
    for label, op, start in EMPTY:
        c.add("q.%s.ctx=empty.%s.f32.r4" % (op, label), op, _empty(label, op, start), kind="context",
              focus=["focus_op", "post_neg", "post_concat"] if label == "slice_neg" else ["focus_op", "post_concat"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [empty_extra]
