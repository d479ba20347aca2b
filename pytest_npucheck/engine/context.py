"""The frozen context of one check: the run's settings, the test's spec, where files go, and the
run's loaded files (support tables, baseline, budgets). No pytest import: the plugin builds it from
the test item and passes callbacks for what only pytest can do (a warning on the test)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ContextManager, Optional

from .settings import CheckSpec, Settings


@dataclass(frozen=True)
class RunContext:
    settings: Settings
    spec: CheckSpec
    test_id: str
    call: Optional[int]  # the number of the test's npu_check call; None for the first
    catalog: Callable[[], Any]  # the support-table catalog (loaded on first use; the loader's errors are the caller's)
    baseline: Callable[[], Any]  # the accepted fallbacks (loaded on first use)
    budgets: Any  # the budgets file, None when there is none
    cache_dir: Optional[Path]  # the export cache; None: every export goes to a fresh temporary directory
    temp_exports: list[Path]  # such temporary directories, removed when the test ends (append-only)
    warn: Callable[[str], None]  # a warning on the test (shown in the terminal even when it passes)
    # ``with ctx.progress("exporting ..."):`` around slow work: the plugin writes a progress line when
    # it takes more than a couple of seconds (report.terminal.progress); nothing by default
    progress: Callable[[str], ContextManager[Any]] = field(default=lambda what: contextlib.nullcontext())

    @property
    def rootpath(self) -> Path:
        return self.settings.rootpath


__all__ = ["RunContext"]
