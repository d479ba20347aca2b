"""Issue 22's table corrections, each pinned on a small ONNX model through the bundled tables (static
verdicts; the oracle twins in tests/oracle/test_oracle_table_corrections.py compile the same models).

The models are the probe families' own builders (pytest_npucheck/probe/models_attention_limits.py,
models_gather_index.py): the recorded toolchain results of exactly these graphs are the evidence of
each erratum.
"""

from __future__ import annotations

import json

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.tables import Catalog, bundled_tables_dir

from .recorded import rknn_extra_records

RKNN = "rknn@2.5.0/rk3588"
QNN_TARGETS = ["qnn@2.51.0/htp-v73", "qnn@2.51.0/htp-v68"]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


def verdicts(catalog: Catalog, target: str, gb) -> dict[str, tuple[str, str]]:
    res = match(facts_from_model(gb.build()), catalog.table(target))
    return {n.name: (n.verdict, "; ".join(r.message for r in n.reasons)) for n in res.nodes}


# -- RKNN 2.5.0 / rk3588: the Softmax size limit -----------------------------------------------

@pytest.mark.parametrize("form,heads,tokens,want", [
    ("scores", 1, 257, "npu"),      # q @ k^T -> Softmax: 66,049 elements, on the NPU
    ("scores", 1, 302, "npu"),
    ("sdpa", 4, 302, "npu"),        # MatMul -> scale -> Softmax -> MatMul
    ("sdpa", 1, 1024, "npu"),
    ("alone", 1, 257, "cpu"),       # a Softmax of a graph input keeps the limit
    ("sdpa_mask", 4, 302, "cpu"),   # ... and of a masked Add
    ("sdpa", 1, 256, "npu"),
])
def test_rknn_softmax_limit_applies_only_off_the_scores_matmul(catalog, form, heads, tokens, want):
    from pytest_npucheck.probe.models_attention_limits import _softmax_attention

    verdict, why = verdicts(catalog, RKNN, _softmax_attention(form, heads, tokens))["focus_softmax"]
    assert verdict == want, why
    if want == "cpu":
        assert f"{tokens * tokens} elements over axes [2, 3] > 65536" in why
        assert "is not computed by MatMul" in why or "is computed by Add" in why or "graph input" in why


# -- RKNN 2.5.0 / rk3588: a broadcast mask Where straight into a Softmax -----------------------

@pytest.mark.parametrize("kw,want", [
    ({}, "unsupported"),                                             # int64 -> bool -> Reshape -> Where -> Softmax
    ({"src": "bool", "layout": "input"}, "unsupported"),             # a (1, 1, 1, T) bool input
    ({"src": "float32", "to": "greater"}, "unsupported"),            # no integer anywhere
    ({"src": "bool", "layout": "none", "use": "where_full"}, "npu"),  # (1, 1, T, T): built
    ({"src": "bool", "use": "where_relu"}, "npu"),                   # read by a Relu: built
    ({"src": "bool", "use": "where_add"}, "npu"),                    # Where(m, 0, -big) + scores: built
])
def test_rknn_broadcast_mask_where_into_softmax_is_rejected(catalog, kw, want):
    from pytest_npucheck.probe.models_attention_limits import _mask_path

    verdict, why = verdicts(catalog, RKNN, _mask_path(**kw))["post_where"]
    assert verdict == want, why
    if want == "unsupported":
        assert "its result feeds Softmax 'post_softmax'" in why and "dim 2 is 1" in why


# -- RKNN 2.5.0 / rk3588: the multi-query K/V repeat between two MatMuls, batch-axis Expands -------

@pytest.mark.parametrize("kw,want", [
    ({}, "cpu"),                                   # kv=1, shape with ones (dynamo's repeat_interleave)
    ({"shape": "full"}, "cpu"),
    ({"rank": 4}, "cpu"),
    ({"pre": "heads"}, "cpu"),                     # (1, T, d) projection viewed and transposed to heads
    ({"post": "transpose_mul"}, "cpu"),            # k^T scaled before q @ k^T
    ({"kv": 2}, "npu"),                            # grouped-query attention with two K/V heads
    ({"pre": "none"}, "npu"),                      # no MatMul before
    ({"post": "none"}, "npu"),                     # no MatMul after
])
def test_rknn_mqa_repeat_between_matmuls(catalog, kw, want):
    from pytest_npucheck.probe.models_attention_limits import _repeat_between

    verdict, why = verdicts(catalog, RKNN, _repeat_between(**kw))["focus_expand"]
    assert verdict == want, why
    if want == "cpu":
        assert "is computed by" in why and "feeds" in why and "dim 1 is 1" in why


