"""Worker that places ONNX models with ONNX Runtime's QNN execution provider (HTP backend).

This file is executed as a script by :mod:`pytest_npucheck.toolchains.qnn.adapter` with the python of a
virtual environment that has ``onnxruntime-qnn`` (and ``onnx``, ``numpy``) installed.  It must not
import anything from this project: that environment is not the project's.

Protocol
--------
The job is a JSON object read from the file named by the first argument (or stdin)::

    {"log_dir": "/tmp/xyz",
     "provider_options": {"htp_arch": "73", "soc_model": "43", ...},   # QNN EP options
     "precision": "fp16" | "int8",     # int8: the model is quantized to QDQ here first
     "run": false,                      # also run the session once on random inputs
     "calibration": {"samples": 4, "seed": 0},
     "models": [{"key": "m0", "path": "/tmp/a.onnx", "index": 0, "debug": {...}}, ...]}

Results go to the *original* standard output, one JSON object per line, flushed immediately.
Everything ONNX Runtime and the QNN backend print (file descriptors 1 and 2; the session's
verbose log goes to stderr) is redirected into one log file per model.  For every model the
worker writes ``{"event": "start", "key", "log"}`` and, when done, ``{"event": "result", ...}``
with:

* ``status``: ``ok``, ``session_failed`` (InferenceSession creation raised),
  ``quantize_failed`` (int8 only) or ``load_failed``;
* ``assignment``: ``[{"ep": "QNNExecutionProvider", "nodes": [{"name", "op_type", "domain"}]}]``
  from the public API ``InferenceSession.get_provider_graph_assignment_info()`` (recorded with
  the session config ``session.record_ep_graph_assignment_info=1``);
* ``nodes``: the nodes of the model as given, ``session_nodes``: the nodes of the model handed
  to ONNX Runtime (the QDQ model for int8), ``l1``: the nodes/initializers of that model after
  ONNX Runtime's basic (level 1) graph optimizations, taken from a CPU-only session with
  ``optimized_model_filepath`` - the graph the execution providers are asked to claim.
"""

import json
import os
import sys
import time
import traceback


_TOOLCHAINS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, _TOOLCHAINS)  # _worker_io.py lives one level up; also under python -I
from _worker_io import _emit, _open_job, _Redirect  # noqa: E402  (see its docstring)

sys.path.remove(_TOOLCHAINS)  # its rknn/ and qnn/ subpackages would shadow the vendor's packages


def _node_list(model):
    return [{"name": n.name, "op_type": n.op_type, "domain": n.domain or "",
             "inputs": list(n.input), "outputs": list(n.output)} for n in model.graph.node]


def _graph_summary(model):
    g = model.graph
    inits = set(i.name for i in g.initializer)
    return {"nodes": _node_list(model), "initializers": sorted(inits),
            "inputs": [i.name for i in g.input if i.name not in inits],
            "outputs": [o.name for o in g.output]}


# --------------------------------------------------------------------------------------------
# random inputs and calibration
# --------------------------------------------------------------------------------------------

_NP_TYPES = {
    "tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
    "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int16)": "int16",
    "tensor(int8)": "int8", "tensor(uint8)": "uint8", "tensor(uint16)": "uint16",
    "tensor(bool)": "bool",
}


def _random_feed(np, rng, inputs):
    """Random values for the session inputs: floats in [-1, 1], small non-negative integers
    (valid indices for the probe models), random booleans.  Symbolic dims become 1."""
    feed = {}
    for i in inputs:
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in (i.shape or [])]
        dt = _NP_TYPES.get(i.type, "float32")
        if dt == "bool":
            arr = rng.random(shape) > 0.5
        elif dt.startswith(("int", "uint")):
            arr = rng.integers(0, 2, size=shape).astype(dt)
        else:
            arr = (rng.random(shape) * 2 - 1).astype(dt)
        feed[i.name] = np.asarray(arr)
    return feed


def _quantize(ort, np, src, dst, calib):
    """QDQ-quantize ``src`` to ``dst`` (uint8 activations and weights, QNN's configuration)."""
    from onnxruntime.quantization import CalibrationDataReader, QuantType

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(src, so, providers=["CPUExecutionProvider"])
    inputs = sess.get_inputs()
    rng = np.random.default_rng(int(calib.get("seed", 0)))
    samples = [_random_feed(np, rng, inputs) for _ in range(int(calib.get("samples", 4)))]
    del sess

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.it = iter(samples)

        def get_next(self):
            return next(self.it, None)

        def rewind(self):
            self.it = iter(samples)

    try:
        from onnxruntime.quantization import quantize
        from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

        cfg = get_qnn_qdq_config(src, Reader(), activation_type=QuantType.QUInt8,
                                 weight_type=QuantType.QUInt8, keep_removable_activations=True)
        quantize(src, dst, cfg)
        return "get_qnn_qdq_config+quantize(QUInt8/QUInt8, keep_removable_activations)"
    except ImportError:
        from onnxruntime.quantization import QuantFormat, quantize_static

        quantize_static(src, dst, Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QUInt8)
        return "quantize_static(QDQ, QUInt8/QUInt8)"


# --------------------------------------------------------------------------------------------
# one model
# --------------------------------------------------------------------------------------------


def _level1_graph(ort, onnx, path, tmp_path):
    """The model after ONNX Runtime's basic optimizations (CPU EP only)."""
    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    so.optimized_model_filepath = tmp_path
    ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    m = onnx.load(tmp_path)
    try:
        os.remove(tmp_path)
    except OSError:
        pass
    return _graph_summary(m)


