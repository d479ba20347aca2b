"""The static check, outside any test framework: model file x targets -> results."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, Iterator, Literal, Optional, Sequence, overload

from . import facts_cache
from .graph import GraphFacts
from .matcher import match
from .result import TargetResult
from .tables import Catalog, Table


def graph_facts(path: Path, notes: Optional[list[str]] = None) -> GraphFacts:
    """Graph facts of a file, computed once per file version in this process and reused from disk
    where an earlier process cached them (``facts_cache.graph_facts``), the native steps isolated
    (``_isolated_facts``). ``notes``: gets a sentence when cached facts on disk failed their
    content hashes."""
    return facts_cache.graph_facts(Path(path), compute=_isolated_facts, notes=notes)


def _isolated_facts(path: Path) -> GraphFacts:
    """``graph.load_graph``, after its native steps ran once in a child process (``isolate.py``).

    onnx's parser and shape inference are C++ that crashes and hangs on some models: the child
    parses the file and runs the same shape inference first, so a crash or a hang fails this check
    only; when the pass ran, its result is the one model this process reads (the file is not
    parsed again here). The facts themselves are built here: a child could build them too, but
    sending them back (and the child's copy-on-write page faults) cost more than the parse and
    inference repeated in-process (scripts/isolation_overhead.py)."""
    from . import isolate

    if not isolate.settings().enabled:
        return _facts_or_model_error(path)
    # imported before the fork: what the child imports is lost with it, and this process needs the
    # same modules for the facts (onnx alone is ~0.5 s of CPU)
    from .graph import build  # noqa: F401 - imports onnx's modules the facts use

    import onnx  # noqa: F401

    from .graph.schema import op_schema

    # ONNX builds its operator-schema registry on the first lookup (~14 ms): built here, the child's
    # shape inference inherits it, and the facts of this process look schemas up anyway
    op_schema("Relu", 1, "")
    from .graph.gc_pause import paused_gc
    from .graph.build import nodes_ahead
    from .graph.protobuf import read_ahead

    # The file's bytes without its weights, cut here before the fork (the child's first step, which
    # it then skips): while the child infers (~0.13 s of wall time on the 26k-node encoder), this
    # process reads the nodes of those bytes, which are the nodes of the child's result, and makes
    # their facts (graph.build.nodes_ahead), instead of waiting for it and then doing so. A file
    # with nothing to cut (small weights only) has its own bytes read so (``ahead``); the child
    # reads that file as before. None (a malformed file): the child reads the file as before, and
    # the facts read the nodes of its result.
    before = _version(path)
    light, ahead = read_ahead(path)
    # the inferred model (5.2 MB for the 26k-node encoder) comes back mapped, not copied twice
    pending = isolate.start_mapped("onnx.shape_inference", _native_pass, path, None, light)
    try:
        nodes = None
        if ahead is not None:
            with paused_gc():
                nodes = nodes_ahead(ahead)  # None on any error: the child's reading says what is wrong
            ahead = None  # the file's bytes: not kept while the facts are made
        passed = pending.collect()
    except BaseException:
        pending.cancel()  # this process failed first (an interrupt): no child outlives it
        raise
    if nodes is not None and light is None and _version(path) != before:
        # the child read the file itself (nothing was cut to hand it), and the file changed since this
        # process read it (a model re-exported meanwhile): the nodes of one version and the types of
        # another must not meet in the facts, which then read the child's result alone
        nodes = None
    if passed is None:  # no pass to read (the file gives every shape): the facts read the bytes cut above
        return _facts_or_model_error(path, light=light)
    inferred, propagated = passed
    if not propagated:
        # the child left data propagation out (graph.build.propagation_may_be_moot): these facts
        # stand only if they give every tensor a static shape, else the pass runs again with it
        facts = _facts_or_model_error(path, inferred=inferred, confirm=True, nodes=nodes)
        if facts is not None:
            return facts
        inferred = isolate.call_mapped("onnx.shape_inference", _native_steps, path, True, light)
        if inferred is None:
            return _facts_or_model_error(path)
    # the child read the file with every check of load_model_proto and returned its pass's result:
    # the facts read that one model (the file is not parsed again here)
    return _facts_or_model_error(path, inferred=inferred, nodes=nodes)


def _version(path: Path) -> Optional[tuple[int, int, int, int]]:
    """(device, inode, size, mtime in ns) of ``path``, as the facts cache tells file versions apart;
    None when it cannot be read."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _native_steps(path: Path, data_prop: bool = True, light: Optional[bytes] = None) -> Optional[bytes]:
    """Parse ``path`` as graph.load_graph does (every bad-file check included) and run shape inference.

    Runs in the child: its exceptions become the same ModelError as in-process (``_model_errors``),
    so isolation changes where a bad file fails, never how (an OSError from a 300-character
    external-data location came back raw, a traceback and exit 1 instead of exit 2). Returns the
    inferred model's bytes, the one model the parent's facts then read; None when the pass failed (the parent
    runs it and reports the error) or when the parent's facts will not run it (``_inference_unused``:
    then there is no pass to contain, and none to run here)."""
    passed = _native_pass(path, data_prop, light)
    return None if passed is None else passed[0]


def _native_pass(path: Path, data_prop: Optional[bool] = None,
                 light: Optional[bytes] = None) -> Optional[tuple[bytes, bool]]:
    """``_native_steps``'s bytes and whether its pass ran with data propagation. ``data_prop`` None:
    without it where ``graph.build.propagation_may_be_moot`` says it may add nothing (the 26k-node
    encoder: 25-55 ms of the child's CPU); the parent then confirms that on the facts. ``light``:
    the file's bytes without its weights, cut by the parent before the fork
    (``protobuf.read_without_weights``; ``load_model_proto``'s ``light``)."""
    from .graph import Kept, load_model_proto
    from .graph.build import infer_serialized, propagation_may_be_moot

    kept = Kept()
    with _model_errors(path):
        model = load_model_proto(path, weights=False, keep=kept, light=light)  # without large weight values
    if _inference_unused(model, kept):
        return None
    data = kept.serialized if kept.serialized is not None else model.SerializeToString()
    if data_prop is None:
        try:
            data_prop = not propagation_may_be_moot(model, data)
        except Exception:  # noqa: BLE001 - a malformed file: the pass as before
            data_prop = True
    try:
        return infer_serialized(data, data_prop), data_prop
    except Exception:  # noqa: BLE001 - inference errors are graph.build's to report (unknown shapes)
        return None


def _inference_unused(model: Any, kept: Any) -> bool:
    """Whether the facts of ``model`` will skip shape inference (``graph.build.skips_inference``), so
    that inferring in the child only to be discarded would cost a pass (0.034 CPU-s for the 992-node
    ``bert_1k``). Any error answers False (the pass runs as before, and the facts report what is
    wrong with the file)."""
    try:
        from .graph.build import skips_inference

        return skips_inference(model, kept)
    except Exception:  # noqa: BLE001 - a malformed file: the facts' own reading says how
        return False


@contextlib.contextmanager
def _model_errors(path: Path) -> Iterator[None]:
    """An unforeseen exception on a malformed file becomes a ModelError naming the file and where
    the analysis gave up (found by tests/corpus/test_fuzz.py: bit flips leave node names that are not
    UTF-8, field mutations leave tensors numpy cannot reshape). Nesting too deep for Python's stack
    is such a file too; only MemoryError stays itself (the isolation's memory limit names it)."""
    from .errors import ModelError, NpuCheckError

    try:
        yield
    except (NpuCheckError, MemoryError):
        raise
    except Exception as exc:  # noqa: BLE001 - the file is untrusted input; say which and where
        import traceback

        tb = traceback.extract_tb(exc.__traceback__)
        where = f" in {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
        raise ModelError(f"{path}: malformed ONNX model: the analysis failed with {type(exc).__name__}: "
                         f"{str(exc)[:500]}{where}") from None


@overload
def _facts_or_model_error(path: Path, inferred: Optional[bytes] = None, confirm: Literal[False] = False,
                          nodes: Any = None, light: Optional[bytes] = None) -> GraphFacts:
    ...


@overload
def _facts_or_model_error(path: Path, inferred: bytes, confirm: Literal[True], nodes: Any = None,
                          light: Optional[bytes] = None) -> Optional[GraphFacts]:
    ...


def _facts_or_model_error(path: Path, inferred: Optional[bytes] = None, confirm: bool = False,
                          nodes: Any = None, light: Optional[bytes] = None) -> Optional[GraphFacts]:
    """``graph.load_graph``, with the errors of a malformed file as ModelError (``_model_errors``),
    then the checks that the model is one a runtime would load (``validity.py``). ``inferred``: what
    shape inference returned for the file in the isolated child (``_native_steps``), which read it
    with the same checks: the facts and the checks read that model, and the file is not read here.
    ``confirm``: ``inferred`` came from a pass without data propagation (``_native_pass``); None
    unless those facts give every tensor a static shape (``_all_static``), asked before anything
    may fail on them. ``nodes``: the nodes of the bytes the child inferred, read while it ran
    (``graph.build.nodes_ahead``), or None. ``light``: without ``inferred``, the file's bytes
    without its weights, cut already (``protobuf.read_without_weights``)."""
    from . import graph, validity

    if confirm:
        from .graph.build import from_inferred

        try:
            model, kept = from_inferred(inferred, nodes)  # type: ignore[arg-type]  # bytes with confirm (overloads)
            facts = graph.facts_from_model(model, str(path), kept, inferred=True, nodes=nodes)
        except Exception:  # noqa: BLE001 - a malformed file fails as before, after the full pass
            return None
        if not _all_static(facts):
            return None
    with _model_errors(path):
        if confirm:
            pass  # built above
        elif inferred is None:
            kept = graph.Kept()
            model = graph.load_model_proto(path, weights=False, keep=kept, light=light)
            facts = graph.facts_from_model(model, str(path), kept)
        else:
            from .graph.build import from_inferred

            model, kept = from_inferred(inferred, nodes)
            facts = graph.facts_from_model(model, str(path), kept, inferred=True, nodes=nodes)
    _check_versions(path, facts)
    with _model_errors(path):
        validity.check_model(model, facts, path)
    return facts


def _all_static(facts: GraphFacts) -> bool:
    """Whether every tensor of ``facts`` has a static shape and the pass reported no error: then
    data propagation could have added nothing (it only makes unknown dims known, and here every
    dim is known). Read from each TensorInfo's ``static``, set when the info was made, in C
    (~30,000 tensors in the 26k-node encoder)."""
    from operator import attrgetter

    if facts.shape_inference_error is not None or facts.dynamic_rank:
        return False
    return all(map(attrgetter("static"), facts.tensors.values()))


def _check_versions(path: Path, facts: GraphFacts) -> None:
    """A model no toolchain can read must not pass because each node looks fine (B12)."""
    import onnx

    from .errors import ModelError
    from .graph import DEFAULT_DOMAIN

    if facts.ir_version < 3 or facts.ir_version > onnx.IR_VERSION:
        raise ModelError(f"{path}: unsupported ir_version {facts.ir_version} (ONNX {onnx.__version__} reads 3 to "
                         f"{onnx.IR_VERSION}); re-export the model")
    if not facts.opsets.get(DEFAULT_DOMAIN):
        raise ModelError(f"{path}: the model imports no opset of the default ONNX domain (opset_import); "
                         "re-export the model")


def check_graph(graph: GraphFacts, tables: Sequence[Table]) -> list[TargetResult]:
    """Judge one graph against several tables; the graph facts are shared."""
    return [match(graph, table) for table in tables]


def check_file(path: Path, targets: Sequence[str], catalog: Optional[Catalog] = None) -> list[TargetResult]:
    catalog = catalog or Catalog.discover()
    tables = [catalog.table(t) for t in targets]  # resolve every target before any work
    return check_graph(graph_facts(Path(path)), tables)
