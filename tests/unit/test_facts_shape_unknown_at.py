"""GraphFacts.shape_unknown_at: the main-graph nodes where the checker lost a shape, asked first of the
distinct shapes so that a graph that lost none is not scanned node by node."""

from __future__ import annotations

from pytest_npucheck.graph.facts import GraphFacts, NodeFact, TensorInfo


def _node(index, name, inputs, outputs, graph=""):
    return NodeFact(index, name, "Relu", "ai.onnx", tuple(inputs), tuple(outputs), {}, frozenset(), {}, graph=graph)


def _facts(shapes, nodes):
    return GraphFacts("m.onnx", {"ai.onnx": 17}, 8, tuple(nodes),
                      {n: TensorInfo(n, "float32", s) for n, s in shapes.items()}, ("x",), ("z",), frozenset())


def test_a_graph_that_lost_no_shape_has_none():
    nodes = [_node(0, "a", ["x"], ["y"]), _node(1, "b", ["y"], ["z"])]
    assert _facts({"x": (1, 4), "y": (1, 4), "z": ("batch", "?")}, nodes).shape_unknown_at == ()


def test_the_node_that_lost_a_dim_or_a_rank_is_named_not_the_ones_after_it():
    nodes = [_node(0, "a", ["x"], ["y"]), _node(1, "b", ["y"], ["z"]), _node(2, "c", ["x"], ["w"]),
             _node(3, "body", ["x"], ["v"], graph="loop/body")]
    shapes = {"x": (1, 4), "y": (1, None), "z": (1, None), "w": None, "v": None}
    assert _facts(shapes, nodes).shape_unknown_at == ("a", "c")


def test_a_shape_that_cannot_be_hashed_is_still_looked_at():
    nodes = [_node(0, "a", ["x"], ["y"])]
    facts = _facts({"x": (1, 4), "y": (1, 4)}, nodes)
    facts.tensors["y"] = TensorInfo("y", "float32", [1, None])  # type: ignore[arg-type]
    assert facts.shape_unknown_at == ("a",)
