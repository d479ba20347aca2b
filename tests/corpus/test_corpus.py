"""The model corpus exports with both torch exporters and ONNX Runtime reproduces PyTorch.

Every architecture is exported with the dynamo exporter (opset 19) and the TorchScript exporter
(opset 17), run in ONNX Runtime and compared with PyTorch: about 3 minutes on 2 busy cores, almost
all of it in the dynamo exporter. The exports go through the package's ``export_model`` into the
session's export cache (``export_cache``), where the tests judging these models find them.  ``NPUCHECK_CORPUS_QUICK=1`` checks the TorchScript exporter
only on a fixed sample of six architectures.  ``python tests/models/export_corpus.py OUTDIR
--check`` runs the same matrix outside pytest and keeps the files.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("onnxscript")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402

from models.corpus import ARCHS, EXPORTERS, FAMILIES, AffineGrid, get  # noqa: E402
from models.export_corpus import OPSETS, check_arch, node_counts  # noqa: E402

#: the corpus sweep: about 90 exports with both exporters, minutes of CPU in all
pytestmark = pytest.mark.slow

QUICK = os.environ.get("NPUCHECK_CORPUS_QUICK", "") not in ("", "0")

#: Checked with the TorchScript exporter in the quick run too: one per kind of trouble the
#: legacy exporter has (MHA fast path, GridSample, RNNs, data-dependent decoding, in-graph
#: index assignment, relative-position buckets).
TORCHSCRIPT_SAMPLE = ("vit_tiny", "stn_mnist", "kws_crnn", "centernet_small",
                      "simplebaseline_pose", "t5_encoder_tiny")

#: Ops that make an architecture interesting for an NPU; both exporters must keep them.
KEY_OPS: dict[str, set[str]] = {
    "mobilenet_v2_small": {"Clip", "Conv"},
    "mobilenet_v3_small": {"HardSwish", "HardSigmoid"},
    "efficientnet_b0_small": {"Sigmoid", "Mul"},
    "shufflenet_v2_small": {"Transpose", "Reshape", "Concat"},
    "densenet_small": {"Concat", "AveragePool"},
    "squeezenet1_1_small": {"Concat", "MaxPool"},
    "convnext_small": {"Erf", "LayerNormalization", "ReduceMean"},
    "ghostnet_small": {"Concat", "Clip"},
    "stn_mnist": {"GridSample", "MatMul"},
    "vit_tiny": {"Erf", "Softmax", "LayerNormalization"},
    "deit_tiny_distilled": {"Erf", "Softmax"},
    "mlp_mixer_small": {"Erf", "LayerNormalization"},
    "swin_tiny_small": {"Softmax", "Slice", "Concat"},
    "bert_tiny": {"Gather", "Erf", "LayerNormalization", "Softmax", "Tanh"},
    "distilbert_tiny": {"Where", "Erf"},
    "gpt2_tiny": {"Where", "Tanh", "Gemm"},
    "t5_encoder_tiny": {"Pow", "Sqrt", "ReduceMean"},
    "llama_tiny": {"Neg", "Softmax", "Sigmoid"},
    "wav2vec2_tiny": {"InstanceNormalization", "Erf"},
    "kws_crnn": {"GRU"},
    "conformer_small": {"Sigmoid", "Softmax", "LogSoftmax"},
    "lstm_lm": {"LSTM", "LogSoftmax"},
    "crnn_ocr": {"LSTM"},
    "yolov5_nano_small": {"Resize", "Sigmoid", "Pow", "MaxPool"},
    "ssdlite_small": {"Softmax", "Exp"},
    "detr_small": {"Softmax", "LayerNormalization", "Sigmoid"},
    "fpn_pan_neck": {"Resize"},
    "centernet_small": {"TopK", "GatherElements", "Mod"},
    "simplebaseline_pose": {"ArgMax", "ReduceMax"},
    "unet_small": {"ConvTranspose", "Concat", "MaxPool"},
    "unet_bilinear_small": {"Resize", "Concat"},
    "deeplabv3_small": {"Resize", "Concat"},
    "espcn_x3": {"DepthToSpace"},
    "cyclegan_resnet_generator": {"Pad", "InstanceNormalization", "ConvTranspose", "Tanh"},
    "sd_vae_decoder_small": {"InstanceNormalization", "Softmax", "Resize"},
    "diffusion_unet_tiny": {"Sin", "Cos", "Softmax", "Erf"},
}


def _cases() -> list:
    cases = []
    for name, arch in ARCHS.items():
        for exporter in arch.exporters:
            if exporter == "torchscript" and QUICK and name not in TORCHSCRIPT_SAMPLE:
                continue
            cases.append(pytest.param(name, exporter, id=f"{name}-{exporter}"))
    return cases


def _export_cached(cache):
    """``export`` (the corpus contract: dynamo opset 19, TorchScript opset 17) through the package's
    ``export_model`` into the session's export cache: the same ``torch.onnx.export`` call, the dynamo
    exporter's operator registry built once per process instead of once per export, and the files
    shared with the tests that judge these models (tests/tables, tests/corpus: same weights, inputs
    and options, so the same cache key)."""
    from pytest_npucheck.export import ExportOptions, export_model

    def _export(model, inputs, path, exporter):
        return export_model(model, inputs, ExportOptions(exporter=exporter, opset=OPSETS[exporter]), cache).path

    return _export


@pytest.mark.parametrize("name, exporter", _cases())
def test_exports_and_matches_pytorch(name: str, exporter: str, tmp_path, export_cache) -> None:
    path, problems = check_arch(get(name), exporter, tmp_path, _export_cached(export_cache))
    assert not problems, f"{name} ({exporter}): " + "; ".join(problems)
    model = onnx.load(str(path))
    opset = {o.domain: o.version for o in model.opset_import}.get("", 0)
    assert opset == (19 if exporter == "dynamo" else 17)
    n, ops = node_counts(path)
    assert n > 0
    missing = KEY_OPS.get(name, set()) - set(ops)
    assert not missing, f"{name} ({exporter}) lost its key ops {sorted(missing)}: {dict(ops)}"
    if name == "cyclegan_resnet_generator":
        modes = {a.s.decode() for node in model.graph.node if node.op_type == "Pad"
                 for a in node.attribute if a.name == "mode"}
        assert modes == {"reflect"}


def test_corpus_size_and_families() -> None:
    assert len(ARCHS) >= 28
    families = {a.family for a in ARCHS.values()}
    assert families == set(FAMILIES), f"missing families: {set(FAMILIES) - families}"
    for name, arch in ARCHS.items():
        assert arch.name == name
        assert arch.notes, name
        assert arch.exporters and set(arch.exporters) <= set(EXPORTERS), name
    assert set(KEY_OPS) <= set(ARCHS)
    assert set(TORCHSCRIPT_SAMPLE) <= set(ARCHS)


def test_get_unknown_name() -> None:
    with pytest.raises(KeyError, match="unknown architecture"):
        get("no_such_model")


def test_builds_are_deterministic_and_eval() -> None:
    for name, arch in ARCHS.items():
        model_a, inputs_a = arch.build()
        model_b, inputs_b = arch.build()
        assert not model_a.training, name
        assert len(inputs_a) == len(inputs_b) and all(
            torch.equal(a, b) for a, b in zip(inputs_a, inputs_b)), name
        sa, sb = model_a.state_dict(), model_b.state_dict()
        assert sa.keys() == sb.keys(), name
        assert all(torch.equal(sa[k], sb[k]) for k in sa), name


def test_affine_grid_matches_torch() -> None:
    theta = torch.randn(2, 2, 3)
    expected = torch.nn.functional.affine_grid(theta, [2, 1, 6, 5], align_corners=False)
    torch.testing.assert_close(AffineGrid(6, 5)(theta), expected, rtol=1e-5, atol=1e-6)
