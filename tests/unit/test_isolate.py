"""isolate.py's pipe between the parent and its child: one message read exactly, in one buffer."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from pytest_npucheck import isolate


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def _message(payload: bytes) -> bytes:
    return isolate._HEADER.pack(len(payload)) + payload


def _write_slowly(fd: int, data: bytes, pieces: int) -> threading.Thread:
    """Write ``data`` in ``pieces`` writes with pauses, from a thread (the reader sees partial messages)."""
    def run() -> None:
        step = max(1, len(data) // pieces)
        for i in range(0, len(data), step):
            view = memoryview(data)[i:i + step]
            while view:
                view = view[os.write(fd, view):]
            time.sleep(0.001)

    t = threading.Thread(target=run)
    t.start()
    return t


def test_a_message_read_in_pieces_comes_back_whole_and_nothing_after_it_is_read(pipe):
    """The reader takes exactly one message: the header, then the announced size into one buffer,
    never the bytes of what follows (a reader that reads ahead would lose them)."""
    read_fd, write_fd = pipe
    big = os.urandom(3 << 20)
    writer = _write_slowly(write_fd, _message(big) + _message(b"second"), pieces=50)
    try:
        first, timed_out = isolate._receive(read_fd, time.monotonic() + 60)
        assert not timed_out and first == big and len(first) == len(big)
        second, timed_out = isolate._receive(read_fd, time.monotonic() + 60)
        assert not timed_out and second == b"second"
    finally:
        writer.join()


def test_an_empty_message_is_a_message(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, _message(b""))
    assert isolate._receive(read_fd, None) == (b"", False)


@pytest.mark.parametrize("cut", [3, isolate._HEADER.size + 10], ids=["in-header", "in-payload"])
def test_the_end_of_the_pipe_before_the_message_ends_is_no_payload(pipe, cut):
    read_fd, write_fd = pipe
    os.write(write_fd, _message(b"x" * 100)[:cut])
    os.close(write_fd)
    assert isolate._receive(read_fd, None) == (None, False)


def test_no_message_before_the_deadline_is_a_timeout(pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, _message(b"x" * 100)[:20])
    assert isolate._receive(read_fd, time.monotonic() + 0.05) == (None, True)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="F_SETPIPE_SZ is Linux's")
def test_the_pipe_is_widened_to_one_mebibyte(pipe):
    """A result of megabytes crosses in a few writes, not one per 64 KiB."""
    import fcntl

    read_fd, write_fd = pipe
    isolate._widen_pipe(write_fd)
    assert fcntl.fcntl(read_fd, fcntl.F_GETPIPE_SZ) == isolate._PIPE_SIZE == 1 << 20


@pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")
def test_a_result_of_megabytes_comes_back_from_the_child_intact():
    before = isolate.configure(enabled=True, timeout=60)
    try:
        data = os.urandom(5 << 20)
        assert isolate.call("export", lambda: (b"digest", data[::-1])) == (b"digest", data[::-1])
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")
def test_call_mapped_hands_large_bytes_back_mapped_and_the_rest_as_they_are():
    """``call_mapped``: a bytes of at least ``_MAPPED_MIN`` (the value, or an item of a tuple) comes
    back as a read-only mapping holding the same bytes, which answers ``in`` as bytes do; smaller
    bytes and other values come back as ``call`` returns them; in-process, the value itself."""
    big = os.urandom(isolate._MAPPED_MIN) + b"pkg.torch.onnx.x" + os.urandom(5000)
    other = os.urandom(3 * isolate._MAPPED_MIN + 1)
    before = isolate.configure(enabled=True, timeout=60)
    try:
        mapped, small, number, second = isolate.call_mapped("onnx.shape_inference", lambda: (big, b"tiny", 7, other))
        alone = isolate.call_mapped("onnx.shape_inference", lambda: big)
        assert isolate.call_mapped("onnx.shape_inference", lambda: [big]) == [big]  # only a tuple's items
        assert isolate.call_mapped("onnx.shape_inference", lambda: None) is None
        isolate.configure(enabled=False)
        assert isolate.call_mapped("onnx.shape_inference", lambda: (big, 1)) == (big, 1)
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)
    assert (small, number) == (b"tiny", 7)
    for value, expected in ((mapped, big), (second, other), (alone, big)):
        if sys.platform.startswith("linux"):
            assert type(value) is not bytes
        assert len(value) == len(expected) and value[:] == expected and memoryview(value).tobytes() == expected
    assert b"pkg.torch.onnx." in mapped and b"not in there" not in mapped
    assert mapped[5] in mapped and (b"pkg.torch.onnx." in big) == (b"pkg.torch.onnx." in mapped)
    with pytest.raises(TypeError):
        mapped[0] = 1  # type: ignore[index]  # read-only


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files are Linux's")
def test_mapped_values_are_written_at_page_boundaries_and_read_back():
    """``_write_mapped`` and ``_read_mapped`` in one process: each large bytes at a page boundary."""
    import mmap

    fd = isolate._memory_file()
    assert fd is not None
    try:
        values = (os.urandom(isolate._MAPPED_MIN + 3), "text", os.urandom(isolate._MAPPED_MIN), b"small")
        places = isolate._write_mapped(fd, values)
        assert [type(p).__name__ for p in places] == ["_Mapped", "str", "_Mapped", "bytes"]
        assert places[0].offset == 0 and places[2].offset % mmap.PAGESIZE == 0 and places[2].offset > 0
        back = isolate._read_mapped(fd, places)
        assert [bytes(v[:]) if not isinstance(v, str) else v for v in back] == list(values)
        assert isolate._read_mapped(fd, isolate._write_mapped(fd, values[2]))[:] == values[2]
    finally:
        os.close(fd)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memory files are Linux's")
def test_a_value_that_cannot_be_mapped_is_read_as_bytes(monkeypatch):
    """Where the mapping fails (no address space left), the value comes back as the bytes it was."""
    fd = isolate._memory_file()
    assert fd is not None
    try:
        value = os.urandom(isolate._MAPPED_MIN * 2 + 5)
        places = isolate._write_mapped(fd, (b"x", value))

        def refuse(*args, **kwargs):
            raise OSError(12, "Cannot allocate memory")

        monkeypatch.setattr(isolate, "_mapped_bytes_class", lambda: refuse)
        assert isolate._read_mapped(fd, places) == (b"x", value)
    finally:
        os.close(fd)


def _restore(before: isolate.Settings) -> None:
    isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


def _gone(pid: int) -> bool:
    """Whether ``pid`` was reaped (waited for until the kernel has it, at most ~30 s)."""
    for _ in range(3000):
        isolate._reap_zombies()
        if pid not in isolate._ZOMBIES:
            break
        time.sleep(0.01)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")
def test_start_then_collect_is_call_in_two_halves():
    """``start`` forks at once and ``collect`` receives what ``call`` would return (mapped with
    ``start_mapped``), or raises what it would raise; a result is collected once."""
    big = os.urandom(isolate._MAPPED_MIN * 2)
    before = isolate.configure(enabled=True, timeout=60)
    try:
        plain = isolate.start("export", lambda: (b"digest", 7))
        mapped = isolate.start_mapped("onnx.shape_inference", lambda: (big, True))
        failing = isolate.start("export", lambda: int("x"))
        work = sum(range(10_000))  # this process works while the children run
        assert plain.collect() == (b"digest", 7)
        value, flag = mapped.collect()
        assert value[:] == big and flag is True
        with pytest.raises(ValueError, match="invalid literal"):
            failing.collect()
        with pytest.raises(RuntimeError, match="collected already"):
            plain.collect()
        plain.cancel()  # after collect: nothing to do
    finally:
        _restore(before)
    assert work == 49_995_000


def test_start_without_isolation_runs_the_function_when_collected():
    calls: list[int] = []
    before = isolate.configure(enabled=False)
    try:
        pending = isolate.start_mapped("onnx.shape_inference", lambda x: calls.append(x) or x * 2, 21)
        assert calls == []
        assert pending.collect() == 42 and calls == [21]
        cancelled = isolate.start("export", calls.append, 1)
        cancelled.cancel()
        with pytest.raises(RuntimeError):
            cancelled.collect()
    finally:
        _restore(before)
    assert calls == [21]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")
def test_cancel_kills_the_child_and_reaps_it():
    """A caller that fails before it collects cancels: the child is killed (its whole group) and
    reaped, its pipe and memory file closed."""
    before = isolate.configure(enabled=True, timeout=60)
    try:
        pending = isolate.start_mapped("onnx.shape_inference", time.sleep, 60)
        pid, read_fd, memory_fd = pending._pid, pending._read_fd, pending._memory_fd
        assert pid > 0
        pending.cancel()
        pending.cancel()  # twice: no-op
    finally:
        _restore(before)
    assert _gone(pid)
    for fd in (read_fd, memory_fd):
        if fd is not None:
            with pytest.raises(OSError):
                os.fstat(fd)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="isolation needs os.fork")
def test_the_timeout_counts_from_the_start_and_a_crash_is_reported_at_collect():
    """The time this process spends before it collects counts against the child's timeout; a child
    that died meanwhile is reported as ``call`` reports it."""
    import signal

    before = isolate.configure(enabled=True, timeout=0.5)
    try:
        hanging = isolate.start("onnx.shape_inference", time.sleep, 60)
        crashing = isolate.start("onnx.shape_inference", lambda: os.kill(os.getpid(), signal.SIGSEGV))
        time.sleep(0.6)  # past the deadline before collecting
        with pytest.raises(isolate.IsolationError, match="timed out after 0.5 s") as timed:
            hanging.collect()
        with pytest.raises(isolate.IsolationError, match=r"crash \(SIGSEGV\) during onnx.shape_inference"):
            crashing.collect()
    finally:
        _restore(before)
    assert timed.value.kind == "timeout"
