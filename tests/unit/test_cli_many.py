"""`npucheck check` over many files in one call (issue 28 item 5) and `npucheck targets`' short
forms (issue 26 item 5). In-process (--jobs 1); the worker pool runs in tests/acceptance/test_cli_pool.py."""

from __future__ import annotations

import json

import pytest
from onnx import helper

from conftest import TOY_TABLES, const, make_model

from pytest_npucheck.cli import main
from pytest_npucheck.cli_check import expand_inputs, validate


def run(capsys, *args):
    code = main(["--tables", str(TOY_TABLES), *args])
    out, err = capsys.readouterr()
    return code, out, err


def _clean():
    return make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"])


def _reflect():
    return make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/down1/Pad", mode="reflect")],
                      [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])


@pytest.fixture
def zoo(tmp_path):
    """models/a_clean.onnx, models/sub/b_reflect.onnx, models/c_clean.onnx and a non-ONNX file."""
    import onnx

    root = tmp_path / "models"
    (root / "sub").mkdir(parents=True)
    onnx.save(_clean(), root / "a_clean.onnx")
    onnx.save(_reflect(), root / "sub" / "b_reflect.onnx")
    onnx.save(_clean(), root / "c_clean.onnx")
    (root / "notes.txt").write_text("not a model")
    return root


def test_many_files_one_report_exit_1_if_any_falls_back(capsys, zoo):
    files = [zoo / "a_clean.onnx", zoo / "sub" / "b_reflect.onnx", zoo / "c_clean.onnx"]
    code, out, err = run(capsys, "check", *map(str, files), "-t", "toy@1.0", "--jobs", "1")
    assert code == 1, err
    sections = [line for line in out.splitlines() if line.startswith("== ")]
    assert sections == [f"== {files[0]}: PASS", f"== {files[1]}: FAIL", f"== {files[2]}: PASS"]
    assert "Pad /down1/Pad: mode='reflect' not in {'constant'}" in out
    assert out.rstrip().endswith("3 file(s): 2 pass, 1 fall back, 0 error(s)")
    code, out, _ = run(capsys, "check", str(files[0]), str(files[2]), "-t", "toy@1.0", "-j", "1")
    assert code == 0 and "2 file(s): 2 pass, 0 fall back, 0 error(s)" in out


def test_directory_and_glob_are_expanded_without_a_shell(capsys, zoo, monkeypatch):
    expected = [zoo / "a_clean.onnx", zoo / "c_clean.onnx", zoo / "sub" / "b_reflect.onnx"]
    assert expand_inputs([str(zoo)]) == expected  # recursive, sorted, the .txt left out
    assert expand_inputs([str(zoo / "*.onnx")]) == expected[:2]
    assert expand_inputs([str(zoo / "**" / "*.onnx")]) == expected
    assert expand_inputs([str(zoo), str(zoo / "a_clean.onnx")]) == expected  # a duplicate is checked once
    monkeypatch.chdir(zoo)
    code, out, _ = run(capsys, "check", "sub/*.onnx", "*.onnx", "-t", "toy@1.0", "-j", "1", "--format", "json")
    doc = json.loads(out)
    assert code == 1 and validate(doc) == []
    assert [f["path"] for f in doc["files"]] == ["sub/b_reflect.onnx", "a_clean.onnx", "c_clean.onnx"]
    assert [[t["passed"] for t in f["targets"]] for f in doc["files"]] == [[False], [True], [True]]


@pytest.mark.parametrize("arg,fragment", [("{zoo}/*.tflite", "pattern matches no file"),
                                          ("{empty}", "directory holds no *.onnx file")])
def test_an_input_that_finds_nothing_is_a_usage_error(capsys, zoo, tmp_path, arg, fragment):
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, "check", arg.format(zoo=zoo, empty=tmp_path / "empty"), "-t", "toy", "-j", "1")
    assert code == 2 and fragment in err and arg.format(zoo=zoo, empty=tmp_path / "empty") in err


def test_an_unreadable_file_is_exit_2_and_the_others_keep_their_verdicts(capsys, zoo, tmp_path):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model at all" * 3)
    args = ["check", str(zoo / "sub" / "b_reflect.onnx"), str(garbage), str(zoo / "a_clean.onnx"), "-t", "toy", "-j", "1"]
    code, out, err = run(capsys, *args, "--format", "json")
    doc = json.loads(out)
    assert code == 2 and doc["exit_status"] == 2 and validate(doc) == []
    bad = doc["files"][1]
    assert bad["targets"] == [] and bad["error"]["kind"] == "input" and "not a readable ONNX model" in bad["error"]["message"]
    assert [t["passed"] for t in doc["files"][0]["targets"]] == [False]  # the fallback is still reported
    assert "not a readable ONNX model" in err
    code, out, _ = run(capsys, *args)
    assert code == 2 and f"== {garbage}: ERROR" in out and "3 file(s): 1 pass, 1 fall back, 1 error(s)" in out


