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
