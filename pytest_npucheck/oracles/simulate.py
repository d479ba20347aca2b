"""Build a model with a real toolchain *and run it*: what every toolchain's oracle hook shares.

The placement adapters (``toolchains/<name>/adapter.py``) answer "where does each node run"; a
toolchain's simulate module answers that and "what numbers come out", for one model at one or
more precisions, on the inputs the caller gives, as :class:`SimRun` records. This module holds
that record, the worker protocol (one job file in, JSON event lines out) and the input/output
files; the built-in toolchains:

* RKNN (:mod:`pytest_npucheck.toolchains.rknn.simulate`): ``_rknn_sim_worker.py`` in the rknn-toolkit2 venv builds fp16 (``do_quantization=False``)
  or int8 (``do_quantization=True`` with a dataset file of the calibration samples), then
  ``init_runtime()`` with no target runs the x86 simulator. Placement comes from the verbose
  build log's layer table (``rknn.adapter.onnx_placement``).
* QNN (:mod:`pytest_npucheck.toolchains.qnn.simulate`): ``_qnn_sim_worker.py`` in the onnxruntime-qnn venv creates a QNN EP session (HTP backend,
  ``enable_htp_fp16_precision=1`` for fp16; a QDQ model from ``get_qnn_qdq_config`` calibrated on
  the samples for int8) and runs it; placement from the assignment API
  (``qnn.adapter.map_placement``).

One worker process per call, killed after ``timeout`` seconds. Only the standard library is
imported at module level; numpy is imported when inputs are written or outputs read.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..toolchains.batch import event, read_text, tail


__all__ = ["PRECISIONS", "SimRun", "ToolchainUnavailable", "load_outputs", "read_text", "run_worker", "save_feeds"]

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
    package_version: str | None = None
    """The version of the toolchain's package (rknn-toolkit2, onnxruntime-qnn) that ran."""
    seconds: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def built(self) -> bool:
        return self.status == "ok"

    @property
    def ran(self) -> bool:
        return self.inference_status == "ok"


def run_worker(python: str, worker: Path, job: dict[str, Any], tmp: str, timeout: float
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
        ev = event(line)
        if ev is None:
            continue
        if ev.get("event") == "hello":
            hello = ev
        elif ev.get("event") == "fatal":
            raise ToolchainUnavailable(str(ev.get("error")) + "\n" + tail(read_text(ev.get("log")), 15))
        elif ev.get("event") == "result":
            results[ev["key"]] = ev
    if not hello and not failure:
        raise ToolchainUnavailable(f"worker exited with code {code} before starting: "
                                   + stderr.decode("utf-8", "replace")[-1500:])
    if not failure and code not in (0, None):
        failure = f"crashed: the worker exited with code {code}"
    return hello, results, failure


def save_feeds(feeds: Mapping[str, Any], where: str) -> dict[str, str]:
    import numpy as np

    os.makedirs(where, exist_ok=True)
    paths = {}
    for k, (name, arr) in enumerate(feeds.items()):
        p = os.path.join(where, f"in{k}.npy")
        np.save(p, np.ascontiguousarray(np.asarray(arr)))
        paths[name] = p
    return paths


def load_outputs(paths: Sequence[str], names: Sequence[str]) -> dict[str, Any]:
    import numpy as np

    return {n: np.load(p) for n, p in zip(names, paths)}
