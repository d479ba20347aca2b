"""`npucheck` as installed: the console script runs (a separate process, so not a unit test; the
command line itself is tested in tests/unit/test_cli.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import TOY_TABLES


def test_console_script_is_installed():
    import shutil
    from pathlib import Path

    exe = shutil.which("npucheck") or str(Path(sys.executable).with_name("npucheck"))
    r = subprocess.run([exe, "--tables", str(TOY_TABLES), "targets"], capture_output=True, text=True)
    assert r.returncode == 0 and "toy@1.1/soc-b" in r.stdout


def test_console_script_table_commands():
    """`tables diff` and `probe` through the installed script: the ops whose status differs
    between the toy tables' two versions are the diff's status changes, and a probe run for a
    toolchain without probes is a usage error that prints nothing on stdout."""
    import shutil
    from pathlib import Path

    exe = shutil.which("npucheck") or str(Path(sys.executable).with_name("npucheck"))
    r = subprocess.run([exe, "--tables", str(TOY_TABLES), "tables", "diff", "toy@1.0", "toy@1.1", "--format", "json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    old = json.loads((TOY_TABLES / "toy/1.0/soc-a.json").read_text())
    new = json.loads((TOY_TABLES / "toy/1.1/soc-a.json").read_text())
    changed = {k for k in old["ops"] if k in new["ops"] and old["ops"][k]["status"] != new["ops"][k]["status"]}
    assert changed  # the toy tables differ (Erf: cpu in 1.0, npu in 1.1)
    assert {c["subject"] for c in doc["changes"] if c["kind"] == "status"} == changed
    r = subprocess.run([exe, "probe", "toy", "--version", "1.0"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == "" and "unknown toolchain 'toy' for probing" in r.stderr
