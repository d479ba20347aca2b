"""budget: the loosening check against the committed file, in a real git repository (it runs git,
so it is not a unit test; the rest of budget's tests are in tests/unit/test_budget.py)."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

from pytest_npucheck.budget import check_tightening, load_budgets
from pytest_npucheck.jsonio import dumps

DOC = {
    "format": 1,
    "releases": {
        "1.2.0": {
            "tests": {"*bert*": {"precision": "int8", "default": {"snr_db_min": 20}}},
            "targets": {"rknn@2.5.0/rk3588": {"max_cpu_fallback_nodes": 2, "min_npu_share": 0.9}},
        },
    },
}


def _write(tmp_path: Path, doc) -> Path:
    p = tmp_path / "npu-budgets.json"
    p.write_text(dumps(doc))
    return p


def test_against_the_committed_file_with_git(tmp_path):
    """The glue passes `git show HEAD:path`; the same flow on a real repository."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    path = _write(tmp_path, DOC)
    git("add", path.name)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "budgets")
    loose = copy.deepcopy(DOC)
    loose["releases"]["1.2.0"]["targets"]["rknn@2.5.0/rk3588"]["min_npu_share"] = 0.8
    _write(tmp_path, loose)
    from pytest_npucheck.jsonio import loads_strict

    committed = loads_strict(git("show", f"HEAD:{path.name}"))
    problems = check_tightening(committed, load_budgets(path).doc)
    assert problems and "min_npu_share loosened 0.9 -> 0.8" in problems[0]
