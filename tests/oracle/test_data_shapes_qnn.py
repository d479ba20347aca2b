"""onnxruntime-qnn leaves a NonZero of a constant to run time and every node whose shape depends on
it on the CPU, as the QNN tables say (skipped without NPUCHECK_QNN_PYTHON; the recorded results of
the whole family are checked in tests/tables/test_data_shapes_probed.py)."""

from __future__ import annotations

import os

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.toolchains.qnn import adapter as qnn_oracle
from pytest_npucheck.tables import Catalog

needs_qnn = pytest.mark.skipif(not (os.environ.get(qnn_oracle.ENV_VAR) and os.access(os.environ[qnn_oracle.ENV_VAR], os.X_OK)),
                               reason=f"set {qnn_oracle.ENV_VAR} (onnxruntime-qnn venv)")


@needs_qnn
def test_qnn_runs_a_constant_nonzero_and_its_dependents_on_the_cpu(tmp_path):
    import onnx

    from pytest_npucheck.probe.models_data_dependent_shape import _nonzero

    model = _nonzero("const_of_shape", "restored").build()
    path = tmp_path / "nonzero.onnx"
    onnx.save(model, str(path))
    [real] = qnn_oracle.place_models([{"key": "nz", "path": str(path)}], 73, precision="fp16")
    assert real.placement["focus_nonzero"] == "cpu"
    assert real.placement["post_gather"] == "cpu" and real.placement["post_mul"] == "npu"
    got = {n.name: n.verdict for n in match(facts_from_model(model), Catalog.discover().table("qnn@2.51.0/htp-v73")).nodes}
    for name in ("focus_nonzero", "post_rows", "post_gather", "post_reduce", "post_mul"):
        assert got[name] == real.placement[name], name
