"""`npucheck` command line: exit codes 0/1/2, text and JSON output, target listing."""

from __future__ import annotations

import json
import subprocess
import sys

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


def test_json_output_is_the_per_target_object(capsys, reflect_model):
    code, out, _ = run(capsys, "check", str(reflect_model), "--target", "toy@1.0", "--format", "json")
    assert code == 1
    doc = json.loads(out)
    from pytest_npucheck.report.jsonreport import validate

    wrapped = {"format": 1, "tool": {"name": "x", "version": "0"}, "created": "now", "totals": {},
               "tests": [{"nodeid": "cli", "status": "failed", "targets": [doc]}]}
    assert validate(wrapped) == []
    assert doc["target"] == "toy@1.0/soc-a" and doc["summary"]["cpu"] == 1
    assert doc["nodes"][0]["reasons"][0]["message"] == "mode='reflect' not in {'constant'}"


def test_several_targets_give_a_list(capsys, reflect_model):
    code, out, _ = run(capsys, "check", str(reflect_model), "-t", "toy@1.0", "-t", "toy@1.1/soc-b", "--format", "json")
    docs = json.loads(out)
    assert code == 1 and [d["passed"] for d in docs] == [False, True]


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
    code, out, _ = run(capsys, "targets")
    assert "toy@1.0/soc-a" in out and "Toy toolchain for tests" in out


def test_tables_validate(capsys, tmp_path):
    code, out, _ = run(capsys, "tables", "validate")
    assert code == 0 and "all tables valid" in out
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 2}')
    code, out, err = run(capsys, "tables", "validate", str(bad))
    assert code == 2 and "$.format" in err
    code, out, err = run(capsys, "tables", "validate", "--write-manifest", str(bad))
    assert code == 2 and "give no files" in err


def test_tables_validate_writes_the_manifest(capsys, tmp_path, monkeypatch):
    import shutil

    from pytest_npucheck import tables

    fake = tmp_path / "bundled"
    shutil.copytree(tables.bundled_tables_dir(), fake)
    committed = (fake / tables.MANIFEST).read_text()
    (fake / tables.MANIFEST).unlink()
    monkeypatch.setattr(tables, "bundled_tables_dir", lambda: fake)
    code, out, _ = run(capsys, "tables", "validate", "--write-manifest")
    assert code == 0 and "wrote" in out
    assert (fake / tables.MANIFEST).read_text() == committed  # what the repository holds is current


def test_console_script_is_installed():
    import shutil
    from pathlib import Path

    exe = shutil.which("npucheck") or str(Path(sys.executable).with_name("npucheck"))
    r = subprocess.run([exe, "--tables", str(TOY_TABLES), "targets"], capture_output=True, text=True)
    assert r.returncode == 0 and "toy@1.1/soc-b" in r.stdout


def test_console_script_table_commands():
    """`tables diff` and `probe` through the installed script: the ops whose status differs
    between the toy tables' two versions are the diff's status changes, and a probe run for a
    toolchain without probes is a usage error that prints nothing on stdout."""
    import shutil
    from pathlib import Path

    exe = shutil.which("npucheck") or str(Path(sys.executable).with_name("npucheck"))
    r = subprocess.run([exe, "--tables", str(TOY_TABLES), "tables", "diff", "toy@1.0", "toy@1.1", "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    old = json.loads((TOY_TABLES / "toy/1.0/soc-a.json").read_text())
    new = json.loads((TOY_TABLES / "toy/1.1/soc-a.json").read_text())
    changed = {k for k in old["ops"] if k in new["ops"] and old["ops"][k]["status"] != new["ops"][k]["status"]}
    assert changed  # the toy tables differ (Erf: cpu in 1.0, npu in 1.1)
    assert {c["subject"] for c in doc["changes"] if c["kind"] == "status"} == changed
    r = subprocess.run([exe, "probe", "toy", "--version", "1.0"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and "unknown toolchain 'toy' for probing" in r.stderr


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
