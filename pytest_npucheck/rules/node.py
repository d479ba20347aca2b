"""Node rules: constraints on what one node has (dtypes, shapes, attributes, constant inputs).

Each rule takes the node, its params (from the table) and the graph facts and returns
``None`` when the node satisfies it, else a message that says what the node actually has
(``mode='reflect' not in {'constant'}``). A rule that needs a fact the graph does not
have (an unknown shape or dtype) fails: unknown is never reported as supported.

The docstring's first line, formatted with the params, is the requirement in words; it
is what the generated supported-ops pages print (``registry.Rule.describe``).
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence

from ..graph import DYNAMIC_DIM, GraphFacts, NodeFact, TensorInfo
from .registry import RULES, ShapeUnknown, fmt_range, fmt_set, fmt_value, rule


def _fmt_shape(shape: Optional[Sequence[Any]]) -> str:
    if shape is None:
        return "unknown"
    return "(" + ", ".join("?" if d is None else str(d) for d in shape) + ")"


def _tensors(node: NodeFact, graph: GraphFacts, kind: str, index: Any) -> list[tuple["_Label", Optional[TensorInfo]]]:
    """(label, info) for the referenced tensors; missing optional inputs are skipped."""
    names = node.inputs if kind == "input" else node.outputs
    if index == "*":
        picks = [(i, n) for i, n in enumerate(names) if n]
    elif isinstance(index, int) and index < len(names) and names[index]:
        picks = [(index, names[index])]
    else:
        return []
    return [(_Label(kind, i, n), graph.tensor(n)) for i, n in picks]


class _Label:
    """``input 0 'x'``, formatted only when a rule reports it (most checks pass)."""

    __slots__ = ("kind", "index", "name")

    def __init__(self, kind: str, index: int, name: str) -> None:
        self.kind, self.index, self.name = kind, index, name

    def __str__(self) -> str:
        return f"{self.kind} {self.index} '{self.name}'"

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _failed(bad: list[str], unknown: list[str]) -> Optional[str]:
    """The rule's message: what fails, else what the checker could not work out (ShapeUnknown)."""
    if bad:
        return "; ".join(bad + unknown)
    return ShapeUnknown("; ".join(unknown)) if unknown else None


def _unknown(label: Any, what: str = "shape") -> str:
    return f"{label}: the checker could not infer its {what}"


def _in_range(value: float, lo: Any, hi: Any) -> bool:
    return (lo is None or value >= lo) and (hi is None or value <= hi)


# -- rules --------------------------------------------------------------------------------------

