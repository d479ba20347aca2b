"""The one strict JSON reader (jsonio.loads_strict) and every file the plugin reads through it:
nesting past what Python's parser survives, and numbers that overflow to infinity (issue 27, items
11 and 20), end in the reader's named error, never a RecursionError or an infinite tolerance."""

from __future__ import annotations

import io
import json
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from conftest import TOY_TABLES

from pytest_npucheck.errors import NpuCheckError, TableError
from pytest_npucheck.jsonio import MAX_DEPTH, JsonFileError, load_strict, loads_strict

rel = pytest.mark.reliability
DEEP = "[" * 200_000  # the audit's input: RecursionError in json's C scanner
JUST_TOO_DEEP = "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)  # parses, then would recurse in a validator


@rel("G11")
@pytest.mark.parametrize("text", [DEEP, JUST_TOO_DEEP, '{"a": ' + JUST_TOO_DEEP + "}"], ids=["200k", "101", "inner"])
def test_deep_nesting_is_a_value_error_naming_the_depth(text):
    with pytest.raises(ValueError, match="nested too deeply"):
        loads_strict(text)


def test_nesting_up_to_the_limit_parses():
    assert loads_strict("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None


def _budgets_doc(atol: str) -> str:
    return ('{"format": 1, "releases": {"1.0.0": {"tests": {"t*": {"precision": "fp16", "default": {"atol": %s}}}}}}'
            % atol)


@rel("G20")
@pytest.mark.parametrize("literal", ["1e999", "-1e999", "Infinity"])
def test_overflowing_numbers_are_refused_with_their_path(tmp_path, literal):
    from pytest_npucheck.budget import load_budgets

    path = tmp_path / "npu-budgets.json"
    path.write_text(_budgets_doc(literal))
    with pytest.raises(NpuCheckError) as info:
        load_budgets(path)
    text = str(info.value)
    assert str(path) in text and "$.releases.1.0.0.tests.t*.default.atol" in text, text
    assert literal.lstrip("-") in text


def test_large_finite_numbers_still_parse():
    assert loads_strict('{"a": 1e308, "b": -2.5e-300}') == {"a": 1e308, "b": -2.5e-300}


@rel("G11")
@pytest.mark.parametrize("reader", ["strict", "baseline", "budgets", "table", "recipes"])
def test_every_json_file_reader_names_the_file_for_deep_nesting(tmp_path, reader):
    from pytest_npucheck import baseline, budget, fixes, tables

    path = tmp_path / "f.json"
    path.write_text(DEEP)
    read = {"strict": load_strict, "baseline": baseline.load, "budgets": budget.load_budgets,
            "table": tables.load_table, "recipes": fixes.load_recipes.__wrapped__}[reader]
    with pytest.raises(NpuCheckError) as info:
        read(path)
    assert str(path) in str(info.value) and "nested too deeply" in str(info.value)


def test_a_deep_table_in_a_table_directory_is_a_table_error(tmp_path):
    from pytest_npucheck.tables import Catalog

    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    table = root / "toy" / "1.0" / "soc-a.json"
    table.write_text(DEEP)
    with pytest.raises(TableError) as info:
        Catalog.discover([root]).table("toy@1.0/soc-a")
    assert str(table) in str(info.value) and "nested too deeply" in str(info.value)


def test_golden_meta_that_is_too_deep_or_not_an_object_is_a_golden_error(tmp_path):
    from pytest_npucheck.golden import GoldenError, read_golden

    for k, meta in enumerate([DEEP, "[1]"]):
        buf = io.BytesIO()
        np.savez(buf, __meta__=np.array(meta), **{"out:y": np.zeros(2, np.float32)})
        path = tmp_path / f"g{k}.npz"
        path.write_bytes(buf.getvalue())
        with pytest.raises(GoldenError) as info:
            read_golden(path)
        assert str(path) in str(info.value)


def test_cache_entries_that_are_too_deep_are_a_miss(tmp_path):
    """A facts-cache document whose header or (correctly hashed) body is nested too deeply is a miss."""
    from pytest_npucheck import facts_cache
    from pytest_npucheck.filehash import sha256_bytes, sha256_file

    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    where = facts_cache.cache_file(model, tmp_path / "cache")
    where.parent.mkdir(parents=True)
    body = DEEP.encode()
    header = {"key": facts_cache.file_key(model), "model_sha256": sha256_file(model), "facts_sha256": sha256_bytes(body)}
    for text in (json.dumps(header).encode() + b"\n" + body, DEEP.encode() + b"\n{}"):
        where.write_bytes(text)
        assert facts_cache.load(model, tmp_path / "cache") is None
