"""pytester runs with hostile configuration files and ini values (issue 27, items 11 and 20):
each stops the run before any test with a usage error naming the file or key, never an
INTERNALERROR."""

from __future__ import annotations

import pytest


rel = pytest.mark.reliability
DEEP = "[" * 200_000

CASES = [
    ("baseline", {"npucheck-baseline.json": DEEP}, ["npucheck-baseline.json", "nested too deeply"]),
    ("budgets", {"npu-budgets.json": DEEP}, ["npu-budgets.json", "nested too deeply"]),
    ("ini-axes", {"pytest.ini": f"[pytest]\nnpu_dynamic_axes = {DEEP}\n"}, ["npu_dynamic_axes", "nested too deeply"]),
    ("budgets-1e999", {"npu-budgets.json": '{"format": 1, "releases": {"1.0.0": {"tests": {"t*": {"precision": '
                                           '"fp16", "default": {"rtol": 1e999}}}}}}'},
     ["npu-budgets.json", "$.releases.1.0.0.tests.t*.default.rtol", "1e999"]),
]


@rel("G11", "G20")
@pytest.mark.parametrize("files,fragments", [  # the ini's dynamic axes are read at collection
    pytest.param(*c[1:], id=c[0]) for c in CASES])
def test_hostile_json_configuration_is_a_usage_error(pytester, files, fragments):
    pytester.makepyfile(test_marked="""
        import pytest

        @pytest.mark.npu_deployable(targets=["rknn"])
        def test_a(npu_check):
            open('ran', 'w').close()
    """)
    for name, text in files.items():
        (pytester.path / name).write_text(text)
    res = pytester.runpytest_inprocess("-p", "no:randomly", "-p", "no:cacheprovider", "--npu-release=1.0.0")
    text = res.stdout.str() + res.stderr.str()
    assert res.ret == pytest.ExitCode.USAGE_ERROR, text[-3000:]
    assert not (pytester.path / "ran").exists()
    assert "INTERNALERROR" not in text and "RecursionError" not in text
    for fragment in fragments:
        assert fragment in text, (fragment, text[-3000:])
