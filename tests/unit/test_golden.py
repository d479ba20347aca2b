"""golden: the life cycle on a real exported model, file safety, corrupt files."""

from __future__ import annotations

import copy
import io
import os
import zipfile

import numpy as np
import pytest

from pytest_npucheck.golden import GoldenError, GoldenStatus, GoldenStore, read_golden


def test_changed_inputs_are_a_mismatch(tmp_path):
    store = GoldenStore(tmp_path)
    out = {"y": np.ones(3, np.float32)}
    store.check("t::a", out, "fp32", {"x": np.zeros(2, np.float32)}, update=True)
    res = store.check("t::a", out, "fp32", {"x": np.ones(2, np.float32)})
    assert res.status is GoldenStatus.MISMATCH and "input 'x' differs from the golden's" in res.message


def test_outputs_matched_by_name(tmp_path):
    store = GoldenStore(tmp_path)
    store.check("t::a", {"a": np.ones(2, np.float32), "b": np.zeros(2, np.float32)}, "fp32", update=True)
    res = store.check("t::a", {"b": np.zeros(2, np.float32), "a": np.ones(2, np.float32)}, "fp32")
    assert res.passed
    res = store.check("t::a", {"a": np.ones(2, np.float32)}, "fp32")
    assert not res.passed and res.comparison.missing == ("b",)


