"""Acceptance tests: the plugin as a user meets it, through pytester, on real exported models."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from conftest import TOY_TABLES

MODELS = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Clean(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class ReflectPad(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(F.pad(x, (1, 1, 1, 1), mode="reflect")))


    class Unexportable(nn.Module):
        def forward(self, x):
            return torch.ops.aten.nonexistent_op_for_test(x)
    """
)


pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(demo_nets=MODELS)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n")
    return pytester


def test_explicit_form_passes_clean_and_fails_fallback_with_report(suite):
    suite.makepyfile(test_models="""
        import pytest, torch
        from demo_nets import Clean, ReflectPad

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_clean(npu_check):
            out = npu_check(Clean().eval(), torch.randn(1, 3, 16, 16))
            assert out.passed and out.results[0].summary["npu"] >= 2

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 16, 16))
    """)
    r = suite.runpytest()
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    assert "mode='reflect' not in {'constant'}" in out
    assert "toy@1.0/soc-a" in out and "FAIL" in out
    assert "npucheck summary" in out
    assert "PASS test_models.py::test_clean toy@1.0/soc-a" in out


def test_marker_only_form_uses_model_fixtures(suite):
    suite.makepyfile(test_existing="""
        import pytest, torch
        from demo_nets import Clean, ReflectPad

        @pytest.fixture
        def model():
            return ReflectPad()

        @pytest.fixture
        def example_inputs():
            return torch.randn(1, 3, 16, 16)

        @pytest.mark.npu_deployable(targets=["toy@1.0"])
        def test_forward_shape(model, example_inputs):
            assert model(example_inputs).shape == (1, 8, 16, 16)

        @pytest.mark.npu_deployable(targets=["toy@1.1/soc-b"])
        def test_forward_on_soc_b(model, example_inputs):
            assert model(example_inputs).shape == (1, 8, 16, 16)

        @pytest.mark.npu_deployable(targets=["toy@1.0"])
        def test_body_fails_first(model, example_inputs):
            assert False, "body failure wins"
    """)
    r = suite.runpytest("-rA")
    r.assert_outcomes(passed=1, failed=2)
    out = r.stdout.str()
    assert "mode='reflect' not in {'constant'}" in out
    assert "body failure wins" in out
    # soc-b supports reflect padding: the marker-only test passes there
    assert "PASSED test_existing.py::test_forward_on_soc_b" in out


