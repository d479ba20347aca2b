"""Context rules: constraints that read a node's neighbours, not only the node itself.

Some placements depend on where a node sits in the graph. RKNN runs a reshape that produces a
graph output on the CPU (the NPU's native layout is converted back there), a reflect Pad behind
InstanceNormalization -> Relu on the CPU, and the mask Expand of an attention it fused on the CPU.
Probing the op alone never shows these; the rules below let a table state them.

Every rule reads the graph as the toolchain sees it after its pre-passes (``GraphView``):
nodes the pre-passes removed (an eliminated Identity, a folded constant) are looked through.
Like the other rules, each returns ``None`` when the node passes, else a message naming the
neighbour that decides. They are registered with ``local=False``: their verdict is never reused
between nodes that merely look alike; their docstrings' format keys come from ``_words``. A few of
them first ask a sparse test made once per graph view (see "sparse tests" below): a node it leaves
out passes without its walk.
"""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence

from ..graph import IDENTITY_OPS as _LOOK_THROUGH  # what the pre-pass eliminate_identity removes
from ..graph import GraphFacts, GraphView, NodeFact
from .registry import RULES, ShapeUnknown, fmt_set, rule


def _words(params: Mapping[str, Any]) -> dict[str, str]:
    """The context rules' description hook: the format keys of their docstrings (``describe_params``)."""
    return describe_params(params)


def _judged_by(params: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The rules' ``inner`` hook: the constraint a neighbour is judged by (``params.constraint``)."""
    return [("constraint", params["constraint"])] if "constraint" in params else []


def _removed(graph: GraphFacts, index: int) -> bool:
    pre = getattr(graph, "pre", None)
    return pre is not None and index in pre.folded


def _passes_on(graph: GraphFacts, node: NodeFact) -> bool:
    """The pre-passes removed ``node`` and its readers read its input 0 instead: an eliminated Identity
    or Dropout, or a layout op that kept its input's shape (``eliminate_noop_layout``)."""
    pre = getattr(graph, "pre", None)
    if pre is None or node.index not in pre.folded:
        return False
    return node.op_type in _LOOK_THROUGH or node.index in getattr(pre, "passed_on", ())


def _producer(graph: GraphFacts, tensor: str) -> Optional[NodeFact]:
    """The node computing ``tensor``, looking through nodes the pre-passes removed."""
    pre = getattr(graph, "pre", None)
    folded = pre.folded if pre is not None else ()
    producer, nodes = graph.producer, graph.nodes
    seen = 0
    while tensor and seen < 64:
        index = producer.get(tensor)
        if index is None:
            return None
        node = nodes[index]
        # _passes_on(graph, node), its first test inlined: most producers were not removed
        if node.index in folded and _passes_on(graph, node) and node.inputs:
            tensor, seen = node.inputs[0], seen + 1
            continue
        return node
    return None


def _consumers(graph: GraphFacts, tensor: str, _depth: int = 0) -> Iterator[NodeFact]:
    """Nodes reading ``tensor``, looking through nodes the pre-passes removed."""
    pre = getattr(graph, "pre", None)
    folded = pre.folded if pre is not None else ()
    nodes = graph.nodes
    for index in graph.consumers.get(tensor, ()):
        node = nodes[index]
        # _passes_on(graph, node), its first test inlined: most readers were not removed
        if node.index in folded and _passes_on(graph, node) and _depth < 64:
            for out in node.outputs[:1]:
                yield from _consumers(graph, out, _depth + 1)
        else:
            yield node


def _is_graph_output(graph: GraphFacts, tensor: str) -> bool:
    if tensor in graph.outputs:
        return True
    return any(_passes_on(graph, n) and n.outputs
               and _is_graph_output(graph, n.outputs[0])
               for n in (graph.nodes[i] for i in graph.consumers.get(tensor, ())))


# -- sparse tests: which nodes a rule can fail on, found once per graph from the few nodes it needs ------
#
# A rule that walks from every node to a rare neighbour (a Reshape's producer_pass on a Cast or Equal,
# its producer_not on a Gemm) costs a walk per node, though on most graphs the neighbour is nowhere
# near. Its sparse test walks the other way once: from the nodes of the ops the rule needs, to the
# tensors and nodes the rule could reach them from. A node outside that set passes (None) without
# the walk; a node inside it runs the whole rule, so every message is made exactly as before. The
# set may hold more than the rule would fail on (it ignores the step limits), never less.

#: False: no sparse test is made, every node runs the whole rule (the tests compare the two)
SPARSE = True


def _sparse(graph: GraphFacts, params: Mapping[str, Any], make: Any) -> Optional[Any]:
    """``make(graph, params)``, the rule's sparse test for these params, once per graph view and params
    (None: no test, run the whole rule). Only a ``GraphView`` keeps one: it is made once the pre-passes
    folded every constant, so what the rules read of it (nodes, maps, ``pre.folded``) no longer changes."""
    if type(graph) is not GraphView or not SPARSE:
        return None
    memo = graph.__dict__.get("_sparse")
    if memo is None:
        memo = graph.__dict__["_sparse"] = {}
    found = memo.get(id(params))  # (a table's params object is one rule's: keyed by it alone, checked)
    if found is None or found[0] is not params or found[1] is not make:
        # the params object kept: its id is not reused while the view lives
        found = memo[id(params)] = (params, make, make(graph, params))
    return found[2]


def _nodes_by_op(graph: GraphFacts) -> Optional[dict[str, list[NodeFact]]]:
    """Every node by op type, or None when the graph has bodies (``main_nodes_by_op`` leaves them out)."""
    by_op = graph.main_nodes_by_op
    return by_op if sum(map(len, by_op.values())) == len(graph.nodes) else None


def _fed_from(graph: GraphFacts, ops: Any, through: Any, any_input: bool) -> Optional[set[str]]:
    """The tensors from which a producer walk can reach a node of ``ops``: ``_producer``, then on from
    input 0 (any input with ``any_input``) of each ``through`` op. Walked forward from the nodes of
    ``ops``, through the readers that are ``through`` ops or that the pre-passes removed and pass their
    input 0 on (what ``_producer`` looks through), with no step limit."""
    memo = graph.__dict__.setdefault("_fed_from", {})  # one set per walk, whatever params ask for it
    key = (ops, through, any_input)
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]
    by_op = _nodes_by_op(graph)
    if by_op is None:
        memo[key] = None
        return None
    pre = getattr(graph, "pre", None)
    folded = pre.folded if pre is not None else ()
    nodes, consumers = graph.nodes, graph.consumers
    reach: set[str] = set()
    memo[key] = reach
    stack = [out for op in ops for n in by_op.get(op, ()) for out in n.outputs if out]
    while stack:
        tensor = stack.pop()
        if tensor in reach:
            continue
        reach.add(tensor)
        for index in consumers.get(tensor, ()):
            q = nodes[index]
            if not (q.op_type in through or (index in folded and _passes_on(graph, q))):
                continue
            if any_input or (q.inputs and q.inputs[0] == tensor):
                stack.extend(out for out in q.outputs if out)
    return reach


def _producer_pass_reach(graph: GraphFacts, params: Mapping[str, Any]) -> Optional[set[str]]:
    """producer_pass's sparse test: the inputs it can find a producer of its ``ops`` behind."""
    return _fed_from(graph, frozenset(params["ops"]), frozenset(params.get("skip", ())), False)


def _producer_not_reach(graph: GraphFacts, params: Mapping[str, Any]) -> Optional[set[str]]:
    """producer_not's sparse test: the inputs it can find the chain's first step behind (with
    ``computed_input`` the walk may go on from any input of a skipped op)."""
    first = params["chain"][0] if params["chain"] else None
    if first is None:
        return None
    return _fed_from(graph, frozenset([first] if isinstance(first, str) else first),
                     frozenset(params.get("skip") or ()), bool(params.get("computed_input")))


def _input_gate(make: Any) -> Any:
    """``Rule.sparse`` of a rule that passes when its input ``index`` is missing, empty or not in its
    sparse test's set of tensors (``make``, as ``_sparse`` asks it)."""
    def gate(params: Mapping[str, Any], graph: GraphFacts) -> Optional[tuple[tuple[int, Any], ...]]:
        found = _sparse(graph, params, make)
        return None if found is None else ((int(params.get("index", 0)), found),)
    return gate


def _producer_not_gate(params: Mapping[str, Any], graph: GraphFacts) -> Optional[tuple[tuple[int, Any], ...]]:
    """producer_not's ``Rule.sparse`` (none for an empty chain, which has no sparse test)."""
    return _input_gate(_producer_not_reach)(params, graph) if params.get("chain") else None


def _shared_gate(params: Mapping[str, Any], graph: GraphFacts) -> Optional[tuple[tuple[int, Any], ...]]:
    """linear_pair_add's ``Rule.sparse``: the node's index among those of ``_shared_sources``."""
    found = _sparse(graph, params, _shared_sources)
    return None if found is None else ((-1, found),)


@rule("not_graph_output", "context", local=False, words=_words)
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


def _chain_ops(params: Mapping[str, Any]) -> tuple[frozenset[str], ...]:
    """producer_not's ``needs``: a producer of each step of its chain (it fails only on a whole chain)."""
    return tuple(frozenset([s] if isinstance(s, str) else s) for s in params["chain"])


