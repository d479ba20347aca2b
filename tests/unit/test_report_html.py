"""report/html.py on run documents (issue 26.3); the pictures are checked in headless Chromium by
tests/acceptance/test_report_screenshots.py."""

from __future__ import annotations

import re

from pytest_npucheck.report import html as html_report
from pytest_npucheck.report.jsonreport import run_document

from unit.report_documents import CREATED, T, clean_target, documents, entry, node, target


def test_svg_ids_are_unique_and_each_graph_points_at_its_own_marker():
    page = html_report.render(documents()["failed"])
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids))
    svgs = re.findall(r"<svg .*?</svg>", page, re.S)
    assert len(svgs) == 3
    for svg in svgs:
        [marker] = re.findall(r'<marker id="([^"]+)"', svg)
        assert set(re.findall(r'marker-end="url\(#([^)]+)\)"', svg)) == {marker}


def test_failing_tests_first_with_the_fix_beside_each_new_fallback_and_passing_ones_folded():
    page = html_report.render(documents()["failed"])
    assert "overflow-wrap:anywhere" not in page  # numbers and names are not broken mid-token
    # the top: one row per failing test and target, its NEW fallbacks by op type and their fixes
    new = page.split('<section id="new">')[1].split("</section>")[0]
    assert new.count('<tr class="new">') == 1 and "<td>1 Erf, 1 Pad</td>" in new
    assert "<b>1. Use constant padding</b>" in new and "<b>2. Replace exact GELU by tanh GELU</b>" in new
    # each node once, in its test's section, with the fix beside it
    fallbacks = page.split('<table class="fallbacks">')[1].split("</table>")[0]
    row = next(r for r in fallbacks.split("<tr") if "/pad2/Pad" in r)
    assert "<b>1. Use constant padding</b>: checked: 1 of 1 node(s) move to the NPU; fallbacks 3 -&gt; 2" in row
    assert page.count("<code>/pad2/Pad</code>") == 3  # its row, the fix that names it, the table of every node
    failing_at = page.index('data-test="t.py::test_pads" data-target="toy@1.0/soc-a" data-status="FAIL"')
    passing_at = page.index('data-test="t.py::test_ok"')
    assert failing_at < page.index('<section id="accepted"><details>') < page.index('<section id="passing"><details>') < passing_at
    assert page.index('<div class="legend">') < page.index("<svg")  # the legend is HTML beside the picture


def test_long_npu_runs_are_collapsed_and_nodes_are_labelled_with_their_module_path():
    nodes = [node(f"/enc/layer{k}/conv/Conv", "Conv", module=f"encoder.layers.{k}.conv") for k in range(40)]
    nodes.append(node("/head/Erf", "Erf", "unsupported", module="head.act"))
    nodes += [node(f"/dec/{k}/Relu", "Relu", module=f"decoder.{k}") for k in range(3)]
    doc = run_document([entry("t.py::test_long", [target(T, nodes)])], created=CREATED)
    svg = re.search(r"<svg .*?</svg>", html_report.render(doc), re.S).group(0)
    # nodes 1..39 have one producer and one consumer each and run on the NPU: one box (0 has no producer)
    assert re.findall(r'data-nodes="(\d+)"', svg) == ["39"]
    assert ">39 NPU nodes</text>" in svg
    assert ">encoder.layers.0.conv</text>" in svg and ">head.act</text>" in svg and ">Erf</text>" in svg
    assert "encoder.layers.1.conv \u2026 encoder.layers.39.conv" in svg  # the run's tooltip names its span
    assert svg.count('<g class="node') == 6  # node 0, the run, Erf and the three Relus (too short a run)
