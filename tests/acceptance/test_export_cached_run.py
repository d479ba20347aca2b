"""export.py on a run where every export is cached: no process of the run (the controller, each
xdist worker) imports torch's ONNX exporters or builds the dynamo exporter's operator registry.
They cost seconds per process (issue 29, goal 1), and only a cache miss needs them."""

from __future__ import annotations

import json

import pytest

from conftest import TOY_TABLES

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

EXPORTER_MODULES = ("torch.onnx", "onnxscript", "onnx_ir")

SUITE = """
    import pytest, torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))

    @pytest.mark.parametrize("width", [8, 12])
    @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
    def test_dynamo(npu_check, width):
        torch.manual_seed(width)
        npu_check(Net().eval(), torch.randn(1, 3, width, width))

    @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], exporter="torchscript")
    def test_torchscript(npu_check):
        torch.manual_seed(3)
        npu_check(Net().eval(), torch.randn(1, 3, 8, 8))
"""

# Each process of the run (controller and workers) records the exporter modules it has at its end.
PROBE = """
    import json, os, sys

    def pytest_unconfigure(config):
        mods = sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "onnxscript", "onnx_ir")
                      and m.startswith({prefixes!r}))
        os.makedirs("modules", exist_ok=True)
        with open(os.path.join("modules", f"{{os.getpid()}}.json"), "w") as fh:
            # the worker id from xdist itself: PYTEST_XDIST_WORKER is inherited when this suite runs
            # inside a worker of an outer xdist run
            worker = getattr(config, "workerinput", {{}}).get("workerid")
            json.dump({{"worker": worker, "modules": mods}}, fh)
"""


def _modules(pytester) -> list[dict]:
    d = pytester.path / "modules"
    found = [json.loads(p.read_text()) for p in sorted(d.iterdir())]
    for p in d.iterdir():
        p.unlink()
    return found


@pytest.mark.slow  # three pytest processes (one with two xdist workers) import torch
@pytest.mark.without_xdist(reason="counts the processes of each run: its plain runs and its -n 2 run are its own")
@pytest.mark.own_export_cache(reason="its first run must export cold, its later runs hit its own cache")
def test_a_fully_cached_run_never_imports_the_exporters(pytester):
    pytester.makepyfile(test_cached=SUITE)
    pytester.makeconftest(PROBE.format(prefixes=EXPORTER_MODULES))
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} --npu-report=json:report.json\n")

    cold = pytester.runpytest_subprocess()
    cold.assert_outcomes(passed=3)
    (first,) = _modules(pytester)
    # the probe sees the exporters when they are used: both exporters and the dynamo registry
    assert "torch.onnx._internal.exporter._registration" in first["modules"]
    assert "onnxscript" in first["modules"]

    warm = pytester.runpytest_subprocess()
    warm.assert_outcomes(passed=3)
    report = json.loads((pytester.path / "report.json").read_text())
    assert [t["export"]["cache_hit"] for t in report["tests"]] == [True, True, True]
    (second,) = _modules(pytester)
    assert second["modules"] == []

    pytest.importorskip("xdist")
    parallel = pytester.runpytest_subprocess("-n", "2")
    parallel.assert_outcomes(passed=3)
    processes = _modules(pytester)
    assert sorted(p["worker"] or "controller" for p in processes) == ["controller", "gw0", "gw1"]
    assert [p["modules"] for p in processes] == [[], [], []]
