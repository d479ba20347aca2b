"""Models ONNX Runtime refuses to load never pass the static check (issue 27, item 19).

Each broken model is first loaded by ONNX Runtime itself, which must refuse it (so the test follows
the runtime, not a guess), then checked with ``npucheck check``: exit 2 with the node named."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

from pytest_npucheck.cli import main

rel = pytest.mark.reliability


def _conv_weight():
    return numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")


BROKEN = {
    "softmax-axis-7": (make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=7)], [("x", (1, 3, 4, 4))],
                                  ["y"]), ["node 'sm' (Softmax)", "axis=7", "[-4, 3]"]),
    "flatten-axis-5": (make_model([helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=5)], [("x", (1, 3, 4, 4))],
                                  ["y"]), ["node 'fl' (Flatten)", "axis=5", "[-4, 4]"]),
    "orphan-output": (make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y", "z"]),
                      ["graph output 'z'", "produced by no node"]),
    "conv-unknown-attribute": (make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", foo=3)],
                                          [("x", (1, 3, 4, 4))], ["y"], [_conv_weight()]),
                               ["node 'conv' (Conv)", "Unrecognized attribute: foo"]),
    "relu-attribute-of-another-op": (make_model([helper.make_node("Relu", ["x"], ["y"], name="r", axis=1)],
                                                [("x", (1, 4))], ["y"]), ["node 'r' (Relu)", "axis"]),
}


@rel("G19")
@pytest.mark.parametrize("name", list(BROKEN))
def test_models_onnx_runtime_refuses_fail_the_check_naming_the_node(tmp_path, capsys, name):
    import onnxruntime as ort

    model, fragments = BROKEN[name]
    path = tmp_path / f"{name}.onnx"
    onnx.save(model, path)
    with pytest.raises(Exception):  # the runtime's own verdict: it does not load
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588"])
    out, err = capsys.readouterr()
    assert code == 2, out + err
    assert str(path) in err and "ONNX Runtime would refuse to load the model" in err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


VALID = {
    "negative-axis": make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=-4)], [("x", (1, 3, 4, 4))],
                                ["y"]),
    "flatten-axis-rank": make_model([helper.make_node("Flatten", ["x"], ["y"], name="fl", axis=4)],
                                    [("x", (1, 3, 4, 4))], ["y"]),
    "output-is-an-input": make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y", "x"]),
    "unknown-rank": make_model([helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=7)], [("x", None)], ["y"]),
    "conv": make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", kernel_shape=[1, 1])],
                       [("x", (1, 3, 4, 4))], ["y"], [_conv_weight()]),
}


@pytest.mark.parametrize("name", list(VALID))
def test_models_onnx_runtime_loads_are_still_checked(tmp_path, capsys, name):
    """The same checks never refuse a model the runtime loads (an unknown rank: nothing to say)."""
    import onnxruntime as ort

    path = tmp_path / f"{name}.onnx"
    onnx.save(VALID[name], path)
    if name != "unknown-rank":  # the runtime checks the axis once the rank is known, at run time
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    out, err = capsys.readouterr()
    assert code in (0, 1), out + err
    assert "would refuse" not in out + err


def test_a_constant_with_an_extra_attribute_is_left_to_the_runtime(tmp_path, capsys):
    """ONNX's checker refuses it, ONNX Runtime loads it (its Constants become initializers on load):
    the runtime decides (found by tests/corpus/test_fuzz.py::test_fuzz_cli, an `axis` on a Constant)."""
    import onnxruntime as ort

    node = helper.make_node("Constant", [], ["c"], name="const",
                            value=helper.make_tensor("v", TensorProto.FLOAT, [1, 4], [1.0] * 4))
    node.attribute.append(helper.make_attribute("axis", 1))
    path = tmp_path / "constant.onnx"
    onnx.save(make_model([node, helper.make_node("Add", ["x", "c"], ["y"], name="add")], [("x", (1, 4))], ["y"]), path)
    ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    out, err = capsys.readouterr()
    assert code in (0, 1) and "would refuse" not in out + err, out + err


def test_each_node_signature_is_checked_not_only_the_first_of_an_op(tmp_path, capsys):
    """The checker runs once per operator, attribute names and types and input/output counts: a
    second Softmax whose axis is a float is checked, though a valid Softmax came first."""
    import onnxruntime as ort

    good = helper.make_node("Softmax", ["x"], ["h"], name="sm_ok", axis=1)
    bad = helper.make_node("Softmax", ["h"], ["y"], name="sm_float")
    bad.attribute.append(helper.make_attribute("axis", 1.0))
    path = tmp_path / "two.onnx"
    onnx.save(make_model([good, bad], [("x", (1, 4))], ["y"]), path)
    with pytest.raises(Exception):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    err = capsys.readouterr().err
    assert code == 2 and "node 'sm_float' (Softmax)" in err and "axis" in err, err


def test_the_checker_s_refusal_is_told_before_an_earlier_node_s_axis(tmp_path, capsys):
    """Both are looked at in one pass over the nodes, but the checker's verdict comes first, as when
    the axes were a pass of their own: the first node's axis is out of range, the second node has an
    attribute its operator does not have, and the message names the second."""
    first = helper.make_node("Softmax", ["x"], ["h"], name="sm", axis=7)
    second = helper.make_node("Relu", ["h"], ["y"], name="r", foo=1)
    path = tmp_path / "both.onnx"
    onnx.save(make_model([first, second], [("x", (1, 3, 4, 4))], ["y"]), path)
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    err = capsys.readouterr().err
    assert code == 2 and "node 'r' (Relu)" in err and "axis=7" not in err, err


def test_the_first_node_with_an_axis_out_of_range_is_named(tmp_path, capsys):
    first = helper.make_node("Softmax", ["x"], ["h"], name="sm1", axis=5)
    second = helper.make_node("Softmax", ["h"], ["y"], name="sm2", axis=6)
    path = tmp_path / "axes.onnx"
    onnx.save(make_model([first, second], [("x", (1, 3, 4, 4))], ["y"]), path)
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    err = capsys.readouterr().err
    assert code == 2 and "node 'sm1' (Softmax)" in err and "axis=5" in err and "sm2" not in err, err


def test_the_earliest_axis_out_of_range_is_named_whatever_its_op(tmp_path, capsys):
    """The axes are read op by op (the facts' nodes by op): of a Gather and a later Softmax whose
    axes are both out of range, behind a valid Softmax, the Gather is named."""
    nodes = [helper.make_node("Softmax", ["x"], ["h"], name="sm_ok", axis=1),
             helper.make_node("Gather", ["h", "i"], ["g"], name="ga_bad", axis=9),
             helper.make_node("Softmax", ["g"], ["y"], name="sm_bad", axis=8)]
    index = numpy_helper.from_array(np.array([0], dtype=np.int64), "i")
    path = tmp_path / "axes_ops.onnx"
    onnx.save(make_model(nodes, [("x", (1, 3, 4, 4))], ["y"], [index]), path)
    code = main(["check", str(path), "--target", "rknn@2.5.0/rk3588", "--no-fixes"])
    err = capsys.readouterr().err
    assert code == 2 and "node 'ga_bad' (Gather)" in err and "axis=9" in err and "sm_bad" not in err, err


def _facts_of(model):
    from pytest_npucheck.graph import facts_from_model

    return facts_from_model(model)


def test_the_first_node_of_each_key_checks_what_every_node_would():
    """``first_of_signatures`` (the first node of each op, attributes and input/output counts) gives
    the nodes to check and the axis error a pass over every node gives: Concats of two and three
    inputs, a Clip with an omitted input, and equal nodes repeated."""
    from pytest_npucheck import validity

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Concat", ["a", "b"], ["c2"], name="c2", axis=1),
             helper.make_node("Concat", ["a", "b", "a"], ["c3"], name="c3", axis=1),
             helper.make_node("Concat", ["b", "a", "b"], ["c3b"], name="c3b", axis=1),
             helper.make_node("Clip", ["c3", "", "m"], ["k"], name="clip_max"),
             helper.make_node("Clip", ["c3b", "m", "m"], ["k2"], name="clip_both"),
             helper.make_node("Softmax", ["k"], ["s"], name="sm", axis=-1),
             helper.make_node("Softmax", ["k2"], ["y"], name="sm_bad", axis=4)]
    top = numpy_helper.from_array(np.array(6.0, dtype=np.float32), "m")
    model = make_model(nodes, [("x", (1, 3))], ["y"], [top])
    facts = _facts_of(model)
    assert facts.first_of_signatures == (0, 2, 3, 5, 6, 7, 8)  # the two Softmax axes: two keys, one signature
    sparse = validity._firsts_checked(facts, facts.first_of_signatures, "p")
    assert sparse == validity._every_node_checked(facts, "p", len(nodes))
    assert sparse[0] == [0, 2, 3, 5, 6, 7] and "'sm_bad'" in sparse[1]


def test_facts_with_a_body_list_no_first_nodes_and_are_checked_node_by_node():
    """A graph with an If body has no ``first_of_signatures`` (its positions among main-graph
    nodes are not its indices): validity reads every node, as for facts made by other paths."""
    branch = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 3])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                              [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 3])])
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True), "c")),
             helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=other)]
    facts = _facts_of(make_model(nodes, [("x", (1, 3))], ["y"]))
    assert facts.first_of_signatures is None
