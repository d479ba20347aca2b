"""RKNN tables for every rknn-toolkit2 version x SoC: valid, backed by the committed probe results of
that version and SoC, giving verdicts on real exported models, and differing where the real
compilers differ (differences pinned from the committed results files)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_npucheck.tables import Catalog

REPO = Path(__file__).resolve().parents[2]
PROBES = REPO / "probes" / "rknn"
SOCS = ("rk3588", "rk3576", "rk3566", "rv1106")

#: the (version, SoC) tables probed with the real rknn-toolkit2 and committed
EXPECTED = {(v, s) for v in ("2.2.0", "2.3.2", "2.5.0") for s in SOCS}

CATALOG = Catalog.discover()
RKNN_REFS = sorted((v, s) for (tc, v, s) in CATALOG.refs if tc == "rknn")


def _results(version: str, soc: str) -> dict:
    main = json.loads((PROBES / version / ("%s.results.json" % soc)).read_text())
    extra = PROBES / version / ("%s.extra.results.json" % soc)
    if extra.exists():
        main["probes"] = main["probes"] + json.loads(extra.read_text())["probes"]
    return main


def _table(version: str, soc: str):
    return CATALOG.table("rknn@%s/%s" % (version, soc))


def test_every_version_and_soc_has_a_table():
    assert EXPECTED <= set(RKNN_REFS), sorted(EXPECTED - set(RKNN_REFS))


def test_soc_alias_rk3568_resolves_to_rk3566():
    assert CATALOG.resolve("rknn@2.5.0/rk3568").soc == "rk3566"


@pytest.mark.parametrize("version,soc", RKNN_REFS)
def test_table_is_backed_by_its_own_probe_results(version, soc):
    """Loads and validates; every entry's probes exist in the results of *this* version and SoC;
    the precision is the one the probes were built with; the self-check figure is stated."""
    table = _table(version, soc)
    res = _results(version, soc)
    assert (res["version"], res["soc"]) == (version, soc)
    ids = {p["id"] for p in res["probes"]}
    raw = json.loads((REPO / "op_support_tables/rknn" / version / ("%s.json" % soc)).read_text())
    for op, entry in raw["ops"].items():
        missing = set(entry["probes"]) - ids
        assert not missing, (op, sorted(missing)[:3])
        assert entry["source"] in raw["provenance"]["sources"] or entry["source"].startswith("doc:")
    for pat in raw["patterns"]:
        assert set(pat["probes"]) <= ids, pat["name"]
    int8 = bool(res["build"]["do_quantization"])
    assert int8 == (soc == "rv1106")
    assert raw["precision"]["default"] == ("int8" if int8 else "float16")
    assert dict(table.precision)["default"] == raw["precision"]["default"]
    m = re.match(r"self-check: the table reproduces the compiler's placement for (\d+) of (\d+) "
                 r"probes", raw["provenance"]["errata"][0])
    assert m, raw["provenance"]["errata"][0]
    agree, total = int(m.group(1)), int(m.group(2))
    assert total == sum(1 for p in res["probes"] if not p.get("config") and not p.get("load"))
    assert agree / total >= 0.85
    assert len(raw["provenance"]["errata"]) - 1 >= total - agree


# --------------------------------------------------------------------------- real exported models


@pytest.fixture(scope="module")
def export(export_cache):
    from pytest_npucheck.export import ExportOptions, export_model

    cache = export_cache

    def _export(model, inputs, opset=17):
        return export_model(model, inputs, ExportOptions(exporter="torchscript", opset=opset),
                            cache).path

    return _export


def _check(path, targets):
    from pytest_npucheck.check import check_file

    return {r.target: r for r in check_file(path, list(targets))}


def test_resnet18_verdicts_on_every_rknn_table(corpus, export):
    """A real ResNet-18 export gets a verdict for every node on every RKNN table, and its
    compute (Conv with folded BN, Relu, Add, pooling, Gemm) is on the NPU everywhere (those ops
    ran there in every probe run); only shape glue such as Flatten may differ per SoC."""
    path = export(*corpus["resnet18_small"].build())
    targets = ["rknn@%s/%s" % vs for vs in RKNN_REFS]
    results = _check(path, targets)
    assert set(results) == set(targets)
    for target, r in results.items():
        assert not r.model_issues, target
        assert r.nodes, target
        compute = [n for n in r.nodes if n.op_type in ("Conv", "Relu", "Add", "MaxPool",
                                                        "GlobalAveragePool", "Gemm")]
        assert len(compute) > 20, target
        bad = {(n.op_type, n.verdict) for n in compute if n.verdict not in ("npu", "folded")}
        assert not bad, (target, bad)
        assert all(n.verdict in ("npu", "folded", "cpu") for n in r.nodes), target


def test_vit_gelu_erf_placement_follows_each_table(corpus, export):
    """ViT's Erf: fused into exGelu (npu) where the table has the gelu_erf pattern, cpu where
    the probes of that target showed no fusion."""
    path = export(*corpus["vit_tiny"].build())
    targets = ["rknn@%s/%s" % vs for vs in RKNN_REFS]
    results = _check(path, targets)
    for (version, soc), target in zip(RKNN_REFS, targets):
        raw = json.loads((REPO / "op_support_tables/rknn" / version / ("%s.json" % soc)
                          ).read_text())
        fused = any(p["name"] == "gelu_erf" for p in raw["patterns"])
        erf = [n for n in results[target].nodes if n.op_type == "Erf"]
        assert erf, target
        want = "npu" if fused else raw["ops"]["ai.onnx:Erf"]["status"]
        assert {n.verdict for n in erf} == {want}, (target, [n.verdict for n in erf])


# --------------------------------------------------------------------------- real differences


def _probe_model(pid: str):
    from conftest import probe_index_by_id

    index = probe_index_by_id()
    assert pid in index, pid
    return index[pid]


def _recorded(version: str, soc: str, pid: str) -> dict:
    return next(p for p in _results(version, soc)["probes"] if p["id"] == pid)


@pytest.mark.parametrize("pid,a,b", [
    # Sin ran on the CPU on rk3588 and on the NPU on rk3576 (rknn-toolkit2 2.5.0)
    ("Sin.f32.r4", ("2.5.0", "rk3588"), ("2.5.0", "rk3576")),
    # an LSTM with an explicit layout attribute (what the dynamo exporter writes) built and ran
    # on the NPU with rknn-toolkit2 2.3.2; 2.5.0 fails to build it
    ("LSTM.dir=forward.layout=0.f32.r3", ("2.3.2", "rk3588"), ("2.5.0", "rk3588")),
    # on rk3576, Sin moved from the CPU (2.3.2) to the NPU (2.5.0); GRU from the CPU to the NPU
    ("Sin.f32.r4", ("2.3.2", "rk3576"), ("2.5.0", "rk3576")),
    ("GRU.dir=forward.f32.r3", ("2.3.2", "rk3576"), ("2.5.0", "rk3576")),
    # Max of two rank-2 tensors ran on the NPU with 2.2.0 and on the CPU from 2.3.2 on
    ("Max.b=same.f32.r2", ("2.2.0", "rk3588"), ("2.3.2", "rk3588")),
    # a bool -> float32 Cast: CPU on rk3576 with 2.2.0, NPU on rk3588 (a candidate constraint
    # that adapt_to_results added for rk3576 only)
    ("Cast.to=float32.bool.r4", ("2.2.0", "rk3576"), ("2.2.0", "rk3588")),
    # decomposed LayerNorm: fused into exNorm on both, but rv1106's int8 build keeps the mean
    # (the first ReduceMean) on the CPU (pattern node runs_on: cpu)
    ("pattern.layernorm_decomposed.pow.f32.r3", ("2.5.0", "rv1106"), ("2.5.0", "rk3588")),
    # GELU in the dynamo exporter's operand order (0.5 * (erf + 1), then x * .): fused from 2.5.0 on
    ("x.pattern.gelu_erf.half_first.f32.r3", ("2.3.2", "rk3588"), ("2.5.0", "rk3588")),
])
def test_recorded_difference_is_in_the_tables(pid, a, b):
    from pytest_npucheck.toolchains.rknn.table import predict

    ra, rb = _recorded(*a, pid), _recorded(*b, pid)
    assert ra["verdict"] != rb["verdict"], (ra["verdict"], rb["verdict"])
    probe = _probe_model(pid)
    for (version, soc), rec in ((a, ra), (b, rb)):
        pred = predict(_table(version, soc), probe.model)
        for node in rec["focus"]:
            got = "npu" if pred[node] == "folded" else pred[node]
            want = rec["placement"][node] if rec["status"] == "ok" else "unsupported"
            assert got == want, (version, soc, node, got, want)


def test_calibration_set_for_int8_probes(tmp_path):
    """rv1106 probes are built quantized: each probe gets a dataset.txt listing random .npy
    inputs of the probe's own shapes and dtypes."""
    import numpy as np

    from pytest_npucheck.toolchains.rknn.probe import CALIBRATION_SAMPLES, write_calibration

    probe = _probe_model("Gather.axis=1.idx=dyn.f32.r3")
    ds = Path(write_calibration(probe, tmp_path))
    lines = ds.read_text().splitlines()
    assert len(lines) == CALIBRATION_SAMPLES
    inputs = [i for i in probe.model.graph.input
              if i.name not in {t.name for t in probe.model.graph.initializer}]
    for line in lines:
        arrays = [np.load(p) for p in line.split()]
        assert len(arrays) == len(inputs)
        for arr, vi in zip(arrays, inputs):
            dims = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            assert list(arr.shape) == dims
    kinds = {np.load(p).dtype.kind for p in lines[0].split()}
    assert kinds == {"f", "i"}


