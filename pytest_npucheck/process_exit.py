"""Ending a process whose work is done without the interpreter's teardown.

When a Python process exits the ordinary way, the interpreter waits for its other threads, runs the
``atexit`` functions, flushes stdout and stderr, and then tears its heap down: every module is
cleared and every object freed one by one, with garbage-collector passes over all of them, for
memory the operating system takes back at once. After a check of a large model that teardown costs
0.15-0.36 CPU-s (the graph facts, the parsed model, the tables); in a pytest-xdist worker that has
imported torch it costs 0.6-0.7 CPU-s per worker, and the controller waits for it before the run
ends (docs/performance.md, issue 29's sixth and seventh passes).

``end_without_teardown`` does what the ordinary exit does up to the teardown, then ``os._exit``:
the exit functions run (coverage's data, ``logging.shutdown``, temporary directories' finalizers)
and the streams are flushed. It returns instead, leaving the ordinary exit to the caller, wherever
that could differ: another thread still runs (the interpreter would wait for it), a tracer or
profiler is set (``python -m cProfile`` writes its figures after the program returns; coverage's
tracer; debuggers), a stream cannot be flushed (the interpreter reports a broken pipe itself), the
status is not an int, or this Python has no ``atexit._run_exitfuncs``.
"""

from __future__ import annotations

import os
import sys


def end_without_teardown(status: int) -> None:
    """End the process with ``status`` after its exit functions and a flush, or return (see the module)."""
    import atexit
    import threading

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None or not isinstance(status, int) or threading.active_count() > 1 \
            or sys.gettrace() is not None or sys.getprofile() is not None:
        return
    if not _flushed():  # a closed, broken or missing stream: the ordinary exit, as before
        return
    run_exitfuncs()
    if not _flushed():
        return
    os._exit(status)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        return False
    return True
