"""What one golden may hold (golden.py, plugin.py): a real zip bomb read in a child process whose
address space is capped, and the option that raises the limit."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from pytest_npucheck.golden import GoldenStore

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

def _zip_bomb(path: Path, declared: int) -> None:
    """A golden whose output array is DEFLATE-compressed zeros declared at ``declared`` bytes: a file of
    a few MiB that numpy would decompress whole into memory."""
    import json

    meta = io.BytesIO()
    np.save(meta, np.array(json.dumps({"format": 1, "test_id": "t::bomb"})))
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False,
                                                 "shape": (declared // 4,)})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("__meta__.npy", meta.getvalue())
        with zf.open("output/y.npy", "w", force_zip64=True) as fh:
            fh.write(head.getvalue())
            chunk = bytes(1 << 24)
            for _ in range(declared // len(chunk)):
                fh.write(chunk)


@pytest.mark.reliability("S2")
def test_a_golden_zip_bomb_is_refused_from_its_headers_before_anything_is_read(tmp_path):
    """A 2 GiB array compressed to ~2 MiB made a normal run peak at 4.6 GB RSS. The declared size is
    checked against the limit before numpy reads anything: in a child capped at 1 GiB of address
    space above its start, reading it fails with the named error, not a MemoryError."""
    import subprocess

    root = tmp_path / "g"
    root.mkdir()
    store = GoldenStore(root)
    bomb = store.path_for("t::bomb")
    _zip_bomb(bomb, 2 << 30)
    assert bomb.stat().st_size < 16 << 20
    # peak RSS of the child's own memory (VmHWM, reset by exec): ru_maxrss is inherited across fork+exec,
    # so under xdist the child started at its torch-laden worker's peak (825 MiB read in a -n 2 run)
    code = ("import resource, sys\n"
            "from pytest_npucheck.golden import GoldenError, GoldenStore\n"
            "import numpy\n"
            "with open('/proc/self/statm') as fh: size = int(fh.read().split()[0]) * resource.getpagesize()\n"
            "resource.setrlimit(resource.RLIMIT_AS, (size + (1 << 30), resource.RLIM_INFINITY))\n"
            "try:\n"
            "    GoldenStore(sys.argv[1]).load('t::bomb')\n"
            "except GoldenError as exc:\n"
            "    print('GoldenError:', exc)\n"
            "print('maxrss_kib', int([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM:')][0]))\n")
    res = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "golden too large" in res.stdout and str(bomb) in res.stdout and "--npu-golden-max-mb" in res.stdout
    rss_mib = int(res.stdout.split("maxrss_kib")[1]) / 1024
    assert rss_mib < 512, f"peak RSS {rss_mib:.0f} MiB: the array was allocated"


@pytest.mark.reliability("S2")
@pytest.mark.parametrize("value", ["0", "-3", "lots"])
def test_a_bad_golden_size_limit_is_a_usage_error(pytester, value):
    pytester.makepyfile("def test_a():\n    assert True\n")
    res = pytester.runpytest_inprocess(f"--npu-golden-max-mb={value}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "--npu-golden-max-mb" in res.stderr.str()
    pytester.makeini(f"[pytest]\nnpu_golden_max_mb = {value}\n")
    res = pytester.runpytest_inprocess()
    assert res.ret == pytest.ExitCode.USAGE_ERROR and "ini key npu_golden_max_mb" in res.stderr.str()
