"""Graph facts read without the weights, and the fast JSON report writer (issue 8, goal 1).

The static check leaves out the values of large initializers before shape inference: the facts
must be exactly those of the model with its weights, on real exported models.
"""

from __future__ import annotations

import json
import math

import onnx
import pytest

from pytest_npucheck import facts_cache, graph
from pytest_npucheck.graph import build, gc_pause, protobuf
from pytest_npucheck.check import check_graph
from pytest_npucheck.jsonio import dumps
from pytest_npucheck.tables import Catalog

torch = pytest.importorskip("torch")


class _Net(torch.nn.Module):
    """Conv/BN/Linear with weights of every size class: >64 elements, <=64 elements (bias, BN)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8 * 8 * 8, 10)

    def forward(self, x):
        y = torch.nn.functional.pad(self.bn(self.conv(x)).relu(), (0, 0, 0, 0))
        return self.fc(y.flatten(1)).softmax(-1)


@pytest.fixture(scope="module", params=["torchscript", "dynamo"])
def exported(request, tmp_path_factory):
    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp(request.param)
    return export_model(_Net().eval(), torch.randn(1, 3, 8, 8), ExportOptions(exporter=request.param, opset=17),
                        d).path


def _full_facts(path):
    """Facts of the model as loaded with every weight (the reference)."""
    return facts_cache.to_json(graph.facts_from_model(onnx.load(str(path)), str(path)))


def test_without_weights_drops_only_large_initializer_values(exported):
    data = exported.read_bytes()
    light = protobuf._without_weights(data)
    assert light is not None and len(light) < len(data) / 4
    full, stripped = onnx.load_from_string(data), onnx.load_from_string(light)
    big = 0
    for a, b in zip(full.graph.initializer, stripped.graph.initializer):
        assert (a.name, list(a.dims), a.data_type) == (b.name, list(b.dims), b.data_type)
        numel = math.prod(a.dims)
        if numel > graph.SMALL_CONSTANT and a.ByteSize() >= 8 * graph.SMALL_CONSTANT:
            big += 1
            assert not b.raw_data and not b.float_data
        else:
            assert a == b  # small constants keep their values
    assert big >= 2  # conv and fc weights
    # everything outside the initializers is byte-identical
    for field in ("node", "input", "output", "value_info"):
        assert list(getattr(full.graph, field)) == list(getattr(stripped.graph, field))
    assert full.opset_import == stripped.opset_import and full.ir_version == stripped.ir_version


def test_without_weights_leaves_small_models_and_garbage_alone(exported):
    data = exported.read_bytes()
    tiny = onnx.load_from_string(data)
    for init in tiny.graph.initializer:
        del init.dims[:]
        init.dims.append(1)
        init.raw_data = init.raw_data[:4]
    assert protobuf._without_weights(tiny.SerializeToString()) is None  # nothing large: no copy
    with pytest.raises((ValueError, IndexError)):
        protobuf._without_weights(b"\x3a\xff\xff\xff\x0f" + data[:50])  # a graph field longer than the file


def test_facts_without_weights_equal_facts_with_weights(exported):
    graph.clear_caches()
    facts = graph.load_graph(exported)
    assert facts_cache.to_json(facts) == _full_facts(exported)
    conv = next(n for n in facts.nodes if n.op_type == "Conv")
    weight = facts.tensor(conv.inputs[1])
    assert weight.const and weight.shape == (8, 3, 3, 3) and weight.value is None
    bias = facts.tensor(conv.inputs[2])
    assert bias.value is not None and len(bias.value) == 8  # small: value kept


class _Stack(torch.nn.Module):
    """Three identical layers: their Gemm/MatMul, Add and Relu nodes have the same attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = torch.nn.functional.leaky_relu(layer(x), 0.1)
        return x.softmax(-1)


@pytest.mark.parametrize("exporter", ["torchscript", "dynamo"])
def test_nodes_with_the_same_attributes_share_one_dict_that_no_check_changes(exporter, tmp_path):
    """graph.build builds one attribute dict per (op, opset, attributes) and gives it to every such node
    (the memo keys verdicts by it); facts are never mutated, and checking against every table must
    leave each node's attributes exactly as they were read."""
    import copy

    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    path = export_model(_Stack().eval(), torch.randn(2, 16), ExportOptions(exporter=exporter, opset=17), tmp_path).path
    facts = graph.load_graph(path)
    relus = [n for n in facts.nodes if n.op_type == "LeakyRelu"]
    assert len(relus) == 3 and relus[0].attrs["alpha"] == pytest.approx(0.1)
    assert len({id(n.attrs) for n in relus}) == 1  # one decoding, one dict
    before = copy.deepcopy([(n.name, dict(n.attrs), n.explicit_attrs, dict(n.defaults)) for n in facts.nodes])
    catalog = Catalog.discover()
    tables = [catalog.table(r["target"]) for r in catalog.listing() if "error" not in r]
    results = check_graph(facts, tables)
    assert len(results) == len(tables) > 1
    assert [(n.name, dict(n.attrs), n.explicit_attrs, dict(n.defaults)) for n in facts.nodes] == before
    assert facts_cache.to_json(facts) == _full_facts(path)  # and the facts are still those of a fresh read


