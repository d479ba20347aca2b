"""toolchains/registry.py in a pytest run: a target of a toolchain plug-in, checked and run by its oracle.

The plug-in is tests/data/toolchain_plugin (``acme``, registered by its dist-info's entry point and
shipping its own table); the suite names ``acme@1.0/npu1`` in its marker and passes no
``--npu-tables``: the table, the static check and ``--npu-oracle`` all come through the registry.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_npucheck.toolchains import registry

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

PLUGIN = Path(__file__).resolve().parents[1] / "data" / "toolchain_plugin"

TEST_MODULE = '''
import pytest, torch

class ConvTanh(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(torch.tanh(self.conv(x)))

@pytest.fixture
def model():
    return ConvTanh()

@pytest.fixture
def example_inputs():
    return (torch.randn(1, 3, 16, 16),)

@pytest.mark.npu_deployable(targets=["acme@1.0/npu1"])
def test_conv_tanh(model, example_inputs):
    pass
'''


@pytest.fixture
def acme(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(PLUGIN))
    registry.reset()
    yield
    monkeypatch.undo()
    registry.reset()


@pytest.mark.without_xdist(reason="the plug-in toolchain is put on this process's sys.path for the test (its "
                            "dist-info is a test fixture, not installed); xdist workers start from the startup path")
def test_a_plugin_toolchain_is_checked_and_run_as_oracle(pytester: pytest.Pytester, acme: None) -> None:
    from pytest_npucheck.report.jsonreport import validate

    pytester.makepyfile(test_acme=TEST_MODULE)
    pytester.makeini("[pytest]\naddopts = -p no:cacheprovider\n")
    r = pytester.runpytest("--npu-oracle", "--npu-report=json:r.json")
    r.assert_outcomes(passed=1)
    assert "oracle acme@1.0/npu1: acme-npu-sdk 1.0 built the model at fp16" in r.stdout.str()
    doc = json.loads((pytester.path / "r.json").read_text())
    assert validate(doc) == []
    [test] = doc["tests"]
    [t] = test["targets"]
    assert t["target"] == "acme@1.0/npu1"
    [o] = test["oracle"]["targets"]
    assert (o["toolchain"], o["status"], o["package"], o["package_version"]) == ("acme", "ran", "acme-npu-sdk", "1.0")
    assert o["agreement"]["disagreements"] == [] and o["agreement"]["nodes"] == o["agreement"]["agree"] == 3
    assert o["numerics"]["candidate"] == "ACME emulator fp16" and o["numerics"]["passed"] is True
