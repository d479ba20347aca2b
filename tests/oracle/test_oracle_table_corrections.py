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


@needs_rknn
def test_rknn_softmax_limit_and_mask_where(tmp_path):
    from pytest_npucheck.probe.models_attention_limits import _mask_path, _softmax_attention

    jobs = [{"key": "scores257", "path": _save(tmp_path, "scores257", _softmax_attention("scores", 1, 257))},
            {"key": "alone257", "path": _save(tmp_path, "alone257", _softmax_attention("alone", 1, 257))},
            {"key": "where_bcast", "path": _save(tmp_path, "where_bcast", _mask_path(src="bool", layout="input"))}]
    res = {r.key: r for r in rknn_oracle.compile_models(jobs, "rk3588", timeout=180)}
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
def test_rknn_mqa_repeat_grn_div_and_mask_reshape(tmp_path):
    from pytest_npucheck.probe.models_attention_limits import _mask_path, _repeat_between
    from pytest_npucheck.probe.models_norm_limits import _norm_div

    models = {"mqa": _repeat_between(), "gqa": _repeat_between(kv=2),
              "grn_mlp": _norm_div(src="linear", tail="linear"), "grn_relu": _norm_div(src="linear"),
              "mask": _mask_path(use="expand_where")}
    paths = {k: _save(tmp_path, k, gb) for k, gb in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([{"key": k, "path": p} for k, p in paths.items()], "rk3588",
                                                         timeout=180)}
    place = {k: rknn_oracle.onnx_placement(r, rknn_oracle.onnx_nodes(paths[k])) for k, r in res.items()}
    assert place["mqa"]["focus_expand"] == "cpu" and place["gqa"]["focus_expand"] == "npu"
    assert place["grn_mlp"]["focus_div"] == "cpu" and place["grn_relu"]["focus_div"] == "npu"
    assert place["mask"]["focus_reshape"] == "cpu"  # the swapped Reshape:mask_rs row, on int64
    assert any(r.full_name == "Reshape:mask_rs" and r.dtype == "INT64" and r.target == "CPU" for r in res["mask"].rows)


@needs_rknn
def test_rknn_space_to_depth_and_einsum_letters(tmp_path):
    from pytest_npucheck.probe.models_einsum_equations import _einsum
    from pytest_npucheck.probe.models_space_to_depth import _space_to_depth

    models = {"swin": _space_to_depth(), "rows_first": _space_to_depth(quads=((0, 0), (0, 1), (1, 0), (1, 1))),
              "cvt_qk": _einsum("bhlk,bhtk->bhlt", [[1, 2, 16, 8], [1, 2, 16, 8]]),
              "spaced": _einsum("b h l k, b h t k -> b h l t", [[1, 2, 16, 8], [1, 2, 16, 8]])}
    paths = {k: _save(tmp_path, k, gb) for k, gb in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([{"key": k, "path": p} for k, p in paths.items()], "rk3588",
                                                         timeout=180)}
    place = {k: rknn_oracle.onnx_placement(r, rknn_oracle.onnx_nodes(paths[k])) for k, r in res.items()}
    assert all(place["swin"][n] == "npu" for n in place["swin"] if n.startswith("focus_"))
    assert any(r.op_type == "Conv" and r.full_name.endswith("post_concat_2conv") for r in res["swin"].rows)
    assert place["rows_first"]["focus_rows0"] == "cpu" and place["rows_first"]["focus_rows1"] == "cpu"
    assert place["cvt_qk"]["focus_einsum"] == "npu" and place["spaced"]["focus_einsum"] == "cpu"


