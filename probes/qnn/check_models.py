"""Agreement on real architectures: static QNN verdicts vs onnxruntime-qnn's real placement.

Exports every architecture of the model corpus (``tests/models/corpus.py``) with both torch
exporters (dynamo at opset 19, TorchScript at opset 17), places each ONNX file with the QNN EP
(HTP emulation, fp16, htp_arch 73 by default) through :mod:`pytest_npucheck.toolchains.qnn.adapter`, checks
it statically against the table and compares node by node
(:func:`pytest_npucheck.oracles.compare.compare`).

    python probes/qnn/check_models.py --python /work/venvs/qnn/bin/python
    python probes/qnn/check_models.py --recheck          # table changed: reuse the placements

writes ``probes/qnn/<sdk>/htp-v<arch>.models.json`` (the real per-node placement of every
export, with the QNN EP's reasons) and ``probes/qnn/<sdk>/htp-v<arch>.agreement.json`` (the
comparison).  ``--recheck`` re-exports (from the export cache) and re-compares with the saved
placement, without the QNN venv.  The main venv (torch, onnx) runs this script; onnxruntime-qnn
runs in its own venv.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _p in (str(REPO), str(REPO / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

OPSETS = {"dynamo": 19, "torchscript": 17}


def corpus() -> list[tuple[str, Any]]:
    """``(name, build)`` for every architecture of the corpus."""
    from models.corpus import ARCHS  # tests/models/corpus.py

    return [(name, arch) for name, arch in sorted(ARCHS.items())]


def export_all(names: list[str] | None, exporters: list[str], cache: Path
               ) -> list[dict[str, Any]]:
    """Export every (arch, exporter); returns ``[{"model", "exporter", "path" | "error"}]``."""
    import torch

    from pytest_npucheck.export import ExportOptions, export_model

    out: list[dict[str, Any]] = []
    for name, arch in corpus():
        if names and name not in names:
            continue
        for exporter in exporters:
            if exporter not in arch.exporters:
                continue
            torch.manual_seed(0)
            model, inputs = arch.build()
            entry: dict[str, Any] = {"model": name, "exporter": exporter,
                                     "opset": OPSETS[exporter]}
            try:
                res = export_model(model, inputs, ExportOptions(exporter=exporter,
                                                                opset=OPSETS[exporter]),
                                   cache_dir=cache)
                entry["path"] = str(res.path)
                entry["opset"] = res.opset
            except Exception as exc:  # an export failure is reported, not fatal
                entry["error"] = str(exc).splitlines()[0][:300]
            print("exported %-28s %-11s %s" % (name, exporter, entry.get("error") or "ok"),
                  file=sys.stderr)
            out.append(entry)
    return out


def place(entries: list[dict[str, Any]], python: str | None, htp_arch: int, precision: str,
          workers: int) -> dict[str, Any]:
    """Real placement of every exported model: ``{key: record}``."""
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    todo = [e for e in entries if e.get("path")]
    jobs = [{"path": e["path"], "key": "%s.%s" % (e["model"], e["exporter"])} for e in todo]
    results = qnn.place_models(jobs, htp_arch, python, precision=precision, workers=workers,
                               timeout=900)
    out: dict[str, Any] = {}
    for r in results:
        out[r.key] = {
            "status": r.status, "message": r.message[:500], "placement": r.placement,
            "via": r.via, "reasons": r.reasons, "op_types": r.op_types,
            "helpers": r.helpers, "backend_version": r.backend_version,
            "backend_build": r.backend_build, "seconds": r.seconds,
            "versions": r.extra.get("versions"),
        }
    return out


def agreement(entries: list[dict[str, Any]], placements: dict[str, Any], target: str
              ) -> dict[str, Any]:
    """Static check vs real placement for every export."""
    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.oracles.compare import compare
    from pytest_npucheck.toolchains.qnn.adapter import QnnResult, onnx_placement
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table(target)
    rows: list[dict[str, Any]] = []
    total = agree = missed = 0
    missed_ops: Counter[str] = Counter()
    alarm_ops: Counter[str] = Counter()
    for e in entries:
        key = "%s.%s" % (e["model"], e["exporter"])
        real = placements.get(key)
        if not e.get("path") or real is None:
            rows.append({"model": e["model"], "exporter": e["exporter"],
                         "skipped": e.get("error") or "not placed"})
            continue
        [static] = check_graph(graph_facts(Path(e["path"])), [table])
        res = QnnResult(key=key, path=e["path"], status=real["status"],
                        placement=real["placement"], op_types=real.get("op_types") or {})
        a = compare(static, onnx_placement(res), real["status"] == "ok")
        total += a.nodes
        agree += a.agree
        missed += len(a.missed_fallbacks)
        for d in a.disagreements:
            (missed_ops if d.kind == "missed_fallback" else alarm_ops)[d.op_type] += 1
        row = {"model": e["model"], "exporter": e["exporter"], "opset": e["opset"],
               **a.to_json(), "real_status": real["status"],
               "real_cpu_nodes": sorted(n for n, p in real["placement"].items() if p == "cpu")}
        for d in row["disagreements"]:
            d["real_reasons"] = real.get("reasons", {}).get(d["node"], [])
            if real.get("via", {}).get(d["node"]):
                d["real_via"] = real["via"][d["node"]]
        if real["status"] != "ok":
            row["real_message"] = real.get("message", "")[:300]
        rows.append(row)
        flag = "" if not a.disagreements else "  <- %d disagree" % len(a.disagreements)
        print("%-28s %-11s nodes %5d  agree %7.2f%%  static %-11s real %s%s" % (
            e["model"], e["exporter"], a.nodes, 100 * a.rate, static.verdict, real["status"],
            flag), file=sys.stderr)
        for d in a.disagreements[:6]:
            print("    %-15s %-18s %-48s static=%-11s real=%s" % (
                d.kind, d.op_type, d.node[:48], d.static, d.real), file=sys.stderr)
    summary = {"target": table.target, "table_sha256": table.sha256,
               "models": sum(1 for r in rows if "nodes" in r), "nodes": total, "agree": agree,
               "rate": round(agree / total, 6) if total else None, "missed_fallbacks": missed,
               "missed_fallback_ops": dict(missed_ops.most_common()),
               "false_alarm_ops": dict(alarm_ops.most_common()),
               "skipped": [r for r in rows if "skipped" in r]}
    return {"summary": summary, "models": [r for r in rows if "skipped" not in r]}


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--python", help="python of the onnxruntime-qnn venv (default "
                    "$NPUCHECK_QNN_PYTHON)")
    ap.add_argument("--htp-arch", type=int, default=73)
    ap.add_argument("--precision", default="fp16", choices=["fp16", "int8"])
    ap.add_argument("--version", default="2.51.0", help="QNN SDK version of the table/outputs")
    ap.add_argument("--target", help="table target (default qnn@<version>/htp-v<arch>)")
    ap.add_argument("--only", nargs="*", help="architectures to run")
    ap.add_argument("--exporters", nargs="*", default=["dynamo", "torchscript"])
    ap.add_argument("--cache", default=str(Path(tempfile.gettempdir()) / "npucheck-qnn-exports"),
                    help="export cache directory (reused between runs)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--recheck", action="store_true",
                    help="reuse the saved real placement (no QNN run)")
    ap.add_argument("--out-dir", default=None, help="default probes/qnn/<version>")
    ap.add_argument("--also", nargs="*", default=[], metavar="VERSION/ARCH",
                    help="with --recheck: also re-compare these tables (e.g. 2.49.40/73) against "
                         "their saved placements, exporting the corpus once")
    args = ap.parse_args(argv)
    if args.also and not args.recheck:
        ap.error("--also needs --recheck")

    soc = "htp-v%d" % args.htp_arch
    suffix = "" if args.precision == "fp16" else ".%s" % args.precision
    out_dir = Path(args.out_dir) if args.out_dir else REPO / "probes" / "qnn" / args.version
    models_path = out_dir / ("%s%s.models.json" % (soc, suffix))
    agree_path = out_dir / ("%s%s.agreement.json" % (soc, suffix))
    target = args.target or "qnn@%s/%s" % (args.version, soc)

    entries = export_all(args.only, args.exporters, Path(args.cache))
    if args.recheck:
        saved = json.loads(models_path.read_text())
        placements = saved["placements"]
    else:
        placements = place(entries, args.python, args.htp_arch, args.precision, args.workers)
        seen = {p.get("backend_version") for p in placements.values() if p.get("backend_version")}
        if seen and seen != {args.version}:
            print("warning: the backend reports QNN %s, outputs are filed under --version %s"
                  % (", ".join(sorted(seen)), args.version), file=sys.stderr)
        if args.only and models_path.is_file():  # merge into the saved placements
            saved = json.loads(models_path.read_text())
            saved["placements"].update(placements)
            placements = saved["placements"]
        import onnx
        import torch

        first = next(iter(placements.values()), {})
        doc = {"toolchain": "qnn", "version": args.version, "soc": soc,
               "precision": args.precision, "generated": _dt.date.today().isoformat(),
               "generator": "probes/qnn/check_models.py", "torch": torch.__version__,
               "onnx": onnx.__version__, "worker_versions": first.get("versions"),
               "backend_build": first.get("backend_build"),
               "opsets": OPSETS,
               "notes": "placement per ONNX node: npu = QNNExecutionProvider, cpu = "
                        "CPUExecutionProvider, folded = removed by onnxruntime before "
                        "partitioning, removed = in no partition.",
               "placements": dict(sorted(placements.items()))}
        out_dir.mkdir(parents=True, exist_ok=True)
        models_path.write_text(json.dumps(doc, indent=1) + "\n")
    jobs = [(target, placements, agree_path)]
    for spec in args.also:
        version, arch = spec.split("/")
        other = REPO / "probes" / "qnn" / version
        jobs.append(("qnn@%s/htp-v%s" % (version, arch),
                     json.loads((other / ("htp-v%s%s.models.json" % (arch, suffix))).read_text())
                     ["placements"], other / ("htp-v%s%s.agreement.json" % (arch, suffix))))
    for target, placements, agree_path in jobs:
        report = agreement(entries, placements, target)
        report["summary"]["precision"] = args.precision
        report["summary"]["exports"] = {k: "torch.onnx.export(dynamo=%s, opset_version=%d)" % (
            k == "dynamo", v) for k, v in OPSETS.items()}
        agree_path.write_text(json.dumps(report, indent=1) + "\n")
        s = report["summary"]
        print(json.dumps({k: s[k] for k in ("target", "models", "nodes", "agree", "rate",
                                            "missed_fallbacks", "missed_fallback_ops",
                                            "false_alarm_ops")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
