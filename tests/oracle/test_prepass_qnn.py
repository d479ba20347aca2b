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


def _twins_window_attention():
    """Twins-SVT's locally-grouped attention as TorchScript writes it, cut down: x (1, 56, 56, 16) padded by
    constant pads, the window count read back from the Shape of the Pad (Shape -> Gather -> Div -> Cast ->
    Unsqueeze -> Concat), the rank-6 window partition, the qkv MatMul + bias and its Reshape to rank 5."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def i64(name, v):
        return numpy_helper.from_array(np.array(v, dtype=np.int64), name)

    inits = [i64("pads", [0, 0, 0, 0, 0, 0, 0, 0]), i64("one", 1), i64("two", 2), i64("seven", 7),
             i64("ax0", [0]), i64("c1", [1]), i64("c7", [7]), i64("c16", [16]), i64("c49", [49]), i64("c48", [48]),
             numpy_helper.from_array(np.random.default_rng(0).standard_normal((16, 48)).astype(np.float32), "w"),
             numpy_helper.from_array(np.linspace(-1, 1, 48, dtype=np.float32), "bias")]
    nodes = [helper.make_node("Relu", ["x"], ["xr"], name="pre"),
             helper.make_node("Pad", ["xr", "pads"], ["p"], name="Pad"),
             helper.make_node("Shape", ["p"], ["s"], name="Shape_1"),
             helper.make_node("Gather", ["s", "one"], ["h"], name="Gather_1", axis=0),
             helper.make_node("Div", ["h", "seven"], ["hd"], name="Div"),
             helper.make_node("Cast", ["hd"], ["hc"], name="Cast_2", to=TensorProto.INT64),
             helper.make_node("Shape", ["p"], ["s2"], name="Shape_2"),
             helper.make_node("Gather", ["s2", "two"], ["w_"], name="Gather_2", axis=0),
             helper.make_node("Div", ["w_", "seven"], ["wd"], name="Div_1"),
             helper.make_node("Cast", ["wd"], ["wc"], name="Cast_4", to=TensorProto.INT64),
             helper.make_node("Unsqueeze", ["hc", "ax0"], ["uh"], name="Unsqueeze_4"),
             helper.make_node("Unsqueeze", ["wc", "ax0"], ["uw"], name="Unsqueeze_5"),
             helper.make_node("Concat", ["c1", "uh", "c7", "uw", "c7", "c16"], ["t3"], name="Concat_3", axis=0),
             helper.make_node("Reshape", ["p", "t3"], ["r3"], name="Reshape_3"),
             helper.make_node("Transpose", ["r3"], ["t1"], name="Transpose_1", perm=[0, 1, 3, 2, 4, 5]),
             helper.make_node("MatMul", ["t1", "w"], ["m"], name="qkv/MatMul"),
             helper.make_node("Add", ["bias", "m"], ["a"], name="qkv/Add"),
             helper.make_node("Mul", ["hc", "wc"], ["nw"], name="Mul"),
             helper.make_node("Unsqueeze", ["nw", "ax0"], ["un"], name="Unsqueeze_6"),
             helper.make_node("Concat", ["c1", "un", "c49", "c48"], ["t4"], name="Concat_4", axis=0),
             helper.make_node("Reshape", ["a", "t4"], ["r4"], name="Reshape_4"),
             helper.make_node("Relu", ["r4"], ["y"], name="post")]
    graph = helper.make_graph(nodes, "twins_window", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 56, 56, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64, 49, 48])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@needs_qnn
def test_real_placement_of_the_vision_window_forms(tmp_path):
    """Live, the classes of session 18 (probe families in probe/models_unroll.py): Twins-SVT's window partition read
    by the qkv MatMul + bias runs on the NPU, and the shape computation onnxruntime folds is mapped folded, not to the
    Reshape a fusion merged its value into; a Reshape merged with a CPU rank-6 Reshape back, a rank-8 chain and a
    rank-5 MatMul by a matrix without its bias run on the CPU. The table calls every one of these nodes so."""
    from pytest_npucheck.probe.models_unroll import _matmul_rank, _merged_reshapes, _rank6, _rank6_gemm

    models = {"twins": _twins_window_attention(),
              "gemm_chain": _rank6_gemm((1, 8, 7, 8, 7, 16), (0, 1, 3, 2, 4, 5), True).build(),
              "merged": _merged_reshapes(6, "Relu").build(),
              "merged_direct": _merged_reshapes(6, None).build(),
              "rank8": _rank6((1, 8, 56, 96), (1, 4, 2, 8, 7, 8, 7, 96), (0, 1, 3, 5, 2, 4, 6, 7), None).build(),
              "mm_r5": _matmul_rank((1, 2, 4, 4, 32), False).build(),
              "mm_r5_bias": _matmul_rank((1, 2, 4, 4, 32), True).build()}
    real, judged = _placed_and_judged(tmp_path, models, prefix="vision_")
    for key in models:
        assert real[key].status == "ok", key
        placed, got = real[key].placement, judged[key]
        assert {n for n, v in placed.items() if v == "cpu"} == {n for n in placed if got[n] == "cpu"}, (key, placed, got)
    twins = real["twins"].placement
    assert [twins[n] for n in ("Reshape_3", "Transpose_1", "qkv/MatMul")] == ["npu", "npu", "npu"], twins
    assert {twins[n] for n in ("Shape_1", "Gather_1", "Div", "Cast_2", "Mul", "Unsqueeze_6", "Concat_4")} == {"folded"}, twins
    assert real["gemm_chain"].placement["split6"] == "npu"
    assert real["merged_direct"].placement["focus_reshape"] == "cpu" and real["merged"].placement["focus_reshape"] == "npu"
    assert real["rank8"].placement["transpose6"] == "cpu"
    assert real["mm_r5"].placement["focus_matmul"] == "cpu" and real["mm_r5_bias"].placement["focus_matmul"] == "npu"
