"""emulate: fp16/int8 emulation on real exported models, seeds, the layer diagnosis."""

from __future__ import annotations

import json

import numpy as np
import pytest

from pytest_npucheck.emulate import (
    diagnose,
    emulate,
    emulated_model,
    input_specs,
    random_inputs,
    run_model,
    seed_for,
)


def _export(model, inputs, cache, exporter="dynamo"):
    from pytest_npucheck.export import ExportOptions, export_model

    opset = 19 if exporter == "dynamo" else 17
    return export_model(model, inputs, ExportOptions(exporter=exporter, opset=opset), cache).path


@pytest.fixture(scope="module")
def overflow_model(tmp_path_factory):
    """A hand-rolled normalisation whose variance overflows fp16 (the classic LayerNorm case):
    (300*y)**2 reaches ~3e5 > 65504, although its mean (~3e4) fits."""
    import torch
    from torch import nn

    class RmsNormNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)
            self.head = nn.Conv2d(8, 4, 1)

        def forward(self, x):
            y = self.conv(x) * 300
            var = y.pow(2).mean(dim=(2, 3), keepdim=True)
            return self.head(y / torch.sqrt(var + 1.0))

    torch.manual_seed(0)
    return _export(RmsNormNet().eval(), (torch.randn(1, 3, 16, 16),), tmp_path_factory.mktemp("ovf"),
                   exporter="torchscript")


def test_seed_is_stable_and_recorded():
    assert seed_for("tests/test_x.py::test_a[1]") == 1084066945  # sha256-based, not hash(): the same in every process
    assert seed_for("a") != seed_for("b")


def test_random_inputs_are_seeded(overflow_model):
    a = random_inputs(overflow_model, 7)
    b = random_inputs(overflow_model, 7)
    assert list(a) == [n for n, _, _ in input_specs(overflow_model)]
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert not np.array_equal(a["x"], random_inputs(overflow_model, 8)["x"])


def test_fp16_storage_sees_the_overflow_the_converter_hides(overflow_model):
    res = emulate(overflow_model, "float16", test_id="t::ovf")
    assert res.inputs_source == "random" and res.seed == seed_for("t::ovf")
    assert "random inputs" in res.lines()[0]
    assert not res.passed
    out = res.comparison.outputs[0]
    assert out.metrics.cosine < 0.9
    json.dumps(res.to_json(), allow_nan=False)
    # ONNX Runtime CPU has no fp16 Pow/ReduceMean kernels: the converted model computes the
    # pair in fp32 and the overflow disappears (documented in docs/numerics.md).
    conv = emulate(overflow_model, "float16", test_id="t::ovf", fp16_method="converter")
    assert conv.passed


@pytest.mark.parametrize("mode", ["accumulated", "per_layer"])
def test_diagnosis_finds_the_overflowing_layer_and_the_fp32_fix(overflow_model, mode):
    d = diagnose(overflow_model, "fp16", test_id="t::ovf", mode=mode)
    assert d.first_divergent.op_type == "Pow"
    assert d.worst[0].node == d.first_divergent.node
    assert d.keep_fp32 == (d.first_divergent.node,)
    assert d.greedy[-1].passed
    text = "\n".join(d.lines())
    assert f"first node over tolerance: {d.first_divergent.node} (Pow)" in text
    json.dumps(d.to_json(), allow_nan=False)
    # Keeping that node in fp32 passes the emulation.
    assert emulate(overflow_model, "fp16", test_id="t::ovf", keep_fp32=d.keep_fp32).passed


