"""The QNN tables leave a NonZero of a constant unfolded (revision-2 erratum, not_folded) and judge
every node whose shape depends on its result dynamic (pytest_npucheck/graph/data_shapes.py): the bundled
tables reproduce the recorded placement of every node of the nonzero_extra probes
(pytest_npucheck/probe/models_data_dependent_shape.py, placed by onnxruntime-qnn 2.7.0; the oracle
twin is tests/oracle/test_data_shapes_qnn.py)."""

from __future__ import annotations

import json

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_data_dependent_shape import NONZERO, _nonzero
from pytest_npucheck.tables import Catalog, bundled_tables_dir

from .recorded import qnn_extra_record


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,src,tail", NONZERO)
def test_table_reproduces_the_recorded_placement_of_every_node(catalog, arch, label, src, tail):
    rec = qnn_extra_record(arch, f"q.NonZero.ctx=datadep.{label}.f32.r2")
    assert rec["status"] == "ok" and rec["placement"]["focus_nonzero"] == "cpu"
    res = match(facts_from_model(_nonzero(src, tail).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}"))
    got = {n.name: n for n in res.nodes}
    for name, real in rec["placement"].items():
        assert got[name].verdict == real, (name, [r.message for r in got[name].reasons])
    if src != "runtime":  # a constant mask: the reason names the NonZero the shape depends on
        for name in ("post_rows", "post_gather"):
            assert any("is dynamic (NonZero 'focus_nonzero' result)" in r.message for r in got[name].reasons)


@pytest.mark.parametrize("arch", ["73", "68"])
def test_nonzero_erratum_and_entry(arch):
    doc = json.loads((bundled_tables_dir() / "qnn" / "2.51.0" / f"htp-v{arch}.json").read_text(encoding="utf-8"))
    [rec] = [r for r in doc["errata"] if "ai.onnx:NonZero" in r["ops"]]
    assert rec["revision"] == 2 and "nonzero_extra" in rec["evidence"]
    entry = doc["ops"]["ai.onnx:NonZero"]
    assert entry["status"] == "cpu" and {"float32", "int64", "bool"} <= set(entry["not_folded"]["dtypes"])
    assert entry["not_folded"]["probes"]
