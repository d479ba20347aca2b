"""Diagnosis on real exported models: module and line of each cause, ranking by cost, verified fixes."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from pytest_npucheck.check import check_graph, graph_facts  # noqa: E402
from pytest_npucheck.export import ExportOptions, export_model  # noqa: E402
from pytest_npucheck.fixes import with_fixes  # noqa: E402
from pytest_npucheck.report.text import render_target  # noqa: E402


class Block(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, 3)

    def forward(self, x):
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")  # LINE-PAD
        return F.gelu(self.conv(x))  # LINE-GELU


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.enc = Block(3, 8)
        self.dec = Block(8, 8)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x):
        y = self.dec(self.enc(x))
        y = F.interpolate(y, scale_factor=2, mode="bicubic", align_corners=False)  # LINE-RESIZE
        return self.head(y)


def line_of(tag: str) -> int:
    import inspect

    src, start = inspect.getsourcelines(Net)
    block, bstart = inspect.getsourcelines(Block)
    for lines, first in ((src, start), (block, bstart)):
        for k, text in enumerate(lines):
            if tag in text:
                return first + k
    raise AssertionError(tag)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    torch.manual_seed(0)
    d = tmp_path_factory.mktemp("diag")
    out = {}
    for exporter, opset in (("dynamo", 18), ("torchscript", 17)):
        out[exporter] = export_model(Net().eval(), torch.randn(1, 3, 16, 16), ExportOptions(exporter=exporter, opset=opset), d)
    out["dynamic"] = export_model(Net().eval(), torch.randn(2, 3, 16, 16),
                                  ExportOptions(opset=18, dynamic_axes={"x": {0: "batch"}}), d)
    return out


def diagnose(path, catalog, target="toy@1.0/soc-a", shapes=None):
    table = catalog.table(target)
    [res] = check_graph(graph_facts(path), [table])
    return with_fixes(res, path, table, input_shapes=shapes)


def test_each_cause_has_module_and_line_with_the_dynamo_exporter(exported, toy_catalog):
    res = diagnose(exported["dynamo"].path, toy_catalog)
    bad = {n.op_type: n for n in res.fallbacks}
    assert set(bad) >= {"Pad", "Resize"}
    pads = [n for n in res.fallbacks if n.op_type == "Pad"]
    assert {n.source.module for n in pads} == {"enc", "dec"}
    assert all(n.source.file == __file__ and n.source.line == line_of("LINE-PAD") for n in pads)
    assert bad["Resize"].source.line == line_of("LINE-RESIZE")
    erfs = [n for n in res.nodes if n.op_type == "Erf"]
    assert erfs and all(n.verdict == "npu" and n.fused_into for n in erfs)  # the GELU pattern is fused


def test_torchscript_exporter_gives_module_paths(exported, toy_catalog):
    res = diagnose(exported["torchscript"].path, toy_catalog)
    pads = [n for n in res.fallbacks if n.op_type == "Pad"]
    assert {n.source.module for n in pads} == {"enc", "dec"}
    assert all(n.source.line is None for n in pads)  # TorchScript records scopes, not lines


def test_ranked_by_cost_and_fixes_verified(exported, toy_catalog):
    res = diagnose(exported["dynamo"].path, toy_catalog)
    impacts = res.partition.impacts
    assert impacts[0].op_type == "Resize"  # unsupported: the compiler rejects the model, worst first
    pad_split = {res.nodes[[n.name for n in res.nodes].index(i.node)].source.module: i.splits_graph
                 for i in impacts if i.op_type == "Pad"}
    assert pad_split == {"enc": False, "dec": True}  # the decoder's pad sits between two NPU convs
    assert [i.op_type for i in impacts[1:]] == ["Pad", "Pad"] and impacts[1].splits_graph
    by_recipe = {s.recipe.id: s for s in res.fixes.suggestions}
    assert by_recipe["pad-reflect"].verification.moved_to_npu == 2
    assert by_recipe["resize-mode"].verification.moved_to_npu == 1
    assert res.fixes.combined.fully_on_npu
    text = "\n".join(render_target(res))
    import os

    assert f"{os.path.relpath(__file__)}:{line_of('LINE-PAD')}" in text
    assert "with every checked fix together: checked: the model would then be fully on the NPU" in text


def test_dynamic_shape_counterfactual(exported, toy_catalog):
    res = diagnose(exported["dynamic"].path, toy_catalog, shapes={"x": (2, 3, 16, 16)})
    assert res.summary["unsupported"] > 5
    by_recipe = {s.recipe.id: s for s in res.fixes.suggestions}
    static = by_recipe["static-shapes"]
    assert static.verification.targeted == res.summary["unsupported"]
    # fixing the shapes alone leaves the reflect pads and the bicubic resize on the CPU
    assert static.verification.fallbacks_after == 3
    assert res.fixes.combined.fully_on_npu
    assert "model input 'x' has dynamic dims (batch)" in "\n".join(res.notes)
