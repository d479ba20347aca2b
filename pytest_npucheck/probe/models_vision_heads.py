"""Vision-network pools, heads and batch reductions on RKNN (issue 22: torchvision/timm models nobody tuned on).

Two forms the zoo's vision family showed the table getting wrong:

* ``avgpool_ceil_extra`` (ids ``x.AveragePool.ctx=ceil.*``): timm's ResNet-D downsample
  ``AvgPool2d(2, 2, ceil_mode=True, count_include_pad=False)``. ceil_mode only matters where a
  window would hang over the input's end; the probes compare sizes where every window is whole
  (ceil and floor give the same output) with sizes that leave a partial window, on one or both
  axes, and count_include_pad 0 and 1.
* ``flatten_output_extra`` (ids ``x.Flatten.ctx=graph_output.*``): a classifier head whose Flatten
  produces the graph output (DLA / DPN's 1x1 Conv classifier, a global pool, a (1, C, 1, W) map),
  over channel counts and widths, to find when the Flatten stays on the NPU.
* ``reduce_batch_axis_extra`` (ids ``x.ReduceMean.ctx=axis0.*``, ``x.ReduceSum.ctx=axis0.*``): CrossViT's
  mean and EfficientViM's sum of stacked (N, 1, classes) logits, a reduction over axis 0 at ranks 3 and 4,
  batch 1 to 4, keepdims 0 and 1, of a computed tensor and of the graph input (``axis0.input.*``).

Built like the families of models_op_context.py and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

_RNG = np.random.default_rng(41)

#: label -> (input shape, kernel, strides, count_include_pad)
CEIL_POOLS: dict[str, tuple[list[int], list[int], list[int], int]] = {
    "k2s2.16x16.cip0": ([1, 8, 16, 16], [2, 2], [2, 2], 0),
    "k2s2.14x14.cip0": ([1, 24, 14, 14], [2, 2], [2, 2], 0),
    "k2s2.15x15.cip0": ([1, 8, 15, 15], [2, 2], [2, 2], 0),
    "k2s2.16x15.cip0": ([1, 8, 16, 15], [2, 2], [2, 2], 0),
    "k3s2.17x17.cip0": ([1, 8, 17, 17], [3, 3], [2, 2], 0),
    "k3s2.16x16.cip0": ([1, 8, 16, 16], [3, 3], [2, 2], 0),
    "k2s2.16x16.cip1": ([1, 8, 16, 16], [2, 2], [2, 2], 1),
    "k2s2.15x15.cip1": ([1, 8, 15, 15], [2, 2], [2, 2], 1),
}


def _ceil_pool(shape: list[int], k: list[int], s: list[int], cip: int) -> GraphBuilder:
    """``x -> Relu -> AveragePool(ceil_mode=1) -> Relu``; the pool is ``focus_pool``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    y = gb.node("AveragePool", [x], name="focus_pool", kernel_shape=k, strides=s, ceil_mode=1,
                count_include_pad=cip)
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def avgpool_ceil_extra(c: Collector) -> None:
    for label, (shape, k, s, cip) in CEIL_POOLS.items():
        c.add("x.AveragePool.ctx=ceil.%s.f32.r4" % label, "AveragePool", _ceil_pool(shape, k, s, cip),
              kind="context", focus=["focus_pool"])


#: label -> (head, input shape, output channels of the 1x1 Conv (None: no Conv))
FLATTEN_HEADS: dict[str, tuple[str, list[int], Any]] = {
    "conv1x1.c16.o1000": ("conv", [1, 16, 7, 7], 1000),
    "conv1x1.c16.o10": ("conv", [1, 16, 7, 7], 10),
    "conv1x1.c16.o16": ("conv", [1, 16, 7, 7], 16),
    "conv1x1.c16.o12": ("conv", [1, 16, 7, 7], 12),
    "gap.c16": ("gap", [1, 16, 7, 7], None),
    "gap.c24": ("gap", [1, 24, 7, 7], None),
    "gap.c10": ("gap", [1, 10, 7, 7], None),
    "relu.c8.4x4": ("relu", [1, 8, 4, 4], None),
    "relu.c16.1x1": ("relu", [1, 16, 1, 1], None),
    "relu.c2.1x32": ("relu", [1, 2, 1, 32], None),
    "relu.c3.1x32": ("relu", [1, 3, 1, 32], None),
    "relu.c2.1x5": ("relu", [1, 2, 1, 5], None),
}