def test_marker_only_form_configurable_fixture_names_and_ini_targets(pytester):
    pytester.makepyfile(demo_nets=MODELS)
    pytester.makeini(f"""
        [pytest]
        addopts = --npu-tables={TOY_TABLES} -p no:cacheprovider
        npu_model_fixture = net
        npu_inputs_fixture = sample
        npu_targets =
            toy@1.0/soc-a
            toy@1.1/soc-b
    """)
    pytester.makepyfile(test_x="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.fixture
        def net():
            return Clean()

        @pytest.fixture
        def sample():
            return torch.randn(1, 3, 8, 8)

        @pytest.mark.npu_deployable
        def test_not_requesting_fixtures():
            pass
    """)
    r = pytester.runpytest("--npu-report=json:report.json")
    r.assert_outcomes(passed=1)
    doc = json.loads((pytester.path / "report.json").read_text())
    [test] = doc["tests"]
    assert [t["target"] for t in test["targets"]] == ["toy@1.0/soc-a", "toy@1.1/soc-b"]


def test_marked_test_with_nothing_to_check_fails_clearly(suite):
    suite.makepyfile(test_y="""
        import pytest

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_no_model():
            pass
    """)
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    assert "nothing to check" in r.stdout.str() and "'model'" in r.stdout.str()


def test_unknown_target_is_a_usage_error_before_any_test_runs(suite):
    suite.makepyfile(test_z="""
        import pytest

        def test_plain():
            pass

        @pytest.mark.npu_deployable(targets=["toy@9.9"])
        def test_marked(npu_check):
            pass
    """)
    r = suite.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert "unknown version '9.9' of toy" in err and "available: 1.0, 1.1" in err
    assert "test_z.py::test_marked" in err


def test_cli_target_and_unknown_toolchain(suite):
    suite.makepyfile(test_w="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable
        def test_m(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    suite.runpytest("--npu-target=toy@1.0").assert_outcomes(passed=1)
    r = suite.runpytest("--npu-target=nosuch")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown toolchain 'nosuch'" in r.stderr.str()
    r = suite.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "no target" in r.stderr.str()


def test_invalid_table_stops_the_run_with_file_and_path(pytester, tmp_path):
    import shutil

    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    p = root / "toy" / "1.0" / "soc-a.json"
    d = json.loads(p.read_text())
    d["ops"]["ai.onnx:Conv"]["status"] = "perhaps"
    d["ops"]["ai.onnx:Relu"]["constraints"] = [{"rule": "rank", "params": {"maxx": 4}}]
    p.write_text(json.dumps(d))
    pytester.makepyfile(test_t="""
        import pytest

        @pytest.mark.npu_deployable(targets=["toy@1.0"])
        def test_m(npu_check):
            pass
    """)
    r = pytester.runpytest(f"--npu-tables={root}", "-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    err = r.stderr.str()
    assert str(p) in err
    assert "$.ops['ai.onnx:Conv'].status" in err and "$.ops['ai.onnx:Relu'].constraints[0].params" in err


def test_export_error_fails_with_exporter_message(suite):
    suite.makepyfile(test_e="""
        import pytest, torch
        from demo_nets import Unexportable

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_m(npu_check):
            npu_check(Unexportable(), torch.randn(1, 3))
    """)
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "could not be exported" in out and "nonexistent_op_for_test" in out
    assert "INTERNALERROR" not in out


def test_export_options_that_do_not_fit_the_model_fail_in_one_paragraph_and_reach_the_report(suite):
    """A dynamic_axes name that is no input raised a bare ValueError through the plugin: a traceback,
    a report entry with no error, and no line in the npucheck summary."""
    suite.makepyfile(test_axes="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"], dynamic_axes={"inp": {0: "batch"}})
        def test_typo(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("--npu-report=json:r.json")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "npu_check: the export options do not fit the model" in out and "['inp']" in out and "known: x" in out
    assert "Traceback" not in out and "plugin.py" not in out and "During handling" not in out
    assert "ERROR test_axes.py::test_typo: export options: dynamic_axes names ['inp']" in out
    (entry,) = json.loads((suite.path / "r.json").read_text())["tests"]
    assert entry["status"] == "error" and entry["error"].startswith("export options: dynamic_axes names ['inp']")


def test_an_unforeseen_exception_still_names_its_error_in_the_report(suite):
    suite.makepyfile(test_keys="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_int_keys(npu_check):
            npu_check(Clean().eval(), {0: torch.randn(1, 3, 8, 8)})
    """)
    r = suite.runpytest("--npu-report=json:r.json")
    r.assert_outcomes(failed=1)
    (entry,) = json.loads((suite.path / "r.json").read_text())["tests"]
    assert entry["status"] == "error" and entry["error"] == "TypeError: keyword example inputs must be a dict with str keys"
    assert "ERROR test_keys.py::test_int_keys: TypeError: keyword example inputs" in r.stdout.str()


def test_an_opset_the_exporter_could_not_write_is_a_note_and_a_warning(suite):
    """torch's dynamo exporter keeps opset 18 when it cannot convert a model down (Pad): the check
    then judged opset 18 while the test asked for 17, and said nothing."""
    suite.makepyfile(test_opset="""
        import pytest, torch
        from demo_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy"], opset=17)
        def test_pad(npu_check):
            assert npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8)).export["opset"] == 18
    """)
    r = suite.runpytest("--npu-report=json:r.json", "--npu-update-baseline", "--npu-no-numerics")
    r.assert_outcomes(passed=1)
    note = "the dynamo exporter wrote opset 18, not 17 (the marker's opset): it could not convert this model"
    assert note in r.stdout.str()  # the warnings summary: a passing test prints no report
    (entry,) = json.loads((suite.path / "r.json").read_text())["tests"]
    assert all(any(n.startswith(note) for n in t["notes"]) for t in entry["targets"])


