"""Adapter for the real RKNN compiler (``rknn-toolkit2``), driven in its own virtualenv.

rknn-toolkit2 pins numpy/onnx/protobuf versions that conflict with a modern stack, so it is run
in a separate Python (found from an explicit argument or the ``NPUCHECK_RKNN_PYTHON`` environment
variable) as a subprocess executing :mod:`pytest_npucheck.toolchains.rknn._rknn_worker`.

Each model is loaded and built (fp16, ``do_quantization=False``, unless the job asks for an int8
build with a calibration dataset) in isolation: the worker streams
one result per model, and when it crashes or hangs on a model the parent records that model as
``crashed`` / ``timeout`` and starts a fresh worker for the remaining ones.

The verbose build log is parsed for the "Network Layer Information Table"; every row tells
whether the compiled op runs on the NPU or the CPU. RKNN fuses and renames NPU ops, so only CPU
rows map back to ONNX nodes (``FullName`` is ``<OpType>:<onnx node name>``).
:func:`onnx_placement` turns a result into a per-ONNX-node verdict.

Only the standard library is imported at module level.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .. import batch
from ..batch import strip_ansi
from ..venv import find_python

__all__ = [
    "ENV_VAR",
    "RknnUnavailable",
    "LayerRow",
    "RknnResult",
    "ModelJob",
    "find_rknn_python",
    "compile_models",
    "strip_ansi",
    "parse_layer_table",
    "extract_errors",
    "extract_warnings",
    "onnx_placement",
    "onnx_node_names",
    "onnx_nodes",
    "GLUE_OPS",
    "row_node",
    "attribute_rows",
    "unmapped_cpu_rows",
    "rewrite_lineage",
]

ENV_VAR = "NPUCHECK_RKNN_PYTHON"
"""Environment variable naming the python executable of a venv with rknn-toolkit2."""

WORKER = Path(__file__).with_name("_rknn_worker.py")

STATUSES = ("ok", "build_failed", "load_failed", "crashed", "timeout")

_RKNN_PREFIX_RE = re.compile(r"^[DIWE] RKNN: \[[0-9:.]+\] ?")
_ROW_RE = re.compile(
    r"^(?P<id>\d+)\s+(?P<op_type>\S+)\s+(?P<dtype>\S+)\s+(?P<target>NPU|CPU|GPU|\S+)\s+"
    r"(?P<input_shape>\S+)\s+(?P<output_shape>\S+)\s+(?P<cycles>\S+)\s+(?P<rw>\S+)"
    r"(?:\s+(?P<full_name>.+?))?\s*$"
)
_RECORD_START_RE = re.compile(r"^(?P<level>[DIWE]) (?P<body>.*)$")
_IO_OPS = ("InputOperator", "OutputOperator")


class RknnUnavailable(RuntimeError):
    """The rknn-toolkit2 python cannot be found or the worker cannot import ``rknn``."""


@dataclass
class LayerRow:
    """One row of RKNN's "Network Layer Information Table"."""

    id: int
    op_type: str
    dtype: str
    target: str
    input_shape: str
    output_shape: str
    full_name: str
    onnx_name: str | None = None
    """Text after the first colon of ``full_name`` (the original ONNX node name for CPU rows)."""

    @property
    def is_io(self) -> bool:
        """True for the Input/OutputOperator pseudo rows (always CPU, never meaningful)."""
        return self.op_type in _IO_OPS


