"""The QNN tables reproduce the recorded placement of the scaled_softmax_extra probes
(pytest_npucheck/probe/models_scaled_softmax.py): a Softmax along an axis other than the last of a Mul (read by
nothing else) by a rank-0 constant fails graph finalisation on HTP v73 and v68 (the whole model unsupported);
the last axis, a Div, a (1,), (1, 1, 1) or per-channel scale, a Mul another node reads, or no scale build."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_scaled_softmax import FORMS, _form
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label", list(FORMS))
def test_table_predicts_which_scaled_softmaxes_fail_to_finalize(catalog, arch, label):
    pid = f"q.Softmax.ctx=scaled.{label}.f32.r{len(FORMS[label][0])}"
    rec = qnn_extra_record(arch, pid)
    result = match(facts_from_model(_form(label).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}"))
    got = {n.name: n.verdict for n in result.nodes}
    if rec["status"] == "session_failed":
        assert "QNN_COMMON_ERROR_MEM_ALLOC" in rec["message"]
        assert result.verdict == got["focus_softmax"] == "unsupported"
    else:
        assert result.verdict != "unsupported"
        assert {k: got[k] for k in rec["placement"]} == rec["placement"]
