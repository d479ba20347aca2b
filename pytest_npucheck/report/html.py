"""HTML report: one self-contained file (inline CSS, JS and SVG; nothing loaded from anywhere).

Formats the run view (``view.build``) for the reviewer who opens it first: the headline, the NEW
fallbacks with the checked fixes beside each, what else fails the run (stale baseline entries,
loosened budgets, table bugs, errors), then one section per test and target, failing ones first
(passing ones folded): the partition, a layered drawing of the graph (``graph_layout``: branches
and skip connections drawn as such, long NPU-only runs collapsed, nodes labelled with their PyTorch
module path, NPU/CPU transitions marked) and the per-operator table. Accepted fallbacks, numerics
and oracles follow. Every string from a model is escaped and capped (``formatting.html``).
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from . import formatting as F
from .graph_layout import layout
from .view import INTERRUPTED, RunView, TargetView, TestView, build
from .rows import fmt
from ..result import DOCUMENTATION_ONLY, reason_text

MAX_SVG_BOXES = 6000
MAX_TABLE_ROWS = 5000
COLLAPSE_RUN = 6  # NPU-only chains of at least this many nodes are drawn as one box
_DEVICE = {"npu": "npu", "cpu": "cpu", "unsupported": "cpu", "folded": None}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccd;padding:2px 6px;text-align:left;
vertical-align:top;max-width:40em;overflow-wrap:break-word}th{background:#eef}
td.num{white-space:nowrap;text-align:right}td.nw,table.new td:first-child,table.accepted td:first-child{white-space:nowrap}
.pass{color:#116329;font-weight:bold}.fail{color:#b3261e;font-weight:bold}
tr.v-npu td.v{background:#d8f3dc}tr.v-cpu td.v{background:#ffe8cc}tr.v-unsupported td.v{background:#ffd6d6}
tr.v-folded td.v{background:#eee}tr.new td{background:#fff1f0}
body.only-fb tr.v-npu,body.only-fb tr.v-folded{display:none}
.graph{overflow:auto;max-height:75vh;border:1px solid #ccd;background:#fcfcfd}
.legend{margin:.3em 0;font-size:12px}.legend span{display:inline-block;margin-right:1.2em;white-space:nowrap}
.legend i{display:inline-block;width:14px;height:12px;vertical-align:middle;margin-right:4px;border:1px solid #888}
.n-npu{fill:#52b788}.n-cpu{fill:#f4a261}.n-unsupported{fill:#e63946}.n-folded{fill:#ced4da}.n-run{fill:#b7e4c7}
.cause{stroke:#1b1f24;stroke-width:3}.e{stroke:#8d99ae;stroke-width:1.2;fill:none}
.x{stroke:#d00000;stroke-width:2.5;stroke-dasharray:6 3;fill:none}
text.l{font:11px monospace;pointer-events:none}text.op{font:bold 11px monospace;pointer-events:none}
code{overflow-wrap:break-word}
section.test{border-left:4px solid #ccd;padding-left:.8em;margin:1em 0}
section.test.failed,section.test.error{border-left-color:#b3261e}
.fix{margin:.2em 0}.fixes{margin:.3em 0 .3em 1em}
summary{cursor:pointer;font-weight:600}
td.fix{min-width:18em}td.reason{min-width:14em}tr.group th{background:#f6f6fa;font-weight:normal}
"""

_JS = """
document.getElementById('only-fb').addEventListener('change',function(e){
  document.body.classList.toggle('only-fb',e.target.checked);});
document.querySelectorAll('svg.npu-graph[data-first-fallback-y]').forEach(function(g){
  g.parentNode.scrollTop=Math.max(0,Number(g.getAttribute('data-first-fallback-y'))-120);});
document.body.setAttribute('data-rendered',String(document.querySelectorAll('svg.npu-graph').length));
"""

LEGEND = ('<div class="legend"><span><i style="background:#52b788"></i>NPU</span>'
          '<span><i style="background:#b7e4c7"></i>run of NPU nodes (collapsed)</span>'
          '<span><i style="background:#f4a261"></i>CPU</span><span><i style="background:#e63946"></i>unsupported</span>'
          '<span><i style="background:#ced4da"></i>folded</span>'
          '<span><i style="background:#fff;border:2px dashed #d00000"></i>NPU/CPU transition</span>'
          '<span><i style="background:#f4a261;border:3px solid #1b1f24"></i>causes a transition</span></div>')


