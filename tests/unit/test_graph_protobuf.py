"""graph.protobuf: the cut read the parent does before the isolated child starts, and the nodes of those bytes."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

from pytest_npucheck.errors import ModelError
from pytest_npucheck.graph import Kept, protobuf


def _weighted(extra=()):
    weight = numpy_helper.from_array(np.ones((32, 32), dtype=np.float32), "w")
    return make_model([helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
                       helper.make_node("Relu", ["m"], ["y"], name="relu"), *extra],
                      [("x", (1, 32))], ["y"], initializers=[weight])


def test_read_without_weights_is_the_cut_of_the_file_or_none(save, tmp_path):
    import mmap

    path = save(_weighted())
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        assert protobuf.read_without_weights(path) == protobuf._without_weights(buf, path)
    assert protobuf.read_without_weights(tmp_path / "missing.onnx") is None  # quiet: the checks say why
    import os

    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "fifo.onnx")
        assert protobuf.read_without_weights(tmp_path / "fifo.onnx") is None  # not opened: no writer to wait for
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert protobuf.read_without_weights(tmp_path / "empty.onnx") is None
    with pytest.raises(OSError):
        protobuf.read_without_weights(tmp_path / "missing.onnx", quiet=False)
    bad = _weighted()
    bad.graph.initializer[0].raw_data = bad.graph.initializer[0].raw_data[:-4]
    bad_path = save(bad)
    assert protobuf.read_without_weights(bad_path) is None
    with pytest.raises(ModelError, match="raw_data size"):
        protobuf.read_without_weights(bad_path, quiet=False)


def test_read_ahead_is_the_cut_or_else_the_files_own_bytes(save, tmp_path, monkeypatch):
    """``read_ahead``: (cut, cut) when there are weights to leave out; (None, the file's bytes) when
    the scan found none (small weights only); (None, None) in read_without_weights' quiet cases."""
    path = save(_weighted())
    cut = protobuf.read_without_weights(path)
    assert cut is not None and protobuf.read_ahead(path) == (cut, cut)
    small = make_model([helper.make_node("Add", ["x", "b"], ["y"], name="add")], [("x", (1, 4))], ["y"],
                       initializers=[numpy_helper.from_array(np.ones(4, dtype=np.float32), "b")])
    small_path = save(small)
    assert protobuf.read_without_weights(small_path) is None
    assert protobuf.read_ahead(small_path) == (None, small_path.read_bytes())
    assert protobuf.read_ahead(tmp_path / "missing.onnx") == (None, None)
    (tmp_path / "empty.onnx").write_bytes(b"")
    assert protobuf.read_ahead(tmp_path / "empty.onnx") == (None, None)
    (tmp_path / "garbage.onnx").write_bytes(b"\x3a\xff\xff\xff\xff\x0f")  # a graph field longer than the file
    assert protobuf.read_ahead(tmp_path / "garbage.onnx") == (None, None)
    bad = _weighted()
    bad.graph.initializer[0].raw_data = bad.graph.initializer[0].raw_data[:-4]
    assert protobuf.read_ahead(save(bad)) == (None, None)  # the child's cut says what is wrong
    monkeypatch.setattr(protobuf, "QUIET_FIELDS", 1)  # the budget holds for the file's own bytes too
    assert protobuf.read_ahead(small_path) == (None, None)


def test_the_quiet_cut_gives_up_past_its_field_budget_and_the_checked_cut_does_not(save, monkeypatch):
    """The quiet cut runs before the isolated child, under no timeout: a graph of more fields than
    QUIET_FIELDS is left to the child (None), while the child's own cut reads it whole."""
    path = save(_weighted(extra=[helper.make_node("Identity", ["y"], [f"i{k}"]) for k in range(5)]))
    whole = protobuf.read_without_weights(path)
    assert whole is not None
    monkeypatch.setattr(protobuf, "QUIET_FIELDS", 6)  # fewer than the 7 nodes
    assert protobuf.read_without_weights(path) is None
    assert protobuf.read_without_weights(path, quiet=False) == whole
    monkeypatch.setattr(protobuf, "QUIET_FIELDS", 20)  # the nodes, the name, the initializer and the next field
    assert protobuf.read_without_weights(path) == whole


def test_load_model_proto_parses_the_bytes_it_is_given_as_it_would_cut_them(save):
    path = save(_weighted())
    plain, given = Kept(), Kept()
    model = protobuf.load_model_proto(path, weights=False, keep=plain)
    light = protobuf.read_without_weights(path)
    again = protobuf.load_model_proto(path, weights=False, keep=given, light=light)
    assert again == model and given.serialized is light and given.references == plain.references


def test_nodes_serialized_are_the_rows_of_the_bytes_and_none_for_bodies_or_garbage():
    model = _weighted()
    data = model.SerializeToString()
    rows, names, parsed = protobuf.nodes_serialized(data)
    assert protobuf.is_types_serialized(parsed) and len(parsed.graph.node) == 2
    expected_names: list[str] = []
    expected = protobuf._read_nodes_serialized(protobuf.parse_types_serialized(data).graph, expected_names)
    assert [r[1:] for r in rows] == [r[1:] for r in expected] and names == expected_names == ["mm", "relu"]
    body = helper.make_graph([helper.make_node("Identity", ["y"], ["z"])], "body", [],
                             [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    branchy = _weighted([helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=body)])
    assert protobuf.nodes_serialized(branchy.SerializeToString()) is None
    assert protobuf.nodes_serialized(b"\xff\xff\xff garbage") is None
    typed = _weighted()
    typed.graph.value_info.append(helper.make_tensor_value_info("m", TensorProto.FLOAT, [1, 32]))
    assert protobuf.nodes_serialized(typed.SerializeToString()) is None  # the child may run no pass


def test_facts_take_the_nodes_read_ahead_only_when_they_are_as_many_as_the_nodes():
    """``build.nodes_ahead``: the rows and NodeFacts of the bytes before inference, which the facts
    of the inferred model take (once) instead of reading its nodes: the same facts, field by field
    and in the same order; rows of another count are not taken."""
    from onnx import shape_inference

    from pytest_npucheck.graph import build

    const = helper.make_node("Constant", [], ["c"], name="c0",
                             value=numpy_helper.from_array(np.ones((1, 32), dtype=np.float32)))
    model = _weighted([const, helper.make_node("Add", ["y", "c"], ["z"], name="add")])
    model.graph.output.append(helper.make_empty_tensor_value_info("z"))
    inferred = shape_inference.infer_shapes(model).SerializeToString()

    def facts(nodes=None):
        m, kept = build.from_inferred(inferred)
        return build.facts_from_model(m, "<memory>", kept, inferred=True, nodes=nodes)

    reference = facts()
    ahead = build.nodes_ahead(model.SerializeToString())
    assert ahead is not None and ahead.builder is not None and [d[0] for d in ahead.deferred] == ["c"]
    taken = facts(ahead)
    assert ahead.builder is None  # taken once
    again = facts(ahead)  # the rows alone
    for got in (taken, again):
        assert got == reference and list(got.tensors) == list(reference.tensors)
        assert (got.producer, got.consumers, got.first_of_signatures, got.main_nodes_by_op) == (
            reference.producer, reference.consumers, reference.first_of_signatures, reference.main_nodes_by_op)
    short = build.nodes_ahead(model.SerializeToString())
    short.rows = short.rows[:1]
    assert facts(short) == reference and short.builder is not None  # not taken


def _inferred(model):
    from pytest_npucheck.graph.build import infer_serialized

    return infer_serialized(model.SerializeToString())


def test_the_childs_result_is_read_without_its_nodes_when_they_were_read_ahead():
    """``parse_types_serialized(nodes=False)``: each main-graph node is its NodeProto's bytes, the
    rest as with nodes; ``from_inferred`` takes it with the nodes read ahead (as many as the
    result's), and the facts and the validity checks are those of the whole parse."""
    import onnx

    from pytest_npucheck import validity
    from pytest_npucheck.graph.build import facts_from_model, from_inferred, nodes_ahead

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 2])
    source = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                         helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape"),
                         helper.make_node("Softmax", ["y"], ["z"], name="sm", axis=1)],
                        [("x", (1, 4))], ["z"], initializers=[shape])
    data = _inferred(source)
    whole = protobuf.parse_types_serialized(data)
    nodeless = protobuf.parse_types_serialized(data, nodes=False)
    assert protobuf.is_types_serialized(nodeless) and type(nodeless) is not type(whole)
    assert list(nodeless.graph.node) == [n.SerializeToString() for n in whole.graph.node]
    assert [onnx.NodeProto.FromString(n) for n in nodeless.graph.node] == [protobuf.as_node_proto(n)
                                                                          for n in whole.graph.node]
    assert [vi.name for vi in nodeless.graph.value_info] == [vi.name for vi in whole.graph.value_info]
    assert [vi.type for vi in nodeless.graph.value_info] == [vi.type for vi in whole.graph.value_info]
    assert isinstance(nodeless.graph.value_info[0].type, bytes)

    reference_model, reference_kept = from_inferred(data)
    reference = facts_from_model(reference_model, "m.onnx", reference_kept, inferred=True)
    ahead = nodes_ahead(source.SerializeToString())
    model, kept = from_inferred(data, ahead)
    assert type(model) is type(nodeless)
    facts = facts_from_model(model, "m.onnx", kept, inferred=True, nodes=ahead)
    assert facts == reference and list(facts.tensors.items()) == list(reference.tensors.items())
    validity.check_model(model, facts, "m.onnx")

    fewer = nodes_ahead(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                                   [("x", (1, 4))], ["y"]).SerializeToString())
    assert type(from_inferred(data, fewer)[0]) is type(whole)  # another count: the facts read the result's nodes


def test_a_node_the_checker_refuses_is_named_alike_from_its_bytes():
    """validity names a refused node the same whether the result's nodes are messages or bytes."""
    from pytest_npucheck import validity
    from pytest_npucheck.graph.build import facts_from_model, from_inferred, nodes_ahead

    weight = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")
    source = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv", foo=3)],
                        [("x", (1, 3, 4, 4))], ["y"], initializers=[weight])
    data = _inferred(source)
    messages = []
    for ahead in (None, nodes_ahead(source.SerializeToString())):
        model, kept = from_inferred(data, ahead)
        facts = facts_from_model(model, "m.onnx", kept, inferred=True, nodes=ahead)
        with pytest.raises(ModelError) as refused:
            validity.check_model(model, facts, "m.onnx")
        messages.append(str(refused.value))
    assert messages[0] == messages[1] and "node 'conv' (Conv)" in messages[0] and "foo" in messages[0]