@rule("producer_not", "context", local=False, words=_words, needs=_chain_ops, sparse=_producer_not_gate)
def rule_producer_not(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} is not computed by {chain_text}{exclusive_text}.

    The chain is walked through input 0 of each producer; with ``computed_input``, through the first
    input another node computes when input 0 is a constant or a graph input. At most ``max_skip``
    (default 8) ``skip`` ops in a row are looked through."""
    return _chain_behind(node, params, graph, params.get("exclusive"))


def _chain_behind(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts, exclusive: Any) -> Optional[str]:
    """producer_not's verdict, ``exclusive`` given apart from the params (producer_is asks it without):
    the params object is the one the table holds, so its sparse test is made once."""
    index = int(params.get("index", 0))
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    tensor = node.inputs[index]
    reach = _sparse(graph, params, _producer_not_reach)
    if reach is not None and tensor not in reach:
        return None  # no producer of the chain's first step behind this input
    chain: Sequence[Any] = params["chain"]
    skip = params.get("skip") or ()
    max_skip = int(params.get("max_skip", 8))
    if exclusive and sum(1 for _ in _consumers(graph, tensor)) != 1:
        return None  # another node also reads the input: the compiler does not merge them
    path = []  # the producers, formatted only when the whole chain matches
    step_no = skipped = 0
    while step_no < len(chain):
        step = chain[step_no]
        producer = _producer(graph, tensor)
        if producer is None:
            return None
        if producer.op_type == step if isinstance(step, str) else producer.op_type in step:
            step_no, skipped = step_no + 1, 0
        elif producer.op_type in skip and skipped < max_skip:  # `skip` ops may sit before and between the steps
            skipped += 1
        else:
            return None
        path.append(producer)
        if not producer.inputs:
            break
        tensor = producer.inputs[0]
        if params.get("computed_input") and _producer(graph, tensor) is None:
            # Mul(weight, x): follow the first input another node computes (QK-norm's weight comes first)
            tensor = next((t for t in producer.inputs[1:] if t and _producer(graph, t) is not None), tensor)
    if step_no < len(chain):
        return None
    return f"input {index} '{node.inputs[index]}' is computed by " + " <- ".join(f"{p.op_type} '{p.name}'" for p in path)


@rule("producer_is", "context", local=False, words=_words)
def rule_producer_is(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} is computed by {chain_text}."""
    if _chain_behind(node, params, graph, False) is not None:
        return None  # the chain matched
    index = int(params.get("index", 0))
    if index >= len(node.inputs) or not node.inputs[index]:
        return f"it has no input {index}"
    tensor = node.inputs[index]
    producer = _producer(graph, tensor)
    what = "a graph input or a constant" if producer is None else f"computed by {producer.op_type} '{producer.name}'"
    return f"input {index} '{tensor}' is {what}, not by " + " <- ".join(
        s if isinstance(s, str) else "|".join(s) for s in params["chain"])


def _path_ops(params: Mapping[str, Any]) -> tuple[frozenset[str], ...]:
    """feeds_not's ``needs``: a reader of each step of its path that names its ops (a "*" step takes any op)."""
    steps = [frozenset([s] if isinstance(s, str) else s) for s in params["path"]]
    return tuple(step for step in steps if "*" not in step)


@rule("feeds_not", "context", local=False, words=_words, needs=_path_ops)
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
            if consumer.op_type in path[step] or "*" in path[step]:
                if step + 1 == len(path):
                    return "its result feeds " + " -> ".join(here)
                stack.extend((out, step + 1, here, 0) for out in consumer.outputs if out)
            elif consumer.op_type in skip and skipped < 8:
                stack.extend((out, step, here, skipped + 1) for out in consumer.outputs if out)
    return None


#: ops that keep the layout of their first input (the features stay on the same axis)
_SAME_LAYOUT = frozenset({"Add", "Sub", "Mul", "Div", "Relu", "Sigmoid", "Tanh", "Gelu", "Erf", "Clip",
                          "Cast", "Dropout", "Identity", "Slice", "Concat", "Neg", "Abs", "Sqrt", "Pow"})


def _features_last(graph: GraphFacts, tensor: str, makers: frozenset[str], depth: int = 0
                   ) -> Optional[NodeFact]:
    """The node that makes the compiler take the last axis of ``tensor`` as its channels, or None.

    Such a node is one of ``makers`` (a MatMul, or a LayerNormalization over the last axis: their
    features are the last axis), reached back through ops that keep the last axis where it is:
    element-wise ops, Slices and Concats, Reshapes that keep the last dim (tokens viewed as a grid)
    and Transposes that leave the last axis last."""
    node = _producer(graph, tensor)
    if node is None or depth > 24:
        return None
    op = node.op_type
    if op in makers:
        if op == "LayerNormalization":
            info = graph.tensor(node.inputs[0])
            rank = len(info.shape) if info is not None and info.shape is not None else None
            axis = node.attrs.get("axis", -1)
            if not (axis == -1 or (rank is not None and axis == rank - 1)):
                return None
        return node
    if op == "Reshape":
        src, out = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
        if not (src and out and src.shape and out.shape and isinstance(src.shape[-1], int)
                and src.shape[-1] == out.shape[-1]):
            return None
        return _features_last(graph, node.inputs[0], makers, depth + 1)
    if op == "Transpose":
        perm = node.attrs.get("perm")
        if not perm or perm[-1] != len(perm) - 1:
            return None
        return _features_last(graph, node.inputs[0], makers, depth + 1)
    if op in _SAME_LAYOUT:
        for name in node.inputs[: 1 if op in ("Slice", "Clip", "Pow") else None]:
            if name and _producer(graph, name) is not None:
                found = _features_last(graph, name, makers, depth + 1)
                if found is not None:
                    return found
    return None


def _const_ints(graph: GraphFacts, name: str) -> Optional[tuple[int, ...]]:
    info = graph.tensor(name) if name else None
    if info is None or info.value is None:
        return None
    try:
        return tuple(int(v) for v in info.value)
    except (TypeError, ValueError):
        return None


