"""Load, validate and resolve versioned support tables.

Layout of a table directory (the bundled one is ``op_support_tables/``)::

    catalog.json                     toolchain titles, default SoC, SoC aliases
    schema.json                      JSON Schema of a table file (bundled directory only: every
                                     table is validated by the bundled schema; a schema.json in a
                                     user's table directory is ignored)
    <toolchain>/<version>/<soc>.json one table per toolchain version and SoC

Targets are written ``TOOLCHAIN@VERSION/SOC``; version and SoC may be omitted (newest version,
the toolchain's default SoC). A version may be given as a prefix of dotted components
(``qnn@2.51`` names ``2.51.0``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from .errors import TableError, UsageError
from .jsonio import JsonFileError, load_strict, parse_strict, read_regular

_TARGET = re.compile(r"^(?P<tc>[a-z][a-z0-9_-]*)(?:@(?P<ver>[0-9A-Za-z][0-9A-Za-z.+_-]*))?(?:/(?P<soc>[a-z0-9][a-z0-9_.-]*))?$")


def bundled_tables_dir() -> Path:
    """The tables shipped with the package (source checkout or installed wheel)."""
    here = Path(__file__).resolve().parent
    for candidate in (here / "op_support_tables", here.parent / "op_support_tables"):
        if (candidate / "schema.json").is_file():
            return candidate
    raise TableError(str(here / "op_support_tables"), ["bundled support tables not found (broken installation)"])


def version_key(version: str) -> tuple[Any, ...]:
    parts = re.split(r"[.+_-]", version)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts)


@dataclass(frozen=True)
class TargetSpec:
    """A parsed target string, not yet resolved against the tables."""

    toolchain: str
    version: Optional[str] = None
    soc: Optional[str] = None

    @classmethod
    def parse(cls, text: str) -> "TargetSpec":
        m = _TARGET.match(text.strip().lower()) if isinstance(text, str) else None
        if not m:
            raise UsageError(f"invalid target {text!r}: expected TOOLCHAIN[@VERSION][/SOC], e.g. rknn@2.5.0/rk3588")
        return cls(m.group("tc"), m.group("ver"), m.group("soc"))

    def __str__(self) -> str:
        s = self.toolchain
        if self.version:
            s += f"@{self.version}"
        if self.soc:
            s += f"/{self.soc}"
        return s


@dataclass(frozen=True)
class Constraint:
    """One rule of a table entry: its parameters, the verdict when it fails and where it applies."""

    rule: str
    params: Mapping[str, Any]
    on_fail: str
    source: Optional[str] = None
    except_ops: frozenset[str] = frozenset()
    only_ops: Optional[frozenset[str]] = None
    # the compiler checks it, or fails on it, before or while it folds constants and fuses patterns:
    # judged for a node the pre-passes fold or fuse too (schema: constraint.before_rewrites)
    before_rewrites: bool = False


@dataclass(frozen=True)
class OpEntry:
    """What a table says of one operator (``domain:op_type``): its status, opsets and constraints."""

    key: str
    status: str
    opset: Optional[tuple[int, int]]
    constraints: tuple[Constraint, ...]
    source: str
    note: Optional[str] = None
    # dtypes of input 0 for which the compiler's constant folding cannot evaluate the op: a node of it
    # with constant inputs is judged, not folded (schema: op_entry.not_folded)
    not_folded: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Pattern:
    """Nodes the toolchain fuses into one operator (``fused_op``), and how they must connect."""

    name: str
    nodes: tuple[tuple[str, str, tuple[str, ...]], ...]  # (id, domain:op, after ids)
    fused_op: str
    status: str
    source: str
    # (node id, earlier node id, input index): that node's output must enter this one at that input
    positions: tuple[tuple[str, str, int], ...] = ()
    description: str = ""
    cpu_nodes: frozenset[str] = frozenset()  # ids of nodes the fused op leaves on the CPU
    # (node id, earlier node id): the node reads a computed tensor the earlier one reads too (a second branch)
    siblings: tuple[tuple[str, str], ...] = ()
    # (node id, constraints): node rules the node must meet for the pattern to match
    node_constraints: tuple[tuple[str, tuple[Constraint, ...]], ...] = ()


@dataclass(frozen=True)
class Table:
    """One support table, read and validated: a toolchain version and SoC."""

    toolchain: str
    version: str
    soc: str
    path: Path
    sha256: str
    opsets: Mapping[str, tuple[int, int]]
    prepasses: tuple[str, ...]
    default_verdict: str
    generic_constraints: tuple[Constraint, ...]
    patterns: tuple[Pattern, ...]
    ops: Mapping[str, OpEntry]
    precision: Mapping[str, Any]
    provenance: Mapping[str, Any]
    description: str = ""
    ir_version: Optional[tuple[int, int]] = None  # ONNX IR versions the toolchain loads
    revision: int = 1  # the content's revision: a correction of a released table is a new one (RELEASE_FIELDS)
    errata: tuple[Mapping[str, Any], ...] = ()  # {revision, ops, change, evidence} per correction

    @property
    def target(self) -> str:
        return f"{self.toolchain}@{self.version}/{self.soc}"

    def header(self) -> dict[str, Any]:
        return {"toolchain": self.toolchain, "version": self.version, "soc": self.soc, "revision": self.revision,
                "sha256": self.sha256, "provenance": str(self.provenance.get("method", ""))}

    @property
    def documented_only(self) -> bool:
        """No rule of the table was run on the real toolchain (CANN, SNPE: vendor documentation)."""
        return self.provenance.get("method") == "documented"

    @property
    def probe_source(self) -> Optional[str]:
        """The table's first probe source (its pre-passes, opsets and IR range were probed with it)."""
        return next((k for k in self.provenance.get("sources") or {} if k.startswith("probe:")), None)