def _flatten_head(head: str, shape: list[int], out_ch: Any) -> GraphBuilder:
    """``x -> Relu -> [GlobalAveragePool -> Conv 1x1 | GlobalAveragePool] -> Flatten`` (graph output);
    the Flatten is ``focus_flatten``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    if head in ("conv", "gap"):
        x = gb.node("GlobalAveragePool", [x], name="pre_gap")
    if head == "conv":
        w = gb.const((_RNG.standard_normal([out_ch, shape[1], 1, 1]) * 0.2).astype(np.float32))
        b = gb.const((_RNG.standard_normal(out_ch) * 0.1).astype(np.float32))
        x = gb.node("Conv", [x, w, b], name="pre_conv")
    gb.output(gb.node("Flatten", [x], name="focus_flatten", axis=1))
    return gb


def flatten_output_extra(c: Collector) -> None:
    for label, (head, shape, out_ch) in FLATTEN_HEADS.items():
        c.add("x.Flatten.ctx=graph_output.%s.f32.r4" % label, "Flatten", _flatten_head(head, shape, out_ch),
              kind="context", focus=["focus_flatten"])


FAMILIES: list[Callable[[Collector], None]] = [avgpool_ceil_extra, flatten_output_extra]


#: label -> (input shape, keepdims)
BATCH_REDUCES: dict[str, tuple[list[int], int]] = {
    "2x1x1000.kd0": ([2, 1, 1000], 0),     # CrossViT: the mean of the two branches' logits
    "4x1x16.kd0": ([4, 1, 16], 0),         # EfficientViM: the sum of the stages' logits
    "3x5x8.kd0": ([3, 5, 8], 0),
    "2x1x1000.kd1": ([2, 1, 1000], 1),
    "1x8x16.kd1": ([1, 8, 16], 1),
    "2x1x1x16.kd0": ([2, 1, 1, 16], 0),
    "2x3x4x8.kd1": ([2, 3, 4, 8], 1),
    "1x8x4x4.kd0": ([1, 8, 4, 4], 0),
    "1x8x16x16.kd1": ([1, 8, 16, 16], 1),  # the main probe's shape (a graph input and output there: CPU)
    "2x8x16x16.kd1": ([2, 8, 16, 16], 1),
    "1x8x4x4.kd1": ([1, 8, 4, 4], 1),
}


def _batch_reduce(op: str, shape: list[int], keepdims: int, pre: bool = True) -> GraphBuilder:
    """``x -> Relu -> Reduce<op>(axis 0) -> Relu`` (without ``pre``: of the graph input); the reduction
    is ``focus_reduce``."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", shape)
    if pre:
        x = gb.node("Relu", [x], name="pre_relu")
    if op == "ReduceSum":
        y = gb.node(op, [x, gb.ints([0])], name="focus_reduce", keepdims=keepdims)
    else:
        y = gb.node(op, [x], name="focus_reduce", axes=[0], keepdims=keepdims)
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def reduce_batch_axis_extra(c: Collector) -> None:
    for op in ("ReduceMean", "ReduceSum"):
        for label, (shape, kd) in BATCH_REDUCES.items():
            c.add("x.%s.ctx=axis0.%s.f32.r%d" % (op, label, len(shape)), op, _batch_reduce(op, shape, kd),
                  kind="context", focus=["focus_reduce"])
        for label in ("2x1x1000.kd0", "1x8x4x4.kd0", "2x3x4x8.kd1", "1x8x16x16.kd1"):
            shape, kd = BATCH_REDUCES[label]
            c.add("x.%s.ctx=axis0.input.%s.f32.r%d" % (op, label, len(shape)), op,
                  _batch_reduce(op, shape, kd, pre=False), kind="context", focus=["focus_reduce"])


FAMILIES.append(reduce_batch_axis_extra)
