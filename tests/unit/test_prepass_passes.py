"""prepass: what a toolchain removes or folds before placing ops, run only as the table lists it (the
other prepass tests: tests/unit/test_prepass.py)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.graph import GraphView
from pytest_npucheck.prepass import run_prepasses
from pytest_npucheck.probe.models_int_arith import INT_ARITH, _int_arith
from pytest_npucheck.probe.models_int_layout import INT_LAYOUT, _int_layout


@pytest.fixture
def table(toy_catalog):
    return toy_catalog.table("toy@1.0/soc-a")


def _with(table, *passes):
    return dataclasses.replace(table, prepasses=tuple(passes))


def _shape_reshape():
    """x -> Shape -> Reshape(x, shape) -> Relu: a shape subgraph on a static input."""
    return make_model([helper.make_node("Shape", ["x"], ["s"], name="shape"),
                       helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
                       helper.make_node("Relu", ["r"], ["y"], name="relu")],
                      [("x", (1, 4, 8, 8))], ["y"])


def test_only_the_passes_the_table_lists_run(table):
    facts = facts_from_model(_shape_reshape())
    assert run_prepasses(facts, _with(table)).folded == {}
    pre = run_prepasses(facts, _with(table, "fold_shape_ops"))
    assert set(pre.folded) == {0} and "Shape of a static shape [1, 4, 8, 8]" in pre.folded[0]
    assert pre.const["s"].const and pre.const["s"].value == (1, 4, 8, 8)
    view = GraphView(facts, pre)
    assert view.tensor("s") is pre.const["s"] and view.tensor("x") is facts.tensor("x")


def test_identity_is_removed_unless_it_produces_a_graph_output(table):
    w = const("w", np.ones((4,), "float32"))
    model = make_model([helper.make_node("Identity", ["w"], ["w2"], name="share"),
                        helper.make_node("Add", ["x", "w2"], ["a"], name="add"),
                        helper.make_node("Identity", ["a"], ["y"], name="out")],
                       [("x", (1, 4))], ["y"], initializers=[w])
    facts = facts_from_model(model)
    pre = run_prepasses(facts, _with(table, "eliminate_identity"))
    assert set(pre.folded) == {0} and "no-op at inference" in pre.folded[0]
    assert pre.const["w2"].const  # the readers of a shared weight read a constant
    assert run_prepasses(facts, _with(table)).folded == {}


def test_dropout_whose_mask_is_read_stays(table):
    model = make_model([helper.make_node("Dropout", ["x"], ["d", "mask"], name="drop"),
                        helper.make_node("Cast", ["mask"], ["m"], name="cast", to=1),
                        helper.make_node("Mul", ["d", "m"], ["y"], name="mul")],
                       [("x", (1, 4))], ["y"], opset=13)
    pre = run_prepasses(facts_from_model(model), _with(table, "eliminate_identity"))
    assert 0 not in pre.folded


def test_constants_fold_but_random_ops_never_do(table):
    c = const("c", np.ones((1, 4), "float32"))
    model = make_model([helper.make_node("Relu", ["c"], ["rc"], name="relu_c"),
                        helper.make_node("RandomUniformLike", ["c"], ["noise"], name="noise"),
                        helper.make_node("Add", ["x", "rc"], ["a"], name="add"),
                        helper.make_node("Add", ["a", "noise"], ["y"], name="add_noise")],
                       [("x", (1, 4))], ["y"], initializers=[c])
    facts = facts_from_model(model)
    pre = run_prepasses(facts, _with(table, "fold_constants"))
    assert pre.folded == {0: "all inputs are constant: folded at compile time"}
    assert pre.const["rc"].const and "noise" not in pre.const
    assert run_prepasses(facts, _with(table, "fold_shape_ops")).folded == {}


@pytest.mark.parametrize("label,op,producer,reader", INT_LAYOUT)
def test_noop_layout_removes_a_layout_op_that_keeps_its_input_shape(toy_catalog, label, op, producer, reader):
    """eliminate_noop_layout (rknn-toolkit2 2.5.0, probes x.*.ctx=int_layout.*): a Reshape/Expand writing
    the input's own shape and a Flatten of a (1, T) tensor leave no layer row; an op that changes the shape
    stays, and so does one producing a graph output."""
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_layout",))
    facts = facts_from_model(_int_layout(op, producer, reader).build())
    folded = {facts.nodes[i].name: why for i, why in run_prepasses(facts, table).folded.items()}
    removed = "noop" in label or op == "Flatten"
    assert ("focus_layout" in folded) == removed, folded
    if removed:
        assert "keeps its input's shape [1, 16] is removed by the compiler" in folded["focus_layout"]
    output_only = facts_from_model(_int_layout(op, producer, "output").build())
    assert run_prepasses(output_only, table).folded == {}


@pytest.mark.parametrize("label,op,form,reader", INT_ARITH)
def test_rknn_noop_passes_remove_integer_no_ops(toy_catalog, label, op, form, reader):
    """eliminate_noop_add_mul and eliminate_noop_layout as rknn 2.5.0 runs them (probes x.*.ctx=int_arith.*):
    x + 0, x - 0, x * 1 (a (1,) or scalar constant, CLIP's argmax + 0) and a Slice that keeps the whole tensor
    leave no layer row; x + 2, an int64 x / 1 and a Slice that drops a column stay."""
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"),
                                prepasses=("fold_constants", "eliminate_noop_add_mul", "eliminate_noop_layout"))
    facts = facts_from_model(_int_arith(form, reader).build())
    folded = {facts.nodes[i].name for i in run_prepasses(facts, table).folded}
    removed = form in ("add0", "add0.scalar", "sub0", "mul1", "argmax_add0", "slice_all")
    assert ("focus_op" in folded) == removed, folded


def test_noop_layout_keeps_a_reversing_slice(toy_catalog):
    """A Slice with step -1 over the whole axis keeps the shape and moves the data: not removed."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(np.array([v], np.int64), n)
             for n, v in (("st", -1), ("en", -2 ** 62), ("ax", 1), ("sp", -1))]
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Slice", ["x", "st", "en", "ax", "sp"], ["s"], name="rev"),
         helper.make_node("Relu", ["s"], ["y"], name="act")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_layout",))
    assert run_prepasses(facts_from_model(m), table).folded == {}