@needs_rknn
def test_rknn_merges_the_mask_lookup_chain_into_one_reshape_on_its_last_op(tmp_path):
    """TorchScript's padding-mask lookup with and without the Cast in front: rknn-toolkit2 merges the layout
    chain into one Reshape, an int64 CPU row named after the mask (swapped in front of the Cast) or after the
    chain's last op; both count on the last op, where the table puts the CPU verdict (x.Reshape.ctx=mask_lookup.*)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.probe.models_attention_limits import _mask_lookup
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    models = {"cast": _mask_lookup(), "no_cast": _mask_lookup(maker="none"),
              "unsqueeze2": _mask_lookup(layout="unsqueeze2"), "bool": _mask_lookup(src="bool")}
    paths = {k: _save(tmp_path, k, gb) for k, gb in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([{"key": k, "path": p} for k, p in paths.items()], "rk3588",
                                                         timeout=180)}
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

def test_rknn_predicted_rejections(tmp_path):
    """LayerNorm over (C, H, W) with H a multiple of 8, BatchNormalization in training mode and
    attention with constant queries fail build(); the neighbouring forms the table keeps build."""
    from pytest_npucheck.probe.models_rejections import (_bn_training, _const_query_attention, _layernorm_axes,
                                                          _qkv_split)

    models = {"ln_h16": _layernorm_axes([1, 8, 16, 16], 1), "ln_h12": _layernorm_axes([1, 4, 12, 4], 1),
              "bn_train": _bn_training(), "bn_eval": _bn_training(outputs=1, src="conv", training=0),
              "q_const": _const_query_attention(n=1, mask="none"), "q_input": _const_query_attention(q="input"),
              "split_gemm": _qkv_split(), "split_matmul": _qkv_split(proj="matmul"),
              "split_gemm_softmax_cast": _qkv_split(softmax_cast=True)}
    jobs = [{"key": k, "path": _save(tmp_path, k, gb)} for k, gb in models.items()]
    res = {r.key: r for r in rknn_oracle.compile_models(jobs, "rk3588", timeout=180)}
    for k in ("ln_h16", "bn_train", "q_const", "split_gemm"):
        assert res[k].status == "build_failed", (k, res[k].status, res[k].message)
    for k in ("ln_h12", "bn_eval", "q_input", "split_matmul", "split_gemm_softmax_cast"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)
    assert "Training mode" in res["bn_train"].message


@needs_rknn
def test_rknn_integer_no_ops_layout_ops_read_by_casts_and_uniform_where_masks(tmp_path):
    """x.*.ctx=int_arith.*, int_layout.*.cast_*, x.Einsum.ctx=letters.sam_rel_h and x.Where.ctx=mask_cast.bool.bool.
    const_*: what rknn-toolkit2 2.5.0 does with them is what the rk3588 table predicts (no row for int64 x + 0,
    a whole-tensor Slice or an Unsqueeze read by a Cast; a CPU Div for x / 1 and a CPU Add for x + 2; SAM's
    Einsum on the NPU; a uniform constant mask builds)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.probe.models_attention_limits import _mask_path
    from pytest_npucheck.probe.models_einsum_equations import _einsum
    from pytest_npucheck.probe.models_int_arith import _int_arith
    from pytest_npucheck.probe.models_int_layout import _int_layout
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    models = {"add0": (_int_arith("add0", "gather_idx"), "focus_op", "npu"),
              "add2": (_int_arith("add2", "cast_f32"), "focus_op", "cpu"),
              "div1": (_int_arith("div1", "cast_f32"), "focus_op", "cpu"),
              "slice_all": (_int_arith("slice_all", "cast_f32"), "focus_op", "npu"),
              "unsq_mul_cast": (_int_layout("Unsqueeze", "mul", "cast_f32"), "focus_layout", "npu"),
              "sam": (_einsum("bhwc,hkc->bhwk", [[2, 14, 14, 16], [14, 14, 16]]), "focus_einsum", "npu"),
              "where_false": (_mask_path(src="bool", layout="const_false", use="where_big_first"), "post_where", "npu")}
    paths = {k: _save(tmp_path, k, gb) for k, (gb, _, _) in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([{"key": k, "path": p} for k, p in paths.items()], "rk3588",
                                                         timeout=240)}
    for key, (gb, node, want) in models.items():
        assert res[key].status == "ok", (key, res[key].message)
        real = rknn_oracle.onnx_placement(res[key], rknn_oracle.onnx_nodes(paths[key]))
        static = {n.name: n.verdict for n in match(facts_from_model(gb.build()), table).nodes}
        assert real[node] == want, key
        assert ("npu" if static[node] == "folded" else static[node]) == want, key

