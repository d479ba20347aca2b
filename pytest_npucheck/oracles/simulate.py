"""Build a model with a real toolchain *and run it*: the RKNN simulator and the QNN HTP emulator.

The placement adapters (:mod:`.rknn`, :mod:`.qnn`) answer "where does each node run"; this module
answers that and "what numbers come out", for one model at one or more precisions, on the inputs
the caller gives:

* RKNN: ``_rknn_sim_worker.py`` in the rknn-toolkit2 venv builds fp16 (``do_quantization=False``)
  or int8 (``do_quantization=True`` with a dataset file of the calibration samples), then
  ``init_runtime()`` with no target runs the x86 simulator. Placement comes from the verbose
  build log's layer table (:func:`.rknn.onnx_placement`).
* QNN: ``_qnn_sim_worker.py`` in the onnxruntime-qnn venv creates a QNN EP session (HTP backend,
  ``enable_htp_fp16_precision=1`` for fp16; a QDQ model from ``get_qnn_qdq_config`` calibrated on
  the samples for int8) and runs it; placement from the assignment API
  (:func:`.qnn.map_placement`).

One worker process per call, killed after ``timeout`` seconds. Only the standard library is
imported at module level; numpy is imported when inputs are written or outputs read.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..toolchains.qnn import adapter as _qnn
from ..toolchains.rknn import adapter as _rknn

__all__ = ["SimRun", "ToolchainUnavailable", "simulate_rknn", "simulate_qnn", "PRECISIONS"]

PRECISIONS = ("fp16", "int8")


class ToolchainUnavailable(RuntimeError):
    """The toolchain's python is not installed, or its worker could not start."""


@dataclass
class SimRun:
    """One build + run of one model at one precision with a real toolchain."""

    toolchain: str
    precision: str
    status: str
    """``ok`` (built), ``build_failed``, ``load_failed``, ``session_failed``, ``quantize_failed``,
    ``crashed`` or ``timeout``."""
    message: str = ""
    placement: dict[str, str] = field(default_factory=dict)
    """ONNX node name -> ``npu``/``cpu``/``unsupported`` (QNN also ``folded``/``removed``)."""
    reasons: dict[str, list[str]] = field(default_factory=dict)
    inference_status: str | None = None
    """``ok`` when outputs were produced; else why not (``error``, ``init_runtime_failed``...)."""
    inference_message: str = ""
    outputs: dict[str, Any] = field(default_factory=dict, repr=False)
    """Output name -> numpy array (not serialised)."""
    toolchain_version: str | None = None
    seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def built(self) -> bool:
        return self.status == "ok"

    @property
    def ran(self) -> bool:
        return self.inference_status == "ok"


def _run_worker(python: str, worker: Path, job: dict[str, Any], tmp: str, timeout: float
                ) -> tuple[dict[str, Any], dict[str, dict[str, Any]], str]:
    """Run one worker on ``job``; returns (hello event, {key: result event}, failure message)."""
    job_file = os.path.join(tmp, "job.json")
    with open(job_file, "w", encoding="utf-8") as fh:
        json.dump(job, fh)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)  # keep the host stack out of the toolchain's venv
    env.setdefault("OMP_NUM_THREADS", "1")
    failure = ""
    try:
        proc = subprocess.run([python, str(worker), job_file], stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, cwd=tmp, env=env)
        stdout, stderr, code = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout, stderr, code = exc.stdout or b"", exc.stderr or b"", None
        failure = f"timeout: the toolchain did not finish within {timeout:.0f} s"
    except OSError as exc:
        raise ToolchainUnavailable(f"cannot run {python}: {exc}") from None
    hello: dict[str, Any] = {}
    results: dict[str, dict[str, Any]] = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "hello":
            hello = ev
        elif ev.get("event") == "fatal":
            raise ToolchainUnavailable(str(ev.get("error")) + "\n" + _tail(ev.get("log")))
        elif ev.get("event") == "result":
            results[ev["key"]] = ev
    if not hello and not failure:
        raise ToolchainUnavailable(f"worker exited with code {code} before starting: "
                                   + stderr.decode("utf-8", "replace")[-1500:])
    if not failure and code not in (0, None):
        failure = f"crashed: the worker exited with code {code}"
    return hello, results, failure


