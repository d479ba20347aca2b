"""Slices that keep their input's shape on RKNN (issue 22): LeViT's ``x[:, ::2, ::2]`` of a 1 x 1 map.

LeViT subsamples its queries with stride-2 Slices; on the last stage the map is 1 x 1 and the Slices
keep their input's shape. rknn-toolkit2 2.5.0 removed them (``remove_invalid_slice``), while the table
called them CPU Slices by their step. Probed alone (Relu -> Slice -> Relu), a Slice whose result has
its input's shape left no layer row: a step of 2 or 3 over an axis of size 1, and a step-1 Slice over
the whole axis.

Built like the families of models_op_context.py and listed in FAMILIES (ids ``x.Slice.ctx=noop.*``).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, input shape, axis, step)
NOOP_SLICES = (
    ("step2.axis1_size1", [1, 1, 4, 32], 1, 2),
    ("step2.axis2_size1", [1, 8, 1, 32], 2, 2),
    ("step3.axis3_size1", [1, 8, 4, 1], 3, 3),
    ("step1.full_axis", [1, 8, 4, 32], 3, 1),
)


def noop_slice_extra(c: Collector) -> None:
    """``Relu -> Slice -> Relu`` where the Slice keeps its input's shape (NOOP_SLICES)."""
    for label, shape, axis, step in NOOP_SLICES:
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
        y = gb.node("Slice", [x, gb.ints([0]), gb.ints([2 ** 62]), gb.ints([axis]), gb.ints([step])], name="focus_slice")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        c.add("x.Slice.ctx=noop.%s.f32.r%d" % (label, len(shape)), "Slice", gb, kind="context", focus=["focus_slice"])


#: (label, input shape, (axis, start, step) of the first Slice, of the second, the first's result read
#: elsewhere too): LeViT's queries subsample x[:, ::2, ::2] as two Slices (rknn fuse_two_slice)
TWO_SLICES = (
    ("levit.s=1x2x2x16", [1, 2, 2, 16], (1, 0, 2), (2, 0, 2), False),
    ("levit.s=1x4x4x16", [1, 4, 4, 16], (1, 0, 2), (2, 0, 2), False),
    ("crop_then_step2.s=1x4x4x16", [1, 4, 4, 16], (1, 1, 1), (2, 0, 2), False),
    ("same_axis.s=1x8x4x16", [1, 8, 4, 16], (1, 0, 2), (1, 0, 2), False),
    ("levit.shared.s=1x4x4x16", [1, 4, 4, 16], (1, 0, 2), (2, 0, 2), True),
)


def two_slices_extra(c: Collector) -> None:
    """``Relu -> Slice -> Slice -> Relu`` (TWO_SLICES): which of two consecutive Slices keeps a row."""
    for label, shape, first, second, shared in TWO_SLICES:
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
        names = ("focus_slice", "focus_slice_2")
        for (axis, start, step), name in zip((first, second), names):
            x = gb.node("Slice", [x, gb.ints([start]), gb.ints([2 ** 62]), gb.ints([axis]), gb.ints([step])], name=name)
            if shared and name == "focus_slice":
                gb.output(gb.node("Relu", [x], name="post_other"))
        gb.output(gb.node("Relu", [x], name="post_relu"))
        c.add("x.Slice.ctx=two_slices.%s.f32.r%d" % (label, len(shape)), "Slice", gb, kind="context",
              focus=list(names))


FAMILIES: list[Callable[[Collector], None]] = [noop_slice_extra, two_slices_extra]
