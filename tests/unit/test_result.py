"""Verdict provenance: every reason says whether its rule was probed on the real toolchain, read in
the vendor's documentation, or inferred; documentation-only targets say so in every report."""

from __future__ import annotations

from onnx import TensorProto, helper

from pytest_npucheck.check import check_graph
from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.report import html as html_report
from pytest_npucheck.report import markdown as md_report
from pytest_npucheck.report.jsonreport import run_document, validate
from pytest_npucheck.report.text import render_target
from pytest_npucheck.result import source_basis
from pytest_npucheck.tables import Catalog


def _model():
    """A Reshape to a run-time shape (a constraint of the Reshape entry fails), an op no table lists
    (com.example:Echo), and a Softmax after a rank the checker cannot infer."""
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["r2"], name="relu"),
             helper.make_node("Echo", ["x"], ["e"], domain="com.example", name="echo"),
             helper.make_node("Reshape", ["x", "e_shape"], ["lost"], name="lost_reshape"),
             helper.make_node("Shape", ["x"], ["xs"], name="shape"),
             helper.make_node("Echo", ["xs"], ["e_shape"], domain="com.example", name="echo_shape"),
             helper.make_node("Softmax", ["lost"], ["y"], name="softmax", axis=-1)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8]),
                                       helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in ("r2", "e", "y")])
    # nodes in graph order: echo_shape before lost_reshape
    order = ["reshape", "relu", "echo", "shape", "echo_shape", "lost_reshape", "softmax"]
    g.node.sort(key=lambda n: order.index(n.name))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)],
                             ir_version=8)


def _result(target):
    return check_graph(facts_from_model(_model()), [Catalog.discover().table(target)])[0]


def _reasons(result, name):
    return {r.rule: r for n in result.nodes if n.name == name for r in n.reasons}


def test_source_keys_name_the_basis():
    assert source_basis("probe:rknn-2.5.0-rk3588") == "probed"
    assert source_basis("doc:snpe-onnx-ops-2025.06") == "documented"
    assert source_basis(None) == source_basis("anything-else") == "inferred"


def test_probed_tables_label_their_rules_probed_and_their_defaults_inferred():
    result = _result("rknn@2.5.0/rk3588")
    const = _reasons(result, "reshape")["const_input"]
    assert (const.basis, const.source) == ("probed", "probe:rknn-2.5.0-rk3588")  # the entry's source
    missing = _reasons(result, "echo")["op_missing"]
    assert (missing.basis, missing.source) == ("inferred", None)  # no probe of an op the table lacks
    assert {r.basis for r in _reasons(result, "softmax").values()} == {"inferred"}  # shape_unknown: the checker's
    folded = _reasons(result, "shape")["prepass"]
    assert folded.basis == "probed"  # the table's pre-passes were probed
    assert result.table["provenance"] == "probed+documented"


def test_documentation_only_tables_label_every_verdict_documented():
    for target in ("cann@8.0.0/ascend310p", "snpe@2025.08/htp"):
        result = _result(target)
        fallbacks = [r for n in result.nodes if n.falls_back for r in n.reasons]
        assert fallbacks and {r.basis for r in fallbacks} == {"documented"}, (target, fallbacks)
        assert all(r.source and r.source.startswith("doc:") for r in fallbacks)
        assert "documentation only" in render_target(result)[0]


def test_every_report_carries_the_basis():
    results = [_result("rknn@2.5.0/rk3588"), _result("snpe@2025.08/htp")]
    targets = []
    for r in results:
        j = r.to_json()
        j["baseline"] = {"new": [n.name for n in r.fallbacks], "accepted": [], "passed": False}
        targets.append(j)
    doc = run_document([{"nodeid": "t.py::test_a", "status": "failed", "error": None, "export": None,
                         "targets": targets}])
    assert validate(doc) == []
    reasons = [r for t in targets for n in t["nodes"] for r in n["reasons"]]
    assert reasons and all(r["basis"] in ("probed", "documented", "inferred") for r in reasons)
    text = "\n".join(render_target(results[0]))
    assert "is computed at run time, not a constant; the compiler rejects the model [probed]" in text
    md = md_report.render(doc)
    assert "\\[probed\\]" in md and "\\[documented\\]" in md and "documentation only" in md
    page = html_report.render(doc)
    assert "[probed]" in page and "[documented]" in page and "documentation only: not checked against the toolchain" in page


