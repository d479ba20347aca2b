"""Support tables built from vendor documentation (SNPE, CANN).

The facts read from the vendors' pages are kept as small JSON files in ``doc_facts/``, one per
toolchain version, in a form close to the page (operator, the versions it lists, its notes as
constraints, the runtime a layer runs on). This module turns them into schema-valid tables:

    python -m pytest_npucheck.tabletools.from_docs            # write op_support_tables/{snpe,cann}/...
    python -m pytest_npucheck.tabletools.from_docs --check    # exit 1 if a committed table differs
    python -m pytest_npucheck.tabletools.from_docs --counts   # published ops vs entries, per version

Two readings of "opset" meet here. SNPE/QAIRT pages list *operator* versions (``Abs: 1,6,13``
are the versions in which ONNX changed Abs); CANN pages list *model* opsets (``Opset v8 .. v18``).
The table's ``opset`` range is always a model-opset range, so SNPE versions are resolved through
the ONNX schemas (``onnx.defs``): the first model opset whose Abs is a listed version is the lower
bound. SNPE pages are not exhaustive about newer versions (Relu is listed as ``1,6`` although
ONNX has Relu-13 and Relu-14, which only add dtypes), so an unlisted newer operator version is
noted on the entry, not treated as unsupported; the table-wide opset range ends at the highest
operator version the page lists. CANN ranges with holes (Resize without v13) keep the outer range
and name the hole in the note.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

FACTS_DIR = Path(__file__).with_name("doc_facts")
GENERATOR = "pytest_npucheck.probe.doc_tables"  # as the committed tables record it (module since moved)
DOMAIN = "ai.onnx"


# --------------------------------------------------------------------------------- facts files

def facts_files() -> list[Path]:
    return sorted(FACTS_DIR.glob("*.json"))


def load_facts(toolchain: str, version: str) -> dict[str, Any]:
    path = FACTS_DIR / f"{toolchain}-{version}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SystemExit(f"no facts file {path}") from None
    except json.JSONDecodeError as exc:
        raise SystemExit(f"{path}: invalid JSON: {exc}") from None
    for key in ("toolchain", "version", "sources"):
        if key not in data:
            raise SystemExit(f"{path}: missing field {key!r}")
    if (data["toolchain"], data["version"]) != (toolchain, version):
        raise SystemExit(f"{path}: says {data['toolchain']} {data['version']}, file name says {toolchain} {version}")
    return data


def _since_versions(op: str, max_opset: int) -> dict[int, int]:
    """model opset -> the version of ``op`` that opset resolves to (absent where op is undefined)."""
    import onnx.defs

    out: dict[int, int] = {}
    for m in range(1, max_opset + 1):
        try:
            out[m] = onnx.defs.get_schema(op, max_inclusive_version=m, domain="").since_version
        except Exception:  # onnx raises SchemaError: op not defined at this opset
            continue
    return out


def is_onnx_op(op: str) -> bool:
    import onnx.defs

    return bool(onnx.defs.has(op, domain=""))


def snpe_opset_range(op: str, listed: Iterable[int], table_max: int) -> tuple[Optional[tuple[int, int]], str]:
    """Model-opset range for an op whose page lists operator versions ``listed``; plus a note."""
    listed = sorted(set(listed))
    resolved = _since_versions(op, table_max)
    ok = [m for m, v in resolved.items() if v in listed]
    if not ok:
        return None, f"none of the listed versions {listed} is an ONNX version of {op} up to opset {table_max}"
    lo = min(ok)
    newer = sorted({v for m, v in resolved.items() if m >= lo and v not in listed and v > max(listed)})
    unknown = sorted(v for v in listed if v not in set(resolved.values()))
    notes = [f"page lists op versions {', '.join(map(str, listed))}"]
    if newer:
        notes.append(f"newer ONNX versions {', '.join(map(str, newer))} are not listed (not treated as unsupported)")
    if unknown:
        notes.append(f"listed {', '.join(map(str, unknown))} is not an ONNX version of {op}")
    return (lo, table_max), "; ".join(notes) + "."


def cann_opset_range(listed: Iterable[int], table: tuple[int, int]) -> tuple[tuple[int, int], str]:
    listed = sorted(set(listed))
    lo, hi = max(listed[0], table[0]), min(listed[-1], table[1])
    holes = [v for v in range(lo, hi + 1) if v not in listed]
    note = f"page lists opsets v{listed[0]}-v{listed[-1]}"
    if holes:
        note += f" without {', '.join('v' + str(h) for h in holes)} (not expressible; the outer range is used)"
    return (lo, hi), note + "."


def _join(notes: Iterable[str]) -> str:
    return " ".join(n if n.endswith(".") else n + "." for n in notes if n)


# --------------------------------------------------------------------------------- SNPE

def _snpe_facts(version: str) -> dict[str, Any]:
    """The facts of one SNPE version, with a delta file applied on top of its base version."""
    data = load_facts("snpe", version)
    if "base" not in data:
        return data
    base = _snpe_facts(data["base"])
    merged = copy.deepcopy(base)
    merged.update({k: v for k, v in data.items() if k not in ("base", "sources", "opset_changes", "constraint_changes")})
    merged["sources"] = {**base["sources"], **data["sources"]}
    merged["carried_source"] = base["ops_source"]
    merged["base_version"] = data["base"]
    for op, versions in data.get("opset_changes", {}).items():
        merged["ops"][op]["opsets"] = versions
        merged["ops"][op]["changed"] = True
    for op, extra in data.get("constraint_changes", {}).items():
        merged["ops"][op].setdefault("constraints", []).extend(extra)
        merged["ops"][op]["changed"] = True
    return merged


def _doc_name_order(facts: Mapping[str, Any]) -> list[str]:
    return sorted(facts["ops"], key=lambda name: facts["ops"][name].get("doc_name", name).lower())


def _snpe_read_on_new_page(facts: Mapping[str, Any], op: str) -> bool:
    """Whether a delta version's page row for ``op`` was readable (rows sort alphabetically)."""
    limit = facts.get("unreadable_from")
    if not limit:
        return True
    name = facts["ops"][op].get("doc_name", op)
    return name.lower() < limit.lower() or op in facts.get("unchanged_read", ()) or facts["ops"][op].get("changed", False)


