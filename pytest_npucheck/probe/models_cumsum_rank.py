"""CumSum by rank, axis and length (issue 22). Ids start with ``q.``.

Kimi-Linear's chunked linear attention takes a cumulative sum over the chunk axis of a rank-5
tensor ((1, 32, 1, 64, 128), axis -2); the QNN EP rejects it ("Failed to add node.") although every
probed CumSum of rank 2-4 ran on the NPU. ``cumsum_rank_extra`` places CumSums of a float tensor
between two NPU ops at ranks 3-5, on each axis of the rank-5 ones, and at the model's own shape.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, shape, axis)
CUMSUMS: tuple[tuple[str, tuple[int, ...], int], ...] = (
    ("r3.axis1", (2, 16, 8), 1),
    ("r4.axis2", (1, 2, 16, 8), 2),
    ("r4.axism2.wide", (1, 32, 64, 128), -2),
    ("r5.axism2", (1, 2, 1, 16, 8), -2),
    ("r5.axism1", (1, 2, 1, 16, 8), -1),
    ("r5.axis1", (1, 2, 1, 16, 8), 1),
    ("r5.axis0", (2, 2, 1, 16, 8), 0),
    ("r5.axism2.kimi", (1, 32, 1, 64, 128), -2),
)


def _cumsum(shape: tuple[int, ...], axis: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", list(shape))], name="pre_relu")
    y = gb.node("CumSum", [x, gb.const(np.int32(axis))], name="focus_op")
    gb.output(gb.node("Sigmoid", [y], name="post_sigmoid"))
    return gb


def cumsum_rank_extra(c: Collector) -> None:
    """CumSum of float data at ranks 3-5, each axis of rank 5, Kimi-Linear's shape (CUMSUMS)."""
    for label, shape, axis in CUMSUMS:
        c.add("q.CumSum.ctx=rank.%s.f32.r%d" % (label, len(shape)), "CumSum", _cumsum(shape, axis), kind="context",
              focus=["focus_op"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [cumsum_rank_extra]
