"""numerics: metrics, structural checks, the composite verdict, and the default policies on real
models (a real model passes, a real numeric bug fails)."""

from __future__ import annotations

import copy
import json
import math

import numpy as np
import pytest

from pytest_npucheck.numerics import (
    DEFAULT_POLICIES,
    Policy,
    Tolerance,
    compare_arrays,
    compare_outputs,
    policy_for,
    precision_key,
)


def _strict_json(obj):
    return json.loads(json.dumps(obj, allow_nan=False))


# --------------------------------------------------------------------------- structure


def test_broadcasting_is_refused():
    ref = np.ones((2, 3), np.float32)
    res = compare_arrays(ref, np.ones(3, np.float32))
    assert not res.passed
    assert "shape mismatch: reference [2, 3] vs candidate [3] (no broadcasting)" in res.reasons
    assert not compare_arrays(np.ones(3, np.float32), np.float32(1.0)).passed  # scalar special case


def test_dtype_must_match_exactly():
    res = compare_arrays(np.ones(3, np.float32), np.ones(3, np.float64))
    assert not res.passed
    assert "dtype mismatch: reference float32 vs candidate float64" in res.reasons[0]


def test_empty_vs_nonempty_fails_and_empty_vs_empty_passes():
    res = compare_arrays(np.ones(1, np.float32), np.ones(0, np.float32))
    assert not res.passed and "an empty candidate vs a non-empty reference" in res.reasons[0]
    both = compare_arrays(np.ones((0, 4), np.float32), np.ones((0, 4), np.float32))
    assert both.passed and both.size == 0
    assert not compare_arrays(np.ones((0, 4), np.float32), np.ones((4, 0), np.float32)).passed


def test_missing_extra_and_unknown_override_fail():
    ref = {"a": np.ones(2, np.float32), "b": np.ones(2, np.float32)}
    comp = compare_outputs(ref, {"a": np.ones(2, np.float32), "c": np.ones(2, np.float32)})
    assert not comp.passed and comp.missing == ("b",) and comp.extra == ("c",)
    pol = DEFAULT_POLICIES["fp32"].with_overrides(outputs={"typo": {"atol": 1.0}})
    comp = compare_outputs({"a": np.ones(2, np.float32)}, {"a": np.ones(2, np.float32)}, pol)
    assert not comp.passed and comp.unknown_overrides == ("typo",)


# --------------------------------------------------------------------------- integers, NaN


def test_uint8_outputs_are_labels_shown_exactly():
    """Integer outputs are compared as labels (issue 25): no arithmetic, so no wrap-around either."""
    res = compare_arrays(np.array([3, 250], np.uint8), np.array([5, 10], np.uint8),
                         Tolerance(cosine_min=None, norm_ratio_tol=None, atol=0, peak_atol=0, rtol=0))
    assert not res.passed and res.metrics is None and res.labels.flips == 2
    assert [(i, r, c) for i, r, c, _ in res.labels.flipped] == [((0,), 3, 5), ((1,), 250, 10)]


def test_int64_extremes_are_exact():
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    res = compare_arrays(np.array([lo], np.int64), np.array([hi], np.int64))
    assert res.labels.flipped[0][1:3] == (lo, hi) and res.to_json()["labels"]["flipped"][0]["candidate"] == hi


def test_nan_fails_unless_allowed():
    ref = np.array([1.0, np.nan, 3.0], np.float32)
    res = compare_arrays(ref, ref.copy())
    assert not res.passed
    assert "reference has 1 NaN and 0 Inf value(s) (first at [[1]])" in res.reasons[0]
    ok = compare_arrays(ref, ref.copy(), Tolerance(allow_nonfinite=True))
    assert ok.passed and ok.metrics.compared == 2
    # NaN where the reference is finite is a mismatch even when allowed.
    cand = np.array([1.0, np.nan, np.nan], np.float32)
    bad = compare_arrays(ref, cand, Tolerance(allow_nonfinite=True))
    assert not bad.passed and bad.out_of_tolerance == 1 and bad.worst[0].index == (2,)
    assert _strict_json(bad.to_json())["worst"][0]["candidate"] == "nan"


