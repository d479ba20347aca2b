"""Pre-passes on tiny onnx.helper graphs (no torch): what the compilers remove is never judged."""

from __future__ import annotations

from onnx import TensorProto, helper

from pytest_npucheck.check import check_graph
from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.tables import Catalog


def _mask_model(first_to: int):
    """An int64 mask cast (mask.long(): a Cast to int64 of an int64 tensor), then to float, times x."""
    nodes = [helper.make_node("Cast", ["mask"], ["m64"], name="cast_same", to=first_to),
             helper.make_node("Cast", ["m64"], ["mf"], name="cast_float", to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "mf"], ["y"], name="mul")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
                                       helper.make_tensor_value_info("mask", TensorProto.INT64, [1, 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _verdicts(model, target):
    [result] = check_graph(facts_from_model(model), [Catalog.discover().table(target)])
    return {n.name: n for n in result.nodes}


def test_a_cast_to_its_own_dtype_is_an_identity():
    for target in ("rknn@2.5.0/rk3588", "qnn@2.51/htp-v73"):
        nodes = _verdicts(_mask_model(TensorProto.INT64), target)
        assert nodes["cast_same"].verdict == "folded", (target, nodes["cast_same"].reasons)
        assert "Cast to int64, its input's own dtype, is removed" in nodes["cast_same"].reasons[0].message


def test_a_cast_that_changes_the_dtype_is_judged():
    nodes = _verdicts(_mask_model(TensorProto.INT32), "rknn@2.5.0/rk3588")
    assert nodes["cast_same"].verdict == "cpu"  # int64 -> int32 runs on the CPU (probed)
    assert [r.rule for r in nodes["cast_same"].reasons][0] == "dtype"


def test_a_removed_cast_passes_its_constant_on():
    """TorchScript writes int64 -> int64 Casts inside shape arithmetic: removing one must not stop
    the folding of what reads it (a Concat of the pads was judged by the int64 dtype rule)."""
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Cast", ["s"], ["s64"], name="cast_same", to=TensorProto.INT64),
             helper.make_node("Concat", ["s64", "tail"], ["target"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"], name="reshape")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          initializer=[helper.make_tensor("tail", TensorProto.INT64, [1], [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    nodes = _verdicts(m, "rknn@2.5.0/rk3588")
    assert {k: v.verdict for k, v in nodes.items()} == {"shape": "folded", "cast_same": "folded", "concat": "folded",
                                                        "reshape": "npu"}


def test_the_noop_passes_visit_the_main_graphs_nodes_of_their_ops_in_graph_order():
    """eliminate_noop_add_mul and eliminate_noop_layout visit only the ops they remove (prepass._main_nodes),
    interleaved ops in graph order, and never a body's node: x + 0 inside an If's branch stays."""
    from pytest_npucheck.prepass import run_prepasses

    zero, one = (helper.make_tensor(n, TensorProto.FLOAT, [1], [v]) for n, v in (("zero", 0.0), ("one", 1.0)))
    body = helper.make_graph([helper.make_node("Add", ["x", "zero"], ["b"], name="body_add")], "then", [],
                             [helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, 16])])
    nodes = [helper.make_node("Mul", ["x", "one"], ["m"], name="mul_one"),
             helper.make_node("Reshape", ["m", "shape"], ["r"], name="reshape_same"),
             helper.make_node("Add", ["r", "zero"], ["a"], name="add_zero"),
             helper.make_node("Relu", ["a"], ["h"], name="relu"),
             helper.make_node("Mul", ["h", "one"], ["y0"], name="mul_one_2"),
             helper.make_node("Relu", ["y0"], ["y1"], name="relu_2"),
             helper.make_node("If", ["cond"], ["y2"], name="if", then_branch=body, else_branch=body)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16]),
                                       helper.make_tensor_value_info("cond", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 16]) for o in ("y1", "y2")],
                          initializer=[zero, one, helper.make_tensor("shape", TensorProto.INT64, [2], [1, 16])])
    facts = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    pre = run_prepasses(facts, Catalog.discover().table("rknn@2.5.0/rk3588"))
    name = {n.index: n.name for n in facts.nodes}
    removed = [name[i] for i in pre.folded if name[i] not in ("zero", "one", "shape")]
    assert removed == ["mul_one", "add_zero", "mul_one_2", "reshape_same"]  # the arithmetic pass, then the layout pass
    assert "body_add" in name.values() and "body_add" not in removed


