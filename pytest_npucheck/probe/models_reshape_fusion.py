"""Reshape targets built by a Concat of one-element pieces (issue 22). Ids start with ``q.``.

TorchScript writes ``x.view(a * b, 1)`` as ``Concat(Unsqueeze(Mul(Gather(Shape(m), i), Gather(Shape(m),
j))), [1])``. When ``m`` has a data-dependent dim (VITS: the durations the model predicts) the checker
cannot evaluate that Concat, and the Reshape's result shape is unknown to it; onnxruntime, before it
partitions, replaces such a target by a constant in which the one computed element becomes -1, so a
Reshape of a static input gets a static result. ``reshape_target_fusion_extra`` places Reshapes whose
Concat target has one computed element (first, middle, last), two, one beside a constant -1, and one
whose Concat has a second reader, each followed by a Sigmoid, to see where the Concat is removed and
the Reshape and the node after it run on the NPU.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_common_subexpressions import _dynamic_rows  # the rows a run-time NonZero picks


def _computed(gb: GraphBuilder, m: str, scale: int, tag: str) -> str:
    """A one-element int64 tensor computed from the static dims of the Shape of m (1, N, 8), worth
    8 * scale (scale 0: dim 0 alone, worth 1, without a Mul); its Shape is not a constant (N is not)."""
    shp = gb.node("Shape", [m], name="pre_shape_%s" % tag)
    if scale == 0:
        return gb.node("Unsqueeze", [gb.node("Gather", [shp, gb.const(np.int64(0))], axis=0, name="pre_d0_%s" % tag),
                                     gb.ints([0])], name="pre_unsqueeze_%s" % tag)
    d0 = gb.node("Gather", [shp, gb.const(np.int64(0))], axis=0, name="pre_d0_%s" % tag)
    d2 = gb.node("Gather", [shp, gb.const(np.int64(2))], axis=0, name="pre_d2_%s" % tag)
    prod = gb.node("Mul", [d0, d2], name="pre_mul_%s" % tag)
    if scale != 1:
        prod = gb.node("Mul", [prod, gb.const(np.int64(scale))], name="pre_scale_%s" % tag)
    return gb.node("Unsqueeze", [prod, gb.ints([0])], name="pre_unsqueeze_%s" % tag)


#: label -> (root kind, target pieces: an int is a constant, "cN" a computed element worth N ("c0": dim 0 of
#: the Shape, 1, read by Gather -> Unsqueeze alone), whether the Concat has a second reader)
FORMS: dict[str, tuple[str, tuple[object, ...], bool]] = {
    "one_last": ("x", (16, "c8"), False),  # (1, 16, 8) -> (16, 8)
    "one_first": ("x", ("c16", 8), False),
    "one_middle": ("x", (2, "c8", 8), False),
    "vits": ("row", ("c16", 1), False),  # (1, 1, 16) -> (16, 1), as VITS's /inner/Reshape
    "two": ("x", ("c16", "c8"), False),
    "minus_one": ("x", (-1, "c8"), False),
    "shared": ("x", (16, "c8"), True),
    "two_plain": ("x", ("c0", 16, "c8"), False),  # (1, 16, 8) -> (1, 16, 8): a dim read without arithmetic
}


def _fusion(label: str) -> GraphBuilder:
    root_kind, pieces, shared = FORMS[label]
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    m = _dynamic_rows(gb, x)
    if root_kind == "row":  # (1, 1, 16)
        root = gb.node("Transpose", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=1, name="pre_sum_row")],
                       perm=[0, 2, 1], name="pre_row")
    else:
        root = gb.node("Relu", [x], name="pre_root")
    parts = [gb.ints([p]) if isinstance(p, int) else _computed(gb, m, int(str(p)[1:]) // 8, "%d" % k)
             for k, p in enumerate(pieces)]
    target = gb.node("Concat", parts, axis=0, name="focus_concat")
    y = gb.node("Sigmoid", [gb.node("Reshape", [root, target], name="focus_reshape")], name="post_sigmoid")
    if shared:  # the target's values also feed the output: its Concat has two readers
        n = gb.node("ReduceSum", [gb.node("Cast", [target], to=1, name="post_cast")], keepdims=0, name="post_sum")
        y = gb.node("Mul", [y, n], name="post_mul")
    gb.output(y)
    return gb


def reshape_target_fusion_extra(c: Collector) -> None:
    """Reshapes whose Concat target holds computed one-element pieces (FORMS)."""
    for label in FORMS:
        c.add("q.Reshape.ctx=fuse_target.%s.f32.r3" % label, "Reshape", _fusion(label), kind="context",
              focus=["focus_concat", "focus_reshape", "post_sigmoid"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [reshape_target_fusion_extra]
