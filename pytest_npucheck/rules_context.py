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
from .prepass import IDENTITY_OPS as _LOOK_THROUGH  # what eliminate_identity removes
from .rules import fmt_set, rule


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


@rule("not_graph_output", "context", local=False)
def rule_not_graph_output(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result is not a graph output{from_node_text}."""
    if node.graph:  # subgraph bodies have outputs of their own, not the model's
        return None
    if params.get("from_node") and not _computed(graph, node):
        return None
    for i, name in enumerate(node.outputs):
        if name and _is_graph_output(graph, name):
            return f"output {i} '{name}' is a graph output"
    return None


@rule("producer_not", "context", local=False)
def rule_producer_not(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} is not computed by {chain_text}{exclusive_text}."""
    index = int(params.get("index", 0))
    chain: Sequence[Any] = params["chain"]
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    tensor = node.inputs[index]
    if params.get("exclusive") and sum(1 for _ in _consumers(graph, tensor)) != 1:
        return None  # another node also reads the input: the compiler does not merge them
    path = []  # the producers, formatted only when the whole chain matches
    for step in chain:
        producer = _producer(graph, tensor)
        if producer is None or (producer.op_type != step if isinstance(step, str) else producer.op_type not in step):
            return None
        path.append(producer)
        if not producer.inputs:
            break
        tensor = producer.inputs[0]
    if len(path) < len(chain):
        return None
    return f"input {index} '{node.inputs[index]}' is computed by " + " <- ".join(f"{p.op_type} '{p.name}'" for p in path)


@rule("feeds_not", "context", local=False)
def rule_feeds_not(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result does not feed {path_text}{from_node_text}."""
    if params.get("from_node") and not _computed(graph, node):
        return None
    path = [{s} if isinstance(s, str) else set(s) for s in params["path"]]
    skip = set(params.get("skip", ()))
    # depth-first over consumers: match path[i], letting `skip` ops sit between the steps
    stack = [(out, 0, [], 0) for out in node.outputs if out]
    seen: set[tuple[int, int]] = set()
    while stack:
        tensor, step, trail, skipped = stack.pop()
        for consumer in _consumers(graph, tensor):
            if (consumer.index, step) in seen:
                continue
            seen.add((consumer.index, step))
            here = trail + [f"{consumer.op_type} '{consumer.name}'"]
            if consumer.op_type in path[step]:
                if step + 1 == len(path):
                    return "its result feeds " + " -> ".join(here)
                stack.extend((out, step + 1, here, 0) for out in consumer.outputs if out)
            elif consumer.op_type in skip and skipped < 8:
                stack.extend((out, step, here, skipped + 1) for out in consumer.outputs if out)
    return None


def _computed(graph: GraphFacts, node: NodeFact) -> bool:
    """Input 0 is computed by a node (not a graph input or a constant)."""
    return bool(node.inputs) and _producer(graph, node.inputs[0]) is not None


def describe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Extra format keys for the docstrings above (used by rules._Describe)."""
    def step(s: Any) -> str:
        return s if isinstance(s, str) else "|".join(s)

    out = {"from_node_text": " (when input 0 is computed by another node)" if params.get("from_node") else "",
           "exclusive_text": " (when this node is the only reader of that input)" if params.get("exclusive") else ""}
    if "chain" in params:
        out["chain_text"] = " <- ".join(step(s) for s in params["chain"])
    if "path" in params:
        text = " -> ".join(step(s) for s in params["path"])
        if params.get("skip"):
            text += " (with any of %s in between)" % fmt_set(params["skip"])
        out["path_text"] = text
    return out
