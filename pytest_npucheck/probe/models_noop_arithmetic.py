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


QNN_FAMILIES: list[Callable[[Collector], None]] = [noop_extra]