# -- revisions: the release policy's fields ------------------------------------------------------
# A table that shipped in a release (op_support_tables/released.json) is never edited in place: a
# correction bumps its top-level `revision` and appends an `errata` entry saying what changed and
# why. The tools that generate tables carry both fields over from the file they replace.
RELEASE_FIELDS = ("revision", "errata")


def with_release_fields(table: Mapping[str, Any], current: Optional[Path]) -> dict[str, Any]:
    """``table`` (a generator's output) with the `revision` and `errata` of the table file it is to
    replace (revision 1, no errata, when there is none), placed after `soc`."""
    kept: dict[str, Any] = {"revision": 1}
    if current is not None and Path(current).is_file():
        try:
            old = load_strict(Path(current))
        except JsonFileError:
            old = None
        if isinstance(old, dict):
            kept = {k: old[k] for k in RELEASE_FIELDS if k in old} or kept
    out: dict[str, Any] = {}
    for key, value in table.items():
        if key in RELEASE_FIELDS:
            continue
        out[key] = value
        if key == "soc":
            out.update(kept)
    return out


# -- validation ---------------------------------------------------------------------------------

@lru_cache(maxsize=4)
def _validator(schema_path: str) -> Any:
    import jsonschema  # lazy: only when a table is validated

    raw = Path(schema_path).read_bytes()
    schema = load_strict(Path(schema_path))
    cls = jsonschema.validators.validator_for(schema)
    if hashlib.sha256(raw).hexdigest() != _manifest()[0]:  # the bundled schema was checked when the manifest was written
        cls.check_schema(schema)
    return cls(schema)


# -- the validation manifest of the bundled tables ------------------------------------------------
# Validating a table against the JSON Schema takes ~0.6 s and checking the schema itself ~0.4 s, in
# every process that loads a table (each xdist worker, each `npucheck check`). `validated.json`
# beside the bundled tables records the SHA-256 of the schema and of every bundled table file that
# passed a full validation (`npucheck tables validate --write-manifest`). A table file with one of
# those hashes, read under a schema with that hash, is byte for byte what passed, so its schema
# validation and the strict JSON reading's own checks (duplicate keys, NaN, nesting depth: the C
# parser alone gives the same data for those bytes) are skipped (the semantic checks still run);
# any other file, an edited one included, is read strictly and validated in full. `npucheck tables
# validate` always validates in full.
MANIFEST = "validated.json"
MANIFEST_FORMAT = 1