def test_inf_matches_only_same_sign_when_allowed():
    ref = np.array([np.inf, 1.0], np.float32)
    assert compare_arrays(ref, ref.copy(), Tolerance(allow_nonfinite=True)).passed
    assert not compare_arrays(ref, np.array([-np.inf, 1.0], np.float32), Tolerance(allow_nonfinite=True)).passed


# --------------------------------------------------------------------------- metrics


def test_cosine_is_paired_with_a_magnitude_check():
    ref = np.linspace(-1, 1, 100, dtype=np.float32)
    res = compare_arrays(ref, ref * 10, DEFAULT_POLICIES["int8"].default)
    assert res.metrics.cosine == pytest.approx(1.0)
    assert not res.passed
    assert not res.check("norm_ratio_deviation").passed


def test_zero_vectors_and_relative_floor():
    z = np.zeros(4, np.float32)
    res = compare_arrays(z, z.copy())
    assert res.passed and res.metrics.cosine == 1.0 and res.metrics.snr_db == math.inf
    assert _strict_json(res.to_json())["metrics"]["snr_db"] == "inf"
    res = compare_arrays(np.array([0.0, 100.0], np.float32), np.array([1e-3, 100.0], np.float32))
    assert res.metrics.rel_floor == pytest.approx(0.1)
    assert res.metrics.max_rel == pytest.approx(1e-2)  # 1e-3 / floor, not 1e-3 / 0


def test_failure_report_has_counts_worst_and_minimum_tolerance():
    rng = np.random.default_rng(0)
    ref = rng.standard_normal((4, 8)).astype(np.float32)
    cand = ref.copy()
    cand[2, 5] += 0.3
    cand[1, 1] -= 0.2
    res = compare_arrays(ref, cand, DEFAULT_POLICIES["fp32"].default, "logits")
    assert not res.passed and res.out_of_tolerance == 2
    assert [w.index for w in res.worst[:2]] == [(2, 5), (1, 1)]
    assert res.worst[0].reference == pytest.approx(float(ref[2, 5]))
    text = "\n".join(res.lines())
    assert "elements out of tolerance: 2 / 32" in text
    assert "FAIL cosine: needed" in text and ">= allowed 0.999999" in text
    assert "minimum tolerance that would have passed" in text
    # The reported minimum really passes (element-wise clause) and a hair less does not.
    need = res.min_passing["atol"]
    loose = Tolerance(cosine_min=None, norm_ratio_tol=None, atol=need, peak_atol=0, rtol=0)
    assert compare_arrays(ref, cand, loose).passed
    assert not compare_arrays(ref, cand, Tolerance(cosine_min=None, norm_ratio_tol=None,
                                                   atol=need * 0.99, peak_atol=0, rtol=0)).passed
    data = _strict_json(res.to_json())
    assert data["reference"]["shape"] == [4, 8] and data["out_of_tolerance"] == 2


def test_a_near_miss_prints_the_digits_that_tell_measured_from_allowed_and_a_minimum_that_passes():
    """A cosine of 0.99999998 against a bound of 0.99999999 printed as "needed 1 >= allowed 1", and its
    "minimum tolerance that would have passed" as cosine_min=1, which fails again when used."""
    import re

    rng = np.random.default_rng(3)
    ref = rng.standard_normal(4096).astype(np.float64)
    cand = ref + rng.standard_normal(4096) * 2e-4
    tol = Tolerance(cosine_min=0.99999999, norm_ratio_tol=None, atol=1.0, peak_atol=0, rtol=0)
    res = compare_arrays(ref, cand, tol, "y")
    cosine = res.metrics.cosine
    assert not res.passed and 0.999999 < cosine < 0.99999999
    text = "\n".join(res.lines())
    measured, allowed = re.search(r"FAIL cosine: needed (\S+) >= allowed (\S+)", text).groups()
    assert measured != allowed and float(allowed) == 0.99999999 and abs(float(measured) - cosine) < 1e-8
    printed = float(re.search(r"cosine_min=(\S+?)(,|$)", text, re.M).group(1))
    assert printed <= cosine  # given back as written, it passes
    assert compare_arrays(ref, cand, Tolerance(cosine_min=printed, norm_ratio_tol=None, atol=1.0, peak_atol=0,
                                               rtol=0)).passed


