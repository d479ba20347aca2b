"""The on-disk graph-facts cache: a second process reuses the facts of an unchanged model."""

from __future__ import annotations

import json
import os

import pytest

from pytest_npucheck import facts_cache
from pytest_npucheck.graph import load_graph


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A real dynamo export (source locations, defaults, small constants) in an export cache entry."""
    torch = pytest.importorskip("torch")
    import torch.nn.functional as F

    from pytest_npucheck.export import ExportOptions, export_model

    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(8)

        def forward(self, x):
            y = F.pad(self.bn(self.conv(x)), (1, 1, 1, 1), mode="reflect")
            return F.interpolate(F.gelu(y), scale_factor=2.0, mode="bilinear").reshape(1, -1)

    torch.manual_seed(0)
    cache_dir = tmp_path_factory.mktemp("exports")
    return export_model(Net().eval(), torch.randn(1, 3, 16, 16), ExportOptions(), cache_dir).path


def test_round_trip_equals_fresh_facts(exported):
    facts = load_graph(exported)
    back = facts_cache.from_json(json.loads(json.dumps(facts_cache.to_json(facts))))
    assert back == facts
    assert any(n.source is not None and n.source.line for n in back.nodes)
    assert any(t.value is not None for t in back.tensors.values())


def test_second_load_is_a_hit_beside_the_export_entry(exported, monkeypatch):
    where = facts_cache.cache_file(exported)
    assert where == exported.parent / facts_cache.FACTS_FILENAME  # beside meta.json, goes with the entry
    if where.exists():
        where.unlink()
    fresh = facts_cache.load_graph_cached(exported)
    assert where.is_file()

    def no_compute(path):
        raise AssertionError("facts recomputed although the cache is valid")

    assert facts_cache.load_graph_cached(exported, compute=no_compute) == fresh


def test_changed_file_is_a_miss(exported, tmp_path):
    copy = tmp_path / "model.onnx"
    copy.write_bytes(exported.read_bytes())
    cache_dir = tmp_path / "facts"
    facts = facts_cache.load_graph_cached(copy, cache_dir)
    assert facts_cache.load(copy, cache_dir) == facts
    st = copy.stat()
    os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # touched: content may have changed
    assert facts_cache.load(copy, cache_dir) is None
    import onnx

    proto = onnx.load(os.fspath(exported))
    proto.producer_name = "edited"
    onnx.save(proto, os.fspath(copy))  # rewritten with other content
    assert facts_cache.load(copy, cache_dir) is None
    again = facts_cache.load_graph_cached(copy, cache_dir)
    assert again == load_graph(copy) and again.producer_name.startswith("edited")


def test_other_code_version_and_damaged_documents_are_misses(exported, tmp_path, monkeypatch):
    copy = tmp_path / "model.onnx"
    copy.write_bytes(exported.read_bytes())
    cache_dir = tmp_path / "facts"
    assert facts_cache.store(copy, load_graph(copy), cache_dir)
    assert facts_cache.load(copy, cache_dir) is not None
    monkeypatch.setattr(facts_cache, "_CODE_HASH", "0.0.0/other")
    assert facts_cache.load(copy, cache_dir) is None
    monkeypatch.undo()
    where = facts_cache.cache_file(copy, cache_dir)
    where.write_text('{"key": 1')
    assert facts_cache.load(copy, cache_dir) is None


def test_files_outside_an_export_entry_are_cached_only_when_asked(exported, tmp_path):
    copy = tmp_path / "model.onnx"
    copy.write_bytes(exported.read_bytes())
    assert facts_cache.cache_file(copy) is None
    facts_cache.load_graph_cached(copy)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]  # a user's directory is never written


def test_only_real_export_entries_get_a_sidecar(tmp_path):
    lookalike = tmp_path / "models" / "model.onnx"  # a user's folder that happens to hold a meta.json
    lookalike.parent.mkdir()
    lookalike.write_bytes(b"x")
    (lookalike.parent / "meta.json").write_text("{}")
    assert facts_cache.cache_file(lookalike) is None
    entry = tmp_path / ("ab" * 32) / "model.onnx"
    entry.parent.mkdir()
    entry.write_bytes(b"x")
    (entry.parent / "meta.json").write_text("{}")
    assert facts_cache.cache_file(entry) == entry.parent / "facts.json"
