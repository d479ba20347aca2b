"""Flat rows for the numerics and oracle sections, built from a test entry of the JSON report.

The Markdown and HTML renderers (and anything else) draw the same rows, so every format shows the
same numbers: one row per (candidate, output) with the metrics, the budget applied and the margin
left, and one row per disagreement between a real toolchain and the table.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Optional

from . import formatting as _f

__all__ = ["test_label", "test_order", "pct", "where", "numerics_rows", "oracle_rows", "target_budget_rows", "disagreement_rows", "numerics_context", "fmt", "tightest"]

_REFERENCE = {"pytorch": "PyTorch", "onnxruntime_fp32": "ONNX Runtime fp32"}


def test_label(test: Mapping[str, Any]) -> str:
    """A test entry's name: its node id, with ``[call N]`` for the second and later npu_check calls."""
    call = test.get("call", 1)
    return test["nodeid"] if call == 1 else f"{test['nodeid']} [call {call}]"


def test_order(test: Mapping[str, Any]) -> tuple[str, int]:
    return (test["nodeid"], int(test.get("call", 1)))


def pct(x: Any) -> str:
    """A share for a table cell, one decimal; "n/a" when unknown (``formatting.pct``)."""
    return _f.pct(x)


def where(source: Any) -> str:
    """A node's source as ``module at file:line`` (file name only), "unknown" without one."""
    return _f.location(source, file_name_only=True)


def fmt(x: Any, digits: int = 4) -> str:
    """A metric for a table cell: 4 significant digits, strings ("inf", "nan") as they are."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.{digits}g}"  # (formatting.number also keeps the digits of a cosine's distance from 1)


def _room(check: Mapping[str, Any]) -> Optional[float]:
    m, a = check.get("measured"), check.get("allowed")
    if m is None or a is None or isinstance(m, str) or isinstance(a, str):
        return None
    return (a - m) if check.get("op") == "<=" else (m - a)


def tightest(output: Mapping[str, Any]) -> str:
    """The bound with the least room left, as ``metric +room`` (negative: over budget).

    An output passes when cosine and norm ratio are within bounds and either every element is
    within the element-wise bound or the SNR is; so the margin is the smallest of the cosine room,
    the norm-ratio room and the larger of the max-abs and SNR rooms, each relative to its bound."""
    rel: dict[str, tuple[float, float]] = {}
    for c in output.get("checks", []):
        room = _room(c)
        if room is None:
            continue
        if c["metric"] == "cosine":  # the scale that matters is the distance of the bound from 1
            scale = max(1.0 - float(c["allowed"]), 1e-12)
        else:
            scale = abs(float(c["allowed"])) or 1.0
        rel[c["metric"]] = (room / scale, room)
    either = [m for m in ("max_abs", "snr_db") if m in rel]
    pick = [m for m in ("cosine", "norm_ratio_deviation") if m in rel]
    if either:
        pick.append(max(either, key=lambda m: rel[m][0]))
    if not pick:
        return "-"
    m = min(pick, key=lambda k: rel[k][0])
    room = rel[m][1]
    return f"{m} {'+' if room >= 0 else ''}{fmt(room, 3)}"


def _rows_of(comparison: Optional[Mapping[str, Any]], base: Mapping[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for o in (comparison or {}).get("outputs", []):
        m = o.get("metrics") or {}
        rows.append({**base, "output": o["name"], "passed": o["passed"], "max_abs": m.get("max_abs"),
                     "mean_abs": m.get("mean_abs"), "max_rel": m.get("max_rel"), "cosine": m.get("cosine"),
                     "snr_db": m.get("snr_db"), "norm_ratio": m.get("norm_ratio"), "margin": tightest(o),
                     "reasons": "; ".join(o.get("reasons") or [])})
    for name in (comparison or {}).get("missing", []):
        rows.append({**base, "output": name, "passed": False, "margin": "-", "reasons": "missing from the candidate"})
    return rows


def _budget_label(budget_entry: Optional[Mapping[str, Any]], policy: str) -> str:
    b = (budget_entry or {}).get("budget")
    if b:
        return f"{b.get('key')} (release {b.get('release')})"
    return f"default {policy}" if policy else "default"


def numerics_rows(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every numeric comparison of a test: ONNX Runtime vs PyTorch, each emulated precision, and
    each real toolchain that ran (oracle), in that order."""
    rows: list[dict[str, Any]] = []
    num = test.get("numerics") or {}
    if num.get("enabled"):
        comp = num.get("onnx_vs_pytorch")
        if comp:
            rows += _rows_of(comp, {"candidate": "ONNX Runtime CPU fp32", "target": "", "kind": "export",
                                    "reference": "PyTorch", "budget": _budget_label(None, comp.get("policy", ""))})
        for e in num.get("emulation", []):
            res = e.get("result") or {}
            comp = res.get("comparison")
            rows += _rows_of(comp, {"candidate": f"{e['precision']} emulated (ONNX Runtime)", "target": e["target"],
                                    "kind": "emulated", "reference": "ONNX Runtime fp32",
                                    "budget": _budget_label(e.get("budget"), (comp or {}).get("policy", ""))})
        golden = num.get("golden") or {}
        if golden:
            base = {"candidate": f"stored golden ({golden.get('status')})", "target": "", "kind": "golden",
                    "reference": "golden outputs", "budget": "default fp32"}
            if golden.get("comparison"):
                rows += _rows_of(golden["comparison"], base)
            else:
                rows.append({**base, "output": "", "passed": golden.get("status") == "passed", "margin": "-",
                             "reasons": golden.get("message") or ""})
    for o in (test.get("oracle") or {}).get("targets", []):
        n = o.get("numerics") or {}
        if not n:
            continue
        base = {"candidate": f"{n['candidate']} ({o.get('package')} {o.get('package_version') or ''})".replace(" )", ")"),
                "target": o["target"], "kind": "oracle", "reference": _REFERENCE.get(n["reference"], n["reference"]),
                "budget": _budget_label(n.get("budget"), (n.get("comparison") or {}).get("policy", ""))}
        if n.get("status") != "ok":
            rows.append({**base, "output": "", "passed": None, "margin": "-",
                         "reasons": f"not compared: {n.get('message') or n.get('status')}"})
        else:
            rows += _rows_of(n.get("comparison"), base)
    return rows


