"""The run's settings, resolved and validated once (at pytest_configure) into frozen values.

Options and ini keys come in through two callables (``option(name)``, ``ini(name)``), so this module
imports no pytest: every bad value is a :class:`~pytest_npucheck.errors.UsageError` whose text names
the option or ini key, and the plugin turns it into a pytest usage error. Also here: what one marked
test asks for (:class:`CheckSpec`, parsed from its marker) and the checks of the files a run will
write (reports, the updated baseline), made before any test runs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from .. import BASELINE_NAME, arguments
from ..errors import NpuCheckError, UsageError

REPORT_FORMATS = ("json", "md", "html")
ORACLE_MODES = ("off", "report", "strict")
#: the export cache's directory when the ini key npu_export_cache_dir is not set (relative to where pytest runs)
EXPORT_CACHE_ENV = "NPUCHECK_EXPORT_CACHE_DIR"
BOOL_INI = ("npu_baseline_strict", "npu_numerics", "npu_golden", "npu_isolate", "npu_seed_rng",
            "npu_worker_fast_exit")


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


@dataclass(frozen=True)
class Settings:
    """Every option and ini key of pytest-npucheck, resolved (option, else ini key, else default)."""

    invocation_dir: Path
    rootpath: Path
    is_worker: bool  # an xdist worker: writes no shared file
    baseline_path: Path
    updating: bool  # --npu-update-baseline
    strict: bool  # stale baseline entries fail the run
    table_dirs: tuple[str, ...]
    numerics_off: bool  # --npu-no-numerics
    numerics_default: bool  # ini npu_numerics
    oracle_mode: str  # off, report or strict
    golden_default: bool  # ini npu_golden
    golden_root: Path
    golden_max_bytes: Optional[int]  # None: golden.DEFAULT_MAX_MB
    update_golden: bool
    budgets_path: Optional[Path]
    budget_base: Optional[str]  # --npu-budget-base
    release: str  # the release whose budgets apply
    release_where: str  # where the release came from, for its error message
    default_targets: tuple[str, ...]
    exporter: str
    opset: Optional[int]
    dynamic_axes: Optional[Mapping[str, Mapping[int, str]]]
    export_cache: bool  # not --npu-no-export-cache
    export_cache_dir: Optional[Path]  # ini key npu_export_cache_dir; None: pytest's cache directory
    keep_onnx_dir: Optional[Path]
    reports: tuple[tuple[str, str, str], ...]  # (option value, format, path) of each --npu-report
    seed_rng: bool
    model_fixture: str
    inputs_fixture: str
    isolate: bool
    timeout: Optional[float]
    memory_mb: Optional[int]
    worker_fast_exit: bool = True  # ini npu_worker_fast_exit: an xdist worker ends without the interpreter's teardown

    def numerics_on(self, spec: CheckSpec) -> bool:
        if self.numerics_off:
            return False
        if spec.numerics is not None:
            return bool(spec.numerics)
        return self.numerics_default

    def golden_on(self, spec: CheckSpec) -> bool:
        return bool(spec.golden) if spec.golden is not None else self.golden_default

    def default_spec(self) -> CheckSpec:
        """The spec of a test that calls npu_check without the marker."""
        return CheckSpec(targets=self.default_targets, exporter=self.exporter, opset=self.opset,
                         dynamic_axes=self.dynamic_axes)

    def checked_release(self) -> str:
        """The release, read as a version (the budgets are matched against it), or a usage error
        naming where it came from."""
        from ..budget import BudgetError, parse_version

        try:
            parse_version(self.release)
        except BudgetError as exc:
            raise UsageError(f"{self.release_where}: {exc}; budgets need a release such as 1.2.0") from None
        return self.release


def oracle_mode(value: str) -> str:
    """off, report or strict (true/on/yes/1 mean report; false/off/no/0/empty mean off)."""
    v = str(value).strip().lower()
    v = {"true": "report", "on": "report", "1": "report", "yes": "report", "false": "off", "0": "off",
         "no": "off", "": "off"}.get(v, v)
    if v not in ORACLE_MODES:
        import argparse

        raise argparse.ArgumentTypeError(f"oracle mode {value!r}: expected one of {', '.join(ORACLE_MODES)}")
    return v


def report_spec(value: str) -> tuple[str, str]:
    fmt, sep, path = value.partition(":")
    if not sep or not path or fmt not in REPORT_FORMATS:
        raise UsageError(f"--npu-report={value!r}: expected FORMAT:PATH with FORMAT one of "
                         f"{', '.join(REPORT_FORMATS)}")
    return fmt, path


def project_version(rootdir: Path) -> str:
    """The version of the project under test (pyproject's static [project] version), else the plugin's."""
    try:
        with open(rootdir / "pyproject.toml", "rb") as fh:  # no pyproject: no TOML parser to import
            import tomllib

            version = tomllib.load(fh).get("project", {}).get("version")
        if isinstance(version, str) and version.strip():
            return version.strip()
    except (OSError, ValueError, ImportError):
        pass
    from .. import __version__

    return __version__


def json_loads(text: str, where: str) -> Any:
    from ..jsonio import loads_strict

    try:
        return loads_strict(text)
    except ValueError as exc:
        raise UsageError(f"{where}: invalid JSON: {exc}") from None


def resolve(option: Callable[[str], Any], ini: Callable[[str], Any], *, invocation_dir: Path, rootpath: Path,
            inipath: Optional[Path], is_worker: bool) -> Settings:
    """The settings of a run from its options and ini keys; a UsageError naming the first bad one."""
    for key in BOOL_INI:
        try:
            ini(key)
        except (ValueError, UsageError) as exc:  # pytest 9 raises UsageError without the key
            raise UsageError(f"ini key {key}: {exc} (expected true or false)") from None
    invocation_dir, rootpath = Path(invocation_dir), Path(rootpath)

    opt = option("npu_oracle")
    if opt is not None:
        mode = str(opt)
    else:
        import argparse

        try:
            mode = oracle_mode(str(ini("npu_oracle") or "off"))
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"ini key npu_oracle: {exc}") from None

    opt = option("npu_golden_max_mb")
    where, value = ("--npu-golden-max-mb", opt) if opt is not None else (
        "ini key npu_golden_max_mb", str(ini("npu_golden_max_mb") or "").strip())
    golden_max: Optional[int] = None
    if value not in (None, ""):
        try:
            mb = int(str(value).strip())
        except ValueError:
            mb = 0
        if mb <= 0:
            raise UsageError(f"{where}: expected a whole number of MiB greater than 0, got {value!r}")
        golden_max = mb << 20

    opt = option("npu_baseline")
    ini_paths = ini("npu_baseline")
    baseline_path = (invocation_dir / opt if opt else Path(ini_paths[0]) if ini_paths
                     else rootpath / BASELINE_NAME)
    strict_opt = option("npu_baseline_strict")
    golden_dir = ini("npu_golden_dir")

    opt = option("npu_budgets")
    ini_paths = ini("npu_budgets")
    if opt:
        budgets_path: Optional[Path] = invocation_dir / opt
    elif ini_paths:
        budgets_path = Path(ini_paths[0])
    else:
        default = rootpath / "npu-budgets.json"
        budgets_path = default if default.exists() else None

    release = option("npu_release") or str(ini("npu_release") or "").strip()
    if option("npu_release"):
        release_where = "--npu-release"
    elif str(ini("npu_release") or "").strip():
        release_where = "ini key npu_release"
    else:
        release_where = f"the project's version ({rootpath})"

    reports = tuple((value, *report_spec(value)) for value in option("npu_report") or [])

    opt = option("npu_keep_onnx")
    keep_ini = str(ini("npu_keep_onnx") or "").strip()
    keep_dir = (invocation_dir / opt if opt else
                Path(inipath.parent if inipath else rootpath) / keep_ini if keep_ini else None)
    # the export cache's directory: the ini key, else the environment (a CI job's setting), else pytest's cache
    cache_ini = str(ini("npu_export_cache_dir") or "").strip()
    cache_env = os.environ.get(EXPORT_CACHE_ENV, "").strip()
    cache_dir = (Path(inipath.parent if inipath else rootpath) / cache_ini if cache_ini else
                 invocation_dir / cache_env if cache_env else None)

    # the export defaults: parsed as the marker's arguments are
    opset_opt = option("npu_opset")
    opset_ini = str(ini("npu_opset") or "").strip()
    axes_text = str(ini("npu_dynamic_axes") or "").strip()
    exporter = arguments.exporter(option("npu_exporter") or ini("npu_exporter") or "dynamo", "ini key npu_exporter")
    if opset_opt is not None:
        opset = arguments.opset(opset_opt, "--npu-opset")
    elif opset_ini:
        opset = arguments.opset(int(opset_ini) if opset_ini.lstrip("-").isdigit() else opset_ini,
                                "ini key npu_opset")
    else:
        opset = None
    axes = arguments.dynamic_axes(json_loads(axes_text, "ini key npu_dynamic_axes"),
                                  "ini key npu_dynamic_axes") if axes_text else None

    # isolation of exports, shape inference and ONNX Runtime (isolate.py)
    from .. import isolate

    def pick(name: str) -> Any:
        value = option(name)
        return value if value is not None else (ini(name) or None)

    try:
        timeout = pick("npu_timeout")
        timeout = isolate.DEFAULT_TIMEOUT if timeout is None else isolate.parse_timeout(timeout, "npu_timeout")
        memory = pick("npu_memory_limit")
        if memory is not None:
            try:
                memory = int(str(memory).strip())
            except ValueError:
                raise NpuCheckError(f"npu_memory_limit: expected a whole number of MiB, got {memory!r}") from None
            if memory < 0:
                raise NpuCheckError(f"npu_memory_limit: expected 0 or more MiB, got {memory}")
    except NpuCheckError as exc:
        raise UsageError(str(exc)) from None

    return Settings(
        invocation_dir=invocation_dir, rootpath=rootpath, is_worker=is_worker,
        baseline_path=baseline_path, updating=bool(option("npu_update_baseline")),
        strict=bool(strict_opt) if strict_opt is not None else bool(ini("npu_baseline_strict")),
        table_dirs=tuple(str(p) for p in ini("npu_tables")) + tuple(option("npu_tables") or ()),
        numerics_off=bool(option("npu_no_numerics")), numerics_default=bool(ini("npu_numerics")),
        oracle_mode=mode, golden_default=bool(ini("npu_golden")),
        golden_root=Path(golden_dir[0]) if golden_dir else rootpath / "npu_goldens",
        golden_max_bytes=golden_max, update_golden=bool(option("npu_update_golden")),
        budgets_path=budgets_path, budget_base=option("npu_budget_base"),
        release=release or project_version(rootpath), release_where=release_where,
        default_targets=tuple(option("npu_target") or ()) or tuple(ini("npu_targets") or ()),
        exporter=exporter, opset=opset, dynamic_axes=axes,
        export_cache=not option("npu_no_export_cache"), export_cache_dir=cache_dir, keep_onnx_dir=keep_dir,
        reports=reports,
        seed_rng=bool(ini("npu_seed_rng")), model_fixture=ini("npu_model_fixture") or "model",
        inputs_fixture=ini("npu_inputs_fixture") or "example_inputs",
        isolate=not option("npu_no_isolate") and bool(ini("npu_isolate")), timeout=timeout, memory_mb=memory,
        worker_fast_exit=bool(ini("npu_worker_fast_exit")),
    )


# -- the files a run writes, checked before any test runs -----------------------------------------

def check_writable(label: str, path: Path, only: str) -> None:
    """A file this run will write (a report, the updated baseline) can be: a usage error now, naming
    ``label``, rather than a failure after the whole run; ``only`` says what may be written."""
    from ..jsonio import special_file

    if path.is_dir():
        raise UsageError(f"{label}: {path} is a directory")
    kind = special_file(path, follow=True)
    if kind is not None:  # a device or a FIFO would be replaced by a regular file (/dev/null as root)
        raise UsageError(f"{label}: {path} is {kind}, not a regular file; {only}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent  # write_atomic creates missing directories below the first existing one
    if not parent.is_dir():
        raise UsageError(f"{label}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{label}: directory {parent} is not writable")


def check_report_target(value: str, path: Path, settings: Settings, seen: dict[Path, str]) -> None:
    """A report never overwrites another report of this run, the baseline or a golden, and is not
    written through a symbolic link (checked now, not when the run is over)."""
    real = Path(os.path.realpath(path))
    if path.is_symlink():
        raise UsageError(f"--npu-report={value!r}: {path} is a symbolic link (to {real}); reports are not "
                         "written through links")
    if real in seen:
        raise UsageError(f"--npu-report={value!r}: {path} is also the path of --npu-report={seen[real]!r}")
    seen[real] = value
    if real == Path(os.path.realpath(settings.baseline_path)):
        raise UsageError(f"--npu-report={value!r}: {path} is the baseline file; the report would replace it")
    golden = Path(os.path.realpath(settings.golden_root))
    if real == golden or golden in real.parents:
        raise UsageError(f"--npu-report={value!r}: {path} is inside the golden directory {settings.golden_root}")
    budgets = settings.budgets_path
    if budgets is not None and real == Path(os.path.realpath(budgets)):
        raise UsageError(f"--npu-report={value!r}: {path} is the budgets file; the report would replace it")


def check_outputs(settings: Settings) -> None:
    """The controller's files: every report (F3) and, with --npu-update-baseline, the baseline can be
    written where asked; a usage error naming the option otherwise."""
    seen: dict[Path, str] = {}
    for value, _, report_path in settings.reports:
        path = settings.invocation_dir / report_path
        check_writable(f"--npu-report={value!r}", path, "reports are only written to regular files or new paths")
        check_report_target(value, path, settings, seen)


def check_baseline_output(settings: Settings) -> None:
    if settings.updating and settings.baseline_path.is_symlink():
        raise UsageError(f"--npu-update-baseline: {settings.baseline_path} is a symbolic link; the baseline "
                         "is not written through links")
    if settings.updating:
        check_writable("--npu-update-baseline", settings.baseline_path,
                       "the baseline is only written to a regular file or a new path")


def spec_for(nodeid: str, marker: str, args: Sequence[Any], kwargs: Mapping[str, Any], settings: Settings) -> CheckSpec:
    """The spec of one marked test from its marker's arguments and the run's defaults."""
    where = f"{nodeid}: @pytest.mark.{marker}"
    kwargs = dict(kwargs)
    if args:
        if "targets" in kwargs:
            raise UsageError(f"{where}: give targets positionally or as targets=, not both")
        kwargs["targets"] = list(args)
    given = arguments.parse(kwargs, where)
    targets = given.get("targets") or settings.default_targets
    if not targets:
        raise UsageError(f"{where}: no target: name one in the marker (targets=[...]), "
                         "with --npu-target, or with the ini key npu_targets")
    return CheckSpec(targets=targets, exporter=given.get("exporter") or settings.exporter,
                     opset=given["opset"] if "opset" in given else settings.opset,
                     dynamic_axes=given["dynamic_axes"] if "dynamic_axes" in given else settings.dynamic_axes,
                     input_names=given.get("input_names"), output_names=given.get("output_names"),
                     numerics=given.get("numerics"), golden=given.get("golden"))


__all__ = ["CheckSpec", "Settings", "resolve", "oracle_mode", "report_spec", "project_version", "spec_for",
           "check_outputs", "check_baseline_output", "check_writable", "check_report_target"]
