"""Goal 1's ratio for two versions of the code, side by side on the same machine state.

    python benchmarks/side_by_side.py /tmp/before /work/main [--models bert_1k,bert_9k] [--rounds 3]

Each argument is a directory holding a ``pytest_npucheck`` package (``git archive <commit> | tar -x
-C /tmp/before`` gives one). Every round runs each version in a fresh process, which does the
static check of goal 1 (``run.static_check``, against that version's own rknn@2.5.0/rk3588 table)
and the baseline (``onnx.load`` + ``infer_shapes``) 7 times alternately and prints the medians of
their CPU times. Versions take turns, so a change in the machine's load hits both alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

_ONE = """
import json, os, statistics, sys, time
sys.path.insert(0, {here!r})
import models, onnx, run
from pytest_npucheck.tables import Catalog
tables = [Catalog.discover().table(run.TARGET)]
out = {{}}
for name in {names!r}:
    path = models.build(name)
    run.static_check(path, tables)
    base, check = [], []
    for _ in range(7):
        t = time.process_time(); onnx.shape_inference.infer_shapes(onnx.load(os.fspath(path), load_external_data=False))
        base.append(time.process_time() - t)
        t = time.process_time(); run.static_check(path, tables); check.append(time.process_time() - t)
    out[name] = [statistics.median(check) * 1000, statistics.median(base) * 1000]
print(json.dumps(out))
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trees", nargs="+", type=Path, help="directories holding a pytest_npucheck package")
    p.add_argument("--models", default="bert_1k,bert_9k")
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args()
    names = [n for n in args.models.split(",") if n]
    code = textwrap.dedent(_ONE.format(here=str(HERE), names=names))
    for _ in range(args.rounds):
        for tree in args.trees:
            env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
            res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tree)
            if res.returncode != 0:
                print(res.stderr[-2000:])
                return 1
            figures = json.loads(res.stdout.strip().splitlines()[-1])
            print(f"{tree}: " + "  ".join(f"{n} {c:.1f} / {b:.1f} ms = {c / b:.2f}" for n, (c, b) in figures.items()),
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
