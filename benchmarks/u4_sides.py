"""Goal u4's two commands side by side with and without OpenBLAS's worker threads (issue 29).

    python benchmarks/u4_sides.py [N] [NAME=PYTHONPATH ...]   # N alternated processes per side (11)

Runs, alternated, the baseline (``import onnx; onnx.shape_inference.infer_shapes(onnx.load(F))`` on
``encoder_26k``) and, for each ``NAME=DIR``, ``npucheck check F --target rknn@2.5.0/rk3588 --format json``
with ``PYTHONPATH=DIR`` (e.g. a ``git archive`` of another commit), each once as it is and once with
``OPENBLAS_NUM_THREADS=1`` in its environment: numpy's OpenBLAS starts an idle worker thread that spins
~0.1 CPU-s (docs/performance.md, "Issue 29, eleventh pass"), and the check of a version that starts
none (``cli_check.quiet_blas_import``) shows the same figure both ways. Without NAME arguments the
check is this checkout's. Prints the median CPU (children included, as ``run.py`` measures) and wall
seconds of each side. Run it from an empty directory when a side is an archive.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import models  # noqa: E402
import run  # noqa: E402

_CLI = "import sys; sys.argv=['npucheck']+sys.argv[1:]; from pytest_npucheck import cli; sys.exit(cli.main())"


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv and argv[0].isdigit() else 11
    given = dict(a.split("=", 1) for a in argv if "=" in a) or {"check": ""}
    run._become_subreaper()
    path = str(models.build("encoder_26k"))
    py = sys.executable
    quiet = {"OPENBLAS_NUM_THREADS": "1"}
    sides: dict[str, tuple[list[str], dict[str, str]]] = {
        "baseline": ([py, "-c", run._U4_INFER, path], {}),
        "baseline, OPENBLAS_NUM_THREADS=1": ([py, "-c", run._U4_INFER, path], quiet)}
    for name, where in given.items():
        cmd = [py, "-c", _CLI, "check", path, "--target", run.TARGET, "--format", "json"]
        env = {"PYTHONPATH": where} if where else {}
        sides[name] = (cmd, env)
        sides[f"{name}, OPENBLAS_NUM_THREADS=1"] = (cmd, {**env, **quiet})
    cwd = Path(tempfile.mkdtemp())
    for cmd, env in sides.values():  # bytecode caches written, the file in the page cache
        run._process(cmd, cwd, env=env, ok=(0, 1))
    wall: dict[str, list[float]] = {k: [] for k in sides}
    cpu: dict[str, list[float]] = {k: [] for k in sides}
    for _ in range(n):
        for name, (cmd, env) in sides.items():
            w, c, _ = run._process(cmd, cwd, env=env, ok=(0, 1))
            wall[name].append(w)
            cpu[name].append(c)
    print(f"encoder_26k: medians of {n} alternated processes per side, load {os.getloadavg()[0]:.1f}")
    print(f"  {'side':44s} {'CPU s':>7s} {'wall s':>7s}")
    for name in sides:
        print(f"  {name:44s} {statistics.median(cpu[name]):7.3f} {statistics.median(wall[name]):7.3f}")


if __name__ == "__main__":
    main(sys.argv[1:])