@pytest.mark.parametrize("content, match", [
    (b"version https://git-lfs.github.com/spec/v1\noid sha256:abc\nsize 12\n", "Git LFS pointer"),
    (b"not a zip at all", "not an .npz file"),
    (None, "corrupt or truncated"),
])
def test_corrupt_golden_names_the_file(tmp_path, content, match):
    store = GoldenStore(tmp_path)
    path = store.check("t::a", {"y": np.arange(1000, dtype=np.float32)}, "fp32", update=True).path
    if content is None:  # truncated in the middle of the zip
        content = path.read_bytes()[: path.stat().st_size // 2]
    path.write_bytes(content)
    with pytest.raises(GoldenError, match=match) as info:
        store.check("t::a", {"y": np.arange(1000, dtype=np.float32)}, "fp32")
    assert str(path) in str(info.value)


def test_pickled_object_array_is_refused(tmp_path):
    store = GoldenStore(tmp_path)
    path = store.path_for("t::a")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        np.savez(fh, **{"output/y": np.array([{"a": 1}], dtype=object)})
    with pytest.raises(GoldenError, match="corrupt or truncated"):
        store.load("t::a")


def test_paths_outside_the_root_are_refused(tmp_path):
    root = tmp_path / "goldens"
    root.mkdir()
    store = GoldenStore(root)
    with pytest.raises(GoldenError, match="outside the golden root"):
        store.path_for("t::a", "../escape.npz")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    os.symlink(outside, root / "link")
    with pytest.raises(GoldenError, match="symbolic link"):
        store.check("t::a", {"y": np.ones(1, np.float32)}, "fp32", filename="link/g.npz", update=True)
    assert not any(outside.iterdir())
    # Test ids with separators and dots stay inside the root.
    p = store.path_for("../../etc/passwd::x[..]")
    assert p.parent == root and p.name.endswith(".npz")


def test_written_file_is_a_plain_npz(tmp_path):
    store = GoldenStore(tmp_path)
    path = store.check("t::a", {"y": np.arange(3, dtype=np.int64)}, "fp32",
                       {"x": np.ones(2, np.float32)}, update=True).path
    assert zipfile.is_zipfile(path)
    with np.load(path, allow_pickle=False) as data:
        assert sorted(data.files) == ["__meta__", "input/x", "output/y"]


def test_a_golden_recorded_for_another_test_or_without_meta_is_refused(tmp_path):
    """Copying a golden file to another test's name passed silently against the wrong outputs."""
    import shutil
    import zipfile

    store = GoldenStore(tmp_path / "goldens")
    out = {"y": np.ones(3, np.float32)}
    store.check("t.py::test_a", out, "fp32", {"x": np.zeros(2, np.float32)}, update=True)
    shutil.copy(store.path_for("t.py::test_a"), store.path_for("t.py::test_b"))
    with pytest.raises(GoldenError, match=r"recorded for test 't.py::test_a', not 't.py::test_b'"):
        store.load("t.py::test_b")
    with pytest.raises(GoldenError, match="recorded for test 't.py::test_a'"):
        store.check("t.py::test_b", out, "fp32")
    bare = store.path_for("t.py::test_c")
    with zipfile.ZipFile(store.path_for("t.py::test_a")) as src, zipfile.ZipFile(bare, "w") as dst:
        for name in src.namelist():
            if not name.startswith("__meta__"):
                dst.writestr(name, src.read(name))
    with pytest.raises(GoldenError, match=r"recorded for no test \(no __meta__ record\)"):
        store.load("t.py::test_c")
    assert store.load("t.py::test_a").test_id == "t.py::test_a"


def test_a_golden_directory_that_is_a_file_is_named_as_such(tmp_path):
    root = tmp_path / "goldens"
    root.write_text("not a directory")
    store = GoldenStore(root)
    for call in (lambda: store.load("t::a"), lambda: store.check("t::a", {"y": np.ones(2, np.float32)}, "fp32")):
        with pytest.raises(GoldenError, match="the golden directory is a file, not a directory"):
            call()
    assert root.read_text() == "not a directory"


# -- round two (issue 27): a zip bomb, a linked golden root ----------------------------------------


@pytest.mark.reliability("S2")
def test_the_golden_size_limit_can_be_raised_and_applies_to_members_and_the_file(tmp_path):
    store = GoldenStore(tmp_path)
    path = store.save("t::a", {"x": np.ones(4, np.float32)}, {"y": np.ones((64, 64), np.float32)})
    assert store.load("t::a") is not None  # the default limit (256 MiB) holds a normal golden
    packed = io.BytesIO()  # compressed: a file under the limit whose arrays are over it
    with zipfile.ZipFile(path) as zin, zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            zout.writestr(info.filename, zin.read(info))
    path.write_bytes(packed.getvalue())
    assert path.stat().st_size < 8 << 10
    small = GoldenStore(tmp_path, max_bytes=8 << 10)  # 8 KiB: the 16 KiB output is over it
    with pytest.raises(GoldenError, match=r"golden too large: its members declare \d+ bytes, over the limit of 8192"):
        small.load("t::a")
    with pytest.raises(GoldenError, match="golden too large: the file is"):
        read_golden(path, max_bytes=100)
    assert GoldenStore(tmp_path, max_bytes=1 << 20).load("t::a").outputs["y"].shape == (64, 64)
    # a member numpy would read whole as bytes (not an array) is refused
    with zipfile.ZipFile(path, "a") as zf:
        zf.writestr("notes.txt", b"x" * 100)
    with pytest.raises(GoldenError, match="unexpected member 'notes.txt'"):
        store.load("t::a")


@pytest.mark.reliability("S9")
@pytest.mark.parametrize("linked", ["root", "parent"])
def test_a_linked_golden_root_is_refused_and_nothing_is_written_outside(tmp_path, linked):
    """A golden root that is a symbolic link (or a directory of it below the rootdir) was followed: the
    check resolved the root too, and `.obtained.npz` files were written out of the repository."""
    repo, outside = tmp_path / "repo", tmp_path / "outside"
    repo.mkdir()
    outside.mkdir()
    if linked == "root":
        os.symlink(outside, repo / "goldens")
        root = repo / "goldens"
    else:
        os.symlink(outside, repo / "tests")
        root = repo / "tests" / "goldens"
    store = GoldenStore(root, anchor=repo)
    out = {"y": np.ones(3, np.float32)}
    for call in (lambda: store.check("t::a", out, "fp32", update=True), lambda: store.check("t::a", out, "fp32"),
                 lambda: store.load("t::a"), lambda: store.save("t::a", {}, out)):
        with pytest.raises(GoldenError, match="the golden directory is a symbolic link"):
            call()
    assert list(outside.rglob("*")) == []
    if linked == "root":  # without an anchor, the root itself is still checked
        with pytest.raises(GoldenError, match="symbolic link"):
            GoldenStore(root).check("t::a", out, "fp32", update=True)
    assert list(outside.rglob("*")) == []
