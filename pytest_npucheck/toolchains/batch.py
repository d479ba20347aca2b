"""Drive a toolchain's worker script over many models: what the RKNN and QNN adapters share.

A placement adapter (``toolchains/<name>/adapter.py``) runs its toolchain in the toolchain's own
virtualenv, as a worker script given one job file. The worker answers with one JSON event a line
on its stdout:

* ``hello``: the worker imported the toolchain (its versions ride along);
* ``start`` ``{key, log}``: it begins a model, writing the toolchain's log to ``log``;
* ``result`` ``{key, status, log, ...}``: it finished that model;
* ``fatal`` ``{error, log}``: it cannot work at all (the toolchain does not import);
* ``done``: no model is left.

:func:`run_batch` starts a worker on every model still pending, and another one after a worker
died or hung on a model: the model in flight is recorded ``crashed`` (or built again in a fresh
worker first, ``retries`` times) or ``timeout``, and the rest go to the next worker. Each adapter
gives its job-file contents and its result type through a :class:`WorkerSpec` and two callables.
:func:`run_pool` splits the models over parallel batches.

Only the standard library is imported.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from .venv import process_cpu_seconds

__all__ = ["WorkerSpec", "event", "normalise_jobs", "read_text", "run_batch", "run_pool", "strip_ansi", "tail"]

_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def strip_ansi(text: str) -> str:
    """Remove ANSI colour/escape sequences."""
    return _ANSI_RE.sub("", text)


def read_text(path: str | None) -> str:
    """The text of a log file, or ``""`` when there is none (yet)."""
    if not path:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def tail(text: str, n: int = 20) -> str:
    """The last ``n`` lines of ``text``, without ANSI codes."""
    return "\n".join(strip_ansi(text).strip().splitlines()[-n:])


def event(line: str) -> dict[str, Any] | None:
    """The JSON event a worker's stdout line carries, or None for anything else it printed."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        ev = json.loads(line)
    except ValueError:
        return None
    return ev if isinstance(ev, dict) else None


def normalise_jobs(models: Iterable[Any], job_type: type) -> list[Any]:
    """``job_type`` dataclass instances (``path`` absolute, ``key`` unique) from paths, jobs or mappings.

    A job's dict fields are copied, so the worker's job file never aliases the caller's objects;
    a model without a key is keyed by its position.
    """
    kinds = fields(job_type)
    jobs = []
    for i, m in enumerate(models):
        if isinstance(m, job_type):
            values = {f.name: getattr(m, f.name) for f in kinds}
        elif isinstance(m, Mapping):
            values = {f.name: m.get(f.name) for f in kinds}
            values["path"] = m["path"]
        else:
            values = {f.name: None for f in kinds}
            values["path"] = m
        for f in kinds:
            if f.default_factory is dict:  # type: ignore[comparison-overlap]
                values[f.name] = dict(values[f.name] or {})
        values["path"] = os.path.abspath(os.fspath(values["path"]))
        job = job_type(**values)
        if job.key is None:
            job.key = str(i)
        jobs.append(job)
    keys = [j.key for j in jobs]
    if len(set(keys)) != len(keys):
        raise ValueError("model keys must be unique")
    return jobs


@dataclass(frozen=True)
class WorkerSpec:
    """One toolchain's worker script and the words its failures are told in."""

    name: str
    """The worker's name in messages: ``rknn``, ``QNN``."""
    script: Path
    work: str
    """What one model's ``timeout`` interrupted: ``rknn build``, ``QNN session creation``."""
    doing: str
    """What the worker did to the model it died on: ``building``, ``placing``."""
    default_status: str
    """The status of a ``result`` event that names none."""
    unavailable: type[Exception]
    """Raised when no worker can start or none makes progress."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Environment entries set unless the caller's environment has them."""


def _stalled(current: Mapping[str, Any], pid: int, quiet: list[Any], stall_cpu: float) -> float | None:
    """CPU seconds the worker ``pid`` has spent since the current model's log last grew, when that
    is ``stall_cpu`` or more (a build that computes without writing anything: a hang); else None.
    ``quiet`` is [the log's size when last seen, the worker's CPU seconds then], updated here."""
    cpu = process_cpu_seconds(pid)
    if cpu is None:
        return None
    try:
        size = os.stat(current.get("log") or "").st_size
    except OSError:
        size = 0
    if size != quiet[0] or quiet[1] is None:
        quiet[:] = [size, cpu]
        return None
    silent = cpu - quiet[1]
    return round(silent, 1) if silent >= stall_cpu else None


