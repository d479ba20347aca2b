"""Context rules (``pytest_npucheck/rules/context.py``) on small graphs: the RKNN placements that
depend on a node's neighbours, as the real compiler showed them (the ``x.*`` context probes in
probes/rknn/*/*.extra.results.json and the corpus agreement runs; the real exports are in
tests/corpus/test_rules_context_exports.py)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_npucheck.check import check_graph
from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.rules import RULES, is_local
from pytest_npucheck.tables import Catalog, table_from_data

REPO = Path(__file__).resolve().parents[2]
CATALOG = Catalog.discover()


def _reasons(node):
    return " | ".join(r.message for r in node.reasons)


# -- the rules themselves, on small graphs ---------------------------------------------------------


def _graph(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return m


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _table(constraints, op="Pad", prepasses=("eliminate_identity",)):
    base = json.loads((REPO / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    base["ops"] = {f"ai.onnx:{o}": {"status": "npu", "source": "probe:rknn-2.5.0-rk3588"}
                   for o in ("Relu", "InstanceNormalization", "Identity", "Conv", "Add", "Softmax",
                             "MatMul", "Reshape", "Flatten")}
    base["ops"][f"ai.onnx:{op}"] = {"status": "npu", "source": "probe:rknn-2.5.0-rk3588",
                                    "constraints": constraints}
    base["generic_constraints"], base["patterns"] = [], []
    base["prepasses"] = list(prepasses)
    return table_from_data(base)


def _in_relu_pad(identity: bool, residual: bool):
    nodes = [helper.make_node("InstanceNormalization", ["x", "s", "b"], ["n"], name="in"),
             helper.make_node("Relu", ["n"], ["r"], name="relu")]
    src = "r"
    if identity:
        nodes.append(helper.make_node("Identity", ["r"], ["r2"], name="id"))
        src = "r2"
    nodes.append(helper.make_node("Pad", [src, "pads"], ["y"], name="pad", mode="reflect"))
    outs = [_vi("y", [1, 4, 10, 10])]
    if residual:
        nodes.append(helper.make_node("Add", [src, src], ["z"], name="res"))
        outs.append(_vi("z", [1, 4, 8, 8]))
    inits = [numpy_helper.from_array(np.ones(4, np.float32), "s"),
             numpy_helper.from_array(np.zeros(4, np.float32), "b"),
             numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "pads")]
    return facts_from_model(_graph(nodes, [_vi("x", [1, 4, 8, 8])], outs, inits))


PAD_RULE = {"rule": "producer_not", "params": {"index": 0, "exclusive": True,
                                               "chain": ["Relu", "InstanceNormalization"]},
            "else": "cpu"}


@pytest.mark.parametrize("identity", [False, True])
def test_producer_not_looks_through_eliminated_identity(identity):
    [r] = check_graph(_in_relu_pad(identity, residual=False), [_table([PAD_RULE])])
    [pad] = [n for n in r.nodes if n.name == "pad"]
    assert pad.verdict == "cpu", _reasons(pad)
    assert "Relu 'relu' <- InstanceNormalization 'in'" in _reasons(pad)


def test_producer_not_exclusive_skips_shared_input():
    [r] = check_graph(_in_relu_pad(False, residual=True), [_table([PAD_RULE])])
    [pad] = [n for n in r.nodes if n.name == "pad"]
    assert pad.verdict == "npu"


def test_feeds_not_follows_the_path_with_skips():
    nodes = [helper.make_node("Reshape", ["m", "shape"], ["mr"], name="pre"),
             helper.make_node("Flatten", ["mr"], ["e"], name="focus", axis=0),
             helper.make_node("Reshape", ["e", "shape2"], ["e2"], name="skip"),
             helper.make_node("Add", ["s", "e2"], ["a"], name="add"),
             helper.make_node("Softmax", ["a"], ["p"], name="sm", axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.array([1, 1, 1, 4], np.int64), "shape"),
             numpy_helper.from_array(np.array([1, 1, 1, 4], np.int64), "shape2")]
    model = _graph(nodes, [_vi("m", [1, 4]), _vi("s", [1, 2, 4, 4]), _vi("v", [1, 2, 4, 3])],
                   [_vi("y", [1, 2, 4, 3])], inits)
    facts = facts_from_model(model)
    rule = {"rule": "feeds_not", "params": {"path": ["Add", "Softmax", "MatMul"], "skip": ["Reshape"]}}
    [r] = check_graph(facts, [_table([rule], op="Flatten", prepasses=())])
    [f] = [n for n in r.nodes if n.name == "focus"]
    assert f.verdict == "cpu"
    assert "Reshape 'skip' -> Add 'add' -> Softmax 'sm' -> MatMul 'mm'" in _reasons(f)
    no_skip = {"rule": "feeds_not", "params": {"path": ["Add", "Softmax", "MatMul"]}}
    [r] = check_graph(facts, [_table([no_skip], op="Flatten", prepasses=())])
    assert [n for n in r.nodes if n.name == "focus"][0].verdict == "npu"


def test_feeds_not_star_matches_any_reader():
    """path ["*"]: fails as soon as any node reads the result; a result that only leaves the model passes."""
    def model(read: bool):
        nodes = [helper.make_node("Flatten", ["m"], ["e"], name="focus", axis=0)]
        if read:
            nodes.append(helper.make_node("Relu", ["e"], ["y"], name="reader"))
        return facts_from_model(_graph(nodes, [_vi("m", [1, 4])], [_vi("y" if read else "e", [1, 4])], []))

    rule = {"rule": "feeds_not", "params": {"path": ["*"]}}
    verdicts = {}
    for read in (False, True):
        [r] = check_graph(model(read), [_table([rule], op="Flatten", prepasses=())])
        [f] = [n for n in r.nodes if n.name == "focus"]
        verdicts[read] = (f.verdict, _reasons(f))
    assert verdicts[False][0] == "npu"
    assert verdicts[True][0] == "cpu" and "Relu 'reader'" in verdicts[True][1]


def _rnn_head(classes: int, rnn: bool = True):
    """(T, 1, 8) -> [LSTM] -> Transpose -> Reshape (T, 2H) -> Gemm (T, classes) -> Reshape (T, 1, classes)."""
    seq, hid = 6, 4
    nodes, inits = [], [numpy_helper.from_array(np.array([seq, 2 * hid], np.int64), "flat_shape"),
                        numpy_helper.from_array(np.array([seq, 1, classes], np.int64), "view_shape"),
                        numpy_helper.from_array(np.ones((classes, 2 * hid), np.float32), "w"),
                        numpy_helper.from_array(np.zeros(classes, np.float32), "bias")]
    if rnn:
        inits += [numpy_helper.from_array(np.ones((2, 4 * hid, 8), np.float32), "lw"),
                  numpy_helper.from_array(np.ones((2, 4 * hid, hid), np.float32), "lr")]
        nodes += [helper.make_node("LSTM", ["x", "lw", "lr"], ["y"], name="lstm", hidden_size=hid,
                                   direction="bidirectional"),
                  helper.make_node("Transpose", ["y"], ["yt"], name="t", perm=[0, 2, 1, 3]),
                  helper.make_node("Reshape", ["yt", "flat_shape"], ["flat"], name="flat")]
        inputs = [_vi("x", [seq, 1, 8])]
    else:
        inputs = [_vi("flat", [seq, 2 * hid])]
    nodes += [helper.make_node("Gemm", ["flat", "w", "bias"], ["g"], name="head", transB=1),
              helper.make_node("Reshape", ["g", "view_shape"], ["out"], name="view")]
    return facts_from_model(_graph(nodes, inputs, [_vi("out", [seq, 1, classes])], inits))


RNN_HEAD = {"rule": "any_of", "params": {"constraints": [
    {"rule": "producer_not", "params": {"index": 0, "chain": ["Gemm", ["GRU", "LSTM", "RNN"]],
                                        "skip": ["Reshape", "Transpose"]}},
    {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -1, "multiple_of": 8}}]}, "else": "cpu"}


@pytest.mark.parametrize("classes, rnn, want", [(37, True, "cpu"), (36, True, "cpu"), (40, True, "npu"),
                                                (37, False, "npu")])
def test_producer_not_skips_layout_ops_between_steps(classes, rnn, want):
    """RKNN's CRNN classifier rule: the Reshape of a Gemm that reads an LSTM through a Transpose and a
    Reshape runs on the CPU unless the class count is a multiple of 8."""
    [r] = check_graph(_rnn_head(classes, rnn), [_table([RNN_HEAD], op="Reshape", prepasses=())])
    [view] = [n for n in r.nodes if n.name == "view"]
    assert view.verdict == want, _reasons(view)
    if want == "cpu":
        assert "Gemm 'head' <- Reshape 'flat' <- Transpose 't' <- LSTM 'lstm'" in _reasons(view)
        assert f"dim 1 is {classes}, not a multiple of 8" in _reasons(view)
    # without the skip the chain Gemm <- LSTM never matches: the producer of the Gemm is a Reshape
    no_skip = json.loads(json.dumps(RNN_HEAD))
    del no_skip["params"]["constraints"][0]["params"]["skip"]
    [r] = check_graph(_rnn_head(classes, rnn), [_table([no_skip], op="Reshape", prepasses=())])
    assert [n for n in r.nodes if n.name == "view"][0].verdict == "npu"


def test_rnn_head_rule_describes_itself():
    from pytest_npucheck.rules import RULES

    text = RULES["any_of"].describe(RNN_HEAD["params"])
    assert "Gemm <- GRU|LSTM|RNN (with any of {'Reshape', 'Transpose'} in between)" in text, text
    assert "must be a multiple of 8" in text, text
    assert RULES["dim"].describe({"axis": 1, "min": 32}) == "input 0 dimension 1 must be in [32, inf].", \
        RULES["dim"].describe({"axis": 1, "min": 32})


def test_not_graph_output_from_node():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Flatten", ["r"], ["y"], name="flat"),
             helper.make_node("Flatten", ["x"], ["y2"], name="flat_in")]
    facts = facts_from_model(_graph(nodes, [_vi("x", [1, 4, 2, 2])],
                                    [_vi("y", [1, 16]), _vi("y2", [1, 16])]))
    rule = {"rule": "not_graph_output", "params": {"from_node": True}}
    [r] = check_graph(facts, [_table([rule], op="Flatten", prepasses=())])
    got = {n.name: n.verdict for n in r.nodes}
    assert got["flat"] == "cpu" and got["flat_in"] == "npu"


def test_context_rules_are_not_local_and_describe_themselves():
    for rid in ("not_graph_output", "producer_not", "feeds_not"):
        assert not RULES[rid].local
    assert not is_local("any_of", {"constraints": [{"rule": "rank", "params": {}},
                                                   {"rule": "feeds_not", "params": {"path": ["X"]}}]})
    assert is_local("rank", {})
    text = RULES["producer_not"].describe(PAD_RULE["params"])
    assert text == ("input 0 is not computed by Relu <- InstanceNormalization "
                    "(when this node is the only reader of that input).")


def test_schema_rejects_bad_context_params(tmp_path):
    from pytest_npucheck.tables import validate_table_data

    raw = json.loads((REPO / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    raw["ops"]["ai.onnx:Pad"]["constraints"].append(
        {"rule": "producer_not", "params": {"chain": []}, "else": "cpu"})
    problems = validate_table_data(raw, tmp_path / "t.json", REPO / "op_support_tables/schema.json",
                                   ("rknn", "2.5.0", "rk3588"))
    assert problems and any("chain" in p for p in problems), problems


@pytest.mark.parametrize("constraint, field", [
    ({"rule": "dim", "params": {"axis": -1, "multiple_of": 1}}, "multiple_of"),
    ({"rule": "dim", "params": {"axis": -1}}, "'min' is a required property"),
    ({"rule": "producer_not", "params": {"chain": ["Gemm"], "skip": "Reshape"}}, "skip")])
def test_schema_checks_multiple_of_and_producer_skip(tmp_path, constraint, field):
    from pytest_npucheck.tables import validate_table_data

    raw = json.loads((REPO / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    raw["ops"]["ai.onnx:Reshape"]["constraints"].append(dict(constraint, **{"else": "cpu"}))
    problems = validate_table_data(raw, tmp_path / "t.json", REPO / "op_support_tables/schema.json",
                                   ("rknn", "2.5.0", "rk3588"))
    assert problems and any("ai.onnx:Reshape" in p and field in p for p in problems), problems
    raw["ops"]["ai.onnx:Reshape"]["constraints"][-1] = dict(RNN_HEAD)
    assert not validate_table_data(raw, tmp_path / "t.json", REPO / "op_support_tables/schema.json",
                                   ("rknn", "2.5.0", "rk3588"))


ROLL_RULE = {"rule": "not_spatial_roll", "params": {"channels_last_after": ["LayerNormalization", "MatMul"]},
             "else": "cpu"}


def _roll_graph(front: str, axis: int, slice_axes=None, same_source=True):
    """x -> front -> (1, 8, 8, 16) grid -> Slice + Slice -> Concat(axis) -> y."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("s0", [2]), ("e0", [8]), ("s1", [0]), ("e1", [2]), ("grid", [1, 8, 8, 16]),
              ("ax_a", [slice_axes[0] if slice_axes else axis]), ("ax_b", [slice_axes[1] if slice_axes else axis]))]
    inits += [numpy_helper.from_array(np.ones(16, np.float32), "g"),
              numpy_helper.from_array(np.zeros(16, np.float32), "b")]
    nodes = []
    if front == "norm":  # tokens -> LayerNorm over the features -> view as a grid (Swin)
        nodes += [helper.make_node("Mul", ["x", "x"], ["m"], name="pre"),
                  helper.make_node("LayerNormalization", ["m", "g", "b"], ["n"], name="norm", axis=-1),
                  helper.make_node("Reshape", ["n", "grid"], ["t"], name="view")]
        x = _vi("x", [1, 64, 16])
    elif front == "norm_mid":  # LayerNorm over axes 1.. (not the features alone): no channels-last
        nodes += [helper.make_node("Mul", ["x", "x"], ["m"], name="pre"),
                  helper.make_node("LayerNormalization", ["m", "g2", "b2"], ["n"], name="norm", axis=1),
                  helper.make_node("Reshape", ["n", "grid"], ["t"], name="view")]
        inits += [numpy_helper.from_array(np.ones((64, 16), np.float32), "g2"),
                  numpy_helper.from_array(np.zeros((64, 16), np.float32), "b2")]
        x = _vi("x", [1, 64, 16])
    else:  # a grid straight from the input
        nodes += [helper.make_node("Relu", ["x"], ["t"], name="pre")]
        x = _vi("x", [1, 8, 8, 16])
    other = "t" if same_source else "x2"
    nodes += [helper.make_node("Slice", ["t", "s0", "e0", "ax_a"], ["a"], name="roll_a"),
              helper.make_node("Slice", [other, "s1", "e1", "ax_b"], ["c"], name="roll_b"),
              helper.make_node("Concat", ["a", "c"], ["y"], name="roll", axis=axis)]
    inputs = [x] + ([] if same_source else [_vi("x2", [1, 8, 8, 16])])
    return facts_from_model(_graph(nodes, inputs, [_vi("y", None)], inits))


