"""merge.py on real runs: a suite of 14 marked tests run unsharded, and run as 4 shards (split by test
id with --deselect, as splitters such as pytest-split do) then merged with ``npucheck merge``, gives
the same verdicts, the same reports apart from their creation time, and the same exit status, with a
stale baseline entry (strict) and a new fallback; a baseline update from the shards gives the same
file as one unsharded update."""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET

import pytest

from conftest import TOY_TABLES

from pytest_npucheck.cli import main
from pytest_npucheck.report.jsonreport import validate

pytestmark = [pytest.mark.usefixtures("heavy_modules_loaded"),
              pytest.mark.slow]  # six runs of a 14-test suite (the exports are cached after the first)

T = "toy@1.0/soc-a"

NETS = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Clean(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class TwoPads(nn.Module):
        def forward(self, x):
            x = F.pad(x, (1, 1, 1, 1), mode="reflect")  # ACCEPTED
            return F.pad(torch.relu(x), (2, 2, 2, 2), mode="reflect")
''')

TESTS = textwrap.dedent('''
    import pytest, torch
    from nets import Clean, TwoPads

    @pytest.mark.parametrize("i", range(12))
    @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
    def test_clean(npu_check, i):
        torch.manual_seed(i)
        npu_check(Clean().eval(), torch.randn(1, 3, 4 + i % 3, 4))

    @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
    def test_two_pads(npu_check):
        npu_check(TwoPads().eval(), torch.randn(1, 3, 6, 6))

    @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
    def test_fixed(npu_check):  # its accepted pad was removed: the baseline entry is stale
        npu_check(Clean().eval(), torch.randn(1, 3, 4, 4))

    def test_plain():
        assert True
''')


def baseline_entries() -> list[dict]:
    """One accepted pad of test_two_pads (by location: nets.py as written without its first blank
    line), and a stale entry of test_fixed."""
    line = next(k for k, ln in enumerate(NETS.splitlines(), 0) if "# ACCEPTED" in ln)
    return [{"test": "test_suite.py::test_two_pads", "target": T, "op_type": "Pad", "node": "node_pad_old",
             "verdict": "cpu", "reason": "reflect padding is needed",
             "location": {"module": "", "file": "nets.py", "line": line}},
            {"test": "test_suite.py::test_fixed", "target": T, "op_type": "Pad", "node": "node_pad",
             "verdict": "cpu", "reason": "fixed since", "location": None}]


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(nets=NETS, test_suite=TESTS)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} --npu-no-numerics\n")
    (pytester.path / "npucheck-baseline.json").write_text(json.dumps({"format": 1, "entries": baseline_entries()}))
    return pytester


def _ids(pytester) -> list[str]:
    r = pytester.runpytest("--collect-only", "-q")
    return sorted(ln.strip() for ln in r.outlines if "::" in ln)


def _shards(ids: list[str], n: int = 4) -> list[list[str]]:
    return [ids[k::n] for k in range(n)]


def _run_shards(pytester, ids, *args) -> list[str]:
    """Each shard as a CI job runs it: the others' tests deselected, in a checkout of its own (the
    baseline file is put back as the job found it before the next shard)."""
    baseline = pytester.path / "npucheck-baseline.json"
    original = baseline.read_text()
    paths = []
    for k, mine in enumerate(_shards(ids)):
        deselect = [f"--deselect={i}" for i in ids if i not in mine]
        pytester.runpytest(f"--npu-report=json:shard{k}.json", *args, *deselect)
        paths.append(str(pytester.path / f"shard{k}.json"))
        baseline.write_text(original)
    return paths


def _comparable(doc: dict) -> dict:
    """The report without its creation time, its shard section (compared apart) and whether each
    export came from the cache (the first run exports, the later ones reuse: not a result)."""
    doc = json.loads(json.dumps({k: v for k, v in doc.items() if k not in ("created", "shard")}))
    for t in doc["tests"]:
        (t.get("export") or {}).pop("cache_hit", None)
    return doc


def _undated(text: str) -> str:
    """A rendered report without its creation time (Markdown escapes its - and +)."""
    return re.sub(r"\d{4}\\?-\d\d\\?-\d\dT\d\d:\d\d:\d\d\\?\+00:00", "CREATED", text)


def _cases(path):
    """JUnit test case name -> npucheck properties."""
    root = ET.parse(path).getroot()
    out = {}
    for case in root.iter("testcase"):
        props = {p.get("name"): p.get("value") for p in case.iter("property") if p.get("name").startswith("npucheck[")}
        if props:
            out[case.get("name")] = props
    return out


@pytest.mark.without_xdist(reason="eight pytester runs per test: its equivalence is sharded vs unsharded; "
                            "the shards under xdist run in test_ci_recipes (the recipe's pytest -n auto)")
def test_four_merged_shards_are_the_unsharded_run(suite, capsys):
    ids = _ids(suite)
    assert len([i for i in ids if "test_plain" not in i]) == 14
    reports = ("--npu-report=json:one.json", "--npu-report=md:one.md", "--npu-report=html:one.html")
    one = suite.runpytest("--npu-baseline-strict", *reports, "--junitxml=one.xml")
    one.assert_outcomes(passed=14, failed=2)  # test_two_pads (a new fallback) and the stale entry (strict)
    shard_paths = _run_shards(suite, ids, "--npu-baseline-strict")
    capsys.readouterr()
    status = main(["merge", *shard_paths, "--root", str(suite.path)]
                  + [f"--report={f}:{suite.path / ('merged.' + f)}" for f in ("json", "md", "html", "junit")])
    assert "FAILED npucheck-baseline.json::stale" in capsys.readouterr().out
    assert status == one.ret == 1
    single = json.loads((suite.path / "one.json").read_text())
    merged = json.loads((suite.path / "merged.json").read_text())
    assert validate(merged) == []
    assert _comparable(merged) == _comparable(single)
    assert [e["test"] for e in merged["baseline"]["stale"]] == ["test_suite.py::test_fixed"]
    [pads] = [t for t in merged["tests"] if t["nodeid"].endswith("test_two_pads")]
    assert len(pads["targets"][0]["baseline"]["new"]) == 1 and pads["status"] == "failed"
    for key in ("baseline", "budgets", "tables"):
        assert merged["shard"][key] == single["shard"][key]
    assert merged["shard"]["selection"]["marked_selected"] == single["shard"]["selection"]["marked_selected"]
    assert merged["shard"]["merged_from"] == 4
    for fmt in ("md", "html"):
        assert _undated((suite.path / f"merged.{fmt}").read_text()) == _undated((suite.path / f"one.{fmt}").read_text())
    assert _cases(suite.path / "merged.junit") == _cases(suite.path / "one.xml")


@pytest.mark.without_xdist(reason="eight pytester runs per test: its equivalence is sharded vs unsharded; "
                            "the shards under xdist run in test_ci_recipes (the recipe's pytest -n auto)")
def test_a_baseline_update_from_shards_is_the_unsharded_update(suite, capsys):
    ids = _ids(suite)
    baseline = suite.path / "npucheck-baseline.json"
    original = baseline.read_text()
    one = suite.runpytest("--npu-update-baseline")
    unsharded = baseline.read_text()
    baseline.write_text(original)
    shard_paths = _run_shards(suite, ids, "--npu-update-baseline")
    capsys.readouterr()
    status = main(["merge", *shard_paths, "--root", str(suite.path)])
    assert "npucheck baseline updated" in capsys.readouterr().out
    assert baseline.read_text() == unsharded != original
    assert status == one.ret == 0


def _budgets(limit: int) -> str:
    return json.dumps({"format": 1, "releases": {"1.0.0": {"targets": {T: {"max_cpu_fallback_nodes": limit}}}}})


@pytest.mark.without_xdist(reason="ten pytester runs per test: its equivalence is sharded vs unsharded")
@pytest.mark.parametrize("committed, changed, loosened", [(2, 3, True), (3, 2, False)],
                         ids=["loosening", "tightening"])
def test_the_ratchet_of_merged_shards_is_the_unsharded_ratchet(suite, capsys, committed, changed, loosened):
    """The budgets file committed, then changed in the work tree (compared with HEAD, as outside a
    pull request): a loosening fails the unsharded run and the merge alike (the item
    ``npu-budgets.json::loosened``), a tightening fails neither; the budgets sections agree."""
    import subprocess

    def git(*args):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=suite.path, check=True,
                       capture_output=True)

    budgets = suite.path / "npu-budgets.json"
    budgets.write_text(_budgets(committed))
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "suite")
    budgets.write_text(_budgets(changed))
    args = ("--npu-release=1.0.0",)
    ids = _ids(suite)
    one = suite.runpytest(*args, "--npu-report=json:one.json")
    shard_paths = _run_shards(suite, ids, *args)
    capsys.readouterr()
    status = main(["merge", *shard_paths, "--root", str(suite.path), f"--report=json:{suite.path / 'merged.json'}"])
    out = capsys.readouterr().out
    single = json.loads((suite.path / "one.json").read_text())
    merged = json.loads((suite.path / "merged.json").read_text())
    assert ("npu-budgets.json::loosened" in out) is loosened
    assert ("npu-budgets.json::loosened" in "\n".join(one.outlines)) is loosened
    assert bool(merged["budgets"]["tightening_problems"]) is loosened
    assert merged["budgets"] == single["budgets"]
    assert _comparable(merged) == _comparable(single)
    assert status == one.ret == 1  # test_two_pads' new fallback fails both runs either way
    if loosened:
        assert "max_cpu_fallback_nodes loosened 2 -> 3" in merged["budgets"]["tightening_problems"][0]
    one.assert_outcomes(passed=14, failed=1 + int(loosened))  # + the item npu-budgets.json::loosened
