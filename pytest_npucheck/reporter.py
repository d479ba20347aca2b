"""The controller's reporter: collects every process's per-test entries and, when the run is over,
takes the run-level decisions (``engine.run_decisions``: stale baseline and budget entries, the
budgets' ratchet, what fails the run), writes the baseline and the reports, and prints the summary.

Registered per config (the junitxml pattern): under xdist the controller receives every worker's
reports, and only the controller writes files (reports and the baseline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pytest

from .engine import run_decisions as decide
from .engine.entry import CheckEntry
from .engine.settings import Settings

MARKED = pytest.StashKey[dict]()  # the marked test ids this process selected and deselected (shard report)
MARKED_OUTPUT = "npucheck_marked"  # the key of those ids in an xdist worker's output
USAGE_ERROR_OUTPUT = "npucheck_usage_error"  # a worker's usage error at collection (the message's lines)


def marked_ids(config: pytest.Config) -> dict[str, set[str]]:
    if MARKED not in config.stash:
        config.stash[MARKED] = {"selected": set(), "deselected": set()}
    return config.stash[MARKED]


class Reporter:
    """Collects per-test entries from reports and writes the run's files (the controller only)."""

    def __init__(self, config: pytest.Config, settings: Settings, files: Any) -> None:
        self.config = config
        self.settings = settings
        self.files = files  # the run's loaded files: baseline(), budgets
        self.entries: list[dict[str, Any]] = []
        self.baseline_info: Optional[dict[str, Any]] = None
        self.budgets_info: Optional[dict[str, Any]] = None
        self.tightening: list[str] = []
        self.budget_base: Optional[dict[str, Any]] = None  # the commit the budgets file was compared with
        self.written: list[str] = []  # report paths written at the end of the run
        self.start_hashes: tuple = (None, None)  # sha256 of the baseline and budgets files as the run started
        self.report_errors: list[str] = []

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        from .merge import file_sha256

        self.start_hashes = (file_sha256(self.settings.baseline_path), file_sha256(self.settings.budgets_path))
        if self.settings.baseline_path.exists():
            self.files.baseline()  # an invalid baseline is a usage error before any test runs
        if self.files.budgets is not None:
            from .gitbase import BaseError

            try:
                self.tightening, self.budget_base = decide.tightening_problems(self.files.budgets,
                                                                               self.settings.budget_base)
            except BaseError as exc:  # the base named cannot be found
                raise pytest.UsageError(str(exc)) from None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """pytest-xdist: the marked test ids a worker selected and deselected (the controller collects nothing), and
        its usage error at collection, raised here so that the run ends as a plain run would: the
        message on stderr, exit status 4 (pytest-xdist alone turns it into an INTERNALERROR)."""
        output = getattr(node, "workeroutput", None) or {}
        usage_error = output.get(USAGE_ERROR_OUTPUT)
        if usage_error:
            raise pytest.UsageError(*usage_error)
        for key, ids in (output.get(MARKED_OUTPUT) or {}).items():
            marked_ids(self.config)[key].update(ids)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        entries = getattr(report, "npucheck", None)
        if entries is not None and report.when == "call":
            self.entries += entries if isinstance(entries, list) else [entries]
        elif report.when == "???" and report.failed:  # pytest-xdist: the worker died while running the test
            if not any(e["nodeid"] == report.nodeid for e in self.entries):
                text = str(report.longrepr or "worker crashed").strip()
                self.entries.append(CheckEntry.errored(report.nodeid,
                                                       f"{text}: the NPU check result is unknown").to_json())

    def _baseline_step(self) -> Optional[dict[str, Any]]:
        """Stale entries, and with --npu-update-baseline the new baseline (written here, by the controller only)."""
        s = self.settings
        if not self.entries and not s.updating:
            return None
        if s.updating:
            return decide.baseline_update(s.baseline_path, self.files.baseline(), s.strict, self.entries)
        return decide.baseline_stale(self.files.baseline(), s.baseline_path.name, s.strict, self.entries)

    def _budgets_step(self) -> Optional[dict[str, Any]]:
        """Stale budget entries (keys used by any process) and loosenings against the committed file."""
        if self.files.budgets is None:
            return None
        opt = self.config.option
        # every xdist worker collects and deselects the same tests: count the ids, once each
        ids = marked_ids(self.config)
        partial = decide.partial_reasons(bool(getattr(opt, "lf", False)), bool(getattr(opt, "stepwise", False)),
                                         self.config.args, len(ids["deselected"] - ids["selected"]))
        return decide.budgets_info(self.files.budgets, self.settings.release, self.entries, partial,
                                   self.tightening, self.budget_base)

    def _run_failures(self, session: pytest.Session) -> None:
        """What fails the run as a whole (a stale entry in strict mode, a loosened budget, a baseline
        that could not be updated) is reported as a failed item too: pytest counts it in its last line
        and lists it in the short summary, so the exit status and the last line agree."""
        from .report.terminal import entry_text
        from .report.text import clean

        failures = decide.run_failures(self.baseline_info, self.budgets_info, entry_text, clean)
        terminal = self.config.pluginmanager.get_plugin("terminalreporter")
        for nodeid, text in failures:
            report = pytest.TestReport(nodeid, (nodeid.split("::")[0], None, nodeid), {}, "failed", text, "call")
            if terminal is not None:  # counted in the last line and listed with the failures, no progress mark
                terminal.stats.setdefault("failed", []).append(report)
        status = decide.exit_status(int(session.exitstatus), self.baseline_info, failures)
        if status != session.exitstatus:
            session.exitstatus = pytest.ExitCode(status)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.baseline_info = self._baseline_step()
        self.budgets_info = self._budgets_step()
        self._run_failures(session)
        if not self.settings.reports:
            return
        from .jsonio import dumps, write_atomic
        from .report.jsonreport import run_document

        doc = run_document(self.entries)
        if exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail:
            doc["interrupted"] = True  # -x, --maxfail, Ctrl-C: the tests listed are those that ran
        if self.baseline_info is not None:
            doc["baseline"] = self.baseline_info
        if self.budgets_info is not None:
            doc["budgets"] = self.budgets_info
        doc["shard"] = self._shard_section(exitstatus)
        from .errors import NpuCheckError

        view = None  # built once, by the first of the Markdown and HTML reports
        for value, fmt, path in self.settings.reports:
            try:
                if fmt in ("md", "html") and view is None:
                    from .report.view import build

                    view = build(doc)
                if fmt == "json":
                    write_atomic(Path(path), dumps(doc))
                elif fmt == "md":
                    from .report.markdown import render as render_md

                    write_atomic(Path(path), render_md(doc, [p for _, f, p in self.settings.reports if f != "md"],
                                                          view=view))
                elif fmt == "html":
                    from .report.html import render as render_html

                    write_atomic(Path(path), render_html(doc, view=view))
            except (NpuCheckError, OSError) as exc:  # the other reports are still written
                self.report_errors.append(f"--npu-report={value}: not written: {exc}")
                session.exitstatus = pytest.ExitCode.INTERNAL_ERROR
                continue
            self.written.append(path)

    def _shard_section(self, status: int) -> dict[str, Any]:
        """What ``npucheck merge`` needs to merge this run with other shards (merge.shard_section)."""
        from .merge import shard_section

        s, opt, ids = self.settings, self.config.option, marked_ids(self.config)
        return shard_section(rootpath=Path(self.config.rootpath), baseline_path=s.baseline_path,
                             baseline_sha256=self.start_hashes[0], strict=s.strict, updating=s.updating,
                             budgets_path=s.budgets_path, budgets_sha256=self.start_hashes[1], release=s.release,
                             args=self.config.args, last_failed=bool(getattr(opt, "lf", False)),
                             stepwise=bool(getattr(opt, "stepwise", False)), marked_selected=ids["selected"],
                             marked_deselected=ids["deselected"], status=int(status), entries=self.entries)

    def pytest_terminal_summary(self, terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
        from .report.terminal import write_summary

        write_summary(terminalreporter, self.entries, self.baseline_info, self.budgets_info, self.written,
                      self.report_errors, quiet=config.getoption("verbose") < 0)


__all__ = ["Reporter", "MARKED", "MARKED_OUTPUT", "USAGE_ERROR_OUTPUT", "marked_ids"]
