"""Is the model one ONNX Runtime would load at all? Checked before its nodes are judged.

A node can match every rule of a table and the model still be refused by every runtime: a Softmax
``axis=7`` on a rank-4 tensor, a graph output that no node produces, an attribute the operator does
not have (issue 27, item 19: such models passed ``npucheck check`` with exit 0). This module looks
for those with what is cheap: ``onnx.checker``'s node check (attribute names, types and required
attributes, input and output counts against the operator's schema) on the nodes of the main graph,
and the static facts (graph outputs produced, ``axis`` in range for the known rank of the input).
No ONNX Runtime session is created (the static check stays fast: benchmarks/run.py goal 1).
"""

from __future__ import annotations

from typing import Any, Optional

from .errors import ModelError
from .graph import GraphFacts, op_schema

_REFUSED = "ONNX Runtime would refuse to load the model"


def check_model(model: Any, facts: GraphFacts, path: object) -> None:
    """Raise ModelError naming the node (or the output) when ``model`` is not a valid ONNX model.

    ``model`` is the ModelProto the facts were read from (its large weights may be left out: the
    checks never read initializer values)."""
    _check_outputs(facts, path)
    axis_error = _check_nodes(model, facts, path)
    if axis_error is not None:
        raise ModelError(axis_error)


def _check_outputs(facts: GraphFacts, path: object) -> None:
    known = set(facts.inputs) | set(facts.initializers)
    for name in facts.outputs:
        if name not in facts.producer and name not in known:
            raise ModelError(f"{path}: graph output {name!r} is produced by no node and is neither a graph input "
                             f"nor an initializer; {_REFUSED}")


def _schema(op_type: str, opset: int, domain: str) -> Optional[Any]:
    """The operator's schema at this opset, or None (unknown op, custom domain: the matcher's to report)."""
    schema = op_schema(op_type, opset, domain)
    return None if schema is None or schema.deprecated else schema


def _check_nodes(model: Any, facts: GraphFacts, path: object) -> Optional[str]:
    """``onnx.checker``'s check of each main-graph node that has a schema and no subgraph (a body
    would need the outer scope's names, and its nodes are the matcher's to judge); returns what
    ``_axis_error`` says of the first node whose axis is out of range, if none fails the checker.

    The checker looks at the operator, its attribute names and types and its input and output
    counts, never at values: one node of each such signature is checked (a 9,000-node model has a
    few dozen), the rest would give the same answer. Facts that list the first node of each key
    the checker's signature depends on (``GraphFacts.first_of_signatures``) have those looked at
    alone (``_firsts_checked``), else every node (``_every_node_checked``). The axis error is
    kept until the checker has passed every node."""
    from onnx import checker

    protos = model.graph.node
    firsts = facts.first_of_signatures
    if firsts is not None and len(facts.nodes) == len(protos):
        checked, axis_error = _firsts_checked(facts, firsts, path)
    else:
        checked, axis_error = _every_node_checked(facts, path, len(protos))
    if not checked:
        return axis_error
    ctx = checker.C.CheckerContext()
    ctx.ir_version = model.ir_version
    ctx.opset_imports = {o.domain: o.version for o in model.opset_import}
    scope = checker.C.LexicalScopeContext()
    # the NodeProto of a node is read only for the first of its signature (a few dozen): iterating
    # the repeated field would make a wrapper object for each of the 26,394 nodes of encoder_26k
    # (a node of the isolated child's result is its bytes when the facts took the nodes read while
    # it ran: build.from_inferred)
    for position in checked:
        node = protos[position]
        try:
            checker.C.check_node(node if type(node) is bytes else node.SerializeToString(), ctx, scope)
        except Exception as exc:  # noqa: BLE001 - ValidationError; its text says what is wrong
            reason = str(exc).split("\n\n==> Context:")[0].strip()
            if type(node) is bytes:
                from onnx import NodeProto

                node = NodeProto.FromString(node)
            raise ModelError(f"{path}: node {node.name or '(unnamed)'!r} ({node.op_type}): {reason}; "
                             f"{_REFUSED}") from None
    return axis_error


def _signature(fact: Any, kinds: dict[tuple[int, int], tuple[tuple[str, str], ...]]) -> Optional[tuple[Any, ...]]:
    """What the checker looks at in a main-graph node (op, domain, opset, input and output counts,
    attribute names and kinds), or None for a node it is not asked about (a body, a Constant).
    graph.build shares one attributes dict (and one set of explicit names) between the nodes of an
    op with the same attributes: ``kinds`` holds their kinds by the pair's ids (the facts keep them alive)."""
    if fact.subgraphs or (fact.op_type == "Constant" and fact.domain in ("", "ai.onnx")):
        return None  # ONNX Runtime makes Constants initializers on load: it loads one with an extra attribute
    domain = "" if fact.domain == "ai.onnx" else fact.domain
    attrs = fact.explicit_attrs
    kind: Optional[tuple[tuple[str, str], ...]] = ()
    if attrs:
        kind = kinds.get((id(fact.attrs), id(attrs)))
        if kind is None:
            kind = kinds[id(fact.attrs), id(attrs)] = tuple(sorted((k, _kind(fact.attrs.get(k))) for k in attrs))
    return (fact.op_type, domain, fact.opset, len(fact.inputs), "" in fact.inputs, len(fact.outputs), kind)


