"""Scoring of the zoo agreement harness (pytest_npucheck/oracles/zoo_score.py) and the RKNN
rewrite trace it relies on: tiny ONNX graphs and compiler records, no toolchain, no torch."""

from __future__ import annotations

import numpy as np
from onnx import helper

from conftest import const, make_model
from pytest_npucheck.check import graph_facts
from pytest_npucheck.oracles import zoo_score
from pytest_npucheck.toolchains.rknn import adapter as rknn
from pytest_npucheck.tables import Catalog

# RKNN 2.5.0's verbose build log of an RMSNorm (dynamo), cut to the rewrite trace
FUSE_LOG = """D fuse_ops ...
D fuse_ops results:
D     convert_reducemean_to_einsum: remove node = ['node_mean'], add node = ['node_mean#1', 'node_mean#1_rs']
D     unsqueeze_to_4d_add: remove node = [], add node = ['mean_rs', 'add-rs']
D     convert_2in_einsum_to_exmatmul: remove node = ['node_mean#1'], add node = ['pow_1_rs', 'pow_1_rs_mm']
D     swap_reshape_add: remove node = ['mean_rs', 'node_add'], add node = ['node_add', 'mean_rs']
D     fuse_exmatmul_add: remove node = ['node_add', 'pow_1_rs_mm'], add node = ['pow_1_rs_mm']
D     convert_exmatmul_to_conv: remove node = ['pow_1_rs_mm'], add node = ['pow_1_rs_mm#1']
D     fold_constant ...
D     fold_constant done.
D fuse_ops done.
"""


def _row(i: int, op: str, target: str, full: str) -> rknn.LayerRow:
    return rknn.LayerRow(id=i, op_type=op, dtype="FLOAT16", target=target, input_shape="x", output_shape="y",
                         full_name=full, onnx_name=full.split(":", 1)[1])


def test_rewrite_lineage_follows_renames_through_several_rules():
    lineage = rknn.rewrite_lineage(FUSE_LOG)
    assert lineage["node_mean#1"] == {"node_mean"}
    assert lineage["pow_1_rs_mm#1"] >= {"node_mean", "node_add"}  # the Conv stands for the mean and the add
    assert "add-rs" not in lineage  # helpers added without removing anything are not traced


def test_a_cpu_row_a_rewrite_renamed_is_the_cpu_placement_of_its_onnx_node():
    nodes = [{"name": "node_pow", "inputs": ["x"], "outputs": ["p"]},
             {"name": "node_mean", "inputs": ["p"], "outputs": ["m"]},
             {"name": "node_add", "inputs": ["m"], "outputs": ["a"]}]
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok",
                          rows=[_row(1, "Pow", "NPU", "Pow:node_pow"), _row(2, "Conv", "CPU", "Conv:pow_1_rs_mm#1")])
    without = rknn.onnx_placement(res, nodes, lineage={})
    assert without["node_mean"] == "npu"  # the row names no ONNX node: lost
    traced = rknn.onnx_placement(res, nodes, rknn.rewrite_lineage(FUSE_LOG))
    assert traced == {"node_pow": "npu", "node_mean": "cpu", "node_add": "cpu"}


def _graph(save, nodes, inputs, inits=(), opset=17):
    return graph_facts(save(make_model(nodes, inputs, [nodes[-1].output[0]], inits, opset=opset)))


