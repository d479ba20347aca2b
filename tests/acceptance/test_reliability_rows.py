"""One test per row of docs/reliability.md not already guarded elsewhere, and the coverage check.

Each test carries ``@pytest.mark.reliability("<row>")``. ``test_every_row_has_a_test`` reads the
row table of docs/reliability.md and fails when a row names no test, or names a test that does not
exist, or when a marked row is missing from the doc.
"""

from __future__ import annotations

import ast
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import REPO, TOY_TABLES, make_model

from pytest_npucheck.errors import ModelError, NpuCheckError, TableError
from pytest_npucheck.golden import GoldenError, GoldenStatus, GoldenStore, read_golden
from pytest_npucheck.numerics import Policy, Tolerance, compare_arrays, compare_outputs, policy_for
from pytest_npucheck.tables import Catalog, load_table

ROWS = ([f"A{i}" for i in range(1, 14)] + [f"B{i}" for i in range(1, 13)] + [f"C{i}" for i in range(1, 6)]
        + [f"D{i}" for i in range(1, 14)] + [f"E{i}" for i in range(1, 11)] + [f"F{i}" for i in range(1, 12)])
ROWS += ["S1", "S2", "S3", "S4", "S5", "S6", "S7", "S8", "S9", "S10"]  # issue 27 round two, data and system safety (docs/reliability.md)
ROWS += [f"G{i}" for i in range(11, 23)]  # issue 27, round two: G<item> for items 11-22
rel = pytest.mark.reliability


def toy_copy(tmp_path: Path) -> Path:
    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    return root


def edit_toy(tmp_path: Path, change) -> Path:
    path = toy_copy(tmp_path) / "toy" / "1.0" / "soc-a.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=1))
    return path


def relu_model(path: Path) -> Path:
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"]), path)
    return path


# -- A: tables and configuration ------------------------------------------------------------------

@rel("A2")
def test_a2_wrong_types_every_error_with_its_path(tmp_path):
    def change(d):
        d["opsets"]["ai.onnx"] = ["13", 20]
        d["default_verdict"] = 5

    with pytest.raises(TableError) as info:
        load_table(edit_toy(tmp_path, change))
    text = str(info.value)
    assert "$.opsets['ai.onnx'][0]: '13' is not of type 'integer'" in text
    assert "$.default_verdict" in text and len(info.value.problems) >= 2


