"""Tables built from vendor documentation (SNPE, CANN): reproducible, valid, sourced, and sensible
on real exported models."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from pytest_npucheck.tabletools import from_docs
from pytest_npucheck.tables import Catalog, bundled_tables_dir

DOC_TOOLCHAINS = ("snpe", "cann")


@pytest.fixture(scope="module")
def catalog():
    return Catalog.discover()


@pytest.fixture(scope="module")
def doc_targets(catalog):
    return [ref for key, ref in sorted(catalog.refs.items()) if key[0] in DOC_TOOLCHAINS]


# --------------------------------------------------------------------------- the tables as data

def test_committed_tables_are_what_the_builder_writes():
    """The JSON under op_support_tables/{snpe,cann} is exactly the builder's output from doc_facts/."""
    built = from_docs.all_tables()
    assert {rel.parts[0] for rel in built} == set(DOC_TOOLCHAINS)
    for rel, table in built.items():
        path = bundled_tables_dir() / rel
        assert path.is_file(), f"{path} missing: run python -m pytest_npucheck.tabletools.from_docs"
        assert path.read_text(encoding="utf-8") == from_docs.render(table), (
            f"{path} is stale: run python -m pytest_npucheck.tabletools.from_docs")
    committed = {p.relative_to(bundled_tables_dir()) for tc in DOC_TOOLCHAINS
                 for p in (bundled_tables_dir() / tc).glob("*/*.json")}
    assert committed == set(built), "a committed doc table has no facts file (or the other way round)"


def test_check_mode_reports_a_stale_table(tmp_path, capsys):
    rel, table = next(iter(from_docs.all_tables().items()))
    (tmp_path / rel).parent.mkdir(parents=True)
    (tmp_path / rel).write_text(from_docs.render(table).replace('"npu"', '"cpu"', 1), encoding="utf-8")
    assert from_docs.main(["--out", str(tmp_path), "--check"]) == 1
    assert str(tmp_path / rel) in capsys.readouterr().out


def test_doc_tables_load_and_validate(catalog, doc_targets, bundled_table_problems):
    assert {ref.toolchain for ref in doc_targets} == set(DOC_TOOLCHAINS)
    problems = bundled_table_problems
    for ref in doc_targets:
        assert not problems.get(str(ref.path)), problems.get(str(ref.path))
        table = catalog.load(ref)
        assert table.ops and table.default_verdict == "unsupported"
    # at least two documented versions per toolchain, as the issue asks
    for tc in DOC_TOOLCHAINS:
        assert len(catalog.versions(tc)) >= 2


def test_every_entry_and_rule_names_a_declared_source(doc_targets):
    for ref in doc_targets:
        data = json.loads(ref.path.read_text(encoding="utf-8"))
        sources = data["provenance"]["sources"]
        assert data["provenance"]["method"] == "documented"
        for sid, src in sources.items():
            assert src.get("url", "").startswith("https://"), f"{ref.target}: source {sid} has no page URL"
        for key, entry in data["ops"].items():
            assert entry["source"] in sources, f"{ref.target} {key}: source {entry['source']!r} not declared"
            for c in entry.get("constraints", []):
                assert c["source"] in sources, f"{ref.target} {key}: constraint source {c['source']!r} not declared"
                assert c.get("note"), f"{ref.target} {key}: constraint {c['rule']} does not say what the page says"
        for pattern in data["patterns"]:
            assert pattern["source"] in sources


def test_snpe_entries_follow_the_published_list():
    for version in ("2025.06", "2025.08"):
        facts = from_docs._snpe_facts(version)
        tables = from_docs.build_snpe(version)
        for soc, table in tables.items():
            written = {k.split(":", 1)[1] for k in table["ops"]}
            assert written == set(facts["ops"])  # every listed ONNX op has an entry, nothing else
            assert not written & set(facts["not_onnx"])
            for op, entry in table["ops"].items():
                name = op.split(":", 1)[1]
                layer = facts["ops"][name].get("layer")
                if layer and not any(k.startswith("layer_rank") for k in facts["ops"][name]):
                    flag = facts["layers"][layer][facts["layer_columns"].index(soc)]
                    assert (entry["status"] == "npu") == (flag == "Y"), (version, soc, name)


