"""What the plugin writes to the terminal: the failure text of a test, the end-of-run summary, and a
progress line while a slow export or numeric run is under way.

The summary formats the run view (``view.build``), so the terminal states each test's verdict as
the Markdown and HTML reports do. Under ``-q`` passing targets are not listed (one line counts
them). The failure text lists each fallback once, in graph order, marked NEW or accepted. No
torch or onnx imports; pytest objects are only passed in (the terminal reporter, the config).
"""

from __future__ import annotations

import threading
import time
from typing import Any, Mapping, Optional, Sequence

from .formatting import clean, location, plural
from .view import build

__all__ = ["failure_text", "summary_lines", "write_summary", "entry_text", "progress", "PROGRESS_AFTER"]

PROGRESS_AFTER = 2.0  # seconds of silent work before a progress line is written


def failure_text(results: Sequence[Any], targets: Sequence[Mapping[str, Any]], baseline_name: str,
                 budget_lines: Sequence[str] = ()) -> str:
    """The text of a test that fails its gate: per target the headline, the partition, the causes,
    then one table of the nodes that leave the NPU in graph order, each marked NEW (not in the
    baseline: fails the test) or accepted (with the baseline's reason), then the checked fixes."""
    from .text import render_target

    failing = [r for r, t in zip(results, targets) if not t["baseline"]["passed"]]
    lines = [f"npu_deployable: the model fails the deployability check on {len(failing)} of {len(results)} "
             "target(s)"]
    lines += list(budget_lines)
    lines.append(f"(gate NEW: a fallback not in the baseline {baseline_name}, it fails the test; accepted: in it)")
    for r, t in zip(results, targets):
        b = t["baseline"]
        lines.append("")
        if b.get("refused"):
            lines.append(f"{r.target}: --npu-update-baseline refuses {len(b['refused'])} unsupported node(s): the "
                         "compiler rejects the model, so nothing deploys and no baseline can accept it")
        lines += render_target(r, gate=b)
        if b["new"] or b["accepted"]:
            lines.append(f"  {len(b['new'])} NEW, {len(b['accepted'])} accepted fallback(s) on {r.target}")
    return "\n".join(lines)


def entry_text(e: Mapping[str, Any]) -> str:
    """A baseline entry in one line: test, target, op type, node and where it came from."""
    loc = e.get("location")
    where = f" at {location(loc)}" if loc else ""
    call = f" [call {e['call']}]" if e.get("call", 1) != 1 else ""
    return (f"{clean(e['test'], 300)}{call} {e['target']}: {clean(e['op_type'], 40)} {clean(e['node'])}"
            f"{clean(where, 200)}")


def _numbers(m: Mapping[str, Any]) -> str:
    from .formatting import number

    return f"cosine {number(m.get('cosine'))}, SNR {number(m.get('snr_db'))} dB, max abs {number(m.get('max_abs'))}"


def summary_lines(entries: Sequence[Mapping[str, Any]], updated: bool = False,
                  quiet: bool = False) -> list[tuple[str, dict[str, bool]]]:
    """The per-test lines of the end-of-run summary, with their colour: (text, markup)."""
    from .text import oracle_lines

    view = build({"tests": list(entries)})
    out: list[tuple[str, dict[str, bool]]] = []
    quiet_pass = 0
    quiet_targets = 0
    for t in sorted(view.tests, key=lambda t: (t.nodeid, t.call)):
        label = clean(t.label, 300)
        if t.errored and not t.targets:
            out.append((f"ERROR {label}: {clean(t.error, 300)}", {"red": True}))
            continue
        if t.errored:
            out.append((f"ERROR {label}: {clean(t.error, 300)}", {"red": True}))
        if quiet and t.passed and not t.oracle_rows:
            quiet_pass += 1
            quiet_targets += len(t.targets)
            continue
        for tr in t.targets:
            if quiet and tr.passed and not tr.fallbacks:
                quiet_targets += 1
                continue
            s = tr.summary
            extra = ""
            if tr.fallbacks and updated:
                n_refused = len(tr.refused)
                extra = f" ({len(tr.fallbacks) - n_refused} fallback(s) recorded in the baseline"
                extra += f", {n_refused} unsupported refused)" if n_refused else ")"
            elif tr.fallbacks:
                extra = f" ({len(tr.new)} new, {len(tr.accepted)} accepted fallback(s))"
            out.append((f"{tr.word} {label} {tr.target}: npu {s.get('npu', 0)}, cpu {s.get('cpu', 0)}, "
                        f"unsupported {s.get('unsupported', 0)}, folded {s.get('folded', 0)}{extra}",
                        {"red": not tr.passed}))
        if t.numerics_enabled and t.numerics_passed is False:
            bad = ", ".join(f"{clean(r['candidate'], 80)}{' ' + r['target'] if r['target'] else ''} output "
                            f"{clean(r['output'], 60)} ({_numbers(r)})" for r in t.failing_numerics)
            out.append((f"FAIL {label} numerics"
                        + (f": {clean(t.numerics_error, 300)}" if t.numerics_error else (f": {bad}" if bad else "")),
                        {"red": True}))
        for o in (t.raw.get("oracle") or {}).get("targets", []):
            text = oracle_lines(o)
            bad = o["status"] == "error" or bool((o.get("agreement") or {}).get("disagreements"))
            out.append((f"{label} {text[0]}", {"red": bad, "yellow": o["status"] == "unavailable"}))
            out += [(ln, {"red": ln.lstrip().startswith("TABLE BUG")}) for ln in text[1:]]
    if quiet and (quiet_pass or quiet_targets):
        out.insert(0, (f"npucheck: {plural(quiet_pass, 'test')} passed on every target "
                       f"({plural(quiet_targets, 'passing target check')} not listed under -q)", {}))
    return out