def build_snpe(version: str) -> dict[str, dict[str, Any]]:
    facts = _snpe_facts(version)
    columns = facts["layer_columns"]
    layers = facts["layers"]
    ops_src, layers_src = facts["ops_source"], facts["layers_source"]
    table_max = max(v for op in facts["ops"].values() for v in op["opsets"])
    tables = {}
    for soc, soc_info in facts["socs"].items():
        col = columns.index(soc_info["column"])
        cpu_col = columns.index("cpu")

        def runs(layer: str) -> str:
            flags = layers[layer]
            if flags[col] == "Y":
                return "npu"
            return "cpu" if flags[cpu_col] == "Y" else "unsupported"

        entries: dict[str, Any] = {}
        for op in _doc_name_order(facts):
            f = facts["ops"][op]
            rng, opset_note = snpe_opset_range(op, f["opsets"], table_max)
            notes = [opset_note]
            constraints = [dict(c, source=ops_src if _snpe_read_on_new_page(facts, op) else facts.get("carried_source", ops_src))
                           for c in f.get("constraints", [])]
            layer = f.get("layer")
            if layer is None:
                status = f.get("status", "cpu")
                if "status" not in f:
                    notes.append("no layer on the Supported Network Layers page names this ONNX op as its equivalent, so the "
                                 "runtime is not published; reported as CPU fallback")
            else:
                by_rank = {r: f[f"layer_rank{r}"] for r in (4, 5) if f"layer_rank{r}" in f}
                status = runs(layer)
                verdicts = {runs(layer)} | {runs(l) for l in by_rank.values()}
                if len(verdicts) > 1:
                    ok_ranks = [r for r, l in by_rank.items() if runs(l) == "npu"]
                    if status == "npu":
                        bad = [r for r, l in by_rank.items() if runs(l) != "npu"]
                        constraints.append({"rule": "rank", "params": {"tensor": "input", "index": 0, "max": min(bad) - 1},
                                            "else": "cpu", "source": layers_src,
                                            "note": f"rank {min(bad)} maps to layer {by_rank[min(bad)]}, which the {soc} runtime lacks"})
                    elif ok_ranks:
                        status = "npu"
                        constraints.append({"rule": "rank", "params": {"tensor": "input", "index": 0, "min": min(ok_ranks), "max": max(ok_ranks)},
                                            "else": "cpu", "source": layers_src,
                                            "note": f"only rank {'/'.join(map(str, ok_ranks))} maps to a layer the {soc} runtime has "
                                                    f"({', '.join(by_rank[r] for r in ok_ranks)}); other ranks use {layer}"})
                yes_no = {"npu": "yes", "cpu": "no (CPU runtime)", "unsupported": "no runtime"}
                shown = "; ".join([f"{layer}: {yes_no[runs(layer)]}"]
                                  + [f"{l} (rank {r}): {yes_no[runs(l)]}" for r, l in sorted(by_rank.items())])
                notes.append(f"{soc} runtime per the layers page: {shown}.")
            if f.get("note"):
                notes.append(f["note"])
            if not _snpe_read_on_new_page(facts, op):
                notes.append(f"row not readable on the {facts['version']} page; carried from {facts['base_version']}")
            entry: dict[str, Any] = {"status": status,
                                     "source": ops_src if _snpe_read_on_new_page(facts, op) else facts.get("carried_source", ops_src)}
            if rng is not None:
                entry["opset"] = list(rng)
            else:
                entry["status"] = "unsupported"
            if constraints:
                entry["constraints"] = constraints
            entry["note"] = _join(notes)
            entries[f"{DOMAIN}:{op}"] = entry
        gelu_status = runs("Gelu")
        norm_status = runs("LayerNorm")
        patterns = [
            {"name": "gelu_erf", "fused_op": "Gelu", "status": gelu_status, "source": ops_src,
             "description": "GELU written as x/sqrt(2) -> Erf -> +1 -> *x -> *0.5; the page supports Erf only where it is matched into GeLU",
             "nodes": [{"id": "div", "op": "Div"}, {"id": "erf", "op": "Erf", "after": ["div"]},
                       {"id": "add", "op": "Add", "after": ["erf"]}, {"id": "mul", "op": "Mul", "after": ["add"]},
                       {"id": "mul2", "op": "Mul", "after": ["mul"]}]},
        ]
        for name, square in (("layernorm_pow", "Pow"), ("layernorm_mul", "Mul")):
            patterns.append({
                "name": name, "fused_op": "LayerNorm", "status": norm_status, "source": layers_src,
                "description": f"LayerNorm written out (mean, subtract, {square} square, mean, +eps, sqrt, divide, scale, shift); "
                               "the layers page marks LayerNorm's ONNX equivalent as MATCHED (pattern-matched by the converter)",
                "nodes": [{"id": "mean", "op": "ReduceMean"}, {"id": "sub", "op": "Sub", "after": ["mean"]},
                          {"id": "sq", "op": square, "after": ["sub"]}, {"id": "var", "op": "ReduceMean", "after": ["sq"]},
                          {"id": "eps", "op": "Add", "after": ["var"]}, {"id": "sqrt", "op": "Sqrt", "after": ["eps"]},
                          {"id": "div", "op": "Div", "after": ["sub", "sqrt"]}, {"id": "gamma", "op": "Mul", "after": ["div"]},
                          {"id": "beta", "op": "Add", "after": ["gamma"]}]})
        skipped = facts.get("not_onnx", {})
        description = (f"{facts['title']}. Runtime: {soc_info['description']}. Ops the page does not list are rejected by the "
                       f"converter (unsupported); listed ops whose layer lacks a {soc} implementation fall back to the SNPE CPU runtime "
                       f"(cpu). Highest listed operator version: {table_max}.")
        errata = [f"listed but not ai.onnx operators, not written: {name} ({why})" for name, why in sorted(skipped.items())]
        if "unreadable_from" in facts:
            errata.append(f"the {facts['version']} page could only be read up to (not including) the {facts['unreadable_from']} row; "
                          f"later rows are carried from {facts['base_version']} (entries say so)")
        if "base_version" in facts:
            errata.append(f"runtime support per layer is carried from the {facts['base_version']} Supported Network Layers page "
                          "(not re-read for this version)")
        tables[soc] = {
            "format": 1, "toolchain": "snpe", "version": facts["version"], "soc": soc,
            "description": description,
            "precision": soc_info["precision"],
            "provenance": {"method": "documented", "generator": GENERATOR, "errata": errata, "sources": facts["sources"]},
            "opsets": {DOMAIN: [1, table_max]},
            "prepasses": ["eliminate_identity", "fold_constants", "fold_shape_ops", "fuse_patterns"],
            "default_verdict": "unsupported",
            "patterns": patterns,
            "ops": entries,
        }
    return tables