def _open_session(ctx, path, base, provider_options, session_config, result):
    """A QNN EP session on ``path``, with what the parent maps placement from put in ``result``.

    ``result`` gets the basic-optimized graph (``l1``, or ``l1_error``), then either ``status``
    ``ok`` with ``providers`` and the ``assignment`` (or ``assignment_error``) and the session is
    returned, or ``status`` ``session_failed`` with the exception and None is returned.
    """
    ort, onnx = ctx["ort"], ctx["onnx"]
    try:
        result["l1"] = _level1_graph(ort, onnx, path, base + ".l1.onnx")
    except Exception as exc:  # mapping falls back to names
        result["l1_error"] = "%s: %s" % (type(exc).__name__, exc)
    so = ort.SessionOptions()
    so.log_severity_level = 0
    so.log_verbosity_level = 0
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    for k, v in (session_config or {}).items():
        so.add_session_config_entry(str(k), str(v))
    opts = {"backend_path": ctx["htp"]}
    opts.update({k: str(v) for k, v in (provider_options or {}).items()})
    so.add_provider_for_devices(ctx["devices"], opts)
    sys.stderr.write("npucheck-qnn-worker: creating session for %s with %s\n"
                     % (path, json.dumps(opts)))
    sys.stderr.flush()
    try:
        sess = ort.InferenceSession(path, sess_options=so)
    except Exception as exc:
        result.update(status="session_failed", stage="session",
                      exception="%s: %s" % (type(exc).__name__, exc))
        return None
    result.update(status="ok", stage="session", providers=list(sess.get_providers()))
    try:
        result["assignment"] = [
            {"ep": sg.ep_name,
             "nodes": [{"name": n.name, "op_type": n.op_type, "domain": n.domain or ""}
                       for n in sg.get_nodes()]}
            for sg in sess.get_provider_graph_assignment_info()]
    except Exception as exc:
        result["assignment_error"] = "%s: %s" % (type(exc).__name__, exc)
    return sess


def _place_one(ctx, job, model, log_path):
    ort, onnx, np = ctx["ort"], ctx["onnx"], ctx["np"]
    result = {"event": "result", "key": model["key"], "log": log_path}
    t0 = time.time()
    stage = "load"
    base = os.path.splitext(log_path)[0]
    with _Redirect(log_path):
        try:
            src = onnx.load(model["path"])
            result["nodes"] = _node_list(src)
            path = model["path"]
            if job.get("precision") == "int8":
                stage = "quantize"
                qpath = base + ".qdq.onnx"
                try:
                    result["quantizer"] = _quantize(ort, np, path, qpath,
                                                    job.get("calibration") or {})
                except Exception as exc:
                    result.update(status="quantize_failed", stage=stage,
                                  exception="%s: %s" % (type(exc).__name__, exc),
                                  traceback=traceback.format_exc()[-3000:])
                    return result
                path = qpath
                result["session_nodes"] = _node_list(onnx.load(path))
            stage = "session"
            sess = _open_session(ctx, path, base, job.get("provider_options"),
                                 job.get("session_config"), result)
            if sess is None:
                return result
            if job.get("run"):
                stage = "run"
                try:
                    rng = np.random.default_rng(0)
                    outs = sess.run(None, _random_feed(np, rng, sess.get_inputs()))
                    result["run_status"] = "ok"
                    result["run_outputs"] = [list(np.shape(o)) for o in outs]
                except Exception as exc:
                    result["run_status"] = "error"
                    result["run_exception"] = "%s: %s" % (type(exc).__name__, exc)
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


def _drop_own_dir_from_path():
    """This file lives next to the adapters; keep the directory off ``sys.path``."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]


def _setup_qnn():
    """Import onnxruntime-qnn and register its execution provider.

    Returns ``(ctx, qnn_module)``; ``ctx`` holds the modules, EP devices and HTP path the
    workers pass around. Raises when the provider has no device.
    """
    import numpy as np
    import onnx
    import onnxruntime as ort
    import onnxruntime_qnn as qnn

    ep_name = "QNNExecutionProvider"
    ort.register_execution_provider_library(ep_name, qnn.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep_name]
    if not devices:
        raise RuntimeError("no QNNExecutionProvider device after registering %s"
                           % qnn.get_library_path())
    ctx = {"ort": ort, "onnx": onnx, "np": np, "devices": devices,
           "htp": qnn.get_qnn_htp_path()}
    return ctx, qnn


def main(argv=None):
    """Entry point: read the job, place every model, stream one JSON line per event."""
    _drop_own_dir_from_path()
    job, out, log_dir, startup_log = _open_job(sys.argv[1:] if argv is None else argv)
    ctx = {}
    err = None
    with _Redirect(startup_log):
        try:
            ctx, qnn = _setup_qnn()
            ort, onnx, np = ctx["ort"], ctx["onnx"], ctx["np"]
            versions = {"onnxruntime": ort.__version__,
                        "onnxruntime_qnn": getattr(qnn, "__version__", None),
                        "onnx": onnx.__version__, "numpy": np.__version__}
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
                "python": sys.version.split()[0], "htp_path": ctx["htp"]})

    for idx, model in enumerate(job.get("models", [])):
        log_path = os.path.join(log_dir, "%05d.log" % (int(model.get("index", idx))))
        _emit(out, {"event": "start", "key": model["key"], "log": log_path})
        debug = model.get("debug") or {}
        if debug.get("crash"):  # test hook: simulate a native crash
            os._exit(int(debug.get("crash")))
        if debug.get("hang"):  # test hook: simulate a backend that never returns
            time.sleep(float(debug.get("hang")))
        _emit(out, _place_one(ctx, job, model, log_path))
    _emit(out, {"event": "done"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
