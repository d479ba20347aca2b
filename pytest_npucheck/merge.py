"""Shard reports and their merge: one verdict for a suite split over several CI jobs.

Every pytest run with a JSON report records, in the report's ``shard`` section, what a merge needs:
what it was checked against (the tables' hashes per target, the baseline and budgets files'
hashes as the run found them, the plugin version in ``tool``), which marked tests it selected and
deselected, and pytest's own exit status before the run-level decisions. :func:`merge` takes N such
documents and takes the run-level decisions on the union of their tests by calling
``engine.run_decisions`` (the functions the pytest reporter calls), so a merged run decides as one
unsharded run would. No pytest or torch import.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from .engine import run_decisions as decide
from .errors import NpuCheckError

# pytest's exit codes, as numbers: interrupted, internal error, usage error outrank a failure
_EXIT_WORSE = (2, 3, 4)


class MergeError(NpuCheckError):
    """Shards that cannot be merged (they disagree on what they were checked against, overlap, or a
    file is not a shard report): the message names the shards and what differs."""


def shard_section(*, rootpath: Path, baseline_path: Path, baseline_sha256: Optional[str], strict: bool,
                  updating: bool, budgets_path: Optional[Path], budgets_sha256: Optional[str], release: str,
                  args: Sequence[str], last_failed: bool, stepwise: bool, marked_selected: Sequence[str],
                  marked_deselected: Sequence[str], status: int, entries: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """The ``shard`` section of a run's JSON report (the hashes are those of the files as the run
    started; ``status`` is pytest's exit status before the run-level decisions)."""
    return {
        "baseline": {"path": _relative(baseline_path, rootpath), "sha256": baseline_sha256, "strict": strict,
                     "update": updating},
        "budgets": (None if budgets_path is None else
                    {"path": _relative(budgets_path, rootpath), "sha256": budgets_sha256, "release": release}),
        "tables": tables_used(entries),
        "selection": {"args": [str(a) for a in args], "last_failed": last_failed, "stepwise": stepwise,
                      "marked_selected": sorted(set(marked_selected)),
                      "marked_deselected": sorted(set(marked_deselected) - set(marked_selected))},
        "status": int(status),
    }


def file_sha256(path: Optional[Path]) -> Optional[str]:
    """The hash of a file as the run found it (None when it does not exist)."""
    if path is None or not Path(path).exists():
        return None
    from .filehash import sha256_file

    return sha256_file(path)


