"""Graph facts and pre-passes on real ONNX files."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from conftest import const, make_model

from pytest_npucheck.errors import ModelError
from pytest_npucheck.graph import DYNAMIC_DIM, load_graph


def test_facts_opsets_attrs_defaults_shapes(save):
    m = make_model([helper.make_node("MaxPool", ["x"], ["y"], name="mp", kernel_shape=[2, 2])],
                   [("x", ("batch", 3, 8, 8))], ["y"], opset=18)
    g = load_graph(save(m))
    assert g.opsets == {"ai.onnx": 18}
    [n] = g.nodes
    assert n.attrs["kernel_shape"] == [2, 2]
    assert n.attrs["ceil_mode"] == 0 and n.attrs["auto_pad"] == "NOTSET"  # defaults filled
    assert n.explicit_attrs == frozenset({"kernel_shape"})
    assert g.tensor("x").shape == ("batch", 3, 8, 8) and g.tensor("x").symbolic_dims == ["batch"]
    assert g.tensor("y").shape == ("batch", 3, 7, 7)
    assert g.tensor("y").dtype == "float32"


def test_unknown_dims_are_none_not_symbolic(save):
    m = make_model([helper.make_node("Reshape", ["x", "s"], ["y"], name="r")], [("x", (2, 8))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("s", TensorProto.INT64, [2]))
    g = load_graph(save(m))
    shape = g.tensor("y").shape
    # not ONNX's invented names (unk__0): dynamic, since the shape input is a graph input's values
    assert shape is not None and all(d == DYNAMIC_DIM for d in shape)


def test_small_constants_keep_values_large_ones_do_not(save):
    m = make_model([helper.make_node("Add", ["x", "a"], ["y"]), helper.make_node("Add", ["y", "big"], ["z"])],
                   [("x", (100,))], ["z"], [const("a", [1.0] * 100), const("big", np.ones(100))])
    m.graph.initializer[0].CopyFrom(const("a", [2.0]))
    g = load_graph(save(m))
    assert g.tensor("a").const and g.tensor("a").value == (2.0,)
    assert g.tensor("big").const and g.tensor("big").value is None


def test_external_data_is_not_loaded(tmp_path):
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [("x", (1024,))], ["y"],
                   [const("w", np.ones(1024))])
    path = tmp_path / "ext.onnx"
    onnx.save(m, path, save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
    (tmp_path / "w.bin").unlink()  # the static check must not need the weights
    g = load_graph(path)
    assert g.tensor("w").const and g.tensor("w").shape == (1024,)
    assert g.tensor("y").shape == (1024,)


def test_subgraph_nodes_are_included(save):
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner_relu")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="inner_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
                   [("x", (1, 4))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    g = load_graph(save(m))
    names = {n.name: n for n in g.nodes}
    assert names["inner_relu"].graph == "branch/then_branch"
    assert names["inner_neg"].graph == "branch/else_branch"
    assert sorted(names["branch"].subgraphs) == ["branch/else_branch", "branch/then_branch"]


def test_subgraph_nodes_are_judged(judge):
    then_g = helper.make_graph([helper.make_node("Sin", ["x"], ["t"], name="inner_sin")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Relu", ["x"], ["e"], name="inner_relu")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    m = make_model([helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_g, else_branch=else_g)],
                   [("x", (1, 4))], ["y"])
    m.graph.input.append(helper.make_tensor_value_info("c", TensorProto.BOOL, []))
    r = judge(m)
    assert r["branch"].verdict == "cpu"
    assert r["inner_sin"].verdict == "unsupported" and r["inner_sin"].graph == "branch/then_branch"
    assert r["inner_relu"].verdict == "npu"


@pytest.mark.parametrize("content,fragment", [
    (b"", "empty file"),
    (b"\x00\x01garbage" * 50, "not a readable ONNX model"),
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 1\n", "Git LFS pointer"),
])
def test_bad_files_name_the_file(tmp_path, content, fragment):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(ModelError) as info:
        load_graph(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_truncated_model(tmp_path, save):
    m = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1, 4))], ["y"], [const("w", np.ones(512))])
    data = save(m).read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ModelError, match="cut.onnx"):
        load_graph(path)


def test_no_nodes_and_no_outputs(tmp_path, save):
    empty = helper.make_model(helper.make_graph([], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])]))
    with pytest.raises(ModelError, match="has no nodes"):
        load_graph(save(empty))
    noout = make_model([helper.make_node("Relu", ["x"], ["y"])], [("x", (1,))], [])
    with pytest.raises(ModelError, match="declares no outputs"):
        load_graph(save(noout))
    with pytest.raises(ModelError, match="cannot read"):
        load_graph(tmp_path / "missing.onnx")


# -- pre-passes ---------------------------------------------------------------------------------

def test_shape_subgraph_folds_away(judge):
    # Shape -> Gather -> Unsqueeze -> Concat -> Reshape: the shape arithmetic folds, Reshape stays
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "i0"], ["d0"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["d0", "ax"], ["d0u"], name="unsq"),
        helper.make_node("Concat", ["d0u", "minus1"], ["newshape"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "newshape"], ["y"], name="reshape"),
    ]
    m = make_model(nodes, [("x", (2, 3, 4))], ["y"],
                   [const("i0", 0, "int64"), const("ax", [0], "int64"), const("minus1", [-1], "int64")])
    r = judge(m)
    assert {k: v.verdict for k, v in r.items() if k != "__result__"} == {
        "relu": "npu", "shape": "folded", "gather": "folded", "unsq": "folded", "concat": "folded", "reshape": "npu"}
    assert r["__result__"].passed
    assert "folds to a constant" in r["shape"].reasons[0].message


def test_dynamic_shape_subgraph_does_not_fold(judge):
    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Reshape", ["x", "s"], ["y"], name="reshape")]
    r = judge(make_model(nodes, [("x", ("n", 4))], ["y"]))
    assert r["shape"].verdict == "cpu"  # Shape has only a CPU implementation in the toy table


def test_identity_and_constant_fold(judge):
    nodes = [helper.make_node("Identity", ["x"], ["i"], name="id"),
             helper.make_node("Constant", [], ["c"], name="k", value=helper.make_tensor("v", TensorProto.FLOAT, [1], [2.0])),
             helper.make_node("Mul", ["c", "c"], ["c2"], name="cmul"),
             helper.make_node("Add", ["i", "c2"], ["y"], name="add")]
    r = judge(make_model(nodes, [("x", (1, 4))], ["y"]))
    assert (r["id"].verdict, r["k"].verdict, r["cmul"].verdict, r["add"].verdict) == ("folded", "folded", "folded", "npu")


def test_conv_bn_fusion(judge):
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["y"], name="bn")]
    inits = [const("w", np.ones((4, 3, 1, 1))), const("b", np.zeros(4))] + [const(n, np.ones(4)) for n in ("s", "bb", "m", "v")]
    r = judge(make_model(nodes, [("x", (1, 3, 8, 8))], ["y"], inits))
    assert r["bn"].verdict == "folded" and "fused into Conv conv" in r["bn"].reasons[0].message


def gelu_nodes(prefix=""):
    return [helper.make_node("Div", ["x", "sqrt2"], [f"{prefix}d"], name=f"{prefix}div"),
            helper.make_node("Erf", [f"{prefix}d"], [f"{prefix}e"], name=f"{prefix}erf"),
            helper.make_node("Add", [f"{prefix}e", "one"], [f"{prefix}a"], name=f"{prefix}add"),
            helper.make_node("Mul", ["x", f"{prefix}a"], [f"{prefix}m"], name=f"{prefix}mul"),
            helper.make_node("Mul", [f"{prefix}m", "half"], [f"{prefix}y"], name=f"{prefix}mul2")]


GELU_INITS = [const("sqrt2", 1.4142135), const("one", 1.0), const("half", 0.5)]


def test_gelu_pattern_fuses_while_lone_erf_falls_back(judge):
    r = judge(make_model(gelu_nodes(), [("x", (1, 16))], ["y"], GELU_INITS))
    assert r["erf"].verdict == "npu" and "exGelu" in r["erf"].fused_into
    assert r["__result__"].passed
    lone = judge(make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [("x", (1, 16))], ["y"]))
    assert lone["erf"].verdict == "cpu"


def test_pattern_does_not_fuse_when_an_inner_output_escapes(judge):
    nodes = gelu_nodes() + [helper.make_node("Relu", ["e"], ["z"], name="tap")]
    r = judge(make_model(nodes, [("x", (1, 16))], ["y", "z"], GELU_INITS))
    assert r["erf"].verdict == "cpu" and r["erf"].fused_into is None


def test_tables_without_prepasses_do_not_fold(tmp_path, save):
    import json
    import shutil

    from conftest import TOY_TABLES
    from pytest_npucheck.check import check_file
    from pytest_npucheck.tables import Catalog

    root = tmp_path / "t"
    shutil.copytree(TOY_TABLES, root)
    p = root / "toy" / "1.0" / "soc-a.json"
    d = json.loads(p.read_text())
    d["prepasses"] = []
    p.write_text(json.dumps(d))
    nodes = [helper.make_node("Identity", ["x"], ["y"], name="id")]
    [res] = check_file(save(make_model(nodes, [("x", (1, 4))], ["y"])), ["toy@1.0"], Catalog.discover([root]))
    assert res.nodes[0].verdict == "npu"


FAST_CASES = [
    ("Add", [np.array([1, 2], "int64"), np.array([3], "int64")], {}),
    ("Sub", [np.array([1.5], "float32"), np.array([3.0], "float32")], {}),
    ("Mul", [np.array([2, 3], "int64"), np.array([4, 5], "int64")], {}),
    ("Div", [np.array([-7, 7], "int64"), np.array([2, 2], "int64")], {}),
    ("Div", [np.array([1.0], "float32"), np.array([3.0], "float32")], {}),
    ("Unsqueeze", [np.array(5, "int64"), np.array([0], "int64")], {}),
    ("Squeeze", [np.array([[5]], "int64"), np.array([0, 1], "int64")], {}),
    ("Concat", [np.array([1], "int64"), np.array([2, 3], "int64")], {"axis": 0}),
    ("Gather", [np.array([4, 5, 6], "int64"), np.array(1, "int64")], {"axis": 0}),
    ("Cast", [np.array([1.7, -2.2], "float32")], {"to": TensorProto.INT64}),
    ("Reshape", [np.arange(6, dtype="int64").reshape(2, 3), np.array([0, -1, 1], "int64")], {}),
    ("Slice", [np.arange(10, dtype="int64"), np.array([1], "int64"), np.array([2**62], "int64"),
               np.array([0], "int64"), np.array([2], "int64")], {}),
    ("Slice", [np.arange(10, dtype="int64"), np.array([-3], "int64"), np.array([-1], "int64")], {}),
    ("Sqrt", [np.array([4.0, 2.0], "float32")], {}),
    ("Mod", [np.array([-7, 7], "int64"), np.array([3, -3], "int64")], {}),
    ("Equal", [np.array([1, 2], "int64"), np.array([1, 3], "int64")], {}),
    ("Where", [np.array([True, False]), np.array([1, 2], "int64"), np.array([3, 4], "int64")], {}),
    ("ConstantOfShape", [np.array([2, 2], "int64")], {"value": helper.make_tensor("v", TensorProto.INT64, [1], [7])}),
    ("Constant", [], {"value": helper.make_tensor("v", TensorProto.FLOAT, [2], [1.0, 2.0])}),
    ("Constant", [], {"value_ints": [1, 2, 3]}),
]


@pytest.mark.parametrize("op,args,attrs", FAST_CASES, ids=lambda v: v if isinstance(v, str) else "")
def test_fast_folding_matches_onnx_reference(op, args, attrs):
    from onnx.reference import ReferenceEvaluator

    from pytest_npucheck.graph.fold import _fast_eval

    names = [f"i{k}" for k in range(len(args))]
    node = helper.make_node(op, names, ["out"], **attrs)
    fast = _fast_eval(node, list(args))
    assert fast is not None, f"{op} should have a fast path"
    inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape) for n, a in zip(names, args)]
    model = helper.make_model(helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("out")]),
                              opset_imports=[helper.make_opsetid("", 17)])
    [expected] = ReferenceEvaluator(model).run(None, dict(zip(names, args)))
    assert fast[0].dtype == expected.dtype and fast[0].shape == expected.shape
    np.testing.assert_array_equal(fast[0], expected)


def test_the_package_names_are_the_modules_objects_and_an_unknown_name_is_an_attribute_error():
    import importlib

    import pytest_npucheck.graph as graph

    assert set(graph._SOURCES) == set(graph.__all__)
    for name, module in graph._SOURCES.items():
        assert getattr(graph, name) is getattr(importlib.import_module(f"pytest_npucheck.graph.{module}"), name)
    assert set(graph.__all__) <= set(dir(graph))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        graph.nope  # noqa: B018
    assert not hasattr(graph, "_nope")