def _facts(nodes, inputs, outputs, initializer=()):
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
                          initializer=list(initializer))
    return facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))


def test_unused_nodes_go_from_the_last_reader_back_in_one_walk():
    """Without merged nodes the walk visits only the producers of removed nodes, highest index first
    (prepass._remove_unread): a chain read only by a folded Shape goes whole, last node first; a node
    with a second, kept reader stays."""
    from pytest_npucheck.prepass import PrepassResult, _eliminate_unused_nodes

    graph = _facts([helper.make_node("Relu", ["x"], ["a"], name="a"),
                    helper.make_node("Relu", ["a"], ["b"], name="b"),
                    helper.make_node("Shape", ["b"], ["s"], name="s"),
                    helper.make_node("Relu", ["x"], ["c"], name="c"),
                    helper.make_node("Shape", ["c"], ["t"], name="t"),
                    helper.make_node("Neg", ["c"], ["y"], name="neg")],
                   [("x", [2, 3])], ["y", "s", "t"])
    pre = PrepassResult(folded={2: "Shape of a static shape [2, 3] folds to a constant",
                                4: "Shape of a static shape [2, 3] folds to a constant"})
    _eliminate_unused_nodes(graph, pre)
    assert list(pre.folded) == [2, 4, 1, 0]  # b then a; c is read by the Neg too
    assert pre.folded[1] == pre.folded[0] == "read only by nodes removed before placement: removed too"


def test_fold_plan_reads_only_the_op():
    from pytest_npucheck.prepass import _FOLD_CONSTANT, _FOLD_INPUTS, _FOLD_SHAPE, _fold_plan
    from pytest_npucheck.tables import OpEntry

    graph = _facts([helper.make_node("Shape", ["x"], ["s"], name="s"),
                    helper.make_node("Constant", [], ["k"], name="k",
                                     value=helper.make_tensor("v", TensorProto.INT64, [1], [1])),
                    helper.make_node("NonZero", ["x"], ["nz"], name="nz"),
                    helper.make_node("RandomNormal", [], ["r"], name="r", shape=[2])],
                   [("x", [2, 3])], ["s", "k", "nz", "r"])
    shape, constant, nonzero, random = graph.nodes
    assert _fold_plan(shape, True, True, {}) == (_FOLD_SHAPE | _FOLD_INPUTS, None)
    assert _fold_plan(shape, False, True, {}) == (_FOLD_SHAPE, None)
    assert _fold_plan(shape, True, False, {}) == (_FOLD_INPUTS, None)
    assert _fold_plan(constant, True, True, {}) == (_FOLD_CONSTANT, None)
    assert _fold_plan(constant, False, True, {}) == (0, None)
    assert _fold_plan(random, True, True, {}) == (0, None)
    entry = OpEntry.__new__(OpEntry)
    object.__setattr__(entry, "not_folded", frozenset({"float32"}))
    assert _fold_plan(nonzero, True, True, {"ai.onnx:NonZero": entry}) == (_FOLD_INPUTS, frozenset({"float32"}))


def test_identical_nodes_are_told_apart_by_their_attributes():
    """Nodes with one op and the same inputs merge only when their attributes are equal too (the
    attributes are keyed once a second node has the op and inputs): the third Transpose merges into
    the first, the second, of another perm, stays."""
    from pytest_npucheck.prepass import PrepassResult, _merge_identical_nodes

    graph = _facts([helper.make_node("Transpose", ["x"], ["a"], name="a", perm=[1, 0]),
                    helper.make_node("Transpose", ["x"], ["b"], name="b", perm=[0, 1]),
                    helper.make_node("Transpose", ["x"], ["c"], name="c", perm=[1, 0]),
                    helper.make_node("Add", ["a", "b"], ["ab"], name="ab"),
                    helper.make_node("Add", ["ab", "c"], ["y"], name="y")],
                   [("x", [2, 2])], ["y"])
    pre = PrepassResult()
    _merge_identical_nodes(graph, pre)
    assert set(pre.merged.items()) in ({(2, 0)}, {(0, 2)}) and 1 not in pre.folded


