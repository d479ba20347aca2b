"""Every pytester run of this layer is made twice: plain, and under pytest-xdist with two workers.

The plugin promises the same outcomes, report files, baseline files and exit codes with and without
``-n 2`` (house rule: results identical with and without pytest-xdist; only the controller writes
shared files). So each test that uses ``pytester`` (directly or through a fixture such as ``suite``)
runs once as ``test_x[n0]``, its runs unchanged, and once as ``test_x[n2]``, where every
``runpytest``, ``runpytest_inprocess`` and ``runpytest_subprocess`` call gets ``-n 2`` (the way it was
asked to run, in-process or in a subprocess, is kept). The test's assertions are the same in both.

The ``-n 2`` runs load child_plugins/xdist_deselected.py, so that their summary line counts the
deselected tests as a plain run's does (xdist's controller leaves them out).

A test whose runs cannot be repeated under xdist says why with ``@pytest.mark.without_xdist(reason=...)``
and runs as ``[n0]`` only; tests/README.md lists them. A test that compares a plain run with a
``-n 2`` run itself is one of them: its own comparison covers both modes.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import pytest

from pytest_npucheck.engine.settings import EXPORT_CACHE_ENV

#: the arguments each mode adds to every pytester run of a test
RUN_MODES: dict[str, tuple[str, ...]] = {"n0": (), "n2": ("-n", "2")}
#: the modes this session runs: NPUCHECK_TEST_RUN_MODES=n0,n2 (the default: the README's suite and
#: CI run every test both ways, as syrupy runs its suite with and without xdist), =n0 (a quicker
#: local pass) or =n2. Both modes share the session's export cache (session_export_cache): a [n2]
#: run's workers reuse its [n0] run's exports instead of exporting cold.
ENV_MODES = "NPUCHECK_TEST_RUN_MODES"


def selected_modes() -> list[str]:
    raw = os.environ.get(ENV_MODES, "n0,n2")
    modes = [m.strip() for m in raw.split(",") if m.strip()]
    unknown = [m for m in modes if m not in RUN_MODES]
    if unknown or not modes:
        raise pytest.UsageError(f"{ENV_MODES}={raw!r}: expected a comma-separated list of {', '.join(RUN_MODES)}")
    return modes
#: plugins every -n 2 run loads (controller and workers: PYTEST_PLUGINS and PYTHONPATH reach both)
CHILD_PLUGINS = Path(__file__).parent / "child_plugins"
N2_PLUGINS = ("xdist_deselected", "xdist_warm_workers")
#: NPUCHECK_TEST_WARM_WORKERS=0: the [n2] runs start cold xdist workers instead of forking them warm
#: (warm_workers.py; the session sets the variable to the client command for its [n2] runs)
ENV_WARM = "NPUCHECK_TEST_WARM_WORKERS"
#: a run with one of these arguments picks its own workers (or none): the mode adds nothing to it
_OWN_WORKERS = re.compile(r"-n\d*|--numprocesses(=.*)?|--tx(=.*)?|no:xdist")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "run_mode" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("without_xdist")
    if marker is not None and not marker.kwargs.get("reason"):
        raise pytest.UsageError("%s: @pytest.mark.without_xdist needs reason=... saying why its runs cannot "
                                "be repeated under -n 2" % metafunc.definition.nodeid)
    modes = [m for m in selected_modes() if marker is None or m == "n0"]
    if not modes:  # an [n2]-only session and a test that says why it cannot run so: the plain pass covers it
        metafunc.parametrize("run_mode", [pytest.param("n0", marks=pytest.mark.skip(
            reason=f"without_xdist ({marker.kwargs['reason']}): runs in the plain pass"))], indirect=True)
        return
    metafunc.parametrize("run_mode", modes, indirect=True)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A ``without_xdist`` mark on one parameter set (``pytest.param(..., marks=...)``) deselects its [n2] item."""
    plain_only = [item for item in items if getattr(item, "callspec", None) is not None
                  and item.callspec.params.get("run_mode") == "n2" and item.get_closest_marker("without_xdist")]
    if plain_only:
        config.hook.pytest_deselected(items=plain_only)
        items[:] = [item for item in items if item not in plain_only]


@pytest.fixture
def run_mode(request: pytest.FixtureRequest) -> str:
    """``n0`` (plain pytester runs) or ``n2`` (the same runs with ``-n 2``)."""
    return request.param


def _with_mode(run: Callable[..., Any], extra: tuple[str, ...]) -> Callable[..., Any]:
    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if any(_OWN_WORKERS.fullmatch(str(a)) for a in args):
            return run(*args, **kwargs)
        return run(*extra, *args, **kwargs)

    return wrapper


