"""Measure how often the static RKNN verdicts agree with the real compiler, node by node.

Exports every model of the corpus (tests/models/corpus.py) and of the demo (examples/models.py)
with both exporters, checks each statically against a table, compiles each with rknn-toolkit2
(fp16 build, in its own venv: NPUCHECK_RKNN_PYTHON or --python) and compares.

    python scripts/rknn_agreement.py --target rknn@2.5.0/rk3588 --python .venv-rknn/bin/python \
        --out probes/rknn/2.5.0/rk3588.agreement.json

Re-checking a changed table needs the compiler's placements, not the compiler: ``--real FILE``
keeps them. Without that file, ``--real-from probes/rknn/<v>/<soc>.agreement.json --real FILE``
rebuilds it from a committed agreement and the table it was measured with (same sha256): every
node that agreed was placed as the table predicted, every disagreement records the real side.
Change the table only after that.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "examples")]


def models() -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    try:
        from models.corpus import ARCHS  # tests/models/corpus.py

        for name, arch in sorted(ARCHS.items()):
            out.append((name, arch))
    except ImportError as exc:  # pragma: no cover - corpus missing
        print(f"corpus not available: {exc}", file=sys.stderr)
    return out


def demo_models() -> list[tuple[str, Any]]:
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("demo_models", REPO / "examples" / "models.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    torch.manual_seed(0)
    return [
        ("demo_resnet", lambda: (mod.TinyResNet().eval(), (torch.randn(1, 3, 64, 64),))),
        ("demo_unet", lambda: (mod.SmallUNet().eval(), (torch.randn(1, 3, 64, 64),))),
        ("demo_detection", lambda: (mod.DetectionHead().eval(), (torch.randn(1, 3, 64, 64),))),
        ("demo_encoder", lambda: (mod.TinyEncoder().eval(), (torch.randint(0, 100, (1, 16)),))),
    ]


def _calibration(model_path: Path, inputs: Any, directory: Path) -> str:
    """The example inputs as the one-sample calibration set of an int8 build (dataset.txt)."""
    import numpy as np
    import onnx

    directory.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(model_path), load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    names = [i.name for i in graph.input if i.name not in inits]
    arrays = [t.detach().cpu().numpy() for t in inputs if hasattr(t, "detach")]
    paths = []
    for k, (_, arr) in enumerate(zip(names, arrays)):
        path = directory / f"in{k}.npy"
        np.save(path, arr)
        paths.append(str(path))
    ds = directory / "dataset.txt"
    ds.write_text(" ".join(paths) + "\n", encoding="utf-8")
    return str(ds)


def placements_from_agreement(path: Path, table: Any, entries: list[tuple[str, str, Path]]) -> dict[str, Any]:
    """The compiler's placements as a committed agreement file implies them (see the module doc)."""
    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.oracles.compare import _PREDICTS  # what each verdict predicts of the placement

    doc = json.loads(path.read_text())
    summary = doc.get("summary") or {}
    if summary.get("target") != table.target or summary.get("table_sha256") != table.sha256:
        raise SystemExit(f"{path}: measured with {summary.get('target')} table sha256 {summary.get('table_sha256')}, "
                         f"not {table.target} {table.sha256}: rebuild the placements with the table it was "
                         "measured with (git checkout), then change the table")
    rows = {f"{m['model']}.{m['exporter']}": m for m in doc["models"]}
    runs: dict[str, Any] = {}
    for name, exporter, model_path in entries:
        row = rows.get(f"{name}.{exporter}")
        if row is None:
            continue  # not in that run: compiled as usual
        real = {d["node"]: d["real"] for d in row["disagreements"]}
        placement: dict[str, str] = {}
        if row["real_status"] == "ok":
            [static] = check_graph(graph_facts(model_path), [table])
            for node in static.nodes:
                if not node.graph:
                    placement[node.name] = real.get(node.name, _PREDICTS[node.verdict])
        runs[f"{name}.{exporter}"] = {"status": row["real_status"], "message": row["real_message"],
                                      "placement": placement}
    return runs


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="rknn@2.5.0/rk3588")
    p.add_argument("--python", default=None, help="python of the rknn-toolkit2 venv")
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--only", nargs="*", default=None, help="model names to run")
    p.add_argument("--exporters", nargs="*", default=["dynamo", "torchscript"])
    p.add_argument("--real", type=Path, default=None,
                   help="JSON file of the compiler's placements: reused when it exists, written otherwise "
                        "(re-checking a changed table then needs no compiler run)")
    p.add_argument("--real-from", type=Path, default=None,
                   help="committed agreement JSON to rebuild the placements from (with the unchanged table "
                        "it was measured with); needs no compiler; written to --real when given")
    p.add_argument("--export-cache", type=Path, default=None,
                   help="export cache directory to reuse between runs (default: a new temporary one)")
    p.add_argument("--int8", action=argparse.BooleanOptionalAction, default=None,
                   help="int8 build calibrated on the example inputs (default: when the table's "
                        "default precision is int8, e.g. rv1106)")
    args = p.parse_args(argv)

    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.export import ExportOptions, export_model
    from pytest_npucheck.toolchains.rknn import adapter as rknn
    from pytest_npucheck.oracles.compare import compare
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table(args.target)
    opset = {"dynamo": min(19, table.opsets["ai.onnx"][1]), "torchscript": min(17, table.opsets["ai.onnx"][1])}
    entries: list[tuple[str, str, Path]] = []
    calib: dict[str, str] = {}
    int8 = args.int8 if args.int8 is not None else (table.precision or {}).get("default") == "int8"
    work = args.export_cache or Path(tempfile.mkdtemp(prefix="npucheck-agreement-"))
    builders: list[tuple[str, Any]] = []
    for name, arch in models():
        builders.append((name, arch.build))
    builders += demo_models()
    if args.only:
        builders = [(n, b) for n, b in builders if n in args.only]
    for name, build in builders:
        for exporter in args.exporters:
            model, inputs = build()
            try:
                res = export_model(model, inputs, ExportOptions(exporter=exporter, opset=opset[exporter]), cache_dir=work)
            except Exception as exc:
                print(f"{name}.{exporter}: export failed: {str(exc).splitlines()[0]}", file=sys.stderr)
                continue
            entries.append((name, exporter, res.path))
            calib[f"{name}.{exporter}"] = _calibration(res.path, inputs, work / "calib" / f"{name}.{exporter}")
    real_runs: dict[str, Any] = {}
    if args.real is not None and args.real.exists():
        real_runs = json.loads(args.real.read_text())
    if args.real_from is not None and not real_runs:
        real_runs = placements_from_agreement(args.real_from, table, entries)
        if args.real is not None:
            args.real.write_text(json.dumps(real_runs, indent=1, sort_keys=True) + "\n")
    todo = [e for e in entries if f"{e[0]}.{e[1]}" not in real_runs]
    if todo:
        jobs: list[Any] = [str(e[2]) for e in todo]
        if int8:  # the NPU of the SoC only runs quantized models: calibrate on the example inputs
            jobs = [{"path": str(e[2]), "build": {"do_quantization": True, "dataset": calib[f"{e[0]}.{e[1]}"]}}
                    for e in todo]
        compiled = rknn.compile_models(jobs, target_platform=table.soc, python=args.python)
        for (name, exporter, path), real in zip(todo, compiled):
            msg = real.message or ""  # the toolkit's tracebacks end with the actual error
            real_runs[f"{name}.{exporter}"] = {"status": real.status,
                                                "message": msg if len(msg) <= 500 else msg[:200] + " ... " + msg[-300:],
                                                "placement": rknn.onnx_placement(real)}
        if args.real is not None:
            args.real.write_text(json.dumps(real_runs, indent=1, sort_keys=True) + "\n")
    report: list[dict[str, Any]] = []
    total = agree = missed = 0
    for name, exporter, path in entries:
        real = real_runs[f"{name}.{exporter}"]
        [static] = check_graph(graph_facts(path), [table])
        a = compare(static, real["placement"], real["status"] == "ok")
        total += a.nodes
        agree += a.agree
        missed += len(a.missed_fallbacks)
        row = {"model": name, "exporter": exporter, **a.to_json(), "real_status": real["status"],
               "real_message": real["message"][-300:]}
        report.append(row)
        flag = "" if not a.disagreements else f"  <- {len(a.disagreements)} disagree"
        print(f"{name:28} {exporter:11} nodes {a.nodes:4}  agree {a.rate:7.2%}  static {static.verdict:11} real {real['status']}{flag}")
        for d in a.disagreements[:8]:
            print(f"    {d.kind:15} {d.op_type:18} {d.node[:50]:50} static={d.static:11} real={d.real}")
    summary = {"target": table.target, "table_sha256": table.sha256, "models": len(report), "nodes": total,
               "agree": agree, "rate": round(agree / total, 6) if total else None, "missed_fallbacks": missed}
    print(json.dumps(summary))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "models": report}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
