"""Export the model corpus to ONNX with both torch exporters, for running real toolchains over it.

    python tests/models/export_corpus.py OUTDIR [--only NAME ...] [--exporter dynamo|torchscript]
                                                [--check]

writes ``OUTDIR/<name>.<exporter>.onnx`` for every architecture of ``tests/models/corpus.py``
and every exporter it supports (``dynamo``: ``torch.onnx.export(dynamo=True,
opset_version=19)``; ``torchscript``: ``dynamo=False, opset_version=17``), printing the node
count of each file.  ``--check`` also runs every file in ONNX Runtime and compares the outputs
with PyTorch.  The helpers here are shared with ``test_corpus.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
import time
import warnings
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Sequence

if __package__ in (None, ""):  # run as a script: make ``models`` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from models.corpus import ARCHS, EXPORTERS, Arch  # type: ignore[no-redef]
else:
    from .corpus import ARCHS, EXPORTERS, Arch

OPSETS = {"dynamo": 19, "torchscript": 17}
ATOL = 1e-3
RTOL = 1e-3
MIN_COSINE = 0.9999


def export(model: Any, inputs: tuple[Any, ...], path: str | Path, exporter: str) -> Path:
    """Export with one exporter as the corpus contract says; a self-contained .onnx file."""
    import torch

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "dynamo":
            torch.onnx.export(model, inputs, str(path), dynamo=True, opset_version=OPSETS[exporter],
                              external_data=False, verbose=False)
        elif exporter == "torchscript":
            torch.onnx.export(model, inputs, str(path), dynamo=False,
                              opset_version=OPSETS[exporter], verbose=False)
        else:
            raise ValueError(f"unknown exporter {exporter!r}; expected one of {EXPORTERS}")
    return path


def torch_outputs(model: Any, inputs: tuple[Any, ...]) -> list[Any]:
    """PyTorch's outputs, flattened the way both exporters flatten them, as numpy arrays."""
    import torch
    from torch.utils._pytree import tree_leaves

    with torch.no_grad():
        out = model(*inputs)
    return [t.detach().numpy() for t in tree_leaves(out) if isinstance(t, torch.Tensor)]


def onnx_outputs(path: str | Path, inputs: tuple[Any, ...]) -> list[Any]:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    graph_inputs = sess.get_inputs()
    if len(graph_inputs) != len(inputs):
        raise AssertionError(f"{path}: {len(graph_inputs)} graph inputs for {len(inputs)} "
                             f"example inputs ({[i.name for i in graph_inputs]})")
    feed = {gi.name: t.detach().numpy() for gi, t in zip(graph_inputs, inputs)}
    return sess.run(None, feed)


def compare(expected: Sequence[Any], actual: Sequence[Any]) -> list[str]:
    """Problems (empty when they match): same count, shapes, integer outputs equal, float
    outputs within atol/rtol 1e-3 or, for large magnitudes, cosine similarity > 0.9999."""
    import numpy as np

    problems: list[str] = []
    if len(expected) != len(actual):
        return [f"{len(actual)} outputs, expected {len(expected)}"]
    for i, (e, a) in enumerate(zip(expected, actual)):
        e, a = np.asarray(e), np.asarray(a)
        if e.shape != a.shape:
            problems.append(f"output {i}: shape {a.shape}, expected {e.shape}")
            continue
        if not np.issubdtype(e.dtype, np.floating):
            if not np.array_equal(e.astype(np.int64), a.astype(np.int64)):
                problems.append(f"output {i} ({e.dtype}): {int((e != a).sum())} elements differ")
            continue
        e64, a64 = e.astype(np.float64), a.astype(np.float64)
        if not np.isfinite(a64).all() or not np.isfinite(e64).all():
            if not np.array_equal(np.isfinite(e64), np.isfinite(a64)):
                problems.append(f"output {i}: non-finite values differ")
                continue
            mask = np.isfinite(e64)
            e64, a64 = e64[mask], a64[mask]
        if np.allclose(a64, e64, atol=ATOL, rtol=RTOL):
            continue
        denom = float(np.linalg.norm(e64) * np.linalg.norm(a64))
        cos = float((e64 * a64).sum() / denom) if denom > 0 else 0.0
        if cos > MIN_COSINE and float(np.abs(e64).max()) > 1.0:
            continue
        problems.append(f"output {i}: max abs err {float(np.abs(a64 - e64).max()):.3g} "
                        f"(max |ref| {float(np.abs(e64).max()):.3g}), cosine {cos:.6f}")
    return problems


def node_counts(path: str | Path) -> tuple[int, Counter]:
    """Nodes of the main graph (functions inlined) and a histogram of their op types."""
    import onnx

    model = onnx.load(str(path))
    if model.functions:
        from onnx import inliner

        model = inliner.inline_local_functions(model)
    ops = Counter(n.op_type for n in model.graph.node)
    return sum(ops.values()), ops


def check_arch(arch: Arch, exporter: str, outdir: str | Path,
               export_with: Callable[..., Path] | None = None) -> tuple[Path, list[str]]:
    """Build, export, run in ONNX Runtime, compare: (onnx path, problems). ``export_with`` replaces
    :func:`export` (same arguments, returns the file's path; ``test_corpus.py`` passes the package's
    cached ``export_model`` with the same exporter and opset)."""
    model, inputs = arch.build()
    path = (export_with or export)(model, inputs, Path(outdir) / f"{arch.name}.{exporter}.onnx", exporter)
    expected = torch_outputs(model, inputs)
    return path, compare(expected, onnx_outputs(path, inputs))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--only", nargs="*", default=None, help="architecture names")
    parser.add_argument("--exporter", choices=EXPORTERS, action="append",
                        help="only this exporter (repeatable); default: all an arch supports")
    parser.add_argument("--check", action="store_true",
                        help="also run ONNX Runtime and compare with PyTorch")
    args = parser.parse_args(argv)

    names = args.only or list(ARCHS)
    unknown = [n for n in names if n not in ARCHS]
    if unknown:
        parser.error(f"unknown architectures: {', '.join(unknown)}")
    args.outdir.mkdir(parents=True, exist_ok=True)
    failures = 0
    for name in names:
        arch = ARCHS[name]
        for exporter in arch.exporters:
            if args.exporter and exporter not in args.exporter:
                continue
            t0 = time.perf_counter()
            try:
                if args.check:
                    path, problems = check_arch(arch, exporter, args.outdir)
                else:
                    model, inputs = arch.build()
                    path = export(model, inputs, args.outdir / f"{name}.{exporter}.onnx", exporter)
                    problems = []
            except Exception as exc:  # keep going: report every architecture
                failures += 1
                print(f"{name:28s} {exporter:12s} FAILED {type(exc).__name__}: "
                      f"{str(exc).splitlines()[0][:200] if str(exc) else ''}", flush=True)
                continue
            n, ops = node_counts(path)
            status = ("matches" if args.check else "exported") if not problems else (
                "MISMATCH " + "; ".join(problems))
            failures += bool(problems)
            top = ", ".join(f"{op}:{c}" for op, c in ops.most_common(6))
            print(f"{name:28s} {exporter:12s} {n:5d} nodes  {time.perf_counter() - t0:5.1f}s  "
                  f"{status}  [{top}]", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
