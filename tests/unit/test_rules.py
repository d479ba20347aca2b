"""Every rule on tiny real ONNX graphs, checked through the whole static pipeline."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import const, make_model


def conv(name="c", k=3, x="x", w="w", out="y", **attrs):
    return helper.make_node("Conv", [x, w, "b"], [out], name=name, kernel_shape=[k, k], pads=[k // 2] * 4, **attrs)


def conv_model(k=3, shape=(1, 3, 16, 16)):
    return make_model([conv(k=k)], [("x", shape)], ["y"],
                      [const("w", [[[[0.1] * k] * k] * 3] * 8), const("b", [0.0] * 8)])


def test_conv_in_range_runs_on_npu(judge):
    r = judge(conv_model(k=3))
    assert r["c"].verdict == "npu" and r["c"].reasons == ()
    assert r["__result__"].passed


def test_attr_range_names_the_value(judge):
    r = judge(conv_model(k=9))
    assert r["c"].verdict == "cpu"
    [reason] = r["c"].reasons
    assert reason.rule == "attr_range"
    assert reason.message == "kernel_shape=[9, 9] outside [1, 7]"


def test_attr_in_reflect_pad_message_matches_contract(judge):
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/down1/Pad", mode="reflect")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    r = judge(m)
    node = r["/down1/Pad"]
    assert node.verdict == "cpu"
    assert [x.message for x in node.reasons] == ["mode='reflect' not in {'constant'}"]
    from pytest_npucheck.report.text import render_target

    text = "\n".join(render_target(r["__result__"]))
    assert "Pad /down1/Pad: mode='reflect' not in {'constant'}" in text


def test_attribute_default_is_filled_in(judge):
    # Pad without a mode attribute has mode='constant' by the ONNX default: on the NPU
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="p")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    assert judge(m)["p"].verdict == "npu"


def test_pad_with_runtime_pads_is_unsupported(judge):
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="p")],
                   [("x", (1, 3, 8, 8))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("pads", TensorProto.INT64, [8]))
    r = judge(m)
    assert r["p"].verdict == "unsupported"
    assert any(x.rule == "const_input" and "computed at run time" in x.message for x in r["p"].reasons)


def _rk3588_verdict(nodes, inputs, inits, op, constraint, focus, dtype=None):
    """Judge ``focus`` under a copy of the bundled rk3588 table whose only rule on ``op`` is ``constraint``."""
    import json
    from pathlib import Path

    from pytest_npucheck.check import check_graph
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.tables import table_from_data

    base = json.loads((Path(__file__).resolve().parents[2] / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    base["ops"] = {"ai.onnx:" + op: {"status": "npu", "source": "probe:rknn-2.5.0-rk3588",
                                     "constraints": [{**constraint, "else": "cpu"}]}}
    base["generic_constraints"], base["patterns"], base["prepasses"] = [], [], []
    m = make_model(nodes, inputs, ["y"], inits, dtype=dtype)
    verdicts = {n.name: (n.verdict, "; ".join(x.message for x in n.reasons))
                for n in check_graph(facts_from_model(m), [table_from_data(base)])[0].nodes}
    return verdicts[focus]


def _pad_verdict(shape, pads, rule):
    """One int64 constant Pad of ``shape`` by ``pads`` under the named Pad rule ``rule``."""
    return _rk3588_verdict([helper.make_node("Pad", ["x", "pads"], ["y"], name="p")], [("x", shape)],
                           [const("pads", pads, "int64")], "Pad", {"rule": rule, "params": {}}, "p",
                           dtype=TensorProto.INT64)


def test_pad_not_channel_axis_fails_a_padded_channel_axis():
    verdict, why = _pad_verdict((1, 3, 16), [0, 1, 0, 0, 1, 0], "pad_not_channel_axis")
    assert verdict == "cpu"
    assert why == "pads [0, 1, 0, 0, 1, 0] pad axis 1 of input 0 'x' (1, 3, 16), the channel axis"
    assert _pad_verdict((1, 3, 16), [0, 0, 1, 0, 0, 1], "pad_not_channel_axis")[0] == "npu"      # the last axis
    assert _pad_verdict((1, 1, 16), [0, 1, 0, 0, 1, 0], "pad_not_channel_axis")[0] == "npu"      # LongT5: one block
    assert _pad_verdict((1, 16), [0, 0, 0, 112], "pad_not_channel_axis")[0] == "npu"             # the mask to blocks
    assert _pad_verdict((3, 8), [1, 0, 1, 0], "pad_not_channel_axis")[0] == "cpu"                # rank 2: axis 0
    assert _pad_verdict((1, 3, 4, 16), [0, 1, 0, 0, 0, 1, 0, 0], "pad_not_channel_axis")[0] == "cpu"
    assert _pad_verdict((1, 3, 4, 16), [0, 0, 1, 0, 0, 0, 1, 0], "pad_not_channel_axis")[0] == "npu"
    assert _pad_verdict((1, 1, 3, 4, 16), [0] * 10, "pad_not_channel_axis") == (
        "cpu", "input 0 'x' has rank 5, not 2 to 4")


def test_pad_rank5_one_axis_needs_batch_1_and_one_padded_axis():
    one = [0, 1, 0, 0, 0, 0, 1, 0, 0, 0]
    assert _pad_verdict((1, 1, 16, 2, 8), one, "pad_rank5_one_axis")[0] == "npu"                 # LongT5's blocks
    verdict, why = _pad_verdict((2, 1, 16, 2, 8), one, "pad_rank5_one_axis")
    assert verdict == "cpu"
    assert why == "input 0 'x' (2, 1, 16, 2, 8) is padded on axes [1] by [0, 1, 0, 0, 0, 0, 1, 0, 0, 0]"
    assert _pad_verdict((1, 4, 4, 8, 8), [0, 0, 1, 1, 1, 0, 0, 1, 1, 1], "pad_rank5_one_axis")[0] == "cpu"
    assert _pad_verdict((1, 3, 4, 16), [0, 0, 1, 0, 0, 0, 1, 0], "pad_rank5_one_axis")[0] == "cpu"    # rank 4
    assert _pad_verdict((1, 4, 7, 7, 384), [0] * 10, "pad_rank5_one_axis")[0] == "npu"           # Swin3D's zeros


def _bias_verdict(const_shape, mask_shape, const_first=True, both_computed=False):
    """``Add(constant of const_shape, Relu(mask))`` under a table whose only Add rule is not_const_head_broadcast."""
    relu = helper.make_node("Relu", ["m"], ["mr"], name="r")
    inputs = [("m", mask_shape)] + ([("c", const_shape)] if both_computed else [])
    inits = [] if both_computed else [const("c", np.full(const_shape, 0.5))]
    add = helper.make_node("Add", ["c", "mr"] if const_first else ["mr", "c"], ["y"], name="a")
    return _rk3588_verdict([relu, add], inputs, inits, "Add", {"rule": "not_const_head_broadcast", "params": {}}, "a")


def test_not_const_head_broadcast_fails_a_constant_bias_over_a_one_head_mask():
    verdict, why = _bias_verdict((1, 1, 2, 8, 24), (1, 1, 1, 8, 24))   # LongT5's local attention bias
    assert verdict == "cpu"
    assert why == ("constant input 0 'c' (1, 1, 2, 8, 24) meets computed input 1 'mr' (1, 1, 1, 8, 24), broadcast "
                   "over axis 2 of the rank-5 result (1, 1, 2, 8, 24)")
    assert _bias_verdict((1, 1, 2, 8, 24), (1, 1, 1, 8, 24), const_first=False)[0] == "cpu"
    assert _bias_verdict((1, 1, 2, 8, 24), (1, 1, 1, 8, 24), both_computed=True)[0] == "npu"   # computed bias
    assert _bias_verdict((1, 1, 2, 8, 24), (1, 1, 2, 8, 24))[0] == "npu"                      # mask per head
    assert _bias_verdict((1, 1, 2, 8, 24), (1, 2, 1, 8, 24))[0] == "npu"                      # two blocks
    assert _bias_verdict((1, 2, 8, 24), (1, 1, 8, 24))[0] == "npu"                            # rank 4


def _flatten_verdict(shape, target):
    """One float Reshape of ``shape`` to ``target`` under a table whose only Reshape rule is plane_flatten_channels."""
    return _rk3588_verdict([helper.make_node("Reshape", ["x", "t"], ["y"], name="r")], [("x", shape)],
                           [const("t", target, "int64")], "Reshape",
                           {"rule": "plane_flatten_channels", "params": {"multiple_of": 8}}, "r")


def test_plane_flatten_channels_needs_a_flattened_plane_and_whole_channel_groups():
    assert _flatten_verdict((1, 96, 14, 14), [1, 1, 96, 196])[0] == "npu"      # MViTv2's pooled keys
    assert _flatten_verdict((2, 96, 14, 14), [1, 2, 96, 196])[0] == "npu"      # heads in the batch
    assert _flatten_verdict((1, 16, 5, 5), [1, 16, 1, 25])[0] == "npu"
    assert _flatten_verdict((1, 12, 7, 7), [1, 1, 12, 49]) == (
        "cpu", "input 0 (1, 12, 7, 7) has 12 channels, not a multiple of 8")
    assert _flatten_verdict((1, 16, 4, 4), [1, 32, 2, 4]) == (
        "cpu", "output 0 (1, 32, 2, 4) is not the (h, w) plane of input 0 (1, 16, 4, 4) flattened")


def test_dtype_rule(judge):
    m = make_model([conv()], [("x", (1, 3, 16, 16))], ["y"],
                   [const("w", [[[[0.1] * 3] * 3] * 3] * 8, "float64"), const("b", [0.0] * 8, "float64")],
                   dtype=TensorProto.DOUBLE)
    r = judge(m)
    assert r["c"].verdict == "cpu"
    assert "input 0 'x' dtype float64 not in {'float16', 'float32'}" in r["c"].reasons[0].message


def test_dynamic_input_shape_is_flagged_and_kept_symbolic(judge):
    r = judge(conv_model(shape=("batch", 3, 16, 16)))
    assert r["c"].verdict == "unsupported"
    assert "dynamic (batch)" in r["c"].reasons[0].message


def test_unknown_shape_is_never_supported(judge):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", None)], ["y"])
    r = judge(m)
    assert r["r"].verdict == "unsupported"
    assert "unknown shape" in r["r"].reasons[0].message


def test_rank_limit(judge):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 2, 3, 4, 5))], ["y"])
    r = judge(m)
    assert r["r"].verdict == "cpu"
    assert r["r"].reasons[0].message == "input 0 'x' has rank 5, outside [-inf, 4]"


def test_axis_in_normalises_negative_axis(judge):
    ok = make_model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=-1)], [("x", (1, 4, 8, 8))], ["y"])
    bad = make_model([helper.make_node("Softmax", ["x"], ["y"], name="s", axis=-2)], [("x", (1, 4, 8, 8))], ["y"])
    assert judge(ok)["s"].verdict == "npu"
    r = judge(bad)["s"]
    assert r.verdict == "cpu" and r.reasons[0].message == "axis=2 (rank 4) not in {1, 3}"


def test_attr_not_in_and_attr_default(judge):
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2], ceil_mode=1)],
                   [("x", (1, 4, 8, 8))], ["y"])
    assert judge(m)["mp"].reasons[0].message == "ceil_mode=1 is not supported"
    rz = make_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rz", mode="cubic", cubic_coeff_a=-0.5)],
                    [("x", (1, 4, 8, 8))], ["y"], [const("scales", [1, 1, 2, 2])], opset=19)
    msgs = [x.message for x in judge(rz)["rz"].reasons]
    assert "mode='cubic' not in {'nearest', 'linear'}" in msgs  # a cpu constraint in this table
    assert "cubic_coeff_a=-0.5 set, only the default is supported" in msgs


def test_const_value_range_on_resize_scales(judge):
    ok = make_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rz", mode="nearest")],
                    [("x", (1, 4, 8, 8))], ["y"], [const("scales", [1, 1, 2, 2])])
    bad = make_model([helper.make_node("Resize", ["x", "", "scales"], ["y"], name="rz", mode="nearest")],
                     [("x", (1, 4, 8, 8))], ["y"], [const("scales", [1, 1, 1.5, 1.5])])
    assert judge(ok)["rz"].verdict == "npu"
    r = judge(bad)["rz"]
    assert r.verdict == "cpu" and "needs every value in [1, 8] and integer" in r.reasons[0].message


def test_elements_max_and_dim(judge):
    m = make_model([helper.make_node("Transpose", ["x"], ["y"], name="t", perm=[0, 1, 3, 2])],
                   [("x", (1, 128, 128, 128))], ["y"])
    msgs = [x.message for x in judge(m)["t"].reasons]
    assert "input 0 'x' shape (1, 128, 128, 128): 16384 elements over axes [2, 3] > 8192" in msgs
    assert "input 0 'x' dim 1 is 128, outside [-inf, 64]" in msgs


def test_input_count(judge):
    names = [f"x{i}" for i in range(5)]
    m = make_model([helper.make_node("Concat", names, ["y"], name="cat", axis=1)],
                   [(n, (1, 2, 4, 4)) for n in names], ["y"])
    assert judge(m)["cat"].reasons[0].message == "has 5 inputs, outside [-inf, 4]"


def test_known_shape_on_reshape_with_runtime_shape(judge):
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="rs")], [("x", (1, 8))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT64, [2]))
    r = judge(m)["rs"]
    assert r.verdict == "cpu" or r.verdict == "unsupported"
    assert any(x.rule == "known_shape" for x in r.reasons)


def test_missing_op_gets_default_verdict(judge):
    m = make_model([helper.make_node("Sin", ["x"], ["y"], name="s")], [("x", (1, 4))], ["y"])
    r = judge(m)["s"]
    assert r.verdict == "unsupported"
    assert r.reasons[0].rule == "op_missing" and "ai.onnx:Sin is not supported by toy@1.0/soc-a" in r.reasons[0].message


def test_cpu_only_and_unsupported_status(judge):
    m = make_model([helper.make_node("Erf", ["x"], ["e"], name="erf"),
                    helper.make_node("TopK", ["e", "k"], ["v", "i"], name="topk", axis=1)],
                   [("x", (1, 16))], ["v", "i"], [const("k", [3], "int64")])
    r = judge(m)
    assert r["erf"].verdict == "cpu" and "no NPU kernel" in r["erf"].reasons[0].message
    assert r["topk"].verdict == "unsupported"
    assert r["__result__"].verdict == "unsupported"


def test_every_failing_rule_is_recorded(judge):
    m = make_model([conv(k=9)], [("x", ("n", 3, 16, 16))], ["y"],
                   [const("w", [[[[0.1] * 9] * 9] * 3] * 8), const("b", [0.0] * 8)])
    rules = [x.rule for x in judge(m)["c"].reasons]
    assert rules == ["static_shape", "attr_range"]


def test_op_opset_range(judge):
    m = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], name="g")], [("x", (2, 4))], ["y"],
                   [const("w", [[0.0] * 3] * 4)], opset=17)
    r = judge(m)["g"]
    assert r.verdict == "unsupported" and "opset 17 outside the supported range [11, 12] for Gemm" in r.reasons[0].message


def test_model_opset_outside_table_range(judge):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y"], opset=21)
    res = judge(m)["__result__"]
    assert not res.passed and res.verdict == "unsupported"
    assert "model opset 21" in res.model_issues[0].message


def test_rule_docs_render_from_params():
    from pytest_npucheck.rules import RULES

    assert RULES["attr_in"].describe({"attr": "mode", "values": ["constant"]}) == "attribute mode must be one of {'constant'}."
    assert RULES["rank"].describe({"max": 4}) == "input 0 rank must be in [-inf, 4]."


def test_axis_in_reads_axes_from_the_input_at_new_opsets(judge):
    old = make_model([helper.make_node("ReduceMean", ["x"], ["y"], name="rm", axes=[2, 3])], [("x", (1, 4, 8, 8))], ["y"], opset=17)
    new = make_model([helper.make_node("ReduceMean", ["x", "ax"], ["y"], name="rm")], [("x", (1, 4, 8, 8))], ["y"],
                     [const("ax", [-2, -1], "int64")], opset=18)
    bad = make_model([helper.make_node("ReduceMean", ["x", "ax"], ["y"], name="rm")], [("x", (1, 4, 8, 8))], ["y"],
                     [const("ax", [1], "int64")], opset=18)
    every = make_model([helper.make_node("ReduceMean", ["x"], ["y"], name="rm")], [("x", (1, 4, 8, 8))], ["y"], opset=18)
    assert judge(old)["rm"].verdict == "npu"
    assert judge(new)["rm"].verdict == "npu"
    assert judge(bad)["rm"].reasons[0].message == "axes=1 (rank 4) not in {2, 3}"
    assert judge(every)["rm"].reasons[0].message == "axes=[0, 1, 2, 3] (rank 4) not in {2, 3}"


def test_attr_absent_even_with_default_value(judge):
    def lstm(**attrs):
        return make_model([helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], name="lstm", hidden_size=4, **attrs)],
                          [("x", (5, 1, 3))], ["y"],
                          [const("w", np.zeros((1, 16, 3))), const("r", np.zeros((1, 16, 4))), const("b", np.zeros((1, 32)))])
    assert judge(lstm())["lstm"].verdict == "npu"
    r = judge(lstm(layout=0))["lstm"]
    assert r.verdict == "unsupported"
    assert r.reasons[0].message == ("layout=0 is written explicitly; the compiler does not accept the attribute; "
                                    "the compiler rejects the model")


def test_attr_present_needs_the_attribute_written_even_at_its_default():
    """rknn 2.5.0 fails a LayerNormalization that leaves epsilon to its ONNX default (x.LayerNormalization.ctx=no_bias.*)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def norm(**attrs):
        m = make_model([helper.make_node("LayerNormalization", ["x", "w"], ["y"], name="ln", axis=-1, **attrs)],
                       [("x", (1, 16, 32))], ["y"], [const("w", np.ones(32))], opset=17)
        facts = facts_from_model(m)
        return RULES["attr_present"].check([n for n in facts.nodes if n.name == "ln"][0], {"attrs": ["epsilon"]}, facts)

    assert norm(epsilon=1e-5) is None
    assert norm() == "epsilon not written; the compiler needs the attribute itself, not its ONNX default"
    assert RULES["attr_present"].describe({"attrs": ["epsilon"]}).startswith("attributes")


