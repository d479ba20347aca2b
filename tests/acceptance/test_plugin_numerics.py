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
    # a deployment budget is part of the deployability verdict, not of the numerics
    failure = out.split("npu_deployable: the model fails the deployability check on 1 of 1 target(s)")[1]
    assert failure.lstrip().startswith("toy@1.0/soc-a: deployment budget exceeded: 1 CPU-fallback node(s) over "
                                       "max_cpu_fallback_nodes 0 (release 1.0.0, entry 'toy@*')")
    assert "fails the numeric checks" not in out
    assert "stale: releases/1.0.0/tests/*no_such_test*" in out
    # -k or -m that keeps every marked test is the whole suite for the budgets (the recommended
    # `pytest -m npu_deployable` deselects only unmarked tests)
    suite.makepyfile(test_plain="def test_plain():\n    pass\n")
    for args in (["-k", "reflect"], ["-m", "npu_deployable"]):
        r = suite.runpytest("--npu-release=1.0.0", *args)
        r.assert_outcomes(failed=1, deselected=1)
        assert "stale: releases/1.0.0/tests/*no_such_test*" in r.stdout.str() and "not checked" not in r.stdout.str()
    (suite.path / "test_plain.py").unlink()
    # a partial run cannot tell a stale entry from one the tests it left out use
    suite.makepyfile(test_other="""
        import pytest, torch
        from numeric_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-release=1.0.0", "-k", "reflect", "--npu-report=json:r.json")
    r.assert_outcomes(failed=1, deselected=1)
    out = r.stdout.str()
    assert "stale: releases" not in out and "stale entries not checked: a partial run (1 marked test(s) deselected)" in out
    budgets = json.loads((suite.path / "r.json").read_text())["budgets"]
    assert budgets["stale"] == [] and budgets["stale_not_checked"].startswith("a partial run (1 marked")
    (suite.path / "test_other.py").unlink()

    r = suite.runpytest("--npu-release=0.9")  # no release in force: no budget applies
    r.assert_outcomes(passed=1)

    suite.makepyfile(test_bud="""
        import pytest, torch
        from numeric_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    # switching the numerics off does not switch the deployment budget off
    for args in (["--npu-release=1.0.0"], ["--npu-release=1.0.0", "--npu-no-numerics"]):
        r = suite.runpytest(*args)
        r.assert_outcomes(failed=1)
        assert "deployment budget exceeded: 1 CPU-fallback node(s)" in r.stdout.str()


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


def test_an_update_run_records_fallbacks_and_still_fails_on_numerics(suite):
    """--npu-update-baseline accepts CPU fallbacks, never numeric failures: the run is red, its last line
    counts the failure, and the fallback is recorded (README and docs/ci.md say so)."""
    suite.makepyfile(test_upd="""
        import pytest, torch
        import torch.nn.functional as F

        class Both(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = torch.nn.Conv2d(3, 8, 3)

            def forward(self, x):
                y = self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect"))
                if torch.onnx.is_in_onnx_export():
                    y = y * 1.01
                return torch.relu(y)

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_both(npu_check):
            npu_check(Both().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-update-baseline")
    r.assert_outcomes(failed=1)
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    out = r.stdout.str()
    assert "npucheck baseline updated: npucheck-baseline.json (1 entries, 1 added" in out
    assert "numerics: test_upd.py::test_both fails the numeric checks" in out
    assert "npu_deployable: the model fails the deployability check" not in out  # the fallback was accepted
    r = suite.runpytest()
    r.assert_outcomes(failed=1)  # the numerics still fail; the Pad is accepted
    assert "(0 new, 1 accepted fallback(s))" in r.stdout.str()


LABEL_TESTS = """
import pytest, torch


class Classifier(torch.nn.Module):
    '''Identity logits: row 0 is a near-tie (1.0 vs 1.0001) that fp16 rounds to a tie and flips.'''

    def __init__(self, swap=False):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4, bias=False)
        self.swap = swap
        with torch.no_grad():
            self.fc.weight.copy_(torch.eye(4))

    def forward(self, x):
        logits = self.fc(x)
        if self.swap and torch.onnx.is_in_onnx_export():
            logits = logits.flip(-1)  # the export computes other labels: real flips
        return {"labels": logits.argmax(-1), "scores": logits}


X = torch.tensor([[1.0, 1.0001, 0.0, 0.0]] + [[0.0, 0.0, 3.0, 0.0]] * 255)


@pytest.mark.npu_deployable(targets=["qnn@2.51.0/htp-v73"])
def test_near_tie(npu_check):
    npu_check(Classifier().eval(), X)


@pytest.mark.npu_deployable(targets=["qnn@2.51.0/htp-v73"])
def test_real_flip(npu_check):
    npu_check(Classifier(swap=True).eval(), X)
"""


def test_label_outputs_pass_near_ties_and_fail_real_flips_by_their_own_name(suite):
    suite.makepyfile(test_labels=LABEL_TESTS)
    r = suite.runpytest("--npu-report=json:r.json")
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    doc = json.loads((suite.path / "r.json").read_text())
    near = next(t for t in doc["tests"] if t["nodeid"].endswith("test_near_tie"))
    [emu] = near["numerics"]["emulation"]
    [labels] = [o for o in emu["result"]["comparison"]["outputs"] if o.get("model_name") == "labels"]
    assert labels["passed"] and labels["labels"]["flips"] == 1 and labels["labels"]["near_ties"] == 1
    assert labels["labels"]["flipped"][0]["index"] == [0] and labels["labels"]["margins_known"]
    failure = out.split("_ test_real_flip _")[1]
    assert "FAIL output 'labels' (ONNX output" in failure
    assert "compared as labels: 256 of 256 element(s) differ; 255 beyond the reference's margin, 1 near-tie" in failure
    assert "cosine" not in failure.split("FAIL output 'labels'")[1].split("output")[0]  # no float metrics on labels


def test_a_budget_precision_that_changes_a_targets_default_says_so(suite):
    """A pattern entry with precision fp16 used to switch SNPE's emulation from its int8 default silently."""
    suite.makepyfile(test_prec="""
        import pytest, torch
        from numeric_nets import Clean

        @pytest.mark.npu_deployable(targets=["snpe@2025.08/htp"])
        def test_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    (suite.path / "npu-budgets.json").write_text(json.dumps({"format": 1, "releases": {"1.0.0": {
        "tests": {"*clean*": {"precision": "fp16"}}}}}))
    r = suite.runpytest("--npu-release=1.0.0", "--npu-report=json:r.json")
    r.assert_outcomes(passed=1, warnings=1)
    note = ("budget entry '*clean*' (release 1.0.0) sets precision fp16 for snpe@2025.08/htp, whose table default "
            "is int8")
    assert note in r.stdout.str()
    [t] = json.loads((suite.path / "r.json").read_text())["tests"]
    assert note in t["numerics"]["notes"] and t["numerics"]["emulation"][0]["precision"] == "fp16"
    # per target: another target keeps its default, no note
    (suite.path / "npu-budgets.json").write_text(json.dumps({"format": 1, "releases": {"1.0.0": {
        "tests": {"*clean*": {"precision": {"rknn@*": "fp16"}}}}}}))
    r = suite.runpytest("--npu-release=1.0.0", "--npu-report=json:r.json")
    r.assert_outcomes(passed=1)
    [t] = json.loads((suite.path / "r.json").read_text())["tests"]
    assert t["numerics"]["notes"] == [] and t["numerics"]["emulation"][0]["precision"] == "int8"