def _node(i, verdict, reasons=()):
    from pytest_npucheck.result import NodeResult

    return NodeResult(index=i, name=f"n{i}", op_type="Relu", domain="", verdict=verdict, reasons=reasons)


def test_summary_passed_and_verdict_read_every_node():
    """The counts, ``passed`` and ``verdict`` are gathered in C over the nodes' verdicts: the same
    answers as one node at a time, a fallback anywhere fails the target, an unknown verdict is refused."""
    import pytest

    from pytest_npucheck.result import Reason, TargetResult

    def target(*verdicts, issues=()):
        return TargetResult("t", {}, {}, tuple(_node(i, v) for i, v in enumerate(verdicts)), model_issues=issues)

    mixed = target("npu", "folded", "npu", "cpu")
    assert mixed.summary == {"npu": 2, "cpu": 1, "unsupported": 0, "folded": 1}
    assert list(mixed.summary) == ["npu", "cpu", "unsupported", "folded"]
    assert (mixed.passed, mixed.verdict) == (False, "cpu")
    assert (target("npu", "unsupported", "cpu").verdict, target("npu", "unsupported").passed) == ("unsupported", False)
    assert (target("npu", "folded").passed, target("npu", "folded").verdict) == (True, "npu")
    assert (target().passed, target().verdict, target().summary["npu"]) == (True, "npu", 0)
    issue = Reason("opset", "too new", "unsupported")
    assert (target("npu", issues=(issue,)).passed, target("npu", issues=(issue,)).verdict) == (False, "unsupported")
    with pytest.raises(KeyError):
        target("npu", "gpu").summary


def test_node_texts_hash_a_shared_reasons_tuple_once(monkeypatch):
    """``_nodes_text`` keys a node's text on its reasons tuple by identity: the matcher shares one tuple
    between nodes judged alike, and hashing it called a Python ``Reason.__hash__`` for every node (14,700
    folded nodes of issue 29's encoder). Equal tuples that are distinct objects still share one text, and
    every text is the node's own compact JSON."""
    from pytest_npucheck import jsonio
    from pytest_npucheck.result import Reason, _nodes_text

    shared = (Reason("fold", "folded into a constant", "folded"),)
    equal = (Reason("fold", "folded into a constant", "folded"),)
    nodes = [_node(i, "folded", shared) for i in range(50)] + [_node(50, "folded", equal), _node(51, "npu")]
    calls: list[int] = []
    original = Reason.__hash__
    monkeypatch.setattr(Reason, "__hash__", lambda self: calls.append(1) or original(self))
    texts = _nodes_text(tuple(nodes)).texts
    assert len(calls) <= 4  # a lookup and a store per distinct tuple object, not a hash per node (52 before)
    monkeypatch.undo()
    assert texts == [jsonio.compact(n.to_json()) for n in nodes]


def test_the_matcher_s_node_results_are_frozen_node_results_like_any_other():
    import dataclasses
    import pickle

    import pytest

    from pytest_npucheck.result import NodeResult

    result = _result("rknn@2.5.0/rk3588")
    node = result.nodes[0]
    assert type(node) is NodeResult
    same = NodeResult(node.index, node.name, node.op_type, node.domain, node.verdict, node.reasons, node.graph,
                      node.source, node.fused_into)
    assert node == same and hash(node) == hash(same)
    assert pickle.loads(pickle.dumps(node)) == node  # results travel from the isolated child as a pickle
    assert dataclasses.replace(node, verdict="cpu").verdict == "cpu"
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.verdict = "cpu"  # type: ignore[misc]
