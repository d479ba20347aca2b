"""graph/build.py: the NodeFacts of one signature share what the signature decides; tiny onnx.helper graphs, no torch."""

from __future__ import annotations

from onnx import TensorProto, helper

from conftest import make_model

from pytest_npucheck.graph import facts_from_model


def _softmaxes(*axes: int, op: str = "Softmax") -> object:
    nodes = [helper.make_node(op, ["x" if k == 0 else f"y{k - 1}"], [f"y{k}"], name=f"/layer{k}/{op}", axis=a)
             for k, a in enumerate(axes)]
    return make_model(nodes, [("x", [2, 3])], [f"y{len(axes) - 1}"])


def test_nodes_of_one_signature_share_their_facts_and_keep_their_own():
    facts = facts_from_model(_softmaxes(1, 1, 1))
    a, b, c = facts.nodes
    assert a.attrs is b.attrs is c.attrs and a.attrs == {"axis": 1}
    assert a.explicit_attrs is b.explicit_attrs == frozenset({"axis"})
    assert a.defaults is b.defaults and a.key == b.key == "ai.onnx:Softmax" and a.opset == b.opset == 17
    # what is a node's own is its own
    assert [n.index for n in facts.nodes] == [0, 1, 2]
    assert [n.name for n in facts.nodes] == ["/layer0/Softmax", "/layer1/Softmax", "/layer2/Softmax"]
    assert [n.inputs for n in facts.nodes] == [("x",), ("y0",), ("y1",)]
    assert [n.outputs for n in facts.nodes] == [("y0",), ("y1",), ("y2",)]
    assert [n.source.module for n in facts.nodes] == ["layer0", "layer1", "layer2"]


def test_nodes_differing_in_one_field_do_not_share():
    facts = facts_from_model(_softmaxes(1, 0, 1))
    a, b, c = facts.nodes
    assert a.attrs is c.attrs and a.attrs is not b.attrs
    assert (a.attrs, b.attrs) == ({"axis": 1}, {"axis": 0})
    # another op with the same attribute bytes
    model = _softmaxes(1, 1)
    model.graph.node[1].op_type = "LogSoftmax"
    first, second = facts_from_model(model).nodes
    assert first.attrs is not second.attrs and (first.key, second.key) == ("ai.onnx:Softmax", "ai.onnx:LogSoftmax")
    # an attribute set explicitly to its default is not the default left out
    model = make_model([helper.make_node("Softmax", ["x"], ["y0"]),
                        helper.make_node("Softmax", ["y0"], ["y1"], axis=-1)], [("x", [2, 3])], ["y1"])
    left_out, explicit = facts_from_model(model).nodes
    assert left_out.attrs == explicit.attrs == {"axis": -1}
    assert left_out.explicit_attrs == frozenset() and explicit.explicit_attrs == frozenset({"axis"})


def test_a_node_with_a_body_is_followed_by_its_body_and_the_graph_goes_on():
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"),
             helper.make_node("ReduceMax", ["x"], ["m"], name="max", keepdims=0),
             helper.make_node("Cast", ["m"], ["c"], name="cast", to=TensorProto.BOOL),
             helper.make_node("If", ["c"], ["b"], name="if", then_branch=then, else_branch=then),
             helper.make_node("Relu", ["b"], ["z"], name="r1")]
    facts = facts_from_model(make_model(nodes, [("x", [2, 3])], ["z", "a"]))
    assert [(n.index, n.name, n.graph) for n in facts.nodes] == [
        (0, "r0", ""), (1, "max", ""), (2, "cast", ""), (3, "if", ""),
        (4, "inner", "if/else_branch"), (5, "inner", "if/then_branch"), (6, "r1", "")]  # attributes by name
    r0, inner, r1 = facts.nodes[0], facts.nodes[4], facts.nodes[6]
    assert r0.attrs is r1.attrs and r0.graph == r1.graph == "" and r0.subgraphs == r1.subgraphs == ()
    assert facts.nodes[3].subgraphs == ("if/else_branch", "if/then_branch") and inner.op_type == "Relu"
    assert facts.producer["z"] == 6 and facts.consumers["b"] == [6]