@pytest.mark.parametrize("front,axis,want", [
    ("input", 1, "npu"), ("input", 2, "cpu"), ("input", -2, "cpu"), ("input", 3, "cpu"),
    ("norm", 1, "cpu"), ("norm", 2, "cpu"), ("norm", 3, "npu"), ("norm_mid", 1, "npu"), ("norm_mid", 2, "cpu")])
def test_not_spatial_roll_reads_the_channel_axis_from_the_producers(front, axis, want):
    [r] = check_graph(_roll_graph(front, axis), [_table([ROLL_RULE], op="Concat", prepasses=())])
    [roll] = [n for n in r.nodes if n.name == "roll"]
    assert roll.verdict == want, _reasons(roll)
    if want == "cpu":
        text = _reasons(roll)
        assert "Slice 'roll_a', Slice 'roll_b'" in text and "spatial axis" in text
        assert ("LayerNormalization 'norm'" in text) is (front == "norm"), text


def test_not_spatial_roll_needs_slices_of_one_tensor_along_the_concat_axis():
    table = _table([ROLL_RULE], op="Concat", prepasses=())
    for facts in (_roll_graph("input", 2, slice_axes=(1, 2)), _roll_graph("input", 2, same_source=False)):
        [r] = check_graph(facts, [table])
        assert [n for n in r.nodes if n.name == "roll"][0].verdict == "npu"
    assert RULES["not_spatial_roll"].describe(ROLL_RULE["params"]).endswith(
        "or the last when {'LayerNormalization', 'MatMul'} made it.")


REACH = {"rule": "feeds_compute", "params": {"ops": ["MatMul", "Conv"], "through": ["Reshape", "Mul"]}, "else": "cpu"}


def _head_split(consumer: str):
    """x -> Reshape -> Transpose -> Reshape -> consumer (MatMul, a CPU Einsum, or nothing: graph output)."""
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in
             (("s4", [1, 8, 2, 4]), ("s3", [2, 8, 4]))] + [numpy_helper.from_array(np.ones((4, 4), np.float32), "w")]
    nodes = [helper.make_node("Reshape", ["x", "s4"], ["v"], name="view"),
             helper.make_node("Transpose", ["v"], ["t"], name="split", perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "s3"], ["m"], name="merge")]
    if consumer == "matmul":
        nodes.append(helper.make_node("Mul", ["m", "m"], ["mm"], name="scale"))
        nodes.append(helper.make_node("MatMul", ["mm", "w"], ["y"], name="mm"))
    elif consumer == "einsum":
        nodes.append(helper.make_node("Einsum", ["m", "m"], ["y"], name="es", equation="bid,bjd->bij"))
    else:
        nodes.append(helper.make_node("Identity", ["m"], ["y"], name="out"))
    return facts_from_model(_graph(nodes, [_vi("x", [1, 8, 8])], [_vi("y", None)], inits))


@pytest.mark.parametrize("consumer,want", [("matmul", "npu"), ("einsum", "cpu"), ("output", "cpu")])
def test_feeds_compute_follows_layout_and_elementwise_ops(consumer, want):
    facts = _head_split(consumer)
    [r] = check_graph(facts, [_table([REACH], op="Transpose", prepasses=())])
    [split] = [n for n in r.nodes if n.name == "split"]
    assert split.verdict == want, _reasons(split)
    if want == "cpu":
        assert "its result reaches no compute op ({'Conv', 'MatMul'})" in _reasons(split)
    via = {"rule": "feeds_compute", "params": dict(REACH["params"], via=["Transpose"]), "else": "cpu"}
    [r] = check_graph(facts, [_table([via], op="Reshape", prepasses=())])
    got = {n.name: n for n in r.nodes}
    assert got["view"].verdict == want, _reasons(got["view"])  # feeds the Transpose: judged by its reach
    assert got["merge"].verdict == "npu"  # feeds no Transpose: the rule does not apply
    if want == "cpu":
        assert "it feeds Transpose 'split', whose result reaches no compute op" in _reasons(got["view"])
    assert RULES["feeds_compute"].describe(via["params"]) == (
        "its result (when it feeds a Transpose: that op's result) reaches a compute op ({'MatMul', 'Conv'}), "
        "passing only {'Reshape', 'Mul'}.")


def test_consumers_pass_applies_the_constraint_to_the_readers():
    rule = {"rule": "consumers_pass", "params": {"ops": ["Transpose"], "constraint": {
        "rule": "transpose_blocks", "params": {"max": 4}}}, "else": "cpu"}

    def graph(shape, perm):
        inits = [numpy_helper.from_array(np.array(shape, np.int64), "s")]
        nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="view"),
                 helper.make_node("Transpose", ["r"], ["y"], name="t", perm=perm)]
        n = int(np.prod(shape))
        return facts_from_model(_graph(nodes, [_vi("x", [n])], [_vi("y", None)], inits))

    table = _table([rule], op="Reshape", prepasses=())
    [r] = check_graph(graph([16, 16, 3, 2, 16], [2, 0, 3, 1, 4]), [table])
    view = [n for n in r.nodes if n.name == "view"][0]
    assert view.verdict == "cpu" and "it feeds Transpose 't', which the compiler runs on the CPU" in _reasons(view)
    assert "moves 5 blocks of axes" in _reasons(view)
    [r] = check_graph(graph([1, 16, 3, 2, 16], [2, 0, 3, 1, 4]), [table])  # three blocks
    assert [n for n in r.nodes if n.name == "view"][0].verdict == "npu"
    assert RULES["consumers_pass"].describe(rule["params"]).startswith("every {'Transpose'} reading its result meets: ")


def test_schema_names_an_unknown_rule_inside_consumers_pass(tmp_path):
    from pytest_npucheck.tables import validate_table_data

    raw = json.loads((REPO / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    raw["ops"]["ai.onnx:Reshape"]["constraints"].append(
        {"rule": "consumers_pass", "params": {"ops": ["Transpose"], "constraint": {"rule": "no_such_rule"}}})
    problems = validate_table_data(raw, tmp_path / "t.json", REPO / "op_support_tables/schema.json",
                                   ("rknn", "2.5.0", "rk3588"))
    assert any("constraint.rule: 'no_such_rule' is not a known rule" in p for p in problems), problems


def test_sole_reader_names_the_other_readers():
    rule = {"rule": "sole_reader", "params": {"index": 0}, "else": "cpu"}
    axes = numpy_helper.from_array(np.array([-1, -2], np.int64), "axes")

    def graph(other_reader):
        nodes = [helper.make_node("Relu", ["x"], ["f"], name="feat"),
                 helper.make_node("ReduceMean", ["f", "axes"], ["m"], name="pool", keepdims=1)]
        outs = [_vi("m", [1, 4, 1, 1])]
        if other_reader:
            nodes.append(helper.make_node("Identity", ["f"], ["f2"], name="id"))  # eliminated: looked through
            nodes.append(helper.make_node("Relu", ["f2"], ["b"], name="branch"))
            outs.append(_vi("b", [1, 4, 8, 8]))
        m = _graph(nodes, [_vi("x", [1, 4, 8, 8])], outs, [axes])
        m.opset_import[0].version = 18
        return facts_from_model(m)

    table = _table([rule], op="ReduceMean")
    [r] = check_graph(graph(True), [table])
    pool = [n for n in r.nodes if n.name == "pool"][0]
    assert pool.verdict == "cpu" and "input 0 'f' is also read by Relu 'branch'" in _reasons(pool)
    [r] = check_graph(graph(False), [table])
    assert [n for n in r.nodes if n.name == "pool"][0].verdict == "npu"
    assert RULES["sole_reader"].describe({"index": 0}) == "it is the only node reading input 0."
    assert not is_local("sole_reader", {"index": 0})


def test_feeds_only_passes_the_layout_ops_merged_into_their_readers():
    """A chain Flatten -> Reshape -> Reshape -> Relu: the ops read only by layout ops pass, the last one (read
    by the Relu, or a graph output) fails and names what reads it."""
    rule = {"rule": "feeds_only", "params": {"ops": ["Flatten", "Reshape"]}, "else": "cpu"}
    s1 = numpy_helper.from_array(np.array([16], np.int64), "s1")
    s2 = numpy_helper.from_array(np.array([1, 16], np.int64), "s2")

    def graph(tail):
        nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=2),
                 helper.make_node("Reshape", ["f", "s1"], ["r1"], name="r1"),
                 helper.make_node("Identity", ["r1"], ["r1i"], name="id"),  # eliminated: looked through
                 helper.make_node("Reshape", ["r1i", "s2"], ["r2"], name="r2")]
        if tail:
            nodes.append(helper.make_node("Relu", ["r2"], ["y"], name="act"))
        m = _graph(nodes, [_vi("x", [1, 16])], [_vi("y" if tail else "r2", [1, 16])], [s1, s2])
        return facts_from_model(m)

    table = _table([rule], op="Reshape")
    for tail, why in ((True, "its result is read by Relu 'act'"), (False, "its result 'r2' is a graph output")):
        [r] = check_graph(graph(tail), [table])
        got = {n.name: n for n in r.nodes}
        assert got["r1"].verdict == "npu"
        assert got["r2"].verdict == "cpu" and why in _reasons(got["r2"])
    # read by a Gather as its indices (input 1), not as its data: not merged into it
    w = numpy_helper.from_array(np.zeros([16, 4], np.float32), "w")
    m = _graph([helper.make_node("Reshape", ["x", "s2"], ["r"], name="r"),
                helper.make_node("Gather", ["w", "r"], ["y"], name="emb")],
               [_vi("x", [1, 16])], [_vi("y", [1, 16, 4])], [s2, w])
    table = _table([{"rule": "feeds_only", "params": {"ops": ["Gather"]}, "else": "cpu"}], op="Reshape")
    [r] = check_graph(facts_from_model(m), [table])
    got = {n.name: n for n in r.nodes}
    assert got["r"].verdict == "cpu" and "Gather 'emb' (not as its input 0)" in _reasons(got["r"])
    assert RULES["feeds_only"].describe({"ops": ["Reshape"]}).startswith(
        "every node reading its result is one of {'Reshape'}")
    assert not is_local("feeds_only", {"ops": ["Reshape"]})


