"""export.py's check of a cache entry on a hit: content hashes, and the stamp that lets a later
process skip hashing files that are unchanged since their hash was checked. Entries are written
here by hand (no torch): model.onnx's bytes do not matter to the check, only meta.json's record."""

from __future__ import annotations

import json
import os

import pytest

from pytest_npucheck import export, filehash
from pytest_npucheck.export import META_FILENAME, MODEL_FILENAME, VERIFIED_FILENAME


def _entry(tmp_path, files: dict[str, bytes]):
    entry = tmp_path / ("ab" * 32)
    entry.mkdir()
    for name, data in files.items():
        (entry / name).write_bytes(data)
    meta = {"format": export.KEY_FORMAT, "opset": 17, "files": {n: len(d) for n, d in files.items()},
            "sha256": {n: filehash.sha256_bytes(d) for n, d in files.items()}}
    (entry / META_FILENAME).write_text(json.dumps(meta))
    return entry


@pytest.fixture
def hashed(monkeypatch):
    """The files sha256_file reads in this test, from a cold in-process memo (a new process)."""
    monkeypatch.setattr(filehash, "_MEMO", {})
    calls: list[str] = []
    real = filehash.sha256_file
    monkeypatch.setattr(filehash, "sha256_file", lambda p: calls.append(os.path.basename(p)) or real(p))
    return calls


def test_first_check_hashes_and_stamps_the_later_ones_trust_the_stamp(tmp_path, hashed, monkeypatch):
    entry = _entry(tmp_path, {MODEL_FILENAME: b"model bytes" * 100, "weights.bin": b"w" * 5000})
    meta, problem = export._checked_entry(entry)
    assert problem is None and meta["opset"] == 17
    assert sorted(hashed) == ["model.onnx", "weights.bin"]
    stamp = json.loads((entry / VERIFIED_FILENAME).read_text())
    assert stamp["sha256"] == meta["sha256"]
    assert stamp["stat"]["model.onnx"] == list(filehash.fingerprint(entry / MODEL_FILENAME))

    monkeypatch.setattr(filehash, "_MEMO", {})  # another process
    hashed.clear()
    assert export._checked_entry(entry) == (meta, None)
    assert hashed == []
    # the digest the stamp vouched for is this process's for the file (the facts cache reads it too)
    assert filehash.sha256_file(entry / MODEL_FILENAME) == meta["sha256"]["model.onnx"]
    assert hashed == ["model.onnx"] and filehash._MEMO  # served by the memo the stamp seeded


def test_same_size_edit_that_keeps_the_mtime_is_caught_despite_the_stamp(tmp_path, hashed, monkeypatch):
    entry = _entry(tmp_path, {MODEL_FILENAME: b"A" * 4096})
    assert export._checked_entry(entry)[1] is None
    model = entry / MODEL_FILENAME
    st = model.stat()
    model.write_bytes(b"B" * 4096)
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns))  # ctime still moves: the writer cannot set it
    monkeypatch.setattr(filehash, "_MEMO", {})
    meta, problem = export._checked_entry(entry)
    assert meta is None
    assert problem == "does not match its content hash: model.onnx was edited or damaged"


@pytest.mark.parametrize("damage", ["other hashes", "other fingerprint", "not json", "a list"])
def test_a_stamp_that_does_not_fit_is_ignored_and_the_files_are_hashed(tmp_path, hashed, monkeypatch, damage):
    entry = _entry(tmp_path, {MODEL_FILENAME: b"model" * 300})
    export._checked_entry(entry)
    path = entry / VERIFIED_FILENAME
    stamp = json.loads(path.read_text())
    if damage == "other hashes":
        stamp["sha256"]["model.onnx"] = "0" * 64
        path.write_text(json.dumps(stamp))
    elif damage == "other fingerprint":
        stamp["stat"]["model.onnx"][1] += 1  # another inode: a copied cache
        path.write_text(json.dumps(stamp))
    elif damage == "not json":
        path.write_text("{")
    else:
        path.write_text("[]")
    monkeypatch.setattr(filehash, "_MEMO", {})
    hashed.clear()
    meta, problem = export._checked_entry(entry)
    assert problem is None and meta is not None
    assert hashed == ["model.onnx"]
    assert json.loads(path.read_text())["stat"]["model.onnx"] == list(filehash.fingerprint(entry / MODEL_FILENAME))


def test_a_cache_that_cannot_be_written_still_checks_its_entries(tmp_path, hashed, monkeypatch):
    entry = _entry(tmp_path, {MODEL_FILENAME: b"model" * 300})
    (entry / VERIFIED_FILENAME).mkdir()  # the stamp cannot be installed
    for _ in range(2):
        assert export._checked_entry(entry)[1] is None
        monkeypatch.setattr(filehash, "_MEMO", {})
    assert hashed == ["model.onnx", "model.onnx"]
    assert [p.name for p in entry.iterdir() if p.name.startswith(".tmp-")] == []
