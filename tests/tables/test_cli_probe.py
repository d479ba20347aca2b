"""`npucheck probe`: usage errors, writing and checking tables from recorded probe results, and
real runs of a tiny probe subset with the installed toolchains (rknn-toolkit2 named by
NPUCHECK_RKNN_PYTHON, onnxruntime-qnn by NPUCHECK_QNN_PYTHON; skipped when not installed)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from pytest_npucheck.cli import main
from pytest_npucheck.probe import refresh
from pytest_npucheck.tables import Catalog
from pytest_npucheck.toolchains import registry

REPO = Path(__file__).resolve().parents[2]
RKNN_RESULTS = REPO / "probes/rknn/2.5.0/rk3588.results.json"
QNN_EXTRA_RESULTS = REPO / "probes/qnn/2.51.0/htp-v73.fp16.extra.results.json"


def run(capsys, *args, tables=None):
    argv = (["--tables", str(tables)] if tables else []) + ["probe", *map(str, args)]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


def _python(var: str) -> str:
    p = os.environ.get(var, "")
    return p if p and os.path.isfile(p) and os.access(p, os.X_OK) else ""


def _errata_ids(table_path: Path) -> set[str]:
    raw = json.loads(table_path.read_text(encoding="utf-8"))
    return {m.group(1) for line in raw["provenance"]["errata"] if (m := re.match(r"probe (\S+):", line))}


def _altered_copy(tmp_path: Path, toolchain: str, version: str, soc: str, op: str, status: str) -> Path:
    """A table directory holding a copy of the committed table with one op's status changed."""
    src = REPO / "op_support_tables" / toolchain / version / f"{soc}.json"
    raw = json.loads(src.read_text(encoding="utf-8"))
    assert raw["ops"][f"ai.onnx:{op}"]["status"] != status
    raw["ops"][f"ai.onnx:{op}"]["status"] = status
    raw["ops"][f"ai.onnx:{op}"].pop("constraints", None)
    d = tmp_path / "altered"
    (d / toolchain / version).mkdir(parents=True)
    (d / toolchain / version / f"{soc}.json").write_text(json.dumps(raw, indent=1), encoding="utf-8")
    return d


# -- usage errors (no toolchain needed) --------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["snpe", "--version", "2025.06"], "unknown toolchain 'snpe' for probing"),
    (["rknn", "--version", "2.5.0", "--soc", "rk9999"], "unknown RKNN SoC 'rk9999'"),
    (["qnn", "--version", "2.51", "--soc", "v73"], "invalid QNN SoC 'v73'"),
    (["qnn", "--version", "2.51", "--soc", "htp-v1"], "unknown QNN HTP architecture 'htp-v1'"),
    (["rknn", "--soc", "rk3588"], "--version is required"),
    (["rknn", "--version", "two", "--soc", "rk3588"], "invalid rknn version 'two'"),
    (["rknn", "--version", "2.0.9", "--soc", "rk3588", "--check-table"], "unknown version '2.0.9' of rknn"),
    (["qnn", "--version", "2.51", "--soc", "htp-v75", "--check-table"], "unknown SoC 'htp-v75'"),
    (["rknn", "--version", "2.5.0", "--select", "Relu", "--write-table"], "--write-table needs a full probe run"),
    (["rknn", "--version", "2.5.0", "--write-table", "--check-table"], "not allowed with argument"),
    (["rknn", "--version", "2.5.0", "--precision", "int8"], "--precision is a QNN option"),
    (["qnn", "--version", "2.51", "--precision", "int8", "--check-table"], "--check-table compares fp16"),
    (["rknn", "--version", "2.5.0", "--results", RKNN_RESULTS], "--results is for --write-table or --check-table"),
    (["rknn", "--version", "2.5.0", "--soc", "rk3576", "--results", RKNN_RESULTS, "--check-table"],
     "`soc` is 'rk3588', not 'rk3576'"),
    (["rknn", "--version", "2.5.0", "--results", "/no/such/results.json", "--check-table"], "--results /no/such/results.json"),
])
def test_usage_errors_exit_2(capsys, args, needle):
    code, out, err = run(capsys, *args)
    assert code == 2 and needle in err, err


