"""What the probe families share: the graph builder, the probe record, the collector a family adds
its probes to, probe ids, the probes' random constants and the graph parts several families use.

Every ``models_*`` module of this package builds its families from these; none imports another
family module's private helpers. The random constants come from one generator (:func:`rng`,
restarted by :func:`reset_rng` at the start of every build), so a probe is the same model however
the families are selected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["DEFAULT_OPSET", "Collector", "GraphBuilder", "Probe", "llama_attention", "pid", "rand",
           "reset_rng", "rng", "rnn_layer", "save_probes"]

DEFAULT_OPSET = 17

DTYPES: dict[str, int] = {
    "float32": TensorProto.FLOAT,
    "float16": TensorProto.FLOAT16,
    "int64": TensorProto.INT64,
    "int32": TensorProto.INT32,
    "int8": TensorProto.INT8,
    "uint8": TensorProto.UINT8,
    "bool": TensorProto.BOOL,
}
SHORT = {"float32": "f32", "float16": "f16", "int64": "i64", "int32": "i32", "int8": "i8",
         "uint8": "u8", "bool": "bool"}
NP = {"float32": np.float32, "float16": np.float16, "int64": np.int64, "int32": np.int32,
      "int8": np.int8, "uint8": np.uint8, "bool": np.bool_}

#: Default input shape per rank ("NCHW"-like, small).
SHAPES: dict[int, list[int]] = {1: [32], 2: [4, 32], 3: [1, 16, 32], 4: [1, 8, 16, 16],
                                5: [1, 4, 4, 8, 8], 6: [1, 2, 2, 4, 4, 4]}

_RNG = np.random.default_rng(0)


def ir_version_for(opset: int) -> int:
    """Smallest IR version that allows ``opset`` of the default domain (never above 11)."""
    if opset <= 8:
        return 4
    if opset <= 10:
        return 5
    if opset <= 12:
        return 7
    if opset <= 15:
        return 8
    if opset <= 19:
        return 9 if opset >= 18 else 8
    if opset <= 22:
        return 10
    return 11


@dataclass
class Probe:
    """One probe model and the facts needed to interpret its result."""

    id: str
    op: str
    model: onnx.ModelProto
    kind: str = "op"
    """``op`` (single op), ``pattern``, ``opset``, ``dynamic``, ``prepass``, ``dtype``."""
    attributes: dict[str, Any] = field(default_factory=dict)
    dtype: str = "float32"
    shapes: dict[str, Any] = field(default_factory=dict)
    opset: int = DEFAULT_OPSET
    focus: list[str] = field(default_factory=list)
    """Names of the nodes under test (the others are scaffolding)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Extra ``RKNN.config`` keyword arguments (e.g. ``dynamic_input``)."""
    load: dict[str, Any] = field(default_factory=dict)
    """Extra ``RKNN.load_onnx`` keyword arguments."""
    note: str = ""

    def node_list(self) -> list[dict[str, str]]:
        """``[{"name", "op_type", "inputs", "outputs"}]`` of the model's nodes, in graph order."""
        return [{"name": n.name, "op_type": n.op_type, "inputs": list(n.input),
                 "outputs": list(n.output)}
                for n in self.model.graph.node]


