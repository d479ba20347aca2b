"""Worker that compiles ONNX models with rknn-toolkit2; runs *inside* the rknn virtualenv.

This file is executed as a script by :mod:`pytest_npucheck.toolchains.rknn.adapter` with the python of a
virtual environment that has ``rknn-toolkit2`` installed.  It must only use the standard library
and ``rknn`` (``numpy`` is imported lazily, only when inference is requested), because that
environment pins old versions of everything.

Protocol
--------
The job is a JSON object read from the file named by the first argument, or from stdin when no
argument (or ``-``) is given::

    {"target_platform": "rk3588",
     "log_dir": "/tmp/xyz",                 # where per-model build logs are written
     "config": {...},                        # extra keyword arguments for RKNN.config (optional)
     "models": [{"key": "m0", "path": "/tmp/a.onnx",
                 "config": {...},            # per-model extra RKNN.config kwargs (optional)
                 "load": {...},              # extra RKNN.load_onnx kwargs (optional)
                 "build": {...},             # extra RKNN.build kwargs (optional; default fp16,
                                             #  int8: {"do_quantization": true, "dataset": path})
                 "inference": {"inputs": ["/tmp/x0.npy"], "outputs_dir": "/tmp/o"}  # optional
                }, ...]}

Results are written to the *original* standard output, one JSON object per line, flushed
immediately.  Everything the toolkit prints (its Python logger and the native compiler write to
file descriptors 1 and 2) is redirected into one log file per model.  For each model the worker
first writes ``{"event": "start", "key": ..., "log": path}`` and then, when the model is done,
``{"event": "result", "key": ..., "status": ..., ...}``.  If the worker dies while compiling a
model, the parent sees a ``start`` event without its ``result`` and can read the log file.
"""

import os
import sys
import time
import traceback


_TOOLCHAINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _TOOLCHAINS)  # _worker_io.py lives one level up; also under python -I
from _worker_io import _emit, _open_job, _Redirect  # noqa: E402  (see its docstring)

sys.path.remove(_TOOLCHAINS)  # its rknn/ and qnn/ subpackages would shadow the vendor's packages


def _run_inference(rknn, spec, result):
    import numpy as np  # available in the rknn venv (rknn depends on it)

    inputs = [np.load(p) for p in spec.get("inputs", [])]
    ret = rknn.init_runtime()
    if ret != 0:
        result["inference_status"] = "init_runtime_failed"
        return
    outs = rknn.inference(inputs=inputs, data_format=spec.get("data_format"))
    if outs is None:
        result["inference_status"] = "inference_failed"
        return
    out_dir = spec.get("outputs_dir")
    paths = []
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
        for i, arr in enumerate(outs):
            p = os.path.join(out_dir, "output_%d.npy" % i)
            np.save(p, np.asarray(arr))
            paths.append(p)
    result["inference_status"] = "ok"
    result["outputs"] = paths


def _compile_one(RKNN, job, model, log_path):
    """Load and build one model; returns the result dict (without the log text)."""
    result = {"event": "result", "key": model["key"], "log": log_path}
    t0 = time.time()
    stage = "init"
    rknn = None
    with _Redirect(log_path):
        try:
            rknn = RKNN(verbose=True)
            stage = "config"
            cfg = dict(job.get("config") or {})
            cfg.update(model.get("config") or {})
            cfg["target_platform"] = job["target_platform"]
            ret = rknn.config(**cfg)
            if ret not in (0, None):
                result.update(status="load_failed", stage=stage, ret=ret)
                return result
            stage = "load"
            ret = rknn.load_onnx(model=model["path"], **(model.get("load") or {}))
            if ret != 0:
                result.update(status="load_failed", stage=stage, ret=ret)
                return result
            stage = "build"
            build = {"do_quantization": False}
            build.update(model.get("build") or {})  # int8: do_quantization=True, dataset=...
            ret = rknn.build(**build)
            if ret != 0:
                result.update(status="build_failed", stage=stage, ret=ret)
                return result
            result.update(status="ok", stage="build", ret=0)
            if model.get("inference"):
                stage = "inference"
                try:
                    _run_inference(rknn, model["inference"], result)
                except Exception as exc:  # inference problems do not change the build verdict
                    result["inference_status"] = "error"
                    result["inference_exception"] = "%s: %s" % (type(exc).__name__, exc)
        except BaseException as exc:  # the toolkit raises plain Exceptions and SystemExit
            status = "load_failed" if stage in ("init", "config", "load") else "build_failed"
            if stage == "inference":
                status = "ok"
            result.update(status=status, stage=stage,
                          exception="%s: %s" % (type(exc).__name__, exc),
                          traceback=traceback.format_exc()[-4000:])
            if isinstance(exc, KeyboardInterrupt):
                raise
        finally:
            if rknn is not None:
                try:
                    rknn.release()
                except Exception:
                    pass
            result["seconds"] = round(time.time() - t0, 3)
    return result


def _hello(out, startup_log):
    """Import rknn-toolkit2 and say ``hello`` (with its version); the ``RKNN`` class, or None
    after a ``fatal`` event when it does not import (its output is in ``startup_log``)."""
    with _Redirect(startup_log):
        try:
            from rknn.api import RKNN
            version = None
            try:
                from importlib import metadata
                version = metadata.version("rknn-toolkit2")
            except Exception:
                pass
            err = None
        except BaseException as exc:
            RKNN = None
            err = "%s: %s" % (type(exc).__name__, exc)
    if RKNN is None:
        _emit(out, {"event": "fatal", "error": "cannot import rknn: " + str(err), "log": startup_log})
        return None
    _emit(out, {"event": "hello", "pid": os.getpid(), "rknn_version": version,
                "python": sys.version.split()[0]})
    return RKNN


def _drop_own_dir_from_path():
    """This file lives next to ``rknn.py`` (the adapter); keep it from shadowing ``rknn``."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]


def main(argv=None):
    """Entry point: read the job, compile every model, stream one JSON line per event."""
    _drop_own_dir_from_path()
    # a private handle on the real stdout for results; everything else goes to logs
    job, out, log_dir, startup_log = _open_job(sys.argv[1:] if argv is None else argv)
    RKNN = _hello(out, startup_log)
    if RKNN is None:
        return 2

    for idx, model in enumerate(job.get("models", [])):
        log_path = os.path.join(log_dir, "%05d.log" % (int(model.get("index", idx))))
        _emit(out, {"event": "start", "key": model["key"], "log": log_path})
        debug = model.get("debug") or {}
        if debug.get("crash"):  # test hook: simulate a native crash of the compiler
            os._exit(int(debug.get("crash")))
        if debug.get("crash_once") and not os.path.exists(debug["crash_once"]):
            # test hook: a crash that does not happen again (leaves a marker file behind)
            open(debug["crash_once"], "w").close()
            os._exit(6)
        if debug.get("hang"):  # test hook: simulate a compiler that never returns
            time.sleep(float(debug.get("hang")))
        result = _compile_one(RKNN, job, model, log_path)
        _emit(out, result)
    _emit(out, {"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
