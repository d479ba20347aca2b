"""Scoring static verdicts against a real compiler over a model zoo (``scripts/zoo_agreement.py``).

Node level: a positive is a node that leaves the NPU (``cpu`` or ``unsupported``). A model the
compiler rejects (build error, crash, failed session) is not scored node by node: it is
counted as a rejection, explained by a pattern when one matches (:data:`REJECTION_PATTERNS`),
and the static side is right about it when it called the model ``unsupported``. A compile that
ran out of its time budget (status ``timeout``) is neither: the compiler has not decided yet (on a
loaded machine a big model's build outlasts any fixed budget), so it is counted as ``timed_out``,
outside the rejections and the node figures, until a run with a longer budget decides it; unless a
pattern of :data:`HANG_PATTERNS` explains it (a form the compiler is known to hang on): then it is a
rejection like a build error, predicted when the static check called the model ``unsupported``.

Every disagreement is classified by direction (``missed_fallback``: the compiler put it on the
CPU and the checker said NPU; ``false_alarm``: the other way), op type, and cause: the static
rule ids that fired (false alarms) or what the compiler said (missed fallbacks: QNN's REASON
text, RKNN's CPU row op type and dtype).

Plain module: no pytest, no torch (the graph is read with :mod:`pytest_npucheck.check`).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

__all__ = ["FALLBACK_PATTERNS", "HANG_PATTERNS", "REJECTION_PATTERNS", "explain_rejection", "known_classes", "markdown", "new_classes_markdown",
           "normalise_reason", "score_model", "summarise"]

_POSITIVE = {"cpu", "unsupported"}
#: the status of a compile that outlasted its time budget (toolchains' adapters: STATUSES)
TIMEOUT = "timeout"
_PREDICTS = {"npu": "npu", "folded": "npu", "cpu": "cpu", "unsupported": "unsupported"}


# --------------------------------------------------------------------------------------------
# rejections
# --------------------------------------------------------------------------------------------


def _from_graph_input(graph: Any, tensor: str) -> bool:
    """True when ``tensor`` depends on a graph input (an activation), not only on initializers."""
    inputs = set(graph.inputs) - set(graph.initializers)
    seen: set[str] = set()
    todo = [tensor]
    while todo:
        t = todo.pop()
        if t in seen or not t:
            continue
        seen.add(t)
        if t in inputs:
            return True
        i = graph.producer.get(t)
        if i is not None:
            todo.extend(graph.nodes[i].inputs)
    return False


def _resize_cubic(graph: Any) -> list[str]:
    """rknn-toolkit2 2.5.0 dies (SIGSEGV in OpEmit) on a Resize with ``mode='cubic'`` of an
    activation (data that depends on a graph input); a cubic Resize of a position-embedding
    parameter is folded at compile time and builds."""
    return [n.name for n in graph.nodes if not n.graph and n.op_type == "Resize"
            and str(n.attrs.get("mode", "nearest")) == "cubic" and _from_graph_input(graph, n.inputs[0])]


def _producer(graph: Any, tensor: str) -> Any:
    i = graph.producer.get(tensor)
    return graph.nodes[i] if i is not None else None


def _const(graph: Any, tensor: str) -> bool:
    t = graph.tensor(tensor)
    return tensor in graph.initializers or bool(t is not None and t.const)


def _consumers(graph: Any, node: Any) -> list[Any]:
    return [graph.nodes[c] for o in node.outputs for c in graph.consumers.get(o, [])]


def _rmsnorm_sqrt_reciprocal(graph: Any) -> list[str]:
    """The dynamo form of a transformers RMSNorm: ``Pow(x, 2) -> ReduceMean -> Add(eps) -> Sqrt
    -> Reciprocal`` (torch.rsqrt decomposed) ``-> Mul(x, .) -> Mul(weight, .)`` with the weight
    as the FIRST input of the last Mul: onnxruntime-qnn 2.7.0 (QNN 2.51, HTP v73 fp16) fails to
    finalise the graph (QNN_COMMON_ERROR_MEM_ALLOC). With the weight second
    (``x * rsqrt(...) * w``), or rsqrt as ``Div(1, Sqrt)`` (TorchScript), it builds. Returns the
    Pow anchors."""
    out = []
    for n in graph.nodes:
        if n.graph or n.op_type != "Reciprocal":
            continue
        chain = [n]
        for op in ("Sqrt", "Add", "ReduceMean", "Pow"):
            prev = _producer(graph, chain[-1].inputs[0]) if chain[-1].inputs else None
            if prev is None or prev.op_type != op:
                break
            chain.append(prev)
        if len(chain) != 5:
            continue
        scaled = [m for m in _consumers(graph, n) if m.op_type == "Mul"]
        weighted = [w for m in scaled for w in _consumers(graph, m)
                    if w.op_type == "Mul" and w.inputs and _const(graph, w.inputs[0])]
        if weighted:
            out.append(chain[-1].name)
    return out


def _constant_query_attention(graph: Any) -> list[str]:
    """Attention whose queries are constants (learned queries: DETR's decoder cross-attention, AIMv2's
    attention pooling): ``MatMul(q, k) [-> Mul|Div scale] [-> Add mask] -> Softmax -> MatMul`` with q
    depending on no graph input and k on one. rknn-toolkit2 2.5.0's rewrite ``fuse_matmul_softmax_matmul_to_sdpa``
    raises on it, with any number of queries (probe family ``x.MatMul.ctx=sdpa_query``); the same
    attention with queries computed from an input builds. Returns the first MatMuls."""
    out = []
    for n in graph.nodes:
        if n.graph or n.op_type != "Softmax" or not n.inputs:
            continue
        prev = _producer(graph, n.inputs[0])
        while prev is not None and prev.op_type in ("Mul", "Div", "Add") and prev.inputs:
            prev = _producer(graph, prev.inputs[0])
        if prev is None or prev.op_type != "MatMul" or len(prev.inputs) < 2 or _from_graph_input(graph, prev.inputs[0]):
            continue
        if not _from_graph_input(graph, prev.inputs[1]):
            continue  # constant keys too: the whole attention is folded at compile time
        if any(graph.nodes[c].op_type == "MatMul" for c in graph.consumers.get(n.outputs[0], [])):
            out.append(prev.name)
    return out


def _mask_cast_two_chains(graph: Any) -> list[str]:
    """A padding mask whose bool Cast of the mask input feeds two different chains (an
    encoder-decoder's self-attention and cross-attention masks of one attention_mask, as
    transformers' masking code exports them): rknn-toolkit2 2.5.0's rewrite cvt_and_to_fp_mul
    removes that Cast with the first And and build() never returns (probe family
    ``x.And.ctx=mask_chains``; the table's rule ``mask_cast_one_chain``). Returns the Ands."""
    from ..rules.context import rule_mask_cast_one_chain

    return [n.name for n in graph.nodes if not n.graph and n.op_type == "And"
            and rule_mask_cast_one_chain(n, {}, graph) is not None]


def _constant_of_shape_default_value(graph: Any) -> list[str]:
    """A ConstantOfShape without its ``value`` attribute (ONNX's default, a float32 zero; the dynamo
    exporter leaves it out): rknn-toolkit2 2.5.0's load_onnx fails on the model ("'numpy.ndarray'
    object has no attribute 'data_type'" in ``IRGraph.convert_to_fp32``), whatever the shape (probe
    family ``x.ConstantOfShape.ctx=value=*``; the table's rule ``attr_present``). Returns them."""
    return [n.name for n in graph.nodes if n.op_type == "ConstantOfShape" and "value" not in n.explicit_attrs]


def _linear_pair_add(graph: Any) -> list[str]:
    """Two linear layers by constant weights (Gemm, or MatMul with its bias Add) reading one input, directly or
    through a BatchNormalization each, with their results added (a distilled classifier's ``(head(x) +
    head_dist(x)) / 2``): rknn-toolkit2 2.5.0's rewrite ``fuse_conv_conv_add`` raises (probe family
    ``x.Gemm.ctx=dual_head``; the table's rule ``linear_pair_add``). Returns both layers."""
    from ..rules.context import rule_linear_pair_add

    return [n.name for n in graph.nodes if not n.graph and n.op_type in ("Gemm", "MatMul")
            and rule_linear_pair_add(n, {}, graph) is not None]


def _tile_transpose_perm(graph: Any) -> list[str]:
    """BoTNet's tiled relative-position logits: a Transpose (0, 3, 1, 4, 2) or (0, 3, 2, 1, 4) of an Expand of a
    unit dim a Reshape inserted into a Slice of the last axis or a MatMul: rknn-toolkit2 2.5.0's rewrite
    ``reduce_tp_in_mesh_forward`` raises (probe family ``x.Transpose.ctx=rel_pos_tile``; the table's rule
    ``tile_transpose_perm``, whose parameters this uses). Returns the Transposes."""
    from ..rules.context import rule_tile_transpose_perm

    params = {"perms": [[0, 3, 1, 4, 2], [0, 3, 2, 1, 4]], "sources": ["Slice", "MatMul"], "through": ["Relu"]}
    return [n.name for n in graph.nodes if not n.graph and n.op_type == "Transpose"
            and rule_tile_transpose_perm(n, params, graph) is not None]


#: ops whose output shape can follow the values of an input (split sizes, indices, a shape, a count)
_SHAPE_FROM_VALUES = frozenset({"Split", "NonZero", "Compress", "Unique", "TopK", "Slice", "Reshape", "Expand", "Tile",
                                "Range", "ConstantOfShape", "Pad", "Resize", "OneHot"})

#: of those, the ones whose first input decides the output's shape (the others' first input is the data)
_VALUES_IN_FIRST = frozenset({"NonZero", "Unique", "Range", "ConstantOfShape"})


def _run_time_shape(graph: Any) -> list[str]:
    """Where a shape starts to depend on run-time values in a model whose inputs are static: a node
    (a Split by sizes computed from the data, a NonZero, ...) whose inputs all have static shapes and
    whose output's shape has a dim the checker cannot fix (symbolic, or unknown), the values that decide it
    computed in the model (not a graph input). JetMoE's MoE routing
    (dynamo export: ``Split(tokens, sizes counted from the router's TopK)`` -> one Gemm per expert)
    is this form. rknn-toolkit2 2.5.0 cannot build it: fold_constant raises or folds the split away
    ("argument of type 'NoneType' is not iterable", "All outputs ... are constants"), its shape
    inference gets invalid dimensions, a NonZero "need to be constant" (ad-hoc models split by a count
    of positive rows -> MatMul | Relu | graph output, NonZero -> Gather: all fail; the same Split by
    constant sizes builds). Returns those nodes."""
    if any(graph.tensor(t) is None or not graph.tensor(t).static
           for t in graph.inputs if t not in graph.initializers):
        return []  # dynamic inputs: the shapes vary anyway (the static_shape rule's case)
    fed = set(graph.inputs) - set(graph.initializers)
    out = []
    for n in graph.nodes:
        if n.graph or n.op_type not in _SHAPE_FROM_VALUES:
            continue
        ins = [graph.tensor(t) for t in n.inputs if t]
        if any(i is None or not i.static for i in ins):
            continue
        deciding = n.inputs if n.op_type in _VALUES_IN_FIRST else n.inputs[1:]
        if any(t in fed for t in deciding):
            continue  # sizes given as a graph input: computed by no node of the model (an empty tensor's case)
        outs = [graph.tensor(t) for t in n.outputs if t]
        if any(o is None or not o.static for o in outs):
            out.append(n.name)
    return out


def _conv1d_same_pad(graph: Any) -> list[str]:
    """A 1-D Conv (rank-3 input) padded by ``auto_pad`` SAME_UPPER or SAME_LOWER (LASR's Conformer depthwise
    conv, kernel 32): rknn-toolkit2 2.5.0 turns it into a 2-D Conv and its build fails, how depends on the
    context (ONNX Runtime refuses "both 'auto_pad' and 'pads'" in fold_constant; in LASR a KeyError after
    seperate_large_kernel_conv and unsqueeze_to_4d_transpose). Ad-hoc family (Relu -> Conv1d, kernels 1, 3, 5,
    7, 15, 16, 17, 31, 32, 33, group 1 and depthwise, then BatchNormalization or Relu): every SAME_* fails,
    VALID and the same padding as explicit pads build, a rank-4 (1, 7) SAME_UPPER Conv builds; LASR with its
    Conv's auto_pad written as pads (15, 16) builds. Returns the Convs."""
    out = []
    for n in graph.nodes:
        if n.graph or n.op_type != "Conv" or str(n.attrs.get("auto_pad", "NOTSET")) not in ("SAME_UPPER", "SAME_LOWER"):
            continue
        x = graph.tensor(n.inputs[0]) if n.inputs else None
        kernel = n.attrs.get("kernel_shape")
        rank = len(x.shape) if x is not None and x.shape is not None else (len(kernel) + 2 if kernel else None)
        if rank == 3:
            out.append(n.name)
    return out


def _conv_channel_split(graph: Any) -> list[str]:
    """SKNet's selective-kernel attention: a Reshape of a Conv's (N, C, H, W) result, H or W of 1, to a rank-5
    (N, a, C / a, H, W): onnxruntime-qnn 2.7.0 (QNN 2.51, HTP v73 fp16) fails to finalise the graph
    (QNN_COMMON_ERROR_MEM_ALLOC; probe family ``q.Reshape.ctx=conv_split``, the table's rule
    ``not_conv_channel_split``, whose v73 parameters this uses). Returns the Reshapes."""
    from ..rules.context import rule_not_conv_channel_split

    return [n.name for n in graph.nodes if not n.graph and n.op_type == "Reshape"
            and rule_not_conv_channel_split(n, {"axes": [2, 3]}, graph) is not None]


def _scaled_softmax_off_last_axis(graph: Any) -> list[str]:
    """GroupViT's group assignment: a Softmax along an axis other than the last of a Mul by a rank-0 constant
    (read by nothing else): onnxruntime-qnn 2.7.0 (QNN 2.51, HTP v73 and v68 fp16) fails to finalise the graph
    (QNN_COMMON_ERROR_MEM_ALLOC; rule ``not_scaled_softmax_off_last_axis``). Returns the Softmaxes."""
    from ..rules.context import rule_not_scaled_softmax_off_last_axis

    return [n.name for n in graph.nodes if not n.graph and n.op_type == "Softmax"
            and rule_not_scaled_softmax_off_last_axis(n, {}, graph) is not None]


#: (toolchain, pattern id, finder, what the compiler does): a finder returns the nodes of a graph
#: that explain the rejection; the first pattern that finds nodes explains it.
REJECTION_PATTERNS: list[tuple[str, str, Callable[[Any], list[str]], str]] = [
    ("rknn", "resize_cubic", _resize_cubic,
     "a Resize with mode='cubic' of an activation crashes rknn-toolkit2 2.5.0 while it emits code (SIGSEGV)"),
    ("rknn", "constant_query_attention", _constant_query_attention,
     "MatMul(q, k) [-> scale] [-> mask] -> Softmax -> MatMul with constant (learned) queries: "
     "rknn-toolkit2 2.5.0's rewrite fuse_matmul_softmax_matmul_to_sdpa raises"),
    ("rknn", "mask_cast_two_chains", _mask_cast_two_chains,
     "a padding mask whose bool Cast of the mask input feeds two different chains (encoder and cross-attention "
     "masks of one attention_mask): rknn-toolkit2 2.5.0's rewrite cvt_and_to_fp_mul removes the Cast with the "
     "first And and build() never returns"),
    ("rknn", "constant_of_shape_default_value", _constant_of_shape_default_value,
     "a ConstantOfShape without its value attribute (the ONNX default, float32 zero): rknn-toolkit2 2.5.0's "
     "load_onnx fails on the model ('numpy.ndarray' object has no attribute 'data_type')"),
    ("rknn", "linear_pair_add", _linear_pair_add,
     "two linear layers by constant weights reading one input with their results added (two classifier heads "
     "summed): rknn-toolkit2 2.5.0 turns both into 1x1 Convs and its rewrite fuse_conv_conv_add raises"),
    ("rknn", "tile_transpose_perm", _tile_transpose_perm,
     "a Transpose (0, 3, 1, 4, 2) of the Expand of a Reshape of a sliced logit (BoTNet's relative-position "
     "logits): rknn-toolkit2 2.5.0's rewrite reduce_tp_in_mesh_forward raises"),
    ("rknn", "conv1d_same_pad", _conv1d_same_pad,
     "a 1-D Conv (rank-3 input) padded by auto_pad SAME_UPPER or SAME_LOWER: rknn-toolkit2 2.5.0 makes it a 2-D "
     "Conv and its build fails (explicit pads or VALID build)"),
    ("qnn", "rmsnorm_sqrt_reciprocal", _rmsnorm_sqrt_reciprocal,
     "an RMSNorm with torch.rsqrt exported as Sqrt -> Reciprocal and the weight as the first "
     "input of its last Mul fails QNN graph finalisation (QNN_COMMON_ERROR_MEM_ALLOC)"),
    ("qnn", "conv_channel_split", _conv_channel_split,
     "a Conv's (N, C, H, W) result with a unit plane dim reshaped to (N, a, C / a, H, W) (SKNet's selective-kernel "
     "attention) fails QNN graph finalisation (QNN_COMMON_ERROR_MEM_ALLOC)"),
    ("qnn", "scaled_softmax_off_last_axis", _scaled_softmax_off_last_axis,
     "a Softmax along an axis other than the last of a Mul by a rank-0 constant (GroupViT's group assignment) "
     "fails QNN graph finalisation (QNN_COMMON_ERROR_MEM_ALLOC)"),
]

#: patterns tried last, when neither :data:`REJECTION_PATTERNS` nor the compiler's own messages explain a
#: rejection: a wide form several more specific explanations share (an empty tensor, a fuse rule's trace)
FALLBACK_PATTERNS: list[tuple[str, str, Callable[[Any], list[str]], str]] = [
    ("rknn", "run_time_shape", _run_time_shape,
     "a shape that follows run-time values in a model with static inputs (a Split by sizes computed from the "
     "data, a NonZero): rknn-toolkit2 2.5.0's build fails (fold_constant or its shape inference raises)"),
]

#: patterns that explain a compile that never ends: a ``timeout`` they explain is a rejection
HANG_PATTERNS = frozenset({"mask_cast_two_chains"})

#: a bare KeyError's message: the quoted name the compiler looked up and did not find
_KEY_ERROR_RE = re.compile(r"""^['"](?P<tensor>[^'"]+)['"]$""")
_UNRECOGNIZED_ATTR_RE = re.compile(r"Unrecognized attribute: (?P<attr>\w+) for operator (?P<op>\w+)")


def explain_rejection(toolchain: str, graph: Any, message: str, log: Optional[str] = None,
                      timed_out: bool = False) -> tuple[str, list[str], str]:
    """``(pattern id, nodes, explanation)`` of a rejected model: a graph pattern of
    :data:`REJECTION_PATTERNS`; RKNN's own trace of the fuse rule that raised (``Rule: ... Op
    name: ...`` in the build log: ``rknn_rule:<rule>``; an empty tensor RKNN calls abnormal:
    ``empty_tensor``, its producer named: the toolchain's ``zoo`` hook); an attribute the toolkit's ONNX checker does not
    know (``unknown_attribute:<op>.<attr>``); nodes named in the message; a message that is only a
    quoted tensor name (a KeyError of the compiler on a tensor it lost) names the node that
    produces it, or else the nodes that read it (``tensor_in_message:<ops>``); a pattern of
    :data:`FALLBACK_PATTERNS`; else ``("unexplained",
    [], message head)``. The patterns of :data:`HANG_PATTERNS` explain a compile that ran out of
    its time budget (``timed_out``) only."""
    if "ShapeInferenceError" in (message or "") or "[ONNXRuntimeError] : 1 : FAIL : Load model" in (message or ""):
        named = [n.name for n in graph.nodes if not n.graph and n.name and n.name in message]
        return ("invalid_model", named[:1],
                "ONNX Runtime's own checks refuse the exported file (not the compiler's doing): " + _message_head(message))
    for tc, pid, finder, text in REJECTION_PATTERNS:
        if tc == toolchain and (pid in HANG_PATTERNS) == timed_out:
            found = finder(graph)
            if found:
                return pid, found, text
    names = {n.name for n in graph.nodes if not n.graph and n.name}
    zoo = _zoo(toolchain)
    found = zoo.rejection(message, log, names, graph) if zoo is not None else None
    if found is not None:
        return found
    m = _UNRECOGNIZED_ATTR_RE.search(message or "")
    if m:
        nodes = [n.name for n in graph.nodes if not n.graph and n.op_type == m.group("op")
                 and m.group("attr") in n.explicit_attrs]
        return (f"unknown_attribute:{m.group('op')}.{m.group('attr')}", nodes,
                f"the toolkit's ONNX checker does not know the attribute {m.group('attr')} of {m.group('op')}")
    named = [nm for nm in sorted(names) if len(nm) > 3
             and re.search(r"(?<![\w/.])" + re.escape(nm) + r"(?![\w/.])", message or "")]
    if named:
        return "named_in_message", named[:5], _message_head(message)
    tensor = _KEY_ERROR_RE.match((message or "").strip())
    if tensor:
        name = tensor.group("tensor")
        producer = _producer(graph, name)
        readers = [producer] if producer is not None else [graph.nodes[c] for c in graph.consumers.get(name, [])]
        readers = [n for n in readers if n.name and not n.graph]
        if readers:
            ops = "+".join(sorted({n.op_type for n in readers}))
            role = "output" if producer is not None else "input"
            return (f"tensor_in_message:{ops}", [n.name for n in readers][:5],
                    f"the compiler lost the tensor {name}, {role} of {', '.join(n.name for n in readers[:3])} "
                    "(a KeyError on its name)")
    for tc, pid, finder, text in FALLBACK_PATTERNS:
        if tc == toolchain and not timed_out:
            found = finder(graph)
            if found:
                return pid, found, text
    return "unexplained", [], _message_head(message)


def _message_head(message: str) -> str:
    lines = [ln.strip() for ln in (message or "").splitlines() if ln.strip()]
    return " | ".join(lines[-2:])[:300]


# --------------------------------------------------------------------------------------------
# one model
# --------------------------------------------------------------------------------------------


def _zoo(toolchain: str) -> Any:
    """The toolchain's ``zoo`` hook (how its stored records are read), or None when it has none."""
    from ..toolchains import registry

    tc = registry.find(toolchain)
    return tc.hook("zoo") if tc is not None and tc.zoo is not None else None


def _real_reason(zoo: Any, node: str, real: Mapping[str, Any]) -> str:
    if zoo is not None:
        return zoo.reason(node, real)
    texts = (real.get("reasons") or {}).get(node) or []
    return normalise_reason(texts[0]) if texts else "no reason recorded"


def normalise_reason(text: str) -> str:
    """A reason with names and numbers taken out, so equal causes group together."""
    t = re.sub(r"'[^']*'", "'*'", text)
    t = re.sub(r"\b\d+\b", "N", t)
    return t[:160]


def score_model(onnx_path: Path, table: Any, real: Mapping[str, Any], log: Optional[str] = None) -> dict[str, Any]:
    """Static verdicts of one exported model against one compiler record (see the module doc).

    ``real``: ``{"arch", "exporter", "toolchain", "status", "message", "placement", ...}`` as the
    harness stores it; ``log``: the RKNN build log (rewrite trace), when kept."""
    from ..check import check_graph, graph_facts

    graph = graph_facts(Path(onnx_path))
    [static] = check_graph(graph, [table])
    toolchain = real.get("toolchain", table.toolchain)
    built = real.get("status") == "ok"
    rec: dict[str, Any] = {"arch": real.get("arch"), "exporter": real.get("exporter"), "toolchain": toolchain,
                           "target": table.target, "status": real.get("status"),
                           "static_verdict": static.verdict, "built": built}
    if not built:
        timed_out = real.get("status") == TIMEOUT
        pid, nodes, text = explain_rejection(toolchain, graph, real.get("message", ""), log, timed_out)
        static_unsupported = [n.name for n in static.nodes if n.verdict == "unsupported" and not n.graph]
        rec["rejection"] = {"pattern": pid, "nodes": nodes, "explanation": text,
                            "message": _message_head(real.get("message", "")),
                            "static_predicts_rejection": static.verdict == "unsupported",
                            "static_marks_node": bool(set(nodes) & set(static_unsupported)),
                            "hang": timed_out and pid in HANG_PATTERNS}
        return rec
    # a rejection pattern that matches a model the compiler builds is too wide: counted in the summary
    rec["pattern_hits"] = [pid for tc, pid, finder, _ in REJECTION_PATTERNS + FALLBACK_PATTERNS
                           if tc == toolchain and finder(graph)]
    zoo = _zoo(toolchain)
    if zoo is not None:
        placement, real, fields = zoo.placement(Path(onnx_path), real, log)
        rec.update(fields)  # RKNN: unmapped_cpu_rows, the CPU work the mapping could not give to an ONNX node
    else:
        placement = dict(real.get("placement") or {})
    tp = fp = fn = tn = wrong_kind = 0
    dis: list[dict[str, Any]] = []
    for node in static.nodes:
        if node.graph:  # the compilers report top-level nodes only
            continue
        predicted = _PREDICTS[node.verdict]
        actual = placement.get(node.name, "npu")
        p, a = predicted in _POSITIVE, actual in _POSITIVE
        if p and a:
            tp += 1
            wrong_kind += predicted == "unsupported"
        elif a:
            fn += 1
            dis.append({"node": node.name, "op_type": node.op_type, "direction": "missed_fallback",
                        "static": node.verdict, "real": actual,
                        "cause": _real_reason(zoo, node.name, real)})
        elif p:
            fp += 1
            rules = sorted({r.rule for r in node.reasons if r.verdict in _POSITIVE}) or ["?"]
            dis.append({"node": node.name, "op_type": node.op_type, "direction": "false_alarm",
                        "static": node.verdict, "real": actual, "cause": "rule " + "+".join(rules),
                        "static_reason": next((r.message for r in node.reasons), "")[:200]})
        else:
            tn += 1
    rec.update(nodes=tp + fp + fn + tn, tp=tp, fp=fp, fn=fn, tn=tn, unsupported_but_runs=wrong_kind,
               disagreements=dis)
    return rec


# --------------------------------------------------------------------------------------------
# the zoo
# --------------------------------------------------------------------------------------------


def _undecided(r: Mapping[str, Any]) -> bool:
    """A compile that ran out of its budget and that no hang pattern explains."""
    return r.get("status") == TIMEOUT and not (r.get("rejection") or {}).get("hang")


def _figures(recs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    scored = [r for r in recs if r.get("built")]
    invalid = [r for r in recs if not r.get("built") and r["rejection"]["pattern"] == "invalid_model"]
    timed_out = [r for r in recs if _undecided(r)]
    rejected = [r for r in recs if not r.get("built") and r["rejection"]["pattern"] != "invalid_model"
                and not _undecided(r)]
    tp, fp, fn, tn = (sum(r.get(k, 0) for r in scored) for k in ("tp", "fp", "fn", "tn"))
    n = tp + fp + fn + tn
    pred_rej = sum(1 for r in rejected if r["rejection"]["static_predicts_rejection"])
    false_rej = sum(1 for r in scored if r.get("static_verdict") == "unsupported")
    return {
        "files": len(recs), "architectures": len({r["arch"] for r in recs}),
        "built": len(scored), "rejected": len(rejected), "invalid_files": len(invalid), "timed_out": len(timed_out),
        "rejections_explained": sum(1 for r in rejected if r["rejection"]["pattern"] != "unexplained"),
        "rejections_predicted": pred_rej,
        "static_says_rejected_but_builds": false_rej,
        "nodes": n, "tp": tp, "fp": fp, "fn": fn, "tn": tn,
        "agreement": round((tp + tn) / n, 6) if n else None,
        "recall": round(tp / (tp + fn), 6) if tp + fn else None,
        "precision": round(tp / (tp + fp), 6) if tp + fp else None,
        "all_npu_agreement": round((fp + tn) / n, 6) if n else None,
        "positives": tp + fn,
        "unmapped_cpu_rows": sum(len(r.get("unmapped_cpu_rows", ())) for r in scored),
    }


def summarise(records: Sequence[Mapping[str, Any]], skipped: Mapping[str, str]) -> dict[str, Any]:
    """Figures per target and per (target, exporter), classified disagreements, rejections."""
    # a file ONNX Runtime refuses (seen through the QNN EP) is an invalid export for every toolchain
    invalid = {(r["arch"], r["exporter"]) for r in records
               if not r.get("built") and r["rejection"]["pattern"] == "invalid_model"}
    records = [{**r, "rejection": {**r["rejection"], "pattern": "invalid_model"}}
               if not r.get("built") and (r["arch"], r["exporter"]) in invalid else r for r in records]
    by_target: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for r in records:
        by_target[r["target"]].append(r)
    out: dict[str, Any] = {"targets": {}, "skipped": dict(sorted(skipped.items()))}
    for target, recs in sorted(by_target.items()):
        per_exporter = {e: _figures([r for r in recs if r["exporter"] == e])
                        for e in sorted({r["exporter"] for r in recs})}
        classes: Counter[tuple[str, str, str]] = Counter()
        examples: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        models: dict[tuple[str, str, str], set[str]] = defaultdict(set)
        for r in recs:
            for d in r.get("disagreements", ()):
                key = (d["direction"], d["op_type"], d["cause"])
                classes[key] += 1
                models[key].add(f"{r['arch']}.{r['exporter']}")
                if len(examples[key]) < 3:
                    examples[key].append(f"{r['arch']}.{r['exporter']}:{d['node']}")
        rejections: Counter[tuple[str, str]] = Counter()
        rej_examples: dict[tuple[str, str], list[str]] = defaultdict(list)
        timeouts = sorted(f"{r['arch']}.{r['exporter']}" for r in recs if _undecided(r))
        for r in recs:
            if not r.get("built") and not _undecided(r):
                rj = r["rejection"]
                key = (r["status"], rj["pattern"] if rj["pattern"] != "unexplained" else "unexplained: " + rj["message"][:120])
                rejections[key] += 1
                if len(rej_examples[key]) < 4:
                    rej_examples[key].append(f"{r['arch']}.{r['exporter']}" + (f" [{','.join(rj['nodes'][:2])}]" if rj["nodes"] else "")
                                             + (" (static: unsupported)" if rj["static_predicts_rejection"] else ""))
        out["targets"][target] = {
            "all": _figures(recs), "exporters": per_exporter,
            "classes": [{"direction": k[0], "op_type": k[1], "cause": k[2], "nodes": v,
                         "models": len(models[k]), "files": sorted(models[k]), "examples": examples[k]}
                        for k, v in classes.most_common()],
            "rejections": [{"status": k[0], "pattern": k[1], "models": v, "examples": rej_examples[k]}
                           for k, v in rejections.most_common()],
            "timed_out": timeouts,
            "patterns_matching_built_models": dict(Counter(p for r in recs for p in r.get("pattern_hits", ()))),
        }
    return out


def _pct(x: Optional[float]) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def markdown(summary: Mapping[str, Any], top: int = 15) -> list[str]:
    """The summary as Markdown lines (docs/tables.md, section "Agreement on a model zoo")."""
    lines = ["| target | exporter | architectures | files built | rejected (static said so) | nodes | agreement | recall | precision | all-NPU agreement |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for target, t in summary["targets"].items():
        for exp, f in list(t["exporters"].items()) + [("both", t["all"])]:
            lines.append(f"| {target} | {exp} | {f['architectures']} | {f['built']} | {f['rejected']} ({f['rejections_predicted']}) | {f['nodes']} | "
                         f"{_pct(f['agreement'])} | {_pct(f['recall'])} | {_pct(f['precision'])} | {_pct(f['all_npu_agreement'])} |")
    for target, t in summary["targets"].items():
        lines += ["", f"Top disagreement classes, {target} (nodes; direction, op, cause):", ""]
        for c in t["classes"][:top]:
            lines.append(f"- {c['nodes']} x {c['direction']} {c['op_type']}: {c['cause']} (e.g. {', '.join(c['examples'][:2])})")
        if t["rejections"]:
            lines += ["", f"Models {target} rejects (status, pattern):", ""]
            for rj in t["rejections"]:
                lines.append(f"- {rj['models']} x {rj['status']} {rj['pattern']} (e.g. {'; '.join(rj['examples'][:3])})")
        if t.get("timed_out"):
            lines += ["", f"Compiles that ran out of their time budget and no hang pattern explains "
                      f"({len(t['timed_out'])}; not scored, not rejections: re-run with `compile --retry-timeouts --timeout 1200`): "
                      + ", ".join(t["timed_out"])]
        wide = t.get("patterns_matching_built_models") or {}
        if wide:
            lines += ["", "Rejection patterns that also match models the compiler builds (too wide): "
                      + ", ".join(f"{k} {v}" for k, v in sorted(wide.items()))]
    return lines


_CLASS_LINE_RE = re.compile(r"^- \d+ x (?P<direction>missed_fallback|false_alarm) (?P<op>\w+): (?P<cause>.*?) \(e\.g\. ")


def known_classes(text: str) -> set[tuple[str, str, str]]:
    """The disagreement classes ``(direction, op type, cause)`` a document already lists, in the
    form :func:`markdown` writes them (``- 34 x false_alarm Einsum: rule attr_in (e.g. ...)``;
    docs/tables.md, section "Agreement on a model zoo")."""
    out = set()
    for line in text.splitlines():
        m = _CLASS_LINE_RE.match(line.strip())
        if m:
            out.add((m.group("direction"), m.group("op"), m.group("cause")))
    return out


def new_classes_markdown(summary: Mapping[str, Any], known: set[tuple[str, str, str]], known_text: str = ""
                         ) -> list[str]:
    """The classes of ``summary`` that ``known`` does not list, per target, largest first: for
    the engineers who fix the tables (direction, op, cause, nodes, models, example nodes); then
    the rejections (status, pattern) that ``known_text`` (the document) does not list."""
    lines = ["# Disagreement classes not yet listed in docs/tables.md", "",
             "Written by `scripts/zoo_agreement.py score`; a class is (direction, op type, cause).", ""]
    for target, t in summary["targets"].items():
        fresh = [c for c in t["classes"] if (c["direction"], c["op_type"], c["cause"]) not in known]
        lines += [f"## {target}", "", "| nodes | models | direction | op | cause | example nodes |",
                  "|---|---|---|---|---|---|"]
        for c in fresh:
            cause = c["cause"].replace("|", "\\|")
            lines.append(f"| {c['nodes']} | {c['models']} | {c['direction']} | {c['op_type']} | {cause} | "
                         + "<br>".join(f"`{e}`" for e in c["examples"]) + " |")
        if not fresh:
            lines.append("| 0 | | | | (none) | |")
        lines.append("")
        fresh_rej = [r for r in t["rejections"] if f"x {r['status']} {r['pattern']} (" not in known_text]
        if fresh_rej:
            lines += [f"Rejections by {target} the document does not list (models; status, pattern; "
                      "'static: unsupported' where the static check predicted it):", ""]
            lines += [f"- {r['models']} x {r['status']} {r['pattern']} (e.g. {'; '.join(r['examples'][:3])})"
                      for r in fresh_rej]
            lines.append("")
    return lines
