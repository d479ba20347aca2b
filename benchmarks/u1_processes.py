"""Goal u1's -n 2 against -n 0, process by process: where each CPU second of the runs goes.

    python benchmarks/u1_processes.py [--reps 3] [--before DIR] [--seeds 2]

Runs the u1 suite of ``benchmarks/run.py`` (the demo's four models, ``--seeds`` seeds each: 4 x seeds
marked tests and as many plain ones) on a warm export cache, ``-n 0`` and ``-n 2``, with the plugin and
without it (bare pytest-xdist), alternately, and prints for each process its CPU seconds at conftest
import ("start"), over collection, over the tests, from ``pytest_sessionfinish`` to ``atexit``, and in
all (xdist's workers run under ``/usr/bin/time`` through ``--tx 2*popen//python=WRAPPER``, so their
exit is counted; the controller's total is the run's less its workers'; "own" is the controller's RUSAGE_SELF alone and
"orphans" what remains: the isolated children the workers left unreaped at exit). ``--before DIR``: a side run
with DIR first on ``PYTHONPATH`` (a ``git archive`` of another commit's ``pytest_npucheck`` and
``op_support_tables``), to compare two versions of the plugin in one run. The environment passes
through: ``OMP_NUM_THREADS=1 python benchmarks/u1_processes.py`` measures without torch's OpenMP pool.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import run  # noqa: E402

_PHASES = """

import atexit as _atexit
import resource as _r


def _c():
    s, c = _r.getrusage(_r.RUSAGE_SELF), _r.getrusage(_r.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


PHASES = {"start": _c()}


def pytest_collection_finish(session):
    PHASES["collected"] = _c()


def pytest_sessionfinish(session):
    PHASES["finished"] = _c()


def _at_exit():
    PHASES["atexit"] = _c()
    s = _r.getrusage(_r.RUSAGE_SELF)
    PHASES["self"] = s.ru_utime + s.ru_stime  # this process alone, without any child
    name = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["BENCH_OUT"], f"phases-{name}-{os.getpid()}.json"), "w") as fh:
        json.dump(PHASES, fh)


_atexit.register(_at_exit)
"""


from u4_whole import _cpu_children, _reap  # noqa: E402 - the CPU of reaped children, and reaping every child


def _one(suite: Path, wrapper: Path, prefix: list[str], args: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as out:
        times = Path(out) / "worker-times"
        wrapper.write_text(f"#!/bin/sh\nexec /usr/bin/time -a -o {times} -f '%U %S' {sys.executable} \"$@\"\n")
        wrapper.chmod(0o755)
        env = {**os.environ, "BENCH_OUT": out, "PYTHONPATH": os.pathsep.join([*prefix, str(suite)])}
        c, t = _cpu_children(), time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *args], cwd=suite, env=env,
                       capture_output=True, text=True)
        wall = time.perf_counter() - t
        _reap()
        total = _cpu_children() - c
        procs = {}
        for f in Path(out).glob("phases-*.json"):
            p = json.loads(f.read_text())
            procs[f.name.split("-")[1]] = {
                "start": p["start"], "collection": p.get("collected", p["start"]) - p["start"],
                "tests": p["finished"] - p.get("collected", p["start"]), "to_atexit": p["atexit"] - p["finished"]}
        workers = sorted(sum(map(float, line.split())) for line in times.read_text().splitlines()) \
            if times.exists() else []
        # the controller's own CPU (its RUSAGE_SELF at exit); what is left of the run's CPU once the
        # workers and the controller are taken off is the isolated children the workers killed and
        # left unreaped at their exit (charged to this harness, the subreaper), not the controller's
        ctl = [json.loads(f.read_text()).get("self") for f in Path(out).glob("phases-main-*.json")] if workers else []
        own = ctl[0] if ctl and ctl[0] is not None else None
        out_row = {"wall": wall, "total": total, "workers_total": workers, "controller_total": total - sum(workers),
                   "procs": procs}
        if own is not None:
            out_row["controller_self"] = own
            out_row["orphans"] = total - sum(workers) - own
        return out_row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--before", type=Path, default=None)
    opts = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(run.models.CACHE / "pycache")
    if sys.platform.startswith("linux"):  # the isolated children the workers leave behind are counted
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    with tempfile.TemporaryDirectory() as d:
        suite, wrapper = Path(d) / "suite", Path(d) / "python-timed"
        suite.mkdir()
        shutil.copy(run.REPO / "examples" / "models.py", suite / "models.py")
        (suite / "test_user.py").write_text(textwrap.dedent(run._USER_SUITE.format(target=run.TARGET,
                                                                                  seeds=opts.seeds)))
        (suite / "conftest.py").write_text(textwrap.dedent(run._USER_CONFTEST) + _PHASES)
        n2 = ["--dist", "load", "--tx", f"2*popen//python={wrapper}"]
        sides: dict[str, tuple[list[str], list[str]]] = {}
        if opts.before is not None:
            sides.update({"n0 before": ([str(opts.before)], []), "n2 before": ([str(opts.before)], n2)})
        sides.update({"n0": ([], []), "n2": ([], n2), "n0 bare": ([], ["-p", "no:npucheck"]),
                      "n2 bare": ([], ["-p", "no:npucheck", *n2])})
        for prefix, args in sides.values():  # once each, untimed: the export cache, the bytecode caches
            _one(suite, wrapper, prefix, args)
        rows: dict[str, list[dict]] = {k: [] for k in sides}
        for rep in range(opts.reps):
            for name, (prefix, args) in sides.items():
                rows[name].append(_one(suite, wrapper, prefix, args))
                r = rows[name][-1]
                own = (f" (own {r['controller_self']:.2f}, orphans {r['orphans']:.2f})" if "controller_self" in r else "")
                print(f"{rep} {name:10s} wall {r['wall']:.2f} total {r['total']:.2f}  controller {r['controller_total']:.2f}{own}  workers "
                      f"{[round(w, 2) for w in r['workers_total']]}  "
                      + json.dumps({p: {k: round(v, 2) for k, v in ph.items()} for p, ph in sorted(r["procs"].items())}),
                      flush=True)
            print(f"  load {[round(x, 1) for x in os.getloadavg()]}", flush=True)
    print("medians (wall and CPU s)")
    for name, rs in rows.items():
        med = {"wall": statistics.median(r["wall"] for r in rs), "total": statistics.median(r["total"] for r in rs),
               "controller_total": statistics.median(r["controller_total"] for r in rs)}
        for key in ("controller_self", "orphans"):
            if all(key in r for r in rs):
                med[key] = statistics.median(r[key] for r in rs)
        if rs[0]["workers_total"]:
            med["workers_total"] = [statistics.median(r["workers_total"][i] for r in rs if len(r["workers_total"]) > i)
                                    for i in range(len(rs[0]["workers_total"]))]
        for proc in sorted(rs[0]["procs"]):
            for phase in ("start", "collection", "tests", "to_atexit"):
                vals = [r["procs"][proc][phase] for r in rs if proc in r["procs"]]
                med[f"{proc}.{phase}"] = statistics.median(vals)
        print(f"  {name:10s} " + json.dumps({k: [round(x, 2) for x in v] if isinstance(v, list) else round(v, 2)
                                               for k, v in med.items()}))


if __name__ == "__main__":
    main()
