"""Arithmetic no-ops onnxruntime removes before placement (issue 22). Ids start with ``q.``.

TorchScript exports keep ``x * 1`` and ``x + 0`` that Python code computes with scale factors of
one (Longformer's attention masks after a data-dependent Reshape): onnxruntime's no-op
elimination removes such a node before the QNN EP sees it, so it never leaves the NPU whatever its
shape. ``noop_extra`` places Add/Sub of 0 and Mul/Div by 1 (constant on the right or on the left, a
scalar or a broadcast tensor of ones, one that widens the shape) and the same ops by 2. On QNN
2.51.0 exactly the one-element neutral constants (a scalar or a (1,) tensor) were removed: on either
side of Add and Mul, on the right of Sub and Div; an (8,) or (2, 1, 1, 8) tensor of ones was kept.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, constant value, constant shape, constant first)
NOOPS = (
    ("mul1", "Mul", 1.0, [], False),
    ("mul1.left", "Mul", 1.0, [], True),
    ("mul1.vec", "Mul", 1.0, [8], False),
    ("mul1.one", "Mul", 1.0, [1], False),
    ("add0.left", "Add", 0.0, [], True),
    ("mul1.widen", "Mul", 1.0, [2, 1, 1, 8], False),
    ("add0", "Add", 0.0, [], False),
    ("sub0", "Sub", 0.0, [], False),
    ("div1", "Div", 1.0, [], False),
    ("mul2", "Mul", 2.0, [], False),
    ("add1", "Add", 1.0, [], False),
    ("sub0.left", "Sub", 0.0, [], True),
)


def _noop(op: str, value: float, shape: list[int], first: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 16, 8])], name="pre_relu")
    c = gb.const(np.full(shape, value, np.float32))
    y = gb.node(op, [c, x] if first else [x, c], name="focus_op")
    gb.output(gb.node("Sigmoid", [y], name="post_sigmoid"))
    return gb


def noop_extra(c: Collector) -> None:
    """Add/Sub of 0 and Mul/Div by 1, and the same ops with other constants (NOOPS)."""
    for label, op, value, shape, first in NOOPS:
        c.add("q.%s.ctx=noop.%s.f32.r3" % (op, label), op, _noop(op, value, shape, first), kind="context",
              focus=["focus_op"])


#: (label, where the Cast sits)
SAME_TYPE_CASTS = (
    ("one_reader", "one"),
    ("two_readers", "two"),
    ("rmsnorm", "rmsnorm"),
)


def _same_type_cast(where: str, dynamic: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    if dynamic:  # the rows of x a run-time NonZero picks: (N, 8)
        mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                                   gb.const(np.float32(0.0))], name="pre_mask")
        idx = gb.node("Transpose", [gb.node("NonZero", [mask], name="pre_nonzero")], perm=[1, 0], name="pre_idx")
        h = gb.node("GatherND", [x, idx], name="pre_rows")
    else:
        h = gb.node("Relu", [x], name="pre_relu")
    c = gb.node("Cast", [h], to=1, name="focus_cast")
    if where == "one":
        gb.output(gb.node("Sigmoid", [c], name="post_sigmoid"))
    elif where == "two":
        gb.output(gb.node("Mul", [gb.node("Sigmoid", [c], name="post_sigmoid"), c], name="post_mul"))
    else:  # Cast -> Pow/ReduceMean/Add/Sqrt/Div(1, .) -> Mul(x, .) -> Cast -> Mul(weight, .)
        sq = gb.node("Pow", [c, gb.const(np.float32(2.0))], name="post_pow")
        var = gb.node("ReduceMean", [sq], axes=[-1], keepdims=1, name="post_mean")
        std = gb.node("Sqrt", [gb.node("Add", [var, gb.const(np.float32(1e-6))], name="post_eps")], name="post_sqrt")
        inv = gb.node("Div", [gb.const(np.float32(1.0)), std], name="post_div")
        y = gb.node("Cast", [gb.node("Mul", [c, inv], name="post_norm")], to=1, name="focus_cast_tail")
        gb.output(gb.node("Mul", [gb.const(np.linspace(0.5, 1.5, 8).astype(np.float32)), y], name="post_weight"))
    return gb


def same_type_cast_extra(c: Collector) -> None:
    """A float32 Cast of a float32 tensor with one and two readers and around an RMSNorm, on static
    and data-dependent shapes (SAME_TYPE_CASTS)."""
    for label, where in SAME_TYPE_CASTS:
        for dynamic in (False, True):
            gb = _same_type_cast(where, dynamic)
            focus = ["focus_cast"] + (["focus_cast_tail"] if where == "rmsnorm" else [])
            c.add("q.Cast.ctx=same_type.%s.%s.f32.r3" % (label, "datadep" if dynamic else "static"), "Cast", gb,
                  kind="context", focus=focus)


#: (label, op, constant value, constant shape) applied to rows of x that a run-time NonZero picks: (N, 8)
NOOPS_DATADEP = (
    ("mul1", "Mul", 1.0, []),
    ("mul1.one", "Mul", 1.0, [1]),
    ("mul1.rank2", "Mul", 1.0, [1, 1]),
    ("mul1.widen", "Mul", 1.0, [1, 1, 1]),
    ("add0.one", "Add", 0.0, [1]),
    ("mul2.one", "Mul", 2.0, [1]),
)


def _noop_datadep(op: str, value: float, shape: list[int]) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16, 8])
    mask = gb.node("Greater", [gb.node("ReduceSum", [x, gb.ints([2])], keepdims=0, name="pre_sum"),
                               gb.const(np.float32(0.0))], name="pre_mask")
    idx = gb.node("Transpose", [gb.node("NonZero", [mask], name="pre_nonzero")], perm=[1, 0], name="pre_idx")
    rows = gb.node("GatherND", [x, idx], name="pre_rows")
    y = gb.node(op, [rows, gb.const(np.full(shape, value, np.float32))], name="focus_op")
    gb.output(gb.node("Sigmoid", [y], name="post_sigmoid"))
    return gb


def noop_datadep_extra(c: Collector) -> None:
    """Add of 0 and Mul by 1 (and by 2) of a tensor whose first dim a NonZero decides, with constants of
    rank 0 to 3 (NOOPS_DATADEP; Longformer multiplies its data-dependent window indices by [1])."""
    for label, op, value, shape in NOOPS_DATADEP:
        c.add("q.%s.ctx=noop_datadep.%s.f32.r2" % (op, label), op, _noop_datadep(op, value, shape), kind="prepass",
              focus=["focus_op"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [noop_extra, same_type_cast_extra, noop_datadep_extra]
