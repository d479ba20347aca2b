"""The static check, outside any test framework: model file x targets -> results."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, Sequence

from .facts_cache import load_graph_cached as load_graph
from .graph import GraphFacts
from .matcher import match
from .result import TargetResult
from .tables import Catalog, Table

_FACTS: dict[tuple[str, int, int], GraphFacts] = {}


def graph_facts(path: Path) -> GraphFacts:
    """Graph facts of a file, computed once per file content (size and mtime) in this process."""
    path = Path(path)
    st = path.stat() if path.exists() else None
    key = (os.fspath(path.resolve()), st.st_size, st.st_mtime_ns) if st else None
    if key is not None and key in _FACTS:
        return _FACTS[key]
    facts = load_graph(path, compute=_isolated_facts)
    if key is not None:
        if len(_FACTS) > 64:
            _FACTS.clear()
        _FACTS[key] = facts
    return facts


def _isolated_facts(path: Path) -> GraphFacts:
    """``graph.load_graph`` in a child process (``isolate.py``): onnx's parser and shape inference
    are native code, and a crash or hang there fails this check only."""
    from . import graph, isolate

    return isolate.call("onnx.shape_inference", graph.load_graph, path)


def check_graph(graph: GraphFacts, tables: Sequence[Table]) -> list[TargetResult]:
    """Judge one graph against several tables; the graph facts are shared."""
    return [match(graph, table) for table in tables]


def check_file(path: Path, targets: Sequence[str], catalog: Optional[Catalog] = None) -> list[TargetResult]:
    catalog = catalog or Catalog.discover()
    tables = [catalog.table(t) for t in targets]  # resolve every target before any work
    return check_graph(graph_facts(Path(path)), tables)
