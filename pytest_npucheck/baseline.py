"""The baseline: fallbacks a team has accepted, per test, target and node.

A committed, reviewable JSON file (``npucheck-baseline.json`` at the rootdir by default, schema
``schemas/baseline.schema.json``). Each entry names a test node id, a resolved target and one
fallback node, with a ``reason`` (and optionally a ``link``). A fallback that matches an entry does
not fail its test; every other fallback does.

Node names change between exports (a new layer renumbers ``node_Pad_3``), so a fallback matches an
entry by its op type and its PyTorch location (module path, file basename and line) when both
know one, and otherwise by op type and node name. An entry accepts a fallback of the same or a
milder verdict (an accepted CPU fallback does not cover the same node becoming unsupported).

Only CPU fallbacks can be accepted. An ``unsupported`` node means the compiler rejects the model:
nothing deploys, so no entry can cover one. ``--npu-update-baseline`` refuses to record it (and
names it), and a file with such an entry is invalid.

Entries are stale when their test ran its check on their target and nothing matched them: the
problem was fixed, and a strict run fails so that it cannot come back silently. Tests that did
not run (deselected, skipped, failed before the check, crashed) never make entries stale.

Pure: no pytest, no torch. The functions work on the JSON form of results (the per-test entries
of the JSON report), so the same code serves xdist workers, the controller and tools.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

from . import BASELINE_NAME
from .errors import NpuCheckError

BASELINE_FORMAT = 1
DEFAULT_NAME = BASELINE_NAME
DEFAULT_REASON = "accepted by --npu-update-baseline (add a reason)"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "baseline.schema.json"
_SEVERITY = {"npu": 0, "folded": 0, "cpu": 1, "unsupported": 2}
#: verdicts an entry may accept: a CPU fallback still runs; an unsupported node makes the build fail
ACCEPTABLE = ("cpu",)
REFUSED_WHY = "the compiler rejects a model with an unsupported node, so nothing deploys"


class BaselineError(NpuCheckError):
    """The baseline file is unreadable, not strict JSON, or does not follow its schema."""


Location = tuple[str, str, int]  # (module path, file basename, line)


def location_of(source: Optional[Mapping[str, Any]]) -> Optional[Location]:
    """The robust part of a node's PyTorch source: module path, file basename and line, when known."""
    if not source:
        return None
    file, line = source.get("file"), source.get("line")
    if not file or not isinstance(line, int):
        return None
    return (str(source.get("module") or ""), posixpath.basename(str(file).replace("\\", "/")), line)


@dataclass(frozen=True)
class Entry:
    """One accepted fallback."""

    test: str
    target: str
    op_type: str
    node: str
    verdict: str
    reason: str
    location: Optional[Location] = None
    link: Optional[str] = None
    call: int = 1  # which npu_check call of the test (a test may check several models)

    @property
    def pair(self) -> tuple[str, int, str]:
        return (self.test, self.call, self.target)

    def sort_key(self) -> tuple[Any, ...]:
        loc = self.location or ("", "", 0)
        return (self.test, self.call, self.target, self.op_type, loc[1], loc[2], loc[0], self.node, self.verdict)

    def where(self) -> str:
        if self.location is None:
            return ""
        module, file, line = self.location
        return f"{module or '<root>'} at {file}:{line}"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "test": self.test, "target": self.target, "op_type": self.op_type, "node": self.node,
            "verdict": self.verdict, "reason": self.reason,
            "location": ({"module": self.location[0], "file": self.location[1], "line": self.location[2]}
                         if self.location else None),
        }
        if self.link:
            out["link"] = self.link
        if self.call != 1:
            out["call"] = self.call
        return out

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Entry":
        loc = d.get("location")
        return cls(test=d["test"], target=d["target"], op_type=d["op_type"], node=d["node"], verdict=d["verdict"],
                   reason=d["reason"], link=d.get("link") or None, call=int(d.get("call", 1)),
                   location=(str(loc["module"]), str(loc["file"]), int(loc["line"])) if loc else None)

    @classmethod
    def for_node(cls, test: str, target: str, node: Mapping[str, Any], reason: str = DEFAULT_REASON,
                 link: Optional[str] = None, call: int = 1) -> "Entry":
        return cls(test=test, target=target, op_type=str(node["op_type"]), node=str(node["name"]),
                   verdict=str(node["verdict"]), reason=reason, link=link, location=location_of(node.get("source")),
                   call=call)


