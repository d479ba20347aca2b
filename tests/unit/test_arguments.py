"""arguments.py: one parser per check argument, shared by the marker, npu_check(...) and the ini keys."""

from __future__ import annotations

import pytest

from pytest_npucheck import arguments
from pytest_npucheck.errors import UsageError

W = "t.py::test_x: @pytest.mark.npu_deployable"


@pytest.mark.parametrize("key,value,fragment", [
    ("targets", 123, "targets=123"),
    ("targets", [], "targets=[]"),
    ("targets", ["rknn", 5], "targets=['rknn', 5]"),
    ("exporter", "onnx", "exporter='onnx'"),
    ("opset", 10 ** 9, "from 7 to 23"),
    ("opset", 6, "from 7 to 23"),
    ("opset", True, "opset=True"),
    ("opset", "17", "opset='17'"),
    ("input_names", 123, "input_names=123"),
    ("input_names", ["a", "a"], "given twice"),
    ("output_names", [""], "output_names=['']"),
    ("numerics", "false", "numerics='false': expected True or False"),
    ("golden", 1, "golden=1"),
    ("dynamic_axes", {"x": [0, "a"]}, "dynamic_axes['x']=[0, 'a']: axis 'a' is not a whole number"),
    ("dynamic_axes", {"x": [[0]]}, "axis [0] is not a whole number"),
    ("dynamic_axes", {"x": [True]}, "axis True is not a whole number"),
    ("dynamic_axes", {"x": {"b": "batch"}}, "axis 'b' is not a whole number"),
    ("dynamic_axes", {"x": {0: 1}}, "dim name must be a non-empty string"),
    ("dynamic_axes", {1: [0]}, "input name 1 is not a string"),
    ("dynamic_axes", {"x": 0}, "expected a list of axes"),
    ("dynamic_axes", "x", "dynamic_axes='x'"),
])
def test_bad_values_name_the_argument_and_where(key, value, fragment):
    with pytest.raises(UsageError) as info:
        arguments.parse({key: value}, W)
    assert str(info.value).startswith(W + ": ") and fragment in str(info.value), str(info.value)


def test_good_values_are_parsed_into_their_types():
    got = arguments.parse({"targets": "rknn", "input_names": "image", "output_names": ["a", "b"], "opset": 23,
                           "dynamic_axes": {"x": [0, 2], "y": {"1": "seq"}}, "numerics": False, "golden": None,
                           "exporter": "torchscript"}, W)
    assert got == {"targets": ("rknn",), "input_names": ("image",), "output_names": ("a", "b"), "opset": 23,
                   "dynamic_axes": {"x": {0: "x_dim0", 2: "x_dim2"}, "y": {1: "seq"}}, "numerics": False,
                   "golden": None, "exporter": "torchscript"}


def test_unknown_arguments_are_named():
    with pytest.raises(UsageError, match="unknown argument\\(s\\) exportr"):
        arguments.parse({"exportr": "dynamo"}, W)
