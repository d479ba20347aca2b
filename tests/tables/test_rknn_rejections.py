"""Models rknn-toolkit2 rejects as a whole (load or build fails), found where real corpus exports did not
build (session 7): the probe families of models_rnn_layout, the recorded outcome of each probe, each table's
prediction of it, and the real exports the tables now call rejected. The families' results are part of
the 2.3.2 tables (the version whose real builds failed on them), DeiT's token Concat (session 8) of the
2.2.0 tables too; on 2.2.0 and 2.5.0 the others were run too (probes/rknn/README.md gives the outcome) but
not yet merged into those tables' evidence. Session 9 (models_rmsnorm_masks, all 12 targets): the RMSNorm with
its weight that crashes 2.2.0 (T5, LLaMA) and the bool Trilu that 2.2.0's onnxruntime cannot run (GPT-2)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_npucheck.tables import Catalog

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "probes" / "rknn"
SOCS = ("rk3588", "rk3576", "rk3566", "rv1106")
VERSIONS = ("2.2.0", "2.3.2", "2.5.0")
CATALOG = Catalog.discover()

#: what reads the RNN's output in the probes that 2.2.0 and 2.3.2 reject when the RNN has layout=0
_LAYOUT_REJECTED = {"squeeze", "t_r_out", "t_r_rnn", "t_r_matmul"}
#: the rank-4 means 2.3.2 rejects: spatial axes, keepdims=0, read by a node
_MEAN_REJECTED = {"axes=2_3.keepdims=0.tail=relu", "axes=-2_-1.keepdims=0.tail=gemm",
                  "axes=2_3.keepdims=0.tail=matmul"}
#: probes the tables do not call rejected although they failed: the RNN's output squeezed or reshaped
#: straight out of the model (the rule follows it into a MatMul or RNN: a Gemm or a Relu there built)
_LAYOUT_NARROWER = {"squeeze", "t_r_out"}
#: a probe the tables call rejected although it built: a mean over (1, 2, 3)
_MEAN_WIDER = {"axes=1_2_3.keepdims=0.tail=relu"}


def _extra(version: str, soc: str, prefix: str) -> list[dict]:
    doc = json.loads((PROBES / version / f"{soc}.extra.results.json").read_text())
    return [r for r in doc["probes"] if r["id"].startswith(prefix)]


def _family(version: str, soc: str, prefix: str, count: int) -> tuple:
    """The table, and each probe of one family as (record, case, failed): the case is the id without
    the family prefix and the dtype/rank suffix."""
    recs = _extra(version, soc, prefix)
    assert len(recs) == count
    cases = [(r, re.sub(r"\.f32\.r\d$", "", r["id"][len(prefix):]), r["status"] != "ok") for r in recs]
    return CATALOG.table(f"rknn@{version}/{soc}"), cases


def _model(pid: str):
    """The probe's model from the session's probe index (every probe built once per process;
    ``build_extra_probes([pid])`` walks every family for each one)."""
    from conftest import probe_index_by_id

    index = probe_index_by_id()
    assert pid in index, pid
    return index[pid].model


def _rejected(table, model) -> bool:
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match

    return match(facts_from_model(model), table).verdict == "unsupported"


@pytest.mark.parametrize("version", ["2.3.2"])
@pytest.mark.parametrize("soc", SOCS)
def test_rnn_layout_probes_are_recorded_and_predicted(version, soc):
    table = CATALOG.table(f"rknn@{version}/{soc}")
    for op in ("LSTM", "GRU"):
        recs = _extra(version, soc, f"x.{op}.ctx=layout_tail.")
        assert len(recs) == 16, (version, soc, op)
        for rec in recs:
            tail, layout = re.match(r".*tail=(\w+)\.layout=(\w+)\.", rec["id"]).groups()
            failed = rec["status"] != "ok"
            if layout == "none":
                expected = False
            else:
                expected = version == "2.5.0" or tail in _LAYOUT_REJECTED
            assert failed == expected, (rec["id"], rec["status"])
            if failed:
                assert "Unrecognized attribute: layout" in rec["message"], rec["message"][-300:]
            predicted = _rejected(table, _model(rec["id"]))
            assert predicted == (failed and tail not in _LAYOUT_NARROWER), (version, soc, rec["id"], predicted)


@pytest.mark.parametrize("version", ["2.3.2"])
@pytest.mark.parametrize("soc", SOCS)
def test_global_mean_probes_are_recorded_and_predicted(version, soc):
    table, cases = _family(version, soc, "x.ReduceMean.ctx=global_mean.", 9)
    for rec, case, failed in cases:
        assert failed == (version == "2.3.2" and case in _MEAN_REJECTED), (rec["id"], rec["status"])
        if failed:
            assert "Expected: 2" in rec["message"], rec["message"][-300:]
        predicted = _rejected(table, _model(rec["id"]))
        assert predicted == (version == "2.3.2" and case in _MEAN_REJECTED | _MEAN_WIDER), (version, soc, rec["id"])


def _verdicts(path, targets):
    from pytest_npucheck.check import check_file

    return {r.target: r for r in check_file(path, list(targets))}


def test_dynamo_lstm_is_rejected_by_2_3_2_and_2_5_0_not_its_torchscript_export(corpus, export_cache):
    """lstm_lm (two stacked LSTM layers, then a Linear): the dynamo exporter writes layout=0 on both
    LSTMs and the real 2.3.2 and 2.5.0 builds failed ('Unrecognized attribute: layout'); the
    TorchScript export writes no layout and built."""
    from pytest_npucheck.export import ExportOptions, export_model

    built = corpus["lstm_lm"].build()
    targets = [f"rknn@{v}/{s}" for v in ("2.3.2", "2.5.0") for s in SOCS]
    dynamo = _verdicts(export_model(*built, ExportOptions(exporter="dynamo", opset=19), export_cache).path, targets)
    for target, res in dynamo.items():
        assert res.verdict == "unsupported", target
        lstm = [n for n in res.nodes if n.op_type == "LSTM"]
        assert lstm and all(n.verdict == "unsupported" for n in lstm), target
        assert all("layout" in " ".join(r.message for r in n.reasons) for n in lstm), target
    ts = _verdicts(export_model(*built, ExportOptions(exporter="torchscript", opset=17), export_cache).path, targets)
    assert {t: r.verdict for t, r in ts.items() if r.verdict == "unsupported"} == {}


@pytest.mark.parametrize("model", ["shufflenet_v2_small", "convnext_small"])
def test_spatial_mean_before_the_classifier_is_rejected_by_2_3_2_only(corpus, export_cache, model):
    """x.mean((2, 3)) / x.mean((-2, -1)) before the classifier: the real 2.3.2 builds of both exports failed
    on every SoC; 2.2.0 and 2.5.0 built them."""
    from pytest_npucheck.export import ExportOptions, export_model

    built = corpus[model].build()
    path = export_model(*built, ExportOptions(exporter="torchscript", opset=17), export_cache).path
    res = _verdicts(path, [f"rknn@{v}/{s}" for v in VERSIONS for s in SOCS])
    for target, r in res.items():
        means = [n for n in r.nodes if n.op_type == "ReduceMean" and n.verdict == "unsupported"]
        if "@2.3.2/" in target:
            assert r.verdict == "unsupported" and len(means) == 1, target
        else:
            assert not means, target


#: DeiT's token Concat probes that 2.3.2 and 2.2.0 ("list index out of range") failed to build
_TOKENS_REJECTED = {"tokens=2", "tokens=3", "tokens=2.const", "tokens=2.relu", "tokens=2.transpose_relu"}
#: a probe the 2.2.0 and 2.3.2 tables call rejected although it built: tokens computed in the model
_TOKENS_WIDER = {"tokens=2.computed"}


@pytest.mark.parametrize("version", ["2.2.0", "2.3.2"])
@pytest.mark.parametrize("soc", SOCS)
def test_token_concat_probes_are_recorded_and_predicted(version, soc):
    table, cases = _family(version, soc, "x.Concat.ctx=tokens.", 10)
    for rec, case, failed in cases:
        assert failed == (case in _TOKENS_REJECTED), (rec["id"], rec["status"])
        if failed and version == "2.3.2":  # a KeyError naming what the Transpose (or the Relu behind it) computes
            assert rec["message"].strip().strip("'") in ("patch_t_out", "patch_relu_out"), rec["message"][-300:]
        elif failed:
            assert "list index out of range" in rec["message"], rec["message"][-300:]
        predicted = _rejected(table, _model(rec["id"]))
        assert predicted == (case in _TOKENS_REJECTED | _TOKENS_WIDER), (version, soc, rec["id"], predicted)


def test_deit_is_rejected_by_2_3_2_not_by_2_5_0(corpus, export_cache):
    """deit_tiny_distilled: the real 2.3.2 builds of both exports failed on every SoC with a KeyError
    naming the patch embeddings' Transpose result; 2.5.0 built them. ViT (one token) is not rejected."""
    from pytest_npucheck.export import ExportOptions, export_model

    targets = [f"rknn@{v}/{s}" for v in ("2.3.2", "2.5.0") for s in SOCS]
    for exporter, opset in (("torchscript", 17), ("dynamo", 19)):
        built = corpus["deit_tiny_distilled"].build()
        path = export_model(*built, ExportOptions(exporter=exporter, opset=opset), export_cache).path
        for target, r in _verdicts(path, targets).items():
            cat = [n for n in r.nodes if n.op_type == "Concat" and n.verdict == "unsupported"]
            if "@2.3.2/" in target:
                assert r.verdict == "unsupported" and len(cat) == 1, (exporter, target)
                assert "Transpose" in " ".join(x.message for x in cat[0].reasons)
            else:
                assert not cat, (exporter, target)
    vit = export_model(*corpus["vit_tiny"].build(), ExportOptions(exporter="torchscript", opset=17), export_cache).path
    assert not [n.name for r in _verdicts(vit, targets).values() for n in r.nodes
                if n.op_type == "Concat" and n.verdict == "unsupported"]