def test_report_json_round_trips_and_prints_one_node_per_line(exported):
    facts = graph.load_graph(exported)
    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    doc = [r.to_json() for r in check_graph(facts, [table])]
    text = dumps(doc)
    assert json.loads(text) == json.loads(json.dumps(doc))
    lines = text.splitlines()
    names = [n["name"] for n in doc[0]["nodes"]]
    if len(names) > 8:  # a long list of objects: one compact object per line
        for name in names:
            assert sum(1 for ln in lines if f'"name": {json.dumps(name)}' in ln) == 1
    assert lines[0] == "[" and lines[1] == "  {" and text.endswith("]\n")


def test_dumps_is_strict():
    with pytest.raises(ValueError):
        dumps([{"x": float("nan")}] * 10)
    with pytest.raises(ValueError):
        dumps({"x": float("inf")})
    with pytest.raises(TypeError):
        dumps({"x": object()})
    assert json.loads(dumps({"a": [], "b": {}, "c": [[1], [2]], "é": "ü"})) == {"a": [], "b": {}, "c": [[1], [2]],
                                                                                 "é": "ü"}


def _inferred_everywhere(path):
    """Facts with shape inference forced to run (the reference for the skip)."""
    saved = build._already_inferred
    build._already_inferred = lambda *a: False
    try:
        graph.clear_caches()
        return facts_cache.to_json(graph.load_graph(path))
    finally:
        build._already_inferred = saved


def test_shape_inference_is_skipped_only_when_the_file_has_every_static_shape(exported, monkeypatch):
    model = onnx.load(str(exported), load_external_data=False)
    rows = protobuf._read_nodes(model.graph)
    complete = all(o in {vi.name for vi in list(model.graph.value_info) + list(model.graph.output)}
                   for _n, _op, _domain, _ins, outs, _attributes in rows for o in outs if o)
    assert build._already_inferred(model.graph, rows, {}) is complete
    assert complete is ("dynamo" in str(exported))  # the dynamo exporter writes every shape, TorchScript none
    calls = []
    real_infer = build._infer
    monkeypatch.setattr(build, "_infer", lambda m, *rest: calls.append(1) or real_infer(m, *rest))
    graph.clear_caches()
    facts = facts_cache.to_json(graph.load_graph(exported))
    assert bool(calls) is not complete
    monkeypatch.undo()
    assert facts == _inferred_everywhere(exported)  # the skip never changes a fact


def test_shape_inference_runs_when_one_value_is_missing_or_symbolic(tmp_path):
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6, 4])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r"),
             helper.make_node("Transpose", ["a"], ["y"], name="t", perm=[0, 2, 1])]
    for value_info, inferred in (([helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 6])], False),
                                 ([helper.make_tensor_value_info("a", TensorProto.FLOAT, ["n", 4, 6])], True),
                                 ([], True)):
        model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], value_info=value_info))
        rows = protobuf._read_nodes(model.graph)
        assert build._already_inferred(model.graph, rows, {}) is not inferred
        facts = graph.facts_from_model(model)
        assert facts.tensor("a").dtype == "float32"
    # control flow: the pass types the values inside the bodies, so it always runs
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["b"])], "then", [],
                             [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 4, 6])])
    cond = helper.make_tensor_value_info("c", TensorProto.BOOL, [])
    iff = helper.make_node("If", ["c"], ["a"], then_branch=body, else_branch=body, name="if")
    model = helper.make_model(helper.make_graph([iff, nodes[1]], "g", [x, cond], [y], value_info=[
        helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 6])]))
    assert not build._already_inferred(model.graph, protobuf._read_nodes(model.graph), {})


