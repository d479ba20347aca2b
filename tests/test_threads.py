"""CPU threads of torch and BLAS in pytest-xdist workers (threads.py and the npu_worker_threads ini key)."""

from __future__ import annotations

import importlib.util
import json

import pytest

from pytest_npucheck import threads

pytest_plugins = ["pytester"]


@pytest.mark.parametrize("value,expected", [("auto", 0), ("", 0), (" AUTO ", 0), ("off", None), ("keep", None),
                                            ("1", 1), ("3", 3)])
def test_setting_values(value, expected):
    assert threads.parse_setting(value) == expected


@pytest.mark.parametrize("value", ["0", "-2", "many", "1.5"])
def test_bad_setting_names_the_key_and_the_value(value):
    with pytest.raises(threads.ThreadsSettingError, match=rf"npu_worker_threads: .*{value}"):
        threads.parse_setting(value)


@pytest.mark.parametrize("workers,cpus,expected", [(2, 2, 1), (2, 8, 4), (3, 8, 2), (16, 4, 1), (1, 4, 4)])
def test_share_divides_the_cpus(workers, cpus, expected):
    assert threads.share(workers, cpus) == expected


def test_limit_sets_every_thread_variable():
    env: dict[str, str] = {"PATH": "/bin"}
    assert threads.limit_worker_threads(2, 0, env, cpus=8) == 4
    assert env == {"PATH": "/bin", "OMP_NUM_THREADS": "4", "MKL_NUM_THREADS": "4", "OPENBLAS_NUM_THREADS": "4"}


@pytest.mark.parametrize("workers,setting,cpus,env", [
    (1, 0, 8, {}),                          # one worker: torch's default is right
    (2, None, 8, {}),                       # off
    (2, 0, 8, {"OMP_NUM_THREADS": "6"}),    # the user chose
    (2, 0, 8, {"OPENBLAS_NUM_THREADS": "2"}),
    (4, 8, 8, {}),                          # as many as the CPUs: the default already
])
def test_limit_leaves_the_environment_alone(workers, setting, cpus, env):
    before = dict(env)
    assert threads.limit_worker_threads(workers, setting, env, cpus=cpus) is None
    assert env == before


def test_explicit_number_wins_over_the_share():
    env: dict[str, str] = {}
    assert threads.limit_worker_threads(2, 3, env, cpus=8) == 3
    assert env["OMP_NUM_THREADS"] == "3"


_PROBE = """
import json, os
def test_threads():
    import torch
    with open(os.environ["THREADS_OUT"] + "." + os.environ.get("PYTEST_XDIST_WORKER", "main"), "w") as fh:
        json.dump({"omp": os.environ.get("OMP_NUM_THREADS"), "torch": torch.get_num_threads()}, fh)
"""


def _run(pytester, monkeypatch, tmp_path, *args, ini="", env=None):
    for needed in ("torch", "xdist"):  # not imported here: pytester would unload torch after the test
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"{needed} is not installed")
    for var in threads.THREAD_VARS:
        monkeypatch.delenv(var, raising=False)
    for var, value in (env or {}).items():
        monkeypatch.setenv(var, value)
    out = tmp_path / "threads"
    monkeypatch.setenv("THREADS_OUT", str(out))
    pytester.makepyfile(test_probe=_PROBE)
    pytester.makeini(f"[pytest]\n{ini}\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
    res.assert_outcomes(passed=1)
    [written] = tmp_path.glob("threads.*")
    return json.loads(written.read_text())


def test_an_xdist_worker_gets_its_share_of_the_cpus(pytester, monkeypatch, tmp_path):
    cpus = threads.available_cpus()
    seen = _run(pytester, monkeypatch, tmp_path, "-n", "2")
    expected = threads.share(2, cpus)
    if expected >= cpus:  # a one-CPU machine: nothing to divide
        assert seen["omp"] is None
    else:
        assert seen == {"omp": str(expected), "torch": expected}


def test_without_xdist_nothing_changes(pytester, monkeypatch, tmp_path):
    seen = _run(pytester, monkeypatch, tmp_path, "-p", "no:xdist")
    assert seen["omp"] is None


def test_the_user_s_choice_is_kept(pytester, monkeypatch, tmp_path):
    seen = _run(pytester, monkeypatch, tmp_path, "-n", "2", ini="npu_worker_threads = 2", env={"OMP_NUM_THREADS": "1"})
    assert seen == {"omp": "1", "torch": 1}


def test_off_keeps_the_default(pytester, monkeypatch, tmp_path):
    seen = _run(pytester, monkeypatch, tmp_path, "-n", "2", ini="npu_worker_threads = off")
    assert seen["omp"] is None


def test_a_bad_value_stops_the_run_before_the_workers(pytester):
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    pytester.makeini("[pytest]\nnpu_worker_threads = lots\n")
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert res.ret == pytest.ExitCode.USAGE_ERROR
    res.stderr.fnmatch_lines(["*npu_worker_threads: expected auto, off or a number of threads, got 'lots'*"])
