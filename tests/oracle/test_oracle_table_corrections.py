"""The real toolchains confirm issue 22's table corrections (skipped without them): the same small
models as tests/tables/test_table_corrections.py, compiled by rknn-toolkit2 (NPUCHECK_RKNN_PYTHON) and
placed by onnxruntime-qnn (NPUCHECK_QNN_PYTHON)."""

from __future__ import annotations

import os

import pytest

from pytest_npucheck.toolchains.qnn import adapter as qnn_oracle
from pytest_npucheck.toolchains.rknn import adapter as rknn_oracle


def _exe(var: str) -> bool:
    path = os.environ.get(var, "")
    return bool(path) and os.path.isfile(path) and os.access(path, os.X_OK)


needs_rknn = pytest.mark.skipif(not _exe(rknn_oracle.ENV_VAR), reason=f"set {rknn_oracle.ENV_VAR} (rknn-toolkit2 venv)")
needs_qnn = pytest.mark.skipif(not _exe(qnn_oracle.ENV_VAR), reason=f"set {qnn_oracle.ENV_VAR} (onnxruntime-qnn venv)")


def _save(tmp_path, name, gb) -> str:
    import onnx

    path = tmp_path / f"{name}.onnx"
    onnx.save(gb.build(), str(path))
    return str(path)


def _rknn_models() -> dict[str, dict[str, object]]:
    """The models of the RKNN tests below (the hang's aside), by test, built from the probe families."""
    from pytest_npucheck.probe.models_attention_limits import (_mask_lookup, _mask_path, _repeat_between,
                                                                _softmax_attention)
    from pytest_npucheck.probe.models_einsum_equations import _einsum
    from pytest_npucheck.probe.models_dual_heads import _dual_head
    from pytest_npucheck.probe.models_rel_pos_tile import _rel_pos_tile
    from pytest_npucheck.probe.models_gemm_scales import _scaled_gemm
    from pytest_npucheck.probe.models_int_arith import _int_arith
    from pytest_npucheck.probe.models_int_layout import _int_layout
    from pytest_npucheck.probe.models_norm_limits import _norm_div
    from pytest_npucheck.probe.models_rejections import (_bn_training, _const_query_attention, _layernorm_axes,
                                                          _qkv_split)
    from pytest_npucheck.probe.models_space_to_depth import _space_to_depth

    return {
        "mqa": {"mqa": _repeat_between(), "gqa": _repeat_between(kv=2),
                "grn_mlp": _norm_div(src="linear", tail="linear"), "grn_relu": _norm_div(src="linear"),
                "mask": _mask_path(use="expand_where")},
        "s2d": {"swin": _space_to_depth(), "rows_first": _space_to_depth(quads=((0, 0), (0, 1), (1, 0), (1, 1))),
                "cvt_qk": _einsum("bhlk,bhtk->bhlt", [[1, 2, 16, 8], [1, 2, 16, 8]]),
                "spaced": _einsum("b h l k, b h t k -> b h l t", [[1, 2, 16, 8], [1, 2, 16, 8]])},
        "mask_lookup": {"cast": _mask_lookup(), "no_cast": _mask_lookup(maker="none"),
                        "unsqueeze2": _mask_lookup(layout="unsqueeze2"), "bool": _mask_lookup(src="bool")},
        "rejections": {"ln_h16": _layernorm_axes([1, 8, 16, 16], 1), "ln_h12": _layernorm_axes([1, 4, 12, 4], 1),
                       "bn_train": _bn_training(), "bn_eval": _bn_training(outputs=1, src="conv", training=0),
                       "q_const": _const_query_attention(n=1, mask="none"),
                       "q_input": _const_query_attention(q="input"),
                       "split_gemm": _qkv_split(), "split_matmul": _qkv_split(proj="matmul"),
                       "split_gemm_softmax_cast": _qkv_split(softmax_cast=True)},
        "int_noops": {"add0": _int_arith("add0", "gather_idx"), "add2": _int_arith("add2", "cast_f32"),
                      "div1": _int_arith("div1", "cast_f32"), "slice_all": _int_arith("slice_all", "cast_f32"),
                      "unsq_mul_cast": _int_layout("Unsqueeze", "mul", "cast_f32"),
                      "sam": _einsum("bhwc,hkc->bhwk", [[2, 14, 14, 16], [14, 14, 16]]),
                      "where_false": _mask_path(src="bool", layout="const_false", use="where_big_first")},
        "int_merges": {"casts_swapped": _int_arith("cast_twice", "two_casts.swapped"),
                       "transpose_unit": _int_layout("Transpose", "input", "gather_idx"),
                       "transpose_rows": _int_layout("Transpose", "input", "gather_idx.rows"),
                       "sub1_add2": _int_arith("sub1_add2", "gather_idx"),
                       "sub1_mul2": _int_arith("sub1_mul2", "gather_idx")},
        "dual_head": {"same": _dual_head(k=32, n=16), "same_bn": _dual_head(k=32, n=16, pre="bn"),
                      "two_inputs": _dual_head(k=32, n=16, inputs=2), "sub": _dual_head(k=32, n=16, combine="Sub")},
        "rel_pos_tile": {"height": _rel_pos_tile(n=8), "width": _rel_pos_tile(n=8, perm=(0, 1, 3, 2, 4)),
                         "batch1": _rel_pos_tile(n=8, b=1)},
        "gemm_scale": {"n96": _scaled_gemm(), "n96_scale_first": _scaled_gemm(scale_first=True),
                       "n32": _scaled_gemm(n=32), "n96_transB": _scaled_gemm(trans_b=1)},
        # last: where_bcast kills the worker (built once more in a fresh one, then reported crashed)
        "softmax": {"scores257": _softmax_attention("scores", 1, 257), "alone257": _softmax_attention("alone", 1, 257),
                    "where_bcast": _mask_path(src="bool", layout="input")},
    }


