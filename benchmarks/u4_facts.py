"""CPU of the graph facts of a whole `npucheck check` process, stage by stage (issue 29, goal u4).

    python benchmarks/u4_facts.py [N] [MODEL] [SIDE=PYTHONPATH ...]   # N processes per side (7), encoder_26k

Runs ``npucheck check MODEL --target rknn@2.5.0/rk3588 --format json`` in a fresh process (the
CLI's own path: the isolated child's shape inference first, then the facts of the first model of
the process), with each stage of ``graph.build`` and ``validity.check_model`` wrapped by
``time.process_time()``; "facts + validity" is ``check._facts_or_model_error`` whole (the parse
of the file and of the child's result included), with its minor page faults and system CPU
(``getrusage``: a page first touched costs ~2 us of system time on this VM). A stage a checkout
does not have is left out. Without SIDE arguments one side runs, the code this Python imports;
with them, each ``SIDE=DIR`` runs with ``PYTHONPATH=DIR`` (a ``git archive`` of another commit), the
sides alternated, in an empty directory (``python -c`` puts the working directory before
``PYTHONPATH``). Prints the median and the least of the N processes per stage and side.
"""

from __future__ import annotations

import json
import os
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
import json, os, resource, sys, time
from pytest_npucheck import check, cli, graph, validity
from pytest_npucheck.graph import build
S = {}
def wrap(owner, name, label):
    fn = getattr(owner, name, None)
    if fn is None:
        return
    def run(*a, **k):
        t = time.process_time()
        try:
            return fn(*a, **k)
        finally:
            S[label] = S.get(label, 0.0) + time.process_time() - t
    setattr(owner, name, run)
B = build._Builder
for owner, name, label in (
        (graph, "load_model_proto", "read the file (load_model_proto)"), (build, "_read_nodes", "read nodes"), (build, "_infer", "parse the child's result"),
        (build, "from_inferred", "parse the child's result"), (build, "_read_nodes_serialized", "read nodes"),
        (build, "_fold_small_constants", "fold"), (B, "walk_graph", "walk (all)"), (B, "_main_nodes", "  of it: NodeFacts"),
        (build, "refine", "refine"), (B, "folded_values", "folded values"), (build, "_mark_dynamic", "mark dynamic"),
        (build, "GraphFacts", "GraphFacts (producers, consumers)"), (validity, "check_model", "validity")):
    wrap(owner, name, label)
whole = check._facts_or_model_error
def phase(path, **given):
    a, t = resource.getrusage(resource.RUSAGE_SELF), time.process_time()
    try:
        return whole(path, **given)
    finally:
        b = resource.getrusage(resource.RUSAGE_SELF)
        S["facts + validity"] = time.process_time() - t
        S["  of it: system CPU"] = b.ru_stime - a.ru_stime
        S["  minor page faults"] = b.ru_minflt - a.ru_minflt
check._facts_or_model_error = phase
try:
    cli.main(["check", sys.argv[1], "--target", sys.argv[2], "--format", "json"])
except SystemExit:
    pass
with open(os.environ["NPUCHECK_U4_FACTS"], "w") as fh:
    json.dump(S, fh)
'''
ORDER = ("read the file (load_model_proto)", "read nodes", "parse the child's result", "fold", "walk (all)", "  of it: NodeFacts", "refine", "folded values",
         "mark dynamic", "GraphFacts (producers, consumers)", "validity", "facts + validity", "  of it: system CPU",
         "  minor page faults")


def run_once(model: Path, pythonpath: str | None, cwd: str) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as fh:
        out = fh.name
    env = dict(os.environ, NPUCHECK_U4_FACTS=out)
    env.pop("NPUCHECK_ISOLATE", None)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    try:
        subprocess.run([sys.executable, "-c", _WRAPPER, str(model), TARGET], env=env, cwd=cwd, check=False,
                       stdout=subprocess.DEVNULL)
        with open(out) as fh:
            return json.load(fh)
    finally:
        os.unlink(out)


def main() -> None:
    args = sys.argv[1:]
    runs = int(args.pop(0)) if args and args[0].isdigit() else 7
    name = args.pop(0) if args and "=" not in args[0] else "encoder_26k"
    sides = [tuple(a.split("=", 1)) for a in args] or [("this", "")]
    model = models.build(name)
    seen: dict[str, dict[str, list[float]]] = {side: {} for side, _ in sides}
    with tempfile.TemporaryDirectory() as cwd:
        for _ in range(runs):
            for side, path in sides:
                for stage, value in run_once(model, path or None, cwd).items():
                    seen[side].setdefault(stage, []).append(value)
    print(f"npucheck check {name} --target {TARGET}: facts of the first model of a fresh process, "
          f"CPU ms (median / least of {runs} processes per side; page faults: median)")
    print(f"  {'stage':36}" + "".join(f"{side:>18}" for side, _ in sides))
    for stage in ORDER:
        cells = []
        for side, _ in sides:
            values = seen[side].get(stage)
            if not values:
                cells.append(f"{'-':>18}")
            elif stage.endswith("faults"):
                cells.append(f"{statistics.median(values):>18.0f}")
            else:
                cells.append(f"{statistics.median(values) * 1000:>10.1f} /{min(values) * 1000:6.1f}")
        print(f"  {stage:36}" + "".join(cells))


if __name__ == "__main__":
    main()
