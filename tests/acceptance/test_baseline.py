"""The baseline of accepted fallbacks: matching, stale detection and update (pure), and the
workflow a team meets through pytester: record, gate a new fallback, report a fixed one."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from conftest import TOY_TABLES

from pytest_npucheck import baseline as bl

T = "toy@1.0/soc-a"


def node(name, op="Pad", verdict="cpu", file="/src/nets.py", line=10, module="down1"):
    src = {"module": module, "file": file, "line": line} if file else None
    return {"name": name, "op_type": op, "domain": "", "verdict": verdict, "reasons": [], "source": src}


def test_match_by_location_survives_renamed_nodes_and_counts_duplicates():
    entries = [bl.Entry.for_node("t::a", T, node("node_pad")), bl.Entry.for_node("t::a", T, node("node_pad_1"))]
    # both nodes renamed in a new export, same op and source line: both accepted
    m = bl.match(entries, [node("node_pad_7"), node("node_pad_8")])
    assert m.new == [] and len(m.accepted) == 2 and m.unmatched == []
    # a third Pad at the same line exceeds the two accepted ones: exactly one is new
    m = bl.match(entries, [node("node_pad"), node("x"), node("y")])
    assert [n["name"] for n in m.new] == ["y"] and m.accepted[0][1].node == "node_pad"


def test_match_falls_back_to_the_name_and_respects_op_and_verdict():
    [e] = [bl.Entry.for_node("t::a", T, node("pad", file=None))]
    assert bl.match([e], [node("pad", line=99)]).accepted  # no location in the entry: by name
    moved = bl.Entry.for_node("t::a", T, node("pad", line=10))
    assert bl.match([moved], [node("pad", line=12)]).accepted  # the line moved, the name did not
    assert bl.match([moved], [node("other", line=12)]).new  # both changed: a new fallback
    assert bl.match([moved], [node("pad", op="Resize")]).new  # another op at that place is new
    assert bl.match([moved], [node("pad", verdict="unsupported")]).new  # worse than accepted is new
    worst = bl.Entry.for_node("t::a", T, node("pad", verdict="unsupported"))
    assert bl.match([worst], [node("pad", verdict="cpu")]).accepted


def _test(nodeid, target_nodes, status="failed", error=None):
    return {"nodeid": nodeid, "status": status, "error": error,
            "targets": [{"target": t, "nodes": ns} for t, ns in target_nodes.items()]}


def test_stale_only_for_checks_that_ran():
    b = bl.Baseline([bl.Entry.for_node("t::a", T, node("p1")), bl.Entry.for_node("t::b", T, node("p2")),
                     bl.Entry.for_node("t::c", T, node("p3")), bl.Entry.for_node("t::a", "toy@1.1/soc-b", node("p4")),
                     bl.Entry.for_node("t::d", T, node("p5"))])
    tests = [_test("t::a", {T: []}, status="passed"),  # fixed on soc-a; no longer checks soc-b
             _test("t::b", {T: [node("p2")]}),  # still there
             _test("t::d", {}, status="error", error="export failed")]  # check did not complete
    # t::c did not run (deselected/skipped): never stale
    assert [(e.test, e.node) for e in bl.stale(b, tests)] == [("t::a", "p1"), ("t::a", "p4")]


def test_update_preserves_reasons_adds_new_keeps_tests_not_run_and_is_stable():
    old = bl.Baseline([bl.Entry.for_node("t::a", T, node("p1"), reason="ticket 7", link="https://x/7"),
                       bl.Entry.for_node("t::a", T, node("gone", line=3)),
                       bl.Entry.for_node("t::c", T, node("p3"), reason="not run")])
    tests = [_test("t::a", {T: [node("p1_renamed"), node("n2", op="Erf", line=20)]})]
    upd = bl.updated(old, tests)
    got = {(e.test, e.node): (e.reason, e.link) for e in upd.baseline.entries}
    assert got == {("t::a", "p1_renamed"): ("ticket 7", "https://x/7"), ("t::a", "n2"): (bl.DEFAULT_REASON, None),
                   ("t::c", "p3"): ("not run", None)}
    assert [e.node for e in upd.added] == ["n2"] and [e.node for e in upd.removed] == ["gone"]
    text = upd.baseline.dumps()
    assert bl.validate(json.loads(text)) == []
    assert len(text.splitlines()) == 5 + 3  # braces, keys and one line per entry
    assert bl.parse(json.loads(text)).dumps() == text  # a round trip changes nothing


def test_invalid_baseline_names_the_problem(tmp_path):
    p = tmp_path / "b.json"
    p.write_text('{"format": 1, "entries": [{"test": "t", "target": "toy", "op_type": "Pad", "node": "n",'
                 ' "verdict": "npu", "reason": "", "location": null}]}')
    with pytest.raises(bl.BaselineError) as exc:
        bl.load(p)
    msg = str(exc.value)
    assert str(p) in msg and "$.entries.0.target" in msg and "$.entries.0.verdict" in msg and "$.entries.0.reason" in msg
    p.write_text('{"format": 1, "entries": [], "entries": []}')
    with pytest.raises(bl.BaselineError, match="duplicate key"):
        bl.load(p)
    assert bl.load(tmp_path / "missing.json").entries == []


# -- the workflow, as a user meets it -------------------------------------------------------------

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


NETS_V1 = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            x = F.pad(x, (1, 1, 1, 1), mode="reflect")
            x = torch.relu(self.conv(x))
            return x  # EXTRA


    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(F.pad(x, (1, 1, 1, 1), mode="MODE")))
''')

TESTS = '''
import pytest, torch
from nets import Encoder, Decoder

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
def test_encoder(npu_check):
    npu_check(Encoder().eval(), torch.randn(1, 3, 16, 16))

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
def test_decoder(npu_check):
    npu_check(Decoder().eval(), torch.randn(1, 3, 16, 16))
'''


def nets(new_fallback=False, decoder_fixed=False):
    text = NETS_V1.replace("MODE", "constant" if decoder_fixed else "reflect")
    if new_fallback:  # a model change that brings a second CPU fallback (same lines above it)
        text = text.replace("return x  # EXTRA", 'return F.pad(x, (2, 2, 2, 2), mode="reflect")')
    return text


@pytest.fixture
def project(pytester):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n")
    pytester.makepyfile(nets=nets(), test_nets=TESTS)
    return pytester


def test_record_gate_and_stale_workflow(project):
    base = project.path / "npucheck-baseline.json"
    # 1. first run records today's fallbacks and is green
    r = project.runpytest("--npu-update-baseline")
    r.assert_outcomes(passed=2)
    assert r.ret == 0
    doc = json.loads(base.read_text())
    assert bl.validate(doc) == []
    assert sorted((e["test"], e["op_type"], e["location"]["file"]) for e in doc["entries"]) == [
        ("test_nets.py::test_decoder", "Pad", "nets.py"), ("test_nets.py::test_encoder", "Pad", "nets.py")]
    assert all(e["reason"] == bl.DEFAULT_REASON for e in doc["entries"])
    assert "npucheck baseline updated: npucheck-baseline.json (2 entries, 2 added" in r.stdout.str()
    # a team writes its reasons
    for e in doc["entries"]:
        e["reason"] = "reflect padding needed for " + e["test"].rsplit("_", 1)[1]
        e["link"] = "https://tracker.invalid/42"
    base.write_text(json.dumps(doc, indent=2))

    # 2. the same code is green against the baseline, the accepted fallbacks are shown
    r = project.runpytest()
    r.assert_outcomes(passed=2)
    assert "PASS test_nets.py::test_encoder toy@1.0/soc-a" in r.stdout.str()
    assert "(0 new, 1 accepted fallback(s))" in r.stdout.str()

    # 3. a model change brings a new CPU fallback: that test fails, the new node listed first;
    #    the decoder got fixed: its entry is reported stale (a warning without strict mode)
    project.makepyfile(nets=nets(new_fallback=True, decoder_fixed=True))
    r = project.runpytest("--npu-report=json:r.json")
    r.assert_outcomes(passed=1, failed=1)
    out = r.stdout.str()
    # each fallback once, in graph order, marked NEW or accepted (issue 26.4: no separate NEW list)
    assert "(gate NEW: a fallback not in the baseline npucheck-baseline.json, it fails the test; accepted: in it)" in out
    assert re.search(r"^  NEW +\S+ +\S+ +cpu ", out, re.M) and re.search(r"^  accepted +\S+ +\S+ +cpu ", out, re.M)
    assert "  1 NEW, 1 accepted fallback(s) on toy@1.0/soc-a" in out
    assert "reflect padding needed for encoder (https://tracker.invalid/42)" in out
    assert "1 stale entry (warning; --npu-baseline-strict fails the run)" in out
    assert "stale: test_nets.py::test_decoder toy@1.0/soc-a: Pad" in out
    rep = json.loads((project.path / "r.json").read_text())
    enc = next(t for t in rep["tests"] if t["nodeid"].endswith("test_encoder"))
    gate = enc["targets"][0]["baseline"]
    assert len(gate["new"]) == 1 and len(gate["accepted"]) == 1 and not gate["passed"]
    assert gate["new"][0] != gate["accepted"][0]["node"]
    assert [e["test"] for e in rep["baseline"]["stale"]] == ["test_nets.py::test_decoder"]

    # 4. strict mode fails a run whose only problem is a stale entry ...
    project.makepyfile(nets=nets(decoder_fixed=True))
    r = project.runpytest("--npu-baseline-strict")
    r.assert_outcomes(passed=2, failed=1)  # the stale entry is a failure pytest counts: last line and exit agree
    assert r.ret == pytest.ExitCode.TESTS_FAILED and "1 stale entry (fails the run (strict))" in r.stdout.str()
    assert "FAILED npucheck-baseline.json::stale" in r.stdout.str()
    assert "stale: test_nets.py::test_decoder" in r.stdout.str().split("= FAILURES =")[1]
    assert project.runpytest().ret == 0  # (not strict: a warning)
    # ... but a test that did not run is never stale
    r = project.runpytest("--npu-baseline-strict", "-k", "encoder")
    r.assert_outcomes(passed=1, deselected=1)
    assert r.ret == 0 and "stale entr" not in r.stdout.str()

    # 5. updating keeps reasons of entries that still occur and drops the fixed one
    project.makepyfile(nets=nets(new_fallback=True, decoder_fixed=True))
    r = project.runpytest("--npu-update-baseline")
    r.assert_outcomes(passed=2)
    assert "(2 entries, 1 added, 1 removed as no longer occurring)" in r.stdout.str()
    doc = json.loads(base.read_text())
    assert sorted(e["reason"] for e in doc["entries"]) == [bl.DEFAULT_REASON, "reflect padding needed for encoder"]
    assert {e["test"] for e in doc["entries"]} == {"test_nets.py::test_encoder"}


def test_baseline_option_ini_and_invalid_file(project):
    project.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider\n"
                    "npu_baseline = ci/accepted.json\nnpu_baseline_strict = true\n")
    project.runpytest("--npu-update-baseline", "-k", "encoder").assert_outcomes(passed=1, deselected=1)
    assert (project.path / "ci" / "accepted.json").is_file() and not (project.path / "npucheck-baseline.json").exists()
    (project.path / "bad.json").write_text('{"format": 1, "entries": [{"test": 1}]}')
    r = project.runpytest("--npu-baseline=bad.json")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "bad.json: not a valid baseline" in r.stderr.str() and "$.entries.0" in r.stderr.str()


# -- unsupported can never be accepted (issue 25, item 1) -------------------------------------------

def test_update_refuses_unsupported_nodes_and_names_them():
    tests = [_test("t::a", {T: [node("pad"), node("topk", op="TopK", verdict="unsupported", line=30)]})]
    upd = bl.updated(bl.Baseline(), tests)
    assert [(e.node, e.verdict) for e in upd.baseline.entries] == [("pad", "cpu")]
    assert [(e.test, e.op_type, e.node) for e in upd.refused] == [("t::a", "TopK", "topk")]
    assert bl.refused([node("pad"), node("topk", verdict="unsupported")]) == [node("topk", verdict="unsupported")]


def test_an_entry_accepting_an_unsupported_node_is_invalid():
    doc = bl.Baseline([bl.Entry.for_node("t::a", T, node("pad")),
                       bl.Entry.for_node("t::a", T, node("topk", op="TopK", verdict="unsupported"))]).to_json()
    problems = bl.validate(doc)
    assert len(problems) == 1 and "$.entries.1 (t::a toy@1.0/soc-a: TopK topk)" in problems[0]
    assert "verdict 'unsupported' cannot be accepted: the compiler rejects" in problems[0]
    with pytest.raises(bl.BaselineError, match="cannot be accepted"):
        bl.parse(doc)


TOPK_TESTS = '''
import pytest, torch
import torch.nn.functional as F

class Head(torch.nn.Module):
    def forward(self, x):
        return torch.topk(F.pad(x, (1, 1), mode="reflect"), 2).indices

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
def test_head(npu_check):
    npu_check(Head().eval(), torch.randn(1, 3, 8))
'''


def test_update_run_refuses_an_undeployable_model_and_an_existing_entry_for_it_is_an_error(project):
    project.makepyfile(test_head=TOPK_TESTS)
    base = project.path / "npucheck-baseline.json"
    r = project.runpytest("test_head.py", "--npu-update-baseline", "--npu-report=md:r.md")
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "--npu-update-baseline refuses 1 unsupported node(s): the compiler rejects the model" in out
    assert "1 unsupported node(s) not recorded" in out and "refused: test_head.py::test_head toy@1.0/soc-a: TopK" in out
    assert "FAIL test_head.py::test_head toy@1.0/soc-a" in out and "PASS test_head.py" not in out
    assert "**PASS**" not in (project.path / "r.md").read_text()
    doc = json.loads(base.read_text())
    assert [e["op_type"] for e in doc["entries"]] == ["Pad"]  # the CPU fallback is recorded, TopK is not
    r = project.runpytest("test_head.py")
    r.assert_outcomes(failed=1)  # still red: the TopK is NEW, whatever the baseline says
    doc["entries"].append({**doc["entries"][0], "op_type": "TopK", "node": "node_topk", "verdict": "unsupported"})
    base.write_text(json.dumps(doc))
    r = project.runpytest("test_head.py")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "$.entries.1" in r.stderr.str() and "verdict 'unsupported' cannot be accepted" in r.stderr.str()


# -- several npu_check calls in one test (issue 25, item 5) -----------------------------------------

TWO_CALLS = '''
import pytest, torch
import torch.nn.functional as F

class Enc(torch.nn.Module):
    def forward(self, x):
        return F.pad(x, (1, 1, 1, 1), mode="reflect")

class Dec(torch.nn.Module):
    def forward(self, x):
        return torch.relu(F.pad(x, (2, 2, 2, 2), mode="reflect"))

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
def test_pipeline(npu_check):
    npu_check(Enc().eval(), torch.randn(1, 3, 8, 8))
    npu_check(Dec().eval(), torch.randn(1, 3, 8, 8))
'''


def test_every_npu_check_call_of_a_test_is_recorded_keyed_by_call(project):
    from pytest_npucheck.report.jsonreport import validate

    project.makepyfile(test_two=TWO_CALLS)
    base = project.path / "npucheck-baseline.json"
    r = project.runpytest("test_two.py", "--npu-update-baseline", "--npu-report=json:r.json", "--npu-report=md:r.md")
    r.assert_outcomes(passed=1)
    doc = json.loads(base.read_text())
    assert bl.validate(doc) == []
    assert sorted((e["test"], e.get("call", 1)) for e in doc["entries"]) == [
        ("test_two.py::test_pipeline", 1), ("test_two.py::test_pipeline", 2)]
    rep = json.loads((project.path / "r.json").read_text())
    assert validate(rep) == [] and [t.get("call", 1) for t in rep["tests"]] == [1, 2]
    assert "call 2" in (project.path / "r.md").read_text()
    # a team documents the second model's fallback; a plain run accepts both calls' fallbacks
    for e in doc["entries"]:
        e["reason"] = f"decoder pad, call {e.get('call', 1)}"
    base.write_text(json.dumps(doc))
    r = project.runpytest("test_two.py", "--npu-baseline-strict")
    r.assert_outcomes(passed=1)
    assert "PASS test_two.py::test_pipeline [call 2] toy@1.0/soc-a" in r.stdout.str()
    # the first model gains a fallback: call 1 fails, call 2 never runs; an update must not drop
    # call 2's curated entry as "removed"
    project.makepyfile(test_two=TWO_CALLS.replace('return F.pad(x, (1, 1, 1, 1), mode="reflect")',
                                                  'return torch.topk(F.pad(x, (1, 1, 1, 1), mode="reflect"), 2).values'))
    r = project.runpytest("test_two.py", "--npu-update-baseline")
    r.assert_outcomes(failed=1)
    assert "removed:" not in r.stdout.str()
    kept = [e for e in json.loads(base.read_text())["entries"] if e.get("call") == 2]
    assert [e["reason"] for e in kept] == ["decoder pad, call 2"]
