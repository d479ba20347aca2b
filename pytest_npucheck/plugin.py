"""pytest glue: options, ini keys, the ``npu_deployable`` marker, the ``npu_check`` fixture and hooks.

The check itself lives in ``engine/`` (no pytest there): settings are resolved once at configure
(``engine.settings``), each ``npu_check`` call runs ``engine.model_check.run_check`` on a frozen run
context, and the controller's ``reporter.Reporter`` takes the run-level decisions and writes the
reports. Imported by every pytest run in the environment, so it imports nothing heavy at module
level: torch, onnx, onnxruntime, numpy and jsonschema load only when a check runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import pytest

from .arguments import EXPORTERS as _EXPORTERS  # the marker's and npu_check's arguments (no heavy import)
from .engine.entry import CheckEntry, NpuCheckOutcome
from .engine.settings import CheckSpec, Settings, oracle_mode
from .errors import UsageError
from .reporter import MARKED_OUTPUT as _MARKED_OUTPUT, USAGE_ERROR_OUTPUT as _USAGE_ERROR_OUTPUT, Reporter, marked_ids

MARKER = "npu_deployable"


# -- options ------------------------------------------------------------------------------------

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
    group.addoption("--npu-oracle", nargs="?", const="report", default=None, type=oracle_mode,
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
    parser.addini("npu_export_cache_dir", "cache exports and their graph facts in this directory (relative to the "
                  "ini file's directory; shared by runs, processes and xdist workers) instead of pytest's cache "
                  "directory; also used when the cache provider is off (-p no:cacheprovider); default: the environment "
                  "variable NPUCHECK_EXPORT_CACHE_DIR", default="")
    parser.addini("npu_isolate", "run exports, shape inference and ONNX Runtime in child processes", type="bool",
                  default=True)
    parser.addini("npu_worker_fast_exit", "a pytest-xdist worker that ran marked tests ends, once its exit functions "
                  "ran, without the interpreter's teardown (torch's: ~0.6 CPU-s a worker, which the controller waits "
                  "for)", type="bool", default=True)
    parser.addini("npu_seed_rng", "seed Python's, NumPy's and torch's global RNGs from the test id before each "
                  "marked test, so random weights and inputs are the same in every run and under xdist",
                  type="bool", default=True)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """In a pytest-xdist worker, before any conftest or test module imports torch: OpenMP threads
    that wait without spinning (``xdist_workers``: two workers on two cores otherwise burn CPU
    spinning on each other; the results are the same)."""
    import os

    from .xdist_workers import worker_environment

    os.environ.update(worker_environment(os.environ))


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> Any:
    """In a pytest-xdist worker that ran marked tests: once pytest is done with the session (the
    controller has the worker's results, unconfigure and its cleanups ran), end the process after its
    exit functions, without tearing torch, ONNX and the checks' objects down (``xdist_workers``)."""
    status = yield
    settings = config.stash.get(_SETTINGS, None)
    if settings is not None and settings.is_worker and settings.worker_fast_exit \
            and marked_ids(config)["selected"]:
        from .xdist_workers import end_worker

        end_worker()
    return status


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(targets=None, exporter=None, opset=None, dynamic_axes=None, input_names=None, output_names=None, "
        "numerics=None, golden=None): "
        "check that the model under test stays on the NPU of each target (pytest-npucheck)",
    )
    from .engine import settings as st

    def ini(name: str) -> Any:
        try:
            return config.getini(name)
        except pytest.UsageError as exc:  # pytest 9: a bad bool value (without the key's name)
            raise UsageError(str(exc)) from None

    worker = hasattr(config, "workerinput")  # xdist workers send their reports to the controller
    try:
        settings = st.resolve(config.getoption, ini, invocation_dir=Path(config.invocation_params.dir),
                              rootpath=Path(config.rootpath), inipath=config.inipath, is_worker=worker)
        if not worker:
            st.check_outputs(settings)
        files = _Files(settings)
        if files.budgets is not None:
            settings.checked_release()  # a release no budget can be matched against is a usage error now
        if not worker:
            st.check_baseline_output(settings)
    except UsageError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[_SETTINGS] = settings
    config.stash[_FILES] = files
    from . import isolate

    config.stash[_ISOLATE_BEFORE] = isolate.configure(enabled=settings.isolate and isolate.env_enabled(),
                                                      timeout=settings.timeout, memory_mb=settings.memory_mb)
    if not worker:
        config.pluginmanager.register(Reporter(config, settings, files), "npucheck-reporter")


def pytest_unconfigure(config: pytest.Config) -> None:
    before = config.stash.get(_ISOLATE_BEFORE, None)
    if before is not None:
        from . import isolate

        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


# -- the run's files ----------------------------------------------------------------------------

class _Files:
    """The files a run reads: the budgets (at configure), the support tables and the baseline (on first
    use, once). Each problem is a pytest usage error naming the file."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._catalog: Any = None
        self._baseline: Any = None
        self.budgets: Any = None
        path = settings.budgets_path
        if path is not None:
            from .budget import load_budgets
            from .errors import NpuCheckError

            if not path.exists():
                raise pytest.UsageError(f"npucheck budgets: {path} does not exist")
            try:
                self.budgets = load_budgets(path)
            except (NpuCheckError, ValueError, OSError) as exc:
                raise pytest.UsageError(f"npucheck budgets: {exc}") from None

    def catalog(self) -> Any:
        if self._catalog is None:
            from .errors import NpuCheckError
            from .tables import Catalog

            try:
                self._catalog = Catalog.discover(list(self.settings.table_dirs))
            except NpuCheckError as exc:
                raise pytest.UsageError(str(exc)) from None
        return self._catalog

    def baseline(self) -> Any:
        """The accepted fallbacks (read by every process; only the controller writes the file)."""
        if self._baseline is None:
            from .baseline import BaselineError, load

            try:
                self._baseline = load(self.settings.baseline_path)
            except BaselineError as exc:
                raise pytest.UsageError(f"npucheck baseline: {exc}") from None
        return self._baseline


_SETTINGS = pytest.StashKey[Settings]()
_FILES = pytest.StashKey[_Files]()
_SPEC = pytest.StashKey[CheckSpec]()
_ENTRY = pytest.StashKey[CheckEntry]()  # the entry of the test's current npu_check call
_ENTRIES = pytest.StashKey[list]()  # the entries of all its calls (call 1 has no number)
_CALLED = pytest.StashKey[bool]()
_TEMP_EXPORTS = pytest.StashKey[list]()  # --npu-no-export-cache: directories to remove when the test ends
_ISOLATE_BEFORE = pytest.StashKey[Any]()


# -- collection ---------------------------------------------------------------------------------

def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parse every marker and resolve and validate every table before any test runs.

    Under pytest-xdist the workers collect: a worker's usage error goes to the controller in its
    output, and the controller raises it (``Reporter.pytest_testnodedown``), so that ``-n 2`` shows the
    message and exits 4 as a plain run does (xdist alone reports an INTERNALERROR without it)."""
    try:
        _parse_marked(config, items)
    except pytest.UsageError as exc:
        workeroutput = getattr(config, "workeroutput", None)
        if workeroutput is not None:
            workeroutput[_USAGE_ERROR_OUTPUT] = [str(a) for a in exc.args]
        raise


def _parse_marked(config: pytest.Config, items: list[pytest.Item]) -> None:
    settings, files = config.stash[_SETTINGS], config.stash[_FILES]
    marked = [(item, item.get_closest_marker(MARKER)) for item in items]
    marked = [(i, m) for i, m in marked if m is not None]
    if not marked:
        return
    from .engine.settings import spec_for
    from .errors import NpuCheckError

    files.baseline()  # an invalid baseline stops the run before any test
    toolchains: dict[str, str] = {}  # toolchain -> first target naming it
    for item, mark in marked:
        try:
            spec = spec_for(item.nodeid, MARKER, mark.args, mark.kwargs, settings)
        except UsageError as exc:
            raise pytest.UsageError(str(exc)) from None
        try:
            for target in spec.targets:
                toolchains.setdefault(files.catalog().table(target).toolchain, target)
        except NpuCheckError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[_SPEC] = spec
    if settings.oracle_mode == "strict":
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
    """Record deselected marked tests: a selection that leaves none out (``-m npu_deployable``) is not a
    partial run for the budgets' stale check. Each process records what it collected; the controller
    takes the union of the ids (every xdist worker deselects the same tests)."""
    marked = [i for i in items if getattr(i, "get_closest_marker", None) and i.get_closest_marker(MARKER)]
    if marked:
        marked_ids(marked[0].config)["deselected"].update(i.nodeid for i in marked)


def pytest_collection_finish(session: pytest.Session) -> None:
    """The marked tests this process selected (a shard report lists them for ``npucheck merge``)."""
    marked_ids(session.config)["selected"].update(i.nodeid for i in session.items if i.get_closest_marker(MARKER))


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller reads the ids at pytest_testnodedown
        workeroutput[_MARKED_OUTPUT] = {k: sorted(v) for k, v in marked_ids(session.config).items()}


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
    if item.stash.get(_SPEC, None) is None or not item.config.stash[_SETTINGS].seed_rng:
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

def _run_check(item: pytest.Item, spec: CheckSpec, model: Any, example_inputs: Any, **overrides: Any) -> NpuCheckOutcome:
    """One npu_check call: the engine's check on a context built from the test item; its failure
    fails the test, its warnings and JUnit properties go on the test."""
    from .engine.context import RunContext
    from .engine.model_check import CheckFailed, run_check
    from .report.terminal import progress

    config = item.config
    settings, files = config.stash[_SETTINGS], config.stash[_FILES]
    calls = item.stash.setdefault(_ENTRIES, [])  # every call of the test is recorded, keyed by its number
    entry = CheckEntry(nodeid=item.nodeid, call=len(calls) + 1 if calls else None)
    calls.append(entry)
    item.stash[_ENTRY] = entry
    item.stash[_CALLED] = True
    ctx = RunContext(settings=settings, spec=spec, test_id=item.nodeid, call=entry.call, catalog=files.catalog,
                     baseline=files.baseline, budgets=files.budgets, cache_dir=_export_cache_dir(config, settings),
                     temp_exports=item.stash.setdefault(_TEMP_EXPORTS, []),
                     warn=lambda text: item.warn(pytest.PytestWarning(text)),
                     progress=lambda what: progress(config, what))
    try:
        run = run_check(ctx, entry, model, example_inputs, overrides)
    except CheckFailed as exc:
        failure: Optional[str] = str(exc)
    else:
        item.user_properties.extend(run.properties)
        failure = run.failure
    if failure is not None:  # outside the handler: pytest would print the exception it handles first
        pytest.fail(failure, pytrace=False)
    return run.outcome


def _export_cache_dir(config: pytest.Config, settings: Settings) -> Optional[Path]:
    """Where exports are cached: the ini key npu_export_cache_dir, else pytest's cache directory
    (``.pytest_cache/d/npucheck-exports``); None (a fresh temporary directory per export) with
    --npu-no-export-cache, or when the cache provider is off and no directory is set."""
    if not settings.export_cache:
        return None
    if settings.export_cache_dir is not None:
        return settings.export_cache_dir
    cache = getattr(config, "cache", None)
    return Path(cache.mkdir("npucheck-exports")) if cache is not None else None


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
        spec = item.config.stash[_SETTINGS].default_spec()

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
    settings = item.config.stash[_SETTINGS]
    model_name, inputs_name = settings.model_fixture, settings.inputs_fixture
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
            if "npu_check" in getattr(item, "fixturenames", ()):
                item.stash[_ENTRY] = CheckEntry.errored(item.nodeid, "requests npu_check but never calls it")
                pytest.fail(
                    f"@pytest.mark.{MARKER}: the test requests the npu_check fixture but never calls it, so nothing "
                    f"was checked: call npu_check(model, example_inputs) in the test (or provide fixtures "
                    f"{model_name!r} and {inputs_name!r} for the marker-only form; ini keys npu_model_fixture / "
                    "npu_inputs_fixture).", pytrace=False)
            item.stash[_ENTRY] = CheckEntry.errored(item.nodeid, f"no fixture {name!r}")
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
            entry = CheckEntry.errored(item.nodeid, f"the test failed before the NPU check ran: {first}")
        if entry is not None:
            if entry.status == "error" and not entry.error and call.excinfo is not None:
                entry.error = _exception_text(call.excinfo)  # the check stopped on one it did not foresee
            # plain JSON-able data: travels from xdist workers to the controller; one entry per npu_check call
            report.npucheck = [e.to_json() for e in item.stash.get(_ENTRIES, None) or [entry]]
    return report


def _exception_text(excinfo: pytest.ExceptionInfo[BaseException]) -> str:
    """"TypeError: message" of the exception a test raised (its type alone when it has no message)."""
    text = str(excinfo.value).strip()
    return f"{excinfo.typename}: {text}" if text else excinfo.typename


__all__ = ["npu_check", "NpuCheckOutcome", "CheckSpec"]
