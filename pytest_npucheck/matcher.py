"""Graph facts x support table -> per-node verdicts. Pure: no pytest, no torch."""

from __future__ import annotations

from typing import Any, Mapping

from .graph import GraphFacts, NodeFact, paused_gc
from .partition import partition
from .prepass import GraphView, PrepassResult, run_prepasses
from .result import SEVERITY, NodeResult, Reason, TargetResult
from .rules import RULES
from .tables import Constraint, Table


def _worst(verdicts: list[str], default: str = "npu") -> str:
    return max(verdicts, key=lambda v: SEVERITY[v]) if verdicts else default


def _check_constraints(node: NodeFact, constraints: tuple[Constraint, ...], view: GraphView) -> list[Reason]:
    reasons = []
    for c in constraints:
        if c.only_ops is not None and node.key not in c.only_ops:
            continue
        if node.key in c.except_ops:
            continue
        rule = RULES[c.rule]
        message = rule.check(node, c.params, view)  # type: ignore[arg-type]
        if message:
            reasons.append(Reason(c.rule, message, c.on_fail, rule.category))
    return reasons


def judge_node(node: NodeFact, table: Table, view: GraphView) -> tuple[str, list[Reason]]:
    """Verdict and reasons for one node that the pre-passes left in place."""
    entry = table.ops.get(node.key)
    if entry is None:
        verdict = table.default_verdict
        what = "has no CPU fallback: the compiler rejects it" if verdict == "unsupported" else "falls back to the CPU"
        return verdict, [Reason("op_missing", f"{node.key} is not supported by {table.target} ({what})", verdict)]
    if entry.opset is not None and not entry.opset[0] <= node.opset <= entry.opset[1]:
        return "unsupported", [Reason("opset", f"opset {node.opset} outside the supported range "
                                      f"[{entry.opset[0]}, {entry.opset[1]}] for {node.op_type}", "unsupported", "opset")]
    if entry.status == "cpu":
        note = f" ({entry.note})" if entry.note else ""
        return "cpu", [Reason("cpu_only", f"{node.op_type} has only a CPU implementation in {table.target}{note}", "cpu")]
    if entry.status == "unsupported":
        note = f" ({entry.note})" if entry.note else ""
        return "unsupported", [Reason("op_unsupported", f"{node.op_type} is rejected by the {table.toolchain} compiler{note}",
                                      "unsupported")]
    reasons = _check_constraints(node, table.generic_constraints, view) + _check_constraints(node, entry.constraints, view)
    return _worst([r.verdict for r in reasons]), reasons


def match(graph: GraphFacts, table: Table, pre: PrepassResult | None = None) -> TargetResult:
    """Judge every node of the graph (subgraph bodies included) against one table."""
    with paused_gc():
        return _match(graph, table, pre)


def _match(graph: GraphFacts, table: Table, pre: PrepassResult | None) -> TargetResult:
    pre = pre if pre is not None else run_prepasses(graph, table)
    view = GraphView(graph, pre)
    results = []
    for node in graph.nodes:
        fused_into = None
        if node.index in pre.folded:
            verdict, reasons = "folded", [Reason("prepass", pre.folded[node.index], "folded", "prepass")]
        elif node.index in pre.fused:
            pattern, anchor = pre.fused[node.index]
            fused_into = f"{pattern.fused_op} ({pattern.name}, anchored at {graph.nodes[anchor].name})"
            verdict = pattern.status
            what = "which runs on the CPU" if verdict == "cpu" else "which the compiler rejects (no CPU fallback)"
            note = f" ({pattern.description})" if pattern.description else ""
            reasons = [] if verdict == "npu" else [Reason("pattern", f"fused into {fused_into}, {what}{note}", verdict)]
        else:
            verdict, reasons = judge_node(node, table, view)
        results.append(NodeResult(
            index=node.index, name=node.name, op_type=node.op_type, domain=node.domain, verdict=verdict,
            reasons=tuple(reasons), graph=node.graph, source=node.source, fused_into=fused_into,
        ))
    issues = []
    for domain, version in sorted(graph.opsets.items()):
        if domain not in table.opsets:
            if any(n.domain == domain for n in graph.nodes):
                issues.append(Reason("opset", f"the model uses domain {domain!r} (opset {version}), "
                                     f"which {table.target} does not import", "unsupported", "opset"))
            continue
        lo, hi = table.opsets[domain]
        if not lo <= version <= hi:
            issues.append(Reason("opset", f"model opset {version} for domain {domain!r} outside the range "
                                 f"[{lo}, {hi}] that {table.target} accepts", "unsupported", "opset"))
    notes = []
    for name in graph.inputs:
        info = graph.tensor(name)
        if info is not None and info.shape is not None and not info.static:
            dims = ", ".join("?" if d is None else str(d) for d in info.shape if not isinstance(d, int))
            notes.append(f"model input '{name}' has dynamic dims ({dims}); NPU compilers plan for fixed shapes: "
                         "export with static shapes or give the toolchain its shape profiles")
    if graph.shape_inference_error:
        notes.append(f"ONNX shape inference stopped early ({graph.shape_inference_error}); "
                     "rules that need the missing shapes report them as unknown")
    return TargetResult(
        target=table.target, table=table.header(), model=model_info(graph), nodes=tuple(results),
        model_issues=tuple(issues), notes=tuple(notes), partition=partition(graph, results, view),
    )


def model_info(graph: GraphFacts) -> Mapping[str, Any]:
    return {
        "path": graph.path,
        "opsets": dict(sorted(graph.opsets.items())),
        "producer": graph.producer_name,
        "inputs": {n: graph.tensors[n].to_json() if n in graph.tensors else None for n in graph.inputs},
        "node_count": len(graph.nodes),
    }
