"""scripts/zoo_agreement.py: how compile processes share the zoo (claims) and gather batches while
the exporters are still writing. The compiler is replaced at the adapter's entry point only; the
harness's own loop, claim files and records are the code under test."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NO_SUCH_PID = 2**22 + 4321  # above Linux's largest pid_max: never a live process


def _script():
    sys.path.insert(0, str(REPO / "scripts"))
    spec = importlib.util.spec_from_file_location("zoo_agreement", REPO / "scripts" / "zoo_agreement.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _tiny_onnx(path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_file_another_live_process_claimed_is_refused_and_a_dead_ones_is_taken_over(tmp_path):
    zoo = _script()
    claim_file = tmp_path / "claims" / "rknn" / "m.torchscript"
    claim_file.parent.mkdir(parents=True)
    claim_file.write_text(str(os.getppid()))  # the process that started pytest: alive, not us
    assert zoo.claimed_elsewhere(tmp_path, "rknn", "m.torchscript")
    assert not zoo.claim(tmp_path, "rknn", "m.torchscript")
    assert claim_file.read_text() == str(os.getppid())
    zoo.release(tmp_path, "rknn", "m.torchscript")  # not ours: left alone
    assert claim_file.exists()

    claim_file.write_text(str(NO_SUCH_PID))  # its process died without releasing it
    assert not zoo.claimed_elsewhere(tmp_path, "rknn", "m.torchscript")
    assert zoo.claim(tmp_path, "rknn", "m.torchscript")
    assert claim_file.read_text() == str(os.getpid())
    assert zoo.claim(tmp_path, "rknn", "other.dynamo")  # a fresh one
    zoo.release(tmp_path, "rknn", "m.torchscript")
    assert not claim_file.exists()


def test_a_follow_compile_waits_for_a_batch_but_not_longer_than_gather():
    zoo = _script()
    assert not zoo.gather_now(2, 0.0, 6, 180.0)
    assert not zoo.gather_now(5, 165.0, 6, 180.0)
    assert zoo.gather_now(6, 0.0, 6, 180.0)
    assert zoo.gather_now(1, 180.0, 6, 180.0)
    assert zoo.gather_now(1, 0.0, 0, 180.0)  # --min-batch 0 or 1: no waiting


def test_a_compile_process_skips_the_files_another_one_holds(tmp_path, monkeypatch):
    """Two compile processes of one toolchain (one ``--reverse``) split the pending files: a file
    claimed by a live process is not built again, the others are built, recorded and released."""
    zoo = _script()
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    for arch in ("a", "b", "c"):
        _tiny_onnx(tmp_path / "models" / arch / "torchscript.onnx")
    held = tmp_path / "claims" / "qnn" / "b.torchscript"
    held.parent.mkdir(parents=True)
    held.write_text(str(os.getppid()))
    built: list[str] = []

    def place_models(jobs, htp_arch, python, *, progress, **_):
        out = []
        for job in jobs:
            assert zoo.claimed_elsewhere(tmp_path, "qnn", job["key"]) is False
            assert (tmp_path / "claims" / "qnn" / job["key"]).read_text() == str(os.getpid())
            built.append(job["key"])
            res = qnn.QnnResult(key=job["key"], path=job["path"], status="ok", placement={"relu": "npu"})
            progress(res)
            out.append(res)
        return out

    monkeypatch.setattr(qnn, "place_models", place_models)
    zoo.compile_all(tmp_path, "qnn", None, timeout=10, batch=40, follow=False)
    assert sorted(built) == ["a.torchscript", "c.torchscript"]
    for key in built:
        rec = json.loads((tmp_path / "results" / "qnn" / f"{key}.json").read_text())
        assert rec["status"] == "ok" and rec["arch"] == key.split(".")[0]
        assert not (tmp_path / "claims" / "qnn" / key).exists()
    assert not (tmp_path / "results" / "qnn" / "b.torchscript.json").exists()
    assert held.read_text() == str(os.getppid())
    assert [t[0] for t in zoo.pending(tmp_path, "qnn")] == ["b"]


def test_a_follow_compile_gathers_files_before_starting_a_worker(tmp_path, monkeypatch):
    """With ``--follow`` and the exporters still running, one waiting file does not start a
    worker until ``gather`` seconds have passed; the time is counted, not slept here."""
    zoo = _script()
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    _tiny_onnx(tmp_path / "models" / "a" / "torchscript.onnx")
    naps: list[float] = []
    batches: list[list[str]] = []

    def nap(seconds):
        naps.append(seconds)
        if len(naps) > 50:
            pytest.fail("the follow loop never started a worker")
        if batches:  # the file was built: the exporters finish
            (tmp_path / zoo.EXPORT_DONE).write_text("done\n")

    def place_models(jobs, htp_arch, python, *, progress, **_):
        batches.append([j["key"] for j in jobs])
        for job in jobs:
            progress(qnn.QnnResult(key=job["key"], path=job["path"], status="ok"))
        return []

    monkeypatch.setattr(zoo.time, "sleep", nap)
    monkeypatch.setattr(qnn, "place_models", place_models)
    zoo.compile_all(tmp_path, "qnn", None, timeout=10, batch=40, follow=True, min_batch=6, gather=60.0)
    assert batches == [["a.torchscript"]]
    # four looks 15 s apart while gathering, then the worker; then the usual wait for exports
    assert naps == [zoo.GATHER_POLL] * 4 + [30]


def test_an_exporter_skips_the_architecture_another_one_is_building(tmp_path):
    """Exporters started at several points of the zoo (``--start``, ``--reverse``) meet: an
    architecture another live exporter holds is left to it, the others are built and exported,
    and no claim of this process is left behind."""
    zoo = _script()
    held = tmp_path / "claims" / "export" / "nn_grn"
    held.parent.mkdir(parents=True)
    held.write_text(str(os.getppid()))
    zoo.export_all(tmp_path, "torch", ["nn_convnet_relu", "nn_grn"], ["torchscript"], timeout=300, build_timeout=120)
    meta = json.loads((tmp_path / "models" / "nn_convnet_relu" / "meta.json").read_text())
    assert meta["status"] == "built" and meta["exports"]["torchscript"]["status"] == "ok"
    assert (tmp_path / "models" / "nn_convnet_relu" / "torchscript.onnx").stat().st_size > 0
    assert not (tmp_path / "models" / "nn_grn").exists()
    assert not (tmp_path / "claims" / "export" / "nn_convnet_relu").exists()
    assert held.read_text() == str(os.getppid())


def test_a_transformers_class_is_imported_when_its_builder_runs(tmp_path):
    """Listing the zoo imports no modeling module (every exporter lists all ~600 at start-up); a
    class that cannot be imported here is a skip with that reason, not a build failure."""
    pytest.importorskip("transformers")
    zoo = _script()
    import zoo_models

    builders, skipped = zoo_models.transformers_zoo()
    assert len(builders) > 100 and all(name.startswith("hf_") for name, _ in builders)
    assert all("not importable" not in why for why in skipped.values())
    models = tmp_path / "models"
    zoo._export_one(models, "hf_gone", zoo_models._hf_builder("bert", "NoSuchModelHere"), {"arch": "hf_gone"},
                    ["torchscript"], 60, "[1/1]")
    meta = json.loads((models / "hf_gone" / "meta.json").read_text())
    assert meta == {"arch": "hf_gone", "status": "skipped",
                    "reason": "NoSuchModelHere not importable here (missing optional dependency)"}


def test_only_walks_the_architectures_in_the_order_given():
    """``--only`` is a priority list (the cheapest architectures first for a timed run): the
    exporter walks it as written, not in the zoo's order, and a name given twice is built once."""
    zoo = _script()
    names = [n for n, _ in zoo.builders("torch", ["nn_grn", "nn_convnet_relu", "nn_grn", "nn_no_such_model"])]
    assert names == ["nn_grn", "nn_convnet_relu"]
    zoo_order = [n for n, _ in zoo.builders("torch", None)]
    assert zoo_order.index("nn_convnet_relu") < zoo_order.index("nn_grn")  # so the order above is --only's