@dataclass
class RknnResult:
    """Outcome of compiling one model with rknn-toolkit2."""

    key: str
    path: str
    status: str
    """One of ``ok``, ``build_failed``, ``load_failed``, ``crashed``, ``timeout``."""
    message: str = ""
    """The toolchain's error message (ANSI codes stripped); empty when the build succeeded."""
    rows: list[LayerRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    seconds: float | None = None
    stage: str | None = None
    log: str | None = None
    """Full build log (ANSI stripped) when ``keep_logs`` was requested."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when the build succeeded."""
        return self.status == "ok"

    def cpu_rows(self) -> list[LayerRow]:
        """Table rows placed on the CPU, without Input/OutputOperator rows."""
        return [r for r in self.rows if r.target == "CPU" and not r.is_io]

    def npu_rows(self) -> list[LayerRow]:
        """Table rows placed on the NPU."""
        return [r for r in self.rows if r.target == "NPU" and not r.is_io]

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form."""
        d = asdict(self)
        if d.get("log") is None:
            d.pop("log", None)
        return d


@dataclass
class ModelJob:
    """A model to compile, with optional extra ``RKNN.config`` / ``RKNN.load_onnx`` arguments."""

    path: str
    key: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)
    inference: dict[str, Any] | None = None
    build: dict[str, Any] = field(default_factory=dict)
    """Extra ``RKNN.build`` keyword arguments; empty means the fp16 build
    (``do_quantization=False``). ``{"do_quantization": True, "dataset": "<dataset.txt>"}``
    asks for an int8 build calibrated on the listed ``.npy`` samples."""
    debug: dict[str, Any] | None = None
    """Test hooks for the worker: ``{"crash": exit_code}`` or ``{"hang": seconds}``."""


# --------------------------------------------------------------------------------------------
# Log parsing
# --------------------------------------------------------------------------------------------


def parse_layer_table(log: str) -> list[LayerRow]:
    """Parse the last "Network Layer Information Table" of a verbose build log.

    Returns an empty list if the log has no table (e.g. the build failed before code generation).
    """
    lines = [_RKNN_PREFIX_RE.sub("", ln) for ln in strip_ansi(log).splitlines()]
    tables: list[list[LayerRow]] = []
    i = 0
    while i < len(lines):
        if "Network Layer Information Table" in lines[i]:
            rows: list[LayerRow] = []
            # find header
            j = i + 1
            while j < len(lines) and not lines[j].lstrip().startswith("ID "):
                j += 1
            j += 1
            while j < len(lines) and set(lines[j].strip()) <= {"-"} and lines[j].strip():
                j += 1
            while j < len(lines):
                s = lines[j].strip()
                if not s or set(s) <= {"-"}:
                    break
                m = _ROW_RE.match(s)
                if not m:
                    break
                full = m.group("full_name") or ""
                onnx_name = full.split(":", 1)[1] if ":" in full else None
                rows.append(LayerRow(
                    id=int(m.group("id")), op_type=m.group("op_type"), dtype=m.group("dtype"),
                    target=m.group("target"), input_shape=m.group("input_shape"),
                    output_shape=m.group("output_shape"), full_name=full, onnx_name=onnx_name))
                j += 1
            tables.append(rows)
            i = j
        else:
            i += 1
    return tables[-1] if tables else []


def _records(log: str) -> list[tuple[str, str]]:
    """Split a log into (level, text) records; continuation lines join the previous record."""
    out: list[tuple[str, str]] = []
    for ln in strip_ansi(log).splitlines():
        m = _RECORD_START_RE.match(ln)
        if m:
            out.append((m.group("level"), m.group("body")))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + "\n" + ln)
    return out


def extract_errors(log: str) -> list[str]:
    """The distinct error messages (``E`` records) of a log, without tracebacks/banners."""
    msgs: list[str] = []
    for level, body in _records(log):
        if level != "E":
            continue
        body = body.strip()
        if body.startswith("rknn-toolkit2 version") or not body:
            continue
        if "Traceback (most recent call last)" in body:
            # keep only the final exception text of a traceback dump
            tail = body.rsplit("Error:", 1)[-1].strip() if "Error:" in body else ""
            if tail and not any(tail in m for m in msgs):
                msgs.append(tail)
            continue
        body = re.sub(r"\s*\n\s*", " ", body).strip()
        if body not in msgs:
            msgs.append(body)
    return msgs


def extract_warnings(log: str) -> list[str]:
    """Warning records that carry information (toolkit boilerplate is dropped)."""
    boring = ("config.mean_values is None", "config.std_values is None", "temperate env",
              "===================== WARN", "need parameter qtype")
    out: list[str] = []
    for level, body in _records(log):
        if level == "W":
            body = re.sub(r"^RKNN: \[[0-9:.]+\] ?", "", body.strip())
            body = re.sub(r"\s*\n\s*", " ", body)
            if len(body) > 600:
                body = body[:600] + " ..."
            if body and not any(b in body for b in boring) and body not in out:
                out.append(body)
    return out


# --------------------------------------------------------------------------------------------
# Finding the rknn python
# --------------------------------------------------------------------------------------------


def find_rknn_python(python: str | os.PathLike[str] | None = None) -> str | None:
    """Locate the python executable of the rknn-toolkit2 venv.

    Order: the explicit ``python`` argument, the ``NPUCHECK_RKNN_PYTHON`` environment variable,
    ``.venv-rknn/bin/python`` in the current directory.  Returns ``None`` if none is executable.
    """
    return find_python(python, ENV_VAR, ".venv-rknn")


# --------------------------------------------------------------------------------------------
# Running the worker
# --------------------------------------------------------------------------------------------


def _finish(job: ModelJob, status: str, log_text: str, event: Mapping[str, Any] | None,
            keep_logs: bool, fallback_message: str = "") -> RknnResult:
    clean = strip_ansi(log_text)
    rows = parse_layer_table(clean) if status == "ok" else []
    message = ""
    if status != "ok":
        errs = extract_errors(clean)
        if errs:
            message = "\n".join(errs)
        elif event and event.get("exception"):
            message = strip_ansi(str(event["exception"])).strip()
        if fallback_message:
            message = (fallback_message + ("\n" + message if message else "")).strip()
    extra: dict[str, Any] = {}
    if event:
        for k in ("inference_status", "outputs", "inference_exception", "ret"):
            if k in event:
                extra[k] = event[k]
    return RknnResult(
        key=str(job.key), path=job.path, status=status, message=message, rows=rows,
        warnings=extract_warnings(clean), seconds=(event or {}).get("seconds"),
        stage=(event or {}).get("stage"), log=clean if keep_logs else None, extra=extra)


_WORKER = batch.WorkerSpec(name="rknn", script=WORKER, work="rknn build", doing="building",
                           default_status="build_failed", unavailable=RknnUnavailable)


def _run_batch(python: str, target_platform: str, jobs: list[ModelJob], timeout: float,
               startup_timeout: float, config: Mapping[str, Any] | None, keep_logs: bool,
               progress: Any = None, retries: int = 1,
               stall_cpu: float | None = None) -> list[RknnResult]:
    """Compile ``jobs`` with as many worker processes (one after another) as crashes require."""
    def job_file(pending: list[ModelJob], log_dir: str) -> dict[str, Any]:
        return {
            "target_platform": target_platform,
            "log_dir": log_dir,
            "config": dict(config or {}),
            "models": [
                {"key": j.key, "path": j.path, "config": j.config, "load": j.load,
                 "inference": j.inference, "build": j.build, "debug": j.debug, "index": n}
                for n, j in enumerate(pending)
            ],
        }

    def finish(job: ModelJob, status: str, log_text: str, event: Mapping[str, Any] | None,
               message: str) -> RknnResult:
        return _finish(job, status, log_text, event, keep_logs, message)

    results, hello = batch.run_batch(python, _WORKER, jobs, job_file, finish,
                                     timeout=timeout, startup_timeout=startup_timeout,
                                     progress=progress, retries=retries, stall_cpu=stall_cpu)
    if hello.get("rknn_version"):
        for r in results:
            r.extra.setdefault("rknn_version", hello["rknn_version"])
    return results


def compile_models(
    models: Sequence[str | os.PathLike[str] | ModelJob | Mapping[str, Any]],
    target_platform: str = "rk3588",
    python: str | os.PathLike[str] | None = None,
    *,
    timeout: float = 300.0,
    startup_timeout: float = 180.0,
    config: Mapping[str, Any] | None = None,
    workers: int = 1,
    keep_logs: bool = False,
    progress: Any = None,
    retries: int = 1,
    stall_cpu: float | None = None,
) -> list[RknnResult]:
    """Compile ONNX models with rknn-toolkit2 (fp16 build) and report per-model placement.

    Args:
        models: ONNX file paths, or :class:`ModelJob` / mappings with ``path`` and optional
            ``key``, ``config`` (extra ``RKNN.config`` kwargs, e.g. ``dynamic_input``), ``load``
            (extra ``RKNN.load_onnx`` kwargs), ``build`` (extra ``RKNN.build`` kwargs, e.g.
            ``{"do_quantization": True, "dataset": path}`` for an int8 build) and ``inference`` (``{"inputs": [npy paths],
            "outputs_dir": dir}`` to also run the x86 simulator).
        target_platform: the SoC, e.g. ``rk3588``, ``rk3576``, ``rk3566``.
        python: the rknn venv's python; default from :func:`find_rknn_python`.
        timeout: seconds allowed for one model (load+build); the worker is killed after it.
        startup_timeout: seconds allowed for the worker to import rknn.
        config: extra ``RKNN.config`` kwargs for every model.
        workers: number of worker processes run in parallel (models are split round-robin).
        keep_logs: keep the full ANSI-stripped build log in each result.
        progress: optional callable invoked with every finished :class:`RknnResult`.
        retries: how many more times a model whose build kills the worker is built again in a
            fresh worker before it is reported ``crashed``. Some of the toolkit's native
            crashes are not deterministic (2.5.0 aborted once in 90 builds here of a Pad with
            an ``axes`` input with "unsupport pads < 0"); the messages of the retried attempts
            are kept in ``extra["earlier_attempts"]``. Timeouts are not retried.
        stall_cpu: CPU seconds a build may spend without writing to its build log (the toolkit
            logs every rewrite and compiler pass as it goes). A build that spends that much CPU in
            silence is killed and reported as ``timeout``, its message naming the silent CPU and
            the log's last line (``extra["stalled_cpu_seconds"]``): a compiler loop is told from
            a slow build in CPU time, whatever the load, and well before ``timeout``. Off (None)
            by default: a large model's native compile can be silent for long.

    A built, failed or timed-out model's ``extra["cpu_seconds"]`` is the CPU seconds the worker
    spent on it (from its start to its result or timeout; None where ``/proc`` cannot tell).

    Returns:
        One :class:`RknnResult` per model, in input order.

    Raises:
        RknnUnavailable: no usable rknn python, or the worker cannot import ``rknn``.
    """
    exe = find_rknn_python(python)
    if exe is None:
        raise RknnUnavailable(
            "no rknn-toolkit2 python found (pass python=..., or set %s)" % ENV_VAR)
    jobs = batch.normalise_jobs(models, ModelJob)
    if not jobs:
        return []
    return batch.run_pool(jobs, workers, lambda chunk, prog: _run_batch(
        exe, target_platform, chunk, timeout, startup_timeout, config, keep_logs, prog, retries,
        stall_cpu),
        progress)


# --------------------------------------------------------------------------------------------
# Mapping placement back to ONNX nodes
# --------------------------------------------------------------------------------------------


def onnx_nodes(model_path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """``[{"name", "op_type", "inputs", "outputs"}]`` of an ONNX model's main graph.

    Imports ``onnx`` lazily.  Unnamed nodes get ``<OpType>_<index>`` names, which RKNN cannot
    report; name your nodes.
    """
    import onnx  # local import: the module itself stays stdlib-only

    model = onnx.load(os.fspath(model_path), load_external_data=False)
    return [{"name": n.name or "%s_%d" % (n.op_type, i), "op_type": n.op_type,
             "inputs": list(n.input), "outputs": list(n.output)}
            for i, n in enumerate(model.graph.node)]


def onnx_node_names(model_path: str | os.PathLike[str]) -> list[str]:
    """Names of the nodes of an ONNX model's main graph (see :func:`onnx_nodes`)."""
    return [n["name"] for n in onnx_nodes(model_path)]


_REWRITE_SUFFIX_RE = re.compile(r"#\d+$")
_FUSE_RE = re.compile(r"^\s*(?P<rule>[A-Za-z0-9_]+): remove node = \[(?P<removed>[^\]]*)\]"
                      r"(?:, add node = \[(?P<added>[^\]]*)\])?")


def _names(text: str | None) -> list[str]:
    return [t.strip().strip("'\"") for t in (text or "").split(",") if t.strip().strip("'\"")]


def rewrite_lineage(log: str) -> dict[str, frozenset[str]]:
    """Which ONNX nodes each node that RKNN's graph rewrites created came from.

    The verbose build log traces every rewrite of ``fuse_ops`` as
    ``<rule>: remove node = ['a', 'b'], add node = ['c']``; the added nodes stand for the union of
    what the removed ones stood for, transitively (``node_mean`` -> ``node_mean#1`` (einsum) ->
    ``pow_1_rs_mm`` (matmul) -> ``pow_1_rs_mm#1`` (Conv)). Helpers added without removing
    anything (the Reshapes of ``unsqueeze_to_4d_*``) are not listed: they are glue named after a
    tensor (:func:`attribute_rows` handles them). Names that are not rewritten map to nothing."""
    origin: dict[str, frozenset[str]] = {}
    in_fuse = False
    for ln in strip_ansi(log).splitlines():
        body = ln[2:] if ln[:2] in ("D ", "I ", "W ") else ln
        if body.strip().startswith("fuse_ops results"):
            in_fuse = True
            continue
        if not in_fuse:
            continue
        m = _FUSE_RE.match(body)
        if not m:
            if body.strip().startswith("fuse_ops done"):
                in_fuse = False
            continue
        removed, added = _names(m.group("removed")), _names(m.group("added"))
        if not removed:
            continue
        src = frozenset().union(*(origin.get(r, frozenset({r})) for r in removed))
        for a in added:
            origin[a] = src
    return origin
#: Layout ops RKNN inserts around other ops; on their own they do not move a node to the CPU.
GLUE_OPS = frozenset({"Reshape", "Transpose"})


def row_node(row: LayerRow, node_names: Iterable[str]) -> str | None:
    """The ONNX node a layer-table row stands for, or ``None``.

    ``FullName`` is ``<OpType>:<name>``; the name is the ONNX node name, or the node name plus
    ``#<n>`` when RKNN rewrote the node into another op type (e.g. ``Div:Reciprocal_0#1``).
    """
    name = row.onnx_name
    if not name:
        return None
    names = node_names if isinstance(node_names, (set, frozenset, dict)) else set(node_names)
    if name in names:
        return name
    base = _REWRITE_SUFFIX_RE.sub("", name)
    if base != name and base in names:
        return base
    return None


def _name_roots(node: str, producer: Mapping[str, str]) -> list[str]:
    """The names a row made of ``node`` may start with: the node's and its output tensors'."""
    return [node] + [t for t, p in producer.items() if p == node]


def _named_after(row_name: str, node: str, producer: Mapping[str, str]) -> bool:
    return any(row_name.startswith(p) and (len(row_name) == len(p) or row_name[len(p)] in "_#-.")
               for p in _name_roots(node, producer))


def _as_nodes(nodes: Sequence[str] | Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [{"name": n} if isinstance(n, str) else n for n in nodes]


def attribute_rows(result: RknnResult, nodes: Sequence[str] | Sequence[Mapping[str, Any]],
                   lineage: Mapping[str, frozenset[str]] | None = None
                   ) -> dict[str, dict[str, list[str]]]:
    """Attribute layer-table rows to ONNX nodes, including helper ops RKNN inserted.

    Args:
        result: a compile result.
        nodes: node names, or ``[{"name", "inputs", "outputs"}]`` (tensor names make helper
            attribution possible).

    Returns:
        ``{node: {"cpu": [...], "npu": [...], "cpu_rewrites": [...], "npu_rewrites": [...],
        "cpu_helpers": [...], "npu_helpers": [...]}}`` listing the ``FullName`` of each row.
        Direct rows name the node itself (perhaps with a ``#<n>`` rewrite suffix).  Rewrite
        rows carry a name derived from the node name (``<node>_2fp_mul_cast``,
        ``<node>#1_rs``, ``<node>_2rs``): ops RKNN made out of the node.  Helper rows carry a
        name derived from a tensor: ``<tensor>-rs`` belongs to the tensor's producer,
        ``<tensor>_<suffix>`` (``x_gather``, ``h0_pad``) to its single consumer.  With
        ``lineage`` (:func:`rewrite_lineage` of the build log), a row whose name a rewrite
        created counts as a rewrite of every ONNX node it came from (``Conv:pow_1_rs_mm#1``
        is the ReduceMean ``node_mean``).  Rows that cannot be attributed are listed under the
        key ``""``.
    """
    nodes = _as_nodes(nodes)
    names = {n["name"] for n in nodes}
    producer: dict[str, str] = {}
    consumers: dict[str, list[str]] = {}
    for n in nodes:
        for t in n.get("outputs", ()) or ():
            if t:
                producer.setdefault(t, n["name"])
        for t in n.get("inputs", ()) or ():
            if t:
                lst = consumers.setdefault(t, [])
                if n["name"] not in lst:
                    lst.append(n["name"])
    prefixes = sorted(set(names) | set(producer) | set(consumers), key=len, reverse=True)
    op_type = {n["name"]: n.get("op_type") for n in nodes}
    outputs = {n["name"]: [t for t in n.get("outputs", ()) or () if t] for n in nodes}
    direct_nodes = {d for d in (row_node(r, names) for r in result.rows if not r.is_io) if d is not None}
    out: dict[str, dict[str, list[str]]] = {}
    for r in result.rows:
        if r.is_io:
            continue
        kind = r.target.lower()
        direct = row_node(r, names)
        if direct is not None:
            out.setdefault(direct, {}).setdefault(kind, []).append(r.full_name)
            continue
        nm = r.onnx_name or ""
        traced = (lineage or {}).get(nm) or (lineage or {}).get(_REWRITE_SUFFIX_RE.sub("", nm)) or ()
        traced = [t for t in traced if t in names]  # helper Reshapes of earlier rewrites drop out
        if len(traced) > 1:  # a rule that rewrote several nodes: the row's name says whose it is
            own = [t for t in traced if _named_after(nm, t, producer)]
            longest = max((len(p) for t in own for p in _name_roots(t, producer)
                           if nm.startswith(p)), default=0)
            own = [t for t in own if any(len(p) == longest and nm.startswith(p) for p in _name_roots(t, producer))]
            # named after none of them (after a graph input: ``<mask>_rs_cast``): the origins of the row's own
            # op type (the mask's Cast, not the Expand that a rewrite of the And behind it absorbed)
            same = [t for t in traced if op_type.get(t) == r.op_type]
            own = _moved_behind(own, same, r.op_type, op_type, direct_nodes)
            traced = own or same or _readers_of_named(nm, traced, consumers) or traced
        if traced:
            for origin in sorted(traced):
                out.setdefault(origin, {}).setdefault(kind + "_rewrites", []).append(r.full_name)
            continue
        owner: str | None = None
        suffix = "_helpers"
        for p in prefixes:
            if nm.startswith(p) and len(nm) > len(p) and nm[len(p)] in "_#-.":
                rest = nm[len(p):]
                if p in names:
                    owner = p
                    suffix = "_rewrites"
                else:
                    cons = consumers.get(p, [])
                    if rest.startswith("-") or not cons:
                        owner = producer.get(p)
                    elif len(cons) == 1:
                        owner = cons[0]
                        swapped = _swapped_into(owner, r.op_type, op_type, outputs, consumers, direct_nodes)
                        if swapped:  # the same row for each of them: the compiler merged identical ones
                            for other in swapped[1:]:
                                out.setdefault(other, {}).setdefault(kind + "_rewrites", []).append(r.full_name)
                            owner, suffix = swapped[0], "_rewrites"
                    else:
                        owner = producer.get(p)
                    if r.op_type == "Reshape" and rest.startswith("_rs") and suffix == "_helpers":
                        # the Cast's own 4-D relayout of the mask, merged with the layout chain behind the Cast
                        for tail in _mask_chain_tails(p, op_type, outputs, consumers, direct_nodes):
                            out.setdefault(tail, {}).setdefault(kind + "_rewrites", []).append(r.full_name)
                break
        out.setdefault(owner or "", {}).setdefault(kind + suffix, []).append(r.full_name)
    return out


def _moved_behind(own: list[str], same: list[str], row_op: str, op_type: Mapping[str, Any],
                  direct_nodes: set[str]) -> list[str]:
    """``own`` (the origins a rewrite row is named after), or ``[]`` when the row is layout work the
    rewrite moved behind them: every node it is named after has a row of its own of another op type,
    and the origins of the row's op type have none. reduce_reshape_op_around_concat moves the Reshapes
    in front of a Concat behind it as one Reshape named after the Concat's output
    (``Reshape:<concat>_output_0-rs``), the Concat keeping its row: that Reshape is the Reshapes' work
    (RAFT's correlation lookup, issue 22), not the Concat's."""
    if not own or not same or any(s in direct_nodes for s in same):
        return own
    if all(o in direct_nodes and op_type.get(o) != row_op for o in own):
        return []
    return own


def _readers_of_named(row_name: str, traced: Sequence[str], consumers: Mapping[str, list[str]]) -> list[str]:
    """The origins among ``traced`` that read the tensor a rewrite row is named after (the longest tensor
    name that prefixes ``row_name``): the Expand that fuse_matmul_softmax_matmul_to_sdpa inserts for a
    broadcast key, ``<k>_expand``, is the scores MatMul's, not the Softmax's (issue 22, MobileNetV4)."""
    best = ""
    for t in consumers:
        if len(t) > len(best) and row_name.startswith(t) and row_name[len(t):len(t) + 1] in ("_", "#", "-"):
            best = t
    return [n for n in traced if n in consumers.get(best, ())] if best else []


def _swapped_into(owner: str, row_op: str, op_type: Mapping[str, Any], outputs: Mapping[str, list[str]],
                  consumers: Mapping[str, list[str]], direct_nodes: set[str]) -> list[str]:
    """The nodes a helper row named after ``owner``'s input really is, when RKNN swapped them: an
    int64 -> bool Cast followed by a Reshape becomes ``Reshape:<mask>_rs`` (on int64, before the Cast)
    and ``Cast:<cast>``. The row stands for ``owner``'s readers when every one has the row's op type (an
    Unsqueeze/Squeeze/Flatten, or a Gather of the merged chain, for a Reshape row; several identical ones
    are merged into the one row), ``owner`` has another op type, and no reader has a row of its own;
    otherwise ``[]``. A reader that starts a chain of layout ops RKNN merged into the row
    (``fuse_two_reshape``: TorchScript's padding-mask lookup ``Flatten -> Gather -> Reshape -> Reshape``)
    gives the row to the chain's last op, the one whose name the merged Reshape takes when it is not
    swapped, so the row lands on the same node either way."""
    if not row_op or op_type.get(owner) in (None, row_op):
        return []
    readers = _data_readers(owner, op_type, outputs, consumers)
    ok = {row_op} | (_MERGED_LAYOUT if row_op == "Reshape" else set())
    if not readers or any(op_type.get(c) not in ok or c in direct_nodes for c in readers):
        return []
    if row_op != "Reshape":
        return readers
    if op_type.get(owner) not in _MASK_OPS:  # a Mul's or Add's own relayout of its input is its glue
        return []
    tails = [_chain_tail(c, op_type, outputs, consumers) for c in readers]
    if any(t in direct_nodes for t in tails):
        return []
    return list(dict.fromkeys(tails))


#: layout ops RKNN merges into one Reshape (fuse_two_reshape; a Gather of constant indices becomes a Reshape, and
#: so does a GatherND whose indices read its data in order: the dynamo exporter's padding-mask lookup)
_MERGED_LAYOUT = frozenset({"Reshape", "Unsqueeze", "Squeeze", "Flatten", "Gather", "GatherND"})
#: the integer ops RKNN moves a Reshape in front of (swap_cast_reshape; the mask rule of the tables)
_MASK_OPS = frozenset({"Cast", "Equal"})
#: ops that read only a tensor's shape: static at build time, RKNN folds them, they read no data
_SHAPE_READERS = frozenset({"Shape", "Size"})


def _data_readers(node: str, op_type: Mapping[str, Any], outputs: Mapping[str, list[str]],
                  consumers: Mapping[str, list[str]]) -> list[str]:
    """The nodes reading ``node``'s results as data: a Shape of the result (TorchScript's
    ``mask.shape[0]`` beside the padding-mask lookup) is folded at build time and reads none."""
    readers = dict.fromkeys(c for t in outputs.get(node, ()) for c in consumers.get(t, ()))
    return [c for c in readers if op_type.get(c) not in _SHAPE_READERS]


#: ops RKNN removes in front of a mask Cast (a Cast to the input's own dtype, a layout op keeping the shape)
_PASS_TO_MASK = frozenset({"Cast", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})


def _mask_chain_tails(tensor: str, op_type: Mapping[str, Any], outputs: Mapping[str, list[str]],
                      consumers: Mapping[str, list[str]], direct_nodes: set[str]) -> list[str]:
    """The last ops of the layout chains behind an integer mask Cast/Equal that reads ``tensor``, for a
    Reshape row named ``<tensor>_rs``: RKNN's relayout of the mask in front of the Cast
    (``unsqueeze_to_4d_cast``), into which the chain behind the Cast is merged (``bypass_two_reshape``), so the
    row is the chain's one Reshape, as when the chain was swapped in front of the Cast. The row is named after
    the mask also when the mask has other readers (the Mul of Bloom's and OPT's position ids: the two
    relayouts are one row after ``remove_parallel_reshape``) or reaches the Cast through ops RKNN removes (a
    Cast to int64 of an int64 mask, GPT-SW3's ``view(-1, T)``). Nodes with rows of their own are not walked
    through; ``[]`` when no such chain is found."""
    tails: list[str] = []
    seen: set[str] = set()
    frontier = [c for c in dict.fromkeys(consumers.get(tensor, ())) if op_type.get(c) not in _SHAPE_READERS]
    for _ in range(4):
        following: list[str] = []
        for n in frontier:
            if n in seen:
                continue
            seen.add(n)
            readers = _data_readers(n, op_type, outputs, consumers)
            if op_type.get(n) in _MASK_OPS and readers and all(
                    op_type.get(c) in _MERGED_LAYOUT and c not in direct_nodes for c in readers):
                tails.extend(t for t in (_chain_tail(c, op_type, outputs, consumers) for c in readers)
                             if t not in direct_nodes)
            elif op_type.get(n) in _PASS_TO_MASK and n not in direct_nodes:
                following.extend(readers)
        frontier = following
    return list(dict.fromkeys(tails))


def _chain_tail(node: str, op_type: Mapping[str, Any], outputs: Mapping[str, list[str]],
                consumers: Mapping[str, list[str]]) -> str:
    """The last op of the chain of layout ops that starts at ``node`` (each the single reader of the one
    before), which RKNN merges into one Reshape."""
    current = node
    for _ in range(16):
        readers = _data_readers(current, op_type, outputs, consumers)
        if len(readers) != 1 or op_type.get(readers[0]) not in _MERGED_LAYOUT:
            break
        current = readers[0]
    return current


def onnx_placement(result: RknnResult,
                   nodes: Sequence[str] | Sequence[Mapping[str, Any]] | None = None,
                   lineage: Mapping[str, frozenset[str]] | None = None
                   ) -> dict[str, str]:
    """Per-ONNX-node placement derived from an RKNN result.

    A node is ``"cpu"`` if a CPU row of the layer table names it (``FullName`` after the colon,
    optionally with RKNN's ``#<n>`` rewrite suffix).  A node without any row of its own is
    also ``"cpu"`` when all the real work (anything but Reshape/Transpose glue) of the ops RKNN
    made of it runs on the CPU (a rank-5 Slice becoming ``Gather:x_gather``), or when it
    became nothing but CPU glue named after it (an int64 Unsqueeze becoming
    ``Reshape:Unsqueeze_0_2rs``).  Otherwise a node is ``"npu"`` if the
    build succeeded: RKNN fuses and renames NPU ops, so NPU rows do not map one-to-one.  If the
    build did not succeed every node is ``"unsupported"``.  Input/OutputOperator rows are
    ignored.

    Args:
        result: the compile result.
        nodes: node names, or node dicts with ``name``/``inputs``/``outputs`` (enables the
            helper-row rule); default read from ``result.path`` (needs ``onnx``).
        lineage: the rewrites of the build (:func:`rewrite_lineage`); default read from
            ``result.log`` when the log was kept.
    """
    nodes = _as_nodes(nodes if nodes is not None else onnx_nodes(result.path))
    if result.status != "ok":
        return {n["name"]: "unsupported" for n in nodes}
    if lineage is None and result.log:
        lineage = rewrite_lineage(result.log)
    attr = attribute_rows(result, nodes, lineage)
    placement: dict[str, str] = {}
    for n in nodes:
        a = attr.get(n["name"], {})
        if a.get("cpu"):
            placement[n["name"]] = "cpu"
        elif a.get("npu"):
            placement[n["name"]] = "npu"
        else:
            def work(key: str) -> list[str]:
                return [h for h in a.get(key, ()) if h.split(":", 1)[0] not in GLUE_OPS]
            npu_work = work("npu_rewrites") + work("npu_helpers")
            cpu_work = work("cpu_rewrites") + work("cpu_helpers")
            if npu_work or cpu_work:  # judge by the real work RKNN made of the node
                placement[n["name"]] = "cpu" if not npu_work else "npu"
            elif a.get("cpu_rewrites") and not a.get("npu_rewrites"):
                placement[n["name"]] = "cpu"  # became CPU glue only (Unsqueeze -> Reshape)
            else:
                placement[n["name"]] = "npu"
    return placement


def unmapped_cpu_rows(result: RknnResult, node_names: Sequence[str]) -> list[LayerRow]:
    """CPU rows that do not stand for an ONNX node (helper ops RKNN created, e.g. Reshapes)."""
    names = set(node_names)
    return [r for r in result.cpu_rows() if row_node(r, names) is None]


def _main(argv: Sequence[str] | None = None) -> int:
    """Tiny CLI: ``python -m pytest_npucheck.toolchains.rknn.adapter [--soc rk3588] [--python P] model.onnx...``."""
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--soc", default="rk3588")
    ap.add_argument("--python")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    res = compile_models(args.models, args.soc, args.python, timeout=args.timeout)
    json.dump([r.to_dict() for r in res], sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0 if all(r.ok for r in res) else 1


if __name__ == "__main__":
    sys.exit(_main())