@pytest.mark.parametrize("src,shape,want", [
    ([1, 8, 8], [4, 1, 1], "cpu"),        # axis 0 expanded, rank 3
    ([1, 8, 16, 16], [2, 8, 16, 16], "cpu"),
    ([1, 32], [16, 32], "npu"),           # rank 2: on the NPU
    ([2, 1, 1, 8, 8], [2, 1, 4, 8, 8], "npu"),  # axis 0 already 2: not expanded
])
def test_rknn_batch_axis_expand(catalog, src, shape, want):
    from pytest_npucheck.probe.models import GraphBuilder

    gb = GraphBuilder(17)
    y = gb.node("Relu", [gb.input("x", "float32", src)], name="pre")
    gb.output(gb.node("Relu", [gb.node("Expand", [y, gb.ints(shape)], name="focus_expand")], name="post"))
    verdict, why = verdicts(catalog, RKNN, gb)["focus_expand"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: GRN's Div into a MatMul -----------------------------------------------

@pytest.mark.parametrize("kw,want", [
    ({"src": "linear", "tail": "linear", "c": 128}, "cpu"),   # ConvNeXt-V2: GRN between pwconv1 and pwconv2
    ({"src": "linear", "tail": "linear", "norm": "powsum"}, "cpu"),
    ({"tail": "linear"}, "cpu"),
    ({"src": "linear", "c": 128}, "npu"),                     # GRN ending in a Relu
    ({"src": "linear", "tail": "linear", "norm": "none"}, "npu"),  # x / mean(x) of the whole tensor
    ({"c": 16, "hw": 32, "tail": "nchw"}, "cpu"),             # nn_grn: transposed back to channels first
    ({"c": 16, "hw": 32}, "npu"),                             # the same sizes ending in a Relu
])
def test_rknn_grn_div_into_a_matmul(catalog, kw, want):
    from pytest_npucheck.probe.models_norm_limits import _norm_div

    verdict, why = verdicts(catalog, RKNN, _norm_div(**kw))["focus_div"]
    assert verdict == want, why
    if want == "cpu":
        assert "feeds" in why and ("MatMul 'post_pw2'" in why or "Transpose 'post_nchw'" in why)


# -- RKNN 2.5.0 / rk3588: the Reshape the compiler swaps in front of an integer mask op -----------

@pytest.mark.parametrize("kw,node,want", [
    ({"use": "expand_where"}, "focus_reshape", "cpu"),                          # int64 -> bool -> Reshape
    ({"to": "float32", "use": "add", "layout": "unsqueeze"}, "focus_reshape", "cpu"),  # -> float -> Unsqueeze
    ({"src": "int32", "use": "expand_where"}, "focus_reshape", "cpu"),
    ({"src": "bool", "to": "float32", "use": "add"}, "focus_reshape", "npu"),  # bool -> float: no swap
])
def test_rknn_mask_reshape_behind_an_integer_cast(catalog, kw, node, want):
    from pytest_npucheck.probe.models_attention_limits import _mask_path

    verdict, why = verdicts(catalog, RKNN, _mask_path(**kw))[node]
    assert verdict == want, why
    if want == "cpu":
        assert "input 0 is computed by Cast 'focus_cast', which the compiler runs on the CPU" in why


@pytest.mark.parametrize("kw,cpu", [
    ({}, {"focus_reshape"}),                                               # Cast(bool) in front
    ({"maker": "equal"}, {"focus_reshape"}),                               # mask == 1 in front
    ({"flatten": False}, {"focus_reshape"}),                               # Gather -> Reshape -> Reshape
    ({"t": 40}, {"focus_reshape"}),
    ({"layout": "unsqueeze2"}, {"focus_reshape"}),                         # mask[:, None, None, :]
    ({"maker": "none"}, {"focus_reshape"}),                                # the chain on int64 data, Cast after
    ({"layout": "unsqueeze2", "maker": "none"}, {"focus_reshape"}),
    ({"src": "bool"}, set()),                                              # bool / float data: all on the NPU
    ({"src": "float32", "maker": "none"}, set()),
])
def test_rknn_mask_lookup_chain_lands_on_its_last_op(catalog, kw, cpu):
    """TorchScript's padding-mask lookup (mask -> [Cast bool] -> Flatten -> Gather -> Reshape -> Reshape) and
    its variants (x.Reshape.ctx=mask_lookup.*): RKNN merges the layout chain into one Reshape named after its
    last op, on the CPU when the data is integer (behind an integer Cast/Equal or without one); the ops
    merged into it run nowhere of their own. The table puts the CPU verdict on the chain's last op only."""
    from pytest_npucheck.probe.models_attention_limits import _mask_lookup

    got = verdicts(catalog, RKNN, _mask_lookup(**kw))
    layout = {n for n in got if n.startswith("pre_") and n not in ("pre_cast",)} | {"focus_reshape"}
    assert {n for n in layout if got[n][0] == "cpu"} == cpu
    if "focus_reshape" in cpu:
        assert "is read by Cast 'post_cast'" in got["focus_reshape"][1]
    if kw.get("maker") == "none" and kw.get("src", "int64") == "int64":  # the int64 -> bool Cast after the chain
        assert got["post_cast"][0] == "cpu"


@pytest.mark.parametrize("args,want", [
    (("Unsqueeze", "input", "gather_idx"), "cpu"),   # the indices of an embedding Gather: Reshape INT64 CPU row
    (("Reshape", "input", "gather_idx"), "cpu"),
])
def test_rknn_int64_layout_op_outside_a_merged_chain_stays_cpu(catalog, args, want):
    """An int64 layout op read by another kind of op than a layout op it merges into, or read as another
    input than the data (an embedding Gather's indices), keeps the dtype rule (x.*.ctx=int_layout.*, run
    on the CPU by rknn-toolkit2 2.5.0)."""
    from pytest_npucheck.probe.models_int_layout import _int_layout

    assert verdicts(catalog, RKNN, _int_layout(*args))["focus_layout"][0] == want
    assert verdicts(catalog, RKNN, _int_layout(*args, dtype="float32"))["focus_layout"][0] == "npu"


@pytest.mark.parametrize("args", [
    ("Unsqueeze", "input", "cast_f32"), ("Unsqueeze", "input", "cast_bool"), ("Unsqueeze", "mul", "cast_f32"),
    ("Reshape", "input", "cast_f32"), ("Reshape", "mul", "cast_f32"), ("Squeeze", "input", "cast_f32"),
])
def test_rknn_int64_layout_op_read_by_a_cast_is_merged_into_its_relayout(catalog, args):
    """An int64 layout op of rank below 4 read only by a Cast leaves no layer row (x.*.ctx=int_layout.*.cast_*,
    rknn-toolkit2 2.5.0: RKNN merges it into the Cast's 4-D relayout of its input), whatever computes its data
    (a graph input, an int64 Mul); the Cast itself stays on the CPU. A rank-4 result is a Reshape of its own:
    test_rknn_mask_lookup_chain_lands_on_its_last_op (``unsqueeze2``)."""
    from pytest_npucheck.probe.models_int_layout import _int_layout

    got = verdicts(catalog, RKNN, _int_layout(*args))
    assert got["focus_layout"][0] == "npu"
    assert got["post_cast"][0] == "cpu"


def test_rknn_rows_folded_into_the_batch_match_every_recorded_probe(catalog):
    """models_batch_fold_reshape.py (rknn-toolkit2 2.5.0): (1, A, B, W) -> (A B, 1, 1, W) and (A, 1, B, W) ran on
    the NPU in all 24 probes (RAFT's coords per pixel, output plane 1 x W); the table predicts each, and a fold
    that changes the last dim is still judged by the planes."""
    from pytest_npucheck.probe.extra_families import build_extra_probes
    from pytest_npucheck.probe.models_batch_fold_reshape import _batch_fold

    recorded = _recorded_vision_heads("x.Reshape.ctx=batch_fold.")
    probes = build_extra_probes(["x.Reshape.ctx=batch_fold."])
    assert len(probes) == len(recorded) == 24 and set(recorded.values()) == {"npu"}
    for p in probes:
        node = next(n for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes if n.name == "focus_reshape")
        assert node.verdict == "npu", (p.id, [r.message for r in node.reasons])
    import numpy as np
    from onnx import numpy_helper

    gb = _batch_fold(7, 7, 2, "relu.relu", False)
    shape = next(i for i in gb.inits if list(i.dims) == [4])
    shape.CopyFrom(numpy_helper.from_array(np.array([49, 1, 2, 1], np.int64), shape.name))  # the last dim changed
    assert verdicts(catalog, RKNN, gb)["focus_reshape"][0] == "cpu"


def test_rknn_rank6_sums_viewed_back_as_rank4_match_the_recorded_probes(catalog):
    """models_rank6_merge.py (rknn-toolkit2 2.5.0): MViTv2's decomposed relative position bias, a rank-6 sum of two
    computed tensors viewed back as rank 4, ran on the CPU unless its (s, s) plane held a multiple of 8 elements;
    the table predicts each but two Relu-only views (CPU at s = 7, 5: self-check)."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_vision_heads("x.Reshape.ctx=rank6_merge.")
    probes = build_extra_probes(["x.Reshape.ctx=rank6_merge."])
    assert len(probes) == len(recorded) == 24
    got = {p.id: next(n.verdict for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes
                      if n.name == "focus_reshape") for p in probes}
    odd = {"x.Reshape.ctx=rank6_merge.relu.h=4.s=%d.f32.r6" % s for s in (7, 5)}
    assert all(recorded[k] == "cpu" and got[k] == "npu" for k in odd)
    assert {k: v for k, v in got.items() if k not in odd} == {k: v for k, v in recorded.items() if k not in odd}
    assert {recorded["x.Reshape.ctx=rank6_merge.relpos_in.h=4.s=%d.f32.r6" % s] for s in (14, 7, 6, 5)} == {"cpu"}
    assert {recorded["x.Reshape.ctx=rank6_merge.relpos_in.h=%d.s=%d.f32.r6" % hs] for hs in ((4, 8), (4, 4), (1, 16))} == {"npu"}


def test_rknn_mvitv2_rank5_relative_position_einsums_match_the_recorded_probes(catalog):
    """models_einsum_relpos5.py (rknn-toolkit2 2.5.0): MViTv2's 'byhwc,hkc->byhwk' and 'byhwc,wkc->byhwk' ran on the
    NPU at every size probed; the table predicts each."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_vision_heads("x.Einsum.ctx=relpos5.")
    probes = build_extra_probes(["x.Einsum.ctx=relpos5."])
    assert len(probes) == len(recorded) == 6 and set(recorded.values()) == {"npu"}
    for p in probes:
        node = next(n for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes if n.name == "focus_einsum")
        assert node.verdict == "npu", (p.id, [r.message for r in node.reasons])


def test_rknn_int64_layout_op_read_by_integer_cpu_ops_is_merged_into_their_relayout(catalog):
    """models_int_layout_readers.py (rknn-toolkit2 2.5.0): an int64 Unsqueeze/Reshape of rank below 4 read by an
    Expand, a TopK or a Div leaves no row of its own (JetMoE's router); the table reproduces every recorded probe,
    and read as an embedding Gather's indices the same op stays cpu."""
    from pytest_npucheck.probe.extra_families import build_extra_probes
    from pytest_npucheck.probe.models_int_layout import _int_layout

    recorded = _recorded_vision_heads("x.Unsqueeze.ctx=int_readers.") | _recorded_vision_heads("x.Reshape.ctx=int_readers.")
    probes = build_extra_probes(["x.Unsqueeze.ctx=int_readers.", "x.Reshape.ctx=int_readers."])
    assert len(probes) == len(recorded) == 20 and set(recorded.values()) == {"npu"}
    for p in probes:
        node = next(n for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes if n.name == "focus_layout")
        assert node.verdict == "npu", (p.id, [r.message for r in node.reasons])
    assert verdicts(catalog, RKNN, _int_layout("Unsqueeze", "input", "gather_idx"))["focus_layout"][0] == "cpu"


def test_rknn_mask_swap_needs_a_mask_cast_not_an_integer_one(catalog):
    """An int64 -> int64 Cast (rknn-toolkit2 removes it: remove_invalid_cast) in front of an Unsqueeze read by an
    int64 Expand is no mask Cast: the Unsqueeze passes; behind an int64 -> float Cast, read by a float Expand,
    the layout op is moved in front of the Cast onto int64 data, CPU (x.Reshape.ctx=mask_cast.*)."""
    from onnx import TensorProto, helper

    def model(to):
        nodes = [helper.make_node("Cast", ["ids"], ["c"], name="cast", to=to),
                 helper.make_node("Unsqueeze", ["c", "ax"], ["u"], name="unsq"),
                 helper.make_node("Expand", ["u", "shape"], ["y"], name="expand")]
        inits = [helper.make_tensor("ax", TensorProto.INT64, [1], [1]),
                 helper.make_tensor("shape", TensorProto.INT64, [2], [16, 32])]
        g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("ids", TensorProto.INT64, [16])],
                              [helper.make_tensor_value_info("y", to, [16, 32])], inits)
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])

    def unsq(to):
        return next(n for n in match(facts_from_model(model(to)), catalog.table(RKNN)).nodes if n.name == "unsq")

    assert unsq(TensorProto.INT64).verdict == "npu"
    assert unsq(TensorProto.FLOAT).verdict == "cpu"


@pytest.mark.parametrize("form,reader,want", [
    ("add0", "gather_idx", "folded"), ("add0", "cast_f32", "folded"), ("sub0", "cast_f32", "folded"),
    ("mul1", "cast_f32", "folded"), ("argmax_add0", "gather_rows", "folded"),   # CLIP's pooled-token index
    ("slice_all", "cast_f32", "folded"), ("slice_all", "gather_idx", "folded"),  # mask[:, -T:]
    ("add2", "cast_f32", "cpu"), ("slice_part", "cast_f32", "cpu"),               # real int64 work: CPU rows
    ("div1", "cast_f32", "cpu"),                                                   # RKNN keeps int64 x / 1
    ("sub1_add2", "gather_idx", "folded"), ("add1_add2", "gather_idx", "folded"),  # merged into the + 2 after it
    ("sub1_cast_add2", "gather_idx", "folded"),                                    # ... through an int64 Cast
    ("sub1_add2_shared", "gather_idx", "cpu"), ("sub1_mul2", "gather_idx", "cpu"), # a second reader, a Mul: kept
])
def test_rknn_integer_no_ops_are_removed(catalog, form, reader, want):
    """Integer index arithmetic that is a no-op leaves no layer row (x.*.ctx=int_arith.*, rknn-toolkit2 2.5.0):
    the table's pre-passes remove it, and merge a constant offset into the one after it; the same ops that change
    the data stay on the CPU."""
    from pytest_npucheck.probe.models_int_arith import _int_arith

    assert verdicts(catalog, RKNN, _int_arith(form, reader))["focus_op"][0] == want


@pytest.mark.parametrize("kw,want", [
    ({"src": "bool", "layout": "const"}, "unsupported"),          # a constant mask with both values: abort
    ({"src": "bool", "layout": "const", "use": "not_where"}, "unsupported"),
    ({"src": "bool", "layout": "const_false", "use": "where_big_first"}, "npu"),  # SEW-D's all-False mask
    ({"src": "bool", "layout": "const_true"}, "npu"),
])
def test_rknn_where_with_a_uniform_constant_mask_builds(catalog, kw, want):
    """x.Where.ctx=mask_cast.bool.bool.const*: rknn-toolkit2 2.5.0 aborts on a constant (B, 1, 1, T) mask into
    Where -> Softmax unless the mask has one value everywhere (then the Where is one of its branches)."""
    from pytest_npucheck.probe.models_attention_limits import _mask_path

    assert verdicts(catalog, RKNN, _mask_path(**kw))["post_where"][0] == want


@pytest.mark.parametrize("label", ["pegasus_x_qg", "pegasus_x_qk", "pegasus_x_pg", "pegasus_x_pv",
                                   "sam_rel_h", "sam_rel_w"])
