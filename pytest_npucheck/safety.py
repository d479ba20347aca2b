"""External data references are untrusted: check them before anything could read them.

An ONNX file can point its tensors at any path (``../../secret``, ``/etc/passwd``, a symlink or a
hardlink to a file outside the model directory). The static check never reads external data, but
ONNX Runtime and ``onnx.load`` would: every reference is checked here first, with the layers ONNX
itself adopted (canonical containment, no symlinks, no hardlinks, regular files, sizes that fit).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any, Iterator, Optional

from .errors import ModelError

_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16, 16: 2,
             17: 1, 18: 1, 19: 1, 20: 1}


def _tensors(graph: Any, where: str, keep: Optional[list[tuple[Any, ...]]] = None) -> Iterator[tuple[str, Any]]:
    """(label, TensorProto) for every tensor of `graph` (and its subgraphs) stored as external data.

    Labels are formatted only for those tensors: most graphs have thousands of attributes and none
    of them external. ``keep``: gets the attributes of each node of ``graph`` (not of its bodies) as
    a tuple, in node order, for a caller that reads them next (graph.build: making the protobuf objects
    of ~4,000 attributes costs more than checking them)."""
    for t in graph.initializer:
        if t.data_location == 1:
            yield f"{where}initializer '{t.name}'", t
    for s in graph.sparse_initializer:
        if s.values.data_location == 1:
            yield f"{where}sparse initializer '{s.values.name}' values", s.values
        if s.indices.data_location == 1:
            yield f"{where}sparse initializer '{s.values.name}' indices", s.indices
    for node in graph.node:
        attributes = tuple(node.attribute[:])  # a slice is made in C (tuple() of the field iterates it)
        if keep is not None:
            keep.append(attributes)
        for a in attributes:
            has_t, has_s, has_g = a.HasField("t"), a.HasField("sparse_tensor"), a.HasField("g")
            tensors, graphs = a.tensors, a.graphs
            if has_t and a.t.data_location != 1 and not (has_s or has_g or tensors or graphs):
                continue  # a Constant's tensor stored in the file (thousands in a large model)
            if not (has_t or has_s or has_g or tensors or graphs):
                continue
            label = f"{where}node '{node.name}' attribute '{a.name}'"
            if has_t and a.t.data_location == 1:
                yield label, a.t
            for k, t in enumerate(tensors):
                if t.data_location == 1:
                    yield f"{label}[{k}]", t
            if has_s and a.sparse_tensor.values.data_location == 1:
                yield label, a.sparse_tensor.values
            if has_g:
                yield from _tensors(a.g, f"{label} > ")
            for k, g in enumerate(graphs):
                yield from _tensors(g, f"{label}[{k}] > ")


def iter_external(model: Any, keep: Optional[list[tuple[Any, ...]]] = None) -> Iterator[tuple[str, Any]]:
    """(label, TensorProto) for every tensor stored as external data, in graphs, bodies and functions.
    ``keep``: as for ``_tensors``, the attributes of each main-graph node."""
    yield from _tensors(model.graph, "", keep)
    for f in model.functions:
        for node in f.node:
            for a in node.attribute:
                if a.HasField("t") and a.t.data_location == 1:
                    yield f"function '{f.name}' node '{node.name}' attribute '{a.name}'", a.t
    for info in getattr(model, "training_info", []):
        yield from _tensors(info.initialization, "training_info > ")


def check_external_data(model: Any, model_path: Path, require_files: bool = False,
                        keep: Optional[list[tuple[Any, ...]]] = None) -> None:
    """Reject external-data references that escape the model directory or do not fit their file.

    ``require_files``: also fail when a referenced file is missing (needed before running the
    model; the static check only needs the references to be safe). ``keep``: a list that gets the
    attributes of each main-graph node, as a tuple in node order (complete when this returns).
    """
    base = Path(model_path).resolve().parent
    for label, tensor in iter_external(model, keep):
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        what = f"{model_path}: {label} external data location {location!r}"
        try:
            _check_reference(what, base, location, entries, tensor, require_files)
        except (OSError, ValueError) as exc:  # a name too long for the file system, a NUL byte
            raise ModelError(f"{what}: not a usable file name ({getattr(exc, 'strerror', None) or exc})") from None


def _check_reference(what: str, base: Path, location: str, entries: dict[str, str], tensor: Any,
                     require_files: bool) -> None:
    if not location:
        raise ModelError(f"{what}: no location")
    if "\x00" in location:
        raise ModelError(f"{what}: a NUL byte is not allowed in a file name")
    if os.path.isabs(location) or location.startswith(("\\", "/")) or (len(location) > 1 and location[1] == ":"):
        raise ModelError(f"{what}: absolute paths are not allowed")
    if ".." in Path(location.replace("\\", "/")).parts:
        raise ModelError(f"{what}: '..' would leave the model directory {base}")
    target = base / location
    # every component, the last one included, must not be a symbolic link
    probe = base
    for part in Path(location).parts:
        probe = probe / part
        if probe.is_symlink():
            raise ModelError(f"{what}: {probe} is a symbolic link")
    real = Path(os.path.realpath(target))
    if base != real and base not in real.parents:
        raise ModelError(f"{what}: resolves to {real}, outside the model directory {base}")
    try:
        st = os.lstat(real)
    except FileNotFoundError:
        if require_files:
            raise ModelError(f"{what}: file {real} does not exist") from None
        return
    if not stat.S_ISREG(st.st_mode):
        raise ModelError(f"{what}: {real} is not a regular file")
    if st.st_nlink > 1:
        raise ModelError(f"{what}: {real} has {st.st_nlink} hard links; refusing a file that may be linked "
                         "from outside the model directory")
    try:
        offset = int(entries.get("offset", "0") or 0)
        length = int(entries["length"]) if entries.get("length") else None
    except ValueError:
        raise ModelError(f"{what}: offset/length are not integers") from None
    if offset < 0 or (length is not None and length < 0):
        raise ModelError(f"{what}: negative offset or length")
    end = offset + (length if length is not None else 0)
    if offset > st.st_size or end > st.st_size:
        raise ModelError(f"{what}: offset {offset} + length {length} beyond the file's {st.st_size} bytes")
    itemsize = _ITEMSIZE.get(tensor.data_type)
    if length is not None and itemsize is not None:
        numel = 1
        for d in tensor.dims:
            numel *= int(d)
        if numel * itemsize != length:
            raise ModelError(f"{what}: length {length} does not match dims {list(tensor.dims)} "
                             f"x {itemsize} bytes = {numel * itemsize}")
