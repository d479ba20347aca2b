"""`npucheck` command line: exit codes 0/1/2, text and JSON output, target listing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from onnx import helper

from conftest import TOY_TABLES, const, make_model

from pytest_npucheck.cli import main


def run(capsys, *args):
    code = main(["--tables", str(TOY_TABLES), *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def clean_model(save):
    return save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"]), "clean.onnx")


@pytest.fixture
def reflect_model(save):
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/down1/Pad", mode="reflect")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    return save(m, "reflect.onnx")


def test_clean_model_exits_0(capsys, clean_model):
    code, out, _ = run(capsys, "check", str(clean_model), "--target", "toy@1.0/soc-a")
    assert code == 0 and "PASS" in out


def test_fallback_exits_1_with_reason(capsys, reflect_model):
    code, out, _ = run(capsys, "check", str(reflect_model), "--target", "toy@1.0/soc-a")
    assert code == 1
    assert "Pad /down1/Pad: mode='reflect' not in {'constant'}" in out


def test_json_output_is_one_object_with_the_per_target_objects(capsys, reflect_model):
    """One file and one target: the same top-level object as for many (issue 26), valid against
    schemas/check.schema.json, whose target objects are the report schema's."""
    import jsonschema

    from pytest_npucheck.cli_check import SCHEMA_PATH, validate

    schema = json.loads(SCHEMA_PATH.read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    code, out, _ = run(capsys, "check", str(reflect_model), "--target", "toy@1.0", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert validate(doc) == [] and doc["exit_status"] == 1
    assert [f["path"] for f in doc["files"]] == [str(reflect_model)]
    (t,) = doc["files"][0]["targets"]
    assert t["target"] == "toy@1.0/soc-a" and t["summary"]["cpu"] == 1
    assert t["nodes"][0]["reasons"][0]["message"] == "mode='reflect' not in {'constant'}"
    t["summary"]["cpu"] = "one"
    assert any("summary/cpu" in p for p in validate(doc))  # the schema checks the per-target object too


def test_several_targets_give_the_same_shape(capsys, reflect_model):
    code, out, _ = run(capsys, "check", str(reflect_model), "-t", "toy@1.0", "-t", "toy@1.1/soc-b", "--format", "json")
    doc = json.loads(out)
    assert code == 1 and doc["exit_status"] == 1
    assert [t["passed"] for t in doc["files"][0]["targets"]] == [False, True]


@pytest.mark.parametrize("args,fragment", [
    (["check", "{model}", "--target", "toy@7"], "unknown version '7' of toy"),
    (["check", "{model}", "--target", "zzz"], "unknown toolchain 'zzz'"),
    (["check", "{missing}", "--target", "toy"], "cannot read model file"),
    (["check", "{garbage}", "--target", "toy"], "not a readable ONNX model"),
])
def test_usage_and_input_errors_exit_2(capsys, clean_model, tmp_path, args, fragment):
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07not a model at all" * 3)
    subst = {"model": str(clean_model), "missing": str(tmp_path / "nope.onnx"), "garbage": str(garbage)}
    code, out, err = run(capsys, *[a.format(**subst) for a in args])
    assert code == 2 and fragment in err


def test_missing_target_argument_exits_2(capsys, clean_model):
    with pytest.raises(SystemExit) as info:
        main(["check", str(clean_model)])
    assert info.value.code == 2


def test_targets_listing(capsys):
    code, out, _ = run(capsys, "targets", "--format", "json")
    rows = json.loads(out)
    toy = [r for r in rows if r["toolchain"] == "toy"]
    assert code == 0 and [r["target"] for r in toy] == ["toy@1.0/soc-a", "toy@1.1/soc-a", "toy@1.1/soc-b"]
    assert toy[0]["provenance"]["method"] == "documented" and toy[0]["prepasses"]
    assert toy[0]["revision"] == 1  # a table without the field is revision 1
    bundled = {r["target"]: r for r in rows}["rknn@2.5.0/rk3588"]
    assert bundled["revision"] == json.loads(Path(bundled["path"]).read_text())["revision"]
    code, out, _ = run(capsys, "targets")
    assert "toy@1.0/soc-a" in out and "Toy toolchain for tests" in out
    assert "rknn@2.5.0/rk3588".ljust(28) + " " in out and f"revision {bundled['revision']}," in out


def test_long_reports_group_causes_and_cap_rows(capsys, save):
    n = 60
    nodes = [helper.make_node("Sin", [f"x{i}" if i else "x", ], [f"x{i + 1}"], name=f"sin{i}") for i in range(n)]
    path = save(make_model(nodes, [("x", ("batch", 4))], [f"x{n}"]), "long.onnx")
    code, out, _ = run(capsys, "check", str(path), "-t", "toy@1.0")
    assert code == 1
    assert "model input 'x' has dynamic dims (batch)" in out
    assert "  60 x Sin unsupported (op_missing)" in out
    assert "... and 20 more nodes" in out
    code, out, _ = run(capsys, "check", str(path), "-t", "toy@1.0", "--all-nodes")
    assert "sin59" in out and "more nodes" not in out


class _Ended(Exception):
    pass


def test_run_as_the_program_ends_the_process_after_the_exit_functions(monkeypatch, capsys, reflect_model):
    """``main()`` without arguments (the console script) ends the process itself once the report is
    written and the exit functions ran (``cli._end_process``, os._exit here recorded): with the
    command's status. With arguments, or with a profiler set (``python -m cProfile`` writes its
    figures after the program returns), it returns the status."""
    import atexit
    import os
    import sys

    import pytest_npucheck.cli as cli

    events: list[object] = []

    def end(status):
        events.append(("os._exit", status))
        raise _Ended

    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: events.append("exit functions"))
    monkeypatch.setattr(os, "_exit", end)
    monkeypatch.setattr(sys, "argv", ["npucheck", "--tables", str(TOY_TABLES), "check", str(reflect_model),
                                      "--target", "toy@1.0/soc-a", "--format", "json"])
    monkeypatch.setattr(sys, "gettrace", lambda: None)  # a coverage run's tracer is not the point here
    with pytest.raises(_Ended):
        cli.main()
    assert json.loads(capsys.readouterr().out)["exit_status"] == 1
    assert events == ["exit functions", ("os._exit", 1)]
    events.clear()
    assert main(sys.argv[1:]) == 1 and events == []
    capsys.readouterr()
    monkeypatch.setattr(sys, "getprofile", lambda: object())
    assert cli.main() == 1 and events == []
