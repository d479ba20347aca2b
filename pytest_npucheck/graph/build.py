"""ONNX model -> graph facts: shape inference and its orchestration.

Facts are computed once per model file (``load_graph``; ``facts_cache`` keeps them on disk between
runs): the file is read without its weights (``protobuf``), small constants are folded (``fold``),
ONNX shape inference runs unless the file already gives every shape, a node-by-node walk
(``propagate``) refines what it left unknown, and dims that vary at run time are told from dims
the checker could not work out (``_mark_dynamic``). External data is never loaded.
"""

from __future__ import annotations

import re
from operator import attrgetter, itemgetter
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from .facts import (_DTYPE_NAMES, DEFAULT_DOMAIN, DYNAMIC_DIM, SMALL_CONSTANT, GraphFacts, NodeFact, NodeFactDraft,
                    TensorInfo, TensorInfoDraft, dtype_name, link_node, tensor_info)
from .fold import _fold_small_constants, _small_initializers
from .gc_pause import paused_gc
from .location import METADATA_PREFIX, SourceLocation, _module_location, _source
from .location import clear_caches as clear_location_caches
from .ops import CONTROL_FLOW, SHAPE_FROM_DATA, SHAPE_FROM_VALUES
from .propagate import refine
from .protobuf import (Kept, _read_nodes, _read_nodes_serialized, is_types_serialized, load_model_proto,
                       parse_types_serialized)
from .schema import _added_later, _attr_value, op_schema

_GENERATED_DIM = re.compile(r"^unk__\d+$")  # names shape inference invents for unknown dims


def clear_caches() -> None:
    """Forget what earlier models taught this process (parsed scopes and stack traces)."""
    clear_location_caches()


def load_graph(path: Path) -> GraphFacts:
    """Graph facts of an ONNX file (no weights loaded)."""
    kept = Kept()
    model = load_model_proto(Path(path), weights=False, keep=kept)
    return facts_from_model(model, str(path), kept)


def facts_from_model(model: Any, path: str = "<memory>", attributes: Optional[list[tuple[Any, ...]]] = None,
                     inferred: bool = False,
                     nodes: Optional["NodesAhead"] = None) -> GraphFacts:
    """Graph facts of a parsed model. ``attributes``: the attributes of each main-graph node as a
    tuple, in node order, if the caller has them (``load_model_proto(keep=...)``); a ``Kept`` also
    gives shape inference the model's bytes. ``inferred``: ``model`` is what shape inference returned
    for the file (``from_inferred``): its nodes are the file's, and the pass is not run again.
    ``nodes``: with ``inferred``, its main-graph nodes, already read from the bytes the pass read
    (``nodes_ahead``); used when they are as many as its nodes."""
    with paused_gc():
        return _facts_from_model(model, path, attributes, inferred, nodes)


def from_inferred(serialized: Any, nodes: Optional["NodesAhead"] = None) -> tuple[Any, Kept]:
    """The model and the ``Kept`` for ``facts_from_model(..., inferred=True)`` from the bytes shape
    inference returned for a file (``infer_serialized``), the value_infos' types and the nodes'
    attributes left as bytes (``protobuf.parse_types_serialized``: the facts key by those bytes
    and decode each distinct one once).

    The isolated child (``check._native_steps``) reads the file with every check of
    ``load_model_proto`` and infers its shapes; the inferred model holds every node, initializer
    and graph field of what it read, plus the value_infos. Reading the nodes from it, this process
    parses the graph once instead of twice (the file, then the child's result: ~20 ms and 5,400
    page faults on ``encoder_26k``). The bytes also answer ``Kept.serialized``'s question (whether
    any node may hold the exporter's metadata).

    ``serialized`` may also be the read-only ``mmap`` the child's bytes came back as
    (``isolate.call_mapped``): it answers the metadata question (``in``) as bytes do, and the parse
    reads it through a memoryview. ``nodes``: the nodes of the bytes the child inferred, read while
    it ran (``nodes_ahead``): the facts take those when they are as many as the result's, so the
    result's nodes are left as each one's bytes (``parse_types_serialized(nodes=False)``; parsed
    again whole in the case the facts would read them, another count)."""
    kept = Kept()
    kept.serialized = serialized
    data = serialized if type(serialized) is bytes else memoryview(serialized)
    if nodes is not None:
        model = parse_types_serialized(data, nodes=False)
        if len(model.graph.node) == len(nodes.rows):
            return model, kept
    return parse_types_serialized(data), kept


