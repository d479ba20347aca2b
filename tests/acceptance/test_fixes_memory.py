"""Fix verification's memory (fixes.py): `npucheck check` on a model with large inline weights, its
peak RSS measured in the child process that runs it."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from conftest import TOY_TABLES, const, make_model


@pytest.mark.reliability("S6")
def test_fix_verification_never_loads_the_weights(tmp_path):
    """Fix verification read the whole model with its inline weights and copied it (a 572 MiB model:
    3.5 GB and 45 s in the pytest process, outside the memory limit and the timeout). It now rewrites
    the graph without its weight values: the peak RSS of `npucheck check` on a model with 128 MiB of
    inline weights is the same with and without fixes, and the fix is still verified."""
    k = (128 << 20) // (4 * 3 * 10 * 10)
    weights = numpy_helper.from_array(np.full((k, 3, 10, 10), 0.5, np.float32), "w")
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["p"], name="/down1/Pad", mode="reflect"),
                    helper.make_node("Add", ["p", "w"], ["y"], name="/down1/Add")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64"), weights])
    del weights
    path = tmp_path / "big.onnx"
    onnx.save(m, path)
    del m
    assert path.stat().st_size > 128 << 20
    # peak RSS of the child's own memory (VmHWM, reset by exec): ru_maxrss is inherited across fork+exec,
    # so under xdist the child started at its torch-laden worker's peak (825 MiB read in a -n 2 run)
    code = ("import io, json, resource, sys, contextlib\nfrom pytest_npucheck.cli import main\n"
            "out = io.StringIO()\nwith contextlib.redirect_stdout(out):\n    code = main(sys.argv[1:])\n"
            "print(json.dumps({'code': code, 'doc': json.loads(out.getvalue()),"
            " 'maxrss_kib': int([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0])}))\n")

    def run(*extra):
        res = subprocess.run([sys.executable, "-c", code, "--tables", str(TOY_TABLES), "check", str(path),
                              "--target", "toy@1.0/soc-a", "--format", "json", *extra],
                             capture_output=True, text=True, timeout=600)
        assert res.returncode == 0, res.stderr[-3000:]
        return json.loads(res.stdout.strip().splitlines()[-1])

    plain, fixes = run("--no-fixes"), run()
    assert plain["code"] == fixes["code"] == 1
    [s] = fixes["doc"]["files"][0]["targets"][0]["fixes"]["suggestions"]  # the one JSON shape of `check`
    assert s["recipe"] == "pad-reflect" and s["verified"]["error"] is None and s["verified"]["fallbacks_after"] == 0
    added_mib = (fixes["maxrss_kib"] - plain["maxrss_kib"]) / 1024
    assert added_mib < 48, f"fix verification added {added_mib:.0f} MiB of peak RSS: the weights were loaded"
