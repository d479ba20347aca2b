"""A pytest plugin for the ``-n 2`` pytester runs of tests/acceptance (loaded there through
``PYTEST_PLUGINS``, see tests/acceptance/conftest.py): the deselected tests on the summary line.

Under pytest-xdist the workers collect and deselect; the controller collects nothing, so its summary
line ("1 passed, 1 deselected" in a plain run) leaves the deselected tests out, and a test asserting
``assert_outcomes(passed=1, deselected=1)`` could not hold in both modes. Each worker sends the ids
it deselected; the controller adds those of one worker (every worker collects the same tests) to its
terminal reporter's ``deselected`` list, as a plain run's ``pytest_deselected`` does.
"""

from __future__ import annotations

from typing import Any

import pytest

_COUNTED = pytest.StashKey[bool]()


def pytest_deselected(items: Any) -> None:
    items = list(items)
    workeroutput = getattr(items[0].config, "workeroutput", None) if items else None
    if workeroutput is not None:
        workeroutput.setdefault("deselected_ids", []).extend(item.nodeid for item in items)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    config = node.config
    ids = getattr(node, "workeroutput", {}).get("deselected_ids")
    if ids is None or config.stash.get(_COUNTED, False):
        return
    config.stash[_COUNTED] = True
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.stats.setdefault("deselected", []).extend(ids)
