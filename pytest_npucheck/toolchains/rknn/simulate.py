"""The RKNN oracle hook: build a model with rknn-toolkit2 and run it on the x86 simulator.

``_rknn_sim_worker.py`` runs in the rknn-toolkit2 venv and builds fp16 (``do_quantization=False``)
or int8 (``do_quantization=True`` with a dataset file of the calibration samples), then
``init_runtime()`` with no target runs the simulator. Placement comes from the verbose build
log's layer table (:func:`.adapter.onnx_placement`). Registered as the ``oracle`` hook of the
``rknn`` toolchain (:mod:`pytest_npucheck.toolchains.registry`). Standard library only at import.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...oracles.simulate import SimRun, ToolchainUnavailable, load_outputs, read_text, run_worker, save_feeds
from . import adapter as _rknn

__all__ = ["find_python", "simulate", "simulate_rknn"]


def find_python(python: str | None = None) -> str | None:
    """The python of the rknn-toolkit2 venv (``--python``, ``$NPUCHECK_RKNN_PYTHON``, ``.venv-rknn``)."""
    return _rknn.find_rknn_python(python)


def simulate(onnx_path: Any, table: Any, feeds: Mapping[str, Any], output_names: Sequence[str],
             precisions: Sequence[str], calibration: Sequence[Mapping[str, Any]] | None, python: str | None,
             timeout: float) -> dict[str, SimRun]:
    """The oracle hook: :func:`simulate_rknn` for the table's SoC."""
    return simulate_rknn(onnx_path, table.soc, feeds, output_names, precisions, calibration, python, timeout)


def simulate_rknn(model: str | os.PathLike[str], soc: str, feeds: Mapping[str, Any],
                  output_names: Sequence[str], precisions: Sequence[str] = ("fp16",),
                  calibration: Sequence[Mapping[str, Any]] | None = None,
                  python: str | None = None, timeout: float = 600.0) -> dict[str, SimRun]:
    """Build ``model`` for ``soc`` with rknn-toolkit2 at each precision and run the simulator.

    ``feeds``: input name -> array, in graph input order; 4-D inputs are given as NCHW (the ONNX
    layout: ``data_format="nchw"``). ``calibration``: int8 samples (default ``[feeds]``).
    Returns ``{precision: SimRun}``. Raises :class:`ToolchainUnavailable`.
    """
    exe = _rknn.find_rknn_python(python)
    if exe is None:
        raise ToolchainUnavailable(f"rknn-toolkit2 is not installed (set {_rknn.ENV_VAR} to the python "
                                   "of a venv with rknn-toolkit2)")
    path = os.path.abspath(os.fspath(model))
    with tempfile.TemporaryDirectory(prefix="npucheck-rknn-sim-") as tmp:
        inputs = save_feeds(feeds, os.path.join(tmp, "inputs"))
        models = []
        for prec in precisions:
            spec: dict[str, Any] = {"key": prec, "path": path, "precision": prec,
                                    "inputs": list(inputs.values()),
                                    "data_format": ["nchw"] * len(inputs),
                                    "outputs_dir": os.path.join(tmp, "out-" + prec)}
            if prec == "int8":
                lines = []
                for k, sample in enumerate(calibration or [feeds]):
                    sp = save_feeds({n: sample[n] for n in feeds}, os.path.join(tmp, f"calib{k}"))
                    lines.append(" ".join(sp.values()))
                spec["dataset"] = os.path.join(tmp, "dataset.txt")
                Path(spec["dataset"]).write_text("\n".join(lines) + "\n", encoding="utf-8")
            models.append(spec)
        job = {"target_platform": soc, "log_dir": os.path.join(tmp, "logs"), "models": models}
        hello, events, failure = run_worker(exe, Path(__file__).with_name("_rknn_sim_worker.py"), job, tmp, timeout)
        version = hello.get("rknn_version")
        out: dict[str, SimRun] = {}
        names = _rknn.onnx_nodes(path)
        for spec in models:
            prec = spec["precision"]
            ev = events.get(prec)
            if ev is None:
                status = "timeout" if failure.startswith("timeout") else "crashed"
                out[prec] = SimRun("rknn", prec, status, failure or "no result", toolchain_version=version,
                                  package_version=version)
                continue
            res = _rknn._finish(_rknn.ModelJob(path=path, key=prec), ev.get("status", "build_failed"),
                                read_text(ev.get("log")), ev, False)
            run = SimRun("rknn", prec, res.status, res.message, toolchain_version=version, package_version=version,
                         seconds=ev.get("seconds"))
            run.placement = _rknn.onnx_placement(res, names)
            run.reasons = {r.onnx_name: [f"{r.op_type} on CPU"] for r in res.cpu_rows() if r.onnx_name}
            run.inference_status = ev.get("inference_status")
            run.inference_message = ev.get("inference_exception", "")
            if run.ran:
                paths = ev.get("outputs") or []
                if len(paths) != len(output_names):
                    run.inference_status = "output_mismatch"
                    run.inference_message = (f"the simulator returned {len(paths)} output(s), the model has "
                                             f"{len(output_names)}")
                else:
                    run.outputs = load_outputs(paths, output_names)
            out[prec] = run
        return out
