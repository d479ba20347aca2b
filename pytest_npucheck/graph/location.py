"""Where a node came from in the PyTorch source, and that place in words.

The exporters record it per node: the dynamo exporter as metadata (the module scopes and the stack
trace), the TorchScript exporter in the node's scope name (``/layer1/conv1/Conv``). Parsing is
memoised per distinct string (``clear_caches``). ``format_location`` is the one way a location is
written, for the text, Markdown, HTML and baseline reports alike.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Optional, Union

from .frozen import cached, frozen_new

@dataclass(frozen=True)
class SourceLocation:
    """Where a node came from in the PyTorch model, as far as the exporter recorded it."""

    module: Optional[str] = None  # dotted module path, "" for the root module
    file: Optional[str] = None
    line: Optional[int] = None
    code: Optional[str] = None
    function: Optional[str] = None

    def __str__(self) -> str:
        return format_location(self)

    @cached
    def _json(self) -> dict[str, Any]:  # one location is shared by many nodes: built once, copied
        return {k: v for k, v in (("module", self.module), ("file", self.file), ("line", self.line),
                                  ("function", self.function), ("code", self.code)) if v is not None}

    def to_json(self) -> dict[str, Any]:
        return dict(self._json)


_LIBRARY_FRAME = re.compile(r"[/\\\\](torch|onnxscript|torchvision)[/\\\\]")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


# the keys of the exporter's metadata _source reads begin with this (as bytes: how a model holds them)
METADATA_PREFIX = b"pkg.torch.onnx."


def _source(node: Any, name: str) -> Optional[SourceLocation]:
    props = node.metadata_props
    if props:
        scopes = trace = None
        count = len(props)
        before = props[count - 2] if count >= 2 else None
        last = props[count - 1]
        if before is not None and before.key == "pkg.torch.onnx.name_scopes" and last.key == "pkg.torch.onnx.stack_trace":
            # the dynamo exporter writes these two last, after three others: read only them (the values
            # are the last of each key, as the loop below would find)
            scopes, trace = before.value, last.value
        else:
            for prop in props:  # read only the two values used (the others are long strings)
                key = prop.key
                if key == "pkg.torch.onnx.name_scopes":
                    scopes = prop.value
                elif key == "pkg.torch.onnx.stack_trace":
                    trace = prop.value
        if scopes or trace:
            location = _located(_scope_module(scopes) if scopes else None, trace)
            if location is not None:
                return location
    if name.startswith("/") and len(name) > 1:
        # TorchScript exporter scope names: /layer1/conv1/Conv -> layer1.conv1 (all but the last part)
        return _module_location(name.strip("/").rpartition("/")[0].replace("/", "."))
    return None


@functools.lru_cache(maxsize=4096)
def _module_location(module: str) -> SourceLocation:
    return SourceLocation(module=module)


# The nodes of one module call share their scopes, and every layer of a stack shares its stack
# trace: each distinct string is parsed once (parsing was a third of the graph-facts time).
@functools.lru_cache(maxsize=4096)
def _located(module: Optional[str], trace: Optional[str]) -> Optional[SourceLocation]:
    """The source location of a module (from a node's scopes) and a stack trace; shared by the nodes
    of one module call. Keyed by the module, not the scopes: the dynamo exporter's scopes end in a
    name of their own for every node ('linear_105'), while the module and the trace repeat."""
    file = line = function = code = None
    if trace:
        frame = _user_frame(trace)
        if frame is not None:
            file, line, function, code = frame
    if module is not None or file:
        return frozen_new(SourceLocation, module=module, file=file, line=line, function=function, code=code)
    return None


def _scope_module(scopes: str) -> Optional[str]:
    """The deepest module of a node's cumulative scopes ``['', 'layer1', 'layer1.conv1', '<aten op>']``.

    The exporter writes repr() of a list of plain strings. Without a double quote or a backslash
    every item is single-quoted and holds no quote, so the last four quotes enclose the last two
    items: no parse, and no cache (the dynamo exporter's scopes end in a name of their own for
    every node, so each string is seen once). Anything else goes to literal_eval."""
    if scopes[:2] == "['" and scopes[-2:] == "']" and '"' not in scopes and "\\" not in scopes:
        pieces = scopes.rsplit("'", 4)
        return pieces[1] if len(pieces) == 5 else ""
    return _scope_module_parsed(scopes)


@functools.lru_cache(maxsize=4096)
def _scope_module_parsed(scopes: str) -> Optional[str]:
    try:
        parts = ast.literal_eval(scopes)
        return parts[-2] if len(parts) >= 2 else ""
    except (ValueError, SyntaxError, IndexError, TypeError):
        return None


@functools.lru_cache(maxsize=4096)
def _user_frame(trace: str) -> Optional[tuple[str, int, str, Optional[str]]]:
    frames = list(_iter_frames(trace))
    # the user's line, not torch's own module code that it called
    user = [f for f in frames if not _LIBRARY_FRAME.search(f[0])]
    return (user or frames)[-1] if (user or frames) else None


def _iter_frames(trace: str) -> Iterator[tuple[str, int, str, Optional[str]]]:
    lines = trace.splitlines()
    for i, text in enumerate(lines):
        m = _FRAME.search(text)
        if m:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.search(lines[i + 1]) else None
            yield m.group(1), int(m.group(2)), m.group(3), code


def format_location(source: Union[SourceLocation, Mapping[str, Any], None], path: str = "as recorded") -> str:
    """``module at file:line`` of a node's source (a ``SourceLocation`` or its ``to_json()`` form):
    the root module is ``<root>``; without a module, ``file:line``; without a file, the module;
    with neither (or no source), ``unknown``.

    ``path``: how the file is written: ``"as recorded"`` by the exporter, ``"relative"`` to the
    working directory when it is inside it, or ``"name"`` (the file name alone)."""
    if not source:
        return "unknown"
    if isinstance(source, SourceLocation):
        module, file, line = source.module, source.file, source.line
    else:
        module, file, line = source.get("module"), source.get("file"), source.get("line")
    parts = [module or "<root>"] if module is not None else []
    if file:
        file = str(file)
        if path == "name":
            file = file.replace("\\", "/").rsplit("/", 1)[-1]
        elif path == "relative":
            try:
                rel = os.path.relpath(file)
                if not rel.startswith(".."):
                    file = rel
            except ValueError:  # another drive (Windows)
                pass
        if file:
            parts.append(f"{file}:{line}" if line else file)
    return " at ".join(parts) if parts else "unknown"


def clear_caches() -> None:
    """Forget the scopes and stack traces parsed so far."""
    for memo in (_located, _module_location, _scope_module_parsed, _user_frame):
        memo.cache_clear()
