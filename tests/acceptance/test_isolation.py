"""Crash, hang and memory containment (isolate.py): one bad step fails one check, the run goes on."""

from __future__ import annotations

import faulthandler
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from pytest_npucheck import isolate
from pytest_npucheck.errors import NpuCheckError
from pytest_npucheck.isolate import IsolationError

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")


@pytest.fixture
def limits():
    """Set isolate's settings for one test and restore them afterwards."""
    before = isolate.settings()

    def set_(**kw):
        isolate.configure(**kw)

    yield set_
    isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is dead for our purpose; /proc says which it is
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _segfault():
    faulthandler.disable()  # keep the child's stderr quiet; the signal is what counts
    faulthandler._sigsegv()


def _sleep_with_grandchild(pidfile: str):
    p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    Path(pidfile).write_text(str(p.pid))
    time.sleep(300)


def _allocate():
    return bytearray(8 << 30)  # 8 GiB, past a 256 MiB budget


def _raise_chained():
    try:
        {}["missing"]
    except KeyError as exc:
        raise ValueError("bad model: no key") from exc


@pytest.mark.reliability("B8")
def test_segfault_is_reported_as_a_crash_of_the_step(limits):
    limits(enabled=True, timeout=60)
    with pytest.raises(IsolationError) as info:
        isolate.call("onnx.shape_inference", _segfault)
    assert str(info.value) == "crash (SIGSEGV) during onnx.shape_inference"
    assert info.value.kind == "crash" and info.value.signal_name == "SIGSEGV"
    assert isolate.call("onnx.shape_inference", lambda: 6 * 7) == 42  # this process is fine


@pytest.mark.reliability("C2")
def test_hang_is_killed_with_its_whole_process_group(limits, tmp_path):
    limits(enabled=True, timeout=2)
    pidfile = tmp_path / "grandchild.pid"
    with pytest.raises(IsolationError) as info:
        isolate.call("export", _sleep_with_grandchild, str(pidfile))
    assert str(info.value) == "export timed out after 2 s (child process killed)"
    assert info.value.kind == "timeout"
    grandchild = int(pidfile.read_text())
    for _ in range(100):  # the kill is sent; the grandchild is reaped by init asynchronously
        if not _alive(grandchild):
            break
        time.sleep(0.05)
    assert not _alive(grandchild), "the grandchild outlived the timeout: orphan process"


@pytest.mark.reliability("C3")
def test_memory_limit_fails_the_step_not_the_process(limits):
    limits(enabled=True, timeout=60, memory_mb=256)
    with pytest.raises(IsolationError) as info:
        isolate.call("export", _allocate)
    assert info.value.kind == "memory"
    assert str(info.value).startswith("export killed: memory limit exceeded (256 MiB")
    big = isolate.call("export", lambda: np.arange(1 << 22, dtype=np.float32))  # 16 MB result is fine
    assert big.shape == (1 << 22,) and big[-1] == (1 << 22) - 1


def test_sigkill_from_outside_is_reported_as_memory_kill(limits):
    limits(enabled=True, timeout=60)
    with pytest.raises(IsolationError) as info:
        isolate.call("onnxruntime", lambda: os.kill(os.getpid(), signal.SIGKILL))
    assert info.value.kind == "memory" and "killed (SIGKILL)" in str(info.value)


def test_exceptions_come_back_with_their_type_and_cause(limits):
    limits(enabled=True, timeout=60)
    with pytest.raises(ValueError, match="bad model: no key") as info:
        isolate.call("onnxruntime", _raise_chained)
    assert isinstance(info.value.__cause__, KeyError)


def test_unpicklable_result_is_a_clear_error(limits):
    limits(enabled=True, timeout=60)
    with pytest.raises(Exception, match="pickle|lambda|local object"):
        isolate.call("onnxruntime", lambda: (lambda: 1))


def test_disabled_runs_in_process(limits):
    limits(enabled=False)
    assert isolate.call("export", os.getpid) == os.getpid()
    limits(enabled=True, timeout=60)
    assert isolate.call("export", os.getpid) != os.getpid()


def test_timeout_values_are_parsed_strictly():
    assert isolate.parse_timeout("2.5", "npu_timeout") == 2.5
    assert isolate.parse_timeout("0", "npu_timeout") is None
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(Exception, match="npu_timeout"):
            isolate.parse_timeout(bad, "npu_timeout")


def test_static_check_contains_a_shape_inference_crash(limits, monkeypatch, tmp_path):
    """check.py computes graph facts in a child: a native crash there is one failed check."""
    from onnx import helper
    from onnx.onnx_cpp2py_export import shape_inference as c_pass  # the C++ pass, under onnx.shape_inference too

    from conftest import make_model
    from pytest_npucheck import check

    limits(enabled=True, timeout=60)
    path = tmp_path / "m.onnx"
    path.write_bytes(make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))], ["y"])
                     .SerializeToString())
    monkeypatch.setattr(c_pass, "infer_shapes", lambda *a, **k: _segfault())  # the stand-in
    with pytest.raises(IsolationError, match=r"^crash \(SIGSEGV\) during onnx.shape_inference$"):
        check.graph_facts(path)
    monkeypatch.undo()
    assert check.graph_facts(path).nodes[0].op_type == "Relu"