def test_computed_indices_passes_a_computed_int_layout_op_read_only_as_gather_indices():
    """RKNN keeps an int64 Reshape of computed position ids in front of an embedding Gather on the NPU and runs
    one of a graph input on the CPU (x.*.ctx=gather_ids.*): the rule asks both, and names what fails."""
    rule = {"rule": "computed_indices", "params": {"ops": ["Gather"]}, "else": "cpu"}
    s = numpy_helper.from_array(np.array([16], np.int64), "s")
    two = numpy_helper.from_array(np.array(2, np.int64), "two")
    w = numpy_helper.from_array(np.zeros([64, 4], np.float32), "w")
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 16])

    def verdict(pre, reader):
        nodes, src = [], "ids"
        if pre:
            nodes.append(helper.make_node("Add", ["ids", "two"], ["p"], name="pre"))
            nodes.append(helper.make_node("Cast", ["p"], ["pc"], name="same", to=TensorProto.INT64))
            src = "pc"
        nodes.append(helper.make_node("Reshape", [src, "s"], ["r"], name="flat"))
        if reader == "indices":
            nodes.append(helper.make_node("Gather", ["w", "r"], ["y"], name="emb"))
            out = _vi("y", [16, 4])
        else:  # the Reshape's result read as a Gather's data
            nodes.append(helper.make_node("Gather", ["r", "two"], ["y"], name="emb"))
            out = helper.make_tensor_value_info("y", TensorProto.INT64, [])
        [r] = check_graph(facts_from_model(_graph(nodes, [ids], [out], [s, two, w])), [_table([rule], op="Reshape")])
        node = {n.name: n for n in r.nodes}["flat"]
        return node.verdict, _reasons(node)

    assert verdict(True, "indices") == ("npu", "")
    v, why = verdict(False, "indices")
    assert v == "cpu" and "input 0 'ids' is a graph input or a constant" in why
    v, why = verdict(True, "data")
    assert v == "cpu" and "its result is read by Gather 'emb' (not as its indices)" in why
    assert RULES["computed_indices"].describe({"ops": ["Gather"]}).startswith(
        "its input 0 is computed by another node (not a graph input or a constant) and every node reading its "
        "result is one of {'Gather'}, reading it as its indices")
    assert not is_local("computed_indices", {"ops": ["Gather"]})


def test_window_unroll_passes_the_first_block_only():
    """Hiera's unroll: the first Reshape -> Transpose (0, 2, 4, 1, 3, 5) -> Reshape block of a (1, 8, 8, 4) map
    passes (RKNN's exWindow), the second block (its map the merged result of the first) fails and says why, and
    so do another perm and a Transpose read by something else than a Reshape."""
    rule = {"rule": "window_unroll", "params": {}, "else": "cpu"}

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    def graph(perm=(0, 2, 4, 1, 3, 5), tail="Reshape"):
        inits = [ints("s6a", [1, 4, 2, 4, 2, 4]), ints("m4a", [4, 4, 4, 4]), ints("s6b", [4, 2, 2, 2, 2, 4]),
                 ints("m4b", [16, 2, 2, 4])]
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="pre"),
                 helper.make_node("Reshape", ["r", "s6a"], ["a6"], name="split0"),
                 helper.make_node("Transpose", ["a6"], ["t0"], name="t0", perm=list(perm))]
        if tail == "Reshape":
            nodes += [helper.make_node("Reshape", ["t0", "m4a"], ["m0"], name="merge0"),
                      helper.make_node("Reshape", ["m0", "s6b"], ["b6"], name="split1"),
                      helper.make_node("Transpose", ["b6"], ["t1"], name="t1", perm=[0, 2, 4, 1, 3, 5]),
                      helper.make_node("Reshape", ["t1", "m4b"], ["y"], name="merge1")]
            out = _vi("y", [16, 2, 2, 4])
        else:
            nodes.append(helper.make_node("Relu", ["t0"], ["y"], name="post"))
            out = _vi("y", [1, 2, 2, 4, 4, 4] if tuple(perm) == (0, 2, 4, 1, 3, 5) else None)
        [r] = check_graph(facts_from_model(_graph(nodes, [_vi("x", [1, 8, 8, 4])], [out], inits)),
                          [_table([rule], op="Transpose")])
        return {n.name: (n.verdict, _reasons(n)) for n in r.nodes}

    got = graph()
    assert got["t0"] == ("npu", "")
    assert got["t1"][0] == "cpu" and "its map is the merged result 'merge0' of an earlier rank-6 block" in got["t1"][1]
    assert "is not [0, 2, 4, 1, 3, 5]" in graph(perm=(0, 1, 3, 2, 4, 5))["t0"][1]
    assert "its result is read by Relu 'post'" in graph(tail="Relu")["t0"][1]
    assert not is_local("window_unroll", {})


def test_slice_pair_rules_judge_two_slices_of_other_axes_as_one():
    """x[:, 1:, ::2] as two Slices: the second passes (second_of_slice_pair), the first fails by the second's
    step (slice_pair_steps); on one axis, or with the first read elsewhere too, neither rule sees a pair."""
    second = {"rule": "any_of", "params": {"constraints": [
        {"rule": "const_value_range", "params": {"index": 4, "min": 1, "max": 1}},
        {"rule": "second_of_slice_pair", "params": {}}]}, "else": "cpu"}  # as the RKNN table writes it
    steps = {"rule": "slice_pair_steps", "params": {}, "else": "cpu"}

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    def graph(axis2=2, shared=False):
        inits = [ints("b1", [1]), ints("b0", [0]), ints("e", [2 ** 62]), ints("a1", [1]), ints("a2", [axis2]),
                 ints("st1", [1]), ints("st2", [2])]
        nodes = [helper.make_node("Slice", ["x", "b1", "e", "a1", "st1"], ["s1"], name="crop"),
                 helper.make_node("Slice", ["s1", "b0", "e", "a2", "st2"], ["y"], name="stride")]
        outs = [_vi("y", None)]
        if shared:
            nodes.append(helper.make_node("Relu", ["s1"], ["z"], name="other"))
            outs.append(_vi("z", None))
        [r] = check_graph(facts_from_model(_graph(nodes, [_vi("x", [1, 4, 4, 16])], outs, inits)),
                          [_table([second, steps], op="Slice")])
        return {n.name: (n.verdict, _reasons(n)) for n in r.nodes}

    got = graph()
    assert got["stride"] == ("npu", "")
    assert got["crop"][0] == "cpu" and "its only reader, Slice 'stride' of other axes, has steps [2]" in got["crop"][1]
    for kw in ({"axis2": 1}, {"shared": True}):
        got = graph(**kw)
        assert got["crop"] == ("npu", "")
        assert got["stride"][0] == "cpu" and "is not computed by a Slice of other axes" in got["stride"][1]
    assert not is_local("second_of_slice_pair", {}) and not is_local("slice_pair_steps", {})


def test_feeds_only_with_max_rank_passes_a_layout_op_below_that_rank():
    """RKNN merges an int64 Unsqueeze of rank below 4 into the 4-D relayout its Cast reader makes of its input
    (x.Unsqueeze.ctx=int_layout.*.cast_*); a rank-4 result is a Reshape of its own: ``max_rank`` tells them
    apart, naming the rank."""
    rule = {"rule": "feeds_only", "params": {"ops": ["Cast"], "max_rank": 3}, "else": "cpu"}

    def graph(axes):
        a = numpy_helper.from_array(np.array(axes, np.int64), "a")
        out = [1, 16] + [1] * len(axes)
        m = _graph([helper.make_node("Unsqueeze", ["ids", "a"], ["u"], name="unsq"),
                    helper.make_node("Cast", ["u"], ["y"], name="cast", to=TensorProto.FLOAT)],
                   [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 16])], [_vi("y", out)], [a])
        return facts_from_model(m)

    table = _table([rule], op="Unsqueeze")
    [r] = check_graph(graph([2]), [table])
    assert {n.name: n.verdict for n in r.nodes}["unsq"] == "npu"
    [r] = check_graph(graph([2, 3]), [table])
    unsq = [n for n in r.nodes if n.name == "unsq"][0]
    assert unsq.verdict == "cpu" and "its result 'u' has rank 4, above 3" in _reasons(unsq)
    assert RULES["feeds_only"].describe({"ops": ["Cast"], "max_rank": 3}).startswith(
        "every node reading its result is one of {'Cast'}, reading it as its data (input 0) and its result has "
        "rank at most 3")


def test_graph_lacks_names_the_nodes_anywhere_in_the_graph():
    """graph_lacks looks at the whole main graph, not the node's neighbours: a Gemm on an unrelated
    branch fails it (what 2.2.0/rk3566 did to DistilBERT's mask Reshape), and the message names it."""
    rule = {"rule": "graph_lacks", "params": {"ops": ["Gemm"]}, "else": "cpu"}
    w = numpy_helper.from_array(np.ones([4, 4], np.float32), "w")

    def graph(gemms):
        nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu")]
        outs = [_vi("r", [1, 4])]
        for i in range(gemms):
            nodes.append(helper.make_node("Gemm", ["y", "w"], [f"g{i}"], name=f"head{i}", transB=1))
            outs.append(_vi(f"g{i}", [1, 4]))
        return facts_from_model(_graph(nodes, [_vi("x", [1, 4]), _vi("y", [1, 4])], outs, [w]))

    table = _table([rule], op="Relu")
    for gemms, want in ((0, "npu"), (1, "cpu"), (5, "cpu")):
        [r] = check_graph(graph(gemms), [table])
        relu = [n for n in r.nodes if n.name == "relu"][0]
        assert relu.verdict == want, (gemms, relu)
        if gemms == 1:
            assert "the graph also has Gemm 'head0'" in _reasons(relu)
        if gemms == 5:
            assert "Gemm 'head0', Gemm 'head1', Gemm 'head2' and 2 more" in _reasons(relu)
    assert RULES["graph_lacks"].describe({"ops": ["Gemm"]}) == "the main graph has no node of {'Gemm'}."
    assert not is_local("graph_lacks", {"ops": ["Gemm"]})


def test_consumers_pass_looks_through_skip_ops():
    """MultiheadAttention's Reshape (N, 1, 3, C) -> Unsqueeze -> packed q/k/v Transpose: the Transpose is
    found through the Unsqueeze only with ``skip``."""
    def rule(skip):
        params = {"ops": ["Transpose"], "constraint": {"rule": "transpose_blocks", "params": {"max": 2}}}
        return {"rule": "consumers_pass", "params": dict(params, skip=skip) if skip else params, "else": "cpu"}

    inits = [numpy_helper.from_array(np.array([15, 1, 3, 64], np.int64), "s"),
             numpy_helper.from_array(np.array([0], np.int64), "ax")]
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="view"),
             helper.make_node("Unsqueeze", ["r", "ax"], ["u"], name="unsq"),
             helper.make_node("Transpose", ["u"], ["y"], name="t", perm=[3, 1, 2, 0, 4])]
    facts = facts_from_model(_graph(nodes, [_vi("x", [15, 1, 192])], [_vi("y", None)], inits))
    for skip, want in ((None, "npu"), (["Unsqueeze"], "cpu")):
        [r] = check_graph(facts, [_table([rule(skip)], op="Reshape", prepasses=())])
        view = [n for n in r.nodes if n.name == "view"][0]
        assert view.verdict == want, (skip, _reasons(view))
    assert RULES["consumers_pass"].describe(rule(["Unsqueeze"])["params"]).startswith(
        "every {'Transpose'} (directly or through Unsqueeze) reading its result meets: ")


