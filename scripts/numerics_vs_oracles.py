"""Emulated precision (``emulate.py``) against the real toolchains' own runs, on corpus models.

For each architecture of ``tests/models/corpus.py`` named on the command line, the model is
exported (dynamo exporter, opset 19), run in PyTorch on its example inputs (the reference), and
these candidates are compared with the reference with the metrics of ``numerics.py``:

* ``emulate fp16 storage``: emulate.py's default fp16 (weights and activations rounded through fp16);
* ``emulate fp16 converter``: emulate.py's ``fp16_method="converter"`` (ONNX Runtime's float16
  converter, fp16 kernels where ONNX Runtime CPU has them);
* ``emulate int8``: emulate.py's QDQ int8 (onnxruntime.quantization, per-channel int8 weights);
* ``rknn fp16`` / ``rknn int8``: rknn-toolkit2 build + x86 simulator (``--soc``, default rk3588);
* ``qnn fp16`` / ``qnn int8``: onnxruntime-qnn HTP emulation (``--htp-arch``, default 73).

int8 is calibrated on the same samples everywhere: the example inputs, plus ``--calib N - 1``
seeded random samples of the same shape (floats ~ N(0, 1)) when ``--calib`` is above 1.

    python scripts/numerics_vs_oracles.py vit_tiny resnet18_small \\
        --rknn-python /work/venvs/rknn/bin/python --qnn-python /work/venvs/qnn/bin/python

prints one row per (model, candidate, output) and, with ``--json PATH``, writes the figures.
A toolchain that is not installed is left out (and said so).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for _p in (str(REPO), str(REPO / "tests")):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def _metrics(reference: dict[str, Any], candidate: dict[str, Any], precision: str) -> list[dict[str, Any]]:
    import numpy as np

    from pytest_npucheck.numerics import compare_outputs

    cand = {k: np.asarray(v).astype(np.asarray(reference[k]).dtype) for k, v in candidate.items() if k in reference}
    comp = compare_outputs(reference, cand, precision)
    rows = []
    for o in comp.outputs:
        m = o.metrics
        rows.append({"output": o.name, "passed": o.passed, "policy": comp.policy,
                     "max_abs": m.max_abs if m else None, "mean_abs": m.mean_abs if m else None,
                     "cosine": m.cosine if m else None, "snr_db": m.snr_db if m else None,
                     "norm_ratio": m.norm_ratio if m else None, "peak": m.peak if m else None,
                     "reasons": list(o.reasons)})
    return rows


def measure(name: str, args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    import numpy as np
    import onnx
    import torch

    from models.corpus import ARCHS
    from pytest_npucheck.emulate import emulated_model, run_model
    from pytest_npucheck.export import ExportOptions, export_model
    from pytest_npucheck.oracles.simulate import ToolchainUnavailable
    from pytest_npucheck.toolchains.qnn.simulate import simulate_qnn
    from pytest_npucheck.toolchains.rknn.simulate import simulate_rknn

    model, inputs = ARCHS[name].build()
    exported = export_model(model, inputs, ExportOptions(exporter="dynamo", opset=19), cache_dir=work)
    proto = onnx.load(str(exported.path))
    inits = {i.name for i in proto.graph.initializer}
    in_names = [i.name for i in proto.graph.input if i.name not in inits]
    out_names = [o.name for o in proto.graph.output]
    feeds = {n: t.numpy() for n, t in zip(in_names, inputs)}
    with torch.no_grad():
        out = model(*inputs)
    outs = out if isinstance(out, (list, tuple)) else [out]
    reference = {n: t.detach().numpy() for n, t in zip(out_names, outs)}
    rng = np.random.default_rng(0)
    calib = [feeds] + [{n: (rng.standard_normal(v.shape).astype(v.dtype) if v.dtype.kind == "f" else v)
                        for n, v in feeds.items()} for _ in range(args.calib - 1)]
    rows: list[dict[str, Any]] = []

    def add(candidate: str, precision: str, outputs: dict[str, Any] | None, note: str = "") -> None:
        if outputs is None:
            rows.append({"model": name, "candidate": candidate, "precision": precision, "note": note})
            print(f"{name:16} {candidate:24} {note}", flush=True)
            return
        for r in _metrics(reference, outputs, precision):
            rows.append({"model": name, "candidate": candidate, "precision": precision, **r, "note": note})
            print(f"{name:16} {candidate:24} {r['output'][:14]:14} max_abs {r['max_abs']:9.3g}  mean_abs "
                  f"{r['mean_abs']:9.3g}  cosine {r['cosine']:.6f}  snr {r['snr_db']:6.1f} dB  "
                  f"{'pass' if r['passed'] else 'FAIL'} ({r['policy']}) {note}", flush=True)

    add("onnxruntime fp32", "fp32", run_model(exported.path, feeds))
    add("emulate fp16 storage", "fp16", run_model(emulated_model(proto, "fp16"), feeds))
    add("emulate fp16 converter", "fp16", run_model(emulated_model(proto, "fp16", fp16_method="converter"), feeds))
    add("emulate int8", "int8", run_model(emulated_model(proto, "int8", calib), feeds))
    precisions = ("fp16", "int8")
    for tool, run in (("rknn", lambda: simulate_rknn(exported.path, args.soc, feeds, out_names, precisions, calib,
                                                     args.rknn_python, args.timeout)),
                      ("qnn", lambda: simulate_qnn(exported.path, args.htp_arch, feeds, precisions, calib,
                                                   args.qnn_python, args.timeout))):
        try:
            runs = run()
        except ToolchainUnavailable as exc:
            add(f"{tool}", "-", None, f"not run: {str(exc).splitlines()[0]}")
            continue
        for prec, r in runs.items():
            cpu = sorted({n for n, p in r.placement.items() if p == "cpu"})
            note = f"{r.toolchain_version}; {len(cpu)} node(s) on CPU" if r.built else ""
            if r.ran:
                add(f"{tool} {prec}", prec, r.outputs, note)
            else:
                add(f"{tool} {prec}", prec, None,
                    f"no outputs: {r.status} {r.inference_status or ''} {(r.message or r.inference_message)[:200]}")
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("models", nargs="*", default=["vit_tiny", "resnet18_small"])
    p.add_argument("--rknn-python", default=None)
    p.add_argument("--qnn-python", default=None)
    p.add_argument("--soc", default="rk3588")
    p.add_argument("--htp-arch", type=int, default=73)
    p.add_argument("--calib", type=int, default=1, help="int8 calibration samples (the example inputs first)")
    p.add_argument("--timeout", type=float, default=900.0)
    p.add_argument("--json", type=Path, default=None)
    args = p.parse_args(argv)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="npucheck-numerics-") as tmp:
        for name in args.models:
            rows += measure(name, args, Path(tmp))
    if args.json:
        args.json.write_text(json.dumps({"calibration_samples": args.calib, "soc": args.soc,
                                         "htp_arch": args.htp_arch, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
