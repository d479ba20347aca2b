"""Run native code that may crash or hang in a child process, so that only one check fails.

onnx's checker and shape inference, ONNX Runtime's session creation and the torch exporter are C++
that has segfaulted, hung and exhausted memory on crafted or unlucky models. In-process, one such
model ends the whole pytest run (exit code 3, or a worker lost under xdist). :func:`call` runs a
function in a forked child instead:

* the child inherits everything the parent has imported and built (fork: no re-import, no
  pickling of the model object), makes itself the leader of a new process group and lowers its
  address-space limit (``RLIMIT_AS``) to what it has at fork time plus the memory budget;
* the result (or the exception) comes back through a pipe, length-prefixed;
* the parent waits at most ``timeout`` seconds, then kills the whole process group with SIGKILL;
  it kills the group before returning in every case, so no process outlives the call (a child
  that delivered its result is reaped at a later call rather than waited for);
* the child dies with its parent even when the parent cannot kill it (SIGKILL, SIGTERM to
  pytest): a parent-death signal (Linux), a watchdog thread that sees its parent gone, and its own
  timer at the timeout plus a grace period (``own_timeout``);
* a death by signal, a timeout or a memory-limit failure becomes an :class:`IsolationError` that
  says what happened during which step ("crash (SIGSEGV) during onnx.shape_inference ...").

:func:`start` is :func:`call` in two halves: it starts the child and returns a :class:`Pending`
whose ``collect()`` receives the result later (the timeout counts from the start), so that this
process can work while the child runs (``check._isolated_facts`` reads the nodes meanwhile);
``cancel()`` kills a child whose caller failed first.

The result travels as a pickle, and only ever from this module's own forked child, which ran the
package's own code: no byte of an input file is unpickled.

Isolation is on by default where ``os.fork`` exists (POSIX). ``configure(enabled=False)`` (pytest
``--npu-no-isolate`` / ini ``npu_isolate = false``, or ``NPUCHECK_ISOLATE=0``) runs the functions
in-process, e.g. for a debugger or a profiler.
"""

from __future__ import annotations

import gc
import os
import select
import signal
import struct
import sys
import time
from dataclasses import dataclass, replace
from typing import Any, Callable, Optional, TypeVar

from .errors import NpuCheckError

T = TypeVar("T")

#: Default wall-clock limit of one isolated step, in seconds.
DEFAULT_TIMEOUT = 600.0
_HEADER = struct.Struct("!Q")
_EXIT_UNSENT = 70  # the child could not send its result (e.g. it was not picklable)
_EXIT_ORPHANED = 71  # the parent died: the child ended itself


class IsolationError(NpuCheckError):
    """An isolated step crashed, timed out or ran out of memory.

    ``kind`` is ``"crash"``, ``"timeout"`` or ``"memory"``; ``step`` names the step."""

    def __init__(self, message: str, *, kind: str, step: str, signal_name: Optional[str] = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.step = step
        self.signal_name = signal_name

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_error, (str(self), self.kind, self.step, self.signal_name))


def _rebuild_error(message: str, kind: str, step: str, signal_name: Optional[str]) -> IsolationError:
    return IsolationError(message, kind=kind, step=step, signal_name=signal_name)


@dataclass(frozen=True)
class Settings:
    """How isolated steps run: ``enabled`` (fork a child at all), ``timeout`` in seconds (None: no
    limit), ``memory_mb`` the address space a child may add to what it inherits (None: half the
    machine's physical memory, at least 1 GiB; 0: no limit)."""

    enabled: bool = True
    timeout: Optional[float] = DEFAULT_TIMEOUT
    memory_mb: Optional[int] = None


def env_enabled() -> bool:
    """False when the environment turns isolation off (``NPUCHECK_ISOLATE=0``)."""
    return os.environ.get("NPUCHECK_ISOLATE", "1").strip().lower() not in ("0", "false", "no", "off")


_settings = Settings(enabled=env_enabled() and hasattr(os, "fork"))


def settings() -> Settings:
    return _settings


