"""toolchains/batch.py without a worker: jobs, log text, and the parallel split."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_npucheck.toolchains import batch
from pytest_npucheck.toolchains.qnn.adapter import ModelJob as QnnJob
from pytest_npucheck.toolchains.rknn.adapter import ModelJob as RknnJob


def test_jobs_from_paths_mappings_and_jobs_get_absolute_paths_positional_keys_and_own_dicts(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = {"dynamic_input": [[1, 3]]}
    given = RknnJob(path="b.onnx", key="b", config=cfg, inference={"inputs": []})
    jobs = batch.normalise_jobs(["a.onnx", given, {"path": "c.onnx", "load": {"x": 1}}], RknnJob)
    assert [j.path for j in jobs] == [str(tmp_path / n) for n in ("a.onnx", "b.onnx", "c.onnx")]
    assert [j.key for j in jobs] == ["0", "b", "2"]
    assert jobs[1].config == cfg and jobs[1].config is not cfg  # the worker's copy
    assert jobs[1].inference == {"inputs": []}
    assert jobs[2].load == {"x": 1} and jobs[2].config == {} and jobs[2].build == {}
    assert jobs[0].inference is None and jobs[0].debug is None
    qnn = batch.normalise_jobs([{"path": "q.onnx", "key": "q", "debug": {"crash": 3}}], QnnJob)
    assert qnn == [QnnJob(path=str(tmp_path / "q.onnx"), key="q", debug={"crash": 3})]


def test_duplicate_keys_and_a_mapping_without_a_path_are_refused():
    with pytest.raises(ValueError, match="unique"):
        batch.normalise_jobs([{"path": "a", "key": "k"}, {"path": "b", "key": "k"}], QnnJob)
    with pytest.raises(KeyError, match="path"):
        batch.normalise_jobs([{"key": "k"}], QnnJob)


def test_log_text_and_its_tail(tmp_path):
    log = tmp_path / "build.log"
    log.write_text("\x1b[31mE RKNN: one\x1b[0m\n" + "".join("line %d\n" % i for i in range(30)))
    assert batch.read_text(str(log)).startswith("\x1b[31m")
    assert batch.read_text(None) == "" and batch.read_text(str(tmp_path / "missing")) == ""
    assert batch.tail(batch.read_text(str(log)), 3) == "line 27\nline 28\nline 29"
    assert batch.tail("\x1b[31mE RKNN: one\x1b[0m") == "E RKNN: one"


@dataclass
class _Result:
    key: str
    thread: str
    extra: dict[str, Any] = field(default_factory=dict)


def test_the_pool_splits_round_robin_returns_input_order_and_serialises_progress():
    jobs = [QnnJob(path="/m%d" % i, key="k%d" % i) for i in range(5)]
    chunks: list[list[str]] = []
    seen: list[str] = []

    def run_chunk(chunk, progress):
        chunks.append([j.key for j in chunk])
        out = [_Result(j.key, threading.current_thread().name) for j in chunk]
        for r in out:
            progress(r)
        return list(reversed(out))

    results = batch.run_pool(jobs, 2, run_chunk, lambda r: seen.append(r.key))
    assert [r.key for r in results] == ["k0", "k1", "k2", "k3", "k4"]
    assert sorted(chunks) == [["k0", "k2", "k4"], ["k1", "k3"]]
    assert sorted(seen) == ["k0", "k1", "k2", "k3", "k4"]
    assert len({r.thread for r in results}) == 2
    one = batch.run_pool(jobs[:2], 1, run_chunk, None)  # one share runs in the caller's thread
    assert {r.thread for r in one} == {threading.current_thread().name}


def test_the_pool_raises_a_shares_exception_after_every_share_ended():
    jobs = [QnnJob(path="/m%d" % i, key="k%d" % i) for i in range(4)]
    ended: list[str] = []

    def run_chunk(chunk, progress):
        if chunk[0].key == "k1":
            raise RuntimeError("worker for k1 cannot start")
        ended.append(chunk[0].key)
        return [_Result(j.key, "") for j in chunk]

    with pytest.raises(RuntimeError, match="k1 cannot start"):
        batch.run_pool(jobs, 2, run_chunk)
    assert ended == ["k0"]


def test_an_event_is_a_json_object_line_and_anything_else_a_worker_prints_is_not():
    assert batch.event('  {"event": "result", "key": "m0"}\n') == {"event": "result", "key": "m0"}
    for line in ("I RKNN: loading", "{not json", "[1, 2]", "", '{"a": 1'):
        assert batch.event(line) is None, line
    assert batch.event("[1]") is None and batch.event('{"event": "done"} ') == {"event": "done"}
