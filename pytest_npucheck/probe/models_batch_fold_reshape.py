"""Rank-4 Reshapes that fold a map's positions into the batch, (1, A, B, W) -> (A B, 1, 1, W), on RKNN
(issue 22).

The plane rule of ``models_reshape_planes`` (a float Reshape between two rank-4 tensors runs on the NPU
when the (H, W) plane of its input and of its output holds a multiple of 8 elements, or one) calls CPU
torchvision RAFT's ``coords.reshape(B * H * W, 1, 1, 2)`` (a channels-last flow (1, 16, 16, 2) viewed as one
2-vector per pixel, output plane 1 x 2), which rknn-toolkit2 2.5.0 ran on the NPU (row 'Reshape (1,16,16,2)
-> (256,1,1,2)' NPU, read by Adds that broadcast it over a (1, 7, 7, 2) window). This family varies the
last dim W (2, 3, 7), the map (16 x 16, 7 x 7, 5 x 3), the op in front (a Relu of a graph input; RAFT's
Transpose (0, 2, 3, 1) of a channels-first map) and the reader (a Relu; RAFT's broadcast Add with a
(1, 7, 7, W) constant), and the fold that keeps one map axis, (1, A, B, W) -> (A, 1, B, W), as the
control. Ids ``x.Reshape.ctx=batch_fold.*``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (A, B, W)
SIZES = ((16, 16, 2), (7, 7, 2), (5, 3, 2), (16, 16, 3), (7, 7, 7), (4, 4, 8))
CONTEXTS = ("relu.relu", "transpose.add", "relu.add")


def _batch_fold(a: int, b: int, w: int, ctx: str, keep: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    pre, post = ctx.split(".")
    if pre == "transpose":  # RAFT: the flow (1, W, A, B) permuted channels last
        x = gb.node("Relu", [gb.input("x", "float32", [1, w, a, b])], name="pre_relu")
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_transpose")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", [1, a, b, w])], name="pre_relu")
    dst = [a, 1, b, w] if keep else [a * b, 1, 1, w]
    y = gb.node("Reshape", [x, gb.ints(dst)], name="focus_reshape")
    if post == "add":  # broadcast over a 7 x 7 window of offsets (RAFT's centroid + delta)
        y = gb.node("Add", [y, gb.const(np.random.default_rng(0).standard_normal([1, 7, 7, w]).astype(np.float32))],
                    name="post_add")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def batch_fold_extra(c: Collector) -> None:
    """Each SIZES row in each CONTEXT, and the control that keeps the map's second axis."""
    for a, b, w in SIZES:
        for ctx in CONTEXTS:
            c.add("x.Reshape.ctx=batch_fold.%dx%dx%d.%s.f32.r4" % (a, b, w, ctx), "Reshape",
                  _batch_fold(a, b, w, ctx, False), kind="context", focus=["focus_reshape"])
        c.add("x.Reshape.ctx=batch_fold.keep.%dx%dx%d.relu.relu.f32.r4" % (a, b, w), "Reshape",
              _batch_fold(a, b, w, "relu.relu", True), kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [batch_fold_extra]
