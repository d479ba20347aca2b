"""`npucheck check` over many files: input expansion, a bounded process pool, one document.

No pytest or torch import; onnx is imported by the check itself, in the worker processes.
"""

from __future__ import annotations

import glob
import os
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from .errors import NpuCheckError, UsageError

EXIT_OK, EXIT_FALLBACK, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
SCHEMA_PATH = Path(__file__).parent / "schemas" / "check.schema.json"
_GLOB_CHARS = set("*?[")


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def expand_inputs(inputs: Sequence[str]) -> list[Path]:
    """Files to check: a file as given, a directory's *.onnx (recursive, sorted), a glob pattern's
    matches (expanded here, no shell needed; ** is recursive). A directory or pattern that finds no
    ONNX file is a usage error naming it; a duplicate is checked once. A missing plain file is kept:
    its check reports it as an input error beside the others' verdicts."""
    files: list[Path] = []
    for item in inputs:
        p = Path(item)
        if p.is_dir():
            found = sorted(f for f in p.rglob("*.onnx") if f.is_file())
            if not found:
                raise UsageError(f"{item}: directory holds no *.onnx file")
        elif _GLOB_CHARS & set(item) and not p.exists():
            found = sorted(Path(f) for f in glob.glob(item, recursive=True) if Path(f).is_file())
            if not found:
                raise UsageError(f"{item}: pattern matches no file")
        else:
            found = [p]
        files.extend(found)
    seen: set[str] = set()
    unique = []
    for f in files:
        key = os.path.normpath(os.fspath(f))
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique


def quiet_blas_import() -> None:
    """Import numpy (which onnx imports) with OpenBLAS limited to this thread, unless numpy is
    imported already or the user chose OpenBLAS's thread count (``OPENBLAS_NUM_THREADS``).

    OpenBLAS starts a worker thread per further core when numpy loads, and each one spins on the
    CPU for a while (about 0.1 s) before it sleeps. A check never gives it work: it makes no
    matrix product, only small element-wise numpy calls, which OpenBLAS does not run. The spinning
    alone was 0.03-0.08 CPU-s of a whole `npucheck check` (issue 29, goal u4), the most of it on an
    idle machine, where the thread gets a core of its own. OpenBLAS reads the
    variable once, when numpy loads it, so the variable is set around the import only: the
    processes this one starts get the environment they got before."""
    if "numpy" in sys.modules or "OPENBLAS_NUM_THREADS" in os.environ:
        return
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    try:
        import numpy  # noqa: F401
    finally:
        del os.environ["OPENBLAS_NUM_THREADS"]


def check_one(path: str, targets: Sequence[str], table_dirs: Sequence[str], fixes: bool,
              all_nodes: bool, text: bool = True, nodes_text: bool = False,
              catalog: Optional[Any] = None) -> dict[str, Any]:
    """One file's entry of the document, plus its text section (`text`, only when ``text``: a JSON
    run prints none) and a traceback for an internal error (`traceback`). Runs in a worker process:
    everything in and out is plain data. ``nodes_text``: the targets' nodes as their JSON text
    (``TargetResult.to_json(nodes_text=True)``), for a document only ``jsonio.dumps`` writes.
    ``catalog``: the ``Catalog`` of ``table_dirs`` the caller discovered already (in its process),
    else one is discovered here."""
    entry: dict[str, Any] = {"path": path, "targets": []}
    try:
        quiet_blas_import()  # before onnx: a check leaves OpenBLAS's threads idle (and spinning)
        from .check import check_file

        if catalog is None:
            from .tables import Catalog

            catalog = Catalog.discover(list(table_dirs))
        results = check_file(Path(path), list(targets), catalog)
        if fixes and not all(r.passed for r in results):  # with_fixes leaves a passing result as it is
            from .fixes import with_fixes  # imported only then (~2.6 ms)

            results = [with_fixes(r, Path(path), catalog.table(t)) for r, t in zip(results, targets)]
        entry["targets"] = [r.to_json(nodes_text=nodes_text) for r in results]
        if text:
            from .report.text import render_target

            entry["text"] = "\n".join(line for r in results for line in render_target(r, all_nodes=all_nodes))
        entry["passed"] = all(t["passed"] for t in entry["targets"])  # TargetResult.passed, as to_json said it
    except NpuCheckError as exc:
        entry["error"] = {"kind": "input", "message": str(exc)}
    except Exception as exc:  # noqa: BLE001 - reported as exit 3 by the caller, never as a verdict
        import traceback

        entry["error"] = {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}
        entry["traceback"] = traceback.format_exc()
    return entry


