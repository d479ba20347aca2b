"""toolchains/batch.py driving a stand-in worker script (no toolchain needed): the protocol's
results, crashes retried in a fresh worker, hangs timed out with their CPU, and workers that
cannot start."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_npucheck.toolchains import batch

# The stand-in speaks the workers' protocol; each model's "path" names what it does:
# ok, crash (exit 3 mid-model), crash_once (only in the first worker), hang, spin (burn CPU in
# silence), chatty (burn CPU, logging as it goes).
WORKER = r'''
import json, os, sys, time
job = json.load(open(sys.argv[1]))
def say(**ev):
    print(json.dumps(ev), flush=True)
if os.environ.get("STANDIN_FATAL"):
    say(event="fatal", error="no toolkit here", log="")
    sys.exit(1)
if os.environ.get("STANDIN_SILENT"):
    sys.stderr.write("ImportError: no module named rknn\n")
    sys.exit(5)
say(event="hello", rknn_version="9.9.9")
first = not os.path.exists("../crashed_once")
for m in job["models"]:
    log = os.path.join(job["log_dir"], m["key"] + ".log")
    open(log, "w").write("E RKNN: building %s\n" % m["key"])
    say(event="start", key=m["key"], log=log)
    what = os.path.basename(m["path"])
    if what == "crash" or (what == "crash_once" and first):
        open("../crashed_once", "w").close()
        os._exit(3)
    if what == "hang":
        time.sleep(60)
    if what == "spin":
        end = time.process_time() + 30
        while time.process_time() < end:
            pass
    if what == "chatty":  # 1.5 CPU-s of work that logs every 0.1 CPU-s
        for step in range(15):
            end = time.process_time() + 0.1
            while time.process_time() < end:
                pass
            with open(log, "a") as fh:
                fh.write("pass %d\n" % step)
    say(event="result", key=m["key"], log=log, seconds=0.1, **({"status": "ok"} if what == "ok" else {}))
say(event="done")
'''


@dataclass
class _Result:
    key: str
    status: str
    message: str
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class _Job:
    path: str
    key: str | None = None


class _Unavailable(RuntimeError):
    pass


def _run(tmp_path, names, monkeypatch=None, env=None, **kw):
    script = tmp_path / "standin.py"
    script.write_text(WORKER)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    spec = batch.WorkerSpec(name="rknn", script=script, work="rknn build", doing="building",
                            default_status="build_failed", unavailable=_Unavailable)
    jobs = batch.normalise_jobs([{"path": str(tmp_path / n), "key": n} for n in names], _Job)
    seen = []

    def finish(job, status, log_text, event, message):
        return _Result(job.key, status, "\n".join(p for p in (message, log_text.strip()) if p))

    kw.setdefault("timeout", 30)
    results, hello = batch.run_batch(
        sys.executable, spec, jobs,
        lambda pending, log_dir: {"log_dir": log_dir,
                                  "models": [{"key": j.key, "path": j.path} for j in pending]},
        finish, startup_timeout=60, progress=seen.append, **kw)
    return {r.key: r for r in results}, hello, seen


def test_results_crashes_and_a_retried_flaky_crash(tmp_path):
    res, hello, seen = _run(tmp_path, ["ok", "crash_once", "crash", "fails"], retries=1)
    assert hello["rknn_version"] == "9.9.9"
    assert res["ok"].status == "ok" and res["fails"].status == "build_failed"
    assert res["fails"].message == "E RKNN: building fails"
    assert res["crash_once"].status == "build_failed"  # built again in a fresh worker
    assert res["crash_once"].extra["earlier_attempts"] == [
        "rknn worker died (exit code 3) while building this model\nE RKNN: building crash_once"]
    assert res["crash"].status == "crashed"
    assert res["crash"].message.startswith("rknn worker died (exit code 3) while building this model")
    assert len(res["crash"].extra["earlier_attempts"]) == 1
    assert "earlier_attempts" not in res["ok"].extra
    assert sorted(r.key for r in seen) == ["crash", "crash_once", "fails", "ok"]  # once each


def test_without_retries_a_crash_is_final_and_the_rest_go_to_a_fresh_worker(tmp_path):
    res, _, _ = _run(tmp_path, ["crash", "ok"])
    assert res["crash"].status == "crashed" and "earlier_attempts" not in res["crash"].extra
    assert res["ok"].status == "ok"


def test_a_hang_times_out_with_the_cpu_it_used_and_the_next_model_still_runs(tmp_path):
    res, _, _ = _run(tmp_path, ["spin", "hang", "ok"], timeout=3)
    for key in ("spin", "hang"):
        assert res[key].status == "timeout"
        assert res[key].message.startswith("rknn build did not finish within 3 s (")
    # the CPU of the model in flight, not of the worker's start: a sleeping model used none
    assert res["hang"].extra["cpu_seconds"] <= 0.2 < res["spin"].extra["cpu_seconds"]
    assert res["ok"].status == "ok"


def test_a_worker_that_cannot_start_says_why(tmp_path, monkeypatch):
    with pytest.raises(_Unavailable, match="no toolkit here"):
        _run(tmp_path, ["ok"], monkeypatch, {"STANDIN_FATAL": "1"})
    monkeypatch.delenv("STANDIN_FATAL")
    with pytest.raises(_Unavailable, match=r"exited with code 5 before starting: ImportError: no module named rknn"):
        _run(tmp_path, ["ok"], monkeypatch, {"STANDIN_SILENT": "1"})


def test_a_model_that_burns_cpu_without_logging_is_stopped_as_a_stall_and_one_that_logs_is_not(tmp_path):
    res, _, _ = _run(tmp_path, ["chatty", "spin", "ok"], timeout=600, stall_cpu=0.5)
    assert res["chatty"].status == "build_failed"  # finished: 1.5 CPU-s, never 0.5 in silence
    assert res["chatty"].extra["cpu_seconds"] >= 1.4
    assert res["spin"].status == "timeout"
    assert 0.5 <= res["spin"].extra["stalled_cpu_seconds"] < 5
    assert res["spin"].message.startswith(
        "rknn build wrote nothing to its log for %.1f CPU-s (it computes without progress: a hang); "
        "its log stops at: E RKNN: building spin" % res["spin"].extra["stalled_cpu_seconds"])
    assert res["ok"].status == "ok" and res["ok"].extra["cpu_seconds"] < 0.5
