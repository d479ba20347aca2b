"""Two Slices of one tensor on different axes on RKNN (issue 22): LeViT's ``x[:, ::2, ::2]``.

rknn-toolkit2 2.5.0 merges a Slice whose only reader is a Slice of other axes with it into one Slice named
after the first (``fuse_two_slice``); the merged Slice runs on the CPU when either step is not 1, and no row
of the second is left (x.Slice.ctx=two_slices.*, models_noop_slices.py). This family widens those five
probes: the stride first and the crop second, two crops, a rank-3 pair, the axes in the other order, a crop
and a stride on the same axis.

Ids ``x.Slice.ctx=slice_pair.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, input shape, (axis, start, step) of the first Slice, of the second)
SLICE_PAIRS = (
    ("step2_then_crop", [1, 4, 4, 16], (1, 0, 2), (2, 1, 1)),
    ("crop_then_crop", [1, 4, 4, 16], (1, 1, 1), (2, 1, 1)),
    ("levit.r3", [1, 8, 16], (1, 0, 2), (2, 0, 2)),
    ("axes_2_1", [1, 4, 4, 16], (2, 0, 2), (1, 0, 2)),
    ("crop_then_step2.r3", [1, 8, 16], (2, 1, 1), (1, 0, 2)),
    ("same_axis.crop_then_step2", [1, 8, 4, 16], (1, 1, 1), (1, 0, 2)),
)


def _slice_pair(shape: list[int], first: tuple[int, int, int], second: tuple[int, int, int]) -> GraphBuilder:
    """``Relu -> focus_slice -> focus_slice_2 -> Relu``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    for (axis, start, step), name in zip((first, second), ("focus_slice", "focus_slice_2")):
        x = gb.node("Slice", [x, gb.ints([start]), gb.ints([2 ** 62]), gb.ints([axis]), gb.ints([step])], name=name)
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def slice_pair_extra(c: Collector) -> None:
    """SLICE_PAIRS."""
    for label, shape, first, second in SLICE_PAIRS:
        c.add("x.Slice.ctx=slice_pair.%s.f32.r%d" % (label, len(shape)), "Slice", _slice_pair(shape, first, second),
              kind="context", focus=["focus_slice", "focus_slice_2"])


FAMILIES: list[Callable[[Collector], None]] = [slice_pair_extra]
