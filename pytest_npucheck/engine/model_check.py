"""The check of one model: export, static verdicts per target, fixes, the baseline gate, the
deployment budgets, then the numeric steps and the oracles (``numeric_steps``).

:func:`run_check` takes a frozen :class:`~.context.RunContext` and fills the test's
:class:`~.entry.CheckEntry` as it goes (so a check that stops half-way still reports what it
found). A failure that stops the check early is :class:`CheckFailed`; the verdict of a completed
check is a :class:`CheckRun` (the text that fails the test, if any, and its JUnit properties).
No pytest import; torch is imported when a check runs.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from .. import arguments
from ..errors import NpuCheckError, UsageError
from ..baseline import fallbacks, match, refused
from ..check import check_graph, graph_facts
from ..export import ExportError, ExportOptions, export_model
from ..fixes import with_fixes
from ..keep_onnx import keep
from ..report.junit import properties
from ..report.terminal import failure_text
from ..report.text import oracle_lines
from .context import RunContext
from .entry import CheckEntry, NpuCheckOutcome
from .numeric_steps import numerics_step, oracle_step
from .settings import CheckSpec
from .torch_values import eval_mode


class CheckFailed(Exception):
    """The check stopped early (bad arguments, no model, unknown target, export or load failure):
    the message fails the test; the entry says what went wrong."""


@dataclass(frozen=True)
class CheckRun:
    """A completed check: what ``npu_check`` returns, the text that fails the test (None: it passes)
    and the JUnit properties of its targets."""

    outcome: NpuCheckOutcome
    failure: Optional[str]
    properties: list[tuple[str, str]]


def _fail(entry: CheckEntry, error: str, message: Optional[str] = None) -> CheckFailed:
    entry.error = error
    return CheckFailed(message if message is not None else error)


def run_check(ctx: RunContext, entry: CheckEntry, model: Any, example_inputs: Any,
              overrides: Mapping[str, Any]) -> CheckRun:
    spec = ctx.spec

    try:
        given = arguments.parse(overrides, "npu_check()")
    except UsageError as exc:
        raise _fail(entry, str(exc)) from None
    if model is None:
        raise _fail(entry, "npu_check() needs a model (a torch.nn.Module), got None")
    import torch

    if not isinstance(model, torch.nn.Module):
        raise _fail(entry, f"npu_check() needs a model (a torch.nn.Module), got a {type(model).__name__}: the "
                           "exporters take modules (wrap a function in an nn.Module whose forward calls it)")
    targets = given.get("targets") or spec.targets
    try:
        tables = [ctx.catalog().table(t) for t in targets]
    except NpuCheckError as exc:
        raise _fail(entry, str(exc), f"npu_check: {exc}") from None
    # targets that name the same table ("rknn" and its full name, or one written twice) are checked once
    unique: dict[str, Any] = {}
    for t in tables:
        unique.setdefault(t.target, t)
    tables = list(unique.values())
    axes = given["dynamic_axes"] if "dynamic_axes" in given else spec.dynamic_axes
    asked_opset = given["opset"] if given.get("opset") is not None else spec.opset
    opset = asked_opset if asked_opset is not None else target_opset(tables)
    options = ExportOptions(
        exporter=given.get("exporter") or spec.exporter,
        opset=opset,
        dynamic_axes=axes,
        input_names=given.get("input_names") or spec.input_names,
        output_names=given.get("output_names") or spec.output_names,
    )
    failure = None  # failed outside the handler: pytest would print the exception it handles first
    try:
        with eval_mode(model), ctx.progress(f"exporting {ctx.test_id} ({options.exporter} exporter)"):
            exported = export_model(model, example_inputs, options, cache_dir=ctx.cache_dir)
    except ExportError as exc:
        failure = _fail(entry, f"export failed: {exc}",
                        f"npu_check: the model could not be exported to ONNX ({options.exporter} exporter):\n{exc}")
    except ValueError as exc:  # export_model: the export options do not fit the model (names, dynamic_axes)
        failure = _fail(entry, f"export options: {exc}",
                        f"npu_check: the export options do not fit the model (the npu_deployable marker or the "
                        f"npu_check arguments): {exc}")
    if failure is not None:
        raise failure
    if ctx.cache_dir is None:  # a fresh temporary directory per export: removed at teardown (the test may read it)
        ctx.temp_exports.append(exported.path.parent)
    entry.export = {"exporter": exported.exporter, "opset": exported.opset, "cache_hit": exported.cache_hit,
                    "key": exported.key, "path": str(exported.path)}
    keep_dir = ctx.settings.keep_onnx_dir
    if keep_dir is not None:  # written by the process that ran the test: one file per test id and call
        try:
            keep(exported.path, keep_dir, ctx.test_id, entry.call_number)
        except UsageError as exc:
            raise _fail(entry, str(exc), f"npu_check: {exc}") from None
    cache_notes = list(exported.notes)  # cache entries that failed their content hashes: said, never used
    try:
        graph = graph_facts(exported.path, notes=cache_notes)
    except NpuCheckError as exc:
        raise _fail(entry, str(exc), f"npu_check: {exc}") from None
    results = check_graph(graph, tables)
    if cache_notes:
        results = [dataclasses.replace(r, notes=(*r.notes, *cache_notes)) for r in results]
        for note in cache_notes:
            ctx.warn(f"npu_check: {note}")
    if opset is not None and exported.opset != opset:
        asked = "the marker's opset" if asked_opset is not None else "the targets' newest opset"
        hint = " (exporter='torchscript' writes older opsets)" if exported.exporter == "dynamo" else ""
        note = (f"the {exported.exporter} exporter wrote opset {exported.opset}, not {opset} ({asked}): it could not "
                f"convert this model{hint}")
        results = [dataclasses.replace(r, notes=(*r.notes, note)) for r in results]
        ctx.warn(f"npu_check: {note}")  # a passing test prints no report
    if not all(r.passed for r in results):
        shapes = input_shapes(graph, example_inputs)
        results = [with_fixes(r, exported.path, t, input_shapes=shapes) for r, t in zip(results, tables)]
    entry.targets = [r.to_json() for r in results]
    budget_lines = deployment_budgets(ctx, results, entry)
    passed_gate = gate(ctx, graph, results, entry)

    props = properties(entry.to_json())
    outcome = NpuCheckOutcome(results=results, onnx_path=exported.path, export=entry.export)
    spec_now = CheckSpec(targets=tuple(targets), exporter=options.exporter, opset=opset, dynamic_axes=axes,
                         numerics=given.get("numerics", spec.numerics), golden=given.get("golden", spec.golden))
    numeric_lines: list[str] = []
    if ctx.settings.numerics_on(spec_now):
        with ctx.progress(f"numerics of {ctx.test_id}"):
            numeric_lines = numerics_step(ctx, spec_now, model, example_inputs, exported.path, graph, results,
                                          tables, entry)
    else:
        entry.numerics = {"enabled": False, "passed": None}
    oracle_fails = False
    if ctx.settings.oracle_mode != "off":
        oracle_fails = oracle_step(ctx, model, example_inputs, exported.path, graph, results, tables, entry)
    if not passed_gate or numeric_lines or oracle_fails:
        entry.status = "failed"
        parts = [failure_text(results, entry.targets, ctx.settings.baseline_path.name, budget_lines)] \
            if not passed_gate else []
        if numeric_lines:
            parts.append("\n".join(numeric_lines))
        if entry.oracle:
            head = ("oracle (strict): the real toolchain disagrees with the table" if oracle_fails
                    else "oracle: what the real toolchains said")
            parts.append("\n".join([head] + [ln for o in entry.oracle["targets"] for ln in oracle_lines(o)]))
        return CheckRun(outcome, "\n\n".join(parts), props)
    return CheckRun(outcome, None, props)


def npu_shares(r: Any) -> tuple[float, Optional[float]]:
    """(share of nodes, share of MACs) on the NPU; MACs None when the partition does not know them."""
    p = r.partition
    if p is not None and getattr(p, "nodes_total", 0):
        macs = p.macs_npu / p.macs_total if getattr(p, "macs_total", 0) else None
        return p.nodes_npu / p.nodes_total, macs
    s = r.summary
    total = s.get("npu", 0) + s.get("cpu", 0) + s.get("unsupported", 0)
    return (s.get("npu", 0) / total if total else 1.0), None


def deployment_budgets(ctx: RunContext, results: Sequence[Any], entry: CheckEntry) -> list[str]:
    """Each target's deployment budget (CPU-fallback nodes, NPU share by nodes and by MACs) of the release
    in force: part of the deployability verdict, whether or not numerics run. Adds ``budget`` to each
    target's JSON; returns the failure lines."""
    budgets = ctx.budgets
    if budgets is None:
        return []
    fail: list[str] = []
    for r, tj in zip(results, entry.targets):
        tb = budgets.for_target(ctx.settings.release, r.target)
        if tb is None:
            continue
        node_share, mac_share = npu_shares(r)
        tj["budget"] = tb.measure(len(r.fallbacks), node_share, mac_share)
        fail += [f"{r.target}: deployment budget exceeded: {p}" for p in tj["budget"]["problems"]]
    return fail