def test_smallest_first_compiles_the_smallest_files_first(tmp_path, monkeypatch):
    """``--retry-timeouts --smallest-first``: the files whose build timed out are built again, the
    smallest first (a long budget per file answers for the quick ones before the slow ones); a file
    with a finished result is not built again."""
    zoo = _script()
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    sizes = {"a": 3, "b": 1, "c": 2, "d": 0}
    for arch, extra in sizes.items():
        path = tmp_path / "models" / arch / "torchscript.onnx"
        _tiny_onnx(path)
        with open(path, "ab") as fh:
            fh.write(b"\0" * (1000 * extra))  # trailing bytes: a bigger file, same graph
        status = "ok" if arch == "d" else "timeout"
        (tmp_path / "results" / "qnn").mkdir(parents=True, exist_ok=True)
        (tmp_path / "results" / "qnn" / f"{arch}.torchscript.json").write_text(json.dumps({"status": status}))
    batches: list[list[str]] = []

    def place_models(jobs, htp_arch, python, *, progress, **_):
        batches.append([j["key"] for j in jobs])
        for job in jobs:
            progress(qnn.QnnResult(key=job["key"], path=job["path"], status="ok"))
        return []

    monkeypatch.setattr(qnn, "place_models", place_models)
    zoo.compile_all(tmp_path, "qnn", None, timeout=600, batch=40, follow=False, retry_timeouts=True,
                    smallest_first=True)
    assert batches == [["b.torchscript", "c.torchscript", "a.torchscript"]]
    zoo.compile_all(tmp_path, "qnn", None, timeout=600, batch=40, follow=False, retry_timeouts=True)
    assert len(batches) == 1  # all answered: nothing timed out any more