def test_the_walk_makes_the_producer_and_consumer_maps_as_graph_facts_would(monkeypatch):
    """graph.build fills GraphFacts.producer and .consumers as it adds each node (a body's nodes
    included), in the order GraphFacts.__post_init__ makes them from the nodes."""
    from pytest_npucheck.graph import GraphFacts, facts

    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner"),
                              helper.make_node("Add", ["t", "a"], ["u"], name="inner_add")], "then", [],
                             [helper.make_tensor_value_info("u", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"),
             helper.make_node("ReduceMax", ["x"], ["m"], name="max", keepdims=0),
             helper.make_node("Cast", ["m"], ["c"], name="cast", to=TensorProto.BOOL),
             helper.make_node("If", ["c"], ["b"], name="if", then_branch=then, else_branch=then),
             helper.make_node("Add", ["b", "a"], ["z"], name="add"),
             helper.make_node("Relu", ["x"], ["", "w"], name="odd")]
    given: list[bool] = []
    made = facts.GraphFacts.__post_init__
    monkeypatch.setattr(facts.GraphFacts, "__post_init__", lambda self: given.append(bool(self.producer)) or made(self))
    built = facts_from_model(make_model(nodes, [("x", [2, 3])], ["z", "a"]))
    assert given == [True]  # made by the walk, not by __post_init__
    fields = {k: getattr(built, k) for k in GraphFacts.__dataclass_fields__ if k not in ("producer", "consumers")}
    again = GraphFacts(**fields)
    assert list(built.producer.items()) == list(again.producer.items())
    assert list(built.consumers.items()) == list(again.consumers.items())
    assert built.consumers["a"] == [5, 7, 8] and built.consumers["x"] == [0, 1, 4, 6, 9] and built.producer["w"] == 9


class _InputsUnread:
    """A NodeFact whose inputs must not be read (only ``_mark_dynamic``'s walk reads them)."""

    def __init__(self, fact: object) -> None:
        self._fact = fact

    def __getattr__(self, name: str) -> object:
        if name == "inputs":
            raise AssertionError("the walk ran")
        return getattr(self._fact, name)


def test_mark_dynamic_leaves_a_graph_of_static_outputs_without_its_walk():
    from pytest_npucheck.graph.build import _all_static, _every_output_static, _mark_dynamic

    facts = facts_from_model(_softmaxes(1, 1, 1))
    tensors = dict(facts.tensors)
    assert _every_output_static(facts.nodes, tensors) and _all_static(facts.producer, tensors)
    wrapped = [_InputsUnread(n) for n in facts.nodes]
    assert _mark_dynamic(wrapped, tensors, facts.inputs) == frozenset() and tensors == facts.tensors
    # the outputs' names given (GraphFacts.producer's keys): the same answer without the nodes' loop
    assert _mark_dynamic(wrapped, tensors, facts.inputs, facts.producer) == frozenset() and tensors == facts.tensors
    # an output without a static shape, or a varying graph input: the walk runs and says the same as before
    model = _softmaxes(1, 1, 1)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_param = "batch"
    dynamic = facts_from_model(model)
    assert not _every_output_static(dynamic.nodes, dynamic.tensors)
    assert not _all_static(dynamic.producer, dynamic.tensors)
    assert dynamic.tensors["y2"].shape == ("batch", 3)  # symbolic dims pass through, as before
    missing = dict(facts.tensors)
    del missing["y1"]
    assert not _every_output_static(facts.nodes, missing) and not _all_static(facts.producer, missing)


def _inferred_bytes():
    """A model after shape inference (value_infos of two distinct types), as the isolated child returns it."""
    from pytest_npucheck.graph.build import infer_serialized

    shape = helper.make_tensor("shape", TensorProto.INT64, [2], [2, 2])
    model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                        helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape"),
                        helper.make_node("Shape", ["r"], ["s"], name="shape_of"),
                        helper.make_node("Cast", ["s"], ["f"], name="cast", to=TensorProto.FLOAT)],
                       [("x", (1, 4))], ["y", "f"])
    model.graph.initializer.append(shape)
    return infer_serialized(model.SerializeToString())