# --------------------------------------------------------------------------------- CANN

def build_cann(version: str) -> dict[str, dict[str, Any]]:
    facts = load_facts("cann", version)
    carried = load_facts("cann", facts["carried_from"]) if facts.get("carried_from") else None
    table_rng = (facts["opsets"][0], facts["opsets"][1])
    sources = dict(facts["sources"])
    list_src = facts["list_source"]
    pages = dict(facts["pages"])
    carried_pages: dict[str, Any] = {}
    if carried:
        for name, page in carried["pages"].items():
            if name not in pages:
                carried_pages[name] = page
                sources[page["source"]] = carried["sources"][page["source"]]
    entries: dict[str, Any] = {}
    custom = []
    for raw in facts["list"]:
        op = facts.get("aliases", {}).get(raw, raw)
        if not is_onnx_op(op):
            custom.append(raw)
            continue
        page = pages.get(op) or carried_pages.get(op)
        if page is None:
            entries[f"{DOMAIN}:{op}"] = {
                "status": "npu", "source": list_src,
                "note": "listed on the index page; its operator page was not read, so dtypes, attributes and opsets are not checked."}
            continue
        rng, note = cann_opset_range(page["opsets"], table_rng)
        notes = [note]
        if page.get("note"):
            notes.append(page["note"])
        if op in carried_pages:
            notes.append(f"the {version} page was not read; facts carried from the {facts['carried_from']} page")
            if op in facts.get("carried_notes", {}):
                notes.append(facts["carried_notes"][op])
        if page.get("from_research_note"):
            notes.append("page facts recorded in the project's research note (shared/docs/op-sources.md §2.3)")
        cpu_cases = [c for c in page.get("constraints", []) if c.get("else") == "cpu"]
        if cpu_cases:
            notes.append("cases that fail a rule marked cpu run on the AI CPU instead of the AI Core")
        entries[f"{DOMAIN}:{op}"] = {
            "status": "npu", "source": page["source"], "opset": list(rng),
            "constraints": [dict(c, source=page["source"]) for c in page.get("constraints", [])],
            "note": _join(notes)}
    entries = dict(sorted(entries.items()))
    tables = {}
    for soc, soc_info in facts["socs"].items():
        errata = [f"listed names that are not ai.onnx operators (Ascend custom operators), not written: {', '.join(custom)}",
                  f"operator list: {facts['list_note']}"]
        tables[soc] = {
            "format": 1, "toolchain": "cann", "version": version, "soc": soc,
            "description": (f"{facts['title']}. SoC: {soc_info['description']}. Listed operators run on the AI Core (npu) unless a "
                            f"documented case moves them to the AI CPU (cpu); operators not in the list are rejected by ATC "
                            f"('No parser is registered for Op', unsupported). Constant nodes and nodes computed only from constants are "
                            f"folded (the ONNX parser turns Constant into Const); scales/sizes that are graph inputs stay dynamic."),
            "precision": soc_info["precision"],
            "provenance": {"method": "documented", "generator": GENERATOR, "errata": errata, "sources": sources},
            "opsets": {DOMAIN: list(table_rng)},
            "prepasses": ["fold_constants"],
            "default_verdict": "unsupported",
            "patterns": [],
            "ops": entries,
        }
    return tables