def test_ir_version_limit_of_2_2_0(corpus, export_cache):
    """rknn-toolkit2 2.2.0 loads models with the onnx 1.14 checker: IR 10 (what torch's dynamo
    exporter writes) fails in load_onnx (x.ir_version probes), so the 2.2.0 tables reject such a
    model as a whole, naming the IR version; 2.3.2 and 2.5.0 load it."""
    from pytest_npucheck.export import ExportOptions, export_model

    model, inputs = corpus["resnet18_small"].build()
    path = export_model(model, inputs, ExportOptions(exporter="dynamo", opset=18), export_cache).path
    import onnx

    assert onnx.load(str(path), load_external_data=False).ir_version >= 10
    for soc in SOCS:
        t220 = _table("2.2.0", soc)
        assert t220.ir_version == (3, 9)
        [old] = _check(path, [t220.target]).values()
        assert old.verdict == "unsupported"
        assert any(r.rule == "ir_version" and "IR version 10" in r.message for r in old.model_issues)
        for v in ("2.3.2", "2.5.0"):
            assert _table(v, soc).ir_version is None
            [new] = _check(path, ["rknn@%s/%s" % (v, soc)]).values()
            assert not new.model_issues, new.model_issues
    page = (REPO / "docs/supported-ops/rknn-2.2.0-rk3588.md").read_text()
    assert "ONNX IR versions loaded: 3-9" in page


def test_transpose_blocks_counts_moved_runs_of_axes():
    from pytest_npucheck.rules import transpose_blocks

    assert transpose_blocks([2, 0, 3, 1, 4], [16, 16, 3, 2, 16]) == 5
    assert transpose_blocks([2, 0, 3, 1, 4], [1, 16, 3, 8, 16]) == 3  # (3, 8) stay neighbours
    assert transpose_blocks([0, 1, 3, 2, 4, 5], [1, 4, 4, 4, 4, 32]) == 4
    assert transpose_blocks([0, 1, 3, 2, 5, 4], [1, 4, 4, 4, 4, 32]) == 5
    assert transpose_blocks([0, 1, 2, 3], None) == 1
    assert transpose_blocks([3, 1, 2, 0, 4], [1, 65, 1, 3, 64]) == 3


def test_swin_window_qkv_transpose_follows_each_table(corpus, export):
    """Swin's attention splits q, k, v of a batch of windows with a five-block Transpose
    (2, 0, 3, 1, 4): the real 2.2.0 and 2.3.2 compilers ran it on the CPU (rknn_agreement on
    swin_tiny_small), 2.5.0 on the NPU; the last stage has one window and stays on the NPU."""
    path = export(*corpus["swin_tiny_small"].build())
    results = _check(path, ["rknn@2.2.0/rk3588", "rknn@2.3.2/rk3576", "rknn@2.5.0/rk3588"])
    for target, want in (("rknn@2.2.0/rk3588", "cpu"), ("rknn@2.3.2/rk3576", "cpu"),
                         ("rknn@2.5.0/rk3588", "npu")):
        qkv = [n for n in results[target].nodes if n.op_type == "Transpose"
               and len(n.reasons) <= 1 and "attn" in n.name and n.name.endswith("/Transpose")]
        assert len(qkv) >= 4, (target, [n.name for n in qkv])
        verdicts = {n.name: n.verdict for n in qkv}
        windowed = [n for n in qkv if "layers.0/" in n.name or "layers.1/" in n.name]
        single = [n for n in qkv if "layers.2/" in n.name]
        assert windowed and single, verdicts
        assert {n.verdict for n in windowed} == {want}, (target, verdicts)
        assert {n.verdict for n in single} == {"npu"}, (target, verdicts)
        if want == "cpu":
            assert all(r.rule in ("transpose_blocks", "any_of") and "moves 5 blocks of axes" in r.message
                       for n in windowed for r in n.reasons), (target, [n.reasons for n in windowed])