def test_producer_pass_checks_the_producer_behind_skip_ops():
    """A diffusion UNet's attention: Einsum ('b i j, b j d -> b i d', CPU) -> Reshape -> Transpose merging
    the heads; the Transpose goes with the Einsum only when the Einsum's equation is not an NPU one."""
    def facts(eq):
        inits = [numpy_helper.from_array(np.array([1, 4, 16, 8], np.int64), "s")]
        nodes = [helper.make_node("Einsum", ["p", "v"], ["o"], name="attn_v", equation=eq),
                 helper.make_node("Reshape", ["o", "s"], ["o4"], name="view"),
                 helper.make_node("Transpose", ["o4"], ["y"], name="merge", perm=[0, 2, 1, 3])]
        return facts_from_model(_graph(nodes, [_vi("p", [4, 16, 16]), _vi("v", [4, 16, 8])], [_vi("y", None)], inits))

    rule = {"rule": "producer_pass", "params": {"index": 0, "ops": ["Einsum"], "skip": ["Reshape"], "constraint": {
        "rule": "attr_in", "params": {"attr": "equation", "values": ["bij,bjd->bid"]}}}, "else": "cpu"}
    table = _table([rule], op="Transpose", prepasses=())
    for eq, want in (("b i j, b j d -> b i d", "cpu"), ("bij,bjd->bid", "npu")):
        [r] = check_graph(facts(eq), [table])
        merge = [n for n in r.nodes if n.name == "merge"][0]
        assert merge.verdict == want, (eq, _reasons(merge))
        if want == "cpu":
            assert "input 0 is computed by Einsum 'attn_v', which the compiler runs on the CPU" in _reasons(merge)
    without_skip = dict(rule, params={k: v for k, v in rule["params"].items() if k != "skip"})
    [r] = check_graph(facts("b i j, b j d -> b i d"), [_table([without_skip], op="Transpose", prepasses=())])
    assert [n for n in r.nodes if n.name == "merge"][0].verdict == "npu"  # the Reshape is not looked through
    assert RULES["producer_pass"].describe(rule["params"]).startswith(
        "when input 0 is computed by {'Einsum'} (directly or through Reshape), that node meets: ")


def test_producer_is_passes_only_behind_the_chain():
    """RKNN's Softmax limit is lifted behind the scores MatMul (through the scale Mul): producer_is in an
    any_of passes there, and names the producer (or the graph input) everywhere else."""
    def facts(first):
        inits = [numpy_helper.from_array(np.array(0.125, np.float32), "c")]
        if first == "matmul":
            nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="scores"),
                     helper.make_node("Mul", ["s", "c"], ["x"], name="scale")]
        elif first == "add":
            nodes = [helper.make_node("Add", ["q", "k"], ["x"], name="mask")]
        else:
            nodes = [helper.make_node("Identity", ["q"], ["x"], name="copy")]
        nodes.append(helper.make_node("Softmax", ["x" if first != "input" else "q"], ["y"], name="sm", axis=-1))
        ins = [_vi("q", [1, 1, 300, 300]), _vi("k", [1, 1, 300, 300])]
        return facts_from_model(_graph(nodes, ins, [_vi("y", None)], inits))

    rule = {"rule": "any_of", "params": {"constraints": [
        {"rule": "elements_max", "params": {"tensor": "input", "index": 0, "axes": [2, 3], "max": 65536}},
        {"rule": "producer_is", "params": {"index": 0, "chain": ["MatMul"], "skip": ["Mul", "Div"]}}]}, "else": "cpu"}
    table = _table([rule], op="Softmax", prepasses=())
    for first, want, says in (("matmul", "npu", ""), ("add", "cpu", "input 0 'x' is computed by Add 'mask', not by MatMul"),
                              ("input", "cpu", "input 0 'q' is a graph input or a constant, not by MatMul")):
        [r] = check_graph(facts(first), [table])
        sm = [n for n in r.nodes if n.name == "sm"][0]
        assert sm.verdict == want, (first, _reasons(sm))
        assert says in _reasons(sm)
    assert RULES["producer_is"].describe({"index": 0, "chain": ["MatMul"]}) == "input 0 is computed by MatMul."
    assert not is_local("producer_is", {"chain": ["MatMul"]})


def test_producer_not_computed_input_walks_past_a_leading_weight():
    """QK-norm (OLMo, AFMoE): k = Mul(k_norm.weight, Mul(x, r)) with the weight as input 0; the K/V repeat
    behind it is still computed by the k projection MatMul when computed_input is set."""
    inits = [numpy_helper.from_array(np.ones([8], np.float32), "w"), numpy_helper.from_array(np.ones([8, 8], np.float32), "p")]
    nodes = [helper.make_node("MatMul", ["x", "p"], ["k"], name="proj"),
             helper.make_node("Mul", ["w", "k"], ["kn"], name="k_norm"),
             helper.make_node("Relu", ["kn"], ["y"], name="use")]
    facts = facts_from_model(_graph(nodes, [_vi("x", [1, 4, 8])], [_vi("y", None)], inits))
    for computed, want in ((False, "npu"), (True, "cpu")):
        params = {"index": 0, "chain": ["MatMul"], "skip": ["Mul"], "computed_input": computed}
        [r] = check_graph(facts, [_table([{"rule": "producer_not", "params": params, "else": "cpu"}], op="Relu",
                                         prepasses=())])
        use = [n for n in r.nodes if n.name == "use"][0]
        assert use.verdict == want, (computed, _reasons(use))


@pytest.mark.parametrize("rule_id", ["consumers_pass", "producer_pass"])
def test_an_unknown_rule_inside_a_context_rule_is_a_table_error(tmp_path, rule_id):
    """The constraint a neighbour is judged by (``params.constraint``, the rules' ``inner`` hook) names
    a known rule, for both rules that hold one: producer_pass's was not checked, and a table with a
    misspelt inner rule validated, then the matcher failed with a KeyError (an internal error)."""
    from pytest_npucheck.rules import RULES
    from pytest_npucheck.tables import validate_table_data

    raw = json.loads((REPO / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    inner = {"rule": "attr_in", "params": {"attr": "perm", "values": [[0, 2, 1]]}}
    raw["ops"]["ai.onnx:Reshape"]["constraints"].append(
        {"rule": rule_id, "params": {"ops": ["Transpose"], "constraint": inner}, "else": "cpu"})
    args = (tmp_path / "t.json", REPO / "op_support_tables/schema.json", ("rknn", "2.5.0", "rk3588"))
    assert not validate_table_data(raw, *args)
    assert list(RULES[rule_id].inner({"constraint": inner})) == [("constraint", inner)]
    inner["rule"] = "attr_inn"
    problems = validate_table_data(raw, *args)
    assert problems == [f"$.ops['ai.onnx:Reshape'].constraints[{len(raw['ops']['ai.onnx:Reshape']['constraints']) - 1}]"
                        ".params.constraint.rule: 'attr_inn' is not a known rule"], problems


def _quadrants(order, concat_axis=3, step=2):
    """x (1, 8, 8, 4) -> per quadrant a row Slice (axis 1, shared) then a column Slice (axis 2) -> Concat."""
    big = 2 ** 63 - 1
    inits, nodes, rows, parts = [], [], {}, []

    def ints(name, values):
        inits.append(numpy_helper.from_array(np.asarray(values, np.int64), name))
        return name

    for i, (r, c) in enumerate(order):
        if r not in rows:
            rows[r] = f"rows{r}"
            nodes.append(helper.make_node("Slice", ["x", ints(f"rs{r}", [r]), ints(f"re{r}", [big]), ints(f"ra{r}", [1]),
                                                    ints(f"rp{r}", [step])], [rows[r]], name=f"rows{r}"))
        nodes.append(helper.make_node("Slice", [rows[r], ints(f"cs{i}", [c]), ints(f"ce{i}", [big]), ints(f"ca{i}", [2]),
                                                ints(f"cp{i}", [step])], [f"q{i}"], name=f"q{i}"))
        parts.append(f"q{i}")
    nodes.append(helper.make_node("Concat", parts, ["y"], name="cat", axis=concat_axis))
    return facts_from_model(_graph(nodes, [_vi("x", [1, 8, 8, 4])], [_vi("y", None)], inits))


@pytest.mark.parametrize("order,axis,ok", [
    (((0, 0), (1, 0), (0, 1), (1, 1)), 3, True),    # Swin's patch merging: fused into one Conv
    (((0, 0), (1, 0), (0, 1), (1, 1)), -1, True),
    (((0, 0), (0, 1), (1, 0), (1, 1)), 3, False),   # another order: not fused
    (((0, 0), (1, 0), (0, 1)), 3, False),           # three quadrants
    (((0, 0), (1, 0), (0, 1), (1, 1)), 1, False),   # a sliced axis
])
def test_space_to_depth_needs_the_four_quadrants_in_the_fused_order(order, axis, ok):
    graph = _quadrants(order, axis)
    rule = RULES["space_to_depth"]
    for node in graph.nodes:
        if node.op_type == "Slice":
            why = rule.check(node, {}, graph)
            assert (why is None) == ok, (node.name, why)
    assert not is_local("space_to_depth", {})


def test_space_to_depth_refuses_other_steps():
    graph = _quadrants(((0, 0), (1, 0), (0, 1), (1, 1)), step=3)
    assert all(RULES["space_to_depth"].check(n, {}, graph) for n in graph.nodes if n.op_type == "Slice")


# -- Reshape planes and the nodes eliminate_noop_layout removes ----------------------------------------


def _unfold(n: int, c: int = 16, p: int = 2):
    """MobileViT's unfold of a (1, C, p n, p n) map: Reshape (C n, p, n, p) -> Transpose (0, 2, 1, 3) ->
    Reshape (1, C, n n, p p) -> Relu. With n = 1 the Transpose only moves an axis of size 1."""
    s = p * n
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="pre"),
             helper.make_node("Reshape", ["r", "s1"], ["a"], name="split"),
             helper.make_node("Transpose", ["a"], ["t"], name="swap", perm=[0, 2, 1, 3]),
             helper.make_node("Reshape", ["t", "s2"], ["b"], name="patches"),
             helper.make_node("Relu", ["b"], ["y"], name="post")]
    inits = [numpy_helper.from_array(np.array([c * n, p, n, p], np.int64), "s1"),
             numpy_helper.from_array(np.array([1, c, n * n, p * p], np.int64), "s2")]
    return _graph(nodes, [_vi("x", [1, c, s, s])], [_vi("y", [1, c, n * n, p * p])], inits)