@lru_cache(maxsize=1)
def _manifest() -> tuple[Optional[str], frozenset[str]]:
    """(schema SHA-256, table SHA-256s) of the bundled manifest; (None, empty) when it is absent or
    unreadable (then every table is validated in full: the manifest is only a shortcut)."""
    try:
        doc = load_strict(bundled_tables_dir() / MANIFEST)
    except (TableError, JsonFileError):
        return None, frozenset()
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        return None, frozenset()
    schema, tables = doc.get("schema_sha256"), doc.get("tables")
    if not isinstance(schema, str) or not isinstance(tables, dict):
        return None, frozenset()
    return schema, frozenset(v for v in tables.values() if isinstance(v, str))


def _prevalidated(table_sha: str, schema_path: Path) -> bool:
    schema_sha, known = _manifest()
    if schema_sha is None or table_sha not in known:
        return False
    try:
        return hashlib.sha256(Path(schema_path).read_bytes()).hexdigest() == schema_sha
    except OSError:
        return False


def _read_prevalidated(path: Path, raw: bytes) -> Any:
    """The data of table bytes the manifest records: they passed the strict reading (duplicate keys,
    NaN, nesting depth) when it was written, so the C parser alone reads them to the same data (~2-4 ms
    less for rk3588's 494 KB). Should it fail (a manifest naming bytes that never passed), the strict
    reading runs and names the file and the place."""
    try:
        return json.loads(raw.decode("utf-8"))
    except ValueError:
        return parse_strict(path, raw)


def manifest_doc(catalog: "Catalog") -> dict[str, Any]:
    """The manifest of the bundled tables of ``catalog``; raises TableError for an invalid one (a
    manifest lists only what passed). Tables are loaded through the catalog: one validated in full
    already (``validate_all``) is not validated again, and one whose bytes and schema the current
    manifest records passed in full when it was written."""
    root = bundled_tables_dir().resolve()
    tables = {ref.path.resolve().relative_to(root).as_posix(): catalog.load(ref).sha256
              for ref in sorted(catalog.refs.values(), key=lambda r: str(r.path)) if ref.root.resolve() == root}
    return {"format": MANIFEST_FORMAT,
            "about": "SHA-256 of the schema and of each bundled table that passed a full validation; "
                     "written by `npucheck tables validate --write-manifest`",
            "schema_sha256": hashlib.sha256((root / "schema.json").read_bytes()).hexdigest(),
            "tables": tables}


def _json_path(path: Iterable[Any]) -> str:
    out = "$"
    for p in path:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", str(p)) else f"[{str(p)!r}]")
    return out


def _schema_problems(data: Any, schema_path: Path) -> list[str]:
    validator = _validator(str(schema_path))
    problems = []
    for err in sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        # an if/then failure inside allOf reports the leaf error; keep the leaves only
        leaves = [err] if not err.context else sorted(err.context, key=lambda e: list(map(str, e.absolute_path)))
        for leaf in leaves:
            msg = leaf.message if len(leaf.message) < 300 else leaf.message[:300] + "..."
            problems.append(f"{_json_path(leaf.absolute_path)}: {msg}")
    return list(dict.fromkeys(problems))