# --------------------------------------------------------------------------------- driver

BUILDERS = {"snpe": build_snpe, "cann": build_cann}


def _snpe_counts(version: str) -> tuple[int, int]:
    facts = _snpe_facts(version)
    return (len(facts["ops"]) + len(facts.get("not_onnx", {})),
            sum(1 for op in facts["ops"] if _snpe_read_on_new_page(facts, op)))


def _cann_counts(version: str) -> tuple[int, int]:
    facts = load_facts("cann", version)
    return len(facts["list"]), len(facts["pages"])


#: toolchain -> (ops its published list has, entries read on this version's own pages)
COUNTERS = {"snpe": _snpe_counts, "cann": _cann_counts}


def all_tables(root: Optional[Path] = None) -> dict[Path, dict[str, Any]]:
    """Relative path (toolchain/version/soc.json) -> table, for every facts file that is a full version,
    with the `revision` and `errata` of the table it replaces under ``root`` (default: the bundled
    tables; they are kept by hand, the release policy's record)."""
    from ..tables import bundled_tables_dir, with_release_fields

    root = bundled_tables_dir() if root is None else Path(root)
    out: dict[Path, dict[str, Any]] = {}
    for path in facts_files():
        toolchain, version = path.stem.split("-", 1)
        for soc, table in BUILDERS[toolchain](version).items():
            rel = Path(toolchain) / version / f"{soc}.json"
            out[rel] = with_release_fields(table, root / rel)
    return out


