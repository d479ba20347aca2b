"""Hostile and broken input (shared/docs/reliability.md groups A, B): clear failures, never a pass."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import const, make_model

from pytest_npucheck.errors import ModelError
from pytest_npucheck.graph import load_graph


def external_model(tmp_path, location="w.bin", data=None, length=None, offset=None):
    """A model whose initializer 'w' (1024 float32) points at external data `location`."""
    m = make_model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [("x", (1024,))], ["y"],
                   [const("w", np.ones(1024))])
    w = m.graph.initializer[0]
    w.ClearField("raw_data")
    w.ClearField("float_data")
    w.data_location = onnx.TensorProto.EXTERNAL
    entries = {"location": location}
    if length is not None:
        entries["length"] = str(length)
    if offset is not None:
        entries["offset"] = str(offset)
    for k, v in entries.items():
        w.external_data.add(key=k, value=v)
    d = tmp_path / "model"
    d.mkdir(exist_ok=True)
    path = d / "m.onnx"
    path.write_bytes(m.SerializeToString())
    if data is not None:
        (d / "w.bin").write_bytes(data)
    return path


@pytest.fixture
def canary(tmp_path):
    secret = tmp_path / "canary.bin"
    secret.write_bytes(b"SECRET-CANARY" * 400)
    return secret


@pytest.mark.reliability("B7")
def test_valid_external_data_passes(tmp_path):
    g = load_graph(external_model(tmp_path, data=np.ones(1024, "float32").tobytes(), length=4096))
    assert g.tensor("w").const and g.tensor("w").value is None


@pytest.mark.reliability("B3")
@pytest.mark.parametrize("location,fragment", [
    ("../canary.bin", "'..' would leave the model directory"),
    ("sub/../../canary.bin", "'..' would leave the model directory"),
    ("/etc/passwd", "absolute paths are not allowed"),
])
def test_escaping_locations_are_rejected(tmp_path, canary, location, fragment):
    path = external_model(tmp_path, location)
    with pytest.raises(ModelError) as info:
        load_graph(path)
    text = str(info.value)
    assert fragment in text and "initializer 'w'" in text and str(path) in text
    assert "SECRET-CANARY" not in text


@pytest.mark.reliability("B4")
def test_symlink_final_and_parent_components_are_rejected(tmp_path, canary):
    path = external_model(tmp_path, "link.bin")
    os.symlink(canary, path.parent / "link.bin")
    with pytest.raises(ModelError, match="is a symbolic link"):
        load_graph(path)
    (tmp_path / "b").mkdir()
    path2 = external_model(tmp_path / "b", "dir/w.bin")
    os.symlink(tmp_path, path2.parent / "dir")
    with pytest.raises(ModelError, match="is a symbolic link"):
        load_graph(path2)


@pytest.mark.reliability("B4")
def test_hardlink_is_rejected(tmp_path, canary):
    path = external_model(tmp_path, "hard.bin")
    os.link(canary, path.parent / "hard.bin")
    with pytest.raises(ModelError, match="hard links"):
        load_graph(path)


@pytest.mark.reliability("B6")
def test_sizes_must_fit(tmp_path):
    with pytest.raises(ModelError, match="beyond the file"):
        load_graph(external_model(tmp_path, data=b"\0" * 100, length=4096))
    with pytest.raises(ModelError, match="does not match dims"):
        load_graph(external_model(tmp_path, data=b"\0" * 8000, length=8000))
    with pytest.raises(ModelError, match="negative"):
        load_graph(external_model(tmp_path, data=b"\0" * 8000, length=4096, offset=-1))


@pytest.mark.reliability("B5")
def test_missing_external_file_is_fine_for_the_static_check(tmp_path):
    from pytest_npucheck.safety import check_external_data

    path = external_model(tmp_path)  # no w.bin written
    load_graph(path)  # weights are not needed
    with pytest.raises(ModelError, match="does not exist"):
        check_external_data(onnx.load(path, load_external_data=False), path, require_files=True)


@pytest.mark.reliability("B10")
def test_unknown_domain_is_reported_not_raised(judge):
    m = make_model([helper.make_node("Frobnicate", ["x"], ["y"], name="weird", domain="com.example")],
                   [("x", (1, 4))], ["y"])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    r = judge(m)
    assert r["weird"].verdict == "unsupported"
    assert "com.example:Frobnicate is not supported" in r["weird"].reasons[0].message
    assert not r["__result__"].passed


@pytest.mark.reliability("B11")
@pytest.mark.parametrize("name", ["a\x00b\x1b[31mred", "<script>alert(1)</script>|`x`", "n" * 10_000])
def test_hostile_names_keep_reports_well_formed(judge, name):
    m = make_model([helper.make_node("Sin", ["x"], ["y"], name=name)], [("x", (1, 4))], ["y"])
    res = judge(m)["__result__"]
    from pytest_npucheck.jsonio import loads_strict
    from pytest_npucheck.report.text import render_target

    text = "\n".join(render_target(res))
    assert "\x00" not in text and "\x1b" not in text
    assert max(len(line) for line in text.splitlines()) < 2000
    doc = loads_strict(json.dumps(res.to_json()))
    assert doc["nodes"][0]["name"] == name  # data keeps the exact name; rendering escapes it


@pytest.mark.reliability("D9")
def test_write_atomic_refuses_symlink_target(tmp_path, canary):
    from pytest_npucheck.errors import NpuCheckError
    from pytest_npucheck.jsonio import write_atomic

    link = tmp_path / "report.json"
    os.symlink(canary, link)
    with pytest.raises(NpuCheckError, match="symbolic link"):
        write_atomic(link, "{}")
    assert canary.read_bytes().startswith(b"SECRET-CANARY")


def test_write_atomic_gives_umask_permissions_and_keeps_an_existing_files_mode(tmp_path):
    """mkstemp creates 0600: a report, baseline or golden written through it was unreadable to a CI
    artifact collector or a colleague; the file gets what open() would give, or keeps its mode."""
    import stat

    from pytest_npucheck.jsonio import write_atomic

    old = os.umask(0o022)
    try:
        new = tmp_path / "report.json"
        write_atomic(new, "{}\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
        os.umask(0o077)
        write_atomic(tmp_path / "private.json", "{}\n")
        assert stat.S_IMODE((tmp_path / "private.json").stat().st_mode) == 0o600
        new.chmod(0o640)  # a mode the user chose survives a rewrite
        write_atomic(new, "{\"v\": 1}\n")
        assert stat.S_IMODE(new.stat().st_mode) == 0o640 and new.read_text() == "{\"v\": 1}\n"
    finally:
        os.umask(old)


# -- round two (issue 27): only regular files are written ------------------------------------------

@pytest.mark.reliability("S1")
def test_write_atomic_replaces_only_regular_files_or_new_paths(tmp_path):
    """os.replace would put a regular file in place of a device or a FIFO (as root in CI,
    --npu-report=json:/dev/null replaced /dev/null): refused, and the special file is left as it is."""
    import stat

    from pytest_npucheck.errors import NpuCheckError
    from pytest_npucheck.jsonio import write_atomic

    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    with pytest.raises(NpuCheckError, match=r"report\.json: is a FIFO \(named pipe\), not a regular file"):
        write_atomic(fifo, "{}")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    (tmp_path / "adir").mkdir()
    with pytest.raises(NpuCheckError, match="is a directory"):
        write_atomic(tmp_path / "adir", "{}")
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []  # no temporary file left
    write_atomic(tmp_path / "new.json", "{}")  # a new path and a regular file are fine
    write_atomic(tmp_path / "new.json", "[]")
    assert (tmp_path / "new.json").read_text() == "[]"