# Escape for HTML text and attributes; invisible characters shown as escapes; length capped (called
# for every string of every node: the function itself, not a wrapper around it).
h = F.html


def _reasons(n: Mapping[str, Any]) -> str:
    return "; ".join(reason_text(r) for r in n.get("reasons", []))


def _tail(module: Optional[str], limit: int = 24) -> str:
    """A module path that fits a box: its first and last components, the middle elided
    (``down1.maxpool_conv.1.double_conv.5`` -> ``down1…double_conv.5``)."""
    if module is None:
        return ""
    if module == "":
        return "<root>"
    if len(module) <= limit:
        return module
    parts = module.split(".")
    acc, i = parts[-1], len(parts) - 2
    while i > 0 and len(parts[0]) + 1 + len(parts[i]) + 1 + len(acc) <= limit:
        acc, i = parts[i] + "." + acc, i - 1
    if len(parts) > 1 and len(parts[0]) + 1 + len(acc) <= limit:
        return parts[0] + "\u2026" + acc
    return "\u2026" + module[-(limit - 1):]


def graph_svg(tr: Mapping[str, Any], gid: str, reasons: Optional[Sequence[str]] = None) -> str:
    """The main graph as a layered DAG: coloured by device, transitions marked, long NPU runs collapsed.

    ``gid``: unique per graph in the page (the SVG's marker id); ``reasons``: each node's
    ``_reasons`` text, when the caller has them already."""
    nodes: Sequence[Mapping[str, Any]] = tr.get("nodes", [])
    main = [k for k, n in enumerate(nodes) if not n.get("graph")]
    if not main:
        return "<p>(no nodes)</p>"
    local = {k: i for i, k in enumerate(main)}
    edges = [(local[a], local[b]) for a, b in tr.get("edges", []) if a in local and b in local and a != b]
    verdicts = [nodes[k]["verdict"] for k in main]

    bw, bh = 176, 34
    lay = layout(len(main), edges, lambda v: bw, collapsible=lambda v: verdicts[v] == "npu",
                 min_run=COLLAPSE_RUN, collapsed_width=bw, box_height=bh, margin=12)
    if len(lay.boxes) > MAX_SVG_BOXES:
        return f"<p>(graph of {len(main)} nodes not drawn: {len(lay.boxes)} boxes, more than {MAX_SVG_BOXES})</p>"
    part = tr.get("partition") or {}
    cross_names = {c.get("from") for c in part.get("crossings", [])} | {c.get("to") for c in part.get("crossings", [])}
    collapsed = [len(b.members) > 1 for b in lay.boxes]
    box_dev = [("npu" if col else _DEVICE.get(verdicts[b.members[0]])) for b, col in zip(lay.boxes, collapsed)]
    crossing = {(a, c) for a, c, _ in lay.edges if box_dev[a] and box_dev[c] and box_dev[a] != box_dev[c]}
    causes = {k for a, c in crossing for k in (a, c) if box_dev[k] == "cpu"}
    causes |= {k for k, b in enumerate(lay.boxes) if not collapsed[k] and box_dev[k] == "cpu"
               and nodes[main[b.members[0]]]["name"] in cross_names}
    W, H = int(lay.width) + 1, int(lay.height) + 1
    marker = f"arrow-{gid}"
    # the picture opens scrolled to the first node that leaves the NPU (the script below)
    first = min((b.y for k, b in enumerate(lay.boxes) if box_dev[k] == "cpu"), default=None)
    scroll = f' data-first-fallback-y="{first:.0f}"' if first is not None else ""
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="npu-graph" id="graph-{gid}" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" role="img" aria-label="graph of {len(main)} nodes"{scroll}>',
           f'<defs><marker id="{marker}" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#8d99ae"/></marker></defs>']
    for a, c, pts in lay.edges:
        ba, bc = lay.boxes[a], lay.boxes[c]
        x1, y1 = ba.x + bw / 2, ba.y + bh
        x2, y2 = bc.x + bw / 2, bc.y
        path = [(x1, y1), *pts, (x2, y2)]
        d = f"M{path[0][0]:.0f},{path[0][1]:.0f}"
        for (px, py), (qx, qy) in zip(path, path[1:]):
            my = (py + qy) / 2
            d += f" C{px:.0f},{my:.0f} {qx:.0f},{my:.0f} {qx:.0f},{qy:.0f}"
        cls = "x" if (a, c) in crossing else "e"
        out.append(f'<path class="{cls}" d="{d}" marker-end="url(#{marker})"/>')
    for k, b in enumerate(lay.boxes):
        x, y = b.x, b.y
        if collapsed[k]:
            first, last = nodes[main[b.members[0]]], nodes[main[b.members[-1]]]
            mods = [(nodes[main[i]].get("source") or {}).get("module") for i in b.members]
            mods = [m for m in mods if m]
            span = f"{_tail(mods[0], 30)} \u2026 {_tail(mods[-1], 30)}" if mods else ""
            tip = (f"{len(b.members)} nodes on the NPU, collapsed: {first['op_type']} {first['name']} \u2026 "
                   f"{last['op_type']} {last['name']}" + (f" ({span})" if span else ""))
            out.append(f'<g class="node run" data-verdict="npu" data-nodes="{len(b.members)}"><title>{h(tip, 600)}</title>'
                       f'<rect x="{x:.0f}" y="{y:.0f}" width="{bw}" height="{bh}" rx="9" class="n-run"/>'
                       f'<text class="op" x="{x + 6:.0f}" y="{y + 14:.0f}">{len(b.members)} NPU nodes</text>'
                       f'<text class="l" x="{x + 6:.0f}" y="{y + 28:.0f}">{h(_tail(mods[0] if mods else ""), 30)}</text></g>')
            continue
        i = main[b.members[0]]
        n = nodes[i]
        v = n["verdict"] if n["verdict"] in _DEVICE else "unsupported"
        cls = f"n-{v}" + (" cause" if k in causes else "")
        module = (n.get("source") or {}).get("module")
        tip = (f"{n['op_type']} {n['name']}: {v}" + (f" (module {module or '<root>'})" if module is not None else "")
               + ((f" - {_reasons(n) if reasons is None else reasons[i]}") if n.get("reasons") else ""))
        out.append(f'<g class="node" data-verdict="{v}"><title>{h(tip, 600)}</title>'
                   f'<rect x="{x:.0f}" y="{y:.0f}" width="{bw}" height="{bh}" rx="5" class="{cls}"/>'
                   f'<text class="op" x="{x + 6:.0f}" y="{y + 14:.0f}">{h(n["op_type"], 24)}</text>'
                   f'<text class="l" x="{x + 6:.0f}" y="{y + 28:.0f}">{h(_tail(module), 30)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _fix_cell(tr: TargetView, ks: Sequence[int]) -> str:
    if not ks:
        return "-"
    return "".join(f'<div class="fix"><b>{k + 1}. {h(tr.fixes[k].title)}</b>: {h(tr.fixes[k].checked, 300)}</div>'
                   for k in ks)


def _fixes_list(tr: TargetView) -> list[str]:
    if not tr.fixes:
        return []
    out = ['<div class="fixes"><b>Fixes</b> (each checked by re-running the verdict on a rewritten graph where '
           'possible):<ol>']
    for f in tr.fixes:
        nodes = ", ".join(f"<code>{h(n, 80)}</code>" for n in f.nodes[:6]) + (f" +{len(f.nodes) - 6} more" if len(f.nodes) > 6 else "")
        out.append(f'<li><b>{h(f.title)}</b> ({nodes}): {h(f.checked, 300)}. How: {h(f.advice, 600)} '
                   f'Numerics: {h(f.numerics, 300)}</li>')
    out.append("</ol>" + (f"<p>With every checked fix together: {h(tr.combined_fix, 300)}</p>" if tr.combined_fix else "")
               + "</div>")
    return out


def _node_table(tr: TargetView, reasons: Optional[Sequence[str]] = None) -> list[str]:
    state = {fb.name: ("NEW" if fb.new else "accepted") for fb in tr.fallbacks}
    rows = ['<table class="nodes"><thead><tr><th>#</th><th>op type</th><th>node</th><th>verdict</th>'
            '<th>gate</th><th>source</th><th>reason</th></tr></thead><tbody>']
    nodes = tr.raw.get("nodes", [])
    for k, n in enumerate(nodes[:MAX_TABLE_ROWS]):
        v = n["verdict"] if n["verdict"] in _DEVICE else "unsupported"
        gate = state.get(n["name"], "")
        rows.append(f'<tr class="v-{v}{" new" if gate == "NEW" else ""}"><td class="num">{k}</td><td>{h(n["op_type"], 60)}</td>'
                    f'<td><code>{h(n["name"])}</code></td><td class="v">{v}</td><td>{gate}</td>'
                    f'<td>{h(F.location(n.get("source"), file_name_only=True))}</td>'
                    f'<td>{h(_reasons(n) if reasons is None else reasons[k], 600)}</td></tr>')
    rows.append("</tbody></table>")
    if len(nodes) > MAX_TABLE_ROWS:
        rows.append(f"<p>... and {len(nodes) - MAX_TABLE_ROWS} more nodes (every node is in the JSON report)</p>")
    return rows


def _word(ok: bool) -> str:
    return '<span class="pass">PASS</span>' if ok else '<span class="fail">FAIL</span>'


def _target_section(t: TestView, tr: TargetView, anchor: str) -> str:
    table = tr.raw.get("table") or {}
    s = tr.summary
    part = tr.partition
    sec = [f'<section class="test {t.status}" id="{anchor}" data-test="{h(t.label, 300)}" data-target="{h(tr.target)}" '
           f'data-status="{tr.word}"><h2>{_word(tr.passed)} <code>{h(t.label, 300)}</code> on {h(tr.target)}</h2>',
           f'<p>table {h(table.get("toolchain", ""))}@{h(table.get("version", ""))}/{h(table.get("soc", ""))} '
           + (f'revision {h(str(table["revision"]))} ' if "revision" in table else '')
           + f'sha256 <code>{h(tr.table_sha256[:12], 80)}</code>'
           + (f' ({DOCUMENTATION_ONLY}: not checked against the toolchain)' if tr.documentation_only else '')
           + f'; verdict {h(tr.verdict)}; npu {s.get("npu", 0)}, cpu {s.get("cpu", 0)}, unsupported '
           f'{s.get("unsupported", 0)}, folded {s.get("folded", 0)}; {len(tr.new)} new, {len(tr.accepted)} accepted '
           'fallback(s)</p>']
    if t.errored:
        sec.append(f'<p class="fail">The test errored: {h(t.error, 600)}</p>')
    if part:
        sec.append(f'<p>partition: {part.get("npu_subgraphs")} NPU subgraph(s), {part.get("cpu_islands")} CPU island(s), '
                   f'{part.get("transitions")} transition(s), {part.get("bytes_crossing")} bytes crossing; NPU share '
                   f'{F.pct(tr.npu_share_nodes)} of nodes, {F.pct(tr.npu_share_macs)} of MACs</p>')
    for issue in tr.model_issues:
        sec.append(f'<p class="fail">model: {h(issue, 600)}</p>')
    for p in tr.budget_problems:
        sec.append(f'<p class="fail">deployment budget: {h(p, 600)}</p>')
    if tr.new:
        sec.append('<table class="fallbacks"><thead><tr><th>op type</th><th>node</th><th>module</th><th>verdict</th>'
                   '<th>reason</th><th>fix (checked)</th></tr></thead><tbody>')
        for fb in tr.new:
            sec.append(f'<tr class="new"><td>{h(fb.op_type, 60)}</td><td><code>{h(fb.name)}</code></td>'
                       f'<td>{h(fb.where)}</td><td>{h(fb.verdict)}</td><td class="reason">{h(fb.reasons, 600)}</td>'
                       f'<td class="fix">{_fix_cell(tr, fb.fixes)}</td></tr>')
        sec.append("</tbody></table>")
    sec += _fixes_list(tr)
    sec.append(LEGEND)
    reasons = [_reasons(n) for n in tr.raw.get("nodes", [])]  # the drawing's tips and the table's column
    sec.append(f'<div class="graph">{graph_svg(tr.raw, anchor, reasons)}</div>')
    sec.append(f"<details><summary>Every node ({len(tr.raw.get('nodes', []))})</summary>")
    sec += _node_table(tr, reasons)
    sec.append("</details></section>")
    return "".join(sec)


def render(doc: Mapping[str, Any], view: Optional[RunView] = None) -> str:
    """The HTML report of a run document (``view``: its ``view.build``, when the caller has it)."""
    v: RunView = build(doc) if view is None else view
    tt = v.totals
    head = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>NPU check: {v.headline}</title><style>{_CSS}</style></head><body>",
            f'<h1>NPU check: <span class="{"pass" if v.passed else "fail"}">{v.headline}</span></h1>',
            *([f'<p class="fail"><strong>{h(INTERRUPTED)}</strong></p>'] if v.interrupted else []),
            f'<p>{tt["tests"]} checked test(s): {tt["passed"]} passed, {tt["failed"]} failed, {tt["error"]} error; '
            f'{v.new_count} new fallback(s), {v.accepted_count} accepted, '
            f'{F.plural(len(v.stale), "stale baseline entry", "stale baseline entries")}. {h(v.tool)}, {h(v.created)}</p>']
    base = v.baseline
    if base.get("updated"):
        head.append(f'<p>Baseline {h(base.get("path", ""))} updated by --npu-update-baseline: {len(base.get("added", []))} '
                    f'added, {len(base.get("removed", []))} removed.</p>')
    head.append('<p><label><input type="checkbox" id="only-fb"> show only nodes that leave the NPU</label></p>')
    anchors = {(ti, k): f"t{ti}-{k}" for ti, t in enumerate(v.tests) for k in range(len(t.targets))}
    # the top: one row per failing test and target (its NEW fallbacks by op type, the fixes checked for
    # them); each node is listed once, in its test's section below, beside the graph
    new_rows = []
    for ti, t in enumerate(v.tests):
        for k, tr in enumerate(t.targets):
            if not tr.new:
                continue
            ops: dict[str, int] = {}
            for fb in tr.new:
                ops[fb.op_type] = ops.get(fb.op_type, 0) + 1
            kinds = ", ".join(f"{n} {h(op, 60)}" for op, n in sorted(ops.items(), key=lambda kv: (-kv[1], kv[0])))
            fixes = sorted({k2 for fb in tr.new for k2 in fb.fixes})
            new_rows.append(f'<tr class="new"><td>{h(tr.target)}</td><td><a href="#{anchors[ti, k]}"><code>'
                            f'{h(t.label, 300)}</code></a></td><td class="num">{len(tr.new)}</td><td>{kinds}</td>'
                            f'<td class="fix">{_fix_cell(tr, fixes)}</td></tr>')
    body = ['<section id="new"><h2>New fallbacks</h2>']
    body += ([('<table class="new"><thead><tr><th>target</th><th>test</th><th>new</th><th>op types</th>'
               '<th>fixes (checked)</th></tr></thead><tbody>'), *new_rows, "</tbody></table>"]
             if new_rows else ["<p>None.</p>"])
    body.append("</section>")
    if v.loosened:
        body.append(f'<section id="loosened"><h2>Budget loosenings without approval</h2><p>The budgets file '
                    f'{h(v.budgets.get("path", ""))} loosens these limits (against its committed '
                    'version or an earlier release) with no <code>loosened</code> record: this fails the run.</p><ul>'
                    + "".join(f'<li class="fail">{h(p, 600)}</li>' for p in v.loosened) + "</ul></section>")
    if v.stale:
        body.append('<section id="stale"><h2>Stale baseline entries</h2><p>These accepted fallbacks no longer occur: '
                    'remove them from the baseline (or run --npu-update-baseline).</p><table class="stale"><thead><tr>'
                    '<th>target</th><th>test</th><th>op type</th><th>node</th><th>location</th><th>reason</th></tr></thead><tbody>')
        for e in v.stale:
            body.append(f'<tr><td>{h(e["target"])}</td><td><code>{h(e["test"], 300)}</code></td><td>{h(e["op_type"], 60)}</td>'
                        f'<td><code>{h(e["node"])}</code></td><td>{h(F.location(e.get("location")))}</td>'
                        f'<td>{h(e["reason"], 600)}</td></tr>')
        body.append("</tbody></table></section>")
    errors = [t for t in v.tests if t.errored]
    if errors:
        body += ['<section id="errors"><h2>Errors</h2><table class="errors"><thead><tr><th>test</th><th>status</th>'
                 '<th>error</th></tr></thead><tbody>']
        body += [f'<tr class="error"><td><code>{h(t.label, 300)}</code></td><td>error</td><td>{h(t.raw.get("error") or "", 600)}</td></tr>'
                 for t in errors]
        body.append("</tbody></table></section>")
    body += _oracle_sections(v.tests)
    # one section per test and target: failing and errored tests first, open; passing ones folded
    failing = [(ti, t) for ti, t in enumerate(v.tests) if not t.passed]
    passing = [(ti, t) for ti, t in enumerate(v.tests) if t.passed]
    if failing:
        body.append(f'<h2 id="failing">Failing tests ({len(failing)})</h2>')
        for ti, t in failing:
            if not t.targets:
                body.append(f'<section class="test error" data-test="{h(t.label, 300)}" data-target="" data-status="ERROR">'
                            f'<h2><span class="fail">ERROR</span> <code>{h(t.label, 300)}</code></h2>'
                            f'<p class="fail">{h(t.error, 600)}</p></section>')
            for k, tr in enumerate(t.targets):
                body.append(_target_section(t, tr, anchors[ti, k]))
            if t.failing_numerics or t.numerics_error:
                body.append(f'<p class="fail">Numerics of <code>{h(t.label, 300)}</code> fail: '
                            + "; ".join(f'{h(r["candidate"])} {h(r["target"])} output <code>{h(r["output"])}</code>: '
                                        f'{h(r["reasons"], 300)}' for r in t.failing_numerics)
                            + (h(t.numerics_error, 300) if t.numerics_error else "")
                            + ' (<a href="#numerics">numerics</a>)</p>')
    acc = [(ti, k, t, tr, fb) for ti, t in enumerate(v.tests) for k, tr in enumerate(t.targets) for fb in tr.accepted]
    body.append(f'<section id="accepted"><details><summary>Accepted fallbacks ({len(acc)})</summary>')
    if acc:
        body.append('<table class="accepted"><thead><tr><th>target</th><th>test</th><th>op type</th><th>node</th>'
                    '<th>verdict</th><th>source</th><th>accepted because</th><th>fix (checked)</th></tr></thead><tbody>')
        for ti, k, t, tr, fb in acc:
            lk = f" ({h(fb.link)})" if fb.link else ""
            body.append(f'<tr class="accepted"><td>{h(tr.target)}</td><td><a href="#{anchors[ti, k]}"><code>'
                        f'{h(t.label, 300)}</code></a></td><td>{h(fb.op_type, 60)}</td><td><code>{h(fb.name)}</code></td>'
                        f'<td>{h(fb.verdict)}</td><td>{h(fb.where)}</td><td>{h(fb.accepted_because, 600)}{lk}</td>'
                        f'<td>{_fix_cell(tr, fb.fixes)}</td></tr>')
        body.append("</tbody></table>")
    else:
        body.append("<p>None.</p>")
    body.append("</details></section>")
    if passing:
        # folded under failures (the reviewer's first screen is theirs); open when nothing fails
        body.append(f'<section id="passing"><details{"" if failing else " open"}><summary>Passing tests '
                    f'({len(passing)})</summary>')
        for ti, t in passing:
            for k, tr in enumerate(t.targets):
                body.append(_target_section(t, tr, anchors[ti, k]))
        body.append("</details></section>")
    body += _numerics_sections(v.tests)
    tail = [f"<script>{_JS}</script></body></html>", ""]
    return "\n".join(head + body + tail)


