"""The QNN tables run a OneHot with int64 values on the CPU (revision-2 erratum) and reproduce which
nodes of the cut-down mixture-of-experts routers leave the NPU (pytest_npucheck/probe/models_int64_boundary.py,
placed by onnxruntime-qnn 2.7.0 on HTP v73 and v68). The two routers whose session failed (an int64
Transpose between two partitions: docs/tables.md) are recorded, not predicted. A Cast to int64
leaves the NPU only as a graph output (cast_int64_readers_extra)."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_int64_boundary import (BOUNDARY, CAST_READERS, ONEHOT_VALUES, PAD_DTYPES, _cast_readers,
                                                         _onehot, _pad, _router)
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record

LEAVES = {"cpu", "unsupported"}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("dtype", ONEHOT_VALUES)
def test_onehot_values_placement(catalog, arch, dtype):
    rec = qnn_extra_record(arch, f"q.OneHot.ctx=values.{dtype}.i64.r2")
    got = {n.name: n for n in match(facts_from_model(_onehot(dtype).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    assert {k: got[k].verdict for k in rec["placement"]} == rec["placement"]
    if dtype == "int64":
        assert rec["reasons"]["focus_onehot"] == ["Failed to add node."]
        assert "input 2" in got["focus_onehot"].reasons[0].message


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,onehot,transpose,gather", [b for b in BOUNDARY if b[0] not in ("router", "input")],
                         ids=[b[0] for b in BOUNDARY if b[0] not in ("router", "input")])
def test_router_nodes_that_leave_the_npu(catalog, arch, label, onehot, transpose, gather):
    rec = qnn_extra_record(arch, f"q.Transpose.ctx=int64_boundary.{label}.i64.r3")
    assert rec["status"] == "ok"
    got = {n.name: n.verdict for n in match(facts_from_model(_router(onehot, transpose, gather).build()),
                                            catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    assert {k for k, v in rec["placement"].items() if v in LEAVES} == {k for k in rec["placement"] if got[k] in LEAVES}


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("dtype,to", PAD_DTYPES, ids=[d for d, _ in PAD_DTYPES])
def test_pad_by_data_dtype(catalog, arch, dtype, to):
    rec = qnn_extra_record(arch, f"q.Pad.ctx=dtype.{dtype}.r2")
    got = {n.name: n for n in match(facts_from_model(_pad(dtype, to).build()), catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    # the Cast in front (folded away for float32) runs on the NPU although a CPU Pad reads its int64 result
    assert {k: got[k].verdict for k in ("focus_pad", "post_cast")} == {k: rec["placement"][k] for k in ("focus_pad", "post_cast")}
    if dtype != "float32":
        assert got["pre_cast"].verdict == rec["placement"]["pre_cast"] == "npu"
    assert (got["focus_pad"].verdict == "cpu") == (dtype != "float32")


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("label,source,output", CAST_READERS, ids=[c[0] for c in CAST_READERS])
def test_cast_to_int64_leaves_the_npu_only_as_a_graph_output(catalog, arch, label, source, output):
    rec = qnn_extra_record(arch, f"q.Cast.ctx=int64_readers.{label}.r3")
    got = {n.name: n for n in match(facts_from_model(_cast_readers(source, output).build()),
                                    catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    assert {k: got[k].verdict for k in rec["placement"]} == rec["placement"]
    assert rec["placement"]["focus_cast"] == ("cpu" if output else "npu")
    if output:
        assert rec["reasons"]["focus_cast"] == ["Failed to create Cast node."]
        assert "graph output" in got["focus_cast"].reasons[0].message
