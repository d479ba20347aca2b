"""Constant folding (graph/fold.py) evaluates repeated shape arithmetic once: tiny onnx.helper graphs, no torch."""

from __future__ import annotations

import numpy as np
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.graph import facts_from_model, fold


def _layers(values: list[tuple[list[float], list[float]]], dtype: str = "int64") -> object:
    """One ``Add(a_k, b_k) -> Mul(., two)`` chain per (a, b) pair, each with initializers of its own
    (as every layer of an exported stack has)."""
    nodes, inits = [], [const("two", [2], dtype)]
    for k, (a, b) in enumerate(values):
        inits += [const(f"a{k}", a, dtype), const(f"b{k}", b, dtype)]
        nodes += [helper.make_node("Add", [f"a{k}", f"b{k}"], [f"s{k}"]),
                  helper.make_node("Mul", [f"s{k}", "two"], [f"m{k}"])]
    return make_model(nodes, [], [f"m{k}" for k in range(len(values))], inits)


def _folded(model, monkeypatch) -> tuple[dict, list]:
    calls: list = []
    evaluate = fold._evaluate

    def counted(node, known, opset_list):
        calls.append(node.output[0])
        return evaluate(node, known, opset_list)

    monkeypatch.setattr(fold, "_evaluate", counted)
    small = fold._small_initializers(model.graph)
    return fold._fold_small_constants(model, {"ai.onnx": 17}, small), calls


def test_equal_layers_are_evaluated_once_with_every_output_folded(monkeypatch):
    model = _layers([([1, 2], [3, 4])] * 3)
    out, calls = _folded(model, monkeypatch)
    assert calls == ["s0", "m0"]  # layers 1 and 2 reuse layer 0's evaluations
    for k in range(3):
        assert out[f"s{k}"].tolist() == [4, 6] and out[f"m{k}"].tolist() == [8, 12]
    facts = facts_from_model(model)
    assert [facts.tensors[f"m{k}"].value for k in range(3)] == [(8, 12)] * 3


def test_different_values_and_dtypes_are_evaluated_apart(monkeypatch):
    model = _layers([([1, 2], [3, 4]), ([1, 2], [3, 5]), ([1, 2], [3, 4])])
    out, calls = _folded(model, monkeypatch)
    assert calls == ["s0", "m0", "s1", "m1"]
    assert [out[f"m{k}"].tolist() for k in range(3)] == [[8, 12], [8, 14], [8, 12]]
    # float32 1.0 and int32 1065353216 have the same bytes: equal bytes of another dtype are another value
    bits = int(np.array([1.0], dtype="float32").view("int32")[0])
    for dtype, a, b in (("float32", [1.0], [1.0]), ("int32", [bits], [0])):
        out, calls = _folded(_layers([(a, b)], dtype), monkeypatch)
        assert out["s0"].dtype == np.dtype(dtype) and calls == ["s0", "m0"]


def test_attributes_are_part_of_what_is_shared(monkeypatch):
    inits = [const("x", [[1, 2], [3, 4]], "int64"), const("i", [0], "int64")]
    nodes = [helper.make_node("Gather", ["x", "i"], ["g0"], axis=0),
             helper.make_node("Gather", ["x", "i"], ["g1"], axis=1),
             helper.make_node("Gather", ["x", "i"], ["g2"], axis=0)]
    out, calls = _folded(make_model(nodes, [], ["g0", "g1", "g2"], inits), monkeypatch)
    assert calls == ["g0", "g1"]
    assert out["g0"].tolist() == out["g2"].tolist() == [[1, 2]] and out["g1"].tolist() == [[1], [3]]


def _constants(values: list[tuple[list, str]]) -> object:
    """One Constant node per (values, dtype), each read by an Identity (as every layer's shape
    arithmetic repeats its constants)."""
    nodes = []
    for k, (v, dtype) in enumerate(values):
        nodes += [helper.make_node("Constant", [], [f"c{k}"], value=const(f"v{k}", v, dtype)),
                  helper.make_node("Identity", [f"c{k}"], [f"y{k}"])]
    return make_model(nodes, [], [f"y{k}" for k in range(len(values))])


