"""Pruning the export cache (``.pytest_cache/d/npucheck-exports``) that CI keeps between runs.

An export cache entry (``export.py``: ``<cache_dir>/<key>/`` with ``model.onnx``, any external-data
files, ``meta.json``, the verified-hash stamp and ``facts.json``) is never changed once it is in
place, and a change of the model, its inputs, the export options, torch, onnx or the plugin is a new
key: the entries of older versions of a model stay behind. Restored by ``actions/cache`` or GitLab's
``cache:`` run after run, the directory only grows. This module bounds it:

* **last use**: a hit touches ``<entry>/last_used`` (:func:`mark_used`, at most once an hour per
  entry); the file's modification time survives the CI cache's archive, so "not used for N days"
  holds across runs (an entry never hit since it was exported counts from its ``meta.json``);
* **pruning** (:func:`prune`, ``npucheck cache --max-age-days N --max-size SIZE``): entries unused for
  more than N days go, then the least recently used until the directory is under SIZE;
* **never an entry being written**: exports are built in ``.tmp-*`` work directories and renamed
  into place whole; those are never touched here (``export.py`` removes crashed ones after a day).
  An entry whose files or directory changed within the last hour (a facts document or a stamp
  being written, an export that just landed) is kept whatever the limits, and an entry is removed
  by renaming it aside first (``.trash-*``), so a process that looks it up meanwhile sees a miss
  and exports again, never a half-deleted entry.

Plain module: no pytest, no torch.
"""

from __future__ import annotations

import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from .errors import NpuCheckError

__all__ = ["CacheEntry", "CachePruneError", "PruneResult", "USED_FILENAME", "format_size", "mark_used", "parse_size",
           "prune", "scan"]

#: The file whose modification time is an entry's last use.
USED_FILENAME = "last_used"
#: An entry changed within this many seconds may be in use by another process: never removed.
BUSY_SECONDS = 3600
#: A hit refreshes ``last_used`` only when it is older than this (a cached run writes nothing else).
_MARK_EVERY = 3600
_META = "meta.json"  # export.META_FILENAME (not imported: this module stays free of export.py)
_WORK_PREFIXES = (".tmp-", ".trash-")


class CachePruneError(NpuCheckError):
    """A cache directory that cannot be pruned, or a limit that is not a size or a number of days."""


def mark_used(entry: Path, now: Optional[float] = None) -> None:
    """Record that ``entry`` was used (a cache hit). Cheap: one ``stat``; a write at most once an hour.
    A cache that cannot be written only loses the record."""
    now = time.time() if now is None else now
    path = Path(entry) / USED_FILENAME
    try:
        if now - path.stat().st_mtime < _MARK_EVERY:
            return
    except OSError:
        pass
    try:
        path.touch()
        os.utime(path, (now, now))
    except OSError:
        pass


@dataclass(frozen=True)
class CacheEntry:
    path: Path
    size: int  # bytes of every file in the entry
    last_used: float  # epoch seconds: last_used's mtime, else meta.json's
    changed: float  # the latest mtime of the entry's directory and files

    def busy(self, now: float, busy_seconds: float = BUSY_SECONDS) -> bool:
        return now - self.changed < busy_seconds


def scan(cache_dir: Path) -> tuple[list[CacheEntry], list[Path]]:
    """The complete entries of ``cache_dir`` (a directory holding ``meta.json``), oldest use first,
    and the work directories (``.tmp-*``, ``.trash-*``) that are left alone."""
    cache_dir = Path(cache_dir)
    if not cache_dir.exists() and not cache_dir.is_symlink():
        return [], []  # no export yet (a first CI run, a run that exported nothing): nothing to prune
    if not cache_dir.is_dir():
        raise CachePruneError(f"{cache_dir}: not a directory (the export cache is .pytest_cache/d/npucheck-exports "
                              "under the rootdir, or under the ini's cache_dir)")
    entries: list[CacheEntry] = []
    work: list[Path] = []
    for child in sorted(cache_dir.iterdir()):
        if child.name.startswith(_WORK_PREFIXES):
            work.append(child)
            continue
        if child.is_symlink() or not child.is_dir() or not (child / _META).is_file():
            continue  # not an entry of ours (a facts document of a user's file, or something else)
        size, changed = 0, 0.0
        try:
            changed = child.stat().st_mtime
            for root, _dirs, files in os.walk(child):
                for name in files:
                    st = os.lstat(os.path.join(root, name))
                    size += st.st_size
                    changed = max(changed, st.st_mtime)
            used = child / USED_FILENAME
            last = (used if used.is_file() else child / _META).stat().st_mtime
        except OSError:
            continue  # removed meanwhile by another process
        entries.append(CacheEntry(child, size, last, changed))
    entries.sort(key=lambda e: (e.last_used, e.path.name))
    return entries, work


