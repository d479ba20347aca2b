"""How the runtime will cut the graph: NPU subgraphs, CPU islands, transitions and their cost.

Runtimes run the graph in a topological order and hand every maximal run of NPU nodes to the NPU
as one subgraph; each tensor that crosses between an NPU subgraph and a CPU node is copied. This
module replays that on the verdicts: it picks the topological order that switches device the
least (greedy, like ONNX Runtime's partitioner), counts subgraphs, islands, transitions and the
bytes that cross, estimates MACs per node, and scores every fallback by what it costs.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Sequence

from .graph import GraphFacts, NodeFact, TensorInfo, tensor_bytes
from .result import NodeResult

NPU, CPU = "npu", "cpu"


# -- MACs -----------------------------------------------------------------------------------------

def _sized(info: Optional[TensorInfo]) -> bool:
    """Whether a tensor has a static shape that is a size: a constant can still carry a negative dim
    (invalid ONNX, which graph facts keep as read), and a size from it would be negative."""
    return info is not None and info.static and min(info.shape or (), default=0) >= 0  # type: ignore[type-var]


def _numel(info: Optional[TensorInfo]) -> Optional[int]:
    if info is None or not info.static:
        return None
    # _sized(info), asked of constants only: graph facts read a negative dim of a value's type as
    # unknown, so only a constant's dims (as its TensorProto has them) can be negative; this is
    # asked for every node output
    if info.const and not _sized(info):
        return None
    return math.prod(info.shape or ())  # type: ignore[arg-type]


_MAC_OPS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "MatMul", "Gemm", "MatMulInteger",
                      "QLinearMatMul", "MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool",
                      "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "Softmax", "LogSoftmax",
                      "LayerNormalization", "GroupNormalization", "InstanceNormalization", "LSTM", "GRU", "RNN"})


def node_macs(node: NodeFact, graph: Any) -> int:
    """Multiply-accumulates of one node (elementwise ops count one per output element)."""
    out = graph.tensor(node.outputs[0]) if node.outputs and node.outputs[0] else None
    out_n = _numel(out) or 0
    op = node.op_type
    if op not in _MAC_OPS:  # every op not named below: one per output element
        return out_n
    if op in ("Conv", "ConvTranspose", "ConvInteger", "QLinearConv"):
        w = graph.tensor(node.inputs[1]) if len(node.inputs) > 1 else None
        if not _sized(w) or not w.shape:  # type: ignore[union-attr]
            return out_n
        wshape = [int(d) for d in w.shape]  # type: ignore[union-attr]
        kernel = math.prod(wshape[2:]) if len(wshape) > 2 else 1
        per_output = wshape[1] if len(wshape) > 1 else 1  # weights are [Cout, Cin/group, k...]
        if op == "ConvTranspose":  # weights are [Cin, Cout/group, k...]: every input element fans out
            return (_numel(graph.tensor(node.inputs[0])) or 0) * per_output * kernel
        return out_n * per_output * kernel
    if op in ("MatMul", "Gemm", "MatMulInteger", "QLinearMatMul"):
        a = graph.tensor(node.inputs[0]) if node.inputs else None
        if not _sized(a) or not a.shape:  # type: ignore[union-attr]
            return out_n
        k = int(a.shape[-1]) if not (op == "Gemm" and node.attrs.get("transA")) else int(a.shape[0])  # type: ignore[index]
        return out_n * k
    if op in ("MaxPool", "AveragePool", "LpPool"):
        kernel = node.attrs.get("kernel_shape") or [1]
        if not isinstance(kernel, (list, tuple)) or not all(isinstance(k, int) and k > 0 for k in kernel):
            return out_n  # a malformed kernel_shape is the matcher's to report; count the outputs
        return out_n * math.prod(kernel)
    if op in ("GlobalAveragePool", "GlobalMaxPool", "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin",
              "Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization", "InstanceNormalization"):
        x = _numel(graph.tensor(node.inputs[0])) if node.inputs else None
        return (x or out_n) * (5 if "Norm" in op or "Softmax" in op else 1)
    if op in ("LSTM", "GRU", "RNN"):
        w = graph.tensor(node.inputs[1]) if len(node.inputs) > 1 else None
        x = graph.tensor(node.inputs[0]) if node.inputs else None
        r = graph.tensor(node.inputs[2]) if len(node.inputs) > 2 else None
        if not (_sized(w) and _sized(x) and _sized(r)):
            return out_n
        if len(x.shape) < 2 or len(w.shape) < 2 or len(r.shape) < 2:  # type: ignore[arg-type]
            return out_n  # malformed ranks: the matcher reports them; count the outputs
        seq = int(x.shape[0])  # type: ignore[index]
        batch = int(x.shape[1])  # type: ignore[index]
        return seq * batch * (math.prod(w.shape[1:]) + math.prod(r.shape[1:])) * int(w.shape[0])  # type: ignore[arg-type,index]
    return out_n


# -- partition ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Transition:
    tensor: str
    src: str  # producing node ("" for a graph input)
    dst: str  # first consuming node on the other device
    direction: str  # "npu->cpu" | "cpu->npu"
    bytes: Optional[int]

    def to_json(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "from": self.src, "to": self.dst, "direction": self.direction, "bytes": self.bytes}


@dataclass(frozen=True)
class Impact:
    """What one fallback node costs."""

    node: str
    op_type: str
    verdict: str
    macs: int
    transitions: int
    bytes: int
    splits_graph: bool
    score: float

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "op_type": self.op_type, "verdict": self.verdict, "macs": self.macs,
                "transitions": self.transitions, "bytes": self.bytes, "splits_graph": self.splits_graph,
                "score": round(self.score, 3)}


@dataclass
class Partition:
    segments: list[tuple[str, list[str]]] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    macs_total: int = 0
    macs_npu: int = 0
    nodes_total: int = 0
    nodes_npu: int = 0
    impacts: list[Impact] = field(default_factory=list)
    unknown_bytes: int = 0  # transitions whose tensor size is not static

    @property
    def npu_subgraphs(self) -> int:
        return sum(1 for d, _ in self.segments if d == NPU)

    @property
    def cpu_islands(self) -> int:
        return sum(1 for d, _ in self.segments if d == CPU)

    @property
    def bytes_crossing(self) -> int:
        return sum(t.bytes or 0 for t in self.transitions)

    def to_json(self) -> dict[str, Any]:
        share = lambda a, b: round(a / b, 6) if b else None  # noqa: E731
        return {
            "npu_subgraphs": self.npu_subgraphs,
            "cpu_islands": self.cpu_islands,
            "transitions": len(self.transitions),
            "bytes_crossing": self.bytes_crossing,
            "transitions_of_unknown_size": self.unknown_bytes,
            "nodes": self.nodes_total,
            "nodes_npu": self.nodes_npu,
            "npu_share_nodes": share(self.nodes_npu, self.nodes_total),
            "macs": self.macs_total,
            "macs_npu": self.macs_npu,
            "npu_share_macs": share(self.macs_npu, self.macs_total),
            "segments": [{"device": d, "nodes": len(n), "first": n[0], "last": n[-1]} for d, n in self.segments],
            "crossings": [t.to_json() for t in self.transitions],
            "fallback_impact": [i.to_json() for i in self.impacts],
        }


def partition(graph: GraphFacts, results: Sequence[NodeResult], view: Any = None,
              placed: Optional[Sequence[tuple[NodeFact, str, Optional[int]]]] = None) -> Partition:
    """Replay the runtime's partitioning of the main graph under the given verdicts. ``placed``: the
    main graph's nodes that are not folded, in graph order, as (node, verdict, its MACs or None), when
    the caller has them (the matcher collects them as it judges, with each signature's MACs:
    ``node_macs`` on ``view``); else they are taken from ``results``, and every MACs computed here."""
    view = view if view is not None else graph
    tensor = view.tensor
    if placed is None:
        placed = _placed(graph.nodes, results)
    device: dict[int, str] = {}  # live node index -> its device (a folded node is not live)
    names: dict[int, str] = {}
    live: list[NodeFact] = []
    cpu: list[tuple[NodeFact, str, int]] = []  # the fallbacks: (node, verdict, MACs)
    ordered, last = True, -1  # live in index order (graph.build numbers the nodes in order: no sort needed)
    nodes_npu = macs_total = macs_npu = 0
    # the main graph's live nodes in one pass (11,700 of issue 29's encoder's 26,394): device, the order
    # check and each node's MACs
    for n, verdict, macs in placed:
        i = n.index
        names[i] = n.name
        live.append(n)
        if i <= last:
            ordered = False
        last = i
        if macs is None:  # not given by the caller
            outputs = n.outputs
            if n.op_type in _MAC_OPS:
                macs = node_macs(n, view)
            else:  # node_macs of the other ops, _numel inlined (one per output element; most nodes of a graph)
                info = tensor(outputs[0]) if outputs and outputs[0] else None
                macs = math.prod(info.shape) if info is not None and info.static and (  # type: ignore[arg-type]
                    not info.const or _sized(info)) else 0
        macs_total += macs
        if verdict == "npu":
            device[i] = NPU
            nodes_npu += 1
            macs_npu += macs
        else:
            device[i] = CPU
            cpu.append((n, verdict, macs))
    part = Partition(macs_total=macs_total, macs_npu=macs_npu, nodes_total=len(live), nodes_npu=nodes_npu)
    preds: dict[int, set[int]] = {}
    succs: dict[int, set[int]] = {}
    # each live tensor's producer: made only for the walks that need it (an order check of nodes out of
    # index order, the greedy walk), not for a one-device graph in index order (the usual one)
    producer: Optional[dict[str, int]] = None
    one_device, late_read = not cpu or not nodes_npu, False
    if one_device:
        # a graph in topological order (GraphFacts.topological) has no live node read a later one's result
        late_read = ordered and not getattr(graph, "topological", None) and _late_read(live, graph.consumers, device)
        if not ordered:
            producer = _producers(live)
    if one_device and _topological(live, producer or {}, ordered, late_read):
        # one device (every verdict npu, the usual passing model, or every one cpu): the greedy walk
        # (_greedy_order) would visit the nodes in index order, and nothing crosses between devices
        if live:
            part.segments.append((device[live[0].index], [names[n.index] for n in
                                                          (live if ordered else sorted(live, key=_index))]))
        mixed = False
    else:
        mixed = True
        if producer is None:
            producer = _producers(live)
        order = _greedy_order(live, device, producer, preds, succs)  # type: ignore[arg-type]
        for i in order:
            d = device[i]
            if part.segments and part.segments[-1][0] == d:
                part.segments[-1][1].append(names[i])
            else:
                part.segments.append((d, [names[i]]))
    # crossings: each tensor produced on one device and read on the other (model inputs and outputs
    # are copied in any case and do not count)
    per_node: dict[int, list[Transition]] = {}
    if mixed:
        consumers: dict[str, list[int]] = {}
        for n in live:
            for inp in n.inputs:
                if inp:
                    consumers.setdefault(inp, []).append(n.index)
        position = {i: k for k, i in enumerate(order)}
        for n in live:  # each live node's outputs, in order (no list of every (output, node, device) first)
            src = n.index
            src_dev = device[src]
            for tensor_name in n.outputs:
                readers = consumers.get(tensor_name) if tensor_name else None
                if not readers:
                    continue
                other = [c for c in readers if device[c] != src_dev]
                if not other:
                    continue
                size = tensor_bytes(tensor(tensor_name))
                if size is None:
                    part.unknown_bytes += 1
                first = min(other, key=lambda c: position.get(c, 0))
                t = Transition(tensor_name, names[src], names[first], f"{src_dev}->{device[first]}", size)
                part.transitions.append(t)
                for end in [src] + other:
                    per_node.setdefault(end, []).append(t)
    # impact of each fallback: what it runs on the CPU plus the copies it causes
    for n, verdict, macs in cpu:
        ts = per_node.get(n.index, [])
        nbytes = sum(t.bytes or 0 for t in ts)
        npu_before = any(device.get(p) == NPU for p in preds.get(n.index, ()))
        npu_after = any(device.get(s) == NPU for s in succs.get(n.index, ()))
        splits = npu_before and npu_after
        score = len(ts) * 1.0 + nbytes / 1e6 + macs / 1e7 + (2.0 if splits else 0.0) + (100.0 if verdict == "unsupported" else 0.0)
        part.impacts.append(Impact(n.name, n.op_type, verdict, macs, len(ts), nbytes, splits, score))
    part.impacts.sort(key=lambda i: (-i.score, i.node))
    return part


def _placed(nodes: Sequence[NodeFact], results: Sequence[NodeResult],
            ) -> list[tuple[NodeFact, str, Optional[int]]]:
    """(node, verdict, None) of the main graph's nodes that are not folded, in graph order. The
    matcher's results are one per node in graph order: paired as they are, without a map from index
    to result (checked, one comparison a node)."""
    pairs: Iterable[tuple[NodeFact, Optional[NodeResult]]]
    if len(results) == len(nodes) and all(n.index == r.index for n, r in zip(nodes, results)):
        pairs = zip(nodes, results)
    else:
        by_index = {r.index: r for r in results}
        pairs = [(n, by_index.get(n.index)) for n in nodes]
    return [(n, r.verdict, None) for n, r in pairs if r is not None and not n.graph and r.verdict != "folded"]


def _producers(live: Sequence[NodeFact]) -> dict[str, int]:
    """Each tensor a live node computes -> that node's index (the last one to, in the order given)."""
    producer: dict[str, int] = {}
    for n in live:
        for out in n.outputs:
            if out:
                producer[out] = n.index
    return producer


