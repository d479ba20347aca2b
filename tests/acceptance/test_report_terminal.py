"""report/terminal.py as a user meets it (issue 26.4): the summary under -q, the progress line of a
slow export, the failure text of a numeric failure, a test that requests npu_check and never calls it."""

from __future__ import annotations

import re
import textwrap

import pytest

from conftest import TOY_TABLES

from pytest_npucheck.report import terminal

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

NETS = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    class Clean(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)

        def forward(self, x):
            return torch.relu(self.conv(x))


    class Pads(nn.Module):
        def forward(self, x):
            return F.pad(torch.relu(x), (1, 1, 1, 1), mode="reflect")


    class TwoOutputs(nn.Module):
        """The second output overflows in fp16 (exp of up to 60 > 65504): the first one is fine."""

        def forward(self, x):
            return x + 1.0, torch.exp(x * 20.0)
''')


@pytest.fixture
def suite(pytester):
    pytester.makepyfile(nets=NETS)
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider -p no:randomly\n")
    return pytester


def test_quiet_lists_only_what_fails_and_counts_the_rest(suite):
    suite.makepyfile(test_q='''
        import pytest, torch
        from nets import Clean, Pads

        @pytest.mark.parametrize("i", range(2))
        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
        def test_clean(npu_check, i):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a", "toy@1.1/soc-b"], numerics=False)
        def test_pads(npu_check):
            npu_check(Pads().eval(), torch.randn(1, 3, 8, 8))
    ''')
    r = suite.runpytest("-q")
    r.assert_outcomes(passed=2, failed=1)
    summary = r.stdout.str().split("npucheck summary")[1].split("short test summary")[0]
    assert "PASS test_q.py::test_clean" not in summary
    assert "npucheck: 2 tests passed on every target (3 passing target checks not listed under -q)" in summary
    assert "FAIL test_q.py::test_pads toy@1.0/soc-a: npu 1, cpu 1" in summary
    # the whole -q summary, the same under -n 2 ([n2]: the controller prints it from the workers' reports)
    assert [line for line in summary.splitlines() if line.strip(" =")] == [
        "npucheck: 2 tests passed on every target (3 passing target checks not listed under -q)",
        "FAIL test_q.py::test_pads toy@1.0/soc-a: npu 1, cpu 1, unsupported 0, folded 0 (1 new, 0 accepted "
        "fallback(s))"]
    # without -q every target is listed
    r = suite.runpytest()
    assert "PASS test_q.py::test_clean[0] toy@1.0/soc-a: npu 2" in r.stdout.str()


@pytest.mark.without_xdist(reason="the progress line is the controller terminal's; an xdist worker has none, "
                            "so under -n 2 nothing is said by design (report.terminal.progress)")
@pytest.mark.own_export_cache(reason="its first run must export (the progress line), its second hit the cache")
def test_a_slow_export_says_what_it_is_doing(suite, monkeypatch):
    monkeypatch.setattr(terminal, "PROGRESS_AFTER", 0.0)  # every export counts as slow
    suite.makepyfile(test_p='''
        import pytest, torch
        from nets import Clean

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], numerics=False)
        def test_clean(npu_check):
            npu_check(Clean().eval(), torch.randn(1, 3, 8, 8))
    ''')
    r = suite.runpytest()
    r.assert_outcomes(passed=1)
    out = r.stdout.str()
    assert "npucheck: exporting test_p.py::test_clean (dynamo exporter) ..." in out
    assert re.search(r"npucheck: exporting test_p.py::test_clean \(dynamo exporter\): done in \d+\.\d s", out)
    monkeypatch.setattr(terminal, "PROGRESS_AFTER", 3600.0)  # nothing is that slow: nothing is said
    assert "npucheck: exporting" not in suite.runpytest().stdout.str()


def test_a_numeric_failure_details_the_failing_output_only(suite):
    suite.makepyfile(test_n='''
        import pytest, torch
        from nets import TwoOutputs

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], golden=False)
        def test_two(npu_check):
            torch.manual_seed(0)
            npu_check(TwoOutputs().eval(), torch.rand(1, 3, 8, 8) * 3.0)
    ''')
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    failure = out.split("= FAILURES =")[1].split("npucheck summary")[0]
    emulation = failure.split("fp16 emulation vs fp32", 1)[1]
    passing = [line for line in emulation.splitlines() if line.strip().startswith("PASS output")]
    failing = [line for line in emulation.splitlines() if line.strip().startswith("FAIL output")]
    assert len(passing) == 1 and len(failing) == 1
    # the output that passed: one line, its metrics with the digits that matter
    # (a cosine keeps 4 digits of its distance from 1: 0.99999998261)
    assert re.search(r"PASS output '[^']+': cosine [0-9.]{1,14}, SNR [-0-9.inf]{1,8} dB, max_abs \S{1,10}$", passing[0])
    assert emulation.count("worst elements") <= 1  # only the failing output's
    assert not re.search(r"\d\.\d{12,}", failure)  # no 16-digit numbers
    summary = out.split("npucheck summary")[1]
    assert re.search(r"FAIL test_n.py::test_two numerics: fp16 emulated \(ONNX Runtime\) toy@1.0/soc-a output \S+ "
                     r"\(cosine ", summary)


def test_requesting_npu_check_without_calling_it_fails_with_one_clear_message(suite):
    suite.makepyfile(test_k='''
        import pytest

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_forgot(npu_check):
            pass
    ''')
    r = suite.runpytest()
    r.assert_outcomes(failed=1)
    out = r.stdout.str()
    assert "the test requests the npu_check fixture but never calls it" in out
    assert "During handling of the above exception" not in out and "KeyError" not in out
    assert "ERROR test_k.py::test_forgot: requests npu_check but never calls it" in out