@pytest.mark.parametrize("version,soc", [("2.2.0", "rk3588"), ("2.2.0", "rk3576"),
                                         ("2.3.2", "rk3588"), ("2.3.2", "rk3576")])
def test_five_block_transpose_probes_are_reproduced(version, soc):
    """The in-network Transpose probes (Mul -> Transpose -> Mul) that decided the
    transpose_blocks constraint: five blocks ran on the CPU, three or fewer on the NPU."""
    from pytest_npucheck.toolchains.rknn.table import predict

    table = _table(version, soc)
    seen = set()
    for rec in _results(version, soc)["probes"]:
        if ".ctx=mul_mul." not in rec["id"] or not rec["id"].startswith("x.Transpose.perm=2_0_3_1_4"):
            continue
        pred = predict(table, _probe_model(rec["id"]).model)
        [node] = [n for n in rec["focus"] if n.startswith("Transpose")]
        assert pred[node] == rec["placement"][node], (rec["id"], pred[node], rec["placement"][node])
        seen.add(rec["placement"][node])
    assert seen == {"cpu", "npu"}, seen


def test_dynamo_gelu_order_follows_each_version(corpus, export_cache):
    """torch's dynamo exporter writes GELU as Div -> Erf -> Add -> Mul(0.5, .) -> Mul(x, .):
    rknn-toolkit2 2.5.0 fused it into exGelu, 2.3.2 left every such Erf on the CPU (35 missed
    fallbacks on the corpus before the gelu_erf_half_first pattern); the TorchScript order
    (vit_tiny's TorchScript export, test above) is fused by both."""
    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(*corpus["vit_tiny"].build(), ExportOptions(exporter="dynamo", opset=18), export_cache).path
    results = _check(path, ["rknn@2.3.2/rk3588", "rknn@2.5.0/rk3588"])
    for target, want in (("rknn@2.3.2/rk3588", "cpu"), ("rknn@2.5.0/rk3588", "npu")):
        erf = [n for n in results[target].nodes if n.op_type == "Erf"]
        assert erf and {n.verdict for n in erf} == {want}, (target, [(n.name, n.verdict) for n in erf])


def test_fused_pattern_node_left_on_the_cpu_is_reported(corpus, export):
    """llama_tiny's RMSNorm (TorchScript: Pow -> ReduceMean -> Add -> Sqrt -> Div -> Mul) is fused
    into exNorm by every RKNN 2.5.0 table; for rv1106 the ReduceMean stays on the CPU (what the
    real int8 build did to every RMSNorm of the corpus) and the reason names the pattern."""
    path = export(*corpus["llama_tiny"].build())
    results = _check(path, ["rknn@2.5.0/rv1106", "rknn@2.5.0/rk3588"])
    means = {t: [n for n in r.nodes if n.op_type == "ReduceMean" and n.fused_into] for t, r in results.items()}
    assert means["rknn@2.5.0/rv1106"] and len(means["rknn@2.5.0/rv1106"]) == len(means["rknn@2.5.0/rk3588"])
    assert {n.verdict for n in means["rknn@2.5.0/rk3588"]} == {"npu"}
    for n in means["rknn@2.5.0/rv1106"]:
        assert n.verdict == "cpu", n
        [reason] = n.reasons
        assert "rmsnorm_div" in reason.message and "leaves this node on the CPU" in reason.message, reason
    others = [n for n in results["rknn@2.5.0/rv1106"].nodes if n.fused_into and n.op_type != "ReduceMean"]
    assert others and all(n.verdict == "npu" for n in others)


def test_swin_roll_is_a_cpu_gather_on_rv1106_only(corpus, export):
    """Swin's shifted windows roll a (1, H, W, C) grid made by viewing LayerNorm'ed tokens: the
    real rv1106 int8 builds (every version) ran those rolls as Gathers on the CPU, rk3588 on the
    NPU. Probes x.Concat.ctx=roll / norm_roll showed why: along the channel axis a roll becomes a
    1x1 Conv, along a spatial one a CPU Gather, and behind a LayerNormalization the features are
    the channels, so H and W (axes 1, 2) are both spatial."""
    path = export(*corpus["swin_tiny_small"].build())
    targets = ["rknn@2.2.0/rv1106", "rknn@2.3.2/rv1106", "rknn@2.5.0/rv1106", "rknn@2.5.0/rk3588"]
    results = _check(path, targets)
    for target in targets:
        rolls = [n for n in results[target].nodes if n.op_type == "Concat" and "layers.0.1/" in n.name]
        assert len(rolls) == 4, [n.name for n in rolls]  # two rolls (shift and back) of two axes each
        if target.endswith("rk3588"):
            assert {n.verdict for n in rolls} == {"npu"}, target
            continue
        assert {n.verdict for n in rolls} == {"cpu"}, (target, [(n.name, n.verdict) for n in rolls])
        for n in rolls:
            [reason] = [r for r in n.reasons if r.rule == "not_spatial_roll"]
            # the roll reads the normalized tokens (shift) or the attention's projection (shift back)
            assert ("LayerNormalization '" in reason.message or "MatMul '" in reason.message), reason
            assert "are its channels, so axis" in reason.message and "spatial axis" in reason.message, reason
    # the patch merging Concat (strided Slices along H and W, concatenated on the features) stays
    merge = [n for n in results["rknn@2.5.0/rv1106"].nodes if n.op_type == "Concat" and n.name.endswith(".2/Concat")]
    assert merge and {n.verdict for n in merge} == {"npu"}, [(n.name, n.verdict) for n in merge]


