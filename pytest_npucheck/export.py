"""Export a PyTorch model to ONNX, with an on-disk cache keyed by everything that shapes the file.

This module is plain Python: it imports neither pytest nor (at import time) torch, onnx or numpy,
so importing it is cheap; the heavy libraries load on the first call that needs them.

The model is exported exactly as given: its train/eval mode is not changed (a model left in
training mode exports training-mode BatchNorm/Dropout; call ``model.eval()`` first if that is not
what you want). The TorchScript exporter is therefore run with ``TrainingMode.PRESERVE`` rather
than its default of switching to eval mode for the duration of the export.

Cache layout: ``cache_dir/<key>/model.onnx`` (plus any external-data files the exporter writes
beside it, plus ``meta.json``). An entry is built in a temporary directory inside ``cache_dir``
and renamed into place in one step, so a crash or a parallel worker (pytest-xdist) never leaves a
partial entry; when two processes race, the first rename wins and the other uses that entry.
``meta.json`` records the SHA-256 of every file of the entry, checked on every hit: an entry whose
files were edited or damaged (even keeping their size) is not used; the model is exported again and
the result says so (``ExportResult.notes``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import hashlib
import inspect
import io
import json
import linecache
import logging
import os
import pathlib
import re
import shutil
import sys
import tempfile
import threading
import time
import types
import uuid
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .jsonio import loads_strict

if TYPE_CHECKING:
    import torch

__all__ = [
    "EXPORTERS",
    "ExportError",
    "ExportOptions",
    "ExportResult",
    "cache_key",
    "export_model",
]

#: Bump when anything about how keys are computed or entries are laid out changes.
KEY_FORMAT = "npucheck-export-v2"
#: The exporters understood by :class:`ExportOptions`.
EXPORTERS = ("dynamo", "torchscript")
#: Name of the ONNX file inside a cache entry.
MODEL_FILENAME = "model.onnx"
#: Name of the small JSON sidecar inside a cache entry (opset, exporter, files, timing).
META_FILENAME = "meta.json"
#: Name of the stamp inside a cache entry: the ``os.stat`` fingerprint of each file whose content hash
#: was last checked, so that a later process trusts the hash while the file is unchanged (see _checked_entry).
VERIFIED_FILENAME = "verified.json"

_TMP_PREFIX = ".tmp-"
_TRASH_PREFIX = ".trash-"
_STALE_TMP_SECONDS = 24 * 3600
_HASH_CHUNK = 1 << 24  # 16 MiB
_OUTPUT_TAIL_LINES = 40
_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
# Exports are serialised within a process: output capture (stdout, logging, warnings) is
# process-global state.
_EXPORT_LOCK = threading.RLock()
# nn.Module bookkeeping that never changes what gets exported (hooks are handled separately).
_MODULE_INTERNAL_ATTRS = frozenset(
    {
        "training",
        "_parameters",
        "_buffers",
        "_non_persistent_buffers_set",
        "_modules",
        "_backward_pre_hooks",
        "_backward_hooks",
        "_is_full_backward_hook",
        "_forward_hooks",
        "_forward_hooks_with_kwargs",
        "_forward_hooks_always_called",
        "_forward_pre_hooks",
        "_forward_pre_hooks_with_kwargs",
        "_state_dict_hooks",
        "_state_dict_pre_hooks",
        "_load_state_dict_pre_hooks",
        "_load_state_dict_post_hooks",
        "forward",
    }
)


# --------------------------------------------------------------------------- public values


@dataclasses.dataclass(frozen=True)
class ExportOptions:
    """How to export a model.

    ``exporter``: ``"dynamo"`` (``torch.onnx.export(dynamo=True)``, built on ``torch.export``) or
    ``"torchscript"`` (the legacy tracer, ``dynamo=False``).

    ``opset``: the default-domain opset to target; ``None`` uses the exporter's default. The
    dynamo exporter cannot always down-convert below opset 18 and then keeps 18: the opset
    actually written is reported in :attr:`ExportResult.opset`.

    ``dynamic_axes``: ``{"input": {0: "batch"}}``. Keys may be graph input names (from
    ``input_names`` or the defaults below), forward() parameter names holding a tensor, or, for
    the TorchScript exporter, output names. A list of axes (``{"x": [0]}``) gets names
    ``<input>_dim<axis>``. For the dynamo exporter this becomes ``dynamic_shapes`` with
    ``Dim.DYNAMIC`` dims renamed to the given names (an example batch of 1 stays dynamic).

    ``input_names`` / ``output_names``: graph input/output names, in the exporter's input order.
    Without ``input_names`` both exporters name inputs the way the dynamo exporter does: after
    the forward() parameter (``x``), with ``_<i>`` for the tensors inside a container or
    ``*args`` (``pair_0``, ``rest_1``); the TorchScript exporter's own defaults would be names
    like ``input.1`` or ``onnx::Gemm_0``.
    """

    exporter: str = "dynamo"
    opset: int | None = None
    # Excluded from __hash__ (a mapping is not hashable) but part of ==.
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = dataclasses.field(
        default=None, hash=False
    )
    input_names: Sequence[str] | None = None
    output_names: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.exporter not in EXPORTERS:
            raise ValueError(
                f"unknown exporter {self.exporter!r}; expected one of {', '.join(EXPORTERS)}"
            )
        if self.opset is not None and (
            isinstance(self.opset, bool) or not isinstance(self.opset, int) or self.opset < 1
        ):
            raise ValueError(f"opset must be a positive int or None, got {self.opset!r}")
        for field in ("input_names", "output_names"):
            names = getattr(self, field)
            if names is None:
                continue
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"{field} must be a sequence of str, got {names!r}")
            object.__setattr__(self, field, tuple(names))
        if self.dynamic_axes is not None:
            object.__setattr__(self, "dynamic_axes", _normalize_dynamic_axes(self.dynamic_axes))


def _normalize_dynamic_axes(value: Any) -> Mapping[str, Mapping[int, str]]:
    if not isinstance(value, Mapping):
        raise ValueError(f"dynamic_axes must be a mapping, got {type(value).__name__}")
    out: dict[str, Mapping[int, str]] = {}
    for name, axes in value.items():
        if not isinstance(name, str):
            raise ValueError(f"dynamic_axes keys must be str, got {name!r}")
        if isinstance(axes, Mapping):
            items = list(axes.items())
        elif isinstance(axes, Sequence) and not isinstance(axes, str):
            items = [(axis, f"{name}_dim{axis}") for axis in axes]
        else:
            raise ValueError(f"dynamic_axes[{name!r}] must be {{axis: name}} or [axis, ...]")
        for axis, dim in items:
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise ValueError(f"dynamic_axes[{name!r}]: axis must be an int >= 0, got {axis!r}")
            if not isinstance(dim, str) or not dim:
                raise ValueError(f"dynamic_axes[{name!r}][{axis}]: name must be a non-empty str")
        out[name] = types.MappingProxyType(dict(items))
    return types.MappingProxyType(out)


@dataclasses.dataclass(frozen=True)
class ExportResult:
    """Where the exported model is and how it got there.

    ``path`` is the ``.onnx`` file (external data, if any, lies beside it); ``opset`` is the
    default-domain opset read from the written file; ``seconds`` is the wall time of the
    :func:`export_model` call (the export on a miss, the key and lookup on a hit).
    """

    path: pathlib.Path
    cache_hit: bool
    key: str
    exporter: str
    opset: int
    seconds: float
    #: what the caller should tell the user (a cache entry that failed its content hashes)
    notes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "cache_hit": self.cache_hit,
            "key": self.key,
            "exporter": self.exporter,
            "opset": self.opset,
            "seconds": self.seconds,
        }


class ExportError(Exception):
    """The exporter failed. The message starts with which exporter and model class, followed by
    the exporter's own message; ``output`` holds everything the exporter printed, logged or
    warned during the attempt. The original exception is chained as ``__cause__``."""

    def __init__(
        self, message: str, *, exporter: str = "", model_class: str = "", output: str = ""
    ) -> None:
        super().__init__(message)
        self.exporter = exporter
        self.model_class = model_class
        self.output = output

    def __reduce__(self) -> tuple[Any, ...]:  # keep the attributes across pickling
        return (
            functools.partial(
                ExportError,
                exporter=self.exporter,
                model_class=self.model_class,
                output=self.output,
            ),
            self.args,
        )


# --------------------------------------------------------------------------- export


def export_model(
    model: torch.nn.Module,
    example_inputs: Any,
    options: ExportOptions = ExportOptions(),
    cache_dir: pathlib.Path | None = None,
) -> ExportResult:
    """Export ``model`` to ONNX, reusing ``cache_dir/<key>/model.onnx`` when it exists.

    ``example_inputs`` is a tensor, a tuple/list of positional inputs, or a dict of keyword
    inputs. The model's train/eval mode is left as given. With ``cache_dir=None`` the model is
    exported into a fresh temporary directory (not cleaned up; it belongs to the caller).

    Raises :class:`ExportError` if the exporter fails; no partial file is left behind.
    """
    start = time.perf_counter()
    args, kwargs = _split_inputs(example_inputs)
    key = cache_key(model, example_inputs, options)

    if cache_dir is None:
        work = pathlib.Path(tempfile.mkdtemp(prefix="npucheck-export-"))
        try:
            opset = _export_isolated(model, args, kwargs, options, work, start, key)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        return ExportResult(
            work / MODEL_FILENAME, False, key, options.exporter, opset,
            time.perf_counter() - start,
        )

    cache_dir = pathlib.Path(cache_dir)
    entry = cache_dir / key
    meta, problem = _checked_entry(entry)
    if meta is not None:
        from .cache_prune import mark_used

        mark_used(entry)  # its last use, for `npucheck cache --max-age-days` (kept by the CI cache's archive)
        return ExportResult(
            entry / MODEL_FILENAME, True, key, options.exporter, _entry_opset(entry, meta),
            time.perf_counter() - start,
        )
    notes = () if problem is None else (f"export cache entry {entry} {problem}: not used, the model was exported "
                                        "again",)

    cache_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_tmp(cache_dir)
    work = pathlib.Path(tempfile.mkdtemp(prefix=f"{_TMP_PREFIX}{key[:12]}-", dir=cache_dir))
    try:
        opset = _export_isolated(model, args, kwargs, options, work, start, key)
        _publish(work, entry)
    finally:
        shutil.rmtree(work, ignore_errors=True)  # gone already if we won the rename
    meta = _read_valid_entry(entry)
    if meta is None:  # pragma: no cover - someone deleted it between rename and read
        raise ExportError(f"cache entry {entry} vanished right after it was written")
    return ExportResult(
        entry / MODEL_FILENAME, False, key, options.exporter, _entry_opset(entry, meta),
        time.perf_counter() - start, notes,
    )


_WARMED: set[tuple[str, Any]] = set()  # (exporter, opset) warmed in this process

# Packages an exporter needs beyond torch and onnx; torch imports them only when it exports, so a
# plain install that lacks them fails there with a bare ModuleNotFoundError. The torch extra brings them.
EXPORTER_PACKAGES = {"dynamo": ("onnxscript", "onnx_ir")}
INSTALL_COMMAND = 'pip install "pytest-npucheck[torch]"'


def missing_package_message(exporter: str, package: str) -> str:
    """The one sentence that replaces a missing optional package's ModuleNotFoundError."""
    return (f"the {exporter} exporter needs the Python package {package!r}, which is not installed: "
            f"run `{INSTALL_COMMAND}`, or export with exporter=\"torchscript\" (marker argument, "
            f"--npu-exporter torchscript or ini npu_exporter = torchscript)")


