"""Unsqueezes that make the updates of a ScatterElements on RKNN (issue 22).

ScatterElements runs on the CPU. An older pair of probes (``x.Unsqueeze.axes=2.ctx={sub,none}_scatter``:
SimpleBaseline's keypoint decoding, (1, 17) -> (1, 17, 1)) put the Unsqueeze of a computed tensor on the
CPU as well, while dynamo's ``select_scatter`` of the gated delta rule (MiniCPM-OCR's Qwen3.5 layers,
``(1, 32, 1, 64) -> (1, 32, 1, 1, 64)`` behind a Concat) kept it on the NPU. The family varies what the
compiler may decide by: the producer (a graph input, an element-wise Sub, a Relu), the input's rank and the
size of its last axis (a multiple of 8 or not), and the axis the Unsqueeze adds; the ScatterElements
scatters along that axis into a tensor twice as long there.

Ids ``x.Unsqueeze.ctx=scatter_upd.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, input shape, unsqueeze axis)
SCATTER_UPDATES = (
    ("kp17", [1, 17], 2),
    ("kp16", [1, 16], 2),
    ("kp64", [1, 64], 2),
    ("kp17.a1", [1, 17], 1),
    ("kp64.a1", [1, 64], 1),
    ("r3.17", [1, 4, 17], 2),
    ("r3.64", [1, 4, 64], 2),
    ("r4.64", [1, 32, 1, 64], 2),
    ("r4.17", [1, 32, 1, 17], 2),
    ("r4.c3.17", [1, 3, 1, 17], 2),
)

PRODUCERS = ("input", "sub", "relu")


def _scatter_updates(shape: list[int], axis: int, pre: str) -> GraphBuilder:
    """``[pre] x -> focus Unsqueeze(axis) -> post_scatter ScatterElements(d, zeros, u, axis)``, ``d`` a graph
    input of the Unsqueeze's result with 2 along ``axis``."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", shape)
    if pre == "sub":
        x = gb.node("Sub", [x, gb.const(np.float32(0.5))], name="pre_sub")
    elif pre == "relu":
        x = gb.node("Relu", [x], name="pre_relu")
    out = list(shape)
    out.insert(axis, 1)
    u = gb.node("Unsqueeze", [x, gb.ints([axis])], name="focus_unsqueeze")
    data = list(out)
    data[axis] = 2
    d = gb.input("d", "float32", data)
    idx = gb.const(np.zeros(out, np.int64))
    gb.output(gb.node("ScatterElements", [d, idx, u], axis=axis, name="post_scatter"))
    return gb


def scatter_updates_extra(c: Collector) -> None:
    """SCATTER_UPDATES behind each of PRODUCERS."""
    for label, shape, axis in SCATTER_UPDATES:
        for pre in PRODUCERS:
            c.add("x.Unsqueeze.ctx=scatter_upd.%s.%s.f32.r%d" % (pre, label, len(shape)), "Unsqueeze",
                  _scatter_updates(list(shape), axis, pre), kind="context", focus=["focus_unsqueeze"])


FAMILIES: list[Callable[[Collector], None]] = [scatter_updates_extra]
