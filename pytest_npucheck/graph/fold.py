"""The constant evaluator: values of the small tensors a compiler computes at build time.

Shape arithmetic, pads and scales are folded from the small initializers and Constant nodes with
numpy for the common ops (``_fast_eval``) and ONNX's reference implementation for the rest;
large initializers and external data are never read.
"""

from __future__ import annotations

from typing import Any, Container, Mapping, Optional, Sequence

from .facts import _RAW_ITEMSIZE, DEFAULT_DOMAIN, SMALL_CONSTANT
from .ops import NOT_FOLDED
from .protobuf import _check_raw_size, _read_nodes, as_node_proto


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


def _fold_small_constants(model: Any, opsets: Mapping[str, int], small: Mapping[str, Any],
                          rows: Optional[list[tuple[Any, ...]]] = None,
                          value_infos: Optional[Sequence[tuple[str, Any, Any]]] = None,
                          constant_outputs: Optional[set[str]] = None,
                          foldable: Optional[list[int]] = None,
                          unkept: Optional[list[int]] = None) -> dict[str, Any]:
    """Values of small tensors the compiler computes at build time (shape arithmetic, pads, scales).

    Only nodes of the default domain whose inputs are all known small values are evaluated, with
    ONNX's reference implementation; initializers larger than SMALL_CONSTANT elements and external
    data are never read (``small``: the values of the small initializers). Returns {tensor name:
    numpy array} for node outputs only. ``value_infos``: (name, anything, ValueInfoProto) of each of
    the graph's value_infos, in order, if the caller read their names already. ``constant_outputs``:
    a set given is filled with the outputs of every Constant node (of any domain), as the loop
    over the nodes meets them (``propagate.refine`` asks which folded values are news).
    ``foldable``: a list given is filled with the positions, in order, of the nodes a pre-pass's
    folding may fold (:func:`_may_fold`'s rule). ``unkept``: a list given is filled with the
    positions of the nodes whose inputs all had a value here but an output of which did not get one
    (too large, not computed), perhaps more than once: the only nodes ``propagate.refine`` may
    evaluate before it finds a value of its own (every other node with all its inputs known had
    its outputs kept, when the nodes are in topological order).
    """
    import numpy as np
    from onnx import helper

    shapes: dict[str, tuple[int, ...]] = {}
    # only the shapes Shape/Size nodes read: walking every value_info's dims costs more than the rest
    nodes = rows if rows is not None else _read_nodes(model.graph)  # each protobuf field read once
    wanted = {r[3][0] for r in nodes if r[1] in ("Shape", "Size") and r[3]}

    # the child's model gives one ValueInfoProto per distinct type (build._value_infos_serialized):
    # each is read once, kept alive by ``value_infos``, so its id keys it
    read: dict[int, Optional[tuple[int, ...]]] = {}

    def static_shape(name: str, vi: Any, held: bool = False) -> None:
        """``held``: ``vi`` is kept alive by ``value_infos`` (a wrapper of a repeated field's item
        may be freed after its turn, and its id then be another's)."""
        if held and id(vi) in read:
            shape = read[id(vi)]
        else:
            tt = vi.type.tensor_type
            shape = (tuple(int(d.dim_value) for d in tt.shape.dim) if tt.HasField("shape") and all(
                d.HasField("dim_value") and d.dim_value >= 0 for d in tt.shape.dim) else None)
            if held:
                read[id(vi)] = shape
        if shape is not None:
            shapes[name] = shape

    if wanted:
        for vi in model.graph.input:
            if vi.name in wanted:
                static_shape(vi.name, vi)
        if value_infos is None:
            for vi in model.graph.value_info[:]:
                if vi.name in wanted:
                    static_shape(vi.name, vi)
        else:  # the names read already: one set lookup each
            for name, _, vi in value_infos:
                if name in wanted:
                    static_shape(name, vi, True)
    out: dict[str, Any] = {}
    ndarray = np.ndarray
    opset_list = [helper.make_opsetid("" if d == DEFAULT_DOMAIN else d, v) for d, v in opsets.items() if v]
    # every layer of a stack computes the same shape arithmetic from the same values: equal values
    # are made one array (``_Values``), and a node is evaluated once per op, attributes and input arrays
    values_of = _Values(np)
    known: dict[str, Any] = {name: values_of.one(value) for name, value in small.items()}
    evaluated: dict[tuple[Any, ...], Optional[list[Any]]] = {}  # key: None (nothing), or the outputs' values kept
    constants: dict[bytes, Any] = {}  # a Constant's one attribute, serialized: its value (values_of's array)
    # the serialized attributes of a node, by the id of its attributes tuple: the child's model
    # gives the nodes of equal attributes one tuple (encoder_26k: 26 among 22,000 nodes), which
    # ``nodes`` keeps alive; each is serialized once (a 6,303 Constants' values are 15 tuples)
    serialized: dict[int, tuple[Any, tuple[bytes, ...]]] = {}
    outputs_of_constants = constant_outputs if constant_outputs is not None else set()
    # the pre-passes' folding (prepass._fold) folds what its tables make constant, whatever its size
    # or whether it can be evaluated here: the nodes it may fold are found by names alone. A name that
    # may be a constant to it is an initializer, a Constant's output or an output of a node it may
    # fold: one in ``known``, ``outputs_of_constants`` or, for the few in neither (a large
    # initializer, a value not evaluated here), ``extra``. ``may``: those nodes' positions. A node it
    # may fold is a default-domain Shape, Size or Constant, one of no inputs, one whose every input may
    # be a constant, or an Identity, Dropout or Cast whose input 0 may be one (eliminate_identity
    # passes a constant on)
    may = foldable if foldable is not None else []
    lost = unkept if unkept is not None else []
    extra = {init.name for init in model.graph.initializer}
    position = -1
    whatever = _FOLDED_WHATEVER
    for node, op, domain, inputs, outputs, attributes in nodes:
        position += 1
        if op in NOT_FOLDED or domain not in ("", DEFAULT_DOMAIN):
            if op == "Constant":  # another domain's: no node to fold, but its outputs may be constants
                outputs_of_constants.update(outputs)
            continue
        values: Optional[list[Any]] = None
        if op in ("Shape", "Size") and inputs and inputs[0] in shapes:
            may.append(position)
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
            may.append(position)
            outputs_of_constants.update(outputs)
            # one Constant per layer holds each value: a value is read once per attribute bytes, and
            # the nodes that repeat them get that one array (values_of.one gave it to the first)
            ckey = None
            if len(attributes) == 1 and len(outputs) == 1 and outputs[0]:
                held = serialized.get(id(attributes))
                if held is None or held[0] is not attributes:
                    held = serialized[id(attributes)] = (attributes, (attributes[0].SerializeToString(),))
                ckey = held[1][0]
            if ckey is not None:
                same = constants.get(ckey)
                if same is not None:
                    known[outputs[0]] = out[outputs[0]] = same
                    continue
            values = _constant_value(attributes, np) or _evaluate(node, known, opset_list)
            if ckey is not None and values and type(value := values[0]) is ndarray and not value.dtype.hasobject:
                if value.size <= SMALL_CONSTANT:
                    constants[ckey] = known[outputs[0]] = out[outputs[0]] = values_of.one(value)
                else:
                    lost.append(position)
                continue
        elif op == "Identity" and len(inputs) == 1 and inputs[0] and inputs[0] in known:  # as _fast_eval
            may.append(position)
            values = [known[inputs[0]]]
        elif inputs:
            for i in inputs:  # all((not i) or i in known for i in inputs), without a generator per node
                if i and i not in known:
                    # most nodes stop here, at a name that is no constant at all (two more lookups)
                    if i in outputs_of_constants or i in extra:
                        # one input (an Identity of a large weight): it is that one
                        if len(inputs) == 1 or _may_fold(op, inputs, (known, outputs_of_constants, extra)):
                            may.append(position)
                            extra.update(outputs)
                    elif op in whatever and (op == "Shape" or op == "Size" or _may_fold(
                            op, inputs, (known, outputs_of_constants, extra))):
                        may.append(position)
                        extra.update(outputs)
                    break
            else:
                may.append(position)
                held = serialized.get(id(attributes))
                if held is None or held[0] is not attributes:
                    held = serialized[id(attributes)] = (attributes, tuple([a.SerializeToString() for a in attributes]))
                key = (op, held[1],
                       tuple(map(id, map(known.__getitem__, inputs))) if "" not in inputs
                       else tuple([id(known[i]) if i else None for i in inputs]))
                if key in evaluated:
                    kept = evaluated[key]
                else:
                    # each output's array as it is kept (values_of's), or None when it is not (too
                    # large, not computed): every node asking this again takes them as they are; a
                    # value that is not an array is sized per node, as below
                    values = _evaluate(node, known, opset_list)
                    kept = evaluated[key] = None if values is None else [
                        value if type(value) is not ndarray else
                        values_of.one(value) if value.size <= SMALL_CONSTANT else None for value in values]
                if kept is None or len(kept) < len(outputs):
                    extra.update(outputs)  # outputs without a value here
                    lost.append(position)
                for name, value in zip(outputs, kept or ()):
                    if name and value is not None:
                        if type(value) is not ndarray:
                            if np.size(value) > SMALL_CONSTANT:
                                extra.add(name)
                                lost.append(position)
                                continue
                            value = values_of.one(value)
                        known[name] = out[name] = value
                    else:
                        extra.add(name)
                        lost.append(position)
                continue
            continue  # an input without a value here
        else:  # no inputs: a constant to the pre-passes' folding, which nothing here evaluates
            may.append(position)
        # a node that may fold (a Shape, Size, Constant, Identity, one without inputs): its outputs
        # without a value here are in ``extra``
        if values is None or len(values) < len(outputs):
            extra.update(outputs)
            lost.append(position)
            if values is None:
                continue
        for name, value in zip(outputs, values):
            if name and value is not None and (value.size if type(value) is ndarray else np.size(value)) <= SMALL_CONSTANT:
                known[name] = out[name] = values_of.one(value)
            else:
                extra.add(name)
                lost.append(position)
    return out


