"""xdist_workers.py: the passive OpenMP wait policy a worker of a -n 2 run sets before torch loads,
never outside a worker, never over the user's own choice."""

from __future__ import annotations

import pytest

from pytest_npucheck import xdist_workers
from pytest_npucheck.xdist_workers import PASSIVE, WAIT_POLICY, worker_count, worker_environment

WORKER = {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}


@pytest.mark.parametrize("environ, count", [
    ({}, 0),  # a plain run, or xdist's controller
    ({"PYTEST_XDIST_WORKER_COUNT": "2"}, 0),  # the count alone is not a worker
    (WORKER, 2),
    ({**WORKER, "PYTEST_XDIST_WORKER_COUNT": "8"}, 8),
    ({**WORKER, "PYTEST_XDIST_WORKER_COUNT": ""}, 0),
    ({**WORKER, "PYTEST_XDIST_WORKER_COUNT": "two"}, 0),
])
def test_worker_count(environ, count):
    assert worker_count(environ) == count


def test_a_worker_of_two_or_more_waits_passively():
    assert worker_environment(WORKER) == {WAIT_POLICY: PASSIVE} == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert worker_environment({**WORKER, "PYTEST_XDIST_WORKER_COUNT": "4"}) == {WAIT_POLICY: PASSIVE}


@pytest.mark.parametrize("environ", [
    {},  # not a worker: a plain run and the controller are left as they are
    {"PYTEST_XDIST_WORKER": "gw0", "PYTEST_XDIST_WORKER_COUNT": "1"},  # -n 1: no other worker to wait for
    {**WORKER, "OMP_WAIT_POLICY": "ACTIVE"},  # the user's choice wins
    {**WORKER, "OMP_WAIT_POLICY": ""},
    {**WORKER, "GOMP_SPINCOUNT": "300000"},  # a tuned spin count means spinning is wanted
])
def test_nothing_is_set_outside_workers_or_over_a_choice(environ):
    assert worker_environment(environ) == {}


def test_a_worker_ends_with_status_0_after_its_exit_functions(monkeypatch):
    """``end_worker``: in a worker, the exit functions, then ``os._exit(0)`` (what the worker script's
    ordinary end gives); outside a worker, or with a tracer set, it returns and the exit is ordinary."""
    import atexit
    import os
    import sys

    events = []
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: events.append("exit functions"))
    monkeypatch.setattr(os, "_exit", lambda status: events.append(("os._exit", status)))
    monkeypatch.setattr(sys, "gettrace", lambda: None)  # under coverage the test itself runs traced
    worker = {"PYTEST_XDIST_WORKER": "gw1", "PYTEST_XDIST_WORKER_COUNT": "2"}

    xdist_workers.end_worker({})
    assert events == []
    xdist_workers.end_worker(worker)
    assert events == ["exit functions", ("os._exit", 0)]
    events.clear()
    monkeypatch.setattr(sys, "gettrace", lambda: (lambda *a: None))
    xdist_workers.end_worker(worker)
    assert events == []
