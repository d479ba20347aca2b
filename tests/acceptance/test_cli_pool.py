"""`npucheck check` over many files with its worker pool, and the pre-commit hook passing every
staged file to one call (issue 28 item 5). Separate processes, so not in tests/unit."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest
from onnx import helper

from conftest import REPO, TOY_TABLES, const, make_model


def _zoo(save):
    clean = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"])
    bad = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="reflect")],
                     [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    return [save(clean, "a.onnx"), save(bad, "b.onnx"), save(clean, "c.onnx"), save(bad, "d.onnx")]


def _npucheck(*args):
    return subprocess.run([sys.executable, "-m", "pytest_npucheck.cli", *map(str, args)], capture_output=True,
                          text=True, timeout=600)


def test_the_pool_gives_the_same_document_as_one_process(save):
    from pytest_npucheck.cli_check import validate

    files = _zoo(save)
    common = ["--tables", TOY_TABLES, "check", *files, "-t", "toy@1.0", "-t", "toy@1.1/soc-b", "--format", "json",
              "--no-fixes"]
    pooled, serial = _npucheck(*common, "--jobs", "2"), _npucheck(*common, "--jobs", "1")
    assert pooled.returncode == serial.returncode == 1, pooled.stderr + serial.stderr
    doc = json.loads(pooled.stdout)
    assert validate(doc) == [] and doc == json.loads(serial.stdout)
    assert [f["path"] for f in doc["files"]] == list(map(str, files))  # input order, whatever finished first
    assert [[t["passed"] for t in f["targets"]] for f in doc["files"]] == [[True, True], [False, True]] * 2


def test_pre_commit_hook_checks_every_staged_file_in_one_call(save):
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^  require_serial: true$", text, re.M)  # one call, not one per CPU (pre-commit's xargs)
    assert not re.search(r"^  pass_filenames: false$", text, re.M)
    argv = shlex.split(re.search(r"^  entry: (.*)$", text, re.M).group(1))
    files = _zoo(save)
    r = subprocess.run([sys.executable, *argv[1:], "--target", "toy@1.0", "--tables", str(TOY_TABLES),
                        *map(str, files)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stderr
    assert [line for line in r.stdout.splitlines() if line.startswith("== ")] == [
        f"== {files[0]}: PASS", f"== {files[1]}: FAIL", f"== {files[2]}: PASS", f"== {files[3]}: FAIL"]
    assert r.stdout.rstrip().endswith("4 file(s): 2 pass, 2 fall back, 0 error(s)")


def test_a_dead_worker_is_exit_3_for_its_file_and_the_others_keep_their_verdicts(save, monkeypatch, capsys):
    """A worker that dies (BrokenProcessPool: killed, out of memory) makes its file an internal error;
    the files checked by the other results are still reported."""
    import concurrent.futures as cf
    from concurrent.futures.process import BrokenProcessPool

    from pytest_npucheck.cli import main
    from pytest_npucheck.cli_check import validate

    files = _zoo(save)

    class DyingPool(cf.ProcessPoolExecutor):
        def submit(self, fn, *args, **kwargs):
            if str(args[0]).endswith("c.onnx"):
                f: cf.Future = cf.Future()
                f.set_exception(BrokenProcessPool("a process in the pool was terminated abruptly"))
                return f
            return super().submit(fn, *args, **kwargs)

    monkeypatch.setattr(cf, "ProcessPoolExecutor", DyingPool)
    code = main(["--tables", str(TOY_TABLES), "check", *map(str, files), "-t", "toy@1.0", "-j", "2",
                 "--format", "json", "--no-fixes"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert code == 3 and doc["exit_status"] == 3 and validate(doc) == []
    assert doc["files"][2]["error"]["kind"] == "internal" and "terminated abruptly" in doc["files"][2]["error"]["message"]
    assert [[t["passed"] for t in f["targets"]] for f in doc["files"]] == [[True], [False], [], [False]]
    assert "internal error" in err and "c.onnx" in err


_BLAS_PROBE = """
import json, os, sys
from pytest_npucheck.cli_check import quiet_blas_import
quiet_blas_import()
import numpy
tasks = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else None
print(json.dumps({"numpy": "numpy" in sys.modules, "env": os.environ.get("OPENBLAS_NUM_THREADS"), "tasks": tasks}))
"""


@pytest.mark.parametrize("given", [None, "2"])
def test_numpy_is_imported_without_blas_threads_and_the_environment_is_left_as_it_was(given):
    # a fresh interpreter: this one imported numpy long ago, where quiet_blas_import does nothing
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if given is not None:
        env["OPENBLAS_NUM_THREADS"] = given
    out = subprocess.run([sys.executable, "-c", _BLAS_PROBE], env=env, capture_output=True, text=True, check=True)
    seen = json.loads(out.stdout)
    assert seen["numpy"] and seen["env"] == given
    if given is None and seen["tasks"] is not None:
        assert seen["tasks"] == 1  # no OpenBLAS worker thread started
