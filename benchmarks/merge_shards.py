"""How long ``npucheck merge`` takes on a sharded suite (issue 28: 8 shard reports of 300 tests in
under a second).

    python benchmarks/merge_shards.py [--shards 8] [--tests 300] [--per-shard] [--reps 5]

The per-test entries are real: a 40-node ONNX graph (convolutions, reflect pads that fall back on
the toy target) checked by the package against the toy tables, once, then stamped with each test's
id (the merge does not look inside a node, so one checked graph per test is representative; a
baseline accepts one fallback per test, another baseline entry is stale). The shard reports are
written as files by the same code path a pytest run uses (``merge.shard_section``), then merged by
``npucheck merge`` in-process: once writing the merged JSON report (the merge: loading, checking
agreement, the run-level decisions), once writing every format (adds the Markdown and HTML
renderers, which cost what they cost in an unsharded run). Prints the median wall and CPU times
(CPU: this process's, which a busy machine inflates less than the wall time), the load average, and,
as ratios within the run, the merge against only reading the shard files (``json.loads``); then the
same merge as a CI job runs it, ``python -m pytest_npucheck.cli merge`` in a new process (Python's
start and the package's imports included: ``cli_all_formats``). The goal (issue 28): the whole
merge, every report format written, under a second.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
TOY = REPO / "tests" / "data" / "tables"
TARGET = "toy@1.0/soc-a"


def _graph(path: Path) -> None:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper, save

    nodes, inits = [], []
    x = "x"
    for k in range(10):
        w = numpy_helper.from_array(np.full((4, 4, 3, 3), 0.01, dtype=np.float32), f"w{k}")
        pads = numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64), f"p{k}")
        inits += [w, pads]
        nodes += [helper.make_node("Pad", [x, f"p{k}"], [f"pad{k}"], name=f"pad_{k}", mode="reflect"),
                  helper.make_node("Conv", [f"pad{k}", f"w{k}"], [f"c{k}"], name=f"conv_{k}"),
                  helper.make_node("Relu", [f"c{k}"], [f"r{k}"], name=f"relu_{k}"),
                  helper.make_node("Identity", [f"r{k}"], [f"y{k}"], name=f"id_{k}")]
        x = f"y{k}"
    g = helper.make_graph(nodes, "bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 16, 16])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, None)], inits)
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def build(root: Path, shards: int, tests: int) -> list[Path]:
    """Shard reports of ``tests`` tests in all, over ``shards`` files, and the baseline under root."""
    from pytest_npucheck import __version__
    from pytest_npucheck.check import check_file
    from pytest_npucheck.merge import file_sha256, shard_section
    from pytest_npucheck.tables import Catalog

    _graph(root / "m.onnx")
    [result] = check_file(root / "m.onnx", [TARGET], Catalog.discover([str(TOY)]))
    target = result.to_json()
    fallbacks = [n for n in target["nodes"] if n["verdict"] == "cpu"]
    ids = [f"tests/test_zoo.py::test_model[m{k:04d}]" for k in range(tests)]
    baseline = root / "npucheck-baseline.json"
    entries = [{"test": i, "target": TARGET, "op_type": fallbacks[0]["op_type"], "node": fallbacks[0]["name"],
                "verdict": "cpu", "reason": "accepted", "location": None} for i in ids]
    entries.append({**entries[0], "node": "pad_gone"})
    baseline.write_text(json.dumps({"format": 1, "entries": entries}))
    sha = file_sha256(baseline)
    paths = []
    for s in range(shards):
        mine = ids[s::shards]
        tests_json = []
        for i in mine:
            t = copy.deepcopy(target)
            t["baseline"] = {"new": [n["name"] for n in fallbacks[1:]], "accepted": [{"node": fallbacks[0]["name"], "reason": "accepted"}],
                             "passed": False}
            tests_json.append({"nodeid": i, "status": "failed", "error": None, "export": None, "targets": [t]})
        doc = {"format": 1, "tool": {"name": "pytest-npucheck", "version": __version__}, "created": "x",
               "totals": {"tests": len(mine)}, "tests": tests_json,
               "shard": shard_section(rootpath=root, baseline_path=baseline, baseline_sha256=sha, strict=True,
                                      updating=False, budgets_path=None, budgets_sha256=None, release="0",
                                      args=["tests"], last_failed=False, stepwise=False, marked_selected=mine,
                                      marked_deselected=[i for i in ids if i not in mine], status=1,
                                      entries=tests_json)}
        paths.append(root / f"shard{s}.json")
        paths[-1].write_text(json.dumps(doc))
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--tests", type=int, default=300, help="tests in all (with --per-shard: in each shard)")
    ap.add_argument("--per-shard", action="store_true")
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    from pytest_npucheck.cli import main as npucheck

    total = a.tests * a.shards if a.per_shard else a.tests
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        paths = build(root, a.shards, total)
        size = sum(p.stat().st_size for p in paths)
        base = ["merge", *map(str, paths), "--root", str(root)]
        json_only = base + [f"--report=json:{root / 'merged.json'}"]
        every = json_only + [f"--report={f}:{root / ('merged.' + f)}" for f in ("md", "html", "junit")]
        times: dict[str, list[float]] = {"read": [], "merge_json": [], "merge_all_formats": [], "cli_all_formats": []}
        cpu: dict[str, list[float]] = {k: [] for k in times}
        for _ in range(a.reps):
            t0, c0 = time.perf_counter(), time.process_time()
            for p in paths:
                json.loads(p.read_text())
            times["read"].append(time.perf_counter() - t0)
            cpu["read"].append(time.process_time() - c0)
            for name, argv in (("merge_json", json_only), ("merge_all_formats", every)):
                with contextlib.redirect_stdout(io.StringIO()):
                    t0, c0 = time.perf_counter(), time.process_time()
                    status = npucheck(argv)
                    times[name].append(time.perf_counter() - t0)
                    cpu[name].append(time.process_time() - c0)
                assert status == 1, status  # the strict stale entry and the new fallbacks fail the run
            # as a CI job runs it: a new process (Python's start and the package's imports included)
            t0, r0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            proc = subprocess.run([sys.executable, "-m", "pytest_npucheck.cli", *every], capture_output=True)
            times["cli_all_formats"].append(time.perf_counter() - t0)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu["cli_all_formats"].append(r1.ru_utime - r0.ru_utime + r1.ru_stime - r0.ru_stime)
            assert proc.returncode == 1, proc.stderr
        med = {k: statistics.median(v) for k, v in times.items()}
        cmed = {k: statistics.median(v) for k, v in cpu.items() if v}
        print(json.dumps({"shards": a.shards, "tests": total, "shard_bytes": size,
                          "load_average_1min": round(os.getloadavg()[0], 2),
                          **{f"{k}_seconds": round(v, 3) for k, v in med.items()},
                          **{f"{k}_cpu_seconds": round(v, 3) for k, v in cmed.items()},
                          "merge_json_over_read": round(med["merge_json"] / med["read"], 1),
                          "merge_all_formats_over_read": round(med["merge_all_formats"] / med["read"], 1),
                          "renderers_share_of_merge_all_formats":
                              round(1 - med["merge_json"] / med["merge_all_formats"], 2),
                          "goal_merge_all_formats_under_1s": med["merge_all_formats"] < 1.0,
                          "goal_cli_all_formats_under_1s": med["cli_all_formats"] < 1.0,
                          "goal_merge_all_formats_under_1s_cpu": cmed["merge_all_formats"] < 1.0,
                          "goal_cli_all_formats_under_1s_cpu": cmed["cli_all_formats"] < 1.0}), file=sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