def _semantic_problems(data: Mapping[str, Any], rel: Optional[tuple[str, str, str]]) -> list[str]:
    from .rules import RULES

    problems: list[str] = []
    revision, errata = data.get("revision", 1), data.get("errata") or []
    if isinstance(revision, int) and isinstance(errata, list):
        fixed = {e.get("revision") for e in errata if isinstance(e, dict)}
        for i, e in enumerate(errata):
            if isinstance(e, dict) and isinstance(e.get("revision"), int) and e["revision"] > revision:
                problems.append(f"$.errata[{i}].revision: {e['revision']} is after the table's revision {revision}")
        missing = [r for r in range(2, revision + 1) if r not in fixed]
        if missing:
            problems.append(f"$.errata: revision(s) {', '.join(map(str, missing))} have no erratum saying what they "
                            "corrected (a correction bumps `revision` and adds an errata entry)")
    if rel is not None:
        for field_name, expected in zip(("toolchain", "version", "soc"), rel):
            if str(data.get(field_name, "")).lower() != expected.lower():
                problems.append(f"$.{field_name}: {data.get(field_name)!r} does not match its location "
                                f"<toolchain>/<version>/<soc>.json ({expected!r})")
    sources = set((data.get("provenance") or {}).get("sources") or {})

    def check_source(path: str, src: Any) -> None:
        if isinstance(src, str) and src not in sources:
            problems.append(f"{path}.source: {src!r} is not declared in $.provenance.sources")

    def check_whole(path: str, rng: Any) -> None:
        # JSON Schema counts 13.0 as an integer; an opset is written 13 (policy: reject, A11)
        if isinstance(rng, list) and any(isinstance(x, float) for x in rng):
            problems.append(f"{path}: opsets are whole numbers written without a fraction, got {rng}")

    for key, entry in (data.get("ops") or {}).items():
        if isinstance(entry, dict):
            check_whole(f"$.ops[{key!r}].opset", entry.get("opset"))
    for dom, rng in (data.get("opsets") or {}).items():
        check_whole(f"$.opsets[{dom!r}]", rng)
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[0] > rng[1]:
            problems.append(f"$.opsets[{dom!r}]: range {rng} is empty (min > max)")

    def check_constraints(path: str, items: Any) -> None:
        for i, c in enumerate(items or []):
            if not isinstance(c, dict):
                continue
            cpath = f"{path}[{i}]"
            check_source(cpath, c.get("source"))
            if c.get("rule") not in RULES:
                continue
            params = c.get("params") or {}
            found = RULES[c["rule"]]
            for where, inner in found.inner(params) if found.inner is not None and isinstance(params, dict) else ():
                if isinstance(inner, dict) and inner.get("rule") not in RULES:
                    problems.append(f"{cpath}.params.{where}.rule: {inner.get('rule')!r} is not a known rule")
            lo, hi = params.get("min"), params.get("max")
            if isinstance(lo, (int, float)) and isinstance(hi, (int, float)) and lo > hi:
                problems.append(f"{cpath}.params: min {lo} > max {hi}")
            for key in ("except_ops", "only_ops"):
                for op in c.get(key) or []:
                    if ":" not in op:
                        problems.append(f"{cpath}.{key}: {op!r} must be DOMAIN:OP_TYPE")

    check_constraints("$.generic_constraints", data.get("generic_constraints"))
    for key, entry in (data.get("ops") or {}).items():
        if not isinstance(entry, dict):
            continue
        path = f"$.ops[{key!r}]"
        check_source(path, entry.get("source"))
        rng = entry.get("opset")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng) and rng[0] > rng[1]:
            problems.append(f"{path}.opset: range {rng} is empty (min > max)")
        check_constraints(f"{path}.constraints", entry.get("constraints"))
    for i, pat in enumerate(data.get("patterns") or []):
        if not isinstance(pat, dict):
            continue
        path = f"$.patterns[{i}]"
        check_source(path, pat.get("source"))
        seen: set[str] = set()
        for j, node in enumerate(pat.get("nodes") or []):
            if not isinstance(node, dict):
                continue
            for ref in node.get("after") or []:
                if ref not in seen:
                    problems.append(f"{path}.nodes[{j}].after: {ref!r} is not an earlier node id of the pattern")
            if node.get("id") in seen:
                problems.append(f"{path}.nodes[{j}].id: duplicate id {node.get('id')!r}")
            seen.add(node.get("id"))
            sibling = node.get("same_input_as")
            if sibling is not None and sibling not in seen - {node.get("id")}:
                problems.append(f"{path}.nodes[{j}].same_input_as: {sibling!r} is not an earlier node id of the pattern")
            if j > 0 and not node.get("after") and sibling is None:
                problems.append(f"{path}.nodes[{j}]: every node after the first needs `after` or `same_input_as`")
            for k, c in enumerate(node.get("constraints") or []):
                found = RULES.get(c.get("rule")) if isinstance(c, dict) else None
                if found is not None and not found.local:
                    problems.append(f"{path}.nodes[{j}].constraints[{k}].rule: {c['rule']!r} reads the node's "
                                    "neighbours; a pattern node takes rules of the node alone")
            check_constraints(f"{path}.nodes[{j}].constraints", node.get("constraints"))
            at_input = node.get("at_input")
            if isinstance(at_input, dict):
                for ref in at_input:
                    if ref not in (node.get("after") or []):
                        problems.append(f"{path}.nodes[{j}].at_input: {ref!r} is not one of this node's `after` ids")
                taken = [v for v in at_input.values() if isinstance(v, int)]
                if len(taken) != len(set(taken)):
                    problems.append(f"{path}.nodes[{j}].at_input: two nodes cannot enter the same input")
    return problems