def test_equal_constants_are_read_once_and_shared(monkeypatch):
    read: list = []
    constant_value = fold._constant_value

    def counted(attributes, np_module):
        read.append(attributes[0].t.name)
        return constant_value(attributes, np_module)

    monkeypatch.setattr(fold, "_constant_value", counted)
    # the tensor's name is part of the attribute bytes: equal values under one name, as exporters write
    model = _constants([([1, 2], "int64")] * 3)
    for k, n in enumerate(model.graph.node[::2]):
        n.attribute[0].t.name = "v"
    out, _ = _folded(model, monkeypatch)
    assert read == ["v"]  # the second and third Constants reuse the first one's array
    assert out["c0"] is out["c1"] is out["c2"] and out["c0"].tolist() == [1, 2]
    facts = facts_from_model(model)
    assert [facts.tensors[f"c{k}"].value for k in range(3)] == [(1, 2)] * 3
    assert {facts.tensors[f"c{k}"].dtype for k in range(3)} == {"int64"}


def test_constants_differing_in_value_or_dtype_are_read_apart(monkeypatch):
    bits = int(np.array([1.0], dtype="float32").view("int32")[0])
    model = _constants([([1, 2], "int64"), ([1, 3], "int64"), ([1.0], "float32"), ([bits], "int32")])
    for n in model.graph.node[::2]:
        n.attribute[0].t.name = "v"
    out, _ = _folded(model, monkeypatch)
    assert [out[f"c{k}"].tolist() for k in range(4)] == [[1, 2], [1, 3], [1.0], [bits]]
    assert [str(out[f"c{k}"].dtype) for k in range(4)] == ["int64", "int64", "float32", "int32"]
    facts = facts_from_model(model)
    assert [facts.tensors[f"c{k}"].dtype for k in range(4)] == ["int64", "int64", "float32", "int32"]
    assert [facts.tensors[f"c{k}"].value for k in range(4)] == [(1, 2), (1, 3), (1.0,), (bits,)]


def test_a_repeated_evaluation_hands_out_the_arrays_kept_the_first_time(monkeypatch):
    made: list = []
    one = fold._Values.one

    def counted(self, value):
        made.append(value)
        return one(self, value)

    monkeypatch.setattr(fold._Values, "one", counted)
    model = _layers([([1, 2], [3, 4])] * 3)
    small = fold._small_initializers(model.graph)
    out = fold._fold_small_constants(model, {"ai.onnx": 17}, small)
    # the initializers, then layer 0's two results: layers 1 and 2 take layer 0's arrays as they are
    assert len(made) == len(small) + 2
    assert out["s0"] is out["s1"] is out["s2"] and out["m0"] is out["m2"]
    assert [out[f"m{k}"].tolist() for k in range(3)] == [[8, 12]] * 3


def test_shapes_read_by_shape_nodes_come_from_the_names_the_caller_read():
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Shape", ["r"], ["s"])]
    model = make_model(nodes, [("x", [2, 3])], ["s"])
    model.graph.value_info.append(helper.make_tensor_value_info("r", 1, [2, 3]))
    expected = fold._fold_small_constants(model, {"ai.onnx": 17}, {})
    vi = model.graph.value_info[0]
    given = fold._fold_small_constants(model, {"ai.onnx": 17}, {}, value_infos=[("r", None, vi)])
    assert expected["s"].tolist() == given["s"].tolist() == [2, 3]
    # the names given are the ones looked up (the ValueInfoProto's own name is not read again)
    assert "s" not in fold._fold_small_constants(model, {"ai.onnx": 17}, {}, value_infos=[("other", None, vi)])


def test_a_value_info_shared_by_several_names_gives_each_its_shape():
    """The child's model gives one ValueInfoProto per distinct type to every name of that type
    (build._value_infos_serialized): each is read once, and each Shape node gets its input's dims."""
    from onnx import TensorProto

    nodes = [helper.make_node("Shape", [x], [f"{x}_shape"]) for x in ("a", "b", "c")]
    model = make_model(nodes, [("a", (2, 3)), ("b", (2, 3)), ("c", (5,))], ["a_shape", "b_shape", "c_shape"])
    wide = helper.make_tensor_value_info("", TensorProto.FLOAT, [2, 3])
    narrow = helper.make_tensor_value_info("", TensorProto.FLOAT, [5])
    dynamic = helper.make_tensor_value_info("", TensorProto.FLOAT, ["n"])
    infos = [("a", b"", wide), ("b", b"", wide), ("c", b"", narrow), ("d", b"", dynamic)]
    del model.graph.input[:]  # the shapes come from the value_infos given
    out = fold._fold_small_constants(model, {"ai.onnx": 17}, {}, value_infos=infos)
    assert out["a_shape"].tolist() == [2, 3] and out["b_shape"].tolist() == [2, 3]
    assert out["c_shape"].tolist() == [5]


