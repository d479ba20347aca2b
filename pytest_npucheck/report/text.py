"""Terminal rendering: per-operator tables and one-line summaries."""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ..result import DOCUMENTATION_ONLY, NodeResult, TargetResult, basis_label, documentation_only
from .escape import visible

MAX_NAME = 120


def clean(text: str, limit: int = MAX_NAME) -> str:
    """Names come from the model: escape control, bidi and other invisible characters
    (``escape.visible``) and cap the length."""
    text = visible(str(text))
    return text if len(text) <= limit else text[: limit - 12] + f"...(+{len(text) - limit + 12})"


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
    if source is None:
        return "unknown"
    parts = [source.module or "<root>"] if source.module is not None else []
    if source.file:
        import os

        path = source.file
        try:
            rel = os.path.relpath(path)
            if not rel.startswith(".."):
                path = rel
        except ValueError:
            pass
        parts.append(f"{path}:{source.line}" if source.line else path)
    return " at ".join(parts) if parts else "unknown"


def node_rows(nodes: Iterable[NodeResult]) -> list[list[str]]:
    rows = []
    for n in nodes:
        src = source_text(n.source)
        label = f"{clean(n.op_type, 40)} {clean(n.name)}"
        reasons = n.reasons or ()
        if not reasons:
            rows.append([clean(n.op_type, 40), clean(n.name), n.verdict, "", clean(src, 200)])
        for i, r in enumerate(reasons):
            msg = f"{label}: {clean(r.message, 400)} {basis_label(r.basis)}"
            if i == 0:
                rows.append([clean(n.op_type, 40), clean(n.name), n.verdict, clean(src, 200), msg])
            else:
                rows.append(["", "", "", "", msg])
    return rows


MAX_ROWS = 40


def partition_line(part: Any) -> str:
    from ..partition import fmt_bytes

    j = part.to_json()
    unknown = f" (+{j['transitions_of_unknown_size']} of unknown size)" if j["transitions_of_unknown_size"] else ""
    return (f"partition: {j['npu_subgraphs']} NPU subgraph(s), {j['cpu_islands']} CPU island(s), "
            f"{j['transitions']} transition(s), {fmt_bytes(j['bytes_crossing'])} crossing{unknown}; "
            f"NPU share {_pct(j['npu_share_nodes'])} of nodes, {_pct(j['npu_share_macs'])} of MACs")


def _pct(x: Any) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _causes(nodes: Sequence[NodeResult]) -> list[str]:
    """One line per (rule, op type): how many nodes a cause hits, most first."""
    counts: dict[tuple[str, str, str], int] = {}
    for n in nodes:
        for r in n.reasons:
            key = (r.rule, n.op_type, n.verdict)
            counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [f"{count:4} x {clean(op, 40)} {verdict} ({rule})" for (rule, op, verdict), count in ranked]


def render_target(result: TargetResult, all_nodes: bool = False, max_rows: int = MAX_ROWS) -> list[str]:
    """Summary line, model-level problems, then the per-operator table of nodes that leave the NPU."""
    lines = [summary_line(result)]
    for issue in result.model_issues:
        lines.append(f"  model: {issue.verdict}: {clean(issue.message, 400)}")
    for note in result.notes:
        lines.append(f"  note: {clean(note, 400)}")
    part = result.partition
    if part is not None:
        lines.append("  " + partition_line(part))
    nodes = list(result.nodes) if all_nodes else [n for n in result.nodes if n.falls_back]
    if not all_nodes:
        # most costly first: the first fallback listed is the one worth fixing first
        rank = {name: k for k, name in enumerate(i.node for i in part.impacts)} if part is not None else {}
        nodes.sort(key=lambda n: (-{"unsupported": 2, "cpu": 1}.get(n.verdict, 0), rank.get(n.name, len(rank)), n.index))
    if nodes:
        if not all_nodes and len(nodes) > 1:
            lines.append("  causes:")
            lines += ["  " + c for c in _causes(nodes)]
        shown = nodes if all_nodes or len(nodes) <= max_rows else nodes[:max_rows]
        lines += ["  " + line for line in _table(node_rows(shown), ["op type", "node", "verdict", "source", "reason"])]
        if len(shown) < len(nodes):
            lines.append(f"  ... and {len(nodes) - len(shown)} more nodes (every node is in the JSON report: --npu-report=json:PATH)")
    if result.fixes is not None and result.fixes.suggestions:
        lines += render_fixes(result.fixes)
    return lines


def _verified(v: Any) -> str:
    if v is None:
        return "not checked (no automatic rewrite)"
    if v.error:
        return f"could not be checked ({clean(v.error, 200)})"
    if v.fully_on_npu:
        return f"checked: the model would then be fully on the NPU ({v.fallbacks_before} -> 0 fallbacks)"
    return (f"checked: {v.moved_to_npu} of {v.targeted} node(s) move to the NPU; "
            f"fallbacks {v.fallbacks_before} -> {v.fallbacks_after}")


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
    tool = f"{j['package']} {j.get('package_version') or '?'}"
    if j["toolchain"] == "qnn":
        tool += f" (QNN {j.get('toolchain_version') or '?'})"
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
                           f"{_g4(m.get('cosine'), 6)} snr {_g4(m.get('snr_db'))} dB "
                           f"(policy {num['comparison'].get('policy')})")
    return out


def _g4(x: Any, digits: int = 4) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    return f"{x:.{digits}g}"


def baseline_entry_text(e: Mapping[str, Any]) -> str:
    """One baseline entry on a line (the summary, the run failures, the merge)."""
    loc = e.get("location")
    where = f" at {loc['module'] or '<root>'} {loc['file']}:{loc['line']}" if loc else ""
    call = f" [call {e['call']}]" if e.get("call", 1) != 1 else ""
    return (f"{clean(e['test'], 300)}{call} {e['target']}: {clean(e['op_type'], 40)} {clean(e['node'])}"
            f"{clean(where, 200)}")
