"""check: one file against several targets, targets resolved before any work, unreadable models refused."""

from __future__ import annotations

import pytest
from onnx import helper

from conftest import make_model

from pytest_npucheck.check import check_file
from pytest_npucheck.errors import ModelError, UsageError


def _relu_sin():
    return make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                       helper.make_node("Sin", ["r"], ["y"], name="sin")], [("x", (1, 4))], ["y"])


def test_one_result_per_target_in_order(save, toy_catalog):
    path = save(_relu_sin())
    results = check_file(path, ["toy@1.1/soc-b", "toy@1.0/soc-a"], toy_catalog)
    assert [r.target for r in results] == ["toy@1.1/soc-b", "toy@1.0/soc-a"]
    for r in results:
        assert [n.name for n in r.nodes] == ["relu", "sin"]
        assert {n.name: n.verdict for n in r.nodes}["relu"] == "npu"


def test_an_unknown_target_fails_before_the_model_is_read(tmp_path, toy_catalog):
    missing = tmp_path / "not-there.onnx"
    with pytest.raises(UsageError, match="unknown toolchain 'nosuch' in target 'nosuch@9'"):
        check_file(missing, ["toy@1.0/soc-a", "nosuch@9"], toy_catalog)


def test_a_model_without_the_default_opset_is_refused(save, toy_catalog):
    model = _relu_sin()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(ModelError, match="imports no opset of the default ONNX domain"):
        check_file(save(model), ["toy@1.0/soc-a"], toy_catalog)