def validate_table_data(data: Any, path: Path, schema_path: Path, rel: Optional[tuple[str, str, str]] = None,
                        schema: bool = True) -> list[str]:
    """All problems of one table, each as 'JSON path: message'. ``schema=False``: the semantic checks
    only (for a file the manifest records as valid)."""
    problems = _schema_problems(data, schema_path) if schema else []
    if isinstance(data, dict):
        try:
            problems += _semantic_problems(data, rel)
        except (TypeError, AttributeError, ValueError, KeyError):
            # the semantic checks read shapes the schema guarantees; with schema errors listed,
            # a value of the wrong shape is already reported (found by tests/corpus/test_fuzz.py)
            if not problems:
                raise
    return problems


def _constraint(c: Mapping[str, Any]) -> Constraint:
    only = c.get("only_ops")
    return Constraint(
        rule=c["rule"], params=dict(c.get("params") or {}), on_fail=c.get("else", "cpu"), source=c.get("source"),
        except_ops=frozenset(c.get("except_ops") or ()), only_ops=frozenset(only) if only is not None else None,
        before_rewrites=bool(c.get("before_rewrites", False)),
    )


def table_location(path: Path) -> tuple[str, str, str]:
    """The target a table file's place names: <toolchain>/<version>/<soc>.json, the toolchain and the
    SoC in lower case (a table directory's layout, read by ``Catalog.discover``)."""
    return path.parent.parent.name.lower(), path.parent.name, path.stem.lower()


def _op_key(op: str) -> str:
    return op if ":" in op else f"ai.onnx:{op}"


def load_table(path: Path, schema_path: Optional[Path] = None, rel: Optional[tuple[str, str, str]] = None,
               full: bool = False) -> Table:
    """Read and validate one table file; raises TableError listing every problem. A file the
    manifest records as valid (the same bytes, the same schema) skips the schema validation,
    unless ``full``."""
    path = Path(path)
    schema_path = schema_path or (bundled_tables_dir() / "schema.json")
    try:
        raw = read_regular(path)  # a FIFO or a link to /dev/zero is an error naming the file, not a hang
    except OSError as exc:
        raise TableError(str(path), [f"cannot read: {exc.strerror or exc}"]) from None
    sha = hashlib.sha256(raw).hexdigest()
    key = _memo_key(path, sha, schema_path, rel)
    if not full and key in _LOADED:
        return _LOADED[key]
    schema = full or not _prevalidated(sha, schema_path)
    try:
        data = parse_strict(path, raw) if schema else _read_prevalidated(path, raw)
    except JsonFileError as exc:
        text = str(exc)
        if text.startswith(str(path)):  # "<path>:<line>:<col>: invalid JSON: ..." keeps its line and column
            text = re.sub(r"^:(\d+):(\d+): ", r"line \1 column \2: ", text[len(str(path)):]).lstrip(": ")
        raise TableError(str(path), [text]) from None
    problems = validate_table_data(data, path, schema_path, rel, schema=schema)
    if problems:
        raise TableError(str(path), problems)
    table = table_from_data(data, path, sha)
    _LOADED.pop(key, None)
    _LOADED[key] = table
    while len(_LOADED) > _LOADED_MAX:
        del _LOADED[next(iter(_LOADED))]
    return table


