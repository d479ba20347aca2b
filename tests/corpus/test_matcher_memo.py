"""Verdicts reused between nodes with the same signature (matcher._Memo, issue 8 goal 1).

A stack of identical layers is exported for real; its results against every bundled table must be
the same with the memo as without it, the memo must actually save judgements, and what depends on
more than the node's signature (its neighbours, a constant's values, its own tensor names) must
never be served from another node.
"""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from pytest_npucheck import graph, matcher
from pytest_npucheck.rules import RULES, is_local
from pytest_npucheck.tables import Catalog, Constraint

torch = pytest.importorskip("torch")

TARGET = "rknn@2.5.0/rk3588"
LAYERS = 4


class _Stack(torch.nn.Module):
    """LAYERS identical blocks; block k adds a constant shift, 0.5 + k in even blocks, -(0.5 + k) in odd ones
    (distinct values: the TorchScript exporter shares equal initializers between layers)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.ModuleList(torch.nn.Linear(16, 16) for _ in range(LAYERS))
        self.norm = torch.nn.ModuleList(torch.nn.LayerNorm(16) for _ in range(LAYERS))
        self.shift = torch.nn.ParameterList(torch.nn.Parameter(torch.full((16,), (0.5 + k) * (-1) ** k))
                                            for k in range(LAYERS))

    def forward(self, x):
        for lin, norm, shift in zip(self.lin, self.norm, self.shift):
            x = norm(torch.relu(lin(x)) + x) + shift
        return x


@pytest.fixture(scope="module", params=["torchscript", "dynamo"])
def stack(request, tmp_path_factory):
    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    d = tmp_path_factory.mktemp(f"memo-{request.param}")
    path = export_model(_Stack().eval(), torch.randn(1, 8, 16), ExportOptions(exporter=request.param, opset=17),
                        d).path
    return graph.load_graph(path)


@pytest.fixture
def memo_switch(monkeypatch):
    """match() with the memo on or off, counting the nodes judged from scratch."""
    calls = {"n": 0}
    real = matcher.judge_node

    def counting(*args, **kwargs):
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(matcher, "judge_node", counting)

    def run(facts, table, memo: bool):
        monkeypatch.setattr(matcher, "MEMO", memo)
        calls["n"] = 0
        result = matcher.match(facts, table).to_json()
        return result, calls["n"]

    return run


def test_memo_changes_no_result_against_any_table(stack, memo_switch):
    catalog = Catalog.discover()
    targets = [r["target"] for r in catalog.listing() if "error" not in r]
    assert len(targets) >= 10
    saved = 0
    for target in targets:
        table = catalog.table(target)
        without, judged_without = memo_switch(stack, table, memo=False)
        with_memo, judged_with = memo_switch(stack, table, memo=True)
        assert with_memo == without, target
        assert judged_with <= judged_without
        saved += judged_without - judged_with
    # the repeated layers are judged once per table, not once per layer
    assert saved >= len(targets) * (LAYERS - 1)


def _with_constraint(table, op: str, constraint: Constraint):
    entry = table.ops[op]
    ops = {**table.ops, op: dataclasses.replace(entry, constraints=entry.constraints + (constraint,))}
    return dataclasses.replace(table, ops=ops)


def _nodes(result, op_type: str) -> list[dict]:
    return [n for n in result["nodes"] if n["op_type"] == op_type]


def test_context_rule_is_judged_per_node(stack, memo_switch):
    """The shift Adds of the even blocks share one signature; only the last block's produces the output."""
    assert is_local("input_count", {}) and not is_local("not_graph_output", {})
    table = _with_constraint(Catalog.discover().table(TARGET), "ai.onnx:Add",
                             Constraint("not_graph_output", {}, "cpu"))
    result, _ = memo_switch(stack, table, memo=True)
    without, _ = memo_switch(stack, table, memo=False)
    assert result == without
    adds = [n for n in _nodes(result, "Add") if n["verdict"] != "folded" and "fused_into" not in n]
    flagged = [n for n in adds if any(r["rule"] == "not_graph_output" for r in n["reasons"])]
    assert len(flagged) == 1 and flagged[0]["verdict"] == "cpu"
    assert stack.outputs[0] in flagged[0]["reasons"][0]["message"]
    assert sum(1 for n in adds if n["verdict"] == "npu") >= LAYERS


def test_constant_values_are_part_of_the_signature(stack, memo_switch):
    """The shifts differ only in their values: a rule that reads values must see each one."""
    table = _with_constraint(Catalog.discover().table(TARGET), "ai.onnx:Add",
                             Constraint("const_value_range", {"index": 1, "min": 0}, "cpu"))
    result, _ = memo_switch(stack, table, memo=True)
    assert result == memo_switch(stack, table, memo=False)[0]
    shifts = {(0.5 + k) * (-1) ** k for k in range(LAYERS)}
    by_sign: dict[bool, list] = {True: [], False: []}
    for node in stack.nodes:
        if node.op_type != "Add" or len(node.inputs) < 2:
            continue
        info = stack.tensor(node.inputs[1])
        if info is not None and info.const and info.value and len(set(info.value)) == 1 and info.value[0] in shifts:
            verdict = next(n for n in result["nodes"] if n["name"] == node.name)
            by_sign[info.value[0] > 0].append((node, verdict))
    assert len(by_sign[True]) == LAYERS // 2 and len(by_sign[False]) == LAYERS // 2
    assert all(v["verdict"] == "npu" and not v["reasons"] for _, v in by_sign[True])
    for node, v in by_sign[False]:  # same signature but for the values: judged, and named, per node
        assert v["verdict"] == "cpu"
        assert f"'{node.inputs[1]}'" in v["reasons"][0]["message"]


