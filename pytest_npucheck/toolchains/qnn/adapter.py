"""Adapter for Qualcomm QNN (HTP) through ONNX Runtime's QNN execution provider.

``onnxruntime-qnn`` is a plugin execution provider for onnxruntime >= 1.24.2; it runs the QNN
HTP backend in x86 emulation, so no Snapdragon device is needed.  It lives in its own virtual
environment (found from an explicit argument or the ``NPUCHECK_QNN_PYTHON`` environment
variable) and is driven in a subprocess executing :mod:`pytest_npucheck.toolchains.qnn._qnn_worker`.

For every model the worker creates an ``InferenceSession`` with the QNN EP (``backend_path`` =
the HTP library, ``htp_arch``, ``soc_model``, and ``enable_htp_fp16_precision=1`` for fp16; for
int8 the model is first QDQ-quantized with ``onnxruntime.quantization`` and random calibration
data) and reports:

* the per-node assignment from the public API
  ``InferenceSession.get_provider_graph_assignment_info()`` (``Session_GetEpGraphAssignmentInfo``
  in the C API; needs the session config ``session.record_ep_graph_assignment_info=1``).  The
  QNN EP renames nodes it converts to NHWC (``conv`` -> ``conv_token_1``) and adds Transpose /
  Reshape helpers, and ONNX Runtime's basic optimizations fold constants and fuse nodes
  (MatMul+Add -> ``mm/MatMulAddFusion`` Gemm, Conv+BatchNormalization -> Conv, decomposed
  LayerNorm -> ``.../LayerNormFusion/``) before the execution providers choose nodes; the worker
  therefore also returns the graph after those optimizations (from a CPU-only session with
  ``optimized_model_filepath``) and :func:`map_placement` maps every ONNX node of the model to
  ``npu`` (QNNExecutionProvider), ``cpu`` (CPUExecutionProvider), ``folded`` (removed before
  partitioning) or ``removed`` (in no partition, e.g. a Transpose pair cancelled by the layout
  transformation);
* the reason text of every rejected node from the verbose log (``log_severity_level=0``):
  ``Validation FAILED for N nodes in OrtNodeUnit (Erf) : ... REASON : ...``;
* the QNN backend build the library reports (``Backend build version: v2.51.0.<stamp>``) and the
  QNN API interface version.

Each model runs in isolation: the worker streams one result per model and, when it crashes or
hangs, the parent records that model as ``crashed`` / ``timeout`` and starts a fresh worker for
the remaining ones.

Only the standard library is imported at module level.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

from .. import batch
from ..batch import strip_ansi
from ..venv import find_python

__all__ = [
    "ENV_VAR",
    "DEFAULT_SOC_MODEL",
    "QnnUnavailable",
    "QnnResult",
    "ModelJob",
    "Validation",
    "find_qnn_python",
    "place_models",
    "compile_models",
    "parse_validations",
    "parse_backend_version",
    "parse_placement_summary",
    "map_placement",
    "cpu_helper_replacements",
    "onnx_placement",
    "strip_ansi",
]

ENV_VAR = "NPUCHECK_QNN_PYTHON"
"""Environment variable naming the python executable of a venv with onnxruntime-qnn."""

WORKER = Path(__file__).with_name("_qnn_worker.py")

QNN_EP = "QNNExecutionProvider"
CPU_EP = "CPUExecutionProvider"

STATUSES = ("ok", "session_failed", "quantize_failed", "load_failed", "crashed", "timeout")

#: Default ``soc_model`` per HTP architecture (QNN SoC ids: SA8295P=39 v68, SM8450=36 v69,
#: SM8550=43 v73, SM8650=57 v75, SM8750=69 v79).  fp16 precision needs ``soc_model`` and
#: ``htp_arch`` to be set together.  The SoC matters in emulation: with htp_arch 68 and
#: soc_model 30 (or none), many graphs fail to finalize with QNN_COMMON_ERROR_MEM_ALLOC (Gather,
#: Where, strided Slice, LSTM, ...) that finalize with soc_model 39 (8 MB VTCM).
DEFAULT_SOC_MODEL = {68: 39, 69: 36, 73: 43, 75: 57, 79: 69}

_ORT_PREFIX_RE = re.compile(
    r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ \[(?P<level>[VIWEF]):onnxruntime:[^\]]*\] ?")
_VALIDATION_RE = re.compile(
    r"Validation (?P<result>PASSED|FAILED) for (?P<n>\d+) nodes in (?:Ort)?NodeUnit "
    r"\((?P<unit>[^)]*)\)")
_OPERATOR_RE = re.compile(
    r"Operator type: (?P<op>\S+) Node name: (?P<name>.*?) Node index: (?P<index>\d+)\s*$")
_REASON_RE = re.compile(r"^\s*REASON\s*:\s*(?P<reason>.*)$")
_BACKEND_RE = re.compile(r"Backend build version: v?(?P<full>(?P<ver>\d+\.\d+\.\d+)[\w.]*)")
_INTERFACE_RE = re.compile(r"interface version: (?P<ver>\d+\.\d+\.\d+)")
_PLACED_RE = re.compile(r"Node\(s\) placed on \[(?P<ep>\w+)\]\. Number of nodes: (?P<n>\d+)")
#: suffixes the QNN EP / ORT layout transformation append to node names
_RENAME_SUFFIX_RE = re.compile(r"(?:_token_\d+|_new_reshape)$")


class QnnUnavailable(RuntimeError):
    """The onnxruntime-qnn python cannot be found or the worker cannot set up the QNN EP."""


@dataclass
class Validation:
    """One ``Validation PASSED/FAILED`` record of the QNN EP's capability pass."""

    passed: bool
    unit: str
    op_type: str
    name: str
    index: int
    reason: str = ""
    pass_no: int = 1


