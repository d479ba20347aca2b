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
