"""The table release policy made checkable: what each release of the package shipped.

``op_support_tables/released.json`` records, per release, every bundled table file with its
``revision`` and the SHA-256 of its bytes::

    {"format": 1, "releases": {"0.1.0": {"rknn/2.5.0/rk3588.json": {"revision": 1, "sha256": "..."}}}}

A table that shipped is never edited in place: at the recorded revision its bytes must be the
recorded ones. A correction bumps the table's ``revision`` and adds an ``errata`` entry (the schema's
semantic checks require one per revision), which ``npucheck tables diff`` shows and the changelog
lists. :func:`policy_problems` says where the bundled tables break this; ``npucheck tables release
VERSION`` records a release (maintainers, when tagging it).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Mapping

from ..errors import TableError, UsageError
from ..jsonio import JsonFileError, load_strict

RELEASED = "released.json"
RELEASED_FORMAT = 1


def _table_files(root: Path) -> dict[str, Path]:
    return {p.relative_to(root).as_posix(): p for p in sorted(root.glob("*/*/*.json"))}


def read_released(root: Path) -> dict[str, dict[str, Mapping[str, Any]]]:
    """release -> {table path under root: {revision, sha256}}; empty when the file is absent."""
    path = root / RELEASED
    if not path.is_file():
        return {}
    try:
        doc = load_strict(path)
    except JsonFileError as exc:
        raise TableError(str(path), [str(exc)]) from None
    releases = doc.get("releases") if isinstance(doc, dict) and doc.get("format") == RELEASED_FORMAT else None
    if not isinstance(releases, dict) or not all(
            isinstance(v, dict) and all(isinstance(e, dict) and isinstance(e.get("revision"), int)
                                        and isinstance(e.get("sha256"), str) for e in v.values())
            for v in releases.values()):
        raise TableError(str(path), [f"expected {{\"format\": {RELEASED_FORMAT}, \"releases\": {{VERSION: "
                                     "{TABLE_PATH: {\"revision\": INT, \"sha256\": HEX}}}}}"])
    return releases


def current_entries(root: Path) -> dict[str, dict[str, Any]]:
    """{table path: {revision, sha256}} of the table files under root now."""
    out: dict[str, dict[str, Any]] = {}
    for rel, path in _table_files(root).items():
        raw = path.read_bytes()
        try:
            revision = load_strict(path).get("revision", 1)
        except (JsonFileError, AttributeError):
            revision = None
        out[rel] = {"revision": revision, "sha256": hashlib.sha256(raw).hexdigest()}
    return out


def policy_problems(root: Path) -> list[str]:
    """Every place where a table under ``root`` breaks the release policy, one sentence each."""
    now = current_entries(root)
    problems = []
    for release, tables in read_released(root).items():
        for rel, shipped in sorted(tables.items()):
            cur = now.get(rel)
            if cur is None:
                problems.append(f"{rel}: shipped in {release} (revision {shipped['revision']}) and is gone; "
                                "a released table stays (correct it with a new revision instead)")
            elif not isinstance(cur["revision"], int) or cur["revision"] < shipped["revision"]:
                problems.append(f"{rel}: revision {cur['revision']} is older than revision {shipped['revision']}, "
                                f"which shipped in {release}")
            elif cur["revision"] == shipped["revision"] and cur["sha256"] != shipped["sha256"]:
                problems.append(f"{rel}: revision {shipped['revision']} shipped in {release} and its content changed "
                                f"since; a released table is never edited in place: bump `revision` to "
                                f"{shipped['revision'] + 1} and add an `errata` entry saying what changed and why")
    return problems


def release_doc(root: Path, version: str) -> dict[str, Any]:
    """released.json with ``version`` recording the tables under root now. Recording a release again
    is allowed only with the same content."""
    problems = policy_problems(root)
    if problems:
        raise UsageError("cannot record a release while released tables were edited in place:\n  "
                         + "\n  ".join(problems))
    releases = dict(read_released(root))
    entry = current_entries(root)
    if version in releases and releases[version] != entry:
        raise UsageError(f"release {version} is already recorded in {root / RELEASED} with other table content")
    releases[version] = entry
    return {"format": RELEASED_FORMAT,
            "about": "what each release shipped: table path -> revision and SHA-256 of its bytes; written by "
                     "`npucheck tables release VERSION`; a shipped revision is never edited (tests check it)",
            "releases": releases}
