"""result: the verdict, summary and JSON of a target's result follow its nodes and model issues (the basis
of each verdict: tests/unit/test_result.py)."""

from __future__ import annotations

import json

from onnx import helper

from conftest import make_model

from pytest_npucheck.result import VERDICTS, NodeResult, Reason, TargetResult


def _result(*verdicts, issues=()):
    nodes = tuple(NodeResult(index=i, name=f"n{i}", op_type="Relu", domain="ai.onnx", verdict=v,
                             reasons=(Reason("op_missing", f"n{i} is {v}", v),) if v in ("cpu", "unsupported") else ())
                  for i, v in enumerate(verdicts))
    return TargetResult(target="toy@1.0/soc-a", table={"sha256": "x"}, model={"path": "m.onnx"}, nodes=nodes,
                        model_issues=tuple(issues))


def test_verdict_is_the_worst_node_and_a_model_issue_is_unsupported():
    assert _result("npu", "folded").verdict == "npu" and _result("npu", "folded").passed
    cpu = _result("npu", "cpu", "folded")
    assert cpu.verdict == "cpu" and not cpu.passed and [n.name for n in cpu.fallbacks] == ["n1"]
    assert _result("cpu", "unsupported").verdict == "unsupported"
    issue = Reason("ir_version", "IR version 10 is not loaded", "unsupported", "model")
    whole = _result("npu", issues=[issue])
    assert whole.verdict == "unsupported" and not whole.passed and whole.fallbacks == []


def test_summary_counts_every_verdict_and_json_is_plain_data():
    res = _result("npu", "npu", "cpu", "folded")
    assert res.summary == {"npu": 2, "cpu": 1, "unsupported": 0, "folded": 1} and set(res.summary) == set(VERDICTS)
    doc = json.loads(json.dumps(res.to_json()))
    assert doc["verdict"] == "cpu" and doc["passed"] is False and doc["summary"] == res.summary
    assert [n["verdict"] for n in doc["nodes"]] == ["npu", "npu", "cpu", "folded"]
    [reason] = doc["nodes"][2]["reasons"]
    assert {k: reason[k] for k in ("rule", "message", "verdict", "category")} == {
        "rule": "op_missing", "message": "n2 is cpu", "verdict": "cpu", "category": "op"}
    assert doc["nodes"][0]["source"] is None and "graph" not in doc["nodes"][0]


def test_a_checked_file_gives_the_same_json_as_its_result(judge):
    res = judge(make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Sin", ["r"], ["y"], name="sin")], [("x", (1, 4))], ["y"]))["__result__"]
    doc = res.to_json()
    assert {n["name"]: n["verdict"] for n in doc["nodes"]} == {n.name: n.verdict for n in res.nodes}
    assert doc["verdict"] == res.verdict != "npu" and doc["summary"] == res.summary


def test_json_passed_and_verdict_are_the_properties_for_every_mix():
    """to_json counts the verdicts once (summary) and derives passed and verdict from the counts: the same
    as the properties, which read the nodes, for each mix of verdicts with and without a model issue."""
    issue = Reason("ir_version", "IR version 10 is not loaded", "unsupported", "model")
    mixes = [(), ("npu",), ("npu", "folded"), ("folded", "cpu"), ("npu", "unsupported"), ("cpu", "unsupported", "npu")]
    seen = set()
    for verdicts in mixes:
        for issues in ((), (issue,)):
            res = _result(*verdicts, issues=issues)
            doc = res.to_json()
            assert (doc["passed"], doc["verdict"], doc["summary"]) == (res.passed, res.verdict, res.summary)
            seen.add((doc["passed"], doc["verdict"]))
    assert seen == {(True, "npu"), (False, "cpu"), (False, "unsupported")}


def test_nodes_as_text_are_written_as_the_nodes_themselves():
    """to_json(nodes_text=True) gives each node's entry as its JSON text, made once per distinct op, verdict,
    reasons, body and fused op and once per source location: jsonio.dumps writes the same document as
    from the nodes' dicts, for a long list (one line per node) and a short one (indented objects)."""
    from pytest_npucheck.graph import SourceLocation
    from pytest_npucheck.jsonio import dumps

    here = SourceLocation(module="layers.0.attn", file="m.py", line=12, code="x = q @ k", function="forward")
    there = SourceLocation(module="layers.1.attn", file="m.py", line=12, code="x = q @ k", function="forward")
    cpu = Reason("op_missing", "Sin is not supported (falls back to the CPU)", "cpu", "op", "inferred", None)
    nodes = []
    for i in range(12):
        verdict = ("npu", "cpu", "folded", "unsupported")[i % 4]
        reasons = (cpu,) if verdict == "cpu" else (Reason("opset", f"opset of n{i} \u00e9", verdict),) \
            if verdict == "unsupported" else ()
        nodes.append(NodeResult(index=i, name=f"n{i} \"q\"", op_type="Sin" if i % 2 else "Relu", domain="ai.onnx",
                                verdict=verdict, reasons=reasons, graph="body" if i == 5 else "",
                                source=(here, there, None)[i % 3], fused_into="Attention (p, at n0)" if i == 7 else None))
    for count in (12, 3, 0):
        res = TargetResult(target="toy@1.0/soc-a", table={"sha256": "x"}, model={"path": "m.onnx"},
                           nodes=tuple(nodes[:count]))
        text = dumps(res.to_json(nodes_text=True))
        assert text == dumps(res.to_json())
        assert [n["name"] for n in json.loads(text)["nodes"]] == [n.name for n in nodes[:count]]
        # more than eight targets: dumps writes each target on one line, the nodes inside it too
        many = [dict(res.to_json(nodes_text=True), target=f"t{i}") for i in range(9)]
        assert dumps({"targets": many}) == dumps({"targets": [dict(res.to_json(), target=f"t{i}") for i in range(9)]})


def test_a_checked_files_nodes_as_text_are_its_nodes(judge):
    layers = [helper.make_node("Relu" if i % 3 else "Sin", [f"t{i}"], [f"t{i + 1}"], name=f"n{i}") for i in range(14)]
    res = judge(make_model(layers, [("t0", (1, 4))], ["t14"]))["__result__"]
    from pytest_npucheck.jsonio import dumps

    assert {n.verdict for n in res.nodes} >= {"npu"} and len(res.nodes) == 14
    assert dumps(res.to_json(nodes_text=True)) == dumps(res.to_json())
