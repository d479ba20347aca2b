"""Support tables: schema validation with file and JSON path, target resolution, the bundled tables."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import TOY_TABLES

from pytest_npucheck.errors import TableError, UsageError
from pytest_npucheck.tables import Catalog, TargetSpec, bundled_tables_dir, load_table


def copy_toy(tmp_path: Path) -> Path:
    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    return root


def edit(path: Path, fn) -> None:
    data = json.loads(path.read_text())
    fn(data)
    path.write_text(json.dumps(data))


def test_every_bundled_table_is_valid(bundled_table_problems):
    cat = Catalog.discover()
    assert cat.refs, "no bundled tables found"
    assert bundled_table_problems == {}


def test_validation_manifest_is_current():
    """validated.json records every bundled table as it is now, under the schema as it is now;
    otherwise loads validate in full again (slower, never wrong)."""
    import hashlib

    from pytest_npucheck import tables

    root = bundled_tables_dir()
    doc = json.loads((root / tables.MANIFEST).read_text())
    stale = "stale: run `npucheck tables validate --write-manifest`"
    assert doc["schema_sha256"] == hashlib.sha256((root / "schema.json").read_bytes()).hexdigest(), stale
    now = {ref.path.relative_to(root).as_posix(): hashlib.sha256(ref.path.read_bytes()).hexdigest()
           for ref in Catalog.discover().refs.values()}
    assert doc["tables"] == now, stale


def test_manifest_skips_only_the_schema_pass_of_unchanged_bundled_tables(tmp_path, monkeypatch):
    from pytest_npucheck import tables

    calls = []
    real = tables._schema_problems
    monkeypatch.setattr(tables, "_schema_problems", lambda data, schema: calls.append(1) or real(data, schema))
    root = bundled_tables_dir()
    src = root / "rknn" / "2.5.0" / "rk3588.json"
    assert load_table(src, root / "schema.json").target == "rknn@2.5.0/rk3588" and calls == []
    # a full validation still runs the schema (npucheck tables validate)
    load_table(src, root / "schema.json", full=True)
    assert calls == [1]
    # one field changed: not the bytes that passed, so the schema catches it, naming the field
    data = json.loads(src.read_text())
    data["ops"]["ai.onnx:Abs"]["status"] = "maybe"
    bad = tmp_path / "rk3588.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(TableError) as err:
        load_table(bad, root / "schema.json")
    assert str(bad) in str(err.value) and "$.ops['ai.onnx:Abs'].status" in str(err.value)
    # the same bytes under another schema (a user's table dir with its own schema.json): validated in full
    calls.clear()
    schema = tmp_path / "schema.json"
    schema.write_text((root / "schema.json").read_text() + "\n")
    load_table(src, schema)
    assert calls == [1]


def test_manifest_skips_the_strict_reading_of_unchanged_bundled_tables_only(tmp_path, monkeypatch):
    """Bytes the manifest records were read strictly (duplicate keys, NaN, depth) when it was written:
    the C parser alone reads them to the same Table. Other bytes, a full validation and a schema the
    manifest does not name still get the strict reading and its clear error."""
    from pytest_npucheck import tables

    monkeypatch.setattr(tables, "_LOADED", {})  # no table kept by earlier tests of this process
    strict = []
    real = tables.parse_strict
    monkeypatch.setattr(tables, "parse_strict", lambda path, raw: strict.append(Path(path)) or real(path, raw))
    root = bundled_tables_dir()
    src = root / "rknn" / "2.5.0" / "rk3588.json"
    quick = load_table(src, root / "schema.json")
    assert strict == []
    assert load_table(src, root / "schema.json", full=True) == quick and strict == [src]
    # a duplicate key: other bytes, read strictly, the error names the file and the key
    text = src.read_text()
    dup = tmp_path / "rk3588.json"
    dup.write_text(text.replace('"toolchain":', '"toolchain": "rknn", "toolchain":', 1))
    with pytest.raises(TableError) as err:
        load_table(dup, root / "schema.json")
    assert str(dup) in str(err.value) and "duplicate key 'toolchain'" in str(err.value) and strict[-1] == dup
    schema = tmp_path / "schema.json"
    schema.write_text((root / "schema.json").read_text() + "\n")
    load_table(src, schema)
    assert strict[-1] == src and len(strict) == 3
    # a manifest that names bytes which never passed: the strict reading still gives its clear error
    broken = tmp_path / "broken.json"
    broken.write_text(text[:-200])
    monkeypatch.setattr(tables, "_prevalidated", lambda sha, schema_path: True)
    with pytest.raises(TableError) as err:
        load_table(broken, root / "schema.json")
    assert str(broken) in str(err.value) and "invalid JSON" in str(err.value) and strict[-1] == broken


def test_a_broken_or_missing_manifest_means_full_validation(tmp_path, monkeypatch):
    from pytest_npucheck import tables

    fake = tmp_path / "bundled"
    shutil.copytree(bundled_tables_dir(), fake)
    monkeypatch.setattr(tables, "bundled_tables_dir", lambda: fake)
    for content in (None, "{not json", json.dumps({"format": 99, "schema_sha256": "x", "tables": {}})):
        tables._manifest.cache_clear()
        if content is None:
            (fake / tables.MANIFEST).unlink()
        else:
            (fake / tables.MANIFEST).write_text(content)
        assert tables._manifest() == (None, frozenset())
        assert not tables._prevalidated(load_table(fake / "rknn" / "2.5.0" / "rk3588.json").sha256,
                                        fake / "schema.json")
    tables._manifest.cache_clear()


def test_toy_tables_valid(toy_catalog):
    toy = [ref for key, ref in toy_catalog.refs.items() if key[0] == "toy"]
    assert len(toy) == 3
    for ref in toy:
        toy_catalog.load(ref)


@pytest.mark.parametrize("text,expected", [
    ("toy", "toy@1.1/soc-a"),
    ("toy@1.0", "toy@1.0/soc-a"),
    ("toy@1/soc-b", "toy@1.1/soc-b"),
    ("TOY@1.1/soc-b", "toy@1.1/soc-b"),
    ("toy@1.0/soc-a2", "toy@1.0/soc-a"),
])
def test_resolve(toy_catalog, text, expected):
    assert toy_catalog.resolve(text).target == expected


@pytest.mark.parametrize("text,fragment", [
    ("nope", "unknown toolchain 'nope' in target 'nope'; available: "),
    ("toy@2.0", "unknown version '2.0' of toy in target 'toy@2.0'; available: 1.0, 1.1"),
    ("toy@1.0/soc-b", "unknown SoC 'soc-b' for toy@1.0 in target 'toy@1.0/soc-b'; available: soc-a"),
    ("toy@@1", "invalid target 'toy@@1'"),
    ("", "invalid target ''"),
])
def test_unknown_targets_list_what_exists(toy_catalog, text, fragment):
    with pytest.raises(UsageError) as info:
        toy_catalog.resolve(text)
    assert fragment in str(info.value)


def test_version_prefix_does_not_match_partial_component(toy_catalog):
    with pytest.raises(UsageError):
        toy_catalog.resolve("toy@1.")


def test_all_schema_errors_are_reported_with_path(tmp_path):
    root = copy_toy(tmp_path)
    path = root / "toy" / "1.0" / "soc-a.json"

    def break_it(d):
        d["ops"]["ai.onnx:Conv"]["status"] = "maybe"
        d["ops"]["ai.onnx:Pad"]["constraints"][0]["params"]["values"] = "constant"
        d["ops"]["ai.onnx:Relu"]["constraints"] = [{"rule": "no_such_rule", "params": {}}]
        d["ops"]["ai.onnx:Add"]["constraints"] = [{"rule": "rank", "params": {"max": 4}, "els": "cpu"}]
        d["default_verdict"] = "npu"

    edit(path, break_it)
    with pytest.raises(TableError) as info:
        load_table(path)
    text = str(info.value)
    assert str(path) in text
    for fragment in ["$.default_verdict", "$.ops['ai.onnx:Conv'].status", "$.ops['ai.onnx:Pad'].constraints[0].params.values",
                     "$.ops['ai.onnx:Relu'].constraints[0].rule", "'els' was unexpected"]:
        assert fragment in text, fragment
    assert len(info.value.problems) >= 5


def test_semantic_errors(tmp_path):
    root = copy_toy(tmp_path)
    path = root / "toy" / "1.0" / "soc-a.json"

    def break_it(d):
        d["ops"]["ai.onnx:Relu"]["source"] = "nowhere"
        d["ops"]["ai.onnx:Gemm"]["opset"] = [13, 11]
        d["patterns"][0]["nodes"][2]["after"] = ["mul2"]
        d["ops"]["ai.onnx:Conv"]["constraints"][0]["params"] = {"attr": "kernel_shape", "min": 9, "max": 3}
        d["soc"] = "soc-z"

    edit(path, break_it)
    cat = Catalog.discover([root])
    with pytest.raises(TableError) as info:
        cat.table("toy@1.0/soc-a")
    text = str(info.value)
    assert "$.ops['ai.onnx:Relu'].source: 'nowhere' is not declared" in text
    assert "$.ops['ai.onnx:Gemm'].opset: range [13, 11] is empty" in text
    assert "$.patterns[0].nodes[2].after: 'mul2' is not an earlier node id" in text
    assert "params: min 9 > max 3" in text
    assert "$.soc: 'soc-z' does not match its location" in text


@pytest.mark.parametrize("content,fragment", [
    ('{"format": 1, "format": 1}', "duplicate key 'format'"),
    ('{"format": NaN}', "non-standard JSON literal NaN"),
    ('{"format": 1', "invalid JSON"),
    ("", "invalid JSON"),
    ("version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n", "Git LFS pointer"),
])
def test_unreadable_tables(tmp_path, content, fragment):
    path = tmp_path / "t.json"
    path.write_text(content)
    with pytest.raises(TableError) as info:
        load_table(path)
    assert fragment in str(info.value) and str(path) in str(info.value)


def test_user_table_dir_overrides_bundled(tmp_path):
    bundled = Catalog.discover()
    ref = next(iter(bundled.refs.values()))
    root = tmp_path / "mine"
    dest = root / ref.toolchain / ref.version / f"{ref.soc}.json"
    dest.parent.mkdir(parents=True)
    shutil.copy(ref.path, dest)
    cat = Catalog.discover([root])
    assert cat.resolve(ref.target).path == dest


def test_missing_table_dir_is_usage_error(tmp_path):
    with pytest.raises(UsageError, match="does not exist"):
        Catalog.discover([tmp_path / "missing"])


def test_target_spec_roundtrip():
    assert str(TargetSpec.parse("rknn@2.5.0/rk3588")) == "rknn@2.5.0/rk3588"
    assert TargetSpec.parse("qnn@2.51").version == "2.51"


def test_table_sha256_is_file_hash(toy_catalog):
    import hashlib

    t = toy_catalog.table("toy@1.0")
    assert t.sha256 == hashlib.sha256(t.path.read_bytes()).hexdigest()
    assert bundled_tables_dir().name == "op_support_tables"


def test_pattern_status_and_input_positions_are_validated(tmp_path):
    root = copy_toy(tmp_path)
    path = root / "toy" / "1.0" / "soc-a.json"

    def good(d):
        d["patterns"][0]["status"] = "unsupported"
        d["patterns"][0]["nodes"][4]["at_input"] = {"mul": 0}

    edit(path, good)
    table = Catalog.discover([root]).table("toy@1.0/soc-a")
    assert table.patterns[0].status == "unsupported"
    assert table.patterns[0].positions == (("mul2", "mul", 0),)

    def bad(d):
        d["patterns"][0]["nodes"][4]["at_input"] = {"add": 1}  # not one of its `after` ids
        d["patterns"][0]["nodes"][3]["at_input"] = {"add": -1}
        d["patterns"][0]["status"] = "maybe"

    edit(path, bad)
    with pytest.raises(TableError) as info:
        Catalog.discover([root]).table("toy@1.0/soc-a")
    text = str(info.value)
    assert "$.patterns[0].nodes[4].at_input: 'add' is not one of this node's `after` ids" in text
    assert "$.patterns[0].nodes[3].at_input.add: -1 is less than the minimum of 0" in text
    assert "$.patterns[0].status: 'maybe' is not one of" in text


def test_qnn_tables_reject_the_dynamo_rmsnorm_exactly_as_probed():
    """Every q.pattern.rmsnorm probe is predicted as onnxruntime-qnn placed it (results files)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match
    from pytest_npucheck.toolchains.qnn.probe import extra_probes

    probes = {p.id: p for p in extra_probes(["q.pattern.rmsnorm"])}
    assert len(probes) == 5
    cat = Catalog.discover()
    for version in ("2.47.0", "2.49.40", "2.51.0"):
        for arch in ("v68", "v73"):
            table = cat.table(f"qnn@{version}/htp-{arch}")
            results = json.loads((Path(__file__).parents[2] / "probes" / "qnn" / version /
                                  f"htp-{arch}.fp16.extra.results.json").read_text())
            seen = {r["id"]: r["status"] for r in results["probes"] if r["id"] in probes}
            assert set(seen) == set(probes)
            for pid, status in seen.items():
                res = match(facts_from_model(probes[pid].model), table)
                assert (res.verdict == "unsupported") == (status == "session_failed"), (version, arch, pid, status)
    assert seen["q.pattern.rmsnorm.recip.w_first.f32.r3"] == "session_failed"
    assert seen["q.pattern.rmsnorm.recip.r_first.w_first.f32.r3"] == "ok"