@pytest.mark.parametrize("toolchain,var,script", [
    ("rknn", "NPUCHECK_RKNN_PYTHON", "scripts/setup-rknn-venv.sh"),
    ("qnn", "NPUCHECK_QNN_PYTHON", "scripts/setup-qnn-venv.sh"),
])
def test_missing_toolchain_python_says_how_to_install_it(capsys, monkeypatch, tmp_path, toolchain, var, script):
    monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)  # no .venv-<toolchain> here
    code, _, err = run(capsys, toolchain, "--version", "2.5.0" if toolchain == "rknn" else "2.51", "--select", "Relu")
    assert code == 2 and f"no {registry.get(toolchain).package} python found" in err and script in err
    code, _, err = run(capsys, toolchain, "--version", "2.5.0", "--python", tmp_path / "nope")
    assert code == 2 and "is not an executable file" in err and script in err


# -- from recorded results (no toolchain needed) -----------------------------------------------

@pytest.mark.parametrize("toolchain,version,soc,results", [
    ("rknn", "2.5.0", "rk3588", RKNN_RESULTS),  # + rk3588.extra.results.json
    ("qnn", "2.51.0", "htp-v73", REPO / "probes/qnn/2.51.0/htp-v73.fp16.results.json"),  # + extra, int8
])
def test_write_table_from_recorded_results_reproduces_the_committed_table(capsys, tmp_path, toolchain, version,
                                                                          soc, results):
    committed_path = REPO / "op_support_tables" / toolchain / version / f"{soc}.json"
    out = tmp_path / f"{soc}.json"
    code, _, err = run(capsys, toolchain, "--version", version, "--soc", soc, "--results", results,
                       "--write-table", "--table-out", out)
    assert code == 0, err
    written = json.loads(out.read_text(encoding="utf-8"))
    committed = json.loads(committed_path.read_text(encoding="utf-8"))
    for t in (written, committed):
        t["provenance"].pop("generated")
    # a table written to a new place starts at revision 1; the committed one keeps its corrections
    assert written.pop("revision") == 1 and "errata" not in written
    revision, errata = committed.pop("revision"), committed.pop("errata", [])
    assert sorted({e["revision"] for e in errata}) == list(range(2, revision + 1))  # several errata may share one
    assert written == committed
    assert f"wrote {out}" in err


def test_write_table_from_a_subset_is_refused_by_the_builder(capsys, tmp_path):
    doc = json.loads(RKNN_RESULTS.read_text(encoding="utf-8"))
    doc["probes"] = [p for p in doc["probes"] if p["id"].startswith("Relu.")]
    sub = tmp_path / "rk3588.results.json"
    sub.write_text(json.dumps(doc), encoding="utf-8")
    out = tmp_path / "table.json"
    code, _, err = run(capsys, "rknn", "--version", "2.5.0", "--soc", "rk3588", "--results", sub,
                       "--write-table", "--table-out", out)
    assert code == 2 and f"cannot build the rknn@2.5.0/rk3588 table from {sub}" in err
    assert "matches no probe" in err and not out.exists()


def test_check_table_from_recorded_results_passes_with_known_errata(capsys):
    table = REPO / "op_support_tables/qnn/2.51.0/htp-v73.json"
    code, out, err = run(capsys, "qnn", "--version", "2.51", "--soc", "htp-v73", "--results", QNN_EXTRA_RESULTS,
                         "--check-table", "--format", "json")
    assert code == 0, err
    rep = json.loads(out)
    ids = {p["id"] for p in json.loads(QNN_EXTRA_RESULTS.read_text(encoding="utf-8"))["probes"]}
    assert rep["passed"] and rep["new_disagreeing_probes"] == []
    # every disagreement found is one the table's errata already list, and every listed one recurs
    assert set(rep["known_disagreeing_probes"]) == _errata_ids(table) & ids
    assert rep["checked"] == len(ids) and rep["agree"] == len(ids) - len(rep["known_disagreeing_probes"])


def test_check_table_fails_on_an_altered_table(capsys, tmp_path):
    results = json.loads(QNN_EXTRA_RESULTS.read_text(encoding="utf-8"))
    errata = _errata_ids(REPO / "op_support_tables/qnn/2.51.0/htp-v73.json")
    # an op whose probe ran on the NPU and agrees with the committed table
    rec = next(r for r in results["probes"] if r["verdict"] == "npu" and r["kind"] == "op" and r["id"] not in errata)
    altered = _altered_copy(tmp_path, "qnn", "2.51.0", "htp-v73", rec["op"], "cpu")
    code, out, err = run(capsys, "qnn", "--version", "2.51", "--soc", "htp-v73", "--results", QNN_EXTRA_RESULTS,
                         "--check-table", tables=altered)
    assert code == 1, err
    assert f"DISAGREES ai.onnx:{rec['op']}:" in out
    assert re.search(rf"probe {re.escape(rec['id'])}: {rec['op']} \S+ -> table says cpu, onnxruntime-qnn npu", out)