def test_noop_layout_removes_a_tile_of_ones_and_says_its_readers_read_through_it(toy_catalog):
    """A Tile whose repeats are all 1 keeps its input's shape: removed like the other layout ops
    (x.Tile.ctx=broadcast.r[23].ones leave no layer row; JetMoE's key), and recorded as passed on, so the
    context rules look through it; a Tile that repeats an axis stays."""
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_layout",))
    for repeats, removed in (([1, 1, 1, 1], True), ([1, 2, 1, 1], False)):
        model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Tile", ["r", "reps"], ["t"], name="tile"),
                            helper.make_node("Relu", ["t"], ["y"], name="post")],
                           [("x", (1, 1, 8, 4))], ["y"], initializers=[const("reps", repeats, "int64")])
        pre = run_prepasses(facts_from_model(model), table)
        assert (1 in pre.folded) == removed and (1 in pre.passed_on) == removed, pre.folded


def test_noop_layout_removes_a_forward_slice_that_keeps_its_input_shape(toy_catalog):
    """x.Slice.ctx=noop.*: a stride over an axis of size 1 (LeViT's 1 x 1 map) leaves no row; a stride over a
    longer axis, and a reversing Slice (the same shape, but no copy), stay."""
    table = dataclasses.replace(toy_catalog.table("toy@1.0/soc-a"), prepasses=("eliminate_noop_layout",))
    for shape, step, removed in (((1, 1, 4, 8), 2, True), ((1, 2, 4, 8), 2, False), ((1, 1, 4, 8), -1, False)):
        start, end = (0, 2 ** 62) if step > 0 else (-1, -(2 ** 62))
        model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Slice", ["r", "s", "e", "a", "st"], ["t"], name="slice"),
                            helper.make_node("Relu", ["t"], ["y"], name="post")],
                           [("x", shape)], ["y"],
                           initializers=[const("s", [start], "int64"), const("e", [end], "int64"),
                                         const("a", [1 if step != -1 else 3], "int64"), const("st", [step], "int64")])
        pre = run_prepasses(facts_from_model(model), table)
        assert (1 in pre.folded) == removed, (shape, step, pre.folded)


def test_merge_parallel_casts_keeps_the_first_cast_of_a_type(toy_catalog):
    """merge_parallel_casts: Casts of one tensor to one type (float16 and float32 being one) go into the
    first in graph order; a Cast to another type, of another tensor, or writing a graph output stays."""
    from onnx import TensorProto

    nodes = [helper.make_node("Cast", ["ids"], ["b"], to=TensorProto.FLOAT, name="second_name_first"),
             helper.make_node("Cast", ["ids"], ["a"], to=TensorProto.FLOAT, name="a_cast"),
             helper.make_node("Cast", ["ids"], ["h"], to=TensorProto.FLOAT16, name="half"),
             helper.make_node("Cast", ["ids"], ["i"], to=TensorProto.INT32, name="int32"),
             helper.make_node("Cast", ["ids2"], ["c"], to=TensorProto.FLOAT, name="other_input"),
             helper.make_node("Cast", ["ids"], ["out"], to=TensorProto.FLOAT, name="graph_output")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.INT64, [1, 4]) for n in ("ids", "ids2")],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 4]) for n in ("c", "out")])
    facts = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    folded = {facts.nodes[i].name: why for i, why in
              run_prepasses(facts, _with(toy_catalog.table("toy@1.0/soc-a"), "merge_parallel_casts")).folded.items()}
    assert set(folded) == {"a_cast", "half"}, folded
    assert "identical to Cast 'second_name_first'" in folded["a_cast"]
    assert run_prepasses(facts, toy_catalog.table("toy@1.0/soc-a")).folded == {}


@pytest.mark.parametrize("form,merged", [("sub1_add2", True), ("add1_add2", True), ("sub1_cast_add2", True),
                                         ("sub1_add2_shared", False), ("sub1_mul2", False), ("add2", False)])
def test_fuse_constant_offsets_merges_an_offset_into_the_next(toy_catalog, form, merged):
    """fuse_constant_offsets (rknn 2.5.0, probes x.{Add,Sub}.ctx=int_arith.{add1,sub1}.*): an integer x - 1 read
    only (through a same-type Cast) by a + 2 is merged into it; a second reader or a Mul keeps it."""
    table = _with(toy_catalog.table("toy@1.0/soc-a"), "eliminate_identity", "fold_constants", "fuse_constant_offsets")
    facts = facts_from_model(_int_arith(form, "gather_idx").build())
    folded = {facts.nodes[i].name: why for i, why in run_prepasses(facts, table).folded.items()}
    assert ("focus_op" in folded) == merged, folded
    assert "post_add" not in folded
    if merged:
        assert "merged into it before placement" in folded["focus_op"]