def test_the_childs_model_is_read_with_types_and_attributes_as_bytes():
    """``parse_types_serialized`` leaves each value_info's type and each node's attributes as their
    wire bytes and every other field as onnx parses it; the facts read from it equal those of the
    model onnx parses."""
    import onnx

    from pytest_npucheck.graph import Kept
    from pytest_npucheck.graph.build import from_inferred
    from pytest_npucheck.graph import protobuf
    from pytest_npucheck.graph.protobuf import as_node_proto, is_types_serialized, parse_types_serialized

    data = _inferred_bytes()
    whole = onnx.load_from_string(data)
    lite = parse_types_serialized(data)
    assert is_types_serialized(lite) and not is_types_serialized(whole)
    assert protobuf._lite_model_class(onnx) is type(lite)  # made again (a reload of the module): the same type
    assert [vi.name for vi in lite.graph.value_info] == [vi.name for vi in whole.graph.value_info]
    assert isinstance(lite.graph.value_info[0].type, bytes)
    types = [onnx.TypeProto.FromString(vi.type) for vi in lite.graph.value_info]
    assert types == [vi.type for vi in whole.graph.value_info]
    assert isinstance(lite.graph.node[3].attribute[0], bytes)  # Cast's "to"
    assert [as_node_proto(n) for n in lite.graph.node] == list(whole.graph.node)
    assert list(lite.graph.output) == list(whole.graph.output)
    assert (lite.ir_version, list(lite.opset_import)) == (whole.ir_version, list(whole.opset_import))
    model, kept = from_inferred(data)
    facts = facts_from_model(model, "m.onnx", kept, inferred=True)
    plain = Kept()
    plain.serialized = data
    reference = facts_from_model(whole, "m.onnx", plain, inferred=True)
    assert facts.nodes == reference.nodes and list(facts.tensors.items()) == list(reference.tensors.items())
    assert facts.tensors["s"].value == (1, 4) and facts.tensors["y"].shape == (2, 2)


def test_the_childs_model_is_read_alike_from_a_mapping_of_its_bytes():
    """``from_inferred`` of the read-only mapping ``isolate.call_mapped`` returns: the same model and
    facts as from the bytes, the mapping kept to answer the metadata question."""
    import mmap

    from pytest_npucheck.graph.build import from_inferred
    from pytest_npucheck.graph.protobuf import parse_types_serialized

    data = _inferred_bytes()
    with mmap.mmap(-1, len(data)) as buf:
        buf.write(data)
        model, kept = from_inferred(buf)
        assert kept.serialized is buf
        assert model == parse_types_serialized(data)
        assert parse_types_serialized(memoryview(data)) == model
        reference_model, reference_kept = from_inferred(data)
        facts = facts_from_model(model, "m.onnx", kept, inferred=True)
        reference = facts_from_model(reference_model, "m.onnx", reference_kept, inferred=True)
        assert facts.nodes == reference.nodes and list(facts.tensors.items()) == list(reference.tensors.items())
        del model, kept, facts


def test_the_childs_model_names_and_sources_its_nodes_as_the_file_does():
    """Read from the child's model (the names read with the rows, no exporter's metadata in its
    bytes), a node keeps its name, or gets one from its op and index, and its source is the module
    of a scope name, else none: as read from the model onnx parses."""
    import onnx

    from pytest_npucheck.graph import Kept
    from pytest_npucheck.graph.build import from_inferred, infer_serialized

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="/enc/layer0/Relu"),
             helper.make_node("Relu", ["a"], ["b"], name="plain"),
             helper.make_node("Relu", ["b"], ["c"]),
             helper.make_node("Relu", ["c"], ["d"], name="/enc/")]
    data = infer_serialized(make_model(nodes, [("x", [2, 3])], ["d"]).SerializeToString())
    model, kept = from_inferred(data)
    facts = facts_from_model(model, "m.onnx", kept, inferred=True)
    assert [n.name for n in facts.nodes] == ["/enc/layer0/Relu", "plain", "Relu_2", "/enc/"]
    assert [n.source and n.source.module for n in facts.nodes] == ["enc.layer0", None, None, ""]
    plain = Kept()
    plain.serialized = data
    assert facts.nodes == facts_from_model(onnx.load_from_string(data), "m.onnx", plain, inferred=True).nodes


def test_the_walk_tells_whether_the_nodes_are_in_topological_order():
    """GraphFacts.topological: True when no node reads what a later node computes, False when one
    does (a file whose nodes are out of order), None with a body (not told)."""
    import numpy as np
    from onnx import numpy_helper

    relu = helper.make_node("Relu", ["x"], ["a"], name="r")
    neg = helper.make_node("Neg", ["a"], ["y"], name="n")
    from pytest_npucheck import facts_cache

    ordered = facts_from_model(make_model([relu, neg], [("x", (1, 3))], ["y"]))
    unordered = facts_from_model(make_model([neg, relu], [("x", (1, 3))], ["y"]))
    assert (ordered.topological, unordered.topological) == (True, False)
    # kept by the facts cache; a document without it gives None (unknown)
    assert [facts_cache.from_json(facts_cache.to_json(f)).topological for f in (ordered, unordered)] == [True, False]
    old = facts_cache.to_json(ordered)
    del old["topological"]
    assert facts_cache.from_json(old).topological is None
    body = helper.make_graph([helper.make_node("Relu", ["x"], ["t"])], "b", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 3])])
    flag = helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(True), "c"))
    branch = helper.make_node("If", ["c"], ["y"], then_branch=body, else_branch=body)
    assert facts_from_model(make_model([flag, branch], [("x", (1, 3))], ["y"])).topological is None