@pytest.fixture(scope="session")
def session_export_cache(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> Path:
    """One export cache for every pytester run of the session, both modes and both outer xdist workers
    (the plugin's NPUCHECK_EXPORT_CACHE_DIR; its entries are written atomically and keyed by weights,
    code, inputs and options): a suite's [n2] runs and its workers reuse the exports of its [n0] runs
    instead of importing the exporter and exporting afresh in each process."""
    base = tmp_path_factory.getbasetemp()
    # an xdist worker's base is <the controller's base>/popen-gwN: the parent is the session's
    return (base.parent if hasattr(pytestconfig, "workerinput") else base) / "npucheck-session-exports"


#: the CPU file of this process's warm-worker server, once it runs (warm_workers.cpu_file)
_WARM_CPU: list[str] = []
_WARM_CPU_SEEN = [0.0]


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    """Add the CPU of the warm workers that ended during this phase to its ``cpu_seconds`` (set by
    tests/conftest.py's hook, which runs inside this one): they are not children of this process."""
    outcome = yield
    if not _WARM_CPU:
        return
    from acceptance.warm_workers import workers_cpu_seconds

    total = workers_cpu_seconds(_WARM_CPU[0])
    rep = outcome.get_result()
    rep.cpu_seconds = round((getattr(rep, "cpu_seconds", 0.0) or 0.0) + total - _WARM_CPU_SEEN[0], 3)
    _WARM_CPU_SEEN[0] = total


@pytest.fixture(scope="session")
def warm_workers() -> Any:
    """The client command of a warm-worker server (warm_workers.py) for the session's [n2] runs, or
    "0" when NPUCHECK_TEST_WARM_WORKERS=0 asks for cold workers. One server per outer process."""
    if os.environ.get(ENV_WARM) == "0":
        yield "0"
        return
    directory = tempfile.mkdtemp(prefix="npw-")  # short: a Unix socket path has ~100 bytes
    sock = os.path.join(directory, "s")
    with open(os.path.join(directory, "server.log"), "wb") as log:
        server = subprocess.Popen([sys.executable, str(Path(__file__).with_name("warm_workers.py")), "serve", sock],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line == b"ready\n", (line, Path(directory, "server.log").read_text())
        from acceptance.warm_workers import client_command, cpu_file

        _WARM_CPU[:] = [cpu_file(sock)]
        yield client_command(sock, directory)
    finally:
        _WARM_CPU.clear()
        server.terminate()
        server.wait()
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
def pytester(pytester: pytest.Pytester, run_mode: str, monkeypatch: pytest.MonkeyPatch,
             request: pytest.FixtureRequest, session_export_cache: Path) -> pytest.Pytester:
    """pytest's ``pytester``, whose runs are made in the test's ``run_mode`` (see the module docstring)
    and share the session's export cache unless the test is marked ``own_export_cache``."""
    marker = request.node.get_closest_marker("own_export_cache")
    if marker is not None and not marker.kwargs.get("reason"):
        raise pytest.UsageError("%s: @pytest.mark.own_export_cache needs reason=..." % request.node.nodeid)
    if marker is None:
        monkeypatch.setenv(EXPORT_CACHE_ENV, str(session_export_cache))
    else:
        monkeypatch.delenv(EXPORT_CACHE_ENV, raising=False)
    extra = RUN_MODES[run_mode]
    # runpytest() calls one of these two, as --runpytest says: wrapping them covers every run
    runs = ("runpytest_inprocess", "runpytest_subprocess")
    if extra:
        pytest.importorskip("xdist")
        # the summary line counts deselected tests as a plain run does (child_plugins/xdist_deselected.py)
        _load_child_plugins(monkeypatch, request, N2_PLUGINS)
        for name in runs:
            setattr(pytester, name, _with_mode(getattr(pytester, name), extra))
    else:
        # a run that names its own workers (a test comparing a plain run with a -n 2 run itself) gets
        # warm workers too; only its workers change, not its plugins or its summary
        for name in runs:
            setattr(pytester, name, _with_warm_workers(getattr(pytester, name), request))
    return pytester


def _load_child_plugins(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest,
                        plugins: tuple[str, ...]) -> None:
    """Load ``plugins`` (modules of child_plugins/) in the controller and the workers of the runs made
    while ``monkeypatch`` holds, and fork the workers warm unless NPUCHECK_TEST_WARM_WORKERS is already
    set (=0: cold workers; a test sets it itself before its runs)."""
    monkeypatch.syspath_prepend(str(CHILD_PLUGINS))  # in-process runs import them from here
    # xdist starts a worker with the sys.path its controller had at start-up (xdist.plugin._sys_path):
    # for an in-process run that is this process's, which lacks CHILD_PLUGINS (a subprocess run's
    # controller has it from PYTHONPATH)
    import xdist.plugin

    startup_path = xdist.plugin._sys_path
    if str(CHILD_PLUGINS) not in startup_path:
        startup_path.insert(0, str(CHILD_PLUGINS))
        request.addfinalizer(lambda: startup_path.remove(str(CHILD_PLUGINS)) if str(CHILD_PLUGINS) in startup_path
                             else None)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(CHILD_PLUGINS),
                                                                     os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PYTEST_PLUGINS", ",".join(plugins))
    # the workers are forked from a warm process (warm_workers.py), not started cold
    if ENV_WARM not in os.environ:
        monkeypatch.setenv(ENV_WARM, request.getfixturevalue("warm_workers"))


def _with_warm_workers(run: Callable[..., Any], request: pytest.FixtureRequest) -> Callable[..., Any]:
    """``run``, whose calls that name their own xdist workers (``-n 2``) fork them warm."""
    @functools.wraps(run)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not any(_OWN_WORKERS.fullmatch(str(a)) for a in args) or importlib.util.find_spec("xdist") is None:
            return run(*args, **kwargs)
        with pytest.MonkeyPatch.context() as mp:
            _load_child_plugins(mp, request, ("xdist_warm_workers",))
            return run(*args, **kwargs)

    return wrapper
