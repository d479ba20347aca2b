"""Layout no-ops onnxruntime removes before placement (issue 22). Ids start with ``q.``.

TorchScript exports write ``mask.expand(mask.shape)``-style Expands (VITS's duration predictor
expands each flow's mask to its own shape before a NonZero) and full-range Slices. onnxruntime's
basic optimizations remove such a node before the QNN EP sees it; the nodes after it then read its
input, so a NonZero of the expanded mask becomes identical to a NonZero of the mask itself and the
two merge (common subexpression elimination). ``noop_layout_extra`` places Expand, Reshape and Slice
that keep their input's shape (and, as controls, ones that change it) on a static tensor and on a
tensor whose middle dim a run-time NonZero decides; ``noop_expand_merge_extra`` places a NonZero of
a mask next to a NonZero of the same mask expanded to its own shape.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_common_subexpressions import _dynamic_rows  # the rows a run-time NonZero picks

_INT64_MAX = np.iinfo(np.int64).max


#: (label, op, builder of the focus node from (gb, x)); x is (1, 16, 8) or (1, N, 8)
NOOP_LAYOUTS: tuple[tuple[str, str, Callable[[GraphBuilder, str], str]], ...] = (
    ("expand_own_shape", "Expand", lambda gb, x: gb.node("Expand", [x, gb.ints([1, 16, 8])], name="focus_op")),
    ("expand_ones", "Expand", lambda gb, x: gb.node("Expand", [x, gb.ints([1, 1, 1])], name="focus_op")),
    ("expand_one", "Expand", lambda gb, x: gb.node("Expand", [x, gb.ints([1])], name="focus_op")),
    ("expand_last", "Expand", lambda gb, x: gb.node("Expand", [x, gb.ints([1, 8])], name="focus_op")),
    ("expand_shape_of", "Expand",
     lambda gb, x: gb.node("Expand", [x, gb.node("Shape", [x], name="focus_shape")], name="focus_op")),
    ("expand_widen", "Expand", lambda gb, x: gb.node("Expand", [x, gb.ints([2, 1, 1])], name="focus_op")),
    ("reshape_own_shape", "Reshape", lambda gb, x: gb.node("Reshape", [x, gb.ints([1, -1, 8])], name="focus_op")),
    ("slice_full", "Slice",
     lambda gb, x: gb.node("Slice", [x, gb.ints([0]), gb.ints([_INT64_MAX]), gb.ints([1])], name="focus_op")),
    ("slice_head", "Slice",
     lambda gb, x: gb.node("Slice", [x, gb.ints([0]), gb.ints([4]), gb.ints([2])], name="focus_op")),
)


def _noop_layout(build: Callable[[GraphBuilder, str], str], dynamic: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    h = _dynamic_rows(gb, x) if dynamic else gb.node("Relu", [x], name="pre_relu")
    gb.output(gb.node("Sigmoid", [build(gb, h)], name="post_sigmoid"))
    return gb


def noop_layout_extra(c: Collector) -> None:
    """Expand / Reshape / Slice keeping their input's shape (and controls that change it) on a static
    (1, 16, 8) tensor and on (1, N, 8) rows a run-time NonZero picks (NOOP_LAYOUTS)."""
    for label, op, build in NOOP_LAYOUTS:
        for dynamic in (False, True):
            gb = _noop_layout(build, dynamic)
            focus = ["focus_op"] + (["focus_shape"] if label == "expand_shape_of" else [])
            c.add("q.%s.ctx=noop_layout.%s.%s.f32.r3" % (op, label, "datadep" if dynamic else "static"), op, gb,
                  kind="context", focus=focus)


def _expand_merge(how: str) -> GraphBuilder:
    """NonZero(mask) and NonZero(Expand(mask, shape)) of one run-time mask (1, 16), each followed by a
    Transpose and a GatherND of x; the ends are added up."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                               gb.const(np.float32(0.0))], name="pre_mask")
    shape = gb.node("Shape", [mask], name="focus_shape") if how == "shape_of" else gb.ints([1, 16])
    expanded = gb.node("Expand", [mask, shape], name="focus_expand")
    ends = []
    for k, src in enumerate((mask, expanded)):
        nz = gb.node("NonZero", [src], name="focus_nonzero%d" % k)
        idx = gb.node("Transpose", [nz], perm=[1, 0], name="focus_transpose%d" % k)
        rows = gb.node("GatherND", [x, idx], name="focus_gathernd%d" % k)
        ends.append(gb.node("ReduceSum", [rows, gb.ints([0])], keepdims=1, name="post_reduce%d" % k))
    gb.output(gb.node("Add", ends, name="post_add"))
    return gb


def noop_expand_merge_extra(c: Collector) -> None:
    """A NonZero of a mask beside a NonZero of the mask expanded to its own shape (a constant shape,
    and the mask's Shape): merged once the Expand is removed?"""
    for how in ("const", "shape_of"):
        focus = ["focus_expand"] + (["focus_shape"] if how == "shape_of" else []) + [
            "%s%d" % (f, k) for f in ("focus_nonzero", "focus_transpose", "focus_gathernd") for k in range(2)]
        c.add("q.NonZero.ctx=duplicate_chain.expand_noop.%s.f32.r2" % how, "NonZero", _expand_merge(how),
              kind="context", focus=focus)


QNN_FAMILIES: list[Callable[[Collector], None]] = [noop_layout_extra, noop_expand_merge_extra]
