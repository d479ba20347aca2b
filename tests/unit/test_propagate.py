"""Shape arithmetic folds node by node (propagate.refine): tiny onnx.helper graphs, no torch."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper

from conftest import const, make_model

from pytest_npucheck.check import check_graph
from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.graph.propagate import predicted_numel
from pytest_npucheck.tables import Catalog


def _i64(name, values):
    return const(name, values, "int64")


def _window_view(x: str, prefix: str, out: str) -> list:
    """x (1, H, W, C) -> view(H // 4, 4, W // 4, -1) with H, W read from x.shape, and the floor
    division as TorchScript writes it (Div on int64): ONNX's data propagation does not evaluate Div."""
    p = prefix
    return [
        helper.make_node("Shape", [x], [f"{p}shape"]),
        helper.make_node("Gather", [f"{p}shape", "i1"], [f"{p}h"], axis=0),
        helper.make_node("Gather", [f"{p}shape", "i2"], [f"{p}w"], axis=0),
        helper.make_node("Div", [f"{p}h", "four"], [f"{p}hq"]),
        helper.make_node("Div", [f"{p}w", "four"], [f"{p}wq"]),
        helper.make_node("Concat", [f"{p}hq", "four", f"{p}wq", "minus1"], [f"{p}target"], axis=0),
        helper.make_node("Reshape", [x, f"{p}target"], [out], name=f"{p}reshape"),
    ]


def _pad_to_multiple(x: str, prefix: str, out: str) -> list:
    """F.pad of x (1, H, W, C) at the bottom so that H becomes a multiple of 4, the pads computed
    from x.shape with Mod (TorchScript: (4 - H % 4) % 4)."""
    p = prefix
    return [
        helper.make_node("Shape", [x], [f"{p}shape"]),
        helper.make_node("Gather", [f"{p}shape", "i1"], [f"{p}h"], axis=0),
        helper.make_node("Mod", [f"{p}h", "four"], [f"{p}r"]),
        helper.make_node("Sub", ["four", f"{p}r"], [f"{p}d"]),
        helper.make_node("Mod", [f"{p}d", "four"], [f"{p}extra"]),
        helper.make_node("Concat", ["zeros4", "zero1", f"{p}extra", "zeros2"], [f"{p}pads"], axis=0),
        helper.make_node("Pad", [x, f"{p}pads"], [out], name=f"{p}pad"),
    ]


_CONSTS = [_i64("i1", 1), _i64("i2", 2), _i64("four", [4]), _i64("minus1", [-1]),
           _i64("zeros4", [0, 0, 0, 0]), _i64("zero1", [0]), _i64("zeros2", [0, 0])]


def _two_stage_model():
    """pad -> window view -> relu -> (reshape back) -> pad -> window view: the second stage's shape
    arithmetic reads shapes the first stage's folded values decide."""
    nodes = (_pad_to_multiple("x", "a_", "xa") + _window_view("xa", "b_", "wa")
             + [helper.make_node("Relu", ["wa"], ["ra"], name="relu_a"),
                helper.make_node("Reshape", ["ra", "back"], ["xb"], name="back")]
             + _pad_to_multiple("xb", "c_", "xc") + _window_view("xc", "d_", "wc")
             + [helper.make_node("Relu", ["wc"], ["y"], name="relu_b")])
    return make_model(nodes, [("x", (1, 14, 16, 8))], ["y"], _CONSTS + [_i64("back", [1, 16, 16, 8])])


def test_onnx_inference_alone_leaves_the_window_shapes_unknown():
    # the premise of the walk: ONNX's data propagation stops at Mod/Div of shape values
    inferred = onnx.shape_inference.infer_shapes(_two_stage_model(), data_prop=True)
    dims = {vi.name: [d.dim_value if d.HasField("dim_value") else None for d in vi.type.tensor_type.shape.dim]
            for vi in inferred.graph.value_info}
    assert None in dims["xa"] and None in dims.get("wc", [None])


def test_shape_arithmetic_folds_stage_after_stage():
    g = facts_from_model(_two_stage_model())
    assert g.tensor("xa").shape == (1, 16, 16, 8)
    assert g.tensor("wa").shape == (4, 4, 4, 32)
    assert g.tensor("xc").shape == (1, 16, 16, 8)  # the second pad reads the first stage's shapes
    assert g.tensor("y").shape == (4, 4, 4, 32)
    assert g.tensor("d_target").value == (4, 4, 4, -1)
    assert g.shape_inference_error is None


def test_folded_shape_arithmetic_leaves_compute_nodes_judged_on_static_shapes():
    catalog = Catalog.discover()
    g = facts_from_model(_two_stage_model())
    for table in (catalog.table("rknn@2.5.0/rk3588"), catalog.table("qnn@2.51/htp-v73")):
        [result] = check_graph(g, [table])
        verdicts = {n.name: n.verdict for n in result.nodes}
        compute = ("a_pad", "b_reshape", "relu_a", "back", "c_pad", "d_reshape", "relu_b")
        assert {verdicts[n] for n in compute} == {"npu"}, [(n.name, n.verdict, n.reasons) for n in result.nodes
                                                          if n.name in compute]
        # every int64 node of the shape arithmetic folds: none is judged (no dtype, no static_shape)
        assert all(v == "folded" for name, v in verdicts.items() if name not in compute)


def test_a_large_constant_of_shape_is_typed_not_materialised():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["zeros"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Div", ["s", "ones"], ["same"]),
             helper.make_node("Reshape", ["x", "same"], ["y"], name="reshape")]
    m = make_model(nodes, [("x", (4, 512, 512))], ["y", "zeros"], [_i64("ones", [1, 1, 1])])
    g = facts_from_model(m)
    assert g.tensor("zeros").shape == (4, 512, 512) and g.tensor("zeros").value is None
    assert g.tensor("y").shape == (4, 512, 512)
    assert predicted_numel("ConstantOfShape", [np.array([4, 512, 512])]) == 4 * 512 * 512
    assert predicted_numel("Range", [np.array(0), np.array(10), np.array(3)]) == 4
    assert predicted_numel("Relu", [np.array([1.0])]) is None


# -- dynamic, or only unknown to the checker ------------------------------------------------------

def _judge(model, target="qnn@2.51/htp-v73"):
    [result] = check_graph(facts_from_model(model), [Catalog.discover().table(target)])
    return {n.name: n for n in result.nodes}, result


def test_a_dim_from_a_dynamic_input_is_dynamic_and_qnn_keeps_it_on_the_cpu():
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
             helper.make_node("Div", ["b", "two"], ["half"]),
             helper.make_node("Concat", ["half", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    m = make_model(nodes, [("x", ("batch", 8))], ["y"], [_i64("i0", [0]), _i64("two", [2]), _i64("minus1", [-1])])
    g = facts_from_model(m)
    assert g.tensor("y").shape[0] == "?"  # depends on the input's batch: dynamic, not unknown
    nodes, result = _judge(m)
    assert nodes["relu"].verdict == "cpu"
    assert [r.rule for r in nodes["relu"].reasons] == ["static_shape"]
    assert "is dynamic (?, ?)" in nodes["relu"].reasons[0].message


def test_a_data_dependent_shape_is_dynamic():
    nodes = [helper.make_node("NonZero", ["x"], ["idx"], name="nz"),
             helper.make_node("Transpose", ["idx"], ["t"], name="transpose", perm=[1, 0])]
    m = make_model(nodes, [("x", (4, 4))], ["t"])
    g = facts_from_model(m)
    assert g.tensor("t").shape == ("?", 2)
    nodes, _ = _judge(m)
    assert nodes["transpose"].verdict == "cpu" and nodes["transpose"].reasons[0].rule == "static_shape"


def _lost_rank_model():
    """Reshape to a shape a custom-domain op computes from x.shape: nothing in it varies at run time
    (the inputs are static), but neither ONNX nor the checker can evaluate the custom op."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Echo", ["s"], ["s2"], domain="com.example", name="echo"),
             helper.make_node("Reshape", ["x", "s2"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["r2"], name="relu"),
             helper.make_node("Softmax", ["r2"], ["y"], name="softmax", axis=-1)]
    m = make_model(nodes, [("x", (2, 8))], ["y"])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    return m


def test_a_shape_the_checker_cannot_infer_is_reported_as_such_and_does_not_cascade():
    g = facts_from_model(_lost_rank_model())
    assert g.tensor("r").shape is None and not g.dynamic_rank
    assert g.shape_unknown_at == ("reshape",)
    nodes, result = _judge(_lost_rank_model())
    # the downstream nodes are not called dynamic: nothing makes their shape vary
    for name in ("reshape", "relu", "softmax"):
        assert all(r.rule != "static_shape" for r in nodes[name].reasons), nodes[name].reasons
    assert nodes["relu"].verdict == nodes["softmax"].verdict == "npu"
    # a rule that needs the unknown rank says the checker could not work it out (its own id), and
    # that alone moves nothing off the NPU
    assert {r.rule for r in nodes["softmax"].reasons} == {"shape_unknown"}
    assert all("could not infer its rank" in r.message and r.verdict == "npu" for r in nodes["softmax"].reasons)
    assert any("could not infer the output shape of 1 node(s) (reshape)" in n for n in result.notes)


def test_a_dynamic_tensor_of_unknown_rank_is_still_dynamic():
    nodes = [helper.make_node("Reshape", ["x", "s"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    m = make_model(nodes, [("x", (2, 8)), ("s", None)], ["y"])
    m.graph.input[1].type.tensor_type.elem_type = TensorProto.INT64
    g = facts_from_model(m)
    assert g.tensor("r").shape is None and "r" in g.dynamic_rank
    nodes, _ = _judge(m)
    assert nodes["relu"].verdict == "cpu" and "has unknown shape (dynamic" in nodes["relu"].reasons[0].message


def test_when_whole_graph_inference_fails_the_walk_types_node_by_node(monkeypatch):
    """ONNX's inference of the whole graph can raise (the facts then had no shape at all, and every
    node was 'dynamic'): the walk visits every node and infers it on its own."""
    from pytest_npucheck.graph import build

    def failing(model, serialized=None):
        return model, "InferenceError: [ShapeInferenceError] simulated"

    monkeypatch.setattr(build, "_infer", failing)
    model = _two_stage_model()
    model.graph.node.append(helper.make_node("Sigmoid", ["x"], ["z"], name="apart"))  # reads no folded value
    model.graph.output.append(helper.make_empty_tensor_value_info("z"))
    g = facts_from_model(model)
    assert g.tensor("xa").shape == (1, 16, 16, 8) and g.tensor("y").shape == (4, 4, 4, 32)
    assert g.tensor("z").shape == (1, 14, 16, 8)
    assert g.shape_inference_error is None  # every shape was found after all


def test_the_quick_types_are_onnx_inference_s():
    """propagate.quick_type types the commonest ops without ONNX; it must say what ONNX says."""
    from onnx import defs, shape_inference

    from pytest_npucheck.graph.propagate import _decode, quick_type

    f, i64, b = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
    cases = [("Relu", [(f, (2, 3))], {}), ("Cast", [(f, (2, 3))], {"to": TensorProto.FLOAT16}),
             ("Add", [(f, (2, 1, 4)), (f, (3, 1))], {}), ("Mul", [(i64, ()), (i64, (5,))], {}),
             ("Where", [(b, (2, 1)), (f, (1, 3)), (f, (2, 3))], {}), ("Equal", [(f, (4, 1)), (f, (4, 6))], {}),
             ("Softmax", [(f, (2, 7))], {"axis": -1}), ("Clip", [(f, (3, 3)), (f, ()), (f, ())], {})]
    for op, ins, attrs in cases:
        names = [f"i{k}" for k in range(len(ins))]
        node = helper.make_node(op, names, ["o"], **attrs)
        types = {n: (e, s) for n, (e, s) in zip(names, ins)}
        in_types = {n: helper.make_tensor_type_proto(e, list(s)) for n, (e, s) in types.items()}
        onnx_says = shape_inference.infer_node_outputs(defs.get_schema(op, 17), node, in_types)["o"]
        assert quick_type(op, tuple(node.attribute), ("o",), tuple(names), types) == _decode(onnx_says), op
    # a broadcast that does not fit is left to ONNX
    assert quick_type("Add", (), ("o",), ("a", "b"),
                      {"a": (TensorProto.FLOAT, (2, 3)), "b": (TensorProto.FLOAT, (4,))}) is None


class _CountedSchema:
    """An OpSchema whose node inference is counted (the walk's one call into ONNX per question)."""

    def __init__(self, schema, calls):
        self.schema, self.calls = schema, calls

    def _infer_node_outputs(self, node_bytes, *args):
        self.calls.append(onnx.NodeProto.FromString(node_bytes).name)
        return self.schema._infer_node_outputs(node_bytes, *args)


def _inferred_apart(model, monkeypatch) -> tuple[object, list]:
    from pytest_npucheck.graph import propagate

    calls: list = []
    op_schema = propagate.op_schema
    monkeypatch.setattr(propagate, "op_schema", lambda *a: (s := op_schema(*a)) and _CountedSchema(s, calls))
    return facts_from_model(model), calls


def test_layers_asking_onnx_the_same_question_are_inferred_once(monkeypatch):
    # three window views of one input: their Reshapes see the same types and the same folded target
    nodes = [n for k in range(3) for n in _window_view("x", f"l{k}_", f"y{k}")]
    model = make_model(nodes, [("x", [1, 8, 12, 3])], ["y0", "y1", "y2"], _CONSTS)
    facts, calls = _inferred_apart(model, monkeypatch)
    assert calls == ["l0_reshape"]
    assert [facts.tensors[f"y{k}"].shape for k in range(3)] == [(2, 4, 3, 12)] * 3


def test_layers_differing_in_a_type_or_a_value_are_inferred_apart(monkeypatch):
    # another input shape (so another folded target), then the first one again
    nodes = (_window_view("x", "l0_", "y0") + _window_view("z", "l1_", "y1") + _window_view("x", "l2_", "y2"))
    model = make_model(nodes, [("x", [1, 8, 12, 3]), ("z", [1, 16, 12, 3])], ["y0", "y1", "y2"], _CONSTS)
    facts, calls = _inferred_apart(model, monkeypatch)
    assert calls == ["l0_reshape", "l1_reshape"]
    assert [facts.tensors[f"y{k}"].shape for k in range(3)] == [(2, 4, 3, 12), (4, 4, 3, 12), (2, 4, 3, 12)]


# -- the rows the walk visits -----------------------------------------------------------------------

def test_rows_to_visit_gives_the_positions_then_every_row_after_a_new_value():
    from pytest_npucheck.graph.propagate import _rows_to_visit

    rows = [("r0",), ("r1",), ("r2",), ("r3",), ("r4",), ("r5",)]
    known: dict = {"a": 1}
    assert list(_rows_to_visit(rows, [1, 3], known)) == [("r1",), ("r3",)]
    seen = []
    for row in _rows_to_visit(rows, [1, 3, 5], known):
        seen.append(row)
        if row == ("r1",):
            known["b"] = 2  # the walk found a value: a row after it may now be evaluated
    assert seen == [("r1",), ("r2",), ("r3",), ("r4",), ("r5",)]


def _with_and_without_visit(model, monkeypatch):
    """The facts of ``model`` with the walk's rows named (``visit``), and with every row walked."""
    import dataclasses

    from pytest_npucheck.graph import build, propagate

    given = []

    def spy(*args, **kwargs):
        given.append(kwargs.get("visit") is not None)
        return propagate.refine(*args, **kwargs)

    def every_row(*args, **kwargs):
        kwargs.pop("visit", None)
        return propagate.refine(*args, **kwargs)

    monkeypatch.setattr(build, "refine", spy)
    named = facts_from_model(model)
    monkeypatch.setattr(build, "refine", every_row)
    walked = facts_from_model(model)
    assert given == [True]
    for field in dataclasses.fields(named):
        a, b = getattr(named, field.name), getattr(walked, field.name)
        assert (list(a.items()) == list(b.items())) if isinstance(a, dict) else a == b, field.name
    return named


def test_the_rows_named_to_the_walk_give_the_facts_of_every_row_walked(monkeypatch):
    g = _with_and_without_visit(_two_stage_model(), monkeypatch)
    assert g.tensor("y").shape == (4, 4, 4, 32)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("ConstantOfShape", ["s"], ["zeros"], value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Div", ["s", "ones"], ["same"]),
             helper.make_node("Reshape", ["x", "same"], ["y"], name="reshape")]
    m = make_model(nodes, [("x", (4, 512, 512))], ["y", "zeros"], [_i64("ones", [1, 1, 1])])
    g = _with_and_without_visit(m, monkeypatch)
    assert g.tensor("zeros").shape == (4, 512, 512) and g.tensor("y").shape == (4, 512, 512)
