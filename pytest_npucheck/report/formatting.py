"""The one place that formats values for people: source locations, shares, metric numbers, and the
escaping of each output format (terminal, Markdown, HTML).

Every renderer (terminal, Markdown, HTML) formats through these functions, so a location, a
percentage or a cosine reads the same everywhere. Escaping builds on :func:`escape.visible` (control,
bidi and invisible characters shown as escapes) and caps the length of names that come from models.
"""

from __future__ import annotations

import html as _html
import math
import re
from typing import Any, Mapping, Optional

from ..graph.location import format_location
from .escape import visible

__all__ = ["location", "pct", "number", "signed_pct", "clean", "md", "html", "plural"]

MAX_NAME = 120


def _field(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, Mapping) else getattr(source, name, None)


def location(source: Any, *, relative: bool = False, file_name_only: bool = False) -> str:
    """A node's source as ``module at file:line``; "unknown" without one.

    ``source`` is a JSON mapping (``{"module", "file", "line"}``) or a ``SourceLocation``. Written by
    the graph layer's ``format_location`` (the one definition); ``file_name_only``: the file's base
    name (reports read on another machine); ``relative``: the path relative to the working directory
    when inside it (the terminal)."""
    if source is not None and not isinstance(source, Mapping) and not hasattr(source, "to_json"):
        source = {"module": _field(source, "module"), "file": _field(source, "file"), "line": _field(source, "line")}
    return format_location(source or None, path="name" if file_name_only else "relative" if relative else "as recorded")


def pct(x: Any) -> str:
    """A share, one decimal ("85.7%"); "n/a" when unknown."""
    return "n/a" if x is None else f"{float(x):.1%}"


def signed_pct(x: float) -> str:
    return f"{float(x):+.1%}"


def number(x: Any, digits: int = 4) -> str:
    """A metric with the digits that matter: ``digits`` significant digits ("-" when absent; "inf",
    "nan" and other strings as they are). A cosine close to 1 keeps the digits that tell it from 1
    (0.99999823 -> "0.9999982", not "1")."""
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    if isinstance(x, bool):
        return str(x)
    x = float(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    if 0.99 < abs(x) < 1.0:  # 1 - x is the quantity that matters: keep `digits` digits of it
        gap = 1.0 - abs(x)
        extra = max(0, -int(math.floor(math.log10(gap))) - 1) if gap > 0 else 0
        text = f"{x:.{digits + extra}g}"
        return text if float(text) != (1.0 if x > 0 else -1.0) else f"{x:.{digits + extra + 1}g}"
    return f"{x:.{digits}g}"


def plural(n: int, one: str, many: Optional[str] = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def _cap(s: str, limit: int) -> str:
    return s if len(s) <= limit else s[: limit - 12] + f"...(+{len(s) - limit + 12})"


def clean(text: Any, limit: int = MAX_NAME) -> str:
    """For the terminal: invisible and bidi characters escaped (``escape.visible``), length capped."""
    return _cap(visible(str(text)), limit)


_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~>-])")


def md(text: Any, limit: int = 160) -> str:
    """For a Markdown table cell or line: no line breaks, no markup, no HTML, bounded length."""
    s = visible(_cap(str(text), limit))
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", s)


_HTML_SPECIAL = re.compile("[&<>\"']")


def html(text: Any, limit: int = 200) -> str:
    """For HTML text and attributes: escaped, invisible characters shown, length capped."""
    s = text if type(text) is str else str(text)
    if len(s) > limit or not s.isprintable():  # else (most names) nothing to show or cap, no surrogate
        s = clean(s, limit).encode("utf-8", "replace").decode("utf-8")
    return _html.escape(s, quote=True) if _HTML_SPECIAL.search(s) else s


def oracle_tool(o: Mapping[str, Any], unknown: str = "") -> str:
    """The package an oracle ran (``onnxruntime-qnn 2.7.0``) and, when the toolchain inside it has a
    version of its own (the QNN SDK of onnxruntime-qnn), that version: ``(QNN 2.51.0)``."""
    tool = f"{o.get('package') or o.get('toolchain') or '?'} {o.get('package_version') or unknown}".strip()
    version = o.get("toolchain_version")
    if version and version != o.get("package_version"):
        tool += f" ({str(o.get('toolchain') or '').upper()} {version})"
    return tool