def _last_line(text: str) -> str:
    return next((ln for ln in reversed(strip_ansi(text).splitlines()) if ln.strip()), "").strip()


def run_batch(python: str, spec: WorkerSpec, jobs: Sequence[Any],
              job_file: Callable[[list[Any], str], dict[str, Any]],
              finish: Callable[[Any, str, str, Mapping[str, Any] | None, str], Any], *,
              timeout: float, startup_timeout: float, progress: Callable[[Any], None] | None = None,
              retries: int = 0, stall_cpu: float | None = None) -> tuple[list[Any], dict[str, Any]]:
    """Run ``jobs`` through as many workers (one after another) as crashes and hangs require.

    ``job_file(pending, log_dir)`` gives the job file's contents for the models still pending;
    ``finish(job, status, log_text, event, message)`` makes a result from a worker's ``result``
    event, or from no event (``event`` None) with ``message`` saying why (``timeout``,
    ``crashed``). A finished or timed-out model's result carries the CPU seconds the worker spent
    on it in ``extra["cpu_seconds"]`` (None where ``/proc`` cannot tell); a model built again
    after its worker died keeps the messages of the attempts before in
    ``extra["earlier_attempts"]``. Timeouts are not retried.

    ``stall_cpu``: CPU seconds a model may take without its log growing (the toolchains log their
    passes as they go). A worker that spends that much CPU in silence is killed, the model
    reported ``timeout`` with a message naming the silent CPU and the log's last line, and
    ``extra["stalled_cpu_seconds"]``: a compiler loop told from a slow build in CPU time, whatever
    the load, well before ``timeout``. None (the default) waits for ``timeout`` only.

    Returns the results in ``jobs``' order and the last ``hello`` event (``{}`` if none came).
    """
    results: dict[str, Any] = {}
    earlier: dict[str, list[str]] = {}
    pending = list(jobs)
    by_key = {j.key: j for j in jobs}
    hello: dict[str, Any] = {}
    restarts_without_progress = 0
    with tempfile.TemporaryDirectory(prefix="npucheck-%s-" % spec.name.lower()) as tmp:
        attempt = 0
        while pending:
            attempt += 1
            log_dir = os.path.join(tmp, "run%03d" % attempt)
            os.makedirs(log_dir)
            job_path = os.path.join(log_dir, "job.json")
            with open(job_path, "w", encoding="utf-8") as fh:
                json.dump(job_file(pending, log_dir), fh)
            stderr_path = os.path.join(log_dir, "worker.stderr")
            env = dict(os.environ)
            env.pop("PYTHONPATH", None)  # keep the host stack out of the toolchain's venv
            env.setdefault("PYTHONUNBUFFERED", "1")
            for k, v in spec.env.items():
                env.setdefault(k, v)
            with open(stderr_path, "wb") as err:
                proc = subprocess.Popen(
                    [python, str(spec.script), job_path], stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=err, env=env, cwd=log_dir)
            lines: queue.Queue[str | None] = queue.Queue()

            def _reader(stream: Any = proc.stdout) -> None:
                for raw in iter(stream.readline, b""):
                    lines.put(raw.decode("utf-8", errors="replace"))
                lines.put(None)

            thread = threading.Thread(target=_reader, daemon=True)
            thread.start()
            current: dict[str, Any] | None = None
            current_cpu: float | None = None  # the worker's CPU seconds when the current model started
            quiet: list[Any] = [0, None]  # the current model's log size, the worker's CPU when it last grew
            started = False
            deadline = time.monotonic() + startup_timeout
            progressed = False
            fatal: str | None = None

            def _done(result: Any) -> None:
                nonlocal pending, progressed
                results[result.key] = result
                pending = [p for p in pending if p.key != result.key]
                progressed = True
                if progress:
                    progress(result)

            try:
                while True:
                    remaining = deadline - time.monotonic()
                    watch = stall_cpu is not None and current is not None
                    try:
                        line = lines.get(timeout=max(min(remaining, 0.25) if watch else remaining, 0.01))
                    except queue.Empty:  # of the model in flight, or of the start-up
                        stalled = None
                        if watch and time.monotonic() < deadline:
                            stalled = _stalled(current, proc.pid, quiet, stall_cpu)  # type: ignore[arg-type]
                            if stalled is None:
                                continue  # still writing to its log, or not yet that much CPU in silence
                        if current is not None:
                            j = by_key[current["key"]]
                            used = process_cpu_seconds(proc.pid)
                            if used is not None and current_cpu is not None:
                                used = round(used - current_cpu, 1)
                            log_text = read_text(current.get("log"))
                            if stalled is not None:
                                why = ("%s wrote nothing to its log for %.1f CPU-s (it computes without "
                                       "progress: a hang); its log stops at: %s"
                                       % (spec.work, stalled, _last_line(log_text)[:200]))
                            else:
                                why = ("%s did not finish within %.0f s" % (spec.work, timeout)
                                       + ("" if used is None else " (%.0f CPU-s used)" % used))
                            res = finish(j, "timeout", log_text, None, why)
                            res.extra["cpu_seconds"] = used
                            if stalled is not None:
                                res.extra["stalled_cpu_seconds"] = stalled
                            _done(res)
                        else:
                            fatal = "%s worker did not start within %.0f s" % (spec.name, startup_timeout)
                        break
                    if line is None:  # EOF: the worker ended
                        proc.wait()
                        if current is not None:
                            j = by_key[current["key"]]
                            crash = finish(j, "crashed", read_text(current.get("log")), None,
                                           "%s worker died (exit code %s) while %s this model"
                                           % (spec.name, proc.returncode, spec.doing))
                            if len(earlier.setdefault(j.key, [])) < retries:
                                # some native crashes are not deterministic (rknn-toolkit2 2.5.0
                                # reading pads it never set): build it once more in a fresh worker
                                earlier[j.key].append(crash.message)
                                progressed = True
                                break
                            _done(crash)
                        elif not started:
                            fatal = "%s worker exited with code %s before starting: %s" % (
                                spec.name, proc.returncode, tail(read_text(stderr_path)))
                        break
                    ev = event(line)
                    if ev is None:
                        continue
                    kind = ev.get("event")
                    if kind == "hello":
                        started = True
                        hello = ev
                        deadline = time.monotonic() + timeout
                    elif kind == "fatal":
                        fatal = "%s\n%s" % (ev.get("error"), tail(read_text(ev.get("log"))))
                        break
                    elif kind == "start":
                        current = ev
                        current_cpu = process_cpu_seconds(proc.pid)
                        quiet[:] = [0, current_cpu]
                        deadline = time.monotonic() + timeout
                    elif kind == "result":
                        res = finish(by_key[ev["key"]], ev.get("status", spec.default_status),
                                     read_text(ev.get("log")), ev, "")
                        used = process_cpu_seconds(proc.pid)  # alive: it reports, then goes on
                        res.extra["cpu_seconds"] = (None if used is None or current_cpu is None
                                                    else round(used - current_cpu, 2))
                        _done(res)
                        current = None
                        deadline = time.monotonic() + timeout
                    elif kind == "done":
                        break
            finally:
                if proc.poll() is None:
                    try:
                        proc.kill()
                    except OSError:
                        pass
                proc.wait()
                if proc.stdout:
                    proc.stdout.close()
                thread.join(timeout=5)
            if fatal:
                raise spec.unavailable(fatal)
            if not progressed:
                restarts_without_progress += 1
                if restarts_without_progress >= 3:
                    raise spec.unavailable("%s worker repeatedly stopped without progress: %s"
                                           % (spec.name, tail(read_text(stderr_path))))
            else:
                restarts_without_progress = 0
    for key, messages in earlier.items():
        if messages and key in results:
            results[key].extra.setdefault("earlier_attempts", list(messages))
    return [results[j.key] for j in jobs], hello