def test_any_of_passes_when_one_alternative_holds(judge):
    def pool(**attrs):
        return make_model([helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[3, 3], **attrs)],
                          [("x", (1, 4, 8, 8))], ["y"])
    assert judge(pool())["ap"].verdict == "npu"
    assert judge(pool(pads=[1, 1, 1, 1], count_include_pad=1))["ap"].verdict == "npu"
    r = judge(pool(pads=[1, 1, 1, 1]))["ap"]
    assert r.verdict == "cpu"
    assert r.reasons[0].message == ("pads=[1, 1, 1, 1] outside [-inf, 0] and count_include_pad=0 not in {1} "
                                    "(any one of these would do)")
    from pytest_npucheck.rules import RULES

    text = RULES["any_of"].describe({"constraints": [{"rule": "attr_in", "params": {"attr": "mode", "values": ["a"]}},
                                                     {"rule": "rank", "params": {"max": 4}}]})
    assert text == "at least one of: attribute mode must be one of {'a'}; input 0 rank must be in [-inf, 4]."


# -- absent attributes take their ONNX default; identity at a graph output; pattern positions ----

def _mini_catalog(tmp_path, ops, patterns=(), default="unsupported"):
    """A table of our own (toolchain 'mini') next to the toy ones, written and validated as a file."""
    import json

    from conftest import TOY_TABLES
    from pytest_npucheck.tables import Catalog

    data = json.loads((TOY_TABLES / "toy" / "1.0" / "soc-a.json").read_text())
    data.update(toolchain="mini", version="1.0", soc="soc-a", generic_constraints=[], default_verdict=default,
                patterns=list(patterns),
                ops={k: {"source": "tests", **v} for k, v in ops.items()})
    root = tmp_path / "mini-tables"
    (root / "mini" / "1.0").mkdir(parents=True, exist_ok=True)
    (root / "mini" / "1.0" / "soc-a.json").write_text(json.dumps(data))
    return Catalog.discover([root])


