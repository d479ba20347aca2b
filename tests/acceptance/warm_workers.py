"""Warm xdist workers for the ``[n2]`` runs of tests/acceptance: forked, not started.

A ``[n2]`` pytester run starts two xdist workers. A fresh worker spends about 3 CPU-s before its
first test, almost all of it importing torch (the suites' test modules import it), numpy, ONNX and
ONNX Runtime; a ``[n2]`` test that makes five runs paid that ten times. Here one server process per
outer test process imports those once and forks a worker for each start: the worker is still a
separate process started by xdist's controller through execnet (``popen``), runs the same pytest,
xdist and plugin code, and takes the controller's arguments, environment, working directory and
``sys.path`` (xdist sends ``sys.path`` to a ``popen`` worker); what it skips is the interpreter start
and those imports. Nothing of the package under test (``pytest_npucheck``) or of xdist is imported
before the fork, and neither is ``torch.onnx`` (the exporters): a worker imports them as a cold one does.

How: xdist starts a ``popen`` worker as ``<python> -u -c <execnet bootstrap>``; for the ``[n2]``
runs ``child_plugins/xdist_warm_workers.py`` gives it this file's *client* as the python
(``--tx popen//python=...``). The client sends its argv, working directory, environment and its
standard streams (file descriptors 0, 1, 2) over a Unix socket; the server forks a supervisor that
forks the worker, which takes those streams and runs the ``-c`` code as ``python -u -c`` would. The
supervisor sends the worker's pid, then its exit status, which the client exits with (a worker killed
by a signal kills the client with the same signal), so xdist sees its worker end as it would.

CPU time: a forked worker is not a child of the test process, so the CPU the test layer reports
(``tests/conftest.py``, the children's times of the test process) would leave it out. The supervisor
appends each worker's CPU seconds (its own and its waited children's, from ``wait4``) to
``<server dir>/cpu``; the acceptance conftest adds what was appended during a test to its report.

``NPUCHECK_TEST_WARM_WORKERS=0`` turns this off: every ``[n2]`` run then starts cold workers.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

#: what the workers of the acceptance suites import before their first test (their test modules
#: import torch; numerics and checks import numpy, onnx and onnxruntime), and execnet. Never a module of
#: a pytest plugin's distribution (pytest_npucheck, xdist): pytest rewrites their asserts at import and
#: warns "Module already imported so cannot be rewritten", which the suites' warning counts would see.
WARM_IMPORTS = ("numpy", "torch", "onnx", "onnxruntime", "pytest", "execnet")
#: the client: run by ``python -SE`` (no site, no PYTHON* variables: it starts in milliseconds)
CLIENT = '''\
import json, os, signal, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
s.connect({sock!r})
socket.send_fds(s, [json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ)}}).encode()],
                [0, 1, 2])
os.close(0); os.close(1); os.close(2)  # the worker holds them: their end is its end
pid = [0]
def forward(signum, frame):
    if pid[0]:
        os.kill(pid[0], signum)
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, forward)
code = 1
while True:
    msg = s.recv(16)
    if not msg:
        break
    kind, value = struct.unpack("!ci", msg)
    if kind == b"P":
        pid[0] = value
    else:
        code = value
        break
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
os._exit(code)
'''


def client_command(sock: str, directory: str) -> str:
    """Write the client beside the socket; return the ``python=`` value of an execnet ``popen`` spec."""
    path = os.path.join(directory, "client.py")
    with open(path, "w") as fh:
        fh.write(CLIENT.format(sock=sock))
    return f"{sys.executable} -SE {path}"


def cpu_file(sock: str) -> str:
    """Where the supervisors append their workers' CPU seconds, one line per worker."""
    return os.path.join(os.path.dirname(sock), "cpu")


def workers_cpu_seconds(path: str) -> float:
    """The CPU seconds of every worker forked so far (0 before the first)."""
    try:
        with open(path) as fh:
            return sum(float(line) for line in fh if line.strip())
    except FileNotFoundError:
        return 0.0


def serve(sock: str) -> None:
    import importlib

    for name in WARM_IMPORTS:
        importlib.import_module(name)
    parent = os.getppid()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # the supervisors are reaped by the kernel
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    srv.bind(sock)
    srv.listen(64)
    srv.settimeout(2.0)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    while os.getppid() == parent:  # the test process that started it is gone: so is the server
        try:
            conn, _ = srv.accept()
        except TimeoutError:
            continue
        conn.settimeout(None)
        if os.fork() == 0:
            srv.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            _supervise(conn, cpu_file(sock))
        conn.close()


def _supervise(conn: socket.socket, cpu_log: str) -> None:
    code = 1
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(msg)
        pid = os.fork()
        if pid == 0:
            _run_worker(conn, fds, request)
        for fd in fds:
            os.close(fd)
        conn.send(struct.pack("!ci", b"P", pid))
        _, status, usage = os.wait4(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        fd = os.open(cpu_log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, b"%.3f\n" % (usage.ru_utime + usage.ru_stime))  # one short append: atomic
        finally:
            os.close(fd)
    finally:
        try:
            conn.send(struct.pack("!ci", b"X", code))
        finally:
            os._exit(0)


def _run_worker(conn: socket.socket, fds: list[int], request: dict) -> None:
    """Become ``python -u -c <code>`` in the client's place (never returns)."""
    import atexit
    import io
    import threading
    import traceback
    import types

    code = 1
    try:
        conn.close()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for sig in (signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        encoding = sys.stdout.encoding
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BufferedReader(io.FileIO(0, "r", closefd=False)),
                                                     encoding=encoding)
        sys.stdout = sys.__stdout__ = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding=encoding,
                                                       write_through=True, line_buffering=True)
        sys.stderr = sys.__stderr__ = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding=encoding,
                                                       errors="backslashreplace", write_through=True,
                                                       line_buffering=True)
        argv = request["argv"]
        source = argv[argv.index("-c") + 1]
        sys.argv = ["-c", *argv[argv.index("-c") + 2:]]
        sys.path[0:0] = [""]
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        atexit._clear()  # the server's exit functions are not this process's
        try:
            exec(compile(source, "<string>", "exec"), main.__dict__)
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:
                print(stop.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        threading._shutdown()  # type: ignore[attr-defined]  # what the interpreter's exit does
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2])
    else:
        sys.exit("usage: warm_workers.py serve SOCKET")