def _cells(values: Sequence[Any], limit: int = 300) -> str:
    return "".join(f"<td>{h(x, limit)}</td>" for x in values)


def _num(values: Sequence[Any]) -> str:
    return "".join(f'<td class="num">{h(x, 40)}</td>' for x in values)


def _oracle_sections(tests: Sequence[TestView]) -> list[str]:
    """Table bugs found by the real toolchains, then what each toolchain did per test and target."""
    bugs = [(t, d) for t in tests for d in t.disagreements]
    runs = [(t, r) for t in tests for r in t.oracle_rows]
    out: list[str] = []
    if bugs:
        out.append('<section id="table-bugs"><h2>Table bugs found by the real toolchains</h2><p>The real toolchain '
                   'placed these nodes differently from the support table (--npu-oracle).</p><table class="table-bugs">'
                   "<thead><tr><th>target</th><th>test</th><th>op type</th><th>node</th><th>table says</th>"
                   "<th>toolchain did</th><th>kind</th><th>toolchain said</th></tr></thead><tbody>")
        for t, d in bugs:
            out.append(f'<tr class="bug">{_cells([d["target"], t.label, d["op_type"], d["node"], d["static"], d["real"], d["kind"].replace("_", " "), d["toolchain_said"] or "-"])}</tr>')
        out.append("</tbody></table></section>")
    if runs:
        out.append('<section id="oracles"><h2>Real toolchains (oracles)</h2><table class="oracles"><thead><tr>'
                   "<th>target</th><th>test</th><th>toolchain</th><th>status</th><th>precision</th>"
                   "<th>nodes agreeing</th><th>disagreements</th><th>note</th></tr></thead><tbody>")
        for t, r in runs:
            out.append(f"<tr>{_cells([r['target'], t.label, r['tool'], r['status'], r['precision'], r['agree'], r['disagreements'], r['note'] or '-'], 600)}</tr>")
        out.append("</tbody></table></section>")
    return out


