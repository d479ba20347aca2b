"""`npucheck probe`: run the probe models through a real toolchain, then write or check a table.

The work itself is done by the toolchain's ``probes`` hook (a :class:`ProbeRunner`, registered
with the toolchain in :mod:`pytest_npucheck.toolchains.registry`; the built-in ones drive
``toolchains/<name>/probe.py``, which compiles or places the probes in the toolchain's own venv
and records per probe what happened, and ``toolchains/<name>/table.py``, which builds the table
from those records and predicts a probe with a table through the plugin's matcher). This module
resolves and checks the command line (toolchain, version, SoC, the toolchain's python), runs
them, and compares a committed table with fresh results entry by entry.

No pytest or torch imports; onnx/numpy are imported by the probe modules when a run starts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Protocol, Sequence

from ..errors import UsageError

_VERSION = re.compile(r"^\d+(\.\d+)*$")
_ERRATUM = re.compile(r"^probe (?P<id>\S+):")


@dataclass(frozen=True)
class ProbeTarget:
    """A checked ``npucheck probe`` target."""

    toolchain: str
    version: str
    soc: str
    python: str

    @property
    def target(self) -> str:
        return f"{self.toolchain}@{self.version}/{self.soc}"


class ProbeRunner(Protocol):
    """What a toolchain's ``probes`` hook offers ``npucheck probe``."""

    #: what ``--version`` means for this toolchain, for the error that asks for it
    version_words: str
    #: the precisions ``--precision`` may choose; fp16 is the default and what --check-table compares
    precisions: Sequence[str]
    #: why ``--precision`` does not apply, said when only fp16 is offered
    precision_note: str

    def check_soc(self, soc: str) -> None:
        """Raise a UsageError naming the known SoCs when ``soc`` is not one of them."""

    def check_installed(self, t: ProbeTarget, installed: str, catalog: Any, setup: str) -> None:
        """Raise a UsageError when the venv's package (version ``installed``) cannot make ``t``."""

    def results_path(self, t: ProbeTarget, *, extra: bool, precision: str, root: Path) -> Path:
        """Where a full run's results are kept under ``root`` (``probes/``)."""

    def run(self, t: ProbeTarget, out: Path, *, select: Optional[Sequence[str]], extra: bool, precision: str,
            workers: int, timeout: float, run_sessions: bool, verbose: bool) -> dict[str, Any]:
        """Run the probes; returns the results document (also written to ``out``)."""

    def build_table(self, results_path: Path, *, schema_path: Optional[Path], log: Any) -> dict[str, Any]:
        """The table of a full run whose results (or one of its files) are at ``results_path``."""

    def probe_models(self, ids: Sequence[str]) -> dict[str, Any]:
        """The probe models with these ids, rebuilt by the probe generators."""

    def predict(self, table: Any, model: Any) -> Any:
        """What ``table`` says about a probe model."""

    def compare(self, predicted: Any, status: str, placement: Mapping[str, str], focus: Sequence[str]
                ) -> list[tuple[str, str, str]]:
        """``(node, table says, toolchain says)`` for each disagreement of a prediction with a record."""


def runner(toolchain: str) -> ProbeRunner:
    """The probe runner of a registered toolchain; a toolchain without one is a UsageError saying
    which toolchains can be probed."""
    from ..toolchains import registry

    tc = registry.find(toolchain)
    if tc is None or tc.probes is None:
        reg = registry.registered()
        probed = sorted(n for n, t in reg.items() if t.probes is not None)
        documented = sorted(n for n, t in reg.items() if t.probes is None)
        raise UsageError(f"unknown toolchain {toolchain!r} for probing; probe-derived tables exist for: "
                         f"{', '.join(probed)}"
                         + (f" ({' and '.join(documented)} tables come from documentation, see docs/tables.md)"
                            if documented else ""))
    return tc.hook("probes")


