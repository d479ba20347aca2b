"""A pytest plugin for the ``-n 2`` pytester runs of tests/acceptance (loaded there through
``PYTEST_PLUGINS``): their xdist workers are forked from a warm process (tests/acceptance/warm_workers.py)
instead of started cold.

``-n 2`` becomes two ``popen`` specs; when ``NPUCHECK_TEST_WARM_WORKERS`` names a client command (the
acceptance conftest sets it for the ``[n2]`` runs), each plain ``popen`` spec gets it as its python
(``popen//python=<client>``). Specs a run names itself (``--tx ...//python=...``) are left alone.
"""

from __future__ import annotations

import os

import pytest

ENV = "NPUCHECK_TEST_WARM_WORKERS"


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    client = os.environ.get(ENV, "")
    tx = getattr(config.option, "tx", None)
    if not client or client == "0" or hasattr(config, "workerinput") or not tx:
        return
    config.option.tx = [f"popen//python={client}" if spec == "popen" else spec for spec in tx]
