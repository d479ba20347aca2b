#!/usr/bin/env bash
# Creates the separate virtual environment rknn-toolkit2 needs (its pins conflict with a modern
# stack: numpy<=1.26.4, onnx<=1.18, protobuf<=4.25.4) and prints the path of its python.
# Usage: scripts/setup-rknn-venv.sh [VENV_DIR] [RKNN_VERSION]
set -euo pipefail
venv=${1:-.venv-rknn}
version=${2:-2.5.0}
# onnx/onnxruntime as each release's metadata pins them (2.2.0: onnx==1.14.1,
# onnxruntime==1.16.0; 2.3.x: onnx>=1.16.1; 2.5.0 is known to work with onnx 1.18.0)
case "$version" in
  2.2.*) onnx_pins=("onnx==1.14.1" "onnxruntime==1.16.0") ;;
  *) onnx_pins=("onnx==1.18.0" "onnxruntime==1.20.1") ;;
esac
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import rknn.api" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check \
      "numpy==1.26.4" "protobuf==4.25.4" "${onnx_pins[@]}" psutil ruamel.yaml scipy \
      tqdm opencv-python-headless fast-histogram torch==2.13.0
  # rknn's pkg_resources needs an old setuptools; torch's own pin on setuptools is irrelevant here
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps "setuptools<70" "rknn-toolkit2==$version"
fi
"$venv/bin/python" -c "import rknn.api" >/dev/null
echo "$(cd "$venv" && pwd)/bin/python"