def gate(ctx: RunContext, graph: Any, results: Sequence[Any], entry: CheckEntry) -> bool:
    """Decide the test against the baseline: accepted fallbacks pass, any new one fails.

    Adds to each target's JSON the ``baseline`` verdict and the graph's ``edges`` (for the HTML
    picture) and sets the entry status.
    """

    by_target = edges(graph, results)
    ok = True
    updating = ctx.settings.updating
    for r, tj in zip(results, entry.targets):
        m = match(ctx.baseline().for_pair(ctx.test_id, r.target, entry.call_number), fallbacks(tj))
        # an update run records CPU fallbacks; an unsupported node (the build fails) it refuses
        blocking = refused(m.new) if updating else m.new
        over_budget = bool((tj.get("budget") or {}).get("problems"))
        passed = not r.model_issues and not blocking and not over_budget
        tj["baseline"] = {**m.to_json(), "passed": passed}
        if updating and blocking:
            tj["baseline"]["refused"] = [n["name"] for n in blocking]
        tj["edges"] = by_target.get(r.target, [])
        ok = ok and passed
    entry.status = "passed" if ok else "failed"
    return ok


def edges(graph: Any, results: Sequence[Any]) -> dict[str, list[list[int]]]:
    """Producer -> consumer edges of the main graph as [from, to] positions in each target's node list."""
    producer = {out: n.index for n in graph.nodes if not n.graph for out in n.outputs if out}
    pairs = sorted({(producer[i], n.index) for n in graph.nodes if not n.graph for i in n.inputs
                    if i in producer and producer[i] != n.index})
    out: dict[str, list[list[int]]] = {}
    for r in results:
        pos = {nr.index: k for k, nr in enumerate(r.nodes)}
        out[r.target] = [[pos[a], pos[b]] for a, b in pairs if a in pos and b in pos]
    return out


# The opset torch 2.13's exporters write by default; a target that accepts less gets what it accepts.
EXPORTER_DEFAULT_OPSET = 20


def target_opset(tables: Sequence[Any]) -> Optional[int]:
    """Export at the newest default-domain opset every target accepts (as a deployment would).

    None (the exporter's default) when every target accepts the exporter's default.
    """
    highs = [t.opsets["ai.onnx"][1] for t in tables if "ai.onnx" in t.opsets]
    if not highs or min(highs) >= EXPORTER_DEFAULT_OPSET:
        return None
    return min(highs)


def input_shapes(graph: Any, example_inputs: Any) -> dict[str, tuple[int, ...]]:
    """Example input shapes by ONNX input name (inputs are flattened in order by the exporters)."""
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif hasattr(x, "shape"):
            flat.append(tuple(int(d) for d in x.shape))

    walk(example_inputs)
    return dict(zip(graph.inputs, flat)) if len(flat) == len(graph.inputs) else {}



