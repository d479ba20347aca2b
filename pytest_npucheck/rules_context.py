"""Context rules: constraints that read a node's neighbours, not only the node itself.

Some placements depend on where a node sits in the graph. RKNN runs a reshape that produces a
graph output on the CPU (the NPU's native layout is converted back there), a reflect Pad behind
InstanceNormalization -> Relu on the CPU, and the mask Expand of an attention it fused on the CPU.
Probing the op alone never shows these; the rules below let a table state them.

Every rule reads the graph as the toolchain sees it after its pre-passes (``GraphView``):
nodes the pre-passes removed (an eliminated Identity, a folded constant) are looked through.
Like the other rules, each returns ``None`` when the node passes, else a message naming the
neighbour that decides. They are registered with ``local=False``: their verdict is never reused
between nodes that merely look alike.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence

from .graph import GraphFacts, NodeFact
from .rules import fmt_set, rule

_LOOK_THROUGH = frozenset({"Identity", "Dropout"})


def _removed(graph: GraphFacts, index: int) -> bool:
    pre = getattr(graph, "pre", None)
    return pre is not None and index in pre.folded


def _producer(graph: GraphFacts, tensor: str) -> Optional[NodeFact]:
    """The node computing ``tensor``, looking through nodes the pre-passes removed."""
    seen = 0
    while tensor and seen < 64:
        index = graph.producer.get(tensor)
        if index is None:
            return None
        node = graph.nodes[index]
        if node.op_type in _LOOK_THROUGH and _removed(graph, index) and node.inputs:
            tensor, seen = node.inputs[0], seen + 1
            continue
        return node
    return None


def _consumers(graph: GraphFacts, tensor: str, _depth: int = 0) -> Iterator[NodeFact]:
    """Nodes reading ``tensor``, looking through nodes the pre-passes removed."""
    for index in graph.consumers.get(tensor, ()):
        node = graph.nodes[index]
        if node.op_type in _LOOK_THROUGH and _removed(graph, index) and _depth < 64:
            for out in node.outputs[:1]:
                yield from _consumers(graph, out, _depth + 1)
        else:
            yield node


def _is_graph_output(graph: GraphFacts, tensor: str) -> bool:
    if tensor in graph.outputs:
        return True
    return any(n.op_type in _LOOK_THROUGH and _removed(graph, n.index) and n.outputs
               and _is_graph_output(graph, n.outputs[0])
               for n in (graph.nodes[i] for i in graph.consumers.get(tensor, ())))


def _chain_text(chain: Sequence[str]) -> str:
    return " <- ".join(chain)


@rule("not_graph_output", "context", local=False)
def rule_not_graph_output(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result is not a graph output."""
    if node.graph:  # subgraph bodies have outputs of their own, not the model's
        return None
    for i, name in enumerate(node.outputs):
        if name and _is_graph_output(graph, name):
            return f"output {i} '{name}' is a graph output"
    return None


@rule("producer_not", "context", local=False)
def rule_producer_not(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} is not computed by {chain_text}."""
    index = int(params.get("index", 0))
    chain: Sequence[Any] = params["chain"]
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    tensor = node.inputs[index]
    path = []
    for step in chain:
        ops = {step} if isinstance(step, str) else set(step)
        producer = _producer(graph, tensor)
        if producer is None or producer.op_type not in ops:
            return None
        path.append(f"{producer.op_type} '{producer.name}'")
        if not producer.inputs:
            break
        tensor = producer.inputs[0]
    if len(path) < len(chain):
        return None
    return f"input {index} '{node.inputs[index]}' is computed by " + " <- ".join(path)


@rule("feeds_not", "context", local=False)
def rule_feeds_not(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result does not reach {ops_set} within {depth} steps through {through_set}."""
    targets = set(params["ops"])
    through = set(params.get("through", ()))
    depth = int(params.get("depth", 1))
    frontier = [(out, []) for out in node.outputs if out]
    seen: set[int] = set()
    for _ in range(depth):
        nxt = []
        for tensor, path in frontier:
            for consumer in _consumers(graph, tensor):
                if consumer.index in seen:
                    continue
                seen.add(consumer.index)
                step = path + [f"{consumer.op_type} '{consumer.name}'"]
                if consumer.op_type in targets:
                    return "its result reaches " + " -> ".join(step)
                if consumer.op_type in through:
                    nxt.extend((out, step) for out in consumer.outputs if out)
        frontier = nxt
        if not frontier:
            break
    return None


def describe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Extra format keys for the docstrings above (used by rules._Describe)."""
    out = {}
    if "chain" in params:
        out["chain_text"] = _chain_text([s if isinstance(s, str) else "|".join(s) for s in params["chain"]])
    if "ops" in params:
        out["ops_set"] = fmt_set(params["ops"])
    out["through_set"] = fmt_set(params.get("through", [])) if params.get("through") else "nothing else"
    return out
