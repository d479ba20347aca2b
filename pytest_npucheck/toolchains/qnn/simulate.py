"""The QNN oracle hook: run a model on ONNX Runtime's QNN execution provider (HTP emulation on CPU).

``_qnn_sim_worker.py`` runs in the onnxruntime-qnn venv and creates a QNN EP session (HTP
backend, ``enable_htp_fp16_precision=1`` for fp16; a QDQ model from ``get_qnn_qdq_config``
calibrated on the samples for int8) and runs it; placement from the assignment API
(:func:`.adapter.map_placement`). Registered as the ``oracle`` hook of the ``qnn`` toolchain
(:mod:`pytest_npucheck.toolchains.registry`). Standard library only at import.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

from ...oracles.simulate import SimRun, ToolchainUnavailable, load_outputs, read_text, run_worker, save_feeds
from . import adapter as _qnn

__all__ = ["find_python", "htp_arch_of", "simulate", "simulate_qnn"]


def find_python(python: str | None = None) -> str | None:
    """The python of the onnxruntime-qnn venv (``--python``, ``$NPUCHECK_QNN_PYTHON``, ``.venv-qnn``)."""
    return _qnn.find_qnn_python(python)


def simulate(onnx_path: Any, table: Any, feeds: Mapping[str, Any], output_names: Sequence[str],
             precisions: Sequence[str], calibration: Sequence[Mapping[str, Any]] | None, python: str | None,
             timeout: float) -> dict[str, SimRun]:
    """The oracle hook: :func:`simulate_qnn` for the HTP architecture of the table's SoC."""
    return simulate_qnn(onnx_path, htp_arch_of(table.soc), feeds, precisions, calibration, python, timeout)


def htp_arch_of(soc: str) -> int:
    """``htp-v73`` -> 73."""
    digits = "".join(ch for ch in soc.rsplit("v", 1)[-1] if ch.isdigit())
    if not digits:
        raise ValueError(f"cannot read an HTP architecture from SoC {soc!r} (expected e.g. htp-v73)")
    return int(digits)


def simulate_qnn(model: str | os.PathLike[str], htp_arch: int, feeds: Mapping[str, Any],
                 precisions: Sequence[str] = ("fp16",),
                 calibration: Sequence[Mapping[str, Any]] | None = None,
                 python: str | None = None, timeout: float = 600.0,
                 soc_model: int | None = None) -> dict[str, SimRun]:
    """Create a QNN EP (HTP) session for ``model`` at each precision and run it on ``feeds``.

    Returns ``{precision: SimRun}`` (outputs by the model's output names). Raises
    :class:`ToolchainUnavailable`.
    """
    exe = _qnn.find_qnn_python(python)
    if exe is None:
        raise ToolchainUnavailable(f"onnxruntime-qnn is not installed (set {_qnn.ENV_VAR} to the python "
                                   "of a venv with onnxruntime-qnn)")
    path = os.path.abspath(os.fspath(model))
    with tempfile.TemporaryDirectory(prefix="npucheck-qnn-sim-") as tmp:
        inputs = save_feeds(feeds, os.path.join(tmp, "inputs"))
        models = []
        for prec in precisions:
            spec: dict[str, Any] = {"key": prec, "path": path, "precision": prec, "inputs": inputs,
                                    "provider_options": _qnn.provider_options(htp_arch, soc_model, prec),
                                    "outputs_dir": os.path.join(tmp, "out-" + prec)}
            if prec == "int8":
                spec["calibration"] = [save_feeds({n: s[n] for n in feeds}, os.path.join(tmp, f"calib{k}"))
                                       for k, s in enumerate(calibration or [feeds])]
            models.append(spec)
        job = {"log_dir": os.path.join(tmp, "logs"), "models": models}
        hello, events, failure = run_worker(exe, Path(__file__).with_name("_qnn_sim_worker.py"), job, tmp, timeout)
        versions = hello.get("versions") or {}
        out: dict[str, SimRun] = {}
        for spec in models:
            prec = spec["precision"]
            ev = events.get(prec)
            if ev is None:
                status = "timeout" if failure.startswith("timeout") else "crashed"
                out[prec] = SimRun("qnn", prec, status, failure or "no result")
                continue
            settings = {"precision": prec, "provider_options": spec["provider_options"]}
            res = _qnn._finish(_qnn.ModelJob(path=path, key=prec), ev.get("status", "session_failed"),
                               read_text(ev.get("log")), ev, settings)
            run = SimRun("qnn", prec, res.status, res.message, toolchain_version=res.backend_version,
                         package_version=versions.get("onnxruntime_qnn_dist"),
                         seconds=ev.get("seconds"),
                         details={"onnxruntime_qnn": versions.get("onnxruntime_qnn_dist"),
                                  "onnxruntime": versions.get("onnxruntime"),
                                  "quantizer": ev.get("quantizer"),
                                  "provider_options": spec["provider_options"]})
            run.placement = _qnn.onnx_placement(res) if res.ok else {}
            run.reasons = dict(res.reasons)
            run.inference_status = ev.get("inference_status")
            run.inference_message = ev.get("inference_exception", "")
            if run.ran:
                run.outputs = load_outputs([o["path"] for o in ev["outputs"]],
                                            [o["name"] for o in ev["outputs"]])
            out[prec] = run
        return out
