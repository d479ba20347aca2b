"""golden: the life cycle (missing, update, pass, drift) on a real exported CNN (file safety and
corrupt files are tested in tests/unit/test_golden.py)."""

from __future__ import annotations

import copy

import pytest

from pytest_npucheck.golden import GoldenStatus, GoldenStore, read_golden



@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    """A real CNN from the corpus exported to ONNX, its feeds, and a way to export variants."""
    from models.corpus import ARCHS  # tests/ is on sys.path (pyproject: pythonpath)

    from pytest_npucheck.emulate import input_specs
    from pytest_npucheck.export import ExportOptions, export_model

    model, inputs = ARCHS["resnet18_small"].build()

    def export(m):
        return export_model(m, inputs, ExportOptions(exporter="torchscript", opset=17),
                            tmp_path_factory.mktemp("export")).path

    path = export(model)
    feeds = {s[0]: t.numpy() for s, t in zip(input_specs(path), inputs)}
    return model, export, path, feeds


def test_life_cycle_missing_update_pass_drift(cnn, tmp_path):
    import torch

    from pytest_npucheck.emulate import run_model, seed_for

    model, export, path, feeds = cnn
    store = GoldenStore(tmp_path / "goldens")
    test_id = "tests/test_models.py::test_resnet[rk3588]"

    # 1. missing: fails and says how to create it; nothing is written.
    res = store.check(test_id, run_model(path, feeds), "fp32", feeds)
    assert res.status is GoldenStatus.MISSING and not res.passed
    assert "--npu-update-golden" in res.message and not res.path.exists()

    # 2. update: written atomically, and the run is still not green.
    res = store.check(test_id, run_model(path, feeds), "fp32", feeds, update=True)
    assert res.status is GoldenStatus.WRITTEN and not res.passed
    assert "golden written" in res.message and "re-run" in res.message
    assert res.path.exists() and not [p for p in res.path.parent.iterdir() if p.name.endswith(".tmp")]
    golden = store.load(test_id)
    assert golden.test_id == test_id and set(golden.inputs) == set(feeds)

    # 3. pass: the model re-run on the golden's own inputs.
    res = store.check(test_id, run_model(path, golden.inputs), "fp32", golden.inputs)
    assert res.status is GoldenStatus.PASSED and res.passed
    assert res.comparison.passed

    # 4. drift beyond budget: BatchNorm epsilon 1e-5 -> 1e-2 everywhere (a porting bug).
    bad = copy.deepcopy(model)
    for m in bad.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.eps = 1e-2
    bad_path = export(bad)
    res = store.check(test_id, run_model(bad_path, golden.inputs), "fp32", golden.inputs)
    assert res.status is GoldenStatus.MISMATCH and not res.passed
    assert res.obtained_path == res.path.with_name(res.path.name.replace(".npz", ".obtained.npz"))
    assert res.obtained_path.exists()
    obtained = read_golden(res.obtained_path)
    assert set(obtained.outputs) == set(golden.outputs)
    text = "\n".join(res.lines())
    out = res.comparison.outputs[0]
    assert f"reference float32{list(out.reference_shape)} vs candidate float32" in text
    assert "elements out of tolerance:" in text and "worst elements" in text
    assert "minimum tolerance that would have passed" in text
    assert out.out_of_tolerance > 0 and len(out.worst) == 5

    # 5. a later matching run removes the stale .obtained file.
    res = store.check(test_id, run_model(path, golden.inputs), "fp32", golden.inputs)
    assert res.passed and not res.obtained_path and not store.obtained_path(res.path).exists()
    assert seed_for(test_id) == seed_for(test_id) and 0 <= seed_for(test_id) < 2**31