@rel("A3")
def test_a3_syntax_error_gives_line_and_column(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{\n  "format": 1,\n  "ops": {},\n}\n')
    with pytest.raises(TableError) as info:
        load_table(path)
    assert str(path) in str(info.value) and re.search(r"line 4 column 1", str(info.value))


@rel("A6", "A7")
def test_a6_a7_yaml_tables_are_refused_never_parsed(tmp_path):
    root = toy_copy(tmp_path)
    sentinel = tmp_path / "sentinel"
    (root / "toy" / "1.0" / "soc-c.yaml").write_text(
        f"!!python/object/apply:os.system ['touch {sentinel}']\nstatus: no\nopset: 1e3\n")
    with pytest.raises(TableError) as info:
        Catalog.discover([root])
    assert "soc-c.yaml" in str(info.value) and "YAML support tables are not read" in str(info.value)
    assert not sentinel.exists()
    # A7: a YAML-1.1-style value in JSON stays a string and fails the schema with its path
    with pytest.raises(TableError, match=r"\$\.ops\['ai.onnx:Conv'\]\.status"):
        load_table(edit_toy(tmp_path / "b", lambda d: d["ops"]["ai.onnx:Conv"].update(status="no")))


@rel("A8")
def test_a8_one_target_one_file_and_directory_order_decides(tmp_path):
    root = toy_copy(tmp_path)
    shutil.copy(root / "toy" / "1.0" / "soc-a.json", root / "toy" / "1.0" / "SOC-A.json")
    with pytest.raises(TableError, match="same target toy@1.0/soc-a"):
        Catalog.discover([root])
    (root / "toy" / "1.0" / "SOC-A.json").unlink()
    other = tmp_path / "other"
    shutil.copytree(root, other)
    # documented precedence: the later directory wins, whatever the file system lists first
    assert Catalog.discover([root, other]).resolve("toy@1.0/soc-a").path.is_relative_to(other)
    assert Catalog.discover([other, root]).resolve("toy@1.0/soc-a").path.is_relative_to(root)


@rel("A9")
def test_a9_missing_or_empty_table_never_means_everything_unsupported(tmp_path):
    with pytest.raises(NpuCheckError, match="does not exist"):
        Catalog.discover([tmp_path / "nowhere"])
    root = toy_copy(tmp_path)
    (root / "toy" / "1.0" / "soc-a.json").write_text("")
    with pytest.raises(TableError, match="soc-a.json"):
        Catalog.discover([root]).table("toy@1.0/soc-a")


@rel("A10")
def test_a10_bundled_schema_is_valid_and_rejects_known_bad_tables(tmp_path):
    import jsonschema

    from pytest_npucheck.tables import bundled_tables_dir

    schema = json.loads((bundled_tables_dir() / "schema.json").read_text())
    jsonschema.validators.validator_for(schema).check_schema(schema)
    bad = [lambda d: d.pop("ops"), lambda d: d.update(extra=1), lambda d: d["ops"]["ai.onnx:Conv"].update(statu="npu"),
           lambda d: d["generic_constraints"][0].update(rule=3), lambda d: d.update(default_verdict="maybe")]
    for k, change in enumerate(bad):
        with pytest.raises(TableError):
            load_table(edit_toy(tmp_path / str(k), change))


@rel("A11")
@pytest.mark.parametrize("opsets", [[13.0, 20], [0, 20], [-1, 20]])
def test_a11_opset_fractions_zero_and_negative_are_rejected(tmp_path, opsets):
    with pytest.raises(TableError, match=r"\$\.opsets\['ai.onnx'\]"):
        load_table(edit_toy(tmp_path, lambda d: d["opsets"].update({"ai.onnx": opsets})))


@rel("A12")
def test_a12_bad_tolerances_are_errors_naming_the_file(tmp_path):
    from pytest_npucheck.budget import BudgetError, load_budgets

    def doc(default):
        return {"format": 1, "releases": {"1.0.0": {"tests": {"t*": {"precision": "fp16", "default": default}}}}}

    for k, default in enumerate([{"rtol": -1}, {"atol": "1e-3"}]):
        p = tmp_path / f"b{k}.json"
        p.write_text(json.dumps(doc(default)))
        with pytest.raises(BudgetError) as info:
            load_budgets(p)
        assert str(p) in str(info.value)
    p = tmp_path / "nan.json"
    p.write_text(json.dumps(doc({"rtol": 1e-3})).replace("0.001", "NaN"))
    with pytest.raises(NpuCheckError, match="NaN"):
        load_budgets(p)
    with pytest.raises(ValueError, match="rtol"):
        Tolerance(rtol=float("nan"))
    # only rtol given: atol is the precision policy's, stated in the policy; never silently zero
    p = tmp_path / "rtol.json"
    p.write_text(json.dumps(doc({"rtol": 1e-3})))
    tol = load_budgets(p).for_test("1.0.0", "t1").policy.default
    assert tol.rtol == 1e-3 and tol.peak_atol == policy_for("fp16").default.peak_atol > 0


# -- B: ONNX files --------------------------------------------------------------------------------

@rel("B1")
@pytest.mark.parametrize("content", [b"", os.urandom(4096), None])
def test_b1_empty_random_truncated_files_fail_naming_the_file(tmp_path, content):
    from pytest_npucheck.check import check_file

    path = tmp_path / "m.onnx"
    if content is None:
        content = relu_model(tmp_path / "ok.onnx").read_bytes()[:-7]
    path.write_bytes(content)
    with pytest.raises(ModelError) as info:
        check_file(path, ["rknn@2.5.0/rk3588"])
    assert str(path) in str(info.value)


@rel("B2")
def test_b2_git_lfs_pointers_say_git_lfs_pull(tmp_path):
    from pytest_npucheck.check import check_file

    pointer = b"version https://git-lfs.github.com/spec/v1\noid sha256:" + b"0" * 64 + b"\nsize 123456\n"
    model, golden = tmp_path / "m.onnx", tmp_path / "g.npz"
    model.write_bytes(pointer)
    golden.write_bytes(pointer)
    with pytest.raises(ModelError, match="Git LFS pointer.*git lfs pull"):
        check_file(model, ["rknn@2.5.0/rk3588"])
    with pytest.raises(GoldenError, match="Git LFS pointer.*git lfs pull"):
        read_golden(golden)


@rel("B7")
def test_b7_external_weights_are_never_read(tmp_path):
    from unit.test_reliability import external_model  # the layer directories are packages (tests/README.md)

    from pytest_npucheck.check import check_file

    path = external_model(tmp_path, data=b"\xff" * 4096, length=4096)  # garbage of the right size
    [r] = check_file(path, ["rknn@2.5.0/rk3588"])
    assert [n.op_type for n in r.nodes] == ["Add"]
    from pytest_npucheck.check import graph_facts

    assert graph_facts(path).tensor("w").value is None  # the values were not loaded


@rel("B9")
def test_b9_unknown_shapes_are_never_supported(tmp_path):
    from pytest_npucheck.check import check_file

    m = make_model([helper.make_node("Frob", ["x"], ["h"], name="frob", domain="com.x"),
                    helper.make_node("Relu", ["h"], ["y"], name="relu")], [("x", (1, 4))], ["y"])
    m.opset_import.append(helper.make_opsetid("com.x", 1))
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    for target in ("rknn@2.5.0/rk3588", "qnn@2.51.0/htp-v73"):
        [r] = check_file(path, [target])
        relu = next(n for n in r.nodes if n.name == "relu")
        assert relu.verdict != "npu" and "unknown shape" in relu.reasons[0].message
        assert not r.passed


@rel("B12")
def test_b12_no_opset_import_or_unsupported_ir_version_fail_explicitly(tmp_path):
    from pytest_npucheck.check import check_file

    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"])
    del m.opset_import[:]
    onnx.save(m, tmp_path / "a.onnx")
    with pytest.raises(ModelError, match="imports no opset of the default ONNX domain"):
        check_file(tmp_path / "a.onnx", ["rknn@2.5.0/rk3588"])
    m = make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"])
    m.ir_version = 99
    onnx.save(m, tmp_path / "b.onnx")
    with pytest.raises(ModelError, match="unsupported ir_version 99"):
        check_file(tmp_path / "b.onnx", ["rknn@2.5.0/rk3588"])


# -- C: export ------------------------------------------------------------------------------------

@rel("C4")
def test_c4_an_unreadable_exported_file_is_an_export_error(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    from pytest_npucheck import export

    def bad_export(model, args, kwargs, options, plan, path):
        Path(path).write_bytes(b"\x08\x07garbage that is not a model" * 3)

    monkeypatch.setattr(export, "_run_torchscript", bad_export)
    with pytest.raises(export.ExportError, match="not a readable ONNX model"):
        export.export_model(torch.nn.Linear(2, 2), torch.zeros(1, 2), export.ExportOptions(exporter="torchscript"),
                            cache_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # nothing published, no temp dir left


# -- D: goldens -----------------------------------------------------------------------------------

OUT = {"y": np.arange(6, dtype=np.float32).reshape(2, 3)}
FEEDS = {"x": np.ones((2, 3), np.float32)}


@rel("D1")
def test_d1_missing_golden_fails_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("CI", "true")
    res = GoldenStore(tmp_path).check("t::a", OUT, "fp32", FEEDS)
    assert res.status is GoldenStatus.MISSING and not res.passed
    assert "--npu-update-golden" in res.message
    assert list(tmp_path.iterdir()) == []


@rel("D4")
def test_d4_pickled_golden_never_runs_code(tmp_path):
    sentinel = tmp_path / "sentinel"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {sentinel}",))

    store = GoldenStore(tmp_path)
    path = store.path_for("t::a")
    path.parent.mkdir(parents=True, exist_ok=True)
    buf = io.BytesIO()
    np.savez(buf, **{"output/y": np.array([Evil()], dtype=object)}, allow_pickle=True)
    path.write_bytes(buf.getvalue())
    with pytest.raises(GoldenError):
        store.load("t::a")
    assert not sentinel.exists()


@rel("D5")
def test_d5_forged_huge_shape_is_refused_before_allocation(tmp_path):
    store = GoldenStore(tmp_path)
    path = store.save("t::a", FEEDS, OUT)
    raw = io.BytesIO(path.read_bytes())
    out = io.BytesIO()
    with zipfile.ZipFile(raw) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info)
            if info.filename == "output/y.npy":
                data = data.replace(b"(2, 3)", b"(10**12,)"[:0] + b"(999999999999,)")
            zout.writestr(info.filename, data)
    path.write_bytes(out.getvalue())
    with pytest.raises(GoldenError, match="too large or invalid|corrupt"):
        store.load("t::a")


@rel("D7")
@pytest.mark.parametrize("a,b", [((3,), (1,)), ((0,), (1,)), ((2, 3), (3,))])
def test_d7_shapes_never_broadcast(a, b):
    c = compare_arrays(np.zeros(a, np.float32), np.zeros(b, np.float32), Tolerance())
    assert not c.passed and f"shape mismatch: reference {list(a)} vs candidate {list(b)}" in c.reasons[0]


@rel("D8")
@pytest.mark.parametrize("a,b", [("float32", "float16"), ("float32", "float64"), ("int64", "int32"), ("bool", "uint8")])
def test_d8_dtype_mismatches_fail(a, b):
    assert not compare_arrays(np.zeros(3, a), np.zeros(3, b), Tolerance()).passed


@rel("D9")
def test_d9_golden_symlink_out_of_the_root_is_refused(tmp_path):
    canary = tmp_path / "canary.npz"
    canary.write_bytes(b"CANARY")
    root = tmp_path / "goldens"
    store = GoldenStore(root)
    path = store.path_for("t::a")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(canary, path)
    with pytest.raises(NpuCheckError):
        store.check("t::a", OUT, "fp32", FEEDS, update=True)
    assert canary.read_bytes() == b"CANARY"


@rel("D10")
@pytest.mark.parametrize("test_id", ["a/../../b::c", "t.py::test[/etc/passwd]", "t.py::test[\u00e9\u4e2d]",
                                     "t.py::test[" + "x" * 400 + "]", "..", "t::a::b[c]"])
def test_d10_golden_names_stay_inside_the_root(tmp_path, test_id):
    store = GoldenStore(tmp_path / "g")
    path = store.path_for(test_id)
    assert path.parent == tmp_path / "g" and len(path.name.encode()) <= 255
    assert path != store.path_for(test_id + "x")
    store.save(test_id, FEEDS, OUT)
    assert store.load(test_id).outputs["y"].tolist() == OUT["y"].tolist()


@rel("D11")
def test_d11_parallel_writers_of_one_golden_never_interleave(tmp_path):
    store = GoldenStore(tmp_path)
    assert len({store.path_for(f"t.py::test[{i}]") for i in range(200)}) == 200  # no two ids share a file
    code = ("import sys, numpy as np\nfrom pytest_npucheck.golden import GoldenStore\n"
            "v = float(sys.argv[2])\nfor _ in range(15):\n"
            "    GoldenStore(sys.argv[1]).save('t::a', {'x': np.full(50000, v, 'f4')}, {'y': np.full(50000, v, 'f4')})\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(tmp_path), str(v)]) for v in range(4)]
    assert all(p.wait(timeout=300) == 0 for p in procs)
    g = store.load("t::a")
    v = g.outputs["y"][0]
    assert (g.outputs["y"] == v).all() and (g.inputs["x"] == v).all()


@rel("D13")
def test_d13_nonfinite_outputs_are_not_written_as_golden(tmp_path):
    bad = {"y": np.array([1.0, np.nan, np.inf], np.float32)}
    store = GoldenStore(tmp_path)
    with pytest.raises(GoldenError, match=r"'y' has 1 NaN and 1 inf, the first at index \(1,\)"):
        store.check("t::a", bad, "fp32", FEEDS, update=True)
    assert not store.path_for("t::a").exists()
    allowed = policy_for("fp32").with_overrides(outputs={"y": {"allow_nonfinite": True}})
    assert store.check("t::a", bad, allowed, FEEDS, update=True).status is GoldenStatus.WRITTEN


# -- E: numerics ----------------------------------------------------------------------------------

@rel("E4")
def test_e4_fp16_extremes_are_compared_in_float64():
    ref = np.array([65504.0, -65504.0], np.float16)
    c = compare_arrays(ref, np.array([65504.0, -65472.0], np.float16), Tolerance(atol=0, peak_atol=1e9, rtol=1))
    assert c.to_json()["metrics"]["max_abs"] == 32.0  # no overflow to inf in the subtraction
    sat = compare_arrays(np.array([np.inf], np.float16), np.array([65504.0], np.float16), Tolerance())
    assert not sat.passed


@rel("E7")
def test_e7_tiny_values_do_not_pass_silently():
    assert not compare_arrays(np.array([1e-10]), np.array([2e-10]), policy_for("fp32").default).passed


@rel("E9")
def test_e9_outputs_are_matched_by_name_not_order():
    ref = {"a": np.zeros(2), "b": np.ones(2)}
    assert compare_outputs(ref, {"b": np.ones(2), "a": np.zeros(2)}, policy_for("fp32")).passed
    assert not compare_outputs(ref, {"a": np.ones(2), "b": np.zeros(2)}, policy_for("fp32")).passed


@rel("E10")
def test_e10_repeated_runs_give_the_same_outputs(tmp_path):
    from pytest_npucheck.emulate import random_inputs, run_model

    m = make_model([helper.make_node("MatMul", ["x", "x2"], ["h"]), helper.make_node("Softmax", ["h"], ["y"])],
                   [("x", (8, 64)), ("x2", (64, 8))], ["y"])
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    feeds = random_inputs(path, 7)
    runs = [run_model(path, feeds)["y"] for _ in range(5)]
    assert all(np.array_equal(runs[0], r) for r in runs[1:])  # one ORT thread: bit-identical


# -- F: runtime and CI ----------------------------------------------------------------------------

@rel("F1")
def test_f1_ort_session_failure_names_the_ort_error(tmp_path):
    from pytest_npucheck.emulate import EmulationError, run_model

    m = make_model([helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["y"])],
                   [("x", (1, 4))], ["y"])  # two producers of 'y'
    path = tmp_path / "m.onnx"
    onnx.save(m, path)
    with pytest.raises(EmulationError, match="ONNX Runtime cannot load the model.*(INVALID_GRAPH|Duplicate|y)"):
        run_model(path, {"x": np.zeros((1, 4), np.float32)})


@rel("F3")
@pytest.mark.parametrize("where", ["dir", "under_file"])
def test_f3_unwritable_report_path_is_a_usage_error_before_tests(pytester, where):
    pytester.makepyfile("def test_a():\n    assert True\n")
    (pytester.path / "afile").write_text("x")
    (pytester.path / "adir").mkdir()
    target = "adir" if where == "dir" else "afile/r.json"
    res = pytester.runpytest_inprocess(f"--npu-report=json:{target}")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    assert "--npu-report" in res.stderr.str() and "passed" not in res.stdout.str()


def _calls(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            base = getattr(f.value, "id", "") if isinstance(f, ast.Attribute) else ""
            out.append((f"{base}.{name}" if base else name, node))
    return out


@rel("F5")
def test_f5_no_unpickling_of_user_files_anywhere_in_the_package():
    """No torch.load, pickle.load(s) or np.load(allow_pickle=True) on files (numpy's default is
    allow_pickle=False); isolate.py unpickles only what its own forked child sent."""
    problems = []
    for path in sorted((REPO / "pytest_npucheck").rglob("*.py")):
        for name, call in _calls(ast.parse(path.read_text())):
            kw = {k.arg: k.value for k in call.keywords}
            if name in ("torch.load", "load") and "weights_only" not in kw and name == "torch.load":
                problems.append(f"{path.name}: torch.load")
            if name in ("pickle.load", "pickle.loads", "marshal.loads", "yaml.load"):
                if not (path.name == "isolate.py" and name == "pickle.loads"):
                    problems.append(f"{path.name}: {name}")
            if name in ("np.load", "numpy.load"):
                ap = kw.get("allow_pickle")
                if ap is not None and not (isinstance(ap, ast.Constant) and ap.value is False):
                    problems.append(f"{path.name}:{call.lineno}: np.load with allow_pickle")
    assert problems == []


@rel("F6")
def test_f6_inputs_are_the_same_under_any_hash_seed(tmp_path):
    path = relu_model(tmp_path / "m.onnx")
    code = ("import sys, hashlib\nfrom pytest_npucheck.emulate import random_inputs, seed_for\n"
            "f = random_inputs(sys.argv[1], seed_for('tests/t.py::test_x[a]'))\n"
            "print(seed_for('tests/t.py::test_x[a]'), hashlib.sha256(f['x'].tobytes()).hexdigest())\n")
    outs = {subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("0", "1", "12345")}
    assert len(outs) == 1


@rel("F7")
def test_f7_catalog_order_does_not_depend_on_creation_order(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root, socs in ((a, ["soc-z", "soc-m", "soc-a"]), (b, ["soc-a", "soc-m", "soc-z"])):
        for soc in socs:
            dest = root / "toy" / "9.0" / f"{soc}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            doc = json.loads((TOY_TABLES / "toy" / "1.0" / "soc-a.json").read_text())
            doc.update(version="9.0", soc=soc)
            dest.write_text(json.dumps(doc))
    la = [k for k in Catalog.discover([a]).refs if k[1] == "9.0"]
    lb = [k for k in Catalog.discover([b]).refs if k[1] == "9.0"]
    assert la == lb == sorted(la)


@rel("F10")
def test_f10_results_record_the_hash_of_every_input(tmp_path, toy_catalog):
    import hashlib

    from pytest_npucheck.check import check_file

    [r] = check_file(relu_model(tmp_path / "m.onnx"), ["toy@1.0/soc-a"], toy_catalog)
    table = r.to_json()["table"]
    assert table["sha256"] == hashlib.sha256((TOY_TABLES / "toy" / "1.0" / "soc-a.json").read_bytes()).hexdigest()
    store = GoldenStore(tmp_path / "g")
    store.save("t::a", FEEDS, OUT)
    res = store.check("t::a", OUT, "fp32", FEEDS).to_json()
    assert res["sha256"] == hashlib.sha256(store.path_for("t::a").read_bytes()).hexdigest()


# -- coverage of the rows -------------------------------------------------------------------------

def _marked_rows() -> dict[str, list[str]]:
    rows: dict[str, list[str]] = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            for dec in node.decorator_list:
                if isinstance(dec, ast.Call) and getattr(dec.func, "attr", getattr(dec.func, "id", "")) in (
                        "reliability", "rel"):
                    for arg in dec.args:
                        if isinstance(arg, ast.Constant):
                            rows.setdefault(arg.value, []).append(f"{path.name}::{node.name}")
    return rows


def _doc_rows() -> dict[str, list[str]]:
    """Row id -> the tests the docs name for it (``file.py::test_name`` in backticks)."""
    text = (REPO / "docs" / "reliability.md").read_text()
    rows = {}
    for line in text.splitlines():
        m = re.match(r"\|\s*([A-Z]\d{1,2})\s*\|", line)
        if m:
            rows[m.group(1)] = re.findall(r"`(test_\w+\.py::test_\w+)`", line)
    return rows


def test_every_row_has_a_test():
    doc = _doc_rows()
    assert sorted(doc) == sorted(ROWS), "docs/reliability.md must list every row A1..F11 once"
    defined = {}
    for path in sorted((REPO / "tests").rglob("test_*.py")):
        defined[path.name] = {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}
    missing = [r for r in ROWS if not doc[r]]
    dangling = [f"{r}: {t}" for r in ROWS for t in doc[r]
                if t.split("::")[1] not in defined.get(t.split("::")[0], set())]
    marked = _marked_rows()
    unlisted = [f"{r}: {t}" for r, tests in marked.items() for t in tests if t not in doc.get(r, [])]
    assert not missing, f"rows without a test in docs/reliability.md: {missing}"
    assert not dangling, f"docs/reliability.md names tests that do not exist: {dangling}"
    assert not unlisted, f"marked tests missing from the docs/reliability.md row table: {unlisted}"
    assert set(marked) <= set(ROWS)


BAD_CONFIGS = [
    ("baseline", {"npucheck-baseline.json": '{"format": 1, "entries": [{"test": 1}]}'}, [],
     ["npucheck-baseline.json", "$.entries.0.test"]),
    ("baseline-dup", {"npucheck-baseline.json": '{"format": 1, "format": 1, "entries": []}'}, [],
     ["npucheck-baseline.json", "duplicate key 'format'"]),
    ("budgets", {"npu-budgets.json": '{"format": 1, "releases": {"x": 5}}'}, [], ["npu-budgets.json", "releases"]),
    ("budgets-nan", {"npu-budgets.json": '{"format": NaN, "releases": {}}'}, [], ["npu-budgets.json", "NaN"]),
    ("report", {}, ["--npu-report=xml:r.xml"], ["--npu-report"]),
    ("timeout", {"pytest.ini": "[pytest]\nnpu_timeout = soon\n"}, [], ["npu_timeout"]),
    ("memory", {}, ["--npu-memory-limit=lots"], ["npu_memory_limit"]),
    ("oracle", {"pytest.ini": "[pytest]\nnpu_oracle = maybe\n"}, [], ["maybe"]),
]  # an unknown target: test_plugin.py::test_unknown_target_is_a_usage_error_before_any_test_runs


@pytest.mark.parametrize("files,args,fragments", [c[1:] for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_bad_configuration_stops_the_run_before_any_test(pytester, files, args, fragments):
    """Section 9 'config error quality': exit code 4, no test executed, the file or option named."""
    pytester.makepyfile(test_plain="def test_a():\n    open('ran', 'w').close()\n")
    for name, text in files.items():
        (pytester.path / name).write_text(text)
    res = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", *args)
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text
    assert not (pytester.path / "ran").exists()
    assert "INTERNALERROR" not in text
    for fragment in fragments:
        assert fragment in text, (fragment, text)