# -- the tables loaded in this process --------------------------------------------------------------
# A process loads the same table many times: every Catalog (the CLI makes one to resolve its targets
# and one per checked file; the plugin, the probe and table tools make their own) parses, validates
# and converts it again (~40 ms for an RKNN table). A table is a frozen value of its file's bytes, the
# schema's bytes, the place it was read from and the rules registered, so it is kept under exactly
# those: the file and the schema are still read and hashed on every load, and an edited file (or
# schema) is a different key, read and validated afresh. Only tables that loaded are kept (an invalid
# file is validated again and fails again, naming its problems); ``full`` (an explicit validation:
# `npucheck tables validate`) always validates.
_LOADED: dict[tuple[Any, ...], Table] = {}
_LOADED_MAX = 64


def _memo_key(path: Path, sha: str, schema_path: Path, rel: Optional[tuple[str, str, str]]) -> tuple[Any, ...]:
    from .rules import RULES

    try:
        schema_sha = hashlib.sha256(Path(schema_path).read_bytes()).hexdigest()
    except OSError:
        schema_sha = None
    return (str(path), sha, str(schema_path), schema_sha, rel, frozenset(RULES))


def table_from_data(data: Mapping[str, Any], path: Path = Path("<memory>"), sha256: Optional[str] = None) -> Table:
    """A Table from already validated data (tools that build tables use this before writing them)."""
    if sha256 is None:
        sha256 = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    ops = {
        key: OpEntry(
            key=key, status=e["status"], opset=tuple(e["opset"]) if "opset" in e else None,  # type: ignore[arg-type]
            constraints=tuple(_constraint(c) for c in e.get("constraints", [])), source=e["source"], note=e.get("note"),
            not_folded=frozenset((e.get("not_folded") or {}).get("dtypes", ())),
        )
        for key, e in data["ops"].items()
    }
    patterns = tuple(
        Pattern(
            name=p["name"],
            nodes=tuple((n["id"], _op_key(n["op"]), tuple(n.get("after", []))) for n in p["nodes"]),
            fused_op=p["fused_op"], status=p.get("status", "npu"), source=p["source"],
            positions=tuple((n["id"], ref, int(idx)) for n in p["nodes"] for ref, idx in (n.get("at_input") or {}).items()),
            description=p.get("description", ""),
            cpu_nodes=frozenset(n["id"] for n in p["nodes"] if n.get("runs_on") == "cpu"),
            siblings=tuple((n["id"], n["same_input_as"]) for n in p["nodes"] if n.get("same_input_as")),
            node_constraints=tuple((n["id"], tuple(_constraint(c) for c in n["constraints"]))
                                   for n in p["nodes"] if n.get("constraints")),
        )
        for p in data.get("patterns", [])
    )
    return Table(
        toolchain=data["toolchain"], version=data["version"], soc=data["soc"], path=Path(path),
        sha256=sha256,
        opsets={k: (v[0], v[1]) for k, v in data["opsets"].items()},
        prepasses=tuple(data.get("prepasses", [])), default_verdict=data["default_verdict"],
        generic_constraints=tuple(_constraint(c) for c in data.get("generic_constraints", [])),
        patterns=patterns, ops=ops, precision=data.get("precision", {}), provenance=data["provenance"],
        description=data.get("description", ""),
        ir_version=(data["ir_version"][0], data["ir_version"][1]) if data.get("ir_version") else None,
        revision=int(data.get("revision", 1)), errata=tuple(data.get("errata") or ()),
    )