def test_rknn_pegasus_x_and_sam_einsums_run_on_the_npu(catalog, label):
    """x.Einsum.ctx=letters.{pegasus_x,sam_rel}_*: compiled by rknn-toolkit2 2.5.0 with no CPU row."""
    from pytest_npucheck.probe.models_einsum_equations import EQUATIONS, _einsum

    [(eq, shapes)] = [(e, s) for lab, e, s in EQUATIONS if lab == label]
    assert verdicts(catalog, RKNN, _einsum(eq, shapes))["focus_einsum"][0] == "npu"


@pytest.mark.parametrize("label", [lab for lab, *_ in __import__(
    "pytest_npucheck.probe.models_norm_bias", fromlist=["NO_BIAS"]).NO_BIAS])
def test_rknn_layernorm_needs_its_epsilon_not_its_bias(catalog, label):
    """x.LayerNormalization.ctx=no_bias.*: rknn-toolkit2 2.5.0 builds a LayerNormalization without bias (OLMo,
    MPT, ModernBERT dynamo) and fails one that does not write epsilon, with or without bias."""
    from pytest_npucheck.probe.models_norm_bias import NO_BIAS, _no_bias

    [(opset, weight, bias)] = [(o, w, b) for lab, o, w, b in NO_BIAS if lab == label]
    at = label.split(".at=")[1] if ".at=" in label else ""
    got = verdicts(catalog, RKNN, _no_bias(opset, weight, bias, at=at, eps=".eps=default" not in label))
    assert got["focus_norm"][0] == ("unsupported" if ".eps=default" in label else "npu")


# -- RKNN 2.5.0 / rk3588: the stride-2 Slices of a space-to-depth ---------------------------------

@pytest.mark.parametrize("kw,want", [
    ({}, "npu"),                                                         # Swin's patch merging, channels last
    ({"form": "two_axis"}, "npu"),                                       # one two-axis Slice per quadrant
    ({"layout": "nchw", "src": "conv"}, "npu"),                          # YOLOv5's Focus, channels first
    ({"quads": ((0, 0), (0, 1), (1, 0), (1, 1))}, "cpu"),                # another quadrant order: not fused
    ({"quads": ((0, 0), (1, 0), (0, 1))}, "cpu"),                        # three quadrants
    ({"concat_axis": 1}, "cpu"),                                         # concatenated on a sliced-side axis
])
def test_rknn_space_to_depth_slices(catalog, kw, want):
    from pytest_npucheck.probe.models_space_to_depth import _space_to_depth

    got = verdicts(catalog, RKNN, _space_to_depth(**kw))
    rows = [name for name in got if name.startswith("focus_rows")] or [name for name in got if name.startswith("focus_q")]
    assert rows and all(got[name][0] == want for name in rows), got
    if want == "cpu":
        assert "not one quadrant of a space-to-depth" in got[rows[0]][1]


# -- RKNN 2.5.0 / rk3588: Einsum equations compared with their letters renamed --------------------

@pytest.mark.parametrize("label,want", [
    ("cvt_qk", "npu"), ("cvt_pv", "npu"), ("mm.caps", "npu"), ("proj.nchw", "npu"), ("contract2", "npu"),
    ("xlnet_qk", "npu"), ("xlnet_perm", "npu"), ("longt5_qk", "npu"),
    ("qk.spaces_inside", "cpu"), ("qk.spaces_around", "cpu"),
])
def test_rknn_einsum_letters_do_not_matter(catalog, label, want):
    from pytest_npucheck.probe.models_einsum_equations import EQUATIONS, _einsum

    eq, shapes = next((e, s) for name, e, s in EQUATIONS if name == label)
    verdict, why = verdicts(catalog, RKNN, _einsum(eq, shapes))["focus_einsum"]
    assert verdict == want, why
    if want == "cpu":
        assert "letters renamed" in why


# -- RKNN 2.5.0 / rk3588: a Tile that only broadcasts ------------------------------------------------

@pytest.mark.parametrize("label,want", [
    ("swiftformer.r3", "npu"), ("r2.axis0", "npu"), ("r5.axis2", "npu"),
    ("r3.ones", "folded"),     # repeats of ones: no layer row, removed with the no-op layout ops
    ("r3.axis0", "cpu"),       # a batch broadcast of rank 3: a CPU Expand
    ("r3.long_axis", "cpu"),   # an axis of size 4 repeated: a CPU Tile
    ("r3.mixed", "cpu"),
])
def test_rknn_tile_of_size_one_axes_is_a_broadcast(catalog, label, want):
    from pytest_npucheck.probe.models_tile_broadcast import TILES, _tile

    shape, repeats = next((s, r) for name, s, r in TILES if name == label)
    verdict, why = verdicts(catalog, RKNN, _tile(shape, repeats))["focus_tile"]
    assert verdict == want, why


@pytest.mark.parametrize("kv,want", [(1, "cpu"), (2, "npu")])
def test_rknn_mqa_repeat_written_as_a_tile(catalog, kv, want):
    from pytest_npucheck.probe.models_tile_broadcast import _tile_between

    verdict, why = verdicts(catalog, RKNN, _tile_between(kv))["focus_tile"]
    assert verdict == want, why


@pytest.mark.parametrize("kw,want", [
    ({}, "cpu"),                                   # MatMul -> Reshape -> Cast -> RMSNorm -> Cast -> Transpose -> rotary -> Cast
    ({"casts": False}, "cpu"),
    ({"norm": False, "casts": False}, "cpu"),
    ({"norm": False, "qkv": True, "partial": True}, "cpu"),  # Phi-3: fused q/k/v Slice, partial rotary Concat
    ({"kv": 2}, "npu"),                            # two K/V heads: on the NPU however long the path
    ({"norm": False, "qkv": True, "partial": True, "kv": 2}, "npu"),
    ({"norm": False, "rotary": False, "casts": False, "qkv": "split"}, "cpu"),  # GPT-BigCode's Split k/v projection
])
def test_rknn_mqa_repeat_behind_a_long_key_path(catalog, kw, want):
    from pytest_npucheck.probe.models_kv_repeat_paths import _kv_path

    verdict, why = verdicts(catalog, RKNN, _kv_path(**kw))["focus_expand"]
    if want == "npu" and verdict == "folded":  # two K/V heads over two query heads: a repeat of 1, no layer row
        assert "keeps its input's shape" in why   # (x.Expand.ctx=kv_path.*.kv=2: removed, eliminate_noop_layout)
        return
    assert verdict == want, why
    if want == "cpu":
        assert "MatMul 'pre_proj'" in why


# -- QNN 2.51.0: GatherND by data dtype and index rank ------------------------------------------

@pytest.mark.parametrize("target", QNN_TARGETS)
@pytest.mark.parametrize("kw,want,says", [
    ({}, "cpu", "dtype bool"),                                        # the dynamo padding-mask lookup
    ({"lead": []}, "cpu", "dtype bool"),                              # bool data, rank-2 indices
    ({"dtype": "float32"}, "cpu", "has rank 5"),                      # rank-5 indices
    ({"dtype": "float32", "lead": [1, 1]}, "npu", ""),                # rank-4 indices
    ({"dtype": "int64"}, "unsupported", "has rank 5"),                # the session fails to finalize
    ({"dtype": "int64", "lead": [1, 1]}, "npu", ""),
])
def test_qnn_gathernd_by_dtype_and_index_rank(catalog, target, kw, want, says):
    from pytest_npucheck.probe.models_gather_index import _gathernd

    gb, _ = _gathernd(**kw)
    verdict, why = verdicts(catalog, target, gb)["focus_gathernd"]
    assert verdict == want, why
    assert says in why


# -- the revision and errata records -------------------------------------------------------------

@pytest.mark.parametrize("rel,ops", [
    ("rknn/2.5.0/rk3588.json", {"ai.onnx:Softmax", "ai.onnx:Where", "ai.onnx:Expand", "ai.onnx:Div",
                                "ai.onnx:Reshape", "ai.onnx:Unsqueeze", "ai.onnx:Flatten", "ai.onnx:Slice",
                                "ai.onnx:Einsum", "ai.onnx:Transpose", "ai.onnx:Tile", "ai.onnx:And",
                                "ai.onnx:ConstantOfShape", "ai.onnx:Cast", "ai.onnx:Add", "ai.onnx:Sub",
                                "ai.onnx:Gemm"}),
    ("qnn/2.51.0/htp-v73.json", {"ai.onnx:GatherND"}),
    ("qnn/2.51.0/htp-v68.json", {"ai.onnx:GatherND"}),
])
def test_corrected_tables_are_revision_2_with_errata(rel, ops):
    doc = json.loads((bundled_tables_dir() / rel).read_text(encoding="utf-8"))
    assert doc["revision"] == 2
    assert ops <= {op for rec in doc["errata"] for op in rec["ops"]}
    for rec in doc["errata"]:
        assert rec["revision"] == 2 and rec["change"] and rec["evidence"]
        assert all(op in doc["ops"] for op in rec["ops"])
    # each of these corrections names the probe family that shows it
    assert all(any("probe famil" in rec["evidence"] for rec in doc["errata"] if op in rec["ops"]) for op in ops)


@pytest.mark.parametrize("rel", ["qnn/2.49.40/htp-v73.json", "rknn/2.5.0/rk3576.json", "rknn/2.3.2/rk3588.json"])
def test_tables_not_probed_again_stay_revision_1(rel):
    doc = json.loads((bundled_tables_dir() / rel).read_text(encoding="utf-8"))
    assert doc.get("revision", 1) == 1 and not doc.get("errata")


# -- RKNN 2.5.0 / rk3588: predicted rejections (issue 22 item 4) -----------------------------------

@pytest.mark.parametrize("shape,axis,want", [
    ([1, 16, 16, 16], 1, "unsupported"),  # nn_layernorm_chw: LayerNorm([C, H, W]) after a Conv
    ([1, 8, 16, 16], -3, "unsupported"),
    ([1, 4, 24, 4], 1, "unsupported"),    # H a multiple of 8
    ([1, 1, 4, 4], 1, "unsupported"),     # one channel: another rewrite fails
    ([1, 8, 8, 8], 0, "unsupported"),     # all four axes, batch 1
    ([1, 4, 12, 4], 1, "npu"),            # H not a multiple of 8
    ([1, 8, 16, 1], 1, "npu"),            # W = 1
    ([2, 16, 16, 16], 1, "npu"),          # batch 2
    ([1, 8, 32, 32], 2, "npu"),           # over (H, W)
    ([1, 8, 8, 16, 16], 1, "npu"),        # rank 5
])
def test_rknn_layernorm_over_channels_and_space(catalog, shape, axis, want):
    from pytest_npucheck.probe.models_rejections import _layernorm_axes

    v = verdicts(catalog, RKNN, _layernorm_axes(shape, axis))
    assert v["focus_ln"][0] == want, v["focus_ln"]
    if want == "unsupported":
        assert "the compiler rejects the model" in v["focus_ln"][1]


