"""tables.py keeps the tables a process has loaded: a second Catalog (or a second ``load_table``) of
the same bytes, schema and place returns the same frozen Table without parsing it again, and any
change to the file, the schema or where it is read from is loaded and validated afresh."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from conftest import TOY_TABLES, edit_in_place

from pytest_npucheck import tables
from pytest_npucheck.errors import TableError
from pytest_npucheck.tables import Catalog, load_table


@pytest.fixture
def toy_root(tmp_path) -> Path:
    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    return root


@pytest.fixture
def parses(monkeypatch) -> list[Path]:
    """The table files parsed (JSON text to objects) from now on."""
    seen: list[Path] = []
    real = tables.parse_strict
    monkeypatch.setattr(tables, "parse_strict", lambda path, raw: seen.append(Path(path)) or real(path, raw))
    return seen


def test_a_second_catalog_gets_the_same_table_without_parsing_it(toy_root, parses):
    first = Catalog.discover([toy_root]).table("toy@1.0/soc-a")
    assert parses == [toy_root / "toy" / "1.0" / "soc-a.json"]
    second = Catalog.discover([toy_root]).table("toy@1.0/soc-a")
    assert second is first and len(parses) == 1
    # another table of the same directory is its own entry
    other = Catalog.discover([toy_root]).table("toy@1.1/soc-a")
    assert other is not first and other.version == "1.1" and len(parses) == 2


def test_an_edited_file_is_read_again_even_with_its_size_and_mtime_kept(toy_root, parses):
    path = toy_root / "toy" / "1.0" / "soc-a.json"
    before = load_table(path)
    old, bad = b'"default_verdict": "unsupported"', b'"default_verdict": "unsupportex"'
    edit_in_place(path, old, bad)  # same length, same mtime and inode: only the bytes differ
    with pytest.raises(TableError) as err:
        load_table(path)
    assert str(path) in str(err.value) and "$.default_verdict" in str(err.value)
    # an invalid file is not kept: it fails again, with its problems
    with pytest.raises(TableError):
        load_table(path)
    edit_in_place(path, bad, old)
    assert load_table(path) is before  # the original bytes again: the table they gave
    data = json.loads(path.read_text())
    data["description"] = "edited"
    path.write_text(json.dumps(data))
    after = load_table(path)
    assert after is not before and after.description == "edited" and after.sha256 != before.sha256
    assert parses.count(path) == 4  # the first load, two invalid edits, the valid edit; never the restored bytes


def test_the_place_and_the_schema_are_part_of_the_key(toy_root, tmp_path, parses):
    path = toy_root / "toy" / "1.0" / "soc-a.json"
    plain = load_table(path)
    located = load_table(path, rel=("toy", "1.0", "soc-a"))
    assert located is not plain and located == plain  # the location check ran for the second
    with pytest.raises(TableError) as err:  # and it still fails where the file does not belong
        load_table(path, rel=("toy", "1.0", "soc-b"))
    assert "$.soc" in str(err.value)
    copy = tmp_path / "copy.json"
    shutil.copy(path, copy)
    assert load_table(copy).path == copy  # same bytes, another file: its own table, naming its file
    schema = tmp_path / "schema.json"
    schema.write_bytes((tables.bundled_tables_dir() / "schema.json").read_bytes() + b"\n")
    assert load_table(path, schema) is not plain
    assert len(parses) == 5


def test_full_validation_always_validates(toy_root, monkeypatch):
    calls = []
    real = tables._schema_problems
    monkeypatch.setattr(tables, "_schema_problems", lambda data, schema: calls.append(1) or real(data, schema))
    path = toy_root / "toy" / "1.0" / "soc-a.json"
    table = load_table(path)
    assert calls == [1]  # not in the manifest: validated in full
    assert load_table(path) is table and calls == [1]
    load_table(path, full=True)
    load_table(path, full=True)
    assert calls == [1, 1, 1]