@pytest.mark.parametrize("version", ["2.2.0", "2.3.2", "2.5.0"])
def test_roll_probes_are_reproduced_on_rv1106(version):
    """The roll probes that decided the not_spatial_roll constraint, one axis at a time: from the
    input, axis 1 is the channel axis (NPU) and axis 2 spatial (CPU); behind a LayerNormalization
    both are spatial (CPU)."""
    from pytest_npucheck.toolchains.rknn.table import predict

    table = _table(version, "rv1106")
    seen = []
    for rec in _results(version, "rv1106")["probes"]:
        if rec["id"] not in ("x.Concat.ctx=norm_roll.axes=1.f32.r4", "x.Concat.ctx=norm_roll.axes=2.f32.r4",
                             "x.Concat.ctx=roll.shape=1_16_16_32.f32.r4"):
            continue
        pred = predict(table, _probe_model(rec["id"]).model)
        for node in [n for n in rec["focus"] if n.startswith("roll_concat")]:
            assert pred[node] == rec["placement"][node], (rec["id"], node, pred[node])
            seen.append((rec["id"].split(".")[2], node, pred[node]))
    assert sorted(seen) == [("ctx=norm_roll", "roll_concat1", "cpu"), ("ctx=norm_roll", "roll_concat2", "cpu"),
                            ("ctx=roll", "roll_concat1", "npu"), ("ctx=roll", "roll_concat2", "cpu")], seen


def test_rk3566_layout_change_without_a_compute_op_runs_on_the_cpu(corpus, export):
    """RK3566 merges a Transpose (rank 4 or more, moving axes) into the compute op its result reaches;
    with none to reach it runs on the CPU, with the Reshape before it (probes x.Transpose.ctx=head_split
    and conv_head). A diffusion UNet's attention reads its head split with an Einsum the compiler leaves
    on the CPU: every real rk3566 build ran those Reshape -> Transpose pairs on the CPU, rk3588 on the
    NPU; BERT's head split, read by a MatMul, stays on the NPU of both."""
    unet = export(*corpus["diffusion_unet_tiny"].build())
    bert = export(*corpus["bert_tiny"].build())
    for version in ("2.2.0", "2.3.2", "2.5.0"):
        res = _check(unet, [f"rknn@{version}/rk3566", f"rknn@{version}/rk3588"])
        for target, want in ((f"rknn@{version}/rk3566", "cpu"), (f"rknn@{version}/rk3588", "npu")):
            nodes = res[target].nodes
            splits = [n for n in nodes if n.op_type == "Transpose" and "attn1/Transpose" in n.name
                      and not n.name.endswith("_3")]
            assert len(splits) >= 6, [n.name for n in splits]
            assert {n.verdict for n in splits} == {want}, (target, [(n.name, n.verdict) for n in splits])
            views = [n for n in nodes if n.op_type == "Reshape" and any(
                c in {s.name for s in splits} for c in _consumers(unet, n.name))]
            assert len(views) == len(splits) and {n.verdict for n in views} == {want}, target
            if want == "cpu":
                assert all(any(r.rule == "any_of" and "reaches no compute op" in r.message for r in n.reasons)
                           for n in splits), [n.reasons for n in splits]
                assert all(any(r.rule in ("feeds_compute", "any_of") and "compute op" in r.message for r in n.reasons)
                           for n in views), [n.reasons for n in views]
        [r] = _check(bert, [f"rknn@{version}/rk3566"]).values()
        heads = [n for n in r.nodes if n.op_type in ("Transpose", "Reshape") and "attention" in n.name]
        assert heads and {n.verdict for n in heads} == {"npu"}, [(n.name, n.verdict) for n in heads if n.verdict != "npu"]


def _consumers(path, name):
    import onnx

    graph = onnx.load(str(path), load_external_data=False).graph
    outs = {o for n in graph.node if n.name == name for o in n.output}
    return [n.name for n in graph.node if outs & set(n.input)]


@pytest.mark.parametrize("version", ["2.2.0", "2.3.2", "2.5.0"])
def test_layout_reach_probes_are_reproduced_on_rk3566(version):
    """The probes that decided the feeds_compute constraints on rk3566, node by node."""
    from pytest_npucheck.toolchains.rknn.table import predict

    table = _table(version, "rk3566")
    placements = set()
    for rec in _results(version, "rk3566")["probes"]:
        if not rec["id"].startswith(("x.Transpose.ctx=head_split.", "x.Transpose.ctx=conv_head.")):
            continue
        pred = predict(table, _probe_model(rec["id"]).model)
        for node in rec["focus"]:
            assert pred[node] == rec["placement"][node], (rec["id"], node, pred[node])
            placements.add((node, rec["placement"][node]))
    assert placements == {("head_view", "npu"), ("head_view", "cpu"), ("head_split", "npu"), ("head_split", "cpu"),
                          ("to_nhwc", "npu"), ("to_nhwc", "cpu"), ("flat", "npu")}, placements


def test_rk3566_se_block_pooling_of_the_dynamo_exporter(corpus, export_cache):
    """The dynamo exporter writes global average pooling as ReduceMean over (-1, -2): every real
    2.5.0/rk3566 build ran the ones feeding a squeeze-and-excitation block on the CPU (probes
    x.ReduceMean.ctx=se: only with the axes in descending order) and the classifier head's on the NPU."""
    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(*corpus["mobilenet_v3_small"].build(), ExportOptions(exporter="dynamo", opset=18),
                        export_cache).path
    res = _check(path, ["rknn@2.5.0/rk3566", "rknn@2.5.0/rk3588"])
    pools = {t: [n for n in r.nodes if n.op_type == "ReduceMean"] for t, r in res.items()}
    assert len(pools["rknn@2.5.0/rk3566"]) >= 4
    # session 7: the rule is that the pooled map has no other reader (sole_reader; the SE block's gating Mul
    # reads it too), which also covers DeepLab's ASPP pooling (probes x.ReduceMean.ctx=aspp)
    head = [n for n in pools["rknn@2.5.0/rk3566"] if not any("is also read by" in r.message for r in n.reasons)]
    se = [n for n in pools["rknn@2.5.0/rk3566"] if n not in head]
    assert se and {n.verdict for n in se} == {"cpu"}, [(n.name, n.verdict) for n in se]
    assert all(any("not in ascending order" in r.message and "Mul" in r.message for r in n.reasons) for n in se)
    assert len(head) == 1 and head[0].verdict == "npu", [(n.name, n.verdict, n.reasons) for n in head]
    assert {n.verdict for n in pools["rknn@2.5.0/rk3588"]} == {"npu"}


