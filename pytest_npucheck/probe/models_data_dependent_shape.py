"""NonZero and the ops whose shape depends on its result, on QNN HTP (issue 22). Ids start with ``q.``.

QNN HTP needs static shapes; NonZero's output shape depends on the values of its input. TorchScript
exports of Longformer compute their attention-window masks with NonZero over a tensor that
ConstantOfShape builds from folded shape arithmetic: every input of the NonZero is a compile-time
constant, yet onnxruntime placed the NonZero on the CPU ("NonZero output shape must be static")
and every op after it that depends on its shape ("Cannot get shape"). ``nonzero_extra`` asks:

* does onnxruntime fold a NonZero whose input is constant (an initializer, a ConstantOfShape of a
  constant shape), as it folds the ConstantOfShape itself?
* which ops after a NonZero leave the NPU: those whose shapes depend on its result (a Gather by
  its indices, an Add of that Gather) and those after a reduction that makes the shape static
  again?

``partial_shape_extra`` asks whether onnxruntime folds a Shape of a tensor whose shape is only
partly known (the decoder of a TorchScript FastSpeech2 export after its length regulator: (1, ?,
32)) when its consumer reads only static dims (a Gather of dim 2, a Slice of it). It does not:
the Shape stays on the CPU whichever dim is read.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import helper

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, mask source, tail): the mask NonZero reads and what follows the data-dependent Gather
NONZERO = (
    ("const_of_shape", "const_of_shape", "add"),
    ("initializer", "initializer", "add"),
    ("runtime", "runtime", "add"),
    ("runtime.restored", "runtime", "restored"),
)


def _nonzero(src: str, tail: str) -> GraphBuilder:
    """mask (1, 16) -> NonZero (2, N) -> Gather row 1 (N,) -> Gather x (1, 16, 8) along axis 1 ->
    (1, N, 8) -> Add 1 (tail 'add') or ReduceSum to (1, 1, 8) -> Mul with x (tail 'restored')."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    if src == "const_of_shape":
        mask = gb.node("ConstantOfShape", [gb.ints([1, 16])], name="pre_mask",
                       value=helper.make_tensor("v", 7, [1], [1]))
    elif src == "initializer":
        mask = gb.const((np.arange(16) % 3 != 0).astype(np.int64).reshape(1, 16), name="mask")
    else:
        mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                                   gb.const(np.float32(0.0))], name="pre_mask")
    nz = gb.node("NonZero", [mask], name="focus_nonzero")
    rows = gb.node("Gather", [nz, gb.const(np.int64(1))], axis=0, name="post_rows")
    picked = gb.node("Gather", [x, rows], axis=1, name="post_gather")
    if tail == "add":
        gb.output(gb.node("Add", [picked, gb.const(np.float32(1.0))], name="post_add"))
    else:
        s = gb.node("ReduceSum", [picked, gb.ints([1])], keepdims=1, name="post_reduce")
        gb.output(gb.node("Mul", [s, x], name="post_mul"))
    return gb


def nonzero_extra(c: Collector) -> None:
    """NonZero over constant and run-time masks, and the ops after it (NONZERO)."""
    for label, src, tail in NONZERO:
        c.add("q.NonZero.ctx=datadep.%s.f32.r2" % label, "NonZero", _nonzero(src, tail), kind="context",
              focus=["focus_nonzero"])


#: (label, how the Shape of a (1, N, 8) tensor with a data-dependent N is read): which dims it takes
PARTIAL_SHAPE = (
    ("gather_static", "gather", 2),
    ("gather_dynamic", "gather", 1),
    ("slice_static", "slice", (2, 3)),
    ("slice_dynamic", "slice", (1, 2)),
)


def _partial_shape(read: str, which: object) -> GraphBuilder:
    """x (1, 16, 8) -> the rows a run-time NonZero picks (1, N, 8) -> Shape -> Gather(which) or
    Slice(which) -> Cast to float -> Mul with x (static): the Shape reads a static or the dynamic dim."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                               gb.const(np.float32(0.0))], name="pre_mask")
    rows = gb.node("Gather", [gb.node("NonZero", [mask], name="pre_nonzero"), gb.const(np.int64(1))], axis=0,
                   name="pre_rows")
    picked = gb.node("Gather", [x, rows], axis=1, name="pre_gather")
    shp = gb.node("Shape", [picked], name="focus_shape")
    if read == "gather":
        dim = gb.node("Gather", [shp, gb.const(np.int64(which))], axis=0, name="post_read")
    else:
        lo, hi = which  # type: ignore[misc]
        dim = gb.node("Slice", [shp, gb.ints([lo]), gb.ints([hi])], name="post_read")
    f = gb.node("Cast", [dim], to=1, name="post_cast")
    gb.output(gb.node("Mul", [x, f], name="post_mul"))
    return gb


def partial_shape_extra(c: Collector) -> None:
    """Shape of a tensor with a data-dependent dim, read at a static or at the dynamic dim (PARTIAL_SHAPE)."""
    for label, read, which in PARTIAL_SHAPE:
        c.add("q.Shape.ctx=partial.%s.f32.r3" % label, "Shape", _partial_shape(read, which), kind="context",
              focus=["focus_shape", "post_read"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [nonzero_extra, partial_shape_extra]
