"""Issue 22's table corrections, each pinned on a small ONNX model through the bundled tables (static
verdicts; the oracle twins in tests/oracle/test_held_out_classes.py compile the same models).

The models are the probe families' own builders (pytest_npucheck/probe/models_attention_limits.py,
models_gather_index.py): the recorded toolchain results of exactly these graphs are the evidence of
each erratum.
"""

from __future__ import annotations

import json

import pytest

from pytest_npucheck.graph import facts_from_model
from pytest_npucheck.matcher import match
from pytest_npucheck.tables import Catalog, bundled_tables_dir

RKNN = "rknn@2.5.0/rk3588"
QNN_TARGETS = ["qnn@2.51.0/htp-v73", "qnn@2.51.0/htp-v68"]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


def verdicts(catalog: Catalog, target: str, gb) -> dict[str, tuple[str, str]]:
    res = match(facts_from_model(gb.build()), catalog.table(target))
    return {n.name: (n.verdict, "; ".join(r.message for r in n.reasons)) for n in res.nodes}


# -- RKNN 2.5.0 / rk3588: the Softmax size limit -----------------------------------------------

@pytest.mark.parametrize("form,heads,tokens,want", [
    ("scores", 1, 257, "npu"),      # q @ k^T -> Softmax: 66,049 elements, on the NPU
    ("scores", 1, 302, "npu"),
    ("sdpa", 4, 302, "npu"),        # MatMul -> scale -> Softmax -> MatMul
    ("sdpa", 1, 1024, "npu"),
    ("alone", 1, 257, "cpu"),       # a Softmax of a graph input keeps the limit
    ("sdpa_mask", 4, 302, "cpu"),   # ... and of a masked Add
    ("sdpa", 1, 256, "npu"),
])
def test_rknn_softmax_limit_applies_only_off_the_scores_matmul(catalog, form, heads, tokens, want):
    from pytest_npucheck.probe.models_attention_limits import _softmax_attention

    verdict, why = verdicts(catalog, RKNN, _softmax_attention(form, heads, tokens))["focus_softmax"]
    assert verdict == want, why
    if want == "cpu":
        assert f"{tokens * tokens} elements over axes [2, 3] > 65536" in why
        assert "is not computed by MatMul" in why or "is computed by Add" in why or "graph input" in why


# -- RKNN 2.5.0 / rk3588: a broadcast mask Where straight into a Softmax -----------------------

@pytest.mark.parametrize("kw,want", [
    ({}, "unsupported"),                                             # int64 -> bool -> Reshape -> Where -> Softmax
    ({"src": "bool", "layout": "input"}, "unsupported"),             # a (1, 1, 1, T) bool input
    ({"src": "float32", "to": "greater"}, "unsupported"),            # no integer anywhere
    ({"src": "bool", "layout": "none", "use": "where_full"}, "npu"),  # (1, 1, T, T): built
    ({"src": "bool", "use": "where_relu"}, "npu"),                   # read by a Relu: built
    ({"src": "bool", "use": "where_add"}, "npu"),                    # Where(m, 0, -big) + scores: built
])
def test_rknn_broadcast_mask_where_into_softmax_is_rejected(catalog, kw, want):
    from pytest_npucheck.probe.models_attention_limits import _mask_path

    verdict, why = verdicts(catalog, RKNN, _mask_path(**kw))["post_where"]
    assert verdict == want, why
    if want == "unsupported":
        assert "its result feeds Softmax 'post_softmax'" in why and "dim 2 is 1" in why


# -- QNN 2.51.0: GatherND by data dtype and index rank ------------------------------------------

@pytest.mark.parametrize("target", QNN_TARGETS)
@pytest.mark.parametrize("kw,want,says", [
    ({}, "cpu", "dtype bool"),                                        # the dynamo padding-mask lookup
    ({"lead": []}, "cpu", "dtype bool"),                              # bool data, rank-2 indices
    ({"dtype": "float32"}, "cpu", "has rank 5"),                      # rank-5 indices
    ({"dtype": "float32", "lead": [1, 1]}, "npu", ""),                # rank-4 indices
    ({"dtype": "int64"}, "unsupported", "has rank 5"),                # the session fails to finalize
    ({"dtype": "int64", "lead": [1, 1]}, "npu", ""),
])
def test_qnn_gathernd_by_dtype_and_index_rank(catalog, target, kw, want, says):
    from pytest_npucheck.probe.models_gather_index import _gathernd

    gb, _ = _gathernd(**kw)
    verdict, why = verdicts(catalog, target, gb)["focus_gathernd"]
    assert verdict == want, why
    assert says in why


# -- the revision and errata records -------------------------------------------------------------

@pytest.mark.parametrize("rel,ops", [
    ("rknn/2.5.0/rk3588.json", {"ai.onnx:Softmax", "ai.onnx:Where"}),
    ("qnn/2.51.0/htp-v73.json", {"ai.onnx:GatherND"}),
    ("qnn/2.51.0/htp-v68.json", {"ai.onnx:GatherND"}),
])
def test_corrected_tables_are_revision_2_with_errata(rel, ops):
    doc = json.loads((bundled_tables_dir() / rel).read_text(encoding="utf-8"))
    assert doc["revision"] == 2
    assert {op for rec in doc["errata"] for op in rec["ops"]} == ops
    for rec in doc["errata"]:
        assert rec["revision"] == 2 and rec["change"] and "probe family" in rec["evidence"]
        assert all(op in doc["ops"] for op in rec["ops"])


@pytest.mark.parametrize("rel", ["qnn/2.49.40/htp-v73.json", "rknn/2.5.0/rk3576.json", "rknn/2.3.2/rk3588.json"])
def test_tables_not_probed_again_stay_revision_1(rel):
    doc = json.loads((bundled_tables_dir() / rel).read_text(encoding="utf-8"))
    assert "revision" not in doc and "errata" not in doc
