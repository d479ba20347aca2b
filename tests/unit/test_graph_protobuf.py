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
    with pytest.raises(OSError):
        protobuf.read_without_weights(tmp_path / "missing.onnx", quiet=False)
    bad = _weighted()
    bad.graph.initializer[0].raw_data = bad.graph.initializer[0].raw_data[:-4]
    bad_path = save(bad)
    assert protobuf.read_without_weights(bad_path) is None
    with pytest.raises(ModelError, match="raw_data size"):
        protobuf.read_without_weights(bad_path, quiet=False)


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
    rows, names = protobuf.nodes_serialized(data)
    expected_names: list[str] = []
    expected = protobuf._read_nodes_serialized(protobuf.parse_types_serialized(data).graph, expected_names)
    assert [r[1:] for r in rows] == [r[1:] for r in expected] and names == expected_names == ["mm", "relu"]
    body = helper.make_graph([helper.make_node("Identity", ["y"], ["z"])], "body", [],
                             [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)])
    branchy = _weighted([helper.make_node("If", ["c"], ["o"], then_branch=body, else_branch=body)])
    assert protobuf.nodes_serialized(branchy.SerializeToString()) is None
    assert protobuf.nodes_serialized(b"\xff\xff\xff garbage") is None


def test_facts_take_the_rows_read_ahead_only_when_they_are_as_many_as_the_nodes():
    from onnx import shape_inference

    from pytest_npucheck.graph import build

    model = _weighted()
    inferred = shape_inference.infer_shapes(model).SerializeToString()
    m, kept = build.from_inferred(inferred)
    reference = build.facts_from_model(m, "<memory>", kept, inferred=True)
    rows, names = protobuf.nodes_serialized(model.SerializeToString())
    m, kept = build.from_inferred(inferred)
    assert build.facts_from_model(m, "<memory>", kept, inferred=True, nodes=(rows, names)) == reference
    m, kept = build.from_inferred(inferred)
    assert build.facts_from_model(m, "<memory>", kept, inferred=True, nodes=(rows[:1], names[:1])) == reference
