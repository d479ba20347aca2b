"""The QNN tables judge Einsum by the equation's form (rules.einsum, revision-2 erratum): the bundled
tables reproduce the recorded placement of every probe of the einsum_form_extra family
(pytest_npucheck/probe/models_einsum_forms.py, placed by onnxruntime-qnn 2.7.0; the oracle twin in
tests/oracle/test_rules_einsum_qnn.py places some of them again)."""

from __future__ import annotations

import json

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.probe.models_einsum_forms import EINSUM_FORMS, _einsum
from pytest_npucheck.tables import Catalog, bundled_tables_dir

ROOT = bundled_tables_dir().parent
ARCHS = ["73", "68"]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


def _recorded(arch: str) -> dict[str, dict]:
    path = ROOT / "probes" / "qnn" / "2.51.0" / f"htp-v{arch}.fp16.extra.results.json"
    doc = json.loads(path.read_text(encoding="utf-8"))
    return {p["id"]: p for p in doc["probes"] if p["id"].startswith("q.Einsum.ctx=form.")}


@pytest.mark.parametrize("arch", ARCHS)
def test_every_form_probe_is_recorded_and_the_table_reproduces_it(catalog, arch):
    recorded = _recorded(arch)
    assert len(recorded) == len(EINSUM_FORMS)
    table = catalog.table(f"qnn@2.51.0/htp-v{arch}")
    for label, eq, shapes in EINSUM_FORMS:
        rec = recorded[f"q.Einsum.ctx=form.{label}.f32.r{len(shapes[0])}"]
        assert rec["attributes"]["equation"] == eq and rec["status"] == "ok"
        want = rec["placement"]["focus_einsum"]
        assert want == ("cpu" if label.startswith("off.") else "npu"), (label, want)
        [node] = [n for n in match(facts_from_model(_einsum(eq, shapes).build()), table).nodes
                  if n.name == "focus_einsum"]
        assert node.verdict == want, (label, [r.message for r in node.reasons])
        if want == "cpu":
            assert "Einsum unsupported equation: " + eq in rec["reasons"]["focus_einsum"]


@pytest.mark.parametrize("arch", ARCHS)
def test_einsum_erratum_names_the_probe_family(arch):
    doc = json.loads((bundled_tables_dir() / "qnn" / "2.51.0" / f"htp-v{arch}.json").read_text(encoding="utf-8"))
    assert doc["revision"] == 2
    [rec] = [r for r in doc["errata"] if "ai.onnx:Einsum" in r["ops"] and "einsum_form" in r["change"]]
    assert "einsum_form_extra" in rec["evidence"] and "einsum_form" in rec["change"]
    [c] = doc["ops"]["ai.onnx:Einsum"]["constraints"]
    assert c["rule"] == "einsum_form" and c["else"] == "cpu"
