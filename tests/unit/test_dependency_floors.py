"""The lowest-versions environment (constraints-lowest.txt, `tox -e lowest`) installs exactly the
minimum versions pyproject.toml declares: a raised minimum that the environment does not follow (or
the reverse) would leave the declared floor untested."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
FLOORED = ("onnx", "onnxruntime", "numpy", "jsonschema", "pytest")


def _pins(path: Path) -> dict[str, str]:
    pins = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==(\S+)", line.strip())
        if m:
            pins[m.group(1).lower()] = m.group(2)
    return pins


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib")
def test_lowest_constraints_pin_the_declared_minimums():
    import tomllib

    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for dep in deps:
        m = re.match(r"^([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", dep)
        if m:
            floors[m.group(1).lower()] = m.group(2)
    lowest = _pins(REPO / "constraints-lowest.txt")
    assert set(FLOORED) <= set(floors), f"pyproject.toml declares no minimum for {set(FLOORED) - set(floors)}"
    from packaging.version import Version  # pytest's own dependency

    assert {n: Version(lowest[n]) if n in lowest else None for n in FLOORED} == {n: Version(floors[n]) for n in FLOORED}
    # torch stays the build on the machines' disk, the same as the CI constraints
    assert lowest["torch"] == _pins(REPO / "constraints.txt")["torch"]
