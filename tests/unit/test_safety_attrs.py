"""External data referenced from node attributes (safety.iter_external): a Constant's tensor in
the file is skipped cheaply (thousands per large model), one stored outside is still checked, in
the main graph and in subgraph bodies."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.errors import ModelError
from pytest_npucheck.graph import load_graph


def _external(tensor, location):
    tensor.ClearField("raw_data")
    tensor.ClearField("float_data")
    tensor.data_location = onnx.TensorProto.EXTERNAL
    tensor.external_data.add(key="location", value=location)
    return tensor


def _write(tmp_path, model):
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    path = d / "m.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _constant_model(location=None):
    inline = helper.make_node("Constant", [], ["a"], name="inline", value=const("va", np.ones(4)))
    value = const("vb", np.ones(4))
    far = helper.make_node("Constant", [], ["b"], name="far",
                           value=_external(value, location) if location else value)
    add = helper.make_node("Add", ["a", "b"], ["c"], name="add")
    out = helper.make_node("Add", ["x", "c"], ["y"], name="out")
    return make_model([inline, far, add, out], [("x", (4,))], ["y"])


def test_in_file_constants_pass(tmp_path):
    facts = load_graph(_write(tmp_path, _constant_model()))
    assert facts.tensor("c").value == (2.0, 2.0, 2.0, 2.0)


def test_constant_stored_outside_the_model_directory_is_refused(tmp_path):
    with pytest.raises(ModelError, match=r"node 'far' attribute 'value' external data location '\.\./x\.bin'.*"
                                         r"'\.\.' would leave"):
        load_graph(_write(tmp_path, _constant_model("../x.bin")))


def test_constant_in_a_subgraph_body_is_checked(tmp_path):
    body_const = helper.make_node("Constant", [], ["k"], name="k",
                                  value=_external(const("vk", np.ones(4)), "/etc/passwd"))
    out = [helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [4])]
    then = helper.make_graph([body_const], "then", [], out)
    inline = helper.make_graph([helper.make_node("Constant", [], ["k"], name="k", value=const("vi", np.ones(4)))],
                               "else", [], out)
    cond = helper.make_node("Constant", [], ["cond"], name="cond", value=const("vc", np.array(True), "bool"))
    branch = helper.make_node("If", ["cond"], ["z"], name="if", then_branch=then, else_branch=inline)
    model = make_model([cond, branch, helper.make_node("Add", ["x", "z"], ["y"], name="add")], [("x", (4,))], ["y"])
    with pytest.raises(ModelError, match=r"node 'if' attribute 'then_branch' > node 'k' attribute 'value'.*absolute"):
        load_graph(_write(tmp_path, model))


def _with_large_weight(model):
    """The model plus an initializer big enough to be left out of the light read (protobuf._without_weights)."""
    model.graph.initializer.append(const("big", np.ones(4 * 64)))
    return model


@pytest.mark.parametrize("where", ["attribute", "subgraph", "initializer"])
def test_a_reference_is_refused_when_the_weights_are_left_out(tmp_path, where):
    """load_graph reads files without their large weights and skips the attribute walk when the bytes
    hold no b"location" (graph.Kept.references): every reference still has those bytes, and is refused."""
    from pytest_npucheck import graph

    if where == "attribute":
        model = _constant_model("../x.bin")
    elif where == "subgraph":
        body = helper.make_graph([helper.make_node("Constant", [], ["k"], name="k",
                                                   value=_external(const("vk", np.ones(4)), "/etc/passwd"))],
                                 "then", [], [helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [4])])
        other = helper.make_graph([helper.make_node("Constant", [], ["k"], name="k2", value=const("v2", np.ones(4)))],
                                  "else", [], [helper.make_tensor_value_info("k", onnx.TensorProto.FLOAT, [4])])
        cond = helper.make_node("Constant", [], ["cond"], name="cond", value=const("vc", np.array(True), "bool"))
        model = make_model([cond, helper.make_node("If", ["cond"], ["z"], name="if", then_branch=body, else_branch=other),
                            helper.make_node("Add", ["x", "z"], ["y"], name="add")], [("x", (4,))], ["y"])
    else:
        model = _constant_model()
        model.graph.initializer.append(_external(const("far_w", np.ones(4 * 64)), "../../w.bin"))
    path = _write(tmp_path, _with_large_weight(model))
    kept = graph.Kept()
    with pytest.raises(ModelError, match=r"external data location"):
        graph.load_model_proto(path, weights=False, keep=kept)
    assert kept.serialized is not None and kept.references  # read light, and the bytes were seen


def test_a_file_without_references_is_not_walked_and_keeps_its_facts(tmp_path):
    from pytest_npucheck import facts_cache, graph

    path = _write(tmp_path, _with_large_weight(_constant_model()))
    kept = graph.Kept()
    model = graph.load_model_proto(path, weights=False, keep=kept)
    assert kept.serialized is not None and not kept.references and len(kept) == 0  # no attribute was read for the check
    facts = graph.facts_from_model(model, str(path), kept)
    assert facts.tensor("c").value == (2.0, 2.0, 2.0, 2.0)
    full = graph.facts_from_model(onnx.load(str(path)), str(path))
    assert facts_cache.to_json(facts) == facts_cache.to_json(full)
