"""Worker that builds ONNX models with rknn-toolkit2 and runs them on its x86 simulator.

Runs *inside* the rknn virtual environment (see :mod:`pytest_npucheck.oracles.simulate`); it may
only use the standard library, ``numpy`` and ``rknn``.  Unlike ``_rknn_worker.py`` (placement
probing, fp16 builds only), every model here is built at the precision asked for and then run:

* ``fp16``: ``build(do_quantization=False)``;
* ``int8``: ``build(do_quantization=True, dataset=<file>)``, the dataset file listing the
  calibration samples (``.npy`` files, one line per sample, inputs separated by spaces, as
  rknn-toolkit2 reads it);

then ``init_runtime()`` with no target (the simulator) and ``inference()`` on the given inputs.

Protocol: the job (JSON file named by the first argument)::

    {"target_platform": "rk3588", "log_dir": "/tmp/x",
     "models": [{"key": "fp16", "path": "/tmp/m.onnx", "precision": "fp16" | "int8",
                 "dataset": "/tmp/dataset.txt",           # int8 only
                 "inputs": ["/tmp/in0.npy", ...], "data_format": ["nchw", ...],
                 "outputs_dir": "/tmp/out-fp16"}]}

Events, one JSON line each on the original standard output: ``hello`` (with ``rknn_version``),
per model ``start`` then ``result`` (``status`` ``ok``/``load_failed``/``build_failed``,
``inference_status``, ``outputs``: saved ``.npy`` paths in output order), then ``done``.
Everything the toolkit prints goes to one log file per model (the layer table is parsed from it).
"""

import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLCHAINS = os.path.dirname(_HERE)
sys.path[:0] = [_HERE, _TOOLCHAINS]  # this worker's siblings; _worker_io.py one level up
from _worker_io import _emit, _open_job, _Redirect  # noqa: E402  (sibling module)
from _rknn_worker import _hello, _run_inference  # noqa: E402

# the toolchains directory holds rknn/ (this plug-in): keep it from shadowing the rknn package
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in (_HERE, _TOOLCHAINS)]


def _simulate(RKNN, job, model, log_path):
    result = {"event": "result", "key": model["key"], "log": log_path,
              "precision": model.get("precision", "fp16")}
    t0 = time.time()
    stage = "init"
    rknn = None
    with _Redirect(log_path):
        try:
            rknn = RKNN(verbose=True)
            stage = "config"
            cfg = dict(model.get("config") or {})
            cfg["target_platform"] = job["target_platform"]
            rknn.config(**cfg)
            stage = "load"
            if rknn.load_onnx(model=model["path"]) != 0:
                result.update(status="load_failed", stage=stage)
                return result
            stage = "build"
            if model.get("precision") == "int8":
                ret = rknn.build(do_quantization=True, dataset=model["dataset"])
            else:
                ret = rknn.build(do_quantization=False)
            if ret != 0:
                result.update(status="build_failed", stage=stage, ret=ret)
                return result
            result.update(status="ok", stage="build")
            stage = "inference"
            _run_inference(rknn, {"inputs": model.get("inputs", []), "outputs_dir": model["outputs_dir"],
                                  "data_format": model.get("data_format") or None}, result)
        except BaseException as exc:  # the toolkit raises plain Exceptions and SystemExit
            if stage == "inference":
                result["inference_status"] = "error"
                result["inference_exception"] = "%s: %s" % (type(exc).__name__, exc)
            else:
                result.update(status="load_failed" if stage in ("init", "config", "load") else "build_failed",
                              stage=stage, exception="%s: %s" % (type(exc).__name__, exc),
                              traceback=traceback.format_exc()[-3000:])
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


def main(argv=None):
    job, out, log_dir, startup_log = _open_job(sys.argv[1:] if argv is None else argv)
    RKNN = _hello(out, startup_log)
    if RKNN is None:
        return 2
    for idx, model in enumerate(job.get("models", [])):
        log_path = os.path.join(log_dir, "%s.log" % model.get("key", idx))
        _emit(out, {"event": "start", "key": model["key"], "log": log_path})
        _emit(out, _simulate(RKNN, job, model, log_path))
    _emit(out, {"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