def _exporter_crash_model(kind: str):
    import torch

    class Bad(torch.nn.Module):
        def forward(self, x):
            if torch.jit.is_tracing():
                if kind == "segv":
                    _segfault()
                elif kind == "hang":
                    time.sleep(300)
                else:
                    bytearray(8 << 30)
            return x + 1

    return Bad()


@pytest.mark.parametrize("kind,message", [
    ("segv", "crash (SIGSEGV) during export"),
    ("hang", "export timed out after 3 s"),
    ("memory", "export killed: memory limit exceeded (256 MiB"),
])
def test_exporter_crash_hang_and_memory_fail_the_export(limits, tmp_path, kind, message):
    torch = pytest.importorskip("torch")
    from pytest_npucheck.export import ExportError, ExportOptions, export_model

    limits(enabled=True, timeout=3, memory_mb=256)
    with pytest.raises(ExportError) as info:
        export_model(_exporter_crash_model(kind), torch.randn(1, 4), ExportOptions(exporter="torchscript"),
                     cache_dir=tmp_path)
    assert message in str(info.value) and "Bad" in str(info.value)
    assert [p.name for p in tmp_path.iterdir()] == []  # no entry, no temp dir left behind


PYTESTER_TESTS = '''
import os, subprocess, sys, time, faulthandler
import pytest, torch

class Net(torch.nn.Module):
    def __init__(self, kind="ok"):
        super().__init__()
        self.kind = kind
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        if torch.jit.is_tracing() and self.kind == "segv":
            faulthandler.disable()
            faulthandler._sigsegv()
        if torch.jit.is_tracing() and self.kind == "hang":
            p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
            open("grandchild.pid", "w").write(str(p.pid))
            time.sleep(300)
        return torch.relu(self.lin(x))

mark = pytest.mark.npu_deployable(targets=["rknn@2.5.0/rk3588"], exporter="torchscript")

@mark
def test_crashes(npu_check):
    npu_check(Net("segv").eval(), torch.randn(1, 4))

@mark
def test_fine(npu_check):
    npu_check(Net().eval(), torch.randn(1, 4))

@mark
def test_hangs(npu_check):
    npu_check(Net("hang").eval(), torch.randn(1, 4))

def test_plain():
    assert True
'''


@pytest.mark.reliability("B8", "C2", "F9")
def test_pytest_run_goes_on_after_a_crash_and_a_hang(pytester):
    """The stand-in crash and hang fail their own tests only; exit code 1 (never 3); no orphans."""
    pytester.makepyfile(test_models=PYTESTER_TESTS)
    report = pytester.path / "r.json"
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--npu-timeout", "4", "--npu-no-numerics",
                                        f"--npu-report=json:{report}", "-p", "no:randomly")
    out = res.stdout.str()
    res.assert_outcomes(passed=2, failed=2)
    assert res.ret == 1
    assert "INTERNALERROR" not in out
    assert "crash (SIGSEGV) during export" in out
    assert "export timed out after 4 s" in out
    grandchild = int((pytester.path / "grandchild.pid").read_text())
    assert not _alive(grandchild)
    from pytest_npucheck.jsonio import loads_strict

    doc = loads_strict(report.read_text())
    errors = {t["nodeid"].split("::")[-1]: t.get("error") or "" for t in doc["tests"]}
    assert "crash (SIGSEGV) during export" in errors["test_crashes"]
    assert "timed out" in errors["test_hangs"]


def test_options_and_ini_keys_set_the_limits_and_are_restored(pytester):
    before = isolate.settings()
    check = """
        from pytest_npucheck import isolate

        def test_settings():
            s = isolate.settings()
            assert (s.enabled, s.timeout, s.memory_mb) == {expected}
    """
    pytester.makeini("[pytest]\nnpu_timeout = 7\nnpu_memory_limit = 300\nnpu_isolate = false\n")
    pytester.makepyfile(test_settings=check.format(expected=(False, 7.0, 300)))
    pytester.runpytest_inprocess("-p", "no:randomly").assert_outcomes(passed=1)
    assert isolate.settings() == before  # an in-process run leaves the outer settings alone
    pytester.makeini("[pytest]\nnpu_timeout = 7\nnpu_memory_limit = 300\n")
    pytester.makepyfile(test_settings=check.format(expected=(True, 2.5, 300)))
    pytester.runpytest_inprocess("-p", "no:randomly", "--npu-timeout=2.5").assert_outcomes(passed=1)
    pytester.makepyfile(test_settings=check.format(expected=(False, 2.5, 300)))
    pytester.runpytest_inprocess("-p", "no:randomly", "--npu-timeout=2.5", "--npu-no-isolate").assert_outcomes(
        passed=1)
    assert isolate.settings() == before