def test_fp16_keeps_graph_io_fp32_and_names(overflow_model):
    import onnx

    src = onnx.load(str(overflow_model))
    for method in ("storage", "converter"):
        em = emulated_model(src, "fp16", fp16_method=method)
        assert [(i.name, i.type.tensor_type.elem_type) for i in em.graph.input] == \
               [(i.name, i.type.tensor_type.elem_type) for i in src.graph.input]
        assert [o.name for o in em.graph.output] == [o.name for o in src.graph.output]
        assert em.graph.output[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    with pytest.raises(ValueError, match="fp16_method"):
        emulated_model(src, "fp16", fp16_method="bogus")


@pytest.mark.parametrize("arch", ["resnet18_small", "bert_tiny", "wav2vec2_tiny"])
def test_real_models_pass_fp16_and_int8(arch, corpus, export_cache):
    """CNN, transformer, audio: fp16 and int8 emulation on the model's own inputs pass the
    default policies; int8 calibrated on the inputs given says so."""
    import onnx

    model, inputs = corpus[arch].build()
    path = _export(model, inputs, export_cache)
    feeds = {n: t.numpy() for (n, _, _), t in zip(input_specs(path), inputs)}
    fp16 = emulate(path, "float16", feeds, test_id=arch)
    assert fp16.passed and fp16.inputs_source == "given", "\n".join(fp16.lines())
    int8 = emulate(path, "int8", feeds, test_id=arch)
    assert int8.calibration_source == "given" and int8.calibration_samples == 1
    assert int8.passed, "\n".join(int8.lines())
    q = emulated_model(path, "int8", [feeds])
    assert any(n.op_type == "QuantizeLinear" for n in q.graph.node)
    assert isinstance(q, onnx.ModelProto)


def test_int8_without_inputs_says_random(overflow_model):
    res = emulate(overflow_model, "int8", test_id="t::q", random_calibration_samples=2)
    assert res.calibration_source == "random" and res.calibration_samples == 2
    assert "calibration random" in res.lines()[0]


def test_vit_int8_diagnosis_points_at_layers(corpus, export_cache):
    """ViT under int8 QDQ is far off (per-tensor activations); the diagnosis names the worst
    layers and the greedy search reports every step."""
    model, inputs = corpus["vit_tiny"].build()
    path = _export(model, inputs, export_cache)
    feeds = {n: t.numpy() for (n, _, _), t in zip(input_specs(path), inputs)}
    res = emulate(path, "int8", feeds, test_id="vit")
    assert not res.passed
    d = diagnose(path, "int8", feeds, test_id="vit", max_keep=2)
    assert d.first_divergent is not None and len(d.worst) == 5
    assert 1 <= len(d.greedy) <= 2
    assert all(s.keep_fp32[: len(s.keep_fp32) - 1] == d.greedy[i - 1].keep_fp32
               for i, s in enumerate(d.greedy) if i)
    json.dumps(d.to_json(), allow_nan=False)


def test_run_model_outputs_in_graph_order(overflow_model):
    out = run_model(overflow_model, random_inputs(overflow_model, 1))
    assert list(out) == [o.name for o in __import__("onnx").load(str(overflow_model)).graph.output]


@pytest.mark.reliability("B7")
def test_models_over_the_protobuf_limit_run_from_a_file_with_external_weights(overflow_model, monkeypatch):
    """A model too large to serialize in one piece (lowered limit, the same code path as 2 GiB)
    reaches ONNX Runtime through a file with external weights, with the same outputs."""
    import onnx

    from pytest_npucheck import emulate as em

    feeds = random_inputs(overflow_model, 3)
    small = run_model(overflow_model, feeds)
    import onnxruntime as ort

    sources = []
    real_session = ort.InferenceSession
    monkeypatch.setattr(ort, "InferenceSession", lambda src, *a, **k: sources.append(src) or real_session(src, *a, **k))
    saved = []
    real_save = onnx.save_model
    monkeypatch.setattr(onnx, "save_model", lambda *a, **k: saved.append(k) or real_save(*a, **k))
    monkeypatch.setattr(em, "PROTOBUF_LIMIT", 1024)
    large = run_model(overflow_model, feeds)
    assert saved and saved[0]["save_as_external_data"] is True
    assert len(sources) == 1 and isinstance(sources[0], str) and sources[0].endswith("model.onnx")
    assert list(large) == list(small)
    for name in small:
        np.testing.assert_array_equal(large[name], small[name])


def test_an_emulation_on_the_callers_fp32_run_is_the_same_emulation(overflow_model):
    """emulate(fp32_run=...) takes the fp32 side from the run the caller made (the numeric step's
    ONNX Runtime vs PyTorch run) instead of running it again: the result is the same."""
    from pytest_npucheck.emulate import run_with_margins

    feeds = random_inputs(overflow_model, 3)
    alone = emulate(overflow_model, "fp16", feeds, test_id="t")
    fp32 = run_with_margins(overflow_model, feeds)
    reused = emulate(overflow_model, "fp16", feeds, test_id="t", fp32_run=fp32)
    a, b = alone.to_json(), reused.to_json()
    a.pop("seconds", None)
    b.pop("seconds", None)
    assert a == b and not alone.passed  # the overflow is found either way
    for name, ref in alone.reference.items():
        assert np.array_equal(ref, reused.reference[name]) and reused.reference[name] is not fp32[0][name]