@needs_rknn
def test_rknn_parallel_casts_integer_transposes_and_constant_offsets(tmp_path):
    """x.Cast.ctx=int_arith.cast_t*, x.Transpose.ctx=int_layout.*, x.Sub.ctx=int_arith.sub1.*: rknn-toolkit2
    2.5.0 keeps the first in graph order of two Casts of one tensor, leaves no row for an int64 Transpose of a
    size-1 axis but a CPU one for (4, T) -> (T, 4) into a Gather, and merges - 1 into a + 2 after it but not
    into a * 2; the rk3588 table predicts each."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.probe.models_int_arith import _int_arith
    from pytest_npucheck.probe.models_int_layout import _int_layout
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("rknn@2.5.0/rk3588")
    models = {"casts_swapped": (_int_arith("cast_twice", "two_casts.swapped"),
                                {"focus_op_1": "cpu", "focus_op": "npu"}),
              "transpose_unit": (_int_layout("Transpose", "input", "gather_idx"), {"focus_layout": "npu"}),
              "transpose_rows": (_int_layout("Transpose", "input", "gather_idx.rows"), {"focus_layout": "cpu"}),
              "sub1_add2": (_int_arith("sub1_add2", "gather_idx"), {"focus_op": "npu", "post_add": "cpu"}),
              "sub1_mul2": (_int_arith("sub1_mul2", "gather_idx"), {"focus_op": "cpu"})}
    paths = {k: _save(tmp_path, k, gb) for k, (gb, _) in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([{"key": k, "path": p} for k, p in paths.items()], "rk3588",
                                                         timeout=240)}
    for key, (gb, want) in models.items():
        assert res[key].status == "ok", (key, res[key].message)
        real = rknn_oracle.onnx_placement(res[key], rknn_oracle.onnx_nodes(paths[key]))
        static = {n.name: n.verdict for n in match(facts_from_model(gb.build()), table).nodes}
        for node, where in want.items():
            assert real[node] == where, (key, node)
            assert ("npu" if static[node] == "folded" else static[node]) == where, (key, node)


@pytest.mark.slow  # the hanging build costs its whole budget (one core until it is killed)
def test_rknn_padding_mask_read_by_two_chains_never_finishes_building(tmp_path):
    """The encoder and cross-attention padding masks of one input: build() does not return (the build
    log stops after cvt_and_to_fp_mul) while the same model with one chain, or with two mask inputs,
    builds in seconds; the static check calls the first rejected (probes x.And.ctx=mask_chains.*).

    The two builds that finish are made first; the hanging one gets ten times the longer of their build
    times (at least 45 s, at most 240 s): a budget measured on the same machine at the same load, so
    the hang is told from a slow build without holding a core for four minutes."""
    from pytest_npucheck.probe.models_attention_rewrites import _mask_chains

    models = {"two_chains": _mask_chains(), "one_chain": _mask_chains(blocks="enc"),
              "two_inputs": _mask_chains(casts="two_inputs")}
    jobs = {k: {"key": k, "path": _save(tmp_path, k, gb)} for k, gb in models.items()}
    res = {r.key: r for r in rknn_oracle.compile_models([jobs["one_chain"], jobs["two_inputs"]], "rk3588",
                                                         timeout=240, keep_logs=True)}
    assert res["one_chain"].status == "ok" and res["two_inputs"].status == "ok"
    slowest = max(res["one_chain"].seconds or 24.0, res["two_inputs"].seconds or 24.0)
    budget = min(240.0, max(45.0, 10 * slowest))
    res.update({r.key: r for r in rknn_oracle.compile_models([jobs["two_chains"]], "rk3588", timeout=budget,
                                                              keep_logs=True)})
    assert res["two_chains"].status == "timeout", (res["two_chains"].status, res["two_chains"].message, budget)
    assert "cvt_and_to_fp_mul" in (res["two_chains"].log or "")


@needs_rknn
def test_rknn_gemm_behind_a_per_feature_mul_fails_build_unless_square_or_transposed(tmp_path):
    """fuse_mul_into_gemm broadcasts a [K] scale along the wrong axis of a [K, N] weight (rule gemm_scale_fold)."""
    from pytest_npucheck.probe.models_gemm_scales import _scaled_gemm

    models = {"n96": _scaled_gemm(), "n96_scale_first": _scaled_gemm(scale_first=True),
              "n32": _scaled_gemm(n=32), "n96_transB": _scaled_gemm(trans_b=1)}
    jobs = [{"key": k, "path": _save(tmp_path, k, gb)} for k, gb in models.items()]
    res = {r.key: r for r in rknn_oracle.compile_models(jobs, "rk3588", timeout=180)}
    for k in ("n96", "n96_scale_first"):
        assert res[k].status == "build_failed", (k, res[k].status, res[k].message)
        assert "could not be broadcast" in res[k].message
    for k in ("n32", "n96_transB"):
        assert res[k].status == "ok", (k, res[k].status, res[k].message)
