"""The QNN tables reproduce the recorded placement of the conv_channel_split_extra probes
(pytest_npucheck/probe/models_conv_channel_split.py): a Conv's channels split into a rank-5 (N, a, C / a, H, W)
with a unit H (v68) or a unit H or W (v73) fails graph finalisation (the whole model unsupported); a plane
without such a dim, a rank-4 or rank-6 target, another layout or another producer build."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_conv_channel_split import SPLITS, _split
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label", list(SPLITS))
def test_table_predicts_which_channel_splits_fail_to_finalize(catalog, arch, label):
    pid = f"q.Reshape.ctx=conv_split.{label}.f32.r{len(SPLITS[label][3])}"
    rec = qnn_extra_record(arch, pid)
    result = match(facts_from_model(_split(label).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}"))
    got = {n.name: n.verdict for n in result.nodes}
    if rec["status"] == "session_failed":
        assert "QNN_COMMON_ERROR_MEM_ALLOC" in rec["message"]
        assert result.verdict == got["focus_reshape"] == "unsupported"
    else:
        assert result.verdict != "unsupported"
        assert {k: got[k] for k in rec["placement"]} == rec["placement"]