def test_rejection_patterns_name_the_node(save):
    cubic = _graph(save, [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up", mode="cubic")],
                   [("x", [1, 3, 8, 8])], [const("s", [1, 1, 2, 2])])
    assert zoo_score.explain_rejection("rknn", cubic, "rknn worker died (exit code -11)")[:2] == ("resize_cubic", ["up"])
    assert zoo_score.explain_rejection("qnn", cubic, "boom")[0] == "unexplained"
    # a cubic Resize of a parameter (position embeddings) is folded by the compiler and builds
    folded = _graph(save, [helper.make_node("Resize", ["pos", "", "s"], ["p2"], name="up", mode="cubic"),
                           helper.make_node("Add", ["x", "p2"], ["y"], name="add")],
                    [("x", [1, 3, 16, 16])], [const("s", [1, 1, 2, 2]), const("pos", [[[[0.5] * 8] * 8] * 3])])
    assert zoo_score.explain_rejection("rknn", folded, "rknn worker died")[0] == "unexplained"

    def rmsnorm(weight_first: bool):
        last = ["w", "n"] if weight_first else ["n", "w"]
        return _graph(save, [helper.make_node("Pow", ["x", "two"], ["p"], name="pow"),
                             helper.make_node("ReduceMean", ["p"], ["m"], name="mean", axes=[-1], keepdims=1),
                             helper.make_node("Add", ["m", "eps"], ["a"], name="add"),
                             helper.make_node("Sqrt", ["a"], ["s"], name="sqrt"),
                             helper.make_node("Reciprocal", ["s"], ["r"], name="rec"),
                             helper.make_node("Mul", ["x", "r"], ["n"], name="mul"),
                             helper.make_node("Mul", last, ["y"], name="weight")],
                      [("x", [1, 4, 8])], [const("two", 2.0), const("eps", 1e-6), const("w", [0.5] * 8)])

    assert zoo_score.explain_rejection("qnn", rmsnorm(True), "Failed to finalize")[:2] == ("rmsnorm_sqrt_reciprocal", ["pow"])
    # x * rsqrt(...) * w (weight second) builds: not the pattern
    assert zoo_score.explain_rejection("qnn", rmsnorm(False), "Failed to finalize")[0] == "unexplained"

    def sk_attention(plane: int):  # timm SKNet's fc_select Conv split into (N, paths, C, H, W)
        return _graph(save, [helper.make_node("Conv", ["x", "w"], ["c"], name="fc_select", kernel_shape=[1, 1]),
                             helper.make_node("Reshape", ["c", "t"], ["r"], name="split"),
                             helper.make_node("Softmax", ["r"], ["y"], name="softmax", axis=1)],
                      [("x", [1, 16, plane, plane])],
                      [const("w", [[[[0.1]]] * 16] * 128), const("t", [1, 2, 64, plane, plane], "int64")])

    assert zoo_score.explain_rejection("qnn", sk_attention(1), "Failed to finalize")[:2] == ("conv_channel_split",
                                                                                             ["split"])
    assert zoo_score.explain_rejection("qnn", sk_attention(2), "Failed to finalize")[0] == "unexplained"

    def group_assign(axis: int):  # GroupViT's group assignment: scaled logits, Softmax over the queries
        return _graph(save, [helper.make_node("Mul", ["x", "scale"], ["a"], name="mul"),
                             helper.make_node("Softmax", ["a"], ["y"], name="assign", axis=axis)],
                      [("x", [1, 64, 4])], [const("scale", 0.17)])

    assert zoo_score.explain_rejection("qnn", group_assign(-2), "Failed to finalize")[:2] == (
        "scaled_softmax_off_last_axis", ["assign"])
    assert zoo_score.explain_rejection("qnn", group_assign(-1), "Failed to finalize")[0] == "unexplained"


def test_constant_query_attention_with_any_number_of_queries(save):
    def attention(queries: int, learned: bool):
        nodes = [helper.make_node("MatMul", ["q", "k"], ["s"], name="qk"),
                 helper.make_node("Mul", ["s", "scale"], ["m"], name="scale"),
                 helper.make_node("Softmax", ["m"], ["p"], name="sm", axis=-1),
                 helper.make_node("MatMul", ["p", "v"], ["y"], name="pv")]
        inputs = [("k", [1, 2, 16, 4]), ("v", [1, 2, 4, 16])] + ([] if learned else [("q", [1, 2, queries, 16])])
        inits = [const("scale", np.float32(0.25))] + ([const("q", np.ones((1, 2, queries, 16), "float32"))]
                                                        if learned else [])
        return graph_facts(save(make_model(nodes, inputs, ["y"], initializers=inits)))

    assert zoo_score.explain_rejection("rknn", attention(1, True), "")[:2] == ("constant_query_attention", ["qk"])
    assert zoo_score.explain_rejection("rknn", attention(10, True), "")[:2] == ("constant_query_attention", ["qk"])
    assert zoo_score.explain_rejection("rknn", attention(1, False), "")[0] == "unexplained"


def test_two_classifier_heads_of_one_input_added_explain_rknns_fuse_conv_conv_add(save):
    def heads(second_input: str):
        nodes = [helper.make_node("Gemm", ["x", "w0", "b"], ["y0"], name="head", transB=1),
                 helper.make_node("Gemm", [second_input, "w1", "b"], ["y1"], name="head_dist", transB=1),
                 helper.make_node("Add", ["y0", "y1"], ["s"], name="sum"),
                 helper.make_node("Div", ["s", "two"], ["y"], name="mean")]
        inits = [const("w0", np.ones((10, 8), "float32")), const("w1", np.ones((10, 8), "float32")),
                 const("b", np.ones(10, "float32")), const("two", np.float32(2.0))]
        return _graph(save, nodes, [("x", [1, 8]), ("x2", [1, 8])], inits)

    pid, nodes, text = zoo_score.explain_rejection("rknn", heads("x"), "'NoneType' object is unsliceable")
    assert (pid, nodes) == ("linear_pair_add", ["head", "head_dist"]) and "fuse_conv_conv_add" in text
    # DeiT's distilled head reads two different tokens: it builds, not the pattern
    assert zoo_score.explain_rejection("rknn", heads("x2"), "'NoneType' object is unsliceable")[0] == "unexplained"


def test_botnets_tiled_height_logits_explain_rknns_reduce_tp_in_mesh(save):
    from pytest_npucheck.probe.models_rel_pos_tile import _rel_pos_tile

    failing = graph_facts(save(_rel_pos_tile(n=8).build()))
    pid, nodes, text = zoo_score.explain_rejection("rknn", failing, "3 is not in list")
    assert (pid, nodes) == ("tile_transpose_perm", ["focus_transpose"]) and "reduce_tp_in_mesh_forward" in text
    # the width half (perm 0, 1, 3, 2, 4) builds: not the pattern
    width = graph_facts(save(_rel_pos_tile(n=8, perm=(0, 1, 3, 2, 4)).build()))
    assert zoo_score.explain_rejection("rknn", width, "3 is not in list")[0] == "unexplained"


def test_a_shape_from_run_time_values_explains_rknns_rejection(save):
    """JetMoE's expert routing (dynamo): rows split by sizes counted from the data, one MatMul each."""
    def split_by(sizes_from_data: bool, x_shape=(16, 32)):
        count = [helper.make_node("Slice", ["x", "s0", "s1", "ax1"], ["c0"], name="first_col"),
                 helper.make_node("Greater", ["c0", "zero"], ["pos"], name="positive"),
                 helper.make_node("Cast", ["pos"], ["posi"], name="to_int", to=7),
                 helper.make_node("ReduceSum", ["posi", "axes"], ["k0"], name="count", keepdims=0),
                 helper.make_node("Reshape", ["k0", "one"], ["k"], name="as_1d"),
                 helper.make_node("Sub", ["n", "k"], ["rest"], name="rest"),
                 helper.make_node("Concat", ["k", "rest"], ["sizes"], name="sizes", axis=0)]
        nodes = (count if sizes_from_data else []) + [
            helper.make_node("Split", ["x", "sizes" if sizes_from_data else "csizes"], ["a", "b"], name="route", axis=0),
            helper.make_node("MatMul", ["a", "w"], ["ya"], name="expert0"),
            helper.make_node("MatMul", ["b", "w"], ["yb"], name="expert1"),
            helper.make_node("Concat", ["ya", "yb"], ["y"], name="cat", axis=0)]
        inits = [const("s0", [0], "int64"), const("s1", [1], "int64"), const("ax1", [1], "int64"),
                 const("zero", np.float32(0)), const("axes", [0, 1], "int64"), const("one", [1], "int64"),
                 const("n", [16], "int64"), const("csizes", [5, 11], "int64"), const("w", np.ones((32, 8), "float32"))]
        return _graph(save, nodes, [("x", list(x_shape))], inits)

    pid, nodes, text = zoo_score.explain_rejection("rknn", split_by(True), "argument of type 'NoneType' is not iterable")
    assert (pid, nodes) == ("run_time_shape", ["route"]) and "Split" in text
    assert zoo_score.explain_rejection("qnn", split_by(True), "boom")[0] == "unexplained"
    # split by constant sizes: static shapes throughout, it builds
    assert zoo_score.explain_rejection("rknn", split_by(False), "boom")[0] == "unexplained"
    # a dynamic graph input (the static_shape rule's case, not a run-time origin)
    assert zoo_score.explain_rejection("rknn", split_by(True, ("n", 32)), "boom")[0] == "unexplained"
    nonzero = _graph(save, [helper.make_node("Greater", ["x", "zero"], ["pos"], name="positive"),
                            helper.make_node("NonZero", ["pos"], ["nz"], name="where_positive"),
                            helper.make_node("Reshape", ["nz", "m1"], ["idx"], name="flat"),
                            helper.make_node("Gather", ["x", "idx"], ["y"], name="pick", axis=0)],
                     [("x", [16])], [const("zero", np.float32(0)), const("m1", [-1], "int64")])
    assert zoo_score.explain_rejection("rknn", nonzero, "need to be constant")[:2] == ("run_time_shape",
                                                                                       ["where_positive"])
    # a fallback: the compiler's own message naming a node explains it first
    assert zoo_score.explain_rejection("rknn", nonzero, "The input 0 of NonZero('where_positive') need to be "
                                       "constant")[:2] == ("named_in_message", ["where_positive"])


def test_a_1d_conv_padded_by_auto_pad_same_explains_rknns_rejection(save):
    """LASR's Conformer depthwise conv (kernel 32, auto_pad SAME_UPPER) on a rank-3 input."""
    def conv(auto_pad: str, rank: int = 3, kernel: int = 32):
        shape, k = ([1, 32, 29], [kernel]) if rank == 3 else ([1, 32, 1, 29], [1, kernel])
        w = np.ones([32, 1] + k, "float32")
        attrs = {"auto_pad": auto_pad} if auto_pad else {"pads": [15, 16] if rank == 3 else [0, 15, 0, 16]}
        return _graph(save, [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                             helper.make_node("Conv", ["r", "w"], ["y"], name="depthwise_conv", group=32,
                                              kernel_shape=k, **attrs)],
                      [("x", shape)], [const("w", w)])

    for auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        pid, nodes, text = zoo_score.explain_rejection("rknn", conv(auto_pad), "'/m/Mul_output_0_slice_conv_rs'")
        assert (pid, nodes) == ("conv1d_same_pad", ["depthwise_conv"]) and "auto_pad" in text
    assert zoo_score.explain_rejection("rknn", conv("SAME_UPPER", kernel=3), "boom")[0] == "conv1d_same_pad"
    # explicit pads, VALID, and a 2-D Conv padded SAME build: not the pattern
    assert zoo_score.explain_rejection("rknn", conv(""), "boom")[0] == "unexplained"
    assert zoo_score.explain_rejection("rknn", conv("VALID"), "boom")[0] == "unexplained"
    assert zoo_score.explain_rejection("rknn", conv("SAME_UPPER", rank=4), "boom")[0] == "unexplained"
    assert zoo_score.explain_rejection("qnn", conv("SAME_UPPER"), "boom")[0] == "unexplained"


def test_rejection_from_rknns_rule_trace_and_unknown_attributes(save):
    g = _graph(save, [helper.make_node("Relu", ["x"], ["r"], name="relu"),
                      helper.make_node("Softmax", ["r"], ["y"], name="node_sm")], [("x", [1, 4])])
    log = ("W build: Show op fuse match nodes:\nRule: fuse_softmax_thing\nSubgraph:\nOp type: Softmax\n"
           "Op name: node_sm\n  Input:\nE build: Traceback (most recent call last):\nValueError: x\n")
    assert zoo_score.explain_rejection("rknn", g, "ValueError: x", log)[:2] == ("rknn_rule:fuse_softmax_thing", ["node_sm"])
    lstm = _graph(save, [helper.make_node("LSTM", ["x", "w", "r"], ["y"], name="lstm", hidden_size=2, layout=0)],
                  [("x", [3, 1, 2]), ("w", [1, 8, 2]), ("r", [1, 8, 2])], opset=14)
    pid, nodes, _ = zoo_score.explain_rejection(
        "rknn", lstm, "Unrecognized attribute: layout for operator LSTM\n==> Context: Bad node spec")
    assert (pid, nodes) == ("unknown_attribute:LSTM.layout", ["lstm"])


def test_score_and_summary_count_nodes_and_rejections(save):
    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    path = save(make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Sigmoid", ["r"], ["y"], name="sig")], [("x", [1, 4, 8, 8])], ["y"]))
    real = {"arch": "a", "exporter": "dynamo", "toolchain": "rknn", "status": "ok",
            "rows": [{"op_type": "Relu", "target": "CPU", "full_name": "Relu:relu"},
                     {"op_type": "Sigmoid", "target": "NPU", "full_name": "Sigmoid:sig"}]}
    rec = zoo_score.score_model(path, table, real)
    assert (rec["tp"], rec["fp"], rec["fn"], rec["tn"]) == (0, 0, 1, 1)
    [d] = rec["disagreements"]
    assert (d["direction"], d["op_type"], d["cause"]) == ("missed_fallback", "Relu", "cpu row Relu")

    crashed = zoo_score.score_model(path, table, {**real, "arch": "b", "status": "crashed", "message": "died"})
    assert crashed["built"] is False and crashed["rejection"]["static_predicts_rejection"] is False
    summary = zoo_score.summarise([rec, crashed], {"c": "does not build"})
    f = summary["targets"]["rknn@2.5.0/rk3588"]["all"]
    assert (f["architectures"], f["built"], f["rejected"], f["nodes"]) == (2, 1, 1, 2)
    assert (f["agreement"], f["recall"], f["precision"]) == (0.5, 0.0, None)
    assert summary["skipped"] == {"c": "does not build"}
    [cls] = summary["targets"]["rknn@2.5.0/rk3588"]["classes"]  # every file of a class, for whoever fixes it
    assert (cls["nodes"], cls["models"], cls["files"]) == (1, 1, ["a.dynamo"])
    text = "\n".join(zoo_score.markdown(summary))
    assert "| rknn@2.5.0/rk3588 | dynamo | 2 | 1 | 1 (0) | 2 | 50.0% | 0.0% | n/a |" in text
    assert "1 x missed_fallback Relu: cpu row Relu" in text


def test_a_rule_that_rewrote_two_nodes_gives_each_row_to_the_node_it_is_named_after():
    """RKNN's cvt_and_to_fp_mul turns an int64->bool Cast and the And after it into a Cast swapped
    behind a Reshape (CPU, int64), a Mul (NPU) and a Cast (CPU): the Cast node is on the CPU, the And
    on the NPU, although the trace gives all three rows both origins."""
    log = ("D fuse_ops results:\n"
           "D     cvt_and_to_fp_mul: remove node = ['/m/Cast', '/m/And'], add node = "
           "['/m/Cast_output_0-rs_sw_cast', '/m/And_2fp_add', '/m/And_2fp_add_cast']\nD fuse_ops done.\n")
    nodes = [{"name": "/m/Cast", "inputs": ["ids"], "outputs": ["/m/Cast_output_0"]},
             {"name": "/m/And", "inputs": ["/m/Cast_output_0", "b"], "outputs": ["/m/And_output_0"]}]
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Cast", "CPU", "Cast:/m/Cast_output_0-rs_sw_cast"), _row(2, "Mul", "NPU", "Mul:/m/And_2fp_add"),
        _row(3, "Cast", "CPU", "Cast:/m/And_2fp_add_cast")])
    assert rknn.onnx_placement(res, nodes, rknn.rewrite_lineage(log)) == {"/m/Cast": "cpu", "/m/And": "npu"}


