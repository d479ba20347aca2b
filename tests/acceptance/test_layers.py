"""tests/conftest.py's layer rules, on a throw-away suite laid out like ours: a unit test may not
import torch or start a program, the layer markers are set, and the run prints its time per layer.
Run in a fresh process: torch is already imported in this one."""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"


@pytest.fixture
def layered(pytester, monkeypatch):
    # cold xdist workers in the [n2] runs: a warm one (warm_workers.py) has torch imported already, and
    # the rule "a unit module may not import torch" is only checked where torch was not imported before
    monkeypatch.setenv("NPUCHECK_TEST_WARM_WORKERS", "0")
    pytester.makeini("[pytest]\naddopts = -p no:randomly -p no:cacheprovider\n"
                     "markers =\n    export: exports\n    oracle: toolchains\n")
    tests = pytester.mkdir("tests")
    (tests / "conftest.py").write_text(CONFTEST.read_text())
    files = {
        "unit/test_clean.py": "def test_clean():\n    assert 1 + 1 == 2\n",
        "unit/test_torch_at_import.py": "import torch\n\ndef test_a():\n    assert torch\n",
        "unit/test_torch_inside.py": "def test_b():\n    import torch\n    assert torch\n",
        "unit/test_program.py": ("import subprocess, sys\n\ndef test_c():\n"
                                 "    subprocess.run([sys.executable, '-c', 'pass'], check=True)\n"),
        "corpus/test_model.py": "import torch\n\ndef test_d():\n    assert torch.zeros(1).sum() == 0\n",
        "oracle/test_toolchain.py": "def test_e():\n    pass\n",
    }
    for name, text in files.items():
        path = tests / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return pytester


def test_unit_tests_may_not_import_torch_or_start_programs(layered):
    res = layered.runpytest_subprocess("tests/unit/test_clean.py", "tests/unit/test_torch_at_import.py",
                                       "tests/unit/test_program.py", "--continue-on-collection-errors")
    out = res.stdout.str()
    res.assert_outcomes(passed=1, failed=1, errors=1)
    assert "tests/unit/test_torch_at_import.py imports torch" in out
    assert "tests/unit/test_program.py::test_c: a test of tests/unit may not start a process (subprocess.Popen)" in out
    res = layered.runpytest_subprocess("tests/unit/test_torch_inside.py")
    res.assert_outcomes(passed=1, errors=1)
    res.stdout.fnmatch_lines(["*ERROR at teardown of test_b*",
                              "*tests/unit/test_torch_inside.py::test_b imported torch: tests/unit must run without it*"])


def test_layer_markers_and_time_per_layer(layered):
    res = layered.runpytest_subprocess("tests/corpus", "tests/oracle", "tests/unit/test_clean.py", "-m", "export")
    res.assert_outcomes(passed=1, deselected=2)
    res = layered.runpytest_subprocess("tests/corpus", "tests/oracle", "tests/unit/test_clean.py",
                                       "-m", "oracle or not export")
    res.assert_outcomes(passed=2, deselected=1)
    res.stdout.fnmatch_lines(["*time per test layer*", "layer * wall * CPU * tests",
                              "most CPU (setup + call + teardown):"])
    lines = res.stdout.str().splitlines()
    start = next(i for i, line in enumerate(lines) if "time per test layer" in line)
    end = next(i for i, line in enumerate(lines) if line.startswith("most CPU"))
    rows = {line.split()[0]: line.split() for line in lines[start + 1:end]
            if line.strip() and not line.startswith("layer ")}
    assert set(rows) == {"unit", "oracle"}, lines[start:start + 5]
    for row in rows.values():  # layer, wall, "s", CPU, "s", tests
        assert row[5] == "1" and float(row[1]) >= 0 and float(row[3]) >= 0, row
    assert any(line.strip().endswith("tests/oracle/test_toolchain.py::test_e") for line in lines[start:])
