"""The report is built and serialised with the cyclic GC paused (issue 8, goal 1): the caller's GC
state must be restored whatever happens."""

from __future__ import annotations

import gc
import json

import pytest

from pytest_npucheck.check import check_file
from pytest_npucheck.jsonio import dumps

onnx = pytest.importorskip("onnx")


@pytest.fixture
def result(tmp_path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"), helper.make_node("Sigmoid", ["a"], ["y"], name="s")]
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [x], [y])), path)
    [res] = check_file(path, ["rknn@2.5.0/rk3588"])
    return res


@pytest.mark.parametrize("enabled", [True, False])
def test_report_leaves_the_gc_as_it_found_it(result, enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        doc = result.to_json()
        assert gc.isenabled() is enabled
        text = dumps(doc)
        assert gc.isenabled() is enabled
        assert json.loads(text) == doc
        assert [n["name"] for n in doc["nodes"]] == ["r", "s"]
        with pytest.raises(ValueError):  # strict JSON: NaN refused, and the GC is restored on the way out
            dumps({"x": float("nan")})
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()

