"""scripts/report_guard.py: the normaliser and the comparison of two recordings, on tiny documents."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "report_guard.py"
_spec = importlib.util.spec_from_file_location("report_guard", SCRIPT)
guard = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(guard)


def test_normalise_drops_timings_and_replaces_paths():
    doc = {"created": "2026-12-02T10:00:00+00:00", "tests": [
        {"nodeid": "t.py::a", "seconds": 1.5, "export": {"path": "/tmp/pytest-of-root/pytest-3/x/model.onnx",
                                                       "cache_hit": True, "key": "abc"},
         "model": {"path": "/work/repo/models/m.onnx"}, "duration_ms": 12, "value": 0.1 + 0.2}]}
    out = guard.normalise(doc, {"<repo>": "/work/repo"})
    t = out["tests"][0]
    assert "created" not in out and "seconds" not in t and "duration_ms" not in t and "cache_hit" not in t["export"]
    assert t["export"] == {"path": "<tmp>", "key": "abc"} and t["model"]["path"] == "<repo>/models/m.onnx"
    assert t["value"] == 0.3


def test_compare_names_every_difference(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    (a / "x.json").write_text(json.dumps({"n": 1, "l": [1, 2], "only_a": True}))
    (b / "x.json").write_text(json.dumps({"n": 2, "l": [1, 2, 3]}))
    (a / "y.json").write_text("{}")
    diffs = guard.compare_dirs(a, b)
    assert diffs == ["y.json: only in A", "x.json: $.l: 2 items in A, 3 in B", "x.json: $.n: 1 != 2",
                     'x.json: $.only_a: only in A: true']
    (b / "x.json").write_text((a / "x.json").read_text())
    (b / "y.json").write_text("{}")
    assert guard.compare_dirs(a, b) == []
    assert guard.main(["compare", str(a), str(b)]) == 0