def test_a_file_onnx_runtime_itself_refuses_is_an_invalid_export_not_a_rejection(save):
    table = Catalog.discover().table("qnn@2.51.0/htp-v73")
    path = save(make_model([helper.make_node("MatMul", ["a", "b"], ["y"], name="/m/MatMul")],
                           [("a", [1, 4]), ("b", [4, 2])], ["y"]))
    real = {"arch": "a", "exporter": "torchscript", "toolchain": "qnn", "status": "session_failed",
            "message": "Fail: [ONNXRuntimeError] : 1 : FAIL : Node (/m/MatMul) Op (MatMul) "
                       "[ShapeInferenceError] Incompatible dimensions"}
    rec = zoo_score.score_model(path, table, real)
    assert rec["rejection"]["pattern"] == "invalid_model" and rec["rejection"]["nodes"] == ["/m/MatMul"]
    f = zoo_score.summarise([rec], {})["targets"]["qnn@2.51.0/htp-v73"]["all"]
    assert (f["rejected"], f["invalid_files"]) == (0, 1)


def test_a_merged_mask_reshape_counts_on_the_chain_tail_with_or_without_the_swap():
    """TorchScript's padding-mask lookup ``Cast(bool) -> Flatten -> Gather -> Reshape -> Reshape``: RKNN
    merges the layout ops into one int64 CPU Reshape (fuse_two_reshape) and names it after the last one
    (``Reshape:/m/Reshape_1``), or, when it swapped the chain in front of the Cast first, after the mask
    (``Reshape:ids_rs``). Either way the row counts on the chain's last op, with or without the build log,
    and the ops merged into it stay on the NPU."""
    log = ("D fuse_ops results:\n"
           "D     convert_flatten_to_reshape: remove node = ['/m/Flatten'], add node = ['/m/Flatten_2rs']\n"
           "D     fuse_two_reshape: remove node = ['/m/Flatten_2rs']\n"
           "D     fuse_two_reshape: remove node = ['/m/Reshape']\n"
           "D     swap_cast_reshape: remove node = ['/m/Cast', '/m/Reshape_1', 'ids_rs'], add node = "
           "['/m/Reshape_1', '/m/Cast']\nD fuse_ops done.\n")
    nodes = [{"name": "/m/Cast", "op_type": "Cast", "inputs": ["ids"], "outputs": ["c"]},
             {"name": "/m/Flatten", "op_type": "Flatten", "inputs": ["c"], "outputs": ["f"]},
             {"name": "/m/Gather", "op_type": "Gather", "inputs": ["f", "idx"], "outputs": ["g"]},
             {"name": "/m/Reshape", "op_type": "Reshape", "inputs": ["g", "s1"], "outputs": ["r"]},
             {"name": "/m/Reshape_1", "op_type": "Reshape", "inputs": ["r", "s2"], "outputs": ["m"]},
             {"name": "/m/Where", "op_type": "Where", "inputs": ["m", "x", "y"], "outputs": ["w"]}]
    want = {"/m/Cast": "cpu", "/m/Flatten": "npu", "/m/Gather": "npu", "/m/Reshape": "npu",
            "/m/Reshape_1": "cpu", "/m/Where": "npu"}
    named_last = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Reshape", "CPU", "Reshape:/m/Reshape_1"), _row(2, "Cast", "CPU", "Cast:/m/Cast")])
    named_after_mask = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Reshape", "CPU", "Reshape:ids_rs"), _row(2, "Cast", "CPU", "Cast:/m/Cast")])
    for res in (named_last, named_after_mask):
        assert rknn.onnx_placement(res, nodes, rknn.rewrite_lineage(log)) == want
        assert rknn.onnx_placement(res, nodes, {}) == want