def _missing_exporter_package(exporter: str) -> str | None:
    """The first package ``exporter`` needs that cannot be imported (found without importing it)."""
    import importlib.util

    for name in EXPORTER_PACKAGES.get(exporter, ()):
        try:
            if importlib.util.find_spec(name) is None:
                return name
        except (ImportError, ValueError):  # a broken parent package or a None in sys.modules
            return name
    return None


def _missing_module(exc: BaseException) -> str | None:
    """The top-level name of a module that could not be found, anywhere in ``exc``'s chain."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ModuleNotFoundError) and cause.name:
            return cause.name.partition(".")[0]
        cause = cause.__cause__ or cause.__context__
    return None


def _export_isolated(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: ExportOptions,
    work: pathlib.Path,
    start: float,
    key: str,
) -> int:
    """:func:`_export_into` in a child process (``isolate.py``): a crash, a hang past the timeout
    or the memory limit of the exporter fails this export with an :class:`ExportError`, and the
    process that asked for it carries on."""
    from . import isolate

    missing = _missing_exporter_package(options.exporter)
    if missing is not None:
        raise ExportError(missing_package_message(options.exporter, missing), exporter=options.exporter,
                          model_class=_qualname(type(model)))
    if not isolate.settings().enabled:
        return _export_into(model, args, kwargs, options, work, start, key)
    if (options.exporter, options.opset) not in _WARMED:
        # The exporters spend seconds on their first call (imports, dispatch tables, the dynamo
        # exporter's registry of each opset). Pay that once here on a one-layer model, per exporter
        # and opset, so that each forked child starts from a warm exporter.
        _WARMED.add((options.exporter, options.opset))
        _warm_up(options.exporter, options.opset)
        _freeze_heap()
    try:
        return isolate.call("export", _export_into, model, args, kwargs, options, work, start, key)
    except isolate.IsolationError as exc:
        _clear_dir(work)
        model_class = _qualname(type(model))
        raise ExportError(f"{options.exporter} exporter, model {model_class}: {exc}",
                          exporter=options.exporter, model_class=model_class) from exc


def _freeze_heap() -> None:
    """Take what is alive after the warm-up out of the cyclic GC's scans (``gc.freeze``).

    The warm-up leaves ~230,000 long-lived objects (torch.export, the exporter's operator
    registry) beside torch's own ~190,000. Every full collection scans them all (~0.5 s here),
    about once per test in this process, in the export child whenever it collects (writing to
    every page it scans, which the fork had shared), and in pytest's and the interpreter's
    collections at exit. Frozen objects are still freed by reference counting: a model the test
    releases goes as before; only a reference cycle among them would outlive its last reference,
    so the garbage there is now is collected first. This is the use Python documents for
    ``gc.freeze``: before forking children that should not copy the parent's heap.
    """
    import gc

    gc.collect()
    gc.freeze()


def _warm_up(exporter: str, opset: Any = None) -> None:
    import torch

    work = pathlib.Path(tempfile.mkdtemp(prefix="npucheck-warmup-"))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _export_into(torch.nn.Linear(2, 2).eval(), (torch.zeros(1, 2),), {},
                         ExportOptions(exporter=exporter, opset=opset), work, time.perf_counter(), "warm-up")
    except Exception:  # noqa: BLE001 - only an optimisation; the real export reports its own errors
        pass
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _export_into(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: ExportOptions,
    work: pathlib.Path,
    start: float,
    key: str,
) -> int:
    """Export into the empty directory ``work``; write meta.json; return the opset written."""
    import onnx

    path = work / MODEL_FILENAME
    model_class = _qualname(type(model))
    with _EXPORT_LOCK:
        # Resolve names before capturing: a ValueError here is a usage error, not an export one.
        plan = _plan_inputs(model, args, kwargs, options)
        failure: Exception | None = None
        with _captured_output() as output:
            try:
                if options.exporter == "dynamo":
                    _run_dynamo(model, args, kwargs, options, plan, path, work)
                else:
                    _run_torchscript(model, args, kwargs, options, plan, path)
                if not path.is_file() or path.stat().st_size == 0:
                    raise RuntimeError(f"the exporter did not write {path.name}")
            except Exception as exc:  # noqa: BLE001 - any exporter failure becomes ExportError
                failure = exc
        if failure is not None:
            _clear_dir(work)
            text = output.text()  # complete only once the capture has ended
            raise ExportError(
                _error_message(options.exporter, model_class, failure, text),
                exporter=options.exporter,
                model_class=model_class,
                output=text,
            ) from failure

    try:
        proto = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # noqa: BLE001 - a file the exporter wrote but ONNX cannot read
        _clear_dir(work)
        raise ExportError(f"{options.exporter} exporter, model {model_class}: the exporter wrote {path.name} "
                          f"but it is not a readable ONNX model ({type(exc).__name__}: {exc})",
                          exporter=options.exporter, model_class=model_class) from None
    if not proto.graph.output:
        _clear_dir(work)
        raise ExportError(f"{options.exporter} exporter, model {model_class}: the model returns no tensor (its "
                          "forward returned None, or only values that are not tensors), so the exported graph "
                          "has no outputs and nothing to check: make forward return its output tensor(s)",
                          exporter=options.exporter, model_class=model_class)
    opset = _default_opset(proto)
    from .filehash import sha256_file

    files = {p.name: p.stat().st_size for p in sorted(work.iterdir()) if p.is_file()}
    meta = {
        "format": KEY_FORMAT,
        "key": key,
        "exporter": options.exporter,
        "requested_opset": options.opset,
        "opset": opset,
        "model_class": model_class,
        "export_seconds": round(time.perf_counter() - start, 3),
        "files": files,
        "sha256": {name: sha256_file(work / name) for name in files},  # checked on every cache hit
        "versions": _versions(),
    }
    (work / META_FILENAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    _write_stamp(work, meta["sha256"])  # the files keep their fingerprints when work is renamed to the entry
    return opset


def _run_dynamo(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: ExportOptions,
    plan: _InputPlan,
    path: pathlib.Path,
    work: pathlib.Path,
) -> None:
    import torch

    _reuse_torchlib_registry()
    program = torch.onnx.export(
        model,
        _positional(args, kwargs),
        kwargs=kwargs or None,
        dynamo=True,
        opset_version=options.opset,
        input_names=list(options.input_names) if options.input_names else None,
        output_names=list(options.output_names) if options.output_names else None,
        dynamic_shapes=plan.dynamic_shapes,
        artifacts_dir=str(work),
        # verbose=None: progress lines ("Translate the graph into ONNX... ❌") are printed,
        # captured, and end up in the ExportError message.
    )
    if program is None:  # pragma: no cover - dynamo=True always returns a program
        raise RuntimeError("torch.onnx.export(dynamo=True) returned no ONNXProgram")
    # external_data=False still switches to external data above the 2 GB protobuf limit.
    # ir.save keeps node metadata_props (pkg.torch.onnx.stack_trace, namespace, name_scopes).
    program.save(str(path), external_data=False)


# {(from_torchlib's arguments, _torchlib_size()): the registry it built}, filled by the first dynamo export
_TORCHLIB_REGISTRIES: dict[Any, Any] = {}


def _torchlib_size() -> tuple[Any, Any]:
    """How many functions the two registries ``from_torchlib`` reads hold now: torch's own torchlib
    list and ONNX Script's torchlib registry (0 before its ops are imported; None: not readable).

    Part of the memo's key, so that a function registered after a registry was built (torch's
    ``onnx_impl``, ONNX Script's ``torch_op``) is in the next one, as without the memo."""
    try:
        from torch.onnx._internal.exporter._torchlib import _torchlib_registry

        own: Any = len(_torchlib_registry._registry)
    except (ImportError, AttributeError, TypeError):
        own = None
    try:
        module = sys.modules.get("onnxscript.function_libs.torch_lib.registration")
        script: Any = 0 if module is None else sum(
            len(f.overloads) + len(f.complex) for f in module.default_registry._registry.values())
    except (AttributeError, TypeError):
        script = None
    return own, script


