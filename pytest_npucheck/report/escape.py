"""Invisible and direction-changing characters in names from models, shown as escapes.

Node names, module names, file paths and test ids come from the model and the test code under
review. A right-to-left override (U+202E), an isolate (U+2066..U+2069), a zero-width space or a
line separator reaches a Markdown PR comment, an HTML report or a terminal raw and makes the text
read differently from what it is (Trojan Source, CVE-2021-42574). Every renderer passes such text
through :func:`visible` (terminal: ``text.clean``; Markdown: ``markdown.esc``; HTML: ``html.h``),
which shows each of those characters as an escape: ``\\x1b``, ``\\u202e``, ``\\U000e0001``.
"""

from __future__ import annotations

import unicodedata

# control (C0, C1), format (bidi controls, zero-width, soft hyphen, tags), line and paragraph
# separators, lone surrogates, unassigned code points (a later Unicode may give them a direction)
_HIDDEN = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn"})


def _escape(ch: str) -> str:
    o = ord(ch)
    return f"\\x{o:02x}" if o <= 0xFF else (f"\\u{o:04x}" if o <= 0xFFFF else f"\\U{o:08x}")


def visible(text: str) -> str:
    """``text`` with every control, format, separator, surrogate or unassigned character escaped."""
    text = str(text)
    if text.isprintable():  # no character of those categories (the common case: one C call)
        return text
    return "".join(_escape(ch) if unicodedata.category(ch) in _HIDDEN else ch for ch in text)
