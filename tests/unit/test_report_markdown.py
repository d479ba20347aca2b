"""report/markdown.py on run documents: a GitHub step summary and PR comment that fits (issue 26.2)."""

from __future__ import annotations

import re

from pytest_npucheck.report import markdown as md_report
from pytest_npucheck.report.jsonreport import validate

from unit.report_documents import documents, large_document


def test_a_300_test_run_stays_under_the_limit_with_every_failure_and_fix_visible():
    doc = large_document(300, failing_every=30)
    assert validate(doc) == []
    md = md_report.render(doc, artefacts=["out/npucheck.html", "out/npucheck.json"])
    assert len(md) < 60_000
    failing = [t["nodeid"] for t in doc["tests"] if t["status"] == "failed"]
    assert len(failing) == 10
    head = md.split("<details>")[0]  # what a reviewer sees unfolded
    for nodeid in failing:
        assert f"#### FAIL {md_report.esc(nodeid)}" in head
    # each NEW fallback with the number of its fix, and the fix's check beside it
    assert head.count("| Pad | /pad2/Pad | cpu | pad2 at nets.py:33 |") == 10
    assert head.count("- fix 1: **Use constant padding** (/pad2/Pad): checked: 1 of 1 node\\(s\\) move") == 10
    # what passes or was accepted is folded, and what did not fit points to the artefacts
    summaries = re.findall(r"<summary>(.*)</summary>", md)
    assert summaries == ["Accepted fallbacks (300)", "Per target and test (600: 10 failing)", "Numerics (300 test(s))"]
    assert md.count("<details>") == md.count("</details>") == 3
    assert "Everything is in out/npucheck.html, out/npucheck.json" in md
    assert "accepted fallbacks" in md.split("_Left out to stay under 60,000 characters: ")[1]


def test_the_limit_holds_whatever_the_suite_size_even_when_every_test_fails():
    doc = large_document(2000, failing_every=1)
    md = md_report.render(doc)
    assert len(md) < 60_000
    shown = md.count("#### FAIL ")
    assert 20 < shown < 2000
    assert f"**... and {2000 - shown} more failing test(s) not shown here (size limit)" in md
    assert md.rstrip().endswith("</sub>")


def test_failures_come_before_the_folded_sections():
    md = md_report.render(documents()["failed"])
    sections = [line for line in md.splitlines() if line.startswith("### ") or line.startswith("<summary>")]
    assert sections == ["### Failures", "<summary>Accepted fallbacks (1)</summary>",
                        "<summary>Per target and test (3: 1 failing)</summary>"]
    failures = md.split("### Failures")[1].split("<details>")[0]
    # the accepted fallback is not among the failures; the NEW ones are, in graph order, with their fix
    assert "/pad1/Pad" not in failures
    assert failures.index("/pad2/Pad") < failures.index("/head/Erf")
    assert "| Erf | /head/Erf | unsupported | head.act at nets.py:40 | Erf is not in the table \\[documented\\] | 2 |" \
        in failures


def test_a_passing_run_has_no_failures_section():
    md = md_report.render(documents()["passed"])
    assert md.startswith("## NPU check: passed") and "### Failures" not in md
    assert "<summary>Per target and test (3: 0 failing)</summary>" in md
