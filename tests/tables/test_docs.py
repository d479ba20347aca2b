"""The supported-ops pages are generated from the tables; committed pages must not be stale."""

from __future__ import annotations

from conftest import REPO

from pytest_npucheck.cli import main
from pytest_npucheck.tabletools.docs import generate, render_table


def test_committed_supported_ops_pages_are_current(capsys):
    code = main(["tables", "docs", str(REPO / "docs" / "supported-ops"), "--check"])
    err = capsys.readouterr().err
    assert code == 0, f"stale supported-ops pages; run `npucheck tables docs`:\n{err}"


def test_page_lists_every_op_with_constraints_in_words(toy_catalog, tmp_path):
    table = toy_catalog.table("toy@1.0")
    page = render_table(table)
    for key in table.ops:
        assert f"| {key.split(':', 1)[1]} |" in page
    assert "Attribute mode must be one of {'constant'}. Otherwise: CPU only." in page
    assert "Every tensor of the node's inputs must have a static shape" in page
    assert "| gelu_erf | Div -> Erf -> Add -> Mul -> Mul | exGelu | NPU |" in page


def test_check_mode_reports_stale_pages(tmp_path, capsys):
    out = tmp_path / "pages"
    assert main(["tables", "docs", str(out)]) == 0
    capsys.readouterr()
    assert main(["tables", "docs", str(out), "--check"]) == 0
    first = sorted(generate(out))[0]
    first.write_text("edited by hand\n")
    assert main(["tables", "docs", str(out), "--check"]) == 1
    assert str(first) in capsys.readouterr().err