@pytest.mark.parametrize("kw,want", [
    ({}, "unsupported"),                                    # BiT: folded (a constant weight), still refused
    ({"src": "conv"}, "unsupported"),                       # fused into the Conv, still refused
    ({"outputs": 1, "src": "conv", "training": 0}, "folded"),
    ({"outputs": 1, "training": 0}, "folded"),
])
def test_rknn_batchnorm_training_mode_is_refused_even_when_folded(catalog, kw, want):
    from pytest_npucheck.probe.models_rejections import _bn_training

    v = verdicts(catalog, RKNN, _bn_training(**kw))
    assert v["focus_bn"][0] == want, v["focus_bn"]
    if want == "unsupported":
        assert "training_mode=1" in v["focus_bn"][1]


@pytest.mark.parametrize("kw,want", [
    ({}, "unsupported"),                                    # DETR's decoder cross-attention
    ({"mask": "none"}, "unsupported"),                      # the sdpa_mul pattern would fuse it
    ({"mask": "none", "scale": False}, "unsupported"),
    ({"n": 1, "mask": "none"}, "unsupported"),              # AIMv2's attention pooling
    ({"q": "proj_const"}, "unsupported"),                   # the projection of a constant is folded
    ({"q": "input"}, "npu"),
    ({"q": "input", "n": 1, "mask": "none"}, "npu"),
    ({"q": "const_plus_input"}, "npu"),
    ({"kv": "const"}, "folded"),                           # constant keys too: the whole attention folds
])
def test_rknn_attention_with_constant_queries_is_rejected(catalog, kw, want):
    from pytest_npucheck.probe.models_rejections import _const_query_attention

    gb = _const_query_attention(**kw)
    res = match(facts_from_model(gb.build()), catalog.table(RKNN))
    node = next(n for n in res.nodes if n.name == "focus_scores")
    assert node.verdict == want, [r.message for r in node.reasons]
    assert (res.verdict == "unsupported") == (want == "unsupported")


