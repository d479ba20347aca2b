"""cache_prune on real exports: a cache hit records its use, pruning removes the entry in one step,
and the next export of the model misses and exports again (the plain behaviour is
tests/unit/test_cache_prune.py's)."""

from __future__ import annotations

import os
import time

import pytest

torch = pytest.importorskip("torch")

from pytest_npucheck import cache_prune as cp  # noqa: E402
from pytest_npucheck.export import ExportOptions, export_model  # noqa: E402

pytestmark = pytest.mark.export


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        return torch.relu(self.conv(x))


def test_a_hit_marks_use_and_a_pruned_entry_is_exported_again(tmp_path):
    torch.manual_seed(0)
    model, x, options = Net().eval(), (torch.randn(1, 3, 8, 8),), ExportOptions(exporter="torchscript")
    first = export_model(model, x, options, tmp_path)
    entry = first.path.parent
    assert not first.cache_hit and not (entry / cp.USED_FILENAME).exists()
    second = export_model(model, x, options, tmp_path)
    assert second.cache_hit and (entry / cp.USED_FILENAME).is_file()
    # forty days later, nothing used it: an age limit removes it, with its facts and stamps
    later = time.time() + 40 * 86400
    r = cp.prune(tmp_path, max_age_days=30, now=later)
    assert [e.path for e, _ in r.removed] == [entry] and not entry.exists()
    assert r.removed[0][0].size > 0
    third = export_model(model, x, options, tmp_path)
    assert not third.cache_hit and third.path.is_file() and third.key == first.key
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [first.key]
    # used again now: a size limit below it keeps it while it may be in use (changed within the hour)
    r = cp.prune(tmp_path, max_bytes=0)
    assert r.removed == [] and [e.path for e in r.busy] == [entry] and entry.exists()
