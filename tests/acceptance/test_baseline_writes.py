"""--npu-update-baseline where the baseline cannot be written (issue 27, item 14): a usage error at
start when the location is unusable; a write that fails at the end is a named failure, the old
baseline stays and every report is still written."""

from __future__ import annotations

import json

import pytest

from conftest import TOY_TABLES

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")
rel = pytest.mark.reliability

SUITE = """
    import os, shutil, pytest, torch

    @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", opset=12, numerics=False)
    def test_m(npu_check):
        npu_check(torch.nn.ReLU(), torch.randn(1, 4))
        if os.environ.get("BREAK_BASELINE_DIR"):  # the directory goes away while the run goes on
            shutil.rmtree("bl")
            open("bl", "w").close()
"""


def _ini(pytester):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider -p no:randomly\n")


@rel("G14")
def test_an_unusable_baseline_location_is_a_usage_error_at_start(pytester):
    _ini(pytester)
    pytester.makepyfile(test_b=SUITE)
    (pytester.path / "afile").write_text("not a directory")
    res = pytester.runpytest_inprocess("--npu-update-baseline", "--npu-baseline=afile/npucheck-baseline.json")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert "--npu-update-baseline" in text and "is not a directory" in text and "INTERNALERROR" not in text


@rel("G14")
def test_a_failed_baseline_write_is_named_and_the_reports_are_still_written(pytester, monkeypatch):
    _ini(pytester)
    pytester.makepyfile(test_b=SUITE)
    (pytester.path / "bl").mkdir()
    monkeypatch.setenv("BREAK_BASELINE_DIR", "1")
    res = pytester.runpytest_inprocess("--npu-update-baseline", "--npu-baseline=bl/npucheck-baseline.json",
                                       "--npu-report=json:out/report.json", "--npu-report=md:out/report.md")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED, text[-3000:]
    assert "INTERNALERROR" not in text and "Traceback" not in text, text[-3000:]
    assert "npucheck baseline npucheck-baseline.json: could not be written" in text, text[-3000:]
    doc = json.loads((pytester.path / "out" / "report.json").read_text())
    assert doc["baseline"]["updated"] is False and "could not be written" in doc["baseline"]["error"]
    assert [t["nodeid"] for t in doc["tests"]] == ["test_b.py::test_m"]
    assert (pytester.path / "out" / "report.md").read_text().strip()