def _tail(path: Any, n: int = 15) -> str:
    try:
        with open(str(path), encoding="utf-8", errors="replace") as fh:
            return "\n".join(_rknn.strip_ansi(fh.read()).strip().splitlines()[-n:])
    except OSError:
        return ""


def _save_feeds(feeds: Mapping[str, Any], where: str) -> dict[str, str]:
    import numpy as np

    os.makedirs(where, exist_ok=True)
    paths = {}
    for k, (name, arr) in enumerate(feeds.items()):
        p = os.path.join(where, f"in{k}.npy")
        np.save(p, np.ascontiguousarray(np.asarray(arr)))
        paths[name] = p
    return paths


def _load_outputs(paths: Sequence[str], names: Sequence[str]) -> dict[str, Any]:
    import numpy as np

    return {n: np.load(p) for n, p in zip(names, paths)}


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
        inputs = _save_feeds(feeds, os.path.join(tmp, "inputs"))
        models = []
        for prec in precisions:
            spec: dict[str, Any] = {"key": prec, "path": path, "precision": prec,
                                    "inputs": list(inputs.values()),
                                    "data_format": ["nchw"] * len(inputs),
                                    "outputs_dir": os.path.join(tmp, "out-" + prec)}
            if prec == "int8":
                lines = []
                for k, sample in enumerate(calibration or [feeds]):
                    sp = _save_feeds({n: sample[n] for n in feeds}, os.path.join(tmp, f"calib{k}"))
                    lines.append(" ".join(sp.values()))
                spec["dataset"] = os.path.join(tmp, "dataset.txt")
                Path(spec["dataset"]).write_text("\n".join(lines) + "\n", encoding="utf-8")
            models.append(spec)
        job = {"target_platform": soc, "log_dir": os.path.join(tmp, "logs"), "models": models}
        hello, events, failure = _run_worker(exe, Path(_rknn.__file__).with_name("_rknn_sim_worker.py"), job, tmp, timeout)
        version = hello.get("rknn_version")
        out: dict[str, SimRun] = {}
        names = _rknn.onnx_nodes(path)
        for spec in models:
            prec = spec["precision"]
            ev = events.get(prec)
            if ev is None:
                status = "timeout" if failure.startswith("timeout") else "crashed"
                out[prec] = SimRun("rknn", prec, status, failure or "no result", toolchain_version=version)
                continue
            res = _rknn._finish(_rknn.ModelJob(path=path, key=prec), ev.get("status", "build_failed"),
                                _read(ev.get("log")), ev, False)
            run = SimRun("rknn", prec, res.status, res.message, toolchain_version=version,
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
                    run.outputs = _load_outputs(paths, output_names)
            out[prec] = run
        return out


def _read(path: Any) -> str:
    if not path:
        return ""
    try:
        with open(str(path), encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


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
        inputs = _save_feeds(feeds, os.path.join(tmp, "inputs"))
        models = []
        for prec in precisions:
            spec: dict[str, Any] = {"key": prec, "path": path, "precision": prec, "inputs": inputs,
                                    "provider_options": _qnn.provider_options(htp_arch, soc_model, prec),
                                    "outputs_dir": os.path.join(tmp, "out-" + prec)}
            if prec == "int8":
                spec["calibration"] = [_save_feeds({n: s[n] for n in feeds}, os.path.join(tmp, f"calib{k}"))
                                       for k, s in enumerate(calibration or [feeds])]
            models.append(spec)
        job = {"log_dir": os.path.join(tmp, "logs"), "models": models}
        hello, events, failure = _run_worker(exe, Path(_qnn.__file__).with_name("_qnn_sim_worker.py"), job, tmp, timeout)
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
                               _read(ev.get("log")), ev, settings)
            run = SimRun("qnn", prec, res.status, res.message, toolchain_version=res.backend_version,
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
                run.outputs = _load_outputs([o["path"] for o in ev["outputs"]],
                                            [o["name"] for o in ev["outputs"]])
            out[prec] = run
        return out
