"""ONNX model -> immutable graph facts.

Facts are computed once per model file: opsets per domain, every node (including nodes in
If/Loop/Scan bodies) with its attributes (ONNX defaults filled in), the dtype and shape of every
tensor from ONNX shape inference (symbolic dims kept as strings, unknown dims as ``None``, unknown
rank as ``shape=None``), constants and their values where small, and where each node came from in
the PyTorch source when the exporter recorded it. External data is never loaded.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import gc
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Optional, Sequence

from .errors import ModelError


@functools.lru_cache(maxsize=None)
def op_schema(op_type: str, opset: int, domain: str) -> Optional[Any]:
    """ONNX's schema of ``op_type`` as of ``opset`` in ``domain`` ("" for the default domain), or None
    (an unknown op, a custom domain), looked up once per process (the facts, the shape walk and the
    validity check all ask)."""
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - SchemaError: no such operator at this opset
        return None

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


def _check_raw_size(path: object, tensor: Any, raw: int) -> None:
    """ModelError when ``raw`` bytes of raw_data do not hold the elements the dims and data type of the
    initializer ``tensor`` say: ONNX Runtime refuses to load such a model, and numpy cannot read it."""
    size = _RAW_ITEMSIZE.get(tensor.data_type)
    if size is None:
        return
    dims = list(tensor.dims)
    if any(d < 0 for d in dims):
        raise ModelError(f"{path}: initializer '{tensor.name}' has a negative dim in its dims {dims} "
                         f"({raw} bytes of raw_data)")
    need = math.prod(dims) * size
    if raw != need:
        raise ModelError(f"{path}: initializer '{tensor.name}': raw_data size ({raw} bytes) does not match its "
                         f"dims {dims} of {_DTYPE_NAMES[tensor.data_type]} ({need} bytes); ONNX Runtime "
                         f"refuses to load it")


class _cached:
    """``functools.cached_property`` without its per-instance lock (Python 3.11 takes one on every
    first read, which cost ~50 ms over the tensors of a 9,000-node graph); the facts are built and
    read in one thread."""

    def __init__(self, func: Any) -> None:
        self.func, self.name, self.__doc__ = func, func.__name__, func.__doc__

    def __get__(self, obj: Any, cls: Any = None) -> Any:
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.func(obj)  # frozen dataclasses: bypass __setattr__
        return value


@dataclass(frozen=True)
class TensorInfo:
    """What is known statically about one tensor."""

    name: str
    dtype: Optional[str]
    shape: Optional[tuple[Any, ...]]  # dims are int (static), str (symbolic) or None (unknown)
    const: bool = False
    value: Optional[tuple[Any, ...]] = None  # flattened values of a small constant

    @_cached
    def static(self) -> bool:  # asked by several rules and the partition for most tensors
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    @property
    def symbolic_dims(self) -> list[str]:
        return [d for d in (self.shape or ()) if isinstance(d, str)]

    def to_json(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "shape": None if self.shape is None else list(self.shape)}


@dataclass(frozen=True)
class SourceLocation:
    """Where a node came from in the PyTorch model, as far as the exporter recorded it."""

    module: Optional[str] = None  # dotted module path, "" for the root module
    file: Optional[str] = None
    line: Optional[int] = None
    code: Optional[str] = None
    function: Optional[str] = None

    def __str__(self) -> str:
        parts = []
        if self.module is not None:
            parts.append(self.module or "<root>")
        if self.file:
            parts.append(f"{self.file}:{self.line}" if self.line else self.file)
        return " at ".join(parts) if parts else "unknown"

    @_cached
    def _json(self) -> dict[str, Any]:  # one location is shared by many nodes: built once, copied
        return {k: v for k, v in (("module", self.module), ("file", self.file), ("line", self.line),
                                  ("function", self.function), ("code", self.code)) if v is not None}

    def to_json(self) -> dict[str, Any]:
        return dict(self._json)


@dataclass(frozen=True)
class NodeFact:
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

    @_cached
    def key(self) -> str:  # read for every rule of every node: computed once
        return f"{self.domain}:{self.op_type}"

    @property
    def label(self) -> str:
        return f"{self.op_type} {self.name}"


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

    @_cached
    def main_nodes_by_op(self) -> dict[str, list[NodeFact]]:
        """The main graph's nodes by op type, in graph order (rules that look at the whole graph)."""
        index: dict[str, list[NodeFact]] = {}
        for n in self.nodes:
            if not n.graph:
                index.setdefault(n.op_type, []).append(n)
        return index

    def tensor(self, name: str) -> Optional[TensorInfo]:
        return self.tensors.get(name)

    @_cached
    def shape_unknown_at(self) -> tuple[str, ...]:
        """Names of the main-graph nodes where the checker lost a shape: an output of unknown rank or
        with a dim it could not work out (None), while every input's shape is known (a dim that
        depends on a dynamic input or on run-time values is known to be dynamic: DYNAMIC_DIM)."""
        tensors = self.tensors

        def lost(name: str) -> bool:
            t = tensors.get(name)
            return t is not None and (t.shape is None or None in t.shape)

        return tuple(n.name for n in self.nodes if not n.graph and any(lost(o) for o in n.outputs if o)
                     and not any(lost(i) for i in n.inputs if i))

    def __post_init__(self) -> None:
        if not self.producer:
            for node in self.nodes:
                for out in node.outputs:
                    if out:
                        self.producer[out] = node.index
                for inp in node.inputs:
                    if inp:
                        self.consumers.setdefault(inp, []).append(node.index)


# -- reading ------------------------------------------------------------------------------------

_GENERATED_DIM = re.compile(r"^unk__\d+$")  # names shape inference invents for unknown dims
_LFS = b"version https://git-lfs.github.com/spec/"
_LOCATION = b"location"  # the key of StringStringEntryProto that names an external data file


def load_model_proto(path: Path, weights: bool = True, keep: Optional[list[Any]] = None) -> Any:
    """Read an ONNX file without its external data; every failure names the file.

    ``weights=False`` also leaves out the values of initializers of more than SMALL_CONSTANT
    elements stored in the file (``_without_weights``): enough for graph facts, not for running
    or rewriting the model. ``keep``: gets the attributes of each main-graph node as a tuple, read
    by the external-data check (``safety.check_external_data``) and reused by the facts; and, when
    the weights were left out, the serialized model without them (``keep.serialized``) for shape
    inference, which would otherwise serialize the parsed model again.
    """
    import onnx  # lazy: heavy
    from google.protobuf.message import DecodeError

    path = Path(path)
    try:
        st = path.stat()
    except OSError as exc:
        raise ModelError(f"{path}: cannot read model file: {exc.strerror or exc}") from None
    if not path.is_file():
        raise ModelError(f"{path}: not a regular file")
    if st.st_size == 0:
        raise ModelError(f"{path}: empty file, not an ONNX model")
    with open(path, "rb") as fh:
        head = fh.read(64)
    if head.startswith(_LFS):
        raise ModelError(f"{path}: is a Git LFS pointer, not the model (run `git lfs pull`)")
    try:
        model = None
        if not weights:
            model = _load_without_weights(path, onnx, keep)
        if model is None:
            model = onnx.load(os.fspath(path), load_external_data=False)
    except ModelError:  # a bad initializer found while leaving out the weights
        raise
    except (DecodeError, RuntimeError, ValueError, OSError, UnicodeDecodeError) as exc:
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    except Exception as exc:  # protobuf raises assorted errors on random bytes
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__}: {exc})") from None
    if not model.HasField("graph"):
        raise ModelError(f"{path}: ONNX file has no graph")
    if len(model.graph.node) == 0:
        raise ModelError(f"{path}: ONNX graph '{model.graph.name}' has no nodes: nothing to check")
    if len(model.graph.output) == 0:
        raise ModelError(f"{path}: ONNX graph '{model.graph.name}' declares no outputs")
    if isinstance(keep, Kept) and keep.serialized is not None and not keep.references:
        return model  # read without its weights, and no tensor of the file can name an external file
    from .safety import check_external_data

    check_external_data(model, path, keep=keep)  # untrusted references are refused before anything reads them
    return model


