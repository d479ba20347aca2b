"""The HTML report of three real models, rendered and screenshotted in headless Chromium (issue 26.3):
a UNet (skip connections), a transformer (a long NPU backbone, module paths) and a failing detector.

The screenshots are written to the test's directory (``report-<model>.png``) to be looked at; the
test asserts what can be read from the rendered DOM: the layered drawing keeps skip connections off
the main column, long NPU runs are collapsed, boxes carry module paths, the failing model comes first
with its fixes beside its fallbacks."""

from __future__ import annotations

import json
import re
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import REPO

from pytest_npucheck.report import html as html_report

from acceptance.test_reports import chromium, render_dom

pytestmark = [pytest.mark.usefixtures("heavy_modules_loaded"), pytest.mark.slow]  # three corpus exports

RK = "rknn@2.5.0/rk3588"

SUITE = textwrap.dedent(f'''
    import sys
    sys.path.insert(0, {str(REPO / "tests")!r})
    import pytest
    from models.corpus import ARCHS

    @pytest.mark.parametrize("name", ["unet_small", "vit_tiny", "centernet_small"])
    @pytest.mark.npu_deployable(targets=["{RK}"], numerics=False)
    def test_model(npu_check, name):
        model, inputs = ARCHS[name].build()
        npu_check(model, inputs)
''')


def screenshot(page: Path, png: Path, tmp_path: Path, height: int = 1400) -> None:
    exe = chromium()
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--hide-scrollbars", f"--window-size=1280,{height}",
           f"--user-data-dir={tmp_path / 'chromium-profile'}", f"--screenshot={png}", page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and png.stat().st_size > 10_000, proc.stderr[-2000:]


def test_three_models_render_readably(pytester, tmp_path):
    if chromium() is None:
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    pytester.makepyfile(test_models=SUITE)
    r = pytester.runpytest("-p", "no:cacheprovider", "--npu-report=json:r.json", "--npu-report=html:r.html")
    doc = json.loads((pytester.path / "r.json").read_text())
    tests = {t["nodeid"].split("[")[1].rstrip("]"): t for t in doc["tests"]}
    assert set(tests) == {"unet_small", "vit_tiny", "centernet_small"}, r.stdout.str()[-3000:]
    assert tests["centernet_small"]["status"] == "failed", "the detector is the failing model of the three"
    out = Path(pytester.path)
    pages = {}
    for name, t in tests.items():  # one page per model, each screenshotted from its top
        one = {**doc, "tests": [t]}
        page = out / f"report-{name}.html"
        page.write_text(html_report.render(one), encoding="utf-8")
        screenshot(page, out / f"report-{name}.png", tmp_path)
        pages[name] = render_dom(page, tmp_path)
    screenshot(out / "r.html", out / "report-all.png", tmp_path, height=2400)
    # the whole run: the failing detector first, its NEW fallbacks with the fixes beside them
    dom = render_dom(out / "r.html", tmp_path)
    assert dom.index("centernet_small") < dom.index("unet_small") and dom.index("centernet_small") < dom.index("vit_tiny")
    new = dom.split('<section id="new">')[1].split("</section>")[0]
    # the top: one row per failing test and target; each NEW node once, in its test's section
    n_new = len(tests["centernet_small"]["targets"][0]["baseline"]["new"])
    assert new.count('<tr class="new">') == 1 and f'<td class="num">{n_new}</td>' in new
    assert dom.count('<tr class="new">') == 1 + n_new > 1
    ids = re.findall(r'\sid="([^"]+)"', dom)
    assert len(ids) == len(set(ids))
    # UNet: each skip connection (an edge over more than one layer) is routed through points beside the
    # column; its boxes are labelled with module paths
    unet = pages["unet_small"]
    long_edges = [d for d in re.findall(r'<path class="[ex]" d="([^"]+)"', unet) if d.count("C") > 1]
    assert len(long_edges) >= 4, "the UNet's four skip connections"
    assert re.search(r'<text class="l" [^>]*>(…)?[a-z_.0-9]*(down|up|inc)[a-z_.0-9]*</text>', unet)
    # the transformer: long NPU-only runs collapsed, blocks named by module path
    vit = pages["vit_tiny"]
    assert re.search(r'data-nodes="\d+"', vit) and re.search(r"layers\.\d+\.self_attention", vit)
    for name in tests:
        assert "overflow-wrap:anywhere" not in pages[name]
