"""Acceptance tests of the numeric checks through pytest: PyTorch vs ONNX, precision emulation, goldens, budgets."""

from __future__ import annotations

import json
import textwrap

import pytest

from conftest import TOY_TABLES

MODELS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    SCALE = 1.0


    class Clean(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            with torch.no_grad():
                self.conv.weight.mul_(SCALE)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class Drift(nn.Module):
        \"\"\"Exports a graph that computes something else than PyTorch eager does.\"\"\"

        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            y = self.conv(x)
            if torch.onnx.is_in_onnx_export():
                y = y * 1.01
            return torch.relu(y)


    class ReflectPad(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect")))
    """
)


pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(numeric_nets=MODELS)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n")
    return pytester


def test_clean_passes_drift_fails_and_numerics_can_be_switched_off(suite):
    suite.makepyfile(test_num="""
        import pytest, torch
        from numeric_nets import Clean, Drift

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], exporter="torchscript")
        def test_drift(npu_check):
            npu_check(Drift().eval(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], exporter="torchscript", numerics=False)
        def test_drift_unchecked(npu_check):
            npu_check(Drift().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-report=json:r.json")
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "numerics: test_num.py::test_drift fails the numeric checks" in out
    assert "ONNX export (ONNX Runtime CPU, fp32) vs PyTorch eager" in out
    assert "FAIL output" in out and "norm_ratio" in out
    doc = json.loads((suite.path / "r.json").read_text())
    from pytest_npucheck.report.jsonreport import validate

    assert validate(doc) == []
    tests = {t["nodeid"]: t for t in doc["tests"]}
    clean = tests["test_num.py::test_clean"]["numerics"]
    assert clean["passed"] is True and clean["onnx_vs_pytorch"]["passed"] is True
    assert [e["precision"] for e in clean["emulation"]] == ["fp16"] and clean["emulation"][0]["passed"]
    drift = tests["test_num.py::test_drift"]
    assert drift["status"] == "failed" and drift["numerics"]["passed"] is False
    assert tests["test_num.py::test_drift_unchecked"]["numerics"] == {"enabled": False, "passed": None}

    r = suite.runpytest("--npu-no-numerics")
    r.assert_outcomes(passed=3)


def test_golden_life_cycle(suite):
    test_file = """
        import pytest, torch
        import numeric_nets

        numeric_nets.SCALE = {scale}

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], golden=True)
        def test_golden(npu_check):
            npu_check(numeric_nets.Clean().eval(), torch.randn(1, 3, 8, 8))
    """
    suite.makepyfile(test_gold=test_file.format(scale=1.0))
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*golden: no golden for test_gold.py::test_golden*--npu-update-golden*"])

    r = suite.runpytest("--npu-update-golden")
    r.assert_outcomes(failed=1)
    r.stdout.fnmatch_lines(["*golden: golden written to*re-run without --npu-update-golden*"])
    goldens = sorted(p.name for p in (suite.path / "npu_goldens").iterdir())
    assert len(goldens) == 1 and goldens[0].endswith(".npz")

    r = suite.runpytest()  # new random inputs: the golden's own inputs are used
    r.assert_outcomes(passed=1)

    suite.makepyfile(test_gold=test_file.format(scale=1.05))
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "differs from golden" in out and "elements out of tolerance" in out and "max_abs" in out
    names = sorted(p.name for p in (suite.path / "npu_goldens").iterdir())
    assert any(n.endswith(".obtained.npz") for n in names)


def test_a_golden_of_other_input_shapes_is_a_mismatch_that_says_the_inputs_changed(suite):
    """The glue re-ran the model on the stored inputs whenever the names matched: a test whose input
    shape changed failed on a shape error blamed on the ONNX file, or passed on the old inputs."""
    test_file = """
        import pytest, torch
        import torch.nn as nn

        class Pool(nn.Module):  # any spatial size works: the old inputs would still run
            def forward(self, x):
                return torch.relu(x).mean(dim=(2, 3))

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], golden=True)
        def test_golden(npu_check):
            npu_check(Pool().eval(), torch.randn(1, 3, {size}, {size}))
    """
    suite.makepyfile(test_gold=test_file.format(size=8))
    suite.runpytest("--npu-update-golden").assert_outcomes(failed=1)
    suite.runpytest().assert_outcomes(passed=1)
    golden = next((suite.path / "npu_goldens").iterdir()).read_bytes()
    suite.makepyfile(test_gold=test_file.format(size=6))
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "input 'x' is float32[1, 3, 6, 6] now and float32[1, 3, 8, 8] in the golden" in out
    assert "--npu-update-golden" in out and "could not run" not in out
    assert next(p for p in (suite.path / "npu_goldens").iterdir() if not p.name.endswith(".obtained.npz")
                ).read_bytes() == golden  # the golden itself is untouched


def test_budget_caps_cpu_fallbacks_and_reports_stale_entries(suite):
    suite.makepyfile(test_bud="""
        import pytest, torch
        from numeric_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-update-baseline", "--npu-no-numerics")  # accept the fallback
    r.assert_outcomes(passed=1)
    r = suite.runpytest()
    r.assert_outcomes(passed=1)

    (suite.path / "npu-budgets.json").write_text(json.dumps({
        "format": 1,
        "releases": {"1.0.0": {
            "tests": {"*no_such_test*": {"precision": "fp16"}},
            "targets": {"toy@*": {"max_cpu_fallback_nodes": 0}},
        }},
    }))
    r = suite.runpytest("--npu-release=1.0.0")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "toy@1.0/soc-a: budget exceeded: 1 CPU-fallback node(s), budget 0 (release 1.0.0, entry 'toy@*')" in out
    assert "stale: releases/1.0.0/tests/*no_such_test*" in out
    # a partial run cannot tell a stale entry from one the tests it left out use
    r = suite.runpytest("--npu-release=1.0.0", "-k", "reflect", "--npu-report=json:r.json")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "stale: releases" not in out and "stale entries not checked: a partial run (-k)" in out
    budgets = json.loads((suite.path / "r.json").read_text())["budgets"]
    assert budgets["stale"] == [] and budgets["stale_not_checked"].startswith("a partial run (-k)")

    r = suite.runpytest("--npu-release=0.9")  # no release in force: no budget applies
    r.assert_outcomes(passed=1)

    suite.makepyfile(test_bud="""
        import pytest, torch
        from numeric_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-release=1.0.0")
    r.assert_outcomes(passed=1)


def test_a_float16_model_is_compared_as_fp16_and_a_shared_emulation_failure_names_every_target(suite):
    """A model run in half precision failed ONNX Runtime vs PyTorch on one-ulp differences (fp32
    bounds); and the fp16 emulation that two fp16 targets share named only the first of them."""
    suite.makepyfile(test_half="""
        import pytest, torch
        import torch.nn as nn

        class HalfMLP(nn.Module):
            def __init__(self):
                super().__init__()
                torch.manual_seed(0)
                self.a, self.b = nn.Linear(64, 128), nn.Linear(128, 16)

            def forward(self, x):
                return self.b(torch.relu(self.a(x)))

        class Cancels(nn.Module):  # exact in fp32, not in fp16 (spacing 2 at 3000)
            def forward(self, x):
                return (x + 3000.0) - 3000.0

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_half(npu_check):
            torch.manual_seed(1)
            npu_check(HalfMLP().half().eval(), torch.randn(4, 64).half())

        @pytest.mark.npu_deployable(targets=["toy@1.1/soc-a", "toy@1.1/soc-b"])
        def test_cancels(npu_check):
            npu_check(Cancels().eval(), torch.randn(2, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-report=json:r.json", "-p", "no:randomly")
    out = r.stdout.str()
    doc = json.loads((suite.path / "r.json").read_text())
    tests = {t["nodeid"]: t for t in doc["tests"]}
    half = tests["test_half.py::test_half"]["numerics"]
    assert half["onnx_vs_pytorch"]["policy"] == "fp16" and half["onnx_vs_pytorch"]["passed"], out
    assert any("float16" in n for n in half["notes"])
    cancels = tests["test_cancels.py::test_cancels"] if "test_cancels.py::test_cancels" in tests \
        else tests["test_half.py::test_cancels"]
    assert [(e["target"], e["passed"]) for e in cancels["numerics"]["emulation"]] == [
        ("toy@1.1/soc-a", False), ("toy@1.1/soc-b", False)]
    assert "toy@1.1/soc-a: fp16 emulation vs fp32" in out
    assert "toy@1.1/soc-b: fp16 emulation vs fp32: FAIL, the same emulation as toy@1.1/soc-a above" in out