def _load_without_weights(path: Path, onnx: Any, keep: Optional[list[Any]] = None) -> Any:
    """The model without its large initializer values, or None to read it the ordinary way.

    The file is mapped, not read: the pages that hold the weights are never touched (CPU time of
    reading bert_9k's 39 MB: 19 ms, against 63 ms to read and parse it whole and clear the values).
    """
    import mmap

    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        try:
            light = _without_weights(buf, path)
        except (ValueError, IndexError):
            return None
    if light is None:
        return None
    if isinstance(keep, Kept):
        keep.serialized = light
        keep.references = _LOCATION in light
    return onnx.ModelProto.FromString(light)


class Kept(list):  # type: ignore[type-arg]
    """What ``load_model_proto(keep=Kept())`` hands on to ``facts_from_model``: the attributes of each
    main-graph node (the list itself) and the serialized model without its weights (``serialized``,
    None when the file was read whole)."""

    serialized: Optional[bytes] = None
    # Whether the bytes read (``serialized``) hold b"location". ONNX and ONNX Runtime read a tensor's
    # external data from the file its "location" entry names and refuse one without it; a protobuf
    # string is stored verbatim, so a file without those bytes has no reference for anything to
    # follow, and the external-data check (which reads every attribute of every node) is skipped.
    # The bytes left out are the values of large initializers: raw data, never a field.
    references: bool = True


def clear_caches() -> None:
    """Forget what earlier models taught this process (parsed scopes and stack traces)."""
    for cached in (_located, _module_location, _scope_module_parsed, _user_frame):
        cached.cache_clear()


def load_graph(path: Path) -> GraphFacts:
    """Graph facts of an ONNX file (no weights loaded)."""
    kept = Kept()
    model = load_model_proto(Path(path), weights=False, keep=kept)
    return facts_from_model(model, str(path), kept)


# -- reading a model without its weights ----------------------------------------------------------
# Field numbers of onnx.proto: ModelProto.graph, GraphProto.initializer, TensorProto.dims and the
# TensorProto fields that hold values.
_MODEL_GRAPH, _GRAPH_INITIALIZER, _TENSOR_DIMS, _TENSOR_DTYPE, _TENSOR_RAW, _TENSOR_LOCATION = 7, 5, 1, 2, 9, 14
_TENSOR_DATA = frozenset({4, 5, 6, 7, 9, 10, 11})  # float/int32/string/int64/raw/double/uint64 data