def test_failing_local_rule_names_each_nodes_own_tensor(stack, memo_switch):
    table = _with_constraint(Catalog.discover().table(TARGET), "ai.onnx:LayerNormalization",
                             Constraint("rank", {"max": 2}, "cpu"))
    result, _ = memo_switch(stack, table, memo=True)
    assert result == memo_switch(stack, table, memo=False)[0]
    norms = [n for n in _nodes(result, "LayerNormalization") if n["verdict"] != "folded"]
    assert len(norms) == LAYERS
    messages = [n["reasons"][-1]["message"] for n in norms]
    assert len(set(messages)) == LAYERS  # one tensor name each, none copied from another layer
    for n, message in zip(norms, messages):
        node = next(f for f in stack.nodes if f.name == n["name"])
        assert f"'{node.inputs[0]}'" in message


def test_value_free_rules_read_no_constant_values():
    """VALUE_FREE_RULES leaves constant values out of the memo key: those rules must not read them."""
    for rule_id in matcher.VALUE_FREE_RULES:
        assert rule_id in RULES, rule_id
        assert RULES[rule_id].local, rule_id
        source = inspect.getsource(RULES[rule_id].fn)
        assert ".value" not in source, rule_id
    assert ".value" not in inspect.getsource(__import__("pytest_npucheck.rules", fromlist=["x"]).implicit_default)
    # the rules that do read values are not in the set
    assert {"axis_in", "const_value_range"}.isdisjoint(matcher.VALUE_FREE_RULES)


def test_unhashable_facts_are_judged_alone(stack, memo_switch):
    """Facts not built by graph.build (here: a node's explicit attributes as a plain set) must not break the memo."""
    nodes = tuple(dataclasses.replace(n, explicit_attrs=set(n.explicit_attrs)) if n.op_type == "LayerNormalization"
                  else n for n in stack.nodes)
    odd = dataclasses.replace(stack, nodes=nodes)
    table = Catalog.discover().table(TARGET)
    with_memo, judged_with = memo_switch(odd, table, memo=True)
    without, judged_without = memo_switch(odd, table, memo=False)
    assert with_memo == without
    assert judged_with < judged_without  # the other ops still share their verdicts


def _counting_rule(monkeypatch, rule_id: str) -> dict:
    calls = {"n": 0}
    real = RULES[rule_id]

    def fn(node, params, view):
        calls["n"] += 1
        return real.fn(node, params, view)

    monkeypatch.setitem(RULES, rule_id, dataclasses.replace(real, fn=fn))
    return calls


def test_any_of_mixing_local_and_context_rules(stack, memo_switch, monkeypatch):
    """A local alternative that passes for the signature decides the any_of: its context alternative is
    not run for any node. When no local alternative passes, the any_of is judged per node, with the
    message it has without the memo."""
    calls = _counting_rule(monkeypatch, "not_graph_output")
    base = Catalog.discover().table(TARGET)
    passing = _with_constraint(base, "ai.onnx:Add", Constraint("any_of", {"constraints": [
        {"rule": "not_graph_output", "params": {}}, {"rule": "input_count", "params": {"max": 2}}]}, "cpu"))
    result, _ = memo_switch(stack, passing, memo=True)
    assert calls["n"] == 0
    assert result == memo_switch(stack, passing, memo=False)[0]
    assert calls["n"] > 0  # without the memo every Add runs it (before the local alternative)

    failing = _with_constraint(base, "ai.onnx:Add", Constraint("any_of", {"constraints": [
        {"rule": "not_graph_output", "params": {}}, {"rule": "input_count", "params": {"max": 1}}]}, "cpu"))
    result, _ = memo_switch(stack, failing, memo=True)
    assert result == memo_switch(stack, failing, memo=False)[0]
    flagged = [n for n in _nodes(result, "Add") if any(r["rule"] == "any_of" for r in n["reasons"])]
    assert len(flagged) == 1 and flagged[0]["verdict"] == "cpu"
    message = flagged[0]["reasons"][0]["message"]
    assert "is a graph output" in message and "has 2 inputs" in message and message.endswith("(any one of these would do)")