def installed_version(python: str, package: str) -> Optional[str]:
    """The version of ``package`` installed in the venv of ``python`` (None when unknown)."""
    code = "import importlib.metadata as m, sys\ntry: print(m.version(sys.argv[1]))\nexcept Exception: pass\n"
    try:
        out = subprocess.run([python, "-c", code, package], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def resolve_target(catalog: Any, toolchain: str, version: Optional[str], soc: Optional[str],
                   python: Optional[str], *, need_table: bool, need_python: bool = True) -> ProbeTarget:
    """Check the command line's target; every problem is a UsageError saying what exists."""
    from ..toolchains import registry

    probes = runner(toolchain)
    info = registry.get(toolchain)
    meta = catalog.toolchains.get(toolchain, {})
    soc = (soc or meta.get("default_soc") or "").lower()
    soc = meta.get("soc_aliases", {}).get(soc, soc)
    probes.check_soc(soc)
    known = catalog.versions(toolchain)
    if not version:
        raise UsageError(f"--version is required: {probes.version_words}; tables exist for {', '.join(known) or 'none'}")
    if not _VERSION.match(version):
        raise UsageError(f"invalid {toolchain} version {version!r}: expected dotted numbers, {probes.version_words}")
    matching = [v for v in known if v == version or v.startswith(version + ".")]
    if matching:
        version = matching[-1]
    if need_table:
        catalog.resolve(f"{toolchain}@{version}/{soc}")  # raises a UsageError listing what exists
    if not need_python:
        return ProbeTarget(toolchain, version, soc, python or "")
    found = info.hook("oracle").find_python(python)
    if found is None or (python and os.path.abspath(found) != os.path.abspath(python)):
        where = f"--python {python} is not an executable file" if python else (
            f"no {info.package} python found (--python, ${info.env_var} or .venv-{toolchain}/bin/python)")
        raise UsageError(f"{where}; install the toolchain in its own venv with `{info.setup_hint} "
                         f".venv-{toolchain} <version>` and pass the python it prints with --python "
                         f"or ${info.env_var}")
    return ProbeTarget(toolchain, version, soc, found)


def preflight_version(t: ProbeTarget, catalog: Any) -> Optional[str]:
    """Compare the venv's installed package with the requested version before any probe runs
    (the probe runner says how: rknn-toolkit2 is versioned like its tables, onnxruntime-qnn is
    not). Returns the installed package version; raises UsageError on a mismatch."""
    from ..toolchains import registry

    info = registry.get(t.toolchain)
    have = installed_version(t.python, info.package or t.toolchain)
    if have is None:
        raise UsageError(f"{t.python} has no {info.package} installed; install it with `{info.setup_hint} "
                         f".venv-{t.toolchain} <version>`")
    runner(t.toolchain).check_installed(t, have, catalog, info.setup_hint)
    return have


# -- running ------------------------------------------------------------------------------------

def default_results_path(t: ProbeTarget, *, extra: bool, precision: str = "fp16",
                         root: Path = Path("probes")) -> Path:
    """Where the probe modules keep a full run's results (``probes/<toolchain>/<version>/...``)."""
    return runner(t.toolchain).results_path(t, extra=extra, precision=precision, root=root)


def run(t: ProbeTarget, out: Path, *, select: Optional[Sequence[str]], extra: bool, precision: str,
        workers: int, timeout: float, run_sessions: bool = True, verbose: bool = True) -> dict[str, Any]:
    """Run the probes with the toolchain's probe runner; returns the results document (also
    written to ``out``). A version mismatch found during the run is a UsageError."""
    try:
        return runner(t.toolchain).run(t, out, select=select, extra=extra, precision=precision, workers=workers,
                                       timeout=timeout, run_sessions=run_sessions, verbose=verbose)
    except RuntimeError as exc:  # "installed rknn-toolkit2 is X, not Y" / "the QNN backend reports ..."
        raise UsageError(str(exc)) from None


def read_results(path: Path) -> Optional[dict[str, Any]]:
    """A probe-results file, or None when there is none (a probe runner's ``build_table`` reads
    the files of a full run with it)."""
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def build_table(t: ProbeTarget, results_path: Path, *, precision: str = "fp16",
                schema_path: Optional[Path] = None, log: Any = None) -> dict[str, Any]:
    """The table of a full probe run, through the table builders: the main results and the extra
    results found next to ``results_path`` (and, for QNN, the int8 results of the same arch).
    A builder's complaint (an entry no probe supports, results of another target, a table that
    fails validation) is raised as a UsageError naming the results file."""
    try:
        return _build_table(t, results_path, schema_path=schema_path, log=log)
    except UsageError:
        raise
    except Exception as exc:
        from jsonschema.exceptions import ValidationError

        if not isinstance(exc, (ValueError, KeyError, AssertionError, ValidationError)):
            raise
        raise UsageError(f"cannot build the {t.target} table from {results_path}: "
                         f"{exc if str(exc) else type(exc).__name__}") from None


def _build_table(t: ProbeTarget, results_path: Path, *, schema_path: Optional[Path], log: Any) -> dict[str, Any]:
    return runner(t.toolchain).build_table(results_path, schema_path=schema_path, log=log)


def write_table(table: Mapping[str, Any], path: Path) -> None:
    from ..jsonio import write_atomic
    from ..tables import with_release_fields

    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, json.dumps(with_release_fields(table, path), indent=1) + "\n")


