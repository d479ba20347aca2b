"""The ACME oracle hook: ``find_python`` and ``simulate`` (pytest_npucheck.toolchains.registry)."""

from __future__ import annotations

import sys

from pytest_npucheck.oracles.simulate import SimRun

#: what the pretend NPU cannot run
CPU_OPS = {"Pad"}


def find_python(python=None):
    return python or sys.executable


def simulate(onnx_path, table, feeds, output_names, precisions, calibration, python, timeout):
    import numpy as np
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(onnx_path))
    placement = {n.name: "cpu" if n.op_type in CPU_OPS else "npu" for n in model.graph.node}
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    outputs = sess.run(list(output_names), {k: np.asarray(v) for k, v in feeds.items()})
    return {p: SimRun("acme", p, "ok", placement=dict(placement), inference_status="ok",
                      outputs=dict(zip(output_names, outputs)), toolchain_version="1.0", package_version="1.0",
                      reasons={n: [f"the {table.soc} NPU has no unit for it"] for n, u in placement.items() if u == "cpu"})
            for p in precisions}