def test_group_norm_reshape_back_on_2_2_0_rk3566(corpus, export):
    """TorchScript writes GroupNorm as Reshape -> InstanceNormalization -> Reshape -> Mul -> Add: the
    real 2.2.0/rk3566 build of the diffusion UNet ran every Reshape back to (N, C, H, W) on the CPU
    (probes x.Reshape.ctx=group_norm), 2.5.0/rk3566 on the NPU."""
    path = export(*corpus["diffusion_unet_tiny"].build())
    res = _check(path, ["rknn@2.2.0/rk3566", "rknn@2.5.0/rk3566"])
    for target, want in (("rknn@2.2.0/rk3566", "cpu"), ("rknn@2.5.0/rk3566", "npu")):
        backs = [n for n in res[target].nodes if n.op_type == "Reshape" and "norm" in n.name
                 and n.name.endswith("/Reshape_1")]
        assert len(backs) >= 8 and {n.verdict for n in backs} == {want}, (target, [(n.name, n.verdict) for n in backs])
        if want == "cpu":
            assert all(any(r.rule == "producer_not" and "InstanceNormalization" in r.message for r in n.reasons)
                       for n in backs)


def test_group_norm_reshape_back_of_16_channels_on_rk3566(corpus, export):
    """A VAE decoder's GroupNorm over 16 channels (8 groups): the real 2.3.2 and 2.5.0 rk3566 builds
    ran its Reshape back to (1, 16, 32, 32) on the CPU, while those of 32 and more channels stayed on
    the NPU (probes x.Reshape.ctx=group_norm.c=16.hw=32 / c=32.hw=32)."""
    path = export(*corpus["sd_vae_decoder_small"].build())
    res = _check(path, ["rknn@2.5.0/rk3566", "rknn@2.5.0/rk3588"])
    backs = {t: [n for n in r.nodes if n.op_type == "Reshape" and n.name.endswith("/Reshape_1") and "norm" in n.name]
             for t, r in res.items()}
    from pytest_npucheck.check import graph_facts

    facts = graph_facts(path)
    channels = {n.name: facts.tensor(n.outputs[0]).shape[1] for n in facts.nodes if n.op_type == "Reshape"}
    small = [n for n in backs["rknn@2.5.0/rk3566"] if channels[n.name] < 32]
    large = [n for n in backs["rknn@2.5.0/rk3566"] if channels[n.name] >= 32]
    assert small and large
    assert {n.verdict for n in small} == {"cpu"} and {n.verdict for n in large} == {"npu"}
    assert {n.verdict for n in backs["rknn@2.5.0/rk3588"]} == {"npu"}


def test_crnn_classifier_reshape_behind_an_lstm(corpus, export):
    """CRNN's per-step classifier: LSTM -> Transpose -> Reshape (T, 2H) -> Gemm (T, 37) -> Reshape
    (T, 1, 37) -> LogSoftmax. Behind an RNN the compiler runs that Gemm over the sequence as a
    convolution, and the real rk3588 and rk3566 builds (every version) ran the Reshape back on the
    CPU; rk3576 and rv1106 on the NPU. Probes x.Reshape.ctx=rnn_head put the line at the class
    count: a multiple of 8 on rk3588 (36 and 38 on the CPU, 40 on the NPU), of 4 on rk3566 (36 on
    the NPU, 38 on the CPU). The same Reshape of the first LSTM's 32-wide Gemm stays on the NPU."""
    path = export(*corpus["crnn_ocr"].build())
    targets = [f"rknn@{v}/{s}" for v in ("2.2.0", "2.3.2", "2.5.0") for s in ("rk3588", "rk3566", "rk3576", "rv1106")]
    res = _check(path, targets)
    for target, r in res.items():
        heads = {n.name: n for n in r.nodes if n.op_type == "Reshape" and n.name.startswith("/rnn/")
                 and n.name.endswith("/Reshape_1")}
        assert set(heads) == {"/rnn/rnn.0/Reshape_1", "/rnn/rnn.1/Reshape_1"}, sorted(heads)
        assert heads["/rnn/rnn.0/Reshape_1"].verdict == "npu", target  # 32 outputs: a multiple of 8
        last = heads["/rnn/rnn.1/Reshape_1"]
        if "rk3588" in target or "rk3566" in target:
            assert last.verdict == "cpu", (target, last.reasons)
            msgs = [r.message for r in last.reasons if r.rule == "any_of"]
            assert any("LSTM" in m and "dim 1 is 37, not a multiple of" in m for m in msgs), (target, msgs)
        else:
            assert last.verdict == "npu", (target, last.reasons)


@pytest.mark.parametrize("version", ["2.2.0", "2.3.2", "2.5.0"])
@pytest.mark.parametrize("soc", SOCS)
def test_rnn_head_probes_are_reproduced(version, soc):
    """Every x.Reshape.ctx=rnn_head probe (class counts 36, 37, 38, 40, 64; LSTM and GRU; LogSoftmax
    and Softmax after) is reproduced node by node by the committed table, and the probes do show
    the difference per SoC that the tables state."""
    from pytest_npucheck.toolchains.rknn.table import predict

    table = _table(version, soc)
    seen = {}
    for rec in _results(version, soc)["probes"]:
        if not rec["id"].startswith("x.Reshape.ctx=rnn_head."):
            continue
        assert rec["status"] == "ok", rec["id"]
        pred = predict(table, _probe_model(rec["id"]).model)
        assert pred["head_view"] == rec["placement"]["head_view"], (rec["id"], pred["head_view"])
        m = re.search(r"rnn=(\w+)\.n=(\d+)\.post=(\w+)\.", rec["id"])
        seen[(m.group(1), int(m.group(2)), m.group(3))] = pred["head_view"]
    assert len(seen) == 9, sorted(seen)
    cpu = {(rnn, n) for (rnn, n, post), v in seen.items() if v == "cpu"}
    want = {"rk3588": {("LSTM", 36), ("LSTM", 37), ("LSTM", 38), ("GRU", 37)},
            "rk3566": {("LSTM", 37), ("LSTM", 38), ("GRU", 37)}}.get(soc, set())
    assert cpu == want, (soc, sorted(cpu))