def test_the_mask_relayout_counts_on_the_chain_tail_whatever_else_reads_the_mask():
    """The zoo's TorchScript padding masks (MPNet, Gemma-2, GPT-SW3, Bloom, OPT): RKNN relayouts the mask in
    front of its CPU Cast (``unsqueeze_to_4d_cast``: ``Reshape:<mask>_rs``) and bypasses the chain behind the
    Cast with the Cast's relayout back. The one int64 Reshape row is the chain's, as in the probes, also when
    a Shape reads the Cast's result (folded at build time), when an int64 Mul reads the mask too (its
    relayout is the same row, ``remove_parallel_reshape``), and when the mask reaches the Cast through ops
    RKNN removes (a Cast to int64 of an int64 mask, a ``view(-1, T)``); an op with a row of its own is not
    looked through."""
    chain = [{"name": "/m/Flatten", "op_type": "Flatten", "inputs": ["c"], "outputs": ["f"]},
             {"name": "/m/Gather", "op_type": "Gather", "inputs": ["f", "idx"], "outputs": ["g"]},
             {"name": "/m/Reshape", "op_type": "Reshape", "inputs": ["g", "s1"], "outputs": ["r"]},
             {"name": "/m/Reshape_1", "op_type": "Reshape", "inputs": ["r", "s2"], "outputs": ["m"]},
             {"name": "/m/Where", "op_type": "Where", "inputs": ["m", "x", "y"], "outputs": ["w"]}]
    shape = [{"name": "/m/Shape", "op_type": "Shape", "inputs": ["c"], "outputs": ["sh"]}]
    cast = [{"name": "/m/Cast", "op_type": "Cast", "inputs": ["ids2"], "outputs": ["c"]}]
    fronts = {  # what lies between the mask 'ids' and the Cast that makes the bool mask 'c'
        "shape reader": [{"name": "/m/Cast", "op_type": "Cast", "inputs": ["ids"], "outputs": ["c"]}] + shape,
        "noop view": [{"name": "/m/View", "op_type": "Reshape", "inputs": ["ids", "s0"], "outputs": ["ids2"]}]
                     + cast + shape,
        "shared, identity Cast": [
            {"name": "/m/Cast_i64", "op_type": "Cast", "inputs": ["ids"], "outputs": ["ids2"]},
            {"name": "/m/Mul", "op_type": "Mul", "inputs": ["ids2", "pos"], "outputs": ["p"]}] + cast + shape,
    }
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Reshape", "CPU", "Reshape:ids_rs"), _row(2, "Cast", "CPU", "Cast:ids_rs_cast"),
        _row(3, "Mul", "CPU", "Mul:/m/Mul")])
    for what, front in fronts.items():
        placement = rknn.onnx_placement(res, front + chain, {})
        assert placement["/m/Reshape_1"] == "cpu", what
        assert all(placement[n] == "npu" for n in ("/m/Flatten", "/m/Gather", "/m/Reshape", "/m/Where")), what
    # the dynamo exporter's lookup: one GatherND of in-order indices (rewritten as a Reshape), no row of its own
    gathernd = [{"name": "/m/Cast", "op_type": "Cast", "inputs": ["ids"], "outputs": ["c"]},
                {"name": "/m/GatherND", "op_type": "GatherND", "inputs": ["c", "idx"], "outputs": ["m"]},
                {"name": "/m/Where", "op_type": "Where", "inputs": ["m", "x", "y"], "outputs": ["w"]}]
    placement = rknn.onnx_placement(res, gathernd, {})
    assert (placement["/m/GatherND"], placement["/m/Where"]) == ("cpu", "npu")
    # the Mul has a row of its own: a Cast read only through it is not the mask's Cast
    through_mul = [{"name": "/m/Mul", "op_type": "Mul", "inputs": ["ids", "pos"], "outputs": ["ids2"]}] + cast
    assert rknn.onnx_placement(res, through_mul + chain, {})["/m/Reshape_1"] == "npu"


