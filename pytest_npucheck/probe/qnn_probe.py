"""Run every probe model through ONNX Runtime's QNN EP (HTP emulation); record the placement.

Usage::

    python -m pytest_npucheck.probe.qnn_probe --htp-arch 73 --precision fp16 \\
        --python /work/venvs/qnn/bin/python

writes ``probes/qnn/<sdk-version>/htp-v<arch>.<precision>.results.json``; ``<sdk-version>`` is
the QNN SDK version the HTP backend library reports (``Backend build version: v2.51.0.<stamp>``
-> ``2.51.0``) unless ``--version`` is given.  See ``probes/qnn/README.md``.

The probe models are those of :func:`pytest_npucheck.probe.models.build_probes` (single ops at
opset 17 unless the op needs a later one, patterns, an opset sweep 3..23, dynamic shapes).
Probes that only exist to measure RKNN load/config options (``Probe.config`` / ``Probe.load``)
are skipped: those options do not exist for ONNX Runtime.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from pytest_npucheck.oracles import qnn as oracle
from pytest_npucheck.probe.models import Probe, build_probes, save_probes

__all__ = ["run_probes", "summarise_placement", "probe_record", "select_probes", "main"]

ROOT = Path(__file__).resolve().parents[2]


def summarise_placement(placement: dict[str, str], focus: Sequence[str], status: str = "ok"
                        ) -> str:
    """One verdict for the nodes under test.

    ``unsupported`` when the session could not be created, ``folded`` when onnxruntime removed
    every focus node before partitioning, else ``npu`` / ``cpu`` / ``mixed`` (``folded`` and
    ``removed`` nodes run nowhere and count with the NPU side).
    """
    if status != "ok":
        return "unsupported"
    vals = [placement.get(n, "removed") for n in focus] or list(placement.values())
    if vals and all(v == "folded" for v in vals):
        return "folded"
    norm = {"cpu" if v == "cpu" else "npu" if v in ("npu", "folded", "removed") else v
            for v in vals}
    if norm == {"cpu"}:
        return "cpu"
    if "cpu" in norm:
        return "mixed"
    if norm - {"npu"}:
        return "/".join(sorted(norm))
    return "npu"


def probe_record(p: Probe, res: oracle.QnnResult) -> dict[str, Any]:
    """JSON record of one probe and its QNN EP placement."""
    rec: dict[str, Any] = {
        "id": p.id,
        "op": p.op,
        "kind": p.kind,
        "opset": p.opset,
        "attributes": p.attributes,
        "dtype": p.dtype,
        "shapes": p.shapes,
        "nodes": p.node_list(),
        "focus": p.focus,
        "status": res.status,
        "verdict": summarise_placement(res.placement, p.focus, res.status),
        "placement": res.placement,
        "message": res.message,
    }
    if res.via:
        rec["via"] = res.via
    if res.reasons:
        rec["reasons"] = res.reasons
    if res.helpers:
        rec["helpers"] = res.helpers
    for k in ("run_status", "run_exception", "quantizer", "l1_error"):
        if k in res.extra:
            rec[k] = res.extra[k]
    rec["seconds"] = res.seconds
    if p.note:
        rec["note"] = p.note
    return rec


def select_probes(select: Sequence[str] | None = None) -> list[Probe]:
    """The probes that apply to ONNX Runtime (no RKNN load/config option probes)."""
    return [p for p in build_probes(select) if not p.config and not p.load]


def run_probes(htp_arch: int, precision: str, python: str | None,
               out_path: str | os.PathLike[str] | None = None, *, version: str | None = None,
               soc_model: int | None = None, select: Sequence[str] | None = None,
               workers: int = 2, timeout: float = 120.0, run: bool = True,
               verbose: bool = True) -> dict[str, Any]:
    """Place all probes with the QNN EP of ``python`` and save the results.

    Args:
        htp_arch: HTP architecture (68, 73, ...).
        precision: ``fp16`` or ``int8`` (QDQ-quantized with random calibration data).
        python: python executable of the onnxruntime-qnn venv (default ``NPUCHECK_QNN_PYTHON``).
        out_path: output path; default ``probes/qnn/<sdk>/htp-v<arch>.<precision>.results.json``.
        version: expected QNN SDK version (``None``: what the backend reports); a mismatch raises.
        select: only probes whose id starts with one of these prefixes.
        workers: parallel worker processes.
        timeout: per-model timeout in seconds.
        run: also run each session once on random inputs (HTP emulation).
    """
    probes = select_probes(select)
    t0 = time.time()
    done = [0]

    def progress(r: oracle.QnnResult) -> None:
        done[0] += 1
        if verbose and (done[0] % 100 == 0 or r.status in ("crashed", "timeout")):
            print("  %d/%d  (%s: %s)" % (done[0], len(probes), r.key, r.status), file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="npucheck-qnn-probes-") as tmp:
        paths = save_probes(probes, tmp)
        jobs = [oracle.ModelJob(path=str(path), key=p.id) for p, path in zip(probes, paths)]
        if verbose:
            print("placing %d probes on htp-v%d (%s) ..." % (len(jobs), htp_arch, precision),
                  file=sys.stderr)
        results = oracle.place_models(jobs, htp_arch, python, soc_model=soc_model,
                                      precision=precision, run=run, timeout=timeout,
                                      workers=workers, progress=progress)
    builds = Counter(r.backend_build for r in results if r.backend_build)
    sdks = Counter(r.backend_version for r in results if r.backend_version)
    installed = sdks.most_common(1)[0][0] if sdks else None
    if version and installed and installed != version:
        raise RuntimeError("the QNN backend reports %s, not %s" % (installed, version))
    version = version or installed or "unknown"
    versions = next((r.extra.get("versions") for r in results if r.extra.get("versions")), {})
    iface = next((r.interface_version for r in results if r.interface_version), None)
    import onnx

    soc = "htp-v%d" % htp_arch
    doc = {
        "toolchain": "qnn",
        "package": "onnxruntime-qnn",
        "package_version": versions.get("onnxruntime_qnn_dist") or versions.get("onnxruntime_qnn"),
        "onnxruntime": versions.get("onnxruntime"),
        "version": version,
        "backend_build": builds.most_common(1)[0][0] if builds else None,
        "qnn_interface": iface,
        "soc": soc,
        "precision": precision,
        "provider_options": oracle.provider_options(htp_arch, soc_model, precision),
        "generated": _dt.date.today().isoformat(),
        "generator": "pytest_npucheck.probe.qnn_probe",
        "onnx_version_used_to_write_probes": onnx.__version__,
        "worker_versions": versions,
        "notes": ("placement per ONNX node from InferenceSession.get_provider_graph_assignment_"
                  "info(): npu = QNNExecutionProvider, cpu = CPUExecutionProvider, folded = "
                  "removed by onnxruntime's basic optimizations before partitioning, removed = "
                  "in no partition (e.g. cancelled by the layout transformation); reasons are "
                  "the REASON lines of the verbose log."
                  + (" int8: the probe was QDQ-quantized in the worker (uint8 activations and "
                     "weights, random calibration data); placement is reported for the "
                     "probe's own nodes, Q/DQ nodes are listed under helpers."
                     if precision == "int8" else "")),
        "run": run,
        "seconds": round(time.time() - t0, 1),
        "count": len(probes),
        "probes": [probe_record(p, r) for p, r in zip(probes, results)],
    }
    if out_path is None:
        out_path = ROOT / "probes" / "qnn" / version / ("%s.%s.results.json" % (soc, precision))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    if verbose:
        print("wrote %s in %.0f s: %s" % (out, doc["seconds"],
                                          dict(Counter(r["verdict"] for r in doc["probes"]))),
              file=sys.stderr)
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description="Place probe models with onnxruntime-qnn (HTP).")
    ap.add_argument("--htp-arch", type=int, default=73)
    ap.add_argument("--soc-model", type=int, default=None)
    ap.add_argument("--precision", choices=["fp16", "int8"], default="fp16")
    ap.add_argument("--python", help="python of the onnxruntime-qnn venv "
                    "(default: $%s)" % oracle.ENV_VAR)
    ap.add_argument("--version", help="expected QNN SDK version (default: what the backend "
                    "reports)")
    ap.add_argument("--out", help="output JSON (default probes/qnn/<sdk>/htp-v<arch>."
                    "<precision>.results.json)")
    ap.add_argument("--select", action="append", help="only probe ids with this prefix")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--no-run", action="store_true", help="do not run the sessions once")
    args = ap.parse_args(argv)
    run_probes(args.htp_arch, args.precision, args.python, args.out, version=args.version,
               soc_model=args.soc_model, select=args.select, workers=args.workers,
               timeout=args.timeout, run=not args.no_run)
    return 0


if __name__ == "__main__":
    sys.exit(main())
