"""Run every probe model through rknn-toolkit2 and record the real placement.

Usage::

    python -m pytest_npucheck.toolchains.rknn.probe --soc rk3588 --python /path/to/rknn-venv/bin/python

writes ``probes/rknn/<version>/<soc>.results.json`` (version read from the installed toolkit
unless ``--version`` is given).  See ``probes/rknn/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

from pytest_npucheck.toolchains.rknn import adapter as oracle
from pytest_npucheck.probe.models import Probe, build_probes, save_probes

__all__ = ["run_probes", "summarise_placement", "write_calibration", "main", "INT8_ONLY_SOCS"]

#: SoCs whose NPU only runs quantized models: probed with an int8 build (``do_quantization=True``).
INT8_ONLY_SOCS = ("rv1106", "rv1103")

#: calibration samples written per probe for an int8 build
CALIBRATION_SAMPLES = 2

_NP_DTYPES = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
              9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


def summarise_placement(placement: dict[str, str], focus: Sequence[str]) -> str:
    """One verdict for the nodes under test: ``npu``, ``cpu``, ``mixed`` or ``unsupported``."""
    vals = {placement.get(n, "npu") for n in focus} or set(placement.values())
    if "unsupported" in vals:
        return "unsupported"
    if vals == {"cpu"}:
        return "cpu"
    if "cpu" in vals:
        return "mixed"
    return "npu"


def _row_dict(r: oracle.LayerRow) -> dict[str, Any]:
    return {"id": r.id, "op_type": r.op_type, "dtype": r.dtype, "target": r.target,
            "input_shape": r.input_shape, "output_shape": r.output_shape,
            "full_name": r.full_name}


def write_calibration(p: Probe, directory: str | os.PathLike[str],
                      samples: int = CALIBRATION_SAMPLES, seed: int = 0) -> str:
    """Write ``samples`` random inputs of probe ``p`` as ``.npy`` files and the ``dataset.txt``
    rknn-toolkit2 reads for an int8 build (one sample per line, the inputs of a sample separated
    by spaces); returns the path of ``dataset.txt``.

    Float inputs are uniform in [0.1, 1) - inside the domain of every probed op (Log, Sqrt,
    Reciprocal, Acos, ... of standard-normal samples give NaN, and NaN calibration statistics
    make the int8 build fail with "cannot convert float NaN to integer", which says nothing
    about the op) - integer inputs small non-negative values (valid as indices for the probes'
    small shapes), bool inputs random. Symbolic or unknown dims take the
    probe's ``load_onnx(input_size_list=...)`` shape when it has one, else 1.
    """
    import numpy as np

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    inits = {i.name for i in p.model.graph.initializer}
    inputs = [i for i in p.model.graph.input if i.name not in inits]
    fixed = list((p.load or {}).get("input_size_list") or [])
    lines = []
    for s in range(samples):
        paths = []
        for k, vi in enumerate(inputs):
            tt = vi.type.tensor_type
            dims = [dim.dim_value if dim.HasField("dim_value") else 0 for dim in tt.shape.dim]
            if k < len(fixed) and len(fixed[k]) == len(dims):
                dims = [int(f) if not d0 else d0 for d0, f in zip(dims, fixed[k])]
            dims = [d0 if d0 > 0 else 1 for d0 in dims]
            dtype = _NP_DTYPES.get(tt.elem_type, "float32")
            if dtype == "bool":
                arr = rng.random(dims) > 0.5
            elif dtype.startswith(("int", "uint")):
                arr = rng.integers(0, 2, size=dims).astype(dtype)
            else:
                arr = rng.uniform(0.1, 1.0, size=dims).astype(dtype)
            path = d / ("s%d_in%d.npy" % (s, k))
            np.save(path, arr)
            paths.append(str(path))
        lines.append(" ".join(paths))
    ds = d / "dataset.txt"
    ds.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(ds)


def probe_record(p: Probe, res: oracle.RknnResult) -> dict[str, Any]:
    """JSON record of one probe and its compile result."""
    names = [n.name for n in p.model.graph.node]
    placement = oracle.onnx_placement(res, p.node_list())
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
        "verdict": summarise_placement(placement, p.focus),
        "placement": placement,
        "message": res.message,
        "warnings": res.warnings,
        "rows": [_row_dict(r) for r in res.rows if not r.is_io],
        "unmapped_cpu_rows": [r.full_name for r in oracle.unmapped_cpu_rows(res, names)],
        "attribution": oracle.attribute_rows(res, p.node_list()) if res.ok else {},
        "seconds": res.seconds,
    }
    if p.config:
        rec["config"] = p.config
    if p.load:
        rec["load"] = p.load
    if p.note:
        rec["note"] = p.note
    return rec


def run_probes(version: str | None, soc: str, python: str | None, out_path: str | os.PathLike[str]
               | None = None, *, select: Sequence[str] | None = None, workers: int = 2,
               timeout: float = 120.0, verbose: bool = True, extra: bool = False,
               quantize: bool | None = None) -> dict[str, Any]:
    """Compile all probes for ``soc`` with the rknn-toolkit2 of ``python`` and save the results.

    Args:
        version: expected rknn-toolkit2 version (``None``: whatever is installed); a mismatch
            with the installed toolkit raises ``RuntimeError``.
        soc: RKNN ``target_platform`` (rk3588, rk3576, rk3566, ...).
        python: python executable of the rknn venv (default: ``NPUCHECK_RKNN_PYTHON``).
        out_path: JSON output path; default ``probes/rknn/<version>/<soc>.results.json``.
        select: only probes whose id starts with one of these prefixes.
        workers: parallel rknn worker processes.
        timeout: per-model timeout in seconds.
        extra: run the extra probes of :mod:`pytest_npucheck.probe.extra_families` instead
            (default output ``probes/rknn/<version>/<soc>.extra.results.json``).
        quantize: int8 build (``do_quantization=True`` with a small random calibration set
            written per probe, see :func:`write_calibration`); default: only for the int8-only
            SoCs (:data:`INT8_ONLY_SOCS`), fp16 otherwise.

    Returns:
        The results document that was written.
    """
    if extra:
        from pytest_npucheck.probe.extra_families import build_extra_probes

        probes = build_extra_probes(select)
    else:
        probes = build_probes(select)
    t0 = time.time()
    done = [0]

    def progress(r: oracle.RknnResult) -> None:
        done[0] += 1
        if verbose and (done[0] % 50 == 0 or r.status in ("crashed", "timeout")):
            print("  %d/%d  (%s: %s)" % (done[0], len(probes), r.key, r.status), file=sys.stderr)

    if quantize is None:
        quantize = soc in INT8_ONLY_SOCS
    with tempfile.TemporaryDirectory(prefix="npucheck-probes-") as tmp:
        paths = save_probes(probes, tmp)
        builds: list[dict[str, Any]] = [{} for _ in probes]
        if quantize:
            builds = [{"do_quantization": True,
                       "dataset": write_calibration(p, Path(tmp) / "calib" / ("%05d" % n))}
                      for n, p in enumerate(probes)]
        jobs = [oracle.ModelJob(path=str(path), key=p.id, config=p.config, load=p.load,
                                build=b)
                for p, path, b in zip(probes, paths, builds)]
        if verbose:
            print("compiling %d probes for %s ..." % (len(jobs), soc), file=sys.stderr)
        results = oracle.compile_models(jobs, soc, python, timeout=timeout, workers=workers,
                                        progress=progress)
    installed = next((r.extra.get("rknn_version") for r in results
                      if r.extra.get("rknn_version")), None)
    if version and installed and installed != version:
        raise RuntimeError("installed rknn-toolkit2 is %s, not %s" % (installed, version))
    version = version or installed or "unknown"
    import onnx

    doc = {
        "toolchain": "rknn",
        "package": "rknn-toolkit2",
        "version": version,
        "soc": soc,
        "generated": _dt.date.today().isoformat(),
        "generator": "pytest_npucheck.toolchains.rknn.probe" + (" --extra" if extra else ""),
        "onnx_version_used_to_write_probes": onnx.__version__,
        "build": ({"do_quantization": True, "precision": "int8",
                   "calibration": "%d random samples per probe (rknn_probe.write_calibration)"
                                  % CALIBRATION_SAMPLES, "verbose": True}
                  if quantize else
                  {"do_quantization": False, "float_dtype": "float16", "verbose": True}),
        "seconds": round(time.time() - t0, 1),
        "count": len(probes),
        "probes": [probe_record(p, r) for p, r in zip(probes, results)],
    }
    if out_path is None:
        out_path = Path("probes") / "rknn" / version / ("%s.%sresults.json"
                                                        % (soc, "extra." if extra else ""))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=False)
        fh.write("\n")
    if verbose:
        from collections import Counter
        print("wrote %s: %s" % (out, dict(Counter(r["verdict"] for r in doc["probes"]))),
              file=sys.stderr)
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description="Compile probe models with rknn-toolkit2.")
    ap.add_argument("--soc", default="rk3588", help="RKNN target_platform")
    ap.add_argument("--python", help="python of the rknn-toolkit2 venv "
                    "(default: $%s)" % oracle.ENV_VAR)
    ap.add_argument("--version", help="expected rknn-toolkit2 version (default: installed)")
    ap.add_argument("--out", help="output JSON (default probes/rknn/<version>/<soc>.results.json)")
    ap.add_argument("--select", action="append", help="only probe ids with this prefix")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--extra", action="store_true",
                    help="run the extra probes (pytest_npucheck.probe.extra_families) and write "
                         "<soc>.extra.results.json")
    q = ap.add_mutually_exclusive_group()
    q.add_argument("--quantize", dest="quantize", action="store_true", default=None,
                   help="int8 build with a random calibration set per probe (default for %s)"
                        % ", ".join(INT8_ONLY_SOCS))
    q.add_argument("--fp16", dest="quantize", action="store_false",
                   help="fp16 build (default for every other SoC)")
    args = ap.parse_args(argv)
    run_probes(args.version, args.soc, args.python, args.out, select=args.select,
               workers=args.workers, timeout=args.timeout, extra=args.extra,
               quantize=args.quantize)
    return 0


if __name__ == "__main__":
    sys.exit(main())