def test_a_row_named_after_none_of_its_origins_goes_to_the_origin_of_its_op_type():
    """BLIP/Bloom/GPT-Neo padding masks: ``Cast(bool) -> And -> Expand``; RKNN folds the Expand into the And
    (convert_expand_to_reshape) and rewrites the And and the mask Cast into an NPU Mul and a CPU Cast named
    after the mask input (``args_2_rs_cast``). That Cast row is the Cast node's, not the Expand's."""
    log = ("D fuse_ops results:\n"
           "D     convert_expand_to_reshape: remove node = ['/m/Expand', '/m/And'], add node = ['/m/And']\n"
           "D     cvt_and_to_fp_mul: remove node = ['/m/Cast', '/m/And'], add node = "
           "['args_2_rs_cast', '/m/And_2fp_add', '/m/And_2fp_add_cast']\nD fuse_ops done.\n")
    nodes = [{"name": "/m/Cast", "op_type": "Cast", "inputs": ["args_2"], "outputs": ["c"]},
             {"name": "/m/And", "op_type": "And", "inputs": ["c", "causal"], "outputs": ["a"]},
             {"name": "/m/Expand", "op_type": "Expand", "inputs": ["a", "shape"], "outputs": ["e"]}]
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Cast", "CPU", "Cast:args_2_rs_cast"), _row(2, "Mul", "NPU", "Mul:/m/And_2fp_add")])
    placement = rknn.onnx_placement(res, nodes, rknn.rewrite_lineage(log))
    assert placement == {"/m/Cast": "cpu", "/m/And": "npu", "/m/Expand": "npu"}



def test_an_sdpa_rewrite_row_named_after_a_tensor_goes_to_the_origins_that_read_it():
    """timm's MobileNetV4 multi-query attention: ``MatMul(q, k) -> Softmax -> MatMul(p, v)`` with one key/value
    head broadcast over the query heads. fuse_matmul_softmax_matmul_to_sdpa turns the three into exSDPAttention
    (named after the output MatMul) and adds CPU Expands named after the key and value tensors: the key's is the
    scores MatMul's, the value's the output MatMul's (outweighed there by its NPU attention row), none the
    Softmax's."""
    log = ("D fuse_ops results:\n"
           "D     fuse_matmul_softmax_matmul_to_sdpa: remove node = ['/a/MatMul', '/a/Softmax', '/a/MatMul_1'], "
           "add node = ['/a/Mul_1_output_0_expand', '/a/Unsqueeze_1_output_0_tp_expand', '/a/MatMul_1_2sdpa']\n"
           "D fuse_ops done.\n")
    nodes = [{"name": "/a/MatMul", "op_type": "MatMul", "inputs": ["q", "/a/Mul_1_output_0"], "outputs": ["s"]},
             {"name": "/a/Softmax", "op_type": "Softmax", "inputs": ["s"], "outputs": ["p"]},
             {"name": "/a/MatMul_1", "op_type": "MatMul", "inputs": ["p", "/a/Unsqueeze_1_output_0"],
              "outputs": ["o"]}]
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(1, "Expand", "CPU", "Expand:/a/Mul_1_output_0_expand"),
        _row(2, "Expand", "CPU", "Expand:/a/Unsqueeze_1_output_0_tp_expand"),
        _row(3, "exSDPAttention", "NPU", "exSDPAttention:/a/MatMul_1_2sdpa")])
    lineage = rknn.rewrite_lineage(log)
    attr = rknn.attribute_rows(res, nodes, lineage)
    assert attr["/a/MatMul"] == {"cpu_rewrites": ["Expand:/a/Mul_1_output_0_expand"]}
    assert "/a/Softmax" not in attr
    assert attr["/a/MatMul_1"]["cpu_rewrites"] == ["Expand:/a/Unsqueeze_1_output_0_tp_expand"]
    assert rknn.onnx_placement(res, nodes, lineage) == {"/a/MatMul": "cpu", "/a/Softmax": "npu", "/a/MatMul_1": "npu"}


