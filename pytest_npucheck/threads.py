"""CPU threads of the numeric libraries in pytest-xdist workers.

torch (OpenMP) and the BLAS under numpy start one thread per CPU in every process. Under
``pytest -n N`` that is N times as many threads as CPUs: the threads of the workers take turns
and spin while they wait, so a run does more work in all (the eight model tests of goal 6 in
docs/performance.md: 54 CPU seconds under ``-n 2`` against 41 with one thread per worker, for the
same results) and gains little from the second worker. Each worker therefore gets its share of
the CPUs, unless the user chose the threads.

No import of torch here: the limit is set through the environment before torch loads, or with
``torch.set_num_threads`` when the process had already imported it.
"""

from __future__ import annotations

import os
import sys
from typing import MutableMapping, Optional

# the variables a user sets to choose the threads: any of them set means "leave it alone"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
# what the limit sets (torch's intra-op pool reads OMP_NUM_THREADS and MKL_NUM_THREADS; numpy's
# OpenBLAS reads OPENBLAS_NUM_THREADS, then OMP_NUM_THREADS)
_SET = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class ThreadsSettingError(ValueError):
    """An invalid ``npu_worker_threads`` value."""


def parse_setting(value: str) -> Optional[int]:
    """``npu_worker_threads``: ``auto`` (the CPUs divided among the workers) -> 0, ``off`` -> None,
    a whole number >= 1 -> that number."""
    v = str(value).strip().lower()
    if v in ("", "auto"):
        return 0
    if v in ("off", "keep", "none", "false", "no"):
        return None
    try:
        n = int(v)
    except ValueError:
        raise ThreadsSettingError(f"npu_worker_threads: expected auto, off or a number of threads, got {value!r}") \
            from None
    if n < 1:
        raise ThreadsSettingError(f"npu_worker_threads: expected 1 or more threads, got {n}")
    return n


def available_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def share(workers: int, cpus: int) -> int:
    """Threads per worker when ``workers`` processes share ``cpus`` CPUs (at least one)."""
    return max(1, cpus // max(1, workers))


def limit_worker_threads(workers: int, setting: Optional[int], environ: Optional[MutableMapping[str, str]] = None,
                         cpus: Optional[int] = None) -> Optional[int]:
    """Give one of ``workers`` processes its share of the CPUs; returns the threads set, or None when
    nothing was changed (one worker, ``off``, or the user set a thread variable).

    ``setting``: ``parse_setting``'s value (0 = auto). torch, when this process already imported it,
    is limited with ``torch.set_num_threads`` unless something changed its default already.
    """
    env = os.environ if environ is None else environ
    if setting is None or workers <= 1 or any(env.get(v) for v in THREAD_VARS):
        return None
    cpus = available_cpus() if cpus is None else cpus
    threads = setting or share(workers, cpus)
    if threads >= cpus:
        return None  # the default already
    for var in _SET:
        env[var] = str(threads)
    torch = sys.modules.get("torch")
    if torch is not None and environ is None:
        try:
            if torch.get_num_threads() >= cpus:  # still torch's default: nobody chose
                torch.set_num_threads(threads)
        except Exception:  # noqa: BLE001 - a partly imported or stubbed torch: the env still applies
            pass
    return threads