def test_the_outputs_of_every_constant_node_are_collected_for_refine():
    """``constant_outputs``: every Constant node's outputs, of the default domain or another (the
    set propagate.refine built from the rows before), folded or not."""
    from onnx import numpy_helper

    one = numpy_helper.from_array(np.array([1], dtype=np.int64), "v")
    big = numpy_helper.from_array(np.zeros(100, dtype=np.float32), "v")
    nodes = [helper.make_node("Constant", [], ["a"], value=one),
             helper.make_node("Constant", [], ["b"], value=big),
             helper.make_node("Constant", [], ["c"], domain="custom.x"),
             helper.make_node("Add", ["a", "a"], ["d"])]
    model = make_model(nodes, [("x", (1,))], ["d"])
    model.opset_import.append(helper.make_opsetid("custom.x", 1))
    seen: set[str] = set()
    out = fold._fold_small_constants(model, {"ai.onnx": 17, "custom.x": 1}, {}, constant_outputs=seen)
    assert seen == {"a", "b", "c"} and "d" in out


def test_the_nodes_the_pre_passes_may_fold_are_found_by_names():
    """``foldable``: the positions of the nodes prepass._fold may fold, whatever is evaluated here: a
    Constant (of the default domain), a Shape, a node without inputs, one reading only names that may
    be constants (a large initializer: no value here), an Identity, Cast or Dropout passing one on
    (a Dropout's ratio computed); not a node reading the graph input, nor another domain's node."""
    big = const("w", np.zeros((40, 40), dtype=np.float32))
    nodes = [helper.make_node("Constant", [], ["k"], value=const("v", [2], "int64")),        # 0
             helper.make_node("Transpose", ["w"], ["wt"]),                                     # 1: large
             helper.make_node("Relu", ["x"], ["r"]),                                           # 2: no
             helper.make_node("Shape", ["r"], ["s"]),                                          # 3
             helper.make_node("Mul", ["wt", "k"], ["m"]),                                      # 4
             helper.make_node("Add", ["r", "k"], ["a"]),                                       # 5: no
             helper.make_node("Neg", ["r"], ["ratio"]),                                        # 6: no
             helper.make_node("Dropout", ["m", "ratio"], ["d"]),                               # 7
             helper.make_node("Cast", ["d"], ["c"], to=1),                                     # 8
             helper.make_node("Identity", ["s"], ["i"]),                                       # 9
             helper.make_node("Mystery", ["k"], ["q"], domain="custom.x"),                     # 10: no
             helper.make_node("Identity", ["q"], ["iq"]),                                      # 11: no
             helper.make_node("ConstantOfShape", [], ["z"])]                                   # 12
    model = make_model(nodes, [("x", (2, 3))], ["a", "c", "i", "iq", "z"], [big])
    model.opset_import.append(helper.make_opsetid("custom.x", 1))
    may: list[int] = []
    fold._fold_small_constants(model, {"ai.onnx": 17, "custom.x": 1}, fold._small_initializers(model.graph),
                               foldable=may)
    assert may == [0, 1, 3, 4, 7, 8, 9, 12]


def test_facts_publish_the_foldable_nodes_only_without_bodies():
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Relu", ["x"], ["y"])]
    assert facts_from_model(make_model(nodes, [("x", (2, 3))], ["s", "y"])).foldable == (0,)
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "b", [],
                             [helper.make_tensor_value_info("o", 1, None)])
    branch = [helper.make_node("If", ["cond"], ["y"], then_branch=body, else_branch=body)]
    facts = facts_from_model(make_model(branch, [("x", (2, 3)), ("cond", ())], ["y"]))
    assert facts.foldable is None


def test_unkept_names_the_nodes_evaluated_whose_outputs_were_not_kept():
    from onnx import TensorProto

    nodes = [helper.make_node("Add", ["a0", "b0"], ["s"]),  # kept
             helper.make_node("ConstantOfShape", ["big"], ["zeros"],  # too large to keep
                              value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])),
             helper.make_node("Relu", ["x"], ["r"])]  # an input without a value: not evaluated
    model = make_model(nodes, [("x", (2,))], ["s", "zeros", "r"],
                       [const("a0", [1], "int64"), const("b0", [2], "int64"), const("big", [64, 64, 64], "int64")])
    unkept: list = []
    out = fold._fold_small_constants(model, {"ai.onnx": 17}, fold._small_initializers(model.graph), unkept=unkept)
    assert "s" in out and "zeros" not in out
    assert set(unkept) == {1}