def run_pool(jobs: Sequence[Any], workers: int,
             run_chunk: Callable[[list[Any], Callable[[Any], None] | None], list[Any]],
             progress: Callable[[Any], None] | None = None) -> list[Any]:
    """Split ``jobs`` round-robin over ``workers`` parallel :func:`run_batch` calls.

    ``run_chunk(chunk, report)`` runs one share and calls ``report`` with each result, which calls
    ``progress`` (if given) under a lock, one result at a time. The first exception of any share is raised here, after all have ended.
    Returns the results in ``jobs``' order.
    """
    lock = threading.Lock()

    def _prog(r: Any) -> None:
        if progress:
            with lock:
                progress(r)

    workers = max(1, min(int(workers), len(jobs)))
    if workers == 1:
        return run_chunk(list(jobs), _prog)
    chunks = [list(jobs[i::workers]) for i in range(workers)]
    outs: list[Any] = [None] * workers

    def _run(n: int) -> None:
        try:
            outs[n] = run_chunk(chunks[n], _prog)
        except BaseException as exc:  # re-raised in the caller's thread
            outs[n] = exc

    threads = [threading.Thread(target=_run, args=(n,)) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    merged: dict[str, Any] = {}
    for o in outs:
        if isinstance(o, BaseException):
            raise o
        for r in o:
            merged[r.key] = r
    return [merged[str(j.key)] for j in jobs]