@dataclass
class Baseline:
    entries: list[Entry] = field(default_factory=list)
    path: Optional[Path] = None
    exists: bool = False

    def for_pair(self, test: str, target: str, call: int = 1) -> list[Entry]:
        return [e for e in self.entries if e.test == test and e.target == target and e.call == call]

    def tests(self) -> set[str]:
        return {e.test for e in self.entries}

    def to_json(self) -> dict[str, Any]:
        return {"format": BASELINE_FORMAT, "entries": [e.to_json() for e in sorted(self.entries, key=Entry.sort_key)]}

    def dumps(self) -> str:
        """Stable, reviewable text: sorted keys, one entry per line, entries sorted by test/target/op/location."""
        entries = [json.dumps(e, sort_keys=True, ensure_ascii=False, allow_nan=False)
                   for e in self.to_json()["entries"]]
        body = ",\n".join("    " + e for e in entries)
        return ('{\n  "entries": [\n' + body + ("\n" if entries else "") + f'  ],\n  "format": {BASELINE_FORMAT}\n}}\n')


# The schema's entry, as plain checks (``_plainly_valid``); the schema stays the definition.
_ENTRY_REQUIRED = frozenset({"test", "target", "op_type", "node", "verdict", "reason", "location"})
_ENTRY_KEYS = _ENTRY_REQUIRED | {"link", "call"}
_LOCATION_KEYS = frozenset({"module", "file", "line"})
_TARGET_PATTERN = None


def _plainly_valid(document: Any) -> bool:
    """True only for a document the schema accepts, checked without jsonschema (a merge or a run
    reads a baseline of hundreds of entries: jsonschema takes a tenth of a second to import and
    about as long to walk them). False means "ask the schema", whose messages name each problem;
    a test checks that this is never True for a document the schema refuses."""
    global _TARGET_PATTERN
    if _TARGET_PATTERN is None:
        import re

        _TARGET_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*@[^/]+/.+$")  # the schema's target pattern
    if type(document) is not dict or document.keys() != {"format", "entries"}:
        return False
    if type(document["format"]) is not int or document["format"] != 1 or type(document["entries"]) is not list:
        return False
    for e in document["entries"]:
        if type(e) is not dict or not _ENTRY_REQUIRED <= e.keys() or not e.keys() <= _ENTRY_KEYS:
            return False
        for key in ("test", "op_type", "reason", "target", "node", "verdict"):
            if type(e[key]) is not str or (not e[key] and key != "node"):
                return False
        if e["verdict"] not in ("cpu", "unsupported") or not _TARGET_PATTERN.search(e["target"]):
            return False
        if "link" in e and (type(e["link"]) is not str or not e["link"]):
            return False
        if "call" in e and (type(e["call"]) is not int or e["call"] < 2):
            return False
        loc = e["location"]
        if loc is not None:
            if type(loc) is not dict or loc.keys() != _LOCATION_KEYS or type(loc["module"]) is not str:
                return False
            if type(loc["file"]) is not str or not loc["file"] or type(loc["line"]) is not int or loc["line"] < 1:
                return False
    return True


def validate(document: Any) -> list[str]:
    """Problems of a baseline document against its schema and rules (empty when valid)."""
    if not _plainly_valid(document):
        import jsonschema

        from .jsonio import load_strict

        schema = load_strict(SCHEMA_PATH)
        validator = jsonschema.validators.validator_for(schema)(schema)
        problems = [f"$.{'.'.join(map(str, e.absolute_path))}: {e.message}" if e.absolute_path else f"$: {e.message}"
                    for e in sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))]
        if problems:
            return problems
    problems: list[str] = []
    for i, e in enumerate(document["entries"]):
        if e["verdict"] not in ACCEPTABLE:
            problems.append(f"$.entries.{i} ({e['test']} {e['target']}: {e['op_type']} {e['node']}): verdict "
                            f"{e['verdict']!r} cannot be accepted: {REFUSED_WHY}; remove the entry")
    return problems