def _judge_mini(tmp_path, save, model, catalog):
    from pytest_npucheck.check import check_file

    [res] = check_file(save(model), ["mini@1.0/soc-a"], catalog)
    out = {n.name: n for n in res.nodes}
    out["__result__"] = res
    return out


def _range(attr, **bounds):
    return {"rule": "attr_range", "params": {"attr": attr, **bounds}}


def test_attr_range_uses_the_onnx_default_of_an_absent_attribute(tmp_path, save):
    # Conv without strides/dilations/pads: ONNX says 1, 1 and 0 on each spatial axis
    cat = _mini_catalog(tmp_path, {
        "ai.onnx:Conv": {"status": "npu", "constraints": [_range("strides", min=2), _range("dilations", max=1),
                                                           _range("pads", max=0), _range("kernel_shape", max=3)]},
    })
    m = make_model([helper.make_node("Conv", ["x", "w"], ["y"], name="c")], [("x", (1, 3, 16, 16))], ["y"],
                   [const("w", np.full((8, 3, 5, 5), 0.1))])
    r = _judge_mini(tmp_path, save, m, cat)
    assert r["c"].verdict == "cpu"
    # strides default [1, 1] is outside [2, inf]; kernel_shape comes from the weight (5x5)
    assert sorted(x.message for x in r["c"].reasons) == ["kernel_shape=[5, 5] outside [-inf, 3]",
                                                         "strides=[1, 1] outside [2, inf]"]


def test_attr_range_computes_same_pads_and_refuses_an_unknown_default(tmp_path, save):
    cat = _mini_catalog(tmp_path, {
        "ai.onnx:AveragePool": {"status": "npu", "constraints": [_range("pads", max=4)]},
        "ai.onnx:Transpose": {"status": "npu", "constraints": [_range("perm", min=0, max=3)]},
    })
    pools = [helper.make_node("AveragePool", ["x"], [f"y{k}"], name=f"pool{k}", kernel_shape=[k, k],
                              auto_pad="SAME_UPPER") for k in (9, 11)]
    m = make_model(pools + [helper.make_node("Transpose", ["x"], ["t"], name="t")],
                   [("x", (1, 8, 32, 32))], ["y9", "y11", "t"])
    r = _judge_mini(tmp_path, save, m, cat)
    assert r["pool9"].verdict == "npu"  # SAME pads of a 9x9 kernel, stride 1: 4 on each side
    assert r["pool11"].verdict == "cpu"
    assert [x.message for x in r["pool11"].reasons] == ["pads=[5, 5, 5, 5] outside [-inf, 4]"]
    # Transpose's perm has no default ONNX can state as a value here: never reported as supported
    assert r["t"].verdict == "cpu"
    assert "perm is not set and its ONNX default is not known" in r["t"].reasons[0].message