def test_bad_marker_arguments_are_usage_errors(suite):
    suite.makepyfile(test_b="""
        import pytest

        @pytest.mark.npu_deployable(targets=["toy"], exportr="dynamo")
        def test_m(npu_check):
            pass
    """)
    r = suite.runpytest()
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "unknown argument(s) exportr" in r.stderr.str()


def test_json_report_validates_and_carries_contract_fields(suite):
    suite.makepyfile(test_j="""
        import pytest, torch
        from demo_nets import Clean, ReflectPad

        @pytest.mark.npu_deployable(targets=["toy@1.0", "toy@1.1/soc-b"])
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 16, 16))

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", opset=17)
        def test_clean_ts(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 16, 16))
    """)
    r = suite.runpytest("--npu-report=json:out/report.json")
    r.assert_outcomes(passed=1, failed=1)
    from pytest_npucheck.report.jsonreport import validate

    doc = json.loads((suite.path / "out" / "report.json").read_text())
    assert validate(doc) == []
    tests = {t["nodeid"]: t for t in doc["tests"]}
    refl = tests["test_j.py::test_reflect"]
    assert refl["status"] == "failed"
    a, b = refl["targets"]
    assert a["table"]["toolchain"] == "toy" and a["table"]["version"] == "1.0" and len(a["table"]["sha256"]) == 64
    assert a["summary"]["cpu"] == 1 and not a["passed"]
    pad = next(n for n in a["nodes"] if n["op_type"] == "Pad")
    assert pad["verdict"] == "cpu" and pad["reasons"][0] == {
        "rule": "attr_in", "message": "mode='reflect' not in {'constant'}", "verdict": "cpu", "category": "attribute",
        "basis": "inferred", "source": "tests"}  # the toy table's source key names neither a probe nor a document
    assert b["passed"]
    ts = tests["test_j.py::test_clean_ts"]
    assert ts["status"] == "passed" and ts["export"]["exporter"] == "torchscript" and ts["export"]["opset"] == 17


