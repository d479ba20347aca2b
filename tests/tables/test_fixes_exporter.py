"""Exporter artefacts against the bundled tables, on real exports: the dynamo exporter's explicit RNN
layout=0 (RKNN 2.5.0 rejects it, probed) and allowzero=1 on every Reshape (SNPE: documentation only) are
named as such, their fix is checked on the rewritten graph, and the torchscript export passes."""

from __future__ import annotations

import pytest
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.check import check_file
from pytest_npucheck.fixes import with_fixes


# -- exporter artefacts (issue 25, item 6) -----------------------------------------------------------

def _export(model, x, exporter, tmp_path):
    from pytest_npucheck.export import ExportOptions, export_model

    return export_model(model, x, ExportOptions(exporter=exporter, opset=18), cache_dir=tmp_path / exporter).path


@pytest.mark.export
def test_exporter_artefacts_are_named_their_fix_checked_and_the_other_exporter_passes(tmp_path):
    """dynamo writes LSTM layout=0 explicitly (RKNN 2.5.0 rejects it: 'Unrecognized attribute: layout', probed)
    and allowzero=1 on every Reshape (SNPE: documentation only); both fixes are checked on the rewritten
    graph, and the torchscript export of the same model passes both tables."""
    import torch

    from pytest_npucheck.report.text import render_target
    from pytest_npucheck.tables import Catalog

    class Tagger(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(8, 16, batch_first=True)
            self.fc = torch.nn.Linear(16, 4)

        def forward(self, x):
            y, _ = self.lstm(x)
            return self.fc(y.flatten(0, 1))

    torch.manual_seed(0)
    model, x = Tagger().eval(), torch.randn(1, 5, 8)
    catalog = Catalog.discover([])
    dynamo = _export(model, x, "dynamo", tmp_path)
    rknn, snpe = "rknn@2.5.0/rk3588", "snpe@2025.08/htp"
    [r] = check_file(dynamo, [rknn], catalog)
    r = with_fixes(r, dynamo, catalog.table(rknn))
    [s] = [s for s in r.fixes.suggestions if s.recipe.id == "exporter-rnn-layout"]
    assert s.verification.moved_to_npu == 1 and s.verification.fallbacks_after == 0
    text = "\n".join(render_target(r))
    assert "exporter artefact: the dynamo exporter writes the default layout=0 explicitly" in text
    assert "exporter='torchscript'" in text
    assert r.to_json()["fixes"]["suggestions"][0]["exporter_artefact"].startswith("the dynamo exporter")
    [r] = check_file(dynamo, [snpe], catalog)
    r = with_fixes(r, dynamo, catalog.table(snpe))
    [s] = r.fixes.suggestions
    assert s.recipe.id == "exporter-reshape-allowzero" and s.verification.fully_on_npu
    assert any("Reshape fallback(s) rest on vendor documentation only (doc:snpe-onnx-ops-2025.06)" in n
               for n in r.notes)
    torchscript = _export(model, x, "torchscript", tmp_path)  # the fix offered, done for real
    assert [res.passed for res in check_file(torchscript, [rknn, snpe], catalog)] == [True, True]


def test_allowzero_fix_leaves_a_reshape_whose_shape_has_a_zero(save):
    from pytest_npucheck.tables import Catalog

    catalog = Catalog.discover([])
    # an empty tensor reshaped to a shape with a real 0 (allowzero=1 matters), and a plain view
    m = make_model([helper.make_node("Reshape", ["e", "s1"], ["h"], name="keep_dim", allowzero=1),
                    helper.make_node("Reshape", ["x", "s2"], ["y"], name="explicit", allowzero=1)],
                   [("e", (0, 3, 4)), ("x", (2, 3, 4))], ["h", "y"],
                   [const("s1", [0, 12], "int64"), const("s2", [2, 12], "int64")])
    path = save(m)
    [r] = check_file(path, ["snpe@2025.08/htp"], catalog)
    r = with_fixes(r, path, catalog.table("snpe@2025.08/htp"))
    [s] = r.fixes.suggestions
    assert s.verification.moved_to_npu == 1 and s.verification.fallbacks_after == 1  # keep_dim is left as it is


@pytest.mark.export
def test_resize_align_corners_gets_a_checked_fix(tmp_path):
    import torch
    import torch.nn.functional as F

    from pytest_npucheck.tables import Catalog

    class Up(torch.nn.Module):
        def forward(self, x):
            return F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=True)

    catalog = Catalog.discover([])
    path = _export(Up(), torch.randn(1, 3, 8, 8), "dynamo", tmp_path)
    [r] = check_file(path, ["rknn@2.5.0/rk3588"], catalog)
    r = with_fixes(r, path, catalog.table("rknn@2.5.0/rk3588"))
    [s] = [s for s in r.fixes.suggestions if s.recipe.id == "resize-align-corners"]
    assert s.verification.fully_on_npu and "align_corners=False" in s.recipe.advice
