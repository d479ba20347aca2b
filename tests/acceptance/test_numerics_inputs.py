"""The numeric checks with inputs the reference run changes and with bfloat16 models (issue 27, items
15 and 18): pytester runs of real models exported by torch and run on ONNX Runtime."""

from __future__ import annotations

import json

import pytest

from conftest import TOY_TABLES

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")
rel = pytest.mark.reliability


def _run(pytester, source: str, *args: str):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider -p no:randomly\n")
    pytester.makepyfile(test_inputs=source)
    res = pytester.runpytest_inprocess("--npu-report=json:report.json", *args)
    text = res.stdout.str() + res.stderr.str()
    doc = json.loads((pytester.path / "report.json").read_text()) if (pytester.path / "report.json").exists() else None
    return res, text, doc


@rel("G18")
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_model_that_changes_its_input_in_place_passes_numerics(pytester, exporter):
    res, text, doc = _run(pytester, f"""
        import pytest, torch

        class AddsInPlace(torch.nn.Module):
            def forward(self, x):
                x.add_(1.0)
                return x * 2.0

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter={exporter!r})
        def test_in_place(npu_check):
            x = torch.arange(8, dtype=torch.float32).reshape(2, 4)
            before = x.clone()
            npu_check(AddsInPlace().eval(), x)
            assert torch.equal(x, before), "the check changed the test's own input tensor"
    """)
    assert res.ret == 0, text[-4000:]
    (entry,) = doc["tests"]
    comparison = entry["numerics"]["onnx_vs_pytorch"]
    assert comparison is not None and comparison["passed"], comparison


@rel("G15")
def test_a_bfloat16_model_gets_its_verdict_and_one_sentence_about_numerics(pytester):
    res, text, doc = _run(pytester, """
        import pytest, torch

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", opset=12)
        def test_bf16(npu_check):
            model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to(torch.bfloat16).eval()
            npu_check(model, torch.randn(1, 4, dtype=torch.bfloat16))
    """)
    res.assert_outcomes(failed=1)
    assert "leaves the NPU" not in text  # the only failure is the numerics sentence
    assert "INTERNALERROR" not in text and "TypeError" not in text and "Traceback" not in text, text[-4000:]
    assert "input 0 is bfloat16" in text and "numerics=False" in text, text[-4000:]
    (entry,) = doc["tests"]
    assert entry["export"] is not None and entry["targets"], entry  # exported and judged
    assert "bfloat16" in entry["numerics"]["error"]


@rel("G15")
def test_a_bfloat16_model_with_numerics_off_passes(pytester):
    res, text, _ = _run(pytester, """
        import pytest, torch

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", opset=12, numerics=False)
        def test_bf16(npu_check):
            model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to(torch.bfloat16).eval()
            npu_check(model, torch.randn(1, 4, dtype=torch.bfloat16))
    """)
    assert res.ret == 0, text[-4000:]
