"""pytest glue: options, ini keys, the ``npu_deployable`` marker, the ``npu_check`` fixture and reports.

Imported by every pytest run in the environment, so it imports nothing heavy at module level:
torch, onnx, onnxruntime, numpy and jsonschema load only when a check runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

import pytest

MARKER = "npu_deployable"
_MARKER_KWARGS = frozenset({"targets", "exporter", "opset", "dynamic_axes", "input_names", "output_names"})
_EXPORTERS = ("dynamo", "torchscript")


# -- options ------------------------------------------------------------------------------------

def _report_spec(value: str) -> tuple[str, str]:
    fmt, sep, path = value.partition(":")
    if not sep or not path or fmt not in ("json",):
        raise pytest.UsageError(f"--npu-report={value!r}: expected FORMAT:PATH with FORMAT json")
    return fmt, path


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("npucheck", "NPU deployability checks (pytest-npucheck)")
    group.addoption("--npu-target", action="append", default=[], metavar="TOOLCHAIN[@VERSION][/SOC]",
                    help="target for marked tests whose marker names none (repeatable), e.g. rknn@2.5.0/rk3588")
    group.addoption("--npu-report", action="append", default=[], metavar="FORMAT:PATH",
                    help="write a report for the whole run, e.g. json:npucheck.json")
    group.addoption("--npu-tables", action="append", default=[], metavar="DIR",
                    help="extra support-table directory (overrides bundled tables of the same target)")
    group.addoption("--npu-exporter", choices=_EXPORTERS, default=None,
                    help="ONNX exporter: dynamo (torch.export-based, default) or torchscript")
    group.addoption("--npu-opset", type=int, default=None, metavar="N", help="ONNX opset to export with")
    group.addoption("--npu-no-export-cache", action="store_true", default=False,
                    help="export every model afresh instead of reusing cached exports")
    parser.addini("npu_targets", "targets for marked tests whose marker names none", type="linelist", default=[])
    parser.addini("npu_model_fixture", "fixture holding the model in marker-only tests", default="model")
    parser.addini("npu_inputs_fixture", "fixture holding the example inputs in marker-only tests", default="example_inputs")
    parser.addini("npu_exporter", "ONNX exporter: dynamo or torchscript", default="dynamo")
    parser.addini("npu_opset", "ONNX opset to export with (empty: the exporter's default)", default="")
    parser.addini("npu_dynamic_axes", "JSON object {input name: {axis: dim name}} for every export", default="")
    parser.addini("npu_tables", "extra support-table directories", type="paths", default=[])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{MARKER}(targets=None, exporter=None, opset=None, dynamic_axes=None, input_names=None, output_names=None): "
        "check that the model under test stays on the NPU of each target (pytest-npucheck)",
    )
    for value in config.getoption("npu_report") or []:
        _report_spec(value)
    config.stash[_STATE] = _State(config)
    if not hasattr(config, "workerinput"):  # xdist workers send their reports to the controller
        config.pluginmanager.register(_Reporter(config), "npucheck-reporter")


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


class _State:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self._catalog: Any = None
        self.entries: list[dict[str, Any]] = []  # controller side: per-test report entries

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

    def default_targets(self) -> tuple[str, ...]:
        return tuple(self.config.getoption("npu_target") or ()) or tuple(self.config.getini("npu_targets") or ())

    def export_defaults(self) -> dict[str, Any]:
        exporter = self.config.getoption("npu_exporter") or self.config.getini("npu_exporter") or "dynamo"
        opset_opt = self.config.getoption("npu_opset")
        opset_ini = str(self.config.getini("npu_opset") or "").strip()
        try:
            opset = opset_opt if opset_opt is not None else (int(opset_ini) if opset_ini else None)
        except ValueError:
            raise pytest.UsageError(f"ini key npu_opset={opset_ini!r} is not an integer") from None
        axes_text = str(self.config.getini("npu_dynamic_axes") or "").strip()
        axes = _parse_axes(json_loads(axes_text, "ini key npu_dynamic_axes"), "ini key npu_dynamic_axes") if axes_text else None
        return {"exporter": exporter, "opset": opset, "dynamic_axes": axes}


_STATE = pytest.StashKey[_State]()
_SPEC = pytest.StashKey[CheckSpec]()
_ENTRY = pytest.StashKey[dict]()
_CALLED = pytest.StashKey[bool]()


def json_loads(text: str, where: str) -> Any:
    from .jsonio import loads_strict

    try:
        return loads_strict(text)
    except ValueError as exc:
        raise pytest.UsageError(f"{where}: invalid JSON: {exc}") from None


def _parse_axes(value: Any, where: str) -> Optional[dict[str, dict[int, str]]]:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise pytest.UsageError(f"{where}: dynamic_axes must map input names to {{axis: name}}, got {value!r}")
    out: dict[str, dict[int, str]] = {}
    for name, axes in value.items():
        if isinstance(axes, (list, tuple)):
            axes = {int(a): f"{name}_dim{a}" for a in axes}
        if not isinstance(axes, Mapping):
            raise pytest.UsageError(f"{where}: dynamic_axes[{name!r}] must be a list of axes or {{axis: name}}")
        try:
            out[str(name)] = {int(a): str(n) for a, n in axes.items()}
        except (TypeError, ValueError):
            raise pytest.UsageError(f"{where}: dynamic_axes[{name!r}] has a non-integer axis") from None
    return out


def _spec_for(item: pytest.Item, state: _State, mark: pytest.Mark) -> CheckSpec:
    where = f"{item.nodeid}: @pytest.mark.{MARKER}"
    unknown = set(mark.kwargs) - _MARKER_KWARGS
    if unknown:
        raise pytest.UsageError(f"{where}: unknown argument(s) {', '.join(sorted(unknown))}; "
                                f"expected {', '.join(sorted(_MARKER_KWARGS))}")
    targets: Any = mark.kwargs.get("targets")
    if mark.args:
        if targets is not None:
            raise pytest.UsageError(f"{where}: give targets positionally or as targets=, not both")
        targets = list(mark.args)
    if isinstance(targets, str):
        targets = [targets]
    if targets is not None and (not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) for t in targets)):
        raise pytest.UsageError(f"{where}: targets must be a list of strings like 'rknn@2.5.0/rk3588', got {targets!r}")
    targets = tuple(targets) if targets else state.default_targets()
    if not targets:
        raise pytest.UsageError(f"{where}: no target: name one in the marker (targets=[...]), "
                                "with --npu-target, or with the ini key npu_targets")
    defaults = state.export_defaults()
    exporter = mark.kwargs.get("exporter") or defaults["exporter"]
    if exporter not in _EXPORTERS:
        raise pytest.UsageError(f"{where}: exporter={exporter!r}; expected one of {', '.join(_EXPORTERS)}")
    opset = mark.kwargs.get("opset", defaults["opset"])
    if opset is not None and (not isinstance(opset, int) or isinstance(opset, bool) or opset < 7):
        raise pytest.UsageError(f"{where}: opset={opset!r} must be an integer >= 7")
    axes = _parse_axes(mark.kwargs["dynamic_axes"], where) if "dynamic_axes" in mark.kwargs else defaults["dynamic_axes"]
    names = {k: tuple(mark.kwargs[k]) if mark.kwargs.get(k) else None for k in ("input_names", "output_names")}
    return CheckSpec(targets=targets, exporter=exporter, opset=opset, dynamic_axes=axes, **names)


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    """Parse every marker and resolve and validate every table before any test runs."""
    state = config.stash[_STATE]
    marked = [(item, item.get_closest_marker(MARKER)) for item in items]
    marked = [(i, m) for i, m in marked if m is not None]
    if not marked:
        return
    from .errors import NpuCheckError

    for item, mark in marked:
        spec = _spec_for(item, state, mark)
        try:
            for target in spec.targets:
                state.catalog.table(target)
        except NpuCheckError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        item.stash[_SPEC] = spec


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


def _run_check(item: pytest.Item, spec: CheckSpec, model: Any, example_inputs: Any, **overrides: Any) -> NpuCheckOutcome:
    state = item.config.stash[_STATE]
    entry: dict[str, Any] = {"nodeid": item.nodeid, "status": "error", "error": None, "export": None, "targets": []}
    item.stash[_ENTRY] = entry
    item.stash[_CALLED] = True
    from .check import check_graph, graph_facts
    from .errors import NpuCheckError
    from .export import ExportError, ExportOptions, export_model

    unknown = set(overrides) - (_MARKER_KWARGS - {"targets"}) - {"targets"}
    if unknown:
        entry["error"] = f"npu_check() got unknown argument(s) {', '.join(sorted(unknown))}"
        pytest.fail(entry["error"], pytrace=False)
    if model is None:
        entry["error"] = "npu_check() needs a model (a torch.nn.Module), got None"
        pytest.fail(entry["error"], pytrace=False)
    targets = overrides.get("targets") or spec.targets
    if isinstance(targets, str):
        targets = [targets]
    try:
        tables = [state.catalog.table(t) for t in targets]
    except NpuCheckError as exc:
        entry["error"] = str(exc)
        pytest.fail(f"npu_check: {exc}", pytrace=False)
    axes = _parse_axes(overrides["dynamic_axes"], "npu_check(dynamic_axes=...)") if "dynamic_axes" in overrides else spec.dynamic_axes
    opset = overrides.get("opset", spec.opset)
    if opset is None:
        opset = _target_opset(tables)
    options = ExportOptions(
        exporter=overrides.get("exporter") or spec.exporter,
        opset=opset,
        dynamic_axes=axes,
        input_names=overrides.get("input_names") or spec.input_names,
        output_names=overrides.get("output_names") or spec.output_names,
    )
    try:
        with _eval_mode(model):
            exported = export_model(model, example_inputs, options, cache_dir=_cache_dir(item.config))
    except ExportError as exc:
        entry["error"] = f"export failed: {exc}"
        pytest.fail(f"npu_check: the model could not be exported to ONNX ({options.exporter} exporter):\n{exc}", pytrace=False)
    entry["export"] = {"exporter": exported.exporter, "opset": exported.opset, "cache_hit": exported.cache_hit,
                       "key": exported.key, "path": str(exported.path)}
    try:
        graph = graph_facts(exported.path)
    except NpuCheckError as exc:
        entry["error"] = str(exc)
        pytest.fail(f"npu_check: {exc}", pytrace=False)
    results = check_graph(graph, tables)
    if not all(r.passed for r in results):
        from .fixes import with_fixes

        shapes = _input_shapes(graph, example_inputs)
        results = [with_fixes(r, exported.path, t, input_shapes=shapes) for r, t in zip(results, tables)]
    entry["targets"] = [r.to_json() for r in results]
    entry["status"] = "passed" if all(r.passed for r in results) else "failed"
    outcome = NpuCheckOutcome(results=results, onnx_path=exported.path, export=entry["export"])
    if not outcome.passed:
        pytest.fail(_failure_text(results), pytrace=False)
    return outcome


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


def _failure_text(results: Sequence[Any]) -> str:
    from .report.text import render_target

    failing = [r for r in results if not r.passed]
    lines = [f"npu_deployable: the model leaves the NPU on {len(failing)} of {len(results)} target(s)"]
    for r in results:
        lines.append("")
        lines += render_target(r)
    return "\n".join(lines)


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
        try:
            if request is None:
                raise LookupError(name)
            values.append(request.getfixturevalue(name))
        except (pytest.FixtureLookupError, LookupError):
            item.stash[_ENTRY] = {"nodeid": item.nodeid, "status": "error", "targets": [], "export": None,
                                  "error": f"no fixture {name!r}"}
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
        if entry is not None:
            report.npucheck = entry  # plain JSON-able data: travels from xdist workers to the controller
    return report


class _Reporter:
    """Collects per-test entries from reports and writes the run's files.

    Registered per config (the junitxml pattern): under xdist the controller receives every
    worker's reports, and only the controller writes files.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.entries: list[dict[str, Any]] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entry = getattr(report, "npucheck", None)
        if entry is not None and report.when == "call":
            self.entries.append(entry)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        reports = self.config.getoption("npu_report") or []
        if not reports:
            return
        from .jsonio import dumps, write_atomic
        from .report.jsonreport import run_document

        doc = run_document(self.entries)
        for value in reports:
            fmt, path = _report_spec(value)
            if fmt == "json":
                write_atomic(Path(path), dumps(doc))

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        if not self.entries:
            return
        from .report.text import clean

        tr = terminalreporter
        tr.section("npucheck summary")
        for entry in sorted(self.entries, key=lambda e: e["nodeid"]):
            if entry.get("error") and not entry.get("targets"):
                first = (entry["error"].splitlines() or [""])[0]
                tr.write_line(f"ERROR {clean(entry['nodeid'], 300)}: {clean(first, 300)}")
                continue
            for t in entry.get("targets", []):
                s = t["summary"]
                word = "PASS" if t["passed"] else "FAIL"
                tr.write_line(f"{word} {clean(entry['nodeid'], 300)} {t['target']}: npu {s['npu']}, cpu {s['cpu']}, "
                              f"unsupported {s['unsupported']}, folded {s['folded']}")
        for value in config.getoption("npu_report") or []:
            tr.write_line(f"npucheck report written: {_report_spec(value)[1]}")


__all__ = ["npu_check", "NpuCheckOutcome", "CheckSpec"]
