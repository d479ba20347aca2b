"""Tests for the rknn-toolkit2 oracle adapter.

The parsing/mapping tests run everywhere.  The end-to-end tests need a python with
rknn-toolkit2 installed, named by ``NPUCHECK_RKNN_PYTHON``; they are skipped otherwise.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from pytest_npucheck.toolchains.rknn import adapter as oracle

ESC = "\x1b"

SAMPLE_LOG = "\n".join([
    "I rknn-toolkit2 version: 2.5.0",
    ESC + "[1;33mW" + ESC + "[0m " + ESC + "[1;33mload_onnx: The config.mean_values is None, "
    "zeros will be set for input 0!" + ESC + "[0m",
    "D RKNN: [10:00:00.000] " + "-" * 60,
    "D RKNN: [10:00:00.000]            Network Layer Information Table",
    "D RKNN: [10:00:00.000] " + "-" * 60,
    "D RKNN: [10:00:00.000] ID   OpType             DataType Target InputShape"
    "                OutputShape      Cycles(DDR/NPU/Total)    RW(KB)       FullName",
    "D RKNN: [10:00:00.000] " + "-" * 60,
    "D RKNN: [10:00:00.000] 0    InputOperator      FLOAT16  CPU    \\"
    "                        (1,8,16,16)      0/0/0                    0            "
    "InputOperator:x",
    "D RKNN: [10:00:00.000] 1    Conv               FLOAT16  NPU    (1,8,16,16),(8,8,3,3)"
    "    (1,8,16,16)      396/2304/2304            5            Conv:conv 0",
    "D RKNN: [10:00:00.000] 2    Erf                FLOAT16  CPU    (1,8,16,16)"
    "              (1,8,16,16)      0/0/0                    4            Erf:/blk/erf:0",
    "D RKNN: [10:00:00.000] 3    Div                FLOAT16  CPU    (1,8,16,16)"
    "              (1,8,16,16)      0/0/0                    4            Div:recip#1",
    "D RKNN: [10:00:00.000] 4    Reshape            FLOAT16  CPU    (1,8,16,16)"
    "              (1,2048)         0/0/0                    4            Reshape:tail_out-rs",
    "D RKNN: [10:00:00.000] 5    Conv               FLOAT16  NPU    (1,1,16,16),(1,1,1,1)"
    "    (1,1,16,16)      196/512/512              0",
    "D RKNN: [10:00:00.000] 6    OutputOperator     FLOAT16  CPU    (1,2048)"
    "                 \\                0/0/0                    4            "
    "OutputOperator:y",
    "D RKNN: [10:00:00.000] " + "-" * 60,
    "D RKNN: [10:00:00.000] <<<<<<<< end: rknn::RKNNModelRegCmdbuildPass",
])

NODES = [
    {"name": "conv 0", "op_type": "Conv", "inputs": ["x"], "outputs": ["c"]},
    {"name": "/blk/erf:0", "op_type": "Erf", "inputs": ["c"], "outputs": ["e"]},
    {"name": "recip", "op_type": "Reciprocal", "inputs": ["e"], "outputs": ["r"]},
    {"name": "tail", "op_type": "Relu", "inputs": ["r"], "outputs": ["tail_out"]},
]


def _result(status: str = "ok", log: str = SAMPLE_LOG) -> oracle.RknnResult:
    return oracle.RknnResult(key="m", path="m.onnx", status=status,
                             rows=oracle.parse_layer_table(log) if status == "ok" else [])


def test_strip_ansi() -> None:
    assert oracle.strip_ansi(ESC + "[1;31mE" + ESC + "[0m boom") == "E boom"


def test_parse_layer_table() -> None:
    rows = oracle.parse_layer_table(SAMPLE_LOG)
    assert [r.op_type for r in rows] == ["InputOperator", "Conv", "Erf", "Div", "Reshape",
                                         "Conv", "OutputOperator"]
    assert rows[1].full_name == "Conv:conv 0" and rows[1].onnx_name == "conv 0"
    assert rows[2].onnx_name == "/blk/erf:0"  # split at the first colon only
    assert rows[5].full_name == "" and rows[5].onnx_name is None  # unnamed helper row
    assert rows[0].is_io and rows[-1].is_io
    assert [r.target for r in rows[1:-1]] == ["NPU", "CPU", "CPU", "CPU", "NPU"]


def test_placement_and_attribution() -> None:
    res = _result()
    place = oracle.onnx_placement(res, NODES)
    # Erf named directly; Reciprocal rewritten to a CPU Div ("#1"); Relu only has a CPU
    # Reshape helper on its output -> stays npu (the Relu itself was fused away)
    assert place == {"conv 0": "npu", "/blk/erf:0": "cpu", "recip": "cpu", "tail": "npu"}
    attr = oracle.attribute_rows(res, NODES)
    assert attr["tail"] == {"cpu_helpers": ["Reshape:tail_out-rs"]}
    assert attr["recip"] == {"cpu": ["Div:recip#1"]}
    assert [r.full_name for r in oracle.unmapped_cpu_rows(res, [n["name"] for n in NODES])] \
        == ["Reshape:tail_out-rs"]


def test_failed_build_is_unsupported() -> None:
    res = _result("build_failed")
    assert set(oracle.onnx_placement(res, ["a", "b"]).values()) == {"unsupported"}


def test_extract_errors() -> None:
    log = "\n".join([
        ESC + "[1;31mE" + ESC + "[0m " + ESC + "[1;31mbuild: ",
        "Found Random node 'r', which is not supported!" + ESC + "[0m",
        ESC + "[1;31mE" + ESC + "[0m " + ESC + "[1;31mrknn-toolkit2 version: 2.5.0" + ESC + "[0m",
        ESC + "[1;31mE" + ESC + "[0m " + ESC + "[1;31mbuild: Traceback (most recent call last):",
        '  File "x.py", line 1, in f',
        "ValueError: ",
        "Found Random node 'r', which is not supported!" + ESC + "[0m",
    ])
    assert oracle.extract_errors(log) == ["build: Found Random node 'r', which is not supported!"]


def test_find_python_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(oracle.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert oracle.find_rknn_python(str(tmp_path / "nope")) is None
    exe = tmp_path / "py"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert oracle.find_rknn_python(str(exe)) == str(exe)
    monkeypatch.setenv(oracle.ENV_VAR, str(exe))
    assert oracle.find_rknn_python() == str(exe)


def test_unavailable_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(oracle.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(oracle.RknnUnavailable):
        oracle.compile_models(["x.onnx"], python=str(tmp_path / "missing"))


# ------------------------------------------------------------------------------------------------
# end-to-end (needs rknn-toolkit2)
# ------------------------------------------------------------------------------------------------

RKNN_PYTHON = os.environ.get(oracle.ENV_VAR, "")
needs_rknn = pytest.mark.skipif(
    not (RKNN_PYTHON and os.path.isfile(RKNN_PYTHON) and os.access(RKNN_PYTHON, os.X_OK)),
    reason="set %s to the python of a venv with rknn-toolkit2" % oracle.ENV_VAR)


@pytest.fixture(scope="module")
def probe_paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    pytest.importorskip("onnx")
    from pytest_npucheck.probe.models import build_probes, save_probes

    ids = ["Relu.f32.r4", "Erf.f32.r4", "RandomUniform.f32.r4"]
    probes = [p for p in build_probes(ids) if p.id in ids]
    paths = save_probes(probes, tmp_path_factory.mktemp("rknn-probes"))
    return {p.id: str(path) for p, path in zip(probes, paths)}


@needs_rknn
def test_compile_tiny_probes(probe_paths: dict[str, str]) -> None:
    jobs = [{"key": k, "path": v} for k, v in probe_paths.items()]
    res = {r.key: r for r in oracle.compile_models(jobs, "rk3588", timeout=120)}
    relu, erf, rnd = res["Relu.f32.r4"], res["Erf.f32.r4"], res["RandomUniform.f32.r4"]
    assert relu.status == "ok" and erf.status == "ok"
    assert oracle.onnx_placement(relu) == {"Relu_0": "npu"}
    assert oracle.onnx_placement(erf) == {"Erf_0": "cpu"}
    assert any(r.op_type == "Erf" and r.target == "CPU" for r in erf.rows)
    assert rnd.status == "build_failed" and "Random" in rnd.message
    assert set(oracle.onnx_placement(rnd).values()) == {"unsupported"}


@needs_rknn
def test_crash_and_timeout_isolated(probe_paths: dict[str, str]) -> None:
    relu = probe_paths["Relu.f32.r4"]
    jobs = [
        oracle.ModelJob(path=relu, key="crash", debug={"crash": 11}),
        oracle.ModelJob(path=relu, key="hang", debug={"hang": 60}),
        oracle.ModelJob(path=relu, key="after"),
    ]
    # stall_cpu: a sleeping build is not a hang by CPU (the wall-clock timeout ends it), and a real
    # build that writes its log as it goes is never killed for silence
    res = {r.key: r for r in oracle.compile_models(jobs, "rk3588", timeout=10, stall_cpu=2.0)}
    assert res["crash"].status == "crashed"
    assert res["crash"].extra["earlier_attempts"] == [res["crash"].message]
    assert "exit code 11" in res["crash"].message
    assert res["hang"].status == "timeout"
    assert "earlier_attempts" not in res["hang"].extra
    # the debug hang sleeps: the timeout says how little CPU the build had, so a starved build on a
    # loaded machine (little CPU) is told from a compiler loop (the whole budget on the CPU)
    assert 0 <= res["hang"].extra["cpu_seconds"] < 5
    assert re.search(r"did not finish within 10 s \(\d+ CPU-s used\)", res["hang"].message)
    assert res["after"].status == "ok" and 0 < res["after"].extra["cpu_seconds"] < 2.0
    assert "stalled_cpu_seconds" not in res["hang"].extra and "stalled_cpu_seconds" not in res["after"].extra


@needs_rknn
@pytest.mark.reliability("F11")
def test_crash_that_does_not_repeat_is_built_again(probe_paths: dict[str, str],
                                                   tmp_path: Path) -> None:
    """A model whose build kills the worker once (rknn-toolkit2 2.5.0 aborts now and then on a
    Pad with an axes input) is built again in a fresh worker; with retries=0 the crash stands."""
    relu = probe_paths["Relu.f32.r4"]

    def jobs(marker: Path) -> list:
        return [oracle.ModelJob(path=relu, key="flaky", debug={"crash_once": str(marker)}),
                oracle.ModelJob(path=relu, key="after")]

    res = {r.key: r for r in oracle.compile_models(jobs(tmp_path / "a"), "rk3588", timeout=120)}
    assert res["flaky"].status == "ok" and res["after"].status == "ok"
    assert oracle.onnx_placement(res["flaky"]) == {"Relu_0": "npu"}
    [first] = res["flaky"].extra["earlier_attempts"]
    assert "exit code 6" in first
    assert "earlier_attempts" not in res["after"].extra
    res = {r.key: r for r in oracle.compile_models(jobs(tmp_path / "b"), "rk3588", timeout=120,
                                                   retries=0)}
    assert res["flaky"].status == "crashed" and res["after"].status == "ok"
    assert "earlier_attempts" not in res["flaky"].extra


def test_extra_probe_findings_in_table() -> None:
    """The extra probes (probe.extra_families) are in the committed results and the table reproduces
    the placements they were written for (no compiler needed)."""
    import json

    from pytest_npucheck.probe.extra_families import build_extra_probes
    from pytest_npucheck.toolchains.rknn.table import predict
    from pytest_npucheck.tables import Catalog

    repo = Path(__file__).resolve().parents[2]
    results = json.loads((repo / "probes/rknn/2.5.0/rk3588.extra.results.json").read_text())
    recs = {r["id"]: r for r in results["probes"]}
    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    probes = {p.id: p for p in build_extra_probes()}
    # the whole-model rejection families (models_rnn_layout) are merged into the 2.3.2 results only
    # (tests/test_rknn_rejections.py); every other extra probe is in these results
    from pytest_npucheck.probe import models_rnn_layout
    from pytest_npucheck.probe.builder import Collector

    c = Collector()
    for fam in models_rnn_layout.FAMILIES:
        fam(c)
    rejections = {p.id for p in c.probes}
    assert set(probes) - rejections == set(recs)
    for pid in ("x.Einsum.qk.spaces=yes.n=256.d=8.f32.r3", "x.Einsum.qk.spaces=no.n=256.d=8.f32.r3",
                "x.DepthToSpace.blocksize=3.mode=CRD.cout=1.hw=32.f32.r4",
                "x.DepthToSpace.blocksize=2.mode=CRD.cout=1.hw=32.f32.r4",
                "x.Transpose.perm=0_1_3_2_4_5.shape=1_4_4_4_4_32.f32.r6",
                "x.Transpose.perm=0_1_4_2_5_3.shape=1_4_4_4_4_32.f32.r6",
                "x.Div.ctx=rmsnorm.d=32.f32.r3", "x.Div.a=const_scalar.shape=1_16_1.f32.r3",
                "x.Cast.to=bool.ctx=where.bool.r4", "x.Cast.to=int32.bool.r4"):
        rec = recs[pid]
        pred = predict(table, probes[pid].model)
        for node in rec["focus"]:
            got = "npu" if pred[node] == "folded" else pred[node]
            assert got == rec["placement"][node], (pid, node, pred[node], rec["placement"][node])


# ------------------------------------------------------------------------------------------------
# committed RKNN tables vs. the real compiler (every installed rknn-toolkit2 version, every SoC)
# ------------------------------------------------------------------------------------------------

EXTRA_PYTHONS_VAR = "NPUCHECK_RKNN_PYTHONS"
"""More rknn venv pythons (os.pathsep-separated), e.g. 2.2.0 and 2.3.2 next to the 2.5.0 one of
``NPUCHECK_RKNN_PYTHON``; CI installs only 2.5.0, so only its tables are sampled there."""


def _installed_rknn() -> dict[str, str]:
    """``{rknn-toolkit2 version: python}`` for every configured rknn venv."""
    import subprocess

    pythons = [RKNN_PYTHON] + os.environ.get(EXTRA_PYTHONS_VAR, "").split(os.pathsep)
    out: dict[str, str] = {}
    for py in pythons:
        if not (py and os.path.isfile(py) and os.access(py, os.X_OK)):
            continue
        proc = subprocess.run(
            [py, "-c", "from importlib.metadata import version; print(version('rknn-toolkit2'))"],
            capture_output=True, text=True, timeout=60)
        if proc.returncode == 0 and proc.stdout.strip():
            out.setdefault(proc.stdout.strip(), py)
    return out


def _sample(version: str, soc: str, per_verdict: int = 2) -> list[dict]:
    """A deterministic sample of single-op probes whose committed placement the table
    reproduces (not in its errata): ``per_verdict`` each of npu, cpu and unsupported."""
    import hashlib
    import json

    repo = Path(__file__).resolve().parents[2]
    results = json.loads((repo / "probes/rknn" / version / ("%s.results.json" % soc)).read_text())
    table = json.loads((repo / "op_support_tables/rknn" / version / ("%s.json" % soc)).read_text())
    errata = "\n".join(table["provenance"]["errata"])
    picked: list[dict] = []
    for verdict in ("npu", "cpu", "unsupported"):
        recs = [r for r in results["probes"]
                if r["kind"] == "op" and r["verdict"] == verdict and not r.get("config")
                and not r.get("load") and r["status"] in ("ok", "build_failed", "load_failed")
                and "probe %s:" % r["id"] not in errata]
        recs.sort(key=lambda r: hashlib.sha256((soc + r["id"]).encode()).hexdigest())
        picked += recs[:per_verdict]
    return picked


def _rknn_table_targets() -> list[tuple[str, str, str]]:
    from pytest_npucheck.tables import Catalog

    installed = _installed_rknn() if RKNN_PYTHON else {}
    refs = sorted((v, s) for (tc, v, s) in Catalog.discover().refs if tc == "rknn")
    return [(v, s, installed[v]) for v, s in refs if v in installed]


@needs_rknn
@pytest.mark.parametrize("version,soc,python", _rknn_table_targets() or [
    pytest.param("-", "-", "-", marks=pytest.mark.skip(reason="no rknn table for the installed "
                                                             "rknn-toolkit2 version"))])
def test_table_sample_against_real_compiler(tmp_path: Path, version: str, soc: str,
                                            python: str) -> None:
    """Recompile a sample of each table's probes with the real compiler of that version for that
    SoC (int8 with a calibration set for the int8-only SoCs, as the probes were built): the
    compiler still places them as recorded, and the table predicts that placement."""
    from pytest_npucheck.probe.models import build_probes, save_probes
    from pytest_npucheck.toolchains.rknn.probe import INT8_ONLY_SOCS, write_calibration
    from pytest_npucheck.toolchains.rknn.table import predict
    from pytest_npucheck.tables import Catalog

    recs = _sample(version, soc)
    assert {r["verdict"] for r in recs} >= {"npu", "cpu"}
    ids = [r["id"] for r in recs]
    probes = {p.id: p for p in build_probes(ids) if p.id in ids}
    paths = dict(zip(probes, save_probes(list(probes.values()), tmp_path)))
    jobs = []
    for n, pid in enumerate(ids):
        build = {}
        if soc in INT8_ONLY_SOCS:
            build = {"do_quantization": True,
                     "dataset": write_calibration(probes[pid], tmp_path / ("calib%d" % n))}
        jobs.append(oracle.ModelJob(path=str(paths[pid]), key=pid, build=build))
    got = {r.key: r for r in oracle.compile_models(jobs, soc, python, timeout=120)}
    table = Catalog.discover().table("rknn@%s/%s" % (version, soc))
    for rec in recs:
        res = got[rec["id"]]
        placement = oracle.onnx_placement(res, rec["nodes"])
        pred = predict(table, probes[rec["id"]].model)
        for node in rec["focus"]:
            assert placement[node] == rec["placement"][node], (rec["id"], node, res.status,
                                                               res.message)
            want = "unsupported" if res.status != "ok" else placement[node]
            assert ("npu" if pred[node] == "folded" else pred[node]) == want, (rec["id"], node)


@needs_rknn
def test_int8_build_with_calibration_set(probe_paths: dict[str, str], tmp_path: Path) -> None:
    """A quantized build (ModelJob.build) compiles to INT8 layers; the fp16 default is unchanged."""
    from pytest_npucheck.probe.models import build_probes
    from pytest_npucheck.toolchains.rknn.probe import write_calibration

    probe = next(p for p in build_probes(["Relu.f32.r4"]) if p.id == "Relu.f32.r4")
    ds = write_calibration(probe, tmp_path)
    jobs = [oracle.ModelJob(path=probe_paths["Relu.f32.r4"], key="int8",
                            build={"do_quantization": True, "dataset": ds}),
            oracle.ModelJob(path=probe_paths["Relu.f32.r4"], key="fp16")]
    res = {r.key: r for r in oracle.compile_models(jobs, "rk3588", timeout=120)}
    assert res["int8"].status == "ok" and res["fp16"].status == "ok"
    assert {r.dtype for r in res["int8"].rows if r.op_type == "Relu"} == {"INT8"}
    assert {r.dtype for r in res["fp16"].rows if r.op_type == "Relu"} == {"FLOAT16"}
    assert oracle.onnx_placement(res["int8"]) == {"Relu_0": "npu"}


def test_a_reshape_swapped_in_front_of_a_cast_is_the_reshape_node() -> None:
    """rknn-toolkit2 2.5.0 turns int64 mask -> Cast(bool) -> Reshape into Reshape:<mask>_rs (CPU, int64)
    -> Cast (x.Reshape.ctx=mask_cast.* probes): the renamed row is the Reshape node, which has no row of its
    own; it was counted as a helper of the Cast and the Reshape as NPU."""
    def row(i: int, op: str, dtype: str, target: str, shape: str, name: str) -> str:
        return ("D RKNN: [10:00:00.000] %d    %-18s %-8s %-6s %-25s (1,1,1,32)      0/0/0                    4"
                "            %s" % (i, op, dtype, target, shape, name))
    log = "\n".join(SAMPLE_LOG.splitlines()[:7] + [
        row(1, "Reshape", "INT64", "CPU", "(1,32),(4)", "Reshape:mask_rs"),
        row(2, "Cast", "INT64", "CPU", "(1,1,1,32)", "Cast:cast"),
        row(3, "Add", "FLOAT16", "NPU", "(1,4,32,32),(1,1,1,32)", "Add:add"),
        "D RKNN: [10:00:00.000] " + "-" * 60])
    nodes = [{"name": "cast", "op_type": "Cast", "inputs": ["mask"], "outputs": ["m"]},
             {"name": "view", "op_type": "Reshape", "inputs": ["m", "shape"], "outputs": ["m4"]},
             {"name": "add", "op_type": "Add", "inputs": ["s", "m4"], "outputs": ["y"]}]
    res = _result(log=log)
    assert oracle.attribute_rows(res, nodes)["view"] == {"cpu_rewrites": ["Reshape:mask_rs"]}
    assert oracle.onnx_placement(res, nodes) == {"cast": "cpu", "view": "cpu", "add": "npu"}
    # a Reshape row of the same tensor in front of a Cast read by a Relu stays the Cast's helper
    other = [dict(nodes[0]), {"name": "view", "op_type": "Relu", "inputs": ["m"], "outputs": ["m4"]}, nodes[2]]
    assert oracle.attribute_rows(res, other)["cast"] == {"cpu_helpers": ["Reshape:mask_rs"], "cpu": ["Cast:cast"]}
