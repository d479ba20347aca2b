"""onnxruntime-qnn places Einsum by the equation's form, not its letters (skipped without
NPUCHECK_QNN_PYTHON): CvT's respelled attention equations on the NPU, a permuted output on the CPU,
as the QNN tables' einsum_form rule says (tests/tables/test_rules_einsum_probed.py checks the
recorded results of the whole family)."""

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
def test_qnn_places_einsum_by_form(tmp_path):
    import onnx

    from pytest_npucheck.probe.models_einsum_forms import _einsum

    cases = {"cvt_scores": ("bhlk,bhtk->bhlt", [[1, 2, 8, 4], [1, 2, 6, 4]]),
             "cvt_context": ("bhlt,bhtv->bhlv", [[1, 2, 8, 8], [1, 2, 8, 4]]),
             "permuted": ("bij,bjk->bki", [[2, 8, 4], [2, 4, 6]])}
    jobs, models = [], {}
    for key, (eq, shapes) in cases.items():
        models[key] = _einsum(eq, shapes).build()
        path = tmp_path / f"{key}.onnx"
        onnx.save(models[key], str(path))
        jobs.append({"key": key, "path": str(path)})
    res = {r.key: r for r in qnn_oracle.place_models(jobs, 73, precision="fp16")}
    table = Catalog.discover().table("qnn@2.51.0/htp-v73")
    for key in cases:
        real = res[key].placement["focus_einsum"]
        assert real == ("cpu" if key == "permuted" else "npu"), (key, res[key].message)
        [node] = [n for n in match(facts_from_model(models[key]), table).nodes if n.name == "focus_einsum"]
        assert node.verdict == real, key
