"""The QNN tables let ScatterND take constant rank-6 indices (revision-2 erratum): they reproduce the
recorded placement of the scatternd_rank6_extra probes (pytest_npucheck/probe/models_scatter_index.py,
placed by onnxruntime-qnn 2.7.0 on HTP v73 and v68)."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_scatter_index import SCATTER, _scatter
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,lead,const", SCATTER, ids=[s[0] for s in SCATTER])
def test_table_reproduces_the_recorded_placement(catalog, arch, label, lead, const):
    rec = qnn_extra_record(arch, f"q.ScatterND.ctx=index.{label}.f32.r5")
    got = {n.name: n for n in match(facts_from_model(_scatter(lead, const).build()),
                                    catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    assert {k: got[k].verdict for k in rec["placement"]} == rec["placement"]
    if not const:  # run-time rank-6 indices: the reason says what would do
        assert "(any one of these would do)" in got["focus_scatter"].reasons[0].message
