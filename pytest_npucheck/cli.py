"""`npucheck`: the same checks outside pytest.

Exit codes: 0 every node stays on the NPU; 1 a node falls back or the model cannot be compiled;
2 usage or input error (unknown target, unreadable model, invalid table).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Optional, Sequence

from .errors import NpuCheckError
from .jsonio import dumps

EXIT_OK, EXIT_FALLBACK, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 on usage errors, as we do
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"npucheck: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="npucheck", description="Check whether an ONNX model stays on the NPU of a target toolchain.")
    p.add_argument("--tables", action="append", default=[], metavar="DIR",
                   help="extra support-table directory (overrides bundled tables of the same target)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("check", help="check an ONNX file against one or more targets")
    c.add_argument("model", type=Path, help="ONNX model file")
    c.add_argument("--target", "-t", action="append", required=True, metavar="TOOLCHAIN[@VERSION][/SOC]",
                   help="target to check against (repeatable), e.g. rknn@2.5.0/rk3588")
    c.add_argument("--format", choices=("text", "json"), default="text")
    c.add_argument("--all-nodes", action="store_true", help="text format: list every node, not only fallbacks")
    c.add_argument("--no-fixes", action="store_true",
                   help="do not compute fix suggestions for fallbacks (they re-check rewritten graphs)")

    t = sub.add_parser("targets", help="list every available target with its provenance")
    t.add_argument("--format", choices=("text", "json"), default="text")

    tb = sub.add_parser("tables", help="support-table maintenance")
    tsub = tb.add_subparsers(dest="tables_command", required=True, parser_class=_Parser)
    v = tsub.add_parser("validate", help="validate table files (default: every table found)")
    v.add_argument("files", nargs="*", type=Path)
    dg = tsub.add_parser("docs", help="write the supported-ops pages generated from the tables")
    dg.add_argument("out", type=Path, nargs="?", default=Path("docs/supported-ops"))
    dg.add_argument("--check", action="store_true", help="exit 1 when a committed page is stale, write nothing")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return _run(args)
    except NpuCheckError as exc:
        print(f"npucheck: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        return EXIT_OK


def _run(args: argparse.Namespace) -> int:
    from .tables import Catalog

    catalog = Catalog.discover(args.tables)
    if args.command == "targets":
        rows = catalog.listing()
        if args.format == "json":
            sys.stdout.write(dumps(rows))
        else:
            for r in rows:
                prov = r.get("provenance", {})
                state = f"ERROR {r['error']}" if "error" in r else (
                    f"{r['ops']} ops, {prov.get('method', '?')}, {prov.get('toolchain_package', '')}".rstrip(", "))
                print(f"{r['target']:<28} {r['title']}: {state}")
        return EXIT_OK
    if args.command == "tables":
        from .errors import TableError
        from .tables import load_table

        if args.tables_command == "docs":
            from .docs_gen import generate
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
        if args.files:
            for f in args.files:
                try:
                    load_table(f)
                except TableError as exc:
                    problems[str(f)] = exc.problems
        else:
            problems = catalog.validate_all()
        for path, items in problems.items():
            for item in items:
                print(f"{path}: {item}", file=sys.stderr)
        print(f"{len(problems)} invalid table file(s)" if problems else "all tables valid")
        return EXIT_USAGE if problems else EXIT_OK

    from .check import check_file
    from .report.text import render_target

    results = check_file(args.model, args.target, catalog)
    if not args.no_fixes:
        from .fixes import with_fixes

        results = [with_fixes(r, args.model, catalog.table(t)) for r, t in zip(results, args.target)]
    if args.format == "json":
        docs = [r.to_json() for r in results]
        sys.stdout.write(dumps(docs[0] if len(docs) == 1 else docs))
    else:
        for r in results:
            print("\n".join(render_target(r, all_nodes=args.all_nodes)))
    return EXIT_OK if all(r.passed for r in results) else EXIT_FALLBACK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