@pytest.fixture(scope="module")
def rknn_builds(tmp_path_factory):
    """Every model of this module's RKNN tests but the hang's, compiled in one rknn-toolkit2 run (each
    ``compile_models`` call starts a worker that imports the toolkit, ~2.5 CPU-s; the tests used to
    start six): {test: (models, {key: ONNX path}, {key: RknnResult})}."""
    d = tmp_path_factory.mktemp("rknn-corrections")
    models = _rknn_models()
    paths = {t: {k: _save(d, f"{t}.{k}", gb) for k, gb in ms.items()} for t, ms in models.items()}
    jobs = [{"key": f"{t}/{k}", "path": p} for t, ps in paths.items() for k, p in ps.items()]
    res = {r.key: r for r in rknn_oracle.compile_models(jobs, "rk3588", timeout=240)}
    return {t: (ms, paths[t], {k: res[f"{t}/{k}"] for k in ms}) for t, ms in models.items()}


@needs_rknn
def test_rknn_softmax_limit_and_mask_where(rknn_builds):
    _, _, res = rknn_builds["softmax"]
    assert rknn_oracle.onnx_placement(res["scores257"])["focus_softmax"] == "npu"
    assert rknn_oracle.onnx_placement(res["alone257"])["focus_softmax"] == "cpu"
    assert res["where_bcast"].status in ("crashed", "build_failed"), res["where_bcast"].message


@needs_qnn
def test_qnn_gathernd_bool_data_and_rank5_indices(tmp_path):
    from pytest_npucheck.probe.models_gather_index import _gathernd

    cases = {"bool_r5": {}, "f32_r5": {"dtype": "float32"}, "f32_r4": {"dtype": "float32", "lead": [1, 1]},
             "i64_r5": {"dtype": "int64"}}
    jobs = [{"key": k, "path": _save(tmp_path, k, _gathernd(**kw)[0])} for k, kw in cases.items()]
    res = {r.key: r for r in qnn_oracle.place_models(jobs, 73, precision="fp16")}
    assert res["bool_r5"].placement["focus_gathernd"] == "cpu"
    assert "Failed to create GatherND node." in res["bool_r5"].reasons["focus_gathernd"]
    assert res["f32_r5"].placement["focus_gathernd"] == "cpu"
    assert res["f32_r4"].placement["focus_gathernd"] == "npu"
    assert res["i64_r5"].status == "session_failed" and "finalize" in res["i64_r5"].message


@needs_rknn
def test_rknn_mqa_repeat_grn_div_and_mask_reshape(rknn_builds):
    _, paths, res = rknn_builds["mqa"]
    place = {k: rknn_oracle.onnx_placement(r, rknn_oracle.onnx_nodes(paths[k])) for k, r in res.items()}
    assert place["mqa"]["focus_expand"] == "cpu" and place["gqa"]["focus_expand"] == "npu"
    assert place["grn_mlp"]["focus_div"] == "cpu" and place["grn_relu"]["focus_div"] == "npu"
    assert place["mask"]["focus_reshape"] == "cpu"  # the swapped Reshape:mask_rs row, on int64
    assert any(r.full_name == "Reshape:mask_rs" and r.dtype == "INT64" and r.target == "CPU" for r in res["mask"].rows)


