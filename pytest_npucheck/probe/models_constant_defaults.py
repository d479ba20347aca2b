"""Attributes left at their default that rknn-toolkit2 cannot read (issue 22, item 4).

* ``constant_of_shape_value_extra``: a ConstantOfShape without its ``value`` attribute (the default
  is a float32 zero), as torch's dynamo exporter writes ``new_zeros``/``zeros`` in some models (the
  zoo's dynamo AXK2, DeepSeek-V3.2, GLM-MoE-DSA, HunYuan-V4, Mistral-Large-4, Youtu): rknn-toolkit2
  2.5.0's load_onnx fails ("'numpy.ndarray' object has no attribute 'data_type'" in
  IRGraph.convert_to_fp32). The same op with ``value`` written, of a constant or of a computed
  shape.

Built with :mod:`.builder` like every family and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import TensorProto, helper

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _constant_of_shape)
CONSTANT_OF_SHAPE = (
    ("value=absent", {}),
    ("value=float_zero", {"value": 0.0}),
    ("value=absent.shape=of_input", {"shape": "of_input"}),
    ("value=float_zero.shape=of_input", {"value": 0.0, "shape": "of_input"}),
)


def _constant_of_shape(value: float | None = None, shape: str = "const") -> GraphBuilder:
    """``x [1, 16] + ConstantOfShape(shape)``, the shape a constant [1, 16] or ``Shape(x)``; ``value``
    written as a float32 one-element tensor, or left out (None)."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 16])
    dims = gb.ints([1, 16]) if shape == "const" else gb.node("Shape", [x], name="pre_shape")
    attrs = {} if value is None else {"value": helper.make_tensor("value", TensorProto.FLOAT, [1], [value])}
    c = gb.node("ConstantOfShape", [dims], name="focus_cos", **attrs)
    gb.output(gb.node("Add", [x, c], name="post_add"))
    return gb


def constant_of_shape_value_extra(c: Collector) -> None:
    """ConstantOfShape with and without its value attribute (CONSTANT_OF_SHAPE)."""
    for label, kw in CONSTANT_OF_SHAPE:
        c.add("x.ConstantOfShape.ctx=%s.f32.r2" % label, "ConstantOfShape", _constant_of_shape(**kw), kind="context",
              focus=["focus_cos"])


FAMILIES: list[Callable[[Collector], None]] = [constant_of_shape_value_extra]