def write_summary(tr: Any, entries: Sequence[Mapping[str, Any]], info: Optional[Mapping[str, Any]],
                  binfo: Optional[Mapping[str, Any]], written: Sequence[str], report_errors: Sequence[str],
                  quiet: bool = False) -> None:
    """The "npucheck summary" section of pytest's terminal summary (``tr``: the terminal reporter)."""
    if not entries and not info and not report_errors and not (
            binfo and (binfo["stale"] or binfo["tightening_problems"] or binfo.get("stale_not_checked")
                       or (binfo.get("base") or {}).get("note"))):
        return
    tr.section("npucheck summary")
    for text, markup in summary_lines(entries, bool(info is not None and info.get("updated")), quiet):
        tr.write_line(text, **{k: v for k, v in markup.items() if v})
    if info is not None:
        if info.get("error"):
            tr.write_line(f"npucheck baseline {info['path']}: {clean(info['error'], 500)}", red=True)
        elif info["updated"]:
            tr.write_line(f"npucheck baseline updated: {info['path']} ({info['entries']} entries, "
                          f"{len(info['added'])} added, {len(info['removed'])} removed as no longer occurring)")
            for e in info["removed"]:
                tr.write_line(f"  removed: {entry_text(e)}")
            if info.get("refused"):
                from ..baseline import REFUSED_WHY

                tr.write_line(f"npucheck baseline: {len(info['refused'])} unsupported node(s) not recorded ("
                              f"{REFUSED_WHY}; their tests fail):", red=True)
                for e in info["refused"]:
                    tr.write_line(f"  refused: {entry_text(e)}", red=True)
        elif info["stale"]:
            how = "fails the run (strict)" if info["strict"] else "warning; --npu-baseline-strict fails the run"
            tr.write_line(f"npucheck baseline {info['path']}: {len(info['stale'])} stale entr"
                          f"{'y' if len(info['stale']) == 1 else 'ies'} ({how}); the accepted fallback no longer "
                          "occurs: remove it, or run --npu-update-baseline", red=bool(info["strict"]))
            for e in info["stale"]:
                tr.write_line(f"  stale: {entry_text(e)}")
    if binfo is not None:
        if binfo["tightening_problems"]:
            tr.write_line(f"npucheck budgets {binfo['path']}: {len(binfo['tightening_problems'])} loosening(s) "
                          f"without approval against {(binfo.get('base') or {}).get('label', 'HEAD')} "
                          "(fails the run):", red=True)
            for p in binfo["tightening_problems"]:
                tr.write_line(f"  {clean(p, 500)}")
        base = binfo.get("base") or {}
        if base.get("note"):
            tr.write_line(f"npucheck budgets {binfo['path']}: {clean(base['note'], 500)}")
        if binfo.get("stale_not_checked"):
            tr.write_line(f"npucheck budgets {binfo['path']}: stale entries not checked: {binfo['stale_not_checked']}")
        if binfo["stale"]:
            tr.write_line(f"npucheck budgets {binfo['path']}: {len(binfo['stale'])} stale entr"
                          f"{'y' if len(binfo['stale']) == 1 else 'ies'} (no test used them in release "
                          f"{binfo['release_in_force']}):")
            for k in binfo["stale"]:
                tr.write_line(f"  stale: {clean(k, 300)}")
    for path in written:
        tr.write_line(f"npucheck report written: {path}")
    for text in report_errors:
        tr.write_line(f"npucheck {text}", red=True)


class progress:
    """``with progress(config, "exporting t.py::test_a (dynamo)"):`` writes one line through pytest's
    terminal writer when the work is still going after :data:`PROGRESS_AFTER` seconds, and its
    duration when it ends; nothing for quick work. A timer thread writes the first line: the main
    thread is inside the export (or a child process's wait) and cannot."""

    def __init__(self, config: Any, what: str) -> None:
        self.what = what
        # an xdist worker has no terminal of its own (its output never reaches the user): nothing to say
        worker = config is not None and hasattr(config, "workerinput")
        self.tr = config.pluginmanager.get_plugin("terminalreporter") if config is not None and not worker else None
        self.capman = config.pluginmanager.get_plugin("capturemanager") if config is not None else None
        self.timer: Optional[threading.Timer] = None
        self.said = False
        self.lock = threading.Lock()
        self.start = 0.0

    def _say(self) -> None:
        with self.lock:
            if self.timer is None:  # already finished
                return
            self.said = True
            self._write(f"npucheck: {self.what} ...")

    def _write(self, text: str) -> None:
        # inside a test pytest captures the output: the line goes past the capture, as live logging does
        if self.capman is not None:
            with self.capman.global_and_fixture_disabled():
                self.tr.write_line(text)
                self.tr.flush() if hasattr(self.tr, "flush") else None
        else:
            self.tr.write_line(text)

    def __enter__(self) -> "progress":
        self.start = time.monotonic()
        if self.tr is not None and PROGRESS_AFTER is not None:
            self.timer = threading.Timer(PROGRESS_AFTER, self._say)
            self.timer.daemon = True
            self.timer.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        with self.lock:
            timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()
        if self.said:
            self._write(f"npucheck: {self.what}: done in {time.monotonic() - self.start:.1f} s")
