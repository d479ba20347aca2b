"""budget: the file format, release in force, tightening rules, stale entries, the report entry."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest

from pytest_npucheck.budget import (
    BudgetError,
    Budgets,
    TargetBudget,
    check_tightening,
    load_budgets,
    parse_version,
    report_entry,
    validate,
)
from pytest_npucheck.jsonio import JsonFileError, dumps
from pytest_npucheck.numerics import compare_outputs

DOC = {
    "format": 1,
    "releases": {
        "1.2.0": {
            "tests": {
                "tests/test_models.py::test_resnet[rk3588]": {
                    "precision": "fp16",
                    "default": {"cosine_min": 0.9995},
                    "outputs": {"logits": {"peak_atol": 0.01}},
                },
                "*bert*": {"precision": "int8", "default": {"snr_db_min": 20}},
            },
            "targets": {
                "rknn@2.5.0/rk3588": {"max_cpu_fallback_nodes": 2, "min_npu_share": 0.9},
                "qnn@*": {"max_cpu_fallback_nodes": 0},
            },
        },
        "1.3.0": {"tests": {"*bert*": {"precision": "int8", "default": {"snr_db_min": 25}}}},
    },
}


def _write(tmp_path: Path, doc) -> Path:
    p = tmp_path / "npu-budgets.json"
    p.write_text(dumps(doc))
    return p


def test_load_and_lookup(tmp_path):
    b = load_budgets(_write(tmp_path, DOC))
    assert b.release_in_force("1.2.7") == "1.2.0"
    assert b.release_in_force("1.3.0.dev2") == "1.3.0"
    assert b.release_in_force("1.1.9") is None and b.for_test("1.1.9", "x") is None
    tb = b.for_test("1.2.1", "tests/test_models.py::test_resnet[rk3588]")
    assert tb.key == "tests/test_models.py::test_resnet[rk3588]" and tb.precision == "fp16"
    assert tb.policy.default.cosine_min == 0.9995 and tb.policy.default.snr_db_min == 40.0
    assert tb.policy.for_output("logits").peak_atol == 0.01
    assert tb.policy.for_output("logits").cosine_min == 0.9995
    by_model = b.for_test("1.2.0", "tests/test_nlp.py::test_encoder", model_name="bert_tiny")
    assert by_model.key == "*bert*" and by_model.policy.default.snr_db_min == 20
    assert b.for_test("1.3.0", "t", model_name="bert_tiny").policy.default.snr_db_min == 25
    tgt = b.for_target("1.2.0", "qnn@2.51.0/htp-v73")
    assert tgt.key == "qnn@*" and tgt.problems(1, 1.0) == [
        "1 CPU-fallback node(s) over max_cpu_fallback_nodes 0 (release 1.2.0, entry 'qnn@*')"]
    rk = b.for_target("1.2.0", "rknn@2.5.0/rk3588")
    assert rk.problems(2, 0.9) == [] and "NPU share by nodes 0.85 below min_npu_share 0.9" in rk.problems(0, 0.85)[0]


def test_node_share_and_mac_share_are_named_and_bounded_apart():
    """One ArgMax on the CPU: 0.75 of the nodes, 99.9% of the MACs on the NPU (issue 25)."""
    nodes_only = TargetBudget("1.0.0", "rknn@*", None, 0.9)
    [p] = nodes_only.problems(1, 0.75, 0.999)
    assert "NPU share by nodes 0.75 below min_npu_share 0.9; by MACs it is 0.999" in p
    macs = TargetBudget("1.0.0", "rknn@*", None, None, 0.99)
    assert macs.problems(1, 0.75, 0.999) == []
    assert "NPU share by MACs 0.5 below min_npu_mac_share 0.99" in macs.problems(1, 0.75, 0.5)[0]
    measured = macs.measure(1, 0.75, 0.999)
    assert measured["npu_mac_share"] == 0.999 and measured["npu_mac_share_margin"] == pytest.approx(0.009)
    assert validate({"format": 1, "releases": {"1.0.0": {"targets": {"x@*": {"min_npu_mac_share": 0.99}}}}}) == []
    assert check_tightening({"format": 1, "releases": {"1.0.0": {"targets": {"x@*": {"min_npu_mac_share": 0.99}}}}},
                            {"format": 1, "releases": {"1.0.0": {"targets": {"x@*": {"min_npu_mac_share": 0.9}}}}})


def test_precision_is_optional_and_per_target_never_silently_changing_a_default():
    doc = {"format": 1, "releases": {"1.0.0": {"tests": {
        "t_none": {"default": {"cosine_min": 0.99}},
        "t_map": {"precision": {"rknn@*": "fp16"}},
        "t_all": {"precision": "fp16"}}}}}
    assert validate(doc) == []
    b = Budgets(doc)
    none = b.for_test("1.0.0", "t_none")
    assert none.precision_for("snpe@2025.08/htp", "int8") == ("int8", None)  # the table's default, no note
    assert none.policy_for("int8").default.cosine_min == 0.99 and none.policy_for("int8").default.snr_db_min == 14.0
    per_target = b.for_test("1.0.0", "t_map")
    assert per_target.precision_for("snpe@2025.08/htp", "int8") == ("int8", None)  # another target keeps its own
    assert per_target.precision_for("rknn@2.5.0/rk3588", "float16") == ("fp16", None)
    key, note = b.for_test("1.0.0", "t_all").precision_for("snpe@2025.08/htp", "int8")
    assert key == "fp16" and "sets precision fp16 for snpe@2025.08/htp, whose table default is int8" in note
    # tightening is judged at every precision an entry without one may run at
    looser = {"format": 1, "releases": {"1.0.0": {"tests": {"t_none": {"default": {"cosine_min": 0.9}}}}}}
    tight = {"format": 1, "releases": {"1.0.0": {"tests": {"t_none": {"default": {"cosine_min": 0.99}}}}}}
    assert any("fp16:*.cosine_min loosened 0.99 -> 0.9" in p for p in check_tightening(tight, looser))


def test_strict_json_and_schema(tmp_path):
    p = tmp_path / "b.json"
    p.write_text('{"format": 1, "releases": {}, "format": 1}')
    with pytest.raises(JsonFileError, match="duplicate key"):
        load_budgets(p)
    bad = copy.deepcopy(DOC)
    bad["releases"]["1.2"] = {}
    bad["releases"]["1.2.0"]["tests"]["*bert*"]["default"]["cos_min"] = 1
    with pytest.raises(BudgetError) as info:
        load_budgets(_write(tmp_path, bad))
    msg = str(info.value)
    assert "releases: '1.2' does not match" in msg
    assert "releases/1.2.0/tests/*bert*/default: Additional properties are not allowed ('cos_min'" in msg
    assert validate(DOC) == []
    assert parse_version("v2.0.1rc1") == (2, 0, 1)


def test_loosening_fails_unless_approved_in_this_change():
    new = copy.deepcopy(DOC)
    entry = new["releases"]["1.2.0"]["tests"]["tests/test_models.py::test_resnet[rk3588]"]
    entry["default"]["cosine_min"] = 0.999
    entry["outputs"]["logits"]["peak_atol"] = 0.005  # a tightening: fine
    problems = check_tightening(DOC, new)
    # The default loosened, and with it the output that inherits cosine_min from the default.
    assert len(problems) == 2
    assert problems[0].startswith(
        "releases/1.2.0/tests/tests/test_models.py::test_resnet[rk3588]: *.cosine_min loosened 0.9995 -> 0.999")
    assert ": logits.cosine_min loosened 0.9995 -> 0.999" in problems[1]
    assert '"loosened"' in problems[0]
    entry["loosened"] = {"reason": "fp16 accumulation in RKNN 2.5 softmax", "approved_by": "jdoe"}
    assert check_tightening(DOC, new) == []
    # The same approval does not cover a second loosening in a later change.
    newer = copy.deepcopy(new)
    newer["releases"]["1.2.0"]["tests"]["tests/test_models.py::test_resnet[rk3588]"]["default"]["cosine_min"] = 0.99
    assert check_tightening(new, newer) and "0.999 -> 0.99" in check_tightening(new, newer)[0]


def test_target_loosening_and_removed_entries():
    new = copy.deepcopy(DOC)
    new["releases"]["1.2.0"]["targets"]["rknn@2.5.0/rk3588"]["max_cpu_fallback_nodes"] = 3
    del new["releases"]["1.2.0"]["targets"]["qnn@*"]["max_cpu_fallback_nodes"]
    problems = check_tightening(DOC, new)
    assert any("rknn@2.5.0/rk3588: max_cpu_fallback_nodes loosened 2 -> 3" in p for p in problems)
    assert any("qnn@*: max_cpu_fallback_nodes loosened 0 -> None" in p for p in problems)
    gone = copy.deepcopy(DOC)
    del gone["releases"]["1.2.0"]["tests"]["*bert*"]
    assert "entry removed from an existing release" in check_tightening(DOC, gone)[0]
    retired = copy.deepcopy(DOC)
    del retired["releases"]["1.2.0"]
    assert check_tightening(DOC, retired) == []


def test_disabling_the_snr_alternative_is_a_tightening_and_precision_swap_is_not_allowed():
    new = copy.deepcopy(DOC)
    new["releases"]["1.2.0"]["tests"]["*bert*"]["default"]["snr_db_min"] = None
    assert check_tightening(DOC, new) == []
    new["releases"]["1.2.0"]["tests"]["*bert*"]["precision"] = "fp16"
    assert any("precision changed" in p for p in check_tightening(DOC, new))


def test_within_a_release_line_budgets_only_tighten():
    doc = copy.deepcopy(DOC)
    doc["releases"]["1.2.1"] = {"tests": {"*bert*": {"precision": "int8", "default": {"snr_db_min": 15}}}}
    problems = check_tightening(None, doc)
    assert problems == [
        "releases/1.2.1/tests/*bert* (vs 1.2.0): *.snr_db_min loosened 20.0 -> 15.0 (budgets only"
        ' tighten; to loosen, add a new "loosened": {"reason": ..., "approved_by": ...} record to'
        " this entry)"]
    # A new line (1.3.0 vs 1.2.x) may start from any budget.
    doc["releases"]["1.2.1"]["tests"]["*bert*"]["default"]["snr_db_min"] = 22
    doc["releases"]["1.3.0"]["tests"]["*bert*"]["default"]["snr_db_min"] = 10
    assert check_tightening(None, doc) == []


def test_stale_entries():
    b = Budgets(DOC)
    used = {b.for_test("1.2.0", "x", model_name="bert_tiny").key, b.for_target("1.2.0", "rknn@2.5.0/rk3588").key}
    assert b.stale("1.2.0", used) == [
        "releases/1.2.0/tests/tests/test_models.py::test_resnet[rk3588]",
        "releases/1.2.0/targets/qnn@*",
    ]


def test_report_entry_has_metrics_budget_and_margin():
    b = Budgets(DOC)
    tb = b.for_test("1.2.0", "tests/test_models.py::test_resnet[rk3588]")
    ref = {"logits": np.linspace(-1, 1, 50, dtype=np.float32), "aux": np.ones(3, np.float32)}
    cand = {"logits": ref["logits"] + np.float32(0.001), "aux": np.array([1, 1, np.nan], np.float32)}
    comp = compare_outputs(ref, cand, tb.policy)
    entry = report_entry("tests/test_models.py::test_resnet[rk3588]", comp, tb,
                         b.for_target("1.2.0", "rknn@2.5.0/rk3588"), cpu_fallback_nodes=1, npu_share=0.93)
    text = json.dumps(entry, allow_nan=False)  # JSON-safe
    data = json.loads(text)
    logits = data["outputs"][0]
    assert logits["name"] == "logits" and logits["passed"]
    assert logits["applied"]["peak_atol"] == 0.01 and logits["applied"]["cosine_min"] == 0.9995
    assert logits["margin"]["max_abs"] == pytest.approx(0.01 - 0.001, abs=1e-6)
    assert logits["margin"]["cosine"] > 0
    assert data["outputs"][1]["passed"] is False and "NaN" in data["outputs"][1]["reasons"][0]
    assert data["budget"] == {"release": "1.2.0", "key": "tests/test_models.py::test_resnet[rk3588]",
                              "precision": "fp16", "loosened": None}
    assert data["target"]["fallback_margin"] == 1
    assert data["target"]["npu_share_margin"] == pytest.approx(0.03)
    assert data["target"]["problems"] == []


def test_schema_is_a_valid_json_schema():
    import jsonschema

    from pytest_npucheck.budget import SCHEMA_PATH
    from pytest_npucheck.jsonio import load_strict

    schema = load_strict(SCHEMA_PATH)
    jsonschema.validators.validator_for(schema).check_schema(schema)
