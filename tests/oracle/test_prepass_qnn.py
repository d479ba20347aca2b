"""onnxruntime-qnn, live, on the issue-22 classes of the re-run: the QNN tables' pre-passes
(eliminate_same_type_casts, merge_identical_nodes over chains), the nonempty rules and Hiera's unroll
agree node by node with the real placement, and a rejected model is rejected; a Cast to int64 leaves
the NPU only as a graph output (skipped without NPUCHECK_QNN_PYTHON; the recorded results of the
whole families are checked in tests/tables)."""

from __future__ import annotations

import os

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.tables import Catalog
from pytest_npucheck.toolchains.qnn import adapter as qnn_oracle

needs_qnn = pytest.mark.skipif(not (os.environ.get(qnn_oracle.ENV_VAR) and os.access(os.environ[qnn_oracle.ENV_VAR], os.X_OK)),
                               reason=f"set {qnn_oracle.ENV_VAR} (onnxruntime-qnn venv)")


def _placed_and_judged(tmp_path, models, prefix=""):
    """Each model (key -> ModelProto) saved and placed by onnxruntime-qnn (HTP v73, fp16), and judged by
    the qnn@2.51.0/htp-v73 table: ({key: QnnResult}, {key: {node: static verdict}})."""
    import onnx

    jobs = []
    for key, model in models.items():
        path = tmp_path / f"{prefix}{key}.onnx"
        onnx.save(model, str(path))
        jobs.append({"key": key, "path": str(path)})
    real = {r.key: r for r in qnn_oracle.place_models(jobs, 73, precision="fp16")}
    table = Catalog.discover().table("qnn@2.51.0/htp-v73")
    judged = {key: {n.name: n.verdict for n in match(facts_from_model(model), table).nodes}
              for key, model in models.items()}
    return real, judged


@needs_qnn
def test_real_placement_agrees_on_casts_chains_empty_tensors_and_the_unroll(tmp_path):
    from pytest_npucheck.probe.models_common_subexpressions import _chains
    from pytest_npucheck.probe.models_empty_tensors import _empty
    from pytest_npucheck.probe.models_noop_arithmetic import _same_type_cast
    from pytest_npucheck.probe.models_unroll import _unroll

    models = {"cast": _same_type_cast("rmsnorm", True).build(), "chain": _chains("nonzero").build(),
              "empty": _empty("slice_concat", "Slice", 16).build(), "unroll": _unroll(16, 8, 2).build()}
    real, judged = _placed_and_judged(tmp_path, models)
    for key in ("cast", "chain", "empty"):
        assert real[key].status == "ok", key
        got = judged[key]
        leaves = {"cpu", "unsupported"}
        assert {n for n, v in real[key].placement.items() if v in leaves} == \
            {n for n in real[key].placement if got[n] in leaves}, key
        removed = {n for n, v in real[key].placement.items() if v == "folded"}
        assert removed <= {n for n in real[key].placement if got[n] == "folded"}, key
    assert real["cast"].placement["focus_cast"] == "folded"  # the head Cast, whose other reader was fused
    assert real["empty"].reasons["focus_op"] == ["Failed to add node."]
    assert real["unroll"].status == "session_failed" and "QNN_COMMON_ERROR_MEM_ALLOC" in real["unroll"].message
    assert match(facts_from_model(models["unroll"]), Catalog.discover().table("qnn@2.51.0/htp-v73")).verdict == "unsupported"


@needs_qnn
def test_real_placement_of_a_cast_to_int64_by_its_readers(tmp_path):
    """The Cast entry's revision-2 erratum, live: LongT5's mask cast to int64 runs on the NPU inside the
    graph and on the CPU once its result is also a graph output, as the table says."""

    from pytest_npucheck.probe.models_int64_boundary import _cast_readers

    models = {key: _cast_readers("bool", key == "output").build() for key in ("inner", "output")}
    real, judged = _placed_and_judged(tmp_path, models, "cast_")
    for key, model in models.items():
        assert real[key].status == "ok", key
        got = judged[key]
        assert {n: got[n] for n in real[key].placement} == real[key].placement, key
        assert real[key].placement["focus_cast"] == ("cpu" if key == "output" else "npu")


