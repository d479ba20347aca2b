"""Stdlib-only helpers shared by the toolchain workers (`_rknn_worker.py`, `_qnn_worker.py`).

The workers run as scripts in the toolchains' own virtual environments, where this project is
not installed; they put this directory (``toolchains/``, one above their own) on ``sys.path``
long enough to import this module, then take it off again (its ``rknn/`` and ``qnn/`` would
shadow the vendors' packages).
"""

import json
import os
import sys


def _open_job(argv):
    """The job (JSON from the file ``argv[0]``, or stdin for ``-`` / no argument), a private handle
    on the real stdout for result lines, the log directory (created) and the start-up log path."""
    if argv and argv[0] != "-":
        with open(argv[0], encoding="utf-8") as fh:
            job = json.load(fh)
    else:
        job = json.load(sys.stdin)
    out = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    log_dir = job.get("log_dir") or "."
    os.makedirs(log_dir, exist_ok=True)
    return job, out, log_dir, os.path.join(log_dir, "worker-startup.log")


def _emit(stream, obj):
    """One JSON result line, flushed at once so the parent sees it even if the worker dies next."""
    stream.write(json.dumps(obj) + "\n")
    stream.flush()


class _Redirect:
    """Point file descriptors 1 and 2 at a file for the duration of a ``with`` block."""

    def __init__(self, path):
        self.path = path
        self.saved = None
        self.fd = None

    def __enter__(self):
        sys.stdout.flush()
        sys.stderr.flush()
        self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.saved = (os.dup(1), os.dup(2))
        os.dup2(self.fd, 1)
        os.dup2(self.fd, 2)
        return self

    def __exit__(self, *exc):
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        os.dup2(self.saved[0], 1)
        os.dup2(self.saved[1], 2)
        os.close(self.saved[0])
        os.close(self.saved[1])
        os.close(self.fd)
        return False