@dataclass
class PruneResult:
    cache_dir: Path
    kept: list[CacheEntry] = field(default_factory=list)
    removed: list[tuple[CacheEntry, str]] = field(default_factory=list)  # entry, why
    busy: list[CacheEntry] = field(default_factory=list)  # over a limit but changed within the hour: kept
    work: list[Path] = field(default_factory=list)
    dry_run: bool = False

    @property
    def size_before(self) -> int:
        return sum(e.size for e in self.kept) + sum(e.size for e, _ in self.removed)

    @property
    def size_after(self) -> int:
        return sum(e.size for e in self.kept)

    def lines(self) -> list[str]:
        """The summary ``npucheck cache`` prints."""
        verb = "would remove" if self.dry_run else "removed"
        if not self.cache_dir.exists():
            return [f"npucheck cache {self.cache_dir}: no export cache there (nothing exported yet): nothing to prune"]
        out = [f"npucheck cache {self.cache_dir}: {len(self.kept) + len(self.removed)} entr"
               f"{'y' if len(self.kept) + len(self.removed) == 1 else 'ies'}, {format_size(self.size_before)}"]
        if self.kept + [e for e, _ in self.removed]:
            oldest = min([e.last_used for e in self.kept] + [e.last_used for e, _ in self.removed])
            out[0] += f" (least recently used {time.strftime('%Y-%m-%d', time.gmtime(oldest))})"
        for e, why in self.removed:
            out.append(f"  {verb} {e.path.name} ({format_size(e.size)}, {why})")
        for e in self.busy:
            out.append(f"  kept {e.path.name} ({format_size(e.size)}): changed within the last hour, it may be in use")
        if self.work:
            out.append(f"  {len(self.work)} export(s) in progress or left by a crash (.tmp-*/.trash-*): left alone")
        if self.removed:
            out.append(f"npucheck cache: {verb} {len(self.removed)} entr{'y' if len(self.removed) == 1 else 'ies'}, "
                       f"{format_size(self.size_before)} -> {format_size(self.size_after)}")
        return out


def prune(cache_dir: Path, *, max_age_days: Optional[float] = None, max_bytes: Optional[int] = None,
          now: Optional[float] = None, busy_seconds: float = BUSY_SECONDS, dry_run: bool = False) -> PruneResult:
    """Remove the entries unused for more than ``max_age_days``, then the least recently used until
    the entries take at most ``max_bytes``; an entry changed within ``busy_seconds`` is kept."""
    if max_age_days is not None and max_age_days < 0:
        raise CachePruneError(f"--max-age-days {max_age_days}: must be 0 or more")
    if max_bytes is not None and max_bytes < 0:
        raise CachePruneError(f"--max-size {max_bytes}: must be 0 or more")
    now = time.time() if now is None else now
    entries, work = scan(cache_dir)
    result = PruneResult(Path(cache_dir), work=work, dry_run=dry_run)
    doomed: dict[Path, str] = {}
    if max_age_days is not None:
        for e in entries:
            age = (now - e.last_used) / 86400
            if age > max_age_days:
                doomed[e.path] = f"unused for {age:.0f} day(s), more than {max_age_days:g}"
    if max_bytes is not None:
        total = sum(e.size for e in entries if e.path not in doomed and not e.busy(now, busy_seconds))
        total += sum(e.size for e in entries if e.busy(now, busy_seconds))
        for e in entries:  # least recently used first
            if total <= max_bytes:
                break
            if e.path in doomed:
                continue
            doomed[e.path] = f"least recently used while the cache was over {format_size(max_bytes)}"
            if not e.busy(now, busy_seconds):  # a busy one stays (below) and still counts
                total -= e.size
    for e in entries:
        if e.path not in doomed:
            result.kept.append(e)
        elif e.busy(now, busy_seconds):
            result.busy.append(e)
            result.kept.append(e)
        elif dry_run or _remove(e.path):
            result.removed.append((e, doomed[e.path]))
        else:
            result.kept.append(e)  # gone or renamed by another process meanwhile: not ours to count
    return result


def _remove(entry: Path) -> bool:
    """Rename the entry aside in one step (a concurrent lookup then misses), then delete it."""
    trash = entry.with_name(f"{_WORK_PREFIXES[1]}{entry.name[:12]}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(entry, trash)
    except OSError:
        return False
    shutil.rmtree(trash, ignore_errors=True)
    return True


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4}


def parse_size(text: str) -> int:
    """``2G``, ``500MB``, ``1.5GiB``, ``123`` (bytes) -> bytes (powers of 1024)."""
    m = _SIZE.match(str(text))
    if not m:
        raise CachePruneError(f"--max-size {text!r}: expected a size such as 500M, 2G or 1.5GiB")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])


def format_size(n: int) -> str:
    for unit, div in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"