@needs_rknn
def test_rknn_space_to_depth_and_einsum_letters(rknn_builds):
    _, paths, res = rknn_builds["s2d"]
    place = {k: rknn_oracle.onnx_placement(r, rknn_oracle.onnx_nodes(paths[k])) for k, r in res.items()}
    assert all(place["swin"][n] == "npu" for n in place["swin"] if n.startswith("focus_"))
    assert any(r.op_type == "Conv" and r.full_name.endswith("post_concat_2conv") for r in res["swin"].rows)
    assert place["rows_first"]["focus_rows0"] == "cpu" and place["rows_first"]["focus_rows1"] == "cpu"
    assert place["cvt_qk"]["focus_einsum"] == "npu" and place["spaced"]["focus_einsum"] == "cpu"


@needs_rknn
def test_rknn_merges_the_mask_lookup_chain_into_one_reshape_on_its_last_op(rknn_builds):
    """TorchScript's padding-mask lookup with and without the Cast in front: rknn-toolkit2 merges the layout
    chain into one Reshape, an int64 CPU row named after the mask (swapped in front of the Cast) or after the
    chain's last op; both count on the last op, where the table puts the CPU verdict (x.Reshape.ctx=mask_lookup.*)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    models, paths, res = rknn_builds["mask_lookup"]
    for key, gb in models.items():
        assert res[key].status == "ok", res[key].message
        real = rknn_oracle.onnx_placement(res[key], rknn_oracle.onnx_nodes(paths[key]))
        static = {n.name: n.verdict for n in match(facts_from_model(gb.build()), table).nodes}
        layout = [n for n in real if n.startswith("pre_") and n != "pre_cast"] + ["focus_reshape"]
        assert {n: real[n] for n in layout} == {n: static[n] for n in layout}, key
        int64_rows = [r for r in res[key].rows if r.op_type == "Reshape" and r.dtype == "INT64" and r.target == "CPU"]
        if key == "bool":
            assert real["focus_reshape"] == "npu" and not int64_rows
        else:  # one merged int64 Reshape on the CPU for the whole chain, counted on its last op
            assert real["focus_reshape"] == "cpu" and len(int64_rows) == 1
            assert all(real[n] == "npu" for n in layout if n != "focus_reshape")

@needs_rknn
def test_rknn_predicted_rejections(rknn_builds):
    """LayerNorm over (C, H, W) with H a multiple of 8, BatchNormalization in training mode and
    attention with constant queries fail build(); the neighbouring forms the table keeps build."""
    _, _, res = rknn_builds["rejections"]
    for k in ("ln_h16", "bn_train", "q_const", "split_gemm"):
        assert res[k].status == "build_failed", (k, res[k].status, res[k].message)
    for k in ("ln_h12", "bn_eval", "q_input", "split_matmul", "split_gemm_softmax_cast"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)
    assert "Training mode" in res["bn_train"].message


@needs_rknn
def test_rknn_integer_no_ops_layout_ops_read_by_casts_and_uniform_where_masks(rknn_builds):
    """x.*.ctx=int_arith.*, int_layout.*.cast_*, x.Einsum.ctx=letters.sam_rel_h and x.Where.ctx=mask_cast.bool.bool.
    const_*: what rknn-toolkit2 2.5.0 does with them is what the rk3588 table predicts (no row for int64 x + 0,
    a whole-tensor Slice or an Unsqueeze read by a Cast; a CPU Div for x / 1 and a CPU Add for x + 2; SAM's
    Einsum on the NPU; a uniform constant mask builds)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    built, paths, res = rknn_builds["int_noops"]
    want_at = {"add0": ("focus_op", "npu"), "add2": ("focus_op", "cpu"), "div1": ("focus_op", "cpu"),
               "slice_all": ("focus_op", "npu"), "unsq_mul_cast": ("focus_layout", "npu"),
               "sam": ("focus_einsum", "npu"), "where_false": ("post_where", "npu")}
    assert set(want_at) == set(built)
    models = {k: (built[k], node, want) for k, (node, want) in want_at.items()}
    for key, (gb, node, want) in models.items():
        assert res[key].status == "ok", (key, res[key].message)
        real = rknn_oracle.onnx_placement(res[key], rknn_oracle.onnx_nodes(paths[key]))
        static = {n.name: n.verdict for n in match(facts_from_model(gb.build()), table).nodes}
        assert real[node] == want, key
        assert ("npu" if static[node] == "folded" else static[node]) == want, key

