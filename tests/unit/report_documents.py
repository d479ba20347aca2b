"""Run documents for the renderer tests: built as the plugin writes them (``run_document`` plus the
reporter's baseline and budgets), each valid against the report schema (the tests check it).

Not a test module: the unit and acceptance report tests import it (``from unit.report_documents import ...``).
"""

from __future__ import annotations

import copy
from typing import Any, Optional

from pytest_npucheck.report.jsonreport import run_document

T = "toy@1.0/soc-a"
T2 = "toy@1.1/soc-b"
CREATED = "2026-01-01T00:00:00+00:00"


def node(name: str, op: str, verdict: str = "npu", module: Optional[str] = "", line: int = 10,
         reason: str = "") -> dict[str, Any]:
    reasons = [{"rule": "attr_in", "message": reason or f"{op}: not supported here", "verdict": verdict,
                "category": "attribute", "basis": "documented", "source": None}] if verdict in ("cpu", "unsupported") else []
    src = None if module is None else {"module": module, "file": "/src/nets.py", "line": line}
    return {"name": name, "op_type": op, "domain": "", "verdict": verdict, "reasons": reasons, "source": src}


def target(name: str, nodes: list[dict[str, Any]], edges: Optional[list[list[int]]] = None,
           accepted: dict[str, str] | None = None, fixes: Optional[list[dict[str, Any]]] = None,
           budget: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    accepted = accepted or {}
    falls = [n["name"] for n in nodes if n["verdict"] in ("cpu", "unsupported")]
    new = [x for x in falls if x not in accepted]
    counts = {v: sum(n["verdict"] == v for n in nodes) for v in ("npu", "cpu", "unsupported", "folded")}
    problems = list((budget or {}).get("problems") or [])
    t = {"target": name, "table": {"toolchain": "toy", "version": name.split("@")[1].split("/")[0],
                                   "soc": name.split("/")[1], "revision": 1, "sha256": "ab" * 32},
         "model": {"path": "/tmp/m.onnx", "opsets": {"ai.onnx": 17}, "node_count": len(nodes)},
         "passed": not falls, "verdict": "unsupported" if counts["unsupported"] else ("cpu" if falls else "npu"),
         "summary": counts, "model_issues": [], "notes": [],
         "partition": {"npu_subgraphs": 1 + len(falls), "cpu_islands": len(falls), "transitions": 2 * len(falls),
                       "bytes_crossing": 1024 * len(falls), "transitions_of_unknown_size": 0, "nodes": len(nodes),
                       "nodes_npu": counts["npu"], "npu_share_nodes": counts["npu"] / max(1, len(nodes)),
                       "macs": 1000, "macs_npu": 970 if falls else 1000, "npu_share_macs": 0.97 if falls else 1.0,
                       "segments": [], "crossings": [], "fallback_impact": []},
         "fixes": None if fixes is None else {"suggestions": fixes, "combined": None},
         "nodes": nodes, "edges": edges if edges is not None else [[k, k + 1] for k in range(len(nodes) - 1)],
         "baseline": {"new": new, "accepted": [{"node": n, "reason": r} for n, r in accepted.items()],
                      "passed": not new and not problems}}
    if budget is not None:
        t["budget"] = budget
    return t


def fix(title: str, nodes: list[str], moved: int, before: int, fully: bool = False) -> dict[str, Any]:
    return {"recipe": title.lower().replace(" ", "_"), "title": title, "nodes": nodes,
            "advice": f"replace it: {title.lower()}", "numerics": "identical outputs",
            "verified": {"fallbacks_before": before, "fallbacks_after": before - moved, "targeted": len(nodes),
                         "moved_to_npu": moved, "fully_on_npu": fully, "error": None}}


def comparison(name: str, passed: bool, cosine: float = 0.99999823, snr: float = 61.23456789) -> dict[str, Any]:
    out = {"name": name, "passed": passed, "reasons": [] if passed else ["snr_db 12.3 < 40"], "checks": [
        {"metric": "cosine", "measured": cosine, "op": ">=", "allowed": 0.9999, "passed": cosine >= 0.9999},
        {"metric": "snr_db", "measured": snr, "op": ">=", "allowed": 40.0, "passed": snr >= 40}],
        "metrics": {"max_abs": 0.00123456789, "mean_abs": 1.5e-4, "cosine": cosine, "snr_db": snr, "norm_ratio": 1.0}}
    return out


def numerics(passed_outputs: dict[str, bool]) -> dict[str, Any]:
    outs = [comparison(n, ok, cosine=0.99999823 if ok else 0.9731, snr=61.23456789 if ok else 12.3)
            for n, ok in passed_outputs.items()]
    comp = {"passed": all(passed_outputs.values()), "policy": "fp16", "missing": [], "extra": [],
            "unknown_overrides": [], "outputs": outs}
    return {"enabled": True, "passed": comp["passed"], "notes": [], "onnx_vs_pytorch": None, "emulation": [
        {"target": T, "precision": "fp16", "passed": comp["passed"],
         "result": {"seed": 7, "inputs_source": "given", "comparison": comp}, "budget": None}]}


def entry(nodeid: str, targets: list[dict[str, Any]], status: Optional[str] = None, error: Optional[str] = None,
          num: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    if status is None:
        ok = all(t["baseline"]["passed"] for t in targets) and (num is None or num["passed"])
        status = "passed" if ok else "failed"
    e = {"nodeid": nodeid, "status": status, "error": error, "export": None, "targets": targets}
    e["numerics"] = num or {"enabled": False, "passed": None}
    return e


def clean_target(name: str = T, n: int = 4) -> dict[str, Any]:
    return target(name, [node(f"/blk{k}/conv/Conv", "Conv", module=f"blk{k}.conv", line=20 + k) for k in range(n)])


def failing_target(name: str = T) -> dict[str, Any]:
    nodes = [node("/conv/Conv", "Conv", module="conv"),
             node("/pad1/Pad", "Pad", "cpu", module="pad1", line=31, reason="mode='reflect' not in {'constant'}"),
             node("/relu/Relu", "Relu", module="relu"),
             node("/pad2/Pad", "Pad", "cpu", module="pad2", line=33, reason="mode='reflect' not in {'constant'}"),
             node("/head/Erf", "Erf", "unsupported", module="head.act", line=40, reason="Erf is not in the table")]
    return target(name, nodes, accepted={"/pad1/Pad": "reflect padding is needed"},
                  fixes=[fix("Use constant padding", ["/pad2/Pad"], 1, 3),
                         fix("Replace exact GELU by tanh GELU", ["/head/Erf"], 1, 3, fully=False)])


def documents() -> dict[str, dict[str, Any]]:
    """name -> run document: each kind of entry the renderers must agree on."""
    docs: dict[str, dict[str, Any]] = {}

    def doc(entries: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        d = run_document(copy.deepcopy(entries), created=CREATED)
        d.update(extra)
        return d

    docs["passed"] = doc([entry("t.py::test_a", [clean_target(), clean_target(T2)]),
                          entry("t.py::test_b", [clean_target()])])
    docs["failed"] = doc([entry("t.py::test_pads", [failing_target(), clean_target(T2)]),
                          entry("t.py::test_ok", [clean_target()])])
    only_acc = target(T, [node("/a", "Conv"), node("/p", "Pad", "cpu", module="p")], accepted={"/p": "needed"})
    docs["accepted_only"] = doc([entry("t.py::test_acc", [only_acc])])
    # an entry with status error that still has targets (a check that stopped after the verdict)
    docs["error_with_targets"] = doc([entry("t.py::test_err", [clean_target()], status="error",
                                            error="RuntimeError: onnxruntime died\nsecond line"),
                                      entry("t.py::test_ok", [clean_target()]),
                                      entry("t.py::test_crash", [], status="error", error="worker crashed")])
    docs["numerics_failed"] = doc([entry("t.py::test_num", [clean_target()],
                                         num=numerics({"logits": False, "boxes": True}))])
    budget = {"release": "1.0.0", "key": "toy@*", "max_cpu_fallback_nodes": 0, "min_npu_share": 0.99,
              "min_npu_mac_share": None, "cpu_fallback_nodes": 1, "npu_share": 0.5, "npu_mac_share": 0.9,
              "problems": ["1 CPU-fallback node > 0"]}
    bt = target(T, [node("/a", "Conv"), node("/p", "Pad", "cpu", module="p")], accepted={"/p": "needed"}, budget=budget)
    docs["budget_failed"] = doc([entry("t.py::test_budget", [bt])],
                                budgets={"path": "npu-budgets.json", "release": "1.0.0", "release_in_force": "1.0.0",
                                         "stale": [], "tightening_problems": []})
    return docs


def large_document(tests: int = 300, failing_every: int = 30) -> dict[str, Any]:
    """A suite of ``tests`` marked tests on two targets: every ``failing_every``-th fails with a NEW
    fallback and a checked fix, the others pass with accepted fallbacks and numerics tables."""
    entries = []
    for k in range(tests):
        nid = f"tests/test_zoo.py::test_model[arch{k:03d}]"
        if k % failing_every == 0:
            entries.append(entry(nid, [failing_target(), clean_target(T2)], num=numerics({"out": True, "aux": True})))
        else:
            acc = target(T, [node(f"/m{k}/conv", "Conv", module="conv"), node(f"/m{k}/pad", "Pad", "cpu", module="pad"),
                             node(f"/m{k}/relu", "Relu", module="act")], accepted={f"/m{k}/pad": "reflect pad accepted"})
            entries.append(entry(nid, [acc, clean_target(T2)], num=numerics({"out": True, "aux": True})))
    return run_document(entries, created=CREATED)
