"""The vision family of the zoo agreement harness (scripts/zoo_vision.py, ``--zoo vision``):
torchvision and timm model definitions imported from the harness's own folder with torchvision's
C++ ops stubbed, exported and compiled by every real toolchain installed here, and scored.

Skips when the folder is not there (a fresh machine: scripts/zoo_vision.py says how to fill it)."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.oracle

#: small, and each with a block the rest of the zoo has no example of: SqueezeNet's fire modules
#: behind ceil_mode max pools (torchvision), LCNet's hard-swish depthwise blocks with SE (timm)
SUBSET = ("tv_squeezenet1_1", "timm_lcnet_050")


def _script(name: str):
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


@pytest.fixture(scope="module")
def vision():
    mod = _script("zoo_vision")
    if not os.path.isdir(os.path.join(mod.libs_dir(), "timm")):
        pytest.skip(f"torchvision/timm are not installed for the harness in {mod.libs_dir()} ({mod.LIBS_ENV})")
    return mod


def test_torchvision_imports_without_its_extension_and_torch_library_is_left_as_it_was(vision):
    import torch
    import torch.library

    before = torch.library.register_fake
    tv, timm = vision.import_vision()
    assert torch.library.register_fake is before
    assert not tv.extension._has_ops()  # the C++ extension really is absent: the stub is what lets it import
    assert tv.__file__.startswith(vision.libs_dir()) and timm.__file__.startswith(vision.libs_dir())
    with pytest.raises(RuntimeError, match=r"custom C\+\+ ops"):  # the stubbed op stays unusable, not silently wrong
        tv.ops.nms(torch.rand(2, 4), torch.rand(2), 0.5)


def test_a_missing_folder_is_a_skip_that_names_it(vision, tmp_path, monkeypatch):
    """Through the harness: the architecture is recorded as skipped with the folder and how to
    fill it, not as a model that failed to build."""
    harness = _script("zoo_agreement")
    monkeypatch.setenv(vision.LIBS_ENV, str(tmp_path / "absent"))
    harness.main(["export", "--root", str(tmp_path / "zoo"), "--zoo", "vision", "--only", "tv_squeezenet1_1",
                  "--exporters", "torchscript"])
    meta = json.loads((tmp_path / "zoo" / "models" / "tv_squeezenet1_1" / "meta.json").read_text())
    assert meta["status"] == "skipped"
    assert str(tmp_path / "absent") in meta["reason"] and "pip install --no-deps --target" in meta["reason"]
    assert not harness._retryable(meta["reason"])  # --retry-skipped does not build it again


def test_over_the_size_budget_is_a_skip_with_the_count(vision, tmp_path):
    harness = _script("zoo_agreement")
    harness.main(["export", "--root", str(tmp_path), "--zoo", "vision", "--only", "tv_alexnet",
                  "--exporters", "torchscript"])
    meta = json.loads((tmp_path / "models" / "tv_alexnet" / "meta.json").read_text())
    assert meta["status"] == "skipped" and "61.1M parameters" in meta["reason"], meta


@pytest.fixture(scope="module")
def vision_run(vision, tmp_path_factory):
    from pytest_npucheck.oracles.oracle import unavailable_reason

    toolchains = [tc for tc in ("rknn", "qnn") if unavailable_reason(tc) is None]
    if not toolchains:
        pytest.skip("neither rknn-toolkit2 (NPUCHECK_RKNN_PYTHON) nor onnxruntime-qnn (NPUCHECK_QNN_PYTHON) is installed")
    harness = _script("zoo_agreement")
    root = tmp_path_factory.mktemp("zoo-vision")
    harness.main(["all", "--root", str(root), "--zoo", "vision", "--only", *SUBSET, "--toolchain", *toolchains,
                  "--exporters", "torchscript"])
    return harness, root, toolchains


def test_each_model_is_built_at_its_deployment_size_with_non_degenerate_weights(vision_run):
    _, root, _ = vision_run
    for arch in SUBSET:
        meta = json.loads((root / "models" / arch / "meta.json").read_text())
        assert meta["status"] == "built" and meta["exports"]["torchscript"]["status"] == "ok", meta
        assert meta["inputs"] == [[1, 3, 224, 224]], meta
    import onnx
    from onnx import numpy_helper

    model = onnx.load(root / "models" / "tv_squeezenet1_1" / "torchscript.onnx")
    pools = [n for n in model.graph.node if n.op_type == "MaxPool"]
    assert pools and all(any(a.name == "ceil_mode" and a.i == 1 for a in n.attribute) for n in pools)
    biases = [numpy_helper.to_array(t) for t in model.graph.initializer if t.name.endswith("bias")]
    assert biases and all((b != 0).all() for b in biases)  # perturb(): no bias left at its zero init


def test_every_model_has_a_result_per_toolchain_and_is_scored(vision_run):
    harness, root, toolchains = vision_run
    summary = json.loads((root / "summary.json").read_text())
    for tc in toolchains:
        got = sorted(p.stem for p in (root / "results" / tc).glob("*.json"))
        assert got == sorted(f"{a}.torchscript" for a in SUBSET), tc
        figures = summary["targets"][harness.TARGETS[tc]]["exporters"]["torchscript"]
        assert figures["architectures"] == len(SUBSET), (tc, figures)
        assert figures["nodes"] == figures["tp"] + figures["fp"] + figures["fn"] + figures["tn"] > 50