@needs_rknn
def test_rknn_parallel_casts_integer_transposes_and_constant_offsets(rknn_builds):
    """x.Cast.ctx=int_arith.cast_t*, x.Transpose.ctx=int_layout.*, x.Sub.ctx=int_arith.sub1.*: rknn-toolkit2
    2.5.0 keeps the first in graph order of two Casts of one tensor, leaves no row for an int64 Transpose of a
    size-1 axis but a CPU one for (4, T) -> (T, 4) into a Gather, and merges - 1 into a + 2 after it but not
    into a * 2; the rk3588 table predicts each."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    models, paths, res = rknn_builds["int_merges"]
    wants = {"casts_swapped": {"focus_op_1": "cpu", "focus_op": "npu"}, "transpose_unit": {"focus_layout": "npu"},
             "transpose_rows": {"focus_layout": "cpu"}, "sub1_add2": {"focus_op": "npu", "post_add": "cpu"},
             "sub1_mul2": {"focus_op": "cpu"}}
    assert set(wants) == set(models)
    for key, want in wants.items():
        gb = models[key]
        assert res[key].status == "ok", (key, res[key].message)
        real = rknn_oracle.onnx_placement(res[key], rknn_oracle.onnx_nodes(paths[key]))
        static = {n.name: n.verdict for n in match(facts_from_model(gb.build()), table).nodes}
        for node, where in want.items():
            assert real[node] == where, (key, node)
            assert ("npu" if static[node] == "folded" else static[node]) == where, (key, node)


@needs_rknn
def test_rknn_padding_mask_read_by_two_chains_never_finishes_building(tmp_path):
    """The encoder and cross-attention padding masks of one input: build() does not return (the build
    log stops in fuse_ops, after cvt_and_to_fp_mul) while the same model with one chain, or with two
    mask inputs, builds; the static check calls the first rejected (probes x.And.ctx=mask_chains.*).

    The hang is told from a slow build in CPU time, whatever the load: the two builds that finish
    go through every rewrite and write their log as they go, each whole build in a fraction of a
    CPU-second; the hanging one computes STALL CPU-s (at least five whole control builds) without
    writing a line, and is killed then (``stall_cpu``), not after a wall-clock budget."""
    from pytest_npucheck.probe.models_attention_rewrites import _mask_chains

    stall = 5.0
    models = {"one_chain": _mask_chains(blocks="enc"), "two_inputs": _mask_chains(casts="two_inputs"),
              "two_chains": _mask_chains()}
    jobs = [{"key": k, "path": _save(tmp_path, k, gb)} for k, gb in models.items()]
    res = {r.key: r for r in rknn_oracle.compile_models(jobs, "rk3588", timeout=240, keep_logs=True,
                                                         stall_cpu=stall)}
    for key in ("one_chain", "two_inputs"):
        assert res[key].status == "ok", (key, res[key].status, res[key].message)
        assert "cvt_and_to_fp_mul" in res[key].log and "fuse_ops done" in res[key].log, key
        assert 0 < res[key].extra["cpu_seconds"] <= stall / 5, (key, res[key].extra)
    hang = res["two_chains"]
    assert hang.status == "timeout", (hang.status, hang.message)
    assert hang.extra["stalled_cpu_seconds"] >= stall, hang.extra
    assert "wrote nothing to its log for" in hang.message and "a hang" in hang.message, hang.message
    assert "cvt_and_to_fp_mul" in hang.log and "fuse_ops done" not in hang.log


@needs_rknn
def test_rknn_two_linear_heads_of_one_input_added_fail_build(rknn_builds):
    """fuse_conv_conv_add raises on Gemm(x, W1) + Gemm(x, W2), also with a BatchNormalization per head (rule
    linear_pair_add); two inputs, or a Sub of the two heads, build."""
    _, _, res = rknn_builds["dual_head"]
    for k in ("same", "same_bn"):
        assert res[k].status == "build_failed", (k, res[k].status, res[k].message)
        assert "unsliceable" in res[k].message, (k, res[k].message)
    for k in ("two_inputs", "sub"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)


@needs_rknn
def test_rknn_botnets_tiled_height_logits_fail_build(rknn_builds):
    """reduce_tp_in_mesh_forward raises on Slice -> Reshape [B, H, 1, W, W] -> Expand -> Transpose(0, 3, 1, 4, 2)
    (rule tile_transpose_perm); the width perm and batch 1 build."""
    _, _, res = rknn_builds["rel_pos_tile"]
    assert res["height"].status == "build_failed", (res["height"].status, res["height"].message)
    assert "is not in list" in res["height"].message
    for k in ("width", "batch1"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)


@needs_rknn
def test_rknn_gemm_behind_a_per_feature_mul_fails_build_unless_square_or_transposed(rknn_builds):
    """fuse_mul_into_gemm broadcasts a [K] scale along the wrong axis of a [K, N] weight (rule gemm_scale_fold)."""
    _, _, res = rknn_builds["gemm_scale"]
    for k in ("n96", "n96_scale_first"):
        assert res[k].status == "build_failed", (k, res[k].status, res[k].message)
        assert "could not be broadcast" in res[k].message
    for k in ("n32", "n96_transB"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)