def test_the_walk_s_decoded_types_are_refine_s_where_it_hands_them_on():
    """build._elem_and_dims gives propagate.refine the (elem type, dims) its own decoding gives for
    each TypeProto the walk decoded, and leaves out those of no dtype (refine decodes them)."""
    from pytest_npucheck.graph import build, propagate

    def tensor(elem, dims):
        return helper.make_tensor_type_proto(elem, dims)

    protos = [tensor(TensorProto.FLOAT, [1, "batch", None]), tensor(TensorProto.INT64, ["unk__12", "unk__x", 3]),
              tensor(TensorProto.BOOL, None), tensor(TensorProto.FLOAT16, []), tensor(0, [2]),
              helper.make_sequence_type_proto(tensor(TensorProto.FLOAT, [1]))]
    negative = tensor(TensorProto.FLOAT, [4])
    negative.tensor_type.shape.dim[0].dim_value = -1
    protos.append(negative)
    walked = {p.SerializeToString(): build._Builder._decode_type(p) for p in protos}
    handed = build._elem_and_dims(walked)
    assert len(handed) == 5  # elem type 0 and the sequence: refine's to decode
    for p in protos:
        raw = p.SerializeToString()
        if raw in handed:
            assert handed[raw] == propagate._decode(p)


def test_built_node_facts_are_slotted_node_facts_equal_to_constructed_ones():
    """The walk fills a NodeFactDraft per node and turns it into a NodeFact: no ``__dict__``, frozen,
    equal to the NodeFact the constructor makes of the same fields, the key kept through a copy,
    a pickle and ``dataclasses.replace``."""
    import copy
    import dataclasses
    import pickle

    import pytest

    from pytest_npucheck.graph import NodeFact

    facts = facts_from_model(_softmaxes(1, 2))
    for node in facts.nodes:
        assert type(node) is NodeFact and not hasattr(node, "__dict__")
        made = NodeFact(**{f.name: getattr(node, f.name) for f in dataclasses.fields(NodeFact)})
        assert made == node and made.key == node.key == "ai.onnx:Softmax"
        for again in (copy.copy(node), copy.deepcopy(node), pickle.loads(pickle.dumps(node))):
            assert again == node and again.key == node.key
        with pytest.raises(dataclasses.FrozenInstanceError):
            node.index = 5  # type: ignore[misc]
    assert dataclasses.replace(facts.nodes[0], op_type="LogSoftmax").key == "ai.onnx:LogSoftmax"
    assert "key" not in {f.name for f in dataclasses.fields(NodeFact)}  # no field: not compared, not in the cache