def test_identity_and_dropout_producing_a_graph_output_are_kept(tmp_path, save):
    cat = _mini_catalog(tmp_path, {"ai.onnx:Relu": {"status": "npu"}, "ai.onnx:Dropout": {"status": "cpu"},
                                   "ai.onnx:Identity": {"status": "npu"}})
    m = make_model([helper.make_node("Dropout", ["x"], ["d1"], name="mid"),
                    helper.make_node("Relu", ["d1"], ["r"], name="relu"),
                    helper.make_node("Dropout", ["r"], ["out"], name="last"),
                    helper.make_node("Identity", ["r"], ["out2"], name="ident")],
                   [("x", (1, 8))], ["out", "out2"])
    r = _judge_mini(tmp_path, save, m, cat)
    assert r["mid"].verdict == "folded"
    assert r["last"].verdict == "cpu" and r["last"].reasons[0].rule == "cpu_only"
    assert r["ident"].verdict == "npu"


def test_lone_dropout_at_the_output_falls_back_on_qnn(save):
    # onnxruntime keeps a Dropout that produces a graph output and runs it on the CPU EP
    # (probes Dropout.ratio=*.f32.r4 in probes/qnn/2.51.0/htp-v73.fp16.results.json)
    from pytest_npucheck.check import check_file
    from pytest_npucheck.tables import Catalog

    m = make_model([helper.make_node("Dropout", ["x"], ["y"], name="drop")], [("x", (1, 8, 4, 4))], ["y"])
    [res] = check_file(save(m), ["qnn@2.51.0/htp-v73"], Catalog.discover())
    assert [n.verdict for n in res.nodes] == ["cpu"]


def _rmsnorm(weight_first, recip=True):
    """Pow/ReduceMean/Add/Sqrt/Reciprocal/Mul/Mul as torch's dynamo exporter writes RMSNorm."""
    nodes = [helper.make_node("Pow", ["x", "two"], ["sq"], name="pow"),
             helper.make_node("ReduceMean", ["sq", "axes"], ["ms"], name="mean", keepdims=1),
             helper.make_node("Add", ["ms", "eps"], ["var"], name="eps_add"),
             helper.make_node("Sqrt", ["var"], ["sd"], name="sqrt")]
    if recip:
        nodes += [helper.make_node("Reciprocal", ["sd"], ["r"], name="rsqrt"),
                  helper.make_node("Mul", ["x", "r"], ["n"], name="norm")]
    else:
        nodes += [helper.make_node("Div", ["x", "sd"], ["n"], name="norm")]
    nodes.append(helper.make_node("Mul", ["w", "n"] if weight_first else ["n", "w"], ["y"], name="scale"))
    return make_model(nodes, [("x", (1, 16, 64))], ["y"],
                      [const("two", 2.0), const("axes", [-1], "int64"), const("eps", 1e-6),
                       const("w", np.ones(64))], opset=18)


RMS_PATTERN = {
    "name": "rmsnorm_weight_first", "fused_op": "RMSNorm", "status": "unsupported", "source": "tests",
    "description": "the backend cannot build it",
    "nodes": [{"id": "pow", "op": "Pow"}, {"id": "mean", "op": "ReduceMean", "after": ["pow"]},
              {"id": "add", "op": "Add", "after": ["mean"]}, {"id": "sqrt", "op": "Sqrt", "after": ["add"]},
              {"id": "rsqrt", "op": "Reciprocal", "after": ["sqrt"]},
              {"id": "norm", "op": "Mul", "after": ["rsqrt"], "at_input": {"rsqrt": 1}},
              {"id": "scale", "op": "Mul", "after": ["norm"], "at_input": {"norm": 1}}],
}


def test_unsupported_pattern_with_input_positions(tmp_path, save):
    ops = {f"ai.onnx:{op}": {"status": "npu"} for op in ("Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal", "Mul", "Div")}
    cat = _mini_catalog(tmp_path, ops, [RMS_PATTERN])
    first = _judge_mini(tmp_path, save, _rmsnorm(weight_first=True), cat)
    assert first["__result__"].verdict == "unsupported"
    assert {first[n].verdict for n in ("pow", "mean", "eps_add", "sqrt", "rsqrt", "norm", "scale")} == {"unsupported"}
    assert first["scale"].fused_into.startswith("RMSNorm (rmsnorm_weight_first")
    assert "rejects" in first["scale"].reasons[0].message and "cannot build it" in first["scale"].reasons[0].message
    # the weight as the second input of the last Mul, or Div instead of Reciprocal: no match
    for model in (_rmsnorm(weight_first=False), _rmsnorm(weight_first=True, recip=False)):
        r = _judge_mini(tmp_path, save, model, cat)
        assert r["__result__"].verdict == "npu"
        assert all(n.fused_into is None for n in r["__result__"].nodes)


def _gelu_half_beside(order):
    """SEW-D's GELU: ``Mul(x, 0.5)`` beside ``x / sqrt(2) -> Erf -> + 1``, joined by one Mul
    (order "half_first": Mul(half, add); "half_second": Mul(add, half); "no_half": Mul(x, add))."""
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Div", ["h", "sqrt2"], ["d"], name="div"),
             helper.make_node("Erf", ["d"], ["e"], name="erf"),
             helper.make_node("Add", ["e", "one"], ["a"], name="add")]
    if order != "no_half":
        nodes.append(helper.make_node("Mul", ["h", "half"], ["hh"], name="half"))
    left = {"half_first": ["hh", "a"], "half_second": ["a", "hh"], "no_half": ["h", "a"]}[order]
    nodes.append(helper.make_node("Mul", left, ["y"], name="mul"))
    return make_model(nodes, [("x", (1, 16, 32))], ["y"],
                      [const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5)])


GELU_BESIDE = {
    "name": "gelu_half_beside", "fused_op": "Gelu", "status": "npu", "source": "tests",
    "nodes": [{"id": "div", "op": "Div"}, {"id": "erf", "op": "Erf", "after": ["div"]},
              {"id": "add", "op": "Add", "after": ["erf"]},
              {"id": "half", "op": "Mul", "same_input_as": "div"},
              {"id": "mul", "op": "Mul", "after": ["half", "add"], "at_input": {"half": 0, "add": 1}}],
}


def test_a_pattern_node_can_be_a_second_branch_from_an_earlier_nodes_input(tmp_path, save):
    # the Mul of the half reads no node of the chain: it reads the tensor the Div reads (same_input_as)
    ops = {f"ai.onnx:{op}": {"status": "npu"} for op in ("Relu", "Div", "Add", "Mul")}
    ops["ai.onnx:Erf"] = {"status": "cpu"}
    cat = _mini_catalog(tmp_path, ops, [GELU_BESIDE])
    fused = _judge_mini(tmp_path, save, _gelu_half_beside("half_first"), cat)
    assert fused["erf"].verdict == "npu" and fused["erf"].fused_into.startswith("Gelu (gelu_half_beside")
    assert {fused[n].fused_into is not None for n in ("div", "erf", "add", "half", "mul")} == {True}
    assert fused["relu"].fused_into is None
    # the other operand order, or no half at all: the lone Erf stays on the CPU
    for order in ("half_second", "no_half"):
        r = _judge_mini(tmp_path, save, _gelu_half_beside(order), cat)
        assert r["erf"].verdict == "cpu", order
        assert all(n.fused_into is None for n in r["__result__"].nodes), order