def test_snpe_newer_version_differs_only_where_its_page_does():
    old = from_docs.build_snpe("2025.06")["htp"]
    new = from_docs.build_snpe("2025.08")["htp"]
    assert old["opsets"]["ai.onnx"][1] < new["opsets"]["ai.onnx"][1]  # the newer page lists newer op versions
    def rules(entry):
        return [{k: v for k, v in c.items() if k != "source"} for c in entry.get("constraints", [])]

    changed = {k for k in old["ops"] if rules(old["ops"][k]) != rules(new["ops"][k])}
    assert changed == {"ai.onnx:DequantizeLinear"}
    carried = [k for k, e in new["ops"].items() if "carried from 2025.06" in e["note"]]
    assert carried and all(new["ops"][k]["source"] == "doc:snpe-onnx-ops-2025.06" for k in carried)


def test_cann_list_entries_and_ai_cpu_rules():
    for version in ("7.0.0", "8.0.0", "8.5.0"):
        facts = from_docs.load_facts("cann", version)
        table = from_docs.build_cann(version)["ascend310p"]
        names = {facts["aliases"].get(n, n) for n in facts["list"]}
        written = {k.split(":", 1)[1] for k in table["ops"]}
        assert written <= names
        for custom in names - written:
            assert not from_docs.is_onnx_op(custom)
        for pool in ("ai.onnx:MaxPool", "ai.onnx:AveragePool"):  # both pages name the AI CPU cases
            cpu_rules = [c for c in table["ops"][pool]["constraints"] if c["else"] == "cpu"]
            assert {c["params"]["attr"] for c in cpu_rules} == {"strides", "kernel_shape"}
            assert all("AI CPU" in c["note"] for c in cpu_rules)
    # what changed between 8.0.0 and 8.5.0 on the MaxPool page: float input and SAME_LOWER
    mp80 = from_docs.build_cann("8.0.0")["ascend310p"]["ops"]["ai.onnx:MaxPool"]["constraints"]
    mp85 = from_docs.build_cann("8.5.0")["ascend310p"]["ops"]["ai.onnx:MaxPool"]["constraints"]
    pad = lambda cs: next(c["params"]["values"] for c in cs if c["rule"] == "attr_in" and c["params"]["attr"] == "auto_pad")
    assert "SAME_LOWER" not in pad(mp80) and "SAME_LOWER" in pad(mp85)


# --------------------------------------------------------------------------- opset readings

def test_snpe_operator_versions_become_model_opset_ranges():
    rng, note = from_docs.snpe_opset_range("Relu", [1, 6], 21)
    assert rng == (1, 21) and "13, 14" in note  # newer Relu versions exist and are named, not rejected
    rng, _ = from_docs.snpe_opset_range("LayerNormalization", [17], 21)
    assert rng == (17, 21)  # the op does not exist before opset 17
    rng, note = from_docs.snpe_opset_range("Gelu", [20], 19)
    assert rng is None and "Gelu" in note


def test_cann_opset_holes_are_named():
    rng, note = from_docs.cann_opset_range([10, 11, 12, 14, 15, 16, 17, 18], (8, 18))
    assert rng == (10, 18) and "v13" in note
    rng, note = from_docs.cann_opset_range(range(8, 19), (9, 18))
    assert rng == (9, 18) and "without" not in note


# --------------------------------------------------------------------------- real exported models

SNPE = "snpe@2025.06/htp"
SNPE_DSP = "snpe@2025.06/dsp-v66"
CANN = "cann@8.0.0/ascend310p"