@rule("not_spatial_roll", "context", local=False, words=_words)
def rule_not_spatial_roll(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is not a roll (Slices of one tensor concatenated along their axis) along a spatial axis of a rank-4 tensor: the channel axis is 1, or the last when {makers_text} made it."""  # noqa: E501
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    if out is None or out.shape is None or len(out.shape) != 4 or len(node.inputs) < 2:
        return None
    rank = 4
    axis = node.attrs.get("axis")
    if not isinstance(axis, int) or not -rank <= axis < rank:
        return None
    axis %= rank
    source = None
    slices = []
    for name in node.inputs:
        s = _producer(graph, name) if name else None
        if s is None or s.op_type != "Slice" or len(s.inputs) < 4 or not s.inputs[0]:
            return None
        if source is None:
            source = s.inputs[0]
        elif s.inputs[0] != source:
            return None
        axes = _const_ints(graph, s.inputs[3])
        if axes is None or {a % rank for a in axes} != {axis}:
            return None
        slices.append(s)
    assert source is not None
    maker = _features_last(graph, source, frozenset(params.get("channels_last_after", ())))
    channel = rank - 1 if maker is not None else 1
    if axis == channel:
        return None
    why = (f"the features of {maker.op_type} '{maker.name}' are its channels" if maker is not None
           else "axis 1 is its channel axis")
    return (f"a roll along axis {axis} of '{source}' (" + ", ".join(f"Slice '{s.name}'" for s in slices)
            + f"): {why}, so axis {axis} is a spatial axis and the compiler runs the roll as a Gather")


#: the quadrant order the compiler fuses: (offset on the first sliced axis, offset on the second)
_S2D_ORDER = ((0, 0), (1, 0), (0, 1), (1, 1))


def _slice_steps(graph: GraphFacts, node: NodeFact, rank: int) -> Optional[dict[int, tuple[int, int]]]:
    """{axis: (start, step)} of a Slice with constant starts/axes/steps whose ends run to the end."""
    if node.op_type != "Slice" or len(node.inputs) < 5:
        return None
    starts, ends, axes, steps = (_const_ints(graph, t) for t in node.inputs[1:5])
    if starts is None or ends is None or axes is None or steps is None or not len(starts) == len(axes) == len(steps):
        return None
    src = graph.tensor(node.inputs[0])
    dims = src.shape if src is not None and src.shape is not None and len(src.shape) == rank else None
    out: dict[int, tuple[int, int]] = {}
    for start, end, axis, step in zip(starts, ends, axes, steps):
        axis %= rank
        dim = dims[axis] if dims is not None else None
        if not (end >= 2 ** 31 or (isinstance(dim, int) and end >= dim)):
            return None
        out[axis] = (start, step)
    return out


def _space_to_depth_of(graph: GraphFacts, concat: NodeFact) -> Optional[tuple[str, list[NodeFact]]]:
    """(source, Slices) when ``concat`` joins the four stride-2 quadrants of one rank-4 tensor in the
    order the compiler fuses, on the axis that is neither sliced nor the batch; else None."""
    out = graph.tensor(concat.outputs[0]) if concat.outputs else None
    axis = concat.attrs.get("axis")
    if len(concat.inputs) != 4 or out is None or out.shape is None or len(out.shape) != 4 or not isinstance(axis, int):
        return None
    source, members, offsets, sliced = None, [], [], None
    for name in concat.inputs:
        leaf = _producer(graph, name) if name else None
        if leaf is None or leaf.op_type != "Slice" or not leaf.inputs:
            return None
        steps = _slice_steps(graph, leaf, 4)
        chain = [leaf]
        first = _producer(graph, leaf.inputs[0])
        if steps is not None and len(steps) == 1 and first is not None and first.op_type == "Slice":
            more = _slice_steps(graph, first, 4)
            if more is None or set(more) & set(steps):
                return None
            steps, chain = {**more, **steps}, [first, leaf]
        if steps is None or len(steps) != 2 or any(step != 2 for _, step in steps.values()):
            return None
        root = chain[0].inputs[0]
        if source is None:
            source, sliced = root, tuple(sorted(steps))
        elif root != source or tuple(sorted(steps)) != sliced:
            return None
        assert sliced is not None
        offsets.append(tuple(steps[a][0] for a in sliced))
        members.extend(n for n in chain if all(n.index != m.index for m in members))
    assert source is not None and sliced is not None
    if tuple(offsets) != _S2D_ORDER or {0, *sliced, axis % 4} != {0, 1, 2, 3}:
        return None
    return source, members


@rule("space_to_depth", "context", local=False)
def rule_space_to_depth(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is one of the Slices of a space-to-depth: the four stride-2 quadrants of one rank-4 tensor (offsets (0, 0), (1, 0), (0, 1), (1, 1) on the two sliced axes), concatenated in that order on the remaining non-batch axis, which the compiler fuses into one Conv."""  # noqa: E501
    if node.graph:
        return "it is inside a subgraph"
    readers = [c for out in node.outputs if out for c in _consumers(graph, out)]
    concats = [c for c in readers if c.op_type == "Concat"]
    concats += [cc for c in readers if c.op_type == "Slice" for o in c.outputs if o
                for cc in _consumers(graph, o) if cc.op_type == "Concat"]
    for index in dict.fromkeys(c.index for c in concats):
        found = _space_to_depth_of(graph, graph.nodes[index])
        if found is not None and any(m.index == node.index for m in found[1]):
            return None
    return "its result is not one quadrant of a space-to-depth (four stride-2 Slices of one tensor joined by a Concat)"


def _reaches(graph: GraphFacts, node: NodeFact, ops: frozenset[str], through: frozenset[str]
             ) -> Optional[list[NodeFact]]:
    """The path from ``node`` to the first consumer in ``ops``, passing only ``through`` ops, or None."""
    stack: list[tuple[NodeFact, list[NodeFact]]] = [(node, [])]
    seen = {node.index}
    while stack:
        current, trail = stack.pop()
        for out in current.outputs:
            if not out:
                continue
            for consumer in _consumers(graph, out):
                if consumer.index in seen:
                    continue
                seen.add(consumer.index)
                if consumer.op_type in ops:
                    return trail + [consumer]
                if consumer.op_type in through and len(trail) < 16:
                    stack.append((consumer, trail + [consumer]))
    return None


@rule("feeds_compute", "context", local=False, words=_words)
def rule_feeds_compute(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result{via_text} reaches a compute op ({ops_text}), passing only {through_text}."""
    if node.graph:
        return None
    ops, through = frozenset(params["ops"]), frozenset(params.get("through", ()))
    via = params.get("via")
    starts = [node]
    if via:
        starts = [c for out in node.outputs if out for c in _consumers(graph, out) if c.op_type in via]
        if not starts:
            return None  # feeds no such op: the requirement does not apply
    for start in starts:
        if _reaches(graph, start, ops, through) is None:
            what = "its result" if start is node else f"it feeds {start.op_type} '{start.name}', whose result"
            return (f"{what} reaches no compute op ({fmt_set(sorted(ops))}) through layout and element-wise "
                    "ops alone: the compiler cannot merge the layout change into one")
    return None


@rule("consumers_pass", "context", local=False, words=_words, inner=_judged_by)
def rule_consumers_pass(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every {ops_text} reading its result meets: {constraint_text}."""
    inner = params["constraint"]
    check = RULES[inner["rule"]]
    skip = frozenset(params.get("skip", ()))
    readers: dict[int, NodeFact] = {}
    stack = [(out, 0) for out in node.outputs if out]
    while stack:  # the readers, looking through `skip` ops (an Unsqueeze in front of the Transpose)
        tensor, depth = stack.pop()
        for consumer in _consumers(graph, tensor):
            if consumer.op_type in skip and depth < 8:
                stack.extend((out, depth + 1) for out in consumer.outputs if out)
            else:
                readers.setdefault(consumer.index, consumer)
    for consumer in readers.values():
        if consumer.op_type not in params["ops"]:
            continue
        why = check.check(consumer, inner.get("params", {}), graph)
        if why is not None:
            return (f"it feeds {consumer.op_type} '{consumer.name}', which the compiler runs on the CPU "
                    f"({why}); the layout change before it goes with it")
    return None


def _producer_ops(params: Mapping[str, Any]) -> tuple[frozenset[str], ...]:
    """producer_pass's ``needs``: a producer of one of its ``ops`` (the only nodes it judges)."""
    return (frozenset(params["ops"]),)


@rule("producer_pass", "context", local=False, words=_words, inner=_judged_by, needs=_producer_ops,
      sparse=_input_gate(_producer_pass_reach))
def rule_producer_pass(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """when input {index} is computed by {ops_text}, that node meets: {constraint_text}."""
    index = int(params.get("index", 0))
    if index >= len(node.inputs) or not node.inputs[index]:
        return None
    reach = _sparse(graph, params, _producer_pass_reach)
    if reach is not None and node.inputs[index] not in reach:
        return None  # no producer of its ops behind this input
    ops, skip = frozenset(params["ops"]), frozenset(params.get("skip", ()))
    producer = _producer(graph, node.inputs[index])
    steps = 0
    while producer is not None and producer.op_type not in ops and producer.op_type in skip and steps < 8:
        producer = _producer(graph, producer.inputs[0]) if producer.inputs and producer.inputs[0] else None
        steps += 1
    if producer is None or producer.op_type not in ops:
        return None
    inner = params["constraint"]
    why = RULES[inner["rule"]].check(producer, inner.get("params", {}), graph)
    if why is None:
        return None
    return (f"input {index} is computed by {producer.op_type} '{producer.name}', which the compiler runs on the "
            f"CPU ({why}); the layout change after it goes with it")


@rule("feeds_only", "context", local=False, words=_words)
def rule_feeds_only(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every node reading its result is one of {ops_text}, reading it as its data (input 0){max_rank_text}:
    the compiler merges it into them.

    For a chain of layout ops the compiler makes one op of (RKNN merges Flatten -> Gather -> Reshape ->
    Reshape into one Reshape named after the last): the ops that pass are absorbed; the chain's last
    op, read by anything else (or as another input: the indices of an embedding Gather) or a graph
    output, is the one the compiler keeps. With ``max_rank``, a result of higher rank (or of unknown
    rank) fails: RKNN merges a layout op of rank below 4 into the 4-D relayout its readers (a Cast) make
    of their input, while a rank-4 result is a Reshape of its own. With ``any_input``, a reader may read
    the result as any of its inputs (a bias Add written bias first)."""
    ops = frozenset(params["ops"])
    max_rank = params.get("max_rank")
    if max_rank is not None:
        for out in node.outputs[:1]:
            info = graph.tensor(out) if out else None
            if info is None or info.shape is None:
                return ShapeUnknown(f"the rank of its result '{out}' is unknown")
            if len(info.shape) > int(max_rank):
                return f"its result '{out}' has rank {len(info.shape)}, above {max_rank}"
    readers: list[tuple[NodeFact, bool]] = []
    for out in node.outputs:
        if not out:
            continue
        if not node.graph and _is_graph_output(graph, out):
            return f"its result '{out}' is a graph output"
        readers.extend((c, bool(params.get("any_input")) or _reads_as_data(graph, c, out))
                       for c in _consumers(graph, out))
    if not readers:
        return "nothing reads its result"
    others = list(dict.fromkeys(f"{c.op_type} '{c.name}'" + ("" if data else " (not as its input 0)")
                                for c, data in readers if c.op_type not in ops or not data))
    if not others:
        return None
    shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return f"its result is read by {shown}"


def _reads_as_data(graph: GraphFacts, reader: NodeFact, tensor: str) -> bool:
    """``reader`` reads ``tensor`` (or what an eliminated node passes on of it) as its input 0 only."""
    feeds = _names_of(graph, tensor)
    return bool(reader.inputs) and reader.inputs[0] in feeds and not any(i in feeds for i in reader.inputs[1:])


def _names_of(graph: GraphFacts, tensor: str) -> set[str]:
    """``tensor`` and the names it goes by behind nodes the pre-passes eliminated."""
    names, stack = {tensor}, [tensor]
    while stack:
        t = stack.pop()
        for index in graph.consumers.get(t, ()):
            n = graph.nodes[index]
            if _passes_on(graph, n):
                for o in n.outputs[:1]:
                    if o and o not in names:
                        names.add(o)
                        stack.append(o)
    return names


@rule("computed_indices", "context", local=False, words=_words)
def rule_computed_indices(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its input 0 is computed by another node (not a graph input or a constant) and every node reading its result is one of {ops_text}, reading it as its indices (input 1 only).

    RKNN keeps an integer layout op in front of an embedding Gather's indices on the NPU (row 'Reshape
    INT64 NPU') when another op computed its input, and runs it on the CPU when it reads a graph input."""
    if not _computed(graph, node):
        src = node.inputs[0] if node.inputs else ""
        return f"input 0 '{src}' is a graph input or a constant"
    ops = frozenset(params["ops"])
    out = node.outputs[0] if node.outputs else ""
    if not out:
        return "it has no result"
    if not node.graph and _is_graph_output(graph, out):
        return f"its result '{out}' is a graph output"
    names = _names_of(graph, out)
    readers = [c for c in _consumers(graph, out) if not _removed(graph, c.index)]
    if not readers:
        return "nothing reads its result"
    others = [f"{c.op_type} '{c.name}'" for c in readers
              if not (c.op_type in ops and len(c.inputs) > 1 and c.inputs[1] in names
                      and not any(i in names for i in c.inputs[:1] + c.inputs[2:]))]
    if not others:
        return None
    shown = ", ".join(dict.fromkeys(others[:4])) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return f"its result is read by {shown} (not as its indices)"


#: the Transpose of a window unroll: (B, H/k, k, W/k, k, C) -> (B, k, k, H/k, W/k, C)
_UNROLL_PERM = (0, 2, 4, 1, 3, 5)


def _shape(graph: GraphFacts, tensor: str) -> Optional[tuple[Any, ...]]:
    info = graph.tensor(tensor) if tensor else None
    return None if info is None or info.shape is None else tuple(info.shape)


@rule("window_unroll", "context", local=False, words=_words)
def rule_window_unroll(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is the first block of a window unroll: a Transpose (0, 2, 4, 1, 3, 5) of a Reshape that splits both spatial axes of a (B, H, W, C) map into (B, H/k, k, W/k, k, C), a map that is not the merged result of an earlier such block, read only by Reshapes (the compiler makes an NPU exWindow of it)."""  # noqa: E501
    if tuple(node.attrs.get("perm") or ()) != _UNROLL_PERM or not node.inputs:
        return f"perm {list(node.attrs.get('perm') or [])} is not {list(_UNROLL_PERM)}"
    split = _producer(graph, node.inputs[0])
    if split is None or split.op_type != "Reshape" or not split.inputs:
        return "input 0 is not computed by a Reshape"
    six, four = _shape(graph, node.inputs[0]), _shape(graph, split.inputs[0])
    if six is None or four is None or len(six) != 6 or len(four) != 4 or not all(isinstance(d, int) for d in six + four):
        return f"the Reshape '{split.name}' does not split a rank-4 map of static shape into rank 6"
    if (six[0], six[1] * six[2], six[3] * six[4], six[5]) != four or six[2] != six[4]:
        return f"the Reshape '{split.name}' {list(four)} -> {list(six)} does not split both spatial axes by one stride"
    source = _producer(graph, split.inputs[0])
    if source is not None and source.op_type == "Reshape" and source.inputs:
        before = _shape(graph, source.inputs[0])
        if before is not None and len(before) == 6:
            return f"its map is the merged result '{source.name}' of an earlier rank-6 block"
    # a Shape the pre-passes folded (TorchScript reads the static shape to build the next Reshape) does not count
    readers = [c for out in node.outputs[:1] if out for c in _consumers(graph, out) if not _removed(graph, c.index)]
    others = [f"{c.op_type} '{c.name}'" for c in readers if c.op_type != "Reshape"]
    if not readers or others or _is_graph_output(graph, node.outputs[0]):
        return "its result is read by " + (", ".join(others) if others else "no Reshape only")
    return None


def _slice_axes_steps(graph: GraphFacts, node: NodeFact) -> Optional[tuple[set[int], tuple[int, ...]]]:
    """A Slice's axes (normalised; None when not constant or absent) and steps (1 when absent)."""
    rank = _rank(graph, node.inputs[0]) if node.inputs else None
    axes = _const_ints(graph, node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    if axes is None or rank is None:
        return None
    has_steps = len(node.inputs) > 4 and node.inputs[4]
    steps = _const_ints(graph, node.inputs[4]) if has_steps else tuple(1 for _ in axes)
    if steps is None:
        return None
    return {a % rank for a in axes}, steps


def _merged_slice_pair(graph: GraphFacts, first: NodeFact, second: NodeFact) -> bool:
    """RKNN's fuse_two_slice: ``first`` is a Slice only ``second``, a Slice of other axes, reads (as its data)."""
    if first.op_type != "Slice" or second.op_type != "Slice" or not first.outputs or not second.inputs:
        return False
    if second.inputs[0] != first.outputs[0] and _producer(graph, second.inputs[0]) is not first:
        return False
    if _sole_reader(graph, first.outputs[0]) is not second:
        return False
    a, b = _slice_axes_steps(graph, first), _slice_axes_steps(graph, second)
    return a is not None and b is not None and not (a[0] & b[0])


@rule("second_of_slice_pair", "context", local=False, words=_words)
def rule_second_of_slice_pair(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its input is a Slice of other axes that only it reads: the compiler merges the two into one Slice named after the first, which carries the pair's placement."""  # noqa: E501
    first = _producer(graph, node.inputs[0]) if node.inputs and node.inputs[0] else None
    if first is not None and _merged_slice_pair(graph, first, node):
        return None
    return "input 0 is not computed by a Slice of other axes that only this Slice reads"


@rule("slice_pair_steps", "context", local=False, words=_words)
def rule_slice_pair_steps(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """when its only reader is a Slice of other axes (the compiler merges the two into one Slice named after this one), that reader's steps are all 1."""  # noqa: E501
    reader = _sole_reader(graph, node.outputs[0]) if node.outputs and node.outputs[0] else None
    if reader is None or not _merged_slice_pair(graph, node, reader):
        return None
    got = _slice_axes_steps(graph, reader)
    steps = got[1] if got is not None else ()
    if all(s == 1 for s in steps):
        return None
    return (f"its only reader, Slice '{reader.name}' of other axes, has steps {list(steps)}: the compiler "
            "merges the two into one Slice with a step other than 1")


@rule("beside_trivial_transpose", "context", local=False, words=_words)
def rule_beside_trivial_transpose(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its input comes from, or its result goes to, a Transpose that moves only axes of size 1 (a reshape the compiler merges it with)."""
    from .node import transpose_blocks

    def trivial(t: NodeFact) -> bool:
        if t.op_type != "Transpose" or not t.inputs:
            return False
        info = graph.tensor(t.inputs[0])
        shape = info.shape if info is not None else None
        if shape is None or not all(isinstance(d, int) for d in shape):
            return False
        perm = t.attrs.get("perm") or list(range(len(shape)))[::-1]
        return transpose_blocks(perm, shape) <= 1

    near = [_producer(graph, node.inputs[0])] if node.inputs and node.inputs[0] else []
    near += [c for out in node.outputs if out for c in _consumers(graph, out)]
    if any(n is not None and trivial(n) for n in near):
        return None
    return "no Transpose next to it moves only axes of size 1"


def _flattened_map(graph: GraphFacts, node: NodeFact) -> Optional[tuple[int, int]]:
    """(H, W) when ``node`` is a Reshape of a static rank-4 (N, C, H, W) map to (N, C, H * W), else None."""
    if node.op_type != "Reshape" or not node.inputs or not node.outputs:
        return None
    src, out = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
    if src is None or out is None or src.shape is None or out.shape is None:
        return None
    if len(src.shape) != 4 or len(out.shape) != 3 or not all(isinstance(d, int) for d in (*src.shape, *out.shape)):
        return None
    n, c, h, w = src.shape
    return (h, w) if tuple(out.shape) == (n, c, h * w) else None


def _not_a_flattened_map(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> bool:
    """concat_flatten_plane's ``settled``: the node is no flattening of a static rank-4 map (its own shapes)."""
    return _flattened_map(graph, node) is None


@rule("concat_flatten_plane", "context", local=False, words=_words, settled=_not_a_flattened_map)
def rule_concat_flatten_plane(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a flattening of an (N, C, H, W) map to (N, C, H * W) read by a Concat of such flattenings on the last
    axis keeps its map's width as the Concat's row, or holds a multiple of {multiple_of} elements.

    The compiler lays the Concat out as (N, C, L / g, g), g a map width among its inputs that divides
    every input's length, the one that leaves the fewest maps of another width (the earlier input on a
    tie): a flattening whose map is g wide is removed, any other becomes a
    Reshape of its H * W plane to (H * W / g, g), which runs on the CPU unless that is a multiple of
    ``multiple_of``. With no such width (g = 1) the flattening stays and the Concat relays its input
    itself (a row named after the Concat's input, the Concat's own glue): the flattening passes."""
    hw = _flattened_map(graph, node)
    if hw is None:
        return None
    h, w = hw
    readers = [c for out in node.outputs if out for c in _consumers(graph, out)]
    if not readers or any(c.op_type != "Concat" or int(c.attrs.get("axis", 0)) not in (-1, 2) for c in readers):
        return None
    multiple = int(params["multiple_of"])
    for concat in readers:
        maps = []
        for t in concat.inputs:
            producer = _producer(graph, t) if t else None
            found = _flattened_map(graph, producer) if producer is not None else None
            if found is None:
                return None  # another kind of input: the layout is not known
            maps.append(found)
        lengths = [a * b for a, b in maps]
        # the row: a map width dividing every length, the one that leaves the fewest maps to relay, the
        # earlier input on a tie
        fits = [(sum(b != w_ for _, b in maps), i, w_) for i, (_, w_) in enumerate(maps)
                if all(n % w_ == 0 for n in lengths)]
        row = min(fits)[2] if fits else 1
        if row > 1 and w != row and (h * w) % multiple:
            return (f"Concat '{concat.name}' joins flattened maps of {sorted(set(lengths), reverse=True)} elements, "
                    f"laid out in rows of {row}: this {h} x {w} map is relaid to ({h * w // row}, {row}), a plane of "
                    f"{h * w} elements, not a multiple of {multiple}")
    return None


@rule("sole_reader", "context", local=False, words=_words)
def rule_sole_reader(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is the only node reading input {index}."""
    index = int(params.get("index", 0))
    if node.graph or index >= len(node.inputs) or not node.inputs[index]:
        return None
    tensor = node.inputs[index]
    others = list(dict.fromkeys(f"{c.op_type} '{c.name}'" for c in _consumers(graph, tensor)
                                if c.index != node.index))
    if not others:
        return None
    shown = ", ".join(others[:4]) + (f" and {len(others) - 4} more" if len(others) > 4 else "")
    return f"input {index} '{tensor}' is also read by {shown}"


@rule("graph_lacks", "context", local=False, words=_words)
def rule_graph_lacks(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the main graph has no node of {ops_text}."""
    ops = params["ops"]
    found = [n for op in ops for n in graph.main_nodes_by_op.get(op, ()) if n.index != node.index]
    if not found:
        return None
    found.sort(key=lambda n: n.index)
    shown = ", ".join(f"{n.op_type} '{n.name}'" for n in found[:3]) + (f" and {len(found) - 3} more" if len(found) > 3 else "")
    return f"the graph also has {shown}"


#: ops a padding mask passes through between the Cast of the mask input and the And that combines
#: it with the causal or all-true base (transformers' masking code: Flatten -> Gather -> Reshape ->
#: Reshape -> Cast -> And)
MASK_PATH_OPS = ("Cast", "Expand", "Flatten", "Gather", "Identity", "Reshape", "Slice", "Squeeze",
                 "Transpose", "Unsqueeze")
_BOOL = 9  # TensorProto.BOOL


def _input_behind_casts(graph: GraphFacts, tensor: str) -> Optional[str]:
    """The graph input ``tensor`` is, behind any Casts (BigBird-Pegasus casts the mask to int64
    first), or None."""
    for _ in range(8):
        producer = _producer(graph, tensor)
        if producer is None:
            return tensor if tensor in graph.inputs and tensor not in graph.initializers else None
        if producer.op_type != "Cast" or not producer.inputs:
            return None
        tensor = producer.inputs[0]
    return None


def _merged(graph: GraphFacts, index: int) -> bool:
    """The pre-passes removed the node as a copy of another (``merge_parallel_casts``,
    ``merge_identical_nodes``): its readers read the one kept."""
    pre = getattr(graph, "pre", None)
    return pre is not None and pre.folded.get(index, "").startswith("identical to ")


def _is_bool_cast_of_input(graph: GraphFacts, node: NodeFact) -> bool:
    """A bool Cast of a graph input; a removed one only when it was merged into a copy of itself."""
    return (node.op_type == "Cast" and int(node.attrs.get("to", 0)) == _BOOL and bool(node.inputs)
            and (not _removed(graph, node.index) or _merged(graph, node.index))
            and _input_behind_casts(graph, node.inputs[0]) is not None)


def mask_chain_ends(graph: GraphFacts, node: NodeFact, through: Sequence[str] = MASK_PATH_OPS
                    ) -> Optional[tuple[NodeFact, list[NodeFact]]]:
    """``(cast, ends)`` when an input of ``node`` comes, through ``through`` ops (input 0 of each),
    from a Cast to bool of a graph input: ``ends`` are the nodes that read that mask (the Cast's, or
    another bool Cast's of the same input: the compiler merges them) behind ``through`` ops (Shape
    readers, folded, do not count). Two chains that compute the same mask count twice: the
    compiler does not merge them (probe x.And.ctx=mask_chains.enc_cross.s=16). None when no input
    comes from such a Cast."""
    ops = frozenset(through)
    for tensor in node.inputs:
        producer = _producer(graph, tensor) if tensor else None
        steps = 0
        while producer is not None and producer.op_type in ops and steps < 16:
            if _is_bool_cast_of_input(graph, producer):
                break
            producer = _producer(graph, producer.inputs[0]) if producer.inputs and producer.inputs[0] else None
            steps += 1
        else:
            continue
        if producer is None or not _is_bool_cast_of_input(graph, producer):
            continue
        source = _input_behind_casts(graph, producer.inputs[0])
        casts = [n for n in graph.main_nodes_by_op.get("Cast", ()) if _is_bool_cast_of_input(graph, n)
                 and _input_behind_casts(graph, n.inputs[0]) == source]
        ends: dict[int, NodeFact] = {}
        seen: set[int] = set()
        stack = [o for c in casts for o in c.outputs if o]
        while stack:
            t = stack.pop()
            for reader in _consumers(graph, t):
                if reader.index in seen or reader.op_type == "Shape" or _removed(graph, reader.index):
                    continue
                seen.add(reader.index)
                if reader.op_type in ops and reader.inputs and reader.inputs[0] == t and len(seen) < 512:
                    stack.extend(o for o in reader.outputs if o)
                    continue
                ends[reader.index] = reader
        return producer, sorted(ends.values(), key=lambda n: n.index)
    return None


def _mask_words(params: Mapping[str, Any]) -> dict[str, str]:
    return {**describe_params(params), "through_text": fmt_set(params.get("through", MASK_PATH_OPS))}


@rule("mask_cast_one_chain", "context", local=False, words=_mask_words)
def rule_mask_cast_one_chain(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a mask it reads from a bool Cast of a graph input (through {through_text}) feeds nothing else.

    Every bool Cast of that input counts (the compiler merges them); Shape readers, folded, do not."""
    if node.graph:
        return None
    found = mask_chain_ends(graph, node, params.get("through", MASK_PATH_OPS))
    if found is None:
        return None
    cast, ends = found
    others = [e for e in ends if e.index != node.index]
    if not others:
        return None
    shown = ", ".join(f"{c.op_type} '{c.name}'" for c in others[:3]) + (f" and {len(others) - 3} more"
                                                                         if len(others) > 3 else "")
    return (f"it reads the mask {_input_behind_casts(graph, cast.inputs[0])!r} cast to bool by '{cast.name}', which {shown} also reads "
            "through layout ops: a second mask built from the same input")


def _feature_scale(graph: GraphFacts, mul: NodeFact, features: int) -> Optional[str]:
    """The constant of a Mul that scales the last axis of its other, computed, input by ``features``
    values (shape [K] or [1, ..., 1, K]): its name, else None."""
    if mul.op_type != "Mul" or len(mul.inputs) != 2:
        return None
    for i, name in enumerate(mul.inputs):
        info = graph.tensor(name)
        other = mul.inputs[1 - i]
        if info is None or not info.const or info.shape is None or not info.shape:
            continue
        dims = list(info.shape)
        if dims[-1] == features and all(d == 1 for d in dims[:-1]) and _producer(graph, other) is not None:
            return name
    return None


def _no_kn_weight(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> bool:
    """gemm_scale_fold's ``settled``: no constant [K, N] weight (N != K) read untransposed (its own attributes
    and input 1)."""
    if len(node.inputs) < 2 or int(node.attrs.get("transB", 0) or 0) or int(node.attrs.get("transA", 0) or 0):
        return True
    weight = graph.tensor(node.inputs[1])
    if weight is None or not weight.const or weight.shape is None or len(weight.shape) != 2:
        return True
    k, n = weight.shape
    return not isinstance(k, int) or not isinstance(n, int) or k == n


@rule("gemm_scale_fold", "context", local=False, words=_words, settled=_no_kn_weight)
def rule_gemm_scale_fold(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a Gemm with its weight stored [K, N] (transB=0, N != K) must not read a Mul by a per-feature [K] constant
    (the compiler folds that scale into the weight along the wrong axis and build() fails)."""
    if node.graph or _no_kn_weight(node, params, graph):
        return None
    k, n = graph.tensor(node.inputs[1]).shape  # type: ignore[union-attr]
    mul = _producer(graph, node.inputs[0])
    if mul is None or mul.op_type != "Mul":
        return None
    scale = _feature_scale(graph, mul, k)
    if scale is None:
        return None
    return (f"it reads the Mul '{mul.name}' by the per-feature constant {scale!r} ({k} values), which the compiler "
            f"folds into this Gemm's [{k}, {n}] weight along the wrong axis (fuse_mul_into_gemm): build() fails")


def _linear_head(graph: GraphFacts, node: Optional[NodeFact]) -> Optional[tuple[str, str]]:
    """``(source, result)`` of a linear layer by a constant weight: ``Gemm(a, W[, b])`` or ``MatMul(a, W)`` with
    its bias ``Add`` of a constant when it has one. ``source`` is ``a``, or the input of a BatchNormalization
    computing ``a`` (the compiler folds that BN into the layer); else None."""
    if node is None or node.graph or _no_linear_weight(node, {}, graph):
        return None
    result = node.outputs[0]
    readers = list(_consumers(graph, result))
    if node.op_type == "MatMul" and len(readers) == 1 and readers[0].op_type == "Add" and len(readers[0].inputs) == 2:
        other = [t for t in readers[0].inputs if t != result]
        info = graph.tensor(other[0]) if other else None
        if info is not None and info.const:
            result = readers[0].outputs[0]
    source = node.inputs[0]
    pre = _producer(graph, source)
    if pre is not None and pre.op_type == "BatchNormalization" and pre.inputs:
        source = pre.inputs[0]
    return source, result


def _no_linear_weight(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> bool:
    """linear_pair_add's ``settled`` (and _linear_head's first test): not a Gemm (transA=0) or MatMul reading a
    constant weight as its input 1 (its own op, attributes and input 1)."""
    if node.op_type not in ("Gemm", "MatMul") or len(node.inputs) < 2:
        return True
    if node.op_type == "Gemm" and int(node.attrs.get("transA", 0) or 0):
        return True
    weight = graph.tensor(node.inputs[1])
    return weight is None or not weight.const


def _shared_sources(graph: GraphFacts, params: Mapping[str, Any]) -> Optional[set[int]]:
    """linear_pair_add's sparse test: the Gemms and MatMuls whose source (``_linear_head``'s: input 0, or
    the input of a BatchNormalization computing it) another Gemm or MatMul has too. The rule fails only
    on a linear layer added to another one of its own source."""
    if "_shared_sources" in graph.__dict__:  # the same for every params (it reads none)
        return graph.__dict__["_shared_sources"]  # type: ignore[no-any-return]
    by_op = _nodes_by_op(graph)
    if by_op is None:
        graph.__dict__["_shared_sources"] = None
        return None
    pre = getattr(graph, "pre", None)
    folded = pre.folded if pre is not None else ()
    nodes, producer = graph.nodes, graph.producer
    layers: dict[str, list[int]] = {}
    for op in ("Gemm", "MatMul"):
        for node in by_op.get(op, ()):
            if not node.inputs:
                continue
            source = node.inputs[0]
            index = producer.get(source)
            # _linear_head's BatchNormalization, asked only where it can be (most inputs: a node not removed)
            if index is not None and (index in folded or nodes[index].op_type == "BatchNormalization"):
                bn = _producer(graph, source)
                if bn is not None and bn.op_type == "BatchNormalization" and bn.inputs:
                    source = bn.inputs[0]
            layers.setdefault(source, []).append(node.index)
    shared = graph.__dict__["_shared_sources"] = {i for same in layers.values() if len(same) > 1 for i in same}
    return shared


@rule("linear_pair_add", "context", local=False, words=_words, settled=_no_linear_weight, sparse=_shared_gate)
def rule_linear_pair_add(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """its result (a layer by a constant weight) is not added to the result of another Gemm/MatMul by a constant
    weight reading the same input (two linear heads of one input summed, as a distilled classifier's
    ``(head(x) + head_dist(x)) / 2``: the compiler turns both into 1x1 Convs and its rewrite fuse_conv_conv_add
    fails)."""
    shared = _sparse(graph, params, _shared_sources)
    if shared is not None and node.index not in shared:
        return None  # no other linear layer reads its source
    mine = _linear_head(graph, node)
    if mine is None:
        return None
    source, result = mine
    for add in _consumers(graph, result):
        if add.op_type != "Add" or len(add.inputs) != 2:
            continue
        other = add.inputs[1] if add.inputs[0] == result else add.inputs[0]
        producer = _producer(graph, other)
        if producer is not None and producer.op_type == "Add":  # a MatMul's bias Add
            inner = [_producer(graph, t) for t in producer.inputs]
            producer = next((p for p in inner if p is not None and p.op_type == "MatMul"), producer)
        theirs = _linear_head(graph, producer)
        if producer is None or producer.index == node.index or theirs is None or theirs[0] != source:
            continue
        return (f"its result and that of {producer.op_type} '{producer.name}', both by a constant weight and reading "
                f"{source!r}, are added by '{add.name}': the compiler turns both into 1x1 Convs and its rewrite "
                "fuse_conv_conv_add fails (build() raises)")
    return None


def _slices_last_axis(graph: GraphFacts, node: NodeFact) -> bool:
    """A Slice whose only sliced axis is the last one of its input."""
    info = graph.tensor(node.inputs[0]) if node.inputs else None
    axes_info = graph.tensor(node.inputs[3]) if len(node.inputs) > 3 and node.inputs[3] else None
    if info is None or info.shape is None or axes_info is None or axes_info.value is None:
        return False
    axes = [int(a) for a in axes_info.value]
    rank = len(info.shape)
    return len(axes) == 1 and axes[0] % rank == rank - 1


def _tile_words(params: Mapping[str, Any]) -> dict[str, str]:
    return {**describe_params(params),
            "perms_text": " or ".join("(%s)" % ", ".join(str(a) for a in p) for p in params.get("perms", ())),
            "sources_text": fmt_set(params.get("sources", ())), "through_text": fmt_set(params.get("through", ()))}


def _other_perm(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> bool:
    """tile_transpose_perm's ``settled``: its perm is none of ``perms``, or it has no input (its own attributes)."""
    perm = [int(a) for a in (node.attrs.get("perm") or [])]
    return perm not in [list(p) for p in params.get("perms", ())] or not node.inputs


@rule("tile_transpose_perm", "context", local=False, words=_tile_words, settled=_other_perm)
def rule_tile_transpose_perm(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a Transpose by {perms_text} does not read an Expand that broadcasts a unit dim of a Reshape, with a
    leading dim above 1, of a {sources_text} (a Slice of the last axis; through {through_text}): BoTNet's tiled
    relative-position logits; the compiler's rewrite reduce_tp_in_mesh_forward fails (build() raises)."""
    if node.graph or _other_perm(node, params, graph):
        return None
    perm = [int(a) for a in (node.attrs.get("perm") or [])]
    expand = _producer(graph, node.inputs[0])
    if expand is None or expand.op_type != "Expand" or not expand.inputs:
        return None
    reshape = _producer(graph, expand.inputs[0])
    if reshape is None or reshape.op_type != "Reshape" or not reshape.inputs:
        return None
    small, big = graph.tensor(reshape.outputs[0]), graph.tensor(expand.outputs[0])
    if small is None or big is None or small.shape is None or big.shape is None or len(small.shape) != len(big.shape):
        return None
    if not isinstance(big.shape[0], int) or big.shape[0] <= 1:
        return None
    if not any(a == 1 and isinstance(b, int) and b > 1 for a, b in zip(small.shape, big.shape)):
        return None
    source = _producer(graph, reshape.inputs[0])
    while source is not None and source.op_type in params.get("through", ()) and source.inputs:
        source = _producer(graph, source.inputs[0])
    if source is None or source.op_type not in params.get("sources", ()):
        return None
    if source.op_type == "Slice" and not _slices_last_axis(graph, source):
        return None
    return (f"it permutes by {tuple(perm)} the Expand '{expand.name}' of the Reshape '{reshape.name}' of the "
            f"{source.op_type} '{source.name}' (a tiled relative-position logit): the compiler's rewrite "
            "reduce_tp_in_mesh_forward fails on it (build() raises)")


def _computed(graph: GraphFacts, node: NodeFact) -> bool:
    """Input 0 is computed by a node (not a graph input or a constant)."""
    return bool(node.inputs) and _producer(graph, node.inputs[0]) is not None


def describe_params(params: Mapping[str, Any]) -> dict[str, str]:
    """Extra format keys for the docstrings above (``{chain_text}``), the rules' ``words``."""
    def step(s: Any) -> str:
        return s if isinstance(s, str) else "|".join(s)

    out = {"from_node_text": " (when input 0 is computed by another node)" if params.get("from_node") else "",
           "exclusive_text": " (when this node is the only reader of that input)" if params.get("exclusive") else ""}
    if "constraint" in params:
        inner = params["constraint"]
        out["constraint_text"] = (RULES[inner["rule"]].describe(inner.get("params", {})).rstrip(".")
                                  if inner.get("rule") in RULES else "?")
    if "ops" in params:
        out["ops_text"] = fmt_set(params["ops"])
        if params.get("skip") and "constraint" in params:  # consumers_pass: readers behind `skip` ops count
            out["ops_text"] += " (directly or through %s)" % "|".join(params["skip"])
        out["through_text"] = fmt_set(params.get("through", ())) if params.get("through") else "nothing"
        out["via_text"] = (" (when it feeds a %s: that op's result)" % "|".join(params["via"])) if params.get("via") else ""
    out["max_rank_text"] = (f" and its result has rank at most {params['max_rank']}"
                            if params.get("max_rank") is not None else "")
    if "channels_last_after" in params:
        out["makers_text"] = fmt_set(params["channels_last_after"])
    if "chain" in params:
        out["chain_text"] = " <- ".join(step(s) for s in params["chain"])
        if params.get("skip"):
            out["chain_text"] += " (with any of %s in between)" % fmt_set(params["skip"])
    if "path" in params:
        text = " -> ".join(step(s) for s in params["path"])
        if params.get("skip"):
            text += " (with any of %s in between)" % fmt_set(params["skip"])
        out["path_text"] = text
    return out


def _rank(graph: GraphFacts, tensor: str) -> Optional[int]:
    info = graph.tensor(tensor) if tensor else None
    return None if info is None or info.shape is None else len(info.shape)


def _sole_reader(graph: GraphFacts, tensor: str) -> Optional[NodeFact]:
    """The one node reading ``tensor``, not counting readers the pre-passes folded away (the Shape of a
    static tensor TorchScript reads to build a Reshape target)."""
    readers = [c for c in _consumers(graph, tensor) if not _removed(graph, c.index)]
    if len(readers) != 1 or _is_graph_output(graph, tensor):
        return None
    return readers[0]


def _gemm_flattens(graph: GraphFacts, node: NodeFact, tensor: str) -> bool:
    """``node`` is a MatMul of ``tensor`` by a rank-2 matrix whose only reader is an Add: onnxruntime's
    MatMulAddFusion makes the pair a Gemm of ``tensor`` flattened to 2-D by a Reshape of its own (probes
    q.Reshape.ctx=rank6_gemm.*, q.MatMul.ctx=rank6.*)."""
    if node.op_type != "MatMul" or len(node.inputs) < 2 or node.inputs[0] != tensor or not node.outputs:
        return False
    reader = _sole_reader(graph, node.outputs[0])
    return reader is not None and reader.op_type == "Add" and _rank(graph, node.inputs[1]) == 2


def _reads_gemm_result(graph: GraphFacts, node: NodeFact) -> bool:
    """``node`` is a Reshape of a MatMul's bias Add that MatMulAddFusion makes a Gemm (:func:`_gemm_flattens`) and
    that only it reads: the fusion's Reshape back merges into it, so it reshapes the Gemm's 2-D result."""
    if node.op_type != "Reshape" or not node.inputs:
        return False
    add = _producer(graph, node.inputs[0])
    if add is None or add.op_type != "Add" or not add.outputs or _sole_reader(graph, add.outputs[0]) is not node:
        return False
    for t in add.inputs:
        mm = _producer(graph, t) if t else None
        if mm is not None and mm.op_type == "MatMul" and _gemm_flattens(graph, mm, mm.inputs[0]):
            return True
    return False


@rule("matmul_add_gemm", "context", local=False, words=_words)
def rule_matmul_add_gemm(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is the bias Add of a MatMul by a rank-2 matrix that only it reads, and a Reshape is its only reader:
    the compiler's MatMulAddFusion makes the pair a Gemm of 2-D tensors whose Reshape back merges into that
    Reshape (what rank the Add has in the graph does not reach the device)."""
    if node.op_type != "Add" or not node.outputs:
        return "it is not an Add"
    reader = _sole_reader(graph, node.outputs[0])
    if reader is None or not _reads_gemm_result(graph, reader):
        return ("it is not a MatMul's bias Add read only by a Reshape (onnxruntime's MatMulAddFusion would make "
                "it a 2-D Gemm)")
    return None


@rule("rank6_unit_dim_chain", "context", local=False, words=_words)
def rule_rank6_unit_dim_chain(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a rank-6 tensor in or out belongs to a Reshape -> Transpose -> Reshape chain whose Transpose keeps
    a dim of size 1 in place: the compiler drops that dim and builds the chain in rank 5.

    Nodes with no rank-6 input or output pass. The chain's rank-6 tensors must each have one reader,
    the first Reshape's input and the last Reshape's result a rank of at most 5; a tensor of rank 7 or
    more always fails. The first node may be a Gather with a rank-6 result (its own entry judges it); the
    last may be a MatMul by a rank-2 matrix whose only reader is a bias Add (onnxruntime's MatMulAddFusion
    flattens its input to 2-D with a Reshape of its own: Twins-SVT's window projection). A Reshape of such a
    MatMul's bias Add reshapes the Gemm's 2-D result (the fusion's Reshape back merges into it): only its
    result counts. A Reshape that is the only reader of another Reshape (directly or through a no-op the
    pre-passes removed) is merged with it by onnxruntime: the merged Reshape reads the first one's input
    (MViTv2's rel-pos bias reshaped back from rank 6, Expanded to its own shape and reshaped again)."""
    src = node  # the Reshape whose input this one reads once onnxruntime merges contiguous Reshapes
    if node.op_type == "Reshape" and node.inputs:
        prev = _producer(graph, node.inputs[0])
        if (prev is not None and prev.op_type == "Reshape" and prev.outputs
                and _sole_reader(graph, prev.outputs[0]) is node):
            src = prev
    data = [t for t in (src.inputs[:1] if node.op_type == "Reshape" else node.inputs) if t]
    if _reads_gemm_result(graph, src):
        data = []  # it reshapes the Gemm's 2-D result
    ranks = {t: _rank(graph, t) for t in data + [o for o in node.outputs if o]}
    if not any(r is not None and r >= 6 for r in ranks.values()):
        return None
    high = max(r for r in ranks.values() if r is not None)
    if high > 6:
        return f"it has a rank-{high} tensor: dropping one unit dim cannot bring it to rank 5"
    transpose: Optional[NodeFact] = None
    if node.op_type == "Transpose":
        transpose = node
    elif node.op_type == "Reshape":
        out, inp = node.outputs[0] if node.outputs else "", src.inputs[0] if src.inputs else ""
        if (ranks.get(out) or 0) >= 6:
            transpose = _sole_reader(graph, out)
        elif (ranks.get(inp) or 0) >= 6:
            transpose = _producer(graph, inp)
            if transpose is not None and (not transpose.outputs
                                          or _sole_reader(graph, transpose.outputs[0]) is not src):
                transpose = None
    if transpose is None or transpose.op_type != "Transpose":
        if src is not node:
            return (f"onnxruntime merges it with the Reshape '{src.name}' it reads, and the merged Reshape has a "
                    "rank-6 tensor outside a rank-6 Reshape -> Transpose -> Reshape chain")
        return "it has a rank-6 tensor and is not part of a rank-6 Reshape -> Transpose -> Reshape chain"
    first = _producer(graph, transpose.inputs[0]) if transpose.inputs else None
    last = _sole_reader(graph, transpose.outputs[0]) if transpose.outputs else None
    gemm = last is not None and _gemm_flattens(graph, last, transpose.outputs[0])
    if (first is None or first.op_type not in ("Reshape", "Gather")
            or _sole_reader(graph, first.outputs[0]) is not transpose or last is None
            or (last.op_type != "Reshape" and not gemm)):
        return (f"its Transpose '{transpose.name}' is not between two Reshapes that only it links "
                "(a rank-6 Reshape -> Transpose -> Reshape chain; a MatMul with a bias Add, which "
                "onnxruntime makes a Gemm of the input flattened to 2-D, counts as the last Reshape)")
    if (first.op_type == "Reshape" and not _reads_gemm_result(graph, first)
            and (_rank(graph, first.inputs[0]) or 6) > 5) or (
            not gemm and (_rank(graph, last.outputs[0]) or 6) > 5):
        return f"the chain through Transpose '{transpose.name}' starts or ends at rank 6"
    info = graph.tensor(transpose.inputs[0])
    perm = list(transpose.attrs.get("perm") or [])
    shape = list(info.shape) if info is not None and info.shape is not None else []
    if not any(i < len(perm) and perm[i] == i and d == 1 for i, d in enumerate(shape)):
        return (f"Transpose '{transpose.name}' (perm {perm}) keeps no dim of size 1 in place in "
                f"{tuple(shape)}: the chain cannot be built in rank 5")
    return None


@rule("not_conv_channel_split", "context", local=False)
def rule_not_conv_channel_split(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it does not split the channels of a Conv's (N, C, H, W) result into a rank-5 (N, a, C / a, H, W) whose
    plane, kept last, has a dim of 1 at input axis {axes}: the compiler cannot finalize that graph.

    Selective-kernel attention (timm SKNet) reshapes its 1x1 fc_select Conv to (N, paths, C, 1, 1). A plane
    without such a unit dim, a rank-4 or rank-6 target, another layout of the same elements, or a producer
    that is not a Conv (a pooling, an activation) pass."""
    if node.op_type != "Reshape" or not node.inputs or not node.outputs:
        return None
    producer = _producer(graph, node.inputs[0])
    if producer is None or producer.op_type != "Conv":
        return None
    src, out = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0])
    if src is None or out is None or not src.static or not out.static:
        return None
    s, o = tuple(src.shape or ()), tuple(out.shape or ())
    axes = [int(a) for a in params.get("axes", (2, 3))]
    if len(s) != 4 or len(o) != 5 or not any(s[a] == 1 for a in axes) or o[0] != s[0] or o[3:] != s[2:] \
            or o[1] * o[2] != s[1]:
        return None
    return (f"it splits the channels of Conv '{producer.name}' {s} into {o}, keeping the {s[2]} x {s[3]} "
            "plane last (the QNN graph fails to finalize: QNN_COMMON_ERROR_MEM_ALLOC)")


@rule("not_scaled_softmax_off_last_axis", "context", local=False)
def rule_not_scaled_softmax_off_last_axis(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is not a Softmax along an axis other than the last whose input is a Mul, read by nothing else, by a
    rank-0 constant: the compiler cannot finalize that graph (onnxruntime-qnn folds the scale into the Softmax).

    GroupViT's group assignment scales its attention logits and takes the Softmax over the queries (axis -2).
    The last axis, a Div by the constant, a Mul by a (1,) or per-channel constant, a Mul another node also
    reads, or no Mul pass."""
    if node.op_type != "Softmax" or not node.inputs:
        return None
    info = graph.tensor(node.inputs[0])
    if info is None or info.shape is None:
        return None
    rank = len(info.shape)
    axis = node.attrs.get("axis")
    if not isinstance(axis, int):
        axis = -1 if node.opset >= 13 else 1
    if rank == 0 or not -rank <= axis < rank or axis % rank == rank - 1:
        return None
    mul = _producer(graph, node.inputs[0])
    if mul is None or mul.op_type != "Mul" or len(mul.inputs) != 2:
        return None
    if len(graph.consumers.get(mul.outputs[0], [])) != 1:
        return None  # the scale stays a Mul when another node reads its result
    for name in mul.inputs:
        scale = graph.tensor(name)
        if scale is not None and scale.value is not None and scale.shape == ():
            return (f"it takes the Softmax along axis {axis} (not the last of rank {rank}) of Mul '{mul.name}' by "
                    "a rank-0 constant (the QNN graph fails to finalize: QNN_COMMON_ERROR_MEM_ALLOC)")
    return None


@rule("behind_heads_transpose", "context", local=False)
def rule_behind_heads_transpose(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input 0 is computed by a rank-4 Transpose (0, 1, 3, 2) whose result's dim 2 is a multiple of
    {multiple_of}: attention's (1, h, L, d) read back as (1, h, d, L) with the head width d whole fp16 groups,
    which the compiler folds into the layout change after it."""
    step = int(params["multiple_of"])
    producer = _producer(graph, node.inputs[0]) if node.inputs and node.inputs[0] else None
    if producer is None or producer.op_type != "Transpose":
        what = "a graph input or a constant" if producer is None else f"computed by {producer.op_type} '{producer.name}'"
        return f"input 0 is {what}, not by a Transpose (0, 1, 3, 2)"
    if list(producer.attrs.get("perm") or ()) != [0, 1, 3, 2]:
        return f"input 0 is computed by Transpose '{producer.name}' with perm {list(producer.attrs.get('perm') or ())}"
    info = graph.tensor(producer.outputs[0]) if producer.outputs and producer.outputs[0] else None
    if info is None or info.shape is None:
        return ShapeUnknown(f"the shape of Transpose '{producer.name}''s result is unknown")
    if len(info.shape) != 4:
        return f"Transpose '{producer.name}''s result has rank {len(info.shape)}, not 4"
    d = info.shape[2]
    if not isinstance(d, int):
        return f"dim 2 of Transpose '{producer.name}''s result is {d!r} (not static)"
    if d % step:
        return f"input 0 is computed by Transpose '{producer.name}' (0, 1, 3, 2) whose result's dim 2 is {d}, not a multiple of {step}"
    return None


#: element-wise ops of two operands: a Transpose (0, 1, 3, 2) of the heads read by one of them together with
#: another computed tensor is moved behind it by the compiler (reduce_tp_in_mesh_forward)
_HEADS_BINARY = frozenset({"Add", "Sub", "Mul", "Div"})


def _is_scale(graph: GraphFacts, tensor: str) -> bool:
    """``tensor`` holds one element (a constant scale, or one TorchScript computes from the head width)."""
    info = graph.tensor(tensor) if tensor else None
    if info is None:
        return False
    if info.value is not None:
        return len(info.value) == 1
    return info.shape is not None and all(isinstance(d, int) and d == 1 for d in info.shape)


def _heads_split_path(graph: GraphFacts, tensor: str, depth: int = 0) -> Optional[str]:
    """Why the heads in ``tensor`` do not reach attention's Transpose (0, 1, 3, 2) or MatMul on every path
    (None when they do), looking through Slices of axis 2 or 3 and Mul/Div by a one-element scale."""
    readers = [c for c in _consumers(graph, tensor) if not _removed(graph, c.index) and c.op_type not in ("Shape", "Size")]
    if _is_graph_output(graph, tensor):
        return f"'{tensor}' is a graph output"
    if not readers:
        return f"'{tensor}' has no reader"
    for c in readers:
        if depth > 8:
            return f"the path to attention through {c.op_type} '{c.name}' is longer than 8 ops"
        if c.op_type == "MatMul":
            continue
        if c.op_type == "Slice":
            axes = _const_ints(graph, c.inputs[3]) if len(c.inputs) > 3 and c.inputs[3] else None
            if axes is None or any(a % 4 not in (2, 3) for a in axes):
                return f"Slice '{c.name}' does not slice axis 2 or 3 by constant axes"
            why = _heads_split_path(graph, c.outputs[0], depth + 1)
        elif c.op_type in ("Mul", "Div") and len(c.inputs) == 2:
            other = c.inputs[1] if c.inputs[0] == tensor else c.inputs[0]
            if not _is_scale(graph, other):
                return f"{c.op_type} '{c.name}' reads it with '{other}', not a one-element scale"
            why = _heads_split_path(graph, c.outputs[0], depth + 1)
        elif c.op_type == "Transpose":
            perm = list(c.attrs.get("perm") or ())
            if perm != [0, 1, 3, 2]:
                return f"Transpose '{c.name}' has perm {perm}, not (0, 1, 3, 2)"
            for r in _consumers(graph, c.outputs[0]):
                if r.op_type in _HEADS_BINARY and len(r.inputs) == 2:
                    other = r.inputs[1] if r.inputs[0] == c.outputs[0] else r.inputs[0]
                    if other and _producer(graph, other) is not None and not _is_scale(graph, other):
                        return (f"{r.op_type} '{r.name}' reads Transpose '{c.name}''s result with the computed "
                                f"'{other}': the compiler moves the Transpose behind the {r.op_type} and leaves "
                                "the split bare (CoaT)")
            continue
        else:
            return f"it reaches {c.op_type} '{c.name}', not attention's Transpose (0, 1, 3, 2) or MatMul"
        if why:
            return why
    return None


@rule("splits_heads_for_attention", "context", local=False)
def rule_splits_heads_for_attention(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """output 0 is a rank-4 (N, h, D, L) with D a multiple of {multiple_of} read, on every path (through
    Slices of axis 2 or 3 and Mul/Div by a one-element scale), by attention's Transpose (0, 1, 3, 2) or a
    MatMul, and no such Transpose is read by an element-wise op with a second computed operand of more than
    one element: the split of a map into attention heads, which the compiler lays out with the heads on the
    batch axis, (h, D, 1, L), whatever the map's plane."""
    step = int(params["multiple_of"])
    out = node.outputs[0] if node.outputs else ""
    info = graph.tensor(out) if out else None
    if info is None or info.shape is None:
        return ShapeUnknown(f"the shape of output 0 '{out}' is unknown")
    if len(info.shape) != 4:
        return f"output 0 '{out}' has rank {len(info.shape)}, not 4"
    d = info.shape[2]
    if not isinstance(d, int) or d % step:
        return f"dim 2 of output 0 '{out}' is {d!r}, not a multiple of {step}"
    return _heads_split_path(graph, out)


def _no_rank6_view(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> bool:
    """rank6_sum_plane's ``settled``: input 0 and output 0 are not a known rank 6 and rank 4 (its own shapes)."""
    src = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    dst = graph.tensor(node.outputs[0]) if node.outputs and node.outputs[0] else None
    return src is None or src.shape is None or dst is None or dst.shape is None or len(src.shape) != 6 \
        or len(dst.shape) != 4


@rule("rank6_sum_plane", "context", local=False, settled=_no_rank6_view)
def rule_rank6_sum_plane(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a rank-6 input 0 that an Add of two computed operands makes, viewed as rank 4, holds a multiple of
    {multiple_of} elements in its last two dims: the compiler lays the sum out as (N, the middle dims, d4, d5)
    and runs the Reshape back to rank 4 as a Reshape of that (d4, d5) plane (MViTv2's decomposed relative
    position bias, attn.view(B, h, qh, qw, kh, kw) + rel_h + rel_w)."""
    # only a known rank-6 -> rank-4 view is judged: any other Reshape passes (the plane rules judge rank 4)
    if _no_rank6_view(node, params, graph):
        return None
    src = graph.tensor(node.inputs[0])
    add = _producer(graph, node.inputs[0])
    if add is None or add.op_type != "Add" or len(add.inputs) != 2 or any(
            not i or _producer(graph, i) is None for i in add.inputs):
        return None
    d4, d5 = src.shape[4], src.shape[5]
    if not isinstance(d4, int) or not isinstance(d5, int):
        return ShapeUnknown(f"dims 4 and 5 of input 0 are {d4!r}, {d5!r}")
    step = int(params["multiple_of"])
    if (d4 * d5) % step:
        return (f"input 0 {tuple(src.shape)} is the sum of Add '{add.name}' of two computed tensors: the compiler "
                f"lays it out with a ({d4}, {d5}) plane of {d4 * d5} elements, not a multiple of {step}, and runs "
                "the Reshape back to rank 4 on the CPU")
    return None


def _unit_tiling(graph: GraphFacts, concat: NodeFact) -> Optional[str]:
    """None when ``concat`` joins, in order, Slices of one tensor that tile one of its axes in pieces of one
    (starts 0, 1, ..., n - 1 of an axis of static length n, step 1), each read only by ``concat``, on the
    next axis; else why not."""
    if concat.op_type != "Concat" or len(concat.inputs) < 2:
        return "it is not a Concat of two or more tensors"
    parts = [_producer(graph, name) if name else None for name in concat.inputs]
    if any(p is None or p.op_type != "Slice" or len(p.inputs) < 4 for p in parts):
        return f"an input of Concat '{concat.name}' is not computed by a Slice with constant axes"
    if len({p.inputs[0] for p in parts}) != 1 or len({p.name for p in parts}) != len(parts):
        return f"the Slices read by Concat '{concat.name}' do not slice one tensor once each"
    shape = _shape(graph, parts[0].inputs[0])
    if shape is None:
        return "the sliced tensor's shape is unknown"
    rank = len(shape)
    axes = set()
    for i, p in enumerate(parts):
        axis, starts, ends = (_const_ints(graph, p.inputs[k]) for k in (3, 1, 2))
        steps = _const_ints(graph, p.inputs[4]) if len(p.inputs) > 4 and p.inputs[4] else (1,)
        if axis is None or starts is None or ends is None or steps is None or len(axis) != 1 or steps != (1,):
            return f"Slice '{p.name}' is not a step-1 Slice of one constant axis"
        a = axis[0] % rank
        n = shape[a]
        if not isinstance(n, int) or starts[0] % n != i or ends[0] != i + 1:
            return (f"the Slices do not tile axis {a} in pieces of one (Slice '{p.name}': "
                    f"[{starts[0]}:{ends[0]}] of {n})")
        if len(parts) != n:
            return f"the {len(parts)} Slices of one row each do not cover the {n} rows of axis {a}"
        if _sole_reader(graph, p.outputs[0]) is not concat:
            return f"Concat '{concat.name}' is not the only reader of Slice '{p.name}'"
        axes.add(a)
    if len(axes) != 1:
        return "the Slices cut different axes"
    axis = concat.attrs.get("axis")
    if not isinstance(axis, int) or axis % rank != axes.pop() + 1:
        return f"Concat '{concat.name}' does not join on the axis after the one sliced"
    return None


@rule("unit_split_concat", "context", local=False, words=_words)
def rule_unit_split_concat(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is a Slice, or the Concat, of Slices that tile one axis of a static tensor in pieces of one and are concatenated, in order, on the next axis: the compiler rewrites them into one Split (replace_parallel_slice_by_split) and the Split and Concat into one Reshape (replace_split_concat_by_reshape) merged with the Concat's readers; when the Concat's result is a graph output that Reshape is a row of its own named after the first Slice."""  # noqa: E501
    if node.op_type == "Concat":
        return _unit_tiling(graph, node)
    reader = _sole_reader(graph, node.outputs[0]) if node.op_type == "Slice" and node.outputs and node.outputs[0] else None
    if reader is None or reader.op_type != "Concat":
        return "it is not a Slice read only by a Concat"
    why = _unit_tiling(graph, reader)
    if why is None and reader.inputs[0] == node.outputs[0] and _is_graph_output(graph, reader.outputs[0]):
        return (f"the Concat '{reader.name}' is a graph output: the integer Reshape the compiler makes of the "
                "Slices and the Concat stays a CPU row, named after the first Slice")
    return why