def test_plugin_import_is_light():
    code = ("import sys, pytest_npucheck.plugin\n"
            "heavy = [m for m in ('torch', 'onnx', 'onnxruntime', 'numpy', 'jsonschema') if m in sys.modules]\n"
            "print(','.join(heavy))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


def test_the_report_modules_a_controller_imports_leave_the_graph_builder_out():
    """An xdist controller checks nothing: the terminal summary formats locations with
    ``graph.location`` and must not load the graph builder, the folder and the propagation with it
    (the package imports its names on first use); a name taken from the package loads its module."""
    code = ("import sys, pytest_npucheck.plugin, pytest_npucheck.reporter, pytest_npucheck.report.terminal, "
            "pytest_npucheck.report.text\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith('pytest_npucheck.graph.'))))\n"
            "from pytest_npucheck.graph import load_graph\n"
            "print(load_graph.__module__, 'pytest_npucheck.graph.propagate' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[0] == "pytest_npucheck.graph.frozen,pytest_npucheck.graph.gc_pause,pytest_npucheck.graph.location"
    assert out[1] == "pytest_npucheck.graph.build True"


def test_export_opset_defaults_to_what_every_target_accepts(pytester, tmp_path):
    import shutil

    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    p = root / "toy" / "1.0" / "soc-a.json"
    d = json.loads(p.read_text())
    d["opsets"]["ai.onnx"] = [11, 18]
    p.write_text(json.dumps(d))
    pytester.makepyfile(demo_nets=MODELS)
    pytester.makepyfile(test_o="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy@1.0", "toy@1.1/soc-b"])
        def test_default(npu_check):
            out = npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
            assert out.export["opset"] == 18

        @pytest.mark.npu_deployable(targets=["toy@1.0"], opset=20)
        def test_explicit_opset_outside_range(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = pytester.runpytest(f"--npu-tables={root}", "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1, failed=1)
    assert "model opset 20 for domain 'ai.onnx' outside the range [11, 18]" in r.stdout.str()


# -- bad settings and report paths are usage errors before any test runs --------------------------

def test_bad_release_and_bool_ini_values_are_usage_errors_naming_the_setting(suite):
    suite.makepyfile(test_m="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_m(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    (suite.path / "npu-budgets.json").write_text('{"format": 1, "releases": {"1.0.0": {}}}')
    r = suite.runpytest("--npu-release=abc")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "--npu-release: cannot read a version from 'abc'" in r.stderr.str() and "test_m" not in r.stdout.str()
    for key, value in (("npu_numerics", "nah"), ("npu_baseline_strict", "maybe"), ("npu_seed_rng", "sometimes"),
                       ("npu_worker_fast_exit", "often")):
        suite.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n{key} = {value}\n")
        r = suite.runpytest()
        assert r.ret == pytest.ExitCode.USAGE_ERROR, (key, r.stdout.str())
        assert f"ini key {key}: invalid truth value '{value}'" in r.stderr.str()


def test_a_report_may_not_replace_the_baseline_another_report_or_write_through_a_link(suite):
    suite.makepyfile(test_m="""
        def test_m():
            pass
    """)
    baseline = suite.path / "npucheck-baseline.json"
    baseline.write_text('{"format": 1, "entries": []}\n')
    before = baseline.read_bytes()
    for args, expected in (
        (["--npu-report=md:npucheck-baseline.json"], "is the baseline file"),
        (["--npu-report=json:same.out", "--npu-report=md:same.out"], "is also the path of --npu-report='json:same.out'"),
        (["--npu-report=json:npu_goldens/x.npz"], "inside the golden directory"),
    ):
        r = suite.runpytest(*args)
        assert r.ret == pytest.ExitCode.USAGE_ERROR and expected in r.stderr.str(), args
    canary = suite.path / "canary.txt"
    canary.write_text("keep")
    (suite.path / "link.md").symlink_to(canary)
    r = suite.runpytest("--npu-report=md:link.md", "--npu-report=json:other.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "link.md is a symbolic link" in r.stderr.str()
    assert canary.read_text() == "keep" and baseline.read_bytes() == before


@pytest.mark.without_xdist(reason="-x: under xdist the other worker may already have run the next test, "
                                  "so which tests ran before the stop is a race")
def test_a_test_failing_before_its_check_and_an_interrupted_run_do_not_read_as_passed(suite):
    suite.makepyfile(test_m="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_a_fails_early(npu_check):
            raise RuntimeError("fixture data missing")

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_b_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("-p", "no:randomly", "--npu-report=json:r.json", "--npu-report=md:r.md")
    r.assert_outcomes(failed=1, passed=1)
    doc = json.loads((suite.path / "r.json").read_text())
    entries = {t["nodeid"]: t for t in doc["tests"]}
    assert entries["test_m.py::test_a_fails_early"]["status"] == "error"
    assert entries["test_m.py::test_a_fails_early"]["error"] == (
        "the test failed before the NPU check ran: RuntimeError: fixture data missing")
    assert "interrupted" not in doc and (suite.path / "r.md").read_text().startswith("## NPU check: failed")

    r = suite.runpytest("-p", "no:randomly", "-x", "--npu-report=json:r.json", "--npu-report=md:r.md")
    r.assert_outcomes(failed=1)
    doc = json.loads((suite.path / "r.json").read_text())
    assert doc["interrupted"] is True and [t["nodeid"] for t in doc["tests"]] == ["test_m.py::test_a_fails_early"]
    from pytest_npucheck.report.jsonreport import validate

    assert validate(doc) == []
    md = (suite.path / "r.md").read_text()
    assert md.startswith("## NPU check: interrupted") and "lists only the tests that ran" in md


def test_update_baseline_merges_what_another_run_wrote_meanwhile(suite):
    """Two --npu-update-baseline runs at once: each read the file at its start and wrote its own
    view at its end, so the later one dropped the other's entries. The update now re-reads the file
    under a lock and merges."""
    suite.makepyfile(test_other="""
        import pytest, torch
        from demo_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_other(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    baseline = suite.path / "npucheck-baseline.json"
    suite.runpytest("test_other.py", "--npu-update-baseline", "--npu-no-numerics").assert_outcomes(passed=1)
    other = baseline.read_text()
    assert "test_other.py::test_other" in other
    baseline.unlink()
    (suite.path / "other.json").write_text(other)
    suite.makepyfile(test_mine="""
        import pathlib, shutil
        import pytest, torch
        from demo_nets import ReflectPad

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_mine(npu_check):
            # the other run finishes while this one is running
            shutil.copy("other.json", "npucheck-baseline.json")
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    suite.runpytest("test_mine.py", "--npu-update-baseline", "--npu-no-numerics").assert_outcomes(passed=1)
    tests = {e["test"] for e in json.loads(baseline.read_text())["entries"]}
    assert tests == {"test_other.py::test_other", "test_mine.py::test_mine"}


def test_without_the_export_cache_each_export_is_removed_when_its_test_ends(suite):
    suite.makepyfile(test_m="""
        import pathlib
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_m(npu_check):
            out = npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
            assert out.onnx_path.is_file()  # the test can still read it
            pathlib.Path("exported.txt").write_text(str(out.onnx_path))
    """)
    suite.runpytest("--npu-no-export-cache", "--npu-no-numerics").assert_outcomes(passed=1)
    exported = pathlib.Path((suite.path / "exported.txt").read_text())
    assert exported.name == "model.onnx" and not exported.parent.exists()


@pytest.mark.own_export_cache(reason="checks where the exports of its own runs are cached")
def test_the_export_cache_directory_is_used_without_the_cache_provider(suite):
    """The suite turns the cache provider off: with npu_export_cache_dir its runs and their xdist
    workers share one cache (the first run exports, the second reuses every export); without it
    each export goes to a temporary directory."""
    suite.makepyfile(test_m="""
        import pytest, torch
        from demo_nets import Clean, ReflectPad

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_reflect(npu_check):
            npu_check(ReflectPad().eval(), torch.randn(1, 3, 8, 8))
    """)
    hits = []
    for _ in range(2):
        suite.runpytest("--npu-no-numerics", "-o", "npu_export_cache_dir=exports", "--npu-report=json:r.json",
                        "--npu-update-baseline").assert_outcomes(passed=2)
        hits.append(sorted(t["export"]["cache_hit"] for t in json.loads((suite.path / "r.json").read_text())["tests"]))
    assert hits == [[False, False], [True, True]]
    entries = [p for p in (suite.path / "exports").iterdir() if (p / "model.onnx").is_file()]
    assert len(entries) == 2 and not (suite.path / ".pytest_cache").exists()


def test_a_function_is_refused_as_a_model_and_a_target_named_twice_is_checked_once(suite):
    suite.makepyfile(test_m="""
        import pytest, torch
        from demo_nets import Clean

        @pytest.mark.npu_deployable(targets=["toy"])
        def test_function(npu_check):
            npu_check(lambda x: x + 1, torch.randn(2))

        @pytest.mark.npu_deployable(targets=["toy", "toy", "toy@1.1"])
        def test_twice(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    """)
    r = suite.runpytest("-p", "no:randomly", "--npu-report=json:r.json", "--npu-no-numerics")
    r.assert_outcomes(failed=1, passed=1)
    out = r.stdout.str()
    assert "npu_check() needs a model (a torch.nn.Module), got a function" in out and "AttributeError" not in out
    tests = {t["nodeid"]: t for t in json.loads((suite.path / "r.json").read_text())["tests"]}
    twice = [t["target"] for t in tests["test_m.py::test_twice"]["targets"]]
    assert twice == ["toy@1.1/soc-a"]  # "toy" is the newest version and its default SoC


@pytest.mark.reliability("S1")
def test_a_special_file_as_report_or_baseline_is_a_usage_error_at_start(pytester):
    import stat

    pytester.makepyfile("def test_a():\n    assert True\n")
    os.mkfifo(pytester.path / "r.json")
    res = pytester.runpytest_inprocess("--npu-report=json:r.json")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "passed" not in res.stdout.str()
    assert "r.json is a FIFO (named pipe), not a regular file" in res.stderr.str()
    os.mkfifo(pytester.path / "base.json")
    res = pytester.runpytest_inprocess("--npu-baseline=base.json", "--npu-update-baseline")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "passed" not in res.stdout.str()
    assert "base.json is a FIFO (named pipe), not a regular file" in res.stderr.str()
    assert stat.S_ISFIFO(os.lstat(pytester.path / "r.json").st_mode)
    assert stat.S_ISFIFO(os.lstat(pytester.path / "base.json").st_mode)
