"""Shapes that depend on the result of an op the compiler does not fold (NonZero, NonMaxSuppression).

The graph facts evaluate small constants: a NonZero whose input is a constant (an initializer, a
ConstantOfShape of folded shape arithmetic, as TorchScript exports of Longformer write) gets a
value and a static output shape there, and so does everything after it. A compiler whose constant
folding never evaluates such an op (the table entry's ``not_folded``; onnxruntime with the QNN EP,
probed) sees a shape that depends on data: the op and every node whose shapes depend on its
result cannot get a static shape. ``data_dependent_shapes`` walks the nodes after each such op and
infers, node by node with ONNX's shape inference, which output dims still depend on that result
(a reduction over them makes the shape static again). Returned tensors carry the dependent dims
as a label naming the op (a str dim: dynamic to the rules, ``static_shape`` names it).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .facts import GraphFacts, NodeFact, TensorInfo, tensor_info
from .ops import SHAPE_FROM_DATA as _SHAPE_FROM_DATA, SHAPE_FROM_VALUES as _SHAPE_FROM_VALUES
from .schema import op_schema

#: ops whose output shape depends on the values of their input, and the output dims that do
DATA_SHAPED: dict[str, dict[int, tuple[int, ...]]] = {
    "NonZero": {0: (1,)},  # (rank, number of non-zero elements)
    "NonMaxSuppression": {0: (0,)},  # (number of selected boxes, 3)
}


def _label(node: NodeFact) -> str:
    return f"{node.op_type} '{node.name}' result"


def data_dependent_shapes(graph: GraphFacts, unfolded: set[int], seeds: Mapping[str, str] = {},
                          known: Mapping[str, TensorInfo] = {}) -> dict[str, TensorInfo]:
    """{tensor: its TensorInfo with the dims that depend on the result of an unfolded data-shaped op
    replaced by that op's label}; ``unfolded``: indices of the DATA_SHAPED nodes the compiler
    leaves to run time. ``seeds``: {tensor: label} of other results whose every dim the compiler
    leaves to run time (a Reshape to a target it cannot evaluate); ``known``: shapes found before
    (data-dependent dims as labels) that the walk starts from. Only tensors the facts call static are
    returned (the others are dynamic in the facts already: graph._mark_dynamic)."""
    from onnx import helper

    # tensor -> dims, a str where the dim depends on the data
    dims: dict[str, tuple[Any, ...]] = {name: tuple(info.shape) for name, info in known.items()
                                        if info.shape is not None and any(isinstance(d, str) for d in info.shape)}
    values: dict[str, str] = {}  # tensors whose values depend on the data (a Shape of one) -> the label
    for name, shape in dims.items():
        values[name] = next(d for d in shape if isinstance(d, str))
    for node in graph.nodes:
        if node.graph:
            continue
        seeded = [o for o in node.outputs if o and o in seeds]
        if seeded:
            for o in seeded:
                info = graph.tensor(o)
                values[o] = seeds[o]
                if info is not None and info.static and info.shape:
                    dims[o] = tuple(seeds[o] for _ in info.shape)
            continue
        if node.index in unfolded and node.op_type in DATA_SHAPED:
            for k, axes in DATA_SHAPED[node.op_type].items():
                info = graph.tensor(node.outputs[k]) if k < len(node.outputs) and node.outputs[k] else None
                if info is not None:
                    values[info.name] = _label(node)
                if info is not None and info.static:
                    dims[info.name] = tuple(_label(node) if i in axes else d for i, d in enumerate(info.shape or ()))
            continue
        if node.op_type in ("Shape", "Size") and not (node.inputs and node.inputs[0] in dims):
            continue  # reads only its input's shape, which is static: its value is known
        label = next((values[i] for i in node.inputs if i and i in values), None)
        if label is None:
            continue
        reads = _SHAPE_FROM_VALUES.get(node.op_type, ())
        if node.op_type in _SHAPE_FROM_DATA or any(i in dims for i in node.inputs if i) \
                or any(k < len(node.inputs) and node.inputs[k] in values for k in reads):
            inferred = _infer(graph, node, dims, values, helper)
        else:  # only values depend on the result, and none decides the output shape: it is the facts'
            for o in node.outputs:
                if o:
                    values[o] = label
            continue
        for o in node.outputs:
            info = graph.tensor(o) if o else None
            if info is None:
                continue
            values[o] = label  # computed from the data-dependent result: its values are not known either
            got = inferred.get(o) if inferred is not None else None
            if not info.shape:  # a scalar (no dim to depend on anything) or an unknown rank
                continue
            if got is None or len(got) != len(info.shape):  # nothing learnt: every dim may depend
                dims[o] = tuple(d if isinstance(d, str) else label for d in info.shape)
            elif any(not isinstance(d, int) for d in got):
                # also where the facts call the result dynamic already: a dim the facts know from values the
                # compiler does not have (Longformer's window indices (2, 2, ?, 16), of which onnxruntime knows
                # no dim) must not make the nodes after it static again
                dims[o] = tuple(d if isinstance(d, int) else (d or label) for d in got)
    out: dict[str, TensorInfo] = {}
    for name, shape in dims.items():
        info = graph.tensor(name)
        if info is not None:
            out[name] = tensor_info(name, info.dtype, shape)
    return out


def _infer(graph: GraphFacts, node: NodeFact, dims: Mapping[str, tuple[Any, ...]], values: Mapping[str, str],
           helper: Any) -> Optional[dict[str, tuple[Any, ...]]]:
    """Output dims of ``node`` by ONNX's inference, its inputs typed with the data-dependent dims as
    symbols and only the values that do not depend on them; None when ONNX cannot say."""
    import numpy as np
    from onnx import TensorProto, TypeProto, numpy_helper

    from .facts import DEFAULT_DOMAIN
    from .propagate import _decode

    domain = "" if node.domain in ("", DEFAULT_DOMAIN) else node.domain
    schema = op_schema(node.op_type, graph.opsets.get(node.domain or DEFAULT_DOMAIN, 0), domain)
    if schema is None:
        return None
    try:
        # the facts fill in attribute defaults of the newest opset: only the node's opset's attributes
        attrs = {k: v for k, v in node.attrs.items() if k in schema.attributes}
        proto = helper.make_node(node.op_type, list(node.inputs), list(node.outputs), domain=domain or None, **attrs)
    except Exception:  # noqa: BLE001 - an attribute make_node cannot write back: nothing learnt
        return None
    in_types: dict[str, bytes] = {}
    data: dict[str, bytes] = {}
    for i in node.inputs:
        if not i:
            continue
        info = graph.tensor(i)
        if info is None or info.dtype is None or info.shape is None:
            continue
        try:
            elem = TensorProto.BOOL if info.dtype == "bool" else helper.np_dtype_to_tensor_dtype(np.dtype(info.dtype))
        except TypeError:  # a dtype numpy does not name (bfloat16, float8): nothing learnt
            return None
        shape = dims.get(i, info.shape)
        in_types[i] = helper.make_tensor_type_proto(elem, list(shape)).SerializeToString()
        if i not in dims and i not in values and info.value is not None:
            arr = np.asarray(info.value, dtype=info.dtype).reshape([int(d) for d in info.shape])
            data[i] = numpy_helper.from_array(arr, i).SerializeToString()
    opsets = {"" if d == DEFAULT_DOMAIN else d: v for d, v in graph.opsets.items() if v}
    try:
        raw = schema._infer_node_outputs(proto.SerializeToString(), in_types, data, {}, opsets, graph.ir_version)
    except Exception:  # noqa: BLE001 - an inference error: nothing learnt
        return None
    out: dict[str, tuple[Any, ...]] = {}
    for name, typ in raw.items():
        _elem, shape = _decode(TypeProto.FromString(typ))
        if shape is not None:
            out[name] = shape
    return out


def refined_shapes(graph: GraphFacts, refined: Mapping[str, TensorInfo],
                   known: Mapping[str, TensorInfo] = {}) -> dict[str, TensorInfo]:
    """The static shapes the nodes after ``refined`` (tensors a compiler's rewrite gives a static shape the
    facts could not: a Reshape whose computed target it makes a constant) get, by ONNX's inference node by
    node; ``known``: shapes that override the facts (data-dependent dims as labels). Only tensors the facts
    do not call static and inference makes static are returned."""
    from onnx import helper

    dims: dict[str, tuple[Any, ...]] = {name: tuple(info.shape) for name, info in known.items()
                                        if info.shape is not None}
    dims.update({name: tuple(info.shape or ()) for name, info in refined.items()})
    out: dict[str, TensorInfo] = {}
    reached = set(refined)
    for node in graph.nodes:
        if node.graph or not any(i in reached for i in node.inputs if i):
            continue
        todo = [o for o in node.outputs if o and (info := graph.tensor(o)) is not None and not info.static]
        if not todo:
            continue
        inferred = _infer(graph, node, dims, {}, helper)
        for o in todo:
            got = inferred.get(o) if inferred is not None else None
            info = graph.tensor(o)
            if info is None or got is None or any(not isinstance(d, int) for d in got):
                continue
            dims[o] = tuple(got)
            reached.add(o)
            out[o] = tensor_info(o, info.dtype, tuple(got), False, None, True)  # every dim an int (above)
    return out