def _interleave(shape, step=2):
    """x[..., 0::step] and x[..., 1::step] of one tensor, the odd one negated, stacked on a new last axis."""
    big = 2 ** 62
    nodes = [helper.make_node("Relu", ["x"], ["h"], name="relu"),
             helper.make_node("Slice", ["h", "s0", "end", "ax", "st"], ["even"], name="even"),
             helper.make_node("Slice", ["h", "s1", "end", "ax", "st"], ["odd"], name="odd"),
             helper.make_node("Neg", ["odd"], ["nodd"], name="neg"),
             helper.make_node("Unsqueeze", ["nodd", "last"], ["u0"], name="unsq0"),
             helper.make_node("Unsqueeze", ["even", "last"], ["u1"], name="unsq1"),
             helper.make_node("Concat", ["u0", "u1"], ["y"], name="stack", axis=-1)]
    return make_model(nodes, [("x", shape)], ["y"],
                      [const("s0", [0], "int64"), const("s1", [1], "int64"), const("end", [big], "int64"),
                       const("ax", [-1], "int64"), const("st", [step], "int64"), const("last", [-1], "int64")])


def test_pattern_node_constraints_must_hold_for_the_match(tmp_path, save):
    slice_rules = [{"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4, "max": 4}},
                   {"rule": "const_value_range", "params": {"index": 4, "min": 2, "max": 2}}]
    pattern = {"name": "interleave", "fused_op": "Conv", "status": "npu", "source": "tests",
               "nodes": [{"id": "a", "op": "Slice", "constraints": slice_rules},
                         {"id": "b", "op": "Slice", "same_input_as": "a", "constraints": slice_rules},
                         {"id": "n", "op": "Neg", "after": ["b"]},
                         {"id": "ua", "op": "Unsqueeze", "after": ["a"]},
                         {"id": "ub", "op": "Unsqueeze", "after": ["n"]},
                         {"id": "cat", "op": "Concat", "after": ["ua", "ub"]}]}
    ops = {f"ai.onnx:{op}": {"status": "npu"} for op in ("Relu", "Neg", "Unsqueeze", "Concat")}
    ops["ai.onnx:Slice"] = {"status": "npu", "constraints": [
        {"rule": "const_value_range", "params": {"index": 4, "min": 1, "max": 1}}]}
    cat = _mini_catalog(tmp_path, ops, [pattern])
    r4 = _judge_mini(tmp_path, save, _interleave((1, 2, 8, 16)), cat)
    assert r4["even"].verdict == r4["odd"].verdict == "npu"
    assert r4["even"].fused_into and r4["odd"].fused_into  # either Slice is the anchor; the Neg sits on the other
    # rank 3 fails the Slices' rank rule: no match, the stride-2 Slices are judged alone (CPU)
    r3 = _judge_mini(tmp_path, save, _interleave((1, 8, 16)), cat)
    assert r3["even"].verdict == r3["odd"].verdict == "cpu"
    assert all(n.fused_into is None for n in r3["__result__"].nodes)


def test_pattern_siblings_and_node_constraints_are_validated(tmp_path):
    import json

    from conftest import TOY_TABLES
    from pytest_npucheck.errors import TableError
    from pytest_npucheck.tables import Catalog

    def problems(nodes):
        data = json.loads((TOY_TABLES / "toy" / "1.0" / "soc-a.json").read_text())
        data.update(toolchain="mini", version="1.0", soc="soc-a",
                    patterns=[{"name": "p", "fused_op": "F", "source": "tests", "nodes": nodes}],
                    ops={"ai.onnx:Relu": {"status": "npu", "source": "tests"}})
        data["provenance"].setdefault("sources", {})["tests"] = {"title": "tests"}
        root = tmp_path / "v"
        (root / "mini" / "1.0").mkdir(parents=True, exist_ok=True)
        (root / "mini" / "1.0" / "soc-a.json").write_text(json.dumps(data))
        try:
            Catalog.discover([root]).table("mini@1.0/soc-a")
        except TableError as exc:
            return str(exc)
        return ""

    assert problems([{"id": "a", "op": "Div"}, {"id": "b", "op": "Mul", "same_input_as": "a"}]) == ""
    assert "'c' is not an earlier node id" in problems([{"id": "a", "op": "Div"},
                                                        {"id": "b", "op": "Mul", "same_input_as": "c"}])
    assert "needs `after` or `same_input_as`" in problems([{"id": "a", "op": "Div"}, {"id": "b", "op": "Mul"}])
    msg = problems([{"id": "a", "op": "Div", "constraints": [{"rule": "not_graph_output", "params": {}}]},
                    {"id": "b", "op": "Mul", "after": ["a"]}])
    assert "patterns[0].nodes[0].constraints[0].rule" in msg and "neighbours" in msg, msg


def test_identity_of_a_weight_passes_the_constant_on(save):
    # TorchScript writes an Identity per reuse of a shared parameter; the compiler removes it and
    # its readers read the weight: a Reshape whose shape comes through such an Identity has a
    # constant shape (before, it was judged a run-time shape: 'unsupported')
    from pytest_npucheck.check import check_file
    from pytest_npucheck.tables import Catalog

    nodes = [helper.make_node("Identity", ["shape"], ["shape_1"], name="Identity_3"),
             helper.make_node("Identity", ["shape_1"], ["shape_2"], name="Identity_4"),
             helper.make_node("Reshape", ["x", "shape_2"], ["y"], name="reshape")]
    m = make_model(nodes, [("x", (1, 4, 8))], ["y"], [const("shape", [1, 32], "int64")])
    [res] = check_file(save(m), ["rknn@2.5.0/rk3588"], Catalog.discover())
    by = {n.name: n for n in res.nodes}
    assert by["Identity_3"].verdict == by["Identity_4"].verdict == "folded"
    assert by["reshape"].verdict == "npu", by["reshape"].reasons
    # a computed input stays computed
    nodes[0] = helper.make_node("Identity", ["s"], ["shape_1"], name="Identity_3")
    m = make_model(nodes, [("x", (1, 4, 8))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT64, [2]))
    [res] = check_file(save(m), ["rknn@2.5.0/rk3588"], Catalog.discover())
    assert {n.name: n for n in res.nodes}["reshape"].verdict == "unsupported"


def test_axes_ascending_reads_attribute_or_input_and_normalises():
    from onnx import TensorProto, helper, numpy_helper
    import numpy as np

    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def reduce(axes, opset):
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        inits = []
        if opset >= 18:
            inits = [numpy_helper.from_array(np.array(axes, np.int64), "axes")]
            node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], name="rm", keepdims=1)
        else:
            node = helper.make_node("ReduceMean", ["x"], ["y"], name="rm", keepdims=1, axes=axes)
        m = helper.make_model(helper.make_graph([node], "g", [x], [y], initializer=inits),
                              opset_imports=[helper.make_opsetid("", opset)])
        f = facts_from_model(m)
        return RULES["axes_ascending"].check(f.nodes[0], {"attr": "axes"}, f)

    for opset in (13, 18):
        assert reduce([2, 3], opset) is None
        assert reduce([-2, -1], opset) is None
        msg = reduce([-1, -2], opset)
        assert msg is not None and "not in ascending order ([2, 3] would be)" in msg, msg
        assert "[3, 2]" in reduce([3, 2], opset)


