"""What a pytest-xdist worker sets in its environment before the test modules import torch.

torch's CPU kernels run on an OpenMP pool (GNU libgomp in the pip wheels) of one thread per core.
By default a libgomp thread that finishes its share of a parallel region spins (busy-waits) before it
sleeps, and the thread that opened the region spins at its end until every share is done. With one
pytest process on two idle cores that costs little. With two xdist workers on two cores, each
worker's pool has as many threads as the machine has cores, so a share's thread is often waiting for
a core held by the other worker while its peers spin: measured on this project's 2-core machine,
two processes each running 80 small forwards (the demo's TinyResNet and SmallUNet) took 8-11 CPU-s
and 43-63 s wall with the default policy, 0.3-0.4 CPU-s and 0.3-1.3 s wall with
``OMP_WAIT_POLICY=PASSIVE`` (docs/performance.md, "Issue 29, sixth pass"). A marked test runs the
model's forward once more than its plain form (the numeric check's PyTorch reference), so the spin
is most of what a ``-n 2`` run of marked tests cost over ``-n 0``.

The wait policy decides only how an idle thread waits, never how work is split: every result is
the same. libgomp reads it once, when torch loads it, so the plugin sets it where pytest lets a
plugin act before any conftest or test module is imported (``pytest_load_initial_conftests``), in
workers of a run with two or more of them, and only when the environment sets neither the policy
nor ``GOMP_SPINCOUNT`` (a user's own choice wins; ``OMP_WAIT_POLICY=ACTIVE`` keeps spinning). The
controller and a run without xdist are left as they are. Processes a test starts inherit it.

How a worker ends. When its session is over, a worker has sent everything to the controller (the
``workerfinished`` event carries its output; xdist takes the worker's end after it as normal), and
all that is left of the process is the interpreter's exit: the exit functions, then the teardown of
every module and object, torch's included: 0.6-0.7 CPU-s per worker, measured on the demo's suite,
which the controller waits for before the run ends (``group.terminate``). A worker that ran marked
tests ends instead after pytest is done with it (``pytest_cmdline_main`` returned: unconfigure and
the config's cleanups ran) with its exit functions run and its streams flushed, without the
teardown (``process_exit.end_without_teardown``, which keeps the ordinary exit wherever that could
differ: another thread, a tracer such as coverage's, a stream that cannot be flushed). Its exit
status is 0, as the ordinary end of a worker's script. Ini ``npu_worker_fast_exit = false`` keeps
the ordinary exit. A worker of a session without marked tests is left as it is.
"""

from __future__ import annotations

import os
from typing import Mapping

#: the variable set, and its value
WAIT_POLICY = "OMP_WAIT_POLICY"
PASSIVE = "PASSIVE"
#: set by the user, any of these leaves the worker's OpenMP waiting as the user chose it
_USER_CHOICES = (WAIT_POLICY, "GOMP_SPINCOUNT")


def worker_count(environ: Mapping[str, str]) -> int:
    """The number of xdist workers of the run this process is a worker of; 0 outside a worker."""
    if "PYTEST_XDIST_WORKER" not in environ:
        return 0
    try:
        return int(environ.get("PYTEST_XDIST_WORKER_COUNT", "") or 0)
    except ValueError:
        return 0


def worker_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to ``environ`` (a worker's environment before torch loads): the passive
    OpenMP wait policy in a worker of two or more, unless the user chose how OpenMP waits."""
    if worker_count(environ) < 2 or any(name in environ for name in _USER_CHOICES):
        return {}
    return {WAIT_POLICY: PASSIVE}


def end_worker(environ: Mapping[str, str] = os.environ) -> None:
    """End this xdist worker (exit status 0, what its script's ordinary end gives) without the
    interpreter's teardown; returns where that could differ from the ordinary exit, and outside a worker."""
    if worker_count(environ) < 1:
        return
    from .process_exit import end_without_teardown

    end_without_teardown(0)