class GraphBuilder:
    """Minimal helper to write probe graphs; output types come from ONNX shape inference."""

    def __init__(self, opset: int = DEFAULT_OPSET, ir_version: int | None = None,
                 extra_opsets: dict[str, int] | None = None) -> None:
        self.opset = opset
        self.ir_version = ir_version
        self.extra_opsets = dict(extra_opsets or {})
        self.nodes: list[onnx.NodeProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.outputs: list[str] = []
        self.shapes: dict[str, Any] = {}
        self._n = 0
        self._counts: dict[str, int] = {}

    # -- values -----------------------------------------------------------------------------
    def input(self, name: str, dtype: str = "float32", shape: Sequence[int | str] | None = None
              ) -> str:
        """Add a graph input; string dims are symbolic."""
        self.inputs.append(helper.make_tensor_value_info(name, DTYPES[dtype], shape))
        self.shapes[name] = list(shape) if shape is not None else None
        return name

    def const(self, array: Any, name: str | None = None, dtype: str | None = None) -> str:
        """Add an initializer and return its name."""
        arr = np.asarray(array, dtype=NP[dtype] if dtype else None)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        name = name or "const%d" % len(self.inits)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def weight(self, shape: Sequence[int], name: str | None = None, dtype: str = "float32",
               scale: float = 0.1) -> str:
        """Random float initializer."""
        arr = (_RNG.standard_normal(shape) * scale).astype(NP[dtype])
        return self.const(arr, name)

    def ints(self, values: Sequence[int], name: str | None = None) -> str:
        """int64 1-D initializer."""
        return self.const(np.asarray(values, dtype=np.int64), name)

    # -- nodes ------------------------------------------------------------------------------
    def node(self, op: str, inputs: Sequence[str], n_out: int = 1, name: str | None = None,
             domain: str = "", **attrs: Any) -> Any:
        """Add a node; returns its output name (or the list of names when ``n_out > 1``)."""
        k = self._counts.get(op, 0)
        self._counts[op] = k + 1
        name = name or ("%s_%d" % (op, k))
        outs = ["%s_out%d" % (name, i) if n_out > 1 else "%s_out" % name for i in range(n_out)]
        attrs = {a: v for a, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, domain=domain,
                                           **attrs))
        return outs if n_out > 1 else outs[0]

    def output(self, *names: str) -> None:
        """Mark values as graph outputs."""
        self.outputs.extend(names)

    def last(self) -> str:
        """Name of the most recently added node."""
        return self.nodes[-1].name

    # -- model ------------------------------------------------------------------------------
    def build(self) -> onnx.ModelProto:
        """Make the model, infer output types and check it."""
        opsets = [helper.make_opsetid("", self.opset)]
        opsets += [helper.make_opsetid(d, v) for d, v in self.extra_opsets.items()]
        graph = helper.make_graph(self.nodes, "probe", self.inputs, [], self.inits)
        model = helper.make_model(graph, opset_imports=opsets, producer_name="pytest-npucheck",
                                  ir_version=self.ir_version or ir_version_for(self.opset))
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        known = {vi.name: vi for vi in list(inferred.graph.value_info) + list(inferred.graph.output)}
        outs = []
        missing = [n for n in self.outputs
                   if not (n in known and known[n].type.tensor_type.elem_type
                           and known[n].type.tensor_type.HasField("shape"))]
        run = _ort_output_info(model, missing) if missing else {}
        for name in self.outputs:
            if name not in missing:
                outs.append(known[name])
            elif name in run:
                outs.append(helper.make_tensor_value_info(name, *run[name]))
            else:
                first = self.inputs[0].type.tensor_type
                outs.append(helper.make_tensor_value_info(
                    name, first.elem_type, [d.dim_value or d.dim_param or None
                                            for d in first.shape.dim]))
        model.graph.output.extend(outs)
        try:
            onnx.checker.check_model(model)
        except onnx.checker.ValidationError as exc:
            if "deprecated" not in str(exc):  # deprecated ops are probed on purpose
                raise
        return model


def _ort_output_info(model: onnx.ModelProto, names: Sequence[str]
                     ) -> dict[str, tuple[int, list[int]]]:
    """Output dtypes/shapes by running the model once in onnxruntime (when shape inference
    cannot tell, e.g. for function ops).  Returns ``{}`` if onnxruntime is unavailable/fails."""
    try:
        import onnxruntime as ort
    except ImportError:
        return {}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for n in names:
        m.graph.output.append(helper.make_empty_tensor_value_info(n))
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        feeds = {}
        # its own generator: these values only reveal output types, and drawing them from _RNG
        # would make the constants of every later probe depend on which probes were built
        rng = np.random.default_rng(0)
        for vi in model.graph.input:
            tt = vi.type.tensor_type
            shape = [d.dim_value if d.dim_value else 2 for d in tt.shape.dim]
            dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
            feeds[vi.name] = (np.abs(rng.standard_normal(shape)) + 0.5).astype(dt)
        res = sess.run(list(names), feeds)
    except Exception:
        return {}
    out = {}
    for n, arr in zip(names, res):
        out[n] = (helper.np_dtype_to_tensor_dtype(np.asarray(arr).dtype), list(np.shape(arr)))
    return out


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------


