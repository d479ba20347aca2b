"""kill -9 torture of golden and baseline updates: the file is always the old or the new version.

Each iteration forks a writer that rewrites one golden (``GoldenStore.save``, what
``--npu-update-golden`` calls) or the baseline (``Baseline.dumps`` + ``jsonio.write_atomic``, what
``--npu-update-baseline`` calls) in a loop, each version large (megabytes) and self-consistent,
then kills it with SIGKILL at a random moment. Afterwards the file must load with the plugin's own
readers (``golden.read_golden``, ``baseline.load``) and hold one complete version; temporary files
left by the killed writer must be gone after the next write's cleanup.

    python scripts/torture.py [--iterations 100] [--seed 1] [--dir DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

TEST_ID = "tests/test_models.py::test_resnet[big]"
N_ARRAY = 1 << 18  # float32 elements per golden array: 1 MiB each, two arrays
N_ENTRIES = 1500   # baseline entries: about 0.4 MB of JSON


def _golden_version(store: Any, v: int) -> None:
    import numpy as np

    x = np.full(N_ARRAY, v, dtype=np.float32)
    store.save(TEST_ID, {"x": x}, {"y": x + 0.5})


def _baseline_text(v: int) -> str:
    from pytest_npucheck import baseline

    doc = {"format": 1, "entries": [
        {"test": f"tests/test_m.py::test_{i}", "target": "rknn@2.5.0/rk3588", "op_type": "Resize",
         "node": f"/layer{i}/Resize", "verdict": "cpu", "reason": f"version {v}",
         "location": {"module": f"layer{i}", "file": "model.py", "line": 10 + i}} for i in range(N_ENTRIES)]}
    try:
        return baseline.parse(doc).dumps()
    except Exception as exc:  # the baseline format changed: the torture must say so, not guess
        raise SystemExit(f"torture: cannot build a baseline document: {exc}") from None


def _writer(kind: str, directory: Path, start: int, ready_fd: int) -> None:  # pragma: no cover - child
    from pytest_npucheck.golden import GoldenStore
    from pytest_npucheck.jsonio import write_atomic

    store = GoldenStore(directory / "goldens")
    target = directory / "npucheck-baseline.json"
    os.write(ready_fd, b"r")
    os.close(ready_fd)
    v = start
    while True:
        v += 1
        if kind == "golden":
            _golden_version(store, v)
        else:
            write_atomic(target, _baseline_text(v))


def _check_golden(directory: Path) -> int:
    from pytest_npucheck.golden import GoldenStore, read_golden

    g = read_golden(GoldenStore(directory / "goldens").path_for(TEST_ID))
    x, y = g.inputs["x"], g.outputs["y"]
    v = float(x[0])
    if x.shape != (N_ARRAY,) or y.shape != (N_ARRAY,) or not (x == v).all() or not (y == v + 0.5).all():
        raise AssertionError(f"golden holds a mixed or partial version (first value {v})")
    if g.test_id != TEST_ID:
        raise AssertionError(f"golden test id {g.test_id!r}")
    return int(v)


def _check_baseline(directory: Path) -> int:
    from pytest_npucheck import baseline

    b = baseline.load(directory / "npucheck-baseline.json")
    reasons = {e.reason for e in b.entries}
    if len(b.entries) != N_ENTRIES or len(reasons) != 1:
        raise AssertionError(f"baseline holds {len(b.entries)} entries, reasons {sorted(reasons)[:3]}")
    return int(next(iter(reasons)).split()[-1])


def _temps(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and p.name.endswith(".tmp"))


def torture(iterations: int, seed: int = 1, directory: Path | None = None,
            max_delay: float = 0.4) -> dict[str, Any]:
    """Run the torture; returns the figures. Raises AssertionError on a broken file."""
    from pytest_npucheck.golden import GoldenStore
    from pytest_npucheck.jsonio import write_atomic

    rng = random.Random(seed)
    own_dir = directory is None
    directory = Path(directory or tempfile.mkdtemp(prefix="npucheck-torture-"))
    _golden_version(GoldenStore(directory / "goldens"), 0)
    write_atomic(directory / "npucheck-baseline.json", _baseline_text(0))
    last = {"golden": 0, "baseline": 0}
    figures: dict[str, Any] = {"iterations": 0, "golden": 0, "baseline": 0, "broken": 0,
                               "new_version_seen": 0, "old_version_seen": 0, "temps_left_by_kills": 0,
                               "temps_after_cleanup": 0}
    for i in range(iterations):
        kind = "golden" if i % 2 == 0 else "baseline"
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the writer
            os.close(r)
            try:
                _writer(kind, directory, last[kind], w)
            finally:
                os._exit(1)
        os.close(w)
        os.read(r, 1)  # the writer is running
        os.close(r)
        time.sleep(rng.uniform(0, max_delay))
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        figures["iterations"] += 1
        figures[kind] += 1
        try:
            v = _check_golden(directory) if kind == "golden" else _check_baseline(directory)
        except Exception as exc:
            figures["broken"] += 1
            raise AssertionError(f"iteration {i} ({kind}): broken file after kill -9: {exc}") from exc
        figures["new_version_seen" if v > last[kind] else "old_version_seen"] += 1
        last[kind] = v
        figures["temps_left_by_kills"] += len(_temps(directory))
    # the next run's writes clean up what killed writers left
    _golden_version(GoldenStore(directory / "goldens"), last["golden"] + 1)
    write_atomic(directory / "npucheck-baseline.json", _baseline_text(last["baseline"] + 1))
    figures["temps_after_cleanup"] = len(_temps(directory))
    if figures["temps_after_cleanup"]:
        raise AssertionError(f"temporary files left after cleanup: {_temps(directory)}")
    if own_dir:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    return figures


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    t = time.perf_counter()
    figures = torture(args.iterations, args.seed, args.dir)
    figures["seconds"] = round(time.perf_counter() - t, 1)
    print(json.dumps(figures, indent=2, sort_keys=True))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
