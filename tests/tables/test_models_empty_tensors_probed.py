"""The QNN tables judge ops on empty tensors as onnxruntime-qnn placed them (revision-2 erratum, generic
rule nonempty): they reproduce the recorded placement of the empty_extra probes
(pytest_npucheck/probe/models_empty_tensors.py, HTP v73 and v68), a session that failed included."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_empty_tensors import EMPTY, _empty
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,op,start", EMPTY, ids=[e[0] for e in EMPTY])
def test_table_reproduces_the_recorded_placement(catalog, arch, label, op, start):
    rec = qnn_extra_record(arch, f"q.{op}.ctx=empty.{label}.f32.r4")
    result = match(facts_from_model(_empty(label, op, start).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}"))
    got = {n.name: n for n in result.nodes}
    if rec["status"] == "session_failed":  # 'Failed to compose Qnn graph': the node that reads the empty tensor
        assert "graphAddNode() failed" in rec["message"]
        assert result.verdict == "unsupported"
        bad = [n for n in result.nodes if n.verdict == "unsupported"]
        assert [n.name for n in bad] == ["post_neg" if label == "slice_neg" else "focus_op"]
        assert "is empty" in bad[0].reasons[0].message
        return
    assert {k: got[k].verdict for k in rec["placement"]} == rec["placement"]
    if rec["placement"]["focus_op"] == "cpu":
        assert "Failed to add node." in rec["reasons"]["focus_op"][0]
        assert "is empty" in got["focus_op"].reasons[0].message