def _varint(buf: Any, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _fields(buf: Any, start: int, end: int) -> Iterator[tuple[int, int, int, int]]:
    """(field number, start of the field, start and end of its value) of each field of a message."""
    pos = start
    while pos < end:
        key, vpos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length, vpos = _varint(buf, vpos)
            vend = vpos + length
        elif wire == 0:
            _, vend = _varint(buf, vpos)
        elif wire == 1:
            vend = vpos + 8
        elif wire == 5:
            vend = vpos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > end:
            raise ValueError("field runs past its message")
        yield key >> 3, pos, vpos, vend
        pos = vend


def _tensor_parts(buf: Any, start: int, end: int) -> tuple[int, list[Any], int, int]:
    """(element count, the fields that are not values, data type, length of raw_data or -1 when the
    tensor has none or its data is external) of the TensorProto in ``buf[start:end]``.

    ``_fields`` inlined, with the one-byte keys and lengths of nearly every field read directly;
    the fields kept are returned as runs of adjacent fields (one slice per run, not per field)."""
    numel = 1
    dtype = raw = 0
    external = False
    kept: list[Any] = []
    run = pos = start  # start of the current run of kept fields
    while pos < end:
        fstart = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        wire = key & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            vstart, vend = pos, pos + length
        elif wire == 0:
            vstart = pos
            vend = pos + 1 if buf[pos] < 0x80 else _varint(buf, pos)[1]
        elif wire == 1:
            vstart, vend = pos, pos + 8
        elif wire == 5:
            vstart, vend = pos, pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > end:
            raise ValueError("field runs past its message")
        pos = vend
        num = key >> 3
        if num == _TENSOR_DIMS:
            if wire == 2:  # packed dims
                p = vstart
                while p < vend:
                    d, p = _varint(buf, p)
                    numel *= d
            else:
                numel *= _varint(buf, vstart)[0]
        elif num in _TENSOR_DATA:
            if num == _TENSOR_RAW:
                raw = vend - vstart
            if run < fstart:
                kept.append(buf[run:fstart])
            run = vend
        elif num == _TENSOR_DTYPE:
            dtype = _varint(buf, vstart)[0]
        elif num == _TENSOR_LOCATION:
            external = _varint(buf, vstart)[0] == 1  # TensorProto.EXTERNAL
    if run < end:
        kept.append(buf[run:end])
    return numel, kept, dtype, raw if raw and not external else -1


def _without_weights(buf: Any, path: object = "<memory>") -> Optional[bytes]:
    """The serialized model minus the values of main-graph initializers of more than SMALL_CONSTANT
    elements (their name, dtype and dims stay), or None when there is nothing to leave out. The raw
    data of each initializer left out must hold its dims x dtype, else ModelError (naming ``path``).

    Graph facts never use those values, and skipping them means neither the protobuf parser nor
    shape inference copies the weights (a 100 MB CNN: most of the time of a check). Malformed
    input raises ValueError or IndexError; the caller then reads the file the ordinary way.

    The scan stops at the first graph field numbered after the initializers (inputs, outputs,
    value_infos: most of the fields of a dynamo export) and copies the rest as it is. Protobuf writes
    a message's fields in number order, so no initializer follows; one that does in a file written
    otherwise keeps its values, which the facts do not read either (only the saving is lost).
    """
    graphs = [(f, s, e) for num, f, s, e in _fields(buf, 0, len(buf)) if num == _MODEL_GRAPH]
    if len(graphs) != 1 or buf[graphs[0][0]] & 7 != 2:
        return None
    gfield, gstart, gend = graphs[0]
    graph: list[Any] = []
    kept = gstart  # start of the run of graph bytes copied as they are
    dropped = 0
    pos, least = gstart, 8 * SMALL_CONSTANT
    while pos < gend:  # _fields(buf, gstart, gend), inlined: one pass over every node and initializer
        fstart = pos
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        if key >> 3 > _GRAPH_INITIALIZER:
            break  # the rest is copied as it is (see above)
        wire = key & 7
        if wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:  # two bytes: most nodes
                length = (length & 0x7F) | buf[pos + 1] << 7
                pos += 2
            else:
                length, pos = _varint(buf, pos)
            vstart, vend = pos, pos + length
        elif wire == 0:
            vstart = pos
            _, vend = _varint(buf, pos)
        elif wire == 1:
            vstart, vend = pos, pos + 8
        elif wire == 5:
            vstart, vend = pos, pos + 4
        else:
            raise ValueError(f"wire type {wire}")
        if vend > gend:
            raise ValueError("field runs past its message")
        pos = vend
        if key >> 3 != _GRAPH_INITIALIZER or vend - vstart < least:
            continue
        numel, tensor, dtype, raw = _tensor_parts(buf, vstart, vend)
        if numel <= SMALL_CONSTANT:
            continue  # values kept: _small_initializers checks their size
        body = b"".join(tensor)
        if raw >= 0 and dtype in _RAW_ITEMSIZE and raw != numel * _RAW_ITEMSIZE[dtype]:
            from onnx import TensorProto

            _check_raw_size(path, TensorProto.FromString(body), raw)  # the tensor without its values
        graph += [buf[kept:fstart], buf[fstart:vstart - len(_encode_varint(vend - vstart))],
                  _encode_varint(len(body)), body]
        dropped += vend - vstart - len(body)
        kept = vend
    if not dropped:
        return None
    graph.append(buf[kept:gend])
    head = buf[gfield:gstart - len(_encode_varint(gend - gstart))]
    size = sum(map(len, graph))  # the model's bytes in one join (not the graph's first, then the model's)
    return b"".join([buf[:gfield], head, _encode_varint(size)] + graph + [buf[gend:]])


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector around a burst of allocations.

    Building facts and matching allocate tens of thousands of small acyclic objects, and every
    collection those allocations trigger rescans all live objects, so the cost grew faster than
    the node count. Reference counting still frees everything; cycles are collected afterwards.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # what the burst allocated goes to the oldest generation without a scan (freeze and
            # unfreeze are constant-time); otherwise the first collections after the pause scan every
            # one of those objects again (~13 ms after the facts of a 9,000-node model). Not done when
            # something else in the process froze objects: their frozen set must stay frozen.
            if not _heap_frozen():
                gc.freeze()
                gc.unfreeze()
            gc.enable()


_FROZEN = False  # something in this process froze objects (export._freeze_heap, or the user's code)


def _heap_frozen() -> bool:
    """Whether objects are frozen (gc.freeze) in this process.

    ``gc.get_freeze_count()`` walks the whole frozen list: ~15 ms per million objects, and a
    process that exported holds ~420,000 frozen objects, so it is asked only until the answer is
    yes (then it is remembered: nothing here unfreezes another's objects). While nothing is frozen
    the list is empty and the question costs nothing."""
    global _FROZEN
    if not _FROZEN and gc.get_freeze_count():
        _FROZEN = True
    return _FROZEN


def facts_from_model(model: Any, path: str = "<memory>", attributes: Optional[list[tuple[Any, ...]]] = None,
                     ) -> GraphFacts:
    """Graph facts of a parsed model. ``attributes``: the attributes of each main-graph node as a
    tuple, in node order, if the caller has them (``load_model_proto(keep=...)``); a ``Kept`` also
    gives shape inference the model's bytes."""
    with paused_gc():
        return _facts_from_model(model, path, attributes)


def _facts_from_model(model: Any, path: str, attributes: Optional[list[tuple[Any, ...]]] = None) -> GraphFacts:
    import onnx
    from onnx import shape_inference

    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        opsets[imp.domain or DEFAULT_DOMAIN] = int(imp.version)
    if DEFAULT_DOMAIN not in opsets:
        opsets[DEFAULT_DOMAIN] = 1 if model.ir_version < 3 else 0
    rows = _read_nodes(model.graph, attributes)  # each node's protobuf fields decoded once, for folding and facts
    types: dict[bytes, Any] = {}
    decoded: Optional[list[tuple[str, Any]]] = []
    if _already_inferred(model.graph, rows, types, decoded):
        inferred, error = model, None  # inference would only confirm the file's own static shapes
    else:
        decoded = None
        inferred, error = _infer(model, attributes.serialized if isinstance(attributes, Kept) else None)
        if inferred is not model and any(r[1] in _CONTROL_FLOW for r in rows):
            rows = _read_nodes(inferred.graph)  # the pass typed the values inside the bodies
    small = _small_initializers(inferred.graph, path, light=isinstance(attributes, Kept))
    folded = _fold_small_constants(inferred, opsets, small, rows)
    builder = _Builder(opsets, onnx, small, folded, types)
    builder.walk_graph(inferred.graph, prefix="", rows=rows, value_infos=decoded)
    static = builder.fully_inferred()
    if not static:
        # shapes downstream of folded values (pads, shape arithmetic) are known to the compiler: one
        # walk in graph order folds and infers node by node what the first pass left unknown (only
        # then: a walk cannot improve on static shapes)
        from .propagate import refine

        known = dict(small)
        known.update(folded)
        better, more = refine(inferred.graph, rows, opsets, int(model.ir_version), known, folded,
                              everything=error is not None)
        for name, tp in better.items():
            builder.refine_type(name, tp)
        folded = {**folded, **more}
        if error is not None and builder.fully_inferred():
            error = None  # node by node, every shape was found
    if folded:
        for name, arr in folded.items():
            builder.folded_value(name, arr)
    g = inferred.graph
    inputs = tuple(i.name for i in g.input if i.name not in builder.initializers)
    dynamic_rank: frozenset[str] = frozenset()
    if not static or any(n.graph for n in builder.nodes):
        dynamic_rank = _mark_dynamic(builder.nodes, builder.tensors, inputs)
    return GraphFacts(
        path=path,
        opsets=opsets,
        ir_version=int(model.ir_version),
        nodes=tuple(builder.nodes),
        tensors=builder.tensors,
        inputs=inputs,
        outputs=tuple(o.name for o in g.output),
        initializers=frozenset(builder.initializers),
        producer_name=f"{model.producer_name} {model.producer_version}".strip(),
        shape_inference_error=error,
        dynamic_rank=dynamic_rank,
    )


# A dim is an int (static), a str (dynamic: a symbolic dim of a graph input, or DYNAMIC_DIM for one that
# depends on a dynamic input or on run-time values) or None: a dim the checker could not work out,
# although nothing makes it vary at run time (the compilers see it static).
DYNAMIC_DIM = "?"

# input positions whose values (not only their shapes) decide an op's output shape
_SHAPE_FROM_VALUES: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Resize": (1, 2, 3),
    "Upsample": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "TopK": (1,), "Squeeze": (1,),
    "Unsqueeze": (1,), "Split": (1,), "CenterCropPad": (1,), "MaxUnpool": (2,), "DFT": (1,), "STFT": (2,),
    **{f"Reduce{r}": (1,) for r in ("Max", "Min", "Mean", "Sum", "Prod", "L1", "L2", "LogSum", "LogSumExp",
                                    "SumSquare")},
}
# ops whose output shape depends on the values of their data (or on which branch runs)
_SHAPE_FROM_DATA = frozenset({"NonZero", "Unique", "NonMaxSuppression", "Compress", "StringSplit", "If", "Loop",
                              "Scan", "SequenceAt", "SplitToSequence", "ConcatFromSequence"})