def tables_used(entries: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """target -> sha256 of the table each completed check used."""
    out: dict[str, str] = {}
    for e in entries:
        for t in e.get("targets") or []:
            sha = (t.get("table") or {}).get("sha256")
            if sha:
                out[t["target"]] = str(sha)
    return dict(sorted(out.items()))


def _relative(path: Path, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(Path(root).resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass
class Shard:
    name: str  # how messages name it (its file)
    doc: Mapping[str, Any]

    @property
    def section(self) -> Mapping[str, Any]:
        return self.doc["shard"]


def load_shard(path: Path) -> Shard:
    """A shard report from a file (a report without a ``shard`` section is refused, named)."""
    from .jsonio import JsonFileError, load_strict

    try:
        doc = load_strict(Path(path))
    except JsonFileError as exc:
        raise MergeError(str(exc)) from None
    return shard_from_document(str(path), doc)


def shard_from_document(name: str, doc: Any) -> Shard:
    if not isinstance(doc, dict) or not isinstance(doc.get("tests"), list) or "tool" not in doc:
        raise MergeError(f"{name}: not a pytest-npucheck JSON report (--npu-report=json:PATH)")
    if not isinstance(doc.get("shard"), dict):
        raise MergeError(f"{name}: the report has no 'shard' section (written by pytest-npucheck before shard "
                         "reports existed?): rerun the shard with this plugin version")
    return Shard(name, doc)


def check_agreement(shards: Sequence[Shard]) -> None:
    """Refuse shards checked against different things, naming what differs and which shards."""
    if not shards:
        raise MergeError("no shard reports to merge")
    checks = [
        ("plugin version", lambda s: s.doc["tool"].get("version")),
        ("baseline file", lambda s: (s.section["baseline"]["path"], s.section["baseline"]["sha256"])),
        ("baseline mode (--npu-baseline-strict)", lambda s: s.section["baseline"]["strict"]),
        ("baseline mode (--npu-update-baseline)", lambda s: s.section["baseline"]["update"]),
        ("budgets file", lambda s: s.section["budgets"]),
    ]
    for what, key in checks:
        groups: dict[str, list[str]] = {}
        for s in shards:
            groups.setdefault(repr(key(s)), []).append(s.name)
        if len(groups) > 1:
            detail = "; ".join(f"{v} in {', '.join(names)}" for v, names in groups.items())
            raise MergeError(f"the shards disagree on the {what}: {detail}")
    seen: dict[str, tuple[str, str]] = {}
    for s in shards:
        for target, sha in s.section["tables"].items():
            if target in seen and seen[target][0] != sha:
                raise MergeError(f"the shards disagree on the table of {target}: sha256 {seen[target][0][:12]} in "
                                 f"{seen[target][1]}, {sha[:12]} in {s.name}")
            seen.setdefault(target, (sha, s.name))
    owner: dict[tuple[str, int], str] = {}
    for s in shards:
        for e in s.doc["tests"]:
            key = (e["nodeid"], int(e.get("call", 1)))
            if key in owner:
                raise MergeError(f"{e['nodeid']} ran in two shards ({owner[key]} and {s.name}): the shards overlap")
            owner[key] = s.name


def partial_reasons(shards: Sequence[Shard]) -> str:
    """Why the union of the shards is not the whole suite, or "" (``run_decisions.partial_reasons`` on
    the union: a marked test no shard selected is deselected; --lf, --sw and test ids are partial)."""
    selected: set[str] = set()
    known: set[str] = set()
    last_failed = stepwise = False
    args: list[str] = []
    for s in shards:
        sel = s.section["selection"]
        selected |= set(sel["marked_selected"])
        known |= set(sel["marked_selected"]) | set(sel["marked_deselected"])
        last_failed |= bool(sel["last_failed"])
        stepwise |= bool(sel["stepwise"])
        args += sel["args"]
    return decide.partial_reasons(last_failed, stepwise, args, len(known - selected))


def combined_status(statuses: Sequence[int]) -> int:
    """pytest's exit status of the union: the worst of interrupted/internal/usage, else failed when a
    shard failed, else no tests when no shard collected any, else OK."""
    for s in _EXIT_WORSE:
        if s in statuses:
            return s
    if decide.EXIT_TESTS_FAILED in statuses:
        return decide.EXIT_TESTS_FAILED
    if statuses and all(s == decide.EXIT_NO_TESTS_COLLECTED for s in statuses):
        return decide.EXIT_NO_TESTS_COLLECTED
    return decide.EXIT_OK


def ratchet(shards: Sequence[Shard]) -> tuple[list[str], Optional[dict[str, Any]], Optional[str]]:
    """The budgets ratchet of the union: (loosenings, base, budgets path as the shards named it).

    Every shard compared the same budgets file (``check_agreement``) with the base its job found; a
    shard whose clone lacked the base (a shallow checkout) compared with HEAD and may have seen no
    loosening where another shard saw one. The union of their loosenings is what the unsharded run
    would report; the base shown is that of a shard that compared with the pull request's base
    (not a fall-back to HEAD) when one did."""
    problems: list[str] = []
    bases: list[dict[str, Any]] = []
    path: Optional[str] = None
    for s in shards:
        b = s.doc.get("budgets")
        if not isinstance(b, Mapping):
            continue
        path = path or (str(b["path"]) if b.get("path") else None)
        problems += [p for p in b.get("tightening_problems") or [] if p not in problems]
        if b.get("base"):
            bases.append(dict(b["base"]))
    base = next((b for b in bases if b.get("commit") and not b.get("note")), bases[0] if bases else None)
    commits = sorted({str(b.get("commit")) for b in bases})
    if base is not None and len(commits) > 1:
        base = {**base, "note": ((base.get("note") + "; ") if base.get("note") else "")
                + f"the shards compared the budgets with different commits ({', '.join(c[:12] for c in commits)}): "
                  "the loosenings any of them found are reported"}
    return problems, base, path


@dataclass
class Merged:
    doc: dict[str, Any]  # the merged JSON report
    status: int  # the exit status the unsharded run would have had
    failures: list[tuple[str, str]] = field(default_factory=list)  # run-level failures (pseudo id, text)


def merge(shards: Sequence[Shard], root: Path, created: Optional[str] = None) -> Merged:
    """The union of the shards as one run: their tests, and the run-level decisions taken on all of
    them (the baseline and budgets files are read under ``root``, where the shards recorded them
    relative to their rootdir, and must be the files the shards were checked against). With
    --npu-update-baseline shards, the baseline at ``root`` is updated with the union's fallbacks."""
    from . import baseline as bl
    from .report.jsonreport import run_document
    from .report.terminal import entry_text
    from .report.text import clean

    check_agreement(shards)
    first = shards[0].section
    entries = [e for s in shards for e in s.doc["tests"]]
    bsec = first["baseline"]
    bpath = Path(root) / bsec["path"]
    if file_sha256(bpath) != bsec["sha256"]:
        raise MergeError(f"{bpath}: not the baseline the shards were checked against (sha256 "
                         f"{(file_sha256(bpath) or 'missing')[:12]} here, {(bsec['sha256'] or 'missing')[:12]} in the "
                         "shards): merge in a checkout of the commit the shards ran")
    try:
        baseline = bl.load(bpath)
    except bl.BaselineError as exc:
        raise MergeError(str(exc)) from None
    baseline_info = None
    if entries or bsec["update"]:
        if bsec["update"]:
            baseline_info = decide.baseline_update(bpath, baseline, bsec["strict"], entries)
        else:
            baseline_info = decide.baseline_stale(baseline, bpath.name, bsec["strict"], entries)
    budgets_info = None
    usec = first["budgets"]
    if usec is not None:
        from .budget import load_budgets

        upath = Path(root) / usec["path"]
        if file_sha256(upath) != usec["sha256"]:
            raise MergeError(f"{upath}: not the budgets file the shards were checked against: merge in a checkout "
                             "of the commit the shards ran")
        budgets = load_budgets(upath)
        problems, base, path = ratchet(shards)
        budgets_info = decide.budgets_info(budgets, usec["release"], entries, partial_reasons(shards), problems, base)
        budgets_info["path"] = path or budgets_info["path"]
    failures = decide.run_failures(baseline_info, budgets_info, entry_text, clean)
    status = decide.exit_status(combined_status([int(s.section["status"]) for s in shards]), baseline_info, failures)
    doc = run_document(entries, created)
    if any(s.doc.get("interrupted") for s in shards):
        doc["interrupted"] = True
    if baseline_info is not None:
        doc["baseline"] = baseline_info
    if budgets_info is not None:
        doc["budgets"] = budgets_info
    sel = [s.section["selection"] for s in shards]
    doc["shard"] = {
        "baseline": dict(bsec), "budgets": usec, "tables": tables_used(entries),
        "selection": {"args": [a for x in sel for a in x["args"]],
                      "last_failed": any(x["last_failed"] for x in sel), "stepwise": any(x["stepwise"] for x in sel),
                      "marked_selected": sorted({t for x in sel for t in x["marked_selected"]}),
                      "marked_deselected": sorted({t for x in sel for t in x["marked_deselected"]}
                                                  - {t for x in sel for t in x["marked_selected"]})},
        "status": combined_status([int(s.section["status"]) for s in shards]),
        "merged_from": len(shards),
    }
    return Merged(doc, status, failures)


def write_reports(merged: Merged, reports: Sequence[tuple[str, Path]]) -> list[str]:
    """Write the merged run's reports through the report entry points (json, md, html, junit);
    the paths written."""
    from .jsonio import dumps, write_atomic

    written = []
    view = None  # built once for the Markdown and HTML reports
    if sum(fmt in ("md", "html") for fmt, _ in reports) > 1:
        from .report.view import build

        view = build(merged.doc)
    for fmt, path in reports:
        if fmt == "json":
            text = dumps(merged.doc)
        elif fmt == "md":
            from .report.markdown import render as render_md

            text = render_md(merged.doc, view=view)
        elif fmt == "html":
            from .report.html import render as render_html

            text = render_html(merged.doc, view=view)
        elif fmt == "junit":
            from .report.junit import render as render_junit

            text = render_junit(merged.doc, merged.failures)
        else:
            raise MergeError(f"--report {fmt}:{path}: unknown format (json, md, html, junit)")
        write_atomic(Path(path), text)
        written.append(str(path))
    return written


__all__ = ["MergeError", "Merged", "Shard", "check_agreement", "combined_status", "file_sha256", "load_shard",
           "merge", "partial_reasons", "ratchet", "shard_from_document", "shard_section", "tables_used", "write_reports"]