def _numerics_sections(tests: Sequence[TestView]) -> list[str]:
    """Per test: every candidate's metrics against its reference, the budget applied and the margin left."""
    out: list[str] = []
    for t in tests:
        if not t.numerics_rows and not t.budget_rows:
            continue
        word = "" if not t.numerics_enabled else (
            ' <span class="pass">passed</span>' if t.numerics_passed else ' <span class="fail">failed</span>')
        out.append(f'<h3><code>{h(t.label, 300)}</code>{word}</h3>')
        if t.numerics_context:
            out.append(f"<p>{h(t.numerics_context, 600)}</p>")
        if t.numerics_rows:
            out.append('<table class="numerics"><thead><tr><th>candidate</th><th>target</th><th>output</th><th>result</th>'
                       "<th>vs</th><th>max abs</th><th>mean abs</th><th>cosine</th><th>SNR dB</th><th>norm ratio</th>"
                       "<th>budget</th><th>tightest margin</th></tr></thead><tbody>")
            for r in t.numerics_rows:
                res = {True: "pass", False: "FAIL", None: "-"}[r["passed"]]
                cls = {True: "pass", False: "fail", None: ""}[r["passed"]]
                why = f" ({h(r['reasons'], 300)})" if r.get("reasons") else ""
                out.append(f'<tr class="{r["kind"]}"><td>{h(r["candidate"])}</td><td>{h(r["target"] or "-")}</td>'
                           f'<td><code>{h(r["output"] or "-")}</code></td><td><span class="{cls}">{res}</span>{why}</td>'
                           f'<td>{h(r["reference"])}</td><td>{fmt(r.get("max_abs"))}</td>'
                           + _num([fmt(r.get("mean_abs")), F.number(r.get("cosine")), fmt(r.get("snr_db")),
                                   F.number(r.get("norm_ratio"))])
                           + _cells([r["budget"]]) + f'<td class="num">{h(r["margin"])}</td></tr>')
            out.append("</tbody></table>")
        if t.budget_rows:
            out.append('<table class="target-budgets"><thead><tr><th>target</th><th>deployment budget</th>'
                       "<th>measured (limit)</th><th>result</th><th>margin</th></tr></thead><tbody>")
            for b in t.budget_rows:
                res = '<span class="pass">pass</span>' if b["passed"] else f'<span class="fail">FAIL</span> ({h(b["problems"], 300)})'
                out.append(f"<tr>{_cells([b['target'], b['budget'], b['limits']])}<td>{res}</td>{_cells([b['margin']])}</tr>")
            out.append("</tbody></table>")
    if not out:
        return []
    return ['<section id="numerics"><h2>Numerics</h2><p>Outputs of each candidate against the reference: the exported '
            "graph against PyTorch, the target's precision emulated against fp32, and the real toolchains' own runs "
            "(oracles). Margin: the room left on the check closest to its bound (negative: over budget).</p>",
            *out, "</section>"]


__all__ = ["render", "graph_svg", "h", "LEGEND"]
