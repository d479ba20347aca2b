"""report/view.py: one view of a run; the terminal, Markdown and HTML renderers state the same
verdicts for the same document (issue 26.1: "errored" was defined three ways and the Markdown and
HTML reports disagreed on an error entry that still had targets)."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from pytest_npucheck.report import formatting as F
from pytest_npucheck.report import html as html_report
from pytest_npucheck.report import markdown as md_report
from pytest_npucheck.report.jsonreport import validate
from pytest_npucheck.report.terminal import summary_lines
from pytest_npucheck.report.view import build, errored

from unit.report_documents import documents

DOCS = documents()


@pytest.mark.parametrize("name", sorted(DOCS))
def test_every_fixture_document_is_valid(name):
    assert validate(DOCS[name]) == []


def markdown_verdicts(md: str) -> dict[tuple[str, str], str]:
    """(test, target) -> PASS/FAIL from the per-target table; (test, "") -> the test's verdict."""
    out = {}
    for line in md.splitlines():
        m = re.match(r"^\| (.+?)(?: \\\(documentation only\\\))? \| (.+?) \| \*\*(PASS|FAIL)\*\* \|", line)
        if m:
            out[(m.group(2), m.group(1))] = m.group(3)
    failures = md.split("### Failures")[1].split("<details>")[0] if "### Failures" in md else ""
    named = {m.group(2): m.group(1) for m in re.finditer(r"^#### (FAIL|ERROR) (.+)$", failures, re.M)}
    for test, _ in list(out):
        out[(test, "")] = "PASS"
    for label, word in named.items():
        out[(label, "")] = "FAILED" if word == "FAIL" else "ERROR"
    return {k: ("PASSED" if k[1] == "" and v == "PASS" else v) for k, v in out.items()}


class _Sections(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: dict[tuple[str, str], str] = {}
        self.tests: dict[str, str] = {}

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "section" and "data-test" in a:
            if a["data-target"]:
                self.found[(a["data-test"], a["data-target"])] = a["data-status"]
            status = a["class"].split()[1].upper()
            self.tests[a["data-test"]] = status


def html_verdicts(page: str) -> dict[tuple[str, str], str]:
    p = _Sections()
    p.feed(page)
    out = dict(p.found)
    out.update({(t, ""): s for t, s in p.tests.items()})
    return out


def terminal_verdicts(doc) -> dict[tuple[str, str], str]:
    out = {}
    for text, _ in summary_lines(doc["tests"]):
        m = re.match(r"^(PASS|FAIL) (\S+) (\S+): npu", text)
        if m:
            out[(m.group(2), m.group(3))] = m.group(1)
        m = re.match(r"^ERROR (\S+):", text)
        if m:
            out[(m.group(1), "")] = "ERROR"
    return out


@pytest.mark.parametrize("name", sorted(DOCS))
def test_the_three_renderers_agree_with_the_view_on_every_fixture_document(name):
    doc = DOCS[name]
    view = build(doc)
    want = view.verdicts()
    # the view's own verdicts: (test, "") is the test's status, (test, target) each target's gate
    md = md_report.render(doc)
    page = html_report.render(doc)
    got_md = markdown_verdicts(md)
    got_html = html_verdicts(page)
    got_term = terminal_verdicts(doc)
    for (test, target), word in want.items():
        if target:
            assert got_md[(F.md(test), F.md(target))] == word, (test, target)
            assert got_html[(test, target)] == word, (test, target)
            assert got_term[(test, target)] == word, (test, target)
        else:
            assert got_md.get((F.md(test), ""), "PASSED") == word, test
            assert got_html[(test, "")] == word, test
            if word == "ERROR":
                assert got_term[(test, "")] == "ERROR"
    # and the headline
    assert md.startswith(f"## NPU check: {view.headline}")
    assert f"<title>NPU check: {view.headline}</title>" in page


def test_an_error_entry_that_still_has_targets_is_an_error_everywhere():
    doc = DOCS["error_with_targets"]
    [err] = [t for t in doc["tests"] if t["nodeid"] == "t.py::test_err"]
    assert err["targets"] and errored(err)
    view = build(doc)
    assert {t.label: t.status for t in view.tests} == {"t.py::test_err": "error", "t.py::test_crash": "error",
                                                      "t.py::test_ok": "passed"}
    assert view.headline == "failed" and view.totals == {"tests": 3, "passed": 1, "failed": 0, "error": 2}
    md = md_report.render(doc)
    assert md.startswith("## NPU check: failed") and "#### ERROR t.py::test\\_err" in md
    page = html_report.render(doc)
    assert "<title>NPU check: failed</title>" in page
    assert re.search(r'<section class="test error" id="t\d-0" data-test="t.py::test_err" data-target="toy@1.0/soc-a" '
                     r'data-status="PASS">', page)  # its target passed its gate; the test errored
    assert page.index('data-test="t.py::test_err"') < page.index('data-test="t.py::test_ok"')


def test_the_view_orders_failing_tests_first_and_keeps_graph_order_and_fixes_per_fallback():
    view = build(DOCS["failed"])
    assert [t.label for t in view.tests] == ["t.py::test_pads", "t.py::test_ok"]
    tr = view.tests[0].targets[0]
    assert [(f.name, f.new) for f in tr.fallbacks] == [("/pad1/Pad", False), ("/pad2/Pad", True),
                                                        ("/head/Erf", True)]
    assert [tr.fixes[k].title for f in tr.new for k in f.fixes] == ["Use constant padding",
                                                                    "Replace exact GELU by tanh GELU"]
    assert tr.accepted[0].accepted_because == "reflect padding is needed"
    assert tr.fixes[0].checked == "checked: 1 of 1 node(s) move to the NPU; fallbacks 3 -> 2"


def test_numerics_failure_names_only_the_failing_output():
    t = build(DOCS["numerics_failed"]).tests[0]
    assert t.status == "failed" and [r["output"] for r in t.failing_numerics] == ["logits"]
    md = md_report.render(DOCS["numerics_failed"])
    failures = md.split("### Failures")[1].split("<details>")[0]
    assert "| logits |" in failures and "| boxes |" not in failures


def test_formatting_numbers_keep_the_digits_that_matter():
    assert F.number(0.99999823) == "0.99999823"
    assert F.number(0.9731234567) == "0.9731"
    assert F.number(61.23456789) == "61.23"
    assert F.number(0.00123456789) == "0.001235"
    assert F.number(1.0) == "1" and F.number(None) == "-" and F.number("inf") == "inf"
    assert F.pct(0.857) == "85.7%" and F.pct(None) == "n/a"
    assert F.location({"module": "enc.block1", "file": "/a/b/nets.py", "line": 3}, file_name_only=True) == \
        "enc.block1 at nets.py:3"
    assert F.location({"module": "", "file": "x.py"}) == "<root> at x.py" and F.location(None) == "unknown"
