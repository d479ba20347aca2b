"""A model whose forward returns no tensor fails saying so, not "graph has no nodes" (issue 27, item 22)."""

from __future__ import annotations

import pytest

from conftest import TOY_TABLES

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")


@pytest.mark.reliability("G22")
@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_forward_that_returns_no_tensor_fails_saying_so(pytester, exporter):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider -p no:randomly\n")
    pytester.makepyfile(test_none=f"""
        import pytest, torch

        class ReturnsNothing(torch.nn.Module):
            def forward(self, x):
                y = torch.relu(x)
                return None

        @pytest.mark.npu_deployable(targets=["toy@1.0"], exporter={exporter!r})
        def test_none(npu_check):
            npu_check(ReturnsNothing().eval(), torch.randn(1, 4))
    """)
    res = pytester.runpytest_inprocess()
    text = res.stdout.str() + res.stderr.str()
    res.assert_outcomes(failed=1)
    assert "the model returns no tensor" in text and "ReturnsNothing" in text, text[-3000:]
    assert "has no nodes" not in text and "INTERNALERROR" not in text