def _mark_dynamic(nodes: Sequence[NodeFact], tensors: dict[str, TensorInfo], inputs: Sequence[str]) -> frozenset[str]:
    """Tell dynamic dims from dims the checker could not work out: an unknown dim of a tensor whose
    shape depends on a graph input with dynamic dims, or on run-time values (NonZero's output, a
    Reshape to a shape computed from the data), becomes DYNAMIC_DIM; the other unknown dims stay
    None. Values are run-time when they come from a graph input (not from its shape) and were not
    folded. Tensors inside If/Loop/Scan bodies run per branch or iteration: their unknown dims are
    dynamic. Returns the names of dynamic tensors of unknown rank (GraphFacts.dynamic_rank)."""
    runtime = set(inputs)  # tensors whose values are known only at run time
    varying = {n for n in inputs if (t := tensors.get(n)) is not None and not t.static}  # shapes that vary
    for node in nodes:
        outs = node.outputs
        if node.graph:
            for o in outs:
                _as_dynamic(tensors, o)
                varying.add(o)
            continue
        ins = node.inputs
        op = node.op_type
        if node.domain != DEFAULT_DOMAIN:
            value_dep = shape_dep = any(i in runtime for i in ins)
        elif op in ("Shape", "Size"):
            value_dep, shape_dep = bool(ins) and ins[0] in varying, False
        else:
            value_dep = any(i in runtime for i in ins)
            shape_dep = op in _SHAPE_FROM_DATA or any(ins[k] in runtime for k in _SHAPE_FROM_VALUES.get(op, ())
                                                      if k < len(ins))
        shape_dep = shape_dep or any(i in varying for i in ins)
        for o in outs:
            if not o:
                continue
            t = tensors.get(o)  # None: a value no inference typed (a custom op's output)
            if value_dep and (t is None or t.value is None):
                runtime.add(o)
            if shape_dep and (t is None or not t.static):
                varying.add(o)
                _as_dynamic(tensors, o)
    return frozenset(n for n in varying if (t := tensors.get(n)) is None or t.shape is None)


def _as_dynamic(tensors: dict[str, TensorInfo], name: str) -> None:
    t = tensors.get(name)
    if t is not None and t.shape is not None and None in t.shape:
        tensors[name] = _new(TensorInfo, name=name, dtype=t.dtype, const=t.const, value=t.value, static=False,
                             shape=tuple(DYNAMIC_DIM if d is None else d for d in t.shape))


# ops whose shape inference types the values of their subgraph bodies
_CONTROL_FLOW = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def _already_inferred(graph: Any, rows: list[tuple[Any, ...]],
                      types: dict[bytes, Any], decoded: Optional[list[tuple[str, Any]]] = None) -> bool:
    """Whether the file itself gives every node output of ``graph`` a dtype and a static shape.

    Exporters that write shapes (the dynamo exporter writes every intermediate one) leave shape
    inference nothing to add: with every value static, data propagation cannot refine a dim, and
    the facts are the same with or without the pass (checked on the corpus by
    benchmarks/identical.py). Graphs with control flow are always inferred (their bodies'
    values are typed by the pass), and so are files with any value left unknown or symbolic.
    ``types`` caches each decoded TypeProto by its bytes, for the graph walk after this, and
    ``decoded`` gets (name, decoded type) of each value_info and graph output, in order: when this
    returns True, the walk takes them from there instead of reading the protobuf again.
    """
    if not graph.value_info:
        return False
    static: set[str] = set()
    decode = _Builder._decode_type
    for vi in graph.value_info[:] + graph.output[:]:  # a slice: one C call (list() iterates in Python)
        key = vi.type.SerializeToString()
        typ = types.get(key)
        if typ is None:
            typ = types[key] = decode(vi.type)
        name = vi.name
        if decoded is not None:
            decoded.append((name, typ))
        if typ[2]:
            static.add(name)
    for _node, op_type, domain, _inputs, outputs, _attributes in rows:
        if op_type in _CONTROL_FLOW and domain in ("", DEFAULT_DOMAIN):
            return False
        for o in outputs:
            if o and o not in static:
                return False
    return True


def _read_nodes(graph: Any, attributes: Optional[list[tuple[Any, ...]]] = None) -> list[tuple[Any, ...]]:
    """(node, op_type, domain as written, inputs, outputs, attributes) of each node of ``graph``.

    ``attributes``: each node's attributes as a tuple, already read (by the external-data check);
    otherwise read here. Each is then read once: the protobuf objects of an attribute list cost
    more to make than what the facts do with them. Repeated fields are copied by a slice, which
    protobuf makes in C (``tuple(n.input)`` iterates the field in Python: 40 % slower)."""
    nodes = graph.node
    if attributes is None or len(attributes) != len(nodes):
        return [(n, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:]), tuple(n.attribute[:])) for n in nodes]
    return [(n, n.op_type, n.domain, tuple(n.input[:]), tuple(n.output[:]), a) for n, a in zip(nodes, attributes)]


def _small_initializers(graph: Any, path: object = "<memory>", light: bool = False) -> dict[str, Any]:
    """{name: numpy array} of the graph's initializers of at most SMALL_CONSTANT elements.

    The raw data of those must hold their dims x dtype, else ModelError (naming ``path``); so must
    the raw data of larger ones when ``light``: the model was read by load_model_proto, whose read
    without the weights checked and left out the values of every larger initializer but those
    under 8 x SMALL_CONSTANT bytes (_without_weights), so what is left of them is cheap to read."""
    import sys

    import numpy as np
    from onnx import numpy_helper

    known: dict[str, Any] = {}
    for init in graph.initializer:
        dims = tuple(init.dims[:])
        numel = 1
        for d in dims:
            numel *= d
        if (numel <= SMALL_CONSTANT or light) and init.data_location != 1:
            raw = init.raw_data
            if raw and init.data_type in _RAW_ITEMSIZE and len(raw) != numel * _RAW_ITEMSIZE[init.data_type]:
                _check_raw_size(path, init, len(raw))
            if numel > SMALL_CONSTANT:
                continue
            plain = _PLAIN_DTYPES.get(init.data_type) if raw and sys.byteorder == "little" else None
            try:
                # what numpy_helper.to_array does for raw little-endian data of a plain dtype, minus
                # its checks (a size mismatch still raises); every other tensor goes through it
                known[init.name] = (np.frombuffer(raw, dtype=plain).reshape(dims) if plain
                                    else numpy_helper.to_array(init))
            except Exception:
                pass
    return known