def _late_read(live: Sequence[NodeFact], consumers: Mapping[str, Sequence[int]], device: Mapping[int, str]) -> bool:
    """Whether, visiting ``live`` in index order, a node computes a tensor that a live node visited before
    it reads (``device`` holds the live nodes): then the live nodes are not in topological order. Asked
    of the graph's readers of each result (``GraphFacts.consumers``), which a result of a layer stack has
    one or two of, instead of gathering every input of the nodes visited in a set (~10 ms over the
    11,700 live nodes of issue 29's encoder)."""
    for n in live:
        i = n.index
        for out in n.outputs:
            if out:
                for reader in consumers.get(out, ()):
                    if reader < i and reader in device:
                        return True
    return False


def _index(node: NodeFact) -> int:
    return node.index


def _in_topological_order(live: Sequence[NodeFact], producer: dict[str, int]) -> bool:
    """Every live node reads only tensors of live nodes with a smaller index (or none of theirs)."""
    for n in live:
        for inp in n.inputs:
            p = producer.get(inp)
            if p is not None and p > n.index:
                return False
    return True


def _topological(live: Sequence[NodeFact], producer: dict[str, int], ordered: bool, late_read: bool) -> bool:
    """Whether the live nodes are in topological order (:func:`_in_topological_order`). When they
    were visited in index order, that is known from the visit: no live node produced a tensor that a
    node visited before it read (``late_read``)."""
    return not late_read if ordered else _in_topological_order(live, producer)


