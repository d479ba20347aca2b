"""cache_prune: the export cache pruned by last use and size, never an entry being written (entries
laid out as export.py writes them, in tmp_path; the hit that marks an entry used is
tests/acceptance/test_export_cached_run.py's)."""

from __future__ import annotations

import os
import time

import pytest

from pytest_npucheck import cache_prune as cp
from pytest_npucheck.cli import main

DAY = 86400.0
NOW = time.time()


def _entry(cache, name, size, used_days_ago=None, made_days_ago=30.0):
    """An export cache entry: model.onnx of ``size`` bytes and meta.json made ``made_days_ago``, and
    a last_used mark ``used_days_ago`` (None: never hit since its export)."""
    entry = cache / name
    entry.mkdir(parents=True)
    (entry / "model.onnx").write_bytes(b"x" * size)
    (entry / "meta.json").write_text("{}")
    made = NOW - made_days_ago * DAY
    if used_days_ago is not None:
        cp.mark_used(entry, now=NOW - used_days_ago * DAY)
    for p in (*entry.iterdir(), entry):
        if p.name != cp.USED_FILENAME:
            os.utime(p, (made, made))
    used = entry / cp.USED_FILENAME
    if used.exists():  # its mtime is the last use; the directory's too, as a touch would leave it
        t = NOW - used_days_ago * DAY
        os.utime(used, (t, t))
        os.utime(entry, (max(made, t), max(made, t)))
    return entry


def test_entries_unused_for_n_days_are_removed(tmp_path):
    cache = tmp_path / "npucheck-exports"
    old = _entry(cache, "a" * 64, 100, used_days_ago=20)
    never_hit = _entry(cache, "b" * 64, 100, made_days_ago=15)
    recent = _entry(cache, "c" * 64, 100, used_days_ago=2)
    r = cp.prune(cache, max_age_days=14, now=NOW)
    assert sorted(e.path.name for e, _ in r.removed) == [old.name, never_hit.name]
    assert not old.exists() and not never_hit.exists() and recent.exists()
    assert "unused for 20 day(s), more than 14" in dict((e.path, why) for e, why in r.removed)[old]
    assert r.size_before == 3 * 102 and r.size_after == 102  # model.onnx and meta.json


def test_over_the_size_cap_the_least_recently_used_go_first(tmp_path):
    cache = tmp_path / "c"
    a = _entry(cache, "a" * 64, 400, used_days_ago=3)
    b = _entry(cache, "b" * 64, 400, used_days_ago=1)
    c = _entry(cache, "c" * 64, 400, used_days_ago=2)
    r = cp.prune(cache, max_bytes=900, now=NOW)
    assert [e.path for e, _ in r.removed] == [a]
    assert b.exists() and c.exists()
    assert cp.prune(cache, max_bytes=0, now=NOW).size_after == 0
    assert list(cache.iterdir()) == []


def test_an_entry_being_written_is_never_removed(tmp_path):
    """An export in progress (.tmp-* work directory), and an entry with a file written within the
    hour (a facts document landing), stay whatever the limits; the rest go."""
    cache = tmp_path / "c"
    stale = _entry(cache, "a" * 64, 10, used_days_ago=40)
    live = _entry(cache, "b" * 64, 10, used_days_ago=40)
    (live / "facts.json").write_text("{}")  # written now by another process
    work = cache / ".tmp-0123456789ab-xyz"
    work.mkdir()
    (work / "model.onnx").write_bytes(b"partial")
    old = NOW - 40 * DAY
    os.utime(work, (old, old))
    r = cp.prune(cache, max_age_days=1, max_bytes=0, now=NOW)
    assert [e.path for e, _ in r.removed] == [stale]
    assert [e.path for e in r.busy] == [live] and live.exists()
    assert work.exists() and r.work == [work]
    assert any("it may be in use" in ln for ln in r.lines())


