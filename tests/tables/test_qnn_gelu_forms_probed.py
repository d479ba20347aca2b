"""GELU forms the QNN 2.51.0 tables place as onnxruntime-qnn 2.7.0 did (HTP v73 and v68, probes of
toolchains/qnn/probe.py extra_probes): ``x * (1 + erf(x / sqrt2))`` without the 0.5 keeps its Erf on
the CPU (no Gelu node unit), which the lone-Erf entry predicts. ``Mul(x, 0.5)`` computed beside the Erf
branch and joined by one Mul in either operand order (SEW-D's intermediate activation) is grouped into
one Gelu node unit and runs on the NPU: patterns ``gelu_erf_{div,mul}_x_half``, whose half is a second
branch from x (``same_input_as``), an erratum of revision 2."""

from __future__ import annotations

import json

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.tables import Catalog, bundled_tables_dir
from pytest_npucheck.toolchains.qnn.probe import extra_probes

from .recorded import qnn_extra_record

ROOT = bundled_tables_dir().parent
FORMS = [f"q.pattern.gelu_erf.{first}.{form}.f32.r3" for first in ("div", "mul")
         for form in ("x_half_first", "x_half_first.swapped", "no_half")]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.fixture(scope="module")
def models() -> dict:
    return {p.id: p.model for p in extra_probes(FORMS)}


@pytest.mark.parametrize("arch", ["73", "68"])
@pytest.mark.parametrize("pid", FORMS)
def test_gelu_form_placement(catalog, models, arch, pid):
    rec = qnn_extra_record(arch, pid)
    table = catalog.table(f"qnn@2.51.0/htp-v{arch}")
    got = {n.name: n.verdict for n in match(facts_from_model(models[pid]), table).nodes}
    others = {k for k in rec["placement"] if k != "gelu_erf"}
    assert {k: got[k] for k in others} == {k: rec["placement"][k] for k in others} == {k: "npu" for k in others}
    assert rec["placement"]["gelu_erf"] == got["gelu_erf"]
    assert got["gelu_erf"] == ("cpu" if pid.endswith("no_half.f32.r3") else "npu")
    doc = json.loads((ROOT / "op_support_tables" / "qnn" / "2.51.0" / f"htp-v{arch}.json")
                     .read_text(encoding="utf-8"))
    assert f"probe {pid}: Erf gelu_erf -> table says cpu, onnxruntime-qnn npu" not in doc["provenance"]["errata"]
    form = pid.split(".")[3]
    [pat] = [p for p in doc["patterns"] if p["name"] == f"gelu_erf_{form}_x_half"]
    assert pid in pat["probes"]
    assert any(e["revision"] == 2 and e["ops"] == ["ai.onnx:Erf"] and f"gelu_erf_{form}_x_half" in e["change"]
               for e in doc["errata"])