def numerics_context(test: Mapping[str, Any]) -> str:
    """Seed, inputs and calibration of a test's numeric checks, in one sentence."""
    num = test.get("numerics") or {}
    seeds, parts = set(), []
    for e in num.get("emulation", []):
        res = e.get("result") or {}
        if res.get("seed") is not None:
            seeds.add(res["seed"])
        src = f"{e['precision']}: inputs {res.get('inputs_source')}"
        if res.get("calibration_source"):
            src += f", calibration {res['calibration_source']} ({res.get('calibration_samples')} sample(s))"
        parts.append(src)
    for o in (test.get("oracle") or {}).get("targets", []):
        n = o.get("numerics") or {}
        if n.get("seed") is not None:
            seeds.add(n["seed"])
    out = []
    if seeds:
        out.append("seed " + ", ".join(str(s) for s in sorted(seeds)))
    if num.get("release"):
        out.append(f"budgets of release {num['release']}")
    out += list(dict.fromkeys(parts))
    out += list(num.get("notes") or [])
    return "; ".join(out)


def target_budget_rows(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The deployment budgets applied per target: CPU-fallback nodes and the NPU share by nodes and by
    MACs against their limits (part of the deployability verdict)."""
    rows = []
    for tr in test.get("targets") or []:
        t = tr.get("budget")
        if not t:
            continue
        limits, margins = [], []
        if t.get("max_cpu_fallback_nodes") is not None:
            limits.append(f"CPU-fallback nodes {t.get('cpu_fallback_nodes')} (max {t['max_cpu_fallback_nodes']})")
            margins.append(f"{t['max_cpu_fallback_nodes'] - int(t.get('cpu_fallback_nodes') or 0):+d} node(s)")
        for field, label in (("npu_share", "nodes"), ("npu_mac_share", "MACs")):
            bound = t.get(f"min_{field}")
            if bound is not None and t.get(field) is not None:
                limits.append(f"NPU share by {label} {float(t[field]):.1%} (min {float(bound):.1%})")
                margins.append(f"{float(t[field]) - float(bound):+.1%} {label} share")
        rows.append({"target": tr.get("target", ""), "budget": str(t.get("key", "")), "limits": "; ".join(limits) or "-",
                     "margin": ", ".join(margins) or "-", "passed": not t.get("problems"),
                     "problems": "; ".join(t.get("problems") or [])})
    return rows


def oracle_rows(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per target the oracle was asked about: what ran and how far it agrees."""
    rows = []
    for o in (test.get("oracle") or {}).get("targets", []):
        a = o.get("agreement") or {}
        tool = _f.oracle_tool(o)
        if o["status"] == "ran":
            state = "built" if o.get("build_status") == "ok" else f"rejected ({o.get('build_status')})"
            agree = f"{a.get('agree', 0)}/{a.get('nodes', 0)}"
        else:
            state = "not run" if o["status"] == "unavailable" else "error"
            agree = "-"
        rows.append({"target": o["target"], "tool": tool, "status": state, "precision": o.get("precision") or "-",
                     "agree": agree, "disagreements": len(a.get("disagreements", [])),
                     "note": "; ".join(([o["reason"]] if o.get("reason") else []) + list(o.get("notes") or []))})
    return rows


def disagreement_rows(test: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every node where a real toolchain and the table disagree (a table bug)."""
    rows = []
    for o in (test.get("oracle") or {}).get("targets", []):
        for d in (o.get("agreement") or {}).get("disagreements", []):
            rows.append({"target": o["target"], "node": d["node"], "op_type": d["op_type"], "static": d["static"],
                         "real": d["real"], "kind": d["kind"], "table_said": "; ".join(d.get("reasons") or []),
                         "toolchain_said": "; ".join(d.get("real_reasons") or [])})
    return rows