def _reuse_torchlib_registry() -> None:
    """Build the dynamo exporter's operator registry once per process, not once per export.

    ``torch.onnx.export(dynamo=True)`` calls ``ONNXRegistry.from_torchlib`` on every call: ~1.2 s
    here, most of it ONNX Script re-reading and re-parsing the source of ~500 torchlib functions,
    to build the same registry each time (it depends only on the opset version). This wraps that
    classmethod so that each opset's registry is built once (again if a torchlib function was
    registered since: ``_torchlib_size``), and every call gets its own copy of the mapping (a custom
    translation table added to one export does not reach the next); the entries are the same
    objects, which the exporter only reads. The warm-up builds it in the
    process that forks the export children, so no child builds it again. A torch whose registry
    does not look like this (another class layout) is left alone: this only saves time.
    """
    try:
        from torch.onnx._internal.exporter import _registration
    except ImportError:  # pragma: no cover - torch without the dynamo exporter
        return
    cls = getattr(_registration, "ONNXRegistry", None)
    original = cls.__dict__.get("from_torchlib") if isinstance(cls, type) else None
    if not isinstance(original, classmethod) or getattr(original.__func__, "_npucheck_reused", False):
        return
    build = original.__func__
    try:
        signature = inspect.signature(build)
    except (TypeError, ValueError):  # pragma: no cover
        return

    def from_torchlib(klass: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            bound = signature.bind(klass, *args, **kwargs)
            bound.apply_defaults()
            key = tuple((k, v) for k, v in bound.arguments.items() if v is not klass)
            hash(key)
        except TypeError:
            return build(klass, *args, **kwargs)  # arguments the memo cannot key: the original behaviour
        size = _torchlib_size()
        if klass is not cls or None in size:
            return build(klass, *args, **kwargs)  # a subclass may build something else; sizes unknown
        built = _TORCHLIB_REGISTRIES.get((key, size))
        if built is None:
            built = build(klass, *args, **kwargs)
            if not isinstance(getattr(built, "functions", None), dict) or set(vars(built)) != {
                    "_opset_version", "functions"}:
                return built  # not the layout the copy below knows: build it each time
            _TORCHLIB_REGISTRIES[(key, _torchlib_size())] = built  # the size now: building imports them
        registry = klass.__new__(klass)
        registry.__dict__.update(vars(built))
        registry.functions = {target: list(entries) for target, entries in built.functions.items()}
        return registry

    functools.update_wrapper(from_torchlib, build)
    from_torchlib._npucheck_reused = True  # type: ignore[attr-defined]
    cls.from_torchlib = classmethod(from_torchlib)


def _run_torchscript(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    options: ExportOptions,
    plan: _InputPlan,
    path: pathlib.Path,
) -> None:
    import torch

    jit_log = torch._C._jit_is_onnx_log_enabled()
    try:
        torch.onnx.export(
            model,
            _positional(args, kwargs),
            str(path),
            kwargs=kwargs or None,
            dynamo=False,
            opset_version=options.opset,
            input_names=plan.input_names,
            output_names=list(options.output_names) if options.output_names else None,
            dynamic_axes=plan.dynamic_axes,
            # Export the model as given; the default (EVAL) flips it to eval() during export.
            training=torch.onnx.TrainingMode.PRESERVE,
            # torch: folding a training-mode graph "may not translate parameters correctly".
            do_constant_folding=not getattr(model, "training", False),
            verbose=False,
        )
    finally:
        # torch's setup_onnx_logging tests the function object instead of calling it, so it
        # turns the JIT ONNX log on for good; put it back the way it was.
        torch._C._jit_set_onnx_log_enabled(jit_log)


# --------------------------------------------------------------------------- inputs


def _split_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """A tensor -> one positional input; a tuple/list -> positionals; a dict -> keywords."""
    if isinstance(example_inputs, Mapping):
        if not all(isinstance(k, str) for k in example_inputs):
            raise TypeError("keyword example inputs must be a dict with str keys")
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def _positional(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """``args`` as torch.onnx.export reads them positionally. Both exporters take a dict that ends
    ``args`` as the keyword arguments when no ``kwargs`` are given; a model whose last positional
    parameter is a dict (``npu_check(m, (x, {"a": t}))``) would lose it. An empty dict after it is
    read as the (empty) keywords instead."""
    if not kwargs and args and isinstance(args[-1], Mapping):
        return (*args, {})
    return args


@dataclasses.dataclass(frozen=True)
class _InputPlan:
    input_names: list[str] | None  # for the TorchScript exporter
    dynamic_axes: dict[str, dict[int, str]] | None  # for the TorchScript exporter
    dynamic_shapes: dict[str, Any] | None  # for the dynamo exporter


def _plan_inputs(
    model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: ExportOptions
) -> _InputPlan:
    """Work out graph input names and translate dynamic_axes for the chosen exporter.

    Graph input order: the dynamo exporter takes positionals then keywords in dict order; the
    TorchScript exporter binds keywords into signature order. Each tensor is one graph input;
    a container contributes its tensor leaves (``pair`` -> ``pair_0``, ``pair_1``) and
    ``*rest`` its elements (``rest_0`` ...), as the dynamo exporter names them.
    """
    import torch

    try:
        sig: inspect.Signature | None = inspect.signature(model.forward)
    except (TypeError, ValueError):
        sig = None
    params = list(sig.parameters.values()) if sig else []
    positional = [
        p.name for p in params
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    ]
    var_positional = next(
        (p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None
    )

    # (param name or None, value, is *args element) in the exporter's graph-input order.
    slots: list[tuple[str | None, Any, bool]] = []
    if options.exporter == "torchscript" and sig is not None and kwargs:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError:
            bound = None
        if bound is not None:
            for param, bound_value in bound.arguments.items():
                kind = sig.parameters[param].kind
                if kind is inspect.Parameter.VAR_POSITIONAL:
                    slots.extend((None, v, True) for v in bound_value)
                elif kind is inspect.Parameter.VAR_KEYWORD:
                    slots.extend((k, v, False) for k, v in bound_value.items())
                else:
                    slots.append((param, bound_value, False))
    if not slots:
        for i, v in enumerate(args):
            if i < len(positional):
                slots.append((positional[i], v, False))
            else:
                slots.append((None, v, var_positional is not None))
        slots.extend((k, v, False) for k, v in kwargs.items())

    # One entry per graph input (tensor leaf): its slot, leaf number, and default name, which
    # follows the dynamo exporter's naming (x, xs_0, pair_1).
    inputs: list[tuple[int, int, str | None]] = []
    n_var = 0
    for index, (name, value, is_var) in enumerate(slots):
        if is_var and isinstance(value, torch.Tensor):
            inputs.append((index, 0, f"{var_positional}_{n_var}"))
            n_var += 1
        elif isinstance(value, torch.Tensor):
            inputs.append((index, 0, name))
        elif value is not None:
            leaves = [
                leaf for leaf in torch.utils._pytree.tree_leaves(value)
                if isinstance(leaf, torch.Tensor)
            ]
            for j in range(len(leaves)):
                inputs.append((index, j, f"{name}_{j}" if name and not is_var else None))

    given = list(options.input_names or ())
    graph_names = [given[i] if i < len(given) else dflt for i, (_, _, dflt) in enumerate(inputs)]

    # dynamic_axes: a key names a graph input (given or default name), a forward() parameter
    # holding a tensor, or (TorchScript) an output.
    axes_by_input: dict[int, dict[int, str]] = {}
    unknown: list[str] = []
    outputs = set(options.output_names or ())
    output_axes: dict[str, dict[int, str]] = {}
    for key, axes in (options.dynamic_axes or {}).items():
        matches = [
            i for i, (slot, _, _) in enumerate(inputs)
            if key == graph_names[i]
            or (key == slots[slot][0] and isinstance(slots[slot][1], torch.Tensor))
        ]
        if matches:
            axes_by_input[matches[0]] = dict(axes)
        elif key in outputs:
            output_axes[key] = dict(axes)
        else:
            unknown.append(key)
    if unknown:
        known = sorted({n for n in graph_names if n} | outputs)
        raise ValueError(
            f"dynamic_axes names {unknown} match no model input or output "
            f"(known: {', '.join(known) or 'none'}; input_names can name them)"
        )

    if options.exporter == "torchscript":
        names: list[str] | None = None
        if given or all(n is not None for n in graph_names):
            names = [n if n is not None else f"input_{i}" for i, n in enumerate(graph_names)]
        dynamic_axes: dict[str, dict[int, str]] | None = None
        if axes_by_input or output_axes:
            if names is None:
                raise ValueError(
                    "dynamic_axes on this model's inputs need input_names (the TorchScript "
                    "exporter cannot name them otherwise)"
                )
            dynamic_axes = {names[i]: axes for i, axes in axes_by_input.items()}
            dynamic_axes.update(output_axes)
        return _InputPlan(names, dynamic_axes, None)

    if not axes_by_input:
        return _InputPlan(None, None, None)
    # dynamo: dynamic_shapes keyed by forward() parameter name, mirroring each input's
    # structure; string dim names become Dim.DYNAMIC and the exporter renames the symbolic
    # dims to them.
    leaf_axes = {(inputs[i][0], inputs[i][1]): axes for i, axes in axes_by_input.items()}
    shapes: dict[str, Any] = {}
    var_specs: list[Any] = []
    for index, (name, value, is_var) in enumerate(slots):
        if isinstance(value, torch.Tensor):
            spec: Any = leaf_axes.get((index, 0))
        elif value is None:
            spec = None
        else:
            leaves, treespec = torch.utils._pytree.tree_flatten(value)
            specs, j = [], 0
            for leaf in leaves:
                if isinstance(leaf, torch.Tensor):
                    specs.append(leaf_axes.get((index, j)))
                    j += 1
                else:
                    specs.append(None)
            spec = torch.utils._pytree.tree_unflatten(specs, treespec)
        if is_var:
            var_specs.append(spec)
        elif name is not None:
            shapes[name] = spec
    if var_positional is not None and var_specs:
        shapes[var_positional] = tuple(var_specs)
    return _InputPlan(None, None, shapes)


# --------------------------------------------------------------------------- cache key


def cache_key(model: torch.nn.Module, example_inputs: Any, options: ExportOptions) -> str:
    """Hex SHA-256 over everything that determines the exported file.

    Covered: parameters and buffers (names, dtypes, shapes, bytes; tied tensors recorded as
    aliases), the module tree (names, classes, train/eval flags, plain attributes such as a
    conv's stride, forward hooks, instance-level ``forward`` overrides), the source of every
    module class and its non-torch base classes (module + qualname when the source is
    unavailable) together with the module-level functions, classes and constants their methods
    name (followed a few calls deep), the example inputs (structure, dtypes, shapes, values),
    the options, and the versions of python, torch, onnx, onnxscript, onnx-ir and the key
    format. Stable across processes: nothing depends on ``id()`` or ``hash()``.

    Also covered: the code of what a module holds that is not a Module (``self.act = Act()``, a
    function, a closure, a bound method, in lists and dicts), their attributes, a few levels deep.

    Not covered: code reached only through attributes of other modules (``helpers.scale(x)``
    where ``helpers`` is an imported module of yours) and torch global settings.
    """
    import torch

    h = _Hasher()
    h.text("format", KEY_FORMAT)
    for name, version in _versions().items():
        h.text("version:" + name, version)

    # Options.
    h.text("exporter", options.exporter)
    h.text("opset", repr(options.opset))
    h.value("input_names", options.input_names)
    h.value("output_names", options.output_names)
    axes = options.dynamic_axes or {}
    h.value("dynamic_axes", [(k, sorted(dict(v).items())) for k, v in sorted(axes.items())])

    # Inputs, as the exporter will see them.
    args, kwargs = _split_inputs(example_inputs)
    h.value("args", args)
    h.value("kwargs", kwargs)

    # Module tree, code, attributes, hooks.
    h.text("model_class", _qualname(type(model)))
    code = _CodeWalker(h)
    for name, module in model.named_modules(remove_duplicate=False):
        cls = type(module)
        h.text("module", f"{name}:{_qualname(cls)}:training={module.training}")
        for klass in cls.__mro__:
            code.klass(klass)
        for attr, value in vars(module).items():
            if attr not in _MODULE_INTERNAL_ATTRS:
                h.value("attr:" + attr, value)
                code.held("attr:" + attr, value)  # the code of callables and objects the module holds
        if "forward" in vars(module):
            code.function("instance_forward", vars(module)["forward"])
        for hooks in ("_forward_pre_hooks", "_forward_hooks"):
            for hook in getattr(module, hooks, {}).values():  # values only: keys are global ids
                code.function(hooks, hook)
    global_hooks = torch.nn.modules.module
    for hooks in ("_global_forward_pre_hooks", "_global_forward_hooks"):
        for hook in getattr(global_hooks, hooks, {}).values():
            code.function(hooks, hook)

    # Weights.
    first_name: dict[int, str] = {}  # in-process identity only, never hashed
    for kind, named in (
        ("param", model.named_parameters(remove_duplicate=False)),
        ("buffer", model.named_buffers(remove_duplicate=False)),
    ):
        for name, tensor in named:
            if tensor is None:
                h.text(kind, f"{name}:None")
                continue
            alias = first_name.setdefault(id(tensor), name)
            if alias != name:
                h.text(kind, f"{name}:alias-of:{alias}")
                continue
            h.text(kind, f"{name}:requires_grad={tensor.requires_grad}")
            h.tensor(tensor)
    return h.hexdigest()


class _Hasher:
    """Length-prefixed records into one SHA-256, so that no two inputs share a byte stream."""

    def __init__(self) -> None:
        self._h = hashlib.sha256()

    def hexdigest(self) -> str:
        return self._h.hexdigest()

    def _record(self, label: str, data: bytes | memoryview) -> None:
        self._h.update(f"{label}\x1f{len(data)}\x1e".encode())
        for start in range(0, len(data), _HASH_CHUNK):
            self._h.update(data[start : start + _HASH_CHUNK])

    def text(self, label: str, value: str) -> None:
        self._record(label, value.encode("utf-8", "surrogatepass"))

    def tensor(self, t: Any) -> None:
        import torch

        self.text(
            "tensor",
            f"{type(t).__name__}:{t.dtype}:{tuple(t.shape)}:{t.device.type}:{t.layout}",
        )
        if t.device.type == "meta":
            return
        try:
            data = t.detach()
            if data.is_quantized:
                if data.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                    self.text("qparams", f"{data.q_scale()!r}:{data.q_zero_point()!r}")
                else:
                    self.value("qparams", [data.q_per_channel_scales(),
                                           data.q_per_channel_zero_points(),
                                           data.q_per_channel_axis()])
                data = data.int_repr()
            if data.layout != torch.strided:
                data = data.to_dense()
            data = data.cpu().resolve_conj().resolve_neg().contiguous().reshape(-1)
            raw = memoryview(data.view(torch.uint8).numpy()) if data.numel() else b""
        except Exception:  # noqa: BLE001 - unreadable (exotic subclass): never share a key
            self.text("unreadable", uuid.uuid4().hex)
            return
        self._record("bytes", raw)

    def value(self, label: str, value: Any, depth: int = 0) -> None:
        """Encode a plain value deterministically (never via repr of arbitrary objects)."""
        import torch

        if depth > 16:  # cyclic or absurdly deep structures
            self.text(label, f"deep:{_qualname(type(value))}")
        elif value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            self.text(label, f"{type(value).__name__}:{value!r}")
        elif isinstance(value, torch.Tensor):
            self.text(label, "tensor")
            self.tensor(value)
        elif isinstance(value, (torch.dtype, torch.device, torch.Size, torch.memory_format,
                                torch.layout, enum.Enum)):
            self.text(label, f"{type(value).__name__}:{value!r}")
        elif isinstance(value, torch.nn.Module):
            self.text(label, f"module:{_qualname(type(value))}")  # walked by named_modules
        elif isinstance(value, type):
            self.text(label, f"type:{_qualname(value)}")
        elif inspect.isroutine(value) or isinstance(value, functools.partial):
            self.text(label, f"callable:{_callable_code(value)}")
        elif isinstance(value, (list, tuple)):
            self.text(label, f"{type(value).__name__}:{len(value)}")
            for item in value:
                self.value(label + "[]", item, depth + 1)
        elif isinstance(value, Mapping):
            self.text(label, f"{type(value).__name__}:{len(value)}")
            for k, v in value.items():
                self.value(label + "{k}", k, depth + 1)
                self.value(label + "{v}", v, depth + 1)
        elif isinstance(value, (set, frozenset)):
            items = sorted(value, key=lambda x: f"{type(x).__name__}:{x!r}")
            self.value(label, ("set", *items), depth)
        elif dataclasses.is_dataclass(value) and depth < 4:
            self.text(label, f"dataclass:{_qualname(type(value))}")
            for f in dataclasses.fields(value):
                self.value(f"{label}.{f.name}", getattr(value, f.name, None), depth + 1)
        else:
            self.text(label, f"object:{_qualname(type(value))}")
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict) and depth < 2:
                for k, v in attrs.items():
                    self.value(f"{label}.{k}", v, depth + 1)


class _CodeWalker:
    """Hash the source of classes and functions, and of the module-level names they use."""

    _MAX_DEPTH = 3

    def __init__(self, h: _Hasher) -> None:
        self.h = h
        self._seen: set[int] = set()  # in-process identity only, never hashed

    def _first_visit(self, obj: Any) -> bool:
        if id(obj) in self._seen:
            return False
        self._seen.add(id(obj))
        return True

    def klass(self, cls: type, depth: int = 0) -> None:
        if not self._first_visit(cls):
            return
        self.h.text("class", _class_code(cls))
        if _is_torch_owned(cls) or depth > self._MAX_DEPTH:
            return
        for value in vars(cls).values():
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            elif isinstance(value, property):
                value = value.fget
            if inspect.isfunction(value):
                self._globals_of(value, depth + 1)

    def function(self, label: str, fn: Any, depth: int = 0) -> None:
        self.h.text(label, _callable_code(fn))
        while isinstance(fn, functools.partial):
            fn = fn.func
        fn = getattr(fn, "__func__", fn)
        if inspect.isfunction(fn) and not _is_torch_owned(fn) and self._first_visit(fn):
            self._globals_of(fn, depth + 1)

    def held(self, label: str, value: Any, depth: int = 0) -> None:
        """The code a module reaches through a value it holds that is not a Module: a function (its
        source, globals and closure), a bound method and its object, an instance of a user class
        (the class's code, then its attributes), in lists, tuples and dicts; ``depth`` levels down.
        ``self.act = Act()`` with ``Act.__call__`` edited from relu to topk kept the key before."""
        import torch

        if depth > self._MAX_DEPTH or value is None or isinstance(
                value, (bool, int, float, complex, str, bytes, torch.Tensor, torch.nn.Module, types.ModuleType)):
            return  # plain values are hashed by _Hasher.value; modules are walked by named_modules
        if isinstance(value, type):
            self.klass(value, depth)
        elif inspect.ismethod(value):
            self.function(label, value.__func__, depth)
            if not isinstance(value.__self__, (type, torch.nn.Module)):
                self.h.value(label + ".__self__", value.__self__)  # the object's data: Holder(2).apply vs Holder(3).apply
            self.held(label + ".__self__", value.__self__, depth + 1)
        elif inspect.isfunction(value) or isinstance(value, functools.partial):
            self.function(label, value, depth)
            if isinstance(value, functools.partial):
                for item in (*value.args, *value.keywords.values()):
                    self.held(label + "()", item, depth + 1)
        elif isinstance(value, (list, tuple, set, frozenset)):
            for item in value:
                self.held(label + "[]", item, depth + 1)
        elif isinstance(value, Mapping):
            for item in value.values():
                self.held(label + "{v}", item, depth + 1)
        elif not inspect.isroutine(value) and not _is_torch_owned(type(value)) and self._first_visit(value):
            self.klass(type(value), depth)
            attrs = getattr(value, "__dict__", None)
            if isinstance(attrs, dict):
                for k, v in attrs.items():
                    self.held(f"{label}.{k}", v, depth + 1)

    def _globals_of(self, fn: types.FunctionType, depth: int) -> None:
        if depth > self._MAX_DEPTH:
            return
        namespace = fn.__globals__
        for name in sorted(_code_names(fn.__code__)):
            if name not in namespace:
                continue  # an attribute name, a builtin or a local
            self._global(f"global:{fn.__module__}.{name}", namespace[name], depth)
        for cell in fn.__closure__ or ():
            try:
                value = cell.cell_contents
            except ValueError:  # empty cell
                continue
            self._global("closure", value, depth)

    def _global(self, label: str, value: Any, depth: int) -> None:
        if isinstance(value, types.ModuleType):
            return
        if isinstance(value, type):
            self.klass(value, depth)
        elif inspect.isfunction(value) or isinstance(value, functools.partial):
            self.function(label, value, depth)
        elif inspect.isroutine(value):
            self.h.text(label, _qualname(value))
        else:
            self.h.value(label, value)
            self.held(label, value, depth)  # a closure or a global holding an object of a user class


def _code_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions, comprehensions, lambdas
            names |= _code_names(const)
    return names


def _qualname(obj: Any) -> str:
    return f"{getattr(obj, '__module__', '?')}.{getattr(obj, '__qualname__', repr(obj))}"


def _is_torch_owned(obj: Any) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module in ("builtins", "torch") or module.startswith("torch.")


def _class_code(cls: type) -> str:
    """Source of a user class; torch's own classes are pinned by the torch version instead."""
    if _is_torch_owned(cls):
        return _qualname(cls)
    try:
        return _qualname(cls) + "\n" + _class_source(cls)
    except (OSError, TypeError):
        return _qualname(cls)


# {source text of a file: {class qualname: index of its first line}}, the file's text as the key
_CLASS_LINES: dict[str, dict[str, int]] = {}


def _class_source(cls: type) -> str:
    """``inspect.getsource(cls)``, with each source file parsed once per process and content.

    For a class, inspect parses the whole module with ``ast`` on every call (a method has its code
    object's line number; a class in Python 3.11 has none): ~0.4 s per class of a 3,000-line model
    file, for every class of every model of every test. The same lines are found here from one
    parse per file text: the first class of that qualified name in source order, from its first
    decorator (as inspect does), and the same block extraction (``inspect.getblock``)."""
    file = inspect.getsourcefile(cls)  # TypeError for a built-in class
    if not file:
        return inspect.getsource(cls)  # "<...>" sources (doctest, exec): inspect's own way
    linecache.checkcache(file)  # a file edited on disk is read again, as inspect does
    module = inspect.getmodule(cls, file)
    lines = linecache.getlines(file, module.__dict__) if module else linecache.getlines(file)
    if not lines:
        raise OSError("could not get source code")
    text = "".join(lines)
    starts = _CLASS_LINES.get(text)
    if starts is None:
        if len(_CLASS_LINES) >= 256:
            _CLASS_LINES.clear()
        starts = _CLASS_LINES[text] = _class_starts(text)
    first = starts.get(cls.__qualname__)
    if first is None:
        return inspect.getsource(cls)  # raises OSError as inspect does when the class is not there
    return "".join(inspect.getblock(lines[first:]))


def _class_starts(text: str) -> dict[str, int]:
    """{qualname: 0-based first line} of every class in ``text``, the first of each name in source
    order, with inspect's qualnames (a function's classes under ``name.<locals>``)."""
    import ast

    starts: dict[str, int] = {}

    def visit(node: Any, stack: list[str]) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, stack + [child.name, "<locals>"])
            elif isinstance(child, ast.ClassDef):
                name = ".".join(stack + [child.name])
                line = child.decorator_list[0].lineno if child.decorator_list else child.lineno
                starts.setdefault(name, line - 1)
                visit(child, stack + [child.name])
            else:
                visit(child, stack)

    visit(ast.parse(text), [])
    return starts


def _callable_code(fn: Any) -> str:
    if isinstance(fn, functools.partial):
        inner = _Hasher()
        inner.value("args", fn.args)
        inner.value("keywords", fn.keywords)
        return f"partial({_callable_code(fn.func)}, {inner.hexdigest()})"
    fn = getattr(fn, "__func__", fn)
    if _is_torch_owned(fn):
        return _qualname(fn)
    try:
        return _qualname(fn) + "\n" + inspect.getsource(fn)
    except (OSError, TypeError):
        return _qualname(fn)


def _versions() -> dict[str, str]:
    """The versions that shape an export (part of every key and of meta.json); a copy of this process's."""
    if not _VERSIONS:
        _VERSIONS.update(_read_versions())
    return dict(_VERSIONS)


# Read once per process: importlib.metadata scans sys.path for each distribution (~2.5 ms CPU, ~20 ms
# wall under load, per cache hit in the examples' profile), and the versions of the packages a
# process has imported do not change while it runs.
_VERSIONS: dict[str, str] = {}


def _read_versions() -> dict[str, str]:
    from importlib import metadata

    versions = {"python": f"{sys.version_info[0]}.{sys.version_info[1]}"}
    try:
        import torch

        versions["torch"] = str(torch.__version__)
    except ImportError:  # pragma: no cover
        versions["torch"] = "missing"
    for dist in ("onnx", "onnxscript", "onnx-ir"):
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = "missing"
    return versions


# --------------------------------------------------------------------------- cache entries


def _read_valid_entry(entry: pathlib.Path) -> dict[str, Any] | None:
    """meta.json of a complete entry, or None when the entry is missing or damaged."""
    return _checked_entry(entry)[0]


def _checked_entry(entry: pathlib.Path) -> tuple[dict[str, Any] | None, str | None]:
    """(meta.json, None) of a complete entry whose files have the content hashes meta.json records;
    (None, None) when there is no entry; (None, what is wrong) for one that is damaged or edited (a
    same-size edit of model.onnx was used as is before)."""
    from . import filehash
    from .filehash import sha256_file

    model = entry / MODEL_FILENAME
    if not os.path.lexists(entry):
        return None, None
    try:
        if model.stat().st_size == 0:
            return None, "has an empty model.onnx"
        meta = loads_strict((entry / META_FILENAME).read_text())
        files, hashes = meta.get("files"), meta.get("sha256")
        if not isinstance(files, dict) or MODEL_FILENAME not in files or not isinstance(hashes, dict):
            return None, "has no content hashes (damaged, or written by another version)"
        stamped = _read_stamp(entry, hashes)
        hashed = False
        for name, size in files.items():
            path = entry / name
            if path.stat().st_size != size:
                return None, f"is damaged: {name} has another size than recorded"
            fp = filehash.fingerprint(path)
            if stamped.get(name) == list(fp) and isinstance(hashes.get(name), str):
                filehash.remember(fp, hashes[name])  # checked by an earlier process; unchanged since
                continue
            if hashes.get(name) != sha256_file(path):
                return None, f"does not match its content hash: {name} was edited or damaged"
            hashed = True
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        return None, f"is unreadable ({type(exc).__name__})"
    if not isinstance(meta, dict):
        return None, "is damaged: meta.json is not an object"
    if hashed:
        _write_stamp(entry, hashes)
    return meta, None


def _read_stamp(entry: pathlib.Path, hashes: Mapping[str, Any]) -> dict[str, Any]:
    """{file name: its fingerprint when its hash was last checked} from the entry's stamp, or {} when
    there is none, it is unreadable, or it was written for other content hashes than meta.json's.

    Hashing a 128 MB model takes ~0.7 s, once per process that hits the entry (every xdist worker,
    every run). A file's fingerprint (``filehash.fingerprint``: inode, size, mtime and ctime) changes
    with every write to it, and ctime cannot be set back by the writer, so a file whose fingerprint is
    the one recorded after its hash was checked still has that content: the argument by which
    ``filehash`` trusts its in-process memo, kept across processes. A copied or restored cache (new
    inodes and ctimes) is hashed once and stamped again. Like meta.json's hashes, the stamp catches
    edits and damage, not a forger who rewrites it too.
    """
    try:
        stamp = loads_strict((entry / VERIFIED_FILENAME).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(stamp, dict) or stamp.get("sha256") != hashes or not isinstance(stamp.get("stat"), dict):
        return {}
    return stamp["stat"]


def _write_stamp(entry: pathlib.Path, hashes: Mapping[str, Any]) -> None:
    """Record the fingerprint of each file of ``hashes`` whose content hash was just checked (or
    computed). Written whole under a temporary name and renamed (concurrent writers each install a
    complete stamp); a cache directory that cannot be written only loses the saving."""
    from . import filehash

    try:
        stat = {name: list(filehash.fingerprint(entry / name)) for name in hashes}
        tmp = entry / f"{_TMP_PREFIX}{VERIFIED_FILENAME}-{uuid.uuid4().hex[:8]}"
        tmp.write_text(json.dumps({"sha256": dict(hashes), "stat": stat}, sort_keys=True) + "\n")
        os.replace(tmp, entry / VERIFIED_FILENAME)
    except (OSError, TypeError):
        try:
            tmp.unlink()
        except (OSError, UnboundLocalError):
            pass


def _entry_opset(entry: pathlib.Path, meta: Mapping[str, Any]) -> int:
    opset = meta.get("opset")
    if isinstance(opset, int):
        return opset
    import onnx  # pragma: no cover - meta.json always has it

    return _default_opset(onnx.load(str(entry / MODEL_FILENAME), load_external_data=False))


def _default_opset(proto: Any) -> int:
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    raise ExportError("the exported model has no default-domain opset_import")


def _publish(work: pathlib.Path, entry: pathlib.Path) -> bool:
    """Rename ``work`` to ``entry`` atomically. True if ours landed, False if another process's
    complete entry was already there (ours is then discarded)."""
    for _ in range(5):
        try:
            os.rename(work, entry)
            return True
        except OSError:
            if _read_valid_entry(entry) is not None:
                shutil.rmtree(work, ignore_errors=True)
                return False
            _discard(entry)  # a damaged entry: move it aside and try again
    raise ExportError(f"could not install cache entry {entry}")  # pragma: no cover


def _discard(entry: pathlib.Path) -> None:
    trash = entry.with_name(f"{_TRASH_PREFIX}{entry.name[:12]}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(entry, trash)
    except OSError:
        return  # gone already, or someone else is handling it
    shutil.rmtree(trash, ignore_errors=True)


def _remove_stale_tmp(cache_dir: pathlib.Path) -> None:
    """Remove work dirs left by crashed exports (older than a day, so never a live one)."""
    cutoff = time.time() - _STALE_TMP_SECONDS
    try:
        candidates = [
            p for p in cache_dir.iterdir()
            if p.name.startswith((_TMP_PREFIX, _TRASH_PREFIX)) and p.stat().st_mtime < cutoff
        ]
    except OSError:
        return
    for path in candidates:
        shutil.rmtree(path, ignore_errors=True)


def _clear_dir(path: pathlib.Path) -> None:
    for child in list(path.iterdir()):
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)


# --------------------------------------------------------------------------- output capture


class _Output:
    def __init__(self) -> None:
        self.parts: list[str] = []

    def text(self) -> str:
        return _ANSI_RE.sub("", "".join(self.parts))


@contextlib.contextmanager
def _captured_output() -> Iterator[_Output]:
    """Capture what the exporters print, log and warn, at the Python and file-descriptor level.

    The dynamo exporter prints progress lines and logs through torch's own stderr handlers; the
    TorchScript exporter warns DeprecationWarning and its C++ side writes to fd 2.
    """
    out = _Output()
    py_stdout, py_stderr = io.StringIO(), io.StringIO()
    log_stream = io.StringIO()
    handler = logging.StreamHandler(log_stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    saved_loggers = []
    prefixes = ("torch.", "onnx.", "onnxscript.", "onnx_ir.")
    names = {"torch", "onnx", "onnxscript", "onnx_ir"}
    names.update(
        name for name, lg in logging.root.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and lg.handlers and name.startswith(prefixes)
    )
    for name in sorted(names):
        lg = logging.getLogger(name)
        saved_loggers.append((lg, lg.handlers[:], lg.propagate))
        # Drop console and log-capture handlers (pytest attaches its own even to torch's
        # non-propagating loggers); keep the ones that write files (--log-file, TORCH_TRACE).
        kept = [h for h in lg.handlers if _writes_file(h)]
        if not name.startswith("torch.__"):  # torch's structured-trace records are empty text
            kept.append(handler)
        lg.handlers = kept
        lg.propagate = False
    fd_capture = _FdCapture()
    try:
        with warnings.catch_warnings(record=True) as caught, \
                contextlib.redirect_stdout(py_stdout), contextlib.redirect_stderr(py_stderr):
            warnings.simplefilter("always")
            fd_capture.start()
            try:
                yield out
            finally:
                # Progress lines (stdout) last: the error message shows the tail.
                out.parts.append(fd_capture.stop())
                out.parts.append(py_stderr.getvalue())
                out.parts.append(log_stream.getvalue())
                out.parts.extend(f"{w.category.__name__}: {w.message}\n" for w in caught)
                out.parts.append(py_stdout.getvalue())
    finally:
        for lg, handlers, propagate in saved_loggers:
            lg.handlers = handlers
            lg.propagate = propagate


def _writes_file(handler: logging.Handler) -> bool:
    return isinstance(handler, logging.FileHandler) or type(handler).__name__ == "LazyTraceHandler"


class _FdCapture:
    """Point fds 1 and 2 at a temp file (what pytest's capture=fd does) and restore them."""

    def __init__(self) -> None:
        self._saved: list[tuple[int, int]] = []
        self._file: Any = None

    def start(self) -> None:
        try:
            self._file = tempfile.TemporaryFile(mode="w+b")
            for fd in (1, 2):
                os.fstat(fd)
            for stream in (sys.__stdout__, sys.__stderr__):
                if stream is not None:
                    stream.flush()
            for fd in (1, 2):
                self._saved.append((fd, os.dup(fd)))
                os.dup2(self._file.fileno(), fd)
        except (OSError, ValueError):
            self.stop()

    def stop(self) -> str:
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except (OSError, ValueError):
                pass
        for fd, saved in reversed(self._saved):
            os.dup2(saved, fd)
            os.close(saved)
        self._saved = []
        text = ""
        if self._file is not None:
            self._file.seek(0)
            text = self._file.read().decode("utf-8", "replace")
            self._file.close()
            self._file = None
        return text


def _error_message(exporter: str, model_class: str, exc: BaseException, output: str) -> str:
    missing = _missing_module(exc)
    if missing in EXPORTER_PACKAGES.get(exporter, ()):  # an optional package the exporter imports is absent
        return missing_package_message(exporter, missing)
    message = _ANSI_RE.sub("", str(exc)).strip() or type(exc).__name__
    lines = [f"{exporter} exporter failed to export {model_class}: {message}"]
    seen = {id(exc)}
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        text = _ANSI_RE.sub("", str(cause)).strip()
        first = text.splitlines()[0] if text else ""
        if not first or first not in message:
            short = "\n".join(text.splitlines()[:20])
            lines.append(f"Caused by {type(cause).__name__}: {short}")
        cause = cause.__cause__ or cause.__context__
    tail = [line for line in output.splitlines() if line.strip()][-_OUTPUT_TAIL_LINES:]
    if tail:
        lines.append("Exporter output (last lines):")
        lines.extend("  " + line for line in tail)
    return "\n".join(lines)