PLANE = {"rule": "any_of", "params": {"constraints": [
    {"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 3}},
    {"rule": "elements_max", "params": {"tensor": "input", "index": 0, "axes": [2, 3], "max": 1}},
    {"rule": "beside_trivial_transpose", "params": {}},
    {"rule": "elements_multiple_of", "params": {"tensor": "input", "index": 0, "axes": [2, 3], "multiple_of": 8}}]}}


def test_reshape_plane_rules_and_the_trivial_transpose_beside_it():
    table = _table([PLANE], op="Reshape", prepasses=())
    # two patches per side: the Transpose moves real axes; (1, 16, 4, 4) has a plane of 16, (32, 2, 2, 2) of 4
    [r] = check_graph(facts_from_model(_unfold(2)), [table])
    by = {n.name: n for n in r.nodes}
    assert by["split"].verdict == "npu", _reasons(by["split"])
    assert by["patches"].verdict == "cpu"
    assert "4 elements over axes [2, 3], not a multiple of 8" in _reasons(by["patches"])
    assert "no Transpose next to it moves only axes of size 1" in _reasons(by["patches"])
    # one patch per side: the Transpose of (16, 2, 1, 2) only moves the size-1 axis; both Reshapes pass
    [r] = check_graph(facts_from_model(_unfold(1)), [table])
    by = {n.name: n for n in r.nodes}
    assert by["split"].verdict == by["patches"].verdict == "npu", (_reasons(by["split"]), _reasons(by["patches"]))
    assert RULES["elements_multiple_of"].describe({"axes": [2, 3], "multiple_of": 8}) == \
        "the product of input 0 dims over axes [2, 3] must be a multiple of 8."


def test_context_rules_look_through_a_layout_op_eliminate_noop_layout_removes():
    # Expand (focus) -> Expand that keeps the shape -> MatMul: the no-op Expand is removed by the compiler,
    # so the focus feeds the MatMul
    nodes = [helper.make_node("Expand", ["k", "shape"], ["e"], name="focus"),
             helper.make_node("Expand", ["e", "shape"], ["e2"], name="noop"),
             helper.make_node("MatMul", ["q", "e2"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.array([1, 2, 8, 4], np.int64), "shape")]
    model = _graph(nodes, [_vi("k", [1, 1, 8, 4]), _vi("q", [1, 2, 4, 8])], [_vi("y", [1, 2, 4, 4])], inits)
    rule = {"rule": "feeds_not", "params": {"path": ["MatMul"]}}
    facts = facts_from_model(model)
    [with_pass] = check_graph(facts, [_table([rule], op="Expand", prepasses=("eliminate_noop_layout",))])
    by = {n.name: n for n in with_pass.nodes}
    assert by["noop"].verdict == "folded"
    assert by["focus"].verdict == "cpu" and "MatMul 'mm'" in _reasons(by["focus"])
    [without] = check_graph(facts, [_table([rule], op="Expand", prepasses=())])
    assert {n.name: n for n in without.nodes}["focus"].verdict == "npu"


def test_context_rules_look_through_a_multiplication_by_one_eliminate_noop_add_mul_removes():
    # Mul (focus) -> Mul by 1 -> MatMul: RKNN removes the x * 1, so the focus feeds the MatMul (WavLM's bias * 1)
    nodes = [helper.make_node("Mul", ["a", "b"], ["m"], name="focus"),
             helper.make_node("Mul", ["m", "one"], ["m1"], name="noop"),
             helper.make_node("MatMul", ["m1", "q"], ["y"], name="mm")]
    inits = [numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    model = _graph(nodes, [_vi("a", [1, 2, 4, 4]), _vi("b", [1, 2, 4, 4]), _vi("q", [1, 2, 4, 4])],
                   [_vi("y", [1, 2, 4, 4])], inits)
    rule = {"rule": "feeds_not", "params": {"path": ["MatMul"]}}
    facts = facts_from_model(model)
    [with_pass] = check_graph(facts, [_table([rule], op="Mul", prepasses=("eliminate_noop_add_mul",))])
    by = {n.name: n for n in with_pass.nodes}
    assert by["noop"].verdict == "folded"
    assert by["focus"].verdict == "cpu" and "MatMul 'mm'" in _reasons(by["focus"])
    [without] = check_graph(facts, [_table([rule], op="Mul", prepasses=())])
    assert {n.name: n for n in without.nodes}["focus"].verdict == "npu"


# -- concat_flatten_plane: flattened maps joined by a Concat (RKNN lays it out in rows) ----------------


def _levels(*maps, c: int = 4):
    """Relu of each (1, C, H, W) map -> Reshape (1, C, H * W) -> Concat on the last axis -> Relu."""
    nodes, inputs, inits, flat = [], [], [], []
    for i, (h, w) in enumerate(maps):
        inputs.append(_vi("x%d" % i, [1, c, h, w]))
        inits.append(numpy_helper.from_array(np.array([1, c, h * w], np.int64), "s%d" % i))
        nodes += [helper.make_node("Relu", ["x%d" % i], ["r%d" % i], name="relu%d" % i),
                  helper.make_node("Reshape", ["r%d" % i, "s%d" % i], ["f%d" % i], name="flat%dx%d" % (h, w))]
        flat.append("f%d" % i)
    total = sum(h * w for h, w in maps)
    nodes += [helper.make_node("Concat", flat, ["cat"], name="cat", axis=2),
              helper.make_node("Relu", ["cat"], ["y"], name="post")]
    return _graph(nodes, inputs, [_vi("y", [1, c, total])], inits)


@pytest.mark.parametrize("maps,cpu", [
    (((16, 16), (8, 8), (4, 4), (2, 2)), {"flat2x2"}),  # the FPN head: rows of 4, the 2 x 2 map relaid
    (((4, 4), (2, 2)), {"flat2x2"}),                    # rows of 4 (a tie with 2: the earlier map)
    (((8, 8), (2, 2)), set()),                          # rows of 2: the 8 x 8 map relaid, 64 elements
    (((8, 8), (2, 2), (4, 4)), set()),                  # rows of 2 (the tie goes to the earlier 2 x 2)
    (((6, 6), (3, 3)), {"flat6x6"}),                    # rows of 3: 36 elements relaid
    (((8, 8), (3, 3)), set()),                          # no common width: the Concat relays them itself
])
def test_concat_flatten_plane_by_the_concat_row(maps, cpu):
    table = _table([{"rule": "concat_flatten_plane", "params": {"multiple_of": 8}}], op="Reshape", prepasses=())
    [r] = check_graph(facts_from_model(_levels(*maps)), [table])
    got = {n.name for n in r.nodes if n.op_type == "Reshape" and n.verdict == "cpu"}
    assert got == cpu, [(n.name, _reasons(n)) for n in r.nodes]
    for n in r.nodes:
        if n.name in cpu:
            assert "not a multiple of 8" in _reasons(n) and "Concat 'cat'" in _reasons(n)


def test_concat_flatten_plane_leaves_other_readers_and_other_inputs_alone():
    table = _table([{"rule": "concat_flatten_plane", "params": {"multiple_of": 8}}], op="Reshape", prepasses=())
    # a flattening read by a Relu is not judged by this rule
    nodes = [helper.make_node("Reshape", ["x", "s"], ["f"], name="flat"),
             helper.make_node("Relu", ["f"], ["y"], name="post")]
    inits = [numpy_helper.from_array(np.array([1, 4, 4], np.int64), "s")]
    [r] = check_graph(facts_from_model(_graph(nodes, [_vi("x", [1, 4, 2, 2])], [_vi("y", [1, 4, 4])], inits)), [table])
    assert {n.name: n.verdict for n in r.nodes}["flat"] == "npu"
    # a Concat with an input that is not a flattened map: its layout is not known, the rule passes
    nodes = [helper.make_node("Reshape", ["x", "s"], ["f"], name="flat"),
             helper.make_node("Concat", ["z", "f"], ["y"], name="cat", axis=2)]
    model = _graph(nodes, [_vi("x", [1, 4, 2, 2]), _vi("z", [1, 4, 16])], [_vi("y", [1, 4, 20])], inits)
    [r] = check_graph(facts_from_model(model), [table])
    assert {n.name: n.verdict for n in r.nodes}["flat"] == "npu"
    assert not is_local("concat_flatten_plane", {"multiple_of": 8})


# -- mask_cast_one_chain: one padding mask feeding two different chains (RKNN build hang) ----------


def mask_chains_model(second: str = "cross", inputs: int = 1):
    """An int64 padding mask [1, 4] cast to bool, reshaped to [1, 1, 1, 4] and combined by an And
    with a [1, 1, 4, 1] base into the encoder's [4, 4] mask; ``second``: ``cross`` (an And with a
    [1, 1, 2, 1] base: the decoder's [2, 4] cross-attention mask), ``twin`` (the same And again),
    ``old`` (``(1 - m) * min`` of the bool mask) or ``none``; ``inputs=2``: the second mask from a
    second input."""
    def chain(mask_in, q, tag):
        return [helper.make_node("Cast", [mask_in], [f"{tag}_b"], name=f"{tag}_cast", to=TensorProto.BOOL),
                helper.make_node("Reshape", [f"{tag}_b", "keys_shape"], [f"{tag}_keys"], name=f"{tag}_reshape"),
                helper.make_node("And", [f"base{q}", f"{tag}_keys"], [f"{tag}_k"], name=f"{tag}_and"),
                helper.make_node("Where", [f"{tag}_k", "zero", "minf"], [f"{tag}_m"], name=f"{tag}_where"),
                helper.make_node("Add", [f"s{q}", f"{tag}_m"], [f"{tag}_y"], name=f"{tag}_add")]

    nodes = chain("mask", 4, "enc")
    outs = [_vi("enc_y", [1, 1, 4, 4])]
    ins = [helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 4]), _vi("s4", [1, 1, 4, 4]),
           _vi("s2", [1, 1, 2, 4])]
    if inputs == 2:
        ins.append(helper.make_tensor_value_info("mask2", TensorProto.INT64, [1, 4]))
    src = "mask2" if inputs == 2 else "mask"
    if second in ("cross", "twin"):
        nodes += chain(src, 2 if second == "cross" else 4, "dec")
        outs.append(_vi("dec_y", [1, 1, 2 if second == "cross" else 4, 4]))
    elif second == "old":
        nodes += [helper.make_node("Cast", [src], ["dec_b"], name="dec_cast", to=TensorProto.BOOL),
                  helper.make_node("Unsqueeze", ["dec_b", "one"], ["dec_u"], name="dec_unsqueeze"),
                  helper.make_node("Cast", ["dec_u"], ["dec_f"], name="dec_castf", to=TensorProto.FLOAT),
                  helper.make_node("Sub", ["fone", "dec_f"], ["dec_inv"], name="dec_sub")]
        outs.append(_vi("dec_inv", [1, 1, 4]))
    inits = [numpy_helper.from_array(np.array([1, 1, 1, 4], np.int64), "keys_shape"),
             numpy_helper.from_array(np.ones([1, 1, 4, 1], bool), "base4"),
             numpy_helper.from_array(np.ones([1, 1, 2, 1], bool), "base2"),
             numpy_helper.from_array(np.float32(0), "zero"), numpy_helper.from_array(np.float32(-3e38), "minf"),
             numpy_helper.from_array(np.array([1], np.int64), "one"), numpy_helper.from_array(np.float32(1), "fone")]
    return _graph(nodes, ins, outs, inits)


@pytest.mark.parametrize("second, inputs, failing", [
    ("cross", 1, {"enc_and", "dec_and"}),  # BART: encoder [4, 4] and cross-attention [2, 4] masks of one input
    ("old", 1, {"enc_and"}),                # the second chain in the old (1 - m) * min form
    ("none", 1, set()),                     # one chain (BERT)
    ("twin", 1, {"enc_and", "dec_and"}),    # the same chain twice: the compiler does not merge them
    ("cross", 2, set()),                    # two mask inputs
])
def test_mask_cast_one_chain_fails_when_one_mask_feeds_two_different_chains(second, inputs, failing):
    facts = facts_from_model(mask_chains_model(second, inputs))
    check = RULES["mask_cast_one_chain"]
    why = {n.name: check.check(n, {}, facts) for n in facts.nodes if n.op_type == "And"}
    assert {name for name, w in why.items() if w} == failing
    if second == "cross" and inputs == 1:
        assert "'mask' cast to bool" in why["enc_and"] and "And 'dec_and'" in why["enc_and"]
    assert not is_local("mask_cast_one_chain", {})


def test_mask_cast_one_chain_sees_the_mask_behind_a_cast_to_its_own_type():
    """BigBird-Pegasus casts the int64 mask to int64 before the bool Cast."""
    model = mask_chains_model("cross")
    g = model.graph
    g.node.insert(0, helper.make_node("Cast", ["mask"], ["mask64"], name="noop_cast", to=TensorProto.INT64))
    for n in g.node[1:]:
        for i, x in enumerate(n.input):
            if x == "mask":
                n.input[i] = "mask64"
    facts = facts_from_model(model)
    check = RULES["mask_cast_one_chain"]
    assert {n.name for n in facts.nodes if n.op_type == "And" and check.check(n, {}, facts)} == {"enc_and", "dec_and"}


# -- QNN: rank-6 Reshape -> Transpose -> Reshape chains (q.Reshape.ctx=rank6.* probes) -------------


def _rank6_chain(shape4, shape6, perm, between=None):
    inits = [numpy_helper.from_array(np.array(shape6, dtype=np.int64), "s6"),
             numpy_helper.from_array(np.array(shape4, dtype=np.int64), "s4")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="pre"),
             helper.make_node("Reshape", ["a", "s6"], ["b"], name="split6")]
    last = "b"
    if perm is not None:
        nodes.append(helper.make_node("Transpose", [last], ["c"], name="transpose6", perm=list(perm)))
        last = "c"
    if between:
        nodes.append(helper.make_node(between, [last], ["d"], name="between6"))
        last = "d"
    nodes += [helper.make_node("Reshape", [last, "s4"], ["e"], name="merge6"),
              helper.make_node("Relu", ["e"], ["y"], name="post")]
    return _graph(nodes, [_vi("x", list(shape4))], [_vi("y", list(shape4))], inits)


@pytest.mark.parametrize("shape4, shape6, perm, between, want", [
    # MViTv2's rel-pos relayout: leading 1 and a unit dim 1, both kept in place
    ((1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), (0, 1, 2, 4, 3, 5), None, "npu"),
    # a leading dim of 2: the unit dim 1 kept in place is enough
    ((2, 1, 64, 16), (2, 1, 8, 8, 4, 4), (0, 1, 2, 4, 3, 5), None, "npu"),
    # the Transpose moves the only unit dim: no rank-5 form
    ((1, 8, 64, 16), (1, 8, 8, 8, 4, 4), (1, 0, 2, 3, 4, 5), None, "cpu"),
    # an element-wise op between the Transpose and the last Reshape breaks the chain
    ((1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), (0, 1, 2, 4, 3, 5), "Relu", "cpu"),
    # no Transpose at all (MViTv2's Reshape -> Add -> Reshape)
    ((1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), None, "Relu", "cpu"),
])
def test_qnn_rank6_chain_needs_a_unit_dim_the_transpose_keeps(shape4, shape6, perm, between, want):
    table = CATALOG.table("qnn@2.51.0/htp-v73")
    [r] = check_graph(facts_from_model(_rank6_chain(shape4, shape6, perm, between)), [table])
    # the Reshapes; a lone rank-6 Transpose with a leading 1 keeps the leading-dim form (see the errata)
    chain = [n for n in r.nodes if n.name in ("split6", "merge6") or (n.name == "transpose6" and want == "npu")]
    assert chain and {n.verdict for n in chain} == {want}, [(n.name, n.verdict, _reasons(n)) for n in chain]
    if want == "cpu":
        split = [n for n in chain if n.name == "split6"][0]
        assert [r.rule for r in split.reasons] == ["rank6_unit_dim_chain"], _reasons(split)