def _facts_from_model(model: Any, path: str, attributes: Optional[list[tuple[Any, ...]]] = None,
                      was_inferred: bool = False,
                      nodes: Optional["NodesAhead"] = None) -> GraphFacts:
    import onnx
    from onnx import shape_inference

    opsets = _opsets(model)
    # each node's protobuf fields decoded once, for folding and facts
    shared = is_types_serialized(model)  # the child's model: nodes of equal attributes share them
    names: Optional[list[str]] = None  # the nodes' names, read with the rest of a node (the child's model)
    given = None  # the nodes read while the isolated child ran
    if shared and was_inferred and nodes is not None and len(nodes.rows) == len(model.graph.node):
        given = nodes
        rows, names = list(nodes.rows), nodes.names  # a list of this call's own
    elif shared:
        names = []
        rows = _read_nodes_serialized(model.graph, names)
    else:
        rows = _read_nodes(model.graph, attributes)
    types: dict[bytes, Any] = {}
    decoded: Optional[list[tuple[str, Any]]] = []
    if was_inferred:  # the child's result (from_inferred): the file's own types did not make the pass moot
        inferred, error, decoded = model, None, None
    elif _already_inferred(model.graph, rows, types, decoded):
        inferred, error = model, None  # inference would only confirm the file's own static shapes
    else:
        decoded = None
        inferred, error = _infer(model, attributes.serialized if isinstance(attributes, Kept) else None)
        if inferred is not model and any(r[1] in CONTROL_FLOW for r in rows):
            rows, names = _read_nodes(inferred.graph), None  # the pass typed the values inside the bodies
    raw: Optional[list[tuple[str, bytes, Any]]] = None
    if decoded is None:  # (name, serialized TypeProto, ValueInfoProto) of the value_infos, then outputs
        # read here, not in the walk: folding looks up the shapes Shape nodes read by these names
        g = inferred.graph
        if is_types_serialized(inferred):
            raw = _value_infos_serialized(g.value_info[:], onnx)
            raw += [(vi.name, vi.type.SerializeToString(), vi) for vi in g.output[:]]
        else:
            raw = [(vi.name, vi.type.SerializeToString(), vi) for vi in g.value_info[:] + g.output[:]]
    small = _small_initializers(inferred.graph, path, light=isinstance(attributes, Kept))
    constant_outputs: set[str] = set()
    foldable: list[int] = []
    unkept: list[int] = []
    folded = _fold_small_constants(inferred, opsets, small, rows,
                                   value_infos=None if raw is None else raw[:len(inferred.graph.value_info)],
                                   constant_outputs=constant_outputs, foldable=foldable, unkept=unkept)
    builder = _Builder(opsets, onnx, small, folded, types)
    builder.shared_attributes = shared
    builder.names = names
    if isinstance(attributes, Kept) and attributes.serialized is not None:
        # a protobuf string is stored verbatim: bytes without the keys' common prefix hold no node
        # with the exporter's metadata (TorchScript exports: their nodes' sources are their names)
        builder.metadata = METADATA_PREFIX in attributes.serialized
    ahead = None
    if (given is not None and given.builder is not None and given.opsets == opsets
            and given.builder.metadata == builder.metadata):
        # their NodeFacts too, made with the same opsets and the same answer on the metadata: the
        # facts take its lists, once (a second build, ``check``'s confirmed pass, makes its own)
        ahead, given.builder = (given.builder, given.deferred), None
    builder.walk_graph(inferred.graph, prefix="", rows=rows, value_infos=decoded, raw=raw, ahead=ahead)
    static = builder.fully_inferred()
    if not static:
        # shapes downstream of folded values (pads, shape arithmetic) are known to the compiler: one
        # walk in graph order folds and infers node by node what the first pass left unknown (only
        # then: a walk cannot improve on static shapes)
        known = dict(small)
        known.update(folded)
        # the rows refine may act on, when the walk can name them: the nodes are the main graph's
        # rows in topological order (producer: a node's position by its output), their types came
        # through the walk's serialized value_infos (``open_types``), and no output is made twice
        # or omitted (then ``producer`` names every node's every output)
        visit = None
        if (not builder.nested and builder.firsts is not None and not builder.read_early
                and builder.raw_types is not None and len(builder.nodes) == len(rows)
                and len(builder.producer) == sum(map(len, map(itemgetter(4), rows)))):
            shape_ops = [f.index for op in ("Shape", "Size") for f in builder.by_op.get(op, ())]
            visit = (builder.producer, builder.open_types, unkept + shape_ops)
        better, more = refine(inferred.graph, rows, opsets, int(model.ir_version), known, folded,
                              everything=error is not None, raw_types=builder.raw_types,
                              constant_outputs=constant_outputs,
                              decoded=None if builder.raw_types is None else _elem_and_dims(builder._types),
                              visit=visit)
        for name, tp in better.items():
            builder.refine_type(name, tp)
        folded = {**folded, **more}
        if error is not None and builder.fully_inferred():
            error = None  # node by node, every shape was found
    if folded:
        builder.folded_values(folded)
    g = inferred.graph
    inputs = tuple(i.name for i in g.input if i.name not in builder.initializers)
    dynamic_rank: frozenset[str] = frozenset()
    if not static or builder.nested:
        dynamic_rank = _mark_dynamic(builder.nodes, builder.tensors, inputs,
                                     None if builder.nested else builder.producer)
    facts = GraphFacts(
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
        producer=builder.producer,
        consumers=builder.consumers,
        # when every node went through _main_nodes: one per checker signature (validity)
        first_of_signatures=None if builder.nested or builder.firsts is None else tuple(builder.firsts),
        topological=None if builder.nested or builder.firsts is None else not builder.read_early,
        # positions in ``rows``, which are the nodes' indices when every node is in the main graph
        foldable=None if builder.nested or len(builder.nodes) != len(rows) else tuple(foldable),
    )
    if not builder.nested and builder.firsts is not None:
        # every node went through _main_nodes, which filled the index as it added them: what the
        # cached property would make in a second loop over the 26k nodes (its first readers are
        # validity and the pre-passes)
        facts.__dict__["main_nodes_by_op"] = builder.by_op
    return facts


