"""Markdown summary of a run: for a CI step summary ($GITHUB_STEP_SUMMARY) or a PR comment.

Rendered from the JSON report document. NEW fallbacks (those that fail the gate) come first,
then the accepted ones, then stale baseline entries and errors. Names come from models: every
cell is escaped (Markdown and HTML specials, pipes, control and bidi characters) and capped in length.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping, Sequence

from .escape import visible
from .views import test_label, test_order, disagreement_rows, fmt, numerics_context, numerics_rows, oracle_rows, target_budget_rows
from .views import INTERRUPTED, gate as _gate, headline, pct as _pct, run_passed, where as _where
from ..result import DOCUMENTATION_ONLY, documentation_only, reason_text

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")
MAX_CELL = 160
MAX_ROWS = 200


def esc(text: Any, limit: int = MAX_CELL) -> str:
    """Safe inside a table cell: no line breaks, no markup, no HTML, bounded length."""
    s = str(text)
    if len(s) > limit:
        s = s[: limit - 12] + f"...(+{len(s) - limit + 12})"
    s = visible(s)  # control, bidi and other invisible characters as escapes (escape.py)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _SPECIAL.sub(r"\\\1", s)


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    rows = list(rows)
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows[:MAX_ROWS]]
    if len(rows) > MAX_ROWS:
        out.append(f"\n_... and {len(rows) - MAX_ROWS} more rows (every node is in the JSON report)_")
    return out


def _reasons(node: Mapping[str, Any]) -> str:
    return "; ".join(reason_text(r) for r in node.get("reasons", [])) or node["verdict"]


def _table_name(table: Mapping[str, Any]) -> str:
    rev = f" revision {table['revision']}" if "revision" in table else ""
    path = f"{table.get('toolchain', '')}/{table.get('version', '')}/{table.get('soc', '')}.json"
    return f"{esc(path)}{rev} (sha256 {esc(str(table.get('sha256', ''))[:12])})"


def render(doc: Mapping[str, Any]) -> str:
    tests = sorted(doc.get("tests", []), key=test_order)
    base = doc.get("baseline") or {}
    rows_new: list[list[str]] = []
    rows_acc: list[list[str]] = []
    summary: list[list[str]] = []
    errors: list[list[str]] = []
    failed_targets = 0
    tables: dict[str, str] = {}  # target -> which table (revision, hash) decided it
    for t in tests:
        if t["status"] == "error" or (t.get("error") and not t.get("targets")):
            errors.append([esc(test_label(t)), "error", esc((t.get("error") or "").splitlines()[0] if t.get("error") else "", 300)])
            continue
        for tr in t.get("targets", []):
            g = _gate(tr)
            failed_targets += 0 if g["passed"] else 1
            s = tr["summary"]
            part = tr.get("partition") or {}
            word = "PASS" if g["passed"] else "FAIL"
            only = f" ({DOCUMENTATION_ONLY})" if documentation_only(tr.get("table") or {}) else ""
            tables[tr["target"]] = _table_name(tr.get("table") or {})
            summary.append([esc(tr["target"]) + esc(only), esc(test_label(t)), f"**{word}**", tr["verdict"],
                            f"{s['npu']}/{s['cpu']}/{s['unsupported']}/{s['folded']}",
                            _pct(part.get("npu_share_nodes")), _pct(part.get("npu_share_macs")),
                            str(len(g["new"])), str(len(g["accepted"]))])
            by_name = {n["name"]: n for n in tr.get("nodes", [])}
            for name in g["new"]:
                n = by_name.get(name, {"name": name, "op_type": "?", "verdict": "?", "reasons": [], "source": None})
                rows_new.append([esc(tr["target"]), esc(test_label(t)), esc(n["op_type"], 40), esc(name),
                                 n["verdict"], esc(_where(n.get("source"))), esc(_reasons(n), 300)])
            for a in g["accepted"]:
                n = by_name.get(a["node"], {"op_type": "?", "verdict": "?", "source": None})
                reason = esc(a["reason"], 300) + (f" ({esc(a['link'], 200)})" if a.get("link") else "")
                rows_acc.append([esc(tr["target"]), esc(test_label(t)), esc(n["op_type"], 40),
                                 esc(a['node']), n["verdict"], esc(_where(n.get("source"))), reason])
    stale = base.get("stale") or []
    totals = doc.get("totals", {})
    ok = run_passed(doc, failed_targets, len(errors))
    lines = [f"## NPU check: {headline(doc, ok)}", ""]
    if doc.get("interrupted"):
        lines += [f"**{INTERRUPTED}**", ""]
    lines.append(f"{totals.get('tests', len(tests))} checked test(s): {totals.get('passed', 0)} passed, "
                 f"{totals.get('failed', 0)} failed, {totals.get('error', 0)} error; "
                 f"{len(rows_new)} new fallback(s), {len(rows_acc)} accepted, {len(stale)} stale baseline entr"
                 f"{'y' if len(stale) == 1 else 'ies'}.")
    if base.get("updated"):
        lines += ["", f"Baseline {esc(base['path'])} updated by --npu-update-baseline: {len(base['added'])} entr"
                  f"{'y' if len(base['added']) == 1 else 'ies'} added, {len(base['removed'])} removed. "
                  "Review the reasons before committing it."]
    lines.append("")
    lines += ["### New fallbacks", ""]
    if rows_new:
        lines += ["These nodes leave the NPU and are not in the baseline: they fail the check.", ""]
        lines += _table(["target", "test", "op type", "node", "verdict", "source", "reason"], rows_new)
    else:
        lines.append("None.")
    lines += ["", "### Accepted fallbacks", ""]
    if rows_acc:
        lines += _table(["target", "test", "op type", "node", "verdict", "source", "accepted because"], rows_acc)
    else:
        lines.append("None.")
    if stale:
        lines += ["", "### Stale baseline entries", "",
                  "These accepted fallbacks no longer occur: remove them from the baseline (or run "
                  "`--npu-update-baseline`) so that they cannot come back silently"
                  + (" (strict: this fails the run)." if base.get("strict") else "."), ""]
        lines += _table(["target", "test", "op type", "node", "location", "reason"], [
            [esc(e["target"]), esc(e['test']), esc(e["op_type"], 40), esc(e['node']),
             esc(f"{e['location']['module'] or '<root>'} at {e['location']['file']}:{e['location']['line']}"
                 if e.get("location") else "unknown"), esc(e["reason"], 300)] for e in stale])
    loosened = (doc.get("budgets") or {}).get("tightening_problems") or []
    if loosened:
        lines += ["", "### Budget loosenings without approval", "",
                  f"The budgets file {esc((doc.get('budgets') or {}).get('path', ''))} loosens these limits (against "
                  "its committed version or an earlier release) with no `loosened` record: this fails the run.", ""]
        lines += [f"- {esc(p, 500)}" for p in loosened]
    if errors:
        lines += ["", "### Errors", ""]
        lines += _table(["test", "status", "error"], errors)
    bugs = [(t, d) for t in tests for d in disagreement_rows(t)]
    if bugs:
        lines += ["", "### Table bugs found by the real toolchains", "",
                  "The real toolchain placed these nodes differently from the support table (`--npu-oracle`).", ""]
        lines += _table(["target", "test", "op type", "node", "table says", "toolchain did", "kind", "toolchain said"],
                        [[esc(d["target"]), esc(test_label(t)), esc(d["op_type"], 40), esc(d["node"]), d["static"],
                          d["real"], d["kind"].replace("_", " "), esc(d["toolchain_said"] or "-", 300)]
                         for t, d in bugs])
    lines += ["", "### Per target and test", ""]
    lines += _table(["target", "test", "gate", "verdict", "npu/cpu/unsupported/folded", "NPU share (nodes)",
                     "NPU share (MACs)", "new", "accepted"],
                    sorted(summary, key=lambda r: (r[0], r[1])))
    if tables:
        lines += ["", "Tables: " + "; ".join(f"{esc(target)}: {name}" for target, name in sorted(tables.items()))]
    lines += _numerics_section(tests)
    lines += _oracle_section(tests)
    tool = doc.get("tool", {})
    lines += ["", f"<sub>{esc(tool.get('name', 'pytest-npucheck'))} {esc(tool.get('version', ''))}, "
                  f"{esc(doc.get('created', ''))}</sub>", ""]
    return "\n".join(lines)


def _numerics_section(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    """Per test: every candidate's metrics against its reference, the budget applied, the margin left."""
    blocks: list[str] = []
    for t in tests:
        rows = numerics_rows(t)
        budgets = target_budget_rows(t)
        if not rows and not budgets:
            continue
        num = t.get("numerics") or {}
        word = "" if not num.get("enabled") else (" (passed)" if num.get("passed") else " (**failed**)")
        blocks += ["", f"#### {esc(test_label(t))}{word}", ""]
        ctx = numerics_context(t)
        if ctx:
            blocks += [esc(ctx, 600), ""]
        blocks += _table(["candidate", "target", "output", "result", "vs", "max abs", "mean abs", "cosine", "SNR dB",
                          "norm ratio", "budget", "tightest margin"],
                         [[esc(r["candidate"]), esc(r["target"]) or "-", esc(r["output"]) or "-",
                           {True: "pass", False: "**FAIL**", None: "-"}[r["passed"]] + (
                               f" ({esc(r['reasons'], 200)})" if r.get("reasons") else ""),
                           esc(r["reference"]), fmt(r.get("max_abs")), fmt(r.get("mean_abs")), fmt(r.get("cosine"), 6),
                           fmt(r.get("snr_db")), fmt(r.get("norm_ratio"), 6), esc(r["budget"]), esc(r["margin"])]
                          for r in rows]) if rows else []
        if budgets:
            blocks += [""] + _table(["target", "deployment budget", "measured (limit)", "result", "margin"],
                                    [[esc(b["target"]), esc(b["budget"]), esc(b["limits"]),
                                      "pass" if b["passed"] else f"**FAIL** ({esc(b['problems'], 300)})",
                                      esc(b["margin"])] for b in budgets])
    if not blocks:
        return []
    return ["", "### Numerics", "",
            "Outputs of each candidate against the reference: the exported graph against PyTorch, the target's "
            "precision emulated against fp32, and the real toolchains' own runs (oracles). Margin: the room left "
            "on the check closest to its bound (negative: over budget)."] + blocks


def _oracle_section(tests: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [[esc(r["target"]), esc(test_label(t)), esc(r["tool"]), r["status"], r["precision"], r["agree"],
             str(r["disagreements"]), esc(r["note"] or "-", 400)]
            for t in tests for r in oracle_rows(t)]
    if not rows:
        return []
    return ["", "### Real toolchains (oracles)", ""] + _table(
        ["target", "test", "toolchain", "status", "precision", "nodes agreeing", "disagreements", "note"], rows)


__all__ = ["render", "esc"]
