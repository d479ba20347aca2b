"""A plain install without the torch extra lacks ONNX Script, which the default (dynamo) exporter
imports: a marked test then fails with one sentence naming the install command and the alternative
exporter, never a bare ModuleNotFoundError. Run in a subprocess where onnxscript cannot be imported."""

from __future__ import annotations

import textwrap

# `None` in sys.modules makes `import onnxscript` raise ModuleNotFoundError, as when it is not installed
HIDE = "import sys\nsys.modules['onnxscript'] = None\n"


def test_dynamo_without_onnxscript_names_the_install_command_and_torchscript_still_works(pytester):
    pytester.makeconftest(HIDE)
    pytester.makepyfile(test_m=textwrap.dedent("""
        import pytest, torch

        def net():
            return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()

        @pytest.mark.npu_deployable(targets=["rknn@2.5.0/rk3588"], numerics=False)
        def test_default_exporter(npu_check):
            npu_check(net(), torch.randn(1, 3, 8, 8))

        @pytest.mark.npu_deployable(targets=["rknn@2.5.0/rk3588"], exporter="torchscript", numerics=False)
        def test_torchscript_exporter(npu_check):
            import sys
            assert sys.modules["onnxscript"] is None
            npu_check(net(), torch.randn(1, 3, 8, 8))
    """))
    res = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly")
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert ("\nthe dynamo exporter needs the Python package 'onnxscript', which is not installed: run "
            "`pip install \"pytest-npucheck[torch]\"`, or export with exporter=\"torchscript\"") in out
    assert "ModuleNotFoundError" not in out
    assert "No module named" not in out