def _opsets(model: Any) -> dict[str, int]:
    """The opset of each domain the model imports (the default domain's: 1 before IR 3, else 0 if not imported)."""
    opsets: dict[str, int] = {}
    for imp in model.opset_import:
        opsets[imp.domain or DEFAULT_DOMAIN] = int(imp.version)
    if DEFAULT_DOMAIN not in opsets:
        opsets[DEFAULT_DOMAIN] = 1 if model.ir_version < 3 else 0
    return opsets


class NodesAhead:
    """The main-graph nodes of the bytes the isolated child runs shape inference on, read by
    ``nodes_ahead`` while it runs: ``rows`` and ``names`` (``protobuf.nodes_serialized``), and
    their NodeFacts, producers and consumers as ``_Builder._main_nodes`` makes them (``builder``,
    None when that failed), the Constant outputs left for after folding (``deferred``)."""

    __slots__ = ("rows", "names", "opsets", "builder", "deferred")

    def __init__(self, rows: list[tuple[Any, ...]], names: list[str]) -> None:
        self.rows, self.names = rows, names
        self.opsets: dict[str, int] = {}
        self.builder: Optional[_Builder] = None
        self.deferred: list[tuple[str, Any]] = []


def nodes_ahead(serialized: bytes) -> Optional[NodesAhead]:
    """The main-graph nodes of ``serialized`` (a model's bytes, without control flow) and their
    NodeFacts, for ``facts_from_model(..., inferred=True, nodes=...)`` of what shape inference
    returns for those bytes; None when they cannot be read here (the facts then read the nodes of
    the inferred model, and say what is wrong with it).

    ``check._isolated_facts`` asks this while the isolated child infers (~0.13 s of wall time on
    the 26k-node encoder, which this process spent waiting): the pass adds value_infos and the
    outputs' types and leaves the main graph's nodes as they are, so the nodes' rows (~40 ms) and
    facts (~50 ms) do not wait for its result. What a NodeFact holds depends on the node, the
    opsets, the schemas and whether the bytes may hold the exporter's metadata (asked again of the
    inferred bytes: the facts use these NodeFacts only with the same answer); a Constant's output
    also depends on folding, which reads the inferred shapes: those TensorInfos are made after."""
    from .protobuf import nodes_serialized

    read = nodes_serialized(serialized)
    if read is None:
        return None
    rows, names, model = read
    ahead = NodesAhead(rows, names)
    try:
        import onnx

        opsets = _opsets(model)
        builder = _Builder(opsets, onnx)
        builder.shared_attributes = True
        builder.names = names
        builder.metadata = METADATA_PREFIX in serialized
        deferred: list[tuple[str, Any]] = []
        builder._main_nodes(rows, deferred)
    except Exception:  # noqa: BLE001 - the walk after the child's result makes them, and fails as it fails
        return ahead
    if builder.nested or builder.firsts is None:  # a node went through _node (cannot be: no graph attribute)
        return ahead
    ahead.opsets, ahead.builder, ahead.deferred = opsets, builder, deferred
    return ahead


_SHAPE_FROM_VALUES, _SHAPE_FROM_DATA = SHAPE_FROM_VALUES, SHAPE_FROM_DATA


def _value_infos_serialized(value_infos: Sequence[Any], onnx: Any) -> list[tuple[str, bytes, Any]]:
    """(name, serialized TypeProto, ValueInfoProto) of value_infos whose ``type`` is its bytes
    (``protobuf.parse_types_serialized``). The ValueInfoProto, which the readers of these rows
    ask only for its type (to decode each distinct type once, or a Shape node's input shape),
    is one per distinct type, holding it and no name."""
    standing: dict[bytes, Any] = {}
    rows = []
    for vi in value_infos:
        key = vi.type
        stand_in = standing.get(key)
        if stand_in is None:
            stand_in = standing[key] = onnx.ValueInfoProto(type=onnx.TypeProto.FromString(key))
        rows.append((vi.name, key, stand_in))
    return rows


def _mark_dynamic(nodes: Sequence[NodeFact], tensors: dict[str, TensorInfo], inputs: Sequence[str],
                  produced: Optional[Iterable[str]] = None) -> frozenset[str]:
    """Tell dynamic dims from dims the checker could not work out: an unknown dim of a tensor whose
    shape depends on a graph input with dynamic dims, or on run-time values (NonZero's output, a
    Reshape to a shape computed from the data), becomes DYNAMIC_DIM; the other unknown dims stay
    None. Values are run-time when they come from a graph input (not from its shape) and were not
    folded. Tensors inside If/Loop/Scan bodies run per branch or iteration: their unknown dims are
    dynamic. Returns the names of dynamic tensors of unknown rank (GraphFacts.dynamic_rank).
    ``produced``: every output the nodes name but "" (GraphFacts.producer's keys), when every node
    is in the main graph (the builder's ``nested`` is False)."""
    runtime = set(inputs)  # tensors whose values are known only at run time
    varying = {n for n in inputs if (t := tensors.get(n)) is not None and not t.static}  # shapes that vary
    if not varying and (_every_output_static(nodes, tensors) if produced is None
                        else _all_static(produced, tensors)):
        return frozenset()  # nothing can vary (see _every_output_static): the walk below would change nothing
    for node in nodes:
        outs = node.outputs
        if node.graph:
            for o in outs:
                _as_dynamic(tensors, o)
                varying.add(o)
            continue
        ins = node.inputs
        op = node.op_type
        # any(i in runtime for i in ins) as a set operation: no generator per node
        if node.domain != DEFAULT_DOMAIN:
            value_dep = shape_dep = not runtime.isdisjoint(ins)
        elif op in ("Shape", "Size"):
            value_dep, shape_dep = bool(ins) and ins[0] in varying, False
        else:
            value_dep = not runtime.isdisjoint(ins)
            shape_dep = op in _SHAPE_FROM_DATA or (value_dep and op in _SHAPE_FROM_VALUES and any(
                ins[k] in runtime for k in _SHAPE_FROM_VALUES[op] if k < len(ins)))
        shape_dep = shape_dep or not varying.isdisjoint(ins)
        if not (value_dep or shape_dep):
            continue
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