def _rank6_gemm_chain(shape6, perm, bias):
    b, h, wh, w, ww, ch = shape6
    inits = [numpy_helper.from_array(np.array(shape6, dtype=np.int64), "s6"),
             numpy_helper.from_array(np.ones((ch, 3 * ch), np.float32), "w"),
             numpy_helper.from_array(np.ones((3 * ch,), np.float32), "bias"),
             numpy_helper.from_array(np.array([-1, 3 * ch], dtype=np.int64), "s2")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="pre"),
             helper.make_node("Reshape", ["a", "s6"], ["r"], name="split6"),
             helper.make_node("Transpose", ["r"], ["t"], name="transpose6", perm=list(perm)),
             helper.make_node("MatMul", ["t", "w"], ["m"], name="mm")]
    last = "m"
    if bias:
        nodes.append(helper.make_node("Add", ["bias", "m"], ["q"], name="bias_add"))
        last = "q"
    nodes += [helper.make_node("Reshape", [last, "s2"], ["e"], name="merge2"),
              helper.make_node("Relu", ["e"], ["y"], name="post")]
    rows = b * h * wh * w * ww
    return _graph(nodes, [_vi("x", [b, h * wh, w * ww, ch])], [_vi("y", [rows, 3 * ch])], inits)


@pytest.mark.parametrize("perm, bias, want", [
    # Twins-SVT's window partition read by the qkv projection: MatMulAddFusion's 2-D input Reshape ends the chain
    ((0, 1, 3, 2, 4, 5), True, "npu"),
    # no bias Add: no Gemm, no Reshape after the Transpose
    ((0, 1, 3, 2, 4, 5), False, "cpu"),
    # the Transpose moves the unit dim
    ((1, 0, 3, 2, 4, 5), True, "cpu"),
])
def test_qnn_rank6_chain_may_end_in_a_matmul_with_its_bias_add(perm, bias, want):
    """q.Reshape.ctx=rank6_gemm.* probes (v73 and v68): Reshape -> Transpose -> MatMul + bias Add builds."""
    model = _rank6_gemm_chain((1, 8, 7, 8, 7, 16), perm, bias)
    [r] = check_graph(facts_from_model(model), [CATALOG.table("qnn@2.51.0/htp-v73")])
    split = [n for n in r.nodes if n.name == "split6"][0]
    assert split.verdict == want, _reasons(split)
    if want == "cpu":
        assert "rank6_unit_dim_chain" in [x.rule for x in split.reasons], _reasons(split)


@pytest.mark.parametrize("rank, between, want", [
    ((6), None, "cpu"),          # merged with the Reshape back from rank 6 (which fails)
    ((6), "Expand", "cpu"),      # through a no-op Expand onnxruntime removes first
    ((6), "Relu", "npu"),        # an op between: no merge
    ((5), None, "npu"),          # the first Reshape reads rank 5: nothing fails
])
def test_qnn_a_reshape_merged_with_a_failing_rank6_reshape_fails_with_it(rank, between, want):
    """q.Reshape.ctx=merged.* probes (v73 and v68; MViTv2's rel-pos bias Reshape -> Expand -> Reshape)."""
    shape = [1, 1, 8, 8, 4, 4] if rank == 6 else [1, 8, 8, 4, 4]
    inits = [numpy_helper.from_array(np.array(shape, dtype=np.int64), "s6"),
             numpy_helper.from_array(np.array([1, 1, 64, 16], dtype=np.int64), "s4"),
             numpy_helper.from_array(np.array([1, 64, 16], dtype=np.int64), "s3")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="pre"),
             helper.make_node("Reshape", ["a", "s6"], ["b"], name="split"),
             helper.make_node("Sigmoid", ["b"], ["c"], name="mid"),
             helper.make_node("Reshape", ["c", "s4"], ["d"], name="back")]
    last = "d"
    if between == "Expand":
        nodes.append(helper.make_node("Expand", ["d", "s4"], ["e"], name="between"))
        last = "e"
    elif between:
        nodes.append(helper.make_node(between, ["d"], ["e"], name="between"))
        last = "e"
    nodes += [helper.make_node("Reshape", [last, "s3"], ["f"], name="focus"),
              helper.make_node("Relu", ["f"], ["y"], name="post")]
    model = _graph(nodes, [_vi("x", [1, 1, 64, 16])], [_vi("y", [1, 64, 16])], inits)
    [r] = check_graph(facts_from_model(model), [CATALOG.table("qnn@2.51.0/htp-v73")])
    focus = [n for n in r.nodes if n.name == "focus"][0]
    assert focus.verdict == want, _reasons(focus)
    if want == "cpu":
        assert "rank6_unit_dim_chain" in [x.rule for x in focus.reasons], _reasons(focus)


@pytest.mark.parametrize("shape4, shape_hi, perm", [
    ((1, 8, 56, 96), (1, 4, 2, 8, 7, 8, 7, 96), (0, 1, 3, 5, 2, 4, 6, 7)),
    ((1, 8, 56, 96), (1, 1, 8, 7, 64, 7, 12), (0, 1, 2, 4, 3, 5, 6)),
])
def test_qnn_rank7_and_rank8_transposes_run_on_the_cpu_whatever_their_leading_dims(shape4, shape_hi, perm):
    """q.Transpose.ctx=high_rank.* probes (v73 and v68): Swin3D's rank-8 window partition."""
    [r] = check_graph(facts_from_model(_rank6_chain(shape4, shape_hi, perm)), [CATALOG.table("qnn@2.51.0/htp-v73")])
    got = {n.name: n.verdict for n in r.nodes}
    assert (got["split6"], got["transpose6"], got["merge6"]) == ("cpu", "cpu", "cpu"), got


@pytest.mark.parametrize("shape, bias, want", [
    ((1, 4, 14, 14, 384), False, "cpu"), ((1, 4, 14, 14, 384), True, "npu"), ((4, 14, 14, 384), False, "npu")])
def test_qnn_rank5_matmul_by_a_matrix_needs_its_bias_add(shape, bias, want):
    """q.MatMul.ctx=rank.* probes (v73 and v68): Swin3D's patch-merging reduction without a bias fails."""
    c = shape[-1]
    inits = [numpy_helper.from_array(np.ones((c, c // 2), np.float32), "w"),
             numpy_helper.from_array(np.ones((c // 2,), np.float32), "bias")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="pre"), helper.make_node("MatMul", ["a", "w"], ["m"], name="mm")]
    if bias:
        nodes.append(helper.make_node("Add", ["m", "bias"], ["b"], name="bias_add"))
    nodes.append(helper.make_node("Relu", [nodes[-1].output[0]], ["y"], name="post"))
    out = list(shape[:-1]) + [c // 2]
    [r] = check_graph(facts_from_model(_graph(nodes, [_vi("x", list(shape))], [_vi("y", out)], inits)),
                      [CATALOG.table("qnn@2.51.0/htp-v73")])
    mm = [n for n in r.nodes if n.name == "mm"][0]
    assert mm.verdict == want, _reasons(mm)


def _rank6_matmul(bias_first):
    inits = [numpy_helper.from_array(np.ones((16, 24), np.float32), "w"),
             numpy_helper.from_array(np.ones((24,), np.float32), "bias")]
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="pre"),
             helper.make_node("MatMul", ["a", "w"], ["m"], name="mm")]
    if bias_first is not None:
        nodes.append(helper.make_node("Add", ["bias", "m"] if bias_first else ["m", "bias"], ["b"], name="bias_add"))
    nodes.append(helper.make_node("Sigmoid", [nodes[-1].output[0]], ["y"], name="post"))
    return _graph(nodes, [_vi("x", [1, 2, 2, 4, 4, 16])], [_vi("y", [1, 2, 2, 4, 4, 24])], inits)


@pytest.mark.parametrize("bias_first, want", [(True, "npu"), (False, "npu"), (None, "cpu")])
def test_qnn_rank6_matmul_runs_as_a_gemm_only_with_its_bias_add(bias_first, want):
    """q.MatMul.ctx=rank6.* probes: onnxruntime's MatMulAddFusion flattens the input of a MatMul + bias
    Add to 2-D (the bias read as either input: TorchScript writes it first); a lone rank-6 MatMul fails."""
    [r] = check_graph(facts_from_model(_rank6_matmul(bias_first)), [CATALOG.table("qnn@2.51.0/htp-v73")])
    mm = [n for n in r.nodes if n.name == "mm"][0]
    assert mm.verdict == want, _reasons(mm)
    for n in r.nodes:
        if n.name == "bias_add":  # the Add names the Reshape back to rank 6: on the CPU
            assert n.verdict == "cpu"


@pytest.mark.parametrize("shape, bias_first, want", [
    ((1, 4, 16, 2, 3, 8), True, "cpu"), ((1, 4, 16, 2, 3, 8), False, "cpu"), ((1, 4, 16, 6, 8), True, "npu")])
def test_qnn_matmul_bias_goes_where_the_reshape_after_it_goes(shape, bias_first, want):
    """q.Add.ctx=matmul_bias_reshape.* probes (NesT's qkv projection): the Add names MatMulAddFusion's
    Reshape back, which merges with the Reshape after it."""
    inits = [numpy_helper.from_array(np.ones((24, 48), np.float32), "w"),
             numpy_helper.from_array(np.ones((48,), np.float32), "bias"),
             numpy_helper.from_array(np.array(shape, dtype=np.int64), "s")]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"], name="mm"),
             helper.make_node("Add", ["bias", "m"] if bias_first else ["m", "bias"], ["b"], name="bias_add"),
             helper.make_node("Reshape", ["b", "s"], ["v"], name="view"),
             helper.make_node("Sigmoid", ["v"], ["y"], name="post")]
    model = _graph(nodes, [_vi("x", [1, 4, 16, 24])], [_vi("y", list(shape))], inits)
    [r] = check_graph(facts_from_model(model), [CATALOG.table("qnn@2.51.0/htp-v73")])
    got = {n.name: n.verdict for n in r.nodes}
    assert (got["mm"], got["bias_add"], got["view"]) == ("npu", want, want), got


def _heads_merge(h, d, side, perm=(0, 1, 3, 2)):
    """Relu -> Transpose(perm) of attention's (1, h, L, d) -> Reshape to (1, h d, side, side)."""
    L = side * side
    src = [1, h, L, d] if list(perm) == [0, 1, 3, 2] else [1, h, d, L]
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("Transpose", ["r"], ["t"], name="swap", perm=list(perm)),
             helper.make_node("Reshape", ["t", "shape"], ["y"], name="merge")]
    inits = [numpy_helper.from_array(np.array([1, h * d, side, side], np.int64), "shape")]
    return facts_from_model(_graph(nodes, [_vi("x", src)], [_vi("y", [1, h * d, side, side])], inits))


@pytest.mark.parametrize("h,d,perm,want", [
    (4, 96, (0, 1, 3, 2), None), (2, 8, (0, 1, 3, 2), None),   # d whole fp16 groups, whatever h
    (4, 5, (0, 1, 3, 2), "whose result's dim 2 is 5, not a multiple of 8"),
    (8, 32, (0, 1, 2, 3), "with perm [0, 1, 2, 3]"),
])
def test_behind_heads_transpose(h, d, perm, want):
    facts = _heads_merge(h, d, 7, perm)
    merge = next(n for n in facts.nodes if n.name == "merge")
    got = RULES["behind_heads_transpose"].check(merge, {"multiple_of": 8}, facts)
    assert got is None if want is None else want in got
    relu = next(n for n in facts.nodes if n.name == "swap")  # read from a graph input's Relu, not a Transpose
    assert "computed by Relu 'relu', not by a Transpose" in RULES["behind_heads_transpose"].check(relu, {"multiple_of": 8}, facts)
    assert not is_local("behind_heads_transpose", {"multiple_of": 8})


@pytest.mark.parametrize("label,axes,fails", [
    ("conv.hw1x1.p2", [2, 3], True), ("conv.hw1x1.lead1", [2, 3], True), ("conv.hw2x1.p2", [2, 3], True),
    ("conv.hw2x1.p2", [2], False), ("conv.hw1x2.p2", [2], True), ("conv.hw2x2.p2", [2, 3], False),
    ("conv.hw1x1.rank4", [2, 3], False), ("conv.hw1x1.rank6", [2, 3], False),
    ("conv.hw1x1.plane_moved", [2, 3], False), ("conv.hw1x1.other_layout", [2, 3], False),
    ("gap.hw1x1.p2", [2, 3], False), ("sigmoid.hw1x1.p2", [2, 3], False)])
def test_not_conv_channel_split_fails_a_rank5_split_of_a_conv_plane_with_a_unit_dim(label, axes, fails):
    # as onnxruntime-qnn 2.7.0 placed q.Reshape.ctx=conv_split.* (v73: a unit H or W fails, v68: a unit H)
    from pytest_npucheck.probe.models_conv_channel_split import _split

    facts = facts_from_model(_split(label).build())
    [reshape] = [n for n in facts.nodes if n.op_type == "Reshape"]
    msg = RULES["not_conv_channel_split"].check(reshape, {"axes": axes}, facts)
    assert (msg is not None) == fails
    if fails:
        assert "splits the channels of Conv 'pre_conv'" in msg and "QNN_COMMON_ERROR_MEM_ALLOC" in msg


@pytest.mark.parametrize("form,d,want", [
    ("slice_sdpa", 32, None), ("t_slice_sdpa", 16, None), ("t_slice_linear", 8, None),
    ("t_slice_linear", 5, "dim 2 of output 0 'focus_reshape_out' is 15, not a multiple of 8"),
    ("t_mul_t_mm", 32, "Mul 'post_mul' reads Transpose 'post_t''s result with the computed 'q_t_out'"),
])
def test_splits_heads_for_attention(form, d, want):
    """CoAtNet, CPU-Bone and EfficientViT-B0 split q, k, v heads for attention (NPU); CoaT's split is read by a
    Mul of two transposed operands, whose Transposes the compiler moves behind it (CPU)."""
    from pytest_npucheck.probe.models_heads_split import _heads_split

    facts = facts_from_model(_heads_split(form, 4, d, 7).build())
    split = next(n for n in facts.nodes if n.name == "focus_reshape")
    got = RULES["splits_heads_for_attention"].check(split, {"multiple_of": 8}, facts)
    assert got is None if want is None else want in got
    assert not is_local("splits_heads_for_attention", {"multiple_of": 8})


def test_splits_heads_for_attention_looks_through_one_element_scales_only():
    """A scale of one element (TorchScript computes it from the head width) between the split and attention's
    MatMul is looked through; a Mul by a full tensor is not."""
    def facts(scale_shape):
        nodes = [helper.make_node("Reshape", ["x", "s"], ["h"], name="split"),
                 helper.make_node("Mul", ["h", "k"], ["m"], name="scale"),
                 helper.make_node("MatMul", ["m", "w"], ["y"], name="mm")]
        inits = [numpy_helper.from_array(np.array([1, 2, 8, 49], np.int64), "s"),
                 numpy_helper.from_array(np.ones([49, 8], np.float32), "w")]
        return facts_from_model(_graph(nodes, [_vi("x", [1, 16, 7, 7]), _vi("k", scale_shape)],
                                       [_vi("y", [1, 2, 8, 8])], inits))

    for shape, want in (([1], None), ([1, 2, 8, 49], "Mul 'scale' reads it with 'k', not a one-element scale")):
        f = facts(shape)
        got = RULES["splits_heads_for_attention"].check(f.nodes[0], {"multiple_of": 8}, f)
        assert got is None if want is None else want in got


@pytest.mark.parametrize("s,const_bias,want", [
    (14, False, "a (14, 14) plane of 196 elements, not a multiple of 8"), (8, False, None),
    (14, True, None),   # a constant bias: the compiler folds the chain, nothing to judge
])
def test_rank6_sum_plane(s, const_bias, want):
    """MViTv2's attn.view(B, h, s, s, s, s) + rel_h + rel_w viewed back as (B, h, s s, s s)."""
    from pytest_npucheck.probe.models_rank6_merge import _rank6_merge

    facts = facts_from_model(_rank6_merge("relpos" if const_bias else "relpos_in", 4, s).build())
    node = next(n for n in facts.nodes if n.name == "focus_reshape")
    got = RULES["rank6_sum_plane"].check(node, {"multiple_of": 8}, facts)
    assert got is None if want is None else want in got
    view = next(n for n in facts.nodes if n.name == "pre_view")  # rank 4 -> rank 6: not judged
    assert RULES["rank6_sum_plane"].check(view, {"multiple_of": 8}, facts) is None


def _scaled_softmax(shape, axis, scale_shape=(), op="Mul", scale_first=False, fanout=False, opset=17):
    scale = numpy_helper.from_array(np.full(scale_shape, 0.17, np.float32), "s")
    nodes = [helper.make_node(op, ["s", "x"] if scale_first else ["x", "s"], ["a"], name="scale"),
             helper.make_node("Softmax", ["a"], ["y"], name="sm", **({} if axis is None else {"axis": axis}))]
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    if fanout:
        nodes.append(helper.make_node("Relu", ["a"], ["z"], name="relu"))
        outs.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))], outs,
                          [scale])
    return facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]))


