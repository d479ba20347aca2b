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


_ENDING = """
import atexit, os, sys, threading
from pytest_npucheck.cli import main

class Heap:
    def __del__(self, write=os.write):  # sys.stdout is gone by then: the file descriptor
        write(1, b"torn down\\n")

heap = Heap()  # freed by the interpreter's teardown, never by the command
atexit.register(print, "exit function ran", flush=True)
if sys.argv[1] == "thread":
    threading.Thread(target=threading.main_thread().join).start()  # ends when the main thread does
sys.argv[1:2] = []
sys.exit(main())
"""


def test_a_command_ends_without_tearing_its_heap_down(tmp_path):
    """Run as the program (``main()`` without arguments), a command ends once its output is flushed
    and the exit functions ran (``cli._end_process``): the report, then the exit function's line,
    the command's exit status, and no teardown (the object's ``__del__`` never runs). With another
    thread still running the process ends the ordinary way, the teardown included. Called with
    arguments (``main([...])``, as the unit tests do) it returns."""
    import onnx
    from onnx import helper

    from conftest import const, make_model

    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/down1/Pad", mode="reflect")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    path = tmp_path / "reflect.onnx"
    onnx.save(m, path)
    args = ["--tables", str(TOY_TABLES), "check", str(path), "--target", "toy@1.0/soc-a", "--format", "json"]
    fast = subprocess.run([sys.executable, "-c", _ENDING, "plain", *args], capture_output=True, text=True)
    assert fast.returncode == 1, fast.stderr  # a fallback: the command's own status
    report, _, rest = fast.stdout.rpartition("}\n")
    assert json.loads(report + "}")["exit_status"] == 1
    assert rest == "exit function ran\n"
    ordinary = subprocess.run([sys.executable, "-c", _ENDING, "thread", *args], capture_output=True, text=True)
    assert ordinary.returncode == 1, ordinary.stderr
    assert ordinary.stdout.endswith("}\nexit function ran\ntorn down\n")
    returns = subprocess.run([sys.executable, "-c", "import sys\nfrom pytest_npucheck.cli import main\n"
                              f"print('status', main({args!r}))"], capture_output=True, text=True)
    assert returns.returncode == 0 and returns.stdout.endswith("\nstatus 1\n")


_IMPORTS = """
import json, sys
from pytest_npucheck.cli import main
status = main(sys.argv[1:])
unused = ("pytest_npucheck.fixes", "traceback", "pytest_npucheck.toolchains.rknn.toolchain",
          "pytest_npucheck.toolchains.qnn.toolchain")
print(json.dumps({"status": status, "loaded": [m for m in unused if m in sys.modules]}))
"""


def test_a_passing_check_imports_no_module_it_does_not_use(tmp_path):
    """A check whose every target passes imports neither the fix suggestions (only a fallback gets
    them), nor the built-in toolchains' modules (the catalog asks only the plug-ins for table
    directories), nor ``traceback`` (the isolated child formats only an exception it cannot pickle)."""
    import onnx
    from onnx import helper

    from conftest import make_model

    model = tmp_path / "relu.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"]), model)
    r = subprocess.run([sys.executable, "-c", _IMPORTS, "--tables", str(TOY_TABLES), "check", str(model),
                        "--target", "toy", "--format", "json"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last == {"status": 0, "loaded": []}