# -- real runs of a tiny subset ----------------------------------------------------------------

RKNN_PY = _python("NPUCHECK_RKNN_PYTHON")
QNN_PY = _python("NPUCHECK_QNN_PYTHON")


@pytest.mark.skipif(not RKNN_PY, reason="rknn-toolkit2 not installed: set NPUCHECK_RKNN_PYTHON (scripts/setup-rknn-venv.sh)")
def test_rknn_probe_subset_check_and_altered_table(capsys, tmp_path):
    version = refresh.installed_version(RKNN_PY, "rknn-toolkit2")
    if ("rknn", version, "rk3588") not in Catalog.discover().refs:
        pytest.skip(f"no committed rknn table for the installed rknn-toolkit2 {version}")
    res = tmp_path / "res.json"
    code, out, err = run(capsys, "rknn", "--version", version, "--soc", "rk3588", "--python", RKNN_PY,
                         "--select", "Relu.f32.r4", "--select", "Cast.to=float16.f32.r4", "--out", res,
                         "--check-table", "--format", "json", "--workers", 1)
    assert code == 0, err
    doc = json.loads(res.read_text(encoding="utf-8"))
    assert (doc["toolchain"], doc["version"], doc["soc"]) == ("rknn", version, "rk3588")
    recs = {r["id"]: r for r in doc["probes"]}
    assert set(recs) == {"Relu.f32.r4", "Cast.to=float16.f32.r4"}
    assert recs["Relu.f32.r4"]["status"] == "ok" and recs["Relu.f32.r4"]["verdict"] == "npu"
    rep = json.loads(out)
    assert rep["passed"] and rep["checked"] == 2
    errata = _errata_ids(REPO / "op_support_tables/rknn" / version / "rk3588.json")
    assert set(rep["known_disagreeing_probes"]) <= errata

    altered = _altered_copy(tmp_path, "rknn", version, "rk3588", "Relu", "cpu")
    code, out, err = run(capsys, "rknn", "--version", version, "--soc", "rk3588", "--results", res,
                         "--check-table", tables=altered)
    assert code == 1, err
    assert "DISAGREES ai.onnx:Relu:" in out and "probe Relu.f32.r4: Relu" in out
    assert "table says cpu, rknn-toolkit2 npu" in out


@pytest.mark.skipif(not RKNN_PY, reason="rknn-toolkit2 not installed: set NPUCHECK_RKNN_PYTHON (scripts/setup-rknn-venv.sh)")
def test_rknn_version_mismatch_is_caught_before_probing(capsys):
    code, _, err = run(capsys, "rknn", "--version", "0.0.1", "--soc", "rk3588", "--python", RKNN_PY, "--select", "Relu")
    installed = refresh.installed_version(RKNN_PY, "rknn-toolkit2")
    assert code == 2 and f"has rknn-toolkit2 {installed}, not 0.0.1" in err


@pytest.mark.skipif(not QNN_PY, reason="onnxruntime-qnn not installed: set NPUCHECK_QNN_PYTHON (scripts/setup-qnn-venv.sh)")
def test_qnn_probe_subset_check_and_altered_table(capsys, tmp_path):
    pkg = refresh.installed_version(QNN_PY, "onnxruntime-qnn")
    cat = Catalog.discover()
    versions = [v for (tc, v, soc), ref in cat.refs.items() if tc == "qnn" and soc == "htp-v73"
                and cat.load(ref).provenance.get("toolchain_package") == f"onnxruntime-qnn=={pkg}"]
    if not versions:
        pytest.skip(f"no committed qnn table made with the installed onnxruntime-qnn {pkg}")
    version = versions[0]
    res = tmp_path / "res.json"
    code, out, err = run(capsys, "qnn", "--version", version, "--soc", "htp-v73", "--python", QNN_PY,
                         "--select", "Relu.f32.r4", "--out", res, "--check-table", "--workers", 1)
    assert code == 0, err
    assert "1 agree" in out
    doc = json.loads(res.read_text(encoding="utf-8"))
    assert doc["version"] == version and doc["package_version"] == pkg
    assert [(r["id"], r["verdict"]) for r in doc["probes"]] == [("Relu.f32.r4", "npu")]

    altered = _altered_copy(tmp_path, "qnn", version, "htp-v73", "Relu", "unsupported")
    code, out, err = run(capsys, "qnn", "--version", version, "--soc", "htp-v73", "--results", res,
                         "--check-table", tables=altered)
    assert code == 1 and "DISAGREES ai.onnx:Relu:" in out

