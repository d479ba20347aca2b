"""Fix suggestions: each recipe's rewrite is checked by re-running the verdict."""

from __future__ import annotations

import numpy as np
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.check import check_file
from pytest_npucheck.fixes import load_recipes, with_fixes


def fixed(toy_catalog, path, target="toy@1.0/soc-a", **kw):
    [res] = check_file(path, [target], toy_catalog)
    return with_fixes(res, path, toy_catalog.table(target), **kw)


def test_recipes_file_is_valid():
    ids = [r.id for r in load_recipes()]
    assert len(ids) == len(set(ids)) and "pad-reflect" in ids


def test_reflect_pad_fix_is_verified(toy_catalog, save):
    m = make_model([helper.make_node("Pad", ["x", "pads"], ["y"], name="/down1/Pad", mode="reflect")],
                   [("x", (1, 3, 8, 8))], ["y"], [const("pads", [0, 0, 1, 1, 0, 0, 1, 1], "int64")])
    res = fixed(toy_catalog, save(m))
    [s] = res.fixes.suggestions
    assert s.recipe.id == "pad-reflect" and s.nodes == ("/down1/Pad",)
    assert s.verification.fully_on_npu and s.verification.moved_to_npu == 1
    doc = res.to_json()["fixes"]
    assert doc["suggestions"][0]["verified"]["fallbacks_after"] == 0


def test_gelu_erf_fix_checks_the_replacement_ops(toy_catalog, save, tmp_path):
    # a lone Erf (not the fused GELU pattern) is CPU-only in the toy table; its tanh form is Mul/Add/Tanh
    m = make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [("x", (1, 16))], ["y"])
    path = save(m)
    res = fixed(toy_catalog, path)
    by_id = {s.recipe.id: s for s in res.fixes.suggestions}
    assert by_id["gelu-erf-to-tanh"].verification.fully_on_npu
    assert by_id["cpu-only-op"].verification is None  # advice only: nothing to rewrite
    # the same fix against a table without Tanh: the check must say the fix does not reach the NPU
    import json
    import shutil

    from conftest import TOY_TABLES
    from pytest_npucheck.tables import Catalog

    root = tmp_path / "t"
    shutil.copytree(TOY_TABLES, root)
    p = root / "toy" / "1.0" / "soc-a.json"
    d = json.loads(p.read_text())
    del d["ops"]["ai.onnx:Tanh"]
    p.write_text(json.dumps(d))
    res = fixed(Catalog.discover([root]), path)
    v = {s.recipe.id: s for s in res.fixes.suggestions}["gelu-erf-to-tanh"].verification
    assert not v.fully_on_npu and v.fallbacks_after >= 1


def test_tanh_rewrite_is_numerically_close_to_erf(tmp_path):
    import onnx
    from onnx.reference import ReferenceEvaluator

    from pytest_npucheck.fixes import _rewrite

    m = make_model([helper.make_node("Erf", ["x"], ["y"], name="erf")], [("x", (64,))], ["y"])
    recipe = next(r for r in load_recipes() if r.id == "gelu-erf-to-tanh")
    work = onnx.ModelProto()
    work.CopyFrom(m)
    _rewrite(work, recipe, {"erf"}, None, None)  # type: ignore[arg-type]
    x = np.linspace(-4, 4, 64, dtype=np.float32)
    [exact] = ReferenceEvaluator(m).run(None, {"x": x})
    [approx] = ReferenceEvaluator(work).run(None, {"x": x})
    gelu = lambda e: 0.5 * (x * np.sqrt(2)) * (1 + e)  # noqa: E731  (z = x / sqrt(2))
    assert np.max(np.abs(gelu(exact) - gelu(approx))) < 1e-3


def test_static_shape_fix_uses_example_shapes(toy_catalog, save):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", ("batch", 4))], ["y"])
    res = fixed(toy_catalog, save(m), input_shapes={"x": (2, 4)})
    [s] = res.fixes.suggestions
    assert s.recipe.id == "static-shapes" and s.verification.fully_on_npu


def test_unverifiable_recipe_says_so_and_combined_check(toy_catalog, save):
    nodes = [helper.make_node("Pad", ["x", "pads"], ["p"], name="pad", mode="reflect"),
             helper.make_node("TopK", ["p", "k"], ["v", "i"], name="topk", axis=1)]
    m = make_model(nodes, [("x", (1, 16))], ["v", "i"],
                   [const("pads", [0, 1, 0, 1], "int64"), const("k", [3], "int64")])
    res = fixed(toy_catalog, save(m))
    by_id = {s.recipe.id: s for s in res.fixes.suggestions}
    assert by_id["pad-reflect"].verification.moved_to_npu == 1
    from pytest_npucheck.report.text import render_target

    text = "\n".join(render_target(res))
    assert "fixes (" in text and "checked: 1 of 1 node(s) move to the NPU" in text


def test_passing_result_gets_no_fixes(toy_catalog, save):
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y"])
    assert fixed(toy_catalog, save(m)).fixes is None


# -- exporter artefacts (issue 25, item 6) -----------------------------------------------------------

def _export(model, x, exporter, tmp_path):
    from pytest_npucheck.export import ExportOptions, export_model

    return export_model(model, x, ExportOptions(exporter=exporter, opset=18), cache_dir=tmp_path / exporter).path


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
