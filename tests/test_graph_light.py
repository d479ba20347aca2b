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
    light = graph._without_weights(data)
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
    assert graph._without_weights(tiny.SerializeToString()) is None  # nothing large: no copy
    with pytest.raises((ValueError, IndexError)):
        graph._without_weights(b"\x3a\xff\xff\xff\x0f" + data[:50])  # a graph field longer than the file


def test_facts_without_weights_equal_facts_with_weights(exported):
    graph.clear_caches()
    facts = graph.load_graph(exported)
    assert facts_cache.to_json(facts) == _full_facts(exported)
    conv = next(n for n in facts.nodes if n.op_type == "Conv")
    weight = facts.tensor(conv.inputs[1])
    assert weight.const and weight.shape == (8, 3, 3, 3) and weight.value is None
    bias = facts.tensor(conv.inputs[2])
    assert bias.value is not None and len(bias.value) == 8  # small: value kept


def test_nodes_sharing_attributes_do_not_share_attribute_dicts(exported):
    facts = graph.load_graph(exported)
    by_op: dict[str, list] = {}
    for n in facts.nodes:
        by_op.setdefault(n.key, []).append(n)
    shared = [ns for ns in by_op.values() if len(ns) > 1]
    for ns in shared:
        assert len({id(n.attrs) for n in ns}) == len(ns)


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