def parse(document: Any, path: Optional[Path] = None) -> Baseline:
    where = str(path) if path else "baseline"
    problems = validate(document)
    if problems:
        raise BaselineError(f"{where}: not a valid baseline:\n  " + "\n  ".join(problems))
    return Baseline(entries=[Entry.from_json(e) for e in document["entries"]], path=path, exists=True)


def load(path: Path) -> Baseline:
    """Read a baseline; a missing file is an empty baseline (nothing accepted)."""
    from .jsonio import JsonFileError, load_strict

    path = Path(path)
    if not path.exists():
        return Baseline(path=path, exists=False)
    try:
        document = load_strict(path)
    except JsonFileError as exc:
        raise BaselineError(str(exc)) from None
    return parse(document, path)


# -- matching -------------------------------------------------------------------------------------

@dataclass
class Match:
    """Fallbacks of one (test, target): which are new, which are accepted by which entry."""

    new: list[Mapping[str, Any]] = field(default_factory=list)  # node JSON
    accepted: list[tuple[Mapping[str, Any], Entry]] = field(default_factory=list)
    unmatched: list[Entry] = field(default_factory=list)  # entries nothing matched: stale if the check ran

    def to_json(self) -> dict[str, Any]:
        return {
            "new": [n["name"] for n in self.new],
            "accepted": [{"node": n["name"], "reason": e.reason, **({"link": e.link} if e.link else {})}
                         for n, e in self.accepted],
        }


