"""A small, independent evaluator of support-table semantics, used to check a generated table
against the probe results it was derived from.

This is *not* the project's matcher; it implements the documented table semantics just far
enough to predict, for every probe model, which nodes the table says run on the NPU/CPU or make
the model unsupported, so that :mod:`pytest_npucheck.probe.rknn_table` can report where the
table and the real compiler disagree.

Semantics implemented (see ``op_support_tables/schema.json``):

* prepasses ``eliminate_identity``, ``fold_constants``, ``fold_shape_ops``, ``fuse_conv_bn``,
  ``fuse_patterns``; folded nodes count as ``folded`` (never CPU);
* ``generic_constraints`` (with ``except_ops`` / ``only_ops``), then the op entry's status and
  constraints; a failing constraint yields its ``else`` verdict (default ``cpu``); the result is
  the most severe of the status and the failed constraints' verdicts
  (``unsupported`` > ``cpu`` > ``npu``); ops without entry get ``default_verdict``;
* constraints that refer to an absent optional input or attribute without default pass;
* ``input_count`` counts the inputs actually given (empty placeholders do not count);
  ``axis_in`` with ``attr: axes`` falls back to input 1 and to "all axes" when neither is
  given, ``axis_in`` with ``input`` fails when that input is not a known constant;
  ``static_shape`` fails only on symbolic dims of a known shape;
* a model whose default-domain opset is outside ``opsets`` is unsupported as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["TensorInfo", "NodeView", "predict", "SEVERITY", "worst"]

SEVERITY = {"folded": -1, "npu": 0, "cpu": 1, "unsupported": 2}

_DT = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    8: "string", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
    16: "bfloat16",
}


def worst(*verdicts: str) -> str:
    """Most severe verdict."""
    return max(verdicts, key=lambda v: SEVERITY[v])


@dataclass
class TensorInfo:
    """What the evaluator knows about one tensor."""

    name: str
    dtype: str | None = None
    shape: list[int | str | None] | None = None
    const: bool = False
    value: np.ndarray | None = None
    graph_input: bool = False


@dataclass
class NodeView:
    """A node with resolved tensors and attributes (defaults filled in)."""

    node: onnx.NodeProto
    inputs: list[TensorInfo | None]
    outputs: list[TensorInfo]
    attrs: dict[str, Any] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)
    defaults: dict[str, Any] = field(default_factory=dict)

    @property
    def op(self) -> str:
        """``domain:op_type`` key as used by tables."""
        return "%s:%s" % (self.node.domain or "ai.onnx", self.node.op_type)


def _attr_value(a: onnx.AttributeProto) -> Any:
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, list):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    return v


def _defaults(node: onnx.NodeProto, opset: int) -> dict[str, Any]:
    try:
        schema = onnx.defs.get_schema(node.op_type, opset, node.domain)
    except Exception:
        return {}
    out = {}
    for name, a in schema.attributes.items():
        if a.default_value is not None and a.default_value.type != 0:
            out[name] = _attr_value(a.default_value)
    return out


def _shape(vi: onnx.ValueInfoProto) -> list[int | str | None] | None:
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
            for d in tt.shape.dim]


def _static(t: TensorInfo | None) -> bool:
    """No symbolic dims (dims shape inference could not resolve, ``None``, are not held
    against the tensor: they come from the limits of ONNX shape inference, not the model)."""
    if t is None or t.shape is None:
        return False
    if t.graph_input:  # a model input dim without a value is dynamic
        return all(isinstance(d, int) and d > 0 for d in t.shape)
    return all(d is None or (isinstance(d, str) and d.startswith("unk__"))
               or (isinstance(d, int) and d > 0) for d in t.shape)


def _run_node(node: onnx.NodeProto, inputs: list[TensorInfo | None], opset: int
              ) -> list[np.ndarray] | None:
    """Evaluate one node with the ONNX reference evaluator (for constant folding)."""
    try:
        from onnx.reference import ReferenceEvaluator
        ins = []
        feeds = {}
        for i, t in enumerate(inputs):
            if t is None:
                ins.append(None)
                continue
            if t.value is None:
                return None
            feeds["i%d" % i] = t.value
            ins.append(helper.make_tensor_value_info("i%d" % i, helper.np_dtype_to_tensor_dtype(
                t.value.dtype), list(t.value.shape)))
        n2 = helper.make_node(node.op_type, ["i%d" % i if t is not None else ""
                                             for i, t in enumerate(inputs)],
                              ["o%d" % i for i in range(len(node.output))], domain=node.domain)
        n2.attribute.extend(node.attribute)
        g = helper.make_graph([n2], "g", [x for x in ins if x is not None],
                              [helper.make_empty_tensor_value_info("o%d" % i)
                               for i in range(len(node.output))])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid(node.domain or "", opset)])
        res = ReferenceEvaluator(m).run(None, feeds)
        return [np.asarray(r) for r in res]
    except Exception:
        return None


class _Graph:
    def __init__(self, model: onnx.ModelProto) -> None:
        self.model = model
        self.opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")),
                          1)
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False,
                                                         data_prop=True)
        except Exception:
            inferred = model
        self.tensors: dict[str, TensorInfo] = {}
        g = inferred.graph
        for vi in list(g.input) + list(g.value_info) + list(g.output):
            self.tensors[vi.name] = TensorInfo(vi.name, _DT.get(vi.type.tensor_type.elem_type),
                                               _shape(vi))
        for vi in model.graph.input:
            if vi.name in self.tensors:
                self.tensors[vi.name].graph_input = True
                self.tensors[vi.name].shape = _shape(vi)
        for init in model.graph.initializer:
            arr = numpy_helper.to_array(init)
            self.tensors[init.name] = TensorInfo(init.name, _DT.get(init.data_type),
                                                 list(arr.shape), True, arr)
        self.nodes = list(model.graph.node)
        self.consumers: dict[str, list[int]] = {}
        self.producer: dict[str, int] = {}
        for i, n in enumerate(self.nodes):
            for t in n.input:
                if t:
                    self.consumers.setdefault(t, []).append(i)
            for t in n.output:
                self.producer[t] = i

    def t(self, name: str) -> TensorInfo | None:
        if not name:
            return None
        return self.tensors.setdefault(name, TensorInfo(name))

    def view(self, i: int) -> NodeView:
        n = self.nodes[i]
        defaults = _defaults(n, self.opset)
        attrs = dict(defaults)
        explicit = set()
        for a in n.attribute:
            attrs[a.name] = _attr_value(a)
            explicit.add(a.name)
        return NodeView(n, [self.t(x) for x in n.input], [self.t(x) for x in n.output],
                        attrs, explicit, defaults)


# ------------------------------------------------------------------------------------------------
# constraints
# ------------------------------------------------------------------------------------------------


def _select(v: NodeView, params: Mapping[str, Any]) -> list[TensorInfo]:
    ts = v.inputs if params.get("tensor", "input") == "input" else v.outputs
    idx = params.get("index", 0)
    if idx == "*":
        return [t for t in ts if t is not None]
    return [ts[idx]] if idx < len(ts) and ts[idx] is not None else []


def _norm_axis(a: int, rank: int | None) -> int:
    return a + rank if (a < 0 and rank is not None) else a


def check(rule: str, params: Mapping[str, Any], v: NodeView) -> bool:
    """True if node ``v`` satisfies the constraint (unknown facts pass)."""
    if rule == "dtype":
        return all(t.dtype is None or t.dtype in params["allowed"] for t in _select(v, params))
    if rule == "rank":
        for t in _select(v, params):
            if t.shape is None:
                continue
            r = len(t.shape)
            if "min" in params and r < params["min"] or "max" in params and r > params["max"]:
                return False
        return True
    if rule == "dim":
        for t in _select(v, params):
            if t.shape is None:
                continue
            axes = range(len(t.shape)) if params["axis"] == "*" else [
                _norm_axis(params["axis"], len(t.shape))]
            for ax in axes:
                if not 0 <= ax < len(t.shape) or not isinstance(t.shape[ax], int):
                    continue
                d = t.shape[ax]
                if "min" in params and d < params["min"] or "max" in params and d > params["max"]:
                    return False
        return True
    if rule in ("static_shape", "known_shape"):
        which = params.get("tensors", "all")
        ts = ([t for t in v.inputs if t is not None] if which in ("inputs", "all") else [])
        ts += list(v.outputs) if which in ("outputs", "all") else []
        if rule == "known_shape":
            return all(t.shape is not None for t in ts)
        # a shape shape-inference could not produce is not evidence of a dynamic shape
        return all(_static(t) for t in ts
                   if t.shape is not None and not (t.const and t.value is not None))
    if rule in ("attr_in", "attr_not_in"):
        if params["attr"] not in v.attrs:
            return True
        val = v.attrs[params["attr"]]
        inside = any(val == x for x in params["values"])
        return inside if rule == "attr_in" else not inside
    if rule == "attr_range":
        if params["attr"] not in v.attrs:
            return True
        val = v.attrs[params["attr"]]
        vals = val if isinstance(val, list) else [val]
        return all(("min" not in params or x >= params["min"]) and
                   ("max" not in params or x <= params["max"]) for x in vals)
    if rule == "attr_default":
        for a in params["attrs"]:
            if a in v.explicit and (a not in v.defaults or v.attrs[a] != v.defaults[a]):
                return False
        return True
    if rule == "axis_in":
        x0 = v.inputs[0] if v.inputs else None
        rank = len(x0.shape) if x0 is not None and x0.shape is not None else None
        if "input" in params:
            i = params["input"]
            t = v.inputs[i] if i < len(v.inputs) else None
            if t is None or t.value is None:
                return False  # an axis input must be a known constant
            vals = [int(x) for x in np.asarray(t.value).reshape(-1)]
        else:
            a = params.get("attr", "axis")
            if a in v.explicit or (a in v.attrs and a != "axes"):
                val = v.attrs[a]
                vals = val if isinstance(val, list) else [val]
            elif a == "axes":
                # opset 13/18+: axes is input 1; absent means all axes (unless noop)
                t = v.inputs[1] if len(v.inputs) > 1 else None
                if t is not None:
                    if t.value is None:
                        return False
                    vals = [int(x) for x in np.asarray(t.value).reshape(-1)]
                elif v.attrs.get("noop_with_empty_axes"):
                    return True
                elif rank is None:
                    return False
                else:
                    vals = list(range(rank))
            else:
                return True
        return all(_norm_axis(x, rank) in params["values"] for x in vals)
    if rule == "const_input":
        idx = params["index"]
        for i in (idx if isinstance(idx, list) else [idx]):
            t = v.inputs[i] if i < len(v.inputs) else None
            if t is not None and not t.const:
                return False
        return True
    if rule == "const_value_range":
        i = params["index"]
        t = v.inputs[i] if i < len(v.inputs) else None
        if t is None or t.value is None:
            return True
        ignore = params.get("ignore", [])
        for x in np.asarray(t.value, dtype=np.float64).reshape(-1):
            if any(np.isclose(x, g) for g in ignore):
                continue
            if "min" in params and x < params["min"] or "max" in params and x > params["max"]:
                return False
            if params.get("integer") and not float(x).is_integer():
                return False
        return True
    if rule == "input_count":
        n = sum(1 for t in v.inputs if t is not None)  # inputs actually given
        return ("min" not in params or n >= params["min"]) and (
            "max" not in params or n <= params["max"])
    if rule == "elements_max":
        for t in _select(v, params):
            if t.shape is None:
                continue
            axes = params.get("axes")
            dims = [t.shape[_norm_axis(a, len(t.shape))] for a in axes
                    if 0 <= _norm_axis(a, len(t.shape)) < len(t.shape)] if axes else t.shape
            if not all(isinstance(d, int) for d in dims):
                continue
            if int(np.prod(dims)) > params["max"]:
                return False
        return True
    raise ValueError("unknown rule %r" % rule)


# ------------------------------------------------------------------------------------------------
# prediction
# ------------------------------------------------------------------------------------------------


def _match_patterns(g: _Graph, table: Mapping[str, Any], skip: set[int]) -> dict[int, str]:
    """Bind every pattern wherever it occurs (matching backwards from the pattern's sink)."""
    out: dict[int, str] = {}
    for pat in table.get("patterns", []):
        specs = {s["id"]: s for s in pat["nodes"]}
        referenced = {a for s in pat["nodes"] for a in s.get("after", [])}
        sinks = [s["id"] for s in pat["nodes"] if s["id"] not in referenced]
        if len(sinks) != 1:
            continue

        def op_ok(pid: str, i: int) -> bool:
            return (g.nodes[i].op_type == specs[pid]["op"].split(":")[-1]
                    and i not in skip and i not in out)

        def solve(todo: list[str], bound: dict[str, int]) -> dict[str, int] | None:
            if not todo:
                return bound if len(bound) == len(specs) else None
            pid, rest = todo[0], todo[1:]
            node = g.nodes[bound[pid]]
            producers = [g.producer[t] for t in node.input if t in g.producer]
            afters = specs[pid].get("after", [])

            def assign(k: int, b: dict[str, int]) -> dict[str, int] | None:
                if k == len(afters):
                    new = [a for a in afters if a not in bound]
                    return solve(rest + [a for a in dict.fromkeys(new)], b)
                a = afters[k]
                if a in b:
                    return assign(k + 1, b) if b[a] in producers else None
                for cand in dict.fromkeys(producers):
                    if cand in b.values() or not op_ok(a, cand):
                        continue
                    r = assign(k + 1, dict(b, **{a: cand}))
                    if r:
                        return r
                return None
            return assign(0, bound)

        for i in range(len(g.nodes)):
            if not op_ok(sinks[0], i):
                continue
            b = solve([sinks[0]], {sinks[0]: i})
            if b:
                for j in b.values():
                    out[j] = pat.get("status", "npu")
    return out


_NEVER_FOLD = ("RandomUniform", "RandomNormal", "RandomUniformLike", "RandomNormalLike",
               "Bernoulli", "Multinomial")


def _fold_pass(g: _Graph, pre: set[str], folded: set[str]) -> bool:
    """One folding sweep over ``g`` (graph order); adds node names to ``folded``."""
    changed = False
    for i, n in enumerate(g.nodes):
        v = g.view(i)
        if n.name in folded:
            continue
        if "eliminate_identity" in pre and n.op_type in ("Identity", "Dropout"):
            src = v.inputs[0]
            if src is not None:
                o = v.outputs[0]
                o.const, o.value = src.const, src.value
                o.dtype, o.shape = o.dtype or src.dtype, o.shape or src.shape
            folded.add(n.name)
            changed = True
            continue
        if "fold_shape_ops" in pre and n.op_type in ("Shape", "Size") and v.inputs[0] \
                and v.inputs[0].shape is not None \
                and all(isinstance(d, int) and d > 0 for d in v.inputs[0].shape):
            shp = np.asarray(v.inputs[0].shape, np.int64)
            if n.op_type == "Size":
                val = np.asarray(int(np.prod(shp)), np.int64)
            else:
                st, en = v.attrs.get("start", 0), v.attrs.get("end")
                val = shp[st:en] if en is not None else shp[st:]
            v.outputs[0].const, v.outputs[0].value = True, val
            folded.add(n.name)
            changed = True
            continue
        if n.op_type == "Constant":
            try:
                v.outputs[0].value = numpy_helper.to_array(n.attribute[0].t)
            except Exception:
                v.outputs[0].value = None
            v.outputs[0].const = True
            folded.add(n.name)
            changed = True
            continue
        if ("fold_constants" in pre and n.op_type not in _NEVER_FOLD and n.input
                and all(t is None or t.const for t in v.inputs)):
            vals = _run_node(n, v.inputs, g.opset)
            for k, o in enumerate(v.outputs):
                o.const = True
                o.value = vals[k] if vals is not None and k < len(vals) else None
            folded.add(n.name)
            changed = True
            continue
        if ("fuse_conv_bn" in pre and n.op_type == "BatchNormalization" and v.inputs[0]
                and v.inputs[0].name in g.producer
                and g.nodes[g.producer[v.inputs[0].name]].op_type in ("Conv", "ConvTranspose")
                and len(g.consumers.get(v.inputs[0].name, [])) == 1):
            folded.add(n.name)
            changed = True
    return changed


def _materialise(g: _Graph, folded: set[str]) -> onnx.ModelProto:
    """Copy of the graph where folded nodes with known output values become initializers."""
    m = onnx.ModelProto()
    m.CopyFrom(g.model)
    keep = []
    new_inits = []
    have = {t.name for t in m.graph.initializer}
    for n in g.nodes:
        outs = [g.tensors.get(o) for o in n.output]
        if n.name in folded and outs and all(t is not None and t.value is not None for t in outs):
            for t in outs:
                if t.name not in have:
                    new_inits.append(numpy_helper.from_array(np.asarray(t.value), t.name))
                    have.add(t.name)
        else:
            keep.append(n)
    del m.graph.node[:]
    m.graph.node.extend(keep)
    m.graph.initializer.extend(new_inits)
    del m.graph.value_info[:]
    return m


def predict(table: Mapping[str, Any], model: onnx.ModelProto) -> dict[str, str]:
    """Per-node verdict (``npu``/``cpu``/``unsupported``/``folded``) the table predicts."""
    model2 = onnx.ModelProto()
    model2.CopyFrom(model)
    for i, n in enumerate(model2.graph.node):
        if not n.name:
            n.name = "%s_%d" % (n.op_type, i)
    names = [n.name for n in model2.graph.node]
    g = _Graph(model2)
    lo, hi = table["opsets"].get("ai.onnx", [1, 10 ** 6])
    if not lo <= g.opset <= hi:
        return {nm: "unsupported" for nm in names}
    pre = set(table.get("prepasses", []))
    folded: set[str] = set()
    # fold, then re-run shape inference on the folded graph, until nothing changes
    for _ in range(8):
        if not _fold_pass(g, pre, folded):
            break
        g = _Graph(_materialise(g, folded))
    verdict: dict[str, str] = {nm: "folded" for nm in folded}
    idx_folded = {i for i, n in enumerate(g.nodes) if n.name in folded}
    if "fuse_patterns" in pre:
        for i, st in _match_patterns(g, table, idx_folded).items():
            verdict[g.nodes[i].name] = st
    ops = table.get("ops", {})
    for i, n in enumerate(g.nodes):
        if n.name in verdict:
            continue
        v = g.view(i)
        key = v.op
        result = []
        for gc in table.get("generic_constraints", []):
            if gc.get("only_ops") and key not in gc["only_ops"]:
                continue
            if key in gc.get("except_ops", []):
                continue
            if not check(gc["rule"], gc["params"], v):
                result.append(gc.get("else", "cpu"))
        entry = ops.get(key)
        if entry is None:
            result.append(table["default_verdict"])
        else:
            result.append(entry["status"])
            if "opset" in entry and not entry["opset"][0] <= g.opset <= entry["opset"][1]:
                result.append(table["default_verdict"])
            for c in entry.get("constraints", []):
                if not check(c["rule"], c["params"], v):
                    result.append(c.get("else", "cpu"))
        verdict[n.name] = worst(*result)
    return {nm: verdict.get(nm, "folded") for nm in names}


def model_verdict(pred: Mapping[str, str]) -> str:
    """``unsupported`` if any node is, else ``ok``."""
    return "unsupported" if "unsupported" in pred.values() else "ok"


def compare(pred: Mapping[str, str], observed_status: str, observed: Mapping[str, str],
            focus: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
    """Disagreements ``(node, predicted, observed)``; ``("*", ...)`` for model-level ones."""
    if observed_status != "ok":
        return [] if model_verdict(pred) == "unsupported" else [("*", "ok", observed_status)]
    if model_verdict(pred) == "unsupported":
        bad = [n for n, v in pred.items() if v == "unsupported"]
        return [("*", "unsupported(%s)" % ",".join(bad[:3]), "ok")]
    out = []
    for n in (focus or list(observed)):
        p = pred.get(n)
        o = observed.get(n)
        if p is None or o is None:
            continue
        p2 = "npu" if p == "folded" else p
        if p2 != o:
            out.append((n, p, o))
    return out
