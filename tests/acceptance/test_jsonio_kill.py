"""jsonio.write_atomic against kill -9 of a real writer process (D12 of docs/reliability.md; the
other write_atomic guarantees are tested in tests/unit/test_reliability.py)."""

from __future__ import annotations

import json

import pytest



@pytest.mark.reliability("D12")
def test_atomic_write_survives_kill_9(tmp_path):
    """kill -9 during repeated rewrites leaves the old or the new file, never a broken one."""
    import signal
    import subprocess
    import sys
    import time

    target = tmp_path / "baseline.json"
    from pytest_npucheck.jsonio import dumps, write_atomic

    write_atomic(target, dumps({"v": 0, "pad": "x" * 200_000}))
    code = ("import sys\nfrom pathlib import Path\nfrom pytest_npucheck.jsonio import dumps, write_atomic\n"
            "i = 0\nwhile True:\n    i += 1\n    write_atomic(Path(sys.argv[1]), dumps({'v': i, 'pad': 'x' * 200000}))\n")
    for k in range(20):
        p = subprocess.Popen([sys.executable, "-c", code, str(target)])
        time.sleep(0.05 + 0.01 * (k % 5))
        p.send_signal(signal.SIGKILL)
        p.wait()
        doc = json.loads(target.read_text())  # never partial
        assert set(doc) == {"v", "pad"} and len(doc["pad"]) == 200_000
    leftovers = [p for p in tmp_path.iterdir() if p.name != "baseline.json"]
    assert all(p.name.endswith(".tmp") for p in leftovers)  # stray temp files only, never the target