def test_gc_pause_promotes_the_burst_without_touching_a_frozen_set(monkeypatch):
    import gc

    monkeypatch.setattr(gc_pause, "_FROZEN", False)
    asked = []
    count = gc.get_freeze_count
    monkeypatch.setattr(gc, "get_freeze_count", lambda: asked.append(1) or count())
    was = gc.isenabled()
    gc.enable()
    try:
        gc.collect()
        with graph.paused_gc():
            burst = [[i] for i in range(5000)]  # tracked objects
        assert gc.isenabled()
        assert gc.get_count()[0] < 1000  # young generation emptied into the oldest, no collection owed
        assert all(gc.is_tracked(b) for b in burst[:10])
        gc.freeze()  # someone else's frozen set stays frozen
        frozen = gc.get_freeze_count()
        with graph.paused_gc():
            more = [[i] for i in range(100)]
        assert gc.get_freeze_count() == frozen and len(more) == 100
        # the frozen list is walked by get_freeze_count (O(frozen objects)): once frozen, not asked again
        asked.clear()
        for _ in range(3):
            with graph.paused_gc():
                more.append([0])
        assert asked == [] and gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
        gc.enable() if was else gc.disable()


def test_external_data_check_keeps_each_nodes_attributes_for_the_facts(exported):
    """load_graph reads each node's attributes once: the external-data check keeps them for the facts."""
    kept: list = []
    model = graph.load_model_proto(exported, weights=False, keep=kept)
    assert len(kept) == len(model.graph.node) and any(kept)
    for node, attributes in zip(model.graph.node, kept):
        assert [a.SerializeToString() for a in attributes] == [a.SerializeToString() for a in node.attribute]
    with_kept = facts_cache.to_json(graph.facts_from_model(model, str(exported), kept))
    assert with_kept == facts_cache.to_json(graph.facts_from_model(model, str(exported)))
    assert with_kept == _full_facts(exported)
    # a list that does not fit the graph is not used: the rows read the attributes themselves
    rows = protobuf._read_nodes(model.graph, kept[:-1])
    assert [[a.SerializeToString() for a in r[5]] for r in rows] == \
        [[a.SerializeToString() for a in n.attribute] for n in model.graph.node]


def test_shape_inference_reads_the_bytes_the_weights_were_left_out_of(exported, monkeypatch):
    """load_graph hands shape inference the serialized model without its weights (no second
    serialization); the facts are those of inferring the parsed model."""
    kept = graph.Kept()
    model = graph.load_model_proto(exported, weights=False, keep=kept)
    assert kept.serialized is not None and onnx.ModelProto.FromString(kept.serialized) == model
    seen = []
    real_infer = build._infer
    monkeypatch.setattr(build, "_infer", lambda m, serialized=None: seen.append(serialized) or real_infer(m, serialized))
    graph.clear_caches()
    facts = facts_cache.to_json(graph.facts_from_model(model, str(exported), kept))
    if "dynamo" in str(exported):
        assert seen == []  # every shape is in the file: no inference at all
    else:
        assert seen and seen[0] is kept.serialized
    monkeypatch.undo()
    assert facts == facts_cache.to_json(graph.facts_from_model(model, str(exported)))


def test_initializers_written_after_the_graph_values_keep_their_weights_and_the_facts(tmp_path):
    """The weight-skipping scan stops at the first graph field after the initializers (protobuf writes
    fields in number order); a file that puts initializers after its inputs and outputs is still
    valid protobuf: those keep their values, and the facts are those of the whole model."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.arange(400, dtype=np.float32).reshape(20, 20), "w"),
             numpy_helper.from_array(np.arange(20, dtype=np.float32), "b")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 20])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 20])
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"), helper.make_node("Add", ["m", "b"], ["y"], name="add")]
    canonical = helper.make_model(helper.make_graph(nodes, "g", [x], [y], initializer=inits), opset_imports=[
        helper.make_opsetid("", 17)])
    data = canonical.SerializeToString()
    light = protobuf._without_weights(data)
    assert light is not None and len(light) <= len(data) - 1600  # the 20x20 weight's values are left out

    def field(number, payload):
        return protobuf._encode_varint(number << 3 | 2) + protobuf._encode_varint(len(payload)) + payload

    bare = onnx.ModelProto()
    bare.CopyFrom(canonical)
    del bare.graph.initializer[:]
    graph_bytes = bare.graph.SerializeToString() + b"".join(field(5, t.SerializeToString()) for t in inits)
    bare.ClearField("graph")
    late = bare.SerializeToString() + field(7, graph_bytes)
    parsed = onnx.load_from_string(late)
    assert [t.name for t in parsed.graph.initializer] == ["w", "b"] and parsed.graph.input[0].name == "x"
    assert protobuf._without_weights(late) is None  # nothing left out: the file is read whole
    path = tmp_path / "late.onnx"
    path.write_bytes(late)
    canonical_path = tmp_path / "canonical.onnx"
    canonical_path.write_bytes(data)
    facts = facts_cache.to_json(graph.load_graph(path))
    assert facts == _full_facts(path)
    assert facts["nodes"] == facts_cache.to_json(graph.load_graph(canonical_path))["nodes"]