#: the RMSNorm probes whose build crashed 2.2.0 on RK3566, RK3576 and RK3588: every form with the
#: weight Mul after Div(1, sqrt(.)) (RV1106's int8 builds, and 2.3.2 and 2.5.0, built every one)
_RMSNORM_CRASHED = {"base", "w_first", "cast", "t=32.d=64"}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("soc", SOCS)
def test_rmsnorm_weight_probes_are_recorded_and_predicted(version, soc):
    table, cases = _family(version, soc, "x.Mul.ctx=rmsnorm_weight.", 6)
    crashes = version == "2.2.0" and soc != "rv1106"
    for rec, case, failed in cases:
        assert failed == (crashes and case in _RMSNORM_CRASHED), (rec["id"], rec["status"])
        if failed:
            assert rec["status"] == "crashed" and "invalid tensor malloc size" in rec["message"], rec["message"][-300:]
        model = _model(rec["id"])
        assert _rejected(table, model) == failed, (version, soc, rec["id"])
        if not failed:  # what the compiler placed on the CPU (the lone Div or Reciprocal), the table predicts
            from pytest_npucheck.graph import facts_from_model
            from pytest_npucheck.matcher import match

            verdicts = {n.name: n.verdict for n in match(facts_from_model(model), table).nodes}
            assert {n for n, v in verdicts.items() if v == "cpu"} == \
                {n for n, d in rec["placement"].items() if d == "cpu"}, (version, soc, rec["id"], verdicts)


