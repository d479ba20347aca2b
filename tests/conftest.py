"""Shared helpers for the test-suite: tiny ONNX graphs built with onnx.helper, the toy tables."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import pytest

TOY_TABLES = Path(__file__).parent / "data" / "tables"
REPO = Path(__file__).resolve().parent.parent


TESTS = Path(__file__).parent
UNIT = TESTS / "unit"
#: what a test of tests/unit may not do (tests/README.md): import torch, start a program (the
#: package's own forked children, isolate.py, are part of the code under test and allowed)
HEAVY_MODULE = "torch"
PROCESS_EVENTS = frozenset({"subprocess.Popen", "os.system", "os.posix_spawn", "os.spawn", "os.exec"})
#: fixtures that export a PyTorch model (their tests get the ``export`` marker)
EXPORT_FIXTURES = frozenset({"corpus", "export", "heavy_modules_loaded"})
_unit_test_running: list[str] = []


def _in_layer(path: Path, layer: str) -> bool:
    return (TESTS / layer) in Path(path).parents


def _refuse_processes_in_unit_tests(event: str, args: tuple) -> None:
    if _unit_test_running and event in PROCESS_EVENTS:
        raise RuntimeError("%s: a test of tests/unit may not start a process (%s); move it to "
                           "tests/acceptance (tests/README.md)" % (_unit_test_running[0], event))


sys.addaudithook(_refuse_processes_in_unit_tests)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """``-n N`` without ``--dist`` distributes by work stealing (pytest-xdist's ``worksteal``), not
    ``load``: the tests are split evenly at the start and a worker that runs out takes half of what
    the other has not started, so neither idles at the end while the other still holds a queue of
    slow tests (``load`` hands out chunks that can leave one worker with several). Runs before
    xdist's own hook, which would set ``load``; an explicit ``--dist`` is kept."""
    if getattr(config.option, "dist", None) == "no" and getattr(config.option, "numprocesses", None) \
            and not getattr(config.option, "distload", False):
        config.option.dist = "worksteal"


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "reliability(*row_ids): the rows of docs/reliability.md (A1..F10) this test guards")
    config.addinivalue_line(
        "markers", "without_xdist(reason): a test of tests/acceptance whose pytester runs are made plain only "
        "([n0]), not repeated under -n 2 ([n2]); the reason says why (tests/README.md)")
    config.addinivalue_line(
        "markers", "own_export_cache(reason): a test of tests/acceptance whose pytester runs do not share the "
        "session's export cache (they inspect their own cache or need cold exports; tests/README.md)")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    """A module of tests/unit whose import brings torch in fails to collect, naming itself."""
    check = isinstance(collector, pytest.Module) and _in_layer(collector.path, "unit") \
        and HEAVY_MODULE not in sys.modules
    outcome = yield
    if check and HEAVY_MODULE in sys.modules:
        rep = outcome.get_result()
        rep.outcome = "failed"
        rep.longrepr = ("%s imports %s (directly or through what it imports): tests/unit must run "
                        "without it; move the test to tests/corpus or tests/acceptance, or import "
                        "lazily (tests/README.md)" % (collector.path.relative_to(TESTS.parent),
                                                      HEAVY_MODULE))


