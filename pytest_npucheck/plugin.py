"""pytest glue: options, ini keys, the ``npu_deployable`` marker, the ``npu_check`` fixture and reports.

Imported by every pytest run in the environment, so it imports nothing heavy at module level:
torch, onnx, onnxruntime, numpy and jsonschema load only when a check runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import pytest

from .arguments import EXPORTERS as _EXPORTERS  # the marker's and npu_check's arguments (no heavy import)

MARKER = "npu_deployable"
_REPORT_FORMATS = ("json", "md", "html")


# -- options ------------------------------------------------------------------------------------

def _report_spec(value: str) -> tuple[str, str]:
    fmt, sep, path = value.partition(":")
    if not sep or not path or fmt not in _REPORT_FORMATS:
        raise pytest.UsageError(f"--npu-report={value!r}: expected FORMAT:PATH with FORMAT one of "
                                f"{', '.join(_REPORT_FORMATS)}")
    return fmt, path


def _check_report_path(value: str, path: Path) -> None:
    """A report that cannot be written is a usage error now, not after the whole run (F3)."""
    _check_writable(f"--npu-report={value!r}", path, "reports are only written to regular files or new paths")


def _check_writable(label: str, path: Path, only: str) -> None:
    """A file this run will write (a report, the updated baseline) can be: a usage error now, naming
    ``label``, rather than a failure after the whole run; ``only`` says what may be written."""
    import os

    from .jsonio import special_file

    if path.is_dir():
        raise pytest.UsageError(f"{label}: {path} is a directory")
    kind = special_file(path, follow=True)
    if kind is not None:  # a device or a FIFO would be replaced by a regular file (/dev/null as root)
        raise pytest.UsageError(f"{label}: {path} is {kind}, not a regular file; {only}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # write_atomic creates missing directories below the first existing one
    if not parent.is_dir():
        raise pytest.UsageError(f"{label}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise pytest.UsageError(f"{label}: directory {parent} is not writable")


_BOOL_INI = ("npu_baseline_strict", "npu_numerics", "npu_golden", "npu_isolate", "npu_seed_rng")


def _check_bool_ini(config: pytest.Config) -> None:
    """A true/false ini key with another value is a usage error before any test runs, naming the key
    (pytest's own error names only the value, and only when a test first reads it)."""
    for key in _BOOL_INI:
        try:
            config.getini(key)
        except (ValueError, pytest.UsageError) as exc:  # pytest 9 raises UsageError without the key
            raise pytest.UsageError(f"ini key {key}: {exc} (expected true or false)") from None


def _check_report_target(value: str, path: Path, state: Any, seen: dict[Path, str]) -> None:
    """A report never overwrites another report of this run, the baseline or a golden, and is not
    written through a symbolic link (checked now, not when the run is over)."""
    import os

    real = Path(os.path.realpath(path))
    if path.is_symlink():
        raise pytest.UsageError(f"--npu-report={value!r}: {path} is a symbolic link (to {real}); reports are not "
                                "written through links")
    if real in seen:
        raise pytest.UsageError(f"--npu-report={value!r}: {path} is also the path of --npu-report={seen[real]!r}")
    seen[real] = value
    if real == Path(os.path.realpath(state.baseline_path)):
        raise pytest.UsageError(f"--npu-report={value!r}: {path} is the baseline file; the report would replace it")
    golden = Path(os.path.realpath(state.golden_root))
    if real == golden or golden in real.parents:
        raise pytest.UsageError(f"--npu-report={value!r}: {path} is inside the golden directory {state.golden_root}")
    budgets = state.budgets_path
    if budgets is not None and real == Path(os.path.realpath(budgets)):
        raise pytest.UsageError(f"--npu-report={value!r}: {path} is the budgets file; the report would replace it")


_ORACLE_MODES = ("off", "report", "strict")


def _oracle_mode(value: str) -> str:
    v = str(value).strip().lower()
    v = {"true": "report", "on": "report", "1": "report", "yes": "report", "false": "off", "0": "off",
         "no": "off", "": "off"}.get(v, v)
    if v not in _ORACLE_MODES:
        import argparse

        raise argparse.ArgumentTypeError(f"oracle mode {value!r}: expected one of {', '.join(_ORACLE_MODES)}")
    return v


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("npucheck", "NPU deployability checks (pytest-npucheck)")
    group.addoption("--npu-target", action="append", default=[], metavar="TOOLCHAIN[@VERSION][/SOC]",
                    help="target for marked tests whose marker names none (repeatable), e.g. rknn@2.5.0/rk3588")
    group.addoption("--npu-report", action="append", default=[], metavar="FORMAT:PATH",
                    help="write a report for the whole run (repeatable): json:PATH, md:PATH (CI step summary, "
                         "PR comment) or html:PATH (self-contained, with graph pictures)")
    group.addoption("--npu-tables", action="append", default=[], metavar="DIR",
                    help="extra support-table directory (overrides bundled tables of the same target)")
    group.addoption("--npu-exporter", choices=_EXPORTERS, default=None,
                    help="ONNX exporter: dynamo (torch.export-based, default) or torchscript")
    group.addoption("--npu-opset", type=int, default=None, metavar="N", help="ONNX opset to export with")
    group.addoption("--npu-no-export-cache", action="store_true", default=False,
                    help="export every model afresh instead of reusing cached exports")
    group.addoption("--npu-baseline", default=None, metavar="PATH",
                    help="baseline of accepted fallbacks (default: npucheck-baseline.json at the rootdir)")
    group.addoption("--npu-update-baseline", action="store_true", default=False,
                    help="record the fallbacks of this run in the baseline (keeps reasons of entries that still occur)")
    group.addoption("--npu-baseline-strict", action="store_true", default=None,
                    help="fail the run when baseline entries are stale (the accepted fallback no longer occurs)")
    group.addoption("--npu-no-numerics", action="store_true", default=False,
                    help="skip the numeric checks (PyTorch vs ONNX Runtime, precision emulation, goldens, budgets)")
    group.addoption("--npu-update-golden", action="store_true", default=False,
                    help="write the stored goldens of golden-checked tests (such a run is never green)")
    group.addoption("--npu-golden-max-mb", default=None, metavar="MIB",
                    help="what one stored golden may hold, in MiB, checked before it is read (default: ini "
                         "npu_golden_max_mb, else 256)")
    group.addoption("--npu-budgets", default=None, metavar="PATH",
                    help="per-release budgets file (default: npu-budgets.json at the rootdir, if it exists)")
    group.addoption("--npu-budget-base", default=None, metavar="REF",
                    help="compare the budgets file with its version at the merge base of HEAD and REF (default: "
                         "the pull request's base from GitHub's or GitLab's CI variables, else HEAD)")
    group.addoption("--npu-release", default=None, metavar="VERSION",
                    help="release whose budgets apply (default: ini npu_release, else the project's version)")
    group.addoption("--npu-oracle", nargs="?", const="report", default=None, type=_oracle_mode,
                    metavar="report|strict|off",
                    help="also build and run each checked model with the real toolchain of its targets where "
                         "installed (rknn-toolkit2, onnxruntime-qnn): node-by-node disagreements with the table "
                         "and the toolchain's own numerics in the reports; strict: a disagreement fails the test")
    group.addoption("--npu-timeout", default=None, metavar="SECONDS",
                    help="time limit of each export, ONNX load/shape inference and ONNX Runtime step, run in a "
                         "child process (default: ini npu_timeout, else 600; 0: none)")
    group.addoption("--npu-memory-limit", default=None, metavar="MIB",
                    help="memory a child process may add to what it inherits (default: ini npu_memory_limit, "
                         "else half the physical memory; 0: none)")
    group.addoption("--npu-keep-onnx", default=None, metavar="DIR",
                    help="keep the ONNX export of each marked test in DIR, named after the test id")
    group.addoption("--npu-no-isolate", action="store_true", default=False,
                    help="run exports, ONNX shape inference and ONNX Runtime in this process (no crash "
                         "containment, no timeout; for debuggers and profilers)")
    parser.addini("npu_targets", "targets for marked tests whose marker names none", type="linelist", default=[])
    parser.addini("npu_model_fixture", "fixture holding the model in marker-only tests", default="model")
    parser.addini("npu_inputs_fixture", "fixture holding the example inputs in marker-only tests", default="example_inputs")
    parser.addini("npu_exporter", "ONNX exporter: dynamo or torchscript", default="dynamo")
    parser.addini("npu_opset", "ONNX opset to export with (empty: the exporter's default)", default="")
    parser.addini("npu_dynamic_axes", "JSON object {input name: {axis: dim name}} for every export", default="")
    parser.addini("npu_tables", "extra support-table directories", type="paths", default=[])
    parser.addini("npu_baseline", "baseline of accepted fallbacks (default: npucheck-baseline.json at the rootdir)",
                  type="paths", default=[])
    parser.addini("npu_baseline_strict", "fail the run when baseline entries are stale", type="bool", default=False)
    parser.addini("npu_numerics", "run the numeric checks on marked tests", type="bool", default=True)
    parser.addini("npu_golden", "check every marked test against a stored golden", type="bool", default=False)
    parser.addini("npu_golden_dir", "directory of stored goldens (default: npu_goldens at the rootdir)",
                  type="paths", default=[])
    parser.addini("npu_golden_max_mb", "what one stored golden may hold, in MiB (default 256)", default="")
    parser.addini("npu_budgets", "per-release budgets file (default: npu-budgets.json at the rootdir)",
                  type="paths", default=[])
    parser.addini("npu_release", "release whose budgets apply (default: the project's version)", default="")
    parser.addini("npu_oracle", "run the real toolchains as oracles: off (default), report or strict", default="off")
    parser.addini("npu_timeout", "time limit in seconds of each isolated step (0: none)", default="")
    parser.addini("npu_memory_limit", "memory in MiB an isolated step may add to its process (0: none)", default="")
    parser.addini("npu_keep_onnx", "keep the ONNX export of each marked test in this directory (relative to the "
                  "ini file's directory), named after the test id", default="")
    parser.addini("npu_isolate", "run exports, shape inference and ONNX Runtime in child processes", type="bool",
                  default=True)
    parser.addini("npu_seed_rng", "seed Python's, NumPy's and torch's global RNGs from the test id before each "
                  "marked test, so random weights and inputs are the same in every run and under xdist",
                  type="bool", default=True)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(targets=None, exporter=None, opset=None, dynamic_axes=None, input_names=None, output_names=None, "
        "numerics=None, golden=None): "
        "check that the model under test stays on the NPU of each target (pytest-npucheck)",
    )
    _check_bool_ini(config)
    config.stash[_STATE] = _State(config)
    state = config.stash[_STATE]
    state.oracle_mode  # an invalid ini value is a usage error before any test runs
    state.golden_max_bytes
    seen: dict[Path, str] = {}
    for value in config.getoption("npu_report") or []:
        _, report_path = _report_spec(value)
        if not hasattr(config, "workerinput"):
            path = Path(config.invocation_params.dir) / report_path
            _check_report_path(value, path)
            _check_report_target(value, path, state, seen)
    if state.budgets is not None:
        state.checked_release()  # a release no budget can be matched against is a usage error now
    if state.updating and state.baseline_path.is_symlink() and not hasattr(config, "workerinput"):
        raise pytest.UsageError(f"--npu-update-baseline: {state.baseline_path} is a symbolic link; the baseline "
                                "is not written through links")
    if state.updating and not hasattr(config, "workerinput"):
        _check_writable("--npu-update-baseline", state.baseline_path,
                        "the baseline is only written to a regular file or a new path")
    config.stash[_ISOLATE_BEFORE] = _configure_isolation(config)
    if not hasattr(config, "workerinput"):  # xdist workers send their reports to the controller
        config.pluginmanager.register(_Reporter(config), "npucheck-reporter")


def _configure_isolation(config: pytest.Config) -> Any:
    """Apply --npu-timeout / --npu-memory-limit / --npu-no-isolate (and their ini keys) to
    ``isolate.py``; returns the settings to restore at unconfigure (pytester runs in-process)."""
    from . import isolate
    from .errors import NpuCheckError

    def pick(option: str, ini: str) -> Any:
        value = config.getoption(option)
        return value if value is not None else (config.getini(ini) or None)

    try:
        timeout = pick("npu_timeout", "npu_timeout")
        timeout = isolate.DEFAULT_TIMEOUT if timeout is None else isolate.parse_timeout(timeout, "npu_timeout")
        memory = pick("npu_memory_limit", "npu_memory_limit")
        if memory is not None:
            try:
                memory = int(str(memory).strip())
            except ValueError:
                raise NpuCheckError(f"npu_memory_limit: expected a whole number of MiB, got {memory!r}") from None
            if memory < 0:
                raise NpuCheckError(f"npu_memory_limit: expected 0 or more MiB, got {memory}")
    except NpuCheckError as exc:
        raise pytest.UsageError(str(exc)) from None
    enabled = not config.getoption("npu_no_isolate") and bool(config.getini("npu_isolate"))
    return isolate.configure(enabled=enabled and isolate.env_enabled(), timeout=timeout, memory_mb=memory)


def pytest_unconfigure(config: pytest.Config) -> None:
    before = config.stash.get(_ISOLATE_BEFORE, None)
    if before is not None:
        from . import isolate

        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


# -- run state ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class CheckSpec:
    """What one marked test asks for, parsed once at collection."""

    targets: tuple[str, ...]
    exporter: str
    opset: Optional[int]
    dynamic_axes: Optional[Mapping[str, Mapping[int, str]]]
    input_names: Optional[tuple[str, ...]] = None
    output_names: Optional[tuple[str, ...]] = None
    numerics: Optional[bool] = None  # None: the option / ini default
    golden: Optional[bool] = None


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._catalog: Any = None
        self._baseline: Any = None
        self.entries: list[dict[str, Any]] = []  # controller side: per-test report entries
        self._budgets: Any = False  # False: not loaded yet; None: no budgets file
        self._release: Optional[str] = None

    @property
    def baseline_path(self) -> Path:
        from . import BASELINE_NAME  # not .baseline: that module loads only when used

        opt = self.config.getoption("npu_baseline")
        if opt:
            return Path(self.config.invocation_params.dir) / opt
        ini = self.config.getini("npu_baseline")
        return Path(ini[0]) if ini else Path(self.config.rootpath) / BASELINE_NAME

    @property
    def baseline(self) -> Any:
        """The accepted fallbacks (read by every process; only the controller writes the file)."""
        if self._baseline is None:
            from .baseline import BaselineError, load

            try:
                self._baseline = load(self.baseline_path)
            except BaselineError as exc:
                raise pytest.UsageError(f"npucheck baseline: {exc}") from None
        return self._baseline

    @property
    def updating(self) -> bool:
        return bool(self.config.getoption("npu_update_baseline"))

    @property
    def strict(self) -> bool:
        opt = self.config.getoption("npu_baseline_strict")
        return bool(opt) if opt is not None else bool(self.config.getini("npu_baseline_strict"))

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from .errors import NpuCheckError
            from .tables import Catalog

            dirs = [str(p) for p in self.config.getini("npu_tables")] + list(self.config.getoption("npu_tables") or [])
            try:
                self._catalog = Catalog.discover(dirs)
            except NpuCheckError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._catalog

    def numerics_on(self, spec: "CheckSpec") -> bool:
        if self.config.getoption("npu_no_numerics"):
            return False
        if spec.numerics is not None:
            return bool(spec.numerics)
        return bool(self.config.getini("npu_numerics"))

    @property
    def oracle_mode(self) -> str:
        """off, report or strict: --npu-oracle, else the ini key npu_oracle."""
        opt = self.config.getoption("npu_oracle")
        if opt is not None:
            return str(opt)
        import argparse

        try:
            return _oracle_mode(str(self.config.getini("npu_oracle") or "off"))
        except argparse.ArgumentTypeError as exc:
            raise pytest.UsageError(f"ini key npu_oracle: {exc}") from None

    def golden_on(self, spec: "CheckSpec") -> bool:
        return bool(spec.golden) if spec.golden is not None else bool(self.config.getini("npu_golden"))

    @property
    def golden_root(self) -> Path:
        ini = self.config.getini("npu_golden_dir")
        return Path(ini[0]) if ini else Path(self.config.rootpath) / "npu_goldens"

    @property
    def golden_max_bytes(self) -> Optional[int]:
        """--npu-golden-max-mb, else the ini key, in bytes; None: golden.DEFAULT_MAX_MB. A usage error
        naming the setting when it is not a positive whole number."""
        opt = self.config.getoption("npu_golden_max_mb")
        where, value = ("--npu-golden-max-mb", opt) if opt is not None else (
            "ini key npu_golden_max_mb", str(self.config.getini("npu_golden_max_mb") or "").strip())
        if value in (None, ""):
            return None
        try:
            mb = int(str(value).strip())
        except ValueError:
            mb = 0
        if mb <= 0:
            raise pytest.UsageError(f"{where}: expected a whole number of MiB greater than 0, got {value!r}")
        return mb << 20

    @property
    def budgets_path(self) -> Optional[Path]:
        opt = self.config.getoption("npu_budgets")
        if opt:
            return Path(self.config.invocation_params.dir) / opt
        ini = self.config.getini("npu_budgets")
        if ini:
            return Path(ini[0])
        default = Path(self.config.rootpath) / "npu-budgets.json"
        return default if default.exists() else None

    @property
    def budgets(self) -> Any:
        """The budgets file (None when there is none); an invalid or missing given file is a usage error."""
        if self._budgets is False:
            path = self.budgets_path
            if path is None:
                self._budgets = None
            else:
                from .budget import load_budgets
                from .errors import NpuCheckError

                if not path.exists():
                    raise pytest.UsageError(f"npucheck budgets: {path} does not exist")
                try:
                    self._budgets = load_budgets(path)
                except (NpuCheckError, ValueError, OSError) as exc:
                    raise pytest.UsageError(f"npucheck budgets: {exc}") from None
        return self._budgets

    @property
    def release(self) -> str:
        """The release whose budgets apply: option, ini key, the project's version, else the plugin's."""
        if self._release is None:
            value = self.config.getoption("npu_release") or str(self.config.getini("npu_release") or "").strip()
            self._release = value or _project_version(Path(self.config.rootpath))
        return self._release

    def checked_release(self) -> str:
        """The release, read as a version (the budgets are matched against it), or a usage error
        naming where it came from."""
        from .budget import BudgetError, parse_version

        release = self.release
        try:
            parse_version(release)
        except BudgetError as exc:
            if self.config.getoption("npu_release"):
                where = "--npu-release"
            elif str(self.config.getini("npu_release") or "").strip():
                where = "ini key npu_release"
            else:
                where = f"the project's version ({Path(self.config.rootpath)})"
            raise pytest.UsageError(f"{where}: {exc}; budgets need a release such as 1.2.0") from None
        return release

    def default_targets(self) -> tuple[str, ...]:
        return tuple(self.config.getoption("npu_target") or ()) or tuple(self.config.getini("npu_targets") or ())

    def export_defaults(self) -> dict[str, Any]:
        """Exporter, opset and dynamic axes from the options and ini keys, parsed as the marker's are."""
        from . import arguments
        from .errors import UsageError

        opset_opt = self.config.getoption("npu_opset")
        opset_ini = str(self.config.getini("npu_opset") or "").strip()
        axes_text = str(self.config.getini("npu_dynamic_axes") or "").strip()
        try:
            exporter = arguments.exporter(self.config.getoption("npu_exporter") or self.config.getini("npu_exporter")
                                          or "dynamo", "ini key npu_exporter")
            if opset_opt is not None:
                opset = arguments.opset(opset_opt, "--npu-opset")
            elif opset_ini:
                opset = arguments.opset(int(opset_ini) if opset_ini.lstrip("-").isdigit() else opset_ini,
                                        "ini key npu_opset")
            else:
                opset = None
            axes = arguments.dynamic_axes(json_loads(axes_text, "ini key npu_dynamic_axes"),
                                          "ini key npu_dynamic_axes") if axes_text else None
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        return {"exporter": exporter, "opset": opset, "dynamic_axes": axes}


_STATE = pytest.StashKey[_State]()
_SPEC = pytest.StashKey[CheckSpec]()
_ENTRY = pytest.StashKey[dict]()  # the entry of the test's current npu_check call
_ENTRIES = pytest.StashKey[list]()  # the entries of all its calls (call 1 has no "call" key)
_CALLED = pytest.StashKey[bool]()
_TEMP_EXPORTS = pytest.StashKey[list]()  # --npu-no-export-cache: directories to remove when the test ends
_ISOLATE_BEFORE = pytest.StashKey[Any]()
_DESELECTED = pytest.StashKey[int]()  # marked tests deselected in this process
_DESELECTED_OUTPUT = "npucheck_deselected_marked"


def json_loads(text: str, where: str) -> Any:
    from .jsonio import loads_strict

    try:
        return loads_strict(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: invalid JSON: {exc}") from None


def _arguments(kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The marker's or npu_check's keyword arguments, parsed by ``arguments.py`` (usage error text)."""
    from . import arguments

    return arguments.parse(kwargs, where)


def _spec_for(item: pytest.Item, state: _State, mark: pytest.Mark) -> CheckSpec:
    from .errors import UsageError

    where = f"{item.nodeid}: @pytest.mark.{MARKER}"
    kwargs = dict(mark.kwargs)
    try:
        if mark.args:
            if "targets" in kwargs:
                raise UsageError(f"{where}: give targets positionally or as targets=, not both")
            kwargs["targets"] = list(mark.args)
        given = _arguments(kwargs, where)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    targets = given.get("targets") or state.default_targets()
    if not targets:
        raise pytest.UsageError(f"{where}: no target: name one in the marker (targets=[...]), "
                                "with --npu-target, or with the ini key npu_targets")
    defaults = state.export_defaults()
    return CheckSpec(targets=targets, exporter=given.get("exporter") or defaults["exporter"],
                     opset=given["opset"] if "opset" in given else defaults["opset"],
                     dynamic_axes=given["dynamic_axes"] if "dynamic_axes" in given else defaults["dynamic_axes"],
                     input_names=given.get("input_names"), output_names=given.get("output_names"),
                     numerics=given.get("numerics"), golden=given.get("golden"))


def _project_version(rootdir: Path) -> str:
    """The version of the project under test (pyproject's static [project] version), else the plugin's."""
    try:
        import tomllib

        with open(rootdir / "pyproject.toml", "rb") as fh:
            version = tomllib.load(fh).get("project", {}).get("version")
        if isinstance(version, str) and version.strip():
            return version.strip()
    except (OSError, ValueError, ImportError):
        pass
    from . import __version__

    return __version__


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parse every marker and resolve and validate every table before any test runs."""
    state = config.stash[_STATE]
    marked = [(item, item.get_closest_marker(MARKER)) for item in items]
    marked = [(i, m) for i, m in marked if m is not None]
    if not marked:
        return
    from .errors import NpuCheckError

    state.baseline  # an invalid baseline stops the run before any test
    state.budgets  # so does an invalid budgets file
    toolchains: dict[str, str] = {}  # toolchain -> first target naming it
    for item, mark in marked:
        spec = _spec_for(item, state, mark)
        try:
            for target in spec.targets:
                toolchains.setdefault(state.catalog.table(target).toolchain, target)
        except NpuCheckError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[_SPEC] = spec
    if state.oracle_mode == "strict":
        _check_strict_oracles(toolchains)


def _check_strict_oracles(toolchains: Mapping[str, str]) -> None:
    """--npu-oracle=strict promises every target is checked by its real toolchain: one that cannot run
    here is a usage error naming what to install (a strict run that checks nothing must not be green)."""
    from .oracles.oracle import unavailable_reason

    missing = [f"{target}: {why}" for tc, target in sorted(toolchains.items())
               if (why := unavailable_reason(tc)) is not None]
    if missing:
        raise pytest.UsageError("--npu-oracle=strict: the real toolchain of these targets cannot run here, so "
                                "nothing would be checked:\n  " + "\n  ".join(missing)
                                + "\n(install it, or use --npu-oracle=report to note the missing ones)")


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    """Count deselected marked tests: a selection that leaves none out (``-m npu_deployable``) is not a
    partial run for the budgets' stale check. Each process counts what it collected."""
    marked = sum(1 for i in items if getattr(i, "get_closest_marker", None) and i.get_closest_marker(MARKER))
    if marked:
        config = items[0].config
        config.stash[_DESELECTED] = config.stash.get(_DESELECTED, 0) + marked


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reads the count at pytest_testnodedown
        workeroutput[_DESELECTED_OUTPUT] = session.config.stash.get(_DESELECTED, 0)


def seed_for_test(nodeid: str) -> int:
    """The stable 31-bit seed of a test id (the same value ``emulate.seed_for`` gives)."""
    import hashlib

    return int.from_bytes(hashlib.sha256(nodeid.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Seed the global RNGs before a marked test's fixtures run.

    A model built with random weights then has the same weights in every run, in any test order
    and on any xdist worker: its export is cached across runs and every report is identical.
    Only libraries already imported are seeded (this never imports torch or numpy)."""
    if item.stash.get(_SPEC, None) is None or not item.config.getini("npu_seed_rng"):
        return
    import random
    import sys

    seed = seed_for_test(item.nodeid)
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)
    if "torch" in sys.modules:
        sys.modules["torch"].manual_seed(seed)


# -- the check ----------------------------------------------------------------------------------

@dataclass
class NpuCheckOutcome:
    """What `npu_check(...)` returns when every target passes."""

    results: list[Any]  # list[TargetResult]
    onnx_path: Path
    export: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


def _cache_dir(config: pytest.Config) -> Optional[Path]:
    if config.getoption("npu_no_export_cache"):
        return None
    cache = getattr(config, "cache", None)
    if cache is None:
        return None
    return Path(cache.mkdir("npucheck-exports"))


def _keep_onnx_dir(config: pytest.Config) -> Optional[Path]:
    """--npu-keep-onnx (relative to the invocation directory), else ini npu_keep_onnx (relative to the
    ini file's directory), else None."""
    opt = config.getoption("npu_keep_onnx")
    if opt:
        return Path(config.invocation_params.dir) / opt
    ini = str(config.getini("npu_keep_onnx") or "").strip()
    if ini:
        return Path(config.inipath.parent if config.inipath else config.rootpath) / ini
    return None


def _run_check(item: pytest.Item, spec: CheckSpec, model: Any, example_inputs: Any, **overrides: Any) -> NpuCheckOutcome:
    state = item.config.stash[_STATE]
    calls = item.stash.setdefault(_ENTRIES, [])  # every call of the test is recorded, keyed by its number
    entry: dict[str, Any] = {"nodeid": item.nodeid, "status": "error", "error": None, "export": None, "targets": []}
    if calls:
        entry["call"] = len(calls) + 1
    calls.append(entry)
    item.stash[_ENTRY] = entry
    item.stash[_CALLED] = True
    from .check import check_graph, graph_facts
    from .errors import NpuCheckError
    from .export import ExportError, ExportOptions, export_model

    from .errors import UsageError

    try:
        given = _arguments(overrides, "npu_check()")
    except UsageError as exc:
        entry["error"] = str(exc)
        pytest.fail(entry["error"], pytrace=False)
    if model is None:
        entry["error"] = "npu_check() needs a model (a torch.nn.Module), got None"
        pytest.fail(entry["error"], pytrace=False)
    import torch

    if not isinstance(model, torch.nn.Module):
        entry["error"] = (f"npu_check() needs a model (a torch.nn.Module), got a {type(model).__name__}: the "
                          "exporters take modules (wrap a function in an nn.Module whose forward calls it)")
        pytest.fail(entry["error"], pytrace=False)
    targets = given.get("targets") or spec.targets
    try:
        tables = [state.catalog.table(t) for t in targets]
    except NpuCheckError as exc:
        entry["error"] = str(exc)
        pytest.fail(f"npu_check: {exc}", pytrace=False)
    # targets that name the same table ("rknn" and its full name, or one written twice) are checked once
    unique: dict[str, Any] = {}
    for t in tables:
        unique.setdefault(t.target, t)
    tables = list(unique.values())
    axes = given["dynamic_axes"] if "dynamic_axes" in given else spec.dynamic_axes
    asked_opset = given["opset"] if given.get("opset") is not None else spec.opset
    opset = asked_opset if asked_opset is not None else _target_opset(tables)
    options = ExportOptions(
        exporter=given.get("exporter") or spec.exporter,
        opset=opset,
        dynamic_axes=axes,
        input_names=given.get("input_names") or spec.input_names,
        output_names=given.get("output_names") or spec.output_names,
    )
    cache_dir = _cache_dir(item.config)
    failure = None  # failed outside the handler: pytest would print the exception it handles first
    from .report.terminal import progress

    try:
        with _eval_mode(model), progress(item.config, f"exporting {item.nodeid} ({options.exporter} exporter)"):
            exported = export_model(model, example_inputs, options, cache_dir=cache_dir)
    except ExportError as exc:
        entry["error"] = f"export failed: {exc}"
        failure = f"npu_check: the model could not be exported to ONNX ({options.exporter} exporter):\n{exc}"
    except ValueError as exc:  # export_model: the export options do not fit the model (names, dynamic_axes)
        entry["error"] = f"export options: {exc}"
        failure = (f"npu_check: the export options do not fit the model (the npu_deployable marker or the "
                   f"npu_check arguments): {exc}")
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    if cache_dir is None:  # a fresh temporary directory per export: removed at teardown (the test may read it)
        item.stash.setdefault(_TEMP_EXPORTS, []).append(exported.path.parent)
    entry["export"] = {"exporter": exported.exporter, "opset": exported.opset, "cache_hit": exported.cache_hit,
                       "key": exported.key, "path": str(exported.path)}
    keep_dir = _keep_onnx_dir(item.config)
    if keep_dir is not None:  # written by the process that ran the test: one file per test id and call
        from .keep_onnx import keep

        try:
            keep(exported.path, keep_dir, item.nodeid, entry.get("call", 1))
        except UsageError as exc:
            entry["error"] = str(exc)
            pytest.fail(f"npu_check: {exc}", pytrace=False)
    cache_notes = list(exported.notes)  # cache entries that failed their content hashes: said, never used
    try:
        graph = graph_facts(exported.path, notes=cache_notes)
    except NpuCheckError as exc:
        entry["error"] = str(exc)
        pytest.fail(f"npu_check: {exc}", pytrace=False)
    results = check_graph(graph, tables)
    if cache_notes:
        import dataclasses

        results = [dataclasses.replace(r, notes=(*r.notes, *cache_notes)) for r in results]
        for note in cache_notes:
            item.warn(pytest.PytestWarning(f"npu_check: {note}"))
    if opset is not None and exported.opset != opset:
        import dataclasses

        asked = "the marker's opset" if asked_opset is not None else "the targets' newest opset"
        hint = " (exporter='torchscript' writes older opsets)" if exported.exporter == "dynamo" else ""
        note = (f"the {exported.exporter} exporter wrote opset {exported.opset}, not {opset} ({asked}): it could not "
                f"convert this model{hint}")
        results = [dataclasses.replace(r, notes=(*r.notes, note)) for r in results]
        item.warn(pytest.PytestWarning(f"npu_check: {note}"))  # a passing test prints no report
    if not all(r.passed for r in results):
        from .fixes import with_fixes

        shapes = _input_shapes(graph, example_inputs)
        results = [with_fixes(r, exported.path, t, input_shapes=shapes) for r, t in zip(results, tables)]
    entry["targets"] = [r.to_json() for r in results]
    budget_lines = _deployment_budgets(state, results, entry)
    gate = _gate(item, state, graph, results, entry)
    outcome = NpuCheckOutcome(results=results, onnx_path=exported.path, export=entry["export"])
    spec_now = CheckSpec(targets=tuple(targets), exporter=options.exporter, opset=opset, dynamic_axes=axes,
                         numerics=given.get("numerics", spec.numerics), golden=given.get("golden", spec.golden))
    numeric_lines: list[str] = []
    if state.numerics_on(spec_now):
        with progress(item.config, f"numerics of {item.nodeid}"):
            numeric_lines = _numerics(item, state, spec_now, model, example_inputs, exported.path, graph, results,
                                      tables, entry)
    else:
        entry["numerics"] = {"enabled": False, "passed": None}
    oracle_fails = False
    if state.oracle_mode != "off":
        oracle_fails = _oracle(item, state, model, example_inputs, exported.path, graph, results, tables, entry)
    if not gate or numeric_lines or oracle_fails:
        entry["status"] = "failed"
        parts = [_failure_text(results, entry["targets"], state, budget_lines)] if not gate else []
        if numeric_lines:
            parts.append("\n".join(numeric_lines))
        if entry.get("oracle"):
            from .report.text import oracle_lines

            head = ("oracle (strict): the real toolchain disagrees with the table" if oracle_fails
                    else "oracle: what the real toolchains said")
            parts.append("\n".join([head] + [ln for o in entry["oracle"]["targets"] for ln in oracle_lines(o)]))
        pytest.fail("\n\n".join(parts), pytrace=False)
    return outcome


# -- oracles ------------------------------------------------------------------------------------

def _oracle(item: pytest.Item, state: _State, model: Any, example_inputs: Any, onnx_path: Path, graph: Any,
            results: Sequence[Any], tables: Sequence[Any], entry: dict[str, Any]) -> bool:
    """Build and run the model with each target's real toolchain where it is installed.

    Fills ``entry["oracle"]``; returns True when the test must fail (strict mode and a disagreement
    between the real placement and the static verdict on any target)."""
    from .budget import report_entry
    from . import isolate
    from .emulate import random_inputs, run_model, seed_for
    from .numerics import policy_for
    from .oracles.oracle import run_target
    from .toolchains.registry import default_precision

    test_id = item.nodeid
    mode = state.oracle_mode
    info: dict[str, Any] = {"mode": mode, "targets": [], "disagreements": 0, "notes": []}
    entry["oracle"] = info
    budgets = state.budgets
    release = state.release if budgets is not None else None
    test_budget = budgets.for_test(release, test_id, type(model).__name__) if budgets is not None else None
    try:
        flat = _input_arrays(example_inputs)
    except _NoNumerics as exc:
        info["notes"].append(f"the oracles did not run: {exc}")
        return False
    feeds = dict(zip(graph.inputs, flat)) if len(flat) == len(graph.inputs) else None
    reference, reference_source, inputs_source = None, "pytorch", "given"
    if feeds is not None:
        try:
            reference = _torch_outputs(model, example_inputs, graph.outputs)
        except _NoNumerics as exc:
            info["notes"].append(f"the oracles did not run: {exc}")
            return False
        except ValueError as exc:
            info["notes"].append(f"no PyTorch reference: {exc}; the reference is ONNX Runtime fp32")
    else:
        feeds, inputs_source = random_inputs(onnx_path, seed_for(test_id)), "random"
        info["notes"].append("the example inputs do not line up with the ONNX inputs: seeded random inputs, "
                             "reference ONNX Runtime fp32")
    if reference is None:
        reference, reference_source = isolate.call("onnxruntime", run_model, onnx_path, feeds), "onnxruntime_fp32"
    for r, table in zip(results, tables):
        key, note = _target_precision(test_budget, r.target, table, default_precision(table.toolchain))
        if note:
            info["notes"].append(note)
        policy = (test_budget.policy_for(key) if test_budget is not None
                  else policy_for("fp16" if key == "fp32" else key))
        o = run_target(onnx_path, r, table, feeds, reference, reference_source=reference_source,
                       inputs_source=inputs_source, seed=seed_for(test_id), precision=key, policy=policy,
                       calibration=[feeds], calibration_source=inputs_source,
                       budget_entry=lambda comp: report_entry(test_id, comp, test_budget))
        info["targets"].append(o.to_json())
        info["disagreements"] += o.disagreements
    return mode == "strict" and info["disagreements"] > 0


# -- numerics -----------------------------------------------------------------------------------

def _leaves(x: Any) -> list[Any]:
    """Tensor leaves of nested inputs/outputs in the exporters' flattening order (None and scalars are skipped)."""
    out: list[Any] = []

    def walk(v: Any) -> None:
        if isinstance(v, (list, tuple)):
            for w in v:
                walk(w)
        elif isinstance(v, Mapping):
            for w in v.values():
                walk(w)
        elif hasattr(v, "detach") and hasattr(v, "shape"):
            out.append(v)

    walk(x)
    return out


def _rebuild(x: Any, arrays: list[Any]) -> Any:
    """``x`` with its tensor leaves replaced, in order, by tensors made from ``arrays``."""
    import torch

    it = iter(arrays)

    def walk(v: Any) -> Any:
        if isinstance(v, tuple):
            return tuple(walk(w) for w in v)
        if isinstance(v, list):
            return [walk(w) for w in v]
        if isinstance(v, Mapping):
            return {k: walk(w) for k, w in v.items()}
        if hasattr(v, "detach") and hasattr(v, "shape"):
            return torch.from_numpy(next(it).copy()).to(v.dtype)
        return v

    return walk(x)


def _torch_outputs(model: Any, example_inputs: Any, names: Sequence[str]) -> dict[str, Any]:
    """The live PyTorch outputs (eval mode, no grad) by ONNX output name; ValueError if they do not line up."""
    return _torch_outputs_named(model, example_inputs, names)[0]


def _torch_outputs_named(model: Any, example_inputs: Any, names: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The live PyTorch outputs by ONNX output name, and the model's own name of each output that has
    one (a dict key or namedtuple field, dotted when nested: ``{"onnx name": "heads.labels"}``)."""
    import torch

    from .export import _split_inputs

    # on copies: a model that changes its inputs in place must not change the test's tensors (nor,
    # through shared memory, the feeds ONNX Runtime gets next)
    args, kwargs = _split_inputs(_rebuild(example_inputs, _input_arrays(example_inputs)))
    with _eval_mode(model), torch.no_grad():
        out = model(*args, **kwargs)
    leaves = _leaves(out)
    if len(leaves) != len(names):
        raise ValueError(f"the model returns {len(leaves)} tensor(s) but the ONNX graph has {len(names)} output(s)")
    own = _leaf_names(out)
    return ({n: _array(t, f"output {n!r}") for n, t in zip(names, leaves)},
            {n: own[k] for k, n in enumerate(names) if own[k] and own[k] != n})


class _NoNumerics(Exception):
    """The numbers of this model cannot be checked on ONNX Runtime CPU (the message says why)."""


def _array(tensor: Any, what: str) -> Any:
    """A NumPy copy of a tensor (never sharing its memory); bfloat16, which NumPy and ONNX Runtime's
    CPU kernels lack, is _NoNumerics."""
    if str(tensor.dtype) == "torch.bfloat16":
        raise _NoNumerics(f"the model's {what} is bfloat16: ONNX Runtime's CPU provider, which runs the numeric "
                          "checks, has no bfloat16 kernels for models such as this one (and NumPy no bfloat16 "
                          "type), so its numbers cannot be checked here; check a float32 copy of the model for "
                          "the numbers, or switch the numeric checks off for this test (numerics=False). The "
                          "deployability verdict above does not depend on them")
    return tensor.detach().cpu().numpy().copy()


def _input_arrays(example_inputs: Any) -> list[Any]:
    """The tensor leaves of the example inputs as NumPy copies, taken before any run of the model."""
    return [_array(t, f"input {k}") for k, t in enumerate(_leaves(example_inputs))]


def _leaf_names(x: Any) -> list[Optional[str]]:
    """Per tensor leaf (the order of :func:`_leaves`), its path of dict keys and namedtuple fields
    (positions of plain tuples and lists in brackets); None when no key or field is on the path."""
    out: list[Optional[str]] = []

    def walk(v: Any, path: str, named: bool) -> None:
        if isinstance(v, Mapping):
            for k, w in v.items():
                walk(w, f"{path}.{k}" if path else str(k), True)
        elif isinstance(v, tuple) and hasattr(v, "_fields"):
            for f, w in zip(v._fields, v):
                walk(w, f"{path}.{f}" if path else f, True)
        elif isinstance(v, (list, tuple)):
            for k, w in enumerate(v):
                walk(w, f"{path}[{k}]", named)
        elif hasattr(v, "detach") and hasattr(v, "shape"):
            out.append(path if named else None)

    walk(x, "", False)
    return out


def _target_precision(test_budget: Any, target: str, table: Any, fallback: str) -> tuple[str, Optional[str]]:
    """(precision key, note) a target's numerics run at: the test budget's precision for it, else the
    table's default; the note says when a budget changes a target's default."""
    from .numerics import precision_key

    default = str((table.precision or {}).get("default") or fallback)
    if test_budget is None:
        return precision_key(default), None
    return test_budget.precision_for(target, default)


def _npu_shares(r: Any) -> tuple[float, Optional[float]]:
    """(share of nodes, share of MACs) on the NPU; MACs None when the partition does not know them."""
    p = r.partition
    if p is not None and getattr(p, "nodes_total", 0):
        macs = p.macs_npu / p.macs_total if getattr(p, "macs_total", 0) else None
        return p.nodes_npu / p.nodes_total, macs
    s = r.summary
    total = s.get("npu", 0) + s.get("cpu", 0) + s.get("unsupported", 0)
    return (s.get("npu", 0) / total if total else 1.0), None


def _deployment_budgets(state: _State, results: Sequence[Any], entry: dict[str, Any]) -> list[str]:
    """Each target's deployment budget (CPU-fallback nodes, NPU share by nodes and by MACs) of the release
    in force: part of the deployability verdict, whether or not numerics run. Adds ``budget`` to each
    target's JSON; returns the failure lines."""
    budgets = state.budgets
    if budgets is None:
        return []
    fail: list[str] = []
    for r, tj in zip(results, entry["targets"]):
        tb = budgets.for_target(state.release, r.target)
        if tb is None:
            continue
        node_share, mac_share = _npu_shares(r)
        tj["budget"] = tb.measure(len(r.fallbacks), node_share, mac_share)
        fail += [f"{r.target}: deployment budget exceeded: {p}" for p in tj["budget"]["problems"]]
    return fail


def _numerics(item: pytest.Item, state: _State, spec: CheckSpec, model: Any, example_inputs: Any, onnx_path: Path,
              graph: Any, results: Sequence[Any], tables: Sequence[Any], entry: dict[str, Any]) -> list[str]:
    """PyTorch vs ONNX Runtime (fp32), the targets' precision emulated, goldens and budgets.

    Fills ``entry["numerics"]`` and returns the failure lines (empty when everything passed)."""
    from .budget import report_entry
    from . import isolate
    from .emulate import diagnose, emulate, run_with_margins
    from .numerics import policy_for

    test_id = item.nodeid
    info: dict[str, Any] = {"enabled": True, "passed": True, "error": None, "notes": [], "release": None,
                            "budget_keys": [], "onnx_vs_pytorch": None, "emulation": [], "golden": None}
    entry["numerics"] = info
    fail: list[str] = []
    budgets = state.budgets
    release = state.release if budgets is not None else None
    info["release"] = release
    model_name = type(model).__name__
    test_budget = budgets.for_test(release, test_id, model_name) if budgets is not None else None
    if test_budget is not None:
        info["budget_keys"].append(test_budget.key)

    try:
        flat_inputs = _input_arrays(example_inputs)
        feeds = dict(zip(graph.inputs, flat_inputs)) if len(flat_inputs) == len(graph.inputs) else None
        if feeds is None:
            info["notes"].append(f"example inputs ({len(flat_inputs)} tensor(s)) do not line up with the ONNX "
                                 f"inputs ({len(graph.inputs)}): emulation on seeded random inputs, no PyTorch "
                                 "comparison")
        reference, own_names = None, {}
        if feeds is not None:
            try:
                reference, own_names = _torch_outputs_named(model, example_inputs, graph.outputs)
            except ValueError as exc:
                info["notes"].append(f"no PyTorch comparison: {exc}")
        # 1) the exported graph on ONNX Runtime CPU (fp32) vs PyTorch
        if reference is not None:
            from .numerics import compare_outputs

            # a model run in half precision is compared as fp16 (one ulp of fp16 is 1e-3 relative,
            # beyond every fp32 bound); its other outputs keep their own dtypes' exactness
            half = any(str(getattr(v, "dtype", "")) == "float16" for v in reference.values())
            ort_key = "fp16" if half else "fp32"
            if half:
                info["notes"].append("the model computes in float16: ONNX Runtime vs PyTorch is compared with "
                                     "the fp16 policy")
            # integer outputs are labels: the logits ONNX Runtime computes tell a near-tie from a flip
            onnx_out, margins = isolate.call("onnxruntime", run_with_margins, onnx_path, feeds)
            comp = compare_outputs(reference, onnx_out, policy_for(ort_key), margins=margins, model_names=own_names)
            info["onnx_vs_pytorch"] = comp.to_json()
            if not comp.passed:
                fail.append(f"ONNX export (ONNX Runtime CPU, {'float16 model' if half else 'fp32'}) vs PyTorch "
                            f"eager, {ort_key} policy:")
                fail += ["  " + line for line in comp.lines()]
        # 2) the target's precision, emulated
        done: dict[str, Any] = {}
        first_target: dict[str, str] = {}
        for r, table in zip(results, tables):
            key, note = _target_precision(test_budget, r.target, table, "float32")
            if note:  # a budget changing a target's default precision is said, in the reports and the terminal
                info["notes"].append(note)
                item.warn(pytest.PytestWarning(f"npu_check: {note}"))
            if key == "fp32":
                continue
            if key in done:
                info["emulation"].append({**done[key], "target": r.target})
                if not done[key]["passed"]:  # one emulation per precision: say which targets share its failure
                    fail.append(f"{r.target}: {key} emulation vs fp32: FAIL, the same emulation as "
                                f"{first_target[key]} above")
                continue
            first_target[key] = r.target
            policy = test_budget.policy_for(key) if test_budget is not None else policy_for(key)
            emu = isolate.call(f"onnxruntime ({key} emulation)", emulate, onnx_path, key, feeds, test_id=test_id,
                               calibration=[feeds] if feeds else None, policy=policy, model_names=own_names)
            ej_result = emu.to_json()
            ej_result.pop("seconds", None)  # reports stay identical across runs and processes
            ej: dict[str, Any] = {"target": r.target, "precision": key, "passed": emu.passed, "result": ej_result,
                                  "budget": report_entry(test_id, emu.comparison, test_budget)}
            done[key] = {k: v for k, v in ej.items() if k != "target"}
            info["emulation"].append(ej)
            if not emu.passed:
                where = f" (budget {test_budget.key!r}, release {test_budget.release})" if test_budget else ""
                fail.append(f"{r.target}: {key} emulation vs fp32, policy {emu.comparison.policy}{where}:")
                fail += ["  " + line for line in emu.lines()]
                try:
                    diag = isolate.call(f"onnxruntime ({key} layer diagnosis)", diagnose, onnx_path, key, feeds,
                                        test_id=test_id, calibration=[feeds] if feeds else None, policy=policy)
                    done[key]["diagnosis"] = diag.to_json()
                    info["emulation"][-1]["diagnosis"] = diag.to_json()
                    fail += ["  " + line for line in diag.lines()]
                except Exception as exc:  # the diagnosis is a help, never the verdict
                    fail.append(f"  (no layer diagnosis: {type(exc).__name__}: {exc})")
        # 3) stored goldens
        if state.golden_on(spec):
            fail += _golden_step(item, state, model, example_inputs, feeds, reference, graph, info)
    except _NoNumerics as exc:
        info["error"] = str(exc)
        fail.append(f"the numeric check could not run: {exc}")
    except Exception as exc:
        from .errors import NpuCheckError

        if not isinstance(exc, (NpuCheckError, ValueError, RuntimeError, OSError)):
            raise
        info["error"] = f"{type(exc).__name__}: {exc}"
        where = "" if str(onnx_path) in str(exc) else f" (model {onnx_path})"  # F1: which file ORT refused
        fail.append(f"the numeric check could not run: {info['error']}{where}")
    info["passed"] = not fail
    if not fail:
        return []
    return [f"numerics: {test_id} fails the numeric checks"] + fail


def _golden_step(item: pytest.Item, state: _State, model: Any, example_inputs: Any, feeds: Optional[dict],
                 reference: Optional[dict], graph: Any, info: dict[str, Any]) -> list[str]:
    from .golden import GoldenStore
    from .numerics import policy_for

    store = GoldenStore(state.golden_root, anchor=Path(item.config.rootpath), max_bytes=state.golden_max_bytes)
    test_id = item.nodeid
    policy = policy_for("fp32")
    if feeds is None or reference is None:
        info["golden"] = {"status": "error", "message": "goldens need example inputs and outputs that line up "
                                                       "with the ONNX graph"}
        return [f"golden: {info['golden']['message']}"]
    if item.config.getoption("npu_update_golden"):
        res = store.check(test_id, reference, policy, feeds, update=True)
    else:
        golden = store.load(test_id)
        if golden is not None and list(golden.inputs) == list(feeds) and all(
                (golden.inputs[n].shape, golden.inputs[n].dtype) == (feeds[n].shape, feeds[n].dtype) for n in feeds):
            # the same inputs but for their values (seeded or random): run the model on the stored ones
            inputs = dict(golden.inputs)
            outputs = _torch_outputs(model, _rebuild(example_inputs, [inputs[n] for n in graph.inputs]),
                                     graph.outputs)
        else:  # no golden, or inputs of other names, shapes or dtypes: a mismatch that says so
            inputs, outputs = feeds, reference
        res = store.check(test_id, outputs, policy, inputs)
    info["golden"] = res.to_json()
    return [] if res.passed else ["golden: " + line for line in res.lines()[:1]] + res.lines()[1:]


def _gate(item: pytest.Item, state: _State, graph: Any, results: Sequence[Any], entry: dict[str, Any]) -> bool:
    """Decide the test against the baseline: accepted fallbacks pass, any new one fails.

    Adds to each target's JSON the ``baseline`` verdict and the graph's ``edges`` (for the HTML
    picture), sets the entry status and records the JUnit properties.
    """
    from .baseline import fallbacks, match, refused
    from .report.junit import properties

    edges = _edges(graph, results)
    ok = True
    for r, tj in zip(results, entry["targets"]):
        m = match(state.baseline.for_pair(item.nodeid, r.target, entry.get("call", 1)), fallbacks(tj))
        # an update run records CPU fallbacks; an unsupported node (the build fails) it refuses
        blocking = refused(m.new) if state.updating else m.new
        over_budget = bool((tj.get("budget") or {}).get("problems"))
        passed = not r.model_issues and not blocking and not over_budget
        tj["baseline"] = {**m.to_json(), "passed": passed}
        if state.updating and blocking:
            tj["baseline"]["refused"] = [n["name"] for n in blocking]
        tj["edges"] = edges.get(r.target, [])
        ok = ok and passed
    entry["status"] = "passed" if ok else "failed"
    item.user_properties.extend(properties(entry))
    return ok


def _edges(graph: Any, results: Sequence[Any]) -> dict[str, list[list[int]]]:
    """Producer -> consumer edges of the main graph as [from, to] positions in each target's node list."""
    producer = {out: n.index for n in graph.nodes if not n.graph for out in n.outputs if out}
    pairs = sorted({(producer[i], n.index) for n in graph.nodes if not n.graph for i in n.inputs
                    if i in producer and producer[i] != n.index})
    out: dict[str, list[list[int]]] = {}
    for r in results:
        pos = {nr.index: k for k, nr in enumerate(r.nodes)}
        out[r.target] = [[pos[a], pos[b]] for a, b in pairs if a in pos and b in pos]
    return out


# The opset torch 2.13's exporters write by default; a target that accepts less gets what it accepts.
_EXPORTER_DEFAULT_OPSET = 20


def _target_opset(tables: Sequence[Any]) -> Optional[int]:
    """Export at the newest default-domain opset every target accepts (as a deployment would).

    None (the exporter's default) when every target accepts the exporter's default.
    """
    highs = [t.opsets["ai.onnx"][1] for t in tables if "ai.onnx" in t.opsets]
    if not highs or min(highs) >= _EXPORTER_DEFAULT_OPSET:
        return None
    return min(highs)


def _input_shapes(graph: Any, example_inputs: Any) -> dict[str, tuple[int, ...]]:
    """Example input shapes by ONNX input name (inputs are flattened in order by the exporters)."""
    flat: list[Any] = []

    def walk(x: Any) -> None:
        if isinstance(x, (list, tuple)):
            for v in x:
                walk(v)
        elif isinstance(x, dict):
            for v in x.values():
                walk(v)
        elif hasattr(x, "shape"):
            flat.append(tuple(int(d) for d in x.shape))

    walk(example_inputs)
    return dict(zip(graph.inputs, flat)) if len(flat) == len(graph.inputs) else {}


class _eval_mode:
    """Export as the model deploys (eval mode) and give it back as it was."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.flags: list[tuple[Any, bool]] = []

    def __enter__(self) -> None:
        modules = getattr(self.model, "modules", None)
        if callable(modules):
            self.flags = [(m, m.training) for m in modules()]
            self.model.eval()

    def __exit__(self, *exc: Any) -> None:
        for m, flag in self.flags:
            m.training = flag


def _failure_text(results: Sequence[Any], targets: Sequence[Mapping[str, Any]], state: _State,
                  budget_lines: Sequence[str] = ()) -> str:
    from .report.terminal import failure_text

    return failure_text(results, targets, state.baseline_path.name, budget_lines)


@pytest.fixture
def npu_check(request: pytest.FixtureRequest) -> Callable[..., NpuCheckOutcome]:
    """Export a model to ONNX and check it against the targets of the test's `npu_deployable` marker.

    ``npu_check(model, example_inputs, **overrides)`` fails the test with a per-operator report when
    any node would leave the NPU, and returns an :class:`NpuCheckOutcome` otherwise. Overrides:
    ``targets``, ``exporter``, ``opset``, ``dynamic_axes``, ``input_names``, ``output_names``.
    """
    item = request.node
    spec = item.stash.get(_SPEC, None)
    if spec is None:
        state = item.config.stash[_STATE]
        targets = state.default_targets()
        d = state.export_defaults()
        spec = CheckSpec(targets=targets, exporter=d["exporter"], opset=d["opset"], dynamic_axes=d["dynamic_axes"])

    def check(model: Any, example_inputs: Any, **overrides: Any) -> NpuCheckOutcome:
        if not (overrides.get("targets") or spec.targets):
            pytest.fail("npu_check: no target: mark the test with @pytest.mark.npu_deployable(targets=[...]), "
                        "or pass --npu-target / set the ini key npu_targets", pytrace=False)
        return _run_check(item, spec, model, example_inputs, **overrides)

    return check


def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Without the export cache every export goes to a fresh temporary directory: gone with its test."""
    import shutil

    for directory in item.stash.get(_TEMP_EXPORTS, []):
        shutil.rmtree(directory, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    """Marker-only form: after the test body passed, check the model from the test's fixtures."""
    result = yield
    spec = item.stash.get(_SPEC, None)
    if spec is None or item.stash.get(_CALLED, False):
        return result
    cfg = item.config
    model_name = cfg.getini("npu_model_fixture") or "model"
    inputs_name = cfg.getini("npu_inputs_fixture") or "example_inputs"
    values = []
    for name, key in ((model_name, "npu_model_fixture"), (inputs_name, "npu_inputs_fixture")):
        funcargs = getattr(item, "funcargs", {})
        if name in funcargs:
            values.append(funcargs[name])
            continue
        request = getattr(item, "_request", None)
        missing = request is None
        if not missing:
            try:
                values.append(request.getfixturevalue(name))
            except (pytest.FixtureLookupError, LookupError):
                missing = True
        if missing:  # failed outside the handler: no chained lookup error before the message
            item.stash[_ENTRY] = {"nodeid": item.nodeid, "status": "error", "targets": [], "export": None,
                                  "error": f"no fixture {name!r}"}
            if "npu_check" in getattr(item, "fixturenames", ()):
                item.stash[_ENTRY]["error"] = "requests npu_check but never calls it"
                pytest.fail(
                    f"@pytest.mark.{MARKER}: the test requests the npu_check fixture but never calls it, so nothing "
                    f"was checked: call npu_check(model, example_inputs) in the test (or provide fixtures "
                    f"{model_name!r} and {inputs_name!r} for the marker-only form; ini keys npu_model_fixture / "
                    "npu_inputs_fixture).", pytrace=False)
            pytest.fail(
                f"@pytest.mark.{MARKER}: nothing to check: the test neither calls the npu_check fixture nor has a "
                f"fixture named {name!r} (ini key {key}). Request npu_check, or provide fixtures "
                f"{model_name!r} and {inputs_name!r} (names set by ini keys npu_model_fixture / npu_inputs_fixture).",
                pytrace=False,
            )
    _run_check(item, spec, values[0], values[1])
    return result


# -- reporting ----------------------------------------------------------------------------------

@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Any:
    report = yield
    if call.when == "call":
        entry = item.stash.get(_ENTRY, None)
        if entry is None and report.failed and item.stash.get(_SPEC, None) is not None and call.excinfo is not None:
            # a marked test that failed before its check ran: the reports list it, not a passed run
            first = _exception_text(call.excinfo).splitlines()[0]
            entry = {"nodeid": item.nodeid, "status": "error", "export": None, "targets": [],
                     "error": f"the test failed before the NPU check ran: {first}"}
        if entry is not None:
            if entry["status"] == "error" and not entry.get("error") and call.excinfo is not None:
                entry["error"] = _exception_text(call.excinfo)  # the check stopped on one it did not foresee
            # plain JSON-able data: travels from xdist workers to the controller; one entry per npu_check call
            report.npucheck = item.stash.get(_ENTRIES, None) or [entry]
    return report


def _exception_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """"TypeError: message" of the exception a test raised (its type alone when it has no message)."""
    text = str(excinfo.value).strip()
    return f"{excinfo.typename}: {text}" if text else excinfo.typename


class _Reporter:
    """Collects per-test entries from reports and writes the run's files.

    Registered per config (the junitxml pattern): under xdist the controller receives every
    worker's reports, and only the controller writes files (reports and the baseline).
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.entries: list[dict[str, Any]] = []
        self.baseline_info: Optional[dict[str, Any]] = None
        self.budgets_info: Optional[dict[str, Any]] = None
        self.tightening: list[str] = []
        self.budget_base: Optional[dict[str, Any]] = None  # the commit the budgets file was compared with
        self.deselected = 0  # marked tests deselected on xdist workers
        self.written: list[str] = []  # report paths written at the end of the run
        self.report_errors: list[str] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        state = self.config.stash[_STATE]
        if state.baseline_path.exists():
            state.baseline  # an invalid baseline is a usage error before any test runs
        if state.budgets is not None:
            self.tightening, self.budget_base = _tightening_problems(state.budgets, self.config)

    def _budgets_step(self, session: pytest.Session) -> Optional[dict[str, Any]]:
        """Stale budget entries (keys used by any process) and loosenings against the committed file."""
        state = self.config.stash[_STATE]
        budgets = state.budgets
        if budgets is None:
            return None
        used = {k for e in self.entries for k in ((e.get("numerics") or {}).get("budget_keys") or [])}
        used |= {t["budget"]["key"] for e in self.entries for t in e.get("targets") or [] if t.get("budget")}
        numerics_ran = any((e.get("numerics") or {}).get("enabled") for e in self.entries)
        ran = any(e.get("targets") for e in self.entries)  # deployment budgets apply to every completed check
        partial = self._partial_run()
        stale = (budgets.stale(state.release, used, tests=numerics_ran, targets=True)
                 if ran and not partial else [])
        info = {"path": str(budgets.path), "release": state.release,
                "release_in_force": budgets.release_in_force(state.release), "stale": stale,
                "tightening_problems": list(self.tightening)}
        if self.budget_base is not None:
            info["base"] = self.budget_base
        if partial and ran:
            info["stale_not_checked"] = f"a partial run ({partial}): an entry unused here may be used by the rest"
        if self.tightening and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return info

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: a worker's count of deselected marked tests (the controller collects nothing)."""
        self.deselected += int((getattr(node, "workeroutput", None) or {}).get(_DESELECTED_OUTPUT, 0))

    def _partial_run(self) -> str:
        """Why this run is not the whole suite (a budgets entry it leaves unused may not be stale), or "".

        A selection (-k, -m, --deselect) is partial only when it left out a marked test (seen by every
        process that collected, xdist workers included): ``-m npu_deployable`` runs them all. --lf, --sw
        and test ids on the command line are partial by themselves. Paths narrower than the suite are
        not detected."""
        opt = self.config.option
        why = [flag for flag, on in (("--lf", getattr(opt, "lf", False)), ("--sw", getattr(opt, "stepwise", False)))
               if on]
        if any("::" in str(a) for a in self.config.args):
            why.append("test ids")
        deselected = self.deselected + self.config.stash.get(_DESELECTED, 0)
        if deselected:
            why.append(f"{deselected} marked test(s) deselected")
        return ", ".join(why)

    def _run_failures(self, session: pytest.Session) -> None:
        """What fails the run as a whole (a stale entry in strict mode, a loosened budget, a baseline
        that could not be updated) is reported as a failed item too: pytest counts it in its last line
        and lists it in the short summary, so the exit status and the last line agree."""
        from .report.text import clean

        info, binfo = self.baseline_info, self.budgets_info
        failures: list[tuple[str, str]] = []
        if info is not None and info.get("error"):
            failures.append((f"{info['path']}::update", f"npucheck baseline {info['path']}: {info['error']}"))
        if info is not None and info["stale"] and info["strict"]:
            lines = [f"npucheck baseline {info['path']}: {len(info['stale'])} stale entr"
                     f"{'y' if len(info['stale']) == 1 else 'ies'} (strict): the accepted fallback no longer "
                     "occurs: remove it, or run --npu-update-baseline"] + [f"  stale: {_entry_text(e)}" for e in info["stale"]]
            failures.append((f"{info['path']}::stale", "\n".join(lines)))
        if binfo is not None and binfo["tightening_problems"]:
            name = Path(binfo["path"]).name
            lines = [f"npucheck budgets {binfo['path']}: {len(binfo['tightening_problems'])} loosening(s) without "
                     f"approval (compared with {(binfo.get('base') or {}).get('label', 'HEAD')})"]
            lines += [f"  {clean(p, 500)}" for p in binfo["tightening_problems"]]
            failures.append((f"{name}::loosened", "\n".join(lines)))
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        for nodeid, text in failures:
            report = pytest.TestReport(nodeid, (nodeid.split("::")[0], None, nodeid), {}, "failed", text, "call")
            if terminal is not None:  # counted in the last line and listed with the failures, no progress mark
                terminal.stats.setdefault("failed", []).append(report)
            if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entries = getattr(report, "npucheck", None)
        if entries is not None and report.when == "call":
            self.entries += entries if isinstance(entries, list) else [entries]
        elif report.when == "???" and report.failed:  # pytest-xdist: the worker died while running the test
            if not any(e["nodeid"] == report.nodeid for e in self.entries):
                text = str(report.longrepr or "worker crashed").strip()
                self.entries.append({"nodeid": report.nodeid, "status": "error", "export": None, "targets": [],
                                     "error": f"{text}: the NPU check result is unknown"})

    def _baseline_step(self, session: pytest.Session) -> Optional[dict[str, Any]]:
        """Stale entries, and with --npu-update-baseline the new baseline (written here, by the controller only)."""
        state = self.config.stash[_STATE]
        if not self.entries and not state.updating:
            return None
        from . import baseline as bl

        base = state.baseline
        info: dict[str, Any] = {"path": state.baseline_path.name, "exists": base.exists, "updated": False,
                                "strict": state.strict, "entries": len(base.entries), "stale": [],
                                "added": [], "removed": []}
        if state.updating:
            from .jsonio import directory_lock, write_atomic

            from .errors import NpuCheckError

            try:
                with directory_lock(state.baseline_path):
                    # another run may have updated the file since this one read it: merge into what is there now
                    try:
                        base = bl.load(state.baseline_path)
                    except bl.BaselineError as exc:  # the file is left as it is, for its owner to repair
                        info["error"] = f"changed during the run and is no longer valid, so it was not updated: {exc}"
                        session.exitstatus = pytest.ExitCode.TESTS_FAILED
                        return info
                    upd = bl.updated(base, self.entries)
                    write_atomic(state.baseline_path, upd.baseline.dumps())
            except (OSError, NpuCheckError) as exc:  # disk full, a directory gone: the old file stays, reports go on
                info["error"] = f"could not be written, so it was not updated: {type(exc).__name__}: {exc}"
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
                return info
            info.update(updated=True, entries=len(upd.baseline.entries),
                        added=[e.to_json() for e in upd.added], removed=[e.to_json() for e in upd.removed],
                        refused=[e.to_json() for e in upd.refused])
        else:
            info["stale"] = [e.to_json() for e in bl.stale(base, self.entries)]
            if info["stale"] and state.strict and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
        return info

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.baseline_info = self._baseline_step(session)
        self.budgets_info = self._budgets_step(session)
        self._run_failures(session)
        reports = self.config.getoption("npu_report") or []
        if not reports:
            return
        from .jsonio import dumps, write_atomic
        from .report.jsonreport import run_document

        doc = run_document(self.entries)
        if exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail:
            doc["interrupted"] = True  # -x, --maxfail, Ctrl-C: the tests listed are those that ran
        if self.baseline_info is not None:
            doc["baseline"] = self.baseline_info
        if self.budgets_info is not None:
            doc["budgets"] = self.budgets_info
        from .errors import NpuCheckError

        for value in reports:
            fmt, path = _report_spec(value)
            try:
                if fmt == "json":
                    write_atomic(Path(path), dumps(doc))
                elif fmt == "md":
                    from .report.markdown import render as render_md

                    write_atomic(Path(path), render_md(doc, [p for f, p in map(_report_spec, reports) if f != "md"]))
                elif fmt == "html":
                    from .report.html import render as render_html

                    write_atomic(Path(path), render_html(doc))
            except (NpuCheckError, OSError) as exc:  # the other reports are still written
                self.report_errors.append(f"--npu-report={value}: not written: {exc}")
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
                continue
            self.written.append(path)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        from .report.terminal import write_summary

        write_summary(terminalreporter, self.entries, self.baseline_info, self.budgets_info, self.written,
                      self.report_errors, quiet=config.getoption("verbose") < 0)


def _tightening_problems(budgets: Any, config: pytest.Config) -> tuple[list[str], Optional[dict[str, Any]]]:
    """Loosenings of the budgets file against its version at the pull request's base
    (``gitbase.find_base``: --npu-budget-base, the CI's variables, else HEAD with a note), and the base.

    Outside a git work tree, or without git, only the rules within the file itself are checked."""
    from .budget import check_tightening
    from .gitbase import BaseError, committed_text, find_base
    from .jsonio import loads_strict

    path = Path(budgets.path) if budgets.path is not None else None
    if path is None:
        return check_tightening(None, budgets.doc), None
    try:
        base = find_base(path.parent, config.getoption("npu_budget_base"))
    except BaseError as exc:
        raise pytest.UsageError(str(exc)) from None
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


def _entry_text(e: Mapping[str, Any]) -> str:
    from .report.terminal import entry_text

    return entry_text(e)


__all__ = ["npu_check", "NpuCheckOutcome", "CheckSpec"]