@pytest.mark.parametrize("version", ["2.47.0", "2.49.40", "2.51.0"])
def test_qnn_pattern_probes_are_reproduced_by_the_tables(version):
    """The GELU (both Mul orders), RMSNorm and Swin window-reverse probes, as placed by
    onnxruntime-qnn (recorded results), are predicted node by node by the bundled tables."""
    from pytest_npucheck.toolchains.qnn.probe import extra_probes
    from pytest_npucheck.toolchains.qnn.table import compare, predict

    probes = {p.id: p for p in extra_probes(["q.pattern.", "q.ctx.r6.after_linear"])}
    cat = Catalog.discover()
    for arch in ("v68", "v73"):
        table = cat.table(f"qnn@{version}/htp-{arch}")
        results = json.loads((Path(__file__).parents[2] / "probes" / "qnn" / version /
                              f"htp-{arch}.fp16.extra.results.json").read_text())
        # the dynamo RMSNorm family (q.pattern.dynamo_rmsnorm.*) was probed on 2.51.0 only
        # the GELU forms beside the Erf chain (x_half_first, no_half) were probed on 2.51.0 only and
        # are checked, with the one the patterns cannot express, in test_qnn_gelu_forms_probed.py
        wanted = {pid for pid in probes if (version == "2.51.0" or not pid.startswith("q.pattern.dynamo_rmsnorm."))
                  and ".x_half_first" not in pid and ".no_half." not in pid}
        recs = [r for r in results["probes"] if r["id"] in wanted]
        assert len(recs) == len(wanted) >= 9
        for rec in recs:
            diff = compare(predict(table, probes[rec["id"]].model), rec["status"], rec["placement"], rec["focus"])
            assert diff == [], (version, arch, rec["id"], diff)