def test_a_rules_module_imported_afresh_registers_the_context_rules(monkeypatch):
    """pytester's in-process runs drop the modules first imported inside them while the package keeps
    its attribute ``rules``: a rules package imported afresh afterwards must still register the
    context rules into its own registry (a rules module that had none: KeyError 'not_graph_output' in
    the matcher of a later test)."""
    import importlib
    import sys

    import pytest_npucheck
    import pytest_npucheck.rules as old_rules

    for name in [n for n in sys.modules if n == "pytest_npucheck.rules" or n.startswith("pytest_npucheck.rules.")]:
        monkeypatch.delitem(sys.modules, name)
    assert hasattr(pytest_npucheck, "rules") and hasattr(old_rules, "context")  # left behind, as pytester leaves them
    fresh = importlib.import_module("pytest_npucheck.rules")
    try:
        assert fresh is not old_rules and fresh.RULES is not old_rules.RULES
        assert "not_graph_output" in fresh.RULES and "not_graph_output" in old_rules.RULES
        assert set(fresh.RULES) == set(old_rules.RULES)
    finally:
        monkeypatch.undo()
        pytest_npucheck.rules = old_rules


def test_any_of_cannot_decide_when_an_alternative_needs_an_unknown_shape():
    """A composite whose failing alternatives include one that failed only for a shape the checker
    could not work out is itself undecided (shape_unknown), not a definite failure."""
    from pytest_npucheck.rules import RULES, ShapeUnknown

    class Node:  # what the two sub-rules read
        op_type = "Softmax"

    calls = {"sure": "definitely fails", "unsure": ShapeUnknown("input 0: the checker could not infer its shape")}
    any_of = RULES["any_of"]
    import pytest_npucheck.rules as rules_mod

    saved = dict(rules_mod.RULES)
    try:
        rules_mod.RULES["_t_sure"] = _stub_rule(lambda: calls["sure"])
        rules_mod.RULES["_t_unsure"] = _stub_rule(lambda: calls["unsure"])
        both = {"constraints": [{"rule": "_t_sure"}, {"rule": "_t_unsure"}]}
        sure = {"constraints": [{"rule": "_t_sure"}, {"rule": "_t_sure"}]}
        assert type(any_of.check(Node(), both, None)) is ShapeUnknown
        msg = any_of.check(Node(), sure, None)
        assert msg and type(msg) is not ShapeUnknown
    finally:
        rules_mod.RULES.clear()
        rules_mod.RULES.update(saved)


def _stub_rule(result):
    class Stub:
        local = True
        category = "test"

        def check(self, node, params, graph):
            return result()
    return Stub()


def test_a_rule_describes_itself_with_its_own_words_and_the_common_keys():
    """The requirement in words comes from the rule: its docstring filled with the params, the common
    keys ({which}, {values_set}, {range}) and what its own hook (``words``) adds; a missing key is
    a readable default, never an error."""
    from pytest_npucheck.rules import RULES, Rule

    def fn(node, params, graph):
        """{which} has {shape_text}, values in {values_set}, {range}; {unknown_key}."""

    words_seen = []
    toy = Rule("toy", fn, "shape", words=lambda p: words_seen.append(dict(p)) or {"shape_text": f"rank {p['rank']}"})
    assert toy.describe({"tensor": "output", "index": 1, "rank": 4, "values": [1, 2], "min": 0}) == \
        "output 1 has rank 4, values in {1, 2}, [0, inf]; ?."
    assert words_seen == [{"tensor": "output", "index": 1, "rank": 4, "values": [1, 2], "min": 0}]
    # the bundled rules that need more than the params carry their words themselves
    assert RULES["dim"].describe({"index": 0, "axis": 1, "multiple_of": 8}) == "input 0 dimension 1 must be a multiple of 8."
    assert RULES["dim"].describe({"index": 0, "axis": 1, "min": 1, "max": 16, "multiple_of": 8}) == \
        "input 0 dimension 1 must be in [1, 16] and a multiple of 8."
    text = RULES["any_of"].describe({"constraints": [{"rule": "rank", "params": {"max": 4}},
                                                     {"rule": "static_shape", "params": {}}]})
    assert RULES["rank"].describe({"max": 4}).rstrip(".") in text
    assert RULES["static_shape"].describe({}).rstrip(".") in text
    assert "Slice <- Concat" in RULES["producer_not"].describe({"chain": ["Slice", "Concat"]})


def test_a_composite_is_local_and_reads_values_as_its_parts_do():
    from pytest_npucheck.matcher import _reads_values
    from pytest_npucheck.rules import RULES, is_local

    local = {"constraints": [{"rule": "rank", "params": {"max": 4}}, {"rule": "dtype", "params": {"allowed": ["float32"]}}]}
    mixed = {"constraints": [{"rule": "rank", "params": {"max": 4}}, {"rule": "sole_reader", "params": {}}]}
    valued = {"constraints": [{"rule": "rank", "params": {"max": 4}}, {"rule": "const_value_range", "params": {}}]}
    assert is_local("any_of", local) and not is_local("any_of", mixed)
    assert not _reads_values("any_of", local) and _reads_values("any_of", valued)
    assert not RULES["rank"].reads_values and RULES["const_value_range"].reads_values
    assert is_local("no_such_rule", {}) and _reads_values("no_such_rule", {})


def test_einsum_letters_renames_in_order_of_first_appearance_and_keeps_spacing():
    from pytest_npucheck.rules.node import einsum_letters

    assert einsum_letters("bhlk,bhtk->bhlt") == einsum_letters("bhid,bhjd->bhij") == "abcd,abed->abce"
    assert einsum_letters("BIJ,BJK->BIK") == "abc,acd->abd"
    assert einsum_letters("...ij,...jk->...ik") == "...ab,...bc->...ac"
    assert einsum_letters("b i d, b j d -> b i j") == "a b c, a d c -> a b d"


def test_nonempty_flags_empty_activations_not_empty_constants():
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.probe.builder import GraphBuilder
    from pytest_npucheck.probe.models_empty_tensors import _empty
    from pytest_npucheck.rules import RULES

    rule = RULES["nonempty"]
    out, inp = {"tensor": "output", "index": "*"}, {"tensor": "input", "index": "*"}
    g = facts_from_model(_empty("slice_concat", "Slice", 16).build())  # x[..., 16:] of a (1, 2, 16, 16) x
    nodes = {n.name: n for n in g.nodes}
    says = rule.check(nodes["focus_op"], out, g) or ""
    assert says.startswith("output 0 ") and says.endswith(" shape (1, 2, 16, 0) is empty")
    assert rule.check(nodes["post_head"], out, g) is None
    assert (rule.check(nodes["post_concat"], inp, g) or "").startswith("input 1 ")
    gb = GraphBuilder(17)  # an empty roi is a constant: data, not an activation
    x = gb.input("x", "float32", [1, 2, 4, 4])
    gb.output(gb.node("Resize", [x, gb.const(np.zeros([0], np.float32)), gb.const(np.array([1, 1, 2, 2], np.float32))],
                      mode="nearest", name="rs"))
    g = facts_from_model(gb.build())
    assert rule.check(g.nodes[0], inp, g) is None
    assert rule.describe(out) == "every output must not be empty (no dim of size 0; constant inputs excepted)."

