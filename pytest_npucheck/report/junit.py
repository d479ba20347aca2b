"""JUnit properties: what pytest's own ``--junitxml`` writes for each checked test.

The properties ride on ``item.user_properties`` (as ``record_property`` does), so they travel
from xdist workers with the test's reports and pytest's junitxml writer puts them in the
``<properties>`` of the test case. One group per target, named ``npucheck[TARGET].FIELD``.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..result import VERDICTS


def _share(x: Any) -> str:
    return "" if x is None else f"{x:.4f}"


def properties(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, value) pairs for one per-test entry of the JSON report."""
    out: list[tuple[str, str]] = []
    for t in entry.get("targets") or []:
        p = f"npucheck[{t['target']}]"
        table = t.get("table") or {}
        b = t.get("baseline") or {}
        part = t.get("partition") or {}
        out += [
            (f"{p}.gate", "pass" if b.get("passed", t["passed"]) else "fail"),
            (f"{p}.verdict", str(t["verdict"])),
            (f"{p}.table_version", f"{table.get('toolchain', '')}@{table.get('version', '')}/{table.get('soc', '')}"),
            (f"{p}.table_revision", str(table.get("revision", ""))),
            (f"{p}.table_sha256", str(table.get("sha256", ""))),
        ]
        out += [(f"{p}.{v}", str(t["summary"].get(v, 0))) for v in VERDICTS]
        out += [
            (f"{p}.npu_share_nodes", _share(part.get("npu_share_nodes"))),
            (f"{p}.npu_share_macs", _share(part.get("npu_share_macs"))),
            (f"{p}.new_fallbacks", str(len(b.get("new", [])))),
            (f"{p}.accepted_fallbacks", str(len(b.get("accepted", [])))),
        ]
    return out


def escape(data: str) -> str:
    """XML text: ``&``, ``<`` and ``>`` escaped (``xml.sax.saxutils.escape``, whose module imports
    ``urllib.request`` and with it ``ssl``: a tenth of a second of a merge's start)."""
    return data.replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;")


def quoteattr(data: str) -> str:
    """An XML attribute value with its quotes, as ``xml.sax.saxutils.quoteattr`` writes it."""
    data = escape(data).replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;")
    if '"' not in data:
        return f'"{data}"'
    if "'" not in data:
        return f"'{data}'"
    return '"' + data.replace('"', "&quot;") + '"'


def render(doc: Mapping[str, Any], failures: Sequence[tuple[str, str]] = ()) -> str:
    """A JUnit XML file from a run's JSON document (``npucheck merge``): one test case per checked
    test (call), with the properties above, and one failed case per run-level failure."""
    cases: list[str] = []
    counts = {"failures": 0, "errors": 0}
    for e in doc.get("tests") or []:
        name = e["nodeid"] + (f" [call {e['call']}]" if int(e.get("call", 1)) != 1 else "")
        file = e["nodeid"].partition("::")[0]
        props = "".join(f"<property name={quoteattr(k)} value={quoteattr(v)}/>" for k, v in properties(e))
        body = f"<properties>{props}</properties>" if props else ""
        if e.get("status") == "failed":
            counts["failures"] += 1
            body += f'<failure message="npucheck: the check failed">{escape(str(e.get("error") or ""))}</failure>'
        elif e.get("status") == "error":
            counts["errors"] += 1
            body += f'<error message="npucheck: the check did not complete">{escape(str(e.get("error") or ""))}</error>'
        cases.append(f"<testcase classname={quoteattr(file)} name={quoteattr(name.partition('::')[2] or name)}>"
                     f"{body}</testcase>")
    for nodeid, text in failures:
        counts["failures"] += 1
        file, _, rest = nodeid.partition("::")
        cases.append(f"<testcase classname={quoteattr(file)} name={quoteattr(rest)}>"
                     f'<failure message="npucheck: the run failed">{escape(text)}</failure></testcase>')
    head = (f'<testsuite name="npucheck" tests="{len(cases)}" failures="{counts["failures"]}" '
            f'errors="{counts["errors"]}" skipped="0">')
    return '<?xml version="1.0" encoding="utf-8"?>\n<testsuites>' + head + "".join(cases) + "</testsuite></testsuites>\n"


__all__ = ["properties", "render"]
