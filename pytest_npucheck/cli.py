"""`npucheck`: the same checks outside pytest.

Exit codes: 0 every node stays on the NPU; 1 a node falls back or the model cannot be compiled;
2 usage or input error (unknown target, unreadable model, invalid table); 3 internal error (a bug in
npucheck, never a verdict: the traceback goes to stderr).
`tables diff` exits 0 with the differences printed; `probe --check-table` exits 1 when an entry of
the committed table disagrees with its fresh probes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Optional, Sequence

from .errors import NpuCheckError
from .jsonio import dumps

if TYPE_CHECKING:
    from .tables import Catalog, Table

EXIT_OK, EXIT_FALLBACK, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
MERGE_EXIT_CODES = ("exit status: pytest's, as one unsharded run of the union would have it (0 passed, 1 a test or the "
                    "run failed, 2 a shard was interrupted, 5 no tests); 2 also when the shards cannot be merged "
                    "(they disagree on tables, baseline, budgets or plugin version, or overlap: the message says "
                    "which)")
EXIT_CODES = ("exit codes: 0 every node stays on the NPU; 1 a node falls back or the model cannot be compiled; "
              "2 usage or input error (unknown target, unreadable or invalid model, invalid table); "
              "3 internal error (a bug in npucheck, not a verdict; the traceback is on stderr)")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 on usage errors, as we do
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"npucheck: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="npucheck", description="Check whether an ONNX model stays on the NPU of a target toolchain.",
                epilog=EXIT_CODES)
    p.add_argument("--tables", action="append", default=[], metavar="DIR",
                   help="extra support-table directory (overrides bundled tables of the same target)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="check ONNX files against one or more targets", epilog=EXIT_CODES)
    c.add_argument("models", nargs="+", metavar="MODEL",
                   help="ONNX file, directory (its *.onnx, recursively) or glob pattern (expanded by npucheck: "
                        "'models/**/*.onnx'); several are checked in one call with one report and one exit code "
                        "(the worst: 3 internal error, 2 input error, 1 fallback, 0)")
    c.add_argument("--tables", dest="check_tables", action="append", default=[], metavar="DIR",
                   help="as the top-level --tables, also accepted after `check` (the pre-commit hook's args)")
    c.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                   help="worker processes for several files (default: min(2, CPU count))")
    c.add_argument("--target", "-t", action="append", required=True, metavar="TOOLCHAIN[@VERSION][/SOC]",
                   help="target to check against (repeatable), e.g. rknn@2.5.0/rk3588")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument("--all-nodes", action="store_true", help="text format: list every node, not only fallbacks")
    c.add_argument("--no-fixes", action="store_true",
                   help="do not compute fix suggestions for fallbacks (they re-check rewritten graphs)")

    m = sub.add_parser("merge", help="merge the JSON reports of a suite's shards into one run: reports, run-level "
                       "decisions (stale entries, budgets, baseline update), exit status", epilog=MERGE_EXIT_CODES)
    m.add_argument("shards", nargs="+", type=Path, metavar="SHARD.json",
                   help="the shards' --npu-report=json files")
    m.add_argument("--report", action="append", default=[], metavar="FORMAT:PATH",
                   help="write a merged report: json:PATH, md:PATH, html:PATH, junit:PATH (repeatable)")
    m.add_argument("--root", type=Path, default=Path("."),
                   help="the rootdir the shards ran in (a checkout of the same commit): the baseline and budgets "
                   "files are read there, and the baseline is updated there when the shards ran "
                   "--npu-update-baseline (default: the current directory)")

    ca = sub.add_parser("cache", help="show the export cache's size and prune it: entries unused for N days, then the "
                        "least recently used over a size (run it before the CI job saves the cache)")
    ca.add_argument("cache_dir", type=Path, nargs="?", default=None, metavar="DIR",
                    help="the export cache (default: $NPUCHECK_EXPORT_CACHE_DIR when set, else "
                    ".pytest_cache/d/npucheck-exports; a run's ini key npu_export_cache_dir is not read here)")
    ca.add_argument("--max-age-days", type=float, default=None, metavar="N",
                    help="remove the entries no run has used for more than N days")
    ca.add_argument("--max-size", default=None, metavar="SIZE",
                    help="then remove the least recently used entries until the cache is under SIZE (500M, 2G)")
    ca.add_argument("--dry-run", action="store_true", help="say what would be removed, remove nothing")

    t = sub.add_parser("targets", help="list every available target with its provenance and the short forms "
                       "that resolve to it (rknn -> rknn@2.5.0/rk3588)")
    t.add_argument("--format", choices=("text", "json"), default="text")

    tb = sub.add_parser("tables", help="support-table maintenance")
    tsub = tb.add_subparsers(dest="tables_command", required=True, parser_class=_Parser)
    v = tsub.add_parser("validate", help="validate table files (default: every table found)")
    v.add_argument("files", nargs="*", type=Path)
    v.add_argument("--write-manifest", action="store_true",
                   help="also record the bundled tables that passed (op_support_tables/validated.json), whose "
                        "schema validation later loads then skip while their bytes are unchanged")
    rl = tsub.add_parser("release", help="record the bundled tables as shipped in a release (released.json)")
    rl.add_argument("version", help="the release, e.g. 0.1.0")
    dg = tsub.add_parser("docs", help="write the supported-ops pages generated from the tables")
    dg.add_argument("out", type=Path, nargs="?", default=Path("docs/supported-ops"))
    dg.add_argument("--check", action="store_true", help="exit 1 when a committed page is stale, write nothing")
    df = tsub.add_parser("diff", help="what changed between two tables (SDK versions or SoCs)")
    df.add_argument("old", metavar="OLD", help="a target (qnn@2.47/htp-v73) or a table file, e.g. an earlier revision "
                    "(git show v0.1.0:op_support_tables/rknn/2.5.0/rk3588.json > old.json)")
    df.add_argument("new", metavar="NEW", help="a target (qnn@2.51/htp-v73) or a table file")
    df.add_argument("--format", choices=("text", "json", "md"), default="text")

    pr = sub.add_parser("probe", help="run the probe models through a real toolchain; write or check its table")
    pr.add_argument("toolchain", help="rknn or qnn")
    pr.add_argument("--version", help="toolchain version: rknn-toolkit2 version, or the QNN SDK version the backend reports")
    pr.add_argument("--soc", help="SoC: rknn target_platform (rk3588, ...) or htp-v<ARCH> (default: the catalog's)")
    pr.add_argument("--python", help="python of the toolchain's venv (default: $NPUCHECK_RKNN_PYTHON / $NPUCHECK_QNN_PYTHON)")
    pr.add_argument("--select", action="append", metavar="PREFIX", help="only probe ids with this prefix (repeatable)")
    pr.add_argument("--extra", action="store_true", help="the extra probes (RKNN: probe.extra_families, x.*; QNN: q.*)")
    pr.add_argument("--precision", choices=("fp16", "int8"), default="fp16", help="QNN only (default fp16)")
    pr.add_argument("--out", type=Path, help="results JSON (default: probes/<toolchain>/<version>/... under the current "
                    "directory; a --select subset goes to a temporary directory)")
    pr.add_argument("--results", type=Path, metavar="FILE",
                    help="do not run the toolchain: write or check the table from recorded probe results")
    pr.add_argument("--workers", type=int, default=2)
    pr.add_argument("--timeout", type=float, default=120.0, help="per-model timeout in seconds")
    pr.add_argument("--no-run", action="store_true", help="QNN: place only, do not run each session once")
    act = pr.add_mutually_exclusive_group()
    act.add_argument("--write-table", action="store_true",
                     help="build the table from the results (a full run) and write it")
    act.add_argument("--check-table", action="store_true",
                     help="exit 1 when an entry of the committed table disagrees with its fresh probes")
    pr.add_argument("--table-out", type=Path, help="--write-table: where (default: the bundled op_support_tables/)")
    pr.add_argument("--format", choices=("text", "json"), default="text", help="--check-table report format")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run a command; its exit status. Without ``argv`` (the program's own command line: the
    ``npucheck`` script, ``python -m pytest_npucheck.cli``) the process then ends at once
    (``_end_process``) rather than returning the status to ``sys.exit``."""
    status = _main(argv)
    if argv is None:
        _end_process(status)
    return status


