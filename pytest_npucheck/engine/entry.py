"""The per-test entry of a run: what one ``npu_check`` call (or one marked test that never got to
its check) contributes to the reports, the baseline and the budgets; and what ``npu_check`` returns.

The JSON form (:meth:`CheckEntry.to_json`) is the ``tests[]`` item of the JSON report
(``schemas/report.schema.json``); it travels from xdist workers to the controller as plain data,
and every run-level decision (``engine.run_decisions``) reads that form.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

STATUSES = ("passed", "failed", "error")


@dataclass(eq=False)
class CheckEntry:
    """One check of one test. ``status`` stays "error" until the check decides "passed" or
    "failed"; ``call`` is the number of the test's npu_check call (None for the first one)."""

    nodeid: str
    status: str = "error"
    error: Optional[str] = None
    export: Optional[dict[str, Any]] = None  # exporter, opset, cache_hit, key, path
    targets: list[dict[str, Any]] = field(default_factory=list)  # TargetResult.to_json() + baseline, budget, edges
    call: Optional[int] = None
    numerics: Optional[dict[str, Any]] = None
    oracle: Optional[dict[str, Any]] = None

    @classmethod
    def errored(cls, nodeid: str, error: str) -> "CheckEntry":
        """A marked test whose check did not run or whose result is unknown (the message says why)."""
        return cls(nodeid=nodeid, status="error", error=error)

    @property
    def call_number(self) -> int:
        return self.call or 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"nodeid": self.nodeid, "status": self.status, "error": self.error,
                               "export": self.export, "targets": self.targets}
        if self.call is not None:
            out["call"] = self.call
        if self.numerics is not None:
            out["numerics"] = self.numerics
        if self.oracle is not None:
            out["oracle"] = self.oracle
        return out


@dataclass
class NpuCheckOutcome:
    """What `npu_check(...)` returns when every target passes."""

    results: list[Any]  # list[TargetResult]
    onnx_path: Path
    export: Mapping[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)


__all__ = ["CheckEntry", "NpuCheckOutcome", "STATUSES"]