def _every_output_static(nodes: Sequence[NodeFact], tensors: Mapping[str, TensorInfo]) -> bool:
    """Whether every node is in the main graph and every output it names has a static TensorInfo.

    Then, with no graph input of varying shape, ``_mark_dynamic`` marks nothing: a tensor becomes
    varying only as the output of a node inside a body, or of a node whose output is not static;
    the run-time values it tracks matter only through those. Asking this is one lookup per
    output, against the walk's set operations per node (a model whose data-propagating
    inference left shapes unknown that ``propagate.refine`` then found: every layer of
    ``encoder_26k``)."""
    get = tensors.get
    for node in nodes:
        if node.graph:
            return False
        for o in node.outputs:
            if o and ((t := get(o)) is None or not t.static):
                return False
    return True


def _all_static(names: Iterable[str], tensors: Mapping[str, TensorInfo]) -> bool:
    """``_every_output_static`` of main-graph nodes given the names of their outputs (``produced``):
    one pass over the names in C, not a loop over the nodes and their outputs."""
    try:
        return all(map(_STATIC, map(tensors.__getitem__, names)))
    except KeyError:  # an output no TensorInfo describes
        return False


_STATIC = attrgetter("static")
_FIRST, _SECOND, _THIRD = itemgetter(0), itemgetter(1), itemgetter(2)
_NAME = attrgetter("name")


def _as_dynamic(tensors: dict[str, TensorInfo], name: str) -> None:
    t = tensors.get(name)
    if t is not None and t.shape is not None and None in t.shape:
        tensors[name] = tensor_info(name, t.dtype, tuple(DYNAMIC_DIM if d is None else d for d in t.shape), t.const,
                                    t.value, False)


def skips_inference(model: Any, attributes: Optional[list[tuple[Any, ...]]] = None) -> bool:
    """Whether the facts of ``model`` will skip ONNX shape inference (``_already_inferred``: the file
    gives every node output a dtype and a static shape, as the dynamo exporter writes them), asked
    before the facts are built (the isolated child, ``check._native_steps``, runs the pass only when
    the facts would use it). A file without value_info is answered at once."""
    if not model.graph.value_info:  # what _already_inferred answers first, without reading the nodes
        return False
    return _already_inferred(model.graph, _read_nodes(model.graph, attributes), {}, None)


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
        if op_type in CONTROL_FLOW and domain in ("", DEFAULT_DOMAIN):
            return False
        for o in outputs:
            if o and o not in static:
                return False
    return True


def infer_serialized(serialized: bytes, data_prop: bool = True) -> bytes:
    """What :func:`_infer`'s pass returns for ``serialized``, as bytes (exceptions as they come).
    ``data_prop=False``: the pass without ONNX's data propagation, for a model where
    :func:`propagation_may_be_moot` holds (its facts are then confirmed, ``check._isolated_facts``).

    The bytes come from onnx's C++ pass itself (the function ``onnx.shape_inference.infer_shapes``
    calls): that wrapper parses them into a ModelProto, which would only be serialised again here
    (~9 ms for the 26k-node encoder, in the isolated child, ``check._native_steps``); the parent
    parses them once, as the wrapper would. Where onnx's extension module is laid out otherwise,
    the wrapper's result is serialised as before."""
    try:
        from onnx.onnx_cpp2py_export import shape_inference as c_pass
    except ImportError:  # pragma: no cover - onnx >= 1.18 has it
        from onnx import shape_inference

        return shape_inference.infer_shapes(serialized, check_type=False, strict_mode=False,
                                            data_prop=data_prop).SerializeToString()
    return c_pass.infer_shapes(serialized, False, False, data_prop)  # check_type, strict_mode: _infer's


# Bytes whose absence from a serialized model shows it holds no node of these op types (a
# NodeProto's op_type is field 4, stored as tag 0x22, its length, then the name verbatim): the ops
# whose output shapes follow from the values of their data (ops.SHAPE_FROM_DATA) and the control
# flow (ops.CONTROL_FLOW), whose bodies get the values data propagation derived. They are the only
# ops of the default ONNX domain with graph attributes. A hit inside other bytes (a name, a small
# constant) only keeps data propagation on. One pattern: a search per op took 30 ms for the 3.7 MB
# of the 26k-node encoder, the alternation 3 ms.
_PROPAGATION_MARKS = re.compile(b"\\x22(?:" + b"|".join(
    re.escape(bytes([len(op)]) + op.encode()) for op in sorted(SHAPE_FROM_DATA | CONTROL_FLOW)) + b")")