def test_fold_visits_the_foldable_nodes_with_the_full_loops_result():
    """prepass._fold over GraphFacts.foldable (the facts' walk in topological order) folds what the
    loop over every node folds, in the same order: an Identity of a large weight passes it on, a
    Transpose of it folds, a Shape of a static tensor folds and so does the arithmetic on it; the
    graph input's readers stay. Without ``foldable`` (facts from elsewhere) every node is visited."""
    from dataclasses import replace

    import numpy as np
    from onnx import numpy_helper

    from pytest_npucheck.prepass import run_prepasses

    weight = numpy_helper.from_array(np.ones((40, 40), dtype=np.float32), "w")
    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "one")
    graph = _facts([helper.make_node("Identity", ["w"], ["wi"], name="wi"),
                    helper.make_node("Transpose", ["wi"], ["wt"], name="wt"),
                    helper.make_node("MatMul", ["x", "wt"], ["y"], name="mm"),
                    helper.make_node("Shape", ["y"], ["s"], name="s"),
                    helper.make_node("Add", ["s", "one"], ["t"], name="t"),
                    helper.make_node("Relu", ["y"], ["r"], name="r"),
                    helper.make_node("Cast", ["t"], ["tc"], name="tc", to=TensorProto.FLOAT),
                    helper.make_node("Identity", ["tc"], ["ti"], name="ti"),
                    helper.make_node("Add", ["r", "ti"], ["z"], name="z")],
                   [("x", [2, 40])], ["z"], [weight, one])
    assert graph.topological and graph.foldable is not None and 2 not in graph.foldable
    every = replace(graph, foldable=None)
    for target in ("rknn@2.5.0/rk3588", "qnn@2.51/htp-v73", "cann@8.5.0/ascend310p"):
        table = Catalog.discover().table(target)
        sparse, full = run_prepasses(graph, table), run_prepasses(every, table)
        assert list(sparse.folded.items()) == list(full.folded.items()), target
        assert list(sparse.const) == list(full.const) and sparse.const == full.const, target
        names = {graph.nodes[i].name for i in sparse.folded}
        assert names >= {"wi", "wt"} and "mm" not in names, target
        assert target.startswith("cann") or names >= {"s", "t"}, target  # cann folds no shapes


def test_constants_of_one_content_share_one_info_and_a_negative_zero_keeps_its_own():
    """_fold makes one const info per (dtype, shape, value) (PrepassResult.const), keyed by the value's
    identity: two Constants of 0.0 share theirs, one of -0.0 (equal to 0.0, and of the same hash) does
    not, and an Identity of a weight passes the weight's own info on."""
    from pytest_npucheck.prepass import run_prepasses

    def const(name, value):
        return helper.make_node("Constant", [], [name], name=f"make_{name}",
                                value=helper.make_tensor(f"v_{name}", TensorProto.FLOAT, [1], [value]))

    nodes = [const("a", 0.0), const("b", 0.0), const("c", -0.0),
             helper.make_node("Identity", ["w"], ["w2"], name="id_w"),
             helper.make_node("Add", ["x", "a"], ["xa"], name="add_a"),
             helper.make_node("Add", ["xa", "b"], ["xb"], name="add_b"),
             helper.make_node("Add", ["xb", "c"], ["xc"], name="add_c"),
             helper.make_node("Mul", ["xc", "w2"], ["y"], name="mul_w")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          initializer=[helper.make_tensor("w", TensorProto.FLOAT, [4], [1.0, 2.0, 3.0, 4.0])])
    graph = facts_from_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    pre = run_prepasses(graph, Catalog.discover().table("rknn@2.5.0/rk3588"))
    a, b, c = pre.const["a"], pre.const["b"], pre.const["c"]
    assert a.const and c.const and a.value == (0.0,) and str(c.value) == "(-0.0,)"
    if graph.tensors["a"].value is graph.tensors["b"].value:  # the facts share equal values
        assert a is b
    assert c is not a
    assert pre.const["w2"] is graph.tensors["w"]
