"""Edited cache entries in a real pytest run (facts_cache.py, export.py): facts.json and model.onnx
changed on disk after a run are misses that say so, never trusted."""

from __future__ import annotations

import pytest

from conftest import TOY_TABLES, edit_in_place

TOPK_SUITE = '''
import pytest, torch

class Net(torch.nn.Module):
    def forward(self, x):
        return torch.relu(torch.topk(x, 2).values)

@pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"], exporter="torchscript", numerics=False)
def test_net(npu_check):
    npu_check(Net().eval(), torch.randn(1, 8))
'''


@pytest.mark.reliability("S7")
@pytest.mark.own_export_cache(reason="edits the entries of its run's cache in .pytest_cache")
def test_edited_cache_entries_are_misses_that_say_so(pytester):
    """Renaming TopK to Relu inside a cached facts.json made a failing test PASS; a same-size edit of the
    cached model.onnx was used as is. Both fail their content hash now: the entry is not used, the
    facts (or the export) are computed again, the test still fails on TopK, and a note says why."""
    pytester.makepyfile(TOPK_SUITE)
    args = (f"--npu-tables={TOY_TABLES}", "-p", "no:randomly", "-W", "default")
    first = pytester.runpytest_subprocess(*args)
    first.assert_outcomes(failed=1)
    assert "TopK" in first.stdout.str()
    [facts] = list(pytester.path.glob(".pytest_cache/**/npucheck-exports/*/facts.json"))
    edit_in_place(facts, b'"TopK"', b'"Relu"')
    second = pytester.runpytest_subprocess(*args)
    second.assert_outcomes(failed=1)
    out = second.stdout.str()
    assert "TopK" in out and "do not match their content hash (edited or damaged)" in out
    assert b'"TopK"' in facts.read_bytes()  # written again from the model
    model = facts.parent / "model.onnx"
    edit_in_place(model, b"TopK", b"Relu")
    third = pytester.runpytest_subprocess(*args)
    third.assert_outcomes(failed=1)
    out = third.stdout.str()
    assert "TopK" in out and "does not match its content hash: model.onnx was edited or damaged" in out
    assert b"TopK" in model.read_bytes()  # the entry was exported again
