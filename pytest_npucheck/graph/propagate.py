"""Static shapes and values the compilers work out at build time, propagated node by node.

ONNX shape inference, even with data propagation, stops where shape arithmetic goes through an op
it does not evaluate: TorchScript traces ``x.shape`` arithmetic into the graph (Shape -> Gather ->
Div/Mod/Where -> Concat -> Reshape, or the pads of a ``F.pad`` computed from ``math.ceil`` of a
length), and an unknown dim there makes every later shape unknown, block after block. With static
graph inputs the compilers fold all of it. ``refine`` walks the main graph once, in graph order
(ONNX nodes are stored topologically), starting from what the first inference and the folding of
small constants found; a node one of whose inputs gained a value or a static shape in this walk is

* evaluated, when every input has a known value (its outputs get values and static shapes), else
* inferred again on its own (``onnx.shape_inference.infer_node_outputs``) with its inputs' shapes
  and known values, so a Reshape whose shape input was folded gets a static output.

Only nodes downstream of new knowledge are visited twice; a graph the first inference typed fully
never gets here. Values are kept up to ``graph.SMALL_CONSTANT`` elements (shape and index tensors).
No weights are read.
"""

from __future__ import annotations

from itertools import compress, filterfalse, islice
from operator import itemgetter
from typing import Any, Iterable, Iterator, Mapping, Optional, Sequence

from .facts import SMALL_CONSTANT
from .fold import _evaluate
from .ops import NOT_FOLDED
from .schema import op_schema

# ops whose output can be far larger than their inputs: evaluated only when the output is small
_GROWING = frozenset({"ConstantOfShape", "Expand", "Tile", "Range"})


def predicted_numel(op: str, args: list[Any]) -> Optional[int]:
    """Elements of the output of ``op`` on the arrays ``args`` when it can grow (``_GROWING``),
    computed without evaluating it; None for other ops or inputs it cannot read."""
    import numpy as np

    try:
        if op == "ConstantOfShape":
            return int(np.prod([int(d) for d in args[0].reshape(-1)])) if args else 1
        if op == "Expand":
            return int(np.prod(np.broadcast_shapes(args[0].shape, tuple(int(d) for d in args[1].reshape(-1)))))
        if op == "Tile":
            return int(np.prod([int(a) * int(r) for a, r in zip(args[0].shape, args[1].reshape(-1))]))
        if op == "Range":
            start, limit, delta = (float(a.reshape(-1)[0]) for a in args[:3])
            return max(int(np.ceil((limit - start) / delta)), 0) if delta else None
    except (ValueError, TypeError, IndexError, OverflowError):
        return None
    return None


Type = tuple[int, Optional[tuple[Any, ...]]]  # (TensorProto elem type or 0, dims: int, str or None; None: unknown rank)
_NOTHING: Type = (0, None)


class _Types:
    """Decoded types by their serialized TypeProto, and back: a graph has few distinct types."""

    def __init__(self) -> None:
        self.decoded: dict[bytes, Type] = {}
        self.encoded: dict[Type, bytes] = {}
        # one object per distinct decoded type: the inference names each unknown dim apart
        # ("unk__12"), so the 300 layers of a stack have ~900 distinct TypeProtos but ~30 distinct
        # types, and ``refine`` merges the type of a folded value once per (array, type object)
        self.interned: dict[Type, Type] = {}
        self.static: set[int] = set()  # the ids of the interned types that are static (_static)

    def decode(self, raw: bytes) -> Type:
        typ = self.decoded.get(raw)
        if typ is None:
            from onnx import TypeProto

            typ = self.decoded[raw] = self.intern(_decode(TypeProto.FromString(raw)))
        return typ

    def intern(self, typ: Type) -> Type:
        one = self.interned.setdefault(typ, typ)
        if one is typ and _static(typ):
            self.static.add(id(typ))
        return one

    def encode(self, typ: Type) -> bytes:
        raw = self.encoded.get(typ)
        if raw is None:
            from onnx import helper

            elem, dims = typ
            raw = self.encoded[typ] = helper.make_tensor_type_proto(elem, None if dims is None else list(dims)).SerializeToString()
        return raw