def test_t5_and_llama_are_rejected_by_2_2_0_not_by_2_3_2(corpus, export_cache):
    """The TorchScript exports of t5_encoder_tiny and llama_tiny crashed 2.2.0 on RK3566, RK3576 and RK3588
    ("invalid tensor malloc size"; cut down, at the weight Mul of the first RMSNorm) and built on RV1106
    and with 2.3.2: the tables say so, naming the RMSNorm and what to do about it."""
    from pytest_npucheck.export import ExportOptions, export_model

    targets = [f"rknn@{v}/{s}" for v in ("2.2.0", "2.3.2") for s in SOCS]
    for name in ("t5_encoder_tiny", "llama_tiny"):
        path = export_model(*corpus[name].build(), ExportOptions(exporter="torchscript", opset=17), export_cache).path
        for target, r in _verdicts(path, targets).items():
            norm = [n for n in r.nodes if n.verdict == "unsupported" and n.fused_into and "rmsnorm_div" in n.fused_into]
            if "@2.2.0/" in target and not target.endswith("rv1106"):
                assert r.verdict == "unsupported" and norm, (name, target)
                assert any(n.op_type == "Mul" and "weight" in n.fused_into for n in norm), (name, target)
                text = " ".join(x.message for n in norm for x in n.reasons)
                assert "2.3.2" in text and "Reciprocal" in text, text[:500]
            else:
                assert not norm, (name, target)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("soc", SOCS)