# TensorProto data types stored as the numpy dtype of the same name
_PLAIN_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64", 9: "bool",
                 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def _infer(model: Any, serialized: Optional[bytes] = None) -> tuple[Any, Optional[str]]:
    """``model`` after shape inference; ``serialized``: the model's bytes if the caller has them
    (infer_shapes would serialize the model for its C++ part: ~4 ms for a 9,000-node graph)."""
    from onnx import shape_inference

    try:
        return shape_inference.infer_shapes(model if serialized is None else serialized, check_type=False,
                                            strict_mode=False, data_prop=True), None
    except Exception as exc:  # shape inference errors leave shapes unknown, never "supported"
        text = str(exc).strip().splitlines()
        return model, f"{type(exc).__name__}: {text[0] if text else ''}"


_NO_FOLD = frozenset({"RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike", "Multinomial",
                      "Bernoulli", "If", "Loop", "Scan", "SequenceConstruct"})


def _fold_small_constants(model: Any, opsets: Mapping[str, int], small: Mapping[str, Any],
                          rows: Optional[list[tuple[Any, ...]]] = None,
                          ) -> dict[str, Any]:
    """Values of small tensors the compiler computes at build time (shape arithmetic, pads, scales).

    Only nodes of the default domain whose inputs are all known small values are evaluated, with
    ONNX's reference implementation; initializers larger than SMALL_CONSTANT elements and external
    data are never read (``small``: the values of the small initializers). Returns {tensor name:
    numpy array} for node outputs only.
    """
    import numpy as np
    from onnx import helper

    known: dict[str, Any] = dict(small)
    shapes: dict[str, tuple[int, ...]] = {}
    # only the shapes Shape/Size nodes read: walking every value_info's dims costs more than the rest
    nodes = rows if rows is not None else _read_nodes(model.graph)  # each protobuf field read once
    wanted = {r[3][0] for r in nodes if r[1] in ("Shape", "Size") and r[3]}
    for vi in (model.graph.input[:] + model.graph.value_info[:]) if wanted else ():
        if vi.name not in wanted:
            continue
        tt = vi.type.tensor_type
        if tt.HasField("shape") and all(d.HasField("dim_value") and d.dim_value >= 0 for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
    out: dict[str, Any] = {}
    ndarray = np.ndarray
    opset_list = [helper.make_opsetid("" if d == DEFAULT_DOMAIN else d, v) for d, v in opsets.items() if v]
    for node, op, domain, inputs, outputs, attributes in nodes:
        if op in _NO_FOLD or domain not in ("", DEFAULT_DOMAIN):
            continue
        values: Optional[list[Any]] = None
        if op in ("Shape", "Size") and inputs and inputs[0] in shapes:
            dims = shapes[inputs[0]]
            if op == "Size":
                values = [np.array(int(np.prod(dims)), dtype=np.int64)]
            else:
                attrs = {a.name: a.i for a in attributes}
                r = len(dims)
                start, end = attrs.get("start", 0), attrs.get("end", r)
                start = min(max(start + r if start < 0 else start, 0), r)
                end = min(max(end + r if end < 0 else end, 0), r)
                values = [np.array(dims[start:end], dtype=np.int64)]
        elif op == "Constant":
            values = _constant_value(attributes, np) or _evaluate(node, known, opset_list)
        elif op == "Identity" and len(inputs) == 1 and inputs[0] and inputs[0] in known:  # as _fast_eval
            values = [known[inputs[0]]]
        elif inputs:
            for i in inputs:  # all((not i) or i in known for i in inputs), without a generator per node
                if i and i not in known:
                    break
            else:
                values = _evaluate(node, known, opset_list)
        if values is None:
            continue
        for name, value in zip(outputs, values):
            if name and value is not None and (value.size if type(value) is ndarray else np.size(value)) <= SMALL_CONSTANT:
                known[name] = value
                out[name] = value
    return out


def _constant_value(attributes: tuple[Any, ...], np: Any) -> Optional[list[Any]]:
    """[value] of a Constant node (given its attributes) whose one attribute is a tensor of a plain
    dtype in raw little-endian data (what exporters write), read as _small_initializers reads such
    data; None otherwise."""
    import sys

    if len(attributes) != 1 or sys.byteorder != "little":
        return None
    a = attributes[0]
    if a.name != "value" or a.type != 4:  # AttributeProto.TENSOR
        return None
    t = a.t
    raw = t.raw_data
    plain = _PLAIN_DTYPES.get(t.data_type) if raw and t.data_location != 1 else None
    if plain is None:
        return None
    try:
        return [np.frombuffer(raw, dtype=plain).reshape(tuple(t.dims))]
    except ValueError:
        return None


def _fast_eval(node: Any, args: list[Any]) -> Optional[list[Any]]:
    """numpy for the ops shape arithmetic is made of; None means 'use the reference evaluator'."""
    import numpy as np
    from onnx import helper

    op = node.op_type
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    if op == "Constant":
        if "value" in attrs:
            from onnx import numpy_helper

            return [numpy_helper.to_array(attrs["value"])]
        for key, dt in (("value_int", np.int64), ("value_ints", np.int64), ("value_float", np.float32), ("value_floats", np.float32)):
            if key in attrs:
                return [np.asarray(attrs[key], dtype=dt)]
        return None
    if op == "Identity" and len(args) == 1:  # TorchScript exports copy small weights through Identity
        return [args[0]]
    if op in ("Add", "Sub", "Mul") and len(args) == 2:
        a, b = args
        if a.dtype != b.dtype:
            return None
        return [{"Add": np.add, "Sub": np.subtract, "Mul": np.multiply}[op](a, b).astype(a.dtype)]
    if op == "Div" and len(args) == 2 and args[0].dtype == args[1].dtype:
        a, b = args
        if np.issubdtype(a.dtype, np.integer):
            if np.any(b == 0):
                return None
            return [np.trunc(a / b).astype(a.dtype)]
        return [(a / b).astype(a.dtype)]
    if op == "Unsqueeze" and len(args) == 2:
        out = args[0]
        rank = out.ndim + len(args[1])
        for ax in sorted(int(a) + rank if a < 0 else int(a) for a in args[1]):
            out = np.expand_dims(out, ax)
        return [out]
    if op == "Squeeze" and len(args) == 2:
        return [np.squeeze(args[0], axis=tuple(int(a) for a in args[1]))]
    if op == "Concat":
        return [np.concatenate([a.reshape(a.shape or (1,)) if a.ndim == 0 else a for a in args], axis=int(attrs["axis"]))]
    if op == "Gather" and len(args) == 2:
        return [np.take(args[0], args[1].astype(np.int64), axis=int(attrs.get("axis", 0)))]
    if op == "Cast" and len(args) == 1:
        return [args[0].astype(helper.tensor_dtype_to_np_dtype(int(attrs["to"])))]
    if op == "Reshape" and len(args) == 2:
        shape = [int(d) for d in args[1]]
        if 0 in shape and not attrs.get("allowzero", 0):
            shape = [args[0].shape[i] if d == 0 else d for i, d in enumerate(shape)]
        return [args[0].reshape(shape)]
    if op == "Slice" and 3 <= len(args) <= 5:
        data, starts, ends = args[0], args[1], args[2]
        axes = args[3] if len(args) > 3 else np.arange(len(starts))
        steps = args[4] if len(args) > 4 else np.ones(len(starts), dtype=np.int64)
        index = [slice(None)] * data.ndim
        for st, en, ax, sp in zip(starts, ends, axes, steps):
            ax = int(ax) + data.ndim if ax < 0 else int(ax)
            index[ax] = slice(int(st), int(en), int(sp))
        return [data[tuple(index)]]
    if op == "Sqrt" and len(args) == 1 and np.issubdtype(args[0].dtype, np.floating):
        return [np.sqrt(args[0])]
    if op == "Mod" and len(args) == 2 and np.issubdtype(args[0].dtype, np.integer) and not attrs.get("fmod", 0):
        if np.any(args[1] == 0):
            return None
        return [np.mod(*args).astype(args[0].dtype)]
    if op == "Equal" and len(args) == 2:
        return [np.equal(*args)]
    if op == "Where" and len(args) == 3:
        return [np.where(*args)]
    if op == "ConstantOfShape" and len(args) == 1:
        value = attrs.get("value")
        fill = helper.tensor_dtype_to_np_dtype(value.data_type) if value is not None else np.float32
        from onnx import numpy_helper

        v = numpy_helper.to_array(value).reshape(-1)[0] if value is not None else 0
        return [np.full([int(d) for d in args[0]], v, dtype=fill)]
    return None


def _evaluate(node: Any, known: Mapping[str, Any], opset_list: list[Any]) -> Optional[list[Any]]:
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    try:
        fast = _fast_eval(node, [known[i] for i in node.input if i])
    except Exception:
        fast = None
    if fast is not None:
        return fast
    try:
        feeds = {i: known[i] for i in node.input if i}
        inputs = [helper.make_tensor_value_info(i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for i, v in feeds.items()]
        outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        g = helper.make_graph([node], "fold", inputs, outputs)
        m = helper.make_model(g, opset_imports=opset_list)
        res = ReferenceEvaluator(m).run(None, feeds)
        return [r for r in res]
    except Exception:
        return None


def _new(cls: Any, **fields: Any) -> Any:
    """``cls(**fields)`` for a frozen dataclass given every field, without its generated __init__,
    which sets each field through object.__setattr__ (a third of the cost of reading a node).
    The loops that build one object per node or tensor inline it (``_object_new`` and an update of
    ``__dict__``): the call and its keyword dict cost a third of the building."""
    obj = object.__new__(cls)
    obj.__dict__.update(fields)
    return obj


_object_new = object.__new__


_NOT_A_TENSOR = (None, None, False, False)
_GRAPH_TYPES = frozenset({5, 10})  # AttributeProto.GRAPH, GRAPHS


class _Builder:
    def __init__(self, opsets: Mapping[str, int], onnx: Any, small: Mapping[str, Any] = {},
                 folded: Mapping[str, Any] = {}, types: Optional[dict[bytes, Any]] = None) -> None:
        self.opsets = opsets
        self.onnx = onnx
        self.small = small  # arrays of the main graph's small initializers, already read
        self.folded = folded  # arrays of main-graph node outputs constant folding computed (Constant nodes)
        self.static: set[str] = set()  # main-graph value_info/outputs with a dtype and static shape
        self.nodes: list[NodeFact] = []
        self.tensors: dict[str, TensorInfo] = {}
        self.initializers: set[str] = set()
        self._schema_cache: dict[tuple[str, str, int], Optional[dict[str, Any]]] = {}
        self._types: dict[bytes, Any] = {} if types is None else types
        self._attr_cache: dict[tuple[Any, ...], tuple[dict[str, Any], frozenset[str], Mapping[str, Any]]] = {}

    # tensors
    def _decode(self, t: Any) -> Any:
        # most tensors share a few types: decode each distinct serialized TypeProto once
        key = t.SerializeToString()
        typ = self._types.get(key)
        if typ is None:
            typ = self._types[key] = self._decode_type(t)
        return typ

    def _value_info(self, vi: Any, static: Optional[set[str]] = None) -> None:
        self._typed(vi.name, self._decode(vi.type), static)

    def _typed(self, name: str, typ: Any, static: Optional[set[str]] = None) -> None:
        """The TensorInfo of a value_info (or graph input/output) given its decoded type."""
        if static is not None and typ[2]:
            static.add(name)
        if typ is _NOT_A_TENSOR:
            self.tensors.setdefault(name, TensorInfo(name, None, None))
            return
        old = self.tensors.get(name)
        if old is not None and old.const:
            return
        # _new(TensorInfo, ...) inlined, with TensorInfo.static known from the decoded type
        info = _object_new(TensorInfo)
        info.__dict__.update(name=name, dtype=typ[0], shape=typ[1], const=False, value=None, static=typ[3])
        self.tensors[name] = info

    @staticmethod
    def _decode_type(t: Any) -> Any:
        if not t.HasField("tensor_type"):
            return _NOT_A_TENSOR
        tt = t.tensor_type
        dtype = dtype_name(tt.elem_type) if tt.elem_type else None
        shape: Optional[tuple[Any, ...]] = None
        if tt.HasField("shape"):
            dims: list[Any] = []
            for d in tt.shape.dim:
                if d.HasField("dim_value"):
                    value = d.dim_value  # an int64 field: a Python int
                    dims.append(value if value >= 0 else None)  # a negative dim is invalid ONNX: unknown, not a size
                elif d.HasField("dim_param") and not _GENERATED_DIM.match(d.dim_param):
                    dims.append(d.dim_param)
                else:
                    dims.append(None)
            shape = tuple(dims)
        # static as the second inference pass means it: a dtype and every dim a known value; and
        # TensorInfo.static (every dim known, whatever the dtype)
        shape_static = shape is not None and all(isinstance(d, int) for d in shape)
        return dtype, shape, bool(tt.elem_type) and shape_static, shape_static

    def _const(self, name: str, tensor: Any, prefix: Optional[str] = None, arr: Any = None) -> None:
        dims = tuple(tensor.dims[:])  # protobuf int64 fields read as Python ints
        numel = 1
        for d in dims:
            numel *= d
        value: Optional[tuple[Any, ...]] = None
        if numel <= SMALL_CONSTANT and tensor.data_location != 1:  # TensorProto.EXTERNAL
            try:
                if arr is None and prefix == "":
                    arr = self.small.get(name)
                if arr is None:
                    from onnx import numpy_helper

                    arr = numpy_helper.to_array(tensor)
                value = tuple(arr.reshape(-1).tolist())
            except Exception:
                value = None
        info = _object_new(TensorInfo)  # _new(TensorInfo, ...) inlined (one per initializer)
        info.__dict__.update(name=name, dtype=_DTYPE_NAMES.get(tensor.data_type), shape=dims, const=True, value=value,
                             static=True)  # dims: ints
        self.tensors[name] = info

    def fully_inferred(self) -> bool:
        """Whether shape inference gave every main-graph node output a dtype and a static shape."""
        static = self.static
        return all((not o) or o in static for node in self.nodes if not node.graph for o in node.outputs)

    def refine_type(self, name: str, typ: tuple[int, Optional[tuple[Any, ...]]]) -> None:
        """A better type (elem type, dims) of a main-graph value from the walk (``propagate.refine``)."""
        old = self.tensors.get(name)
        if old is not None and old.const:
            return
        elem, shape = typ
        shape_static = shape is not None and all(isinstance(d, int) for d in shape)
        self._typed(name, (dtype_name(elem) if elem else None, shape, bool(elem) and shape_static, shape_static),
                    self.static)

    def folded_value(self, name: str, arr: Any) -> None:
        """A node output the compiler computes at build time: its value is known."""
        old = self.tensors.get(name)
        dtype = (old.dtype if old else None) or _np_dtype_name(arr)
        self.tensors[name] = _new(TensorInfo, name=name, dtype=dtype, shape=tuple(map(int, arr.shape)), const=False,
                                  value=tuple(arr.reshape(-1).tolist()), static=True)

    def _schema_defaults(self, op_type: str, domain: str, opset: int) -> Optional[dict[str, Any]]:
        key = (op_type, domain, opset)
        if key in self._schema_cache:
            return self._schema_cache[key]
        defaults: Optional[dict[str, Any]]
        schema = op_schema(op_type, opset, "" if domain == DEFAULT_DOMAIN else domain)
        if schema is None:
            defaults = None
        else:
            defaults = {}
            for name, attr in schema.attributes.items():
                dv = attr.default_value
                if dv is not None and dv.type != 0:
                    defaults[name] = _attr_value(self.onnx.helper.get_attribute_value(dv))
            defaults.update(_added_later(op_type, schema.domain, schema.since_version))
        self._schema_cache[key] = defaults
        return defaults

    def walk_graph(self, graph: Any, prefix: str, rows: Optional[list[tuple[Any, ...]]] = None,
                   value_infos: Optional[list[tuple[str, Any]]] = None) -> None:
        """The facts of a graph's initializers, inputs, values and nodes. ``rows``: its nodes as
        ``_read_nodes`` gives them; ``value_infos``: (name, decoded type) of its value_infos and
        outputs, in order, as ``_already_inferred`` decoded them."""
        for init in graph.initializer:
            self.initializers.add(init.name)
            self._const(init.name, init, prefix)
        for vi in graph.input:
            if vi.name not in self.initializers:
                self._value_info(vi)
        static = self.static if prefix == "" else None
        if value_infos is None:  # each type decoded once per distinct TypeProto (self._decode, inlined)
            get, decode = self._types.get, self._decode
            value_infos = [(vi.name, get((t := vi.type).SerializeToString()) or decode(t))
                           for vi in graph.value_info[:] + graph.output[:]]
        initializers, typed = self.initializers, self._typed
        for name, typ in value_infos:
            if name not in initializers:
                typed(name, typ, static)
            elif static is not None and typ[2]:
                static.add(name)
        for node, op_type, domain, inputs, outputs, attributes in (rows if rows is not None else _read_nodes(graph)):
            self._node(node, op_type, domain or DEFAULT_DOMAIN, inputs, outputs, prefix, attributes)

    def _node(self, node: Any, op_type: str, domain: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
              prefix: str, attributes: tuple[Any, ...]) -> None:
        opset = self.opsets.get(domain, 0)
        bodies: list[tuple[str, Any]] = []
        # nodes of one op with the same attributes (every layer of a model) share the decoding; a
        # tensor attribute is decoded as "<tensor>" whatever it holds, so only its name is keyed
        # (Constant nodes: not their values), and a graph attribute is never shared
        parts: Optional[list[Any]] = []
        for a in attributes:
            kind = a.type
            if kind == 4:  # AttributeProto.TENSOR
                parts.append(a.name)  # type: ignore[union-attr]
            elif kind in _GRAPH_TYPES:
                parts = None
                break
            else:
                parts.append(a.SerializeToString())  # type: ignore[union-attr]
        if parts is not None:
            key = (op_type, domain, opset, tuple(parts))
            known = self._attr_cache.get(key)
            if known is None:
                known = self._attr_cache[key] = self._attributes(op_type, attributes, domain, opset, bodies)
            attrs, explicit, defaults = known  # shared by those nodes: the facts are never mutated
        else:
            attrs, explicit, defaults = self._attributes(op_type, attributes, domain, opset, bodies)
        index = len(self.nodes)
        name = node.name or f"{op_type}_{index}"
        if op_type == "Constant" and domain == DEFAULT_DOMAIN and outputs:
            self._constant_node(outputs[0], attributes, prefix)
        sub_names = tuple(f"{name}/{label}" for label, _ in bodies) if bodies else ()
        fact = _object_new(NodeFact)  # _new(NodeFact, ...) inlined, with NodeFact.key
        fact.__dict__.update(
            index=index, name=name, op_type=op_type, domain=domain,
            inputs=inputs, outputs=outputs, attrs=attrs,
            explicit_attrs=explicit, defaults=defaults, graph=prefix,
            source=_source(node, name), opset=opset, subgraphs=sub_names, key=f"{domain}:{op_type}",
        )
        self.nodes.append(fact)
        for (label, body), sub in zip(bodies, sub_names):
            self.walk_graph(body, sub)

    def _attributes(self, op_type: str, attributes: tuple[Any, ...], domain: str, opset: int,
                    bodies: list[tuple[str, Any]]) -> tuple[dict[str, Any], frozenset[str], Mapping[str, Any]]:
        """(attributes with the schema's defaults filled in, names set explicitly, the defaults)."""
        attrs: dict[str, Any] = {}
        explicit: set[str] = set()
        for a in attributes:
            explicit.add(a.name)
            if a.type == self.onnx.AttributeProto.GRAPH:
                bodies.append((a.name, a.g))
                attrs[a.name] = "<graph>"
            elif a.type == self.onnx.AttributeProto.GRAPHS:
                for i, g in enumerate(a.graphs):
                    bodies.append((f"{a.name}[{i}]", g))
                attrs[a.name] = "<graphs>"
            elif a.type == self.onnx.AttributeProto.TENSOR:
                attrs[a.name] = "<tensor>"
            else:
                attrs[a.name] = _attr_value(self.onnx.helper.get_attribute_value(a))
        defaults = self._schema_defaults(op_type, domain, opset) or {}
        for k, v in defaults.items():
            attrs.setdefault(k, v)
        return attrs, frozenset(explicit), defaults

    def _constant_node(self, out: str, attributes: tuple[Any, ...], prefix: str = "") -> None:
        for a in attributes:
            if a.name == "value" and a.type == self.onnx.AttributeProto.TENSOR:
                if prefix == "" and out in self.folded:
                    # folding decoded this tensor already: folded_value() gives the output its shape and
                    # value from that array once the walk is done; until then it is a constant of this dtype
                    t = a.t
                    self.tensors[out] = _new(TensorInfo, name=out, dtype=dtype_name(t.data_type), shape=tuple(t.dims),
                                             const=True, value=None)
                    return
                self._const(out, a.t)
                return
            if a.name in ("value_float", "value_int"):
                v = self.onnx.helper.get_attribute_value(a)
                self.tensors[out] = TensorInfo(out, "float32" if a.name == "value_float" else "int64", (), True, (v,))
                return
            if a.name in ("value_floats", "value_ints"):
                v = list(self.onnx.helper.get_attribute_value(a))
                self.tensors[out] = TensorInfo(out, "float32" if a.name == "value_floats" else "int64", (len(v),), True,
                                               tuple(v) if len(v) <= SMALL_CONSTANT else None)
                return
        self.tensors[out] = TensorInfo(out, None, None, True, None)


# Attributes a later version of an op added whose default is not what the op did before: (domain,
# op type, attribute) -> the value that names the earlier behaviour, or None when no value of the
# attribute does. ONNX Runtime runs Resize-10 with 'asymmetric' coordinates and its own nearest
# rounding ("simple", none of Resize-11's nearest modes), and RoiAlign-10 without the half-pixel
# shift ("output_half_pixel"); Resize-11 and RoiAlign-16 default to 'half_pixel'.
_BEHAVIOUR_BEFORE: dict[tuple[str, str, str], Optional[str]] = {
    ("", "Resize", "coordinate_transformation_mode"): "asymmetric",
    ("", "Resize", "nearest_mode"): None,
    ("", "RoiAlign", "coordinate_transformation_mode"): "output_half_pixel",
}


@functools.lru_cache(maxsize=1024)
def _added_later(op_type: str, domain: str, since: int) -> Mapping[str, Any]:
    """{attribute: default} of the attributes that versions of an op newer than the one introduced
    at opset ``since`` have and that version does not (``ceil_mode`` of AveragePool-7, added in 10).

    ONNX adds an attribute with a default that keeps the old behaviour, so a node of the older
    version behaves as that default says; the default is the newest version's that has the
    attribute (an attribute it has without a default gets none). _BEHAVIOUR_BEFORE lists where
    ONNX broke that rule. Schemas are fixed for a process: each op version is looked up once.
    """
    from onnx import defs, helper

    try:
        schema = defs.get_schema(op_type, domain=domain)
        have = set(defs.get_schema(op_type, max_inclusive_version=since, domain=domain).attributes)
    except Exception:  # an op without schemas: nothing to add
        return {}
    added: dict[str, Any] = {}
    seen: set[str] = set()
    while schema.since_version > since:  # newest version first: its defaults win
        for name, attr in schema.attributes.items():
            if name in have or name in seen:
                continue
            seen.add(name)
            dv = attr.default_value
            if (domain, op_type, name) in _BEHAVIOUR_BEFORE:
                before = _BEHAVIOUR_BEFORE[(domain, op_type, name)]
                if before is not None:
                    added[name] = before
            elif dv is not None and dv.type != 0:
                added[name] = _attr_value(helper.get_attribute_value(dv))
        try:
            schema = defs.get_schema(op_type, max_inclusive_version=schema.since_version - 1, domain=domain)
        except Exception:
            break
    return added


def _np_dtype_name(arr: Any) -> Optional[str]:
    name = str(arr.dtype)
    return {"float32": "float32", "float64": "float64", "int64": "int64", "int32": "int32", "bool": "bool",
            "float16": "float16", "int8": "int8", "uint8": "uint8"}.get(name)


def _attr_value(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [_attr_value(x) for x in v]
    return v


# -- source locations ---------------------------------------------------------------------------

_LIBRARY_FRAME = re.compile(r"[/\\\\](torch|onnxscript|torchvision)[/\\\\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _source(node: Any, name: str) -> Optional[SourceLocation]:
    props = node.metadata_props
    if props:
        scopes = trace = None
        count = len(props)
        before = props[count - 2] if count >= 2 else None
        last = props[count - 1]
        if before is not None and before.key == "pkg.torch.onnx.name_scopes" and last.key == "pkg.torch.onnx.stack_trace":
            # the dynamo exporter writes these two last, after three others: read only them (the values
            # are the last of each key, as the loop below would find)
            scopes, trace = before.value, last.value
        else:
            for prop in props:  # read only the two values used (the others are long strings)
                key = prop.key
                if key == "pkg.torch.onnx.name_scopes":
                    scopes = prop.value
                elif key == "pkg.torch.onnx.stack_trace":
                    trace = prop.value
        if scopes or trace:
            location = _located(_scope_module(scopes) if scopes else None, trace)
            if location is not None:
                return location
    if name.startswith("/") and len(name) > 1:
        # TorchScript exporter scope names: /layer1/conv1/Conv -> layer1.conv1 (all but the last part)
        return _module_location(name.strip("/").rpartition("/")[0].replace("/", "."))
    return None


@functools.lru_cache(maxsize=4096)
def _module_location(module: str) -> SourceLocation:
    return SourceLocation(module=module)


# The nodes of one module call share their scopes, and every layer of a stack shares its stack
# trace: each distinct string is parsed once (parsing was a third of the graph-facts time).
@functools.lru_cache(maxsize=4096)
def _located(module: Optional[str], trace: Optional[str]) -> Optional[SourceLocation]:
    """The source location of a module (from a node's scopes) and a stack trace; shared by the nodes
    of one module call. Keyed by the module, not the scopes: the dynamo exporter's scopes end in a
    name of their own for every node ('linear_105'), while the module and the trace repeat."""
    file = line = function = code = None
    if trace:
        frame = _user_frame(trace)
        if frame is not None:
            file, line, function, code = frame
    if module is not None or file:
        return _new(SourceLocation, module=module, file=file, line=line, function=function, code=code)
    return None


def _scope_module(scopes: str) -> Optional[str]:
    """The deepest module of a node's cumulative scopes ``['', 'layer1', 'layer1.conv1', '<aten op>']``.

    The exporter writes repr() of a list of plain strings. Without a double quote or a backslash
    every item is single-quoted and holds no quote, so the last four quotes enclose the last two
    items: no parse, and no cache (the dynamo exporter's scopes end in a name of their own for
    every node, so each string is seen once). Anything else goes to literal_eval."""
    if scopes[:2] == "['" and scopes[-2:] == "']" and '"' not in scopes and "\\" not in scopes:
        pieces = scopes.rsplit("'", 4)
        return pieces[1] if len(pieces) == 5 else ""
    return _scope_module_parsed(scopes)


@functools.lru_cache(maxsize=4096)
def _scope_module_parsed(scopes: str) -> Optional[str]:
    try:
        parts = ast.literal_eval(scopes)
        return parts[-2] if len(parts) >= 2 else ""
    except (ValueError, SyntaxError, IndexError, TypeError):
        return None


@functools.lru_cache(maxsize=4096)
def _user_frame(trace: str) -> Optional[tuple[str, int, str, Optional[str]]]:
    frames = list(_iter_frames(trace))
    # the user's line, not torch's own module code that it called
    user = [f for f in frames if not _LIBRARY_FRAME.search(f[0])]
    return (user or frames)[-1] if (user or frames) else None


def _iter_frames(trace: str) -> Iterator[tuple[str, int, str, Optional[str]]]:
    lines = trace.splitlines()
    for i, text in enumerate(lines):
        m = _FRAME.search(text)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else None
            yield m.group(1), int(m.group(2)), m.group(3), code


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