def _decode(tp: Any) -> Type:
    if not tp.HasField("tensor_type"):
        return _NOTHING
    tt = tp.tensor_type
    if not tt.HasField("shape"):
        return tt.elem_type, None
    dims: list[Any] = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and not d.dim_param.startswith("unk__"):
            dims.append(d.dim_param)
        else:
            dims.append(None)
    return tt.elem_type, tuple(dims)


_is_int = int.__instancecheck__  # dims are int, str or None (never bool): type(d) is int, in C


def _static(typ: Optional[Type]) -> bool:
    return typ is not None and bool(typ[0]) and typ[1] is not None and all(map(_is_int, typ[1]))


def _merge(new: Optional[Type], old: Optional[Type]) -> Optional[Type]:
    """``old`` with what ``new`` adds (a dtype, a rank, static dims where ``old`` had unknown or
    symbolic ones), or None when ``new`` adds nothing. Dims ``old`` knows are never replaced."""
    if new is None or new is _NOTHING:
        return None
    if old is None or old is _NOTHING:
        return new
    elem = old[0] or new[0]
    nd, od = new[1], old[1]
    if od is None:
        dims = nd
    elif nd is None or len(nd) != len(od):  # nothing on the dims, or contradicting ranks: keep the first
        dims = od
    else:
        dims = tuple(o if type(o) is int or type(n) is not int else n for n, o in zip(nd, od))
    merged = (elem, dims)
    return None if merged == old else merged


# ops whose output 0 has input 0's shape and dtype, and broadcasting ops (output dtype: input 0's, or bool)
_SAME = frozenset({"Relu", "Sigmoid", "Exp", "Tanh", "Neg", "Sqrt", "Softplus", "Erf", "Log", "Abs", "Identity",
                   "Softmax", "LogSoftmax", "Reciprocal", "Floor", "Ceil", "Sin", "Cos", "HardSigmoid", "HardSwish",
                   "LeakyRelu", "Elu", "Selu", "Gelu", "Mish", "Round", "Sign", "Not", "Clip", "LayerNormalization"})
