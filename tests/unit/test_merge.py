"""merge.py: shard reports merged into one run (JSON documents and files in tmp_path; no torch).

The equivalence with an unsharded pytest run on exported models is tests/acceptance/test_merge_shards.py."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from pytest_npucheck import __version__
from pytest_npucheck import merge as mg
from pytest_npucheck.cli import main

TARGET = "toy@1.0/soc-a"
SHA = "a" * 64


def _entry(nodeid, fallback=None, status="passed"):
    nodes = [] if fallback is None else [{"name": fallback, "op_type": "Pad", "verdict": "cpu"}]
    return {"nodeid": nodeid, "status": status, "error": None, "export": None,
            "targets": [{"target": TARGET, "passed": status == "passed", "verdict": "npu", "nodes": nodes,
                         "summary": {"npu": 3, "cpu": len(nodes), "unsupported": 0, "folded": 0},
                         "table": {"sha256": SHA}}]}


def _shard(tmp_path, name, entries, selected, deselected=(), status=0, **over):
    baseline = tmp_path / "npucheck-baseline.json"
    doc = {"format": 1, "tool": {"name": "pytest-npucheck", "version": __version__}, "created": "x",
           "totals": {"tests": len(entries)}, "tests": entries,
           "shard": mg.shard_section(rootpath=tmp_path, baseline_path=baseline,
                                     baseline_sha256=mg.file_sha256(baseline), strict=over.get("strict", False),
                                     updating=over.get("updating", False), budgets_path=None, budgets_sha256=None,
                                     release="0", args=["tests"], last_failed=False, stepwise=False,
                                     marked_selected=selected, marked_deselected=deselected, status=status,
                                     entries=entries)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(doc))
    return path


def _baseline(tmp_path, *tests):
    entries = [{"test": t, "target": TARGET, "op_type": "Pad", "node": "pad_0", "verdict": "cpu",
                "reason": "accepted", "location": None} for t in tests]
    (tmp_path / "npucheck-baseline.json").write_text(json.dumps({"format": 1, "entries": entries}))


ALL = ["t.py::a", "t.py::b", "t.py::c", "t.py::d"]


def _two_shards(tmp_path, strict=False, updating=False):
    a = _shard(tmp_path, "a", [_entry("t.py::a"), _entry("t.py::b", fallback="pad_0", status="failed")],
               ALL[:2], ALL[2:], status=1, strict=strict, updating=updating)
    b = _shard(tmp_path, "b", [_entry("t.py::c"), _entry("t.py::d")], ALL[2:], ALL[:2], strict=strict,
               updating=updating)
    return a, b


def test_merge_takes_the_run_decisions_on_the_union(tmp_path):
    _baseline(tmp_path, "t.py::c")  # accepted for c, which no longer falls back: stale
    a, b = _two_shards(tmp_path, strict=True)
    merged = mg.merge([mg.load_shard(a), mg.load_shard(b)], tmp_path, created="x")
    assert [t["nodeid"] for t in merged.doc["tests"]] == ALL
    assert [e["test"] for e in merged.doc["baseline"]["stale"]] == ["t.py::c"]
    assert [f[0] for f in merged.failures] == ["npucheck-baseline.json::stale"]
    assert merged.status == 1 and merged.doc["totals"]["failed"] == 1
    assert merged.doc["shard"]["merged_from"] == 2 and merged.doc["shard"]["selection"]["marked_deselected"] == []
    assert mg.partial_reasons([mg.load_shard(a), mg.load_shard(b)]) == ""
    # the schema validity of a merged report of real entries: tests/acceptance/test_merge_shards.py


def test_a_marked_test_no_shard_selected_makes_the_union_partial(tmp_path):
    a = _shard(tmp_path, "a", [_entry("t.py::a")], ["t.py::a"], ALL[1:])
    b = _shard(tmp_path, "b", [_entry("t.py::b")], ["t.py::b"], ["t.py::a", "t.py::c", "t.py::d"])
    assert mg.partial_reasons([mg.load_shard(a), mg.load_shard(b)]) == "2 marked test(s) deselected"


def test_refuses_shards_that_disagree_and_names_them(tmp_path):
    _baseline(tmp_path)
    a, b = _two_shards(tmp_path)
    doc = json.loads(b.read_text())
    doc["tool"]["version"] = "0.0.1"
    b.write_text(json.dumps(doc))
    with pytest.raises(mg.MergeError, match=r"plugin version: .*0\.0\.1.* in .*b\.json"):
        mg.merge([mg.load_shard(a), mg.load_shard(b)], tmp_path)
    doc["tool"]["version"] = __version__
    doc["shard"]["budgets"] = {"path": "npu-budgets.json", "sha256": "1" * 64, "release": "1.0.0"}
    b.write_text(json.dumps(doc))
    with pytest.raises(mg.MergeError, match=r"budgets file: None in .*a\.json; .*npu-budgets\.json.* in .*b\.json"):
        mg.merge([mg.load_shard(a), mg.load_shard(b)], tmp_path)
    doc["shard"]["budgets"] = None
    doc["shard"]["baseline"]["sha256"] = "0" * 64
    b.write_text(json.dumps(doc))
    with pytest.raises(mg.MergeError, match=r"baseline file: .*a\.json.*b\.json"):
        mg.merge([mg.load_shard(a), mg.load_shard(b)], tmp_path)
    doc = json.loads(a.read_text())
    doc["tests"][0]["targets"][0]["table"]["sha256"] = "b" * 64
    doc["shard"]["tables"] = {TARGET: "b" * 64}
    c = tmp_path / "c.json"
    c.write_text(json.dumps(doc))
    with pytest.raises(mg.MergeError, match=rf"table of {TARGET}: sha256 aaaaaaaaaaaa in .*b\.json, bbbbbbbbbbbb in .*c\.json"):
        mg.merge([mg.load_shard(_two_shards(tmp_path)[1]), mg.load_shard(c)], tmp_path)
    with pytest.raises(mg.MergeError, match=r"t\.py::a ran in two shards"):
        mg.merge([mg.load_shard(a), mg.load_shard(a)], tmp_path)
    (tmp_path / "npucheck-baseline.json").write_text('{"format": 1, "entries": []}\n')  # changed since the shards ran
    a, b = _two_shards(tmp_path)
    _baseline(tmp_path, "t.py::a")
    with pytest.raises(mg.MergeError, match="not the baseline the shards were checked against"):
        mg.merge([mg.load_shard(a), mg.load_shard(b)], tmp_path)


def test_a_report_without_shard_section_is_refused(tmp_path):
    p = tmp_path / "old.json"
    p.write_text(json.dumps({"format": 1, "tool": {"version": "x"}, "tests": []}))
    with pytest.raises(mg.MergeError, match=r"old\.json: the report has no 'shard' section"):
        mg.load_shard(p)


def test_combined_status():
    assert mg.combined_status([0, 0]) == 0
    assert mg.combined_status([0, 1]) == 1
    assert mg.combined_status([5, 0]) == 0 and mg.combined_status([5, 5]) == 5
    assert mg.combined_status([1, 2]) == 2


def test_cli_merge_writes_every_report_and_updates_the_baseline(tmp_path, capsys):
    _baseline(tmp_path, "t.py::c")
    a, b = _two_shards(tmp_path, updating=True)
    out = tmp_path / "out"
    out.mkdir()
    status = main(["merge", str(a), str(b), "--root", str(tmp_path)] +
                  [f"--report={f}:{out / ('m.' + f)}" for f in ("json", "md", "html", "junit")])
    text = capsys.readouterr().out
    assert "npucheck baseline updated: npucheck-baseline.json (1 entries, 1 added, 1 removed" in text
    saved = json.loads((tmp_path / "npucheck-baseline.json").read_text())
    assert [(e["test"], e["node"]) for e in saved["entries"]] == [("t.py::b", "pad_0")]
    assert status == 1  # shard a failed
    suite = ET.parse(out / "m.junit").getroot().find("testsuite")
    assert suite.get("tests") == "4" and suite.get("failures") == "1"
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props[f"npucheck[{TARGET}].table_sha256"] == SHA
    assert "t.py::b" in (out / "m.md").read_text() and (out / "m.html").read_text().startswith("<!")
    assert json.loads((out / "m.json").read_text())["baseline"]["updated"] is True


def test_cli_merge_refusal_is_a_usage_error(tmp_path, capsys):
    p = tmp_path / "x.json"
    p.write_text("[]")
    assert main(["merge", str(p)]) == 2
    assert "x.json: not a pytest-npucheck JSON report" in capsys.readouterr().err


def _budget_shards(tmp_path, sections):
    """Two shards of ALL checked against one budgets file; ``sections``: each shard's ``budgets``
    section (its loosenings and the base its job compared with)."""
    budgets = tmp_path / "npu-budgets.json"
    budgets.write_text(json.dumps({"format": 1, "releases": {"1.0.0": {"targets": {TARGET: {"max_cpu_fallback_nodes": 2}}}}}))
    _baseline(tmp_path)
    paths = []
    for k, (mine, section) in enumerate(zip((ALL[:2], ALL[2:]), sections)):
        path = _shard(tmp_path, f"s{k}", [_entry(t) for t in mine], mine, [t for t in ALL if t not in mine])
        doc = json.loads(path.read_text())
        doc["shard"]["budgets"] = {"path": "npu-budgets.json", "sha256": mg.file_sha256(budgets), "release": "1.0.0"}
        doc["budgets"] = {"path": str(budgets), "release": "1.0.0", "stale": [], **section}
        path.write_text(json.dumps(doc))
        paths.append(path)
    return paths


HEAD = {"commit": "1" * 40, "label": "HEAD", "source": "head",
        "note": "the base origin/main is not in this clone (a shallow checkout?)"}
BASE = {"commit": "2" * 40, "label": "merge base with origin/main", "source": "github", "note": None}
LOOSE = "releases/1.0.0/targets/toy@1.0/soc-a: max_cpu_fallback_nodes loosened 2 -> 3"


def test_the_ratchet_is_decided_on_the_union_of_the_shards(tmp_path):
    """The first shard's job compared with HEAD (its clone lacked the base) and saw no loosening; the
    second compared with the pull request's base and saw one: the merge reports the loosening, as
    the unsharded run with the base would, and names the base and that the shards differed."""
    paths = _budget_shards(tmp_path, [{"tightening_problems": [], "base": HEAD},
                                      {"tightening_problems": [LOOSE], "base": BASE}])
    merged = mg.merge([mg.load_shard(p) for p in paths], tmp_path)
    assert merged.doc["budgets"]["tightening_problems"] == [LOOSE]
    assert merged.doc["budgets"]["base"]["commit"] == BASE["commit"]
    assert "different commits" in merged.doc["budgets"]["base"]["note"]
    assert [f[0] for f in merged.failures] == ["npu-budgets.json::loosened"]
    assert merged.status == 1
    # the same loosening seen by both shards is reported once; a tightening (no loosening) is green
    paths = _budget_shards(tmp_path, [{"tightening_problems": [LOOSE], "base": BASE}] * 2)
    merged = mg.merge([mg.load_shard(p) for p in paths], tmp_path)
    assert merged.doc["budgets"]["tightening_problems"] == [LOOSE] and merged.status == 1
    assert merged.doc["budgets"]["base"] == BASE
    paths = _budget_shards(tmp_path, [{"tightening_problems": [], "base": BASE}] * 2)
    merged = mg.merge([mg.load_shard(p) for p in paths], tmp_path)
    assert merged.failures == [] and merged.status == 0
