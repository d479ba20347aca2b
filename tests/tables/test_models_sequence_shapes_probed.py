"""The QNN tables reproduce the recorded placement of the sequence_shapes_extra probes
(pytest_npucheck/probe/models_sequence_shapes.py): a GELU, elementwise chains and a Reshape to a constant
shape behind a Loop, a sequence, an If and a NonZero; and the merged_reshapes_extra probe whose no-op Expand
onnxruntime eliminates (the placement map calls it folded since the adapter knows no-op Expands)."""

from __future__ import annotations

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_sequence_shapes import SOURCES, TAILS, _model
from pytest_npucheck.tables import Catalog

from .recorded import qnn_extra_record

CASES = [(source, tail) for source in SOURCES for tail in TAILS if not (tail == "reshape" and source == "nonzero")]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


def _record(arch: str, pid: str) -> dict:
    rec = qnn_extra_record(arch, pid)
    assert rec["status"] == "ok"
    return rec


def _side(verdict: str) -> str:
    return "cpu" if verdict in ("cpu", "unsupported") else "npu"


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("source,tail", CASES, ids=[f"{s}.{t}" for s, t in CASES])
def test_table_reproduces_every_node_behind_an_opaque_source(catalog, arch, source, tail):
    rec = _record(arch, f"q.shape.ctx=opaque_source.{source}.{tail}.f32.r3")
    got = {n.name: n.verdict for n in match(facts_from_model(_model(source, tail).build()),
                                            catalog.table(f"qnn@2.51.0/htp-v{arch}")).nodes}
    # the If itself is assigned to the QNN EP when its branches are (not modelled: the table's If entry is CPU)
    real = {k: v for k, v in rec["placement"].items() if k != "src_if"}
    assert {k: _side(got[k]) for k in real} == {k: _side(v) for k, v in real.items()}
    if tail == "gelu":  # the GELU's node unit is formed only where its input shape is static
        unit = ("focus_div", "focus_erf", "focus_add", "focus_mul", "focus_mul_half")
        want = "npu" if source in ("plain", "if") else "cpu"
        assert {got[k] for k in unit} == {want} == {rec["placement"][k] for k in unit}
    if source in ("loop_seq", "seq"):  # a sequence is never folded: the SequenceEmpty runs on the CPU
        assert got["src_seq_empty"] == rec["placement"]["src_seq_empty"] == "cpu"


@pytest.mark.parametrize("arch", ["73", "68"])
def test_a_noop_expand_between_merged_reshapes_is_eliminated(catalog, arch):
    from pytest_npucheck.toolchains.qnn.probe import extra_probes

    pid = "q.Reshape.ctx=merged.r6.noop_expand.f32.r4"
    rec = _record(arch, pid)
    [probe] = extra_probes([pid])
    table = catalog.table(f"qnn@2.51.0/htp-v{arch}")
    got = {n.name: n.verdict for n in match(facts_from_model(probe.model), table).nodes}
    assert rec["placement"]["noop_expand"] == got["noop_expand"] == "folded"
    assert {k: _side(got[k]) for k in rec["placement"]} == {k: _side(v) for k, v in rec["placement"].items()}