def _greedy_order(live: Sequence[NodeFact], device: dict[int, Optional[str]], producer: dict[str, int],
                  preds: dict[int, set[int]], succs: dict[int, set[int]]) -> list[int]:
    """A topological order that stays on the current device as long as it can (fills preds/succs)."""
    # dependencies between live nodes (folded nodes produce constants: no edge)
    for n in live:
        preds[n.index] = set()
        succs[n.index] = set()
    for n in live:
        for inp in n.inputs:
            p = producer.get(inp)
            if p is not None and p != n.index:
                preds[n.index].add(p)
                succs[p].add(n.index)
    indeg = {i: len(preds[i]) for i in preds}
    ready = {NPU: [], CPU: []}  # type: dict[str, list[int]]
    for i in sorted(indeg):
        if indeg[i] == 0:
            heapq.heappush(ready[device[i]], i)  # type: ignore[index]
    order: list[int] = []
    current = NPU
    while ready[NPU] or ready[CPU]:
        if not ready[current]:
            current = CPU if current == NPU else NPU
        i = heapq.heappop(ready[current])
        order.append(i)
        for s in sorted(succs[i]):
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready[device[s]], s)  # type: ignore[index]
    return order


def fmt_bytes(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def iter_fallback_order(part: Partition) -> Iterable[str]:
    """Node names of fallbacks, most costly first."""
    return (i.node for i in part.impacts)


__all__ = ["Partition", "Transition", "Impact", "partition", "node_macs", "fmt_bytes", "iter_fallback_order"]
