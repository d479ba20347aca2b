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