def test_context_alternative_of_a_real_table_on_a_real_export(corpus, export_cache, memo_switch):
    """CycleGAN's residual blocks pad twice with reflect Pads of one signature; the RK3588 table's
    any_of(mode in {constant, edge}, producer_not Relu <- InstanceNormalization) puts only the
    second Pad of each block on the CPU. The memo must give each Pad its own verdict, as without it."""
    from pytest_npucheck.export import ExportOptions, export_model

    torch.manual_seed(0)
    path = export_model(*corpus["cyclegan_resnet_generator"].build(), ExportOptions(exporter="dynamo", opset=19),
                        export_cache).path
    facts = graph.load_graph(path)
    table = Catalog.discover().table(TARGET)
    with_memo, judged_with = memo_switch(facts, table, memo=True)
    without, judged_without = memo_switch(facts, table, memo=False)
    assert with_memo == without
    assert judged_with < judged_without
    pads = _nodes(with_memo, "Pad")
    by_sig: dict = {}
    for n in pads:
        node = next(f for f in facts.nodes if f.name == n["name"])
        sig = (repr(node.attrs), tuple(facts.tensor(i).shape for i in node.inputs if i))
        by_sig.setdefault(sig, set()).add(n["verdict"])
    assert {"npu", "cpu"} in by_sig.values()  # one signature, both verdicts: decided by the neighbours
    cpu = [n for n in pads if n["verdict"] == "cpu"]
    assert len(cpu) == 4
    assert all("InstanceNormalization" in n["reasons"][0]["message"] for n in cpu)


def test_a_context_rule_its_own_facts_settle_is_asked_once_per_signature(stack, memo_switch, monkeypatch):
    """tile_transpose_perm on the Adds (no perm among its perms: Rule.settled) passes on every Add: with the
    memo it is settled per signature and never run; without the memo it runs on every Add. A rule the
    node's facts do not settle (a Transpose perm it names) still runs per node."""
    calls = _counting_rule(monkeypatch, "tile_transpose_perm")
    base = Catalog.discover().table(TARGET)
    table = _with_constraint(base, "ai.onnx:Add", Constraint("tile_transpose_perm", {
        "perms": [[0, 2, 1]], "sources": ["Slice"], "through": []}, "unsupported"))
    result, _ = memo_switch(stack, table, memo=True)
    assert calls["n"] == 0
    assert result == memo_switch(stack, table, memo=False)[0]
    assert calls["n"] >= LAYERS
    assert RULES["tile_transpose_perm"].settled is not None and not RULES["tile_transpose_perm"].local


def test_mixed_any_of_runs_its_failing_local_alternatives_once_per_signature(stack, memo_switch, monkeypatch):
    """When no local alternative of a mixed any_of passes for a signature, its nodes run only the context
    alternatives: the local ones run on the signature's first node, and again only in the whole any_of of
    a node whose context alternatives fail too (for its message), never on every node as without the memo."""
    alternative = {"max": 1}  # every Add has two inputs: this local alternative fails on all of them
    calls = {"n": 0}
    real = RULES["input_count"]

    def fn(node, params, view):
        calls["n"] += params is alternative
        return real.fn(node, params, view)

    monkeypatch.setitem(RULES, "input_count", dataclasses.replace(real, fn=fn))
    table = _with_constraint(Catalog.discover().table(TARGET), "ai.onnx:Add", Constraint("any_of", {"constraints": [
        {"rule": "input_count", "params": alternative}, {"rule": "not_graph_output", "params": {}}]}, "cpu"))
    result, _ = memo_switch(stack, table, memo=True)
    with_memo, calls["n"] = calls["n"], 0
    assert result == memo_switch(stack, table, memo=False)[0]
    judged = [n for n in _nodes(result, "Add") if n["verdict"] != "folded" and "fused_into" not in n]
    assert calls["n"] == len(judged) > 2 * LAYERS - 1  # without the memo: once per Add
    flagged = [n for n in judged if any(r["rule"] == "any_of" for r in n["reasons"])]
    assert len(flagged) == 1  # the last shift Add makes the graph output
    # the Adds of the LAYERS blocks have a few signatures (bias, residual, shift): each runs it once
    assert 0 < with_memo <= len(judged) // 2


def test_macs_are_computed_once_per_signature(stack, memo_switch, monkeypatch):
    """The partition's MACs of a node judged through its signature are the signature's (partition.node_macs
    once per signature): the same partition as without the memo, node_macs asked of fewer MAC-op nodes."""
    from pytest_npucheck import partition

    calls = {"n": 0}
    real = partition.node_macs

    def counting(node, view):
        calls["n"] += node.op_type in partition._MAC_OPS
        return real(node, view)

    monkeypatch.setattr(partition, "node_macs", counting)
    monkeypatch.setattr(matcher, "node_macs", counting)
    table = Catalog.discover().table(TARGET)
    result, _ = memo_switch(stack, table, memo=True)
    with_memo, calls["n"] = calls["n"], 0
    without, _ = memo_switch(stack, table, memo=False)
    assert result["partition"] == without["partition"] and result["partition"]["macs"] > 0
    assert calls["n"] >= 2 * LAYERS  # without the memo: each Linear and each LayerNorm of every block
    assert with_memo <= calls["n"] // 2