def _fmt(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "_".join(_fmt(x) for x in v)
    if isinstance(v, float):
        s = ("%g" % v).replace("-", "m")
        return s
    if isinstance(v, int) and v < 0:
        return "m%d" % -v
    return str(v)


def pid(op: str, parts: dict[str, Any] | None = None, dtype: str | None = "float32",
        rank: int | None = None, extra: str | None = None) -> str:
    """Probe id ``Op.k=v.k2=v2.f32.r4``."""
    s = op
    for k, v in (parts or {}).items():
        s += ".%s=%s" % (k, _fmt(v))
    if extra:
        s += "." + extra
    if dtype:
        s += "." + SHORT.get(dtype, dtype)
    if rank is not None:
        s += ".r%d" % rank
    return s


class Collector:
    """Collects the probes a family adds. With ``select`` (id prefixes), a probe whose id matches
    none is only registered (duplicate ids are still refused) and its model is never built:
    building (shape inference, sometimes an ONNX Runtime session) is what costs."""

    def __init__(self, select: Iterable[str] | None = None) -> None:
        self.probes: list[Probe] = []
        self.ids: set[str] = set()
        self.select: tuple[str, ...] | None = tuple(select) if select else None

    def add(self, probe_id: str, op: str, gb: GraphBuilder, *, kind: str = "op",
            attributes: dict[str, Any] | None = None, dtype: str = "float32",
            focus: Sequence[str] | None = None, config: dict[str, Any] | None = None,
            load: dict[str, Any] | None = None, note: str = "") -> None:
        if probe_id in self.ids:
            raise ValueError("duplicate probe id " + probe_id)
        self.ids.add(probe_id)
        if self.select is not None and not probe_id.startswith(self.select):
            return
        model = gb.build()
        if focus is None:
            focus = [n.name for n in gb.nodes if n.op_type == op] or [gb.nodes[-1].name]
        self.probes.append(Probe(
            id=probe_id, op=op, model=model, kind=kind, attributes=dict(attributes or {}),
            dtype=dtype, shapes=dict(gb.shapes), opset=gb.opset, focus=list(focus),
            config=dict(config or {}), load=dict(load or {}), note=note))


def rand(shape: Sequence[int], dtype: str = "float32", scale: float = 0.1) -> np.ndarray:
    return (_RNG.standard_normal(list(shape)) * scale).astype(NP[dtype])



def rng() -> np.random.Generator:
    """The generator of the probes' random constants (restarted by :func:`reset_rng`)."""
    return _RNG


def reset_rng() -> None:
    """Restart the generator of the probes' random constants (each build starts from seed 0)."""
    global _RNG
    _RNG = np.random.default_rng(0)


def save_probes(probes: Sequence[Probe], directory: str | Path) -> list[Path]:
    """Write each probe's model to ``directory/<id>.onnx``; returns the paths."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    paths = []
    for p in probes:
        path = d / (p.id.replace("/", "_") + ".onnx")
        onnx.save(p.model, str(path))
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------------
# graph parts several families use
# ------------------------------------------------------------------------------------------------


def rnn_layer(gb: GraphBuilder, y: str, op: str, cin: int, hid: int = 32) -> str:
    """A bidirectional LSTM or GRU layer named ``rnn`` reading ``y`` (``cin`` features), random
    weights."""
    gates = {"LSTM": 4, "GRU": 3}[op]
    extra = {"linear_before_reset": 1} if op == "GRU" else {}
    return gb.node(op, [y, gb.const(rand([2, gates * hid, cin])), gb.const(rand([2, gates * hid, hid])),
                        gb.const(rand([2, 2 * gates * hid]))], name="rnn", hidden_size=hid,
                   direction="bidirectional", **extra)


def llama_attention(tokens=32, dim=64, q_heads=4, kv_heads=2, k_pre="rotary", q_rot=True, scale=True,
                attn="sdpa", opset=17):
    """One Llama attention block as torch's TorchScript exporter writes it (HF LlamaAttention,
    eager): q/k/v MatMul -> Reshape (1, T, h, d) -> Transpose (0, 2, 1, 3); rotary
    (x * cos + cat(-x2, x1) * sin) on q (q_rot) and on k (k_pre='rotary'; 'none': k unrotated,
    'relu': Relu instead); repeat_kv for k and v: Unsqueeze(2) -> Expand (1, kv, g, T, d) ->
    Reshape (1, h, T, d); scaled q @ k^T -> Softmax -> @ v -> Transpose -> Reshape -> o MatMul.
    attn='scores': the graph ends at q @ k^T (and v): no fused attention.
    Node names: k_expand / v_expand, q_neg / k_neg."""
    d = dim // q_heads
    groups = q_heads // kv_heads
    gb = GraphBuilder(opset)
    x = gb.input("x", "float32", [1, tokens, dim])
    pos = np.arange(tokens, dtype=np.float32)[:, None] / (10000 ** (np.arange(0, d, 2, dtype=np.float32) / d))[None]
    emb = np.concatenate([pos, pos], -1)
    cos = gb.const(np.cos(emb)[None, None].astype(np.float32), "cos")
    sin = gb.const(np.sin(emb)[None, None].astype(np.float32), "sin")

    def heads(nm, h):
        y = gb.node("MatMul", [x, gb.weight([dim, h * d])], name=nm + "_proj")
        y = gb.node("Reshape", [y, gb.ints([1, tokens, h, d])], name=nm + "_view")
        return gb.node("Transpose", [y], perm=[0, 2, 1, 3], name=nm + "_heads")

    def rotary(nm, t):
        x1 = gb.node("Slice", [t, gb.ints([0]), gb.ints([d // 2]), gb.ints([3]), gb.ints([1])], name=nm + "_x1")
        x2 = gb.node("Slice", [t, gb.ints([d // 2]), gb.ints([2 ** 62]), gb.ints([3]), gb.ints([1])], name=nm + "_x2")
        ng = gb.node("Neg", [x2], name=nm + "_neg")
        rh = gb.node("Concat", [ng, x1], axis=-1, name=nm + "_cat")
        a = gb.node("Mul", [t, cos], name=nm + "_mcos")
        b = gb.node("Mul", [rh, sin], name=nm + "_msin")
        return gb.node("Add", [a, b], name=nm + "_rot")

    def repeat(nm, t):
        u = gb.node("Unsqueeze", [t, gb.ints([2])], name=nm + "_unsq")
        e = gb.node("Expand", [u, gb.ints([1, kv_heads, groups, tokens, d])], name=nm + "_expand")
        return gb.node("Reshape", [e, gb.ints([1, q_heads, tokens, d])], name=nm + "_rep")

    q, k, v = heads("q", q_heads), heads("k", kv_heads), heads("v", kv_heads)
    if q_rot:
        q = rotary("q", q)
    if k_pre == "rotary":
        k = rotary("k", k)
    elif k_pre == "relu":
        k = gb.node("Relu", [k], name="k_relu")
    if groups > 1:
        k, v = repeat("k", k), repeat("v", v)
    kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")
    if scale:
        s = np.float32(d ** -0.25)
        q = gb.node("Mul", [q, gb.const(np.array([s], np.float32))], name="q_scale")
        kt = gb.node("Mul", [kt, gb.const(np.array([s], np.float32))], name="k_scale")
    scores = gb.node("MatMul", [q, kt], name="scores")
    if attn == "scores":  # no Softmax -> MatMul: the compiler fuses no attention (exSDPAttention)
        gb.output(scores, v)
        return gb
    sc = gb.node("Softmax", [scores], axis=-1, name="softmax")
    o = gb.node("MatMul", [sc, v], name="attn_v")
    o = gb.node("Transpose", [o], perm=[0, 2, 1, 3], name="o_t")
    o = gb.node("Reshape", [o, gb.ints([1, tokens, dim])], name="o_view")
    gb.output(gb.node("MatMul", [o, gb.weight([dim, dim])], name="o_proj"))
    return gb
