"""A Conv's channels split into a rank-5 tensor (issue 22). Ids start with ``q.``.

timm's SKNet (selective-kernel attention, ``timm_skresnet18``) reshapes the result of its 1x1
``fc_select`` Conv, (1, 128, 1, 1), to (1, 2, 64, 1, 1) before a Softmax over the paths; onnxruntime-qnn
then fails to finalize the QNN graph (QNN_COMMON_ERROR_MEM_ALLOC) and no session is created. Cut down
by bisecting the model's nodes, the failing prefix ends at that Reshape. ``conv_channel_split_extra``
varies what decides it: the Conv's plane (1 x 1, 1 x 2, 2 x 1, 1 x 4, 2 x 2, 4 x 4), the split (2 or 8
groups, a leading group of 1), the channel count, the target's rank (4, 5, 6) and layout, and the
producer (a Conv, a GlobalAveragePool, a Sigmoid).

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

_RNG = np.random.default_rng(31)

#: label -> (producer, plane (H, W), channels, target shape)
SPLITS: dict[str, tuple[str, tuple[int, int], int, tuple[int, ...]]] = {
    "conv.hw1x1.p2": ("conv", (1, 1), 128, (1, 2, 64, 1, 1)),  # SKNet's fc_select
    "conv.hw1x1.p8": ("conv", (1, 1), 128, (1, 8, 16, 1, 1)),
    "conv.hw1x1.lead1": ("conv", (1, 1), 128, (1, 1, 128, 1, 1)),
    "conv.hw1x1.c16": ("conv", (1, 1), 16, (1, 2, 8, 1, 1)),
    "conv.hw1x2.p2": ("conv", (1, 2), 128, (1, 2, 64, 1, 2)),
    "conv.hw2x1.p2": ("conv", (2, 1), 128, (1, 2, 64, 2, 1)),
    "conv.hw1x4.p2": ("conv", (1, 4), 128, (1, 2, 64, 1, 4)),
    "conv.hw2x2.p2": ("conv", (2, 2), 128, (1, 2, 64, 2, 2)),
    "conv.hw4x4.p2": ("conv", (4, 4), 128, (1, 2, 64, 4, 4)),
    "conv.hw1x1.rank4": ("conv", (1, 1), 128, (1, 2, 64, 1)),
    "conv.hw1x1.rank6": ("conv", (1, 1), 128, (1, 2, 64, 1, 1, 1)),
    "conv.hw1x1.plane_moved": ("conv", (1, 1), 128, (1, 2, 1, 1, 64)),
    "conv.hw1x1.other_layout": ("conv", (1, 1), 128, (1, 2, 32, 2, 1)),
    "gap.hw1x1.p2": ("gap", (1, 1), 128, (1, 2, 64, 1, 1)),
    "sigmoid.hw1x1.p2": ("sigmoid", (1, 1), 128, (1, 2, 64, 1, 1)),
}


def _split(label: str) -> GraphBuilder:
    producer, (h, w), channels, target = SPLITS[label]
    gb = GraphBuilder(17)
    if producer == "conv":
        x = gb.input("x", "float32", [1, 16, h, w])
        y = gb.node("Conv", [x, gb.const((_RNG.standard_normal((channels, 16, 1, 1)) * 0.1).astype(np.float32))],
                    kernel_shape=[1, 1], name="pre_conv")
    elif producer == "gap":
        y = gb.node("GlobalAveragePool", [gb.input("x", "float32", [1, channels, 8, 8])], name="pre_gap")
    else:
        y = gb.node("Sigmoid", [gb.input("x", "float32", [1, channels, h, w])], name="pre_sigmoid")
    r = gb.node("Reshape", [y, gb.ints(list(target))], name="focus_reshape")
    gb.output(gb.node("Relu", [r], name="post_relu"))
    return gb


def conv_channel_split_extra(c: Collector) -> None:
    """Rank-5 channel splits of a Conv's result and their controls (SPLITS)."""
    for label in SPLITS:
        c.add("q.Reshape.ctx=conv_split.%s.f32.r%d" % (label, len(SPLITS[label][3])), "Reshape", _split(label),
              kind="context", focus=["focus_reshape"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [conv_channel_split_extra]