@pytest.mark.parametrize("args,fragment", [
    (["--npu-timeout=soon"], "npu_timeout: expected a number of seconds"),
    (["--npu-memory-limit=-5"], "npu_memory_limit: expected 0 or more MiB"),
])
def test_bad_limits_are_usage_errors(pytester, args, fragment):
    pytester.makepyfile("def test_a():\n    assert True\n")
    res = pytester.runpytest_inprocess(*args)
    assert res.ret == pytest.ExitCode.USAGE_ERROR and fragment in res.stderr.str()


def test_sys_exit_in_the_child_does_not_end_the_run(limits):
    limits(enabled=True, timeout=60)
    with pytest.raises(NpuCheckError, match=r"raised SystemExit\(3\)"):
        isolate.call("export", sys.exit, 3)


# -- round two (issue 27): a child never outlives its parent ---------------------------------------

def _start_parent(tmp_path: Path, body: str) -> tuple[subprocess.Popen, int]:
    """A parent process (its own session) whose isolated child writes its pid to a file and hangs;
    returns the parent and the child's pid."""
    pidfile = tmp_path / "child.pid"
    code = ("import os, sys, time\nfrom pathlib import Path\nfrom pytest_npucheck import isolate\n"
            f"PIDFILE = Path({str(pidfile)!r})\n" + textwrap.dedent(body))
    parent = subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    for _ in range(1200):  # the parent imports torch first: up to a minute on a loaded machine
        if pidfile.exists() and pidfile.read_text().strip():
            return parent, int(pidfile.read_text())
        if parent.poll() is not None:
            pytest.fail(f"the parent ended early: {parent.stderr.read().decode()[-2000:]}")
        time.sleep(0.05)
    parent.kill()
    pytest.fail("the isolated child never started")


def _kill(*pids: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _gone_within(pid: int, seconds: float) -> bool:
    for _ in range(int(seconds / 0.1)):
        if not _alive(pid):
            return True
        time.sleep(0.1)
    return not _alive(pid)


@pytest.mark.reliability("S5")
def test_a_hanging_export_child_dies_with_its_parent_killed_by_sigkill(tmp_path):
    """kill -9 of pytest left a hanging export child running under init with no timeout: it now gets
    a parent-death signal (and its watchdog sees the parent gone)."""
    parent, child = _start_parent(tmp_path, """
        import torch
        from pytest_npucheck.export import ExportOptions, export_model

        class Hang(torch.nn.Module):
            def forward(self, x):
                PIDFILE.write_text(str(os.getpid()))
                time.sleep(3600)
                return x

        isolate.configure(enabled=True, timeout=3600)
        export_model(Hang(), torch.randn(1, 2), ExportOptions(exporter="torchscript"), cache_dir=None)
    """)
    try:
        assert child != parent.pid and _alive(child)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30), "the export child outlived its parent"
    finally:
        _kill(child, parent.pid)


@pytest.mark.reliability("S5")
def test_a_child_ends_itself_after_its_own_timeout_when_the_parent_cannot(tmp_path):
    """A parent that is stopped (or frozen) cannot enforce the timeout: the child's own timer does, at
    the timeout plus a grace period. Here the parent is SIGSTOPped with a 3 s timeout."""
    assert isolate.own_timeout(1.0) > 1.0 and isolate.own_timeout(None) is None
    parent, child = _start_parent(tmp_path, """
        def hang():
            PIDFILE.write_text(str(os.getpid()))
            time.sleep(3600)

        isolate.configure(enabled=True, timeout=3)
        try:
            isolate.call("export", hang)
        except isolate.IsolationError:
            time.sleep(3600)
    """)
    try:
        os.kill(parent.pid, signal.SIGSTOP)
        assert _gone_within(child, 60), "the child outlived its own timeout"
    finally:
        _kill(child, parent.pid)
        parent.wait()


@pytest.mark.reliability("S5")
def test_the_watchdog_ends_the_child_without_the_parent_death_signal(tmp_path):
    """Where prctl does not exist (or has no effect), the watchdog thread sees the parent gone."""
    parent, child = _start_parent(tmp_path, """
        isolate._libc = False  # no parent-death signal: only the watchdog is left

        def hang():
            PIDFILE.write_text(str(os.getpid()))
            while True:
                time.sleep(0.01)

        isolate.configure(enabled=True, timeout=3600)
        isolate.call("export", hang)
    """)
    try:
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone_within(child, 30), "the watchdog did not end the orphaned child"
    finally:
        _kill(child)
