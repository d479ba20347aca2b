"""`npucheck tables diff`: what changed between two support tables.

The toy pair in tests/data/tables_diff (difftoy 1.0 -> 2.0) carries one change of each kind; the
real committed QNN tables are compared with expectations derived by reading both JSON files
directly (not through the loader or the diff module).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_npucheck.cli import main
from pytest_npucheck.tabletools.docs import describe
from pytest_npucheck.tables import Catalog, bundled_tables_dir
from pytest_npucheck.tabletools.diff import GROUPS, diff_tables, render_md, render_text

DIFF_TABLES = Path(__file__).parents[1] / "data" / "tables_diff"


@pytest.fixture(scope="module")
def catalog():
    return Catalog.discover([DIFF_TABLES])


@pytest.fixture(scope="module")
def toy(catalog):
    return diff_tables(catalog.table("difftoy@1.0"), catalog.table("difftoy@2.0"))


def _by(diff, kind, subject):
    hits = [c for c in diff.changes if c.kind == kind and c.subject == subject]
    assert len(hits) == 1, (kind, subject, [(c.kind, c.subject) for c in diff.changes])
    return hits[0]


# -- one change of each kind -------------------------------------------------------------------

@pytest.mark.parametrize("kind,subject,group", [
    ("op_added", "ai.onnx:Sigmoid", "newly_supported"),
    ("status", "ai.onnx:Exp", "newly_supported"),
    ("pattern_added", "pattern gelu_erf_v2", "newly_supported"),
    ("op_removed", "ai.onnx:Tanh", "no_longer_supported"),
    ("status", "ai.onnx:Floor", "no_longer_supported"),
    ("pattern_removed", "pattern gelu_erf", "no_longer_supported"),
    ("status", "ai.onnx:Erf", "changed"),
    ("opset", "ai.onnx:Conv", "changed"),
    ("dtype_loosened", "ai.onnx:Add", "changed"),
    ("constraint_tightened", "ai.onnx:Pad", "changed"),
    ("constraint_loosened", "ai.onnx:Transpose", "changed"),
    ("constraint_changed", "ai.onnx:Resize", "changed"),
    ("constraint_added", "ai.onnx:MaxPool", "changed"),
    ("constraint_removed", "ai.onnx:AveragePool", "changed"),
    ("constraint_changed", "every node", "changed"),
    ("prepass_added", "table", "changed"),
    ("table_opsets", "table", "changed"),
])
def test_toy_pair_has_each_kind_of_change(toy, kind, subject, group):
    assert _by(toy, kind, subject).group == group


def test_toy_pair_has_nothing_else(toy):
    # 17 changes above; a different note (Softmax) and the version/description are not behaviour
    assert len(toy.changes) == 17
    assert not [c for c in toy.changes if c.subject == "ai.onnx:Softmax"]


def test_constraints_are_described_with_the_rules_words(catalog, toy):
    old, new = catalog.table("difftoy@1.0"), catalog.table("difftoy@2.0")
    pad = _by(toy, "constraint_tightened", "ai.onnx:Pad")
    assert pad.before == describe(old.ops["ai.onnx:Pad"].constraints[0])
    assert pad.after == describe(new.ops["ai.onnx:Pad"].constraints[0])
    assert pad.before in pad.text and pad.after in pad.text
    added = _by(toy, "constraint_added", "ai.onnx:MaxPool")
    assert added.after == describe(new.ops["ai.onnx:MaxPool"].constraints[0])
    assert _by(toy, "opset", "ai.onnx:Conv").after == [11, 18]


def test_renderers_group_the_changes(toy):
    text = render_text(toy)
    assert text.index("Newly supported (3)") < text.index("No longer supported (3)") < text.index("Changed constraints (11)")
    md = render_md(toy)
    assert "## Newly supported (3)" in md and "- Sigmoid: CPU only -> NPU" in md
    doc = toy.to_json()
    assert doc["counts"] == {"newly_supported": 3, "no_longer_supported": 3, "changed": 11}
    assert doc["old"] == {"target": "difftoy@1.0/soc-a", "revision": 1, "toolchain_package": "difftoy==1.0"}
    assert doc["errata"] == []  # two different tables: no errata between them


def test_reverse_diff_swaps_the_groups(catalog):
    back = diff_tables(catalog.table("difftoy@2.0"), catalog.table("difftoy@1.0"))
    assert {c.subject for c in back.group("newly_supported")} == {"ai.onnx:Tanh", "ai.onnx:Floor", "pattern gelu_erf"}
    assert _by(back, "constraint_loosened", "ai.onnx:Pad")
    assert _by(back, "constraint_removed", "ai.onnx:MaxPool")


# -- the same table ----------------------------------------------------------------------------

def test_every_committed_table_against_itself_is_empty():
    cat = Catalog.discover()
    assert len(cat.refs) >= 10
    for ref in cat.refs.values():
        d = diff_tables(cat.load(ref), cat.load(ref))
        assert d.empty, (ref.target, d.changes[:3])
        assert "no differences" in render_text(d)


# -- the real QNN tables, expectations read from the JSON files ---------------------------------

def _raw(target: str) -> dict:
    tc, rest = target.split("@")
    version, soc = rest.split("/")
    return json.loads((bundled_tables_dir() / tc / version / f"{soc}.json").read_text(encoding="utf-8"))


def _norm_constraints(items) -> list[str]:
    out = []
    for c in items or []:
        c = {k: v for k, v in c.items() if k not in ("probes", "source", "note")}
        c.setdefault("else", "cpu")
        c.setdefault("params", {})
        for k in ("only_ops", "except_ops"):
            if k in c:
                c[k] = sorted(c[k])
        out.append(json.dumps(c, sort_keys=True))
    return sorted(out)


def _expected(a: dict, b: dict) -> dict:
    va = {k: e["status"] for k, e in a["ops"].items()}
    vb = {k: e["status"] for k, e in b["ops"].items()}
    keys = set(va) | set(vb)
    eff_a = {k: va.get(k, a["default_verdict"]) for k in keys}
    eff_b = {k: vb.get(k, b["default_verdict"]) for k in keys}
    same_verdict = {k for k in keys if k in va and k in vb and eff_a[k] == eff_b[k]}
    pat_a = {p["name"] for p in a.get("patterns", [])}
    pat_b = {p["name"] for p in b.get("patterns", [])}
    return {
        "newly": {k for k in keys if eff_a[k] != "npu" and eff_b[k] == "npu"},
        "no_longer": {k for k in keys if eff_a[k] == "npu" and eff_b[k] != "npu"},
        "opset": {k for k in same_verdict if a["ops"][k].get("opset") != b["ops"][k].get("opset")},
        "constraints": {k for k in same_verdict if _norm_constraints(a["ops"][k].get("constraints"))
                        != _norm_constraints(b["ops"][k].get("constraints"))},
        "patterns_added": pat_b - pat_a,
        "patterns_removed": pat_a - pat_b,
        "prepasses": set(a.get("prepasses", [])) ^ set(b.get("prepasses", [])),
        "generic": _norm_constraints(a.get("generic_constraints")) != _norm_constraints(b.get("generic_constraints")),
        "opsets": a["opsets"] != b["opsets"],
    }


def _observed(d) -> dict:
    ops = [c for c in d.changes if c.subject.startswith("ai.onnx:") or ":" in c.subject and not c.subject.startswith("pattern ")]
    return {
        "newly": {c.subject for c in d.group("newly_supported") if c.kind in ("op_added", "status")},
        "no_longer": {c.subject for c in d.group("no_longer_supported") if c.kind in ("op_removed", "status")},
        "opset": {c.subject for c in ops if c.kind == "opset"},
        "constraints": {c.subject for c in ops if c.kind.startswith(("constraint_", "dtype_"))},
        "patterns_added": {c.subject[len("pattern "):] for c in d.changes if c.kind == "pattern_added"},
        "patterns_removed": {c.subject[len("pattern "):] for c in d.changes if c.kind == "pattern_removed"},
        "prepasses": {c.after or c.before for c in d.changes if c.kind.startswith("prepass_")},
        "generic": any(c.subject == "every node" for c in d.changes),
        "opsets": any(c.kind == "table_opsets" for c in d.changes),
    }


QNN_PAIRS = [("qnn@2.47.0/htp-v73", "qnn@2.51.0/htp-v73"), ("qnn@2.47.0/htp-v68", "qnn@2.51.0/htp-v68"),
             ("qnn@2.51.0/htp-v68", "qnn@2.51.0/htp-v73"), ("qnn@2.47.0/htp-v68", "qnn@2.47.0/htp-v73"),
             ("rknn@2.5.0/rk3588", "rknn@2.5.0/rk3566")]


@pytest.mark.parametrize("old,new", QNN_PAIRS)
def test_real_tables_diff_matches_the_files(old, new):
    cat = Catalog.discover()
    d = diff_tables(cat.table(old), cat.table(new))
    expected = _expected(_raw(old), _raw(new))
    assert _observed(d) == expected
    # nothing reported beyond what the files show
    assert d.empty == (not any(expected.values()) and _raw(old)["precision"] == _raw(new)["precision"]
                       and _raw(old)["default_verdict"] == _raw(new)["default_verdict"])


def test_qnn_sdk_upgrade_is_not_empty():
    """2.47 -> 2.51 really differs (ops newly on the HTP); the diff says which, grouped."""
    expected = _expected(_raw("qnn@2.47.0/htp-v73"), _raw("qnn@2.51.0/htp-v73"))
    assert expected["newly"], "the committed QNN tables no longer differ; pick another pair"
    cat = Catalog.discover()
    text = render_text(diff_tables(cat.table("qnn@2.47/htp-v73"), cat.table("qnn@2.51/htp-v73")))
    for key in expected["newly"]:
        assert f"  - {key.split(':', 1)[1]}: " in text.split("No longer supported")[0]


# -- command line ------------------------------------------------------------------------------

def run(capsys, *args):
    code = main(["--tables", str(DIFF_TABLES), *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_text_json_md(capsys, toy):
    code, out, _ = run(capsys, "tables", "diff", "difftoy@1.0", "difftoy@2.0")
    assert code == 0 and out == render_text(toy)
    code, out, _ = run(capsys, "tables", "diff", "difftoy@1.0", "difftoy@2.0", "--format", "json")
    assert code == 0 and json.loads(out)["counts"] == {g: len(toy.group(g)) for g in GROUPS}
    code, out, _ = run(capsys, "tables", "diff", "difftoy@1.0/soc-a", "difftoy@2.0/soc-a", "--format", "md")
    assert code == 0 and out.startswith("# Support table changes: difftoy@1.0/soc-a revision 1 -> difftoy@2.0/soc-a revision 1")


def test_cli_same_table_exits_0_with_no_differences(capsys):
    code, out, _ = run(capsys, "tables", "diff", "qnn@2.51/htp-v73", "qnn@2.51.0/htp-v73")
    assert code == 0 and "no differences" in out


def test_cli_across_socs(capsys):
    code, out, _ = run(capsys, "tables", "diff", "rknn@2.5.0/rk3588", "rknn@2.5.0/rk3566", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["new"]["target"] == "rknn@2.5.0/rk3566"


@pytest.mark.parametrize("args,needle", [
    (["difftoy@1.0", "difftoy@9"], "unknown version '9' of difftoy"),
    (["nosuch@1.0", "difftoy@2.0"], "unknown toolchain 'nosuch'"),
    (["difftoy@1.0/soc-z", "difftoy@2.0"], "unknown SoC 'soc-z'"),
    (["not a target", "difftoy@2.0"], "invalid target"),
    (["difftoy@1.0"], "the following arguments are required"),
    (["difftoy@1.0", "difftoy@2.0", "--format", "html"], "invalid choice"),
])
def test_cli_usage_errors_exit_2(capsys, args, needle):
    try:
        code = main(["--tables", str(DIFF_TABLES), "tables", "diff", *args])
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    out, err = capsys.readouterr()
    assert code == 2 and needle in err and out == ""


# -- revisions of one table: the errata ---------------------------------------------------------

def _corrected(tmp_path):
    """A bundled table still as shipped (CANN 8.5.0 / Ascend 310P, revision 1) and a correction of it as
    revision 2 and 3, each with its erratum, as table files."""
    src = bundled_tables_dir() / "cann" / "8.5.0" / "ascend310p.json"
    old = json.loads(src.read_text())
    assert old["revision"] == 1 and "errata" not in old
    new = json.loads(src.read_text())
    new["ops"]["ai.onnx:Sigmoid"]["status"] = "cpu"
    new["revision"] = 3
    new["errata"] = [
        {"revision": 2, "ops": ["ai.onnx:Sigmoid"], "change": "Sigmoid runs on the CPU",
         "evidence": "probe Sigmoid.f32.r4 placed it on the CPU"},
        {"revision": 3, "ops": ["*"], "change": "notes reworded", "evidence": "review"},
    ]
    (tmp_path / "r1.json").write_text(json.dumps(old))
    (tmp_path / "r3.json").write_text(json.dumps(new))
    return tmp_path / "r1.json", tmp_path / "r3.json"


def test_cli_diff_of_two_revisions_lists_the_errata_between_them(capsys, tmp_path):
    r1, r3 = _corrected(tmp_path)
    code, out, _ = run(capsys, "tables", "diff", str(r1), str(r3))
    assert code == 0
    assert out.startswith("cann@8.5.0/ascend310p revision 1 -> cann@8.5.0/ascend310p revision 3")
    assert "Sigmoid: NPU -> CPU only" in out
    assert "Errata (2):" in out
    assert ("  - revision 2 (ai.onnx:Sigmoid): Sigmoid runs on the CPU (evidence: probe Sigmoid.f32.r4 placed it "
            "on the CPU)") in out
    assert "  - revision 3 (*): notes reworded (evidence: review)" in out
    code, out, _ = run(capsys, "tables", "diff", str(r1), str(r3), "--format", "json")
    doc = json.loads(out)
    assert [e["revision"] for e in doc["errata"]] == [2, 3] and doc["new"]["revision"] == 3
    code, out, _ = run(capsys, "tables", "diff", str(r1), str(r3), "--format", "md")
    assert "## Errata (2)" in out
    # the bundled table against a file: the target form and the path form mix
    code, out, _ = run(capsys, "tables", "diff", "cann@8.5.0/ascend310p", str(r3))
    assert code == 0 and "Errata (2):" in out


def test_errata_of_another_table_are_not_shown(capsys, tmp_path):
    _, r3 = _corrected(tmp_path)
    code, out, _ = run(capsys, "tables", "diff", "cann@8.0.0/ascend310p", str(r3))
    assert code == 0 and "Errata" not in out


def test_a_revision_without_its_erratum_is_invalid(capsys, tmp_path):
    _, r3 = _corrected(tmp_path)
    doc = json.loads(r3.read_text())
    doc["errata"] = doc["errata"][1:]
    r3.write_text(json.dumps(doc))
    code, out, err = run(capsys, "tables", "diff", "cann@8.5.0/ascend310p", str(r3))
    assert code == 2 and "$.errata: revision(s) 2 have no erratum" in err
    code, _, err = run(capsys, "tables", "diff", "cann@8.5.0/ascend310p", str(tmp_path / "missing.json"))
    assert code == 2 and "no such table file" in err


def test_opset_bounds_moved_alike_are_said_once():
    """SNPE 2025.06 -> 2025.08 raises the max opset of most ops the same way: the text says it
    once per (bound, old, new) with the op count read from the files; the JSON keeps one change
    per op."""
    from collections import defaultdict

    a, b = _raw("snpe@2025.06/htp"), _raw("snpe@2025.08/htp")
    groups: dict[tuple, list[str]] = defaultdict(list)
    changed = 0
    for key in sorted(set(a["ops"]) & set(b["ops"])):
        oa, ob = a["ops"][key].get("opset"), b["ops"][key].get("opset")
        if a["ops"][key]["status"] == b["ops"][key]["status"] and oa != ob:
            changed += 1
        if oa and ob and a["ops"][key]["status"] == b["ops"][key]["status"]:
            if oa[0] == ob[0] and oa[1] != ob[1]:
                groups[("max", oa[1], ob[1])].append(key)
            elif oa[1] == ob[1] and oa[0] != ob[0]:
                groups[("min", oa[0], ob[0])].append(key)
    big = {k: v for k, v in groups.items() if len(v) >= 3}
    assert big, "the committed SNPE tables no longer share an opset change; pick another pair"
    cat = Catalog.discover()
    d = diff_tables(cat.table("snpe@2025.06/htp"), cat.table("snpe@2025.08/htp"))
    text, md = render_text(d), render_md(d)
    for (bound, old, new), keys in big.items():
        line = f"{bound} opset {old} -> {new} for {len(keys)} ops: "
        assert text.count(line) == 1 and md.count(line) == 1
        for key in keys:
            assert f"{key.split(':', 1)[1]}: opsets" not in text
    assert sum(1 for c in d.changes if c.kind == "opset") == changed