def test_bool_trilu_probes_are_recorded_and_predicted(version, soc):
    """2.2.0 fails every build with a Trilu of a bool tensor (its onnxruntime 1.16 has no kernel), on every
    SoC, whether the mask is a constant its folding would evaluate or an input; a float mask builds, and
    2.3.2 and 2.5.0 build them all. The tables: a Trilu of bool is not folded on 2.2.0 and rejects the model."""
    table, cases = _family(version, soc, "x.Trilu.ctx=causal_mask.", 5)
    entry = table.ops["ai.onnx:Trilu"]
    assert entry.not_folded == (frozenset({"bool"}) if version == "2.2.0" else frozenset())
    for rec, case, failed in cases:
        is_bool = case.endswith(".bool.r2")
        assert failed == (version == "2.2.0" and is_bool), (rec["id"], rec["status"])
        if failed:
            assert "Could not find an implementation for Trilu" in rec["message"], rec["message"][-300:]
        assert _rejected(table, _model(rec["id"])) == failed, (version, soc, rec["id"])


def test_not_folded_keeps_a_constant_bool_trilu_to_be_judged():
    """The same constant-mask model: folded by the 2.3.2 table's constant folding, judged (and rejected) by
    the 2.2.0 one; a float mask is folded by both."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match

    for pid, old, new in (("x.Trilu.ctx=causal_mask.const.bool.r2", "unsupported", "folded"),
                          ("x.Trilu.ctx=causal_mask.mul.f32.r2", "folded", "folded")):
        facts = facts_from_model(_model(pid))
        got = [{n.name: n.verdict for n in match(facts, CATALOG.table(f"rknn@{v}/rk3588")).nodes}["focus_trilu"]
               for v in ("2.2.0", "2.3.2")]
        assert got == [old, new], (pid, got)


def test_gpt2_torchscript_is_rejected_by_2_2_0_for_its_bool_trilu(corpus, export_cache):
    """gpt2_tiny's TorchScript export failed every real 2.2.0 build ('Could not find an implementation for
    Trilu(14)'): the causal mask is a Trilu of a constant bool matrix. 2.3.2 built it."""
    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(*corpus["gpt2_tiny"].build(), ExportOptions(exporter="torchscript", opset=17), export_cache).path
    targets = [f"rknn@{v}/{s}" for v in ("2.2.0", "2.3.2") for s in SOCS]
    for target, r in _verdicts(path, targets).items():
        trilu = [n for n in r.nodes if n.op_type == "Trilu"]
        assert trilu, target
        if "@2.2.0/" in target:
            assert r.verdict == "unsupported" and all(n.verdict == "unsupported" for n in trilu), target
            assert "bool" in " ".join(x.message for x in trilu[0].reasons)
        else:
            assert all(n.verdict == "folded" for n in trilu), target