def test_adaptation_can_drop_two_constraints_at_once():
    """A target can differ from the base table in two constraints of one op: rk3576 runs CRNN's
    classifier Reshape on the NPU whatever the class count, so both the LogSoftmax rule and the
    RNN rule of 2.5.0/rk3588 go, while the dynamic-shape rule (build fails) and the graph-output
    rule stay. With one constraint dropped per variant the best fit had been no constraint at all."""
    from pytest_npucheck.toolchains.rknn.table import _variants

    entry = {"status": "npu", "constraints": [{"rule": r, "params": {}, "else": e} for r, e in
                                              (("a", "unsupported"), ("b", "cpu"), ("c", "cpu"), ("d", "cpu"))]}
    kept = [[e["status"]] + [c["rule"] for c in e.get("constraints", [])] for _, e in _variants(entry)]
    assert ["npu", "a", "b", "c", "d"] == kept[0] and ["npu", "a", "d"] in kept and ["npu", "a"] in kept
    assert ["npu"] in kept and ["cpu"] in kept
    assert len(kept) == len({tuple(k) for k in kept})  # no variant twice
    for version in ("2.2.0", "2.3.2"):
        rules = [c.rule if c.rule != "any_of" else "+".join(s["rule"] for s in c.params["constraints"])
                 for c in _table(version, "rk3576").ops["ai.onnx:Reshape"].constraints]
        assert rules == ["const_input", "producer_not+not_graph_output"], (version, rules)


#: Nodes of real TorchScript exports that the real rknn-toolkit2 builds ran on the CPU and that the
#: tables missed before the cut-down probes of session 6 (x.Transpose.ctx=mha_qkv4, x.Transpose.perm=
#: *.ctx=conv_/relu_/pool_*, x.Reshape.ctx=mha_value / affine_grid, x.Unsqueeze.axes=*.ctx=*,
#: x.Expand.ctx=gqa_*, x.Neg.ctx=rotary_*, x.Transpose.ctx=swin_qkv): (model, tables, nodes)
CUT_DOWN_CASES = [
    ("vit_tiny", ["2.5.0/rk3566"], [f"/layers/layers.{i}/self_attention/Transpose_1" for i in range(4)]),
    ("conformer_small", ["2.5.0/rk3566"], [f"/conformer_layers.{i}/self_attn/Transpose" for i in range(2)]),
    ("conformer_small", ["2.5.0/rk3566", "2.3.2/rk3566", "2.2.0/rk3566"], ["/Unsqueeze"]),
    ("crnn_ocr", ["2.5.0/rk3566", "2.3.2/rk3566", "2.2.0/rk3566"], ["/Transpose"]),
    ("kws_crnn", ["2.5.0/rk3566"], ["/gru/Transpose"]),
    ("kws_crnn", ["2.3.2/rk3566", "2.2.0/rk3566"], ["/Transpose"]),
    ("stn_mnist", ["2.5.0/rk3566", "2.3.2/rk3566", "2.2.0/rk3566"], ["/affine_grid/Reshape"]),
    ("wav2vec2_tiny", ["2.5.0/rk3566", "2.3.2/rk3566", "2.2.0/rk3566"], ["/layers.0/Reshape_2"]),
    ("llama_tiny", ["2.5.0/rv1106", "2.3.2/rv1106"], [f"/layers.{i}/self_attn/Expand" for i in range(2)]),
    ("llama_tiny", ["2.5.0/rv1106"], [f"/layers.{i}/self_attn/Neg" for i in range(2)]),
    ("swin_tiny_small", ["2.5.0/rv1106"], [f"/layers/layers.{a}/layers.{a}.{b}/attn/Transpose"
                                            for a in range(2) for b in range(2)]),
    # session 7 (x.Transpose.ctx=attn_merge, x.Transpose.ctx=conv_tokens): heads merged behind a CPU Einsum
    # or of a batch of windows, a conv front end turned into tokens
    ("diffusion_unet_tiny", ["2.2.0/rk3566"], [f"/{b}_attn/transformer_blocks.0/attn{i}/Transpose_3"
                                                for b in ("down", "mid", "up") for i in (1, 2)]),
    ("swin_tiny_small", ["2.2.0/rk3566"], [f"/layers/layers.{a}/layers.{a}.{b}/attn/Transpose_2"
                                            for a in range(2) for b in range(2)]),
    ("conformer_small", ["2.2.0/rk3566"], ["/Transpose"]),
]


@pytest.mark.parametrize("model, tables, nodes", CUT_DOWN_CASES, ids=[f"{m}-{n[0]}" for m, _, n in CUT_DOWN_CASES])
def test_placements_found_by_cutting_real_exports_down(corpus, export, model, tables, nodes):
    """Each of these nodes ran on the CPU in the real build for the given tables, and on the NPU of
    rk3588 2.5.0 (the control); the tables now say so, each with the reason of its constraint."""
    path = export(*corpus[model].build())
    targets = [f"rknn@{t}" for t in tables] + ["rknn@2.5.0/rk3588"]
    res = _check(path, targets)
    for target in targets:
        got = {n.name: n for n in res[target].nodes if n.name in nodes}
        assert set(got) == set(nodes), (target, sorted(got))
        want = "npu" if target == "rknn@2.5.0/rk3588" else "cpu"
        wrong = {name: (n.verdict, [r.message for r in n.reasons]) for name, n in got.items() if n.verdict != want}
        assert not wrong, (target, wrong)
        if want == "cpu":
            assert all(n.reasons and all(r.message for r in n.reasons) for n in got.values())


def test_mha_split_probes_follow_the_token_count_on_2_5_0_rk3566_only():
    """x.Transpose.ctx=mha_qkv4 (MultiheadAttention's packed split with rank-4 heads, scaled q and
    k^T, output projection): 2.5.0/rk3566 ran the split on the CPU for 15, 18 and 65 tokens and on
    the NPU for 16, 20, 24, 40 and 64; every other target on the NPU. The tables reproduce each."""
    from pytest_npucheck.toolchains.rknn.table import predict

    for version in ("2.2.0", "2.3.2", "2.5.0"):
        for soc in SOCS:
            table = _table(version, soc)
            cpu = set()
            for rec in _results(version, soc)["probes"]:
                if rec["id"].startswith("x.Transpose.ctx=mha_qkv4.") and rec["status"] == "ok":
                    pred = predict(table, _probe_model(rec["id"]).model)
                    assert pred["qkv_transpose"] == rec["placement"]["qkv_transpose"], (version, soc, rec["id"])
                    if pred["qkv_transpose"] == "cpu":
                        cpu.add(int(re.search(r"\.n=(\d+)\.", rec["id"]).group(1)))
            assert cpu == ({15, 18, 65} if (version, soc) == ("2.5.0", "rk3566") else set()), (version, soc, cpu)


_ASPP_CPU = {"readers=aspp.axes=-1_-2", "readers=conv_add.axes=-1_-2", "readers=concat.axes=-1_-2"}
_MERGE_CPU = {"pre=matmul.b=16.h=2.n=16.d=16", "pre=matmul.b=4.h=4.n=16.d=16", "pre=einsum.b=1.h=4.n=256.d=8",
              "pre=einsum.b=1.h=4.n=64.d=16"}


