"""graph.location: source locations read from the exporters' records, and written by format_location."""

from __future__ import annotations

import os

import pytest
from onnx import helper

from conftest import make_model

from pytest_npucheck.graph import SourceLocation, facts_from_model, format_location
from pytest_npucheck.report.text import source_text
from pytest_npucheck.report.rows import where

TRACE = ('File "/home/u/proj/model.py", line 12, in forward\n    y = self.conv(x)\n'
         'File "/usr/lib/python3/site-packages/torch/nn/modules/conv.py", line 554, in forward\n'
         '    return self._conv_forward(input, self.weight, self.bias)')

CASES = [
    SourceLocation(module="layer1.conv1", file="/home/u/proj/model.py", line=12),
    SourceLocation(module="", file="/home/u/proj/model.py", line=12),
    SourceLocation(module="blocks.0", file=None, line=None),
    SourceLocation(module=None, file="model.py", line=None),
    SourceLocation(module=None, file=os.path.join(os.getcwd(), "pkg", "net.py"), line=7),
    SourceLocation(),
    None,
]


@pytest.mark.parametrize("loc", CASES, ids=lambda c: str(c))
def test_format_location_writes_a_location_as_every_report_did(loc):
    """One function for what the text report (file relative to the working directory), the report
    views (file name only) and SourceLocation.__str__ (file as recorded) each wrote on their own."""
    assert format_location(loc, path="relative") == source_text(loc)
    assert format_location(None if loc is None else loc.to_json(), path="name") == where(
        None if loc is None else loc.to_json())
    if loc is not None:
        assert format_location(loc) == str(loc) == format_location(loc.to_json())


def test_format_location_examples():
    assert format_location(CASES[0]) == "layer1.conv1 at /home/u/proj/model.py:12"
    assert format_location(CASES[1], path="name") == "<root> at model.py:12"
    assert format_location(CASES[2]) == "blocks.0"
    assert format_location(CASES[4], path="relative") == os.path.join("pkg", "net.py") + ":7"
    assert format_location({"module": None, "file": "C:\\work\\net.py", "line": 3}, path="name") == "net.py:3"
    assert format_location(CASES[5]) == format_location(None) == "unknown"


def test_the_user_frame_and_module_come_from_the_dynamo_exporters_metadata():
    node = helper.make_node("Relu", ["x"], ["y"], name="relu_3")
    for key, value in (("pkg.torch.onnx.name_scopes", "['', 'layer1', 'layer1.conv1', 'relu_3']"),
                       ("pkg.torch.onnx.stack_trace", TRACE)):
        node.metadata_props.add(key=key, value=value)
    facts = facts_from_model(make_model([node], [("x", (1, 4))], ["y"]))
    src = facts.nodes[0].source
    assert (src.module, src.file, src.line, src.function, src.code) == (
        "layer1.conv1", "/home/u/proj/model.py", 12, "forward", "y = self.conv(x)")  # not torch's own frame
    assert format_location(src, path="name") == "layer1.conv1 at model.py:12"


def test_a_torchscript_scope_name_gives_the_module():
    node = helper.make_node("Relu", ["x"], ["y"], name="/layer1/conv1/Relu")
    src = facts_from_model(make_model([node], [("x", (1, 4))], ["y"])).nodes[0].source
    assert src == SourceLocation(module="layer1.conv1") and format_location(src) == "layer1.conv1"


@pytest.mark.parametrize("name", ["/layer1/conv1/Relu", "/Relu", "//x/Relu", "/a//b/Relu", "/a/b/", "/", "Relu_7",
                                  "layer1/Relu"])
def test_a_scope_name_gives_the_same_module_with_or_without_the_metadata_read(name):
    from pytest_npucheck.graph import Kept
    from pytest_npucheck.graph.location import _source

    def facts(kept):
        node = helper.make_node("Relu", ["x"], ["y"], name=name)
        return facts_from_model(make_model([node], [("x", (1, 4))], ["y"]), attributes=kept).nodes[0].source

    kept = Kept()
    kept.serialized = b"a model whose bytes hold no metadata key"
    expected = _source(helper.make_node("Relu", ["x"], ["y"], name=name), name)
    assert facts(kept) == facts(None) == expected


def test_the_metadata_is_not_read_when_the_models_bytes_hold_none_of_its_keys():
    from pytest_npucheck.graph import Kept

    node = helper.make_node("Relu", ["x"], ["y"], name="/block/Relu")
    node.metadata_props.add(key="pkg.torch.onnx.name_scopes", value="['', 'layer1', 'relu_3']")
    model = make_model([node], [("x", (1, 4))], ["y"])
    assert facts_from_model(model).nodes[0].source.module == "layer1"
    # the bytes the facts were read from are the model's (load_model_proto's Kept): a parsed model
    # holding a key its bytes do not hold is made up here, to show that the nodes were not asked
    kept = Kept()
    kept.serialized = model.SerializeToString().replace(b"pkg.torch.onnx.", b"pkg.other.onnx.")
    assert facts_from_model(model, attributes=kept).nodes[0].source.module == "block"
    kept.serialized = model.SerializeToString()
    assert facts_from_model(model, attributes=kept).nodes[0].source.module == "layer1"