# -- checking a committed table against fresh results -----------------------------------------

@dataclass
class Disagreement:
    probe: str
    node: str
    op_type: str
    table_says: str
    toolchain_says: str
    entries: list[str]
    known: bool  # listed in the table's provenance.errata

    def text(self, toolchain: str) -> str:
        got = "built it" if self.toolchain_says == "ok" else self.toolchain_says
        return f"probe {self.probe}: {self.op_type} {self.node} -> table says {self.table_says}, {toolchain} {got}"


@dataclass
class CheckReport:
    target: str
    table_path: str
    checked: int = 0
    agree: int = 0
    skipped: list[str] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    errata_now_agree: list[str] = field(default_factory=list)

    @property
    def new(self) -> list[Disagreement]:
        return [d for d in self.disagreements if not d.known]

    def probes(self, known: bool) -> list[str]:
        """Ids of the probes with a (known or new) disagreement, in order."""
        return list(dict.fromkeys(d.probe for d in self.disagreements if d.known == known))

    @property
    def passed(self) -> bool:
        return not self.new

    def by_entry(self, known: bool = False) -> dict[str, list[Disagreement]]:
        out: dict[str, list[Disagreement]] = {}
        for d in self.disagreements:
            if d.known == known:
                for e in d.entries:
                    out.setdefault(e, []).append(d)
        return out

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "table": self.table_path, "passed": self.passed,
                "checked": self.checked, "agree": self.agree, "skipped": self.skipped,
                "new_disagreeing_probes": self.probes(False), "known_disagreeing_probes": self.probes(True),
                "disagreements": [vars(d) for d in self.disagreements],
                "errata_now_agree": self.errata_now_agree}

    def render(self, toolchain: str) -> list[str]:
        lines = [f"check {self.table_path} ({self.target}) against {self.checked} probe result(s): "
                 f"{self.agree} agree, {len(self.probes(False))} disagree where the table claims agreement, "
                 f"{len(self.probes(True))} disagree as the table's errata already say"
                 + (f", {len(self.skipped)} skipped (built with RKNN load/config options)" if self.skipped else "")]
        for entry, items in self.by_entry(known=False).items():
            lines.append(f"  DISAGREES {entry}:")
            lines += [f"    {d.text(toolchain)}" for d in items]
        for entry, items in self.by_entry(known=True).items():
            lines.append(f"  known {entry}: " + ", ".join(dict.fromkeys(d.probe for d in items)))
        if self.errata_now_agree:
            lines.append("  errata that no longer disagree (regenerate the table with --write-table): "
                         + ", ".join(self.errata_now_agree))
        return lines