def test_propagation_may_be_moot_only_for_static_inputs_without_functions_foreign_ops_or_data_shapes():
    """graph.build.propagation_may_be_moot: the child's first half of the test for leaving data
    propagation out (the facts confirm the rest, check._all_static). Any dynamic input, local
    function, other domain, control flow or op whose shape comes from its data answers False."""
    from onnx import FunctionProto

    from pytest_npucheck.graph.build import propagation_may_be_moot

    def moot(model):
        return propagation_may_be_moot(model, model.SerializeToString())

    relu = [helper.make_node("Relu", ["x"], ["y"], name="relu")]
    assert moot(make_model(relu, [("x", (1, 4))], ["y"]))
    assert not moot(make_model(relu, [("x", ("N", 4))], ["y"]))
    assert not moot(make_model(relu, [("x", (1, None))], ["y"]))
    assert not moot(make_model(relu, [("x", None)], ["y"]))
    nonzero = make_model([helper.make_node("NonZero", ["x"], ["y"], name="nz")], [("x", (1, 4))], ["y"])
    assert not moot(nonzero)
    foreign = make_model(relu, [("x", (1, 4))], ["y"])
    foreign.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    assert not moot(foreign)
    with_function = make_model(relu, [("x", (1, 4))], ["y"])
    with_function.functions.append(FunctionProto(name="f", domain="local"))
    assert not moot(with_function)
    body = helper.make_graph([helper.make_node("Identity", ["x"], ["o"])], "body", [],
                             [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    branch = make_model([helper.make_node("If", ["c"], ["y"], name="if", then_branch=body, else_branch=body)],
                        [("c", ())], ["y"], dtype=TensorProto.BOOL)
    assert not moot(branch)


def test_built_tensor_infos_are_slotted_tensor_infos_equal_to_constructed_ones():
    """Every TensorInfo the walk makes (graph input, initializer, inferred values, Constant outputs,
    the second Constant of the same attributes from the first one's fields) is a slotted
    TensorInfo equal to the one the constructor makes of its fields, with the same ``static``,
    kept through a copy, a pickle, ``dataclasses.replace`` and the facts cache."""
    import copy
    import dataclasses
    import pickle

    import numpy as np
    import pytest

    from pytest_npucheck import facts_cache
    from pytest_npucheck.graph import TensorInfo

    value = helper.make_tensor("c", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    nodes = [helper.make_node("Constant", [], ["k0"], name="/a/Constant", value=value),
             helper.make_node("Constant", [], ["k1"], name="/b/Constant", value=value),
             helper.make_node("Add", ["x", "k0"], ["s0"], name="/a/Add"),
             helper.make_node("Add", ["s0", "w"], ["s1"], name="/b/Add"),
             helper.make_node("Mul", ["s1", "k1"], ["y"], name="/b/Mul")]
    w = helper.make_tensor("w", TensorProto.FLOAT, [3], np.ones(3, np.float32).tolist())
    facts = facts_from_model(make_model(nodes, [("x", ["n", 3])], ["y"], initializers=[w]))
    assert {"x", "w", "k0", "k1", "s0", "s1", "y"} <= set(facts.tensors)
    for name, info in facts.tensors.items():
        assert type(info) is TensorInfo and not hasattr(info, "__dict__"), name
        made = TensorInfo(**{f.name: getattr(info, f.name) for f in dataclasses.fields(TensorInfo)})
        assert made == info and hash(made) == hash(info) and repr(made) == repr(info)
        assert made.static == info.static == (info.shape is not None and all(isinstance(d, int) for d in info.shape))
        for again in (copy.copy(info), copy.deepcopy(info), pickle.loads(pickle.dumps(info))):
            assert again == info and again.static == info.static
        with pytest.raises(dataclasses.FrozenInstanceError):
            info.const = True  # type: ignore[misc]
    assert facts.tensors["k0"].value == facts.tensors["k1"].value == (1.0, 2.0, 3.0)
    assert not facts.tensors["x"].static and facts.tensors["w"].static
    assert dataclasses.replace(facts.tensors["w"], shape=("n",)).static is False
    assert "static" not in {f.name for f in dataclasses.fields(TensorInfo)}  # no field: not compared, not in the cache
    back = facts_cache.from_json(facts_cache.to_json(facts))
    assert back.tensors == facts.tensors
    assert {n: t.static for n, t in back.tensors.items()} == {n: t.static for n, t in facts.tensors.items()}


def test_the_walk_fills_main_nodes_by_op_as_the_cached_property_would():
    """graph.build hands GraphFacts.main_nodes_by_op the index it filled as it added each node
    (ops in the order of their first node, each op's nodes in graph order, the very NodeFacts);
    a graph with a body leaves it to the cached property (its body's nodes are left out)."""
    from pytest_npucheck.graph.facts import GraphFacts

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"),
             helper.make_node("Softmax", ["a"], ["b"], name="s0", axis=1),
             helper.make_node("Relu", ["b"], ["c"], name="r1"),
             helper.make_node("Softmax", ["c"], ["d"], name="s1", axis=0),
             helper.make_node("Relu", ["d"], ["y"], name="r2")]
    facts = facts_from_model(make_model(nodes, [("x", [2, 3])], ["y"]))
    published = facts.__dict__["main_nodes_by_op"]
    made = GraphFacts.main_nodes_by_op.func(facts)
    assert list(published) == list(made) == ["Relu", "Softmax"]
    assert [[n.name for n in v] for v in published.values()] == [["r0", "r1", "r2"], ["s0", "s1"]]
    assert all(a is b for op in made for a, b in zip(published[op], made[op]))
    assert facts.main_nodes_by_op is published
    # with a body: not published, made by the property from the main graph's nodes
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="inner")], "then", [],
                             [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2, 3])])
    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], name="max", keepdims=0),
             helper.make_node("Cast", ["m"], ["c"], name="cast", to=TensorProto.BOOL),
             helper.make_node("If", ["c"], ["b"], name="if", then_branch=then, else_branch=then),
             helper.make_node("Relu", ["b"], ["z"], name="r1")]
    nested = facts_from_model(make_model(nodes, [("x", [2, 3])], ["z"]))
    assert "main_nodes_by_op" not in nested.__dict__
    assert [n.name for n in nested.main_nodes_by_op["Relu"]] == ["r1"]
