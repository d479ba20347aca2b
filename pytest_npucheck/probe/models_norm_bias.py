"""LayerNormalization without its bias input, by opset (issue 22). Ids ``x.LayerNormalization.ctx=no_bias.*``.

The rknn 2.5.0 table called a LayerNormalization without bias a rejection (``build()`` failed on the opset-17
probe ``LayerNormalization.axis=m1.bias=no``), but the dynamo exports of OLMo, MPT and ModernBERT (opset 18,
``bias=False`` layers written with two inputs) built with every such node on the NPU. The family places the
two-input form at opset 17 and 18, with a constant weight of ones (OLMo's parameter-free norm) or of other
values, inside a network or alone between the graph's input and output, with and without the ``epsilon``
attribute, and the three-input form as the control.

Listed in FAMILIES, which probe/extra_families.py builds last.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, opset, weight values, with a bias input)
NO_BIAS = (
    ("opset=17.weight=ones", 17, "ones", False),
    ("opset=18.weight=ones", 18, "ones", False),
    ("opset=17.weight=ramp", 17, "ramp", False),
    ("opset=18.weight=ramp", 18, "ramp", False),
    ("opset=18.bias=yes", 18, "ramp", True),
    # where the norm sits: on the graph input and/or producing the graph output (the opset-17 op probe that
    # failed is a lone norm between the two)
    ("opset=17.weight=ramp.at=both", 17, "ramp", False),
    ("opset=17.weight=ramp.at=input", 17, "ramp", False),
    ("opset=17.weight=ramp.at=output", 17, "ramp", False),
    ("opset=18.weight=ramp.at=both", 18, "ramp", False),
    # without the epsilon attribute (its default 1e-5), as the failing op probe writes it
    ("opset=17.weight=ramp.eps=default.at=both", 17, "ramp", False),
    ("opset=17.weight=ramp.eps=default", 17, "ramp", False),
    ("opset=18.weight=ramp.eps=default", 18, "ramp", False),
    ("opset=17.bias=yes.eps=default", 17, "ramp", True),
)


def _no_bias(opset: int, weight: str, bias: bool, c: int = 32, at: str = "", eps: bool = True) -> GraphBuilder:
    gb = GraphBuilder(opset)
    x = gb.input("x", "float32", [1, 16, c])
    if at not in ("both", "input"):
        x = gb.node("Relu", [x], name="pre_relu")
    w = np.ones(c, np.float32) if weight == "ones" else np.linspace(0.5, 1.5, c).astype(np.float32)
    ins = [x, gb.const(w)] + ([gb.const(np.linspace(-0.1, 0.1, c).astype(np.float32))] if bias else [])
    y = (gb.node("LayerNormalization", ins, axis=-1, epsilon=1e-5, name="focus_norm") if eps
         else gb.node("LayerNormalization", ins, axis=-1, name="focus_norm"))
    gb.output(y if at in ("both", "output") else gb.node("Relu", [y], name="post_relu"))
    return gb


def norm_no_bias_extra(c: Collector) -> None:
    """LayerNormalization with two inputs at opset 17 and 18 (NO_BIAS)."""
    for label, opset, weight, bias in NO_BIAS:
        at = label.split(".at=")[1] if ".at=" in label else ""
        c.add("x.LayerNormalization.ctx=no_bias.%s.f32.r3" % label, "LayerNormalization",
              _no_bias(opset, weight, bias, at=at, eps=".eps=default" not in label),
              kind="context", focus=["focus_norm"])


FAMILIES: list[Callable[[Collector], None]] = [norm_no_bias_extra]
