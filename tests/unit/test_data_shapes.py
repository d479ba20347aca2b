"""graph.data_shapes: which shapes depend on the result of a NonZero a compiler leaves to run time, on the
nonzero_extra probe graphs (a constant mask the facts evaluate) and a tiny graph of onnx.helper."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_npucheck.graph.data_shapes import data_dependent_shapes
from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.probe.models_data_dependent_shape import _nonzero

LABEL = "NonZero 'focus_nonzero' result"


def _dependent(model) -> dict:
    facts = facts_from_model(model)
    unfolded = {n.index for n in facts.nodes if n.op_type == "NonZero"}
    return {name: info.shape for name, info in data_dependent_shapes(facts, unfolded).items()}


@pytest.mark.parametrize("src", ["initializer", "const_of_shape"])
def test_every_shape_after_a_constant_nonzero_depends_on_its_result(src):
    facts = facts_from_model(_nonzero(src, "add").build())
    assert facts.tensor("post_add_out").static  # the facts evaluated the NonZero of a constant
    assert _dependent(_nonzero(src, "add").build()) == {
        "focus_nonzero_out": (2, LABEL), "post_rows_out": (LABEL,), "post_gather_out": (1, LABEL, 8),
        "post_add_out": (1, LABEL, 8)}


def test_a_reduction_over_the_dependent_axis_makes_the_shape_static_again():
    dep = _dependent(_nonzero("initializer", "restored").build())
    assert dep["post_gather_out"] == (1, LABEL, 8)
    assert "post_reduce_out" not in dep and "post_mul_out" not in dep


def test_a_nonzero_of_run_time_data_is_left_to_the_facts():
    # the facts mark it dynamic themselves (graph._mark_dynamic): nothing to add
    facts = facts_from_model(_nonzero("runtime", "add").build())
    assert not facts.tensor("post_add_out").static
    assert _dependent(_nonzero("runtime", "add").build()) == {}


def test_shape_arithmetic_on_a_dependent_tensor_depends_on_it_too():
    mask = numpy_helper.from_array(np.array([[1, 0, 1, 1]], np.int64), "mask")
    nodes = [helper.make_node("NonZero", ["mask"], ["nz"], name="focus_nonzero"),
             helper.make_node("Shape", ["nz"], ["shp"], name="shape"),
             helper.make_node("Reshape", ["x", "shp"], ["y"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [mask])
    dep = _dependent(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert dep["nz"] == (2, LABEL)
    # the Shape's own shape (2,) is static, its values are not: the Reshape to them is dynamic
    assert set(dep) == {"nz", "y"} and dep["y"] == (LABEL, LABEL)


def test_the_shape_of_a_static_tensor_computed_from_the_result_is_known():
    # the rows the NonZero picks are added to a (1, 4) tensor: values depend on the data, the shape
    # does not, so a Reshape to that tensor's Shape stays static
    mask = numpy_helper.from_array(np.array([[1, 0, 1, 1]], np.int64), "mask")
    nodes = [helper.make_node("NonZero", ["mask"], ["nz"], name="focus_nonzero"),
             helper.make_node("ReduceSum", ["nz"], ["total"], keepdims=0, name="total"),
             helper.make_node("Cast", ["total"], ["totalf"], to=TensorProto.FLOAT, name="cast"),
             helper.make_node("Add", ["x", "totalf"], ["y"], name="add"),
             helper.make_node("Shape", ["y"], ["shp"], name="shape"),
             helper.make_node("Reshape", ["x", "shp"], ["z"], name="reshape")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)], [mask])
    dep = _dependent(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert set(dep) == {"nz"}


def test_attribute_defaults_of_newer_opsets_do_not_stop_the_inference():
    # the facts fill Cast's opset-19+ defaults (saturate, round_mode) into an opset-17 node: the walk
    # infers with the node's own opset's attributes and finds the Cast's shape dependent, not unknown
    mask = numpy_helper.from_array(np.array([[1, 0, 1, 1]], np.int64), "mask")
    nodes = [helper.make_node("NonZero", ["mask"], ["nz"], name="focus_nonzero"),
             helper.make_node("Cast", ["nz"], ["nzf"], to=TensorProto.FLOAT, name="cast")]
    graph = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("nzf", TensorProto.FLOAT, None)], [mask])
    dep = _dependent(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    assert dep["nzf"] == (2, LABEL)


def test_a_dynamic_result_with_dims_known_only_from_the_facts_values_carries_the_dependence_on():
    # rows a run-time NonZero picks (1, N, 1) plus indices a NonZero of a constant gives (1, 1, W): the facts know
    # W = 8, onnxruntime does not; the contraction of the sum has no static shape for it, nor the Reshape's input
    # (placed by onnxruntime-qnn: q.Reshape.ctx=datadep_contraction.*_unknown_width, Longformer's Reshape_68)
    from pytest_npucheck.probe.models_datadep_contraction import _contraction_unknown_width

    model = _contraction_unknown_width("matmul").build()
    facts = facts_from_model(model)
    assert not facts.tensor("pre_widen_out").static and facts.tensor("pre_widen_out").shape[2] == 8
    assert facts.tensor("focus_op_out").static  # (1, 8, 4) in the facts
    dep = _dependent(model)

    def dynamic(shape):
        return tuple("dyn" if isinstance(d, str) else d for d in shape)

    assert dynamic(dep["pre_widen_out"]) == (1, "dyn", "dyn")
    assert dynamic(dep["focus_op_out"]) == (1, "dyn", 4)
    assert dynamic(dep["focus_reshape_out"]) == (1, "dyn")


def test_seeded_results_and_refined_shapes():
    # a seed is a result whose every dim the compiler leaves to run time; refined_shapes carries a shape a
    # rewrite made static on to the nodes after it
    from pytest_npucheck.graph.data_shapes import refined_shapes
    from pytest_npucheck.graph.facts import TensorInfo

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["r"], ["y"], name="sig")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    facts = facts_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    seeded = {k: v.shape for k, v in data_dependent_shapes(facts, set(), {"r": "run-time r"}).items()}
    assert seeded == {"r": ("run-time r", "run-time r"), "y": ("run-time r", "run-time r")}
    nodes = [helper.make_node("Sigmoid", ["x"], ["y"], name="sig")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    facts = facts_from_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    got = refined_shapes(facts, {"x": TensorInfo("x", "float32", (4, 3), False, None)})
    assert {k: v.shape for k, v in got.items()} == {"y": (4, 3)}