def test_an_internal_error_in_one_file_is_exit_3(capsys, zoo, monkeypatch):
    import pytest_npucheck.check as check

    real = check.check_file

    def crash_on_c(path, targets, catalog=None):
        if path.name == "c_clean.onnx":
            raise ZeroDivisionError("boom")
        return real(path, targets, catalog)

    monkeypatch.setattr(check, "check_file", crash_on_c)
    code, out, err = run(capsys, "check", str(zoo), "-t", "toy", "-j", "1", "--format", "json")
    doc = json.loads(out)
    assert code == 3 and doc["exit_status"] == 3 and validate(doc) == []
    assert doc["files"][1]["error"] == {"kind": "internal", "message": "ZeroDivisionError: boom"}
    assert "Traceback" in err and "internal error" in err and "c_clean.onnx" in err


def test_bad_jobs_is_a_usage_error(capsys, zoo):
    code, _, err = run(capsys, "check", str(zoo), "-t", "toy", "--jobs", "0")
    assert code == 2 and "--jobs" in err


def test_targets_show_what_each_short_form_resolves_to(capsys):
    code, out, _ = run(capsys, "targets", "--format", "json")
    rows = {r["target"]: r for r in json.loads(out)}
    assert code == 0
    rk = rows["rknn@2.5.0/rk3588"]["short_forms"]
    assert {"rknn", "rknn@2.5.0", "rknn/rk3588", "rknn@2.5.0/rk3588"} - {*rk, "rknn@2.5.0/rk3588"} == set()
    assert "rknn@2.5.0/rk3588" not in rk
    # the toy tables: toy@1.0 has one SoC; the newest version 1.1 has two, and a bare `toy` goes to its default
    assert "toy@1.0" in rows["toy@1.0/soc-a"]["short_forms"]
    assert "toy@1.1" not in rows["toy@1.1/soc-b"]["short_forms"]
    assert "toy/soc-b" in rows["toy@1.1/soc-b"]["short_forms"]
    assert "toy/soc-b" not in rows["toy@1.0/soc-a"]["short_forms"]
    # a SoC alias resolves to its SoC: rk3568 -> rk3566
    rk3566 = [t for t in rows if t.startswith("rknn@") and t.endswith("/rk3566")]
    assert rk3566 and any(f.endswith("/rk3568") for f in rows[rk3566[-1]]["short_forms"])
    code, text, _ = run(capsys, "targets")
    line = text.splitlines()[[i for i, l in enumerate(text.splitlines()) if l.startswith("rknn@2.5.0/rk3588 ")][0] + 1]
    assert line.split("also written: ")[1].split(", ")[0] == "rknn"


def test_files_checked_in_this_process_use_the_catalog_the_targets_were_resolved_with(capsys, zoo, monkeypatch):
    """The command discovers the tables once: the files it checks in its own process (one file, or
    --jobs 1) use that catalog and its loaded tables rather than discovering and loading them again."""
    from pytest_npucheck.tables import Catalog

    discovered = []
    original = Catalog.discover.__func__
    monkeypatch.setattr(Catalog, "discover", classmethod(lambda cls, *a: discovered.append(1) or original(cls, *a)))
    code, out, _ = run(capsys, "check", str(zoo / "a_clean.onnx"), str(zoo / "c_clean.onnx"), "--jobs", "1",
                       "--target", "toy", "--format", "json")
    assert code == 0 and [f["targets"][0]["passed"] for f in json.loads(out)["files"]] == [True, True]
    assert discovered == [1]


def test_a_passing_file_does_not_import_the_fix_suggestions(capsys, zoo, monkeypatch):
    """with_fixes leaves a passing result as it is: the fixes module (recipes, rewrites) is imported
    only when some target falls back, and then its suggestions are in the report as before."""
    import sys

    monkeypatch.setitem(sys.modules, "pytest_npucheck.fixes", None)  # importing it fails from here on
    code, out, err = run(capsys, "check", str(zoo / "a_clean.onnx"), "--target", "toy", "--format", "json")
    assert code == 0 and json.loads(out)["files"][0]["targets"][0]["fixes"] is None, err
    monkeypatch.undo()
    code, out, _ = run(capsys, "check", str(zoo / "sub" / "b_reflect.onnx"), "--target", "toy", "--format", "json")
    assert code == 1 and json.loads(out)["files"][0]["targets"][0]["fixes"] is not None



def test_quiet_blas_import_leaves_a_process_that_has_numpy_alone(monkeypatch):
    import os

    from pytest_npucheck.cli_check import quiet_blas_import

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    quiet_blas_import()  # numpy is imported in this process (onnx): nothing to set
    assert "OPENBLAS_NUM_THREADS" not in os.environ
