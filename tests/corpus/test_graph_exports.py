"""Graph facts and pre-passes on a real export (graph's tests on tiny ONNX graphs are in
tests/unit/test_graph.py)."""

from __future__ import annotations

import onnx
import pytest

from pytest_npucheck.graph import load_graph



def test_torchscript_pad_shape_arithmetic_folds_and_shapes_stay_known(judge, tmp_path):
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    class M(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (1, 1, 1, 1), mode="reflect").relu()

    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(M(), torch.randn(1, 3, 8, 8), ExportOptions(exporter="torchscript", opset=17), tmp_path).path
    g = load_graph(path)
    pad = next(n for n in g.nodes if n.op_type == "Pad")
    assert g.tensor(pad.outputs[0]).shape == (1, 3, 10, 10)  # pads computed by a folded subgraph
    r = judge(onnx.load(path))
    verdicts = {n.op_type: n.verdict for n in r["__result__"].nodes if n.op_type not in ("Constant",)}
    assert verdicts["Pad"] == "cpu" and verdicts["Relu"] == "npu"
    assert all(n.verdict in ("folded",) for n in r["__result__"].nodes if n.op_type in ("Concat", "ConstantOfShape", "Slice"))
