"""prepass merge_identical_nodes, eliminate_noop_arithmetic, eliminate_noop_expand_slice and fuse_reshape_target:
onnxruntime's common subexpression elimination, no-op eliminations and Reshape fusion (the other prepass
tests: tests/unit/test_prepass.py, test_prepass_passes.py); the probes it reproduces are checked in
tests/tables/test_prepass_onnxruntime_passes_probed.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import TensorProto, helper

from conftest import const, make_model

from pytest_npucheck.graph import GraphView, facts_from_model
from pytest_npucheck.prepass import run_prepasses
from pytest_npucheck.probe.models_common_subexpressions import _chains, _pair
from pytest_npucheck.probe.models_noop_arithmetic import NOOPS, NOOPS_DATADEP, _noop, _noop_datadep
from pytest_npucheck.probe.models_dead_nodes import DEAD, _dead
from pytest_npucheck.probe.models_noop_layout import NOOP_LAYOUTS, _expand_merge, _noop_layout
from pytest_npucheck.probe.models_reshape_fusion import FORMS, _fusion


@pytest.fixture
def table(toy_catalog):
    return dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("merge_identical_nodes",))


def _folded_names(model, table) -> dict[str, str]:
    facts = facts_from_model(model)
    pre = run_prepasses(facts, table)
    return {facts.nodes[i].name: why for i, why in pre.folded.items()}


def test_one_of_two_identical_nodes_stays_the_one_onnxruntime_meets_first(table):
    # as placed by onnxruntime-qnn: Relu pair -> focus_dup0 removed; Shape pair -> focus_dup1 removed
    folded = _folded_names(_pair("relu").build(), table)
    assert list(folded) == ["focus_dup0"] and "identical to Relu 'focus_dup1'" in folded["focus_dup0"]
    folded = _folded_names(_pair("shape").build(), table)
    assert list(folded) == ["focus_dup1"] and "identical to Shape 'focus_dup0'" in folded["focus_dup1"]


def test_which_identical_node_stays_is_decided_after_same_type_casts_are_removed(table):
    # as placed by onnxruntime-qnn (q.Relu.ctx=duplicate.relu_cast): the Add's later input reaches
    # focus_dup1 through a float->float Cast that onnxruntime removes first; walked through, the Add's
    # producers are Tanh (2) and Sigmoid (3), so onnxruntime meets focus_dup0 first and keeps it
    model = _pair("relu_cast").build()
    folded = _folded_names(model, table)
    assert list(folded) == ["focus_dup0"]  # the Cast kept: focus_dup1 is met first
    both = dataclasses.replace(table, prepasses=("eliminate_same_type_casts", "merge_identical_nodes"))
    folded = _folded_names(model, both)
    assert sorted(folded) == ["focus_dup1", "post_cast"]
    assert "identical to Relu 'focus_dup0'" in folded["focus_dup1"]


@pytest.mark.parametrize("kind,chain", [("relu", ("focus_relu", "focus_sigmoid")),
                                        ("nonzero", ("focus_nonzero", "focus_transpose", "focus_gathernd",
                                                     "post_reduce"))])
def test_identical_chains_merge_whole(table, kind, chain):
    # as placed by onnxruntime-qnn (q.<op>.ctx=duplicate_chain.*): the second nodes of three chains
    # are identical once the first ones merge; the chain onnxruntime meets first stays, whole
    folded = _folded_names(_chains(kind).build(), table)
    assert sorted(folded) == sorted(f"{name}{k}" for name in chain for k in (0, 2))
    assert all(f"'{name}1'" in folded[f"{name}{k}"] for name in chain for k in (0, 2))


def test_equal_values_merge_only_as_initializers(table):
    # two NonZeros of equal masks that two different computations make (ConstantOfShape of a Concat and
    # of a Mul, both [1, 16]): onnxruntime merged none (Longformer's attention windows, placed by
    # onnxruntime-qnn); the same masks as two equal initializers merge (q.NonZero.ctx=duplicate_chain)
    ones = helper.make_tensor("v", TensorProto.INT64, [1], [1])
    computed = make_model([helper.make_node("Concat", ["one", "sixteen"], ["s0"], name="cat_shape", axis=0),
                           helper.make_node("Mul", ["one_sixteen", "ones"], ["s1"], name="mul_shape"),
                           helper.make_node("ConstantOfShape", ["s0"], ["m0"], name="cos0", value=ones),
                           helper.make_node("ConstantOfShape", ["s1"], ["m1"], name="cos1", value=ones),
                           helper.make_node("NonZero", ["m0"], ["n0"], name="nz0"),
                           helper.make_node("NonZero", ["m1"], ["n1"], name="nz1"),
                           helper.make_node("Concat", ["n0", "n1"], ["y"], name="cat", axis=1)],
                          [], ["y"], initializers=[const("one", np.array([1], np.int64)),
                                                   const("sixteen", np.array([16], np.int64)),
                                                   const("one_sixteen", np.array([1, 16], np.int64)),
                                                   const("ones", np.array([1, 1], np.int64))])
    assert _folded_names(computed, table) == {}
    inits = make_model([helper.make_node("NonZero", ["m0"], ["n0"], name="nz0"),
                        helper.make_node("NonZero", ["m1"], ["n1"], name="nz1"),
                        helper.make_node("Concat", ["n0", "n1"], ["y"], name="cat", axis=1)],
                       [], ["y"], initializers=[const("m0", np.ones((1, 16), np.int64)),
                                                 const("m1", np.ones((1, 16), np.int64))])
    assert len({"nz0", "nz1"} & set(_folded_names(inits, table))) == 1


def test_a_node_that_writes_a_graph_output_is_never_merged(table):
    assert _folded_names(_pair("relu_output").build(), table) == {}


def test_nodes_differing_in_an_attribute_or_an_input_stay(table):
    w = const("w", np.ones((4,), "float32"))
    model = make_model([helper.make_node("Softmax", ["x"], ["a"], name="s1", axis=1),
                        helper.make_node("Softmax", ["x"], ["b"], name="s0", axis=0),
                        helper.make_node("Add", ["x", "w"], ["c"], name="add_w"),
                        helper.make_node("Add", ["w", "x"], ["d"], name="w_add"),
                        helper.make_node("Sum", ["a", "b", "c", "d"], ["y"], name="sum")],
                       [("x", (4, 4))], ["y"], initializers=[w])
    assert _folded_names(model, table) == {}


def test_the_pass_runs_only_when_the_table_lists_it(table):
    assert _folded_names(_pair("relu").build(), dataclasses.replace(table, prepasses=())) == {}


@pytest.mark.parametrize("label,op,value,shape,first", NOOPS)
def test_noop_arithmetic_is_removed_only_for_a_one_element_neutral_constant(toy_catalog, label, op, value, shape, first):
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_arithmetic",))
    folded = _folded_names(_noop(op, value, shape, first).build(), table)
    # as onnxruntime-qnn placed them (probes q.<op>.ctx=noop.*)
    removed = label in ("mul1", "mul1.left", "mul1.one", "add0", "add0.left", "sub0", "div1")
    assert ("focus_op" in folded) == removed, folded
    if removed:
        assert "a no-op removed before placement" in folded["focus_op"]


@pytest.mark.parametrize("label,op,value,shape", NOOPS_DATADEP)
def test_noop_arithmetic_on_a_data_dependent_shape_compares_ranks(toy_catalog, label, op, value, shape):
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_arithmetic",))
    folded = _folded_names(_noop_datadep(op, value, shape).build(), table)
    # as onnxruntime-qnn placed them (probes q.<op>.ctx=noop_datadep.*): the (N, 8) rows of a NonZero
    # lose x * 1 and x + 0 unless the constant has more dims than they have
    assert ("focus_op" in folded) == (label in ("mul1", "mul1.one", "mul1.rank2", "add0.one")), folded


@pytest.mark.parametrize("label,op,build", NOOP_LAYOUTS, ids=[c[0] for c in NOOP_LAYOUTS])
@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "datadep"])
def test_noop_expand_and_full_slice_are_removed(toy_catalog, label, op, build, dynamic):
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"),
                                prepasses=("fold_shape_ops", "eliminate_noop_expand_slice"))
    folded = _folded_names(_noop_layout(build, dynamic).build(), table)
    # as onnxruntime-qnn placed them (probes q.<op>.ctx=noop_layout.*): an Expand to 1s or to the input's
    # own dims and a 0..INT_MAX Slice go, also on (1, N, 8) rows of a NonZero; an Expand to the Shape of a
    # data-dependent tensor (not folded), a widening Expand, a Reshape and a partial Slice stay
    removed = label in ("expand_ones", "expand_one", "expand_last", "slice_full") \
        or label in ("expand_own_shape", "expand_shape_of") and not dynamic
    assert ("focus_op" in folded) == removed, folded
    if removed:
        assert "is removed before placement" in folded["focus_op"]


@pytest.mark.parametrize("how", ["const", "shape_of"])
def test_a_nonzero_of_a_noop_expand_merges_with_the_nonzero_of_its_input(toy_catalog, how):
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"),
                                prepasses=("fold_shape_ops", "eliminate_noop_expand_slice", "merge_identical_nodes"))
    folded = _folded_names(_expand_merge(how).build(), table)
    # as onnxruntime-qnn placed them (q.NonZero.ctx=duplicate_chain.expand_noop.*): the Expand goes, then
    # the chain of the mask itself merges into the chain through the Expand
    chain0 = ["focus_nonzero0", "focus_transpose0", "focus_gathernd0", "post_reduce0"]
    assert sorted(folded) == sorted(["focus_expand", *chain0] + (["focus_shape"] if how == "shape_of" else []))
    assert "identical to NonZero 'focus_nonzero1'" in folded["focus_nonzero0"]
    without = dataclasses.replace(table, prepasses=("fold_shape_ops", "merge_identical_nodes"))
    assert not set(chain0) & set(_folded_names(_expand_merge(how).build(), without))


@pytest.mark.parametrize("label,op,dtype,also", DEAD, ids=[c[0] for c in DEAD])
def test_a_node_read_only_by_a_folded_shape_is_removed(toy_catalog, label, op, dtype, also):
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"),
                                prepasses=("fold_shape_ops", "eliminate_unused_nodes"))
    folded = _folded_names(_dead(op, dtype, also).build(), table)
    # as onnxruntime-qnn placed them (q.<op>.ctx=dead.*): gone unless something else reads it
    assert ("focus_op" in folded) == (not also), folded
    assert "focus_shape" in folded
    without = dataclasses.replace(table, prepasses=("fold_shape_ops",))
    assert "focus_op" not in _folded_names(_dead(op, dtype, also).build(), without)


def test_a_node_read_through_a_removed_identity_or_fused_norm_stays(toy_catalog):
    # an Identity and a BatchNormalization fused into its Conv are removed, but pass the value on
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"),
                                prepasses=("eliminate_identity", "fuse_conv_bn", "eliminate_unused_nodes"))
    ch = 4
    inits = [const("w", np.ones((ch, ch, 1, 1), np.float32))] + [
        const(n, np.ones((ch,), np.float32)) for n in ("s", "b", "m", "v")]
    model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                        helper.make_node("Identity", ["r"], ["i"], name="ident"),
                        helper.make_node("Conv", ["i", "w"], ["c"], name="conv"),
                        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"], name="bn")],
                       [("x", (1, ch, 8, 8))], ["y"], initializers=inits)
    folded = _folded_names(model, table)
    assert "relu" not in folded and "conv" not in folded and "ident" in folded


_FUSE = ("fold_constants", "fold_shape_ops", "merge_identical_nodes", "fuse_reshape_target", "eliminate_unused_nodes")


@pytest.mark.parametrize("label", list(FORMS))
def test_a_reshape_target_with_one_computed_element_becomes_a_constant(toy_catalog, label):
    # as onnxruntime-qnn placed them (probes q.Reshape.ctx=fuse_target.*): the Concat goes and the Reshape of a
    # static input gets a static result when at most one element is computed (or -1) and nothing else reads
    # the Concat; otherwise the target stays a run-time value and the Reshape and the Sigmoid have no shape
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=_FUSE)
    model = _fusion(label).build()
    facts = facts_from_model(model)
    pre = run_prepasses(facts, table)
    view = GraphView(facts, pre)
    fused = label not in ("two", "minus_one", "shared")
    folded = {facts.nodes[i].name: why for i, why in pre.folded.items()}
    assert ("focus_concat" in folded) == fused, folded
    for name in ("focus_reshape_out", "post_sigmoid_out"):
        assert view.tensor(name).static == fused, (name, view.tensor(name))
    if fused:
        assert "becomes the constant" in folded["focus_concat"]
        assert view.tensor("focus_reshape_out").shape == {"vits": (16, 1), "one_middle": (2, 8, 8),
                                                          "two_plain": (1, 16, 8)}.get(label, (16, 8))
    else:
        assert "run-time target of Reshape 'focus_reshape'" in view.tensor("focus_reshape_out").shape[0]
    without = dataclasses.replace(table, prepasses=tuple(p for p in _FUSE if p != "fuse_reshape_target"))
    assert "focus_concat" not in _folded_names(model, without)


def test_a_concat_merged_with_its_twins_has_their_readers_and_is_not_fused(toy_catalog):
    # FastSpeech2's decoder: one Unsqueeze per layer of one computed size (equal axes Constants), one Concat per
    # layer: onnxruntime merges the Unsqueezes, then the Concats, and the one Concat left has two readers
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=_FUSE)
    axes = helper.make_tensor("axes", TensorProto.INT64, [1], [0])
    nodes = [helper.make_node("NonZero", ["m"], ["nz"], name="nonzero"),
             helper.make_node("Shape", ["nz"], ["shp"], name="shape"),
             helper.make_node("Gather", ["shp", "one"], ["n"], name="gather", axis=0)]
    for k in range(2):
        nodes += [helper.make_node("Constant", [], [f"axes{k}"], name=f"axes{k}", value=axes),
                  helper.make_node("Unsqueeze", ["n", f"axes{k}"], [f"u{k}"], name=f"unsqueeze{k}"),
                  helper.make_node("Concat", [f"u{k}", "eight"], [f"t{k}"], name=f"concat{k}", axis=0),
                  helper.make_node("Reshape", ["x", f"t{k}"], [f"y{k}"], name=f"reshape{k}")]
    nodes.append(helper.make_node("Add", ["y0", "y1"], ["y"], name="add"))
    model = make_model(nodes, [("x", (2, 8)), ("m", (4,))], ["y"],
                       initializers=[const("one", 0, "int64"), const("eight", [8], "int64")])
    folded = _folded_names(model, table)
    assert "identical to Unsqueeze 'unsqueeze0'" in folded.get("unsqueeze1", "") or \
        "identical to Unsqueeze 'unsqueeze1'" in folded.get("unsqueeze0", "")
    kept = [n for n in ("concat0", "concat1") if n not in folded]
    assert len(kept) == 1 and "identical to Concat" in folded[({"concat0", "concat1"} - set(kept)).pop()]
    assert "shape" not in folded and "gather" not in folded


def _sequence_split(n: int):
    """n copies of TorchScript's split through a sequence: SequenceEmpty -> SequenceInsert x -> SequenceAt 0 -> Relu."""
    nodes = []
    for k in range(n):
        nodes += [helper.make_node("SequenceEmpty", [], [f"s{k}"], name=f"empty{k}", dtype=TensorProto.FLOAT),
                  helper.make_node("SequenceInsert", [f"s{k}", "x"], [f"t{k}"], name=f"insert{k}"),
                  helper.make_node("SequenceAt", [f"t{k}", "zero"], [f"a{k}"], name=f"at{k}"),
                  helper.make_node("Relu", [f"a{k}"], [f"y{k}"], name=f"relu{k}")]
    return make_model(nodes, [("x", (1, 8))], [f"y{k}" for k in range(n)], [const("zero", 0, "int64")])


def test_a_sequence_is_never_folded_and_identical_sequence_empties_merge(toy_catalog):
    # onnxruntime folds only nodes whose outputs are tensors: MViT-v2's 51 SequenceEmpty become one (its CSE), which
    # runs on the CPU (q.shape.ctx=opaque_source.*, tv_mvit_v2_s's /inner/blocks.0/attn/pool_q/SequenceEmpty)
    fold = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("fold_constants",))
    assert _folded_names(_sequence_split(1), fold) == {}
    both = dataclasses.replace(fold, prepasses=("fold_constants", "merge_identical_nodes"))
    folded = _folded_names(_sequence_split(3), both)
    assert len([k for k in folded if k.startswith("empty")]) == 2
    [kept] = {f"empty{k}" for k in range(3)} - set(folded)
    assert all(f"identical to SequenceEmpty '{kept}'" in why for k, why in folded.items() if k.startswith("empty"))
    # the SequenceInserts read different sequences before the merge and the same one after it: merged too
    assert sorted(k for k in folded if k.startswith("insert")) == sorted(f"insert{k}" for k in range(3)
                                                                          if f"empty{k}" != kept)