def test_reshapes_moved_behind_a_concat_count_on_the_reshapes_not_on_the_concat():
    """torchvision's RAFT correlation lookup: four ``Reshape (256, 1, 7, 7) -> (1, 16, 16, 49)`` read by one
    Concat. reduce_reshape_op_around_concat concatenates first and runs one CPU Reshape named after the
    Concat's output (``<concat>_output_0-rs``); the Concat keeps its NPU row. The CPU Reshape is the four
    Reshapes' work; without a row of its own named after it, a Reshape merged elsewhere stays as it was."""
    log = ("D fuse_ops results:\n"
           "D     reduce_reshape_op_around_concat: remove node = ['/r/Reshape_5', '/r/Reshape_6', '/r/Concat_6'], "
           "add node = ['/r/Concat_6', '/r/Concat_6_output_0-rs']\nD fuse_ops done.\n")
    nodes = [{"name": "/r/Reshape_5", "op_type": "Reshape", "inputs": ["a", "s"], "outputs": ["/r/Reshape_5_output_0"]},
             {"name": "/r/Reshape_6", "op_type": "Reshape", "inputs": ["b", "s"], "outputs": ["/r/Reshape_6_output_0"]},
             {"name": "/r/Concat_6", "op_type": "Concat", "inputs": ["/r/Reshape_5_output_0", "/r/Reshape_6_output_0"],
              "outputs": ["/r/Concat_6_output_0"]}]
    lineage = rknn.rewrite_lineage(log)
    for target, want in (("CPU", "cpu"), ("NPU", "npu")):
        res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
            _row(1, "Concat", "NPU", "Concat:/r/Concat_6"),
            _row(2, "Reshape", target, "Reshape:/r/Concat_6_output_0-rs")])
        attr = rknn.attribute_rows(res, nodes, lineage)
        assert attr["/r/Concat_6"] == {"npu": ["Concat:/r/Concat_6"]}
        assert rknn.onnx_placement(res, nodes, lineage) == {
            "/r/Reshape_5": want, "/r/Reshape_6": want, "/r/Concat_6": "npu"}
    # the Concat without a row of its own: the Reshape row named after its output stays the Concat's
    res = rknn.RknnResult(key="k", path="m.onnx", status="ok", rows=[
        _row(2, "Reshape", "CPU", "Reshape:/r/Concat_6_output_0-rs")])
    assert "/r/Reshape_5" not in rknn.attribute_rows(res, nodes, lineage)


def _summary_with_classes(disagreements_per_model):
    """A summary over one scored record per model, each with the given disagreements."""
    recs = [{"arch": arch, "exporter": "torchscript", "toolchain": "rknn", "target": "rknn@2.5.0/rk3588",
             "status": "ok", "built": True, "static_verdict": "cpu", "nodes": len(dis), "tp": 0, "fp": len(dis),
             "fn": 0, "tn": 0, "disagreements": dis} for arch, dis in disagreements_per_model.items()]
    return zoo_score.summarise(recs, {})


def test_a_class_counts_every_model_it_occurs_in_not_only_its_examples():
    alarm = {"op_type": "Slice", "direction": "false_alarm", "cause": "rule const_value_range"}
    summary = _summary_with_classes({f"m{i}": [{**alarm, "node": f"/s{j}"} for j in range(2)] for i in range(5)})
    [c] = summary["targets"]["rknn@2.5.0/rk3588"]["classes"]
    assert (c["nodes"], c["models"], len(c["examples"])) == (10, 5, 3)


def test_new_classes_are_those_the_document_does_not_list():
    doc = ("Top disagreement classes, rknn@2.5.0/rk3588 (nodes; direction, op, cause):\n\n"
           "- 76 x false_alarm Slice: rule const_value_range (e.g. a.torchscript:/s, a.torchscript:/s_1)\n"
           "- 4 x missed_fallback Div: cpu row Div (e.g. hf_convnextv2.torchscript:/grn/Div)\n")
    known = zoo_score.known_classes(doc)
    assert known == {("false_alarm", "Slice", "rule const_value_range"), ("missed_fallback", "Div", "cpu row Div")}
    summary = _summary_with_classes({
        "a": [{"node": "/s", "op_type": "Slice", "direction": "false_alarm", "cause": "rule const_value_range"}],
        "b": [{"node": "/e", "op_type": "Expand", "direction": "missed_fallback", "cause": "cpu row Expand|Cast"}]})
    text = "\n".join(zoo_score.new_classes_markdown(summary, known))
    assert "| 1 | 1 | missed_fallback | Expand | cpu row Expand\\|Cast | `b.torchscript:/e` |" in text
    assert "Slice" not in text
    assert "Rejections" not in text  # none in the summary
    # the summary's own Markdown lists its classes in the form known_classes reads back
    assert zoo_score.known_classes("\n".join(zoo_score.markdown(summary))) == {
        ("false_alarm", "Slice", "rule const_value_range"), ("missed_fallback", "Expand", "cpu row Expand|Cast")}


