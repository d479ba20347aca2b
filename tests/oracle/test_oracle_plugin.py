"""``--npu-oracle``: the real toolchains next to the static check, in a pytest run.

The runs with a real toolchain need it installed (``NPUCHECK_RKNN_PYTHON`` /
``NPUCHECK_QNN_PYTHON``, as ``.ci/run`` sets them) and are skipped otherwise; the option's
behaviour without a toolchain is tested everywhere.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


def _installed(var: str) -> bool:
    exe = os.environ.get(var, "")
    return bool(exe) and os.path.isfile(exe) and os.access(exe, os.X_OK)


needs_rknn = pytest.mark.skipif(not _installed("NPUCHECK_RKNN_PYTHON"),
                                reason="rknn-toolkit2 not installed: set NPUCHECK_RKNN_PYTHON (scripts/setup-rknn-venv.sh)")
needs_qnn = pytest.mark.skipif(not _installed("NPUCHECK_QNN_PYTHON"),
                               reason="onnxruntime-qnn not installed: set NPUCHECK_QNN_PYTHON (scripts/setup-qnn-venv.sh)")

TARGETS = {"rknn": ("rknn", "2.5.0", "rk3588"), "qnn": ("qnn", "2.51.0", "htp-v73")}

# Conv -> Erf -> Relu: both real toolchains run Erf on the CPU and the rest on the NPU.
TEST_MODULE = '''
import pytest, torch

class ConvErf(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(torch.erf(self.conv(x)))

@pytest.fixture
def model():
    return ConvErf()

@pytest.fixture
def example_inputs():
    return (torch.randn(1, 3, 16, 16),)

@pytest.mark.npu_deployable(targets=[TARGET])
def test_conv_erf(model, example_inputs):
    pass
'''


def _wrong_tables(root: Path, toolchain: str) -> Path:
    """A copy of the real table whose Erf entry says NPU: a deliberate table bug."""
    tc, version, soc = TARGETS[toolchain]
    table = json.loads((REPO / "op_support_tables" / tc / version / f"{soc}.json").read_text())
    assert table["ops"]["ai.onnx:Erf"]["status"] == "cpu"
    table["ops"]["ai.onnx:Erf"]["status"] = "npu"
    out = root / "wrong-tables" / tc / version
    out.mkdir(parents=True)
    (out / f"{soc}.json").write_text(json.dumps(table))
    return root / "wrong-tables"


def _project(pytester: pytest.Pytester, toolchain: str) -> str:
    tc, version, soc = TARGETS[toolchain]
    target = f"{tc}@{version}/{soc}"
    pytester.makepyfile(test_oracle_model=TEST_MODULE.replace("TARGET", repr(target)))
    tables = _wrong_tables(pytester.path, toolchain)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={tables} -p no:cacheprovider\n")
    return target


def _oracle_run(pytester: pytest.Pytester, toolchain: str) -> None:
    from pytest_npucheck.report.jsonreport import validate

    target = _project(pytester, toolchain)
    # default mode: the wrong table passes the static check; the oracle reports the table bug
    r = pytester.runpytest("--npu-oracle", "--npu-report=json:r.json", "--npu-report=md:r.md",
                           "--npu-report=html:r.html")
    r.assert_outcomes(passed=1)
    text = r.stdout.str()
    assert f"oracle {target}: " in text and "TABLE BUG Erf" in text and "a missed fallback" in text
    doc = json.loads((pytester.path / "r.json").read_text())
    assert validate(doc) == []
    [test] = doc["tests"]
    assert test["oracle"]["mode"] == "report" and test["oracle"]["disagreements"] == 1
    [o] = test["oracle"]["targets"]
    assert o["status"] == "ran" and o["build_status"] == "ok" and o["precision"] == "fp16"
    assert o["toolchain_version"] and o["toolchain_version"].startswith(version_prefix(toolchain))
    [d] = o["agreement"]["disagreements"]
    assert (d["op_type"], d["static"], d["real"], d["kind"]) == ("Erf", "npu", "cpu", "missed_fallback")
    assert d["real_reasons"]  # what the toolchain said about the node
    assert o["agreement"]["nodes"] == 3 and o["agreement"]["agree"] == 2
    # oracle numerics: the real simulator/emulator against the PyTorch outputs, fp16 policy
    num = o["numerics"]
    assert num["status"] == "ok" and num["reference"] == "pytorch" and num["inputs_source"] == "given"
    assert num["passed"] is True and num["comparison"]["policy"] == "fp16"
    [out] = num["comparison"]["outputs"]
    m = out["metrics"]
    assert m["compared"] == 8 * 16 * 16
    # fp16 on outputs in (-1, 1): errors of fp16 rounding size, neither zero (it did run in fp16) nor large
    assert 1e-5 < m["max_abs"] < 1e-2 and m["cosine"] > 0.9999 and 40 < m["snr_db"] < 120
    assert num["seed"] == test["numerics"]["emulation"][0]["result"]["seed"]
    # side by side with the emulated candidate in the Markdown and the HTML
    md = (pytester.path / "r.md").read_text()
    assert "### Table bugs found by the real toolchains" in md and "<summary>Real toolchains (oracles)" in md
    engine = {"rknn": "RKNN simulator fp16", "qnn": "QNN HTP emulator fp16"}[toolchain]
    rows = [line for line in md.splitlines() if line.startswith("| fp16 emulated") or line.startswith(f"| {engine}")]
    assert len(rows) == 2
    page = (pytester.path / "r.html").read_text()
    assert '<section id="table-bugs">' in page and f"<td>{engine}" in page

    # strict: the same disagreement fails the test, and the failure says why
    r = pytester.runpytest("--npu-oracle=strict")
    r.assert_outcomes(failed=1)
    text = r.stdout.str()
    assert "oracle (strict): the real toolchain disagrees with the table" in text and "TABLE BUG Erf" in text


def version_prefix(toolchain: str) -> str:
    return {"rknn": "2.", "qnn": "2."}[toolchain]


@needs_rknn
def test_oracle_rknn_reports_table_bug_and_simulator_numerics(pytester: pytest.Pytester) -> None:
    _oracle_run(pytester, "rknn")


@needs_qnn
def test_oracle_qnn_reports_table_bug_and_htp_numerics(pytester: pytest.Pytester) -> None:
    _oracle_run(pytester, "qnn")


def test_oracle_not_installed_is_said_not_silent(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_npucheck.report.jsonreport import validate

    monkeypatch.setenv("NPUCHECK_RKNN_PYTHON", str(pytester.path / "no-such-python"))
    target = _project(pytester, "rknn")
    pytester.path.joinpath("pytest.ini").write_text(
        f"[pytest]\naddopts = --npu-tables={pytester.path / 'wrong-tables'} -p no:cacheprovider\nnpu_oracle = strict\n")
    r = pytester.runpytest("--npu-report=json:r.json")
    # strict with nothing to run is no green run: a usage error naming what to install
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert f"--npu-oracle=strict: the real toolchain of these targets cannot run here" in r.stderr.str()
    assert f"{target}: rknn-toolkit2 is not installed: set NPUCHECK_RKNN_PYTHON" in r.stderr.str()
    r = pytester.runpytest("--npu-report=json:r.json", "--npu-oracle=report")
    r.assert_outcomes(passed=1)  # report mode says so and goes on
    assert f"oracle {target}: not run: rknn-toolkit2 is not installed: set NPUCHECK_RKNN_PYTHON" in r.stdout.str()
    doc = json.loads((pytester.path / "r.json").read_text())
    assert validate(doc) == []
    [o] = doc["tests"][0]["oracle"]["targets"]
    assert o["status"] == "unavailable" and "NPUCHECK_RKNN_PYTHON" in o["reason"] and o["agreement"] is None


def test_oracle_for_a_toolchain_without_one(pytester: pytest.Pytester) -> None:
    from conftest import TOY_TABLES

    pytester.makepyfile(test_toy=TEST_MODULE.replace("TARGET", repr("toy@1.0/soc-a")).replace("torch.erf", "torch.tanh"))
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n")
    r = pytester.runpytest("--npu-oracle", "--npu-no-numerics")
    assert "oracle toy@1.0/soc-a: not run: no oracle for toolchain 'toy'" in r.stdout.str()


def test_oracle_mode_is_validated(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    r = pytester.runpytest("--npu-oracle=sometimes")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "oracle mode 'sometimes': expected one of off, report, strict" in r.stderr.str()
    pytester.makeini("[pytest]\nnpu_oracle = maybe\n")
    r = pytester.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "ini key npu_oracle" in r.stderr.str()


# -- int8: the simulators quantized with the calibration inputs ----------------------------------

@pytest.fixture(scope="module")
def conv_model(tmp_path_factory: pytest.TempPathFactory):
    import numpy as np
    import torch

    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(),
                                torch.nn.Conv2d(8, 4, 1)).eval()
    x = torch.randn(1, 3, 16, 16)
    res = export_model(model, (x,), ExportOptions(exporter="dynamo", opset=19),
                       cache_dir=tmp_path_factory.mktemp("oracle-int8"))
    with torch.no_grad():
        ref = model(x).numpy()
    import onnx

    proto = onnx.load(str(res.path))
    feeds = {proto.graph.input[0].name: x.numpy()}
    calib = [feeds] + [{proto.graph.input[0].name: np.random.default_rng(k).standard_normal((1, 3, 16, 16),
                                                                                         dtype=np.float32)}
                       for k in range(3)]
    return res.path, feeds, {proto.graph.output[0].name: ref}, calib


def _check_int8(runs, reference) -> None:  # type: ignore[no-untyped-def]
    from pytest_npucheck.numerics import compare_outputs

    fp16, int8 = runs["fp16"], runs["int8"]
    assert fp16.built and fp16.ran and int8.built and int8.ran
    m16 = compare_outputs(reference, fp16.outputs, "fp16").outputs[0].metrics
    m8 = compare_outputs(reference, int8.outputs, "int8").outputs[0].metrics
    # int8 is really quantized: far noisier than fp16, yet the same signal
    assert m8.max_abs > 5 * m16.max_abs and m8.snr_db < m16.snr_db - 10
    assert m8.cosine > 0.99 and 15 < m8.snr_db < 60
    assert set(fp16.placement.values()) == {"npu"} and set(int8.placement.values()) == {"npu"}


@needs_rknn
def test_rknn_simulator_int8_quantized_with_the_calibration_inputs(conv_model) -> None:  # type: ignore[no-untyped-def]
    from pytest_npucheck.toolchains.rknn.simulate import simulate_rknn

    path, feeds, reference, calib = conv_model
    runs = simulate_rknn(path, "rk3588", feeds, list(reference), ("fp16", "int8"), calib)
    _check_int8(runs, reference)
    assert runs["int8"].toolchain_version == "2.5.0" or runs["int8"].toolchain_version.startswith("2.")


@needs_qnn
def test_qnn_htp_int8_quantized_with_the_calibration_inputs(conv_model) -> None:  # type: ignore[no-untyped-def]
    from pytest_npucheck.toolchains.qnn.simulate import simulate_qnn

    path, feeds, reference, calib = conv_model
    runs = simulate_qnn(path, 73, feeds, ("fp16", "int8"), calib)
    _check_int8(runs, reference)
    assert "4 calibration sample(s)" in runs["int8"].details["quantizer"]