def _entry_index(raw: Mapping[str, Any]) -> dict[str, list[str]]:
    """probe id -> the table entries that name it as their evidence."""
    idx: dict[str, list[str]] = {}
    for key, e in (raw.get("ops") or {}).items():
        for pid in e.get("probes") or []:
            idx.setdefault(pid, []).append(key)
        for c in e.get("constraints") or []:
            for pid in c.get("probes") or []:
                if key not in idx.setdefault(pid, []):
                    idx[pid].append(key)
    for c in raw.get("generic_constraints") or []:
        for pid in c.get("probes") or []:
            idx.setdefault(pid, []).append(f"every node ({c.get('rule')})")
    for p in raw.get("patterns") or []:
        for pid in p.get("probes") or []:
            idx.setdefault(pid, []).append(f"pattern {p.get('name')}")
    return idx


def probe_models(toolchain: str, results: Mapping[str, Any]) -> dict[str, Any]:
    """The probe models of the records in ``results`` (main or extra probes), rebuilt by the
    probe generators."""
    return runner(toolchain).probe_models([r["id"] for r in results["probes"]])


def load_results(path: Path, t: ProbeTarget) -> dict[str, Any]:
    """Recorded probe results (``--results``), checked to be of the target's toolchain, version
    and SoC."""
    from ..jsonio import JsonFileError, load_strict

    try:
        doc = load_strict(path)
    except (JsonFileError, OSError) as exc:
        raise UsageError(f"--results {path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("probes"), list):
        raise UsageError(f"--results {path}: not a probe-results document (no `probes` list)")
    for key, want in (("toolchain", t.toolchain), ("version", t.version), ("soc", t.soc)):
        if str(doc.get(key)) != want:
            raise UsageError(f"--results {path}: `{key}` is {doc.get(key)!r}, not {want!r} as given on the command line")
    return doc


def check_table(t: ProbeTarget, table: Any, raw: Mapping[str, Any], results: Mapping[str, Any],
                models: Mapping[str, Any]) -> CheckReport:
    """Predict every fresh probe with the committed table (the plugin's matcher, through the
    builder's ``predict``/``compare``) and list each disagreement under the entries that cite
    that probe; disagreements the table already lists in ``provenance.errata`` are known."""
    probes = runner(t.toolchain)
    errata = {m.group("id") for line in (raw.get("provenance") or {}).get("errata") or []
              if (m := _ERRATUM.match(str(line)))}
    index = _entry_index(raw)
    rep = CheckReport(t.target, str(table.path))
    for rec in results["probes"]:
        model = models.get(rec["id"])
        if model is None or rec.get("config") or rec.get("load"):
            rep.skipped.append(rec["id"])
            continue
        rep.checked += 1
        diff = probes.compare(probes.predict(table, model), rec["status"], rec["placement"], rec["focus"])
        if not diff:
            rep.agree += 1
            if rec["id"] in errata:
                rep.errata_now_agree.append(rec["id"])
            continue
        for node, want, got in diff:
            op = next((n["op_type"] for n in rec["nodes"] if n["name"] == node), "model")
            entries = list(index.get(rec["id"], []))
            if not entries:
                key = f"ai.onnx:{op}"
                entries = [key if key in table.ops else f"no entry for {op} (default verdict {table.default_verdict})"]
            rep.disagreements.append(Disagreement(rec["id"], node, op, want, got, entries, rec["id"] in errata))
    return rep


def results_location(t: ProbeTarget, out: Optional[Path], select: Optional[Sequence[str]], *, extra: bool,
                     precision: str, tmp_factory: Callable[[], str] = lambda: tempfile.mkdtemp(prefix="npucheck-probe-")
                     ) -> Path:
    """``--out``, else the probe modules' default for a full run; a ``--select`` subset without
    ``--out`` goes to a fresh temporary directory so it never replaces a full run's results."""
    if out is not None:
        return out
    if select:
        return Path(tmp_factory()) / default_results_path(t, extra=extra, precision=precision).name
    return default_results_path(t, extra=extra, precision=precision)
