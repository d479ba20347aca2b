"""xdist_workers.py through pytest: the workers of a -n 2 run wait passively in OpenMP (set before
any test module loads), a plain run is left as it is, and the user's own OMP_WAIT_POLICY wins."""

from __future__ import annotations

import pytest

SUITE = """
    import os

    import pytest


    @pytest.mark.parametrize("k", range(4))
    def test_policy(k, tmp_path_factory):
        seen = os.environ.get("OMP_WAIT_POLICY", "<unset>")
        where = os.environ.get("PYTEST_XDIST_WORKER", "plain")
        (tmp_path_factory.getbasetemp().parent / f"seen-{where}-{k}.txt").write_text(seen)
"""


def _seen(pytester: pytest.Pytester) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in pytester.path.parent.rglob("seen-*.txt"):
        out.setdefault(f.name.split("-")[1], set()).add(f.read_text())
        f.unlink()
    return out


@pytest.mark.without_xdist(reason="it compares a plain run with -n 2 runs itself")
def test_workers_wait_passively_unless_told(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # this test itself may run in an xdist worker of the suite: its runs must not inherit the worker's
    # identity (a plain run would read as a worker) nor the policy the suite's own plugin set
    for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    pytester.makepyfile(test_env=SUITE)

    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=4)
    assert _seen(pytester) == {"plain": {"<unset>"}}

    pytester.runpytest_subprocess("-p", "no:randomly", "-n", "2").assert_outcomes(passed=4)
    seen = _seen(pytester)
    assert set(seen) <= {"gw0", "gw1"} and seen and all(v == {"PASSIVE"} for v in seen.values()), seen

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    pytester.runpytest_subprocess("-p", "no:randomly", "-n", "2").assert_outcomes(passed=4)
    seen = _seen(pytester)
    assert seen and all(v == {"ACTIVE"} for v in seen.values()), seen


ENDING_CONFTEST = """
    import atexit, os

    WHERE = os.environ.get("PYTEST_XDIST_WORKER", "plain")
    OUT = os.environ["ENDING_OUT"]


    def _exit_function():
        with open(os.path.join(OUT, f"exit-{WHERE}"), "w") as fh:
            fh.write("ran")


    atexit.register(_exit_function)


    class _TornDown:
        def __init__(self):
            self.path = os.path.join(OUT, f"teardown-{WHERE}")

        def __del__(self, open=open):  # module globals may be gone by then
            with open(self.path, "w") as fh:
                fh.write("ran")


    KEEP = _TornDown()  # freed only by the interpreter's teardown
"""

ENDING_SUITE = """
    import pytest


    @pytest.mark.parametrize("k", range(4))
    def test_plain(k):
        pass


    @pytest.mark.skip(reason="selected, never run: the worker's session has a marked test")
    @pytest.mark.npu_deployable(targets=["rknn@2.5.0/rk3588"])
    def test_marked():
        pass
"""


@pytest.mark.without_xdist(reason="it compares a plain run with -n 2 runs itself")
def test_a_worker_that_ran_marked_tests_ends_without_the_teardown(pytester: pytest.Pytester,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An xdist worker whose session holds marked tests runs its exit functions and ends without the
    interpreter's teardown (the object freed only by it never is); the results are the same. A plain run,
    a worker of a session without marked tests and ini ``npu_worker_fast_exit = false`` end the ordinary
    way."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT"):
        monkeypatch.delenv(name, raising=False)
    # workers started as xdist starts them: the suite's warm workers are forked children that never tear down
    monkeypatch.setenv("NPUCHECK_TEST_WARM_WORKERS", "0")
    out = pytester.mkdir("ending")
    monkeypatch.setenv("ENDING_OUT", str(out))
    pytester.makeconftest(ENDING_CONFTEST)
    pytester.makepyfile(test_ending=ENDING_SUITE)

    def ended(*args: str, passed: int = 4, skipped: int = 1) -> dict[str, set[str]]:
        pytester.runpytest_subprocess("-p", "no:randomly", *args).assert_outcomes(passed=passed, skipped=skipped)
        seen: dict[str, set[str]] = {}
        for f in out.iterdir():
            what, where = f.name.split("-")
            seen.setdefault(what, set()).add(where)
            f.unlink()
        return seen

    ordinary = {"exit": {"plain", "gw0", "gw1"}, "teardown": {"plain", "gw0", "gw1"}}  # "plain": the controller
    # the exit functions ran in both workers, neither tore its heap down; the controller ended as ever
    assert ended("-n", "2") == {"exit": {"plain", "gw0", "gw1"}, "teardown": {"plain"}}
    assert ended() == {"exit": {"plain"}, "teardown": {"plain"}}  # the main process of a plain run: ordinary
    assert ended("-n", "2", "-k", "plain", skipped=0) == ordinary  # no marked test in the session
    pytester.makeini("[pytest]\nnpu_worker_fast_exit = false\n")
    assert ended("-n", "2") == ordinary
