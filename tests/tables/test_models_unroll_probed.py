"""The QNN tables judge Hiera's rank-6 token unroll as onnxruntime-qnn placed it (revision-2 erratum): one
block on the NPU, two blocks back to back rejected (the graph fails to finalize), a second block behind
an element-wise op on the CPU (pytest_npucheck/probe/models_unroll.py, HTP v73 and v68)."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_unroll import UNROLL, _unroll
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,side,channels,blocks", UNROLL, ids=[u[0] for u in UNROLL])
def test_table_reproduces_the_recorded_placement(catalog, arch, label, side, channels, blocks):
    rec = qnn_extra_record(arch, f"q.Transpose.ctx=unroll.{label}.f32.r6")
    result = match(facts_from_model(_unroll(side, channels, blocks, label.endswith(".relu")).build()),
                   catalog.table(f"qnn@2.51.0/htp-v{arch}"))
    if rec["status"] == "session_failed":
        assert "QNN_COMMON_ERROR_MEM_ALLOC" in rec["message"]
        bad = [n for n in result.nodes if n.verdict == "unsupported"]
        assert result.verdict == "unsupported" and [n.name for n in bad] == [f"focus_split{b}" for b in range(1, blocks)]
        assert any("is computed by Reshape 'focus_merge0' <- Transpose 'focus_transpose0'" in r.message
                   and r.message.endswith("the compiler rejects the model") for r in bad[0].reasons)
        return
    got = {n.name: n.verdict for n in result.nodes}
    assert {k: got[k] for k in rec["placement"]} == rec["placement"]
