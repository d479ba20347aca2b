"""Exceptions that carry a user-facing message naming the file, field or node at fault."""

from __future__ import annotations


class NpuCheckError(Exception):
    """Base class: every message is meant to be shown to the user as is."""


class UsageError(NpuCheckError):
    """Bad option, target or configuration (CLI exit code 2, pytest usage error)."""


class TableError(NpuCheckError):
    """A support table or the catalog is invalid; lists every problem with file and JSON path."""

    def __init__(self, path: str, problems: list[str]) -> None:
        self.path = path
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid support table {path}: {len(self.problems)} problem(s)\n{lines}")


class ModelError(NpuCheckError):
    """The model file cannot be read as ONNX, or is not a model that can be checked."""