def fallbacks(target_json: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [n for n in target_json.get("nodes", []) if n.get("verdict") in ("cpu", "unsupported")]


def match(entries: Sequence[Entry], nodes: Sequence[Mapping[str, Any]]) -> Match:
    """Match fallback nodes (JSON form) against the entries of their (test, target)."""
    free = list(entries)
    result: dict[int, Entry] = {}

    def take(k: int, candidates: list[Entry], name: str) -> None:
        if not candidates:
            return
        best = next((e for e in candidates if e.node == name), candidates[0])
        result[k] = best
        free.remove(best)

    def ok(e: Entry, n: Mapping[str, Any]) -> bool:
        return e.op_type == n["op_type"] and _SEVERITY.get(n["verdict"], 2) <= _SEVERITY.get(e.verdict, 2)

    # 1: op type + PyTorch location (robust to renamed nodes)
    for k, n in enumerate(nodes):
        loc = location_of(n.get("source"))
        if loc is not None:
            take(k, [e for e in free if e.location == loc and ok(e, n)], n["name"])
    # 2: op type + node name (no location on either side, or the line moved)
    for k, n in enumerate(nodes):
        if k not in result:
            take(k, [e for e in free if e.node == n["name"] and ok(e, n)], n["name"])
    m = Match(unmatched=free)
    for k, n in enumerate(nodes):
        if k in result:
            m.accepted.append((n, result[k]))
        else:
            m.new.append(n)
    return m


Pair = tuple[str, int, str]  # (test, npu_check call, target)


def checked_pairs(tests: Iterable[Mapping[str, Any]]) -> dict[Pair, Mapping[str, Any]]:
    """(test, call, target) -> target JSON for every target whose check completed in this run."""
    out: dict[Pair, Mapping[str, Any]] = {}
    for t in tests:
        if t.get("status") not in ("passed", "failed") or t.get("error"):
            continue
        for tr in t.get("targets") or []:
            out[(t["nodeid"], int(t.get("call", 1)), tr["target"])] = tr
    return out


def _completed(t: Mapping[str, Any]) -> bool:
    return t.get("status") in ("passed", "failed") and not t.get("error") and bool(t.get("targets"))


class _Runs:
    """Which (test, call) checks this run completed: decides whether an entry that matched nothing
    is gone (stale, removed by an update) or only not seen."""

    def __init__(self, tests: Iterable[Mapping[str, Any]]) -> None:
        self.calls: dict[str, dict[int, Mapping[str, Any]]] = {}
        for t in tests:
            self.calls.setdefault(t["nodeid"], {})[int(t.get("call", 1))] = t

    def no_longer_checks(self, pair: Pair) -> bool:
        """The entry's call ran and no longer checks its target, or the test ran all its calls and has
        no such call now. A call after a failed one did not run (pytest.fail stopped the test): unknown."""
        test, call, _ = pair
        calls = self.calls.get(test)
        if not calls:
            return False
        if call in calls:
            return _completed(calls[call])
        return all(_completed(t) and t.get("status") == "passed" for t in calls.values())


def stale(baseline: Baseline, tests: Sequence[Mapping[str, Any]]) -> list[Entry]:
    """Entries whose test ran its check on their target (or ran and no longer checks that target) and
    matched nothing. Tests that did not run, or whose check did not complete, are left alone."""
    pairs = checked_pairs(tests)
    runs = _Runs(tests)
    out: list[Entry] = []
    by_pair: dict[Pair, list[Entry]] = {}
    for e in baseline.entries:
        by_pair.setdefault(e.pair, []).append(e)
    for pair, entries in by_pair.items():
        if pair in pairs:
            out += match(entries, fallbacks(pairs[pair])).unmatched
        elif runs.no_longer_checks(pair):
            out += entries
    return sorted(out, key=Entry.sort_key)


@dataclass
class Update:
    baseline: Baseline
    added: list[Entry]
    removed: list[Entry]
    kept: int
    refused: list[Entry] = field(default_factory=list)  # unsupported nodes: never recorded


def refused(nodes: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The fallback nodes no baseline can accept (``unsupported``: the build fails)."""
    return [n for n in nodes if n.get("verdict") not in ACCEPTABLE]


def updated(baseline: Baseline, tests: Sequence[Mapping[str, Any]]) -> Update:
    """The baseline recording this run: CPU fallbacks of every completed check, reasons and links of
    entries that still match preserved; entries of tests that did not run are kept as they are.
    Unsupported nodes are not recorded: they are listed in ``refused``."""
    pairs = checked_pairs(tests)
    runs = _Runs(tests)
    entries: list[Entry] = []
    added: list[Entry] = []
    removed: list[Entry] = []
    refusals: list[Entry] = []
    by_pair: dict[Pair, list[Entry]] = {}
    for e in baseline.entries:
        by_pair.setdefault(e.pair, []).append(e)
    for pair, old in by_pair.items():
        if pair not in pairs:
            if runs.no_longer_checks(pair):
                removed += old
            else:
                entries += old
    kept = len(entries)
    for (test, call, target), tr in sorted(pairs.items()):
        m = match(by_pair.get((test, call, target), []), fallbacks(tr))
        for node, e in m.accepted:
            entries.append(Entry.for_node(test, target, node, reason=e.reason, link=e.link, call=call))
        for node in m.new:
            new = Entry.for_node(test, target, node, call=call)
            if node.get("verdict") not in ACCEPTABLE:
                refusals.append(new)
                continue
            entries.append(new)
            added.append(new)
        removed += m.unmatched
        kept += len(m.accepted)
    return Update(Baseline(entries=sorted(entries, key=Entry.sort_key), path=baseline.path, exists=True),
                  added=sorted(added, key=Entry.sort_key), removed=sorted(removed, key=Entry.sort_key), kept=kept,
                  refused=sorted(refusals, key=Entry.sort_key))


__all__ = ["Baseline", "BaselineError", "Entry", "Match", "Update", "DEFAULT_NAME", "DEFAULT_REASON",
           "load", "parse", "validate", "match", "stale", "updated", "location_of", "fallbacks", "refused",
           "ACCEPTABLE"]