def propagation_may_be_moot(model: Any, serialized: bytes) -> bool:
    """Whether shape inference without data propagation may give ``model`` the same facts, asked in
    the isolated child (``check._native_steps``) before its pass: every input of the main graph has
    a static shape, the model defines no functions, imports only the default ONNX domain, and its
    bytes (``serialized``: what the pass reads) hold no control flow (nor so any graph attribute
    the pass reads) and no op whose output shape depends on its data.

    Data propagation (onnx's ``data_prop``) computes the values of shape arithmetic (Shape, Gather,
    Concat ...) and hands them to Reshape, Expand, ConstantOfShape and Resize; with these
    conditions, every value it could derive is made from static shapes and constants only, which
    ``propagate.refine`` evaluates as well, node by node. Not quite every model: a shape computed
    from the values of the data (a Range whose end is a ReduceMax of an input, say) leaves a dim
    unknown that data propagation carries on symbolically and refine cannot. So this answer is
    only half of the test; the other half is the facts built without it, which must hold a static
    shape for every tensor (``check._isolated_facts``; otherwise the pass runs again with it). It
    costs a look at the graph's inputs and one search of the bytes (3 ms), against 25-55 ms of data
    propagation in the 26k-node encoder's pass."""
    if len(model.functions):
        return False
    for imp in model.opset_import:
        if imp.domain not in ("", DEFAULT_DOMAIN):
            return False
    for vi in model.graph.input:
        t = vi.type
        if t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
            return False
        for d in t.tensor_type.shape.dim:
            if d.WhichOneof("value") != "dim_value" or d.dim_value < 0:
                return False
    return _PROPAGATION_MARKS.search(serialized) is None


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


_NOT_A_TENSOR = (None, None, False, False)
_ELEM_TYPES = {name: code for code, name in _DTYPE_NAMES.items()}


def _elem_and_dims(types: Mapping[bytes, Any]) -> dict[bytes, tuple[int, Optional[tuple[Any, ...]]]]:
    """``propagate.refine``'s (elem type, dims) of each serialized TypeProto the walk decoded
    (``_Builder._decode_type``: the same fields, read once), but those of no known dtype (not a
    tensor, or an elem type the facts do not name), which refine decodes itself. A dim
    ``_GENERATED_DIM`` keeps is unknown to refine if it starts with "unk__" (refine's rule)."""
    by_type: dict[Any, tuple[int, Optional[tuple[Any, ...]]]] = {}  # a few dozen distinct types
    out = {}
    for raw, typ in types.items():
        if typ[0] is None:
            continue
        made = by_type.get(typ)
        if made is None:
            shape = typ[1]
            made = by_type[typ] = (_ELEM_TYPES[typ[0]], None if shape is None else tuple(
                None if type(d) is str and d.startswith("unk__") else d for d in shape))
        out[raw] = made
    return out


_GRAPH_TYPES = frozenset({5, 10})  # AttributeProto.GRAPH, GRAPHS


def _attribute_key(attributes: Sequence[Any]) -> Optional[tuple[Any, ...]]:
    """What a node's attributes are keyed by for sharing their decoding (``_Builder``'s attribute
    cache and node templates): each attribute's bytes, but a tensor attribute's name alone (it is
    decoded as "<tensor>" whatever it holds: Constant nodes are not keyed by their values); None when
    one is a graph attribute (a body is never shared)."""
    parts = []
    for a in attributes:
        kind = a.type
        if kind == 4:  # AttributeProto.TENSOR
            parts.append(a.name)
        elif kind in _GRAPH_TYPES:
            return None
        else:
            parts.append(a.SerializeToString())
    return tuple(parts)


