"""The revision/errata records the table builders stamp on a corrected table (probe/table_errata.py)."""

from __future__ import annotations

import pytest

from pytest_npucheck.probe.table_errata import erratum, stamp

TABLE = {"format": 1, "toolchain": "qnn", "version": "2.51.0", "soc": "htp-v73", "description": "d",
         "ops": {"ai.onnx:GatherND": {"status": "npu"}}, "patterns": [{"name": "gelu_erf_div"}]}


def test_stamp_puts_revision_and_errata_after_the_soc():
    rec = erratum(2, ["ai.onnx:GatherND", "pattern:gelu_erf_div"], "what changed", "probe family x")
    out = stamp(dict(TABLE), [rec])
    assert list(out)[:6] == ["format", "toolchain", "version", "soc", "revision", "errata"]
    assert out["revision"] == 2 and out["errata"] == [rec]
    assert stamp(dict(TABLE), []) == TABLE  # no record: revision 1, no keys


def test_stamp_replaces_earlier_records_and_takes_the_newest_revision():
    old = stamp(dict(TABLE), [erratum(2, ["ai.onnx:GatherND"], "a", "e")])
    out = stamp(old, [erratum(2, ["ai.onnx:GatherND"], "a", "e"), erratum(3, ["ai.onnx:GatherND"], "b", "e")])
    assert out["revision"] == 3 and [r["change"] for r in out["errata"]] == ["a", "b"]


@pytest.mark.parametrize("args,says", [
    ((1, ["ai.onnx:GatherND"]), "revision 2 or later"),
    ((2, ["GatherND"]), "domain:op keys"),
    ((2, []), "domain:op keys"),
])
def test_erratum_refuses_bad_records(args, says):
    with pytest.raises(ValueError, match=says):
        erratum(*args, "c", "e")


def test_stamp_names_an_op_the_table_lacks():
    with pytest.raises(ValueError, match=r"\['ai.onnx:Gather'\], which the qnn 2.51.0/htp-v73 table lacks"):
        stamp(dict(TABLE), [erratum(2, ["ai.onnx:Gather"], "c", "e")])