@pytest.mark.parametrize("family, focus, cpu_on", [
    # ASPP image pooling: the ReduceMean counts as CPU when other nodes read the pooled map
    ("x.ReduceMean.ctx=aspp.", "pool", {("2.5.0", "rk3566"): _ASPP_CPU,
                                        ("2.2.0", "rk3566"): _ASPP_CPU | {s.replace("-1_-2", "2_3") for s in _ASPP_CPU}}),
    # MultiheadAttention's Reshape in front of the packed split (dynamo form: bias added second)
    ("x.Reshape.ctx=mha_qkv4.", "qkv_view", {("2.5.0", "rk3566"): {"bias=zero_second.n=15", "bias=zero_second.n=18",
                                                                    "bias=zero_second.n=65"}}),
    # the Transpose merging attention heads: behind a CPU Einsum, or of a batch of windows
    ("x.Transpose.ctx=attn_merge.", "merge_t", {("2.2.0", "rk3566"): _MERGE_CPU}),
    # a conv front end turned into tokens (Conformer's subsampling)
    ("x.Transpose.ctx=conv_tokens.", "to_tokens", {("2.2.0", "rk3566"): {"c=16.t=15.f=9", "c=16.t=16.f=8",
                                                                          "c=8.t=15.f=9"}}),
])
def test_session7_probes_are_reproduced(family, focus, cpu_on):
    """The probe families of models_pool_transposes on all 12 targets: the compiler's placement of the focus
    node is the recorded one, and each table reproduces it (the two ``rand_second`` MultiheadAttention
    probes excepted: a trained, non-zero in_proj bias, which the table cannot see, keeps the CPU
    Reshape named after the Unsqueeze)."""
    from pytest_npucheck.toolchains.rknn.table import predict

    for version in ("2.2.0", "2.3.2", "2.5.0"):
        for soc in SOCS:
            table = _table(version, soc)
            recs = [r for r in _results(version, soc)["probes"] if r["id"].startswith(family)]
            assert len(recs) >= 3 and all(r["status"] == "ok" for r in recs), (version, soc)
            cpu = {re.sub(r"\.f32\.r\d$", "", r["id"][len(family):]) for r in recs if r["placement"][focus] == "cpu"}
            assert cpu == cpu_on.get((version, soc), set()), (version, soc, cpu)
            for rec in recs:
                if "rand_second" in rec["id"]:
                    continue
                pred = predict(table, _probe_model(rec["id"]).model)
                assert pred[focus] == rec["placement"][focus], (version, soc, rec["id"], pred[focus])


@pytest.mark.parametrize("model, op, nodes", [
    ("deeplabv3_small", "ReduceMean", 1),  # ASPP image pooling, read with the four ASPP branches
    ("vit_tiny", "Reshape", 4),            # MultiheadAttention's Reshape before the packed q/k/v split
    ("conformer_small", "Reshape", 2),
])
def test_dynamo_exports_fall_back_on_2_5_0_rk3566(corpus, export_cache, model, op, nodes):
    """The real 2.5.0/rk3566 build of these dynamo exports (opset 19, as the agreement runs export) ran
    these nodes on the CPU; the table says so, each with the reason of its context rule, and the
    TorchScript export's counterparts (GlobalAveragePool / bias added first) and rk3588 stay NPU."""
    from pytest_npucheck.export import ExportOptions, export_model

    built = corpus[model].build()
    path = export_model(*built, ExportOptions(exporter="dynamo", opset=19), export_cache).path
    res = _check(path, ["rknn@2.5.0/rk3566", "rknn@2.5.0/rk3588"])
    marker = "is also read by" if op == "ReduceMean" else "which the compiler runs on the CPU"
    cpu = [n for n in res["rknn@2.5.0/rk3566"].nodes
           if n.op_type == op and n.verdict == "cpu" and any(marker in r.message for r in n.reasons)]
    assert len(cpu) == nodes, [(n.name, n.verdict, [r.message for r in n.reasons])
                               for n in res["rknn@2.5.0/rk3566"].nodes if n.op_type == op]
    names = {n.name for n in cpu}
    assert {n.verdict for n in res["rknn@2.5.0/rk3588"].nodes if n.name in names} == {"npu"}
    ts = export_model(*built, ExportOptions(exporter="torchscript", opset=17), export_cache).path
    [r] = _check(ts, ["rknn@2.5.0/rk3566"]).values()
    assert not [n.name for n in r.nodes if n.op_type == op and any(marker in x.message for x in n.reasons)]


# the key padding mask's Reshape in front of a fused attention (models_sdpa_mask): where the compiler ran it on
# the CPU, by target (the other targets kept every probe's Reshape on the NPU)
_SDPA_MASK_CPU = {
    ("2.3.2", "rk3566"): {"base", "t=16", "h=8.t=32", "src=relu", "mask=plain"},
    ("2.5.0", "rk3566"): {"src=relu"},
    ("2.2.0", "rk3566"): {"base", "t=16", "h=8.t=32", "src=input", "src=relu", "scale=post", "mask=plain"},
    ("2.2.0", "rk3588"): {"src=input", "src=relu"},
}
#: probes whose placement a table does not reproduce, and why (the rule follows Conformer itself)
_SDPA_MASK_MISSED = {
    ("2.3.2", "rk3566"): {"scale=post"},  # the rule cannot see where the attention is scaled
    ("2.2.0", "rk3566"): {"src=input"},  # the rule follows Conformer's computed mask
    ("2.5.0", "rk3566"): {"src=relu"},  # one probe of ten: not adopted
    ("2.2.0", "rk3588"): {"src=input", "src=relu"},  # the Conformer form stayed on the NPU: not adopted
}


def test_sdpa_mask_reshape_probes_are_reproduced():
    """The sdpa_mask probe family on all 12 targets: every probe built, the focus Reshape ran where
    the recorded results say, and each table reproduces it, except the listed ones."""
    for version, soc, cpu, wrong in _focus_reshape_outcomes("x.Reshape.ctx=sdpa_mask.", ".f32.r2", 10):
        assert cpu == _SDPA_MASK_CPU.get((version, soc), set()), (version, soc, cpu)
        assert wrong == _SDPA_MASK_MISSED.get((version, soc), set()), (version, soc, wrong)