class _Builder:
    def __init__(self, opsets: Mapping[str, int], onnx: Any, small: Mapping[str, Any] = {},
                 folded: Mapping[str, Any] = {}, types: Optional[dict[bytes, Any]] = None) -> None:
        self.opsets = opsets
        self.onnx = onnx
        self.small = small  # arrays of the main graph's small initializers, already read
        self.folded = folded  # arrays of main-graph node outputs constant folding computed (Constant nodes)
        self.static: set[str] = set()  # main-graph value_info/outputs with a dtype and static shape
        self.nodes: list[NodeFact] = []
        # GraphFacts.producer and .consumers, filled as each node is added (in node order, as
        # GraphFacts.__post_init__ would make them): the loop that makes the nodes has their names
        self.producer: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        self.tensors: dict[str, TensorInfo] = {}
        self.initializers: set[str] = set()
        # whether a node may hold the exporter's metadata (a source location); False when the
        # model's bytes are known to hold neither key ``location._source`` reads
        self.metadata = True
        self.nested = False  # whether a node inside an If/Loop/Scan body was read (any(n.graph for n in nodes))
        # whether main-graph nodes with equal attributes share one tuple of them (_read_nodes_serialized)
        self.shared_attributes = False
        # the main graph's nodes' names, in order, if the caller read them with the rows (``_main_nodes``)
        self.names: Optional[list[str]] = None
        self._schema_cache: dict[tuple[str, str, int], Optional[dict[str, Any]]] = {}
        self._types: dict[bytes, Any] = {} if types is None else types
        # the NodeFact fields shared by the main graph's nodes of one (op, domain, attribute bytes)
        # (and input count, whether one is omitted, output count: validity's checker gives the same
        # answer for all the nodes of one such key, so it checks the first of each, listed in ``firsts``)
        # (as a tuple: op_type, domain, attrs, explicit_attrs, defaults, graph, opset, subgraphs, key)
        # each paired with the list in ``by_op`` its nodes go to
        self._templates: dict[tuple[Any, ...], tuple[tuple[Any, ...], Any]] = {}
        # GraphFacts.main_nodes_by_op, filled as _main_nodes adds each node (an op's list is made at
        # its first node, which is the first of a template): valid only while ``firsts`` is a list
        self.by_op: dict[str, list[NodeFact]] = {}
        self.read_early = False  # whether a main-graph node reads a tensor a later node computes (_main_nodes)
        self.firsts: Optional[list[int]] = []  # the index of the first main-graph node of each template, in order
        self._attr_cache: dict[tuple[Any, ...], tuple[dict[str, Any], frozenset[str], Mapping[str, Any]]] = {}
        self._array_parts: dict[int, tuple[Any, Optional[str], tuple[int, ...], tuple[Any, ...]]] = {}  # folded_values
        # (name, serialized TypeProto, ValueInfoProto) of the main graph's value_infos and outputs,
        # in order, when the walk serialized them (for propagate.refine)
        self.raw_types: Optional[list[tuple[str, bytes, Any]]] = None
        # the main graph's value_infos and outputs whose type is not static (or no tensor's), in
        # order, repeats kept: with the names no value_info types, the values ``propagate.refine``
        # may type better (every other type is static, and a static type is never made better)
        self.open_types: list[str] = []

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
        # TensorInfo.static known from the decoded type
        self.tensors[name] = tensor_info(name, typ[0], typ[1], False, None, typ[3])

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
        # static: dims are ints
        self.tensors[name] = tensor_info(name, _DTYPE_NAMES.get(tensor.data_type), dims, True, value, True)

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

    def folded_values(self, folded: Mapping[str, Any]) -> None:
        """Node outputs the compiler computes at build time: their values are known. An array is
        often the value of many outputs (folding makes equal values one array): read once."""
        array_parts, tensors, new = self._array_parts, self.tensors, object.__new__
        draft, made = TensorInfoDraft, TensorInfo
        # a TensorInfo's fields but its name (dtype, shape, const, value, static), once per (array,
        # dtype the output had): ``folded`` holds the arrays alive through the loop, so their ids key it
        fields_of: dict[tuple[int, Optional[str]], tuple[Any, ...]] = {}
        for name, arr in folded.items():
            old = tensors.get(name)
            dtype = old.dtype if old else None
            fields = fields_of.get((id(arr), dtype))
            if fields is None:
                parts = array_parts.get(id(arr))
                if parts is None or parts[0] is not arr:
                    parts = array_parts[id(arr)] = (arr, _np_dtype_name(arr), tuple(map(int, arr.shape)),
                                                    tuple(arr.reshape(-1).tolist()))
                fields = fields_of[id(arr), dtype] = (dtype or parts[1], parts[2], False, parts[3], True)
            info = new(draft)  # facts.tensor_info inlined
            info.name = name
            info.dtype, info.shape, info.const, info.value, info.static = fields
            info.__class__ = made
            tensors[name] = info

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
                   value_infos: Optional[Iterable[tuple[str, Any]]] = None,
                   raw: Optional[list[tuple[str, bytes, Any]]] = None,
                   ahead: Optional[tuple["_Builder", list[tuple[str, Any]]]] = None) -> None:
        """The facts of a graph's initializers, inputs, values and nodes. ``rows``: its nodes as
        ``_read_nodes`` gives them; ``value_infos``: (name, decoded type) of its value_infos and
        outputs, in order, as ``_already_inferred`` decoded them; else ``raw``: (name, serialized
        TypeProto, ValueInfoProto) of each, if the caller read them. ``ahead``: the main graph's
        NodeFacts already made from ``rows`` (``nodes_ahead``) and its deferred Constant outputs."""
        for init in graph.initializer:
            self.initializers.add(init.name)
            self._const(init.name, init, prefix)
        for vi in graph.input:
            if vi.name not in self.initializers:
                self._value_info(vi)
        static = self.static if prefix == "" else None
        if value_infos is None:  # each type decoded once per distinct TypeProto (self._decode, inlined)
            types, decode = self._types, self._decode_type
            if raw is None:
                raw = [(vi.name, vi.type.SerializeToString(), vi) for vi in graph.value_info[:] + graph.output[:]]
            if prefix == "":
                self.raw_types = raw  # for propagate.refine, which decodes the same bytes its own way
            # each distinct type decoded first (a few hundred for 26,000 values); then the (name, type)
            # pairs are made in C as the loops below read them, not kept in a list of their own
            for key, vi in dict(zip(map(_SECOND, raw), map(_THIRD, raw))).items():
                if key not in types:
                    types[key] = decode(vi.type)
            value_infos = zip(map(_FIRST, raw), map(types.__getitem__, map(_SECOND, raw)))
        initializers, typed = self.initializers, self._typed
        if static is not None:
            # the main graph: its tensors hold the initializers (skipped here) and the graph inputs
            # (never constants) so far, so _typed's check for a constant is not needed
            tensors, new, draft, made = self.tensors, object.__new__, TensorInfoDraft, TensorInfo
            opened = self.open_types.append
            for name, typ in value_infos:
                if typ[2]:
                    static.add(name)
                else:
                    opened(name)
                if name in initializers:
                    continue
                if typ is _NOT_A_TENSOR:
                    tensors.setdefault(name, TensorInfo(name, None, None))
                    continue
                info = new(draft)  # as _typed makes it (facts.tensor_info inlined)
                info.name, info.dtype, info.shape, info.const, info.value = name, typ[0], typ[1], False, None
                info.static = typ[3]
                info.__class__ = made
                tensors[name] = info
        else:
            for name, typ in value_infos:
                if name not in initializers:
                    typed(name, typ, static)
        rows = rows if rows is not None else _read_nodes(graph)
        if prefix == "":
            if ahead is not None:
                self._adopt(*ahead)
            else:
                self._main_nodes(rows)
            return
        for node, op_type, domain, inputs, outputs, attributes in rows:
            self._node(node, op_type, domain or DEFAULT_DOMAIN, inputs, outputs, prefix, attributes)

    def _main_nodes(self, rows: list[tuple[Any, ...]], deferred: Optional[list[tuple[str, Any]]] = None) -> None:
        """The NodeFacts of the main graph's nodes: what ``_node`` makes, with the fields that
        depend only on a node's signature (op, domain, attribute bytes: the opset, the attributes
        with their defaults, the key) made once per signature and copied into each node's fact,
        which adds only its own (index, name, inputs, outputs, source). A node with a body goes
        through ``_node`` (its body's nodes follow it). The Constant nodes' outputs get their
        TensorInfos from ``_constant_outputs``, at the end of the loop and before a node with a body
        (whose walk adds tensors), so the tensors come out in node order; ``deferred`` given: it gets
        those (output, attributes) instead, for later (``nodes_ahead``: before folding, which the
        TensorInfos depend on, has run)."""
        nodes, opsets, templates, attr_cache, firsts = self.nodes, self.opsets, self._templates, self._attr_cache, self.firsts
        append, new, source, metadata = nodes.append, object.__new__, _source, self.metadata
        draft, made_fact = NodeFactDraft, NodeFact
        producer, consumers, by_op = self.producer, self.consumers, self.by_op
        # without the exporter's metadata a node's source is its scope name's module: the location
        # of a name's part before its last "/" (``location._source``), looked up once per part
        modules: dict[str, Optional[SourceLocation]] = {}
        # the key parts of an attributes tuple shared by nodes (shared_attributes), by its id: the
        # rows hold each tuple alive through the loop
        shared: Optional[dict[int, tuple[Any, ...]]] = {} if self.shared_attributes else None
        own = deferred is None  # the Constant outputs are this loop's to type (else the caller's)
        constant_outputs: list[tuple[str, Any]] = [] if deferred is None else deferred
        # each node's name as read with its row, else read here
        names = self.names if self.names is not None and len(self.names) == len(rows) else map(_NAME, map(_FIRST, rows))
        for (node, op_type, domain, inputs, outputs, attributes), given_name in zip(rows, names):
            domain = domain or DEFAULT_DOMAIN
            known_parts = shared.get(id(attributes)) if shared is not None else None
            if known_parts is None:
                known_parts = _attribute_key(attributes)
                if known_parts is None:  # a graph attribute
                    self.firsts = None  # a node of no template: first_of_signatures unknown
                    if own and constant_outputs:  # typed before the body's tensors, as they come
                        self._constant_outputs(constant_outputs)
                        constant_outputs.clear()
                    self._node(node, op_type, domain, inputs, outputs, "", attributes)
                    continue
                if shared is not None:
                    shared[id(attributes)] = known_parts
            signature = (op_type, domain, known_parts, len(inputs), "" in inputs, len(outputs))
            template = templates.get(signature)
            if template is None:
                firsts.append(len(nodes))
                opset = opsets.get(domain, 0)
                key = (op_type, domain, opset, signature[2])
                known = attr_cache.get(key)
                if known is None:
                    known = attr_cache[key] = self._attributes(op_type, attributes, domain, opset, [])
                attrs, explicit, defaults = known
                # every field but the node's own (set below), and the key
                ops = by_op.get(op_type)
                if ops is None:
                    ops = by_op[op_type] = []
                template = templates[signature] = ((op_type, domain, attrs, explicit, defaults, "", opset, (),
                                                    f"{domain}:{op_type}"), ops.append)
            fields, to_op = template
            index = len(nodes)
            name = given_name or f"{op_type}_{index}"
            if op_type == "Constant" and domain == DEFAULT_DOMAIN and outputs:
                constant_outputs.append((outputs[0], attributes))
            if not metadata and name[:1] != "/" and type(name) is str:
                # what location._source answers for a name that is no scope, without the exporter's
                # metadata: nothing (its node's message, long out of the caches, is not read). A
                # name protobuf could not decode (bytes) goes there as before, to fail as it did
                where = None
            elif metadata or name[-1:] == "/":
                where = source(node, name)
            else:  # location._source's rule for a scope name (/layer1/conv1/Conv -> layer1.conv1)
                head = name[:name.rfind("/")]
                where = modules.get(head)
                if where is None:
                    where = modules[head] = _module_location(head.lstrip("/").replace("/", "."))
            # the NodeFact filled as a draft (plain slot stores, no frozen __init__), then made the NodeFact
            # it lays out (facts.NodeFactDraft)
            fact = new(draft)
            (fact.op_type, fact.domain, fact.attrs, fact.explicit_attrs, fact.defaults, fact.graph, fact.opset,
             fact.subgraphs, fact.key) = fields
            fact.index, fact.name, fact.inputs, fact.outputs, fact.source = index, name, inputs, outputs, where
            fact.__class__ = made_fact
            append(fact)
            to_op(fact)
            for o in outputs:  # facts.link_node inlined (one call a node less)
                if o:
                    producer[o] = index
                    if o in consumers:  # an earlier node reads it: the nodes are not in topological order
                        self.read_early = True
            for i in inputs:
                if i:
                    readers = consumers.get(i)
                    if readers is None:
                        consumers[i] = [index]
                    else:
                        readers.append(index)
        if own:
            self._constant_outputs(constant_outputs)

    def _constant_outputs(self, deferred: list[tuple[str, Any]]) -> None:
        """The TensorInfos of the Constant outputs ``_main_nodes`` gathered, (output, attributes) in
        node order. The rows hold the attributes tuples alive, so their ids key them."""
        tensors, folded, new, info_draft, made_info = self.tensors, self.folded, object.__new__, TensorInfoDraft, TensorInfo
        # a Constant output's TensorInfo fields but its name, by (id of the attributes tuple, whether
        # folding computed the output): what ``_constant_node`` makes depends on nothing else, and the
        # Constant nodes of a stack of layers repeat a few attribute tuples (15 for the 6,303 Constant
        # nodes of ``encoder_26k``), each decoded once instead of once per node
        # (dtype, shape, const, value, static)
        constants: dict[tuple[int, bool], tuple[Any, ...]] = {}
        for out, attributes in deferred:
            memo = (id(attributes), out in folded)
            made = constants.get(memo)
            if made is None:
                self._constant_node(out, attributes, "")
                t = tensors[out]
                constants[memo] = (t.dtype, t.shape, t.const, t.value, t.static)
            else:  # facts.tensor_info inlined (as _constant_node makes it)
                info = new(info_draft)
                info.name = out
                info.dtype, info.shape, info.const, info.value, info.static = made
                info.__class__ = made_info
                tensors[out] = info

    def _adopt(self, ahead: "_Builder", deferred: list[tuple[str, Any]]) -> None:
        """The main graph's nodes as ``ahead`` made them (``nodes_ahead``), then their Constant outputs."""
        self.nodes, self.producer, self.consumers, self.by_op = ahead.nodes, ahead.producer, ahead.consumers, ahead.by_op
        self.firsts, self.read_early, self._templates = ahead.firsts, ahead.read_early, ahead._templates
        self._attr_cache, self._schema_cache = ahead._attr_cache, ahead._schema_cache
        self._constant_outputs(deferred)

    def _node(self, node: Any, op_type: str, domain: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
              prefix: str, attributes: tuple[Any, ...]) -> None:
        opset = self.opsets.get(domain, 0)
        bodies: list[tuple[str, Any]] = []
        # nodes of one op with the same attributes (every layer of a model) share the decoding
        parts = _attribute_key(attributes)
        if parts is not None:
            key = (op_type, domain, opset, parts)
            known = self._attr_cache.get(key)
            if known is None:
                known = self._attr_cache[key] = self._attributes(op_type, attributes, domain, opset, bodies)
            attrs, explicit, defaults = known  # shared by those nodes: the facts are never mutated
        else:
            attrs, explicit, defaults = self._attributes(op_type, attributes, domain, opset, bodies)
        index = len(self.nodes)
        name = node.name or f"{op_type}_{index}"
        if prefix:
            self.nested = True
        if op_type == "Constant" and domain == DEFAULT_DOMAIN and outputs:
            self._constant_node(outputs[0], attributes, prefix)
        sub_names = tuple(f"{name}/{label}" for label, _ in bodies) if bodies else ()
        fact = NodeFact(index, name, op_type, domain, inputs, outputs, attrs, explicit, defaults, prefix,
                        _source(node, name), opset, sub_names)
        self.nodes.append(fact)
        link_node(self.producer, self.consumers, index, inputs, outputs)
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
            if a.name == "value" and a.type == 4:  # AttributeProto.TENSOR
                if prefix == "" and out in self.folded:
                    # folding decoded this tensor already: folded_values() gives the output its shape and
                    # value from that array once the walk is done; until then it is a constant of this dtype
                    t = a.t
                    self.tensors[out] = tensor_info(out, _DTYPE_NAMES.get(t.data_type), tuple(t.dims[:]), True, None,
                                                    True)  # dims: ints
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


_NP_DTYPE_NAMES = frozenset({"float32", "float64", "int64", "int32", "bool", "float16", "int8", "uint8"})


def _np_dtype_name(arr: Any) -> Optional[str]:
    name = str(arr.dtype)
    return name if name in _NP_DTYPE_NAMES else None