@pytest.mark.parametrize("shape,axis,kw,fails", [
    # as onnxruntime-qnn 2.7.0 placed them on HTP v73 and v68 (session 19, notes/qmem.md): MEM_ALLOC or built
    ([1, 64, 4], -2, {}, True), ([1, 64, 4], 1, {}, True), ([64, 4], 0, {}, True), ([1, 2, 64, 4], 1, {}, True),
    ([1, 2, 64, 4], -3, {}, True), ([1, 1, 4], -2, {}, True), ([1, 64, 4], -2, {"scale_first": True}, True),
    ([1, 64, 4], -1, {}, False), ([1, 64, 4], 2, {}, False), ([1, 64, 4], None, {}, False),
    ([1, 64, 4], -2, {"op": "Div"}, False), ([1, 64, 4], -2, {"scale_shape": (4,)}, False),
    ([1, 64, 4], -2, {"scale_shape": (64, 1)}, False), ([1, 64, 4], -2, {"scale_shape": (1,)}, False),
    ([1, 64, 4], -2, {"scale_shape": (1, 1, 1)}, False), ([1, 64, 4], -2, {"fanout": True}, False),
])
def test_not_scaled_softmax_off_last_axis(shape, axis, kw, fails):
    facts = _scaled_softmax(shape, axis, **kw)
    [sm] = [n for n in facts.nodes if n.op_type == "Softmax"]
    msg = RULES["not_scaled_softmax_off_last_axis"].check(sm, {}, facts)
    assert (msg is not None) == fails
    if fails:
        assert "of Mul 'scale' by a rank-0 constant" in msg and "QNN_COMMON_ERROR_MEM_ALLOC" in msg


def test_unit_split_concat_sees_slices_tiling_an_axis_joined_on_the_next():
    """Three one-row Slices of a (1, 3, 8) tensor joined on axis 2 pass (one Reshape); joined out of order, on
    axis 0, with a Slice read elsewhere too, or leaving a row out, they fail; as the graph output the first
    Slice fails (the Reshape's row is named after it) and the others and the Concat pass."""
    rule = {"rule": "any_of", "params": {"constraints": [
        {"rule": "dtype", "params": {"tensor": "input", "index": 0, "allowed": ["float32", "float16", "bool"]}},
        {"rule": "unit_split_concat", "params": {}}]}, "else": "cpu"}  # as the RKNN table writes it

    def ints(name, values):
        return numpy_helper.from_array(np.array(values, np.int64), name)

    def graph(order=(0, 1, 2), axis=2, rows=3, shared=False, output=False):
        inits = [ints("a", [1]), ints("st", [1])] + [ints("b%d" % i, [i]) for i in range(4)]
        nodes = [helper.make_node("Slice", ["x", "b%d" % i, "b%d" % (i + 1), "a", "st"], ["s%d" % i], name="slice%d" % i)
                 for i in range(rows)]
        nodes.append(helper.make_node("Concat", ["s%d" % i for i in order], ["c"], name="concat", axis=axis))
        outs = [helper.make_tensor_value_info("c", TensorProto.INT64, None)]
        if not output:
            nodes.append(helper.make_node("Cast", ["c"], ["y"], name="cast", to=TensorProto.FLOAT))
            outs = [_vi("y", None)]
        if shared:
            nodes.append(helper.make_node("Cast", ["s1"], ["z"], name="other", to=TensorProto.FLOAT))
            outs.append(_vi("z", None))
        x = helper.make_tensor_value_info("x", TensorProto.INT64, [1, 3, 8])
        m = _graph(nodes, [x], outs, inits)
        t = _table([rule], op="Slice")
        t.ops["ai.onnx:Concat"] = t.ops["ai.onnx:Slice"]
        [r] = check_graph(facts_from_model(m), [t])
        return {n.name: (n.verdict, _reasons(n)) for n in r.nodes}

    got = graph()
    assert [got[n][0] for n in ("slice0", "slice1", "slice2", "concat")] == ["npu"] * 4
    for kw, why in (({"order": (1, 0, 2)}, "do not tile axis 1 in pieces of one"),
                    ({"axis": 0}, "does not join on the axis after the one sliced"),
                    ({"shared": True}, "is not the only reader of Slice 'slice1'"),
                    ({"rows": 2, "order": (0, 1)}, "the 2 Slices of one row each do not cover the 3 rows of axis 1")):
        got = graph(**kw)
        assert got["concat"][0] == "cpu" and why in got["concat"][1], (kw, got["concat"])
    got = graph(output=True)
    assert got["slice0"][0] == "cpu" and "is a graph output" in got["slice0"][1]
    assert [got[n][0] for n in ("slice1", "slice2", "concat")] == ["npu"] * 3
    assert not is_local("unit_split_concat", {})


# -- Rule.settled: what a context rule's own node facts settle ----------------------------------------


def _bundled_params(rule_id):
    """Every params dict the bundled tables give ``rule_id`` (inside any_of too)."""
    found = []

    def visit(constraints):
        for c in constraints:
            rule, params = (c.rule, c.params) if hasattr(c, "rule") else (c["rule"], c.get("params", {}))
            if rule == rule_id and params not in found:
                found.append(params)
            visit(params.get("constraints", ()))

    for row in CATALOG.listing():
        if "error" in row:
            continue
        table = CATALOG.table(row["target"])
        visit(table.generic_constraints)
        for entry in table.ops.values():
            visit(entry.constraints)
    return found


def test_a_rule_settled_by_its_nodes_own_facts_passes(probe_index):
    """Rule.settled lets the matcher skip a context rule on every node of a signature: wherever it says
    so, on every probe model's nodes and with every params the bundled tables give, the rule passes."""
    from pytest_npucheck.graph import facts_from_model

    settled = {k: r for k, r in RULES.items() if r.settled is not None}
    assert set(settled) == {"concat_flatten_plane", "gemm_scale_fold", "linear_pair_add", "tile_transpose_perm",
                            "rank6_sum_plane"}
    params = {k: _bundled_params(k) or [{}] for k in settled}
    seen = {k: set() for k in settled}
    for probe in probe_index.values():
        if probe.op not in ("Reshape", "Transpose", "Gemm", "MatMul", "Concat", "Add"):
            continue
        facts = facts_from_model(probe.model)
        for node in facts.nodes:
            for k, rule in settled.items():
                for p in params[k]:
                    says = rule.settled(node, p, facts)
                    seen[k].add(says)
                    if says:
                        assert rule.check(node, p, facts) is None, (k, probe.id, node.name, p)
    assert all(s == {True, False} for s in seen.values()), seen


# -- Rule.needs: the ops without which a context rule cannot fail --------------------------------------


def test_a_rule_whose_needed_ops_the_graph_lacks_passes_on_every_node(probe_index):
    """Rule.needs lets the matcher leave a context rule out of a graph that has no node of one of the op
    sets it names: on every probe model, with every params the bundled tables give, a rule that says
    so passes on every node, and the needed ops are those of the params."""
    needing = {k: r for k, r in RULES.items() if r.needs is not None}
    assert set(needing) == {"producer_not", "producer_pass", "feeds_not"}
    assert RULES["producer_not"].needs({"chain": ["Gemm", ["GRU", "LSTM"]]}) == (
        frozenset({"Gemm"}), frozenset({"GRU", "LSTM"}))
    assert RULES["feeds_not"].needs({"path": ["*", "Softmax"]}) == (frozenset({"Softmax"}),)
    assert RULES["producer_pass"].needs({"ops": ["Cast", "Equal"]}) == (frozenset({"Cast", "Equal"}),)
    params = {k: _bundled_params(k) for k in needing}
    lacking = 0
    for probe in probe_index.values():
        facts = facts_from_model(probe.model)
        ops = {n.op_type for n in facts.nodes}
        for k, rule in needing.items():
            for p in params[k]:
                if any(ops.isdisjoint(need) for need in rule.needs(p)):
                    lacking += 1
                    assert all(rule.check(n, p, facts) is None for n in facts.nodes), (k, probe.id, p)
    assert lacking


