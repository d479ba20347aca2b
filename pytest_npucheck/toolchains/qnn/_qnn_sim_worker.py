"""Worker that runs ONNX models on ONNX Runtime's QNN execution provider (HTP emulation on CPU).

Runs *inside* the onnxruntime-qnn virtual environment (see
:mod:`pytest_npucheck.oracles.simulate`); it imports nothing from this project except its sibling
worker modules.  Like ``_qnn_worker.py`` it records where every node was placed (the public
assignment API, the verbose log and the basic-optimized graph, so the parent can map placement
back with :func:`pytest_npucheck.toolchains.qnn.adapter.map_placement`); in addition it runs the session on
the inputs it is given and saves the outputs:

* ``fp16``: the float model with ``enable_htp_fp16_precision=1``;
* ``int8``: the model QDQ-quantized first with ``onnxruntime.quantization``'s QNN configuration
  (``get_qnn_qdq_config``, uint8 activations and weights), calibrated on the given samples.

Job (JSON file named by the first argument)::

    {"log_dir": "/tmp/x", "provider_options": {"htp_arch": "73", ...},
     "models": [{"key": "fp16", "path": "/tmp/m.onnx", "precision": "fp16" | "int8",
                 "inputs": {"x": "/tmp/x.npy"}, "calibration": [{"x": "/tmp/c0.npy"}, ...],
                 "provider_options": {...}, "outputs_dir": "/tmp/out"}]}

Events as in ``_qnn_worker.py`` (``hello``, ``start``, ``result``, ``done``); a ``result`` also
carries ``inference_status`` and ``outputs`` (``[{"name", "path"}]`` in session output order).
"""

import os
import sys
import time
import traceback

_HERE = os.path.dirname(os.path.abspath(__file__))
_TOOLCHAINS = os.path.dirname(_HERE)
sys.path[:0] = [_HERE, _TOOLCHAINS]  # this worker's siblings; _worker_io.py one level up
from _worker_io import _emit, _open_job, _Redirect  # noqa: E402  (sibling module)
from _qnn_worker import _node_list, _open_session, _setup_qnn  # noqa: E402

sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) not in (_HERE, _TOOLCHAINS)]


def _quantize(np, src, dst, samples):
    """QDQ model for the QNN EP, calibrated on ``samples`` (list of {input name: array})."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

        def rewind(self):
            self.it = iter(samples)

    cfg = get_qnn_qdq_config(src, Reader(), activation_type=QuantType.QUInt8,
                             weight_type=QuantType.QUInt8, keep_removable_activations=True)
    quantize(src, dst, cfg)
    return "get_qnn_qdq_config+quantize(QUInt8/QUInt8), %d calibration sample(s)" % len(samples)


def _simulate(ctx, job, model, log_path):
    onnx, np = ctx["onnx"], ctx["np"]
    result = {"event": "result", "key": model["key"], "log": log_path,
              "precision": model.get("precision", "fp16")}
    t0 = time.time()
    stage = "load"
    base = os.path.splitext(log_path)[0]
    with _Redirect(log_path):
        try:
            path = model["path"]
            result["nodes"] = _node_list(onnx.load(path, load_external_data=False))
            if model.get("precision") == "int8":
                stage = "quantize"
                samples = [{k: np.load(v) for k, v in s.items()} for s in model.get("calibration") or []]
                qpath = base + ".qdq.onnx"
                try:
                    result["quantizer"] = _quantize(np, path, qpath, samples)
                except Exception as exc:
                    result.update(status="quantize_failed", stage=stage,
                                  exception="%s: %s" % (type(exc).__name__, exc),
                                  traceback=traceback.format_exc()[-3000:])
                    return result
                path = qpath
                result["session_nodes"] = _node_list(onnx.load(path))
            stage = "session"
            opts = dict(job.get("provider_options") or {})
            opts.update(model.get("provider_options") or {})
            sess = _open_session(ctx, path, base, opts, None, result)
            if sess is None:
                return result
            stage = "inference"
            try:
                feeds = {k: np.load(v) for k, v in (model.get("inputs") or {}).items()}
                names = [o.name for o in sess.get_outputs()]
                outs = sess.run(names, feeds)
                os.makedirs(model["outputs_dir"], exist_ok=True)
                saved = []
                for i, (name, arr) in enumerate(zip(names, outs)):
                    p = os.path.join(model["outputs_dir"], "output_%d.npy" % i)
                    np.save(p, np.asarray(arr))
                    saved.append({"name": name, "path": p})
                result.update(inference_status="ok", outputs=saved)
            except Exception as exc:
                result["inference_status"] = "error"
                result["inference_exception"] = "%s: %s" % (type(exc).__name__, exc)
            del sess
        except BaseException as exc:
            result.update(status="load_failed" if stage == "load" else "session_failed",
                          stage=stage, exception="%s: %s" % (type(exc).__name__, exc),
                          traceback=traceback.format_exc()[-3000:])
            if isinstance(exc, KeyboardInterrupt):
                raise
        finally:
            result["seconds"] = round(time.time() - t0, 3)
    return result


def main(argv=None):
    job, out, log_dir, startup_log = _open_job(sys.argv[1:] if argv is None else argv)
    err = None
    with _Redirect(startup_log):
        try:
            ctx, _ = _setup_qnn()
            ort = ctx["ort"]
            versions = {"onnxruntime": ort.__version__}
            try:
                from importlib import metadata
                versions["onnxruntime_qnn_dist"] = metadata.version("onnxruntime-qnn")
            except Exception:
                pass
        except BaseException as exc:
            err = "%s: %s" % (type(exc).__name__, exc)
    if err is not None:
        _emit(out, {"event": "fatal", "error": "cannot set up onnxruntime-qnn: " + err,
                    "log": startup_log})
        return 2
    _emit(out, {"event": "hello", "pid": os.getpid(), "versions": versions,
                "python": sys.version.split()[0]})
    for idx, model in enumerate(job.get("models", [])):
        log_path = os.path.join(log_dir, "%s.log" % model.get("key", idx))
        _emit(out, {"event": "start", "key": model["key"], "log": log_path})
        _emit(out, _simulate(ctx, job, model, log_path))
    _emit(out, {"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
