"""What a toolchain does to the graph before placing ops.

Each pass marks nodes the compiler removes (``folded``) or merges into one fused op
(``fused``); the graph facts themselves are never changed, so one set of facts serves every
target. Which passes run, and in which order, is listed per table (``prepasses``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from itertools import chain
from operator import attrgetter
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from .graph import (IDENTITY_OPS, NONDETERMINISTIC, SEQUENCE_OUTPUT, SHAPE_OPS, GraphFacts, GraphView, NodeFact,
                    TensorInfo, dtype_name, frozen_new, tensor_info)
from .tables import Constraint, OpEntry, Pattern, Table

_PASS_THROUGH = IDENTITY_OPS | {"Cast"}  # ops eliminate_identity removes (a Cast only to its input's dtype)


@dataclass
class PrepassResult:
    folded: dict[int, str] = field(default_factory=dict)  # node index -> why it is removed
    fused: dict[int, tuple[Pattern, int]] = field(default_factory=dict)  # node index -> (pattern, anchor index)
    fused_cpu: set[int] = field(default_factory=set)  # fused nodes the pattern leaves on the CPU (runs_on)
    # tensors that became constants -> their info. One info serves every tensor of the same dtype, shape
    # and value (the first one's name; an Identity's output has its input's info): of issue 29's
    # encoder's 14,694, 33 differ. Nothing reads the name of an info here or from ``GraphView.tensor``:
    # the rules, matcher, partition and pre-passes read the dtype, shape, const, value and static only
    # (the matcher's memo keys on those, never on the info itself)
    const: dict[str, TensorInfo] = field(default_factory=dict)
    # tensors whose static shape in the facts depends on the result of an op the compiler leaves to run
    # time (data_shapes: a NonZero of a constant that the facts evaluated): dynamic to the rules
    shapes: dict[str, TensorInfo] = field(default_factory=dict)
    absorbed: dict[int, int] = field(default_factory=dict)  # folded node index -> the node it is fused into
    # output -> input of a node removed as a no-op whose readers read its input instead (eliminate_noop_expand_slice)
    forwarded: dict[str, str] = field(default_factory=dict)
    # removed nodes whose result is their input 0 unchanged (eliminate_noop_layout): the context rules
    # look through them as through an eliminated Identity
    passed_on: set[int] = field(default_factory=set)
    # node index -> the index of the identical node it was merged into (merge_identical_nodes): its readers
    # read that node's outputs
    merged: dict[int, int] = field(default_factory=dict)
    # the graph as the rules see it once every constant is folded (made before fuse_patterns, which
    # folds none): the pattern constraints and then the matcher read it, one merge of the tensors
    view: Optional[GraphView] = field(default=None, compare=False, repr=False)


def run_prepasses(graph: GraphFacts, table: Table) -> PrepassResult:
    pre = PrepassResult()
    passes = set(table.prepasses)
    if passes & {"eliminate_identity", "eliminate_same_type_casts"}:
        _eliminate_identity(graph, pre, identity="eliminate_identity" in passes,
                            any_cast="eliminate_same_type_casts" in passes)
    if "fold_constants" in passes:
        _data_shapes(graph, pre, table.ops)
    if passes & {"fold_constants", "fold_shape_ops"}:
        _fold(graph, pre, constants="fold_constants" in passes, shapes="fold_shape_ops" in passes, ops=table.ops)
    if "eliminate_noop_expand_slice" in passes:  # after folding (an Expand to a folded Shape), before
        _eliminate_noop_expand_slice(graph, pre)  # merging (its readers then read what its twin's read)
    if "merge_parallel_casts" in passes:  # after folding: a Cast of a constant is folded, not merged
        _merge_parallel_casts(graph, pre)
    if "merge_identical_nodes" in passes:  # after folding: a folded node needs no merging, and its
        _merge_identical_nodes(graph, pre)  # outputs must be constants for the nodes that read them
    if passes & {"eliminate_noop_arithmetic", "eliminate_noop_add_mul"}:
        _eliminate_noop_arithmetic(graph, pre, divide="eliminate_noop_arithmetic" in passes)
    if "fuse_constant_offsets" in passes:  # after the no-ops: x + 0 is gone, not merged
        _fuse_constant_offsets(graph, pre)
    if "eliminate_noop_layout" in passes:
        _eliminate_noop_layout(graph, pre)
    if "fuse_reshape_target" in passes:  # after folding (its constant pieces) and merging, before
        _fuse_reshape_target(graph, pre)  # eliminate_unused_nodes (the pieces' producers go with the Concat)
    if "eliminate_unused_nodes" in passes:  # after every pass that removes readers
        _eliminate_unused_nodes(graph, pre)
    if "fuse_conv_bn" in passes:
        _fuse_conv_bn(graph, pre)
    if "fuse_patterns" in passes and table.patterns:
        # the passes above made every constant there is; fuse_patterns folds none (the view stays valid)
        pre.view = GraphView(graph, pre)
        _fuse_patterns(graph, pre, table.patterns, pre.view)
    return pre


def _main_nodes(graph: GraphFacts, ops: Iterable[str]) -> Sequence[NodeFact]:
    """The main graph's nodes of the given op types, in graph order: what a pre-pass that judges
    only those ops (and never a body's nodes) visits, without a look at each of the graph's other
    nodes (26,394 in issue 29's encoder, a few hundred of them Casts)."""
    by_op = graph.main_nodes_by_op
    lists = [by_op[op] for op in sorted(ops) if op in by_op]
    if len(lists) == 1:
        return lists[0]
    return sorted(chain.from_iterable(lists), key=_node_index)


_node_index = attrgetter("index")  # a node's index (the sort key of _main_nodes, without a Python call a node)


def _nodes_of(graph: GraphFacts, ops: Iterable[str]) -> Sequence[NodeFact]:
    """Every node of the given op types, subgraph bodies' included, in graph order: what a pre-pass
    that judges only those ops visits. A graph without bodies (every node in ``main_nodes_by_op``)
    has them from that index; one with bodies is scanned."""
    if sum(map(len, graph.main_nodes_by_op.values())) == len(graph.nodes):
        return _main_nodes(graph, ops)
    ops = frozenset(ops)
    return [n for n in graph.nodes if n.op_type in ops]


def _merge_identical_nodes(graph: GraphFacts, pre: PrepassResult) -> None:
    """Common subexpression elimination: of the main-graph nodes with the same op, inputs and
    attributes, one stays and the others are removed (onnxruntime, probed: which one stays is its
    choice, :func:`_reverse_dfs_order`). Inputs are compared after merging: two nodes that read
    the outputs of two merged nodes are identical too, so identical chains merge whole (three
    ``NonZero -> Transpose -> GatherND`` chains of one mask: q.NonZero.ctx=duplicate_chain).
    Small initializers are compared by value (the axes of two ReduceSums, each its own initializer).
    Nodes with a graph output, a body or a non-deterministic op are never merged; nodes without inputs
    are (the 51 SequenceEmpty of a TorchScript MViT-v2 become one, which runs on the CPU)."""
    outputs = set(graph.outputs)
    groups: dict[tuple[Any, ...], list[NodeFact]] = {}
    same: dict[str, str] = {}  # output of a merged node -> the output of the first node of its set
    # (domain, op, inputs, outputs) -> the one node with it so far, whose attributes are not yet keyed
    # (None once a second node came): the sorted reprs of a node's attributes are made only when
    # another node has its op and inputs, which few have (none of issue 29's encoder's 26,394 nodes)
    alone: dict[tuple[Any, ...], Optional[NodeFact]] = {}
    folded = pre.folded
    # the names _value_key may key by value (an initializer, a Constant's output); any other is its name
    valued = graph.initializers.union(o for n in _nodes_of(graph, ("Constant",)) for o in n.outputs)
    for node in graph.nodes:  # in graph order: a node's producers come before it
        if node.index in folded:
            if _removed_as_its_input(graph, pre, node):
                same[node.outputs[0]] = same.get(node.inputs[0], node.inputs[0])  # removed: its readers read its input
            continue
        if node.graph or node.subgraphs or node.op_type in NONDETERMINISTIC \
                or (not node.inputs and node.op_type == "Constant") or not outputs.isdisjoint(node.outputs):
            continue
        inputs = tuple([_value_key(graph, j) if (j := same.get(i, i)) in valued else j for i in node.inputs])
        head = (node.domain, node.op_type, inputs, len(node.outputs))
        first = alone.get(head, node)
        if first is node:
            alone[head] = node
            continue
        if first is not None:  # the second node with this head: the first one's group made now
            alone[head] = None
            try:
                groups[(*head, _attrs_key(first))] = [first]
            except TypeError:
                pass
        try:
            attrs = _attrs_key(node)
        except TypeError:
            continue
        members = groups.setdefault((*head, attrs), [])
        if members:
            for mine, theirs in zip(node.outputs, members[0].outputs):
                if mine and theirs:
                    same[mine] = theirs
        members.append(node)
    # in graph order of their first node, as they would be made node by node
    groups = {k: v for k, v in sorted(groups.items(), key=lambda kv: kv[1][0].index) if len(v) > 1}
    if not groups:
        return
    rank = _reverse_dfs_order(graph, dict(_passed_through(graph, pre)))
    for nodes in groups.values():
        kept = min(nodes, key=lambda n: rank.get(n.index, len(rank) + n.index))
        for node in nodes:
            if node is not kept:
                pre.folded[node.index] = (f"identical to {node.op_type} '{kept.name}' (same inputs and "
                                          "attributes): merged into it before placement")
                pre.merged[node.index] = kept.index


def _attrs_key(node: NodeFact) -> tuple[tuple[str, str], ...]:
    """A node's attributes as _merge_identical_nodes compares them (TypeError: not comparable)."""
    return tuple(sorted((k, repr(v)) for k, v in node.attrs.items()))


#: target types a Cast's merge treats as one: RKNN computes float32 in float16 (x.Cast.ctx=int_arith.cast_twice.differ)
_CAST_CLASS = {"float16": "float", "float32": "float"}


def _merge_parallel_casts(graph: GraphFacts, pre: PrepassResult) -> None:
    """Casts of one tensor to the same target type are one Cast: the first in graph order stays and
    the others are removed (rknn-toolkit2 2.5.0 ``remove_parallel_cast``, probed:
    x.Cast.ctx=int_arith.cast_t*: the first in graph order keeps the CPU row whatever the names, a
    third copy goes too; float16 and float32 count as one type, RKNN computes both in float16; a
    Cast to int32 beside one to float32 stays). Mamba's two Casts of its unsqueezed int64 mask."""
    outputs = set(graph.outputs)
    first: dict[tuple[str, str], NodeFact] = {}
    for node in _main_nodes(graph, ("Cast",)):  # graph order
        to = _cast_to(node) if node.op_type == "Cast" and node.domain == "ai.onnx" else None
        if to is None or node.graph or node.index in pre.folded or not node.inputs or not node.inputs[0] \
                or any(o in outputs for o in node.outputs):
            continue
        key = (node.inputs[0], _CAST_CLASS.get(to, to))
        kept = first.setdefault(key, node)
        if kept is not node:
            pre.folded[node.index] = (f"identical to Cast '{kept.name}' (same input, to {to}): parallel Casts "
                                      "are merged into the first before placement")


_INT32_MAX = 2 ** 31 - 1


def _const_ints(graph: GraphFacts, pre: PrepassResult, name: str) -> Optional[tuple[int, ...]]:
    """The value of a constant integer tensor (an initializer, a Constant or a folded shape), else None."""
    info = pre.const.get(name) or graph.tensors.get(name)
    if info is None or not info.const or info.value is None:
        return None
    try:
        return tuple(int(v) for v in info.value)
    except (TypeError, ValueError):
        return None


def _noop_expand(graph: GraphFacts, pre: PrepassResult, node: NodeFact) -> Optional[str]:
    if len(node.inputs) != 2:
        return None
    target = _const_ints(graph, pre, node.inputs[1])
    src = pre.shapes.get(node.inputs[0]) or graph.tensor(node.inputs[0])
    if target is None or src is None or src.shape is None or len(target) > len(src.shape):
        return None
    for want, have in zip(reversed(target), reversed(tuple(src.shape))):
        if want != 1 and not (isinstance(have, int) and have == want):
            return None
    return f"an Expand to {list(target)}, which keeps its input's shape, is removed before placement"


def _noop_slice(graph: GraphFacts, pre: PrepassResult, node: NodeFact) -> Optional[str]:
    if not 3 <= len(node.inputs) <= 5:
        return None  # opset < 10: starts/ends as attributes (not probed)
    starts, ends = _const_ints(graph, pre, node.inputs[1]), _const_ints(graph, pre, node.inputs[2])
    steps = _const_ints(graph, pre, node.inputs[4]) if len(node.inputs) == 5 and node.inputs[4] else None
    if len(node.inputs) == 5 and node.inputs[4] and steps is None:
        return None
    if starts is None or ends is None or any(s != 0 for s in starts) or any(e < _INT32_MAX for e in ends) \
            or any(s != 1 for s in steps or ()):
        return None
    return "a Slice of the whole range (starts 0, ends INT_MAX, steps 1) is removed before placement"


def _eliminate_noop_expand_slice(graph: GraphFacts, pre: PrepassResult) -> None:
    """An Expand to a constant shape whose every dim is 1 or the input's own static dim (fewer dims
    allowed), and a Slice from 0 to INT_MAX with steps 1, are removed before placement and their readers
    read the input (onnxruntime's Expand and Slice eliminations, probed: q.Expand.ctx=noop_layout.*,
    q.Slice.ctx=noop_layout.*; the input's other dims may be data-dependent; an Expand to the input's
    Shape is removed once that Shape folds; a Reshape to its input's shape is kept, and so is a Slice
    that takes part of an axis). A NonZero of a mask expanded to its own shape then merges with a
    NonZero of the mask (q.NonZero.ctx=duplicate_chain.expand_noop.*). A node producing a graph output
    is kept."""
    outputs = set(graph.outputs)
    for node in _main_nodes(graph, ("Expand", "Slice")):
        if node.op_type not in ("Expand", "Slice") or node.graph or node.domain != "ai.onnx" \
                or node.index in pre.folded or not node.inputs or not node.inputs[0] or not node.outputs \
                or not node.outputs[0] or node.outputs[0] in outputs:
            continue
        why = (_noop_expand if node.op_type == "Expand" else _noop_slice)(graph, pre, node)
        if why is None:
            continue
        pre.folded[node.index] = why
        pre.passed_on.add(node.index)  # the context rules look through it (MViTv2's Reshape -> Expand -> Reshape)
        pre.forwarded[node.outputs[0]] = pre.forwarded.get(node.inputs[0], node.inputs[0])


def _merged_into(pre: PrepassResult) -> dict[int, list[int]]:
    """{kept node index: the indices of the nodes merge_identical_nodes merged into it}."""
    into: dict[int, list[int]] = {}
    for idx, kept in pre.merged.items():
        into.setdefault(kept, []).append(idx)
    return into


def _readers(graph: GraphFacts, into: Mapping[int, Sequence[int]], node: NodeFact) -> list[int]:
    """The nodes that read ``node``'s outputs once identical nodes are merged: its own readers and those of
    the nodes merged into it (``into``: :func:`_merged_into`)."""
    twins = [node, *(graph.nodes[i] for i in into.get(node.index, ()))]
    return [c for n in twins for o in n.outputs if o for c in graph.consumers.get(o, ())]


def _eliminate_unused_nodes(graph: GraphFacts, pre: PrepassResult) -> None:
    """A node whose every reader is gone before placement without needing its value (a Shape or Size of
    its static result folded, a merged duplicate, a constant folded, or a node removed this way) and which
    makes no graph output is removed too, and so, in turn, are the nodes only it read (onnxruntime,
    probed: q.{Pad,Sigmoid}.ctx=dead.*: an int64 Pad of LED's input ids read only by a Shape never reaches
    an execution provider; with a second reader it runs, on the CPU). A removed node that passes its
    input on (an Identity, a no-op Cast, Expand or x * 1, a BatchNormalization fused into its Conv) still
    needs its producer, unless its own readers are gone too."""
    outputs = set(graph.outputs)
    gone = {i for i, why in pre.folded.items()  # the most frequent reason first
            if why.endswith("folded at compile time") or why.startswith("identical to ")
            or graph.nodes[i].op_type in SHAPE_OPS}
    if not pre.merged and sum(map(len, graph.main_nodes_by_op.values())) == len(graph.nodes):
        _remove_unread(graph, pre, gone, outputs)
        return
    in_bodies = {i for n in graph.nodes if n.graph for i in n.inputs if i}  # read inside an If/Loop body
    into = _merged_into(pre)
    changed = True
    while changed:  # once more when a node merged into a later one let an earlier one go (its twin's readers)
        changed = False
        for node in reversed(graph.nodes):  # readers before producers: chains go whole
            if node.graph or node.subgraphs or node.index in gone or node.op_type in NONDETERMINISTIC or not node.outputs:
                continue
            readers = _readers(graph, into, node)
            if not readers or any(o in outputs or o in in_bodies for o in node.outputs if o) \
                    or any(c not in gone for c in readers):
                continue
            gone.add(node.index)
            changed = changed or bool(pre.merged)
            if node.index not in pre.folded:
                pre.folded[node.index] = "read only by nodes removed before placement: removed too"


def _remove_unread(graph: GraphFacts, pre: PrepassResult, gone: set[int], outputs: set[str]) -> None:
    """:func:`_eliminate_unused_nodes` for a graph without bodies and merged nodes, where its walk
    from the last node to the first takes one round: only the nodes one of whose readers is gone can
    go, so the walk visits just those, the producers of the gone nodes' inputs, highest index first
    (the walk's order: a node's readers decided before it), instead of every node (26,394 in issue
    29's encoder, of which none goes for onnxruntime's targets)."""
    nodes, producer, consumers, folded = graph.nodes, graph.producer, graph.consumers, pre.folded
    queued: set[int] = set()
    for i in gone:
        for name in nodes[i].inputs:
            p = producer.get(name) if name else None
            if p is not None and p not in gone:  # most are: a folded constant's inputs are folded constants
                queued.add(p)
    heap = [-p for p in queued]  # highest index first
    heapify(heap)
    while heap:
        i = -heappop(heap)
        node = nodes[i]
        if i in gone or node.subgraphs or node.op_type in NONDETERMINISTIC or not node.outputs:
            continue
        readers = [c for o in node.outputs if o for c in consumers.get(o, ())]
        if not readers or any(o in outputs for o in node.outputs if o) or any(c not in gone for c in readers):
            continue
        gone.add(i)
        if i not in folded:
            folded[i] = "read only by nodes removed before placement: removed too"
        for name in node.inputs:
            p = producer.get(name) if name else None
            # a producer after it in the graph had its turn before it went (a graph not in topological order)
            if p is not None and p < i and p not in queued:
                queued.add(p)
                heappush(heap, -p)


def _view_info(graph: GraphFacts, pre: PrepassResult, name: str) -> Optional[TensorInfo]:
    return pre.const.get(name) or pre.shapes.get(name) or graph.tensor(name)


def _copies_root_dim(graph: GraphFacts, pre: PrepassResult, name: str, root: str, position: int) -> bool:
    """``name`` is ``Unsqueeze(Gather(Shape(t), position), [0])`` of a ``t`` that is the Reshape's input or
    has its rank and, where both are static, its dims: onnxruntime writes 0 (copy that dim) for it."""
    producer = graph.producer.get(name)
    unsq = graph.nodes[producer] if producer is not None else None
    if unsq is None or unsq.op_type != "Unsqueeze" or unsq.index in pre.folded or not unsq.inputs:
        return False
    axes = unsq.attrs.get("axes") if len(unsq.inputs) < 2 else _const_ints(graph, pre, unsq.inputs[1])
    if axes is None or list(axes) != [0]:
        return False
    producer = graph.producer.get(unsq.inputs[0])
    gather = graph.nodes[producer] if producer is not None else None
    if gather is None or gather.op_type != "Gather" or len(gather.inputs) != 2 \
            or _const_ints(graph, pre, gather.inputs[1]) != (position,):
        return False
    producer = graph.producer.get(gather.inputs[0])
    shape = graph.nodes[producer] if producer is not None else None
    if shape is None or shape.op_type != "Shape" or not shape.inputs or shape.attrs.get("start") or shape.attrs.get("end"):
        return False
    if shape.inputs[0] == root:
        return True
    mine, theirs = _view_info(graph, pre, shape.inputs[0]), _view_info(graph, pre, root)
    if mine is None or theirs is None or mine.shape is None or theirs.shape is None \
            or len(mine.shape) != len(theirs.shape):
        return False
    return all(a == b for a, b in zip(mine.shape, theirs.shape) if isinstance(a, int) and isinstance(b, int))


def _reshape_target_value(graph: GraphFacts, pre: PrepassResult, concat: NodeFact, root: str) -> Optional[list[int]]:
    """The constant a Reshape's Concat target becomes: constant pieces as they are, a piece reading dim k
    of the input's Shape at position k as 0, one computed one-element piece as -1; None when more than
    one element would be -1 (or a piece is neither)."""
    values: list[int] = []
    for name in concat.inputs:
        known = _const_ints(graph, pre, name) if name else None
        if known is not None:
            values.extend(known)
            continue
        if _copies_root_dim(graph, pre, name, root, len(values)):
            values.append(0)
            continue
        info = _view_info(graph, pre, name) if name else None
        if info is None or info.shape is None or any(not isinstance(d, int) for d in info.shape):
            return None
        n = 1
        for d in info.shape:
            n *= d
        if n != 1:
            return None
        values.append(-1)
    return values if values.count(-1) <= 1 else None


def _reshaped(src: Sequence[Any], target: Sequence[int], allowzero: bool) -> Optional[tuple[int, ...]]:
    """The result shape of a Reshape of a static ``src`` to the constant ``target`` (None if invalid)."""
    total = 1
    for d in src:
        total *= int(d)
    dims: list[int] = []
    for k, t in enumerate(target):
        if t == 0 and not allowzero:
            if k >= len(src):
                return None
            dims.append(int(src[k]))
        else:
            dims.append(int(t))
    known = 1
    for d in dims:
        if d != -1:
            known *= d
    if -1 in dims:
        if known <= 0 or total % known:
            return None
        dims[dims.index(-1)] = total // known
    elif known != total:
        return None
    return tuple(dims)


def _fuse_reshape_target(graph: GraphFacts, pre: PrepassResult) -> None:
    """A Reshape whose target is a Concat read by nothing else, each of whose pieces is a constant
    (after folding), a read of the same dim of its input's Shape (0) or a computed one-element tensor,
    at most one element being computed or -1, gets the constant target with the computed element as
    -1; the Concat is removed, and the nodes only it read go with it (eliminate_unused_nodes). A Reshape
    of a static input then has a static result, and so have the nodes after it (onnxruntime's Reshape
    fusion, probed: q.Reshape.ctx=fuse_target.*; VITS's ``x.view(a * b, 1)`` of sizes of a tensor with a
    data-dependent dim). Any other Reshape whose target is not a constant to the compiler (two computed
    elements, a computed one beside a -1, a Concat with a second reader; sizes read from the Shape of a
    tensor with a data-dependent dim are not constants, even of its static dims) has a result shape
    the compiler cannot get, and so have the nodes after it: dynamic, on the CPU."""
    from .graph.data_shapes import data_dependent_shapes, refined_shapes

    outputs = set(graph.outputs)
    into = _merged_into(pre)
    refined: dict[str, TensorInfo] = {}
    runtime: dict[str, str] = {}
    for node in graph.main_nodes_by_op.get("Reshape", ()):
        if node.index in pre.folded or node.domain != "ai.onnx" or len(node.inputs) < 2 or not node.inputs[1] \
                or not node.outputs or not node.outputs[0]:
            continue
        target = node.inputs[1]
        if _is_const(graph, pre, target):
            continue
        producer = graph.producer.get(target)
        concat = graph.nodes[producer] if producer is not None else None
        value = None
        if concat is not None and concat.op_type == "Concat" and not concat.graph and concat.index not in pre.folded \
                and target not in outputs and len(_readers(graph, into, concat)) == 1 \
                and int(concat.attrs.get("axis", 0) or 0) in (0, -1):
            value = _reshape_target_value(graph, pre, concat, node.inputs[0])
        out = graph.tensor(node.outputs[0])
        if value is None:
            if out is not None and out.static and node.outputs[0] not in pre.shapes:
                runtime[out.name] = f"the run-time target of Reshape '{node.name}'"
            continue
        assert concat is not None
        pre.folded[concat.index] = (f"the target of Reshape '{node.name}' becomes the constant {value} before "
                                    "placement (its one computed element -1): folded at compile time")
        src = _view_info(graph, pre, node.inputs[0]) if node.inputs[0] else None
        if src is None or out is None or not src.static or out.static:
            continue
        shape = _reshaped(src.shape or (), value, bool(node.attrs.get("allowzero", 0)))
        if shape is not None:
            refined[out.name] = frozen_new(TensorInfo, name=out.name, dtype=out.dtype, shape=shape, const=False,
                                           value=None)
    if refined:
        pre.shapes.update(refined)
        pre.shapes.update(refined_shapes(graph, refined, pre.shapes))
    if runtime:
        pre.shapes.update(data_dependent_shapes(graph, set(), runtime, pre.shapes))

#: op -> (its neutral constant, input positions that constant may take)
_NEUTRAL = {"Add": (0, (0, 1)), "Mul": (1, (0, 1)), "Sub": (0, (1,)), "Div": (1, (1,))}


def _eliminate_noop_arithmetic(graph: GraphFacts, pre: PrepassResult, divide: bool = True) -> None:
    """Add/Sub of 0 and Mul/Div by 1 are removed when the constant has one element and no more
    dimensions than the other input, whose shape is then the output's (onnxruntime's no-op
    elimination, probed: on either side of Add and Mul, on the right of Sub and Div; an (8,) tensor
    of ones is kept; the other input's dims may be data-dependent, only its rank counts:
    q.*.ctx=noop_datadep, a (1, 1, 1) one widening an (N, 8) tensor is kept). ``divide=False``
    (pre-pass ``eliminate_noop_add_mul``, rknn-toolkit2 2.5.0) keeps ``x / 1``: RKNN removes int64
    ``x + 0``, ``x - 0`` and ``x * 1`` (x.*.ctx=int_arith.*) but runs JetMoE's int64 ``indices / 1`` on the CPU."""
    outputs = set(graph.outputs)
    folded, const, tensors = pre.folded, pre.const, graph.tensors
    for node in _main_nodes(graph, _NEUTRAL):
        spec = _NEUTRAL.get(node.op_type) if divide or node.op_type != "Div" else None
        if spec is None or node.graph or node.domain != "ai.onnx" or node.index in folded \
                or len(node.inputs) != 2 or not node.outputs or node.outputs[0] in outputs:
            continue
        neutral, positions = spec
        for k in positions:
            info = const.get(node.inputs[k]) or tensors.get(node.inputs[k])
            if info is None or not info.const or info.value is None or len(info.value) != 1 \
                    or info.value[0] != neutral or info.shape is None:
                continue  # most: no one-element constant (the other input is looked up only after)
            other = tensors.get(node.inputs[1 - k])
            if other is None or other.shape is None or len(info.shape) > len(other.shape):
                continue
            sign = {"Add": "+ 0", "Sub": "- 0", "Mul": "* 1", "Div": "/ 1"}[node.op_type]
            folded[node.index] = f"x {sign}: a no-op removed before placement"
            if k == 1:  # its readers read its input 0: the context rules look through it (WavLM's bias * 1)
                pre.passed_on.add(node.index)
            break


def _constant_offset(graph: GraphFacts, pre: PrepassResult, node: NodeFact) -> bool:
    """``node`` is an integer ``x + c``, ``c + x`` or ``x - c`` with ``c`` a one-element constant."""
    if node.op_type not in ("Add", "Sub") or node.domain != "ai.onnx" or node.graph or node.index in pre.folded \
            or len(node.inputs) != 2 or not node.outputs:
        return False
    for k in ((0, 1) if node.op_type == "Add" else (1,)):
        c = pre.const.get(node.inputs[k]) or graph.tensors.get(node.inputs[k])
        if c is None or not c.const or c.value is None or len(c.value) != 1:
            continue  # most: no one-element constant (x is looked up only after)
        x = graph.tensors.get(node.inputs[1 - k])
        if x is not None and not x.const and x.dtype in _INTEGER:
            return True
    return False


def _fuse_constant_offsets(graph: GraphFacts, pre: PrepassResult) -> None:
    """An integer ``x + c1`` or ``x - c1`` (one-element constants) whose only reader, through removed
    same-type Casts, is another such Add or Sub is merged into it (rknn-toolkit2 2.5.0: convert_sub_to_add,
    then fuse_two_add; probed: x.{Add,Sub}.ctx=int_arith.{sub1,add1}.*: OPT's position ids ``- 1``
    then ``+ 2`` leave one CPU Add, the second's; with a second reader of the first, or a Mul after it,
    both stay)."""
    outputs = set(graph.outputs)
    for node in _main_nodes(graph, ("Add", "Sub")):
        if not _constant_offset(graph, pre, node) or node.outputs[0] in outputs:
            continue
        readers, stack = [], [node.outputs[0]]
        while stack:
            for i in graph.consumers.get(stack.pop(), ()):
                r = graph.nodes[i]
                if _removed_as_its_input(graph, pre, r):
                    if any(o in outputs for o in r.outputs):
                        readers.append(r)  # a graph output: the value is needed as it is
                    stack.extend(o for o in r.outputs[:1] if o)
                else:
                    readers.append(r)
        if len(readers) == 1 and _constant_offset(graph, pre, readers[0]):
            pre.folded[node.index] = (f"x {'+' if node.op_type == 'Add' else '-'} c followed by {readers[0].op_type} "
                                      f"'{readers[0].name}' of a constant: merged into it before placement")


def _value_key(graph: GraphFacts, name: str) -> Any:
    """``name``, or for a small initializer (a Constant node's value is one too) its dtype, shape and
    value: equal initializers are one value to onnxruntime's merge (two ReduceSums, each with its own
    axes initializer, q.NonZero.ctx=duplicate_chain). A value only folding makes constant (a
    ConstantOfShape of a folded shape) is not: onnxruntime merged no NonZero of two such equal masks
    (Longformer's attention windows)."""
    if not name:
        return name
    producer = graph.producer.get(name)
    constant_node = producer is not None and graph.nodes[producer].op_type == "Constant"
    if name not in graph.initializers and not constant_node:
        return name
    info = graph.tensors.get(name)  # a Constant node's output the facts evaluated has its value, not const
    if info is None or not (info.const or constant_node) or info.value is None:
        return name
    return ("const", info.dtype, info.shape, tuple(info.value))


#: layout ops that are no-ops when their result has their input's shape (a Slice only with forward steps)
_NOOP_LAYOUT = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Expand", "Tile", "Slice"})


def _forward_steps(graph: GraphFacts, pre: PrepassResult, node: NodeFact) -> bool:
    """A Slice's steps are known constants, all positive (absent: 1)."""
    if len(node.inputs) < 5 or not node.inputs[4]:
        return True
    steps = _const_ints(graph, pre, node.inputs[4])
    return steps is not None and all(v > 0 for v in steps)


def _eliminate_noop_layout(graph: GraphFacts, pre: PrepassResult) -> None:
    """A Reshape, Flatten, Squeeze, Unsqueeze, Expand, Tile or forward Slice whose static result has the static
    shape of its input 0 is removed (rknn-toolkit2 2.5.0, probed: ``input_ids.view(-1, T)`` and
    ``token_type_ids.expand(1, T)`` of int64 ids leave no layer row, x.*.ctx=int_layout.*_noop.*; a Tile
    of repeats of ones too, x.Tile.ctx=broadcast.r[23].ones; a Slice of a size-1 axis or of a whole axis,
    x.Slice.ctx=noop.*; ``mask[:, -T:]``, x.Slice.ctx=int_arith.slice_all.*). A node producing a graph output is kept.
    The context rules look through the removed nodes (``passed_on``)."""
    outputs = set(graph.outputs)
    folded, tensors = pre.folded, graph.tensors
    for node in _main_nodes(graph, _NOOP_LAYOUT):
        if node.index in folded or node.graph or node.domain != "ai.onnx" \
                or not node.inputs or not node.inputs[0] or not node.outputs or node.outputs[0] in outputs:
            continue
        src, out = tensors.get(node.inputs[0]), tensors.get(node.outputs[0])
        if src is None or out is None or src.shape != out.shape or not src.static or not out.static:
            continue  # most: another shape (compared first)
        if node.op_type == "Slice" and not _forward_steps(graph, pre, node):
            continue  # a reversing Slice keeps the shape but is no copy
        pre.folded[node.index] = f"a {node.op_type} that keeps its input's shape {list(src.shape)} is removed by the compiler"
        pre.passed_on.add(node.index)


def _removed_as_its_input(graph: GraphFacts, pre: PrepassResult, node: NodeFact) -> bool:
    """A node an earlier pre-pass removed whose readers read its input 0 instead (an Identity, a
    same-type Cast, a no-op Expand or Slice)."""
    return bool(node.index in pre.folded and not node.graph and node.inputs and node.inputs[0] and node.outputs
                and node.outputs[0] and (node.op_type in IDENTITY_OPS or _same_type_cast(graph, node, True)
                                         or node.outputs[0] in pre.forwarded))


def _passed_through(graph: GraphFacts, pre: PrepassResult) -> list[tuple[int, str]]:
    """(node index, input 0) of the nodes :func:`_removed_as_its_input`: onnxruntime has removed them
    when it merges identical nodes, so its walk goes through them."""
    return [(node.index, node.inputs[0]) for node in graph.nodes if _removed_as_its_input(graph, pre, node)]


def _reverse_dfs_order(graph: GraphFacts, skip: Mapping[int, str] | None = None) -> dict[int, int]:
    """{node index: position} in the order onnxruntime visits the main graph (a depth-first walk
    back from the nodes nobody reads, the producer of the highest index first, each node after its
    producers): of a set of identical nodes, the one it meets first is the one it keeps (probed:
    q.Shape.ctx=duplicate, q.Relu.ctx=duplicate; which one that is decides only node names).
    ``skip`` ({node index: its input 0}): nodes onnxruntime has already removed (same-type Casts,
    Identities), which the walk goes through to their input's producer; that changes which producer
    has the highest index (q.Relu.ctx=duplicate.relu_cast; higgs_audio_v2's GatherNDs)."""
    skip = skip or {}
    main = [n for n in graph.nodes if not n.graph and n.index not in skip]

    def producer(t: str) -> Optional[int]:
        p = graph.producer.get(t)
        while p is not None and p in skip:
            p = graph.producer.get(skip[p])
        return p

    producers: dict[int, list[int]] = {}
    read = set()
    for n in main:
        prods = sorted({p for i in n.inputs if i and (p := producer(i)) is not None})
        producers[n.index] = prods
        read.update(prods)
    order: dict[int, int] = {}
    seen: set[int] = set()
    for leaf in sorted((n.index for n in main if n.index not in read), reverse=True):
        stack = [(leaf, False)]
        while stack:
            idx, done = stack.pop()
            if done:
                order.setdefault(idx, len(order))
                continue
            if idx in seen:
                continue
            seen.add(idx)
            stack.append((idx, True))
            stack.extend((p, False) for p in producers.get(idx, ()) if p not in seen)
    return order


def _data_shapes(graph: GraphFacts, pre: PrepassResult, ops: Mapping[str, OpEntry]) -> None:
    """The shapes after a data-shaped op (NonZero, ...) that the table says the compiler does not fold
    (``not_folded`` for the dtype of its input 0), although its inputs are constants: dynamic."""
    from .graph.data_shapes import DATA_SHAPED, data_dependent_shapes

    unfolded = set()
    for op in DATA_SHAPED:
        entry = ops.get(f"ai.onnx:{op}")
        if entry is None or not entry.not_folded:
            continue
        for node in graph.main_nodes_by_op.get(op, ()):
            info = graph.tensors.get(node.inputs[0]) if node.inputs else None
            if info is not None and info.dtype in entry.not_folded:
                unfolded.add(node.index)
    if unfolded:
        pre.shapes.update(data_dependent_shapes(graph, unfolded))


def _is_const(graph: GraphFacts, pre: PrepassResult, name: str) -> bool:
    if not name:
        return True  # an omitted optional input
    if name in pre.const:
        return True
    info = graph.tensor(name)
    return bool(info and info.const)


def _cast_to(node: NodeFact) -> Optional[str]:
    to = node.attrs.get("to")
    return dtype_name(to) if isinstance(to, int) else None


# integer dtypes whose same-type Cast is removed as an identity; a float one (``x.float()`` of a float
# tensor) stays: the tables' fused patterns name it (RKNN's rmsnorm_div_cast_weight), and it runs on
# the NPU where a table says the pattern's other nodes do
_INTEGER = frozenset({"int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64"})


def _same_type_cast(graph: GraphFacts, node: NodeFact, any_dtype: bool = False) -> bool:
    """A Cast of an integer tensor to the dtype it already has (``mask.long()`` of an int64 mask,
    TorchScript's int64 -> int64 casts of shape values): an identity, removed by the compilers (ONNX
    Runtime's CastElimination; rknn-toolkit2 2.5.0 lists no row for it) and never judged by a dtype rule.
    ``any_dtype``: a float one too (``eliminate_same_type_casts``: onnxruntime removes the float32 ->
    float32 casts TorchScript writes around a transformers RMSNorm, q.Cast.ctx=same_type.*)."""
    if node.op_type != "Cast" or node.domain != "ai.onnx" or not node.inputs or not node.inputs[0]:
        return False
    info = graph.tensors.get(node.inputs[0])
    return info is not None and info.dtype is not None and (any_dtype or info.dtype in _INTEGER) \
        and _cast_to(node) == info.dtype


def _eliminate_identity(graph: GraphFacts, pre: PrepassResult, identity: bool = True, any_cast: bool = False) -> None:
    """``identity``: Identity/Dropout and integer Casts to their own dtype (``eliminate_identity``);
    ``any_cast``: every Cast to its input's own dtype (``eliminate_same_type_casts``)."""
    outputs = set(graph.outputs)
    for node in _nodes_of(graph, _PASS_THROUGH):  # Identity, Dropout and Cast: the only ops it removes
        if (identity and node.op_type in IDENTITY_OPS
                or node.op_type == "Cast" and (identity or any_cast) and _same_type_cast(graph, node, any_cast)) \
                and node.domain == "ai.onnx":
            if not node.graph and node.outputs and node.outputs[0] in outputs:
                continue  # it produces a graph output: kept (and placed) like any op
            if node.op_type == "Dropout" and len(node.outputs) > 1 and node.outputs[1] and graph.consumers.get(node.outputs[1]):
                continue  # the mask is used: not an inference no-op
            what = f"Cast to {_cast_to(node)}, its input's own dtype," if node.op_type == "Cast" \
                else node.op_type
            pre.folded[node.index] = f"{what} is removed by the compiler (no-op at inference)"
            # its readers read the input directly: an Identity of a weight (TorchScript writes one per
            # reuse of a shared parameter) passes the weight on as a constant
            src = node.inputs[0] if node.inputs else ""
            info = (pre.const.get(src) or graph.tensors.get(src)) if src else None
            if info is not None and info.const and node.outputs and node.outputs[0]:
                # the input's own info, not a copy named after the output (3,591 Identities in issue 29's
                # encoder, per table): nothing reads the name of a constant (PrepassResult.const)
                pre.const[node.outputs[0]] = info


def _fold(graph: GraphFacts, pre: PrepassResult, constants: bool, shapes: bool,
          ops: Mapping[str, OpEntry] = {}) -> None:
    """Fold constants and static shapes. ``ops``: the table's entries; a node whose entry says the
    compiler cannot evaluate it for the dtype of its input 0 (``not_folded``) stays to be judged."""
    folded, const, tensors = pre.folded, pre.const, graph.tensors
    plans: dict[str, tuple[int, Any]] = {}  # op key -> _fold_plan
    # (dtype, shape, static, value) -> the one info of the constants made here with that content
    # (PrepassResult.const): 33 infos, not 11,103 copies of the facts' ones with const set. A value is
    # keyed by its identity (the facts share equal values), which keeps -0.0 apart from 0.0 and 1 from
    # True; the info made holds the value, so its id is not reused while the dict lives. A computed
    # shape (a fresh tuple of ints per node) is keyed by itself
    twins: dict[tuple[Any, ...], TensorInfo] = {}

    def const_info(name: str, base: TensorInfo, value: Any, value_key: Any) -> TensorInfo:
        """replace(base, name=name, const=True, value=value), one per content (``twins``)."""
        key = (base.dtype, base.shape, base.static, value_key)
        twin = twins.get(key)
        if twin is None:
            twin = twins[key] = tensor_info(name, base.dtype, base.shape, True, value, base.static)
        return twin

    nodes: Iterable[NodeFact] = graph.nodes
    foldable = getattr(graph, "foldable", None)
    if foldable is not None and getattr(graph, "topological", None):
        # only the nodes that may fold (GraphFacts.foldable: 14,700 of issue 29's encoder's 26,394): any
        # other one has an input no pre-pass can make constant, and would pass through the loop doing
        # nothing. In topological order a name the loop finds constant was made so by an initializer, a
        # Constant, or a node before it that may fold (eliminate_identity's too), which the facts' walk
        # of the same order counted as constant-to-be; out of order, a later Identity can make it so
        nodes = map(graph.nodes.__getitem__, foldable)
    for node in nodes:  # ONNX nodes are stored in topological order
        if node.index in folded:
            if node.op_type in _PASS_THROUGH and node.inputs and node.outputs and node.outputs[0]:
                # removed as an identity (eliminate_identity): its output is its input, constant or not
                info = const.get(node.inputs[0]) or tensors.get(node.inputs[0])
                out = node.outputs[0]
                if info is not None and info.const and out not in const:
                    base = tensors.get(out) or info
                    value = base.value if base.value is not None else info.value
                    const[out] = const_info(out, base, value, id(value))
            continue
        plan = plans.get(node.key)
        if plan is None:  # what the checks below that read only the op make of it, once per op
            plan = plans[node.key] = _fold_plan(node, constants, shapes, ops)
        how, not_folded = plan
        if not how or node.subgraphs:
            continue
        if how & _FOLD_SHAPE:
            src = tensors.get(node.inputs[0]) if node.inputs else None
            if src is not None and src.static and node.inputs[0] not in pre.shapes:
                value = _shape_value(node, src)
                for out in node.outputs:
                    base = tensors.get(out) or TensorInfo(out, "int64", None)
                    const[out] = const_info(base.name, base, value, value)  # a computed shape: keyed by itself
                folded[node.index] = f"{node.op_type} of a static shape {list(src.shape or ())} folds to a constant"
                continue
            if not how & (_FOLD_INPUTS | _FOLD_CONSTANT):
                continue
        if how & _FOLD_INPUTS:
            for name in node.inputs:  # _is_const of every input, inlined (run for every node of every table)
                if name and name not in const:
                    info = tensors.get(name)
                    if info is None or not info.const:
                        break
            else:
                name = None
            if name is not None:
                continue
            if not_folded and node.inputs:
                info = pre.const.get(node.inputs[0]) or tensors.get(node.inputs[0])
                if info is not None and info.dtype in not_folded:
                    continue  # the compiler's folding has no kernel for it: judged like any node
        for out in node.outputs:
            if out:
                base = tensors.get(out) or TensorInfo(out, None, None)
                if base.const:
                    const[out] = base
                else:  # a Constant's output, per table
                    const[out] = const_info(base.name, base, base.value, id(base.value))
        # one string for all (11,103 folds in issue 29's encoder, per table; the matcher keys its reasons on it)
        folded[node.index] = _FOLDED_INPUTS if how & _FOLD_INPUTS else _FOLDED_CONSTANT


_FOLDED_CONSTANT = "constant: folded at compile time"
_FOLDED_INPUTS = "all inputs are constant: folded at compile time"
_FOLD_SHAPE, _FOLD_INPUTS, _FOLD_CONSTANT = 1, 2, 4  # what _fold tries for a node of an op (_fold_plan)


def _fold_plan(node: NodeFact, constants: bool, shapes: bool, ops: Mapping[str, OpEntry]) -> tuple[int, Any]:
    """What _fold tries for the nodes of ``node``'s op (domain and type): the flags of folding a static
    shape (a Shape or Size), folding when all inputs are constant, folding as a Constant (0: none), and
    the dtypes of input 0 the compiler's folding has no kernel for (the table's ``not_folded``)."""
    if node.domain != "ai.onnx":
        return 0, None
    op_type = node.op_type
    how = _FOLD_SHAPE if shapes and op_type in SHAPE_OPS else 0
    if not constants or op_type in NONDETERMINISTIC or op_type in SEQUENCE_OUTPUT:
        return how, None  # a sequence is no constant tensor: judged like any node (onnxruntime's SequenceEmpty)
    if op_type == "Constant":
        return how | _FOLD_CONSTANT, None
    entry = ops.get(node.key)
    return how | _FOLD_INPUTS, entry.not_folded if entry is not None else None


def _shape_value(node: NodeFact, src: TensorInfo) -> tuple[Any, ...]:
    dims = tuple(src.shape or ())
    if node.op_type == "Size":
        n = 1
        for d in dims:
            n *= int(d)
        return (n,)
    rank = len(dims)
    start = int(node.attrs.get("start", 0) or 0)
    end = node.attrs.get("end")
    start = max(0, start + rank if start < 0 else start)
    stop = rank if end is None else (int(end) + rank if int(end) < 0 else int(end))
    return dims[start:max(start, min(stop, rank))]


def _fuse_conv_bn(graph: GraphFacts, pre: PrepassResult) -> None:
    for node in _nodes_of(graph, ("BatchNormalization",)):
        if node.op_type != "BatchNormalization" or node.index in pre.folded or not node.inputs:
            continue
        prod = graph.producer.get(node.inputs[0])
        if prod is None:
            continue
        conv = graph.nodes[prod]
        if conv.op_type not in ("Conv", "ConvTranspose") or conv.index in pre.folded:
            continue
        if len(graph.consumers.get(node.inputs[0], [])) != 1:
            continue
        if not all(_is_const(graph, pre, i) for i in node.inputs[1:]):
            continue
        pre.folded[node.index] = f"fused into {conv.op_type} {conv.name}"
        pre.absorbed[node.index] = conv.index


def _fuse_patterns(graph: GraphFacts, pre: PrepassResult, patterns: Sequence[Pattern],
                   view: Optional[GraphView] = None) -> None:
    """``view``: the graph with the constants folded so far, which a pattern node's constraints read as
    the rules do (made here when not given)."""
    anchors: dict[str, Sequence[NodeFact]] = {}  # op key -> its nodes in graph order: each pattern visits its own
    # op key -> the tensors the nodes of that op read: an anchor none of whose outputs is among those
    # of its pattern's second op is passed by (one set per op, not one per anchor: 1,500 MatMuls)
    read_by: dict[str, set[str]] = {}
    if view is None:
        view = GraphView(graph, pre)
    for pattern in patterns:
        key = pattern.nodes[0][1]
        nodes = anchors.get(key)
        if nodes is None:  # the nodes of the anchor's op type (from the index), of the anchor's domain
            nodes = anchors[key] = [n for n in _nodes_of(graph, (key.rpartition(":")[2],)) if n.key == key]
        if not nodes:
            continue
        plan = _plan(pattern)
        # when the second node of a pattern reads the first, an anchor none of whose consumers has
        # that op cannot match (most anchors: a MatMul that feeds an Add)
        step2 = plan[1][1] if len(plan[1]) > 1 else None
        second = step2[1] if step2 is not None and plan[0][0] in step2[2] else None
        for node in nodes:
            if node.index in pre.folded or node.index in pre.fused:
                continue
            if second is not None:
                reads = read_by.get(second)
                if reads is None:
                    reads = read_by[second] = {name for n in _nodes_of(graph, (second.rpartition(":")[2],))
                                               if n.key == second for name in n.inputs if name}
                if reads.isdisjoint(node.outputs):
                    continue
            if not _meets(view, plan[2].get(plan[0][0], ()), node):
                continue
            match = _match_from(graph, pre, plan, node, view)
            if match:
                for pid, idx in match.items():
                    pre.fused[idx] = (pattern, node.index)
                    if pid in pattern.cpu_nodes:
                        pre.fused_cpu.add(idx)


def _plan(pattern: Pattern) -> tuple[Any, ...]:
    """(ids, steps as (id, op, after, positions, sibling), constraints by id) of a pattern, prepared
    once per pattern."""
    positions: dict[str, list[tuple[str, int]]] = {}
    for pid, ref, idx in pattern.positions:
        positions.setdefault(pid, []).append((ref, idx))
    siblings = dict(pattern.siblings)
    steps = tuple((pid, op, tuple(after), tuple(positions.get(pid, ())), siblings.get(pid))
                  for pid, op, after in pattern.nodes)
    return tuple(pid for pid, _, _ in pattern.nodes), steps, dict(pattern.node_constraints)


def _meets(view: Any, constraints: Sequence[Constraint], node: NodeFact) -> bool:
    """Whether a node meets a pattern node's constraints (node rules, read on the view of the graph)."""
    from .rules import RULES

    return all(RULES[c.rule].check(node, c.params, view) is None for c in constraints)


def _match_from(graph: GraphFacts, pre: PrepassResult, plan: tuple[Any, ...], anchor: NodeFact,
                view: Any = None) -> Optional[dict[str, int]]:
    """Backtracking match: pattern node k must consume an output of each node in its `after`.
    Returns pattern node id -> node index."""
    ids, steps, constraints = plan
    assigned: dict[str, int] = {ids[0]: anchor.index}
    nodes, consumers, folded, fused = graph.nodes, graph.consumers, pre.folded, pre.fused

    def candidates(k: int) -> list[int]:
        pid, op, after, positions, sibling = steps[k]
        common: Optional[set[int]] = None
        for ref in after:
            cons: set[int] = set()
            for out in nodes[assigned[ref]].outputs:
                found = consumers.get(out)
                if found:
                    cons.update(found)
            common = cons if common is None else common & cons
        if sibling is not None:
            # a second branch: another reader of a computed tensor the sibling reads
            cons = set()
            for name in nodes[assigned[sibling]].inputs:
                if name and not _is_const(graph, pre, name):
                    cons.update(consumers.get(name, ()))
            common = cons if common is None else common & cons
        if not common:
            return []
        used = set(assigned.values())
        out = []
        for i in sorted(common):
            if i in used or i in folded or i in fused or nodes[i].key != op:
                continue
            inputs = nodes[i].inputs
            if not all(idx < len(inputs) and inputs[idx] in nodes[assigned[ref]].outputs for ref, idx in positions):
                continue
            if _meets(view if view is not None else graph, constraints.get(pid, ()), nodes[i]):
                out.append(i)
        return out

    def solve(k: int) -> bool:
        if k == len(steps):
            return True
        for cand in candidates(k):
            assigned[ids[k]] = cand
            if solve(k + 1):
                return True
            del assigned[ids[k]]
        return False

    if not solve(1):
        return None
    matched = set(assigned.values())
    # inner outputs must not escape the pattern (the fused op only exposes the last node's output)
    last = assigned[ids[-1]]
    for idx in matched:
        if idx == last:
            continue
        for out in nodes[idx].outputs:
            if out in graph.outputs or any(c not in matched for c in consumers.get(out, [])):
                return None
    return assigned


PassFn = Callable[[GraphFacts, PrepassResult], None]
