#!/usr/bin/env bash
# Creates a virtual environment with onnxruntime-qnn (ONNX Runtime's QNN execution provider; its
# HTP backend runs in x86 emulation) and prints the path of its python. Point
# NPUCHECK_QNN_PYTHON at it.
# Usage: scripts/setup-qnn-venv.sh VENV_DIR [ONNXRUNTIME_QNN_VERSION]   (default 2.7.0)
#
# onnxruntime-qnn is a plugin EP that needs onnxruntime>=1.24.2 beside it, so it gets its own
# venv (numpy 2, onnx 1.2x). Older plugin builds can be rejected by the newest onnxruntime
# (2.3.0 with onnxruntime 1.32: "OrtEp has invalid ort_version_supported=0 (expected at least
# 22)"); then onnxruntime is pinned back to 1.24.4, with which that plugin loads.
set -euo pipefail
if [ $# -lt 1 ]; then
  echo "usage: $0 VENV_DIR [ONNXRUNTIME_QNN_VERSION]" >&2
  exit 2
fi
venv=$1
version=${2:-2.7.0}
pip_q=(-q --disable-pip-version-check)

check() {
  # create a QNN EP (HTP, fp16) session for a one-node model; prints the backend build
  "$venv/bin/python" - <<'EOF'
import os, sys, tempfile
import numpy as np, onnx, onnxruntime as ort, onnxruntime_qnn as qnn
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu")], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
path = os.path.join(tempfile.mkdtemp(), "relu.onnx")
onnx.save(m, path)
ort.register_execution_provider_library("QNNExecutionProvider", qnn.get_library_path())
dev = [d for d in ort.get_ep_devices() if d.ep_name == "QNNExecutionProvider"]
so = ort.SessionOptions()
so.log_severity_level = 3
so.add_provider_for_devices(dev, {"backend_path": qnn.get_qnn_htp_path(), "htp_arch": "73",
                                  "soc_model": "43", "enable_htp_fp16_precision": "1"})
s = ort.InferenceSession(path, sess_options=so)
s.run(None, {"x": np.ones([1, 4], np.float32)})
print("onnxruntime", ort.__version__, "onnxruntime-qnn", qnn.__version__, file=sys.stderr)
EOF
}

installed() {
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c \
    "import importlib.metadata as m, sys; sys.exit(m.version('onnxruntime-qnn') != '$version')" 2>/dev/null
}

if ! installed; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install "${pip_q[@]}" "onnxruntime-qnn==$version" numpy onnx
fi
if ! check >/dev/null 2>&1; then
  "$venv/bin/pip" install "${pip_q[@]}" "onnxruntime==1.24.4"
  check 1>&2
fi
echo "$(cd "$venv" && pwd)/bin/python"