@dataclass
class QnnResult:
    """Outcome of creating a QNN EP session for one model."""

    key: str
    path: str
    status: str
    """One of ``ok``, ``session_failed``, ``quantize_failed``, ``load_failed``, ``crashed``,
    ``timeout``."""
    message: str = ""
    placement: dict[str, str] = field(default_factory=dict)
    """ONNX node name -> ``npu`` / ``cpu`` / ``folded`` / ``removed`` (see :func:`map_placement`);
    empty unless ``status == "ok"``."""
    via: dict[str, str] = field(default_factory=dict)
    """How a node that is not in the assignment under its own name was mapped."""
    reasons: dict[str, list[str]] = field(default_factory=dict)
    """ONNX node name -> distinct REASON texts of failed validations."""
    op_types: dict[str, str] = field(default_factory=dict)
    helpers: dict[str, list[str]] = field(default_factory=dict)
    """EP -> nodes of the assignment that are not ONNX nodes of the model (inserted Transpose /
    Reshape, Q/DQ of an int8 model, ...), as ``name:op_type``."""
    assignment: list[dict[str, Any]] = field(default_factory=list)
    validations: list[Validation] = field(default_factory=list)
    backend_version: str | None = None
    """QNN SDK version of the backend library (``2.51.0``)."""
    backend_build: str | None = None
    """Full backend build string (``2.51.0.260929181845``)."""
    interface_version: str | None = None
    placed_counts: dict[str, int] = field(default_factory=dict)
    precision: str = "fp16"
    provider_options: dict[str, str] = field(default_factory=dict)
    seconds: float | None = None
    stage: str | None = None
    log: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the session was created."""
        return self.status == "ok"

    def cpu_nodes(self) -> list[str]:
        """ONNX nodes placed on the CPU execution provider."""
        return [n for n, p in self.placement.items() if p == "cpu"]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        d = asdict(self)
        if d.get("log") is None:
            d.pop("log", None)
        return d


@dataclass
class ModelJob:
    """A model to place."""

    path: str
    key: str | None = None
    debug: dict[str, Any] | None = None
    """Test hooks for the worker: ``{"crash": exit_code}`` or ``{"hang": seconds}``."""


# --------------------------------------------------------------------------------------------
# Log parsing
# --------------------------------------------------------------------------------------------


def _log_lines(log: str) -> list[tuple[str, str]]:
    """(level, text) per line; continuation lines (no ORT prefix) get level ``""``."""
    out = []
    for ln in strip_ansi(log).splitlines():
        m = _ORT_PREFIX_RE.match(ln)
        out.append((m.group("level"), ln[m.end():]) if m else ("", ln))
    return out


def parse_validations(log: str) -> list[Validation]:
    """Every ``Validation PASSED/FAILED`` record of a verbose QNN EP log, in order.

    A record covers all nodes of a node unit (``Operator type: ... Node name: ... Node index:``
    lines), followed by a ``REASON :`` line when it failed.  ``pass_no`` counts the capability
    passes (``GetCapability pass N``); pass 2 runs after the layout transformation.
    """
    out: list[Validation] = []
    pass_no = 1
    unit: tuple[bool, str] | None = None
    current: list[Validation] = []
    for level, text in _log_lines(log):
        mp = re.search(r"GetCapability pass (\d+)", text)
        if mp:
            pass_no = int(mp.group(1))
            unit, current = None, []
            continue
        m = _VALIDATION_RE.search(text)
        if m:
            unit, current = (m.group("result") == "PASSED", m.group("unit")), []
            continue
        if unit is None:
            continue
        mo = _OPERATOR_RE.search(text)
        if mo:
            v = Validation(unit[0], unit[1], mo.group("op"), mo.group("name"),
                           int(mo.group("index")), "", pass_no)
            out.append(v)
            current.append(v)
            continue
        mr = _REASON_RE.match(text)
        if mr:
            for v in current:
                v.reason = mr.group("reason").strip()
            unit, current = None, []
            continue
        if level:  # a new log record ends the node unit
            unit, current = None, []
    return out


def parse_backend_version(log: str) -> tuple[str | None, str | None, str | None]:
    """``(sdk_version, full_build, interface_version)`` reported by the QNN backend library,
    e.g. ``("2.51.0", "2.51.0.260929181845", "2.40.0")``; ``None`` for what is missing."""
    text = strip_ansi(log)
    m = _BACKEND_RE.search(text)
    i = _INTERFACE_RE.search(text)
    return (m.group("ver") if m else None, m.group("full") if m else None,
            i.group("ver") if i else None)


def parse_placement_summary(log: str) -> dict[str, int]:
    """ONNX Runtime's ``Node(s) placed on [EP]. Number of nodes: N`` summary."""
    return {m.group("ep"): int(m.group("n")) for m in _PLACED_RE.finditer(strip_ansi(log))}


