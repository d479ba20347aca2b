"""The reduced CI run of the zoo agreement harness (scripts/zoo_agreement.py): a handful of small
torch.nn models, both exporters, every real toolchain installed here (NPUCHECK_RKNN_PYTHON /
NPUCHECK_QNN_PYTHON; a toolchain that is absent is skipped)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.oracle


def _script(name: str):
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _available(toolchain: str) -> bool:
    from pytest_npucheck.oracles.oracle import unavailable_reason

    return unavailable_reason(toolchain) is None


@pytest.fixture(scope="module")
def zoo_run(tmp_path_factory):
    """The CI subset exported once, compiled with every installed toolchain, and scored."""
    toolchains = [tc for tc in ("rknn", "qnn") if _available(tc)]
    if not toolchains:
        pytest.skip("neither rknn-toolkit2 (NPUCHECK_RKNN_PYTHON) nor onnxruntime-qnn (NPUCHECK_QNN_PYTHON) is installed")
    harness = _script("zoo_agreement")
    models = _script("zoo_models")
    root = tmp_path_factory.mktemp("zoo")
    subset = list(models.CI_SUBSET)
    harness.main(["all", "--root", str(root), "--zoo", "torch", "--only", *subset, "--toolchain", *toolchains])
    return harness, root, subset, toolchains


def test_every_model_and_exporter_has_a_result_per_toolchain(zoo_run):
    _, root, subset, toolchains = zoo_run
    for tc in toolchains:
        got = sorted(p.stem for p in (root / "results" / tc).glob("*.json"))
        assert got == sorted(f"{m}.{e}" for m in subset for e in ("dynamo", "torchscript")), tc


def test_a_rerun_skips_what_is_done(zoo_run):
    harness, root, subset, toolchains = zoo_run
    stamps = {p: p.stat().st_mtime_ns for p in root.glob("results/*/*.json")}
    assert not any(harness.pending(root, tc, subset) for tc in toolchains)
    harness.main(["compile", "--root", str(root), "--only", *subset, "--toolchain", *toolchains])
    assert {p: p.stat().st_mtime_ns for p in root.glob("results/*/*.json")} == stamps


def test_figures_per_toolchain_and_exporter(zoo_run):
    harness, root, subset, toolchains = zoo_run
    summary = json.loads((root / "summary.json").read_text())
    for tc in toolchains:
        t = summary["targets"][harness.TARGETS[tc]]
        assert set(t["exporters"]) == {"dynamo", "torchscript"}
        for exporter, f in t["exporters"].items():
            assert f["architectures"] == len(subset), (tc, exporter)
            assert f["nodes"] == f["tp"] + f["fp"] + f["fn"] + f["tn"] > 0
        for c in t["classes"]:  # every disagreement classified: direction, op, cause
            assert c["direction"] in ("missed_fallback", "false_alarm") and c["op_type"] and c["cause"]
            if c["direction"] == "missed_fallback" and tc == "rknn":
                assert c["cause"].startswith("cpu "), c  # what the compiler's row said
            if c["direction"] == "false_alarm":
                assert c["cause"].startswith("rule "), c  # which static rule fired
        f = t["all"]
        assert sum(c["nodes"] for c in t["classes"]) == f["fp"] + f["fn"]
        assert (root / "summary.md").read_text().count(harness.TARGETS[tc]) >= 3


def test_a_compiler_crash_is_a_rejection_explained_by_its_node(zoo_run):
    """rknn-toolkit2 2.5.0 dies on a cubic Resize, and its ONNX checker refuses the ``layout``
    attribute dynamo writes on a GRU: the harness counts each model as rejected by the compiler,
    names the node, and the static check predicted each rejection."""
    harness, root, subset, toolchains = zoo_run
    if "rknn" not in toolchains:
        pytest.skip("rknn-toolkit2 is not installed (NPUCHECK_RKNN_PYTHON)")
    summary = json.loads((root / "summary.json").read_text())
    t = summary["targets"][harness.TARGETS["rknn"]]
    by_pattern = {r["pattern"]: r for r in t["rejections"]}
    assert set(by_pattern) == {"resize_cubic", "unknown_attribute:GRU.layout"}, t["rejections"]
    cubic = by_pattern["resize_cubic"]
    assert cubic["status"] == "crashed" and cubic["models"] == 2
    assert all(e.startswith("nn_upsample_bicubic.") and "(static: unsupported)" in e for e in cubic["examples"])
    [gru] = by_pattern["unknown_attribute:GRU.layout"]["examples"]
    assert gru.startswith("nn_gru.dynamo [") and gru.endswith("(static: unsupported)")
    assert t["all"]["rejected"] == t["all"]["rejections_predicted"] == 3
    record = json.loads((root / "results" / "rknn" / "nn_upsample_bicubic.dynamo.json").read_text())
    assert record["status"] == "crashed"