def _focus_reshape_outcomes(family: str, suffix: str, count: int):
    """Per target (all 12) of a probe family whose probes all built: (version, soc, the cases whose focus
    Reshape ran on the CPU, the cases the table predicts wrongly); a case is the id between family and suffix."""
    from pytest_npucheck.toolchains.rknn.table import predict

    for version in ("2.2.0", "2.3.2", "2.5.0"):
        for soc in SOCS:
            recs = [r for r in _results(version, soc)["probes"] if r["id"].startswith(family)]
            assert len(recs) == count and all(r["status"] == "ok" for r in recs), (version, soc)
            label = {r["id"]: r["id"][len(family):-len(suffix)] for r in recs}
            cpu = {label[r["id"]] for r in recs if r["placement"]["focus_reshape"] == "cpu"}
            table = _table(version, soc)
            wrong = {label[r["id"]] for r in recs
                     if predict(table, _probe_model(r["id"]).model)["focus_reshape"] != r["placement"]["focus_reshape"]}
            yield version, soc, cpu, wrong


@pytest.mark.parametrize("exporter, opset", [("torchscript", 17), ("dynamo", 19)])
def test_conformer_mask_reshape_falls_back_on_2_3_2_rk3566(corpus, export_cache, exporter, opset):
    """Conformer's key padding mask Reshape: rknn-toolkit2 2.3.2 ran it on the CPU on RK3566 (the
    agreement run's missed fallbacks, two TorchScript nodes and one dynamo node); the table says so, with
    the path that decides it, and RK3588 keeps it on the NPU."""
    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(*corpus["conformer_small"].build(), ExportOptions(exporter=exporter, opset=opset),
                        export_cache).path
    res = _check(path, ["rknn@2.3.2/rk3566", "rknn@2.3.2/rk3588"])
    masks = [n for n in res["rknn@2.3.2/rk3566"].nodes
             if n.op_type == "Reshape" and any("feeds Expand" in r.message and "Gemm" in r.message for r in n.reasons)]
    assert len(masks) == (2 if exporter == "torchscript" else 1), [
        (n.name, n.verdict, [r.message for r in n.reasons]) for n in res["rknn@2.3.2/rk3566"].nodes
        if n.op_type == "Reshape"]
    assert {n.verdict for n in masks} == {"cpu"}
    names = {n.name for n in masks}
    assert {n.verdict for n in res["rknn@2.3.2/rk3588"].nodes if n.name in names} == {"npu"}


#: the mask_head probes whose mask Reshape 2.2.0/rk3566 ran on the CPU: a Gemm anywhere in the graph
_MASK_HEAD_CPU = {"gemm_attn", "gemm_indep", "layers=2.gemm_attn"}


def test_mask_head_probes_are_reproduced():
    """The mask_head family (session 9) on all 12 targets: every probe built; 2.2.0/rk3566 ran the mask
    Reshape behind the int64 Equal on the CPU exactly when the graph held a Gemm; each table reproduces
    every probe. 2.5.0/rk3588's records were re-attributed from their layer rows (issue 22): the compiler
    swaps the Reshape in front of the Equal and runs it on the int64 mask ('Reshape INT64 CPU
    Reshape:mask_rs'), in every probe; the other targets' records keep the attribution they were made with."""
    every = {"gemm_attn", "gemm_indep", "layers=2.gemm_attn", "matmul_attn", "none"}
    for version, soc, cpu, wrong in _focus_reshape_outcomes("x.Reshape.ctx=mask_head.", ".b.r2", 5):
        want = {("2.2.0", "rk3566"): _MASK_HEAD_CPU, ("2.5.0", "rk3588"): every}.get((version, soc), set())
        assert cpu == want, (version, soc, cpu)
        assert not wrong, (version, soc, wrong)


def test_distilbert_mask_reshape_falls_back_on_2_2_0_rk3566(corpus, export_cache):
    """distilbert_tiny (TorchScript): the real 2.2.0 build on RK3566 ran layer 0's mask Reshape on the CPU (the
    last missed fallback of the agreement run; the three identical Reshapes are merged into that one). Cut
    down, it needs the classifier's Gemm. The table says CPU for it, naming the Gemm, and RK3588 says NPU."""
    from pytest_npucheck.export import ExportOptions, export_model

    path = export_model(*corpus["distilbert_tiny"].build(), ExportOptions(exporter="torchscript", opset=17), export_cache).path
    res = _check(path, ["rknn@2.2.0/rk3566", "rknn@2.2.0/rk3588"])
    node = {n.name: n for n in res["rknn@2.2.0/rk3566"].nodes}["/layer.0/attention/Reshape_3"]
    assert node.verdict == "cpu" and "the graph also has Gemm '/pre_classifier/Gemm'" in " ".join(
        r.message for r in node.reasons), node
    assert {n.name: n.verdict for n in res["rknn@2.2.0/rk3588"].nodes}["/layer.0/attention/Reshape_3"] == "npu"


@pytest.mark.parametrize("version, op, rejected, kept", [
    ("2.5.0", "GRU", "GRU.dir=forward.layout=0.f32.r3", "GRU.dir=forward.f32.r3"),
    ("2.5.0", "LayerNormalization", "LayerNormalization.axis=m1.bias=no.f32.r3", "LayerNormalization.axis=m1.f32.r3"),
    ("2.3.2", "LayerNormalization", "LayerNormalization.axis=m1.bias=no.f32.r3", "LayerNormalization.axis=m1.f32.r3"),
    ("2.2.0", "LayerNormalization", "LayerNormalization.axis=m1.bias=no.f32.r3", "LayerNormalization.axis=m1.f32.r3"),
])
def test_cpu_op_keeps_the_constraints_that_reject_the_model(version, op, rejected, kept):
    """RV1106 runs these ops on the CPU, and build() still fails on what fails it elsewhere (GRU's
    'layout' attribute, a LayerNormalization without its bias): the generated table keeps those
    constraints on the CPU entry, and both probes are predicted as the compiler placed them."""
    from pytest_npucheck.toolchains.rknn.table import predict

    table = _table(version, "rv1106")
    recs = {r["id"]: r for r in _results(version, "rv1106")["probes"]}
    assert recs[rejected]["status"] in ("build_failed", "crashed") and recs[kept]["verdict"] == "cpu"
    raw = json.loads((REPO / "op_support_tables/rknn" / version / "rv1106.json").read_text())["ops"]["ai.onnx:" + op]
    assert raw["status"] == "cpu" and {c["else"] for c in raw["constraints"]} == {"unsupported"}
    assert set(predict(table, _probe_model(rejected).model).values()) == {"unsupported"}
    assert set(predict(table, _probe_model(kept).model).values()) == {"cpu"}