# rknn-toolkit2 2.5.0's build log of a LayerNorm over (C, H, W) after a Conv (TorchScript), cut: the
# rule that raises shows nodes an earlier rewrite created, not the ONNX LayerNormalization
SWAP_RESHAPE_NORM_LOG = """D fuse_ops results:
D     convert_layernorm_to_exnorm: remove node = ['/n1/LayerNormalization'], add node = ['/c1/Conv_output_0_tp', '/c1/Conv_output_0_tp_rs', '/n1/LayerNormalization#1', '/n1/LayerNormalization#1_rs', '/n1/LayerNormalization#1_rs_tp']
D     bypass_rs_exnorm_rs: remove node = ['/n1/LayerNormalization#1'], add node = ['/n1/LayerNormalization#1']
D     fuse_transpose_reshape: remove node = ['/c1/Conv_output_0_tp']
W build: Show op fuse match nodes:
Rule: swap_reshape_norm
Subgraph:
Op type: Reshape
Op name: /c1/Conv_output_0_tp_rs
  Input:
    /c1/Conv_output_0 : [1, 16, 16, 16]
 
Op type: exNorm
Op name: /n1/LayerNormalization#1
  Input:
    /c1/Conv_output_0_tp_rs : [1, 256, 1, 16]

W You can add disable_rules=['swap_reshape_norm'] in rknn.config() to temporarily disable the error rule!

E build: Traceback (most recent call last):
  File "rknn/api/rules/swap.py", line 294, in rknn.api.rules.swap._swap_reshape_norm
ValueError: cannot reshape array of size 4096 into shape (1,16,16,1)
"""


def test_a_raising_rknn_rule_names_the_onnx_node_its_rewritten_ops_stand_for(save):
    g = _graph(save, [helper.make_node("Conv", ["x", "w"], ["/c1/Conv_output_0"], name="/c1/Conv"),
                      helper.make_node("LayerNormalization", ["/c1/Conv_output_0", "g", "b"], ["y"],
                                       name="/n1/LayerNormalization", axis=1)],
               [("x", [1, 3, 16, 16])], [const("w", [[[[0.5]] * 3]] * 16),
                                         const("g", [[[0.5] * 16] * 16] * 16), const("b", [[[0.1] * 16] * 16] * 16)])
    pid, nodes, text = zoo_score.explain_rejection("rknn", g, "ValueError: cannot reshape array", SWAP_RESHAPE_NORM_LOG)
    assert (pid, nodes) == ("rknn_rule:swap_reshape_norm", ["/n1/LayerNormalization"])
    assert "Reshape" in text
    # a rule trace without a traceback after it is a warning, not the failure
    warning_only = SWAP_RESHAPE_NORM_LOG.split("E build: Traceback")[0]
    assert zoo_score.explain_rejection("rknn", g, "died", warning_only)[0] == "unexplained"


def test_new_rejections_are_those_the_document_does_not_list(save):
    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    path = save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", [1, 4])], ["y"]))
    real = {"exporter": "torchscript", "toolchain": "rknn", "status": "crashed", "message": "rknn worker died"}
    recs = [zoo_score.score_model(path, table, {**real, "arch": "a"}),
            zoo_score.score_model(path, table, {**real, "arch": "b", "status": "build_failed", "message": "boom"})]
    summary = zoo_score.summarise(recs, {})
    doc = "- 1 x crashed unexplained: rknn worker died (e.g. x.torchscript)\n"
    text = "\n".join(zoo_score.new_classes_markdown(summary, set(), doc))
    assert "- 1 x build_failed unexplained: boom (e.g. b.torchscript)" in text
    assert "x crashed" not in text


def test_an_empty_tensor_rknn_calls_abnormal_names_its_producer(save):
    # value written, as TorchScript writes it (without it the load fails first: constant_of_shape_default_value)
    g = _graph(save, [helper.make_node("ConstantOfShape", ["shape"], ["/m/ConstantOfShape_output_0"],
                                       name="/m/ConstantOfShape", value=helper.make_tensor("v", 1, [1], [0.0])),
                      helper.make_node("Concat", ["x", "/m/ConstantOfShape_output_0"], ["y"], name="/m/Concat", axis=1)],
               [("x", [1, 4, 32]), ("shape", [3])])
    message = "build: The shape of '/m/ConstantOfShape_output_0' is (1, 0, 32), it is abnormal!"
    pid, nodes, text = zoo_score.explain_rejection("rknn", g, message)
    assert (pid, nodes) == ("empty_tensor", ["/m/ConstantOfShape"]) and "(1, 0, 32)" in text
    # a shape without a zero-sized dimension is some other complaint
    assert zoo_score.explain_rejection("rknn", g, message.replace("(1, 0, 32)", "(1, 10, 32)"))[0] != "empty_tensor"


def test_a_compile_that_ran_out_of_time_is_neither_a_rejection_nor_scored(save):
    """A timeout is undecided (a slow build on a loaded machine), counted apart until a longer budget decides."""
    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    path = save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", [1, 4, 8, 8])], ["y"]))
    ok = zoo_score.score_model(path, table, {"arch": "a", "exporter": "dynamo", "toolchain": "rknn", "status": "ok",
                                             "rows": [{"op_type": "Relu", "target": "NPU", "full_name": "Relu:relu"}]})
    slow = zoo_score.score_model(path, table, {"arch": "b", "exporter": "torchscript", "toolchain": "rknn",
                                               "status": "timeout", "message": "no result after 300 s"})
    died = zoo_score.score_model(path, table, {"arch": "c", "exporter": "dynamo", "toolchain": "rknn",
                                               "status": "crashed", "message": "died"})
    t = zoo_score.summarise([ok, slow, died], {})["targets"]["rknn@2.5.0/rk3588"]
    assert (t["all"]["files"], t["all"]["built"], t["all"]["rejected"], t["all"]["timed_out"]) == (3, 1, 1, 1)
    assert [r["status"] for r in t["rejections"]] == ["crashed"]
    assert t["timed_out"] == ["b.torchscript"]
    text = "\n".join(zoo_score.markdown(zoo_score.summarise([ok, slow, died], {})))
    assert "ran out of their time budget and no hang pattern explains (1; not scored, not rejections" in text
    assert "b.torchscript" in text