@rule("dtype", "dtype", reads_values=False)
def rule_dtype(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """{which} dtype must be one of {allowed_set}."""
    allowed = set(params["allowed"])
    bad = []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        dtype = info.dtype if info else None
        if dtype is None:
            bad.append(f"{label} has unknown dtype")
        elif dtype not in allowed:
            bad.append(f"{label} dtype {dtype} not in {fmt_set(sorted(allowed))}")
    return "; ".join(bad) or None


@rule("rank", "shape", reads_values=False)
def rule_rank(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """{which} rank must be in {range}."""
    lo, hi = params.get("min"), params.get("max")
    bad, unknown = [], []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        if info is None or info.shape is None:
            unknown.append(_unknown(label, "rank"))
        elif not _in_range(len(info.shape), lo, hi):
            bad.append(f"{label} has rank {len(info.shape)}, outside {fmt_range(lo, hi)}")
    return _failed(bad, unknown)


def _dim_words(params: Mapping[str, Any]) -> dict[str, str]:
    """``{dim_text}``: a range, a multiple, or both."""
    lo, hi, step = params.get("min"), params.get("max"), params.get("multiple_of")
    parts = [f"in {fmt_range(lo, hi)}"] if lo is not None or hi is not None else []
    if step:
        parts.append(f"a multiple of {step}")
    if params.get("not_multiple_of"):
        parts.append(f"not a multiple of {params['not_multiple_of']}")
    return {"dim_text": " and ".join(parts) or f"in {fmt_range(lo, hi)}"}


@rule("dim", "shape", words=_dim_words, reads_values=False)
def rule_dim(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """{which} dimension {axis} must be {dim_text}."""
    lo, hi, step = params.get("min"), params.get("max"), params.get("multiple_of")
    avoid = params.get("not_multiple_of")
    axis = params["axis"]
    bad, unknown = [], []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        if info is None or info.shape is None:
            unknown.append(_unknown(label))
            continue
        rank = len(info.shape)
        axes = range(rank) if axis == "*" else [axis + rank if axis < 0 else axis]
        for a in axes:
            if not 0 <= a < rank:
                continue  # the rank rule speaks about missing axes
            d = info.shape[a]
            if d is None:
                unknown.append(_unknown(label, f"dim {a}"))
            elif not isinstance(d, int):
                bad.append(f"{label} dim {a} is {_fmt_dim(d)} (not static)")
            elif (lo is not None or hi is not None) and not _in_range(d, lo, hi):
                bad.append(f"{label} dim {a} is {d}, outside {fmt_range(lo, hi)}")
            elif step and d % step:
                bad.append(f"{label} dim {a} is {d}, not a multiple of {step}")
            elif avoid and d % avoid == 0:
                bad.append(f"{label} dim {a} is {d}, a multiple of {avoid}")
    return _failed(bad, unknown)


def _fmt_dim(d: Any) -> str:
    return "dynamic (it depends on a dynamic input or on run-time values)" if d == DYNAMIC_DIM else repr(d)


def _dynamic_dims(node: NodeFact, graph: GraphFacts, which: str, unknown_only: bool) -> Optional[str]:
    """What is dynamic about the node's tensors; ``unknown_only``: only dims without a name (a
    symbolic dim of a graph input is allowed). A dim or rank the checker could not work out (None, not
    in GraphFacts.dynamic_rank) is not dynamic: nothing makes it vary at run time
    (graph._mark_dynamic), so the compiler sees it static."""
    kinds = ["input", "output"] if which == "all" else [which.rstrip("s")]
    bad, unknown = [], []
    for kind in kinds:
        for label, info in _tensors(node, graph, kind, "*"):
            if info is None or info.shape is None:
                if label.name in graph.dynamic_rank or label.name in graph.inputs:
                    bad.append(f"{label} has unknown shape (dynamic: it depends on a dynamic input or on "
                               "run-time values)")
                elif unknown_only:
                    unknown.append(_unknown(label))
                continue
            if info.static:
                continue
            if None in info.shape and label.name in graph.inputs:  # a graph input's unknown dims vary
                info = TensorInfo(info.name, info.dtype, tuple(DYNAMIC_DIM if d is None else d for d in info.shape))
            if unknown_only:
                dynamic = [i for i, d in enumerate(info.shape) if d == DYNAMIC_DIM]
                if dynamic:
                    bad.append(f"{label} shape {_fmt_shape(info.shape)} has dims {dynamic} that depend on run-time values")
                missing = [i for i, d in enumerate(info.shape) if d is None]
                if missing:
                    unknown.append(_unknown(label, f"dims {missing}"))
                continue
            dynamic = [d for d in info.shape if isinstance(d, str)]
            if dynamic:
                bad.append(f"{label} shape {_fmt_shape(info.shape)} is dynamic ({', '.join(map(str, dynamic))})")
    return _failed(bad, unknown)


@rule("static_shape", "shape", reads_values=False)
def rule_static_shape(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every tensor of the node's {tensors} must have a static shape (no symbolic or unknown dims)."""
    return _dynamic_dims(node, graph, params.get("tensors", "all"), unknown_only=False)


@rule("known_shape", "shape", reads_values=False)
def rule_known_shape(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every tensor of the node's {tensors} must have a known rank and no unknown dims (symbolic dims are allowed)."""
    return _dynamic_dims(node, graph, params.get("tensors", "all"), unknown_only=True)


def _attr(node: NodeFact, name: str) -> tuple[bool, Any]:
    if name in node.attrs:
        return True, node.attrs[name]
    return False, None


def _norm(value: Any) -> Any:
    """Make list attributes comparable with JSON lists and numbers with each other."""
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    if isinstance(value, bool):
        return int(value)
    return value


@rule("nonempty", "shape", reads_values=False)
def rule_nonempty(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """{which} must not be empty (no dim of size 0; constant inputs excepted)."""
    bad = []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        if info is None or info.shape is None or (info.const and label.kind == "input"):
            continue  # an unknown shape is other rules' to report; an empty constant is data (a Resize's roi)
        if 0 in info.shape:
            bad.append(f"{label} shape {_fmt_shape(info.shape)} is empty")
    return "; ".join(bad) or None


@rule("attr_in", "attribute", reads_values=False)
def rule_attr_in(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """attribute {attr} must be one of {values_set}."""
    name = params["attr"]
    present, value = _attr(node, name)
    if not present:
        return f"{name} is not set and has no default"
    allowed = {_norm(v) for v in params["values"]}
    if _norm(value) in allowed:
        return None
    return f"{name}={fmt_value(value)} not in {fmt_set(params['values'])}"


@rule("attr_not_in", "attribute", reads_values=False)
def rule_attr_not_in(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """attribute {attr} must not be one of {values_set}."""
    name = params["attr"]
    present, value = _attr(node, name)
    if present and _norm(value) in {_norm(v) for v in params["values"]}:
        return f"{name}={fmt_value(value)} is not supported"
    return None


def einsum_letters(equation: str) -> str:
    """``equation`` with its subscript letters renamed a, b, c, ... in order of first appearance
    (capitals too); everything else (commas, the arrow, ellipses, spaces) is kept as written."""
    names: dict[str, str] = {}
    out = []
    for ch in equation:
        if ch.isalpha():
            ch = names.setdefault(ch, chr(ord("a") + len(names)) if len(names) < 26 else ch)
        out.append(ch)
    return "".join(out)


@rule("einsum_equation_in", "attribute")
def rule_einsum_equation_in(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the Einsum equation, its letters renamed in order of first appearance, must be one of {values_set}."""
    present, value = _attr(node, "equation")
    if not present:
        return "equation is not set"
    text = value.decode() if isinstance(value, bytes) else str(value)
    form = einsum_letters(text)
    if form in {einsum_letters(str(v)) for v in params["values"]}:
        return None
    return f"equation={text!r} (letters renamed: {form!r}) not in {fmt_set(params['values'])}"


# ops whose list attributes default to values ONNX states in words only (one per spatial axis)
_SPATIAL_OPS = frozenset({"Conv", "ConvTranspose", "ConvInteger", "QLinearConv", "DeformConv", "MaxPool",
                          "AveragePool", "LpPool", "MaxUnpool"})
_WEIGHT_INPUT = {"Conv": 1, "ConvTranspose": 1, "ConvInteger": 1, "DeformConv": 1, "QLinearConv": 3}


def implicit_default(node: NodeFact, name: str, graph: GraphFacts) -> tuple[Any, str]:
    """The value an absent attribute takes when the ONNX schema gives no default_value.

    ``strides``/``dilations`` are 1 and ``pads``/``output_padding`` 0 on every spatial axis;
    ``kernel_shape`` of a convolution is the weight's spatial shape; ``pads`` under
    ``auto_pad=SAME_*`` are computed from the static input shape. Returns ``(None, why)``
    when the default cannot be known (unknown op, unknown rank or shape).
    """
    if node.op_type not in _SPATIAL_OPS or node.domain != "ai.onnx":
        return None, f"{node.op_type} has no schema default for {name}"
    x = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    wi = _WEIGHT_INPUT.get(node.op_type)
    wname = node.inputs[wi] if wi is not None and wi < len(node.inputs) else ""
    wt = graph.tensor(wname) if wname else None
    spatial = None
    if x is not None and x.shape is not None:
        spatial = len(x.shape) - 2
    elif wt is not None and wt.shape is not None:
        spatial = len(wt.shape) - 2
    elif isinstance(node.attrs.get("kernel_shape"), (list, tuple)):
        spatial = len(node.attrs["kernel_shape"])
    if spatial is None or spatial < 1:
        return None, "input rank unknown"
    if name in ("strides", "dilations"):
        return [1] * spatial, ""
    if name == "output_padding":
        return [0] * spatial, ""
    kernel = node.attrs.get("kernel_shape")
    if kernel is None and wt is not None and wt.shape is not None and all(isinstance(d, int) for d in wt.shape[2:]):
        kernel = list(wt.shape[2:])
    if name == "kernel_shape":
        return (list(kernel), "") if kernel is not None else (None, "weight shape unknown")
    if name == "pads":
        auto = node.attrs.get("auto_pad", "NOTSET")
        auto = auto.decode() if isinstance(auto, bytes) else auto
        if auto in ("NOTSET", "VALID", None, ""):
            return [0] * (2 * spatial), ""
        if node.op_type == "ConvTranspose":
            return None, f"auto_pad={auto} pads depend on the output shape"
        if kernel is None or x is None or x.shape is None or not all(isinstance(d, int) for d in x.shape[2:]):
            return None, f"auto_pad={auto} with unknown input shape or kernel"
        strides = node.attrs.get("strides") or [1] * spatial
        dil = node.attrs.get("dilations") or [1] * spatial
        begins, ends = [], []
        for size, k, s, d in zip(x.shape[2:], kernel, strides, dil):
            total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            begins.append(small if auto == "SAME_UPPER" else total - small)
            ends.append(total - small if auto == "SAME_UPPER" else small)
        return begins + ends, ""
    return None, f"{node.op_type} has no schema default for {name}"


@rule("attr_range", "attribute", reads_values=False)
def rule_attr_range(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every value of attribute {attr} must be in {range}."""
    name = params["attr"]
    lo, hi = params.get("min"), params.get("max")
    present, value = _attr(node, name)
    if not present or value is None:
        value, why = implicit_default(node, name, graph)
        if value is None:
            return f"{name} is not set and its ONNX default is not known here ({why})"
    values = value if isinstance(value, (list, tuple)) else [value]
    bad = [v for v in values if not isinstance(v, (int, float)) or not _in_range(v, lo, hi)]
    if bad:
        return f"{name}={fmt_value(value)} outside {fmt_range(lo, hi)}"
    return None


@rule("attr_default", "attribute", reads_values=False)
def rule_attr_default(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """attributes {attrs} must keep their default values."""
    bad = []
    for name in params["attrs"]:
        if name in node.explicit_attrs and node.attrs.get(name) != node.defaults.get(name, object()):
            bad.append(f"{name}={fmt_value(node.attrs.get(name))}")
    if bad:
        return f"{', '.join(bad)} set, only the default is supported"
    return None


_PASS = object()  # _read_axes: the rule passes without axes to check


def _read_axes(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> tuple[Any, str, Optional[int]]:
    """(axes normalised against the rank of input 0, or a failure message, or _PASS; label; rank)."""
    if "input" in params:
        idx = params["input"]
        name = node.inputs[idx] if idx < len(node.inputs) else ""
        info = graph.tensor(name) if name else None
        if info is None or info.value is None:
            return f"axis input {idx} is not a known constant", "", None
        axes = list(info.value)
        label = f"axis input {idx}"
    else:
        attr = params.get("attr", "axis")
        present, value = _attr(node, attr)
        if (not present or value is None) and attr == "axes":
            # from opset 13/18 on, Reduce*/Squeeze/Unsqueeze take axes as input 1; none means all axes
            name = node.inputs[1] if len(node.inputs) > 1 else ""
            info = graph.tensor(name) if name else None
            if name and (info is None or info.value is None):
                return f"axes input '{name}' is not a known constant", "", None
            if info is not None and info.value is not None:
                value = list(info.value)
            else:
                x0 = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
                if x0 is None or x0.shape is None:
                    return "axes not set (all axes) with input of unknown rank", "", None
                if node.attrs.get("noop_with_empty_axes"):
                    return _PASS, "", None
                value = list(range(len(x0.shape)))
            present = True
        if not present or value is None:
            return f"{attr} is not set", "", None
        axes = list(value) if isinstance(value, (list, tuple)) else [value]
        label = attr
    x = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if x is None or x.shape is None:
        if any(int(a) < 0 for a in axes):
            return f"{label}={fmt_value(axes if len(axes) > 1 else axes[0])} with input of unknown rank", "", None
        rank = None
    else:
        rank = len(x.shape)
    return [int(a) + rank if rank is not None and int(a) < 0 else int(a) for a in axes], label, rank


@rule("axis_in", "attribute")
def rule_axis_in(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """axis must be one of {values_set} (normalised against the rank of input 0)."""
    normed, label, rank = _read_axes(node, params, graph)
    if normed is _PASS:
        return None
    if isinstance(normed, str):
        return normed
    allowed = set(params["values"])
    if all(a in allowed for a in normed):
        return None
    shown = normed if len(normed) > 1 else normed[0]
    rank_txt = f" (rank {rank})" if rank is not None else ""
    return f"{label}={fmt_value(shown)}{rank_txt} not in {fmt_set(params['values'])}"


@rule("axes_ascending", "attribute")
def rule_axes_ascending(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the axes are listed in ascending order (normalised against the rank of input 0)."""
    normed, label, rank = _read_axes(node, params, graph)
    if normed is _PASS:
        return None
    if isinstance(normed, str):
        return normed
    if all(a < b for a, b in zip(normed, normed[1:])):
        return None
    given = node.attrs.get(label) if label in node.attrs else None
    shown = fmt_value(list(given)) if isinstance(given, (list, tuple)) else fmt_value(normed)
    return f"{label}={shown} are not in ascending order ({fmt_value(sorted(normed))} would be)"


def _indices(params: Mapping[str, Any]) -> list[int]:
    idx = params["index"]
    return list(idx) if isinstance(idx, list) else [idx]


@rule("const_input", "constant", reads_values=False)
def rule_const_input(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} must be a constant (initializer or folded)."""
    bad = []
    for i in _indices(params):
        if i < len(node.inputs) and node.inputs[i]:
            info = graph.tensor(node.inputs[i])
            if info is None or not info.const:
                bad.append(f"input {i} '{node.inputs[i]}' is computed at run time, not a constant")
    return "; ".join(bad) or None


@rule("computed_input", "constant", reads_values=False)
def rule_computed_input(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input {index} must be computed at run time (not a constant, nor folded into one)."""
    bad = []
    for i in _indices(params):
        if i < len(node.inputs) and node.inputs[i]:
            info = graph.tensor(node.inputs[i])
            if info is not None and info.const:
                bad.append(f"input {i} '{node.inputs[i]}' is a constant")
    return "; ".join(bad) or None


@rule("gathernd_in_order", "constant")
def rule_gathernd_in_order(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the constant indices pick every element of the data once, in order (the GatherND is a reshape)."""
    data = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    name = node.inputs[1] if len(node.inputs) > 1 else ""
    idx = graph.tensor(name) if name else None
    if idx is None or not idx.const:
        return f"indices '{name}' are computed at run time, not a constant"
    if int(node.attrs.get("batch_dims", 0) or 0):
        return f"batch_dims={node.attrs.get('batch_dims')}"
    if data is None or data.shape is None or idx.shape is None or not all(isinstance(d, int) for d in data.shape):
        return ShapeUnknown(f"indices '{name}': the checker could not infer the data's static shape")
    if not idx.shape or idx.shape[-1] != len(data.shape):
        return f"indices '{name}' of shape {_fmt_shape(idx.shape)} do not address single elements of the rank-{len(data.shape)} data"
    if idx.value is None:
        return f"indices '{name}' are a constant whose values are not known statically"
    rank = len(data.shape)
    picks = [tuple(idx.value[i:i + rank]) for i in range(0, len(idx.value), rank)]
    expected = [tuple(int(x) for x in p) for p in _row_major(data.shape)]
    if [tuple(int(x) for x in p) for p in picks] != expected:
        return f"indices '{name}' do not pick the {math.prod(data.shape)} elements of the data in order"
    return None


def _row_major(shape: Sequence[int]) -> list[tuple[int, ...]]:
    import itertools

    return list(itertools.product(*(range(d) for d in shape)))


@rule("const_value_range", "constant")
def rule_const_value_range(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every value of constant input {index} must be in {range} (integers only: {integer})."""
    i = params["index"]
    if i >= len(node.inputs) or not node.inputs[i]:
        return None
    info = graph.tensor(node.inputs[i])
    if info is None or not info.const:
        return f"input {i} '{node.inputs[i]}' is not a constant"
    if info.value is None:
        return f"input {i} '{node.inputs[i]}' is a constant whose values are not known statically"
    lo, hi = params.get("min"), params.get("max")
    ignore = set(params.get("ignore", []))
    values = [v for v in info.value if v not in ignore]
    bad = [v for v in values if not _in_range(v, lo, hi)
           or (params.get("integer") and not float(v).is_integer())
           or (isinstance(v, float) and math.isnan(v))]
    if bad:
        want = fmt_range(lo, hi) + (" and integer" if params.get("integer") else "")
        return f"input {i} '{node.inputs[i]}' = {fmt_value(list(info.value))}, needs every value in {want}"
    return None


def _const_ints_input(node: NodeFact, graph: GraphFacts, i: int, what: str) -> tuple[Optional[list[int]], Optional[str]]:
    """(the integers of constant input ``i``, None), or (None, why it has none): the input named ``what``."""
    if len(node.inputs) <= i or not node.inputs[i]:
        return None, f"it has no {what} input"
    t = graph.tensor(node.inputs[i])
    if t is None or not t.const or t.value is None:
        return None, f"input {i} '{node.inputs[i]}' ({what}) is not a constant known statically"
    return [int(v) for v in t.value], None


@rule("tile_broadcast", "shape")
def rule_tile_broadcast(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """every axis it repeats (repeat > 1 in constant input 1) has size 1 in input 0: the Tile is a broadcast."""
    repeats, why = _const_ints_input(node, graph, 1, "repeats")
    if repeats is None:
        return why
    src = graph.tensor(node.inputs[0])
    label = _Label("input", 0, node.inputs[0])
    if src is None or src.shape is None:
        return _failed([], [_unknown(label)])
    if len(repeats) != len(src.shape):
        return f"repeats {fmt_value(repeats)} do not match the rank of {label}"
    unknown = [_unknown(label) for r, d in zip(repeats, src.shape) if r > 1 and d is None][:1]
    bad = [f"axis {i} of size {d} is repeated {r} times" for i, (r, d) in enumerate(zip(repeats, src.shape))
           if r > 1 and d is not None and d != 1]
    if bad:
        return f"{label} {_fmt_shape(src.shape)}: " + "; ".join(bad)
    return _failed([], unknown)


@rule("not_rank5_axis1_broadcast", "shape", reads_values=False)
def rule_not_rank5_axis1_broadcast(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it is not a rank-5 broadcast of axis 1 behind a leading axis of size 1 with axis 2 kept (the compiler drops
    axis 0 and expands the batch axis of a rank-4 tensor)."""
    src, out = graph.tensor(node.inputs[0]), graph.tensor(node.outputs[0]) if node.outputs else None
    if src is None or src.shape is None or out is None or out.shape is None:
        return _failed([], [_unknown(_Label("input" if src is None or src.shape is None else "output", 0,
                                            node.inputs[0] if src is None or src.shape is None else node.outputs[0]))])
    if len(src.shape) != 5 or len(out.shape) != 5:
        return None
    (a0, a1, a2), (b1, b2) = src.shape[:3], out.shape[1:3]
    if None in (a0, a1, a2, b1, b2) or not all(isinstance(d, int) for d in (a0, a1, a2, b1, b2)):
        return _failed([], [f"dims 0..2 of input 0 '{node.inputs[0]}' or output 0 '{node.outputs[0]}' are not static"])
    if a0 == 1 and a1 == 1 and b1 > 1 and b2 == a2:
        return (f"input 0 '{node.inputs[0]}' {_fmt_shape(src.shape)} is broadcast to {_fmt_shape(out.shape)} on axis 1 "
                f"only: without its leading axis of size 1 that is a batch expansion")
    return None


@rule("pad_channel_tail", "constant")
def rule_pad_channel_tail(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a constant-mode Pad whose rank is in {ranks} that pads the end but not the start of the channel axis (axis 1 at rank 3 and 4, axis 0 at rank 2) needs a channel count that is a multiple of {multiple}."""
    present, mode = _attr(node, "mode")
    if present and _norm(mode) != "constant":
        return None
    values, why = _const_ints_input(node, graph, 1, "pads")
    if values is None:
        return why
    src = graph.tensor(node.inputs[0])
    label = _Label("input", 0, node.inputs[0])
    if src is None or src.shape is None:
        return _failed([], [_unknown(label)])
    rank = len(src.shape)
    if rank not in (2, 3, 4) or rank not in params.get("ranks", (2, 3, 4)) or len(values) != 2 * rank:
        return None
    axis = 0 if rank == 2 else 1
    if values[axis] != 0 or values[axis + rank] <= 0:
        return None
    channels = src.shape[axis]
    if channels is None:
        return _failed([], [_unknown(label)])
    multiple = int(params["multiple"])
    if channels % multiple:
        return (f"pads {fmt_value(values)} pad only the end of axis {axis} of {label} "
                f"{_fmt_shape(src.shape)}, {channels} channels (not a multiple of {multiple})")
    return None


def _pads_and_input(node: NodeFact, graph: GraphFacts) -> tuple[Optional[list[int]], Optional[TensorInfo], Optional[str]]:
    """(the constant pads, the data input, None) of a Pad, or (None, None, why not)."""
    values, why = _const_ints_input(node, graph, 1, "pads")
    if values is None:
        return None, None, why
    src = graph.tensor(node.inputs[0])
    if src is None or src.shape is None or any(not isinstance(d, int) for d in src.shape):
        return None, None, _unknown(_Label("input", 0, node.inputs[0]))
    if len(values) != 2 * len(src.shape):
        return None, None, f"pads {fmt_value(values)} do not match the rank of input 0 '{node.inputs[0]}'"
    return values, src, None


@rule("pad_not_channel_axis", "constant")
def rule_pad_not_channel_axis(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a Pad of rank 2 to 4 pads no channel axis (axis 0 at rank 2, axis 1 at rank 3 and 4, where the compiler keeps the channels) but a channel axis of size 1 at rank 3."""
    values, src, why = _pads_and_input(node, graph)
    if values is None or src is None:
        return why
    rank = len(src.shape)
    if rank not in (2, 3, 4):
        return f"input 0 '{node.inputs[0]}' has rank {rank}, not 2 to 4"
    axis = 0 if rank == 2 else 1
    if (values[axis] or values[axis + rank]) and not (rank == 3 and src.shape[axis] == 1):
        return (f"pads {fmt_value(values)} pad axis {axis} of input 0 '{node.inputs[0]}' {_fmt_shape(src.shape)}, "
                f"the channel axis")
    return None


@rule("pad_rank5_one_axis", "constant")
def rule_pad_rank5_one_axis(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """a rank-5 Pad has axis 0 of size 1 and pads at most one other axis (the compiler drops axis 0 and pads a rank-4 tensor; a Pad of zeros leaves no row)."""
    values, src, why = _pads_and_input(node, graph)
    if values is None or src is None:
        return why
    rank = len(src.shape)
    if rank != 5:
        return f"input 0 '{node.inputs[0]}' has rank {rank}, not 5"
    padded = [a for a in range(rank) if values[a] or values[a + rank]]
    if src.shape[0] != 1 or len(padded) > 1 or 0 in padded:
        return (f"input 0 '{node.inputs[0]}' {_fmt_shape(src.shape)} is padded on axes {fmt_value(padded)} by "
                f"{fmt_value(values)}")
    return None


@rule("not_const_head_broadcast", "shape", reads_values=False)
def rule_not_const_head_broadcast(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it does not combine, at rank 5 with output axes 0 and 1 of size 1, a constant whose axis 2 is above 1 with a computed operand of size 1 on axis 2 (the compiler makes axis 2 the batch axis and broadcasts the computed operand over it)."""
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    if out is None or out.shape is None:
        return _unknown(_Label("output", 0, node.outputs[0] if node.outputs else ""))
    if len(out.shape) != 5 or out.shape[0] != 1 or out.shape[1] != 1:
        return None
    infos = [graph.tensor(t) if t else None for t in node.inputs[:2]]
    if len(infos) != 2 or any(i is None or i.shape is None for i in infos):
        return _failed([], [_unknown(_Label("input", k, t)) for k, t in enumerate(node.inputs[:2])])
    for k in (0, 1):
        const, other = infos[k], infos[1 - k]
        assert const is not None and other is not None
        cs, os_ = list(const.shape), list(other.shape)
        if not const.const or other.const or len(cs) < 3:
            continue
        c2 = cs[len(cs) - 3]
        o2 = os_[len(os_) - 3] if len(os_) >= 3 else 1
        if isinstance(c2, int) and c2 > 1 and o2 == 1:
            return (f"constant input {k} '{node.inputs[k]}' {_fmt_shape(const.shape)} meets computed input {1 - k} "
                    f"'{node.inputs[1 - k]}' {_fmt_shape(other.shape)}, broadcast over axis 2 of the rank-5 result "
                    f"{_fmt_shape(out.shape)}")
    return None


@rule("plane_flatten_channels", "shape", reads_values=False)
def rule_plane_flatten_channels(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """it flattens the (h, w) plane of a (N, C, h, w) input into (N, 1, C, h w), (1, N, C, h w) or (N, C, 1, h w) with C a multiple of {multiple_of} (the compiler keeps the channels)."""
    src = graph.tensor(node.inputs[0]) if node.inputs else None
    out = graph.tensor(node.outputs[0]) if node.outputs else None
    if src is None or src.shape is None or out is None or out.shape is None:
        return _unknown(_Label("input", 0, node.inputs[0] if node.inputs else ""))
    a, b = list(src.shape), list(out.shape)
    if len(a) != 4 or len(b) != 4 or not all(isinstance(d, int) for d in a + b):
        return f"input 0 {_fmt_shape(src.shape)} -> output 0 {_fmt_shape(out.shape)} is not a static rank-4 Reshape"
    n, c, h, w = a
    if b not in ([n, 1, c, h * w], [1, n, c, h * w], [n, c, 1, h * w]):
        return f"output 0 {_fmt_shape(out.shape)} is not the (h, w) plane of input 0 {_fmt_shape(src.shape)} flattened"
    if c % int(params["multiple_of"]):
        return f"input 0 {_fmt_shape(src.shape)} has {c} channels, not a multiple of {params['multiple_of']}"
    return None


@rule("identity_operand", "constant")
def rule_identity_operand(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """no input of a two-input op is a constant of all {value} that does not broadcast the other input (the op would compute the other input unchanged)."""
    names = [n for n in node.inputs[:2] if n]
    if len(names) != 2:
        return None
    want = params["value"]
    for i, name in enumerate(names):
        const, other = graph.tensor(name), graph.tensor(names[1 - i])
        if const is None or not const.const or const.value is None or other is None:
            continue
        values = list(const.value)
        if not values or any(v != want for v in values):
            continue
        cshape, oshape = const.shape, other.shape
        if cshape is None or oshape is None or any(d is None for d in oshape):
            continue
        if len(cshape) > len(oshape):
            continue
        tail = list(oshape[len(oshape) - len(cshape):]) if cshape else []
        if all(c == 1 or c == o for c, o in zip(cshape, tail)):
            return (f"input {i} '{name}' {_fmt_shape(cshape)} is a constant of all {fmt_value(want)}: "
                    f"the op leaves input {1 - i} '{names[1 - i]}' {_fmt_shape(oshape)} unchanged")
    return None


@rule("pool_whole_windows", "shape", reads_values=False)
def rule_pool_whole_windows(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """with ceil_mode=1, every pooling window lies wholly inside the (padded) input: ceil and floor give the same output size."""
    present, ceil = _attr(node, "ceil_mode")
    if not present or not ceil:
        return None
    auto = node.attrs.get("auto_pad", "NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else auto
    if auto not in ("NOTSET", None, ""):
        return None  # auto_pad fixes the output size; ceil_mode does not apply
    x = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    label = _Label("input", 0, node.inputs[0] if node.inputs else "")
    if x is None or x.shape is None:
        return _failed([], [_unknown(label)])
    kernel = node.attrs.get("kernel_shape")
    if not isinstance(kernel, (list, tuple)):
        return None  # the schema requires kernel_shape; nothing to judge
    spatial = list(x.shape[2:])
    n = len(kernel)
    strides = node.attrs.get("strides") or [1] * n
    dil = node.attrs.get("dilations") or [1] * n
    pads = node.attrs.get("pads") or [0] * (2 * n)
    bad, unknown = [], []
    for a, (size, k, s, d) in enumerate(zip(spatial, kernel, strides, dil)):
        if not isinstance(size, int):
            unknown.append(_unknown(label, f"dim {a + 2}"))
            continue
        span = size + pads[a] + pads[a + n] - ((k - 1) * d + 1)
        if span >= 0 and span % s:
            bad.append(f"{label} {_fmt_shape(x.shape)} dim {a + 2}: kernel {k}, stride {s} leave a partial "
                       f"last window ({size + pads[a] + pads[a + n]} padded, ceil_mode=1)")
    return _failed(bad, unknown)


@rule("input_count", "structure", reads_values=False)
def rule_input_count(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the number of inputs must be in {range}."""
    n = sum(1 for name in node.inputs if name)
    if _in_range(n, params.get("min"), params.get("max")):
        return None
    return f"has {n} inputs, outside {fmt_range(params.get('min'), params.get('max'))}"


@rule("elements_max", "shape", reads_values=False)
def rule_elements_max(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the product of {which} dims over axes {axes} must be at most {max}."""
    bad, unknown = [], []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        if info is None or info.shape is None:
            unknown.append(_unknown(label))
            continue
        rank = len(info.shape)
        axes = params.get("axes") or list(range(rank))
        dims = [info.shape[a + rank if a < 0 else a] for a in axes if -rank <= a < rank]
        if None in dims and not any(isinstance(d, str) for d in dims):
            unknown.append(_unknown(label, f"dims over axes {list(axes)}"))
            continue
        if not all(isinstance(d, int) for d in dims):
            bad.append(f"{label} shape {_fmt_shape(info.shape)} is not static over axes {list(axes)}")
            continue
        product = math.prod(dims)  # type: ignore[arg-type]
        if product > params["max"]:
            bad.append(f"{label} shape {_fmt_shape(info.shape)}: {product} elements over axes {list(axes)} > {params['max']}")
    return _failed(bad, unknown)


@rule("elements_multiple_of", "shape", reads_values=False)
def rule_elements_multiple_of(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the product of {which} dims over axes {axes} must be a multiple of {multiple_of}."""
    bad, unknown = [], []
    for label, info in _tensors(node, graph, params.get("tensor", "input"), params.get("index", 0)):
        if info is None or info.shape is None:
            unknown.append(_unknown(label))
            continue
        rank = len(info.shape)
        axes = params["axes"]
        dims = [info.shape[a + rank if a < 0 else a] for a in axes if -rank <= a < rank]
        if not all(isinstance(d, int) for d in dims):
            unknown.append(_unknown(label, f"dims over axes {list(axes)}"))
            continue
        product = math.prod(dims)  # type: ignore[arg-type]
        if product % params["multiple_of"]:
            bad.append(f"{label} shape {_fmt_shape(info.shape)}: {product} elements over axes {list(axes)}, "
                       f"not a multiple of {params['multiple_of']}")
    return _failed(bad, unknown)


@rule("channels_multiple_of", "shape", reads_values=False)
def rule_channels_multiple_of(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """dim 1 (the channels) of input 0 and of output 0 must both be a multiple of {multiple_of}."""
    bad, unknown = [], []
    for kind in ("input", "output"):
        for label, info in _tensors(node, graph, kind, 0):
            if info is None or info.shape is None or len(info.shape) < 2 or info.shape[1] is None:
                unknown.append(_unknown(label, "dim 1"))
            elif not isinstance(info.shape[1], int):
                bad.append(f"{label} dim 1 is {_fmt_dim(info.shape[1])} (not static)")
            elif info.shape[1] % params["multiple_of"]:
                bad.append(f"{label} dim 1 is {info.shape[1]}, not a multiple of {params['multiple_of']}")
    return _failed(bad, unknown)


@rule("attr_absent", "attribute", reads_values=False)
def rule_attr_absent(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """attributes {attrs} must not be written at all (not even with their default value)."""
    present = [name for name in params["attrs"] if name in node.explicit_attrs]
    if present:
        shown = ", ".join(f"{n}={fmt_value(node.attrs.get(n))}" for n in present)
        return f"{shown} is written explicitly; the compiler does not accept the attribute"
    return None


@rule("attr_present", "attribute", reads_values=False)
def rule_attr_present(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """attributes {attrs} must be written explicitly (the compiler reads them and does not apply the ONNX default)."""
    missing = [name for name in params["attrs"] if name not in node.explicit_attrs]
    if missing:
        return f"{', '.join(missing)} not written; the compiler needs the attribute itself, not its ONNX default"
    return None


@rule("transpose_blocks", "attribute", reads_values=False)
def rule_transpose_blocks(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """the permutation must move at most {max} blocks of axes (size-1 axes dropped, axes that stay neighbours merged)."""
    perm = node.attrs.get("perm")
    info = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    shape = info.shape if info is not None else None
    if perm is None:
        perm = list(range(len(shape)))[::-1] if shape is not None else None
    if perm is None:
        return "the permutation is unknown (no perm attribute and an input of unknown rank)"
    blocks = transpose_blocks(perm, shape)
    if blocks > params["max"]:
        shown = "unknown" if shape is None else fmt_value(list(shape))
        return (f"perm {fmt_value(list(perm))} on shape {shown} moves {blocks} blocks of axes, "
                f"more than {params['max']}")
    return None


def transpose_blocks(perm: Sequence[int], shape: Optional[Sequence[Any]]) -> int:
    """How many runs of input axes a permutation moves, after dropping axes of static size 1:
    (2, 0, 3, 1, 4) on (16, 16, 3, 2, 16) moves 5, on (1, 16, 3, 8, 16) only 3 ((3, 8) stay together)."""
    rank = len(perm)
    kept = [a for a in perm if not (shape is not None and len(shape) == rank and shape[a] == 1)]
    order = {a: i for i, a in enumerate(sorted(kept))}
    blocks = 0
    for i, a in enumerate(kept):
        if i == 0 or order[a] != order[kept[i - 1]] + 1:
            blocks += 1
    return blocks


def _any_of_parts(params: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    return [(c["rule"], c.get("params", {})) for c in params.get("constraints", ())]


def _any_of_words(params: Mapping[str, Any]) -> dict[str, str]:
    """``{any_of_text}``: the alternatives' own words."""
    subs = params.get("constraints", [])
    return {"any_of_text": "; ".join(RULES[c["rule"]].describe(c.get("params", {})).rstrip(".")
                                     for c in subs if c.get("rule") in RULES)}


def _any_of_gate(params: Mapping[str, Any], graph: GraphFacts) -> Optional[tuple[tuple[int, Any], ...]]:
    """any_of's ``Rule.sparse``: its first alternative's. The any_of passes as soon as one alternative
    does, so each one's sparse test would be enough, but a later one's set is made only if a node gets
    that far (a Mul's producer_pass on Reshape behind feeds_not: 3,300 tensors, 5 ms, never needed)."""
    subs = params["constraints"]
    found = RULES[subs[0]["rule"]].sparse if subs and subs[0].get("rule") in RULES else None
    return found(subs[0].get("params", {}), graph) if found is not None else None


@rule("any_of", "composite", words=_any_of_words, parts=_any_of_parts, sparse=_any_of_gate)
def rule_any_of(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """at least one of: {any_of_text}."""
    failures = []
    for sub in params["constraints"]:
        message = RULES[sub["rule"]].check(node, sub.get("params", {}), graph)
        if message is None:
            return None
        failures.append(message)
    text = " and ".join(failures) + " (any one of these would do)"
    # an alternative that failed only for a shape the checker could not work out might hold: the
    # composite cannot decide either (reported as shape_unknown, like a plain rule)
    return ShapeUnknown(text) if any(type(m) is ShapeUnknown for m in failures) else text


@rule("folds_rows_into_batch", "shape", reads_values=False)
def rule_folds_rows_into_batch(node: NodeFact, params: Mapping[str, Any], graph: GraphFacts) -> Optional[str]:
    """input 0 is a rank-4 (1, A, B, W) and output 0 a rank-4 (A B, 1, 1, W) or (A, 1, B, W): the rows of a
    channels-last map folded into the batch, its last dim kept (one W-vector per position), which the compiler
    runs as a relayout of the batch whatever the planes."""
    src = graph.tensor(node.inputs[0]) if node.inputs and node.inputs[0] else None
    dst = graph.tensor(node.outputs[0]) if node.outputs and node.outputs[0] else None
    if src is None or src.shape is None or dst is None or dst.shape is None:
        return ShapeUnknown("the shape of input 0 or output 0 is unknown")
    a, b = tuple(src.shape), tuple(dst.shape)
    if len(a) != 4 or len(b) != 4 or not all(isinstance(d, int) for d in a + b):
        return f"input 0 {_fmt_shape(a)} and output 0 {_fmt_shape(b)} are not both static rank 4"
    if a[0] != 1 or b[3] != a[3] or b[1] != 1 or b not in ((a[1] * a[2], 1, 1, a[3]), (a[1], 1, a[2], a[3])):
        return (f"{_fmt_shape(a)} -> {_fmt_shape(b)} does not fold the rows of a (1, A, B, W) map into the batch "
                "as (A B, 1, 1, W) or (A, 1, B, W)")
    return None