def check_many(files: Sequence[Path], targets: Sequence[str], table_dirs: Sequence[str], *, fixes: bool = True,
               all_nodes: bool = False, jobs: Optional[int] = None, text: bool = True,
               catalog: Optional[Any] = None) -> list[dict[str, Any]]:
    """Every file's entry, in input order; up to ``jobs`` worker processes (the check is CPU-bound).
    ``text``: render each file's text section (False when only the JSON document is printed).
    One file or one job runs in this process, with ``catalog`` when given (the ``Catalog`` of
    ``table_dirs`` the caller resolved the targets with: not discovered and loaded a second time);
    a worker process discovers its own. Each file keeps the check's own isolation and timeout
    (graph facts are computed in an isolated child with its time limit)."""
    from .jsonio import LONG_LIST

    jobs = default_jobs() if jobs is None else jobs
    # a JSON run (no text) writes the document with jsonio.dumps only: the nodes go as their text where
    # they get a line each (at most LONG_LIST files and targets; else dumps writes each file or target
    # on one line, and would read the texts back)
    nodes_text = not text and len(files) <= LONG_LIST and len(targets) <= LONG_LIST
    args = [(os.fspath(f), list(targets), list(table_dirs), fixes, all_nodes, text, nodes_text) for f in files]
    if jobs <= 1 or len(args) <= 1:
        return [check_one(*a, catalog=catalog) for a in args]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # spawn: the caller may be a threaded process (pytest, an IDE); a forked copy of it could deadlock
    with ProcessPoolExecutor(max_workers=min(jobs, len(args)), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(check_one, *a) for a in args]
        entries = []
        for a, f in zip(args, futures):
            try:
                entries.append(f.result())
            except Exception as exc:  # noqa: BLE001 - a worker died (BrokenProcessPool): that file is exit 3
                entries.append({"path": a[0], "targets": [], "traceback": "",
                                "error": {"kind": "internal", "message": f"worker process failed: "
                                                                         f"{type(exc).__name__}: {exc}"}})
        return entries


def exit_status(entries: Sequence[dict[str, Any]]) -> int:
    """3 if any file hit an internal error, else 2 if any input error, else 1 if any falls back, else 0."""
    kinds = {e["error"]["kind"] for e in entries if "error" in e}
    if "internal" in kinds:
        return EXIT_INTERNAL
    if "input" in kinds:
        return EXIT_USAGE
    return EXIT_OK if all(e.get("passed") for e in entries) else EXIT_FALLBACK


def document(entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The JSON document (schemas/check.schema.json): the same shape for one file or many."""
    files = []
    for e in entries:
        f: dict[str, Any] = {"path": e["path"], "targets": e["targets"]}
        if "error" in e:
            f["error"] = e["error"]
        files.append(f)
    return {"files": files, "exit_status": exit_status(entries)}


def validate(doc: Any) -> list[str]:
    """Problems of a `check --format json` document against its schema (empty when valid)."""
    import jsonschema
    from referencing import Registry, Resource

    from .jsonio import load_strict
    from .report.jsonreport import SCHEMA_PATH as REPORT_SCHEMA

    schema, report = load_strict(SCHEMA_PATH), load_strict(REPORT_SCHEMA)
    registry = Registry().with_resource(report["$id"], Resource.from_contents(report))
    validator = jsonschema.validators.validator_for(schema)(schema, registry=registry)
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(doc)]


def short_forms(catalog: Any, ref: Any) -> list[str]:
    """The shorter spellings of a target that resolve to ``ref`` today (`rknn`, `rknn@2.5`,
    `rknn/rk3588`, a SoC alias such as `rknn@2.5.0/rk3568`), shortest first; the full form is left out."""
    parts = ref.version.split(".")
    versions = [""] + [".".join(parts[:i]) for i in range(1, len(parts) + 1)]
    aliases = [a for a, soc in catalog.toolchains.get(ref.toolchain, {}).get("soc_aliases", {}).items()
               if soc == ref.soc]
    candidates = []
    for v in versions:
        head = f"{ref.toolchain}@{v}" if v else ref.toolchain
        candidates += [head] + [f"{head}/{s}" for s in (ref.soc, *aliases)]
    found = []
    for c in candidates:
        if c == ref.target or c in found:
            continue
        try:
            if catalog.resolve(c) == ref:
                found.append(c)
        except NpuCheckError:
            continue
    return sorted(found, key=lambda c: (len(c), c))
