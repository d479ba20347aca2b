"""Where the CPU of a whole `npucheck check` process goes (issue 29, goal u4), per phase.

    python benchmarks/u4_whole.py [N] [SIDE=PYTHONPATH ...]   # N runs per side (7), sides alternated

Runs ``npucheck check encoder_26k --target rknn@2.5.0/rk3588 --format json`` as the console script
does, through a wrapper that marks ``time.process_time()`` after the imports, when the isolated child
has answered, after the facts and validity, after the match and at the exit functions; there it reaps
the isolated child and reads its CPU (``RUSAGE_CHILDREN``). This process is a child subreaper and
measures each whole process as ``benchmarks/run.py`` does; "teardown and exit" is the whole process
minus the parent's CPU at the exit functions minus the child's. Without SIDE arguments one side runs,
the code this Python imports; with them, each ``SIDE=DIR`` runs with ``PYTHONPATH=DIR`` (e.g. a
``git archive`` of another commit; the processes run in an empty directory, since ``python -c`` puts
the working directory before ``PYTHONPATH``). Prints the median of the N runs of each phase per side.
Where the side has ``cli_check.quiet_blas_import``, the wrapper calls it before ``import onnx``, as the
check does before it imports onnx (numpy's import, and that module's, count in "import onnx").
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402

TARGET = "rknn@2.5.0/rk3588"
_WRAPPER = r'''
import atexit, json, os, resource, sys, time
T = {"start": time.process_time()}
def mark(k): T[k] = time.process_time()
try:  # numpy as the console script's check imports it (before onnx, OpenBLAS on one thread), where it does
    from pytest_npucheck.cli_check import quiet_blas_import
except ImportError:
    pass
else:
    quiet_blas_import()
import onnx; mark("import_onnx")
from pytest_npucheck import check, cli; mark("import_npucheck")
facts, graph = check._facts_or_model_error, check.check_graph
def timed_facts(p, **given):
    mark("child_done"); r = facts(p, **given); mark("facts"); return r
def timed_graph(*a):
    r = graph(*a); mark("match"); return r
check._facts_or_model_error, check.check_graph = timed_facts, timed_graph
def report():
    mark("exit")
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            break
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    T["child_cpu"] = ch.ru_utime + ch.ru_stime
    with open(os.environ["NPUCHECK_U4_MARKS"], "w") as fh:
        json.dump(T, fh)
atexit.register(report)
sys.argv = ["npucheck"] + sys.argv[1:]
sys.exit(cli.main())
'''
PHASES = ("interpreter start", "import onnx", "the package's imports", "start-up (argparse, tables, fork) + nodes read while the child infers",
          "facts + validity", "match (pre-passes, rules, partition)", "report (fixes, to_json, text, write)",
          "isolated child", "teardown and exit", "whole process")


def _cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _reap() -> None:
    while True:
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    sides = [a.split("=", 1) for a in sys.argv[2:]] or [("this", "")]
    if sys.platform.startswith("linux"):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: the child's CPU counts
    path = models.build("encoder_26k")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}  # as run.py: bytecode caches
    env.setdefault("PYTHONPYCACHEPREFIX", str(models.CACHE / "pycache"))
    rows: dict[str, list[dict[str, float]]] = {s: [] for s, _ in sides}
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks.json"
        for i in range(n + 1):  # the first round warms the caches and is not counted
            for side, pythonpath in sides:
                side_env = dict(env, NPUCHECK_U4_MARKS=str(marks))
                if pythonpath:
                    side_env["PYTHONPATH"] = pythonpath
                c = _cpu_children()
                subprocess.run([sys.executable, "-c", _WRAPPER, "check", str(path), "--target", TARGET,
                                "--format", "json"], env=side_env, cwd=tmp, stdout=subprocess.DEVNULL, check=False)
                _reap()
                total = _cpu_children() - c
                t = json.loads(marks.read_text())
                if i == 0:
                    continue
                values = (t["start"], t["import_onnx"] - t["start"], t["import_npucheck"] - t["import_onnx"],
                          t["child_done"] - t["import_npucheck"], t["facts"] - t["child_done"],
                          t["match"] - t["facts"], t["exit"] - t["match"], t["child_cpu"],
                          total - t["exit"] - t["child_cpu"], total)
                rows[side].append(dict(zip(PHASES, values)))
    print(f"npucheck check encoder_26k --target {TARGET}: CPU s, median of {n} runs per side, load "
          f"{os.getloadavg()[0]:.1f}")
    print(f"  {'phase':42}" + "".join(f"{s:>12}" for s, _ in sides))
    for phase in PHASES:
        print(f"  {phase:42}" + "".join(f"{statistics.median(r[phase] for r in rows[s]):12.3f}" for s, _ in sides))


if __name__ == "__main__":
    main()