def _end_process(status: int) -> None:
    """End the process with ``status`` once the exit functions ran and the streams are flushed, without
    the interpreter's teardown of the facts, models and tables (0.15-0.36 CPU-s after a check of the
    26k-node encoder), or return where that could differ from an ordinary exit
    (``process_exit.end_without_teardown``)."""
    from .process_exit import end_without_teardown

    end_without_teardown(status)


def _main(argv: Optional[Sequence[str]]) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except NpuCheckError as exc:
        print(f"npucheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # noqa: BLE001 - a crash must never look like a verdict (exit 1)
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(_internal_error(f"{type(exc).__name__}: {exc}"), file=sys.stderr)
        return EXIT_INTERNAL


def _internal_error(what: str) -> str:
    return (f"npucheck: internal error: {what}\n"
            "This is a bug in npucheck, not a verdict on the model (exit code 3). Please report it to the "
            "pytest-npucheck maintainers with the traceback above, the command line and, if you can, the model.")


def _merge(args: argparse.Namespace) -> int:
    from .merge import MergeError, load_shard, merge, write_reports

    reports = []
    for value in args.report:
        fmt, sep, path = value.partition(":")
        if not sep or fmt not in ("json", "md", "html", "junit") or not path:
            raise MergeError(f"--report {value!r}: expected FORMAT:PATH with FORMAT json, md, html or junit")
        reports.append((fmt, Path(path)))
    merged = merge([load_shard(p) for p in args.shards], args.root)
    doc = merged.doc
    t = doc["totals"]
    print(f"npucheck merge: {len(args.shards)} shard(s), {t['tests']} checked test(s): {t.get('passed', 0)} passed, "
          f"{t.get('failed', 0)} failed, {t.get('error', 0)} error")
    b = doc.get("baseline") or {}
    if b.get("error"):
        print(f"npucheck baseline {b['path']}: {b['error']}")
    elif b.get("updated"):
        print(f"npucheck baseline updated: {b['path']} ({b['entries']} entries, {len(b['added'])} added, "
              f"{len(b['removed'])} removed as no longer occurring)")
    elif b.get("stale"):
        print(f"npucheck baseline {b['path']}: {len(b['stale'])} stale entr{'y' if len(b['stale']) == 1 else 'ies'}")
    u = doc.get("budgets") or {}
    if u.get("stale"):
        print(f"npucheck budgets {u['path']}: {len(u['stale'])} stale entr{'y' if len(u['stale']) == 1 else 'ies'}")
    if u.get("stale_not_checked"):
        print(f"npucheck budgets {u['path']}: stale entries not checked: {u['stale_not_checked']}")
    for nodeid, text in merged.failures:
        print(f"FAILED {nodeid}: {text.splitlines()[0]}")
    for path in write_reports(merged, reports):
        print(f"npucheck report written: {path}")
    print(f"npucheck merge: exit status {merged.status} (as one unsharded pytest run)")
    return merged.status


def _run(args: argparse.Namespace) -> int:
    if args.command == "merge":
        return _merge(args)
    if args.command == "cache":
        from .cache_prune import parse_size, prune

        cache_dir = args.cache_dir
        if cache_dir is None:  # where a run puts it without the ini key: the environment, else pytest's cache
            env = os.environ.get("NPUCHECK_EXPORT_CACHE_DIR", "").strip()
            cache_dir = Path(env) if env else Path(".pytest_cache/d/npucheck-exports")
        result = prune(cache_dir, max_age_days=args.max_age_days,
                       max_bytes=None if args.max_size is None else parse_size(args.max_size), dry_run=args.dry_run)
        print("\n".join(result.lines()))
        return EXIT_OK
    from .tables import Catalog

    if getattr(args, "check_tables", None):
        args.tables = [*args.tables, *args.check_tables]
    catalog = Catalog.discover(args.tables)
    if args.command == "probe":
        return _probe(args, catalog)
    if args.command == "targets":
        from .cli_check import short_forms

        rows = catalog.listing()
        for r in rows:
            r["short_forms"] = short_forms(catalog, catalog.refs[(r["toolchain"], r["version"], r["soc"])])
        if args.format == "json":
            sys.stdout.write(dumps(rows))
        else:
            for r in rows:
                prov = r.get("provenance", {})
                state = f"ERROR {r['error']}" if "error" in r else (
                    f"{r['ops']} ops, revision {r['revision']}, {prov.get('method', '?')}, "
                    f"{prov.get('toolchain_package', '')}".rstrip(", "))
                print(f"{r['target']:<28} {r['title']}: {state}")
                if r["short_forms"]:
                    print(f"{'':<28} also written: {', '.join(r['short_forms'])}")
        return EXIT_OK
    if args.command == "tables":
        if args.tables_command == "diff":
            from .tabletools.diff import RENDERERS, diff_tables

            d = diff_tables(_table_arg(catalog, args.old), _table_arg(catalog, args.new))
            sys.stdout.write(RENDERERS[args.format](d))
            return EXIT_OK
        if args.tables_command == "release":
            from .jsonio import write_atomic
            from .tabletools.releases import RELEASED, release_doc
            from .tables import bundled_tables_dir

            doc = release_doc(bundled_tables_dir(), args.version)
            write_atomic(bundled_tables_dir() / RELEASED, dumps(doc))
            print(f"recorded release {args.version}: {len(doc['releases'][args.version])} tables")
            return EXIT_OK
        if args.tables_command == "docs":
            from .tabletools.docs import generate
            from .jsonio import write_atomic

            pages = generate(args.out, catalog)
            stale = [p for p, text in pages.items() if not p.is_file() or p.read_text(encoding="utf-8") != text]
            if args.check:
                for p in stale:
                    print(f"stale: {p} (run `npucheck tables docs {args.out}`)", file=sys.stderr)
                return EXIT_FALLBACK if stale else EXIT_OK
            for p in stale:
                write_atomic(p, pages[p])
            print(f"{len(stale)} page(s) written, {len(pages) - len(stale)} unchanged in {args.out}")
            return EXIT_OK
        problems: dict[str, list[str]] = {}
        if args.files and args.write_manifest:
            from .errors import UsageError

            raise UsageError("--write-manifest records every bundled table: give no files")
        if args.files:
            for f in args.files:
                found = catalog.validate_file(f)
                if found:
                    problems[str(f)] = found
        else:
            problems = catalog.validate_all()
            from .tabletools.releases import RELEASED, policy_problems
            from .tables import bundled_tables_dir

            released = policy_problems(bundled_tables_dir())
            if released:
                problems[str(bundled_tables_dir() / RELEASED)] = released
        for path, items in problems.items():
            for item in items:
                print(f"{path}: {item}", file=sys.stderr)
        print(f"{len(problems)} invalid table file(s)" if problems else "all tables valid")
        if args.write_manifest and not problems:
            from .jsonio import write_atomic
            from .tables import MANIFEST, bundled_tables_dir, manifest_doc

            doc = manifest_doc(catalog)
            dest = bundled_tables_dir() / MANIFEST
            write_atomic(dest, dumps(doc))
            print(f"wrote {dest} ({len(doc['tables'])} tables)")
        return EXIT_USAGE if problems else EXIT_OK

    from . import cli_check
    from .errors import UsageError

    if args.jobs is not None and args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    for t in args.target:  # resolve every target before any work: an unknown one is a usage error
        catalog.table(t)
    files = cli_check.expand_inputs(args.models)
    entries = cli_check.check_many(files, args.target, args.tables, fixes=not args.no_fixes,
                                   all_nodes=args.all_nodes, jobs=args.jobs, text=args.format != "json",
                                   catalog=catalog)
    for e in entries:
        if "error" in e:
            if "traceback" in e:
                sys.stderr.write(e["traceback"])
                print(_internal_error(f"{e['path']}: {e['error']['message']}"), file=sys.stderr)
            else:
                print(f"npucheck: error: {e['error']['message']}", file=sys.stderr)
    doc = cli_check.document(entries)
    if args.format == "json":
        sys.stdout.write(dumps(doc))
    else:
        several = len(entries) > 1
        for e in entries:
            if several:
                state = ("ERROR" if "error" in e else "PASS" if e.get("passed") else "FAIL")
                print(f"== {e['path']}: {state}")
            if "error" in e:
                if several:
                    print(f"  {e['error']['kind']} error: {e['error']['message']}")
                continue
            print(e["text"])
        if several:
            n_err = sum("error" in e for e in entries)
            n_fail = sum(1 for e in entries if "error" not in e and not e.get("passed"))
            print(f"{len(entries)} file(s): {len(entries) - n_err - n_fail} pass, {n_fail} fall back, {n_err} error(s)")
    return doc["exit_status"]


def _table_arg(catalog: "Catalog", text: str) -> "Table":
    """`tables diff`'s operand: a table file (a path ending in .json) or a target of the catalog."""
    if text.endswith(".json"):
        from .errors import UsageError
        from .tables import load_table

        if not Path(text).is_file():
            raise UsageError(f"{text}: no such table file")
        return load_table(Path(text), full=True)
    return catalog.table(text)


def _probe(args: argparse.Namespace, catalog: "Catalog") -> int:
    """`npucheck probe`: run the probes (pytest_npucheck.probe.refresh), then write or check the table."""
    from .errors import UsageError
    from .probe import refresh
    from .tables import bundled_tables_dir
    from .toolchains import registry

    if args.write_table and args.select:
        raise UsageError("--write-table needs a full probe run (every table entry cites its probes); drop --select")
    probes = refresh.runner(args.toolchain.lower()) if args.precision != "fp16" else None
    if probes is not None and args.precision in probes.precisions and args.check_table:
        raise UsageError(f"--check-table compares fp16 placement (a {args.toolchain.upper()} table lists its "
                         f"{args.precision} differences in notes); use --precision fp16")
    if probes is not None and args.precision not in probes.precisions:
        having = [n.upper() for n, t in registry.registered().items()
                  if t.probes is not None and args.precision in t.hook("probes").precisions]
        raise UsageError(f"--precision is a {'/'.join(having) or 'no toolchain'} option ({probes.precision_note})")
    if args.results and not (args.write_table or args.check_table):
        raise UsageError("--results is for --write-table or --check-table from recorded probe results")
    if args.results and (args.select or args.out or args.extra):
        raise UsageError("--results reads recorded probe results; --select, --extra and --out are for a probe run")
    target = refresh.resolve_target(catalog, args.toolchain.lower(), args.version, args.soc, args.python,
                                    need_table=args.check_table, need_python=not args.results)
    if args.results:
        out = args.results
        results = refresh.load_results(out, target)
        package = results.get("package_version") or results.get("version")
    else:
        package = refresh.preflight_version(target, catalog)
        out = refresh.results_location(target, args.out, args.select, extra=args.extra, precision=args.precision)
        results = refresh.run(target, out, select=args.select, extra=args.extra, precision=args.precision,
                              workers=args.workers, timeout=args.timeout, run_sessions=not args.no_run)
    from collections import Counter

    counts = Counter(r["verdict"] for r in results["probes"])
    print(f"{len(results['probes'])} probe(s) of {target.target} ({registry.get(target.toolchain).package} "
          f"{package}): {', '.join(f'{k} {v}' for k, v in sorted(counts.items())) or 'none'}; results in {out}",
          file=sys.stderr)
    if args.write_table:
        table = refresh.build_table(target, out, precision=args.precision)
        dest = args.table_out or (bundled_tables_dir() / target.toolchain / table["version"] / f"{table['soc']}.json")
        refresh.write_table(table, dest)
        print(f"wrote {dest} ({len(table['ops'])} op entries, {len(table.get('patterns', []))} patterns); "
              "then run `npucheck tables docs`, `npucheck tables validate --write-manifest` and "
              f"`npucheck tables diff` against the previous table", file=sys.stderr)
        return EXIT_OK
    if args.check_table:
        from .jsonio import load_strict

        ref = catalog.resolve(f"{target.toolchain}@{target.version}/{target.soc}")
        table = catalog.load(ref)
        models = refresh.probe_models(target.toolchain, results)
        report = refresh.check_table(target, table, load_strict(ref.path), results, models)
        if args.format == "json":
            sys.stdout.write(dumps(report.to_json()))
        else:
            print("\n".join(report.render(registry.get(target.toolchain).package)))
        return EXIT_OK if report.passed else EXIT_FALLBACK
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