def test_a_qnn_node_in_no_partition_that_a_cpu_helper_replaced_scores_as_a_cpu_fallback(save):
    # an onnxruntime-qnn record written before the adapter paired such nodes with their helper: the
    # Conformer module's second Transpose on a data-dependent length is in no partition and a new
    # Transpose runs on the CPU (probe q.Transpose.ctx=cpu_island.conv_module.datadep); the static
    # verdict (CPU: its shape depends on a NonZero) is a hit, not a false alarm
    from pytest_npucheck.probe.models_cpu_transposes import _conv_module

    path = save(_conv_module(True).build())
    table = Catalog.discover().table("qnn@2.51.0/htp-v73")
    raw = {"pre_sum": "npu", "pre_mask": "npu", "pre_nonzero": "cpu", "pre_rows": "cpu", "pre_gather": "cpu",
           "focus_transpose_in": "cpu", "focus_conv": "cpu", "focus_act": "cpu", "focus_conv2": "cpu",
           "focus_transpose_out": "removed", "post_residual": "cpu"}
    real = {"arch": "a", "exporter": "torchscript", "toolchain": "qnn", "status": "ok", "raw_placement": raw,
            "placement": {k: "cpu" if v == "cpu" else "npu" for k, v in raw.items()},
            "helpers": {"CPUExecutionProvider": ["Transpose:Transpose"]}}
    rec = zoo_score.score_model(path, table, real)
    assert (rec["fp"], rec["fn"]) == (0, 0), rec["disagreements"]
    # without the helper the removed node runs nowhere: the CPU verdict is a false alarm
    rec = zoo_score.score_model(path, table, {**real, "helpers": {}})
    assert [(d["node"], d["direction"]) for d in rec["disagreements"]] == [("focus_transpose_out", "false_alarm")]


def test_a_timeout_a_hang_pattern_explains_is_a_rejection_the_static_check_predicts(save):
    """rknn-toolkit2 2.5.0 never returns from build() on one padding mask feeding two different chains
    (probe family x.And.ctx=mask_chains): such a timeout is a rejection, with its And nodes, and
    predicted (the table's mask_cast_one_chain rule calls the model unsupported); a timeout no hang
    pattern explains stays undecided, and a build error is never put down to a hang."""
    from unit.test_rules_context import mask_chains_model

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    two = save(mask_chains_model("cross"))
    one = save(mask_chains_model("none"))
    real = {"exporter": "torchscript", "toolchain": "rknn", "status": "timeout",
            "message": "rknn build did not finish within 600 s"}
    hang = zoo_score.score_model(two, table, {**real, "arch": "seq2seq"})
    slow = zoo_score.score_model(one, table, {**real, "arch": "encoder"})
    failed = zoo_score.score_model(two, table, {**real, "arch": "other", "status": "build_failed", "message": "boom"})
    rj = hang["rejection"]
    assert (rj["pattern"], rj["hang"], rj["static_predicts_rejection"], rj["static_marks_node"]) == (
        "mask_cast_two_chains", True, True, True)
    assert set(rj["nodes"]) == {"enc_and", "dec_and"}
    assert slow["rejection"]["hang"] is False and slow["static_verdict"] != "unsupported"
    assert failed["rejection"]["pattern"] != "mask_cast_two_chains"
    t = zoo_score.summarise([hang, slow, failed], {})["targets"]["rknn@2.5.0/rk3588"]
    assert (t["all"]["rejected"], t["all"]["rejections_predicted"], t["all"]["timed_out"]) == (2, 2, 1)
    assert t["timed_out"] == ["encoder.torchscript"]
    assert ("timeout", "mask_cast_two_chains") in {(r["status"], r["pattern"]) for r in t["rejections"]}


def test_a_constant_of_shape_without_its_value_explains_rknns_load_failure(save):
    def model(value: bool):
        attrs = {"value": helper.make_tensor("v", 1, [1], [0.0])} if value else {}
        return _graph(save, [helper.make_node("Shape", ["x"], ["s"], name="shape"),
                             helper.make_node("ConstantOfShape", ["s"], ["z"], name="node_ConstantOfShape_1", **attrs),
                             helper.make_node("Add", ["x", "z"], ["y"], name="add")], [("x", [1, 4, 8])])

    message = "'numpy.ndarray' object has no attribute 'data_type'"
    pid, nodes, text = zoo_score.explain_rejection("rknn", model(False), message)
    assert (pid, nodes) == ("constant_of_shape_default_value", ["node_ConstantOfShape_1"]) and "load_onnx" in text
    # the value written out (the TorchScript form): not the pattern
    assert zoo_score.explain_rejection("rknn", model(True), message)[0] == "unexplained"
    assert zoo_score.explain_rejection("qnn", model(False), message)[0] == "unexplained"


def test_a_keyerror_on_a_tensor_names_the_node_that_makes_or_reads_it(save):
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                             [helper.make_tensor_value_info("t", 1, [1, 4])])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                              [helper.make_tensor_value_info("e", 1, [1, 4])])
    g = _graph(save, [helper.make_node("If", ["onnx::If_7"], ["i"], name="/m/If", then_branch=then, else_branch=other),
                      helper.make_node("Relu", ["i"], ["r"], name="/m/Relu"),
                      helper.make_node("Add", ["r", "x"], ["y"], name="/m/Add")],
               [("x", [1, 4])], [const("onnx::If_7", np.array(True))])
    # an initializer the compiler lost: the nodes that read it
    assert zoo_score.explain_rejection("rknn", g, "'onnx::If_7'")[:2] == ("tensor_in_message:If", ["/m/If"])
    # a node output: the node that made it
    assert zoo_score.explain_rejection("rknn", g, "'r'")[:2] == ("tensor_in_message:Relu", ["/m/Relu"])
    # a quoted name the graph does not have, or a longer message quoting one: not this
    assert zoo_score.explain_rejection("rknn", g, "'nowhere'")[0] == "unexplained"
    assert zoo_score.explain_rejection("rknn", g, "cannot find 'r' in the map")[0] == "unexplained"