# -- catalog ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class TableRef:
    """Where the table of one target is, found by ``Catalog.discover`` and not read yet."""

    toolchain: str
    version: str
    soc: str
    path: Path
    root: Path

    @property
    def target(self) -> str:
        return f"{self.toolchain}@{self.version}/{self.soc}"


@dataclass
class Catalog:
    """Every table found in the table directories (later directories override earlier ones)."""

    roots: tuple[Path, ...]
    refs: dict[tuple[str, str, str], TableRef] = field(default_factory=dict)
    toolchains: dict[str, dict[str, Any]] = field(default_factory=dict)
    _loaded: dict[Path, Table] = field(default_factory=dict)

    @classmethod
    def discover(cls, extra_dirs: Sequence[os.PathLike[str] | str] = ()) -> "Catalog":
        """The bundled tables, then those the toolchain plug-ins ship (``Toolchain.tables``), then
        ``extra_dirs`` (``--npu-tables`` / ``npu_tables``)."""
        from .toolchains.registry import table_dirs

        roots = [bundled_tables_dir()] + table_dirs() + [Path(d) for d in extra_dirs]
        cat = cls(tuple(roots))
        for root in roots:
            if not root.is_dir():
                raise UsageError(f"support table directory {root} does not exist")
            meta_path = root / "catalog.json"
            if os.path.lexists(meta_path):  # a FIFO or a device is an error naming it, not skipped
                try:
                    meta = load_strict(meta_path)
                except JsonFileError as exc:
                    raise TableError(str(meta_path), [str(exc)]) from None
                problems = _catalog_problems(meta)
                if problems:
                    raise TableError(str(meta_path), problems)
                for name, info in meta["toolchains"].items():
                    cat.toolchains.setdefault(name, {}).update(info)
            for tc_dir in sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")):
                for ver_dir in sorted(p for p in tc_dir.iterdir() if p.is_dir()):
                    yaml = sorted(p for p in ver_dir.iterdir() if p.suffix.lower() in (".yaml", ".yml"))
                    if yaml:  # never parsed: no YAML loader, no YAML 1.1 coercions, no tags
                        raise TableError(str(yaml[0]), ["YAML support tables are not read; tables are JSON files "
                                                        "validated by op_support_tables/schema.json"])
                    seen: dict[tuple[str, str, str], Path] = {}
                    for f in sorted(ver_dir.glob("*.json")):
                        if f.name.endswith(".results.json"):
                            continue
                        key = table_location(f)
                        if key in seen:  # RK3588.json and rk3588.json: no winner by file-name order
                            raise TableError(str(f), [f"same target {key[0]}@{key[1]}/{key[2]} as {seen[key]}"])
                        seen[key] = f
                        cat.refs[key] = TableRef(key[0], key[1], key[2], f, root)
        return cat

    def versions(self, toolchain: str) -> list[str]:
        return sorted({v for (tc, v, _) in self.refs if tc == toolchain}, key=version_key)

    def socs(self, toolchain: str, version: str) -> list[str]:
        return sorted(s for (tc, v, s) in self.refs if tc == toolchain and v == version)

    def resolve(self, spec: TargetSpec | str) -> TableRef:
        """Resolve a target to one table; unknown parts are a usage error listing what exists."""
        if isinstance(spec, str):
            spec = TargetSpec.parse(spec)
        toolchains = sorted({tc for (tc, _, _) in self.refs})
        if spec.toolchain not in toolchains:
            raise UsageError(f"unknown toolchain {spec.toolchain!r} in target '{spec}'; available: {', '.join(toolchains) or 'none'}")
        versions = self.versions(spec.toolchain)
        if spec.version:
            matching = [v for v in versions if v == spec.version or v.startswith(spec.version + ".")]
            if not matching:
                raise UsageError(f"unknown version {spec.version!r} of {spec.toolchain} in target '{spec}'; "
                                 f"available: {', '.join(versions)}")
            version = matching[-1]
        else:
            version = versions[-1]
        meta = self.toolchains.get(spec.toolchain, {})
        socs = self.socs(spec.toolchain, version)
        soc = spec.soc or meta.get("default_soc") or (socs[0] if len(socs) == 1 else None)
        if soc is None:
            raise UsageError(f"target '{spec}' needs a SoC: {spec.toolchain}@{version} has {', '.join(socs)}")
        soc = meta.get("soc_aliases", {}).get(soc, soc)
        if soc not in socs:
            raise UsageError(f"unknown SoC {soc!r} for {spec.toolchain}@{version} in target '{spec}'; available: {', '.join(socs)}")
        return self.refs[(spec.toolchain, version, soc)]

    def load(self, ref: TableRef, full: bool = False) -> Table:
        """The table of ``ref``; ``full``: validated against the schema whatever the manifest says."""
        if full or ref.path not in self._loaded:
            # always the bundled schema: a schema.json in a user's table directory is ignored, never
            # read (it replaced the bundled one: `{}` let any table through to raw tracebacks, and a
            # pattern such as "^(a+)+$" hung the validation)
            self._loaded[ref.path] = load_table(ref.path, bundled_tables_dir() / "schema.json",
                                                rel=(ref.toolchain, ref.version, ref.soc), full=full)
        return self._loaded[ref.path]

    def table(self, target: TargetSpec | str) -> Table:
        return self.load(self.resolve(target))

    def location_of(self, path: Path) -> Optional[tuple[str, str, str]]:
        """The target a table file's location names when it sits in the layout of a table directory,
        <toolchain>/<version>/<soc>.json under a toolchain this catalog knows; None elsewhere."""
        key = table_location(Path(path).absolute())
        known = key[0] in self.toolchains or any(tc == key[0] for tc, _, _ in self.refs)
        return key if known and key[1] else None

    def validate_file(self, path: Path) -> list[str]:
        """Every problem of one table file, given by its path: the problems ``validate_all`` finds in
        a table directory, its location included when the file sits in that layout (``location_of``)."""
        try:
            load_table(Path(path), full=True, rel=self.location_of(path))
        except TableError as exc:
            return exc.problems
        return []

    def validate_all(self) -> dict[str, list[str]]:
        """Problems per table file (empty dict when every table is valid)."""
        out: dict[str, list[str]] = {}
        for ref in self.refs.values():
            try:
                self.load(ref, full=True)
            except TableError as exc:
                out[str(ref.path)] = exc.problems
        return out

    def listing(self) -> list[dict[str, Any]]:
        """Every available target with its provenance (for `npucheck targets`)."""
        rows = []
        for key in sorted(self.refs, key=lambda k: (k[0], version_key(k[1]), k[2])):
            ref = self.refs[key]
            meta = self.toolchains.get(ref.toolchain, {})
            row: dict[str, Any] = {"target": ref.target, "toolchain": ref.toolchain, "version": ref.version,
                                   "soc": ref.soc, "path": str(ref.path), "title": meta.get("title", ref.toolchain)}
            try:
                t = self.load(ref)
            except TableError as exc:
                row["error"] = str(exc)
            else:
                row.update(revision=t.revision, sha256=t.sha256, ops=len(t.ops), prepasses=list(t.prepasses),
                           precision=dict(t.precision), provenance=dict(t.provenance))
            rows.append(row)
        return rows


def _catalog_problems(meta: Any) -> list[str]:
    if not isinstance(meta, dict) or not isinstance(meta.get("toolchains"), dict):
        return ["$: expected an object with a `toolchains` object"]
    problems = []
    for name, info in meta["toolchains"].items():
        if not isinstance(info, dict):
            problems.append(f"$.toolchains[{name!r}]: expected an object")
            continue
        for key in info:
            if key not in ("title", "default_soc", "soc_aliases", "description", "vendor"):
                problems.append(f"$.toolchains[{name!r}].{key}: unknown field")
        if "soc_aliases" in info and not isinstance(info["soc_aliases"], dict):
            problems.append(f"$.toolchains[{name!r}].soc_aliases: expected an object")
    return problems