@pytest.fixture(scope="module")
def export(export_cache):
    from pytest_npucheck.export import ExportOptions, export_model

    cache = export_cache

    def _export(model, inputs, opset=17):
        return export_model(model, inputs, ExportOptions(exporter="torchscript", opset=opset), cache).path

    return _export


def _check(path, *targets):
    from pytest_npucheck.check import check_file

    return {r.target: r for r in check_file(path, list(targets))}


def _verdicts(result):
    return Counter(n.verdict for n in result.nodes)


def test_resnet18_runs_on_the_npu_everywhere(corpus, export):
    path = export(*corpus["resnet18_small"].build())
    results = _check(path, SNPE, SNPE_DSP, CANN, "cann@7.0.0/ascend310p", "snpe@2025.08/htp")
    for target, r in results.items():
        assert not r.model_issues, target
        assert set(_verdicts(r)) <= {"npu", "folded"}, (target, _verdicts(r))


def test_snpe_runtime_column_decides_per_soc(corpus, export):
    """vit: LayerNormalization and the fused GELU run on HTP; on DSP v66 their layers are CPU-only."""
    path = export(*corpus["vit_tiny"].build())
    r = _check(path, SNPE, SNPE_DSP)
    htp, dsp = r[SNPE], r[SNPE_DSP]
    assert set(_verdicts(htp)) <= {"npu", "folded"}
    ln = [n for n in dsp.nodes if n.op_type == "LayerNormalization"]
    assert ln and all(n.verdict == "cpu" for n in ln)
    assert all("dsp-v66 runtime per the layers page: LayerNorm: no" in n.reasons[0].message for n in ln)
    erf = [n for n in dsp.nodes if n.op_type == "Erf"]
    assert erf and all(n.verdict == "cpu" and n.fused_into and n.fused_into.startswith("Gelu") for n in erf)
    erf_htp = [n for n in htp.nodes if n.op_type == "Erf"]
    assert erf_htp and all(n.verdict == "npu" and n.fused_into for n in erf_htp)


def test_snpe_documented_constraint_and_unpublished_runtime(corpus, export):
    import torch
    from torch import nn

    class Head(nn.Module):
        """GPT-2 style linear (addmm with an untransposed weight) and a hard-sigmoid gate."""

        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 8))
            self.b = nn.Parameter(torch.randn(8))

        def forward(self, x):
            y = torch.addmm(self.b, x, self.w)
            return y * nn.functional.hardsigmoid(y)

    torch.manual_seed(0)
    path = export(Head().eval(), (torch.randn(4, 16),))
    r = _check(path, SNPE)[SNPE]
    by_op = {n.op_type: n for n in r.nodes}
    gemm = by_op["Gemm"]
    assert gemm.verdict == "unsupported"
    assert any("transB=0 not in {1}" in x.message for x in gemm.reasons)
    hs = by_op["HardSigmoid"]
    assert hs.verdict == "cpu" and "runtime is not published" in hs.reasons[0].message


def test_undocumented_op_is_unsupported_on_snpe_and_listed_on_cann(export):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SELU(), nn.Conv2d(8, 4, 1)).eval()
    path = export(model, (torch.randn(1, 3, 16, 16),))
    r = _check(path, SNPE, CANN)
    selu_snpe = next(n for n in r[SNPE].nodes if n.op_type == "Selu")
    assert selu_snpe.verdict == "unsupported" and selu_snpe.reasons[0].rule == "op_missing"
    selu_cann = next(n for n in r[CANN].nodes if n.op_type == "Selu")
    assert selu_cann.verdict == "npu"  # listed on the CANN index page


