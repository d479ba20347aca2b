"""engine/run_decisions.py: the run-level decisions over per-test entries (their JSON form), the
functions a merge of shard reports takes the same decisions with."""

from __future__ import annotations

from pytest_npucheck.engine import run_decisions as decide
from pytest_npucheck.engine.entry import CheckEntry


def _entry(nodeid, budget_keys=(), target_budget=None, enabled=True):
    e = CheckEntry(nodeid=nodeid, status="passed",
                   targets=[{"target": "toy@1.0/soc-a", **({"budget": {"key": target_budget}} if target_budget else {})}],
                   numerics={"enabled": enabled, "budget_keys": list(budget_keys)})
    return e.to_json()


def test_entry_json_keeps_the_shape_of_the_report():
    first = CheckEntry(nodeid="t.py::a")
    assert first.to_json() == {"nodeid": "t.py::a", "status": "error", "error": None, "export": None, "targets": []}
    second = CheckEntry(nodeid="t.py::a", call=2, status="failed", numerics={"enabled": False, "passed": None})
    assert second.to_json()["call"] == 2 and second.call_number == 2 and first.call_number == 1
    assert "oracle" not in second.to_json() and second.to_json()["numerics"]["enabled"] is False
    assert CheckEntry.errored("t.py::b", "no fixture 'model'").to_json()["error"] == "no fixture 'model'"


def test_budget_keys_used_are_the_union_over_entries_of_every_shard():
    shard_a = [_entry("a.py::t", budget_keys=["a.py::t"])]
    shard_b = [_entry("b.py::t", target_budget="toy@1.0/soc-a")]
    assert decide.budgets_used(shard_a) == {"a.py::t"}
    assert decide.budgets_used(shard_a + shard_b) == {"a.py::t", "toy@1.0/soc-a"}


def test_partial_run_reasons():
    assert decide.partial_reasons(False, False, ["tests"], 0) == ""
    assert decide.partial_reasons(True, False, ["tests"], 0) == "--lf"
    assert decide.partial_reasons(False, True, ["t.py::x"], 3) == "--sw, test ids, 3 marked test(s) deselected"


def _text(e):
    return f"{e['test']} {e['target']}: {e['node']}"


def _clean(s, n):
    return s[:n]


def test_run_failures_and_exit_status():
    stale = {"test": "t.py::a", "target": "toy@1.0/soc-a", "node": "pad_0"}
    base = {"path": "npucheck-baseline.json", "stale": [stale], "strict": False}
    assert decide.run_failures(base, None, _text, _clean) == []
    assert decide.exit_status(0, base, []) == 0
    strict = {**base, "strict": True}
    failures = decide.run_failures(strict, None, _text, _clean)
    assert [f[0] for f in failures] == ["npucheck-baseline.json::stale"]
    assert "1 stale entry (strict)" in failures[0][1] and "stale: t.py::a toy@1.0/soc-a: pad_0" in failures[0][1]
    assert decide.exit_status(0, strict, failures) == decide.EXIT_TESTS_FAILED
    assert decide.exit_status(decide.EXIT_NO_TESTS_COLLECTED, strict, failures) == decide.EXIT_TESTS_FAILED
    assert decide.exit_status(2, strict, failures) == 2  # an interrupted run keeps its status
    broken = {"path": "npucheck-baseline.json", "stale": [], "strict": False, "error": "could not be written"}
    failures = decide.run_failures(broken, None, _text, _clean)
    assert [f[0] for f in failures] == ["npucheck-baseline.json::update"]
    assert decide.exit_status(2, broken, failures) == decide.EXIT_TESTS_FAILED  # whatever the status
    loosened = {"path": "/x/npu-budgets.json", "tightening_problems": ["t.py::a: atol 0.1 -> 0.2"],
                "base": {"label": "origin/main"}}
    failures = decide.run_failures(None, loosened, _text, _clean)
    assert failures[0][0] == "npu-budgets.json::loosened" and "compared with origin/main" in failures[0][1]