@pytest.mark.parametrize("perm,shape,want", [
    ([3, 0, 4, 2, 1, 5], [1, 64, 49, 3, 1, 32], "npu"),   # Hiera's q/k/v split: 4 blocks once size-1 axes go
    ([3, 0, 4, 2, 1, 5], [2, 4, 6, 3, 2, 8], "cpu"),      # the same perm over six non-1 axes: 6 blocks
    ([2, 3, 0, 1, 4, 5], [2, 3, 4, 5, 6, 8], "npu"),      # 3 blocks
    ([0, 1, 3, 2, 5, 4], [1, 4, 4, 4, 4, 32], "cpu"),     # two swaps: 5 blocks
    ([0, 1, 3, 2, 5, 4], [1, 1, 4, 4, 4, 32], "npu"),     # the same with one more size-1 axis: 4
])
def test_rknn_rank6_transpose_by_blocks_moved(catalog, perm, shape, want):
    from onnx import TensorProto, helper

    from pytest_npucheck.graph import facts_from_model

    g = helper.make_graph([helper.make_node("Transpose", ["x"], ["y"], name="t", perm=perm)], "t",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    res = match(facts_from_model(model), catalog.table(RKNN))
    assert {n.name: n.verdict for n in res.nodes}["t"] == want


@pytest.mark.parametrize("kw,want", [
    ({"data": "float"}, "npu"),                      # in order: the Reshape it becomes, on the NPU
    ({"data": "float", "rows": 2}, "npu"),
    ({"data": "float", "order": "reversed"}, "cpu"),  # a real lookup: a CPU GatherND
    ({"data": "float", "order": "repeat"}, "cpu"),
    ({}, "cpu"),                                      # the dynamo padding mask behind an int64 Cast: the mask swap
    ({"order": "reversed"}, "cpu"),
])
def test_rknn_gathernd_in_order_is_a_reshape(catalog, kw, want):
    from pytest_npucheck.probe.models_gathernd_reshape import _lookup

    v = verdicts(catalog, RKNN, _lookup(**kw))
    assert v["focus_gathernd"][0] == want, v["focus_gathernd"]


@pytest.mark.parametrize("kw,want", [
    ({}, "unsupported"),                       # GPT-1's Gemm -> Reshape -> Split -> attention
    ({"h": 1}, "unsupported"),
    ({"mask": True}, "unsupported"),           # with GPT-1's causal mask
    ({"pre": "layernorm"}, "unsupported"),
    ({"softmax_cast": True}, "npu"),           # GPT-2: a float Cast between the Softmax and the value MatMul
    ({"softmax_cast": True, "mask": True}, "npu"),
    ({"scores_cast": True}, "npu"),            # a Cast before the Softmax also keeps the rewrite from matching
    ({"proj": "matmul"}, "npu"),
    ({"proj": "input"}, "npu"),
    ({"attn": False}, "npu"),
])
def test_rknn_qkv_split_of_a_reshaped_gemm_is_rejected_unless_a_cast_breaks_the_attention(catalog, kw, want):
    """GPT-1's fused q/k/v Split makes build() fail (fuse_multihead_attention_reshape_to_gather_split); GPT-2
    (GPT-SW3) has the same form and builds because of the float Cast its attention writes after the Softmax
    (edited held-out files: GPT-2 without it fails, GPT-1 with one builds; probes x.Split.ctx=qkv_heads.*)."""
    from pytest_npucheck.probe.models_rejections import _qkv_split

    v = verdicts(catalog, RKNN, _qkv_split(**kw))
    assert v["focus_split"][0] == want, v["focus_split"]


# -- RKNN 2.5.0 / rk3588: groups with two branches from one tensor (pattern nodes' same_input_as) ----

@pytest.mark.parametrize("label,want", [
    ("heads.neg_odd", "npu"), ("heads.neg_even", "npu"), ("heads.neg_last", "npu"), ("heads.mul_m1", "npu"),
    ("heads.no_neg", "npu"),
    ("r3.neg_odd", "cpu"),     # rank 3: not fused, two CPU stride-2 Slices
])
def test_rknn_interleaved_rotary_slices_are_fused(catalog, label, want):
    from pytest_npucheck.probe.models_pattern_branches import ROTARY, _rotary

    shape, negated, order, negation = next(r[1:] for r in ROTARY if r[0] == label)
    got = verdicts(catalog, RKNN, _rotary(shape, negated, order, negation))
    assert got["rot_even"][0] == got["rot_odd"][0] == want, got["rot_even"]


@pytest.mark.parametrize("form,want", [("half_first", "npu"), ("half_second", "cpu"), ("no_half", "cpu")])
def test_rknn_gelu_with_the_half_beside_the_erf(catalog, form, want):
    from pytest_npucheck.probe.models_pattern_branches import _gelu_x_half

    verdict, why = verdicts(catalog, RKNN, _gelu_x_half([1, 16, 32], form, True))["gelu_erf"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: the K/V repeat read through the key's assembly ---------------------------

@pytest.mark.parametrize("tail,kv,sub,want", [
    ("scatter", 1, False, "cpu"), ("concat", 1, False, "cpu"), ("cast", 1, False, "cpu"),
    ("scatter", 1, True, "cpu"), ("concat", 1, True, "cpu"),
    ("cast", 2, False, "npu"),
])
def test_rknn_kv_repeat_through_scatter_concat_cast(catalog, tail, kv, sub, want):
    from pytest_npucheck.probe.models_kv_repeat_paths import _kv_tail

    verdict, why = verdicts(catalog, RKNN, _kv_tail(tail, kv, heads=4, sub=sub))["focus_expand"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: Reshapes between rank-4 tensors by their (H, W) plane ---------------------

@pytest.mark.parametrize("src,dst,want", [
    ([1, 2, 19, 10], [1, 2, 10, 19], "cpu"), ([1, 2, 18, 10], [1, 2, 10, 18], "cpu"),
    ([1, 16, 4, 4], [32, 2, 2, 2], "cpu"), ([32, 2, 2, 2], [1, 16, 4, 4], "cpu"),
    ([1, 2, 20, 10], [1, 2, 10, 20], "npu"), ([1, 2, 16, 8], [1, 2, 8, 16], "npu"),
    ([1, 4, 4, 4], [2, 2, 4, 4], "npu"), ([1, 16, 4, 4], [1, 32, 2, 4], "npu"),
])
def test_rknn_reshape_plane(catalog, src, dst, want):
    from pytest_npucheck.probe.builder import GraphBuilder

    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", src)], name="pre_relu")
    gb.output(gb.node("Relu", [gb.node("Reshape", [x, gb.ints(dst)], name="focus_reshape")], name="post_relu"))
    verdict, why = verdicts(catalog, RKNN, gb)["focus_reshape"]
    assert verdict == want, why


@pytest.mark.parametrize("n,want", [(1, "npu"), (2, "cpu")])
def test_rknn_mobilevit_unfold_by_patches_per_side(catalog, n, want):
    from pytest_npucheck.probe.models_reshape_planes import _unfold

    verdict, why = verdicts(catalog, RKNN, _unfold(16, 2, n))["focus_split"]
    assert verdict == want, why


@pytest.mark.parametrize("ctx", ["relu.relu", "conv.relu"])
def test_rknn_head_merge_and_split_match_every_recorded_probe(catalog, ctx):
    """models_reshape_heads.py: (1, h, d, H W) -> (1, h d, H, W) ran on the NPU whatever the output plane at
    h = 8, 16 and on the CPU at h = 2, 4; the split (1, h d, H, W) -> (1, h, d, H W) on the CPU by its input
    plane (7 x 7, 14 x 14, 5 x 5, 3 x 3), whatever h: the table predicts each as the compiler placed it."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = {k: v for k, v in _recorded_vision_heads("x.Reshape.ctx=heads.").items() if ".%s." % ctx in k}
    probes = [p for p in build_extra_probes(["x.Reshape.ctx=heads."]) if p.id in recorded]
    assert len(probes) == len(recorded) == 18
    assert {v for k, v in recorded.items() if ".merge." in k} == {"cpu", "npu"}
    got = {p.id: next(n.verdict for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes
                      if n.name == "focus_reshape") for p in probes}
    # the one the table does not reproduce (self-check): the merge at d = 3, whose input plane 3 x 49 also
    # fails the input-plane rule, ran on the NPU
    odd = "x.Reshape.ctx=heads.merge.h=8.d=3.s=7.%s.f32.r4" % ctx
    assert recorded[odd] == "npu" and got[odd] == "cpu"
    assert {k: v for k, v in got.items() if k != odd} == {k: v for k, v in recorded.items() if k != odd}
    merge = next(p for p in probes if ".merge.h=4.d=96." in p.id)
    [node] = [n for n in match(facts_from_model(merge.model), catalog.table(RKNN)).nodes if n.name == "focus_reshape"]
    assert "input 0 'pre_relu_out' dim 1 is 4, not a multiple of 8" in "; ".join(r.message for r in node.reasons) \
        or "input 0 'pre_conv_out' dim 1 is 4, not a multiple of 8" in "; ".join(r.message for r in node.reasons)


def test_rknn_head_merge_behind_attentions_transpose_matches_every_recorded_probe(catalog):
    """models_reshape_heads.py: behind a Transpose (0, 1, 3, 2) of (1, h, L, d) the merge ran on the NPU when d
    or h was a multiple of 8 ((4, 96), (2, 8) at h = 2, 4), on the CPU at (4, 5), (2, 2); the table predicts
    each but the d = 3 one (its 3 x 49 input plane: self-check)."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_vision_heads("x.Reshape.ctx=heads_t.merge.")
    probes = build_extra_probes(["x.Reshape.ctx=heads_t.merge."])
    assert len(probes) == len(recorded) == 9
    got = {p.id: next(n.verdict for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes
                      if n.name == "focus_reshape") for p in probes}
    odd = "x.Reshape.ctx=heads_t.merge.h=8.d=3.s=7.f32.r4"
    assert recorded[odd] == "npu" and got.pop(odd) == "cpu"
    del recorded[odd]
    assert got == recorded and set(got.values()) == {"cpu", "npu"}
    assert got["x.Reshape.ctx=heads_t.merge.h=4.d=96.s=14.f32.r4"] == "npu"


def test_rknn_head_split_in_front_of_attention_matches_the_recorded_probes(catalog):
    """models_heads_split.py: the split (1, k h d, H, W) -> (1, h, k d, H W) read by attention (CoAtNet's Slices
    of axis 2, CPU-Bone's and EfficientViT-B0's Transpose then Slices of axis 3) ran on the NPU whatever the
    map's plane when k d was a multiple of 8; CoaT's Transpose -> Mul of a second transposed operand -> MatMul
    on the CPU at every size. The table predicts each but the Mul or Add read by a Relu (NPU, left cpu) and the
    d = 5, 3 splits in front of softmax attention (a CPU row named after the split's result, 'focus_reshape_out_rs',
    that the adapter counts as glue: self-check)."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_vision_heads("x.Reshape.ctx=heads_split.")
    probes = build_extra_probes(["x.Reshape.ctx=heads_split."])
    assert len(probes) == len(recorded) == 42
    got = {p.id: next(n.verdict for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes
                      if n.name == "focus_reshape") for p in probes}
    odd = {k for k in recorded if recorded[k] == "npu" and (".t_mul_t.h" in k or ".t_add_t." in k or
                                                          ".d=5." in k or ".d=3." in k)}
    assert len(odd) == 14 and all(got[k] == "cpu" for k in odd)
    assert {k: v for k, v in got.items() if k not in odd} == {k: v for k, v in recorded.items() if k not in odd}
    assert {v for k, v in got.items() if k not in odd} == {"cpu", "npu"}
    for form in ("slice_sdpa", "t_slice_sdpa", "t_slice_linear"):
        assert got["x.Reshape.ctx=heads_split.%s.h=4.d=32.s=14.f32.r4" % form] == "npu"
    assert recorded["x.Reshape.ctx=heads_split.t_mul_t_mm.h=4.d=32.s=14.f32.r4"] == "cpu"


# -- RKNN 2.5.0 / rk3588: FSMT's masked Softmax (exSoftmaxMask on the CPU) -----------------------------

@pytest.mark.parametrize("mask,merge,const,want", [
    ([1, 1, 1, 16], True, False, "cpu"), ([1, 1, 16, 16], True, False, "npu"),
    ([1, 1, 1, 16], False, False, "npu"), ([1, 1, 1, 16], True, True, "npu"),
])
def test_rknn_softmax_behind_a_row_mask_where(catalog, mask, merge, const, want):
    from pytest_npucheck.probe.models_attention_limits import _where_reshape_softmax

    verdict, why = verdicts(catalog, RKNN, _where_reshape_softmax(mask, 2, merge=merge, const_mask=const))["focus_softmax"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: Pow by its exponent ------------------------------------------------------

@pytest.mark.parametrize("exponent,want", [(2.0, "npu"), (3.0, "npu"), (0.5, "npu"), (-0.5, "npu"), (1.0, "npu"),
                                           (9.0, "cpu"), (4.0, "cpu"), (-1.0, "cpu"), (1.5, "cpu")])
def test_rknn_pow_by_exponent(catalog, exponent, want):
    import numpy as np

    from pytest_npucheck.probe.builder import GraphBuilder

    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 8, 16, 16])], name="pre_relu")
    gb.output(gb.node("Relu", [gb.node("Pow", [x, gb.const(np.float32(exponent))], name="focus_pow")], name="post"))
    verdict, why = verdicts(catalog, RKNN, gb)["focus_pow"]
    assert verdict == want, why


@pytest.mark.parametrize("label,want", [
    ("enc_cross", "unsupported"),             # BART: encoder [T, T] and cross-attention [S, T] masks of one input
    ("enc_cross.own_casts", "unsupported"),   # the toolkit merges the two Casts of one input
    ("enc_cross.cross=old", "unsupported"),   # the second chain as (1 - m) * min
    ("enc_cross.short", "unsupported"),
    ("enc_cross.s=16", "unsupported"),        # two chains computing the same mask: not merged
    ("enc_enc", "unsupported"),
    ("enc_only", "npu"),                      # one chain: BERT
    ("cross_only", "npu"),
    ("enc_cross.two_inputs", "npu"),          # two mask inputs
])
def test_rknn_padding_mask_read_by_two_chains_is_a_predicted_hang(catalog, label, want):
    """rknn-toolkit2 2.5.0 never returns from build() when the bool Cast of a mask input feeds two chains
    (probes x.And.ctx=mask_chains.*, status timeout): the Ands are unsupported and the model rejected."""
    from pytest_npucheck.probe.models_attention_rewrites import MASK_CHAINS, _mask_chains

    res = match(facts_from_model(_mask_chains(**dict(MASK_CHAINS)[label]).build()), catalog.table(RKNN))
    ands = {n.name: n for n in res.nodes if n.op_type == "And" and not n.name.endswith("_base")}
    assert ands and {n.verdict for n in ands.values()} == {want}, {k: n.verdict for k, n in ands.items()}
    assert (res.verdict == "unsupported") == (want == "unsupported")
    if want == "unsupported":
        assert any("a second mask built from the same input" in r.message for n in ands.values() for r in n.reasons)


@pytest.mark.parametrize("label,want", [
    ("value=absent", "unsupported"),                  # the dynamo exporter's zeros: load_onnx fails
    ("value=absent.shape=of_input", "unsupported"),
    ("value=float_zero", "folded"),                   # the value written: folded
    ("value=float_zero.shape=of_input", "folded"),    # Shape(x) of a static input folds too
])
def test_rknn_constant_of_shape_without_its_value_is_rejected(catalog, label, want):
    from pytest_npucheck.probe.models_constant_defaults import CONSTANT_OF_SHAPE, _constant_of_shape

    res = match(facts_from_model(_constant_of_shape(**dict(CONSTANT_OF_SHAPE)[label]).build()), catalog.table(RKNN))
    node = next(n for n in res.nodes if n.name == "focus_cos")
    assert node.verdict == want, [r.message for r in node.reasons]
    assert (res.verdict == "unsupported") == (want == "unsupported")


# -- RKNN 2.5.0 / rk3588: a constant Pad of the end of the channel axis ------------------------------

@pytest.mark.parametrize("shape,axis,side,amount,want", [
    ([1, 15, 32], 1, "end", 1, "cpu"),       # MobileBERT's trigram shift pad(x[:, 1:], [0, 0, 0, 1])
    ([2, 15, 32], 1, "end", 1, "cpu"),
    ([15, 32], 0, "end", 1, "cpu"),
    ([1, 12, 32], 1, "end", 1, "cpu"),
    ([1, 15, 32], 1, "end", 497, "cpu"),
    ([1, 16, 32], 1, "end", 496, "npu"),     # Pegasus-X: 16 channels padded to 512
    ([1, 8, 32], 1, "end", 1, "npu"),        # a multiple of 8 channels
    ([1, 15, 4, 16], 1, "end", 1, "npu"),    # rank 4 is not modelled (CPU alone, NPU in Swin: errata)
    ([1, 15, 32], 1, "begin", 1, "npu"),     # its start: an NPU Conv
    ([1, 15, 32], 1, "both", 1, "npu"),
    ([1, 15, 32], 2, "end", 1, "npu"),       # another axis
    ([15, 32], 1, "end", 1, "npu"),
])
def test_rknn_pad_of_the_channel_axis_end(catalog, shape, axis, side, amount, want):
    """probes x.Pad.ctx=side.*, channel_tail.* (rknn-toolkit2 2.5.0): the recorded placement of these graphs."""
    from pytest_npucheck.probe.models_pad_axes import _pad_side

    verdict, why = verdicts(catalog, RKNN, _pad_side(shape, axis, side, amount))["focus_pad"]
    assert verdict == want, why
    if want == "cpu":
        assert f"pad only the end of axis {axis} of input 0" in why and "not a multiple of 8" in why


def test_rknn_pad_channel_tail_matches_every_recorded_probe(catalog):
    """Every rank-2/3 x.Pad.ctx=* probe of models_pad_axes.py the toolkit compiled is predicted as it
    placed it; the rank-4 ones the table leaves on the NPU are exactly the CPU ones its erratum lists."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefixes = ["x.Pad.ctx=side.", "x.Pad.ctx=channel_tail.", "x.Pad.ctx=channels_last."]
    recorded = {r["id"]: r["verdict"] for r in rknn_extra_records().values()
                if r["id"].startswith(tuple(prefixes))}
    probes = build_extra_probes(prefixes)
    assert len(probes) == len(recorded) == 48
    assert {"cpu", "npu"} <= set(recorded.values())
    got = {p.id: match(facts_from_model(p.model), catalog.table(RKNN)).nodes for p in probes}
    got = {k: next(n.verdict for n in nodes if n.name == "focus_pad") for k, nodes in got.items()}
    low = [k for k in recorded if not k.endswith(".r4")]
    assert len(low) == 26 and {k: got[k] for k in low} == {k: recorded[k] for k in low}
    differ = sorted(k for k in recorded if got[k] != recorded[k])
    assert differ and all(k.endswith(".r4") and recorded[k] == "cpu" and got[k] == "npu" for k in differ)
    self_check = "\n".join(map(str, catalog.table(RKNN).provenance["errata"]))
    assert all(k in self_check for k in differ)


# -- RKNN 2.5.0 / rk3588: an And with a constant all-true operand -----------------------------------

@pytest.mark.parametrize("label,want", [
    ("true11", "cpu"),      # VisualBERT: the Mul by one is removed, the CPU Cast is left
    ("true_row", "npu"),    # the true row broadcasts the mask: the NPU Mul stays
    ("mixed_row", "npu"),
])
def test_rknn_and_with_an_all_true_constant_operand(catalog, label, want):
    """probes x.And.ctx=const_input.* (rknn-toolkit2 2.5.0): the recorded placement of these graphs."""
    from pytest_npucheck.probe.models_and_const import CONST_OPERANDS, _and_const

    value, shape = next((v, s) for lab, v, s in CONST_OPERANDS if lab == label)
    verdict, why = verdicts(catalog, RKNN, _and_const(value, shape))["focus_and"]
    assert verdict == want, why
    if want == "cpu":
        assert "is a constant of all True" in why
    recorded = rknn_extra_records()["x.And.ctx=const_input.%s.bool.r4" % label]
    assert recorded["placement"]["focus_and"] == want


# -- RKNN 2.5.0 / rk3588: parallel Casts of one tensor ------------------------------------------------

@pytest.mark.parametrize("label,cpu,merged", [
    ("cast_twice.same", ["focus_op"], ["focus_op_1"]),                  # Mamba's two Casts of its mask
    ("cast_twice.same.second_first", ["focus_op_1"], ["focus_op"]),     # the first in graph order stays
    ("cast_thrice.same", ["focus_op"], ["focus_op_1", "focus_op_2"]),
    ("cast_twice.differ", ["focus_op"], ["focus_op_1"]),                # to float32 and to float16: one
    ("cast_twice.same.r3", ["focus_op"], ["focus_op_1"]),               # behind an int64 Unsqueeze
    ("cast_twice.int32_f32", ["focus_op", "focus_op_1"], []),           # to int32 and to float32: two
])
def test_rknn_parallel_casts_merge_into_the_first(catalog, label, cpu, merged):
    """rknn-toolkit2 2.5.0 remove_parallel_cast (probes x.Cast.ctx=int_arith.cast_t*): Casts of one tensor
    to one type leave the CPU row of the first in graph order (pre-pass merge_parallel_casts)."""
    from pytest_npucheck.probe.models_int_arith import INT_ARITH, _int_arith

    _, _, form, reader = next(rec for rec in INT_ARITH if rec[0] == label)
    got = verdicts(catalog, RKNN, _int_arith(form, reader))
    assert sorted(n for n in got if n.startswith("focus_op") and got[n][0] == "cpu") == cpu, got
    assert all(got[n][0] == "folded" and "merged into the first" in got[n][1] for n in merged), got
    recorded = rknn_extra_records()["x.Cast.ctx=int_arith.%s.i64.r2" % label]
    assert sorted(n for n, p in recorded["placement"].items() if n.startswith("focus_op") and p == "cpu") == cpu


# -- RKNN 2.5.0 / rk3588: integer Transposes ------------------------------------------------------------

@pytest.mark.parametrize("label", ["transpose.input.cast_f32", "transpose.input.gather_idx", "transpose.input.mul",
                                   "transpose.mul.cast_f32", "transpose_rows.input.cast_f32",
                                   "transpose_rows.input.gather_idx"])
def test_rknn_integer_transpose_of_unit_axes_or_before_a_cast(catalog, label):
    """probes x.Transpose.ctx=int_layout.* (rknn-toolkit2 2.5.0): an int64 Transpose moving only a size-1 axis
    leaves no row, one read by a Cast moves behind it; a real int64 transpose into a Gather runs on the CPU.
    The table's verdict is the recorded placement."""
    from pytest_npucheck.probe.models_int_layout import INT_LAYOUT, _int_layout

    _, op, producer, reader = next(rec for rec in INT_LAYOUT if rec[0] == label)
    verdict, why = verdicts(catalog, RKNN, _int_layout(op, producer, reader))["focus_layout"]
    recorded = rknn_extra_records()["x.Transpose.ctx=int_layout.%s.i64.r2" % label]
    assert verdict == recorded["placement"]["focus_layout"] == ("cpu" if label.endswith("rows.input.gather_idx")
                                                                  else "npu"), why
    if verdict == "cpu":
        assert "moves 2 blocks of axes" in why and "int64" in why

# -- RKNN 2.5.0 / rk3588: mask Expands and bias Muls of fused attention ------------------------------

def _recorded_focus(prefixes: list[str]) -> dict[str, tuple[str, str]]:
    """probe id -> (focus node, placement the toolkit recorded) for the extra probes with these prefixes."""
    out = {}
    for r in rknn_extra_records().values():
        if r["id"].startswith(tuple(prefixes)):
            focus = r["focus"] if isinstance(r["focus"], list) else eval(r["focus"])  # noqa: S307 (recorded repr)
            placement = r["placement"] if isinstance(r["placement"], dict) else eval(r["placement"])  # noqa: S307
            out[r["id"]] = (focus[0], placement[focus[0]])
    return out


@pytest.mark.parametrize("prefix,count,cpu", [
    # Doge: the additive mask's Expand of a fused attention, through float Casts and a rank-5 Expand
    ("x.Expand.ctx=sdpa_mask_cast.", 7, 7),
    # Reformer (dynamo): an int64 -> bool Cast moved behind the Expand, only for int64 -> bool
    ("x.Expand.ctx=mask_cast_swap.", 8, 5),
    # WavLM: the gated position bias, a gate Reshaped from rank 4 and broadcast, in front of a fused attention
    ("x.Mul.ctx=sdpa_bias.", 8, 1),
    ("x.Add.ctx=sdpa_bias.", 2, 1),
    # ... while a rank-3 broadcasting Mul alone stays on the NPU
    ("x.Mul.ctx=bcast3.", 8, 0),
])
def test_rknn_mask_expand_and_bias_mul_match_every_recorded_probe(catalog, prefix, count, cpu):
    """probes of models_mask_broadcast.py (rknn-toolkit2 2.5.0): the table predicts each focus node as the
    toolkit placed it."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_focus([prefix])
    assert len(recorded) == count and sum(p == "cpu" for _, p in recorded.values()) == cpu
    probes = build_extra_probes([prefix])
    assert sorted(p.id for p in probes) == sorted(recorded)
    for probe in probes:
        focus, want = recorded[probe.id]
        node = next(n for n in match(facts_from_model(probe.model), catalog.table(RKNN)).nodes if n.name == focus)
        assert node.verdict == want, (probe.id, [r.message for r in node.reasons])


def test_rknn_flattened_maps_into_a_concat_match_every_recorded_probe(catalog):
    """probes x.Reshape.ctx=flatten3.*.concat* (rknn-toolkit2 2.5.0): every Reshape of them (the focus and
    the other levels' flattenings) is predicted as the toolkit placed it, the FPN head's 2 x 2 level on the
    CPU among them."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefix = "x.Reshape.ctx=flatten3."
    recorded = {k: v for k, v in _recorded_placements([prefix]).items() if ".concat." in k}
    probes = [p for p in build_extra_probes([prefix]) if ".concat." in p.id]
    assert len(probes) == len(recorded) == 13
    cpu = 0
    for probe in probes:
        nodes = match(facts_from_model(probe.model), catalog.table(RKNN)).nodes
        for node in nodes:
            if node.op_type == "Reshape":
                assert node.verdict == recorded[probe.id][node.name], (probe.id, node.name,
                                                                       [r.message for r in node.reasons])
                cpu += node.verdict == "cpu"
    assert cpu == 4


def _recorded_placements(prefixes: list[str]) -> dict[str, dict[str, str]]:
    return {r["id"]: (r["placement"] if isinstance(r["placement"], dict) else eval(r["placement"]))  # noqa: S307
            for r in rknn_extra_records().values() if r["id"].startswith(tuple(prefixes))}


def _recorded_gemm_scale_probes() -> dict[str, str]:
    """The compiler's status of each x.Gemm.ctx=input_scale.* probe (rknn-toolkit2 2.5.0 rk3588, recorded)."""
    return {p["id"]: p["status"] for p in rknn_extra_records().values() if p["id"].startswith("x.Gemm.ctx=input_scale.")}


def test_rknn_gemm_behind_a_per_feature_mul_is_rejected_as_the_compiler_did(catalog):
    """Every probe of gemm_input_scale_extra: the table calls the model unsupported exactly where build() failed."""
    from pytest_npucheck.probe.models_gemm_scales import SCALED_GEMM, _scaled_gemm

    recorded = _recorded_gemm_scale_probes()
    assert len(recorded) == len(SCALED_GEMM)
    assert sorted(set(recorded.values())) == ["build_failed", "ok"]
    for label, kw in SCALED_GEMM:
        status = recorded["x.Gemm.ctx=input_scale.%s.f32.r2" % label]
        res = match(facts_from_model(_scaled_gemm(**kw).build()), catalog.table(RKNN))
        gemm = next(n for n in res.nodes if n.name == "focus_gemm")
        assert (gemm.verdict == "unsupported") == (status == "build_failed"), (label, status, gemm.verdict)
        assert (res.verdict == "unsupported") == (status == "build_failed"), label
        if status == "build_failed":
            assert any("fuse_mul_into_gemm" in r.message for r in gemm.reasons)


# -- RKNN 2.5.0 / rk3588: AveragePool ceil_mode=1, and a Flatten producing the graph output ---------

def _recorded_vision_heads(prefix: str) -> dict[str, str]:
    return {r["id"]: r["verdict"] for r in rknn_extra_records().values() if r["id"].startswith(prefix)}


@pytest.mark.parametrize("prefix,focus,count", [
    ("x.AveragePool.ctx=ceil.", "focus_pool", 8),
    ("x.Flatten.ctx=graph_output.", "focus_flatten", 12),
])
def test_rknn_vision_heads_match_every_recorded_probe(catalog, prefix, focus, count):
    """Every probe of models_vision_heads.py is predicted as rknn-toolkit2 2.5.0 placed it, both ways."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    recorded = _recorded_vision_heads(prefix)
    probes = build_extra_probes([prefix])
    assert len(probes) == len(recorded) == count
    assert set(recorded.values()) == {"cpu", "npu"}
    got = {p.id: next(n.verdict for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes
                      if n.name == focus) for p in probes}
    assert got == recorded


@pytest.mark.parametrize("label,want", [
    ("k2s2.16x16.cip0", "npu"),   # timm's ResNet-D downsample AvgPool2d(2, 2, ceil_mode=True) of an even map
    ("k3s2.17x17.cip0", "npu"),   # (17 - 3) / 2 whole
    ("k2s2.15x15.cip0", "cpu"),   # a partial last window
    ("k2s2.16x15.cip0", "cpu"),   # ... on one axis
    ("k3s2.16x16.cip0", "cpu"),
    ("k2s2.15x15.cip1", "npu"),   # count_include_pad=1 pools the partial window on the NPU
])
def test_rknn_averagepool_ceil_mode_cpu_only_with_a_partial_window(catalog, label, want):
    from pytest_npucheck.probe.models_vision_heads import CEIL_POOLS, _ceil_pool

    verdict, why = verdicts(catalog, RKNN, _ceil_pool(*CEIL_POOLS[label]))["focus_pool"]
    assert verdict == want, why
    if want == "cpu":
        assert "leave a partial last window" in why and "count_include_pad=0 not in {1}" in why


@pytest.mark.parametrize("label,want", [
    ("conv1x1.c16.o1000", "npu"),  # DLA / DPN: a 1x1 Conv classifier of 1000 classes, then Flatten
    ("relu.c2.1x32", "npu"),       # RADIO: (1, 2, 1, 32) -> (1, 64)
    ("conv1x1.c16.o10", "cpu"),    # (1, 10): not a multiple of 8
    ("gap.c10", "cpu"),
    ("relu.c2.1x5", "cpu"),
])
def test_rknn_graph_output_flatten_runs_on_the_npu_when_its_row_is_a_multiple_of_8(catalog, label, want):
    from pytest_npucheck.probe.models_vision_heads import FLATTEN_HEADS, _flatten_head

    verdict, why = verdicts(catalog, RKNN, _flatten_head(*FLATTEN_HEADS[label]))["focus_flatten"]
    assert verdict == want, why
    if want == "cpu":
        assert "graph output" in why and "not a multiple of 8" in why


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
def test_rknn_reduce_over_the_batch_axis_matches_every_recorded_probe(catalog, op):
    """x.<op>.ctx=axis0.* (CrossViT's mean, EfficientViM's sum of stacked logits): all on the NPU, and the
    table says so; the one CPU case left, the no-op single-op probe, is in the self-check."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefix = f"x.{op}.ctx=axis0."
    recorded = _recorded_vision_heads(prefix)
    probes = build_extra_probes([prefix])
    assert len(probes) == len(recorded) == 15 and set(recorded.values()) == {"npu"}
    for p in probes:
        [node] = [n for n in match(facts_from_model(p.model), catalog.table(RKNN)).nodes if n.name == "focus_reduce"]
        assert node.verdict == "npu", (p.id, [r.message for r in node.reasons])
    self_check = "\n".join(map(str, catalog.table(RKNN).provenance["errata"]))
    assert f"probe {op}.axes=0.keepdims=1.f32.r4" in self_check


def test_rknn_two_linear_heads_of_one_input_added_are_rejected_as_the_compiler_did(catalog):
    """Every probe of dual_head_extra: the table calls the model unsupported exactly where build() failed
    (rknn-toolkit2 2.5.0's fuse_conv_conv_add), on the head the probe focuses."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefixes = ("x.Gemm.ctx=dual_head.", "x.MatMul.ctx=dual_head.", "x.Conv.ctx=dual_head.")
    recorded = {p["id"]: p["status"] for p in rknn_extra_records().values() if p["id"].startswith(prefixes)}
    probes = build_extra_probes(list(prefixes))
    assert len(probes) == len(recorded) == 20
    assert sorted(set(recorded.values())) == ["build_failed", "ok"]
    for probe in probes:
        failed = recorded[probe.id] == "build_failed"
        res = match(facts_from_model(probe.model), catalog.table(RKNN))
        [focus] = [n for n in res.nodes if n.name == probe.focus[0]]
        assert (focus.verdict == "unsupported") == failed, (probe.id, recorded[probe.id], focus.verdict)
        assert (res.verdict == "unsupported") == failed, probe.id
        if failed:
            assert any("fuse_conv_conv_add" in r.message for r in focus.reasons)


def test_rknn_botnets_tiled_height_logits_are_rejected_as_the_compiler_did(catalog):
    """Every probe of rel_pos_tile_extra: the table calls the model unsupported exactly where build() failed
    (rknn-toolkit2 2.5.0's reduce_tp_in_mesh_forward)."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefix = "x.Transpose.ctx=rel_pos_tile."
    recorded = {p["id"]: p["status"] for p in rknn_extra_records().values() if p["id"].startswith(prefix)}
    probes = build_extra_probes([prefix])
    assert len(probes) == len(recorded) == 21
    assert sorted(recorded.values()).count("build_failed") == 9
    for probe in probes:
        failed = recorded[probe.id] == "build_failed"
        res = match(facts_from_model(probe.model), catalog.table(RKNN))
        assert (res.verdict == "unsupported") == failed, (probe.id, recorded[probe.id], res.verdict)
        if failed:
            [focus] = [n for n in res.nodes if n.name == probe.focus[0]]
            assert focus.verdict == "unsupported" and any("reduce_tp_in_mesh_forward" in r.message for r in focus.reasons)
# -- RKNN 2.5.0 / rk3588: multi-query attention written as a broadcast (MobileNetV4) -----------------

@pytest.mark.parametrize("kw,want", [
    ({"heads": 4, "kv": 1}, "cpu"),                     # the SDPA rewrite's Expand of the keys: on the CPU
    ({"heads": 8, "kv": 1, "scale": False}, "cpu"),
    ({"heads": 4, "kv": 1, "v_heads": 4}, "cpu"),       # the keys alone broadcast
    ({"heads": 4, "kv": 1, "k_heads": 4}, "npu"),       # the values alone: the output MatMul's NPU attention row
    ({"heads": 4, "kv": 4}, "npu"),
    ({"heads": 1, "kv": 1}, "npu"),
    ({"heads": 4, "kv": 1, "pv": False}, "npu"),        # no output MatMul, no fusion: exMatMul broadcasts
])
def test_rknn_scores_matmul_of_a_broadcast_multi_query_attention(catalog, kw, want):
    from pytest_npucheck.probe.models_sdpa_head_broadcast import _attention

    v = verdicts(catalog, RKNN, _attention(**kw))
    assert v["focus_scores"][0] == want, v["focus_scores"][1]
    assert v["focus_softmax"][0] == "npu"
    if kw.get("pv", True):
        assert v["focus_pv"][0] == "npu"


# -- RKNN 2.5.0 / rk3588: a sequence viewed as a map (EfficientViM) -----------------------------------

@pytest.mark.parametrize("ch,h,direction,around,want", [
    (147, 14, "to_map", "conv", "cpu"), (150, 14, "to_map", "conv", "cpu"), (20, 10, "to_map", "conv", "cpu"),
    (147, 14, "to_map", "relu", "cpu"),
    (128, 14, "to_map", "conv", "npu"), (24, 14, "to_map", "conv", "npu"), (147, 16, "to_map", "conv", "npu"),
    (147, 14, "to_seq", "conv", "npu"),
    (220, 7, "to_map", "transpose", "cpu"), (112, 14, "to_map", "transpose", "npu"),   # SwiftFormer's tokens
    (1, 255, "unsqueeze", "relu", "cpu"), (1, 16, "unsqueeze", "relu", "npu"),         # Longformer's (2, 1, 255, 255)
])
def test_rknn_sequence_to_map_reshape_by_channels_and_plane(catalog, ch, h, direction, around, want):
    from pytest_npucheck.probe.models_seq_map_reshape import _seq_map

    verdict, why = verdicts(catalog, RKNN, _seq_map(ch, h, h, direction, around))["focus_reshape"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: a rank-5 broadcast of axis 1 behind a leading 1 (GCViT) --------------------

@pytest.mark.parametrize("op", ["Tile", "Expand"])
@pytest.mark.parametrize("label,want", [
    ("gcvit", "cpu"), ("a1", "cpu"), ("a1.plane", "cpu"), ("a1.batch2", "npu"), ("a1a2", "npu"), ("a2", "npu"),
])
def test_rknn_rank5_broadcast_of_axis1(catalog, op, label, want):
    from pytest_npucheck.probe.models_rank5_broadcast import RANK5_AXIS1, _broadcast

    shape, repeats = next((s, r) for name, s, r in RANK5_AXIS1 if name == label)
    verdict, why = verdicts(catalog, RKNN, _broadcast(op, shape, repeats))["focus_op"]
    assert verdict == want, why


# -- RKNN 2.5.0 / rk3588: a channels-last window partition or reverse (EfficientViT-M) ----------------

@pytest.mark.parametrize("w,n,c,direction,want", [
    (7, 2, 64, "partition", "cpu"), (5, 2, 64, "partition", "cpu"), (7, 4, 16, "partition", "cpu"),
    (8, 2, 64, "partition", "npu"), (4, 4, 16, "partition", "npu"),
    (7, 2, 64, "reverse", "cpu"), (5, 2, 64, "reverse", "cpu"),
    (7, 4, 16, "reverse", "npu"),     # back to a 28 x 28 map: 784 elements, whole 8-element groups
    (8, 2, 64, "reverse", "npu"),
])
def test_rknn_window_merge_reshape_by_plane(catalog, w, n, c, direction, want):
    from pytest_npucheck.probe.models_window_partition import _window

    v = verdicts(catalog, RKNN, _window(w, n, c, direction))
    assert v["focus_merge"][0] == want, v["focus_merge"][1]
    assert v["focus_split"][0] == "npu" and v["focus_swap"][0] == "npu"


# -- RKNN 2.5.0 / rk3588: an Unsqueeze making the updates of a ScatterElements -----------------------


def test_rknn_scatter_updates_unsqueeze_by_last_axis(catalog):
    """Every probe of the family: the table's verdict is the placement rknn-toolkit2 2.5.0 recorded (CPU only
    when the last axis is not a multiple of 8 and the compiler relays the tensor: a computed rank-2 input, or
    any input unsqueezed to rank 5; MiniCPM-OCR's (1, 32, 1, 64) -> (1, 32, 1, 1, 64) on the NPU)."""
    from pytest_npucheck.probe.models_scatter_updates import PRODUCERS, SCATTER_UPDATES, _scatter_updates

    recorded = rknn_extra_records()
    seen = {"cpu": 0, "npu": 0}
    for label, shape, axis in SCATTER_UPDATES:
        for pre in PRODUCERS:
            pid = "x.Unsqueeze.ctx=scatter_upd.%s.%s.f32.r%d" % (pre, label, len(shape))
            real = recorded[pid]["placement"]["focus_unsqueeze"]
            verdict, why = verdicts(catalog, RKNN, _scatter_updates(list(shape), axis, pre))["focus_unsqueeze"]
            assert verdict == real, (pid, why)
            seen[real] += 1
    assert seen == {"cpu": 10, "npu": 20}
    verdict, why = verdicts(catalog, RKNN, _scatter_updates([1, 32, 1, 17], 2, "input"))["focus_unsqueeze"]
    assert verdict == "cpu" and "ScatterElements" in why and "17" in why, why


# -- RKNN 2.5.0 / rk3588: integer layout ops making an embedding Gather's indices --------------------

def test_rknn_gather_ids_layout_op_by_its_producer(catalog):
    """Every probe of the family: the table's verdict is the placement rknn-toolkit2 2.5.0 recorded (NPU when
    another op computed the ids, CPU when the layout op reads a graph input; Kosmos-2.5's position ids)."""
    from pytest_npucheck.probe.models_gather_ids import GATHER_IDS_OPS, LENGTHS, PRODUCERS, _gather_ids

    recorded = rknn_extra_records()
    seen = {"cpu": 0, "npu": 0}
    for label, op, in_shape, out_shape in GATHER_IDS_OPS:
        for producer in PRODUCERS:
            for t in LENGTHS:
                pid = "x.%s.ctx=gather_ids.%s.%s.t=%d.i64.r%d" % (op, label, producer, t, len(in_shape))
                real = recorded[pid]["placement"]["focus_layout"]
                verdict, why = verdicts(catalog, RKNN, _gather_ids(op, in_shape, out_shape, producer, t))["focus_layout"]
                assert verdict == real, (pid, why)
                seen[real] += 1
    assert seen == {"cpu": 8, "npu": 40}
    from pytest_npucheck.probe.models_int_layout import _int_layout

    for producer in ("mul", "add"):  # the older probes behind an int64 Mul and Add, once in the self-check's list
        pid = "x.Unsqueeze.ctx=int_layout.unsqueeze.%s.gather_idx.i64.r2" % producer
        verdict, why = verdicts(catalog, RKNN, _int_layout("Unsqueeze", producer, "gather_idx"))["focus_layout"]
        assert verdict == recorded[pid]["placement"]["focus_layout"] == "npu", why


# -- RKNN 2.5.0 / rk3588: the first block of a window unroll (Hiera) ---------------------------------

def test_rknn_window_unroll_first_block_runs_as_exwindow(catalog):
    """The first unroll block of every probe is NPU, as rknn-toolkit2 2.5.0 recorded it (exWindow); the later
    rank-6 blocks, NPU in 6 of the probes and CPU in 4, stay cpu."""
    from pytest_npucheck.probe.models_token_unroll import SOURCES, UNROLL, UNROLL_ONE, _token_unroll

    recorded = rknn_extra_records()
    cases = [(label, side, ch, blocks, 2, 1) for label, side, ch, blocks in UNROLL]
    cases += [(label, side, ch, 1, k, n) for label, side, ch, k, n in UNROLL_ONE]
    later = {"cpu": 0, "npu": 0}
    for label, side, ch, blocks, k, n in cases:
        for source in SOURCES:
            pid = "x.Transpose.ctx=unroll.%s.%s.f32.r6" % (source, label)
            v = verdicts(catalog, RKNN, _token_unroll(side, ch, blocks, source, k, n))
            real = recorded[pid]["placement"]
            assert v["focus_transpose0"][0] == real["focus_transpose0"] == "npu", (pid, v["focus_transpose0"][1])
            for b in range(1, blocks):
                verdict, why = v["focus_transpose%d" % b]
                if "moves" in why:  # a rank-6 block the size-1 axes do not reduce to 4 blocks
                    assert verdict == "cpu" and "is the merged result" in why, (pid, why)
                    later[real["focus_transpose%d" % b]] += 1
    assert later == {"cpu": 4, "npu": 6}


# -- RKNN 2.5.0 / rk3588: two Slices of one tensor on different axes (LeViT's x[:, ::2, ::2]) ---------

def test_rknn_slice_pair_judged_as_the_merged_slice(catalog):
    """Every probe of both families: the table's verdicts of the two Slices are the placements rknn-toolkit2
    2.5.0 recorded (the merged pair on the first Slice, by both steps; Slices of one axis each by its own)."""
    from pytest_npucheck.probe.builder import GraphBuilder
    from pytest_npucheck.probe.models_noop_slices import TWO_SLICES
    from pytest_npucheck.probe.models_slice_pairs import SLICE_PAIRS, _slice_pair

    def shared_pair(shape, first, second):  # the first Slice also read by a Relu: not merged
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
        for (axis, start, step), name in zip((first, second), ("focus_slice", "focus_slice_2")):
            x = gb.node("Slice", [x, gb.ints([start]), gb.ints([2 ** 62]), gb.ints([axis]), gb.ints([step])],
                        name=name)
            if name == "focus_slice":
                gb.output(gb.node("Relu", [x], name="post_other"))
        gb.output(gb.node("Relu", [x], name="post_relu"))
        return gb

    recorded = rknn_extra_records()
    cases = [("two_slices." + label, shape, first, second, shared) for label, shape, first, second, shared in TWO_SLICES]
    cases += [("slice_pair." + label, shape, first, second, False) for label, shape, first, second in SLICE_PAIRS]
    firsts = {"cpu": 0, "npu": 0}
    for label, shape, first, second, shared in cases:
        pid = "x.Slice.ctx=%s.f32.r%d" % (label, len(shape))
        v = verdicts(catalog, RKNN, (shared_pair if shared else _slice_pair)(shape, first, second))
        for name in ("focus_slice", "focus_slice_2"):
            assert v[name][0] == recorded[pid]["placement"][name], (pid, name, v[name][1])
        firsts[v["focus_slice"][0]] += 1
    assert firsts == {"cpu": 9, "npu": 2}
    v = verdicts(catalog, RKNN, _slice_pair([1, 4, 4, 16], (1, 1, 1), (2, 0, 2)))  # a crop in front of a stride
    assert "has steps [2]: the compiler merges the two into one Slice" in v["focus_slice"][1]


def test_rknn_unit_split_concat_is_one_npu_reshape(catalog):
    """Every x.Slice.ctx=split_concat probe: integer Slices tiling an axis in pieces of one and their Concat on
    the next axis are npu as recorded (one Reshape); pieces of two, overlapping or partial Slices and their Concat
    are cpu (the recorded CPU rows; the one Slice of each the compiler merged away is a self-check entry)."""
    from pytest_npucheck.probe.models_split_concat import CASES, _split_concat

    recorded = rknn_extra_records()
    seen = {"npu": 0, "cpu": 0}
    for label, rows, slices in CASES:
        for width in (8, 128):
            pid = "x.Slice.ctx=split_concat.%s.w%d.i64.r3" % (label, width)
            v = verdicts(catalog, RKNN, _split_concat(rows, slices, width))
            names = ["focus_slice%d" % i for i in range(len(slices))] + ["focus_concat"]
            placed = recorded[pid]["placement"]
            want = "npu" if label.startswith("tile.") and label.endswith(".e1") else "cpu"
            for name in names:
                assert v[name][0] == want, (pid, name, v[name][1])
                if placed[name] == "cpu":  # every CPU row the compiler kept, the table calls cpu
                    assert v[name][0] == "cpu", (pid, name)
            assert all(placed[n] == "npu" for n in names) == (want == "npu"), pid
            seen[want] += 1
            if want == "cpu":
                why = "do not cover the 3 rows of axis 1" if label.startswith("part.") else "do not tile axis 1 in pieces of one"
                assert why in v["focus_concat"][1] and why in v["focus_slice0"][1], (pid, v["focus_concat"])
    assert seen == {"npu": 6, "cpu": 6}


def test_rknn_1d_conv_padded_by_auto_pad_same_is_rejected_as_the_compiler_did(catalog):
    """Every probe of conv1d_pad_extra: the table calls the model unsupported exactly where build() failed
    (a rank-3 Conv with auto_pad SAME_UPPER/SAME_LOWER; LASR's Conformer conv), on the Conv the probe focuses."""
    from pytest_npucheck.probe.extra_families import build_extra_probes

    prefix = "x.Conv.ctx=pad1d."
    recorded = {p["id"]: p["status"] for p in rknn_extra_records().values() if p["id"].startswith(prefix)}
    probes = build_extra_probes([prefix])
    assert len(probes) == len(recorded) == 18
    assert sorted(set(recorded.values())) == ["build_failed", "ok"]
    for probe in probes:
        failed = recorded[probe.id] == "build_failed"
        assert failed == (".same_" in probe.id and probe.id.endswith(".r3")), probe.id
        res = match(facts_from_model(probe.model), catalog.table(RKNN))
        [focus] = [n for n in res.nodes if n.name == probe.focus[0]]
        assert (focus.verdict == "unsupported") == failed, (probe.id, recorded[probe.id], focus.verdict)
        assert (res.verdict == "unsupported") == failed, probe.id
        if failed:
            assert any("auto_pad" in r.message for r in focus.reasons)
