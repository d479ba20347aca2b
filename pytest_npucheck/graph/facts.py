"""The graph facts: frozen values of what is known statically about an ONNX model.

``GraphFacts`` holds opsets per domain, every node (including nodes in If/Loop/Scan bodies) as a
``NodeFact`` with its attributes (ONNX defaults filled in), and a ``TensorInfo`` per tensor: dtype and
shape (symbolic dims kept as strings, dims the checker could not work out as ``None``, dynamic ones as
``DYNAMIC_DIM``, unknown rank as ``shape=None``), and the values of small constants. ``build.py``
makes them; nothing changes them afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from typing import Any, Iterator, Mapping, Optional, Sequence

from .frozen import cached
from .location import SourceLocation

Dim = "int | str | None"

DEFAULT_DOMAIN = "ai.onnx"
SMALL_CONSTANT = 64  # constants up to this many elements keep their values


_DTYPE_NAMES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    14: "complex64", 15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz",
    19: "float8e5m2", 20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
}
DTYPE_SIZES = {
    "float32": 4, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "int32": 4, "int64": 8,
    "bool": 1, "float16": 2, "float64": 8, "uint32": 4, "uint64": 8, "complex64": 8,
    "complex128": 16, "bfloat16": 2, "float8e4m3fn": 1, "float8e4m3fnuz": 1, "float8e5m2": 1,
    "float8e5m2fnuz": 1, "uint4": 1, "int4": 1,
}


# bytes per element in TensorProto.raw_data of the types that store whole bytes per element (not
# strings, which have no raw_data, nor the 4-bit types, two elements a byte)
_RAW_ITEMSIZE = {code: DTYPE_SIZES[name] for code, name in _DTYPE_NAMES.items()
                 if name in DTYPE_SIZES and name not in ("uint4", "int4")}


def dtype_name(elem_type: int) -> Optional[str]:
    return _DTYPE_NAMES.get(elem_type)


class _Static:
    """The slot of ``TensorInfo.static``, which is no field (not compared, not a constructor argument)."""

    __slots__ = ("static",)


@dataclass(frozen=True, slots=True)
class TensorInfo(_Static):
    """What is known statically about one tensor. Slotted, as ``NodeFact`` is: a graph of 26,000
    tensors (and the ~15,000 the pre-passes make per table) would otherwise give each one a
    ``__dict__`` of its own. ``tensor_info`` makes one without the frozen ``__init__``."""

    name: str
    dtype: Optional[str]
    shape: Optional[tuple[Any, ...]]  # dims are int (static), str (symbolic) or None (unknown)
    const: bool = False
    value: Optional[tuple[Any, ...]] = None  # flattened values of a small constant

    # static: every dim known (an int); asked by several rules and the partition for most tensors,
    # so set once, when the info is made

    def __post_init__(self) -> None:
        shape = self.shape
        object.__setattr__(self, "static", shape is not None and all(map(isinstance, shape, _INT)))

    def __getstate__(self) -> list[Any]:  # the fields (a copy or a pickle works out static again)
        return [self.name, self.dtype, self.shape, self.const, self.value]

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(_TENSOR_FIELDS, state):
            object.__setattr__(self, name, value)
        TensorInfo.__post_init__(self)

    @property
    def symbolic_dims(self) -> list[str]:
        return [d for d in (self.shape or ()) if isinstance(d, str)]

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}


_TENSOR_FIELDS = tuple(TensorInfo.__dataclass_fields__)


class TensorInfoDraft(_Static):
    """A TensorInfo being filled: the same slots, without the frozen ``__setattr__``
    (``tensor_info``, and the build's loops, which set each slot and turn the draft into the
    TensorInfo it lays out)."""

    __slots__ = TensorInfo.__slots__  # type: ignore[attr-defined]


def tensor_info(name: str, dtype: Optional[str], shape: Optional[tuple[Any, ...]], const: bool = False,
                value: Optional[tuple[Any, ...]] = None, static: Optional[bool] = None) -> TensorInfo:
    """``TensorInfo(name, dtype, shape, const, value)`` without the frozen ``__init__`` (one
    ``object.__setattr__`` call per field): for the loops that make one per node or tensor.
    ``static``: ``TensorInfo.static`` when the caller knows it (the same shape as a known info's),
    else worked out from ``shape``."""
    t = _new(TensorInfoDraft)
    t.name, t.dtype, t.shape, t.const, t.value = name, dtype, shape, const, value
    t.static = (shape is not None and all(map(isinstance, shape, _INT))) if static is None else static
    t.__class__ = TensorInfo  # type: ignore[assignment]
    return t  # type: ignore[return-value]


_new = object.__new__
_INT = repeat(int)  # all(map(isinstance, shape, _INT)): every dim an int, without a generator per shape


class _Keyed:
    """The slot of ``NodeFact.key``, which is no field (not compared, not a constructor argument)."""

    __slots__ = ("key",)


@dataclass(frozen=True, slots=True)
class NodeFact(_Keyed):
    """One node. Slotted: a fact without a ``__dict__`` of its own is about 120 bytes, against ~560
    with one (14 entries), which a graph of 26,000 nodes felt as 2,500 more pages first touched
    and ~25 ms more CPU to build its facts in a fresh process (``graph.build`` fills a
    ``NodeFactDraft`` and turns it into a NodeFact)."""

    index: int
    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any]
    explicit_attrs: frozenset[str]
    defaults: Mapping[str, Any]
    graph: str = ""  # "" for the main graph, else "<node name>/<attribute>" of the owning node
    source: Optional[SourceLocation] = None
    opset: int = 0
    subgraphs: tuple[str, ...] = ()

    # key: "<domain>:<op_type>", read for every rule of every node: set once, when the fact is made

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", f"{self.domain}:{self.op_type}")

    def __getstate__(self) -> list[Any]:  # the fields (a copy or a pickle makes the key again)
        return [getattr(self, name) for name in _NODE_FIELDS]

    def __setstate__(self, state: list[Any]) -> None:
        for name, value in zip(_NODE_FIELDS, state):
            object.__setattr__(self, name, value)
        object.__setattr__(self, "key", f"{self.domain}:{self.op_type}")

    @property
    def label(self) -> str:
        return f"{self.op_type} {self.name}"


_NODE_FIELDS = tuple(NodeFact.__dataclass_fields__)


class NodeFactDraft(_Keyed):
    """A NodeFact being filled: the same slots, without the frozen ``__setattr__``. ``graph.build``
    sets each field (and ``key``) as a plain slot store and then turns the draft into the NodeFact
    it lays out (``draft.__class__ = NodeFact``), as the matcher does with ``result.NodeResultDraft``."""

    __slots__ = NodeFact.__slots__  # type: ignore[attr-defined]


@dataclass
class GraphFacts:
    path: str
    opsets: dict[str, int]
    ir_version: int
    nodes: tuple[NodeFact, ...]
    tensors: dict[str, TensorInfo]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    initializers: frozenset[str]
    producer_name: str = ""
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=dict)
    shape_inference_error: Optional[str] = None
    # tensors of unknown rank (shape None) whose shape depends on a dynamic input or on run-time
    # values; any other unknown rank is one the checker could not work out (see DYNAMIC_DIM)
    dynamic_rank: frozenset[str] = frozenset()
    # when every node is in the main graph: the index of the first node of each (op, domain,
    # attributes, input count, whether an input is omitted, output count), in order. A node's
    # opset, attribute names and kinds and counts are those of the first of its key (what
    # validity's checker looks at). None: unknown (facts not made by graph.build's walk, or with bodies)
    first_of_signatures: Optional[tuple[int, ...]] = field(default=None, compare=False, repr=False)
    # when every node is in the main graph: whether no node reads a tensor that a later node
    # computes (ONNX stores nodes in topological order; the build's linking tells). None: unknown
    topological: Optional[bool] = field(default=None, compare=False, repr=False)
    # when every node is in the main graph: the indices, in order, of the nodes the pre-passes'
    # folding may fold (graph.fold finds them by names alone: a superset, which prepass._fold visits
    # instead of every node when ``topological``). None: unknown (the fold visits every node)
    foldable: Optional[tuple[int, ...]] = field(default=None, compare=False, repr=False)

    @cached
    def main_nodes_by_op(self) -> dict[str, list[NodeFact]]:
        """The main graph's nodes by op type, in graph order (rules that look at the whole graph)."""
        index: dict[str, list[NodeFact]] = {}
        for n in self.nodes:
            if not n.graph:
                index.setdefault(n.op_type, []).append(n)
        return index

    def tensor(self, name: str) -> Optional[TensorInfo]:
        return self.tensors.get(name)

    @cached
    def shape_unknown_at(self) -> tuple[str, ...]:
        """Names of the main-graph nodes where the checker lost a shape: an output of unknown rank or
        with a dim it could not work out (None), while every input's shape is known (a dim that
        depends on a dynamic input or on run-time values is known to be dynamic: DYNAMIC_DIM)."""
        # most graphs lose no shape: asked first of the distinct shapes (a few dozen in a stack of layers,
        # hashed in C) rather than of every dim of every tensor, it spares the scan of every node below
        try:
            if not any(s is None or None in s for s in {t.shape for t in self.tensors.values()}):
                return ()
        except TypeError:  # a shape that is no tuple (facts not built by graph.build): the scan below
            pass
        # the tensors the checker lost a shape of, once (asked of every node's inputs and outputs)
        lost = {name for name, t in self.tensors.items() if t.shape is None or None in t.shape}
        lost.discard("")  # an omitted input or output
        return tuple(n.name for n in self.nodes if not n.graph and not lost.isdisjoint(n.outputs)
                     and lost.isdisjoint(n.inputs))

    def __post_init__(self) -> None:
        # made here unless the caller made them (graph.build fills them as it adds each node)
        if not self.producer and not self.consumers:
            producer, consumers = self.producer, self.consumers
            for node in self.nodes:
                link_node(producer, consumers, node.index, node.inputs, node.outputs)


def link_node(producer: dict[str, int], consumers: dict[str, list[int]], index: int, inputs: Sequence[str],
              outputs: Sequence[str]) -> None:
    """The node at ``index`` entered in GraphFacts' ``producer`` and ``consumers`` maps (an omitted
    input or output, "", is no tensor). ``graph.build._Builder._main_nodes`` inlines it in its loop."""
    for out in outputs:
        if out:
            producer[out] = index
    for inp in inputs:
        if inp:
            readers = consumers.get(inp)
            if readers is None:
                consumers[inp] = [index]
            else:
                readers.append(index)


# A dim is an int (static), a str (dynamic: a symbolic dim of a graph input, or DYNAMIC_DIM for one that
# depends on a dynamic input or on run-time values) or None: a dim the checker could not work out,
# although nothing makes it vary at run time (the compilers see it static).
DYNAMIC_DIM = "?"


def tensor_bytes(info: Optional[TensorInfo]) -> Optional[int]:
    """Size in bytes of a statically shaped tensor, else None (also for a negative dim, invalid ONNX
    a constant can still hold)."""
    if info is None or not info.static or info.dtype is None:
        return None
    n = 1
    for d in info.shape or ():
        if d < 0:
            return None
        n *= d
    return n * DTYPE_SIZES.get(info.dtype, 4)


def iter_main_nodes(nodes: Sequence[NodeFact]) -> Iterator[NodeFact]:
    return (n for n in nodes if not n.graph)