def test_a_worker_that_does_not_start_puts_its_files_back_and_a_fresh_one_builds_them(tmp_path, monkeypatch):
    """Under load a toolchain worker's imports can outlast its start-up budget: the compile run
    does not die, the files that got no answer go back to the queue (a retried timeout too) and
    the next worker builds them; three failed starts in a row end the run with the adapter's error."""
    zoo = _script()
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    for arch in ("a", "b"):
        _tiny_onnx(tmp_path / "models" / arch / "torchscript.onnx")
    (tmp_path / "results" / "qnn").mkdir(parents=True)
    (tmp_path / "results" / "qnn" / "b.torchscript.json").write_text(json.dumps({"status": "timeout"}))
    calls: list[list[str]] = []
    starts = {"fail": 1}

    def place_models(jobs, htp_arch, python, *, progress, startup_timeout, **_):
        calls.append([j["key"] for j in jobs])
        assert startup_timeout == 400.0
        if starts["fail"]:
            starts["fail"] -= 1
            if len(jobs) > 1:  # the worker answered for one file, then died
                progress(qnn.QnnResult(key=jobs[0]["key"], path=jobs[0]["path"], status="ok"))
            raise qnn.QnnUnavailable("QNN worker did not start within 400 s")
        for job in jobs:
            progress(qnn.QnnResult(key=job["key"], path=job["path"], status="ok"))
        return []

    monkeypatch.setattr(zoo.time, "sleep", lambda s: None)
    monkeypatch.setattr(qnn, "place_models", place_models)
    zoo.compile_all(tmp_path, "qnn", None, timeout=600, batch=40, follow=False, retry_timeouts=True,
                    startup_timeout=400.0)
    assert calls == [["a.torchscript", "b.torchscript"], ["b.torchscript"]]
    assert json.loads((tmp_path / "results" / "qnn" / "b.torchscript.json").read_text())["status"] == "ok"
    assert not [f for f in (tmp_path / "claims" / "qnn").iterdir() if f.name != ".lock"]

    (tmp_path / "results" / "qnn" / "b.torchscript.json").unlink()
    starts["fail"] = 99
    with pytest.raises(qnn.QnnUnavailable):
        zoo.compile_all(tmp_path, "qnn", None, timeout=600, batch=40, follow=False, startup_timeout=400.0)
    assert len(calls) == 2 + zoo.MAX_START_FAILURES


def test_an_export_error_names_the_chained_cause_the_exporter_buries():
    """dynamo's "Failed to convert the exported program ..." says nothing of why; the cause is
    chained (``raise ... from``) or named on a later line: the recorded error names it."""
    zoo = _script()

    def failing():
        try:
            try:
                raise NotImplementedError("aten::histc has no ONNX decomposition\nmore")
            except NotImplementedError as exc:
                raise RuntimeError("Failed to convert the exported program to an ONNX model.") from exc
        except RuntimeError as exc:
            raise ValueError("dynamo exporter failed to export Wrapped: Failed to convert") from exc

    with pytest.raises(ValueError) as info:
        failing()
    assert zoo._error_text(info.value) == ("ValueError: dynamo exporter failed to export Wrapped: Failed to convert"
                                           " | NotImplementedError: aten::histc has no ONNX decomposition")
    assert zoo._error_text(RuntimeError("head\nstep 3\nTypeError: bad operand")) == "RuntimeError: head | TypeError: bad operand"
    assert zoo._error_text(RuntimeError("only a head")) == "RuntimeError: only a head"
    # what pytest_npucheck.export writes: every chained cause on a "Caused by" line, innermost last
    text = ("dynamo exporter failed to export Wrapped: Failed to convert\nCaused by ConversionError: step 3"
            "\nCaused by DispatchError: No ONNX function found for aten::histc\nExporter output (last lines):"
            "\n  ValueError: noise")
    assert zoo._error_text(RuntimeError(text)) == ("RuntimeError: dynamo exporter failed to export Wrapped: Failed to "
                                                   "convert | DispatchError: No ONNX function found for aten::histc")


def test_processes_that_find_a_dead_processs_claim_at_once_take_it_over_only_once(tmp_path):
    """Restarted exporters (or compile processes) meet the claims their dead predecessors left:
    of several processes that try to take one over at the same moment, exactly one gets it."""
    import multiprocessing

    zoo = _script()
    claim_file = tmp_path / "claims" / "export" / "hf_model"
    claim_file.parent.mkdir(parents=True)
    claim_file.write_text(str(NO_SUCH_PID))
    ctx = multiprocessing.get_context("fork")
    barrier, won = ctx.Barrier(6), ctx.Queue()

    looked = zoo.claimed_elsewhere

    def slow_look(*args):  # widens the moment between reading the owner and writing our own pid
        answer = looked(*args)
        time.sleep(0.3)
        return answer

    zoo.claimed_elsewhere = slow_look

    def contender():
        barrier.wait()
        won.put((os.getpid(), zoo.claim(tmp_path, "export", "hf_model")))
        barrier.wait()  # stay alive until every contender has tried: a live claim is not taken over

    procs = [ctx.Process(target=contender) for _ in range(6)]
    for p in procs:
        p.start()
    results = [won.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=120)
    winners = [pid for pid, ok in results if ok]
    assert len(winners) == 1
    assert claim_file.read_text() == str(winners[0])
    assert not [f for f in claim_file.parent.iterdir() if f.name.startswith(".hf_model")]  # no temp file left