def configure(**changes: Any) -> Settings:
    """Change the process-wide settings (``enabled``, ``timeout``, ``memory_mb``); returns the old ones."""
    global _settings
    old = _settings
    if "timeout" in changes and changes["timeout"] is not None and changes["timeout"] <= 0:
        changes["timeout"] = None
    new = replace(_settings, **changes)
    if new.enabled and not hasattr(os, "fork"):
        new = replace(new, enabled=False)
    _settings = new
    return old


def parse_timeout(value: Any, where: str) -> Optional[float]:
    """A timeout option value: seconds > 0, or 0 / "none" for no limit."""
    text = str(value).strip().lower()
    if text in ("", "none", "0", "off"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        raise NpuCheckError(f"{where}: expected a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise NpuCheckError(f"{where}: expected a positive number of seconds, got {value!r}")
    return seconds


def _physical_mb() -> Optional[int]:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // (1 << 20)
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return None


def _vm_size() -> Optional[int]:
    """This process's current address-space size in bytes (Linux), else None."""
    try:
        with open("/proc/self/statm", "rb") as fh:
            return int(fh.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def budget_mb(s: Settings) -> Optional[int]:
    """The memory budget in MiB that applies to a child, or None for no limit."""
    if s.memory_mb is not None:
        return s.memory_mb or None
    phys = _physical_mb()
    return max(1024, phys // 2) if phys else None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def call(step: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)``, in a child process when isolation is enabled.

    ``step`` names what runs (``"onnx.shape_inference"``, ``"export"``, ``"onnxruntime"``) in the
    message of the :class:`IsolationError` raised when the child crashes, times out or hits the
    memory limit. Exceptions raised by ``fn`` are re-raised as they are.
    """
    return _start(step, fn, args, kwargs, False).collect()  # type: ignore[no-any-return]


def call_mapped(step: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """:func:`call`, with large ``bytes`` in the result handed back without a copy: each ``bytes`` of
    at least ``_MAPPED_MIN`` bytes that the result is, or holds as an item of a tuple, comes back as
    a read-only ``mmap`` of a memory file the child wrote (Linux), where ``call`` would pickle it,
    send it through the pipe and unpickle it. The caller must take either type: in-process, on
    other systems or for smaller values, the result is ``fn``'s own.

    The isolated shape inference of the 26k-node encoder returns 5.2 MB. Through the pipe, this
    process read it into a buffer and unpickled it into a bytes object, two copies of fresh memory
    (~2,700 page faults, ~7 ms of CPU); mapped, its pages are shared with the memory file and
    mapped a run at a time as they are read (~80 faults, no copy)."""
    return _start(step, fn, args, kwargs, True).collect()


_MAPPED_MIN = 1 << 16  # smaller values cost less to copy than a mapping (and its page of slack)


class _Mapped:
    """Where the child wrote a value of the result in the memory file: offset and size."""

    __slots__ = ("offset", "size")

    def __init__(self, offset: int, size: int) -> None:
        self.offset, self.size = offset, size

    def __reduce__(self) -> tuple[Any, ...]:
        return (_Mapped, (self.offset, self.size))


_MAPPED_BYTES: list[Any] = []


def _mapped_bytes_class() -> Any:
    """:class:`MappedBytes`, made on first use (``mmap`` is imported only where results are mapped)."""
    if not _MAPPED_BYTES:
        import mmap

        class MappedBytes(mmap.mmap):  # type: ignore[misc]
            """A read-only mapping of a value the child wrote, where ``bytes`` was returned.

            ``x in m`` searches it as ``x in bytes`` does (an mmap's own ``in`` compares ``x`` with
            each byte, one at a time, so a bytes ``x`` is never found); the parser takes
            ``memoryview(m)``."""

            __slots__ = ()

            def __contains__(self, item: Any) -> bool:
                if isinstance(item, int):
                    item = bytes([item])
                return self.find(item) != -1

        _MAPPED_BYTES.append(MappedBytes)
    return _MAPPED_BYTES[0]


def _memory_file() -> Optional[int]:
    """A memory file (Linux ``memfd_create``) for the child's large values, or None where there is none."""
    try:
        return os.memfd_create("npucheck-result", os.MFD_CLOEXEC)
    except (AttributeError, OSError):
        return None


def _write_mapped(fd: int, value: Any) -> Any:  # pragma: no cover - runs in the forked child
    """``value`` with each large bytes (itself, or an item of a tuple) written to ``fd`` at a page
    boundary (what ``mmap`` needs) and replaced by its ``_Mapped`` place."""
    end = [0]

    def put(item: Any) -> Any:
        if type(item) is not bytes or len(item) < _MAPPED_MIN:
            return item
        offset = -(-end[0] // mmap.PAGESIZE) * mmap.PAGESIZE
        view = memoryview(item)
        at = offset
        while view:
            n = os.pwrite(fd, view, at)
            view, at = view[n:], at + n
        end[0] = at
        return _Mapped(offset, len(item))

    import mmap

    if type(value) is tuple:
        return tuple(map(put, value))
    return put(value)


def _read_mapped(fd: int, value: Any) -> Any:
    """``_write_mapped`` undone in this process: each ``_Mapped`` place becomes a read-only
    :class:`MappedBytes`."""

    import mmap

    def get(item: Any) -> Any:
        if type(item) is not _Mapped:
            return item
        try:
            return _mapped_bytes_class()(fd, item.size, access=mmap.ACCESS_READ, offset=item.offset)
        except (OSError, ValueError):  # no room to map it: the bytes, read as the pipe would have sent them
            parts, at, end = [], item.offset, item.offset + item.size
            while at < end:
                part = os.pread(fd, end - at, at)
                if not part:
                    raise
                parts.append(part)
                at += len(part)
            return b"".join(parts)

    if type(value) is tuple:
        return tuple(map(get, value))
    return get(value)


def start(step: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "Pending":
    """:func:`call` in two halves: the child is started now, and :meth:`Pending.collect` receives its
    result (or raises) later, so that this process can work while the child runs. The timeout counts
    from now. A caller that raises before it collects must :meth:`Pending.cancel` (kills the child).

    With isolation off, ``fn`` runs in this process when the result is collected."""
    return _start(step, fn, args, kwargs, False)


def start_mapped(step: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> "Pending":
    """:func:`start` with :func:`call_mapped`'s handling of large bytes in the result."""
    return _start(step, fn, args, kwargs, True)


def _start(step: str, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], mapped: bool) -> "Pending":
    s = _settings
    if not s.enabled:
        return Pending(step, fn, args, kwargs)
    return _start_child(s, step, fn, args, kwargs, mapped)


class Pending:
    """A step started by :func:`start`: ``collect()`` waits for its result, ``cancel()`` kills it.

    In-process (isolation off), it holds the function and its arguments, and ``collect`` calls it."""

    def __init__(self, step: str, fn: Optional[Callable[..., Any]] = None, args: tuple[Any, ...] = (),
                 kwargs: Optional[dict[str, Any]] = None) -> None:
        self.step = step
        self._call: Optional[tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]] = (
            None if fn is None else (fn, args, kwargs or {}))
        self._pid = 0  # the child, until it is collected or cancelled
        self._read_fd = -1
        self._memory_fd: Optional[int] = None
        self._deadline: Optional[float] = None
        self._timeout: Optional[float] = None
        self._limit_mb: Optional[int] = None

    def collect(self) -> Any:
        """The step's result, as :func:`call` returns it (or its exception, as ``call`` raises it)."""
        if self._call is not None:  # in-process
            fn, args, kwargs = self._call
            self._call = None
            return fn(*args, **kwargs)
        if not self._pid:
            raise RuntimeError(f"{self.step}: the result was collected already, or the step was cancelled")
        return self._receive()

    def cancel(self) -> None:
        """Kill the child (and its process group) if it has not been collected; no-op otherwise."""
        self._call = None
        pid, self._pid = self._pid, 0
        if not pid:
            return
        os.close(self._read_fd)
        _kill_group(pid)
        _ZOMBIES.append(pid)  # killed; reaped without waiting for the kernel to free its memory
        _reap_zombies()
        if self._memory_fd is not None:
            os.close(self._memory_fd)
            self._memory_fd = None

    def _receive(self) -> Any:
        import pickle  # imported by _start_child

        pid, self._pid = self._pid, 0
        read_fd, memory_fd, step, limit_mb = self._read_fd, self._memory_fd, self.step, self._limit_mb
        self._memory_fd = None
        payload, timed_out, status = None, False, 0
        try:
            payload, timed_out = _receive(read_fd, self._deadline)
        finally:
            os.close(read_fd)
            _kill_group(pid)
            if payload is None:
                status = _reap(pid)  # how it died is the message
            else:
                _ZOMBIES.append(pid)  # killed; reaped without waiting for the kernel to free its memory
            _reap_zombies()
            if memory_fd is not None and payload is None:
                os.close(memory_fd)
        if timed_out:
            raise IsolationError(f"{step} timed out after {self._timeout:g} s (child process killed)",
                                 kind="timeout", step=step)
        if payload is None:
            raise _death(step, status, limit_mb)
        try:
            ok, value, cause = pickle.loads(payload)
            if ok and memory_fd is not None:
                value = _read_mapped(memory_fd, value)
        finally:
            if memory_fd is not None:
                os.close(memory_fd)  # the mappings keep the file's pages
        if ok:
            return value
        if isinstance(value, MemoryError) or isinstance(cause, MemoryError):
            # the allocation that hit RLIMIT_AS failed (a wrapper may have caught and re-raised it)
            raise IsolationError(f"{step} killed: memory limit exceeded ({limit_mb} MiB above the parent's size)",
                                 kind="memory", step=step) from None
        if cause is not None:
            raise value from cause  # the chain the child saw (tracebacks stay in the child)
        raise value


def _start_child(s: Settings, step: str, fn: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any], mapped: bool = False) -> Pending:
    import pickle  # noqa: F401 - here, not at module level (the plugin imports this module in every pytest run); before the fork, for the child

    limit_mb = budget_mb(s)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()  # else the child's exit could write the parent's buffered text twice
        except (AttributeError, OSError, ValueError):
            pass
    _prepare_parent_death()
    parent = os.getpid()
    memory_fd = None
    if mapped:
        import mmap  # noqa: F401 - imported before the fork: the child writes at page boundaries, this process maps

        memory_fd = _memory_file()
    deadline = None if s.timeout is None else time.monotonic() + s.timeout
    read_fd, write_fd = os.pipe()
    _widen_pipe(write_fd)
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        if memory_fd is not None:
            os.close(memory_fd)
        raise IsolationError(f"{step}: cannot start a child process ({exc.strerror or exc}); run with "
                             "--npu-no-isolate to run it in this process", kind="crash", step=step) from None
    if pid == 0:  # the child: never returns
        os.close(read_fd)
        _child(write_fd, limit_mb, fn, args, kwargs, parent, s.timeout, memory_fd)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first wins the race
    except OSError:
        pass
    pending = Pending(step)
    pending._pid, pending._read_fd, pending._memory_fd = pid, read_fd, memory_fd
    pending._deadline, pending._timeout, pending._limit_mb = deadline, s.timeout, limit_mb
    return pending


_PIPE_SIZE = 1 << 20  # Linux's default /proc/sys/fs/pipe-max-size: what any process may ask for


def _widen_pipe(fd: int) -> None:
    """Ask for a 1 MiB pipe buffer (Linux; 64 KiB by default): a result of megabytes then crosses in
    a few writes and reads rather than one per 64 KiB, each waking the other process."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_SIZE)
    except (ImportError, AttributeError, OSError):
        pass


def _death(step: str, status: int, limit_mb: Optional[int]) -> IsolationError:
    if os.WIFSIGNALED(status):
        name = _signal_name(os.WTERMSIG(status))
        if os.WTERMSIG(status) == signal.SIGKILL:
            return IsolationError(f"{step} killed (SIGKILL): memory limit or out-of-memory killer "
                                  f"(budget {limit_mb} MiB)", kind="memory", step=step, signal_name=name)
        return IsolationError(f"crash ({name}) during {step}", kind="crash", step=step, signal_name=name)
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    if code == _EXIT_UNSENT:
        return IsolationError(f"{step}: the child process could not send its result back", kind="crash", step=step)
    return IsolationError(f"crash (exit code {code}) during {step}: the child process ended without a result",
                          kind="crash", step=step)


def _receive(fd: int, deadline: Optional[float]) -> tuple[Optional[bytearray], bool]:
    """(payload, timed_out): read one length-prefixed message; payload None on EOF before it ends.

    The payload is read into one buffer of its announced size: a result of megabytes (the inferred
    model of a 26k-node graph is 5.2 MB) is copied once from the pipe, not grown chunk by chunk and
    copied again (each copy of fresh memory costs its page faults)."""
    head = bytearray()
    payload: Optional[bytearray] = None
    view: Optional[memoryview] = None
    got = 0
    while True:
        if payload is None and len(head) >= _HEADER.size:
            size = _HEADER.unpack_from(head)[0]
            payload = bytearray(size)
            view = memoryview(payload)
            got = len(head) - _HEADER.size
            view[:got] = head[_HEADER.size:]
        if payload is not None and got >= len(payload):
            return payload, False
        wait = None if deadline is None else deadline - time.monotonic()
        late = wait is not None and wait <= 0
        try:
            # past the deadline, what the child has sent (or its end) is still read: a caller that
            # collects late (``Pending``) gets the result or the death that came in time
            ready, _, _ = select.select([fd], [], [], 0.0 if late else wait)
        except InterruptedError:  # pragma: no cover - PEP 475 retries select
            continue
        if not ready:
            if late:
                return None, True
            continue
        if view is None:
            chunk = os.read(fd, _HEADER.size - len(head))
            if not chunk:
                return None, False
            head += chunk
        else:
            n = os.readv(fd, [view[got:]])
            if not n:
                return None, False
            got += n


def _kill_group(pid: int) -> None:
    """SIGKILL the child's whole process group (the child and anything it started)."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


_ZOMBIES: list[int] = []


def _reap_zombies() -> None:
    """Reap the children killed after they sent their result, those that have gone by now."""
    for pid in list(_ZOMBIES):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _ZOMBIES.remove(pid)


def _reap(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:  # pragma: no cover
            continue
        except ChildProcessError:  # pragma: no cover - reaped elsewhere (a SIGCHLD handler)
            return 0


def _child(write_fd: int, limit_mb: Optional[int], fn: Callable[..., Any], args: tuple[Any, ...],
           kwargs: dict[str, Any], parent: int = 0, timeout: Optional[float] = None,
           memory_fd: Optional[int] = None) -> None:  # pragma: no cover - runs in the forked child
    import pickle  # imported by the parent before the fork (_start_child)

    code = 0
    try:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        _die_with_parent(parent, timeout)
        # a short-lived child needs no cyclic GC, and a collection would write to the header of
        # every object inherited from the parent: copy-on-write of the whole heap
        gc.disable()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if limit_mb:
            _limit_memory(limit_mb)
        _single_threaded()
        try:
            value = fn(*args, **kwargs)
            if memory_fd is not None:
                try:
                    value = _write_mapped(memory_fd, value)
                except OSError:  # no room for the memory file: the value goes through the pipe
                    pass
            result: tuple[bool, Any, Any] = (True, value, None)
        except (SystemExit, KeyboardInterrupt) as exc:  # must not end the parent's run
            result = (False, NpuCheckError(f"the isolated step raised {type(exc).__name__}({exc})"), None)
        except BaseException as exc:  # noqa: BLE001 - everything goes back to the parent
            result = (False, exc, _portable(exc.__cause__) if exc.__cause__ is not None else None)
        try:
            data = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # noqa: BLE001 - e.g. an exception holding an unpicklable object
            err = result[1] if not result[0] else exc
            data = pickle.dumps((False, _portable(err), None), protocol=pickle.HIGHEST_PROTOCOL)
        for part in (_HEADER.pack(len(data)), data):  # not joined: that would copy the result once more
            view = memoryview(part)
            while view:
                view = view[os.write(write_fd, view):]
    except BaseException:  # noqa: BLE001
        code = _EXIT_UNSENT
    finally:
        os._exit(code)


# -- a child never outlives its parent -------------------------------------------------------------
# The parent kills the child's process group when the step ends or times out. A parent killed itself
# (SIGKILL, or SIGTERM to pytest) could not: the child ran on under init with no limit. So the child
# also (1) asks Linux for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG; the thread that forked
# it waits for it, so that thread's end is the parent's), (2) runs a watchdog thread that ends the
# child's process group once getppid() is no longer the parent (any POSIX system; a step that holds
# the GIL in C code delays it, which (1) and (3) do not), (3) arms its own timer, SIGALRM with its
# default action, the parent's timeout plus a grace period (a stopped or frozen parent cannot kill it).
_PR_SET_PDEATHSIG = 1
_WATCH_INTERVAL = 0.5  # seconds between two looks at getppid() in the watchdog
_libc: Any = None


def own_timeout(timeout: Optional[float]) -> Optional[float]:
    """When a child ends itself: the parent's timeout plus a grace period (None: no timer)."""
    return None if timeout is None else timeout + 2.0 + 0.05 * timeout


def _prepare_parent_death() -> None:
    """Load libc for prctl in the parent, once (the child must not pay the import)."""
    global _libc
    if _libc is None and sys.platform.startswith("linux"):
        try:
            import ctypes

            _libc = ctypes.CDLL(None, use_errno=True)
        except (OSError, ImportError, AttributeError):
            _libc = False


def _die_with_parent(parent: int, timeout: Optional[float]) -> None:  # pragma: no cover - in the child
    if _libc:
        try:
            _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (AttributeError, OSError):
            pass
    if parent and os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(_EXIT_ORPHANED)
    limit = own_timeout(timeout)
    if limit is not None and hasattr(signal, "setitimer"):
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # a handler inherited from the parent must not catch it
            signal.setitimer(signal.ITIMER_REAL, limit)
        except (ValueError, OSError):
            pass
    if parent:
        import threading

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(_WATCH_INTERVAL)
            try:
                os.killpg(os.getpid(), signal.SIGKILL)  # the child is its group's leader: it and what it started
            finally:
                os._exit(_EXIT_ORPHANED)

        threading.Thread(target=watch, name="npucheck-parent-watchdog", daemon=True).start()


def _single_threaded() -> None:  # pragma: no cover - runs in the forked child
    """Keep the child off the thread pools it inherited in a broken state.

    Only the forking thread exists in the child; an OpenMP pool the parent already used would wait
    forever for its missing threads (torch intra-op work hangs in the first Conv). One thread is
    what the plugin uses for ONNX Runtime anyway."""
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            torch.set_num_threads(1)
        except Exception:  # noqa: BLE001 - best effort
            pass


def _portable(exc: BaseException) -> BaseException:  # pragma: no cover - runs in the forked child
    """``exc`` if it survives pickling, else an NpuCheckError with its type and message."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc, protocol=pickle.HIGHEST_PROTOCOL))
        return exc
    except Exception:  # noqa: BLE001
        import traceback  # here: only an exception that cannot be pickled needs it (~1.4 ms to import)

        return NpuCheckError("".join(traceback.format_exception_only(type(exc), exc)).strip())


def _limit_memory(limit_mb: int) -> None:  # pragma: no cover - runs in the forked child
    import resource

    size = _vm_size()
    if size is None:
        return
    cap = size + limit_mb * (1 << 20)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