def test_computed_input_and_dim_not_multiple_of():
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    m = make_model([helper.make_node("MatMul", ["q", "x"], ["s"], name="qk"),
                    helper.make_node("MatMul", ["x", "w"], ["p"], name="proj")],
                   [("x", (1, 8, 16, 16))], ["s", "p"],
                   initializers=[const("q", np.ones((1, 8, 4, 16), "float32")),
                                 const("w", np.ones((16, 16), "float32"))])
    g = facts_from_model(m)
    qk, proj = (next(n for n in g.nodes if n.name == name) for name in ("qk", "proj"))
    rule = RULES["computed_input"]
    assert rule.check(qk, {"index": 0}, g) == "input 0 'q' is a constant"
    assert rule.check(proj, {"index": 0}, g) is None
    assert rule.check(proj, {"index": 1}, g) == "input 1 'w' is a constant"
    assert rule.describe({"index": 0}) == "input 0 must be computed at run time (not a constant, nor folded into one)."
    dim = RULES["dim"]
    assert dim.check(proj, {"axis": 2, "not_multiple_of": 8}, g) == "input 0 'x' dim 2 is 16, a multiple of 8"
    assert dim.check(proj, {"axis": 1, "not_multiple_of": 3}, g) is None
    assert "not a multiple of 8" in dim.describe({"axis": 2, "not_multiple_of": 8})


def test_gathernd_in_order_reads_the_constant_indices():
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def gathernd(pairs):
        idx = np.array(pairs, "int64").reshape(1, 1, 1, len(pairs), 2)
        m = make_model([helper.make_node("GatherND", ["x", "i"], ["y"], name="g")], [("x", (1, 4))], ["y"],
                       initializers=[const("i", idx)])
        g = facts_from_model(m)
        return RULES["gathernd_in_order"].check(g.nodes[0], {}, g)

    assert gathernd([(0, 0), (0, 1), (0, 2), (0, 3)]) is None
    assert gathernd([(0, 3), (0, 2), (0, 1), (0, 0)]) == "indices 'i' do not pick the 4 elements of the data in order"
    assert gathernd([(0, 0), (0, 1)]) == "indices 'i' do not pick the 4 elements of the data in order"


