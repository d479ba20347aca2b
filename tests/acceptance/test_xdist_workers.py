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
