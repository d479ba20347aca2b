"""The run-level decisions, as plain functions over the per-test entries (their JSON form, as in the
report's ``tests[]``): stale baseline entries and the updated baseline, stale budget entries, the
budgets' ratchet against the committed file, what fails the run as a whole and its exit status.

The pytest reporter (``reporter.py``) calls them once at the end of a run, on the entries every
process sent; a merge of shard reports can call them on the union of the shards' entries and take
the same decisions. No pytest import.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from ..errors import NpuCheckError

# pytest's exit codes, as numbers (this module does not import pytest)
EXIT_OK, EXIT_TESTS_FAILED, EXIT_NO_TESTS_COLLECTED = 0, 1, 5

Entries = Sequence[Mapping[str, Any]]


def baseline_stale(baseline: Any, baseline_name: str, strict: bool, entries: Entries) -> dict[str, Any]:
    """The baseline section of the report for a run that does not update it: its stale entries (an
    accepted fallback no checked test has any more)."""
    from .. import baseline as bl

    info = baseline_info(baseline, baseline_name, strict)
    info["stale"] = [e.to_json() for e in bl.stale(baseline, entries)]
    return info


def baseline_info(baseline: Any, baseline_name: str, strict: bool) -> dict[str, Any]:
    return {"path": baseline_name, "exists": baseline.exists, "updated": False, "strict": strict,
            "entries": len(baseline.entries), "stale": [], "added": [], "removed": []}


def baseline_update(path: Path, baseline: Any, strict: bool, entries: Entries) -> dict[str, Any]:
    """--npu-update-baseline: merge the run's fallbacks into the file as it is now (another run may
    have changed it since this one read it) and write it; the report's baseline section, with an
    ``error`` when the file could not be read back or written (the old file then stays)."""
    from .. import baseline as bl
    from ..jsonio import directory_lock, write_atomic

    info = baseline_info(baseline, path.name, strict)
    try:
        with directory_lock(path):
            try:
                base = bl.load(path)
            except bl.BaselineError as exc:  # the file is left as it is, for its owner to repair
                info["error"] = f"changed during the run and is no longer valid, so it was not updated: {exc}"
                return info
            upd = bl.updated(base, entries)
            write_atomic(path, upd.baseline.dumps())
    except (OSError, NpuCheckError) as exc:  # disk full, a directory gone: the old file stays, reports go on
        info["error"] = f"could not be written, so it was not updated: {type(exc).__name__}: {exc}"
        return info
    info.update(updated=True, entries=len(upd.baseline.entries),
                added=[e.to_json() for e in upd.added], removed=[e.to_json() for e in upd.removed],
                refused=[e.to_json() for e in upd.refused])
    return info


def budgets_used(entries: Entries) -> set[str]:
    """The budget keys any check used: test budgets of the numerics, target budgets of the gate."""
    used = {k for e in entries for k in ((e.get("numerics") or {}).get("budget_keys") or [])}
    used |= {t["budget"]["key"] for e in entries for t in e.get("targets") or [] if t.get("budget")}
    return used


def budgets_info(budgets: Any, release: str, entries: Entries, partial: str, tightening: Sequence[str],
                 base: Optional[Mapping[str, Any]]) -> dict[str, Any]:
    """The budgets section of the report: stale entries (none when the run is ``partial``: an entry
    unused here may be used by the rest) and the loosenings found against the committed file."""
    numerics_ran = any((e.get("numerics") or {}).get("enabled") for e in entries)
    ran = any(e.get("targets") for e in entries)  # deployment budgets apply to every completed check
    stale = (budgets.stale(release, budgets_used(entries), tests=numerics_ran, targets=True)
             if ran and not partial else [])
    info: dict[str, Any] = {"path": str(budgets.path), "release": release,
                            "release_in_force": budgets.release_in_force(release), "stale": stale,
                            "tightening_problems": list(tightening)}
    if base is not None:
        info["base"] = dict(base)
    if partial and ran:
        info["stale_not_checked"] = f"a partial run ({partial}): an entry unused here may be used by the rest"
    return info


def partial_reasons(last_failed: bool, stepwise: bool, args: Sequence[str], deselected_marked: int) -> str:
    """Why a run is not the whole suite (a budgets entry it leaves unused may not be stale), or "".

    A selection (-k, -m, --deselect) is partial only when it left out a marked test (seen by every
    process that collected, xdist workers included): ``-m npu_deployable`` runs them all. --lf, --sw
    and test ids on the command line are partial by themselves. Paths narrower than the suite are
    not detected."""
    why = [flag for flag, on in (("--lf", last_failed), ("--sw", stepwise)) if on]
    if any("::" in str(a) for a in args):
        why.append("test ids")
    if deselected_marked:
        why.append(f"{deselected_marked} marked test(s) deselected")
    return ", ".join(why)


def tightening_problems(budgets: Any, base_option: Optional[str]) -> tuple[list[str], Optional[dict[str, Any]]]:
    """The ratchet: loosenings of the budgets file against its version at the pull request's base
    (``gitbase.find_base``: --npu-budget-base, the CI's variables, else HEAD with a note), and the base.

    Outside a git work tree, or without git, only the rules within the file itself are checked. A
    base that cannot be found is a :class:`~pytest_npucheck.gitbase.BaseError` (a usage error)."""
    from ..budget import check_tightening
    from ..gitbase import committed_text, find_base
    from ..jsonio import loads_strict

    path = Path(budgets.path) if budgets.path is not None else None
    if path is None:
        return check_tightening(None, budgets.doc), None
    base = find_base(path.parent, base_option)
    old_doc = None
    text = committed_text(path, base)
    if text is not None:
        try:
            old_doc = loads_strict(text)
        except ValueError:
            old_doc = None  # the base's file was not strict JSON: only the rules within the file apply
    try:
        return check_tightening(old_doc, budgets.doc), base.to_json()
    except (KeyError, ValueError, TypeError) as exc:
        return [f"cannot compare budgets: {exc}"], base.to_json()


def run_failures(baseline: Optional[Mapping[str, Any]], budgets: Optional[Mapping[str, Any]],
                 entry_text: Callable[[Mapping[str, Any]], str], clean: Callable[[str, int], str]
                 ) -> list[tuple[str, str]]:
    """What fails the run as a whole, as (pseudo test id, text): a baseline that could not be updated,
    stale baseline entries in strict mode, budgets loosened without approval."""
    failures: list[tuple[str, str]] = []
    if baseline is not None and baseline.get("error"):
        failures.append((f"{baseline['path']}::update", f"npucheck baseline {baseline['path']}: {baseline['error']}"))
    if baseline is not None and baseline["stale"] and baseline["strict"]:
        lines = [f"npucheck baseline {baseline['path']}: {len(baseline['stale'])} stale entr"
                 f"{'y' if len(baseline['stale']) == 1 else 'ies'} (strict): the accepted fallback no longer "
                 "occurs: remove it, or run --npu-update-baseline"] + [f"  stale: {entry_text(e)}"
                                                                      for e in baseline["stale"]]
        failures.append((f"{baseline['path']}::stale", "\n".join(lines)))
    if budgets is not None and budgets["tightening_problems"]:
        name = Path(budgets["path"]).name
        lines = [f"npucheck budgets {budgets['path']}: {len(budgets['tightening_problems'])} loosening(s) without "
                 f"approval (compared with {(budgets.get('base') or {}).get('label', 'HEAD')})"]
        lines += [f"  {clean(p, 500)}" for p in budgets["tightening_problems"]]
        failures.append((f"{name}::loosened", "\n".join(lines)))
    return failures


def exit_status(status: int, baseline: Optional[Mapping[str, Any]], failures: Sequence[Any]) -> int:
    """The run's exit status once the run-level decisions are taken: a baseline that could not be
    updated fails the run whatever its status; another run failure turns a green (or empty) run red."""
    if baseline is not None and baseline.get("error"):
        status = EXIT_TESTS_FAILED
    if failures and status in (EXIT_OK, EXIT_NO_TESTS_COLLECTED):
        status = EXIT_TESTS_FAILED
    return status


__all__ = ["baseline_stale", "baseline_update", "budgets_info", "budgets_used", "partial_reasons",
           "tightening_problems", "run_failures", "exit_status"]