def test_cann_ai_cpu_case_is_reported_cpu_with_the_documented_reason(export):
    import torch
    from torch import nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.MaxPool2d(kernel_size=3, stride=64)).eval()
    path = export(model, (torch.randn(1, 3, 130, 130),))
    for target in (CANN, "cann@8.5.0/ascend310p"):
        r = _check(path, target)[target]
        pool = next(n for n in r.nodes if n.op_type == "MaxPool")
        assert pool.verdict == "cpu"
        reasons = [x for x in pool.reasons if x.verdict == "cpu"]
        assert reasons and reasons[0].rule == "attr_range" and "strides" in reasons[0].message
        conv = next(n for n in r.nodes if n.op_type == "Conv")
        assert conv.verdict == "npu"


def test_cann_documented_spec_limits(corpus, export):
    """The CANN Conv page allows 4-D/5-D inputs only: a 1-D convolution (rank 3) is rejected;
    Resize scales folded from a Constant node pass the 'scales must be constant' rule."""
    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = nn.Conv1d(4, 4, 3, padding=1)
            self.c2 = nn.Conv2d(4, 4, 3, padding=1)

        def forward(self, x):
            y = self.c1(x.flatten(2)).reshape(x.shape)
            return nn.functional.interpolate(self.c2(y), scale_factor=2.0, mode="nearest")

    torch.manual_seed(0)
    path = export(Net().eval(), (torch.randn(1, 4, 8, 8),))
    r = _check(path, CANN)[CANN]
    convs = sorted((n for n in r.nodes if n.op_type == "Conv"), key=lambda n: n.index)
    assert [c.verdict for c in convs] == ["unsupported", "npu"]
    assert "rank 3" in convs[0].reasons[0].message
    resize = next(n for n in r.nodes if n.op_type == "Resize")
    assert resize.verdict == "npu", resize.reasons


def test_model_opset_outside_a_snpe_version(export):
    """Rev. BL lists operator versions up to 21; the newer page lists up to 24."""
    import onnx
    import torch
    from torch import nn

    torch.manual_seed(0)
    path = export(nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval(), (torch.randn(1, 3, 8, 8),))
    model = onnx.version_converter.convert_version(onnx.load(str(path)), 22)
    p22 = path.parent.parent / "opset22.onnx"
    onnx.save(model, str(p22))
    r = _check(p22, SNPE, "snpe@2025.08/htp")
    assert any("outside the range [1, 21]" in i.message for i in r[SNPE].model_issues)
    assert not r["snpe@2025.08/htp"].model_issues
    conv = next(n for n in r["snpe@2025.08/htp"].nodes if n.op_type == "Conv")
    assert conv.verdict == "npu"


def test_constraint_rejecting_an_op_that_only_runs_on_the_cpu_is_checked(tmp_path):
    """SNPE runs GRU on the CPU (no HTP layer) and its page says custom activations and clip are not
    supported at all: a GRU with ``clip`` rejects the model, a plain GRU falls back. (Such constraints of
    CPU-only ops were written in the tables but not checked before session 7.)"""
    import onnx
    from onnx import TensorProto, helper

    import numpy as np

    def gru(**attrs):
        w = helper.make_tensor("W", TensorProto.FLOAT, [1, 24, 4], np.ones(96, np.float32))
        r = helper.make_tensor("R", TensorProto.FLOAT, [1, 24, 8], np.ones(192, np.float32))
        node = helper.make_node("GRU", ["X", "W", "R"], ["Y"], name="gru", hidden_size=8, **attrs)
        graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [5, 1, 4])],
                                  [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [5, 1, 1, 8])], [w, r])
        path = tmp_path / f"gru{len(attrs)}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)]), path)
        return path

    for target in (SNPE, "snpe@2025.08/htp"):
        [plain] = _check(gru(), target).values()
        [clipped] = _check(gru(clip=3.0), target).values()
        assert [(n.verdict, [r.rule for r in n.reasons]) for n in plain.nodes] == [("cpu", ["cpu_only"])]
        [node] = clipped.nodes
        assert node.verdict == "unsupported" and clipped.verdict == "unsupported"
        assert [r.rule for r in node.reasons] == ["attr_absent", "cpu_only"]
        assert "clip" in node.reasons[0].message