def test_attr_present_fails_on_an_attribute_left_to_its_default():
    """rknn-toolkit2 2.5.0 cannot load a ConstantOfShape whose value attribute is left out."""
    from onnx import TensorProto, helper

    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def cos(**attrs):
        g = helper.make_graph([helper.make_node("ConstantOfShape", ["s"], ["y"], name="c", **attrs)], "g",
                              [helper.make_tensor_value_info("s", TensorProto.INT64, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        facts = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
        return RULES["attr_present"].check(facts.nodes[0], {"attrs": ["value"]}, facts)

    assert cos() == "value not written; the compiler needs the attribute itself, not its ONNX default"
    assert cos(value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])) is None


def test_gemm_scale_fold_fails_a_kn_weight_behind_a_per_feature_mul():
    """rknn-toolkit2 2.5.0 folds Mul(x, w[K]) into a following Gemm's [K, N] weight along the wrong axis."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def gemm(n=96, trans_b=0, scale_shape=(32,), scale_first=False, pre="Relu", between=None):
        w = np.linspace(0.5, 1.5, int(np.prod(scale_shape)), dtype=np.float32).reshape(scale_shape)
        b = np.ones((n, 32) if trans_b else (32, n), np.float32)
        nodes = [helper.make_node(pre, ["x"], ["h"], name="pre"),
                 helper.make_node("Mul", ["w", "h"] if scale_first else ["h", "w"], ["m"], name="scale")]
        a = "m"
        if between:
            nodes.append(helper.make_node(between, ["m"], ["m2"], name="between")); a = "m2"
        nodes.append(helper.make_node("Gemm", [a, "B"], ["y"], name="gemm", transB=trans_b))
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 32])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [const("w", w), const("B", b)])
        facts = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
        return RULES["gemm_scale_fold"].check([n for n in facts.nodes if n.name == "gemm"][0], {}, facts)

    msg = gemm()
    assert msg is not None and "'scale'" in msg and "[32, 96]" in msg
    assert gemm(n=64) is not None and gemm(scale_shape=(1, 32)) is not None and gemm(scale_first=True) is not None
    # builds: N == K, the weight stored [N, K] (transB=1), a Mul that is not per-feature, another op between
    assert gemm(n=32) is None
    assert gemm(trans_b=1) is None
    assert gemm(scale_shape=(16, 32)) is None
    assert gemm(between="Relu") is None


def test_linear_pair_add_fails_two_linear_heads_of_one_input_added():
    """rknn-toolkit2 2.5.0's fuse_conv_conv_add raises on Gemm(x, W1) + Gemm(x, W2) (a distilled classifier's head)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def heads(combine="Add", inputs=1, matmul=False, bn=False, weight2_input=False):
        nodes, inits = [], [const("w0", np.ones((16, 32), np.float32)), const("w1", np.ones((16, 32), np.float32)),
                            const("b", np.ones(16, np.float32))]
        if bn:
            inits += [const(n, np.ones(32, np.float32)) for n in ("s", "o", "mu", "var")]
        outs = []
        for h in range(2):
            a = "x2" if inputs == 2 and h == 1 else "x"
            if bn:
                nodes.append(helper.make_node("BatchNormalization", [a, "s", "o", "mu", "var"], [f"bn{h}"], name=f"bn{h}"))
                a = f"bn{h}"
            w = "xw" if weight2_input and h == 1 else f"w{h}"
            if matmul:
                inits.append(const(f"wt{h}", np.ones((32, 16), np.float32)))
                nodes += [helper.make_node("MatMul", [a, "xw" if w == "xw" else f"wt{h}"], [f"m{h}"], name=f"head{h}"),
                          helper.make_node("Add", [f"m{h}", "b"], [f"y{h}"], name=f"bias{h}")]
            else:
                nodes.append(helper.make_node("Gemm", [a, w, "b"], [f"y{h}"], name=f"head{h}", transB=1))
            outs.append(f"y{h}")
        nodes.append(helper.make_node(combine, outs, ["y"], name="sum"))
        ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32])]
        if inputs == 2:
            ins.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 32]))
        if weight2_input:
            ins.append(helper.make_tensor_value_info("xw", TensorProto.FLOAT, [16, 32] if not matmul else [32, 16]))
        g = helper.make_graph(nodes, "g", ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
        facts = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
        return [RULES["linear_pair_add"].check(n, {}, facts) for n in facts.nodes if n.name in ("head0", "head1")]

    first, second = heads()
    assert first is not None and "Gemm 'head1'" in first and "'sum'" in first and "fuse_conv_conv_add" in first
    assert second is not None and "Gemm 'head0'" in second
    assert all(m is not None for m in heads(matmul=True))  # MatMul + bias Add, as rank-3 Linears export
    assert all(m is not None for m in heads(bn=True))  # a BatchNormalization per head, folded into the layer
    # builds: Sub or Mul of the two, two different inputs, a head whose weight is computed
    assert heads(combine="Sub") == [None, None] and heads(combine="Mul") == [None, None]
    assert heads(inputs=2) == [None, None]
    assert heads(weight2_input=True) == [None, None]

def _pool_verdicts(shape, **attrs):
    """Judge one AveragePool under a table whose only rule is pool_whole_windows."""
    import json
    from pathlib import Path

    from pytest_npucheck.check import check_graph
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.tables import table_from_data

    base = json.loads((Path(__file__).resolve().parents[2] / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    base["ops"] = {"ai.onnx:AveragePool": {"status": "npu", "source": "probe:rknn-2.5.0-rk3588", "constraints": [
        {"rule": "pool_whole_windows", "params": {}, "else": "cpu"}]}}
    base["generic_constraints"], base["patterns"], base["prepasses"] = [], [], []
    m = make_model([helper.make_node("AveragePool", ["x"], ["y"], name="pool", **attrs)], [("x", shape)], ["y"])
    [r] = check_graph(facts_from_model(m), [table_from_data(base)])
    [node] = r.nodes
    return node.verdict, "; ".join(x.message for x in node.reasons)


def test_pool_whole_windows_fails_only_a_partial_ceil_window():
    k2 = {"kernel_shape": [2, 2], "strides": [2, 2]}
    assert _pool_verdicts((1, 8, 16, 16), ceil_mode=1, **k2)[0] == "npu"
    assert _pool_verdicts((1, 8, 15, 15), ceil_mode=0, **k2)[0] == "npu"       # floor: no partial window
    assert _pool_verdicts((1, 8, 15, 15), ceil_mode=1, auto_pad="SAME_UPPER", **k2)[0] == "npu"
    verdict, why = _pool_verdicts((1, 8, 16, 15), ceil_mode=1, **k2)
    assert verdict == "cpu"
    assert why == "input 0 'x' (1, 8, 16, 15) dim 3: kernel 2, stride 2 leave a partial last window (15 padded, ceil_mode=1)"
    # pads and dilations count: 15 + 1 + 1 - 3 = 14 is whole for stride 2; dilation 2 spans 5: 16 - 5 = 11 is not
    assert _pool_verdicts((1, 8, 15, 15), ceil_mode=1, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])[0] == "npu"
    assert _pool_verdicts((1, 8, 16, 16), ceil_mode=1, kernel_shape=[3, 3], strides=[2, 2], dilations=[2, 2])[0] == "cpu"


def test_tile_transpose_perm_fails_botnets_tiled_height_logits():
    """rknn-toolkit2 2.5.0's reduce_tp_in_mesh_forward raises on Slice -> Reshape (unit dim) -> Expand -> Transpose(0,3,1,4,2)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.probe.models_rel_pos_tile import _rel_pos_tile
    from pytest_npucheck.rules import RULES

    params = {"perms": [[0, 3, 1, 4, 2], [0, 3, 2, 1, 4]], "sources": ["Slice", "MatMul"], "through": ["Relu"]}

    def check(**kw):
        facts = facts_from_model(_rel_pos_tile(**kw).build())
        [tp] = [n for n in facts.nodes if n.name == "focus_transpose"]
        return RULES["tile_transpose_perm"].check(tp, params, facts)

    msg = check()
    assert msg is not None and "(0, 3, 1, 4, 2)" in msg and "'tile_expand'" in msg and "Slice 'src_slice'" in msg
    assert "reduce_tp_in_mesh_forward" in msg
    for kw in ({"b": 2}, {"n": 8}, {"perm": (0, 3, 2, 1, 4)}, {"src": "slice_relu"}, {"src": "matmul"}, {"start": 0}):
        assert check(**kw) is not None, kw
    # builds: batch 1, the width perm, a Slice of the middle axis, a graph input or its Relu, no Expand
    for kw in ({"b": 1}, {"perm": (0, 1, 3, 2, 4)}, {"perm": (0, 3, 4, 1, 2)}, {"slice_axis": 1}, {"src": "input"},
               {"src": "relu"}, {"expand": False}):
        assert check(**kw) is None, kw
def test_channels_multiple_of():
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def reshape(src, dst):
        m = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="r")], [("x", src)], ["y"],
                       [const("shape", dst, "int64")])
        facts = facts_from_model(m)
        return RULES["channels_multiple_of"].check(facts.nodes[0], {"multiple_of": 8}, facts)

    assert reshape((1, 8, 32, 196), (1, 256, 14, 14)) is None   # CoaT's heads merged back on the map
    assert reshape((1, 4, 96, 196), (1, 384, 14, 14)) == "input 0 'x' dim 1 is 4, not a multiple of 8"
    assert reshape((1, 16, 4, 4), (32, 2, 2, 2)) == "output 0 'y' dim 1 is 2, not a multiple of 8"
    assert RULES["channels_multiple_of"].describe({"multiple_of": 8}) == \
        "dim 1 (the channels) of input 0 and of output 0 must both be a multiple of 8."
def _broadcast_verdict(op, shape, out):
    """Judge one rank-5 Expand (shape ``out``) or Tile (repeats ``out / shape``) under a table whose only rule is
    not_rank5_axis1_broadcast."""
    import json
    from pathlib import Path

    from pytest_npucheck.check import check_graph
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.tables import table_from_data

    base = json.loads((Path(__file__).resolve().parents[2] / "op_support_tables/rknn/2.5.0/rk3588.json").read_text())
    base["ops"] = {"ai.onnx:" + op: {"status": "npu", "source": "probe:rknn-2.5.0-rk3588", "constraints": [
        {"rule": "not_rank5_axis1_broadcast", "params": {}, "else": "cpu"}]}}
    base["generic_constraints"], base["patterns"], base["prepasses"] = [], [], []
    arg = out if op == "Expand" else [o // i for o, i in zip(out, shape)]
    m = make_model([helper.make_node(op, ["x", "arg"], ["y"], name="b")], [("x", shape)], ["y"],
                   [const("arg", arg, "int64")])
    verdicts = {n.name: (n.verdict, "; ".join(x.message for x in n.reasons))
                for n in check_graph(facts_from_model(m), [table_from_data(base)])[0].nodes}
    return verdicts["b"]


@pytest.mark.parametrize("op", ["Expand", "Tile"])
def test_not_rank5_axis1_broadcast_fails_only_axis_1_behind_a_leading_one(op):
    verdict, why = _broadcast_verdict(op, (1, 1, 7, 7, 16), (1, 8, 7, 7, 16))   # GCViT's global query
    assert verdict == "cpu"
    assert why == ("input 0 'x' (1, 1, 7, 7, 16) is broadcast to (1, 8, 7, 7, 16) on axis 1 only: without its "
                   "leading axis of size 1 that is a batch expansion")
    assert _broadcast_verdict(op, (1, 1, 1, 8, 8), (1, 4, 1, 8, 8))[0] == "cpu"
    assert _broadcast_verdict(op, (2, 1, 4, 8, 8), (2, 4, 4, 8, 8))[0] == "npu"   # axis 0 is not 1
    assert _broadcast_verdict(op, (1, 1, 1, 8, 8), (1, 2, 4, 8, 8))[0] == "npu"   # axis 2 repeated too
    assert _broadcast_verdict(op, (1, 2, 1, 8, 8), (1, 2, 4, 8, 8))[0] == "npu"   # axis 2 alone
    assert _broadcast_verdict(op, (1, 1, 8, 8), (1, 4, 8, 8))[0] == "npu"         # rank 4


def test_folds_rows_into_batch():
    """RAFT's coords.reshape(B H W, 1, 1, 2): the rows of a channels-last map folded into the batch, the last
    dim kept; anything else is judged by the planes."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.rules import RULES

    def check(src, dst):
        m = make_model([helper.make_node("Reshape", ["x", "shape"], ["y"], name="fold")], [("x", src)], ["y"],
                       [const("shape", dst, "int64")])
        facts = facts_from_model(m)
        return RULES["folds_rows_into_batch"].check(facts.nodes[0], {}, facts)

    assert check([1, 16, 16, 2], [256, 1, 1, 2]) is None
    assert check([1, 7, 5, 3], [7, 1, 5, 3]) is None
    assert "does not fold the rows" in check([1, 16, 16, 2], [128, 1, 1, 4])   # the last dim changed
    assert "does not fold the rows" in check([2, 16, 16, 2], [512, 1, 1, 2])   # a batch of 2
    assert "does not fold the rows" in check([1, 16, 16, 2], [16, 16, 1, 2])
    assert "not both static rank 4" in check([1, 16, 2], [16, 1, 2])