def test_a_dry_run_removes_nothing_and_says_what_it_would(tmp_path):
    cache = tmp_path / "c"
    a = _entry(cache, "a" * 64, 10, used_days_ago=40)
    r = cp.prune(cache, max_age_days=7, now=NOW, dry_run=True)
    assert a.exists() and [e.path for e, _ in r.removed] == [a]
    assert any(ln.startswith("  would remove " + a.name) for ln in r.lines())


def test_mark_used_writes_at_most_once_an_hour(tmp_path):
    entry = tmp_path / "e"
    entry.mkdir()
    cp.mark_used(entry, now=NOW - 7200)
    used = entry / cp.USED_FILENAME
    assert abs(used.stat().st_mtime - (NOW - 7200)) < 1
    cp.mark_used(entry, now=NOW - 7000)  # within the hour of the last mark: nothing written
    assert abs(used.stat().st_mtime - (NOW - 7200)) < 1
    cp.mark_used(entry, now=NOW)
    assert abs(used.stat().st_mtime - NOW) < 1
    cp.mark_used(tmp_path / "missing", now=NOW)  # a cache that cannot be written only loses the record


def test_things_that_are_not_entries_are_left_alone(tmp_path):
    cache = tmp_path / "c"
    cache.mkdir()
    (cache / "0f").mkdir()  # a directory without meta.json
    (cache / "notes.json").write_text("{}")  # a facts document of a user's file
    os.symlink(tmp_path, cache / ("d" * 64))
    r = cp.prune(cache, max_bytes=0, now=NOW)
    assert r.removed == [] and sorted(p.name for p in cache.iterdir()) == ["0f", "d" * 64, "notes.json"]


@pytest.mark.parametrize("text, n", [("123", 123), ("2k", 2048), ("500M", 500 * 1024 ** 2), ("1.5GiB", 3 * 1024 ** 3 // 2),
                                     ("2 GB", 2 * 1024 ** 3)])
def test_parse_size(text, n):
    assert cp.parse_size(text) == n


def test_cli_prunes_and_refuses_bad_input_naming_it(tmp_path, capsys):
    cache = tmp_path / "c"
    a = _entry(cache, "a" * 64, 2048, used_days_ago=40)
    _entry(cache, "b" * 64, 2048, used_days_ago=1)
    assert main(["cache", str(cache)]) == 0  # no limit: only the summary
    out = capsys.readouterr().out
    assert "2 entries, 4.0 KiB" in out and a.exists()
    assert main(["cache", str(cache), "--max-age-days", "30"]) == 0
    out = capsys.readouterr().out
    assert f"removed {a.name} (2.0 KiB, unused for 40 day(s), more than 30)" in out and not a.exists()
    assert "4.0 KiB -> 2.0 KiB" in out
    assert main(["cache", str(cache), "--max-size", "lots"]) == 2
    assert "--max-size 'lots'" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["cache", str(tmp_path / "file")]) == 2
    assert "file: not a directory" in capsys.readouterr().err
    # no cache yet (a first CI run): nothing to prune, not an error (the recipe's step runs always)
    assert main(["cache", str(tmp_path / "nowhere"), "--max-age-days", "1"]) == 0
    assert "no export cache there" in capsys.readouterr().out


def test_cli_without_a_directory_prunes_the_one_the_environment_names(tmp_path, capsys, monkeypatch):
    cache = tmp_path / "shared-cache"
    old = _entry(cache, "a" * 64, 2048, used_days_ago=40)
    _entry(cache, "b" * 64, 2048, used_days_ago=1)
    monkeypatch.setenv("NPUCHECK_EXPORT_CACHE_DIR", str(cache))
    assert main(["cache", "--max-age-days", "30"]) == 0
    assert f"removed {old.name}" in capsys.readouterr().out and not old.exists()
    monkeypatch.delenv("NPUCHECK_EXPORT_CACHE_DIR")
    monkeypatch.chdir(tmp_path)  # no environment: pytest's cache directory, absent here
    assert main(["cache", "--max-age-days", "1"]) == 0
    assert "no export cache there" in capsys.readouterr().out
