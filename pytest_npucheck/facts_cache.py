"""On-disk cache of graph facts, so an unchanged model is not re-analysed by the next pytest run.

Graph facts (``graph.GraphFacts``) cost an ONNX load plus shape inference (and a node-by-node walk
where it left shapes unknown); a second run of an unchanged test should pay neither. The facts are written as
JSON (never pickle: the cache directory is shared, and JSON cannot run code) next to the model:

* for a model inside an export cache entry (``<key>/model.onnx`` beside ``meta.json``, see
  ``export.py``) the facts live in ``<entry>/facts.json``, so they go when the entry goes;
* for any other file, in ``<cache_dir>/<hash of the path>.json`` when a ``cache_dir`` is given,
  otherwise nowhere (a user's model directory is never written to).

A cached document is used only when everything the facts depend on is unchanged: the file's
path, size, mtime and inode, the package version, the ONNX version (shape inference) and the
source of every module the facts depend on (``FACTS_SOURCES``: the ``graph`` package, which
computes them, what it imports from the rest of the package, this module, which writes them, and
the ``rules`` package). Anything else is a miss; a damaged or foreign document is a miss too, never
an error.

This module is the one cache of facts, in two layers: ``graph_facts`` keeps the facts of each file
version in this process too (a pytest run checks one exported file once per target and test) and
falls back to the documents on disk. The process-wide memos inside ``graph`` hold no facts: they
remember the parse of strings many nodes share (``graph.location``: scopes and stack traces) and
ONNX's operator schemas (``graph.schema``), which are fixed for a process; ``prepass`` and the
matcher compute per table what the facts are as one toolchain sees them, and keep nothing.

A document is a header line (the key, the SHA-256 of the model file and the SHA-256 of the facts
text) and the facts text. Both hashes are checked on every read: an edited document (an op renamed
inside it made a failing test pass) or a model edited in place without changing its size or mtime
is a miss that says so (``load_checked``), and the facts are computed again. A hash catches edits
and damage, not a forger who rewrites the hash too: the cache directory is as trusted as the code.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Optional

from .graph import GraphFacts, NodeFact, SourceLocation, TensorInfo
from .jsonio import loads_strict

FORMAT = "npucheck-facts-v2"
#: Name of the facts file inside an export cache entry.
FACTS_FILENAME = "facts.json"
# export.MODEL_FILENAME / META_FILENAME; not imported, to keep this module free of export.py
_EXPORT_MODEL, _EXPORT_META = "model.onnx", "meta.json"

#: The source the facts depend on, relative to the package: packages (every module in them) and
#: modules. ``graph`` imports ``errors`` and ``safety`` from outside itself (a unit test checks this
#: list against the package's static imports); the facts' JSON form is written here.
FACTS_SOURCES = ("graph", "rules", "errors.py", "safety.py", "facts_cache.py")

_CODE_HASH: Optional[str] = None


def source_files(root: Optional[Path] = None) -> list[Path]:
    """The files of ``FACTS_SOURCES`` under ``root`` (the installed package by default), in a fixed order."""
    root = Path(__file__).parent if root is None else Path(root)
    files: list[Path] = []
    for name in FACTS_SOURCES:
        where = root / name
        files += sorted(where.rglob("*.py")) if where.is_dir() else [where]
    return files


def code_hash(root: Optional[Path] = None) -> str:
    """A hash of the names and contents of ``source_files(root)``."""
    root = Path(__file__).parent if root is None else Path(root)
    h = hashlib.sha256()
    for f in source_files(root):
        data = f.read_bytes()
        h.update(f"{f.relative_to(root).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()[:16]


def _code_version() -> str:
    """Package version, ONNX version and a hash of the code that computes the facts."""
    global _CODE_HASH
    if _CODE_HASH is None:
        from importlib.metadata import PackageNotFoundError, version

        from . import __version__

        try:
            onnx_version = version("onnx")
        except PackageNotFoundError:  # pragma: no cover - onnx is a dependency
            onnx_version = "?"
        _CODE_HASH = f"{__version__}/onnx-{onnx_version}/graph-{code_hash()}"
    return _CODE_HASH


def file_key(path: Path) -> Optional[dict[str, Any]]:
    """What identifies the content of ``path`` without reading it; None if it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return {"path": os.fspath(Path(path).resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns,
            "inode": st.st_ino, "code": _code_version(), "format": FORMAT}


def _in_export_entry(model_path: Path) -> bool:
    """``<64-hex key>/model.onnx`` beside ``meta.json``: an entry of export.py's cache."""
    key = model_path.parent.name
    return (model_path.name == _EXPORT_MODEL and len(key) == 64 and all(c in "0123456789abcdef" for c in key)
            and (model_path.parent / _EXPORT_META).is_file())


def cache_file(model_path: Path, cache_dir: Optional[Path] = None) -> Optional[Path]:
    """Where the facts of ``model_path`` are cached, or None when they are not cached at all."""
    model_path = Path(model_path)
    if _in_export_entry(model_path):
        return model_path.parent / FACTS_FILENAME
    if cache_dir is None:
        return None
    digest = hashlib.sha256(os.fspath(model_path.resolve()).encode("utf-8", "surrogateescape")).hexdigest()
    return Path(cache_dir) / f"{digest[:32]}.json"


# -- GraphFacts <-> JSON ---------------------------------------------------------------------------

def _tensor_to_json(t: TensorInfo) -> list[Any]:
    row: list[Any] = [t.dtype, None if t.shape is None else list(t.shape)]
    if t.const or t.value is not None:
        row += [t.const, None if t.value is None else list(t.value)]
    return row


def _tensor_from_json(name: str, row: list[Any]) -> TensorInfo:
    shape = None if row[1] is None else tuple(row[1])
    if len(row) == 2:
        return TensorInfo(name, row[0], shape)
    return TensorInfo(name, row[0], shape, bool(row[2]), None if row[3] is None else tuple(row[3]))


def to_json(facts: GraphFacts) -> dict[str, Any]:
    """A JSON document of ``facts`` (producer/consumer maps are derived, so not stored)."""
    defaults: list[Any] = []  # every node of one op shares its schema-defaults dict: store it once
    default_ids: dict[int, int] = {}
    sources: list[Any] = []
    source_ids: dict[SourceLocation, int] = {}
    nodes = []
    for n in facts.nodes:
        ref = id(n.defaults) if n.defaults else 0
        d = default_ids.get(ref)
        if d is None:
            d = default_ids[ref] = len(defaults)
            defaults.append(n.defaults)
        s = None
        if n.source is not None:
            s = source_ids.get(n.source)
            if s is None:
                s = source_ids[n.source] = len(sources)
                sources.append([n.source.module, n.source.file, n.source.line, n.source.code, n.source.function])
        nodes.append([n.index, n.name, n.op_type, n.domain, n.inputs, n.outputs,
                      {k: v for k, v in n.attrs.items() if k in n.explicit_attrs or n.defaults.get(k, v) != v},
                      sorted(n.explicit_attrs), d, n.graph, s, n.opset, n.subgraphs])
    return {
        "path": facts.path,
        "opsets": facts.opsets,
        "ir_version": facts.ir_version,
        "inputs": facts.inputs,
        "outputs": facts.outputs,
        "initializers": sorted(facts.initializers),
        "producer_name": facts.producer_name,
        "shape_inference_error": facts.shape_inference_error,
        "dynamic_rank": sorted(facts.dynamic_rank),
        "topological": facts.topological,
        "defaults": defaults,
        "sources": sources,
        "nodes": nodes,
        "tensors": {name: _tensor_to_json(t) for name, t in facts.tensors.items()},
    }


def from_json(doc: dict[str, Any], path: Optional[str] = None) -> GraphFacts:
    """The GraphFacts of a document written by :func:`to_json` (``path`` overrides the stored one)."""
    defaults = doc["defaults"]
    sources = [SourceLocation(*row) for row in doc["sources"]]
    nodes = []
    for index, name, op_type, domain, inputs, outputs, attrs, explicit, d, graph, s, opset, subgraphs in doc["nodes"]:
        dflt = defaults[d]
        if dflt:
            attrs = {**attrs, **{k: v for k, v in dflt.items() if k not in attrs}}
        nodes.append(NodeFact(
            index=index, name=name, op_type=op_type, domain=domain, inputs=tuple(inputs), outputs=tuple(outputs),
            attrs=attrs, explicit_attrs=frozenset(explicit), defaults=dflt, graph=graph,
            source=None if s is None else sources[s], opset=opset, subgraphs=tuple(subgraphs),
        ))
    return GraphFacts(
        path=doc["path"] if path is None else path,
        opsets=doc["opsets"],
        ir_version=doc["ir_version"],
        nodes=tuple(nodes),
        tensors={name: _tensor_from_json(name, row) for name, row in doc["tensors"].items()},
        inputs=tuple(doc["inputs"]),
        outputs=tuple(doc["outputs"]),
        initializers=frozenset(doc["initializers"]),
        producer_name=doc["producer_name"],
        shape_inference_error=doc["shape_inference_error"],
        dynamic_rank=frozenset(doc["dynamic_rank"]),
        # partition's order check; a document of before it: None (unknown). first_of_signatures is
        # not stored: validity looks only at facts just computed
        topological=doc.get("topological"),
    )


# -- the cache ----------------------------------------------------------------------------------

def load(model_path: Path, cache_dir: Optional[Path] = None) -> Optional[GraphFacts]:
    """Cached facts of ``model_path``, or None on a miss (changed file, other code, damaged cache)."""
    return load_checked(model_path, cache_dir)[0]


def load_checked(model_path: Path, cache_dir: Optional[Path] = None) -> tuple[Optional[GraphFacts], Optional[str]]:
    """(facts, None) on a hit; (None, why) when a document exists but fails its content hashes (the
    caller says so); (None, None) on any other miss."""
    from .filehash import sha256_bytes, sha256_file

    where = cache_file(model_path, cache_dir)
    if where is None:  # not cached at all: no key (its code hash reads every graph/ and rules/ source)
        return None, None
    key = file_key(model_path)
    if key is None:
        return None, None
    try:
        raw = where.read_bytes()
        head, sep, body = raw.partition(b"\n")
        header = loads_strict(head)
        if not sep or not isinstance(header, dict) or header.get("key") != key:
            return None, None
        if header.get("facts_sha256") != sha256_bytes(body):
            return None, f"cached graph facts {where} do not match their content hash (edited or damaged): ignored"
        if header.get("model_sha256") != sha256_file(model_path):
            return None, (f"cached graph facts {where} were computed for other bytes of {model_path} (edited in "
                          "place, same size and time): ignored")
        return from_json(loads_strict(body), path=str(model_path)), None
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return None, None


def store(model_path: Path, facts: GraphFacts, cache_dir: Optional[Path] = None) -> bool:
    """Write the facts of ``model_path``; False when they are not cacheable or cannot be written."""
    from .filehash import sha256_bytes, sha256_file

    where = cache_file(model_path, cache_dir)
    if where is None:
        return False
    key = file_key(model_path)
    if key is None:
        return False
    try:
        # allow_nan=False: a NaN constant makes the facts uncacheable rather than the JSON non-standard
        body = json.dumps(to_json(facts), allow_nan=False, separators=(",", ":")).encode("utf-8")
        head = json.dumps({"key": key, "model_sha256": sha256_file(model_path), "facts_sha256": sha256_bytes(body)},
                          separators=(",", ":")).encode("utf-8")
    except (TypeError, ValueError, OSError):  # e.g. an attribute value JSON cannot hold
        return False
    tmp = where.with_name(f".{where.name}.{os.getpid()}.tmp")
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(head + b"\n" + body)
        os.replace(tmp, where)  # readers see the old document or the new one, never a partial one
    except OSError:
        try:
            tmp.unlink()
        except OSError:
            pass
        return False
    return True


_IN_PROCESS: dict[tuple[str, int, int, int, int], GraphFacts] = {}
_IN_PROCESS_MAX = 64  # files: the memo is emptied when it holds more (a long run over many models)


def graph_facts(model_path: Path, compute: Optional[Callable[[Path], GraphFacts]] = None,
                notes: Optional[list[str]] = None) -> GraphFacts:
    """``load_graph_cached(model_path, compute=compute, notes=notes)``, computed once per file version
    in this process: the key is the resolved path, size, mtime, inode and ctime (an edit in place that
    keeps the size and the mtime still changes the ctime); a file that cannot be stat'ed is not kept."""
    path = Path(model_path)
    st = path.stat() if path.exists() else None
    key = (os.fspath(path.resolve()), st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns) if st else None
    if key is not None and key in _IN_PROCESS:
        return _IN_PROCESS[key]
    facts = load_graph_cached(path, compute=compute, notes=notes)
    if key is not None:
        if len(_IN_PROCESS) > _IN_PROCESS_MAX:
            _IN_PROCESS.clear()
        _IN_PROCESS[key] = facts
    return facts


def clear_in_process() -> None:
    """Forget the facts kept in this process (benchmarks measure a first check)."""
    _IN_PROCESS.clear()


def load_graph_cached(model_path: Path, cache_dir: Optional[Path] = None,
                      compute: Optional[Callable[[Path], GraphFacts]] = None,
                      notes: Optional[list[str]] = None) -> GraphFacts:
    """``graph.load_graph(model_path)``, reusing facts cached on disk by an earlier process.
    ``notes``: gets a sentence when a cached document failed its content hashes."""
    facts, why = load_checked(model_path, cache_dir)
    if facts is not None:
        return facts
    if why is not None and notes is not None:
        notes.append(why + "; the facts were computed again")
    if compute is None:
        from .graph import load_graph as compute
    facts = compute(Path(model_path))
    store(model_path, facts, cache_dir)
    return facts
