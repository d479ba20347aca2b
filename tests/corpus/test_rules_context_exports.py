"""Context rules (``pytest_npucheck/rules/context.py``) on real exported models: the RKNN placements
that depend on a node's neighbours, as the real compiler showed them in the corpus agreement runs
(the rules on small graphs: tests/unit/test_rules_context.py)."""

from __future__ import annotations

import pytest

from pytest_npucheck.check import check_file



@pytest.fixture(scope="module")
def export(export_cache):
    """Export as the agreement runs do (scripts/rknn_agreement.py): dynamo at opset 19,
    TorchScript at opset 17."""
    from pytest_npucheck.export import ExportOptions, export_model

    cache = export_cache

    def _export(model, inputs, exporter="torchscript"):
        opset = 19 if exporter == "dynamo" else 17
        return export_model(model, inputs, ExportOptions(exporter=exporter, opset=opset), cache).path

    return _export


def _nodes(path, target):
    [result] = check_file(path, [target])
    return result.nodes


def _by_op(nodes, op):
    return [n for n in nodes if n.op_type == op]


def _reasons(node):
    return " | ".join(r.message for r in node.reasons)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_cyclegan_second_block_pad_falls_back_first_stays(corpus, export, exporter):
    """CycleGAN ResnetBlock: Pad(reflect) -> Conv -> IN -> Relu -> Pad(reflect) -> Conv -> IN, +x.
    The real RK3588 compiler put exactly the pads that alone read IN -> Relu on the CPU."""
    path = export(*corpus["cyclegan_resnet_generator"].build(), exporter=exporter)
    pads = _by_op(_nodes(path, "rknn@2.5.0/rk3588"), "Pad")
    cpu = [p for p in pads if p.verdict == "cpu"]
    npu = [p for p in pads if p.verdict == "npu"]
    assert len(cpu) == 4 and len(npu) >= 4, [(p.name, p.verdict) for p in pads]
    for p in cpu:
        assert "is computed by Relu" in _reasons(p) and "InstanceNormalization" in _reasons(p)
        assert "mode='reflect'" in _reasons(p)


def test_flatten_at_graph_output_depends_on_soc(corpus, export):
    """squeezenet's final Flatten (TorchScript) is a graph output: CPU on RK3588 (x.Flatten.ctx=*
    probes and the real model), NPU on RK3576."""
    path = export(*corpus["squeezenet1_1_small"].build(), exporter="torchscript")
    [f3588] = _by_op(_nodes(path, "rknn@2.5.0/rk3588"), "Flatten")
    [f3576] = _by_op(_nodes(path, "rknn@2.5.0/rk3576"), "Flatten")
    assert f3588.verdict == "cpu" and "is a graph output" in _reasons(f3588)
    assert f3576.verdict == "npu"


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_attention_mask_expand_of_fused_sdpa(corpus, export, exporter):
    """conformer: the key-padding mask's Expand feeds Add -> Softmax -> MatMul, which 2.5.0 fuses
    into exSDPAttention and runs the Expand on the CPU; 2.2.0 does not fuse it (NPU)."""
    path = export(*corpus["conformer_small"].build(), exporter=exporter)
    new = [e for e in _by_op(_nodes(path, "rknn@2.5.0/rk3588"), "Expand") if "feeds" in _reasons(e)]
    assert new and all(e.verdict == "cpu" for e in new)
    assert all("Softmax" in _reasons(e) and "MatMul" in _reasons(e) for e in new)
    old = {e.name: e for e in _by_op(_nodes(path, "rknn@2.2.0/rk3588"), "Expand")}
    assert all("feeds" not in _reasons(old[e.name]) for e in new)


def test_stn_affine_grid_transpose(corpus, export):
    """stn_mnist: fc -> view(-1, 2, 3) -> transpose: CPU on RK3588, NPU on RK3576."""
    path = export(*corpus["stn_mnist"].build(), exporter="dynamo")
    [t88] = _by_op(_nodes(path, "rknn@2.5.0/rk3588"), "Transpose")
    [t76] = _by_op(_nodes(path, "rknn@2.5.0/rk3576"), "Transpose")
    assert t88.verdict == "cpu" and "Reshape" in _reasons(t88) and "Gemm" in _reasons(t88)
    assert t76.verdict == "npu"


def test_attention_head_transposes_stay_on_npu(corpus, export):
    """The rank-4 Gemm -> Reshape -> Transpose of every attention block is not caught by the STN
    rule (the real compiler ran them on the NPU)."""
    path = export(*corpus["vit_tiny"].build(), exporter="dynamo")
    nodes = _nodes(path, "rknn@2.5.0/rk3588")
    assert not [n for n in nodes if n.op_type in ("Transpose", "Reshape") and "Gemm" in _reasons(n)], \
        [(n.name, _reasons(n)) for n in nodes if "Gemm" in _reasons(n)]
