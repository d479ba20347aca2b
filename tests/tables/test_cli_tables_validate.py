"""`npucheck tables validate` on the bundled tables: each is validated in full against the schema,
and the manifest it writes is the committed one (the rest of the command line, on the toy tables:
tests/unit/test_cli.py)."""

from __future__ import annotations

from conftest import TOY_TABLES

from pytest_npucheck.cli import main


def run(capsys, *args):
    code = main(["--tables", str(TOY_TABLES), *args])
    out, err = capsys.readouterr()
    return code, out, err



def test_tables_validate(capsys, tmp_path):
    """A bad file given by name, and --write-manifest with files (the full validation of every bundled
    table, "all tables valid", is checked by the next test's run, on a byte-identical copy of them)."""
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": 2}')
    code, out, err = run(capsys, "tables", "validate", str(bad))
    assert code == 2 and "$.format" in err
    code, out, err = run(capsys, "tables", "validate", "--write-manifest", str(bad))
    assert code == 2 and "give no files" in err


def test_tables_validate_writes_the_manifest(capsys, tmp_path, monkeypatch):
    import shutil

    from pytest_npucheck import tables

    fake = tmp_path / "bundled"
    shutil.copytree(tables.bundled_tables_dir(), fake)
    committed = (fake / tables.MANIFEST).read_text()
    (fake / tables.MANIFEST).unlink()
    monkeypatch.setattr(tables, "bundled_tables_dir", lambda: fake)
    code, out, _ = run(capsys, "tables", "validate", "--write-manifest")
    assert code == 0 and "all tables valid" in out and "wrote" in out
    assert (fake / tables.MANIFEST).read_text() == committed  # what the repository holds is current