# ops a node of which may be folded by the pre-passes although an input is no constant: a Shape or Size
# (of a static shape), a Dropout (removed as an identity: it passes its input 0 on)
_FOLDED_WHATEVER = frozenset({"Shape", "Size", "Dropout"})


def _may_fold(op: str, inputs: Sequence[str], constish: tuple[Container[str], Container[str], Container[str]]) -> bool:
    """Whether a default-domain node of ``op`` (no Shape, Size or Constant) with ``inputs`` may be
    folded by the pre-passes, ``constish`` holding between them every name that may be a constant to
    them: all its inputs may be constants, or it passes on its input 0 (an Identity, Dropout or Cast,
    which eliminate_identity may remove) and that may be one."""
    known, constant, extra = constish
    for i in inputs:
        if i and i not in known and i not in constant and i not in extra:
            break
    else:
        return True
    i = inputs[0]
    return op in ("Identity", "Dropout", "Cast") and bool(i) and (i in known or i in constant or i in extra)


class _Values:
    """One array per distinct value (dtype, shape and bytes): the arrays live as long as this does,
    so their ids key the evaluations of ``_fold_small_constants``. A value that is not an ndarray
    is kept as it is (its id then keys nothing another value shares)."""

    __slots__ = ("ndarray", "arrays", "kept")

    def __init__(self, np: Any) -> None:
        self.ndarray = np.ndarray
        self.arrays: dict[tuple[Any, ...], Any] = {}
        self.kept: list[Any] = []  # every value whose id is in a key stays alive: ids are never reused

    def one(self, value: Any) -> Any:
        if type(value) is not self.ndarray or value.dtype.hasobject:
            self.kept.append(value)
            return value
        return self.arrays.setdefault((value.dtype.str, value.shape, value.tobytes()), value)


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
    node = as_node_proto(node)  # its attributes and its place in a graph of its own are read
    try:
        fast = _fast_eval(node, [known[i] for i in node.input if i])
    except Exception:
        fast = None
    if fast is not None:
        return fast
    from onnx import helper
    from onnx.reference import ReferenceEvaluator  # here: ~40 ms to import, and most models never need it

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