def test_the_matcher_leaves_out_a_context_rule_the_graph_cannot_fail():
    """A Softmax's producer_pass on Where is not in the plan of a graph without a Where (nor an any_of one
    of whose alternatives it is); with a Where it is, and the verdicts are those of judging every node."""
    from pytest_npucheck import matcher
    from pytest_npucheck.graph import GraphView
    from pytest_npucheck.prepass import run_prepasses

    table = CATALOG.table("rknn@2.5.0/rk3588")

    def plan_rules(nodes, inputs):
        facts = facts_from_model(_graph(nodes, inputs, [_vi("y", [1, 4, 8, 8])]))
        memo = matcher._Memo(table, GraphView(facts, run_prepasses(facts, table)))
        return [c.rule for c, _, _ in memo._plan("ai.onnx:Softmax")[1]], facts

    plain, facts = plan_rules([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=-1)], [_vi("x", [1, 4, 8, 8])])
    assert "producer_pass" not in plain
    assert matcher._passes_in("any_of", {"constraints": [{"rule": "dtype", "params": {}},
                                                         {"rule": "producer_pass", "params": {"ops": ["Where"]}}]},
                              frozenset({"Softmax"}))
    masked, facts = plan_rules([helper.make_node("Where", ["c", "x", "x"], ["w"], name="w"),
                                helper.make_node("Softmax", ["w"], ["y"], name="s", axis=-1)],
                               [_vi("x", [1, 4, 8, 8]), helper.make_tensor_value_info("c", TensorProto.BOOL, [1, 4, 8, 8])])
    assert "producer_pass" in masked
    memo = check_graph(facts, [table])[0]
    matcher.MEMO = False
    try:
        alone = check_graph(facts, [table])[0]
    finally:
        matcher.MEMO = True
    assert [(n.verdict, n.reasons) for n in memo.nodes] == [(n.verdict, n.reasons) for n in alone.nodes]


# -- sparse tests: the nodes a context rule can fail on, found once per graph view ---------------------


def _view(model, table="rknn@2.5.0/rk3588"):
    """The graph view the matcher judges ``model`` on (the pre-passes of ``table`` run)."""
    from pytest_npucheck.graph import GraphView
    from pytest_npucheck.prepass import run_prepasses

    facts = facts_from_model(model)
    pre = run_prepasses(facts, CATALOG.table(table))
    return pre.view if pre.view is not None else GraphView(facts, pre)


def _both(rule_id, params, model):
    """{node name: verdict} of ``rule_id`` on every node of ``model``'s view, with the sparse test and without."""
    from pytest_npucheck.rules import context

    view = _view(model)
    sparse = {n.name: RULES[rule_id].check(n, params, view) for n in view.nodes}
    context.SPARSE = False
    try:
        whole = {n.name: RULES[rule_id].check(n, params, view) for n in view.nodes}
    finally:
        context.SPARSE = True
    return sparse, whole


def test_sparse_tests_agree_with_the_whole_rules_on_every_probe_model(probe_index):
    """producer_pass, producer_not, producer_is and linear_pair_add skip their walk on a node outside their
    sparse test: on every probe model's view, with every params the bundled tables give, each node's verdict
    and message are those of the whole rule, and the tests leave out some nodes."""
    from pytest_npucheck.rules import context

    ids = ("producer_pass", "producer_not", "producer_is", "linear_pair_add")
    params = {k: _bundled_params(k) or [{}] for k in ids}
    skipped = dict.fromkeys(ids, 0)
    for probe in probe_index.values():
        view = _view(probe.model)
        for k in ids:
            for p in params[k]:
                sparse = [RULES[k].check(n, p, view) for n in view.nodes]
                context.SPARSE = False
                try:
                    whole = [RULES[k].check(n, p, view) for n in view.nodes]
                finally:
                    context.SPARSE = True
                assert sparse == whole, (k, probe.id, p)
        made = [(make, r) for _, make, r in view.__dict__.get("_sparse", {}).values() if r is not None]
        skipped["linear_pair_add"] += any(make is context._shared_sources and len(r) < sum(
            n.op_type in ("Gemm", "MatMul") for n in view.nodes) for make, r in made)
        skipped["producer_pass"] += any(make is context._producer_pass_reach for make, _ in made)
        skipped["producer_not"] += any(make is context._producer_not_reach for make, _ in made)
    assert all(skipped[k] for k in ("producer_pass", "producer_not", "linear_pair_add")), skipped


def test_producer_pass_sparse_test_finds_the_producer_behind_skip_ops_and_an_eliminated_identity():
    """Two Reshapes that look alike but for what computes their input: behind a Cast (directly, through a
    Gather it skips, through an Identity the pre-passes remove) the rule runs and fails; behind a Transpose,
    or a Cast it may not skip to (a Relu between), it passes, as without the sparse test."""
    params = {"index": 0, "ops": ["Cast"], "skip": ["Gather"],
              "constraint": {"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 1}}}
    shape = helper.make_tensor_value_info("s", TensorProto.INT64, [2])
    idx = helper.make_tensor_value_info("i", TensorProto.INT64, [2])
    nodes = [helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.FLOAT),
             helper.make_node("Reshape", ["c", "s"], ["r1"], name="direct"),
             helper.make_node("Gather", ["c", "i"], ["g"], name="gather", axis=0),
             helper.make_node("Reshape", ["g", "s"], ["r2"], name="behind_gather"),
             helper.make_node("Identity", ["c"], ["id"], name="identity"),
             helper.make_node("Reshape", ["id", "s"], ["r3"], name="behind_identity"),
             helper.make_node("Relu", ["c"], ["relu"], name="relu"),
             helper.make_node("Reshape", ["relu", "s"], ["r4"], name="behind_relu"),
             helper.make_node("Transpose", ["x"], ["t"], name="transpose", perm=[1, 0]),
             helper.make_node("Reshape", ["t", "s"], ["r5"], name="behind_transpose")]
    model = _graph(nodes, [_vi("x", [4, 4]), shape, idx], [_vi(f"r{k}", None) for k in range(1, 6)])
    sparse, whole = _both("producer_pass", params, model)
    assert sparse == whole
    assert all(sparse[n] is not None for n in ("direct", "behind_gather", "behind_identity"))
    assert sparse["behind_relu"] is None and sparse["behind_transpose"] is None


def test_producer_not_sparse_test_follows_a_computed_input_behind_a_skipped_op():
    """With ``computed_input`` the walk goes on from the computed input of a skipped op whose input 0 is a
    weight (Mul(w, x)): the sparse test follows every input there, and the Reshape behind the Gemm fails as
    without it; without ``computed_input`` it passes both ways."""
    w = numpy_helper.from_array(np.ones((1, 8), np.float32), "w")
    gw = numpy_helper.from_array(np.ones((8, 8), np.float32), "gw")
    shape = numpy_helper.from_array(np.array([8], np.int64), "s")
    nodes = [helper.make_node("Gemm", ["x", "gw"], ["g"], name="gemm"),
             helper.make_node("Mul", ["w", "g"], ["m"], name="scale"),
             helper.make_node("Reshape", ["m", "s"], ["r"], name="reshape"),
             helper.make_node("Reshape", ["x", "s"], ["r0"], name="of_input")]
    model = _graph(nodes, [_vi("x", [1, 8])], [_vi("r", None), _vi("r0", None)], [w, gw, shape])
    walked = {"index": 0, "chain": ["Gemm"], "skip": ["Mul"], "computed_input": True}
    sparse, whole = _both("producer_not", walked, model)
    assert sparse == whole and sparse["reshape"] is not None and sparse["of_input"] is None
    sparse, whole = _both("producer_not", {**walked, "computed_input": False}, model)
    assert sparse == whole and sparse["reshape"] is None
    sparse, whole = _both("producer_is", walked, model)  # producer_is asks the same walk: it passes where it fails
    assert sparse == whole and sparse["reshape"] is None and sparse["of_input"] is not None


def test_linear_pair_add_sparse_test_sees_a_source_behind_a_batchnorm():
    """Two Gemms by constant weights of one input added: one reads the input directly, the other through a
    BatchNormalization (its source is the input too); both fail, as without the sparse test. A third Gemm of
    another input, added to the sum, passes."""
    inits = [numpy_helper.from_array(np.ones((16, 32), np.float32), n) for n in ("w0", "w1", "w2")]
    inits += [numpy_helper.from_array(np.ones(32, np.float32), n) for n in ("s", "o", "mu", "var")]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "o", "mu", "var"], ["bn"], name="bn"),
             helper.make_node("Gemm", ["x", "w0"], ["y0"], name="head0", transB=1),
             helper.make_node("Gemm", ["bn", "w1"], ["y1"], name="head1", transB=1),
             helper.make_node("Add", ["y0", "y1"], ["y"], name="sum"),
             helper.make_node("Gemm", ["x2", "w2"], ["y2"], name="other", transB=1),
             helper.make_node("Add", ["y", "y2"], ["z"], name="plus")]
    model = _graph(nodes, [_vi("x", [1, 32]), _vi("x2", [1, 32])], [_vi("z", None)], inits)
    sparse, whole = _both("linear_pair_add", {}, model)
    assert sparse == whole
    assert sparse["head0"] is not None and "head1" in sparse["head0"] and sparse["head1"] is not None
    assert sparse["other"] is None


# -- Rule.sparse: the sparse tests the matcher asks once per signature --------------------------------


def _left_out(gates, node):
    """Whether one of a rule's (position, names) gates leaves ``node`` out (the rule then passes)."""
    return any((node.index not in names) if pos < 0 else (pos >= len(node.inputs) or node.inputs[pos] not in names)
               for pos, names in gates)


def test_a_node_a_rules_sparse_gate_leaves_out_passes_on_every_probe_model(probe_index):
    """Rule.sparse hands the matcher a rule's sparse test as (position, names) gates: on every probe model's
    view, with every params the bundled tables give (any_of's too), a node one of them leaves out passes the
    rule, some nodes are left out, and with SPARSE off there is no gate."""
    from pytest_npucheck.rules import context

    gated = {k: r for k, r in RULES.items() if r.sparse is not None}
    assert set(gated) == {"producer_pass", "producer_not", "linear_pair_add", "any_of"}
    params = {k: _bundled_params(k) for k in gated}
    left_out = dict.fromkeys(gated, 0)
    for probe in probe_index.values():
        view = _view(probe.model)
        for k, rule in gated.items():
            for p in params[k]:
                gates = rule.sparse(p, view)
                for node in view.nodes if gates else ():
                    if _left_out(gates, node):
                        left_out[k] += 1
                        assert rule.check(node, p, view) is None, (k, probe.id, node.name, p)
                context.SPARSE = False
                try:
                    assert rule.sparse(p, view) is None, (k, p)
                finally:
                    context.SPARSE = True
    assert all(left_out.values()), left_out


def test_any_of_and_the_matcher_take_the_first_alternatives_gate_only():
    """An any_of passes when any alternative does, but only its first alternative's set is made for
    every node: a later one's gate would make a set no node may need (``rules.node._any_of_gate``,
    ``matcher._gates``)."""
    from pytest_npucheck import matcher

    view = _view(_graph([helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.FLOAT),
                         helper.make_node("Reshape", ["c", "s"], ["r"], name="r")],
                        [_vi("x", [2, 4]), helper.make_tensor_value_info("s", TensorProto.INT64, [1])], [_vi("r", [8])]))
    cast = {"ops": ["Cast"], "constraint": {"rule": "rank", "params": {"max": 1}}}
    rank = {"rule": "rank", "params": {"max": 1}}
    first = RULES["any_of"].sparse({"constraints": [{"rule": "producer_pass", "params": cast}, rank]}, view)
    assert first == ((0, {"c"}),)
    assert RULES["any_of"].sparse({"constraints": [rank, {"rule": "producer_pass", "params": cast}]}, view) is None
    assert matcher._gates(((RULES["producer_pass"], cast), (RULES["rank"], rank["params"])), view) == first
    assert matcher._gates(((RULES["rank"], rank["params"]), (RULES["producer_pass"], cast)), view) is None
    assert matcher._gates((), view) is None