@needs_qnn
def test_real_placement_of_the_evening_classes(tmp_path):
    """Live, the classes of the evening run: a NonZero of a mask expanded to its own shape merges with the
    NonZero of the mask (eliminate_noop_expand_slice), a Pad read only by a Shape never reaches an EP
    (eliminate_unused_nodes), a rank-5 CumSum runs on the CPU, a rank-6 Gather read by a Transpose on the
    NPU, and a CPU island's Transpose is the CPU helper that replaced it (the adapter's pairing)."""

    from pytest_npucheck.probe.models_cpu_transposes import _conv_module
    from pytest_npucheck.probe.models_cumsum_rank import _cumsum
    from pytest_npucheck.probe.models_dead_nodes import _dead
    from pytest_npucheck.probe.models_gather_index import _gather_unit_axis
    from pytest_npucheck.probe.models_noop_layout import _expand_merge

    import numpy as np

    models = {"merge": _expand_merge("shape_of").build(), "dead": _dead("Pad", "int64", False).build(),
              "cumsum": _cumsum((1, 2, 1, 16, 8), -2).build(),
              "gather6": _gather_unit_axis([1, 16, 9, 16, 1], 4, np.array([[0]], np.int64), True).build(),
              "island": _conv_module(True).build()}
    real, judged = _placed_and_judged(tmp_path, models)
    for key, model in models.items():
        assert real[key].status == "ok", key
        got = judged[key]
        placed = qnn_oracle.onnx_placement(real[key])
        assert {n for n, v in placed.items() if v == "cpu"} == {n for n in placed if got[n] == "cpu"}, key
    assert real["merge"].placement["focus_nonzero0"] == "folded" and real["merge"].placement["focus_nonzero1"] == "cpu"
    assert real["dead"].placement["focus_op"] == "folded"
    assert real["cumsum"].reasons["focus_op"] == ["Failed to add node."]
    assert real["gather6"].placement["focus_gather"] == "npu"
    assert real["island"].placement["focus_transpose_out"] == "cpu"
    assert "replaced by the CPU helper" in real["island"].via["focus_transpose_out"]


@needs_qnn
def test_real_placement_of_reshape_targets_and_shapes_onnxruntime_cannot_infer(tmp_path):
    """Live, the classes of session 17: a Reshape whose Concat target has one computed element is fused to a
    constant target and runs on the NPU (fuse_reshape_target), with two computed elements it stays on the CPU,
    and the Reshape after a contraction of rows widened to a width only the checker evaluates has no shape
    for onnxruntime (graph/data_shapes.py). Every node placed on the CPU or removed is called so."""

    from pytest_npucheck.probe.models_datadep_contraction import _contraction_unknown_width
    from pytest_npucheck.probe.models_reshape_fusion import _fusion

    models = {"vits": _fusion("vits").build(), "two": _fusion("two").build(),
              "width": _contraction_unknown_width("einsum").build()}
    real, judged = _placed_and_judged(tmp_path, models)
    for key, model in models.items():
        assert real[key].status == "ok", key
        got = judged[key]
        placed = real[key].placement
        assert {n for n, v in placed.items() if v == "cpu"} == {n for n in placed if got[n] == "cpu"}, key
        assert {n for n, v in placed.items() if v == "folded"} == {n for n in placed if got[n] == "folded"}, key
    assert real["vits"].placement["focus_concat"] == "folded" and real["vits"].placement["focus_reshape"] == "npu"
    assert real["two"].placement["focus_reshape"] == "cpu"
    assert real["width"].placement["focus_reshape"] == "cpu"
