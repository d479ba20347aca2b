"""Terminal rendering: per-operator tables and one-line summaries."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Optional, Sequence

from ..result import DOCUMENTATION_ONLY, NodeResult, TargetResult, basis_label, documentation_only
from .formatting import MAX_NAME, clean, location, number, oracle_tool, pct as _pct

__all__ = ["clean", "MAX_NAME", "summary_line", "source_text", "node_rows", "partition_line", "render_target",
           "render_fixes", "oracle_lines"]


def summary_line(result: TargetResult) -> str:
    s = result.summary
    only = f", {DOCUMENTATION_ONLY}" if documentation_only(result.table) else ""
    total = len(result.nodes)
    counts = f"npu {s['npu']}, cpu {s['cpu']}, unsupported {s['unsupported']}, folded {s['folded']}"
    if result.passed:
        head = f"PASS: all {total - s['folded']} remaining nodes run on the NPU"
    else:
        bad = s["cpu"] + s["unsupported"]
        head = "FAIL: " + (f"{bad} of {total} nodes leave the NPU" if bad else "the compiler rejects the model")
        if result.model_issues and bad:
            head += " and the compiler rejects the model"
    table = result.table
    rev = f"revision {table['revision']}, " if "revision" in table else ""
    return f"{result.target} [table {rev}sha256 {table.get('sha256', '')[:12]}{only}]: {head} ({counts})"


def _table(rows: Sequence[Sequence[str]], header: Sequence[str]) -> list[str]:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    widths[-1] = 0  # the last column is not padded
    fmt = lambda r: "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()  # noqa: E731
    return [fmt(header), fmt(["-" * max(len(h), 1) for h in header])] + [fmt(r) for r in rows]


def source_text(source: Any) -> str:
    """Module path and file:line, the file relative to the working directory when inside it."""
    return location(source, relative=True)


def node_rows(nodes: Iterable[NodeResult], gate: Optional[Mapping[str, Any]] = None) -> list[list[str]]:
    """One row per node and reason; with ``gate`` (a target's baseline verdict) a first column says
    NEW (fails the check) or accepted, and an accepted node's reason is the baseline's."""
    new = set((gate or {}).get("new") or ())
    accepted = {a["node"]: a for a in (gate or {}).get("accepted") or ()}
    rows = []
    for n in nodes:
        src = source_text(n.source)
        label = f"{clean(n.op_type, 40)} {clean(n.name)}"
        reasons = n.reasons or ()
        mark = [] if gate is None else ["NEW" if n.name in new else ("accepted" if n.name in accepted else "")]
        extra = []
        if n.name in accepted:
            a = accepted[n.name]
            extra = [f"accepted: {clean(a['reason'], 200)}" + (f" ({clean(a['link'], 200)})" if a.get("link") else "")]
        if not reasons:
            rows.append(mark + [clean(n.op_type, 40), clean(n.name), n.verdict, clean(src, 200), "; ".join(extra)])
        for i, r in enumerate(reasons):
            msg = f"{label}: {clean(r.message, 400)} {basis_label(r.basis)}"
            if i == 0:
                rows.append(mark + [clean(n.op_type, 40), clean(n.name), n.verdict, clean(src, 200), msg])
            else:
                rows.append([""] * (len(mark) + 4) + [msg])
        for e in extra if reasons else ():
            rows.append([""] * (len(mark) + 4) + [e])
    return rows


MAX_ROWS = 40


def partition_line(part: Any) -> str:
    from ..partition import fmt_bytes

    j = part.to_json()
    unknown = f" (+{j['transitions_of_unknown_size']} of unknown size)" if j["transitions_of_unknown_size"] else ""
    return (f"partition: {j['npu_subgraphs']} NPU subgraph(s), {j['cpu_islands']} CPU island(s), "
            f"{j['transitions']} transition(s), {fmt_bytes(j['bytes_crossing'])} crossing{unknown}; "
            f"NPU share {_pct(j['npu_share_nodes'])} of nodes, {_pct(j['npu_share_macs'])} of MACs")


def _causes(nodes: Sequence[NodeResult]) -> list[str]:
    """One line per (rule, op type): how many nodes a cause hits, most first."""
    counts: dict[tuple[str, str, str], int] = {}
    for n in nodes:
        for r in n.reasons:
            key = (r.rule, n.op_type, n.verdict)
            counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [f"{count:4} x {clean(op, 40)} {verdict} ({rule})" for (rule, op, verdict), count in ranked]


def render_target(result: TargetResult, all_nodes: bool = False, max_rows: int = MAX_ROWS,
                  gate: Optional[Mapping[str, Any]] = None) -> list[str]:
    """Summary line, model-level problems, then the per-operator table of nodes that leave the NPU,
    each node once, in graph order. ``gate``: the target's baseline verdict (``targets[].baseline``
    of the JSON report): a column marks each fallback NEW or accepted."""
    lines = [summary_line(result)]
    for issue in result.model_issues:
        lines.append(f"  model: {issue.verdict}: {clean(issue.message, 400)}")
    for note in result.notes:
        lines.append(f"  note: {clean(note, 400)}")
    part = result.partition
    if part is not None:
        lines.append("  " + partition_line(part))
    nodes = list(result.nodes) if all_nodes else [n for n in result.nodes if n.falls_back]
    nodes.sort(key=lambda n: n.index)
    if nodes:
        if not all_nodes and len(nodes) > 1:
            lines.append("  causes:")
            lines += ["  " + c for c in _causes(nodes)]
        shown = nodes if all_nodes or len(nodes) <= max_rows else nodes[:max_rows]
        header = ["op type", "node", "verdict", "source", "reason"]
        if gate is not None:
            header = ["gate"] + header
        lines += ["  " + line for line in _table(node_rows(shown, gate), header)]
        if len(shown) < len(nodes):
            lines.append(f"  ... and {len(nodes) - len(shown)} more nodes (every node is in the JSON report: --npu-report=json:PATH)")
    if result.fixes is not None and result.fixes.suggestions:
        lines += render_fixes(result.fixes)
    return lines


def _verified(v: Any) -> str:
    from .view import checked_text  # the one wording of a fix's check (the reports use it too)

    return clean(checked_text(v.to_json() if v is not None else None), 300)


def render_fixes(plan: Any) -> list[str]:
    lines = ["  fixes (each checked by re-running the verdict on a rewritten graph where possible):"]
    for k, s in enumerate(plan.suggestions, 1):
        names = ", ".join(clean(n, 60) for n in s.nodes[:4]) + (f", +{len(s.nodes) - 4} more" if len(s.nodes) > 4 else "")
        target = f" [{names}]" if names else ""
        lines.append(f"  {k}. {s.recipe.title}{target}: {_verified(s.verification)}")
        if s.recipe.exporter_artefact:
            lines.append(f"     exporter artefact: {s.recipe.exporter_artefact}")
        lines.append(f"     how: {s.recipe.advice}")
        lines.append(f"     numerics: {s.recipe.numerics}")
    if plan.combined is not None:
        lines.append(f"  with every checked fix together: {_verified(plan.combined)}")
    return lines


def oracle_lines(j: Mapping[str, Any]) -> list[str]:
    """What a real toolchain said about one target (an ``oracle.targets[]`` entry of the JSON report):
    the headline, one ``TABLE BUG`` line per disagreement, notes, and the numerics per output."""
    head = f"oracle {j['target']}: "
    if j["status"] != "ran":
        word = "not run" if j["status"] == "unavailable" else "ERROR"
        return [head + f"{word}: {clean(j['reason'], 600)}"]
    built = "built the model" if j["build_status"] == "ok" else f"REJECTED the model ({j['build_status']})"
    a = j.get("agreement") or {}
    tool = oracle_tool(j, unknown="?")
    out = [head + f"{tool} {built} at {j['precision']}; "
                  f"real placement agrees with the table on {a.get('agree', 0)} of {a.get('nodes', 0)} node(s)"]
    if j["build_status"] != "ok" and j.get("build_message"):
        out.append("  toolchain: " + clean(j["build_message"].splitlines()[0], 400))
    for d in a.get("disagreements", []):
        what = {"missed_fallback": "the table says it stays on the NPU, the toolchain runs it on the CPU "
                                   "(a missed fallback)",
                "false_alarm": "the table says it leaves the NPU, the toolchain runs it on the NPU "
                               "(a false alarm)"}.get(d["kind"], f"the table says {d['static']}, the toolchain "
                                                                 f"says {d['real']}")
        said = "; ".join(d.get("real_reasons") or [])
        out.append(f"  TABLE BUG {clean(d['op_type'], 40)} {clean(d['node'])}: {what}"
                   + (f" (toolchain: {clean(said, 300)})" if said else ""))
    for n in j.get("notes", []):
        out.append("  note: " + clean(n, 400))
    num = j.get("numerics") or {}
    if num:
        if num.get("status") != "ok":
            out.append(f"  numerics ({num['candidate']}): not compared: {clean(num.get('message') or '', 300)}")
        else:
            for o_ in (num.get("comparison") or {}).get("outputs", []):
                m = o_.get("metrics") or {}
                out.append(f"  numerics {num['candidate']} vs {num['reference']}, output {clean(o_['name'], 60)}: "
                           f"{'PASS' if o_['passed'] else 'FAIL'} max_abs {_g4(m.get('max_abs'))} cosine "
                           f"{number(m.get('cosine'))} snr {_g4(m.get('snr_db'))} dB "
                           f"(policy {num['comparison'].get('policy')})")
    return out


def _g4(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"