def test_snr_alternative_passes_isolated_int8_style_rounding():
    rng = np.random.default_rng(1)
    ref = rng.standard_normal(4096).astype(np.float32)
    cand = ref + rng.uniform(-0.01, 0.01, ref.shape).astype(np.float32)
    cand[7] += 0.9  # one element far off: element-wise clause fails
    tol = DEFAULT_POLICIES["int8"].default
    res = compare_arrays(ref, cand, tol)
    assert not res.check("out_of_tolerance_fraction").passed
    assert res.check("snr_db").passed and res.passed
    assert not compare_arrays(ref, cand, DEFAULT_POLICIES["fp16"].default).passed


def test_policy_overrides_and_precision_names():
    pol = policy_for("float16").with_overrides({"cosine_min": 0.9999}, {"boxes": {"peak_atol": 0.5}})
    assert pol.for_output("scores").cosine_min == 0.9999
    assert pol.for_output("boxes").peak_atol == 0.5 and pol.for_output("boxes").cosine_min == 0.9999
    assert precision_key("int8") == "int8" and precision_key("float32") == "fp32"
    with pytest.raises(ValueError, match="unknown precision"):
        precision_key("int4")
    with pytest.raises(ValueError, match="unknown tolerance key"):
        Tolerance().updated({"cos_min": 1})
    assert isinstance(pol, Policy) and _strict_json(pol.to_json())["overrides"]["boxes"]["peak_atol"] == 0.5


# -- integer and bool outputs are labels (issue 25, item 4) -----------------------------------------

def test_labels_count_flips_beyond_the_references_margin_and_report_near_ties():
    from pytest_npucheck.numerics import label_margins

    logits = np.array([[1.0, 1.0005, 0.0], [3.0, 0.0, 0.0], [0.0, 0.0, 2.0]], np.float32)
    ref = logits.argmax(-1)  # [1, 0, 2]
    margins = label_margins("ArgMax", logits, axis=-1, keepdims=0)
    assert np.allclose(margins, [0.0005, 3.0, 2.0], atol=1e-6)
    tol = policy_for("fp16").default  # tie tolerance 2 * 1e-2 * 3 = 0.06
    near = compare_arrays(ref, np.array([0, 0, 2]), tol, "labels", margins, 3.0)
    assert near.passed and near.labels.near_ties == 1 and near.labels.counted == 0
    assert "1 near-tie(s) within the tie tolerance 0.06 (reported, not failed)" in "\n".join(near.lines())
    real = compare_arrays(ref, np.array([1, 1, 2]), tol, "labels", margins, 3.0)
    assert not real.passed and real.labels.counted == 1 and real.metrics is None  # no float metrics on labels
    assert "FAIL label_flip_fraction: needed 0.3333" in "\n".join(real.lines())
    unknown = compare_arrays(ref, np.array([0, 0, 2]), tol, "labels")  # no logits: every flip counts
    assert not unknown.passed and "margins unknown" in "\n".join(unknown.lines())
    budgeted = compare_arrays(ref, np.array([1, 1, 2]), tol.updated({"mismatch_fraction": 0.34}), "labels",
                              margins, 3.0)
    assert budgeted.passed  # the mismatch fraction is budgetable
    mask = compare_arrays(np.array([True, False]), np.array([True, True]), tol, "mask")
    assert not mask.passed and mask.labels.flips == 1
    assert compare_arrays(logits, logits + 1e-7, tol, "logits").labels is None  # floats keep float metrics


def test_topk_margins_are_the_gap_to_the_nearer_neighbour():
    from pytest_npucheck.numerics import label_margins

    m = label_margins("TopK", np.array([[5.0, 1.0, 4.9, 0.0]]), axis=-1, k=2)
    assert np.allclose(m, [[0.1, 0.1]])  # rank 0: 5.0 vs 4.9; rank 1: 4.9 vs 5.0 (above) and 1.0 (below)
    m = label_margins("TopK", np.array([[5.0, 1.0, 3.0, 0.9]]), axis=-1, k=2, largest=1)
    assert np.allclose(m, [[2.0, 2.0]])


def test_a_label_output_is_named_by_the_models_own_name():
    c = compare_outputs({"argmax": np.array([1, 2])}, {"argmax": np.array([1, 0])}, "fp32",
                        model_names={"argmax": "labels"})
    assert not c.passed and "FAIL output 'labels' (ONNX output 'argmax')" in "\n".join(c.lines())
    assert c.to_json()["outputs"][0]["model_name"] == "labels"
