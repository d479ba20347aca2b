"""HTML report: one self-contained file (inline CSS, JS and SVG; nothing loaded from anywhere).

Rendered from the JSON report document: the gate summary (NEW fallbacks first, then accepted
ones, stale baseline entries, errors), then per test and target the partition, a picture of the
graph and the per-operator table. The picture lays the main graph out in topological layers,
colours nodes by device, draws edges that cross between NPU and CPU as marked transitions and
outlines the nodes that cause them. Every string from a model is escaped and capped.
"""

from __future__ import annotations

import html as _html
from typing import Any, Mapping, Optional, Sequence

from .text import clean
from .views import test_label, test_order, disagreement_rows, fmt, numerics_context, numerics_rows, oracle_rows, target_budget_rows
from .views import INTERRUPTED, gate as _gate, headline, pct as _pct, run_passed, where as _where
from ..result import DOCUMENTATION_ONLY, documentation_only, reason_text

MAX_SVG_NODES = 1500
MAX_TABLE_ROWS = 5000
_DEVICE = {"npu": "npu", "cpu": "cpu", "unsupported": "cpu", "folded": None}
_CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"

_CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#1b1f24}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em}h3{font-size:1.05em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccd;padding:2px 6px;text-align:left;
vertical-align:top;max-width:48em;overflow-wrap:anywhere}th{background:#eef}
.pass{color:#116329;font-weight:bold}.fail{color:#b3261e;font-weight:bold}
tr.v-npu td.v{background:#d8f3dc}tr.v-cpu td.v{background:#ffe8cc}tr.v-unsupported td.v{background:#ffd6d6}
tr.v-folded td.v{background:#eee}tr.new td{background:#fff1f0}
body.only-fb tr.v-npu,body.only-fb tr.v-folded{display:none}
.graph{overflow:auto;max-height:70vh;border:1px solid #ccd;background:#fcfcfd}
.n-npu{fill:#52b788}.n-cpu{fill:#f4a261}.n-unsupported{fill:#e63946}.n-folded{fill:#ced4da}
.cause{stroke:#1b1f24;stroke-width:3}.e{stroke:#8d99ae;stroke-width:1;fill:none}
.x{stroke:#d00000;stroke-width:2.5;stroke-dasharray:6 3;fill:none}
text.l{font:11px monospace;pointer-events:none}
code{overflow-wrap:anywhere}
"""

_JS = """
document.getElementById('only-fb').addEventListener('change',function(e){
  document.body.classList.toggle('only-fb',e.target.checked);});
document.body.setAttribute('data-rendered',String(document.querySelectorAll('svg.npu-graph').length));
"""


def h(text: Any, limit: int = 200) -> str:
    """Escape for HTML text and attributes; control, bidi and other invisible characters shown as
    \\xNN / \\uNNNN (``text.clean``); length capped."""
    s = clean(str(text), limit).encode("utf-8", "replace").decode("utf-8")
    return _html.escape(s, quote=True)


def _reasons(n: Mapping[str, Any]) -> str:
    return "; ".join(reason_text(r) for r in n.get("reasons", []))


def graph_svg(tr: Mapping[str, Any]) -> str:
    """The main graph: topological layers top to bottom, coloured by device, transitions marked."""
    nodes: Sequence[Mapping[str, Any]] = tr.get("nodes", [])
    main = [k for k, n in enumerate(nodes) if not n.get("graph")]
    if not main:
        return "<p>(no nodes)</p>"
    if len(main) > MAX_SVG_NODES:
        return f"<p>(graph of {len(main)} nodes not drawn; more than {MAX_SVG_NODES})</p>"
    keep = set(main)
    edges = [(a, b) for a, b in tr.get("edges", []) if a in keep and b in keep and a != b]
    preds: dict[int, list[int]] = {k: [] for k in main}
    for a, b in edges:
        preds[b].append(a)
    depth: dict[int, int] = {}
    for k in main:  # nodes are in topological order; be safe against a cycle or a late producer
        depth[k] = 1 + max((depth.get(p, -1) for p in preds[k] if p in depth), default=-1)
    layers: dict[int, list[int]] = {}
    for k in main:
        layers.setdefault(depth[k], []).append(k)
    cw, ch, bw, bh = 150, 60, 134, 30
    pos: dict[int, tuple[int, int]] = {}
    width = max(len(v) for v in layers.values())
    for d, ks in layers.items():
        off = (width - len(ks)) * cw // 2
        for i, k in enumerate(ks):
            pos[k] = (10 + off + i * cw, 34 + d * ch)
    W = 20 + width * cw
    H = 44 + (max(layers) + 1) * ch

    def dev(k: int) -> Optional[str]:
        return _DEVICE.get(nodes[k]["verdict"])

    crossing = {(a, b) for a, b in edges if dev(a) and dev(b) and dev(a) != dev(b)}
    part = tr.get("partition") or {}
    causes = {k for a, b in crossing for k in (a, b) if dev(k) == "cpu"}
    cross_names = {c.get("from") for c in part.get("crossings", [])} | {c.get("to") for c in part.get("crossings", [])}
    causes |= {k for k in main if nodes[k]["name"] in cross_names and dev(k) == "cpu"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="npu-graph" width="{W}" height="{H}" '
           f'viewBox="0 0 {W} {H}" role="img" aria-label="graph of {len(main)} nodes">',
           '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
           'orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#8d99ae"/></marker></defs>',
           '<g class="legend"><rect x="10" y="6" width="14" height="14" class="n-npu"/><text class="l" x="28" y="17">NPU</text>'
           '<rect x="70" y="6" width="14" height="14" class="n-cpu"/><text class="l" x="88" y="17">CPU</text>'
           '<rect x="130" y="6" width="14" height="14" class="n-unsupported"/><text class="l" x="148" y="17">unsupported</text>'
           '<rect x="240" y="6" width="14" height="14" class="n-folded"/><text class="l" x="258" y="17">folded</text>'
           '<line x1="320" y1="13" x2="350" y2="13" class="x"/><text class="l" x="356" y="17">NPU/CPU transition</text>'
           '<rect x="490" y="6" width="14" height="14" class="n-cpu cause"/><text class="l" x="508" y="17">causes a transition</text></g>']
    for a, b in edges:
        (x1, y1), (x2, y2) = pos[a], pos[b]
        cls = "x" if (a, b) in crossing else "e"
        out.append(f'<path class="{cls}" d="M{x1 + bw // 2},{y1 + bh} C{x1 + bw // 2},{y1 + bh + 20} '
                   f'{x2 + bw // 2},{y2 - 20} {x2 + bw // 2},{y2}" marker-end="url(#arrow)"/>')
    for k in main:
        n = nodes[k]
        x, y = pos[k]
        v = n["verdict"] if n["verdict"] in _DEVICE else "unsupported"
        cls = f"n-{v}" + (" cause" if k in causes else "")
        tip = f"{n['op_type']} {n['name']}: {v}" + (f" - {_reasons(n)}" if n.get("reasons") else "")
        out.append(f'<g class="node" data-verdict="{v}"><title>{h(tip, 600)}</title>'
                   f'<rect x="{x}" y="{y}" width="{bw}" height="{bh}" rx="5" class="{cls}"/>'
                   f'<text class="l" x="{x + 6}" y="{y + 19}">{h(n["op_type"], 18)}</text></g>')
    out.append("</svg>")
    return "".join(out)


def _node_table(tr: Mapping[str, Any]) -> list[str]:
    g = _gate(tr)
    new = set(g["new"])
    accepted = {a["node"]: a for a in g["accepted"]}
    rows = ['<table class="nodes"><thead><tr><th>#</th><th>op type</th><th>node</th><th>verdict</th>'
            '<th>gate</th><th>source</th><th>reason</th></tr></thead><tbody>']
    nodes = tr.get("nodes", [])
    for k, n in enumerate(nodes[:MAX_TABLE_ROWS]):
        v = n["verdict"] if n["verdict"] in _DEVICE else "unsupported"
        gate = "NEW" if n["name"] in new else ("accepted" if n["name"] in accepted else "")
        rows.append(f'<tr class="v-{v}{" new" if gate == "NEW" else ""}"><td>{k}</td><td>{h(n["op_type"], 60)}</td>'
                    f'<td><code>{h(n["name"])}</code></td><td class="v">{v}</td><td>{gate}</td>'
                    f'<td>{h(_where(n.get("source")))}</td><td>{h(_reasons(n), 600)}</td></tr>')
    rows.append("</tbody></table>")
    if len(nodes) > MAX_TABLE_ROWS:
        rows.append(f"<p>... and {len(nodes) - MAX_TABLE_ROWS} more nodes (every node is in the JSON report)</p>")
    return rows


def render(doc: Mapping[str, Any]) -> str:
    tests = sorted(doc.get("tests", []), key=test_order)
    base = doc.get("baseline") or {}
    stale = base.get("stale") or []
    new_rows: list[str] = []
    acc_rows: list[str] = []
    errors: list[str] = []
    sections: list[str] = []
    failing = 0
    for ti, t in enumerate(tests):
        if t["status"] == "error" and not t.get("targets"):
            errors.append(f'<tr class="error"><td><code>{h(test_label(t), 300)}</code></td><td>error</td>'
                          f'<td>{h(t.get("error") or "", 600)}</td></tr>')
            continue
        for k, tr in enumerate(t.get("targets", [])):
            g = _gate(tr)
            failing += 0 if g["passed"] else 1
            anchor = f"t{ti}-{k}"
            by_name = {n["name"]: n for n in tr.get("nodes", [])}
            link = f'<a href="#{anchor}"><code>{h(test_label(t), 300)}</code></a>'
            for name in g["new"]:
                n = by_name.get(name, {"op_type": "?", "verdict": "?", "reasons": [], "source": None})
                new_rows.append(f'<tr class="new"><td>{h(tr["target"])}</td><td>{link}</td><td>{h(n["op_type"], 60)}</td>'
                                f'<td><code>{h(name)}</code></td><td>{h(n["verdict"])}</td>'
                                f'<td>{h(_where(n.get("source")))}</td><td>{h(_reasons(n), 600)}</td></tr>')
            for a in g["accepted"]:
                n = by_name.get(a["node"], {"op_type": "?", "verdict": "?", "source": None})
                lk = f" ({h(a['link'])})" if a.get("link") else ""
                acc_rows.append(f'<tr class="accepted"><td>{h(tr["target"])}</td><td>{link}</td><td>{h(n["op_type"], 60)}</td>'
                                f'<td><code>{h(a["node"])}</code></td><td>{h(n["verdict"])}</td>'
                                f'<td>{h(_where(n.get("source")))}</td><td>{h(a["reason"], 600)}{lk}</td></tr>')
            s = tr["summary"]
            part = tr.get("partition") or {}
            word = '<span class="pass">PASS</span>' if g["passed"] else '<span class="fail">FAIL</span>'
            table = tr.get("table") or {}
            sec = [f'<section class="test" id="{anchor}"><h2>{word} <code>{h(test_label(t), 300)}</code> on {h(tr["target"])}</h2>',
                   f'<p>table {h(table.get("toolchain", ""))}@{h(table.get("version", ""))}/{h(table.get("soc", ""))} '
                   + (f'revision {h(str(table["revision"]))} ' if "revision" in table else '')
                   + f'sha256 <code>{h(table.get("sha256", ""), 80)}</code>'
                   + (f' ({DOCUMENTATION_ONLY}: not checked against the toolchain)' if documentation_only(table) else '')
                   + f'; verdict {h(tr["verdict"])}; '
                   f'npu {s["npu"]}, cpu {s["cpu"]}, unsupported {s["unsupported"]}, folded {s["folded"]}; '
                   f'{len(g["new"])} new, {len(g["accepted"])} accepted fallback(s)</p>']
            if part:
                sec.append(f'<p>partition: {part["npu_subgraphs"]} NPU subgraph(s), {part["cpu_islands"]} CPU island(s), '
                           f'{part["transitions"]} transition(s), {part["bytes_crossing"]} bytes crossing; NPU share '
                           f'{_pct(part.get("npu_share_nodes"))} of nodes, {_pct(part.get("npu_share_macs"))} of MACs</p>')
            for issue in tr.get("model_issues", []):
                sec.append(f'<p class="fail">model: {h(issue["verdict"])}: {h(issue["message"], 600)}</p>')
            sec.append(f'<div class="graph">{graph_svg(tr)}</div>')
            sec += _node_table(tr)
            sec.append("</section>")
            sections.append("".join(sec))
    totals = doc.get("totals", {})
    ok = run_passed(doc, failing, len(errors))
    head = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>NPU check: {headline(doc, ok)}</title><style>{_CSS}</style></head><body>",
            f'<h1>NPU check: <span class="{"pass" if ok else "fail"}">{headline(doc, ok)}</span></h1>',
            *([f'<p class="fail"><strong>{h(INTERRUPTED)}</strong></p>'] if doc.get("interrupted") else []),
            f'<p>{int(totals.get("tests", len(tests)))} checked test(s): {int(totals.get("passed", 0))} passed, '
            f'{int(totals.get("failed", 0))} failed, {int(totals.get("error", 0))} error; {len(new_rows)} new fallback(s), '
            f'{len(acc_rows)} accepted, {len(stale)} stale baseline entr{"y" if len(stale) == 1 else "ies"}. '
            f'{h(doc.get("tool", {}).get("name", ""))} {h(doc.get("tool", {}).get("version", ""))}, {h(doc.get("created", ""))}</p>']
    if base.get("updated"):
        head.append(f'<p>Baseline {h(base.get("path", ""))} updated by --npu-update-baseline: {len(base.get("added", []))} '
                    f'added, {len(base.get("removed", []))} removed.</p>')
    head.append('<p><label><input type="checkbox" id="only-fb"> show only nodes that leave the NPU</label></p>')
    hdr = ("<thead><tr><th>target</th><th>test</th><th>op type</th><th>node</th><th>verdict</th><th>source</th>"
           "<th>{}</th></tr></thead>")
    body = ['<section id="new"><h2>New fallbacks</h2>']
    body += ([f'<table class="new">{hdr.format("reason")}<tbody>', *new_rows, "</tbody></table>"] if new_rows else ["<p>None.</p>"])
    body.append('</section><section id="accepted"><h2>Accepted fallbacks</h2>')
    body += ([f'<table class="accepted">{hdr.format("accepted because")}<tbody>', *acc_rows, "</tbody></table>"]
             if acc_rows else ["<p>None.</p>"])
    body.append("</section>")
    if stale:
        body.append('<section id="stale"><h2>Stale baseline entries</h2><p>These accepted fallbacks no longer occur: '
                    'remove them from the baseline (or run --npu-update-baseline).</p><table class="stale"><thead><tr>'
                    '<th>target</th><th>test</th><th>op type</th><th>node</th><th>location</th><th>reason</th></tr></thead><tbody>')
        for e in stale:
            loc = e.get("location")
            where = f"{loc['module'] or '<root>'} at {loc['file']}:{loc['line']}" if loc else "unknown"
            body.append(f'<tr><td>{h(e["target"])}</td><td><code>{h(e["test"], 300)}</code></td><td>{h(e["op_type"], 60)}</td>'
                        f'<td><code>{h(e["node"])}</code></td><td>{h(where)}</td><td>{h(e["reason"], 600)}</td></tr>')
        body.append("</tbody></table></section>")
    loosened = (doc.get("budgets") or {}).get("tightening_problems") or []
    if loosened:
        body.append(f'<section id="loosened"><h2>Budget loosenings without approval</h2><p>The budgets file '
                    f'{h((doc.get("budgets") or {}).get("path", ""))} loosens these limits (against its committed '
                    'version or an earlier release) with no <code>loosened</code> record: this fails the run.</p><ul>'
                    + "".join(f'<li class="fail">{h(p, 600)}</li>' for p in loosened) + "</ul></section>")
    if errors:
        body += ['<section id="errors"><h2>Errors</h2><table class="errors"><thead><tr><th>test</th><th>status</th>'
                 '<th>error</th></tr></thead><tbody>', *errors, "</tbody></table></section>"]
    body += _oracle_sections(tests)
    body += _numerics_sections(tests)
    tail = [f"<script>{_JS}</script></body></html>", ""]
    return "\n".join(head + body + sections + tail)


def _cells(values: Sequence[Any], limit: int = 300) -> str:
    return "".join(f"<td>{h(v, limit)}</td>" for v in values)


def _oracle_sections(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Table bugs found by the real toolchains, then what each toolchain did per test and target."""
    bugs = [(t, d) for t in tests for d in disagreement_rows(t)]
    runs = [(t, r) for t in tests for r in oracle_rows(t)]
    out: list[str] = []
    if bugs:
        out.append('<section id="table-bugs"><h2>Table bugs found by the real toolchains</h2><p>The real toolchain '
                   'placed these nodes differently from the support table (--npu-oracle).</p><table class="table-bugs">'
                   "<thead><tr><th>target</th><th>test</th><th>op type</th><th>node</th><th>table says</th>"
                   "<th>toolchain did</th><th>kind</th><th>toolchain said</th></tr></thead><tbody>")
        for t, d in bugs:
            out.append(f'<tr class="bug">{_cells([d["target"], test_label(t), d["op_type"], d["node"], d["static"], d["real"], d["kind"].replace("_", " "), d["toolchain_said"] or "-"])}</tr>')
        out.append("</tbody></table></section>")
    if runs:
        out.append('<section id="oracles"><h2>Real toolchains (oracles)</h2><table class="oracles"><thead><tr>'
                   "<th>target</th><th>test</th><th>toolchain</th><th>status</th><th>precision</th>"
                   "<th>nodes agreeing</th><th>disagreements</th><th>note</th></tr></thead><tbody>")
        for t, r in runs:
            out.append(f"<tr>{_cells([r['target'], test_label(t), r['tool'], r['status'], r['precision'], r['agree'], r['disagreements'], r['note'] or '-'], 600)}</tr>")
        out.append("</tbody></table></section>")
    return out


def _numerics_sections(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per test: every candidate's metrics against its reference, the budget applied and the margin left."""
    out: list[str] = []
    for t in tests:
        rows = numerics_rows(t)
        budgets = target_budget_rows(t)
        if not rows and not budgets:
            continue
        num = t.get("numerics") or {}
        word = "" if not num.get("enabled") else (
            ' <span class="pass">passed</span>' if num.get("passed") else ' <span class="fail">failed</span>')
        out.append(f'<h3><code>{h(test_label(t), 300)}</code>{word}</h3>')
        ctx = numerics_context(t)
        if ctx:
            out.append(f"<p>{h(ctx, 600)}</p>")
        out.append('<table class="numerics"><thead><tr><th>candidate</th><th>target</th><th>output</th><th>result</th>'
                   "<th>vs</th><th>max abs</th><th>mean abs</th><th>cosine</th><th>SNR dB</th><th>norm ratio</th>"
                   "<th>budget</th><th>tightest margin</th></tr></thead><tbody>")
        for r in rows:
            res = {True: "pass", False: "FAIL", None: "-"}[r["passed"]]
            cls = {True: "pass", False: "fail", None: ""}[r["passed"]]
            why = f" ({h(r['reasons'], 300)})" if r.get("reasons") else ""
            out.append(f'<tr class="{r["kind"]}"><td>{h(r["candidate"])}</td><td>{h(r["target"] or "-")}</td>'
                       f'<td><code>{h(r["output"] or "-")}</code></td><td><span class="{cls}">{res}</span>{why}</td>'
                       + _cells([r["reference"], fmt(r.get("max_abs")), fmt(r.get("mean_abs")), fmt(r.get("cosine"), 6),
                                 fmt(r.get("snr_db")), fmt(r.get("norm_ratio"), 6), r["budget"], r["margin"]])
                       + "</tr>")
        out.append("</tbody></table>")
        if budgets:
            out.append('<table class="target-budgets"><thead><tr><th>target</th><th>deployment budget</th>'
                       "<th>measured (limit)</th><th>result</th><th>margin</th></tr></thead><tbody>")
            for b in budgets:
                res = '<span class="pass">pass</span>' if b["passed"] else f'<span class="fail">FAIL</span> ({h(b["problems"], 300)})'
                out.append(f"<tr>{_cells([b['target'], b['budget'], b['limits']])}<td>{res}</td>{_cells([b['margin']])}</tr>")
            out.append("</tbody></table>")
    if not out:
        return []
    return ['<section id="numerics"><h2>Numerics</h2><p>Outputs of each candidate against the reference: the exported '
            "graph against PyTorch, the target's precision emulated against fp32, and the real toolchains' own runs "
            "(oracles). Margin: the room left on the check closest to its bound (negative: over budget).</p>",
            *out, "</section>"]


__all__ = ["render", "graph_svg", "h"]
