"""Bad marker, ini and ``npu_check(...)`` arguments fail in one sentence naming the argument and the
test (issue 27, items 12, 16, 21): a usage error at collection for the marker and ini keys (never an
INTERNALERROR), a test failure for ``npu_check``'s arguments; the same value means the same thing
in both places."""

from __future__ import annotations

import onnx
import pytest

from conftest import TOY_TABLES

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")
rel = pytest.mark.reliability


def _run(pytester, test_source: str, ini: str = ""):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider -p no:randomly\n{ini}")
    pytester.makepyfile(test_args=test_source)
    res = pytester.runpytest_inprocess()
    return res, res.stdout.str() + res.stderr.str()


MARKER_CASES = [
    ("axes-str-in-list", "dynamic_axes={'x': [0, 'a']}", ["dynamic_axes['x']", "axis 'a' is not a whole number"]),
    ("axes-nested-list", "dynamic_axes={'x': [[0]]}", ["dynamic_axes['x']", "axis [0] is not a whole number"]),
    ("axes-not-a-mapping", "dynamic_axes=[0]", ["dynamic_axes=[0]"]),
    ("input-names-int", "input_names=123", ["input_names=123", "a name or a list of names"]),
    ("opset-huge", "opset=10**9", ["opset=1000000000", "from 7 to 23"]),
    ("numerics-str", "numerics='false'", ["numerics='false'", "True or False"]),
]


@rel("G12", "G21")
@pytest.mark.parametrize("argument,fragments", [c[1:] for c in MARKER_CASES], ids=[c[0] for c in MARKER_CASES])
def test_bad_marker_arguments_are_usage_errors_naming_test_and_argument(pytester, argument, fragments):
    res, text = _run(pytester, f"""
        import pytest

        @pytest.mark.npu_deployable(targets=["toy@1.0"], {argument})
        def test_m(npu_check):
            open("ran", "w").close()
    """)
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert "INTERNALERROR" not in text and not (pytester.path / "ran").exists()
    assert "test_args.py::test_m: @pytest.mark.npu_deployable" in text
    for fragment in fragments:
        assert fragment in text, (fragment, text[-3000:])


@rel("G12")
@pytest.mark.parametrize("value,fragment", [('{"x": [0, "a"]}', "axis 'a' is not a whole number"),
                                            ('{"x": {"0": 5}}', "the dim name must be a non-empty string")])
def test_bad_ini_dynamic_axes_is_a_usage_error(pytester, value, fragment):
    res, text = _run(pytester, """
        import pytest

        @pytest.mark.npu_deployable(targets=["toy@1.0"])
        def test_m(npu_check):
            pass
    """, ini=f"npu_dynamic_axes = {value}\n")
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert "INTERNALERROR" not in text and "ini key npu_dynamic_axes" in text and fragment in text, text[-3000:]


CALL_CASES = [
    ("targets-int", "targets=123", ["npu_check(): targets=123", "list of targets"]),
    ("numerics-str", "numerics='false'", ["npu_check(): numerics='false': expected True or False"]),
    ("golden-int", "golden=1", ["npu_check(): golden=1: expected True or False"]),
    ("opset-huge", "opset=10**9", ["npu_check(): opset=1000000000", "from 7 to 23"]),
    ("exporter", "exporter='onnxscript'", ["npu_check(): exporter='onnxscript'"]),
    ("axes", "dynamic_axes={'x': [0, 'a']}", ["npu_check(): dynamic_axes['x']"]),
]


@rel("G16", "G21")
@pytest.mark.parametrize("argument,fragments", [c[1:] for c in CALL_CASES], ids=[c[0] for c in CALL_CASES])
def test_bad_npu_check_arguments_fail_the_test_in_one_sentence(pytester, argument, fragments):
    res, text = _run(pytester, f"""
        import pytest, torch

        @pytest.mark.npu_deployable(targets=["toy@1.0"])
        def test_m(npu_check):
            npu_check(torch.nn.ReLU(), torch.randn(1, 4), {argument})
    """)
    res.assert_outcomes(failed=1)
    assert "INTERNALERROR" not in text and "Traceback" not in text and "TypeError" not in text, text[-3000:]
    for fragment in fragments:
        assert fragment in text, (fragment, text[-3000:])


@rel("G21")
def test_a_str_input_name_is_one_name_in_the_marker_and_in_npu_check(pytester):
    res, _ = _run(pytester, """
        import shutil, pytest, torch

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", input_names="image",
                                    numerics=False)
        def test_marker(npu_check):
            outcome = npu_check(torch.nn.ReLU(), torch.randn(1, 4))
            shutil.copy(outcome.onnx_path, "marker.onnx")

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", numerics=False)
        def test_call(npu_check):
            outcome = npu_check(torch.nn.ReLU(), torch.randn(1, 4), input_names="pixels", output_names="out")
            shutil.copy(outcome.onnx_path, "call.onnx")
    """)
    res.assert_outcomes(passed=2)
    for record, inputs, outputs in (("marker.onnx", ["image"], None), ("call.onnx", ["pixels"], ["out"])):
        model = onnx.load(pytester.path / record, load_external_data=False)
        assert [i.name for i in model.graph.input] == inputs
        if outputs:
            assert [o.name for o in model.graph.output] == outputs


def test_the_opset_range_is_what_the_installed_exporters_write():
    from torch.onnx import _constants

    from pytest_npucheck import arguments

    assert (arguments.MIN_OPSET, arguments.MAX_OPSET) == (_constants.ONNX_MIN_OPSET, _constants.ONNX_MAX_OPSET)
