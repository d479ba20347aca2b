"""kill -9 during golden and baseline updates (scripts/torture.py): never a broken file, no debris.

The suite runs a few iterations; ``NPUCHECK_TORTURE_ITERATIONS=100`` (or ``python
scripts/torture.py --iterations 100``) runs the full torture.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="the torture forks writers")


def _torture_module():
    spec = importlib.util.spec_from_file_location("npucheck_torture", REPO / "scripts" / "torture.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.reliability("D12")
def test_kill_9_during_golden_and_baseline_updates(tmp_path):
    iterations = int(os.environ.get("NPUCHECK_TORTURE_ITERATIONS", "12"))
    figures = _torture_module().torture(iterations, seed=7, directory=tmp_path, max_delay=0.3)
    print(f"\nkill -9 torture: {figures}")
    assert figures["iterations"] == iterations and figures["broken"] == 0
    assert figures["golden"] + figures["baseline"] == iterations
    assert figures["temps_after_cleanup"] == 0
    assert not [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.reliability("D12")
def test_stale_temp_files_of_dead_writers_are_removed(tmp_path):
    from pytest_npucheck.jsonio import remove_stale_temps, write_atomic

    target = tmp_path / "npucheck-baseline.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    debris = tmp_path / f".{target.name}.{dead_pid}.abc123.tmp"
    live = tmp_path / f".{target.name}.{os.getpid()}.def456.tmp"
    other = tmp_path / ".other.json.1.x.tmp"
    for p in (debris, live, other):
        p.write_text("partial")
    assert remove_stale_temps(target) == [debris]
    assert live.exists() and other.exists()
    debris.write_text("partial")
    write_atomic(target, "{}\n")  # the next write cleans up too
    assert not debris.exists() and target.read_text() == "{}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([target.name, live.name, other.name])


def test_torture_script_runs(tmp_path):
    """The script's own entry point (what the 100-iteration figure comes from) works."""
    out = tmp_path / "figures.json"
    res = subprocess.run([sys.executable, str(REPO / "scripts" / "torture.py"), "--iterations", "2",
                          "--dir", str(tmp_path / "d"), "--json", str(out)], capture_output=True, text=True,
                         cwd=REPO, timeout=600)
    assert res.returncode == 0, res.stderr
    import json

    figures = json.loads(Path(out).read_text())
    assert figures["iterations"] == 2 and figures["broken"] == 0 and figures["temps_after_cleanup"] == 0
