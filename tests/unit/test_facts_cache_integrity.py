"""The graph-facts cache's content hashes (facts_cache.py, filehash.py): a document or a model edited
in place is a miss that says why."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import helper

from conftest import edit_in_place, make_model

from pytest_npucheck import facts_cache


@pytest.mark.reliability("S7")
def test_a_model_edited_in_place_is_not_taken_for_its_cached_facts(tmp_path):
    """The model's bytes are hashed (memoised per file version, ctime included): a same-size edit that
    keeps the inode and the mtime is a miss, and the facts are computed again from the new bytes."""
    model = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="relu_aaaa")], [("x", (1, 4))], ["y"]), model)
    cache = tmp_path / "facts"
    facts_cache.load_graph_cached(model, cache)
    facts, why = facts_cache.load_checked(model, cache)
    assert facts is not None and why is None and facts.nodes[0].name == "relu_aaaa"
    edit_in_place(model, b"relu_aaaa", b"relu_bbbb")
    facts, why = facts_cache.load_checked(model, cache)
    assert facts is None and "were computed for other bytes" in why
    notes: list = []
    facts = facts_cache.load_graph_cached(model, cache, notes=notes)
    assert facts.nodes[0].name == "relu_bbbb" and notes and "computed again" in notes[0]


@pytest.mark.reliability("S7")
def test_an_edited_facts_document_is_a_miss(tmp_path):
    model = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("TopK", ["x", "k"], ["v", "i"], name="topk")], [("x", (1, 8))], ["v", "i"],
                         [onnx.numpy_helper.from_array(np.array([2], np.int64), "k")]), model)
    cache = tmp_path / "facts"
    facts_cache.load_graph_cached(model, cache)
    [doc] = list(cache.iterdir())
    edit_in_place(doc, b'"TopK"', b'"Relu"')
    facts, why = facts_cache.load_checked(model, cache)
    assert facts is None and "do not match their content hash" in why
    notes: list = []
    assert facts_cache.load_graph_cached(model, cache, notes=notes).nodes[0].op_type == "TopK" and notes
    assert os.path.getsize(doc) > 0 and b'"TopK"' in doc.read_bytes()  # written again
