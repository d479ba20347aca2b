"""Partition replay: subgraphs, islands, transitions, bytes, MACs, and the ranking of fallbacks."""

from __future__ import annotations

import numpy as np
from onnx import helper

from conftest import const, make_model


def part_of(judge, model):
    res = judge(model)["__result__"]
    return res, res.partition


def test_cpu_op_between_npu_ops_splits_the_graph(judge):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Erf", ["a"], ["b"], name="erf"),
             helper.make_node("Relu", ["b"], ["y"], name="r2")]
    res, p = part_of(judge, make_model(nodes, [("x", (1, 8, 16, 16))], ["y"]))
    assert (p.npu_subgraphs, p.cpu_islands, len(p.transitions)) == (2, 1, 2)
    assert p.bytes_crossing == 2 * 8 * 16 * 16 * 4
    assert [t.direction for t in p.transitions] == ["npu->cpu", "cpu->npu"]
    [impact] = p.impacts
    assert impact.node == "erf" and impact.splits_graph and impact.transitions == 2
    assert p.to_json()["npu_share_nodes"] == round(2 / 3, 6)


def test_all_on_npu_is_one_subgraph_without_transitions(judge):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"), helper.make_node("Relu", ["a"], ["y"], name="r2")]
    _, p = part_of(judge, make_model(nodes, [("x", (1, 4))], ["y"]))
    assert (p.npu_subgraphs, p.cpu_islands, len(p.transitions), p.impacts) == (1, 0, 0, [])


def test_greedy_order_keeps_parallel_npu_work_together(judge):
    # x -> r1 -> r2 (npu) and x -> erf (cpu), joined by add (npu): one CPU island, two NPU subgraphs
    nodes = [helper.make_node("Erf", ["x"], ["e"], name="erf"),
             helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Relu", ["a"], ["b"], name="r2"),
             helper.make_node("Add", ["b", "e"], ["y"], name="add")]
    _, p = part_of(judge, make_model(nodes, [("x", (1, 4))], ["y"]))
    assert [(d, n) for d, n in p.segments] == [("npu", ["r1", "r2"]), ("cpu", ["erf"]), ("npu", ["add"])]
    assert len(p.transitions) == 1 and p.transitions[0].tensor == "e"


def test_conv_macs_and_mac_share(judge):
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    erf = helper.make_node("Erf", ["c"], ["y"], name="erf")
    m = make_model([conv, erf], [("x", (1, 3, 8, 8))], ["y"], [const("w", np.ones((4, 3, 3, 3))), const("b", np.zeros(4))])
    res, p = part_of(judge, m)
    conv_macs = 4 * 8 * 8 * 3 * 3 * 3
    assert p.macs_total == conv_macs + 4 * 8 * 8
    assert p.macs_npu == conv_macs
    assert not p.impacts[0].splits_graph  # the Erf sits at the end: no NPU work after it


def test_fallbacks_are_ranked_by_cost_in_the_report(judge):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Erf", ["a"], ["b"], name="erf_middle"),
             helper.make_node("Relu", ["b"], ["c"], name="r2"),
             helper.make_node("Erf", ["c"], ["y"], name="erf_tail")]
    res, p = part_of(judge, make_model(nodes, [("x", (1, 64, 32, 32))], ["y"]))
    assert [i.node for i in p.impacts] == ["erf_middle", "erf_tail"]
    from pytest_npucheck.report.text import render_target

    text = "\n".join(render_target(res))
    assert "partition: 2 NPU subgraph(s), 2 CPU island(s), 3 transition(s)" in text
    assert text.index("erf_middle") < text.index("erf_tail")
    doc = res.to_json()["partition"]
    assert doc["fallback_impact"][0]["node"] == "erf_middle" and doc["fallback_impact"][0]["splits_graph"]


def test_folded_nodes_do_not_split(judge):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r1"),
             helper.make_node("Identity", ["a"], ["b"], name="id"),
             helper.make_node("Relu", ["b"], ["y"], name="r2")]
    _, p = part_of(judge, make_model(nodes, [("x", (1, 4))], ["y"]))
    assert p.npu_subgraphs == 1 and not p.transitions


def test_placed_nodes_and_their_macs_are_taken_as_given():
    """partition(placed=...): the caller's live nodes, verdicts and MACs (the matcher's, collected as it
    judges, the MACs once per signature) are used as they are; a node's MACs given as None are computed."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.partition import partition
    from pytest_npucheck.result import NodeResult

    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    erf = helper.make_node("Erf", ["c"], ["y"], name="erf")
    facts = facts_from_model(make_model([conv, erf], [("x", (1, 3, 8, 8))], ["y"],
                                        [const("w", np.ones((4, 3, 3, 3))), const("b", np.zeros(4))]))
    results = [NodeResult(n.index, n.name, n.op_type, n.domain, "npu") for n in facts.nodes]
    conv_macs, erf_macs = 4 * 8 * 8 * 3 * 3 * 3, 4 * 8 * 8
    assert partition(facts, results).macs_total == conv_macs + erf_macs
    [c, e] = [n for n in facts.nodes if n.name in ("conv", "erf")]
    given = partition(facts, results, None, [(c, "npu", 7), (e, "cpu", None)])
    assert (given.macs_total, given.macs_npu, given.nodes_npu) == (7 + erf_macs, 7, 1)
    assert [i.node for i in given.impacts] == ["erf"]  # the verdicts given, not the results'


def test_a_live_node_reading_a_later_live_nodes_result_is_a_late_read():
    """partition._late_read: asked of the graph's readers of each live result, only live readers that
    come before the producer count (a removed node reading it, or the producer itself, does not)."""
    from pytest_npucheck.graph.facts import NodeFact
    from pytest_npucheck.partition import _late_read, _producers

    def node(i, inputs, outputs):
        return NodeFact(i, f"n{i}", "Relu", "ai.onnx", tuple(inputs), tuple(outputs), {}, frozenset(), {})

    nodes = [node(0, ["b"], ["a"]), node(1, ["x"], ["b"]), node(2, ["a", "a"], ["c"])]
    consumers = {"b": [0], "x": [1], "a": [2, 2]}
    assert _late_read(nodes, consumers, {0: "npu", 1: "npu", 2: "npu"})  # node 0 reads b, made by node 1
    assert not _late_read(nodes[1:], consumers, {1: "npu", 2: "npu"})  # node 0 is not live (folded)
    assert not _late_read([node(0, ["x"], ["x"])], {"x": [0]}, {0: "npu"})  # its own result
    assert _producers(nodes) == {"a": 0, "b": 1, "c": 2}


def test_a_graph_out_of_topological_order_keeps_its_reads_in_order(judge):
    """A file whose nodes are out of order (GraphFacts.topological False: _late_read is asked) is
    partitioned in an order where each node follows what it reads."""
    nodes = [helper.make_node("Relu", ["a"], ["y"], name="r2"), helper.make_node("Relu", ["x"], ["a"], name="r1")]
    _, p = part_of(judge, make_model(nodes, [("x", (1, 4))], ["y"]))
    assert [(d, n) for d, n in p.segments] == [("npu", ["r1", "r2"])]
