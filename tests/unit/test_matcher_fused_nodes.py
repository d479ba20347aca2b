"""matcher: a node a pre-pass fuses into another runs where that node runs (a BatchNormalization
fused into a Conv that leaves the NPU is a CPU fallback too, as onnxruntime-qnn places it: the
FastSpeech2 decoder's Conv1d + BatchNorm after a data-dependent length)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from conftest import const, make_model


def _conv_bn(kernel: int):
    inits = [const("w", np.ones((4, 4, kernel, kernel), "float32")), const("b", np.zeros((4,), "float32"))]
    inits += [const(n, np.full((4,), 0.5, "float32")) for n in ("g", "beta", "mean", "var")]
    return make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[kernel, kernel],
                                        pads=[kernel // 2] * 4),
                       helper.make_node("BatchNormalization", ["c", "g", "beta", "mean", "var"], ["y"], name="bn")],
                      [("x", (1, 4, 16, 16))], ["y"], initializers=inits)


@pytest.mark.parametrize("kernel,conv,bn", [(3, "npu", "folded"), (9, "cpu", "cpu")])
def test_batchnorm_fused_into_a_conv_takes_its_placement(judge, kernel, conv, bn):
    res = judge(_conv_bn(kernel))
    assert (res["conv"].verdict, res["bn"].verdict) == (conv, bn)
    [why] = res["bn"].reasons
    assert why.message.startswith("fused into Conv conv")
    assert why.message.endswith(", which runs on the CPU") == (bn == "cpu")