_BROADCAST = frozenset({"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "And", "Or", "Xor"})
_BROADCAST_BOOL = frozenset({"Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})


def quick_type(op: str, attributes: tuple[Any, ...], outputs: tuple[str, ...], inputs: tuple[str, ...],
               types: Mapping[str, Type]) -> Optional[Type]:
    """Output 0's type of the commonest ops when every input is static, without a call into ONNX
    (most nodes after a lost shape are elementwise: the walk re-types each of them); None: ask ONNX.
    ``attributes``, ``outputs``, ``inputs``: the node's, as its row holds them."""
    if not (op in _SAME or op == "Cast" or op in _BROADCAST or op in _BROADCAST_BOOL or op == "Where"):
        return None  # asked first: most nodes the walk infers are shape ops (Reshape, Gather, Transpose)
    args = [types.get(i) for i in inputs if i]
    if not args or not all(_static(a) for a in args):
        return None
    if op in _SAME and len(outputs) == 1:
        return args[0]
    if op == "Cast":
        to = next((a.i for a in attributes if a.name == "to"), 0)
        return (to, args[0][1]) if to else None
    if op in _BROADCAST or op in _BROADCAST_BOOL or op == "Where":
        shapes = [a[1] for a in args]
        rank = max(len(sh) for sh in shapes)
        out = []
        for k in range(rank):
            dims = {sh[k - rank + len(sh)] for sh in shapes if k - rank + len(sh) >= 0} - {1}
            if len(dims) > 1:
                return None  # not broadcastable: ONNX's inference says what it says
            out.append(dims.pop() if dims else 1)
        elem = 9 if op in _BROADCAST_BOOL else (args[1][0] if op == "Where" else args[0][0])
        return elem, tuple(out)
    return None


def _type_of(arr: Any) -> Type:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(arr.dtype), tuple(int(d) for d in arr.shape)


def refine(graph: Any, rows: list[tuple[Any, ...]], opsets: Mapping[str, int], ir_version: int,
           known: dict[str, Any], folded: Mapping[str, Any], everything: bool = False,
           default_domain: str = "ai.onnx", raw_types: Optional[list[tuple[str, bytes, Any]]] = None,
           constant_outputs: Optional[set[str]] = None, decoded: Optional[Mapping[bytes, Type]] = None,
           visit: Optional[tuple[Mapping[str, int], Iterable[str], Iterable[int]]] = None,
           ) -> tuple[dict[str, Type], dict[str, Any]]:
    """((elem type, dims) of every main-graph value this walk typed better, values it folded).

    ``graph``: the inferred GraphProto; ``rows``: its nodes as ``protobuf._read_nodes`` gives them;
    ``known``: {name: array} of small initializers and the values folded so far (extended in place);
    ``folded``: the node outputs folded before this walk (their values are news to ONNX inference);
    ``everything``: visit every node (the first inference failed as a whole and typed nothing).
    ``raw_types``: (name, serialized TypeProto, ValueInfoProto) of the graph's value_infos and
    outputs, in order, if the caller serialized them already (``build._Builder.raw_types``).
    ``constant_outputs``: the outputs of every Constant node in ``rows``, if the caller has them
    (``fold._fold_small_constants`` collects them). ``decoded``: the types of serialized
    TypeProtos of ``raw_types`` the caller decoded already (``build._elem_and_dims``).
    ``visit``: (producer, open names, positions), given when ``rows`` are in topological order and
    each output name is made by one row, ``producer[name]`` being its position: the walk then visits
    only the rows that may act (see :func:`_rows_to_visit`). ``open names``: every name of
    ``raw_types`` whose type is not static; ``positions``: the rows whose inputs all had a value
    when folding but an output of which did not get one (``fold``'s ``unkept``), and the Shape and
    Size rows.
    """
    import numpy as np
    from onnx import helper, numpy_helper


    codec = _Types()
    types: dict[str, Type] = {}
    decode = codec.decode
    for vi in graph.input[:] if raw_types is not None else graph.input[:] + graph.value_info[:] + graph.output[:]:
        types[vi.name] = decode(vi.type.SerializeToString())
    if raw_types is not None:  # the graph walk serialized each value_info's type already
        known_types, intern = codec.decoded, codec.intern
        for raw, typ in (decoded or {}).items():  # a few hundred distinct types, instead of 26,000 rows
            known_types[raw] = intern(typ)
        try:  # the names typed in C
            types.update(zip(map(itemgetter(0), raw_types), map(known_types.__getitem__, map(itemgetter(1), raw_types))))
        except KeyError:  # a type not decoded yet
            for _name, raw, vi in raw_types:  # each distinct type decoded once
                if raw not in known_types:
                    known_types[raw] = intern(_decode(vi.type))
            types.update(zip(map(itemgetter(0), raw_types), map(known_types.__getitem__, map(itemgetter(1), raw_types))))
    intern = codec.intern  # every type put in ``types`` is interned: the inference memo below keys by their ids
    for init in graph.initializer:
        types[init.name] = intern((init.data_type, tuple(init.dims[:])))
    changed: set[str] = set()
    if everything:
        changed.update(vi.name for vi in graph.input)
        changed.update(init.name for init in graph.initializer)
        changed.update(o for r in rows if not r[3] for o in r[4])  # outputs of nodes without inputs
    better: dict[str, Type] = {}
    # a Constant node's value is known to ONNX's inference already: only values folded from other
    # nodes are news to the nodes that read them (a graph with a dynamic batch folds few of those)
    constants = constant_outputs if constant_outputs is not None else {o for r in rows if r[1] == "Constant" for o in r[4]}
    changed.update(folded.keys() - constants)
    # a static type is never made better (_merge keeps known dims), so only the folded values whose
    # type is not static are merged with the type of their value: every type in ``types`` is one
    # of the codec's interned objects, told apart by id in C (encoder_26k: 2,400 of 12,900 names)
    open_types = {id(typ) for typ in codec.interned if not _static(typ)}
    open_types.add(id(None))  # no type at all
    array_types: dict[int, tuple[Any, Type]] = {}  # folding makes equal values one array: typed once
    # and merged once per (array, type so far): both are shared objects (one interned type per
    # distinct type), kept alive in the memo so that their ids key it
    merges: dict[tuple[int, int], tuple[Any, Optional[Type], Optional[Type]]] = {}
    types_get = types.get
    for name in compress(folded, map(open_types.__contains__, map(id, map(types_get, folded)))):
        arr = folded[name]
        old_type = types_get(name)
        merged = merges.get((id(arr), id(old_type)))
        if merged is None or merged[0] is not arr or merged[1] is not old_type:
            known_type = array_types.get(id(arr))
            if known_type is None or known_type[0] is not arr:
                known_type = array_types[id(arr)] = (arr, _type_of(arr))
            typ = _merge(known_type[1], old_type)
            merged = merges[id(arr), id(old_type)] = (arr, old_type, None if typ is None else codec.intern(typ))
        typ = merged[2]
        if typ is not None:
            types[name] = better[name] = typ
            changed.add(name)
    new_values: dict[str, Any] = {}
    opset_list = [helper.make_opsetid("" if d == default_domain else d, v) for d, v in opsets.items() if v]
    opset_map = {"" if d == default_domain else d: v for d, v in opsets.items() if v}
    data_bytes: dict[str, bytes] = {}
    inferences: dict[tuple[Any, ...], tuple[tuple[Any, ...], Optional[tuple[Optional[bytes], ...]]]] = {}
    changed.discard("")  # an omitted input is never news: any(i and i in changed ...) is then isdisjoint
    isdisjoint = changed.isdisjoint
    static_ids = codec.static
    by_attributes: dict[int, tuple[Any, bool, tuple[bytes, ...]]] = {}
    output_merges: dict[tuple[int, int], Optional[Type]] = {}  # by the ids of interned types
    walked: Iterable[tuple[Any, ...]] = rows
    if visit is not None and not everything:
        producer, open_names, positions = visit
        # the rows with an output whose type may be made better: one typed by no value_info
        # (found in C), by a graph input or initializer, or not static in the value_infos
        names = set(open_names)
        names.update(filterfalse(types.__contains__, producer))
        names.update(vi.name for vi in graph.input)
        names.update(init.name for init in graph.initializer)
        at = {producer.get(name) for name in names}
        at.discard(None)
        at.update(positions)
        walked = _rows_to_visit(rows, sorted(at), known)
    for node, op, domain, inputs, outputs, _attributes in walked:
        if isdisjoint(inputs):  # run for every node: one C call
            continue
        default = domain in ("", default_domain)
        evaluated = False
        foldable = default and op not in NOT_FOLDED
        if foldable:  # not all((not o) or o in known for o in outputs) and all((not i) or i in known ...)
            for o in outputs:
                if o and o not in known:
                    break
            else:
                foldable = False  # every output known already
        if foldable:
            for i in inputs:
                if i and i not in known:
                    foldable = False
                    break
        if foldable:
            args = [known[i] for i in inputs if i]
            size = predicted_numel(op, args) if op in _GROWING else None
            values = _evaluate(node, known, opset_list) if size is None or size <= SMALL_CONSTANT else None
            if values is not None:
                evaluated = True
                for name, value in zip(outputs, values):
                    if not name or value is None:
                        continue
                    value = np.asarray(value)
                    typ = _merge(_type_of(value), types.get(name))
                    if typ is not None:
                        types[name] = better[name] = intern(typ)
                    if value.size <= SMALL_CONSTANT:
                        known[name] = new_values[name] = value
                    changed.add(name)
        if evaluated:
            continue
        if default and op in ("Shape", "Size") and inputs and _static(types.get(inputs[0])):
            dims = types[inputs[0]][1] or ()
            if op == "Size":
                value = np.array(int(np.prod(dims)), dtype=np.int64)
            else:
                attrs = {a.name: a.i for a in _attributes}
                r = len(dims)
                start, end = attrs.get("start", 0), attrs.get("end", r)
                start = min(max(start + r if start < 0 else start, 0), r)
                end = min(max(end + r if end < 0 else end, 0), r)
                value = np.array(dims[start:end], dtype=np.int64)
            if outputs and outputs[0]:
                known[outputs[0]] = new_values[outputs[0]] = value
                types[outputs[0]] = better[outputs[0]] = intern(_type_of(value))
                changed.add(outputs[0])
            continue
        for o in outputs:  # all((not o) or _static(types.get(o)) for o in outputs), by the interned type's id
            if o and id(types_get(o)) not in static_ids:
                break
        else:
            continue  # static already (most nodes visited: an input's value was folded, its shape was known)
        # (whether it has a body, its attributes serialized) once per attributes tuple: the child's
        # model gives the nodes of equal attributes one tuple, which ``rows`` keeps alive
        held = by_attributes.get(id(_attributes))
        if held is None or held[0] is not _attributes:
            held = by_attributes[id(_attributes)] = (_attributes, any(a.type in (5, 10) for a in _attributes),
                                                     tuple([a.SerializeToString() for a in _attributes]))
        if held[1]:
            continue  # a node with a body (GRAPH/GRAPHS attributes)
        quick = quick_type(op, _attributes, outputs, inputs, types) if default and len(outputs) == 1 else None
        if quick is not None:
            typ = _merge(quick, types.get(outputs[0]))
            if typ is not None:
                types[outputs[0]] = better[outputs[0]] = intern(typ)
                changed.add(outputs[0])
            continue
        schema = op_schema(op, opsets.get(domain or default_domain, 0), "" if default else domain)
        if schema is None:  # an op without a schema (a custom domain): nothing to infer
            continue
        # what ONNX's inference of a node sees, but for names: its op, attributes, and per input
        # position the type and the value (both by identity: types are interned, and folding makes
        # equal values one array); every layer of a stack asks the same question, answered once
        values = tuple(known.get(i) if i else None for i in inputs)
        signature = (op, domain, held[2],
                     tuple([id(types_get(i)) if i else 0 for i in inputs]), tuple(map(id, values)),
                     tuple(not o for o in outputs))
        answer = inferences.get(signature)
        if answer is None:
            in_types = {i: codec.encode(types[i]) for i in inputs if i and i in types}
            data = {}
            for i in inputs:
                if i and i in known:
                    raw = data_bytes.get(i)
                    if raw is None:
                        raw = data_bytes[i] = numpy_helper.from_array(known[i], i).SerializeToString()
                    data[i] = raw
            try:
                inferred = schema._infer_node_outputs(node.SerializeToString(), in_types, data, {}, opset_map,
                                                      ir_version)
                raws: Optional[tuple[Optional[bytes], ...]] = tuple(inferred.get(o) if o else None for o in outputs)
            except Exception:  # noqa: BLE001 - an inference error: nothing learnt
                raws = None
            answer = inferences[signature] = (values, raws)  # values: the arrays whose ids key it, kept alive
        if answer[1] is None:
            continue
        for name, raw in zip(outputs, answer[1]):
            if raw is None:
                continue
            new, old = codec.decode(raw), types_get(name)  # interned both: merged once per pair
            pair = (id(new), id(old))
            if pair in output_merges:
                typ = output_merges[pair]
            else:
                typ = output_merges[pair] = _merge(new, old)
            if typ is not None:
                types[name] = better[name] = intern(typ)
                changed.add(name)
    return better, new_values


def _rows_to_visit(rows: Sequence[tuple[Any, ...]], positions: list[int], known: Mapping[str, Any]) -> Iterator[tuple[Any, ...]]:
    """The rows at ``positions`` (sorted), then, from the first row after which ``known`` holds
    more names, every later row: ``refine``'s walk over the rows that may act. A row whose
    outputs are all static when the walk starts stays so (``_merge`` never replaces a known dim),
    so it acts only by being evaluated or as a Shape or Size; it is evaluated only if all its
    inputs have a value, which in topological order folding saw and so evaluated it (``fold``'s
    ``unkept`` holds those it did not keep), until this walk finds a value of its own."""
    size = len(known)
    for p in positions:
        yield rows[p]
        if len(known) != size:  # a new value: a later row may now be evaluated
            yield from islice(rows, p + 1, None)
            return
