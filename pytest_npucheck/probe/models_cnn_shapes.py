"""CNN shapes the model zoo samples little (issue 22, held-out breadth). Ids start with ``q.``.

The main probes place Conv, ConvTranspose and the pools with channel counts that are powers of two.
torchvision/timm-style networks also have odd channel counts (depthwise convolutions of 3, 7 or 13
channels, grouped convolutions of 3 or 5 channels per group), transposed convolutions with groups
and an output_padding, 3-D convolutions with a stride and depthwise, and pools with ceil_mode on
odd sizes, also 5-D. ``cnn_shapes_extra`` places each, followed by a Relu, to see whether any
leaves the NPU where the table's entry for the op says it runs.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

_RNG = np.random.default_rng(29)

#: label -> (op, input shape, weight shape (None: a pool), attributes)
CNN_SHAPES: dict[str, tuple[str, list[int], Any, dict[str, Any]]] = {
    "dw.c3": ("Conv", [1, 3, 16, 16], [3, 1, 3, 3], {"group": 3, "pads": [1, 1, 1, 1]}),
    "dw.c7.s2": ("Conv", [1, 7, 16, 16], [7, 1, 3, 3], {"group": 7, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "dw.c13.k5": ("Conv", [1, 13, 15, 15], [13, 1, 5, 5], {"group": 13, "pads": [2, 2, 2, 2]}),
    "group3.c9.o6": ("Conv", [1, 9, 16, 16], [6, 3, 3, 3], {"group": 3, "pads": [1, 1, 1, 1]}),
    "group5.c15.s2": ("Conv", [1, 15, 15, 15], [15, 3, 3, 3], {"group": 5, "pads": [1, 1, 1, 1], "strides": [2, 2]}),
    "c3.o5": ("Conv", [1, 3, 17, 17], [5, 3, 3, 3], {"pads": [1, 1, 1, 1]}),
    "convt.group2.c6.o4": ("ConvTranspose", [1, 6, 8, 8], [6, 2, 2, 2], {"group": 2, "strides": [2, 2]}),
    "convt.dw.c7": ("ConvTranspose", [1, 7, 8, 8], [7, 1, 4, 4],
                    {"group": 7, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "convt.c5.op1": ("ConvTranspose", [1, 5, 7, 7], [5, 3, 3, 3],
                     {"strides": [2, 2], "pads": [1, 1, 1, 1], "output_padding": [1, 1]}),
    "conv3d.s2.c3": ("Conv", [1, 3, 8, 16, 16], [8, 3, 3, 3, 3], {"pads": [1] * 6, "strides": [2, 2, 2]}),
    "conv3d.dw.c5": ("Conv", [1, 5, 4, 8, 8], [5, 1, 3, 3, 3], {"group": 5, "pads": [1] * 6}),
    "maxpool.ceil.odd": ("MaxPool", [1, 5, 15, 15], None, {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    "avgpool.ceil.pads": ("AveragePool", [1, 5, 15, 15], None,
                          {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                           "count_include_pad": 0}),
    "maxpool5d.ceil": ("MaxPool", [1, 4, 5, 9, 9], None, {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "ceil_mode": 1}),
}


def _cnn(label: str) -> GraphBuilder:
    op, shape, wshape, attrs = CNN_SHAPES[label]
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", shape)
    inputs = [x]
    if wshape is not None:
        inputs.append(gb.const((_RNG.standard_normal(wshape) * 0.2).astype(np.float32)))
        out_ch = wshape[0] if op == "Conv" else wshape[1] * attrs.get("group", 1)
        inputs.append(gb.const((_RNG.standard_normal(out_ch) * 0.1).astype(np.float32)))
    y = gb.node(op, inputs, name="focus_op", **attrs)
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def cnn_shapes_extra(c: Collector) -> None:
    """Odd channel counts, grouped/depthwise and 3-D convolutions, ConvTranspose with groups and output_padding,
    pools with ceil_mode (CNN_SHAPES)."""
    for label, (op, shape, _w, _a) in CNN_SHAPES.items():
        c.add("q.%s.ctx=cnn_shapes.%s.f32.r%d" % (op, label, len(shape)), op, _cnn(label), kind="context",
              focus=["focus_op", "post_relu"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [cnn_shapes_extra]