def _errors(log: str) -> list[str]:
    msgs: list[str] = []
    for level, text in _log_lines(log):
        if level in ("E", "F"):
            t = text.strip()
            if t and t not in msgs:
                msgs.append(t)
    return msgs


# --------------------------------------------------------------------------------------------
# Mapping the assignment back to the ONNX nodes
# --------------------------------------------------------------------------------------------


def _display_names(nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    """Node names, with ``<OpType>_<index>`` for unnamed nodes."""
    return [n.get("name") or "%s_%d" % (n.get("op_type", "node"), i) for i, n in enumerate(nodes)]


def _ep_verdict(ep: str) -> str:
    if ep == QNN_EP:
        return "npu"
    if ep == CPU_EP:
        return "cpu"
    return ep


# ops whose result depends only on their input's shape, not its values
_SHAPE_ONLY_OPS = frozenset({"Shape", "Size"})


def _constant_folded(sess: Sequence[Mapping[str, Any]], vanished: Sequence[bool],
                     l1_inits: set[str], l1: Mapping[str, Any] | None) -> list[bool]:
    """Which vanished session nodes onnxruntime computed at load time (constant folding).

    A vanished node whose output became an initializer of the optimized graph was folded, and so was
    a vanished Shape or Size (onnxruntime removes one only when its input's shape is static). So was
    every vanished producer of a folded node's inputs (a node is folded only when all its inputs
    are constants), except through the data input of Shape/Size, which reads only the (static)
    shape; and every vanished node whose inputs are all constants (initializers, Constant nodes,
    folded results). This tells a shape computation whose folded value a later fusion took into a
    new constant of its own (TorchScript's ``Shape -> Gather -> Div -> Cast -> Unsqueeze ->
    Concat`` target of a Reshape merged with MatMulAddFusion's Reshape back) from the nodes that
    fusion really absorbed.
    """
    n = len(sess)
    producer: dict[str, int] = {}
    for i, nd in enumerate(sess):
        for t in nd.get("outputs", ()):
            if t:
                producer.setdefault(t, i)
    graph_inputs = set(l1.get("inputs") or ()) if l1 else set()
    know_inputs = bool(l1 and l1.get("inputs") is not None)
    folded = [False] * n
    const_t: set[str] = set(l1_inits)
    for i, nd in enumerate(sess):
        if nd.get("op_type") == "Constant" and nd.get("domain", "") in ("", "ai.onnx"):
            const_t.update(t for t in nd.get("outputs", ()) if t)
        for t in nd.get("inputs", ()):
            # an unproduced tensor that is not a graph input is an initializer of the model
            if t and know_inputs and t not in producer and t not in graph_inputs:
                const_t.add(t)
    for i, nd in enumerate(sess):
        # a Shape or Size onnxruntime removed read a static shape (constant folding, or a fusion that
        # made the shape computation a constant): it never runs
        if vanished[i] and (nd.get("op_type") in _SHAPE_ONLY_OPS
                            or any(t in l1_inits for t in nd.get("outputs", ()) if t)):
            folded[i] = True
            const_t.update(t for t in nd.get("outputs", ()) if t)
    changed = True
    while changed:
        changed = False
        for i, nd in enumerate(sess):
            if not vanished[i]:
                continue
            if folded[i]:
                if nd.get("op_type") in _SHAPE_ONLY_OPS:
                    continue
                for t in nd.get("inputs", ()):
                    j = producer.get(t) if t else None
                    if j is not None and vanished[j] and not folded[j]:
                        folded[j] = changed = True
                    if t and t not in const_t:
                        const_t.add(t)
                        changed = True
            else:
                ins = [t for t in nd.get("inputs", ()) if t]
                if ins and all(t in const_t for t in ins):
                    folded[i] = changed = True
            if folded[i]:
                for t in nd.get("outputs", ()):
                    if t and t not in const_t:
                        const_t.add(t)
                        changed = True
    return folded


def map_placement(nodes: Sequence[Mapping[str, Any]],
                  assignment: Sequence[Mapping[str, Any]],
                  l1: Mapping[str, Any] | None = None,
                  validations: Sequence[Validation] = (),
                  session_nodes: Sequence[Mapping[str, Any]] | None = None,
                  noops: Collection[str] = (),
                  ) -> dict[str, Any]:
    """Per-ONNX-node placement from the session's EP assignment.

    Args:
        nodes: ``[{"name", "op_type", "inputs", "outputs"}]`` of the model as given.
        assignment: ``[{"ep", "nodes": [{"name", "op_type", "domain"}]}]`` (public API).
        l1: ``{"nodes", "initializers"}`` of the graph after ORT's basic optimizations (what
            the EPs were offered); without it, only name matching is done.
        validations: parsed validation records (for the reason texts).
        session_nodes: nodes of the model handed to ORT when it differs from ``nodes`` (the
            QDQ model of an int8 run); ONNX nodes are matched to it by name.
        noops: names of nodes whose output is their input 0 unchanged (an Expand to its input's own
            shape: :func:`noop_expands`); one that vanished was eliminated (ExpandElimination), not
            fused into the node its readers became (a Reshape it sat between merged with the one
            before it: MViTv2's rel-pos bias, q.Reshape.ctx=merged.r6.noop_expand).

    Returns:
        ``{"placement": {node: verdict}, "via": {node: how}, "reasons": {node: [text]},
        "helpers": {ep: ["name:op_type"]}, "op_types": {node: op_type}}`` where verdict is
        ``npu`` (QNN EP), ``cpu`` (CPU EP), ``folded`` (removed by ORT before partitioning:
        constant folding, Identity/Dropout elimination, ...), ``removed`` (in the optimized
        graph but in no partition) or the name of another EP.
    """
    sess = list(session_nodes) if session_nodes is not None else list(nodes)
    sess_names = _display_names(sess)
    # --- assignment: name -> ep
    assigned: dict[str, str] = {}
    assigned_op: dict[str, str] = {}
    for sg in assignment:
        for n in sg.get("nodes", ()):
            assigned.setdefault(n["name"], sg["ep"])
            assigned_op.setdefault(n["name"], n.get("op_type", ""))
    # --- the optimized (level 1) graph
    if l1 and l1.get("nodes") is not None:
        l1_nodes = list(l1["nodes"])
        l1_inits = set(l1.get("initializers", ()))
    else:  # no optimized graph: pretend nothing changed
        l1_nodes = [dict(n) for n in sess]
        l1_inits = set()
    l1_names = [n.get("name", "") for n in l1_nodes]
    l1_by_name = {nm: i for i, nm in enumerate(l1_names) if nm}
    l1_producer: dict[str, int] = {}
    for i, n in enumerate(l1_nodes):
        for t in n.get("outputs", ()):
            if t:
                l1_producer.setdefault(t, i)
    # L1 node -> ep
    l1_ep: dict[int, tuple[str, str]] = {}
    claimed: set[str] = set()
    for i, nm in enumerate(l1_names):
        if nm and nm in assigned:
            l1_ep[i] = (assigned[nm], "")
            claimed.add(nm)
    for an, ep in assigned.items():  # renamed by the layout transformation
        if an in claimed:
            continue
        base = an
        while True:
            b2 = _RENAME_SUFFIX_RE.sub("", base)
            if b2 == base:
                break
            base = b2
            if base in l1_by_name:
                i = l1_by_name[base]
                if i not in l1_ep:
                    l1_ep[i] = (ep, "as %s" % an)
                claimed.add(an)
                break
    # --- session node -> L1 node (or folded)
    sess_consumers: dict[str, list[int]] = {}
    for i, n in enumerate(sess):
        for t in n.get("inputs", ()):
            if t:
                sess_consumers.setdefault(t, []).append(i)
    vanished = [sess_names[i] not in l1_by_name or not sess[i].get("name") for i in
                range(len(sess))]
    const_folded = _constant_folded(sess, vanished, l1_inits, l1)

    def walk(i: int, seen: set[int]) -> tuple[str, int | None]:
        """Follow a vanished node's outputs: ('fused', l1 index) / ('folded', None) /
        ('eliminated', None)."""
        seen.add(i)
        folded = False
        for t in sess[i].get("outputs", ()):
            if not t:
                continue
            if t in l1_producer:
                return "fused", l1_producer[t]
            if t in l1_inits:
                folded = True
        if folded:  # its value became an initializer
            return "folded", None
        for t in sess[i].get("outputs", ()):
            if t and any(not vanished[c] for c in sess_consumers.get(t, ())):
                # a reader is still in the optimized graph but nothing there makes this tensor: the
                # reader was rewired to another value (a Cast to its own dtype removed, a duplicate
                # merged into its twin), so this node was eliminated, whatever its other readers became
                return "eliminated", None
        for t in sess[i].get("outputs", ()):
            for c in sess_consumers.get(t, ()):
                if c in seen or not vanished[c]:
                    continue
                kind, idx = walk(c, seen)
                if kind == "fused":
                    return kind, idx
                folded = folded or kind == "folded"
        return ("folded" if folded else "eliminated"), None

    sess_place: dict[str, str] = {}
    sess_via: dict[str, str] = {}
    sess_l1: dict[str, int] = {}
    # names in the assignment, with the layout transformation's suffixes removed
    assigned_base: dict[str, tuple[str, str]] = {}
    for an, ep in assigned.items():
        base = an
        while True:
            b2 = _RENAME_SUFFIX_RE.sub("", base)
            if b2 == base:
                break
            base = b2
        if base != an:
            assigned_base.setdefault(base, (ep, an))
    for i, n in enumerate(sess):
        name = sess_names[i]
        idx: int | None = None
        how = ""
        if n.get("op_type") == "Constant" and n.get("domain", "") in ("", "ai.onnx"):
            sess_place[name] = "folded"  # data, not compute: becomes an initializer
            sess_via[name] = "a Constant node becomes an initializer"
            continue
        if n.get("name") and (name in assigned or name in assigned_base):
            # the node is in a partition under its own name: trust that over the CPU-only
            # optimized graph (which may have inlined a function op the QNN EP takes whole)
            if name in assigned:
                sess_place[name] = _ep_verdict(assigned[name])
            else:
                ep, an = assigned_base[name]
                sess_place[name] = _ep_verdict(ep)
                sess_via[name] = "placed as %s" % an
            if name in l1_by_name:
                sess_l1[name] = l1_by_name[name]
            continue
        if not vanished[i]:
            idx = l1_by_name[name]
        else:
            pref = [j for j, nm in enumerate(l1_names) if nm.startswith(name + "/")] if \
                n.get("name") else []
            if pref:
                idx, how = pref[0], "fused into %s (%s)" % (l1_names[pref[0]],
                                                            l1_nodes[pref[0]]["op_type"])
            elif const_folded[i]:
                # its value was computed at load (a shape computation a later fusion's new constant
                # absorbed, e.g. the target of MatMulAddFusion's Reshape back merged with the next
                # Reshape): it runs nowhere, whatever its readers became
                kind, idx = "folded", None
                how = "constant-folded by onnxruntime before partitioning"
            elif (n.get("op_type") in ("Identity", "Dropout") or name in noops) and not any(
                    t in l1_producer for t in n.get("outputs", ()) if t):
                kind, idx = "eliminated", None  # its consumers read its input now
                how = "eliminated by onnxruntime before partitioning"
            else:
                kind, idx = walk(i, set())
                if kind == "fused" and idx is not None:
                    how = "fused into %s (%s)" % (l1_names[idx] or "#%d" % idx,
                                                  l1_nodes[idx]["op_type"])
                elif kind == "folded":
                    how = "constant-folded by onnxruntime before partitioning"
                else:
                    how = "eliminated by onnxruntime before partitioning"
        if idx is None:
            sess_place[name] = "folded"
            sess_via[name] = how
            continue
        sess_l1[name] = idx
        if idx in l1_ep:
            ep, as_ = l1_ep[idx]
            sess_place[name] = _ep_verdict(ep)
            via = how or ""
            if as_:
                via = (via + "; " if via else "") + "placed " + as_
            if via:
                sess_via[name] = via
        else:
            sess_place[name] = "removed"
            sess_via[name] = ((how + "; ") if how else "") + \
                "in the optimized graph but in no partition (removed by the EP's graph " \
                "transformations)"
    # --- reasons per L1 name
    reasons_l1: dict[str, list[str]] = {}
    for v in validations:
        if v.passed or not v.reason:
            continue
        base = v.name
        while True:
            b2 = _RENAME_SUFFIX_RE.sub("", base)
            if b2 == base:
                break
            base = b2
        lst = reasons_l1.setdefault(base, [])
        if v.reason not in lst:
            lst.append(v.reason)
    # --- ONNX nodes (of the model as given)
    names = _display_names(nodes)
    placement: dict[str, str] = {}
    via: dict[str, str] = {}
    reasons: dict[str, list[str]] = {}
    op_types: dict[str, str] = {}
    for i, n in enumerate(nodes):
        name = names[i]
        op_types[name] = n.get("op_type", "")
        if name in sess_place:
            placement[name] = sess_place[name]
            if name in sess_via:
                via[name] = sess_via[name]
            idx = sess_l1.get(name)
            r = list(reasons_l1.get(name, []))
            if idx is not None and l1_names[idx] != name:
                r += [x for x in reasons_l1.get(l1_names[idx], []) if x not in r]
            if r:
                reasons[name] = r
        else:
            placement[name] = "removed"
            via[name] = "not in the model handed to onnxruntime"
    # --- helpers: assigned nodes that are no ONNX node of the model
    node_names = set(names)
    mapped_l1 = {l1_names[sess_l1[n]] for n in names if n in sess_l1}
    helpers: dict[str, list[str]] = {}
    for sg in assignment:
        for nd in sg.get("nodes", ()):
            nm = nd["name"]
            base = nm
            while True:
                b2 = _RENAME_SUFFIX_RE.sub("", base)
                if b2 == base:
                    break
                base = b2
            if nm in node_names or (base in node_names and nm in claimed) or nm in mapped_l1 \
                    or (base in mapped_l1 and nm in claimed):
                continue
            helpers.setdefault(sg["ep"], []).append("%s:%s" % (nm, nd.get("op_type", "")))
    for name, helper in cpu_helper_replacements(nodes, placement, helpers).items():
        placement[name] = "cpu"
        via[name] = "in no partition: replaced by the CPU helper %s (onnxruntime moved it within its CPU " \
            "island)" % helper
    return {"placement": placement, "via": via, "reasons": reasons, "helpers": helpers,
            "op_types": op_types}


def cpu_helper_replacements(nodes: Sequence[Mapping[str, Any]], placement: Mapping[str, str],
                            helpers: Mapping[str, Sequence[str]]) -> dict[str, str]:
    """ONNX nodes in no partition (``removed``) that a CPU helper of their own op type stands for:
    ``{node: helper}``.

    onnxruntime rewrites the nodes left to the CPU after partitioning: the second Transpose of a
    ``Transpose -> Conv ... Conv -> Transpose`` (a Conformer convolution module) or of a ``MatMul ->
    Transpose`` on a data-dependent length leaves every partition, and a new Transpose (``Transpose``,
    ``Transpose_token_<n>``) runs on the CPU instead (probed: q.Transpose.ctx=cpu_island.*). Such a node
    still costs a CPU op: a removed node whose neighbours (the nodes that make its inputs and read its
    outputs; constants aside) all run on the CPU is paired with one CPU helper of its op type, in graph
    order, while helpers are left.

    Args:
        nodes: ``[{"name", "op_type", "inputs", "outputs"}]`` of the model as given, in graph order.
        placement: ONNX node name -> ``npu`` / ``cpu`` / ``folded`` / ``removed`` (:func:`map_placement`).
        helpers: ``{ep: ["name:op_type"]}``: the assigned nodes that are no ONNX node of the model.
    """
    free: dict[str, list[str]] = {}
    for item in helpers.get(CPU_EP, ()):
        name, _, op_type = item.rpartition(":")
        free.setdefault(op_type, []).append(name)
    if not free:
        return {}
    producer: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    for n in nodes:
        for t in n.get("outputs", ()):
            if t:
                producer[t] = n.get("name", "")
        for t in n.get("inputs", ()):
            if t:
                readers.setdefault(t, []).append(n.get("name", ""))
    out: dict[str, str] = {}
    for n in nodes:
        name, op_type = n.get("name", ""), n.get("op_type", "")
        if not free.get(op_type) or placement.get(name) != "removed":
            continue
        around = [producer[t] for t in n.get("inputs", ()) if t in producer]
        around += [r for t in n.get("outputs", ()) if t for r in readers.get(t, ())]
        seen = [placement.get(m) for m in around if placement.get(m) != "folded"]
        if seen and all(p == "cpu" for p in seen):
            out[name] = free[op_type].pop(0)
    return out


def noop_expands(path: str | os.PathLike[str], nodes: Sequence[Mapping[str, Any]],
                 l1: Mapping[str, Any] | None) -> set[str]:
    """Names of the Expand nodes of the model at ``path`` that onnxruntime's basic optimizations
    removed and whose output shape is their input's, both static (the graph facts' shapes): no-ops,
    which onnxruntime eliminates (ExpandElimination) before any fusion. The facts are read only when
    an Expand vanished."""
    if not l1 or l1.get("nodes") is None:
        return set()
    kept = {n.get("name") for n in l1["nodes"]}
    gone = [n for n in nodes if n.get("op_type") == "Expand" and n.get("name") and n["name"] not in kept]
    if not gone:
        return set()
    from ...check import graph_facts

    try:
        graph = graph_facts(Path(path))
    except Exception:  # noqa: BLE001 - no facts: the placement is mapped as before
        return set()
    out = set()
    for n in gone:
        src = graph.tensor(n["inputs"][0]) if n.get("inputs") else None
        dst = graph.tensor(n["outputs"][0]) if n.get("outputs") else None
        if src is not None and dst is not None and src.static and dst.static and src.shape == dst.shape:
            out.add(n["name"])
    return out


def onnx_placement(result: QnnResult) -> dict[str, str]:
    """Per-ONNX-node verdict for :func:`pytest_npucheck.oracles.compare.compare`.

    ``npu`` / ``cpu`` as placed; nodes ONNX Runtime removed before partitioning (``folded``) or
    that ended in no partition (``removed``) run nowhere and count as ``npu``; every node is
    ``unsupported`` when the session could not be created.
    """
    if result.status != "ok":
        return {n: "unsupported" for n in (result.op_types or result.placement)}
    return {n: ("cpu" if p == "cpu" else "npu" if p in ("npu", "folded", "removed") else p)
            for n, p in result.placement.items()}


# --------------------------------------------------------------------------------------------
# Finding the QNN python
# --------------------------------------------------------------------------------------------


def find_qnn_python(python: str | os.PathLike[str] | None = None) -> str | None:
    """Locate the python executable of the onnxruntime-qnn venv.

    Order: the explicit ``python`` argument, the ``NPUCHECK_QNN_PYTHON`` environment variable,
    ``.venv-qnn/bin/python`` in the current directory.  Returns ``None`` if none is executable.
    """
    return find_python(python, ENV_VAR, ".venv-qnn")


# --------------------------------------------------------------------------------------------
# Running the worker
# --------------------------------------------------------------------------------------------


def _finish(job: ModelJob, status: str, log_text: str, event: Mapping[str, Any] | None,
            settings: Mapping[str, Any], fallback_message: str = "") -> QnnResult:
    ev = dict(event or {})
    validations = parse_validations(log_text) if log_text else []
    sdk, full, iface = parse_backend_version(log_text)
    res = QnnResult(
        key=str(job.key), path=job.path, status=status, validations=validations,
        backend_version=sdk, backend_build=full, interface_version=iface,
        placed_counts=parse_placement_summary(log_text), precision=settings["precision"],
        provider_options=dict(settings["provider_options"]), seconds=ev.get("seconds"),
        stage=ev.get("stage"), log=strip_ansi(log_text) if settings.get("keep_logs") else None,
        assignment=list(ev.get("assignment") or []))
    nodes = ev.get("nodes") or []
    res.op_types = {n: nd.get("op_type", "") for n, nd in zip(_display_names(nodes), nodes)}
    if status == "ok":
        m = map_placement(nodes, res.assignment, ev.get("l1"), validations,
                          ev.get("session_nodes"), noop_expands(job.path, nodes, ev.get("l1")))
        res.placement, res.via, res.reasons, res.helpers = (m["placement"], m["via"],
                                                             m["reasons"], m["helpers"])
        if ev.get("assignment_error"):
            res.message = "no assignment info: " + ev["assignment_error"]
    else:
        parts = []
        if fallback_message:
            parts.append(fallback_message)
        if ev.get("exception"):
            parts.append(strip_ansi(str(ev["exception"])).strip())
        errs = [e for e in _errors(log_text) if not any(e in p for p in parts)]
        parts.extend(errs[:5])
        res.message = "\n".join(parts)
    for k in ("quantizer", "run_status", "run_exception", "run_outputs", "l1_error",
              "providers", "traceback"):
        if k in ev:
            res.extra[k] = ev[k]
    return res


_WORKER = batch.WorkerSpec(name="QNN", script=WORKER, work="QNN session creation",
                           doing="placing", default_status="session_failed",
                           unavailable=QnnUnavailable, env={"OMP_NUM_THREADS": "1"})


def _run_batch(python: str, jobs: list[ModelJob], settings: Mapping[str, Any],
               progress: Any = None) -> tuple[list[QnnResult], dict[str, Any]]:
    """Place ``jobs`` with as many worker processes (one after another) as crashes require."""
    def job_file(pending: list[ModelJob], log_dir: str) -> dict[str, Any]:
        return {
            "log_dir": log_dir,
            "provider_options": dict(settings["provider_options"]),
            "precision": settings["precision"],
            "run": bool(settings.get("run")),
            "calibration": dict(settings.get("calibration") or {}),
            "session_config": dict(settings.get("session_config") or {}),
            "models": [{"key": j.key, "path": j.path, "debug": j.debug, "index": n}
                       for n, j in enumerate(pending)],
        }

    def finish(job: ModelJob, status: str, log_text: str, event: Mapping[str, Any] | None,
               message: str) -> QnnResult:
        return _finish(job, status, log_text, event, settings, message)

    results, hello = batch.run_batch(python, _WORKER, jobs, job_file, finish,
                                     timeout=float(settings["timeout"]),
                                     startup_timeout=float(settings["startup_timeout"]),
                                     progress=progress)
    info = {"versions": hello.get("versions") or {}, "python": hello.get("python"),
            "htp_path": hello.get("htp_path")} if hello else {}
    for r in results:
        r.extra.setdefault("versions", info.get("versions", {}))
    return results, info


def provider_options(htp_arch: int | str = 73, soc_model: int | str | None = None,
                     precision: str = "fp16", extra: Mapping[str, Any] | None = None
                     ) -> dict[str, str]:
    """QNN EP provider options for an HTP architecture and precision (without backend_path)."""
    arch = int(htp_arch)
    if soc_model is None:
        soc_model = DEFAULT_SOC_MODEL.get(arch, 43)
    opts = {"htp_arch": str(arch), "soc_model": str(soc_model)}
    if precision == "fp16":
        opts["enable_htp_fp16_precision"] = "1"
    elif precision != "int8":
        raise ValueError("precision must be 'fp16' or 'int8', not %r" % precision)
    opts.update({k: str(v) for k, v in (extra or {}).items()})
    return opts


def place_models(
    models: Sequence[str | os.PathLike[str] | ModelJob | Mapping[str, Any]],
    htp_arch: int | str = 73,
    python: str | os.PathLike[str] | None = None,
    *,
    soc_model: int | str | None = None,
    precision: str = "fp16",
    run: bool = False,
    timeout: float = 300.0,
    startup_timeout: float = 120.0,
    workers: int = 1,
    keep_logs: bool = False,
    options: Mapping[str, Any] | None = None,
    session_config: Mapping[str, Any] | None = None,
    calibration: Mapping[str, Any] | None = None,
    progress: Any = None,
) -> list[QnnResult]:
    """Create a QNN EP (HTP) session for every model and report where each node runs.

    Args:
        models: ONNX file paths, or :class:`ModelJob` / mappings with ``path`` and ``key``.
        htp_arch: HTP architecture (68, 69, 73, 75, 79, ...).
        python: the QNN venv's python; default from :func:`find_qnn_python`.
        soc_model: QNN SoC id; default :data:`DEFAULT_SOC_MODEL` of ``htp_arch``.
        precision: ``fp16`` (float model, ``enable_htp_fp16_precision=1``) or ``int8`` (the
            worker QDQ-quantizes the model with random calibration data first).
        run: also run every session once on random inputs (HTP emulation).
        timeout: seconds allowed for one model; the worker is killed after it.
        workers: worker processes run in parallel (models are split round-robin).
        keep_logs: keep the full verbose log in each result.
        options: extra QNN EP provider options.
        session_config: extra session config entries.
        calibration: ``{"samples": 4, "seed": 0}`` for int8.
        progress: optional callable invoked with every finished :class:`QnnResult`.

    Returns:
        One :class:`QnnResult` per model, in input order.

    Raises:
        QnnUnavailable: no usable python, or the worker cannot set up the QNN EP.
    """
    exe = find_qnn_python(python)
    if exe is None:
        raise QnnUnavailable("no onnxruntime-qnn python found (pass python=..., or set %s)"
                             % ENV_VAR)
    jobs = batch.normalise_jobs(models, ModelJob)
    if not jobs:
        return []
    settings = {"provider_options": provider_options(htp_arch, soc_model, precision, options),
                "precision": precision, "run": run, "timeout": timeout,
                "startup_timeout": startup_timeout, "keep_logs": keep_logs,
                "calibration": dict(calibration or {"samples": 4, "seed": 0}),
                "session_config": dict(session_config or {})}
    return batch.run_pool(jobs, workers, lambda chunk, prog: _run_batch(exe, chunk, settings, prog)[0],
                          progress)


compile_models = place_models
"""Alias with the RKNN adapter's name."""


def _main(argv: Sequence[str] | None = None) -> int:
    """CLI: ``python -m pytest_npucheck.toolchains.qnn.adapter [--htp-arch 73] [--int8] model.onnx...``."""
    import argparse

    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--htp-arch", type=int, default=73)
    ap.add_argument("--soc-model", type=int)
    ap.add_argument("--int8", action="store_true", help="QDQ-quantize and place in int8")
    ap.add_argument("--run", action="store_true", help="also run once on random inputs")
    ap.add_argument("--python")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    res = place_models(args.models, args.htp_arch, args.python, soc_model=args.soc_model,
                       precision="int8" if args.int8 else "fp16", run=args.run,
                       timeout=args.timeout)
    out = []
    for r in res:
        d = r.to_dict()
        d.pop("validations", None)
        out.append(d)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if all(r.ok for r in res) else 1


if __name__ == "__main__":
    sys.exit(_main())
