"""The table release policy: a table that shipped in a release (op_support_tables/released.json) is
never edited in place; a correction is a new revision with an erratum."""

from __future__ import annotations

import json
import shutil

import pytest

from pytest_npucheck.cli import main
from pytest_npucheck.tabletools.releases import RELEASED, current_entries, policy_problems, read_released
from pytest_npucheck.tables import bundled_tables_dir


def test_no_released_table_revision_was_edited():
    """Fails when a table's content changed at a revision that shipped: bump `revision`, add an erratum."""
    assert policy_problems(bundled_tables_dir()) == []


def test_every_bundled_table_has_a_revision_and_every_release_is_recorded_in_full():
    root = bundled_tables_dir()
    released = read_released(root)
    assert "0.1.0" in released
    now = current_entries(root)
    assert all(isinstance(e["revision"], int) and e["revision"] >= 1 for e in now.values())
    for raw in (json.loads(p.read_text()) for p in root.glob("*/*/*.json")):
        assert "revision" in raw, "every bundled table states its revision"
    # 0.1.0 shipped every table there was, each at revision 1
    assert set(released["0.1.0"]) <= set(now)
    assert {e["revision"] for e in released["0.1.0"].values()} == {1}


@pytest.fixture
def tables_copy(tmp_path):
    root = tmp_path / "tables"
    shutil.copytree(bundled_tables_dir(), root)
    return root


def _edit(path, change):
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc, indent=1) + "\n")


def test_an_in_place_edit_of_a_released_table_is_caught_and_a_new_revision_is_not(tables_copy):
    path = tables_copy / "cann" / "8.5.0" / "ascend310p.json"  # a table still at revision 1
    _edit(path, lambda d: d["ops"]["ai.onnx:Sigmoid"].update(status="cpu"))
    [problem] = policy_problems(tables_copy)
    assert problem.startswith("cann/8.5.0/ascend310p.json: revision 1 shipped in 0.1.0 and its content changed")
    assert "bump `revision` to 2 and add an `errata` entry" in problem

    def correct(d):
        d["revision"] = 2
        d["errata"] = [{"revision": 2, "ops": ["ai.onnx:Sigmoid"], "change": "Sigmoid falls back to the CPU",
                        "evidence": "test"}]
    _edit(path, correct)
    assert policy_problems(tables_copy) == []


def test_a_removed_or_older_released_table_is_caught(tables_copy):
    (tables_copy / "qnn" / "2.51.0" / "htp-v73.json").unlink()
    _edit(tables_copy / "rknn" / "2.2.0" / "rk3566.json", lambda d: d.update(revision=1))
    released = json.loads((tables_copy / RELEASED).read_text())
    released["releases"]["0.1.0"]["rknn/2.2.0/rk3566.json"]["revision"] = 2
    (tables_copy / RELEASED).write_text(json.dumps(released))
    problems = policy_problems(tables_copy)
    assert any(p.startswith("qnn/2.51.0/htp-v73.json: shipped in 0.1.0") and "is gone" in p for p in problems)
    assert any(p.startswith("rknn/2.2.0/rk3566.json: revision 1 is older than revision 2") for p in problems)


def test_validate_reports_the_in_place_edit_and_release_refuses_to_record(tables_copy, monkeypatch, capsys):
    import pytest_npucheck.tables as tables_mod

    path = tables_copy / "snpe" / "2025.08" / "htp.json"
    _edit(path, lambda d: d.update(description="edited"))
    monkeypatch.setattr(tables_mod, "bundled_tables_dir", lambda: tables_copy)
    assert main(["tables", "validate"]) == 2
    err = capsys.readouterr().err
    assert f"{tables_copy / RELEASED}: snpe/2025.08/htp.json: revision 1 shipped in 0.1.0" in err
    assert main(["tables", "release", "0.2.0"]) == 2
    assert "cannot record a release while released tables were edited in place" in capsys.readouterr().err
    assert "0.2.0" not in read_released(tables_copy)
