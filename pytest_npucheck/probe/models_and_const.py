"""An And with a constant all-true operand on RKNN (issue 22): VisualBERT's padding mask.

VisualBERT's mask code Ands its (1, T) padding mask, reshaped to (1, T, 1, 1), with a (1, 1, 1, 1)
mask the exporter computed from constants (all true). rknn-toolkit2 2.5.0 rewrites an And to a Cast to
float, an NPU Mul and a CPU Cast back (cvt_and_to_fp_mul); with an all-true operand that does not
broadcast the other the Mul by one is removed and only the CPU Cast is left: the And runs on the
CPU. A true row that broadcasts the mask, or a mixed constant, keeps the NPU Mul.

Built like the families of models_op_context.py and listed in FAMILIES (ids ``x.And.ctx=const_input.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, constant value (None: alternating), constant shape)
CONST_OPERANDS = (
    ("true11", True, [1, 1, 1, 1]),
    ("true_row", True, [1, 1, 1, 16]),
    ("mixed_row", None, [1, 1, 1, 16]),
)


def _and_const(value, shape) -> GraphBuilder:
    """``int64 (1, 16) -> Cast bool -> Reshape (1, 16, 1, 1) -> And(constant, .) -> Where``; the And
    is ``focus_and``."""
    gb = GraphBuilder(17)
    b = gb.node("Cast", [gb.input("m", "int64", [1, 16])], name="pre_cast", to=9)
    r = gb.node("Reshape", [b, gb.ints([1, 16, 1, 1])], name="pre_reshape")
    val = np.full(shape, value, bool) if value is not None else (np.arange(16).reshape(shape) % 2 == 0)
    a = gb.node("And", [gb.const(val), r], name="focus_and")
    gb.output(gb.node("Where", [a, gb.const(np.float32(0)), gb.const(np.float32(-1e4))], name="post_where"))
    return gb


def and_const_extra(c: Collector) -> None:
    for label, value, shape in CONST_OPERANDS:
        c.add("x.And.ctx=const_input.%s.bool.r4" % label, "And", _and_const(value, shape), kind="context",
              focus=["focus_and"])


FAMILIES: list[Callable[[Collector], None]] = [and_const_extra]