def pytest_collection_modifyitems(config, items):
    """Layer markers: ``export`` on tests that export a PyTorch model, ``oracle`` on tests/oracle."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if _in_layer(item.path, "acceptance") or _in_layer(item.path, "corpus") or fixtures & EXPORT_FIXTURES:
            item.add_marker(pytest.mark.export)
        if _in_layer(item.path, "oracle"):
            item.add_marker(pytest.mark.oracle)


_HAD_TORCH = pytest.StashKey[bool]()
_CPU_MARK = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    """CPU time of this process and of the children it waited for (forked exports, pytester's
    subprocess runs): unlike wall time, it does not grow when other work shares the cores."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    item.stash[_CPU_MARK] = _cpu_seconds()
    if _in_layer(item.path, "unit"):
        item.stash[_HAD_TORCH] = HEAVY_MODULE in sys.modules
        _unit_test_running[:] = [item.nodeid]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Each report carries ``cpu_seconds`` (its phase's CPU time; xdist sends it to the controller).
    A test of tests/unit fails (in its teardown) if its setup, call or teardown imported torch:
    the edit loop, ``pytest tests/unit``, stays fast and torch-free."""
    outcome = yield
    rep = outcome.get_result()
    now = _cpu_seconds()
    rep.cpu_seconds = round(now - item.stash.get(_CPU_MARK, now), 3)
    item.stash[_CPU_MARK] = now
    if call.when != "teardown" or _HAD_TORCH not in item.stash:
        return
    _unit_test_running.clear()
    if not item.stash[_HAD_TORCH] and HEAVY_MODULE in sys.modules:
        rep.outcome = "failed"
        rep.longrepr = ("%s imported %s: tests/unit must run without it; move the test to "
                        "tests/corpus or tests/acceptance (tests/README.md)" % (item.nodeid, HEAVY_MODULE))


#: layer -> [wall seconds, CPU seconds, tests]; test id -> CPU seconds
_LAYER_TIME: dict[str, list[float]] = {}
_TEST_CPU: dict[str, float] = {}


def _layer_of(nodeid: str) -> str:
    parts = nodeid.split("::", 1)[0].split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


def pytest_runtest_logreport(report):
    entry = _LAYER_TIME.setdefault(_layer_of(report.nodeid), [0.0, 0.0, 0])
    cpu = getattr(report, "cpu_seconds", 0.0) or 0.0
    entry[0] += report.duration
    entry[1] += cpu
    _TEST_CPU[report.nodeid] = _TEST_CPU.get(report.nodeid, 0.0) + cpu
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        entry[2] += 1


def pytest_terminal_summary(terminalreporter):
    """The time per layer (setup + call + teardown of its tests, summed over the workers; CPU
    includes the processes a test waited for) and the tests that took the most CPU, so CI's output
    shows which layer got slow and why even on a loaded machine; ``--durations`` gives wall times."""
    if not _LAYER_TIME:
        return
    terminalreporter.section("time per test layer")
    terminalreporter.write_line("%-11s %10s %10s %6s" % ("layer", "wall", "CPU", "tests"))
    for layer, (wall, cpu, count) in sorted(_LAYER_TIME.items(), key=lambda kv: -kv[1][1]):
        terminalreporter.write_line("%-11s %8.1f s %8.1f s %6d" % (layer, wall, cpu, count))
    terminalreporter.write_line("most CPU (setup + call + teardown):")
    for nodeid, cpu in sorted(_TEST_CPU.items(), key=lambda kv: -kv[1])[:15]:
        terminalreporter.write_line("%8.1f s  %s" % (cpu, nodeid))


@pytest.fixture(scope="session")
def corpus():
    """The architectures of tests/models/corpus.py, by name (built from code, random weights)."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from models.corpus import ARCHS

    return ARCHS


@functools.lru_cache(maxsize=None)
def probe_index_by_id() -> dict[str, Any]:
    """Every probe of ``build_probes`` and ``build_extra_probes``, by id, built once per process
    (building them all takes under a second; building them once per test took minutes)."""
    from pytest_npucheck.probe.models import build_probes
    from pytest_npucheck.probe.extra_families import build_extra_probes

    index: dict[str, Any] = {}
    for probe in build_probes() + build_extra_probes():
        assert probe.id not in index, "probe id %s is built twice" % probe.id
        index[probe.id] = probe
    return index


@pytest.fixture(scope="session")
def probe_index() -> dict[str, Any]:
    """{probe id: Probe} over every probe model (main and extra families), built once per session."""
    return probe_index_by_id()


@pytest.fixture(scope="session")
def export_cache(tmp_path_factory, pytestconfig) -> Path:
    """One export cache directory for the whole session, shared by both xdist workers: the exporter
    keys each file by weights, code, inputs, options and versions and writes entries atomically, and
    the corpus builds its models with fixed seeds, so a model that several tests export (the corpus
    sweep, the tables' verdicts on real models: vit_tiny, TorchScript, opset 17) is exported once
    per run, by whichever worker gets there first. Only for tests that read the files; a test about
    the cache itself uses its own directory."""
    base = tmp_path_factory.getbasetemp()
    # an xdist worker's base is <the controller's base>/popen-gwN: the parent is the session's
    shared = (base.parent if hasattr(pytestconfig, "workerinput") else base) / "npucheck-test-exports"
    shared.mkdir(exist_ok=True)
    return shared


@pytest.fixture(scope="session")
def bundled_table_problems() -> dict[str, list[str]]:
    """Every bundled table validated in full (schema and semantics, manifest or not) once per
    session: {table file: problems}, empty when all are valid. A full validation of all the tables
    costs ~4 CPU-s; tests that read its result share this one."""
    from pytest_npucheck.tables import Catalog

    return Catalog.discover().validate_all()


@pytest.fixture
def toy_catalog():
    from pytest_npucheck.tables import Catalog

    return Catalog.discover([TOY_TABLES])


@pytest.fixture(scope="session")
def heavy_modules_loaded(tmp_path_factory):
    """pytester's in-process runs unload modules first imported inside them, and torch's cannot be
    imported twice: load everything an export and a numeric check touch once, before any in-process
    run. Test modules that use pytester request it with ``pytestmark``."""
    torch = pytest.importorskip("torch")
    import jsonschema  # noqa: F401
    import onnx.reference  # noqa: F401
    import onnxruntime  # noqa: F401
    import onnxruntime.quantization  # noqa: F401

    import importlib
    import pkgutil

    import pytest_npucheck
    from pytest_npucheck.export import ExportOptions, export_model

    # every module of the package, so that no in-process run unloads one: objects a memo keeps across
    # runs (facts_cache's in-process facts, shared through the session export cache) keep the classes
    # the next run's modules compare them with
    for mod in pkgutil.walk_packages(pytest_npucheck.__path__, "pytest_npucheck."):
        importlib.import_module(mod.name)

    d = tmp_path_factory.mktemp("warmup")
    for exporter in ("dynamo", "torchscript"):
        export_model(torch.nn.Linear(2, 2).eval(), torch.randn(1, 2), ExportOptions(exporter=exporter), cache_dir=d)


def make_model(nodes: Sequence[Any], inputs: Sequence[tuple[str, Any]], outputs: Sequence[str],
               initializers: Sequence[Any] = (), opset: int = 17, dtype: Any = None) -> Any:
    """A model from nodes; inputs as (name, shape) with float32, outputs with unknown shape."""
    from onnx import TensorProto, helper

    dt = dtype if dtype is not None else TensorProto.FLOAT
    g = helper.make_graph(
        list(nodes), "test",
        [helper.make_tensor_value_info(n, dt, list(s) if s is not None else None) for n, s in inputs],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        initializer=list(initializers),
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def const(name: str, values: Any, dtype: str = "float32") -> Any:
    import numpy as np
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(values, dtype=dtype), name)


@pytest.fixture
def save(tmp_path):
    """save(model) -> path of the model written to a temp dir."""
    import onnx

    counter = iter(range(10_000))

    def _save(model: Any, name: str | None = None) -> Path:
        path = tmp_path / (name or f"m{next(counter)}.onnx")
        onnx.save(model, path)
        return path

    return _save


@pytest.fixture
def judge(toy_catalog, save):
    """judge(model, target='toy@1.0') -> {node name: NodeResult} plus the TargetResult as ['__result__']."""
    from pytest_npucheck.check import check_file

    def _judge(model: Any, target: str = "toy@1.0/soc-a") -> dict[str, Any]:
        [res] = check_file(save(model), [target], toy_catalog)
        out: dict[str, Any] = {n.name: n for n in res.nodes}
        out["__result__"] = res
        return out

    return _judge


def edit_in_place(path, old: bytes, new: bytes) -> None:
    """Replace bytes of the same length in place, keeping the size, the inode and the mtime."""
    assert len(old) == len(new)
    st = os.stat(path)
    data = path.read_bytes()
    assert old in data
    with open(path, "r+b") as fh:
        fh.write(data.replace(old, new))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = os.stat(path)
    assert (after.st_size, after.st_ino, after.st_mtime_ns) == (st.st_size, st.st_ino, st.st_mtime_ns)