# -- round two (issue 27): the bundled schema always, regular files only ---------------------------

@pytest.mark.reliability("S3")
def test_a_schema_json_in_a_user_table_dir_is_ignored(tmp_path):
    """A user directory's schema.json replaced the bundled schema: `{}` let a malformed table through
    to raw AttributeError/TypeError tracebacks. Every table is validated by the bundled schema."""
    root = copy_toy(tmp_path)
    (root / "schema.json").write_text("{}")
    table = root / "toy" / "1.0" / "soc-a.json"
    edit(table, lambda d: (d.update(ops=[1, 2], default_verdict=5), d["opsets"].update({"ai.onnx": "x"})))
    with pytest.raises(TableError) as info:
        Catalog.discover([root]).table("toy@1.0/soc-a")
    text = str(info.value)
    assert str(table) in text and "$.ops: [1, 2] is not of type 'object'" in text and "$.default_verdict" in text
    # a schema that would reject a valid table is not read either
    (root / "schema.json").write_text(json.dumps({"properties": {"description": {"pattern": "^(a+)+$"}}}))
    shutil.copy(TOY_TABLES / "toy" / "1.0" / "soc-a.json", table)
    assert Catalog.discover([root]).table("toy@1.0/soc-a").description.startswith("A small")


@pytest.mark.reliability("S3")
def test_a_redos_pattern_in_a_user_schema_cannot_hang_the_validation(tmp_path):
    """`"pattern": "^(a+)+$"` against a long description hung `npucheck --tables DIR check` (exponential
    backtracking); the user's schema is not read, so the check ends (the timeout only stops a hang)."""
    import subprocess
    import sys

    from conftest import make_model
    import onnx
    from onnx import helper

    root = copy_toy(tmp_path)
    (root / "schema.json").write_text(json.dumps({"properties": {"description": {"pattern": "^(a+)+$"}}}))
    edit(root / "toy" / "1.0" / "soc-a.json", lambda d: d.update(description="a" * 40 + "!"))
    model = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu")], [("x", (1, 4))], ["y"]), model)
    try:
        res = subprocess.run([sys.executable, "-m", "pytest_npucheck.cli", "--tables", str(root), "check", str(model),
                              "--target", "toy@1.0/soc-a"], capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        pytest.fail("the validation hung on the user schema's pattern")
    assert res.returncode in (0, 1) and "Traceback" not in res.stderr, res.stderr
    assert "toy@1.0/soc-a" in res.stdout


@pytest.mark.reliability("S4")
@pytest.mark.parametrize("kind", ["fifo", "dev_zero_link", "fifo_catalog"])
def test_table_files_must_be_regular_files(tmp_path, kind):
    """A table (or catalog.json) that is a FIFO hung the read; a link to /dev/zero read until MemoryError.
    Both are a table error naming the file; the run does not hang."""
    root = copy_toy(tmp_path)
    if kind == "fifo_catalog":
        bad = root / "catalog.json"
        bad.unlink()
        os.mkfifo(bad)
        with pytest.raises(TableError) as info:
            Catalog.discover([root])
    else:
        bad = root / "toy" / "1.0" / "soc-b.json"
        if kind == "fifo":
            os.mkfifo(bad)
        else:
            os.symlink("/dev/zero", bad)
        cat = Catalog.discover([root])
        with pytest.raises(TableError) as info:
            cat.table("toy@1.0/soc-b")
    text = str(info.value)
    assert str(bad) in text
    assert ("is a FIFO (named pipe), not a regular file" if "fifo" in kind else "is a character device") in text