def render(table: Mapping[str, Any]) -> str:
    return json.dumps(table, indent=1, ensure_ascii=False) + "\n"


def counts() -> list[dict[str, Any]]:
    """Per version: how many ops the published list has and how many table entries came from it."""
    rows = []
    for path in facts_files():
        toolchain, version = path.stem.split("-", 1)
        tables = BUILDERS[toolchain](version)
        first = next(iter(tables.values()))
        published, own = COUNTERS[toolchain](version)
        carried = sum(1 for e in first["ops"].values() if "carried from" in e.get("note", ""))
        rows.append({"target": f"{toolchain}@{version}", "socs": sorted(tables), "published": published,
                     "entries": len(first["ops"]), "read_for_this_version": own, "carried": carried})
    return rows


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pytest_npucheck.tabletools.from_docs", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[2] / "op_support_tables")
    parser.add_argument("--check", action="store_true", help="compare with the committed tables instead of writing")
    parser.add_argument("--counts", action="store_true", help="print published-list size and entries per version")
    args = parser.parse_args(argv)
    if args.counts:
        for row in counts():
            print(f"{row['target']:<16} socs={','.join(row['socs']):<18} published={row['published']:<4} "
                  f"entries={row['entries']:<4} read_for_this_version={row['read_for_this_version']:<4} "
                  f"carried={row['carried']}")
        return 0
    stale = []
    for rel, table in all_tables(args.out).items():
        path = args.out / rel
        text = render(table)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(str(path))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path} ({len(table['ops'])} ops)")
    if stale:
        print("stale or missing (regenerate with python -m pytest_npucheck.tabletools.from_docs):\n  " + "\n  ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
