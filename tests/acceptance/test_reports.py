"""Report files: every format validated (JSON schema, JUnit XML, Markdown sections, HTML rendered
in headless Chromium), names from models escaped, and the same files with and without xdist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import REPO, TOY_TABLES

from pytest_npucheck.report import html as html_report
from pytest_npucheck.report import markdown as md_report
from pytest_npucheck.report import rows
from pytest_npucheck.report.jsonreport import run_document, validate

T = "toy@1.0/soc-a"


pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def render_dom(path: Path, tmp_path: Path) -> str:
    """The DOM of a file as headless Chromium renders it (scripts run, no network)."""
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'chromium-profile'}",
           "--dump-dom", path.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


NETS = textwrap.dedent('''
    import os
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Clean(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class TwoPads(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            x = F.pad(x, (1, 1, 1, 1), mode="reflect")  # ACCEPTED
            x = torch.relu(self.conv(x))
            return F.pad(x, (2, 2, 2, 2), mode="reflect")


    class Crash(nn.Module):
        def forward(self, x):
            os._exit(3)
''')

TESTS = '''
import pytest, torch
from nets import Clean, TwoPads

@pytest.mark.parametrize("i", range(3))
@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
def test_clean(npu_check, i):
    torch.manual_seed(i)
    npu_check(Clean().eval(), torch.randn(1, 3, 8 + i, 8))

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a", "toy@1.1/soc-b"])
def test_two_pads(npu_check):
    npu_check(TwoPads().eval(), torch.randn(1, 3, 16, 16))
'''


def accepted_line(nets: Path) -> int:
    return next(k for k, line in enumerate(nets.read_text().splitlines(), 1) if "# ACCEPTED" in line)


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(nets=NETS, test_suite=TESTS)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n")
    # the first pad is accepted by location (the node name recorded is an older export's)
    (pytester.path / "npucheck-baseline.json").write_text(json.dumps({"format": 1, "entries": [{
        "test": "test_suite.py::test_two_pads", "target": T, "op_type": "Pad", "node": "node_pad_from_last_week",
        "verdict": "cpu", "reason": "reflect <padding> is | needed", "link": "https://tracker.invalid/1",
        "location": {"module": "", "file": "nets.py", "line": accepted_line(pytester.path / "nets.py")}}]}))
    return pytester


REPORT_FILES = ("--npu-report=json:{}/r.json", "--npu-report=md:{}/r.md", "--npu-report=html:{}/r.html",
                "--junitxml={}/junit.xml")


@pytest.mark.slow  # a plain run and a -n 2 run, each with every report format
@pytest.mark.without_xdist(reason="it compares a plain run with a -n 2 run itself (every report file, the "
                           "failure text of both)")
def test_every_report_format_validates_and_lists_new_fallbacks_first(suite, tmp_path):
    r = suite.runpytest(*(f.format("out") for f in REPORT_FILES))
    r.assert_outcomes(passed=3, failed=1)
    pytest.importorskip("xdist")
    r2 = suite.runpytest("-n", "2", *(f.format("parallel") for f in REPORT_FILES))
    r2.assert_outcomes(passed=3, failed=1)
    out = suite.path / "out"
    # JSON against its schema, with the gate per target
    doc = json.loads((out / "r.json").read_text())
    assert validate(doc) == []
    [pads] = [t for t in doc["tests"] if t["nodeid"].endswith("test_two_pads")]
    a, b = pads["targets"]
    assert len(a["baseline"]["new"]) == 1 and [x["reason"] for x in a["baseline"]["accepted"]] == ["reflect <padding> is | needed"]
    new_node = a["baseline"]["new"][0]
    accepted_node = a["baseline"]["accepted"][0]["node"]
    assert b["baseline"] == {"new": [], "accepted": [], "passed": True}  # soc-b supports reflect padding
    assert a["edges"] and all(0 <= x < len(a["nodes"]) and 0 <= y < len(a["nodes"]) for x, y in a["edges"])
    assert doc["baseline"]["stale"] == [] and doc["baseline"]["exists"]
    # the failure text: each fallback once, in graph order, marked NEW or accepted (issue 26.4: it listed
    # the NEW ones, the accepted ones, then every fallback again in a table)
    # (the same in the plain run and under -n 2, where the controller prints it from the workers' reports)
    for text in (r.stdout.str(), r2.stdout.str()):
        failure = text.split("= FAILURES =")[1].split("npucheck summary")[0]
        new_row = re.search(rf"^  NEW +Pad +{new_node} +cpu ", failure, re.M)
        acc_row = re.search(rf"^  accepted +Pad +{accepted_node} +cpu ", failure, re.M)
        assert new_row and acc_row and acc_row.start() < new_row.start()  # the accepted pad comes first
        assert len(re.findall(rf"\b{new_node}\b(?!,)", failure.split("fixes (")[0])) == 2  # its row and its reason
        # the toy table is documentation only: the headline says so
        assert f"{T} [table revision 1, sha256 {a['table']['sha256'][:12]}, documentation only]: FAIL" in text
    # JUnit: pytest's own writer carries the per-target properties
    root = ET.parse(out / "junit.xml").getroot()
    [case] = [c for c in root.iter("testcase") if c.get("name") == "test_two_pads"]
    props = {p.get("name"): p.get("value") for p in case.iter("property")}
    assert props[f"npucheck[{T}].gate"] == "fail" and props["npucheck[toy@1.1/soc-b].gate"] == "pass"
    assert props[f"npucheck[{T}].table_version"] == T
    assert re.fullmatch(r"[0-9a-f]{64}", props[f"npucheck[{T}].table_sha256"])
    # the table revision each target was checked against, in every report (a table without one is revision 1)
    assert props[f"npucheck[{T}].table_revision"] == "1" and a["table"]["revision"] == 1
    assert props[f"npucheck[{T}].cpu"] == "2" and props[f"npucheck[{T}].new_fallbacks"] == "1"
    assert props[f"npucheck[{T}].accepted_fallbacks"] == "1"
    assert 0 < float(props[f"npucheck[{T}].npu_share_nodes"]) < 1
    # Markdown: the sections a PR comment needs, new fallbacks first
    md = (out / "r.md").read_text()
    assert md.startswith("## NPU check: failed")
    # (issue 26.2: failures first; accepted fallbacks, every test and the numerics folded in <details>)
    sections = [line for line in md.splitlines() if line.startswith("### ") or line.startswith("<summary>")]
    assert sections == ["### Failures", "<summary>Accepted fallbacks (1)</summary>",
                        "<summary>Per target and test (5: 1 failing)</summary>", "<summary>Numerics (4 test(s))</summary>"]
    assert f"\nTables: toy@1.0/soc\\-a: toy/1.0/soc\\-a.json revision 1 \\(sha256 {a['table']['sha256'][:12]}\\)" in md
    # numerics from the same results as the JSON: the toy tables run fp16, so each test has the export
    # row (ONNX Runtime vs PyTorch) and one fp16 emulation row per target, with the metric values
    pads_num = pads["numerics"]
    emu = pads_num["emulation"][0]["result"]["comparison"]["outputs"][0]
    numerics_md = md.split("<summary>Numerics")[1].split(f"#### {md_report.esc(pads['nodeid'])} (passed)")[1]
    numerics_md = numerics_md.split("#### ")[0]
    assert f"seed {pads_num['emulation'][0]['result']['seed']}" in numerics_md
    row = next(line for line in numerics_md.splitlines()
               if line.startswith("| fp16 emulated") and md_report.esc(T) in line and "| pass |" in line)
    assert f"| {rows.fmt(emu['metrics']['max_abs'])} |" in row and "| default fp16 |" in row
    assert sum(line.startswith("| ONNX Runtime CPU fp32 |") for line in numerics_md.splitlines()) == 1
    assert sum(line.startswith("| fp16 emulated") for line in numerics_md.splitlines()) == 2  # one per target
    new_part, acc_part = md.split("<summary>Accepted fallbacks")
    assert md_report.esc(new_node) in new_part and md_report.esc(accepted_node) in acc_part
    assert "reflect &lt;padding&gt; is \\| needed" in acc_part
    # the toy table is documentation only: every report says so beside the target
    assert "| toy@1.0/soc\\-a \\(documentation only\\) | test\\_suite.py::test\\_two\\_pads | **FAIL** |" in md
    # HTML: self-contained and rendered by a real browser
    page = (out / "r.html").read_text()
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", page)
    dom = render_dom(out / "r.html", tmp_path)
    assert 'data-rendered="5"' in dom  # the inline script ran and found one graph per checked target
    assert dom.count('<svg xmlns="http://www.w3.org/2000/svg" class="npu-graph"') == 5
    assert '<path class="x"' in dom  # NPU/CPU transitions are marked
    assert 'class="n-cpu cause"' in dom  # the nodes that cause them are outlined
    assert f'<tr class="new"><td>{T}</td>' in dom and f"<code>{new_node}</code>" in dom
    assert dom.index('<section id="new">') < dom.index('<section id="accepted">')
    assert "reflect &lt;padding&gt; is | needed" in dom
    numerics_html = dom.split('<section id="numerics">')[1]
    assert '<tr class="emulated"><td>fp16 emulated (ONNX Runtime)</td>' in numerics_html
    assert f"<td>{rows.fmt(emu['metrics']['max_abs'])}</td>" in numerics_html
    # under -n 2: the same report files, apart from their creation time and the exports' temporary paths
    _assert_same_reports(suite.path / "out", suite.path / "parallel")


def _assert_same_reports(one: Path, other: Path) -> None:
    def load(d):
        doc = json.loads((d / "r.json").read_text())
        created = doc.pop("created")
        for t in doc["tests"]:
            t["export"].pop("path")  # temp dirs differ per process
            t["export"].pop("cache_hit")  # the first run may export, the second reuses: not a result
            for tr in t["targets"]:
                tr["model"].pop("path")
        return doc, created

    (serial, c1), (parallel, c2) = load(one), load(other)
    assert serial == parallel
    for name in ("r.md", "r.html"):
        assert _normalised(one / name, c1) == _normalised(other / name, c2)

    def props(d):
        root = ET.parse(d / "junit.xml").getroot()
        return {c.get("name"): sorted((p.get("name"), p.get("value")) for p in c.iter("property"))
                for c in root.iter("testcase")}

    assert props(one) == props(other)


NASTY = "<script>alert(1)</script>\x00\x1b[31m|`*_\n" + "x" * 10_000


def nasty_document():
    node = {"name": NASTY, "op_type": "<img src=x onerror=alert(2)>", "domain": "", "verdict": "cpu",
            "reasons": [{"rule": "r", "message": NASTY, "verdict": "cpu"}],
            "source": {"module": NASTY, "file": "/a/" + NASTY, "line": 3}}
    ok = {"name": "ok", "op_type": "Relu", "domain": "", "verdict": "npu", "reasons": [], "source": None}
    target = {"target": T, "table": {"toolchain": "toy", "version": "1.0", "soc": "soc-a", "revision": 1, "sha256": "0" * 64},
              "model": {"path": NASTY, "opsets": {"ai.onnx": 20}, "node_count": 2}, "passed": False, "verdict": "cpu",
              "summary": {"npu": 1, "cpu": 1, "unsupported": 0, "folded": 0}, "model_issues": [], "notes": [NASTY],
              "partition": None, "fixes": None, "nodes": [ok, node], "edges": [[0, 1]],
              "baseline": {"new": [NASTY], "accepted": [], "passed": False}}
    entry = {"test": NASTY, "target": T, "op_type": "Pad", "node": NASTY, "verdict": "cpu", "reason": NASTY,
             "location": {"module": NASTY, "file": NASTY, "line": 1}}
    comparison = {"passed": False, "policy": NASTY, "missing": [NASTY], "extra": [], "unknown_overrides": [],
                  "outputs": [{"name": NASTY, "passed": False, "reasons": [NASTY], "checks": [],
                               "metrics": {"max_abs": 1.0, "mean_abs": 0.5, "cosine": 0.5, "snr_db": "-inf"}}]}
    oracle = {"mode": "report", "disagreements": 1, "notes": [NASTY], "targets": [{
        "target": T, "toolchain": "rknn", "status": "ran", "reason": NASTY, "package": NASTY, "precision": "fp16",
        "toolchain_version": NASTY, "build_status": "ok", "build_message": NASTY, "notes": [NASTY],
        "agreement": {"target": T, "nodes": 2, "agree": 1, "rate": 0.5, "disagreements": [
            {"node": NASTY, "op_type": NASTY, "static": "npu", "real": "cpu", "kind": "missed_fallback",
             "reasons": [NASTY], "real_reasons": [NASTY]}]},
        "numerics": {"candidate": NASTY, "precision": "fp16", "reference": "pytorch", "status": "ok", "passed": False,
                     "seed": 1, "comparison": comparison, "budget": None}}]}
    doc = run_document([{"nodeid": "t.py::test_[" + NASTY + "]", "status": "failed", "error": None, "export": None,
                         "targets": [target], "oracle": oracle,
                         "numerics": {"enabled": True, "passed": False, "notes": [NASTY], "onnx_vs_pytorch": comparison,
                                      "emulation": []}},
                        {"nodeid": "t.py::crashed", "status": "error", "error": NASTY, "export": None, "targets": []}])
    doc["baseline"] = {"path": "npucheck-baseline.json", "exists": True, "updated": False, "strict": True, "entries": 1,
                       "stale": [entry], "added": [], "removed": []}
    return doc


def test_names_from_models_are_escaped_everywhere(tmp_path):
    doc = nasty_document()
    assert validate(doc) == []
    md = md_report.render(doc)
    assert "<script" not in md and "<img" not in md and "\x00" not in md and "\x1b" not in md
    assert len(md) < 20_000  # 10 kB names are capped
    table_rows = [line for line in md.splitlines() if line.startswith("|")]
    assert all(line.endswith("|") for line in table_rows)  # no cell broke its row
    assert all(len(re.findall(r"(?<!\\)\|", line)) in (4, 7, 8, 9, 10, 13) for line in table_rows)
    assert "### Table bugs found by the real toolchains" in md and "<summary>Numerics (1 test(s))</summary>" in md
    page = html_report.render(doc)
    assert "<script>alert" not in page and "<img" not in page and "\x00" not in page and "\x1b" not in page
    assert len(page) < 40_000
    path = tmp_path / "nasty.html"
    path.write_text(page, encoding="utf-8")
    dom = render_dom(path, tmp_path)
    assert 'data-rendered="1"' in dom and dom.count("<script") == 1  # only ours
    assert "<img" not in dom and "&lt;script&gt;alert(1)&lt;/script&gt;\\x00\\x1b[31m" in dom
    assert '<section id="stale">' in dom and '<section id="errors">' in dom
    assert '<section id="table-bugs">' in dom and '<section id="numerics">' in dom and '<section id="oracles">' in dom


def _normalised(path: Path, created: str) -> str:
    return path.read_text().replace(created, "CREATED").replace(md_report.esc(created), "CREATED")


@pytest.mark.slow  # two -n 2 runs, each with two workers that export
@pytest.mark.without_xdist(reason="its runs name their own workers (-n 2): a worker that dies is the point")
def test_a_crashed_worker_is_reported_in_every_report(suite):
    pytest.importorskip("xdist")
    files = REPORT_FILES
    # a worker that dies mid-test: the test is reported with status error in every report
    suite.makepyfile(test_crash='''
        import pytest, torch
        from nets import Crash, Clean

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_crashes(npu_check):
            npu_check(Crash(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_fine(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    ''')
    # with isolation (the default) the crash happens in the export child: only that check fails
    r = suite.runpytest_subprocess("-n", "2", "test_crash.py", *(f.format("contained") for f in files[:1]))
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((suite.path / "contained" / "r.json").read_text())
    tests = {t["nodeid"]: t for t in doc["tests"]}
    assert "crash (exit code 3) during export" in tests["test_crash.py::test_crashes"]["error"]
    assert tests["test_crash.py::test_fine"]["status"] == "passed"
    assert "crashed while running" not in r.stdout.str() and "worker" not in tests["test_crash.py::test_crashes"]["error"]
    # without isolation the worker itself dies: xdist's crash report still lands in every report
    r = suite.runpytest_subprocess("-n", "2", "--npu-no-isolate", "test_crash.py",
                                   *(f.format("crash") for f in files[:3]))
    assert r.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((suite.path / "crash" / "r.json").read_text())
    assert validate(doc) == []
    tests = {t["nodeid"]: t for t in doc["tests"]}
    crashed = tests["test_crash.py::test_crashes"]
    assert crashed["status"] == "error" and "crashed" in crashed["error"]
    assert tests["test_crash.py::test_fine"]["status"] == "passed" and doc["totals"]["error"] == 1
    md = (suite.path / "crash" / "r.md").read_text()
    assert "### Errors" in md and "test\\_crash.py::test\\_crashes | error | worker" in md
    page = (suite.path / "crash" / "r.html").read_text()
    assert '<tr class="error"><td><code>test_crash.py::test_crashes</code></td><td>error</td><td>worker' in page


def test_pre_commit_hook_runs_npucheck_check_on_onnx_files(tmp_path, save):
    """The hook in .pre-commit-hooks.yaml, run as pre-commit would: entry + args + staged files."""
    import shlex
    import sys

    from onnx import helper

    from conftest import const, make_model

    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    assert re.search(r"^- id: npucheck\s*$", text, re.M) and "files: \\.onnx$" in text
    entry = re.search(r"^  entry: (.*)$", text, re.M).group(1)
    assert re.search(r"^  language: python$", text, re.M)
    argv = shlex.split(entry)
    assert argv[0] == "python"
    clean = save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"]), "a.onnx")
    bad = save(make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="reflect")],
                          [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")]), "b.onnx")
    args = ["--tables", str(TOY_TABLES), "--target", T]

    def run(*files):
        return subprocess.run([sys.executable, *argv[1:], *args, *map(str, files)], capture_output=True, text=True,
                              timeout=300)

    ok = run(clean)
    assert ok.returncode == 0, ok.stderr
    assert "PASS" in ok.stdout
    fail = run(clean, bad)
    assert fail.returncode == 1 and "mode='reflect' not in {'constant'}" in fail.stdout
    assert run().returncode == 0  # nothing staged


def test_tightest_margin_is_the_bound_closest_to_failing():
    def out(cos, norm, max_abs, snr, elem=0.0):
        return {"checks": [
            {"metric": "cosine", "measured": cos, "op": ">=", "allowed": 0.9999, "passed": cos >= 0.9999},
            {"metric": "norm_ratio_deviation", "measured": norm, "op": "<=", "allowed": 5e-3, "passed": norm <= 5e-3},
            {"metric": "max_abs", "measured": max_abs, "op": "<=", "allowed": 0.01, "passed": max_abs <= 0.01},
            {"metric": "out_of_tolerance_fraction", "measured": elem, "op": "<=", "allowed": 0.0, "passed": elem == 0},
            {"metric": "snr_db", "measured": snr, "op": ">=", "allowed": 40.0, "passed": snr >= 40}]}

    # cosine 0.99995 has half its room (1 - 0.9999) left; max abs 0.002 has 80 %: cosine is the tightest
    assert rows.tightest(out(0.99995, 1e-4, 0.002, 60.0)) == "cosine +5e-05"
    # max abs over its bound, but SNR passes the output: the margin is SNR's, not a negative max abs
    assert rows.tightest(out(1.0, 1e-4, 0.02, 45.0, elem=0.1)) == "snr_db +5"
    # both the element-wise clause and SNR fail: the better of the two, negative
    assert rows.tightest(out(1.0, 1e-4, 0.02, 35.0, elem=0.1)) == "snr_db -5"
    assert rows.tightest({"checks": []}) == "-"


def test_oracle_text_lines_name_the_table_bug_and_the_numbers():
    from pytest_npucheck.report.text import oracle_lines

    o = {"target": "rknn@2.5.0/rk3588", "toolchain": "rknn", "status": "ran", "reason": "", "package": "rknn-toolkit2",
         "package_version": "2.5.0", "toolchain_version": "2.5.0", "precision": "fp16", "build_status": "ok",
         "build_message": "", "notes": [], "agreement": {"nodes": 3, "agree": 2, "disagreements": [
             {"node": "/erf\x1b", "op_type": "Erf", "static": "npu", "real": "cpu", "kind": "missed_fallback",
              "reasons": [], "real_reasons": ["Erf on CPU"]}]},
         "numerics": {"candidate": "RKNN simulator fp16", "reference": "pytorch", "status": "ok", "comparison": {
             "policy": "fp16", "outputs": [{"name": "y", "passed": True, "metrics": {
                 "max_abs": 0.000549, "cosine": 0.99999995, "snr_db": 70.1}}]}}}
    text = oracle_lines(o)
    assert text[0] == ("oracle rknn@2.5.0/rk3588: rknn-toolkit2 2.5.0 built the model at fp16; real placement "
                       "agrees with the table on 2 of 3 node(s)")
    assert text[1] == ("  TABLE BUG Erf /erf\\x1b: the table says it stays on the NPU, the toolchain runs it on the "
                       "CPU (a missed fallback) (toolchain: Erf on CPU)")
    # a cosine keeps the digits of its distance from 1 (it read "cosine 1": issue 26.4)
    assert text[2] == ("  numerics RKNN simulator fp16 vs pytorch, output y: PASS max_abs 0.000549 cosine 0.99999995 "
                       "snr 70.1 dB (policy fp16)")
    assert oracle_lines({"target": "qnn@2.51.0/htp-v73", "status": "unavailable", "reason": "not installed"}) == [
        "oracle qnn@2.51.0/htp-v73: not run: not installed"]


def test_golden_and_deployment_budgets_in_markdown_and_html():
    comparison = {"passed": True, "policy": "fp32", "missing": [], "extra": [], "unknown_overrides": [],
                  "outputs": [{"name": "logits", "passed": True, "reasons": [], "checks": [
                      {"metric": "cosine", "measured": 1.0, "op": ">=", "allowed": 0.999999, "passed": True}],
                      "metrics": {"max_abs": 3e-7, "mean_abs": 1e-7, "cosine": 1.0, "snr_db": 130.0,
                                  "norm_ratio": 1.0}}]}
    numerics = {"enabled": True, "passed": False, "release": "1.2.0", "notes": [], "onnx_vs_pytorch": comparison,
                "emulation": [], "golden": {"status": "passed", "message": "golden matches", "comparison": comparison}}
    target = next(t for t in nasty_document()["tests"] if t["targets"])["targets"][0]
    target["budget"] = {"release": "1.2.0", "key": "toy@*", "max_cpu_fallback_nodes": 1, "min_npu_share": 0.9,
                        "min_npu_mac_share": 0.5, "cpu_fallback_nodes": 2, "npu_share": 0.8, "npu_mac_share": 0.999,
                        "problems": ["2 CPU-fallback nodes > 1"]}
    doc = run_document([{"nodeid": "t.py::test_a", "status": "failed", "error": None, "export": None,
                         "targets": [target], "numerics": numerics}])
    assert validate(doc) == []
    md = md_report.render(doc)
    assert md.startswith("## NPU check: failed")  # a numeric failure fails the run's headline too
    assert "| stored golden \\(passed\\) | - | logits | pass | golden outputs | 3e-07 |" in md
    assert ("| toy@1.0/soc\\-a | toy@\\* | CPU\\-fallback nodes 2 \\(max 1\\); NPU share by nodes 80.0% \\(min 90.0%\\); "
            "NPU share by MACs 99.9% \\(min 50.0%\\) | **FAIL** (2 CPU\\-fallback nodes &gt; 1) | "
            "\\-1 node\\(s\\), \\-10.0% nodes share, \\+49.9% MACs share |") in md
    assert "budgets of release 1.2.0" in md
    page = html_report.render(doc)
    assert "<title>NPU check: failed</title>" in page
    assert '<tr class="golden"><td>stored golden (passed)</td>' in page
    assert "<td>-1 node(s), -10.0% nodes share, +49.9% MACs share</td>" in page


def test_a_budget_loosening_without_approval_fails_the_markdown_and_html_headline():
    """pytest fails the run on an unapproved loosening (plugin `_budgets_step`); the reports say so too."""
    comparison = {"passed": True, "policy": "fp32", "missing": [], "extra": [], "unknown_overrides": [],
                  "outputs": []}
    doc = run_document([{"nodeid": "t.py::test_a", "status": "passed", "error": None, "export": None,
                         "targets": [], "numerics": {"enabled": True, "passed": True, "notes": [],
                                                     "onnx_vs_pytorch": comparison, "emulation": []}}])
    assert md_report.render(doc).startswith("## NPU check: passed")
    assert "<title>NPU check: passed</title>" in html_report.render(doc)
    problem = "releases/1.0.1/tests/t.py::test_a: *.cosine_min loosened 0.9999 -> 0.9 (add a \"loosened\" record)"
    doc["budgets"] = {"path": "npu-budgets.json", "release": "1.0.1", "release_in_force": "1.0.1", "stale": [],
                      "tightening_problems": [problem]}
    assert validate(doc) == []
    md = md_report.render(doc)
    assert md.startswith("## NPU check: failed")
    assert "### Budget loosenings without approval" in md and "cosine\\_min loosened 0.9999 \\-&gt; 0.9" in md
    page = html_report.render(doc)
    assert "<title>NPU check: failed</title>" in page and '<section id="loosened">' in page
    assert "cosine_min loosened 0.9999 -&gt; 0.9" in page


# -- round two (issue 27): bidi and other invisible characters -------------------------------------

BIDI = ["\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u202a", "\u200f", "\u061c", "\u200b", "\u2028",
        "\ufeff", "\U000e0041"]


@pytest.mark.reliability("S10")
def test_bidi_and_invisible_characters_are_shown_as_escapes_in_every_renderer(judge):
    """U+202E and the isolates in module names, node names and file paths reached the terminal text,
    the Markdown and the HTML raw (visual spoofing in a review). One helper (report/escape.py) shows
    them as escapes in all three; the JSON data keeps the exact strings."""
    import sys

    from onnx import helper

    sys.path.insert(0, str(Path(__file__).parent))
    from conftest import make_model
    from pytest_npucheck.report.escape import visible
    from pytest_npucheck.report.text import render_target

    name = "/blk\u202egnp.exe/act\u2066x\u2069/Sin" + "".join(BIDI)
    node = helper.make_node("Sin", ["x"], ["y"], name=name)
    node.metadata_props.add(key="pkg.torch.onnx.stack_trace",
                            value='File "/src/mo\u2067del.py", line 12, in forward\n    return torch.sin(x)')
    res = judge(make_model([node], [("x", (1, 4))], ["y"]))["__result__"]
    assert not res.passed and res.nodes[0].name == name  # the data keeps the exact name
    text = "\n".join(render_target(res))
    doc = run_document([{"nodeid": "t.py::test_[\u202eevil]", "status": "failed", "error": None, "export": None,
                         "targets": [json.loads(json.dumps(res.to_json()))]}])
    assert validate(doc) == []
    md = md_report.render(doc)
    page = html_report.render(doc)
    for out in (text, md, page):
        assert not any(ch in out for ch in BIDI)
        assert "u202e" in out and "u2066" in out and "U000e0041" in out
    assert "/blk\\u202egnp.exe/act\\u2066x\\u2069/Sin" in text and "/src/mo\\u2067del.py:12" in text
    assert "t.py::test_[\\u202eevil]" in page
    assert visible("a\u202eb\x1bc\u00e9\u4e2d \u00a0") == "a\\u202eb\\x1bc\u00e9\u4e2d \u00a0"  # letters stay


@pytest.mark.reliability("S10")
def test_the_failure_text_of_a_pytest_run_escapes_bidi_characters(pytester):
    """The plugin's failure text and terminal summary come from the same helper."""
    pytester.makepyfile(textwrap.dedent('''
        import pytest, torch

        class Blk(torch.nn.Module):
            def forward(self, x):
                return torch.sin(x)

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                setattr(self, "evil\\u202egnp", Blk())

            def forward(self, x):
                return getattr(self, "evil\\u202egnp")(x)

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], exporter="torchscript", numerics=False)
        def test_model(npu_check):
            npu_check(Model().eval(), torch.randn(1, 4))
    '''))
    res = pytester.runpytest_subprocess(f"--npu-tables={TOY_TABLES}", "-p", "no:randomly")
    out = res.stdout.str()
    assert res.ret == pytest.ExitCode.TESTS_FAILED and "Sin" in out
    assert "\u202e" not in out and "evil\\u202egnp" in out