def _new_signature(fact: Any, signature: Optional[tuple[Any, ...]], seen: set[tuple[Any, ...]]) -> bool:
    """Whether the checker is to be asked about this node: the first of its signature, with a schema."""
    if signature is None or signature in seen:  # checked, or skipped for want of a schema (op, domain
        return False  # and opset are in it)
    seen.add(signature)
    return bool(fact.opset) and _schema(fact.op_type, fact.opset, signature[1]) is not None


def _firsts_checked(facts: GraphFacts, firsts: tuple[int, ...], path: object) -> tuple[list[int], Optional[str]]:
    """``_check_nodes``' nodes to check and first axis error for facts whose nodes are all in the
    main graph, from ``GraphFacts.first_of_signatures``: the first node of each checker signature
    is the first of one of those keys (a few dozen of 26,394 nodes on ``encoder_26k``), and only
    the nodes of the ops with an explicit ``axis`` are read for the axis check."""
    nodes = facts.nodes
    seen: set[tuple[Any, ...]] = set()
    kinds: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}
    checked = [i for i in firsts if _new_signature(nodes[i], _signature(nodes[i], kinds), seen)]
    ops = {nodes[i].op_type for i in firsts if "axis" in nodes[i].explicit_attrs}
    if not ops:
        return checked, None
    # the first node in graph order whose axis is out of range: the first of each op's, then the earliest
    by_op = facts.main_nodes_by_op  # the pre-passes read it too (cached on the facts)
    errors = [e for e in (_first_axis_error(facts, by_op.get(op, ()), path) for op in ops) if e is not None]
    return checked, min(errors)[1] if errors else None


def _first_axis_error(facts: GraphFacts, nodes: Any, path: object) -> Optional[tuple[int, str]]:
    """(index, ``_axis_error``) of the first of ``nodes`` with an explicit ``axis`` out of range, or None."""
    for node in nodes:
        if "axis" in node.explicit_attrs:
            error = _axis_error(node, facts, path)
            if error is not None:
                return node.index, error
    return None


def _every_node_checked(facts: GraphFacts, path: object, count: int) -> tuple[list[int], Optional[str]]:
    """``_check_nodes``' nodes to check (their positions among main-graph nodes) and first axis
    error, from one pass over every node (none to check when the facts do not hold ``count``
    main-graph nodes). The axes are looked at in the same pass (each node's fields are read while
    it is at hand). Facts with ``first_of_signatures`` (every graph without bodies that graph.build
    made) take ``_firsts_checked`` instead."""
    seen: set[tuple[Any, ...]] = set()
    kinds: dict[tuple[int, int], tuple[tuple[str, str], ...]] = {}
    checked: list[int] = []  # the position among main-graph nodes of the first node of each signature
    axis_error: Optional[str] = None
    position = -1
    for fact in facts.nodes:
        if axis_error is None and "axis" in fact.explicit_attrs:
            axis_error = _axis_error(fact, facts, path)
        if fact.graph:
            continue
        position += 1
        if _new_signature(fact, _signature(fact, kinds), seen):
            checked.append(position)
    if position + 1 != count:  # pragma: no cover - the facts list every main-graph node in order
        return [], axis_error
    return checked, axis_error


def _kind(value: Any) -> str:
    """The type of an attribute value as the facts hold it (a list by its first element)."""
    if isinstance(value, (list, tuple)):
        return f"list[{type(value[0]).__name__}]" if value else "list"
    return type(value).__name__


# ops whose ``axis`` may also be the rank itself (Flatten: all dims to the outer part) or whose
# output has one more dim than the first input (OneHot)
_AXIS_PAST_END = {"Flatten": 1, "OneHot": 1}
# ops whose ``axis`` is ignored in some valid forms (per-tensor quantization)
_AXIS_UNCHECKED = frozenset({"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"})


def _axis_error(node: Any, facts: GraphFacts, path: object) -> Optional[str]:
    """Why a node with an explicit ``axis`` is refused, or None: its ``axis`` must lie in
    ``[-r, r - 1]`` for the known rank ``r`` of its first input (``[-r - 1, r]`` for Flatten's and
    OneHot's)."""
    if not node.inputs or not node.inputs[0] or node.op_type in _AXIS_UNCHECKED:
        return None
    axis = node.attrs.get("axis")
    info = facts.tensors.get(node.inputs[0])
    if not isinstance(axis, int) or isinstance(axis, bool) or info is None or info.shape is None:
        return None
    rank = len(info.shape)
    extra = _AXIS_PAST_END.get(node.op_type, 0)
    low, high = -(rank + (extra if node.op_type == "OneHot" else 0)), rank - 1 + extra
    if rank and not low <= axis <= high:
        where = f" (in {node.graph})" if node.graph else ""
        return (f"{path}: node {node.name or '(unnamed)'!r} ({node.op_type}){where}: axis={axis} is out "
                f"of range [{low}, {high}] for its rank-{rank} input {node.inputs[0]!r}; {_REFUSED}")
    return None
