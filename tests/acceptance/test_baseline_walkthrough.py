"""Issue 6 as a new user meets it: a suite of real models (random weights, no seeding by the user)
gated on the real RKNN 2.5.0 table with a baseline, every report format, and xdist.

1. the first run with --npu-update-baseline records today's fallbacks and passes;
2. a model change that brings a new CPU fallback fails, with that node first in every report;
3. fixing an accepted fallback reports its entry as stale;
4. the same suite with -n 2 writes the same report files (apart from timestamps and cache hits).
"""

from __future__ import annotations

import json
import re
import textwrap
import xml.etree.ElementTree as ET

import pytest

from pytest_npucheck import baseline as bl
from pytest_npucheck.report.jsonreport import validate

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

RK = "rknn@2.5.0/rk3588"

MODELS = textwrap.dedent('''
    import torch, torch.nn as nn, torch.nn.functional as F


    class Backbone(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, 2, 1)
            self.dw = nn.Conv2d(16, 16, 3, 1, 1, groups=16)
            self.bn = nn.BatchNorm2d(16)

        def forward(self, x):
            x = F.relu6(self.stem(x))
            return x + self.bn(F.hardswish(self.dw(x)))


    class Classifier(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            return self.fc(F.adaptive_avg_pool2d(self.backbone(x), 1).flatten(1))


    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.cls = nn.Conv2d(16, 3, 1)

        def forward(self, x):
            s = torch.sigmoid(self.cls(self.backbone(x))).flatten(2).POOL(1)
            return torch.topk(s, 8, dim=1)[0]


    class Segmenter(nn.Module):
        def __init__(self):
            super().__init__()
            self.backbone = Backbone()
            self.head = nn.Conv2d(16, 5, 1)

        def forward(self, x):
            return F.interpolate(self.head(self.backbone(x)), scale_factor=2, mode="UPSAMPLE")
''')

TESTS = textwrap.dedent(f'''
    import pytest, torch
    from models import Classifier, Detector, Segmenter


    @pytest.mark.npu_deployable(targets=["{RK}"])
    def test_classifier(npu_check):
        npu_check(Classifier().eval(), torch.randn(1, 3, 32, 32))


    @pytest.mark.npu_deployable(targets=["{RK}"], numerics=False)
    def test_detector(npu_check):
        npu_check(Detector().eval(), torch.randn(1, 3, 32, 32))


    @pytest.mark.npu_deployable(targets=["{RK}"])
    def test_segmenter(npu_check):
        npu_check(Segmenter().eval(), torch.randn(1, 3, 32, 32))
''')


def models(pool: str = "amax", upsample: str = "bilinear") -> str:
    return MODELS.replace("POOL", pool).replace("UPSAMPLE", upsample)


REPORTS = ("--npu-report=json:{d}/r.json", "--npu-report=md:{d}/r.md", "--npu-report=html:{d}/r.html",
           "--junitxml={d}/junit.xml")


def reports(d: str) -> list[str]:
    return [r.format(d=d) for r in REPORTS]


@pytest.fixture
def suite(pytester):
    pytester.makeini("[pytest]\naddopts = -p no:randomly\n")
    pytester.makepyfile(models=models(), test_models=TESTS)
    return pytester


@pytest.mark.slow  # three runs of a real-model suite with every report, one of them with -n 2
@pytest.mark.without_xdist(reason="it compares a plain run with a -n 2 run itself")
def test_new_user_walkthrough_on_real_models(suite):
    # 1. today's state: the detector's ReduceMax and TopK run on the CPU of an RK3588; record them
    r = suite.runpytest_subprocess("--npu-update-baseline")
    r.assert_outcomes(passed=3)
    doc = json.loads((suite.path / "npucheck-baseline.json").read_text())
    assert bl.validate(doc) == []
    recorded = sorted((e["test"].split("::")[1], e["op_type"]) for e in doc["entries"])
    assert ("test_detector", "ReduceMax") in recorded and ("test_detector", "TopK") in recorded
    assert all(t == "test_detector" for t, _ in recorded)
    assert "fallback(s) recorded in the baseline" in r.stdout.str()

    # 2. a change to the segmenter (bicubic upsampling: RKNN has no cubic Resize) and a fix of the
    #    detector (mean instead of amax: ReduceMean runs on the NPU)
    suite.makepyfile(models=models(pool="mean", upsample="bicubic"))
    r = suite.runpytest_subprocess(*reports("serial"))
    r.assert_outcomes(passed=2, failed=1)
    out = r.stdout.str()
    assert "FAILED test_models.py::test_segmenter" in out
    # text: the new node marked NEW (each fallback once, in graph order, marked NEW or accepted: issue 26.4)
    assert re.search(r"^  NEW +Resize +\S+ +unsupported ", out, re.M)
    # the fixed ReduceMax entry is stale
    assert "1 stale entry" in out and "stale: test_models.py::test_detector" in out and "ReduceMax" in out

    rep = json.loads((suite.path / "serial" / "r.json").read_text())
    assert validate(rep) == []
    seg = next(t for t in rep["tests"] if t["nodeid"].endswith("test_segmenter"))
    assert seg["status"] == "failed"
    target = seg["targets"][0]
    op_of = {n["name"]: n["op_type"] for n in target["nodes"]}
    assert [op_of[n] for n in target["baseline"]["new"]] == ["Resize"]
    assert [e["op_type"] for e in rep["baseline"]["stale"]] == ["ReduceMax"]

    md = (suite.path / "serial" / "r.md").read_text()
    # failures first (with their NEW fallbacks), then the stale entry (a warning here), then folded the
    # accepted fallbacks (issue 26.2)
    assert md.index("### Failures") < md.index("### Stale baseline") < md.index("<summary>Accepted fallbacks")
    new_section = md[md.index("### Failures"):md.index("### Stale baseline")]
    assert "| Resize |" in new_section and "test\\_segmenter" in new_section
    accepted = md[md.index("<summary>Accepted fallbacks"):]
    assert "TopK" in accepted[:accepted.index("</details>")]

    page = (suite.path / "serial" / "r.html").read_text()
    assert page.index("Resize") < page.index("TopK")

    root = ET.parse(suite.path / "serial" / "junit.xml").getroot()
    props = {c.get("name"): dict((p.get("name"), p.get("value")) for p in c.iter("property"))
             for c in root.iter("testcase")}
    assert props["test_segmenter"][f"npucheck[{RK}].new_fallbacks"] == "1"
    assert props["test_segmenter"][f"npucheck[{RK}].gate"] == "fail"
    assert props["test_detector"][f"npucheck[{RK}].gate"] == "pass"

    # 4. the same suite under xdist: the same report files apart from timestamps and cache hits
    pytest.importorskip("xdist")
    r2 = suite.runpytest_subprocess("-n", "2", *reports("parallel"))
    r2.assert_outcomes(passed=2, failed=1)

    def norm(d: str, name: str) -> str:
        text = (suite.path / d / name).read_text()
        created = json.loads((suite.path / d / "r.json").read_text())["created"]
        text = text.replace(created, "CREATED")
        from pytest_npucheck.report.markdown import esc

        text = text.replace(esc(created), "CREATED")
        return text.replace('"cache_hit": true', '"cache_hit": false')

    for name in ("r.json", "r.md", "r.html"):
        assert norm("serial", name) == norm("parallel", name), name
    # random weights are seeded from the test id: the second run reused every export
    par = json.loads((suite.path / "parallel" / "r.json").read_text())
    assert all(t["export"]["cache_hit"] for t in par["tests"])
