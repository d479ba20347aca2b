"""Pow by its constant exponent on RKNN (issue 22): YOSO's ``(1 - x) ** 9``.

The rknn 2.5.0 tables ran every Pow with a constant exponent on the NPU (probes of 2, 3 and 0.5).
YOSO's LSH attention raises ``1 - arccos(.) / pi`` to the 9th power and rknn-toolkit2 2.5.0 ran that
Pow on the CPU. Probed alone (Relu -> Pow -> Relu, rank 4), the NPU took the exponents 1, 2, 3, 0.5
and -0.5 (a square, a cube, a square root and its reciprocal) and the CPU every other one tried:
4, 5, 8, 9, -1, -2, 0.25, 1.5, 2.5.

Built like the families of models_op_context.py and listed in FAMILIES (ids ``x.Pow.exp=*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: exponents tried
EXPONENTS = (1.0, 2.0, 3.0, 0.5, -0.5, 4.0, 5.0, 8.0, 9.0, -1.0, -2.0, 0.25, 1.5, 2.5)


def pow_exponent_extra(c: Collector) -> None:
    """``Relu -> Pow(x, e) -> Relu`` for each exponent of EXPONENTS."""
    for e in EXPONENTS:
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", [1, 8, 16, 16])], name="pre_relu")
        y = gb.node("Pow", [x, gb.const(np.float32(e))], name="focus_pow")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        c.add("x.Pow.exp=%s.f32.r4" % ("%g" % e).replace("-", "m"), "Pow", gb, kind="context", focus=["focus_pow"])


FAMILIES: list[Callable[[Collector], None]] = [pow_exponent_extra]
