"""Build the QNN HTP operator-support tables from probe results (onnxruntime-qnn emulation).

Usage::

    python -m pytest_npucheck.toolchains.qnn.table \\
        --results probes/qnn/2.51.0/htp-v73.fp16.results.json \\
        [--int8 probes/qnn/2.51.0/htp-v73.int8.results.json] [--out op_support_tables/...]

writes ``op_support_tables/qnn/<sdk-version>/htp-v<arch>.json``.  The results come from
:mod:`pytest_npucheck.toolchains.qnn.probe` (one file per HTP architecture and precision).

How entries are made:

* ONNX Runtime assigns every node itself: what the QNN EP does not claim runs on the CPU
  execution provider, so ops without an entry get ``default_verdict: "cpu"``, and
  ``unsupported`` is used only where creating the session fails (the QNN graph does not
  finalize, or a node crashes the backend).
* An op whose probes all ended on one side gets that status without constraints (``npu`` /
  ``cpu``; the QNN EP's REASON text goes into the note of ``cpu`` entries).  An op whose probes
  disagree must have a hand-written rule set below (:func:`op_rules`); the builder refuses to
  guess.  Every entry lists the probes of its op plus those named by its rules.
* fp16 (``enable_htp_fp16_precision=1``) is the table's precision.  The int8 run (the probe
  QDQ-quantized in the worker with uint8 activations/weights) is compared probe by probe; where
  it differs, the entry's note says so ("int8 (QDQ): ...").  The rule language has no condition
  on the precision, so int8-only differences stay notes.
* After building, the table is checked against every probe with the plugin's own matcher;
  the probes the rules cannot express are listed in ``provenance.errata``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence


__all__ = ["build_table", "merge_results", "verify_table", "predict", "compare", "main",
           "op_rules", "EINSUM_FORMS"]

ROOT = Path(__file__).resolve().parents[3]

FLOATS = ["float32", "float16"]
#: ai.onnx Cast ``to`` codes used below
INT8, INT64 = 3, 7

# --------------------------------------------------------------------------------------------
# spec helpers
# --------------------------------------------------------------------------------------------


def C(rule: str, probes: Sequence[str] = (), else_: str = "cpu", note: str | None = None,
      **params: Any) -> dict[str, Any]:
    """A constraint; ``probes`` are probe-id regexes (expanded against the results)."""
    c: dict[str, Any] = {"rule": rule, "params": params, "else": else_, "_probes": list(probes)}
    if note:
        c["note"] = note
    return c


def sub(rule: str, **params: Any) -> dict[str, Any]:
    """A sub-constraint of ``any_of``."""
    return {"rule": rule, "params": params}


def E(status: str, *constraints: dict[str, Any], note: str | None = None,
      probes: Sequence[str] = (), opset: Sequence[int] | None = None,
      not_folded: tuple[Sequence[str], Sequence[str]] | None = None) -> dict[str, Any]:
    """An op entry; ``probes`` are extra probe-id regexes beyond the probes of the op itself;
    ``not_folded``: (dtypes, probe-id regexes) of inputs the compiler does not fold when constant."""
    e: dict[str, Any] = {"status": status, "constraints": list(constraints),
                         "_probes": list(probes)}
    if not_folded:
        e["not_folded"] = {"dtypes": list(not_folded[0]), "_probes": list(not_folded[1])}
    if note:
        e["note"] = note
    if opset:
        e["opset"] = list(opset)
    return e


def rank4(op: str, else_: str = "cpu", why: str = "") -> dict[str, Any]:
    """Rank <= 4 on every input (the rank-5 probe of the op ran elsewhere)."""
    return C("rank", [r"%s\..*\.r5$" % re.escape(op)], else_, tensor="input", index="*", max=4,
             note=why or "rank-5 inputs are rejected by the HTP backend's op validation "
                         "('Failed to add node.')")


#: Einsum forms (rules.einsum.FORMS) that ran on the NPU whatever their letters (probes Einsum.*,
#: q.Einsum.*, q.Einsum.ctx=form.*)
EINSUM_FORMS = ["matmul", "matmul_transpose_b", "matmul_transpose_all", "matmul_broadcast_transpose_b",
                "reduce_sum_mul_broadcast_a"]

FINALIZE = ("the QNN EP accepts the node but the HTP backend fails to finalize the graph "
            "(QNN_COMMON_ERROR_MEM_ALLOC), so creating the session fails")

# --------------------------------------------------------------------------------------------
# the op rules (QNN HTP through onnxruntime-qnn, fp16); ``arch`` selects v68/v73 differences
# --------------------------------------------------------------------------------------------


def _vkey(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:3])


def op_rules(arch: int, version: str = "2.51.0") -> dict[str, dict[str, Any]]:
    """Hand-written entries for the ops whose probes disagree (and a few notable others).

    ``arch`` is the HTP architecture, ``version`` the QNN SDK version the backend reports
    (rules that changed between the probed versions are selected with it).
    """
    # 2.51.0: a Conv's channels split into rank 5 around a unit plane dim fails to finalize
    conv_split = [] if _vkey(version) < (2, 51) else [
        C("not_conv_channel_split", [r"q\.Reshape\.ctx=conv_split\."], "unsupported",
          axes=[2, 3] if arch >= 73 else [2],
          note="a Conv's (N, C, H, W) result with H (v68; H or W on v73) of 1 split into (N, a, C / a, H, W): "
               "'Failed to finalize QNN graph ... QNN_COMMON_ERROR_MEM_ALLOC', the session is not created (timm "
               "SKNet's selective-kernel attention); a plane without such a unit dim, a rank-4 target or a "
               "pooling's result build (q.Reshape.ctx=conv_split.*)")]
    # 2.51.0: a Softmax off the last axis of a Mul by a rank-0 constant fails to finalize (both archs)
    scaled_softmax = [] if _vkey(version) < (2, 51) else [
        C("not_scaled_softmax_off_last_axis", [r"q\.Softmax\.ctx=scaled\."], "unsupported",
          note="a Softmax along an axis other than the last whose input is a Mul (read by nothing else) by a "
               "rank-0 constant: 'Failed to finalize QNN graph ... QNN_COMMON_ERROR_MEM_ALLOC', the session is not "
               "created (GroupViT's group assignment, Softmax over the queries); the last axis, a Div, a (1,) or "
               "per-channel scale or no scale build (q.Softmax.ctx=scaled.*)")]
    rules: dict[str, dict[str, Any]] = {
        "Softmax": E("npu", *scaled_softmax),
        # -- element-wise ops whose rank-5 form the backend rejects -------------------------
        "Tanh": E("npu", rank4("Tanh")),
        "Sqrt": E("npu", rank4("Sqrt")),
        "Log": E("npu", rank4("Log")),
        "Floor": E("npu", rank4("Floor")),
        "Ceil": E("npu", rank4("Ceil")),
        "Round": E("npu", rank4("Round")),
        "Sin": E("npu", rank4("Sin")),
        "Cos": E("npu", rank4("Cos")),
        "Atan": E("npu", rank4("Atan")),
        "Elu": E("npu", rank4("Elu")),
        "HardSigmoid": E("npu", rank4("HardSigmoid")),
        "Selu": E("npu", rank4("Selu", why="rank-5 input: 'Selu: failed to create ELU node.'")),
        "Softplus": E("npu", rank4("Softplus",
                                   why="'QNN EP does not support Softplus with input rank > 4.'")),
        "Sign": E("npu", rank4("Sign", "unsupported", why="rank 5: " + FINALIZE)),
        "Tan": E("npu", rank4("Tan", "unsupported", why="rank 5: " + FINALIZE)),
        "Neg": E("npu", rank4("Neg"),
                 C("dtype", [r"Neg\.i64", r"q\.ctx\.Neg\.i64"], tensor="input", index=0,
                   allowed=FLOATS,
                   note="an int64 Neg is rejected ('Failed to add node.')")),
        "Max": E("npu", rank4("Max")),
        "Min": E("npu", rank4("Min")),
        "BatchNormalization": E(
            "npu", rank4("BatchNormalization",
                         why="'QNN BatchNorm only supports input ranks of size <= 4.'"),
            probes=[r"pattern\.conv_bn", r"pattern\.gemm_bn1d"],
            note="after a Conv it is folded into the Conv by onnxruntime (fuse_conv_bn)."),
        "LogSoftmax": E("npu", rank4("LogSoftmax")),
        "ReduceL2": E("npu", rank4("ReduceL2", why="rank 5: 'CreateQnnNode failed'")),
        "GlobalMaxPool": E("npu", rank4("GlobalMaxPool",
                                        why="'QNN NPU does not support PoolMax3d!'")),
        "MaxPool": E(
            "npu", rank4("MaxPool", why="'QNN NPU does not support PoolMax3d!'"),
            C("attr_range", [r"MaxPool\.k=3\.d=2"], attr="dilations", min=1, max=1,
              note="'QNN Pool only supports dilations 1!'"),
            C("rank", [r"MaxPool\..*indices=yes"], tensor="output", index=1, max=0,
              note="'QNN Pool only supports 1 output!': a second (Indices) output moves it to "
                   "the CPU (expressed as 'output 1 must not exist')")),
        "LayerNormalization": E(
            "npu", rank4("LayerNormalization"),
            C("rank", [r"LayerNormalization\.axis=(0|1|2)\.f32\.r[234]$"], tensor="input",
              index=1, max=1,
              note="'QNN LayerNorm on HTP only supports normalization along the last axis.' "
                   "(expressed as: the scale input is 1-D)"),
            C("rank", [r"LayerNormalization\.axis=m1\.outputs=3"], tensor="output", index=1,
              max=0, note="'QNN LayerNorm only support 1 output.' (expressed as 'output 1 "
                          "must not exist')"),
            probes=[r"pattern\.layernorm_decomposed"],
            note="a decomposed LayerNorm (ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div/Mul/Add) "
                 "is fused into LayerNormalization by onnxruntime (LayerNormFusion) and runs on "
                 "the NPU; every op of the decomposition is also NPU on its own."),
        # -- attribute / input rules ----------------------------------------------------------
        "ArgMax": E("npu", C("attr_in", [r"ArgMax\..*select_last_index=1"],
                             attr="select_last_index", values=[0],
                             note="'QNN ArgMax/ArgMin only support select_last_index=0.'")),
        "ArgMin": E("npu", C("attr_in", [r"ArgMin\..*select_last_index=1"],
                             attr="select_last_index", values=[0],
                             note="'QNN ArgMax/ArgMin only support select_last_index=0.'")),
        "Clip": E("npu", C("const_input", [r"Clip\.min=dyn\.max=dyn"], index=[1, 2],
                           note="\"QNN doesn't support dynamic min/max.\""),
                  probes=[r"pattern\.conv_relu6"]),
        "ConvTranspose": E("npu", C("attr_range", [r"ConvTranspose\.k=3\.d=2"],
                                    attr="dilations", min=1, max=1,
                                    note="'QNN's TransposeConv2d operator only supports default "
                                         "dilation values of 1.'")),
        "CumSum": E("npu",
                    C("attr_in", [r"CumSum\..*exclusive=1"], attr="exclusive", values=[0],
                      note="'QNN only supports default value 0 for exclusive attribute'"),
                    C("attr_in", [r"CumSum\..*reverse=1"], attr="reverse", values=[0],
                      note="'QNN only supports default value 0 for reverse attribute'")),
        "Einsum": E("npu", C("einsum_form", [r"Einsum\.eq=(ij_to_ji|bij_to_bji|i_j_to_ij|"
                                             r"bchw_kc_to_bkhw|Eij_Ejk_to_Eik|bij_bij_to_bi)",
                                             r"q\.Einsum\.eq=bij_jk_to_bik\.",
                                             r"q\.Einsum\.ctx=form\.off\."],
                             forms=EINSUM_FORMS,
                             note="the QNN EP lowers an equation by its structure, whatever its "
                                  "letters (either case) or spaces: a batched MatMul, with the "
                                  "right operand transposed, rank 4 with axes 1 and 3 swapped in "
                                  "all three terms, a rank-3 right operand broadcast over the "
                                  "first axis (bhwc,hkc->bhwk) and the relative-position form "
                                  "bhwc,wkc->bhwk (q.Einsum.ctx=form.*: the same forms with "
                                  "other letters and ranks ran on the NPU). One-input equations "
                                  "('Einsum requires at least 2 inputs.'), three operands, an "
                                  "ellipsis, an implicit output, a permuted output, mixed ranks, "
                                  "Hadamard and outer products ('Einsum unsupported equation: "
                                  "...') run on the CPU."),
                    probes=[r"q\.Einsum\.ctx=form\."]),
        "ScatterND": E(
            "npu",
            C("rank", [r"q\.ctx\.r6\.add"], tensor="input", index=0, max=5,
              note="the data: at most 5 dimensions, as every HTP op (the generic rank rule, which exempts "
                   "ScatterND for its indices)"),
            C("rank", [r"q\.ctx\.r6\.add"], tensor="input", index=2, max=5,
              note="the updates: at most 5 dimensions, as every HTP op"),
            C("any_of", [r"q\.ScatterND\.ctx=index\.idx_r6\.input"],
              constraints=[sub("rank", tensor="input", index=1, max=5), sub("const_input", index=[1])],
              note="rank-6 indices run on the NPU when they are a constant (q.ScatterND.ctx=index.idx_r6.const, "
                   "the 64 ScatterNDs of a TorchScript hf_bailing_hybrid); run-time rank-6 indices stay on the "
                   "CPU ('Failed to add Cast node.': the int64 -> int32 Cast the QNN EP adds)"),
            probes=[r"q\.ScatterND\.ctx=index\."]),
        "NonZero": E("cpu", note="'NonZero output shape must be static. Set shape to [rank, "
                                 "num_elements].' onnxruntime does not fold a NonZero even when its "
                                 "input is a constant (an initializer, a ConstantOfShape of a constant "
                                 "shape: q.NonZero.ctx=datadep.*), so every node whose shape depends on "
                                 "its result cannot get a static shape ('Cannot get shape': the generic "
                                 "static_shape rule, through data_shapes) until a reduction makes it "
                                 "static again",
                     not_folded=(["float32", "float16", "int64", "int32", "int8", "uint8", "bool"],
                                 [r"q\.NonZero\.ctx=datadep\.(initializer|const_of_shape)\."])),
        "Gemm": E("npu", C("attr_in", [r"Gemm\.alpha=0\.5"], attr="alpha", values=[1.0],
                           note="'QNN FullyConnected Op only support alpha=1.0.'"),
                  probes=[r"pattern\.classifier_head", r"pattern\.gemm_bn1d"]),
        "GatherND": E("npu", C("attr_in", [r"GatherND\.batch_dims=1"], attr="batch_dims",
                               values=[0], note="batch_dims=1: 'Failed to create GatherND "
                                                "node.'")),
        "GridSample": E(
            "npu",
            C("attr_in", [r"GridSample\.mode=(bicubic|cubic)"], attr="mode",
              values=["bilinear", "nearest", "linear"],
              note="'GridSample does not support mode bicubic/cubic'"),
            C("rank", [r"GridSample\.mode=linear\.opset=20\.f32\.r5"], "unsupported",
              tensor="input", index=0, max=4,
              note="a 5-D (volumetric) GridSample makes session creation fail"),
            probes=[r"ctx\.GridSample"]),
        "Mod": E("npu", C("attr_in", [r"Mod\.fmod=1"], attr="fmod", values=[0],
                          note="'QNN Mod Op only support fmod == 0 for now.'")),
        "Pad": E(
            "npu",
            C("rank", [r"Pad\..*axes=2_3"], tensor="input", index=3, max=0,
              note="\"QNN Pad doesn't support axes.\" (the opset-18 axes input; expressed as "
                   "'input 3 must not exist')"),
            C("attr_in", [r"Pad\.mode=wrap"], attr="mode", values=["constant", "reflect", "edge"],
              note="'Pad mode only support constant.' for wrap"),
            C("any_of", [r"Pad\.mode=(reflect|edge)\.pads=hw\.f32\.r5"],
              constraints=[sub("attr_in", attr="mode", values=["constant"]),
                           sub("rank", tensor="input", index=0, max=4)],
              note="rank-5 reflect/edge pads are rejected ('Failed to add node.'); a rank-5 "
                   "constant pad runs on the NPU"),
            C("const_input", [r"Pad\.mode=constant\.pads=dyn"], index=1,
              note="\"Qnn doesn't support dynamic pad input\""),
            probes=[r"ctx\.Pad"]),
        "Pow": E("npu", C("dtype", [r"Pow\.exp=2i64"], tensor="input", index=1, allowed=FLOATS,
                          note="an int64 exponent is rejected ('Failed to add node.')")),
        "ReduceMean": E("npu", C("const_input", [r"ReduceMean\.axes=dyn"], index=1,
                                 note="'\"axes\" input for reduce operator must be an "
                                      "initializer'"),
                        probes=[r"ctx\.ReduceMean"]),
        "Reshape": E("npu", C("any_of", [r"Reshape\.case=zero\.allowzero=1"],
                              constraints=[sub("attr_in", attr="allowzero", values=[0]),
                                           sub("const_value_range", index=1, min=1,
                                               ignore=[-1])],
                              note="allowzero=1 with a 0 in the target shape: \"QNN Reshape "
                                   "does not support shapes with zero dimensions. The "
                                   "'allowzero' attribute is not supported by QNN.\" (the "
                                   "dynamo exporter writes allowzero=1 on every Reshape; "
                                   "without a 0 in the shape they run on the NPU)"),
                     *conv_split,
                     note="a non-constant target shape runs on the CPU ('Cannot get shape'; "
                          "generic static_shape rule), an output of rank 6 too (generic rank "
                          "rule)."),
        "Resize": E(
            "npu",
            C("attr_not_in", [r"Resize\..*antialias=1"], attr="antialias", values=[1],
              note="\"QNN EP: Resize doesn't support anti-aliasing.\""),
            C("any_of", [r"Resize\.mode=nearest\.ctm=(asymmetric\.nearest_mode=round_prefer_floor"
                         r"|tf_half_pixel_for_nn)\."],
              constraints=[sub("attr_in", attr="mode", values=["linear", "cubic"]),
                           sub("attr_not_in", attr="coordinate_transformation_mode",
                               values=["asymmetric", "tf_half_pixel_for_nn"]),
                           sub("attr_in", attr="nearest_mode", values=["floor"])],
              note="nearest resizing with asymmetric or tf_half_pixel_for_nn coordinates needs "
                   "nearest_mode=floor ('ResizeNearestNeighbor on the NPU does not support the "
                   "combination of nearest_mode == ceil or round_prefer_floor and "
                   "transformation_mode == asymmetric'); torch's nearest export "
                   "(asymmetric, floor) runs on the NPU"),
            probes=[r"ctx\.Resize", r"prepass\.shape_resize_sizes", r"pattern\.fpn_upsample"],
            note="every mode (nearest, linear, cubic) and coordinate mode probed ran on the NPU "
                 "for spatial scales; scales on the N/C axes made session creation fail "
                 "(errata); non-constant scales run on the CPU (generic static_shape rule)."),
        "Cast": E(
            "npu",
            C("attr_not_in", [r"Cast\.to=int8\.", r"q\.ctx\.Cast\.to=int8"], attr="to",
              values=[INT8],
              note="casts to int8 are rejected ('Failed to create Cast node.')"),
            C("dtype", [r"q\.ctx\.Cast\.to=int8"], tensor="input", index=0,
              allowed=["float32", "float16", "int32", "int64", "bool", "uint8"],
              note="an int8 input is rejected too ('Failed to create Cast node.')"),
            C("any_of", [r"Cast\.to=int64\.(f32|bool)\.", r"q\.Cast\.to=int64",
                         r"q\.ctx\.Cast\.to=int64", r"q\.Cast\.ctx=int64_readers\.",
                         r"q\.Pad\.ctx=dtype\.int64\."],
              constraints=[sub("attr_not_in", attr="to", values=[INT64]),
                           sub("dtype", tensor="input", index=0, allowed=["int32"]),
                           sub("not_graph_output")],
              note="a cast to int64 (from anything but int32) whose result is a graph output "
                   "runs on the CPU ('Failed to create Cast node.'); inside a graph it runs on "
                   "the NPU whether its reader runs on the NPU (q.ctx.Cast.to=int64.*: the QNN "
                   "EP carries int64 data as int32) or on the CPU (the int64 Pad of "
                   "q.Pad.ctx=dtype.int64)"),
            probes=[r"ctx\.Cast", r"q\.ctx\.Cast", r"q\.Cast"],
            note="a float->same-float Cast is removed by onnxruntime (ctx.Cast.to=float32)."),
        "MatMul": E("npu", C("dtype", [r"MatMul\.b=dyn\.i64"], tensor="input", index=0,
                             allowed=FLOATS,
                             note="an int64 MatMul is rejected ('Failed to add fused Matmul "
                                  "node.')"),
                    *[C("any_of", [r"q\.MatMul\.ctx=rank6\."], constraints=[
                        sub("rank", tensor=t, index=0, max=5), extra],
                        note="a rank-6 MatMul runs on the NPU only as onnxruntime's MatMulAddFusion makes it: "
                             "with a bias Add (constant or computed weight), a Gemm of the input flattened to "
                             "2-D (the Add names the Reshape back to rank 6, which runs on the CPU); without "
                             "the Add it is not added to the QNN graph ('Failed to add node.')")
                      for t in ("input", "output")
                      for extra in (sub("feeds_only", ops=["Add"], any_input=True),)],
                    C("any_of", [r"q\.MatMul\.ctx=rank\."], constraints=[
                        sub("rank", tensor="input", index=0, max=4), sub("rank", tensor="input", index=1, min=3),
                        sub("feeds_only", ops=["Add"], any_input=True)],
                      note="a rank-5 input times a matrix (rank 2) is not added without a bias Add ('Failed to add "
                           "fused Matmul node.': Swin3D's patch-merging reduction (1, 4, 14, 14, 384) x (384, 192)); "
                           "with the bias Add it is onnxruntime's 2-D Gemm, on the NPU; rank-4 inputs, and rank 5 "
                           "times rank 5, ran on the NPU"),
                    probes=[r"pattern\.matmul_add", r"pattern\.attention", r"pattern\.sdpa",
                            r"prepass\.const_transpose_weight", r"opset\.\d+\.matmul"],
                    note="MatMul followed by Add of a 1-D constant is fused into Gemm by "
                         "onnxruntime (MatMulAddFusion); both run on the NPU."),
        "Transpose": E("npu", probes=[r"ctx\.Transpose", r"q\.ctx\.Transpose",
                                      r"pattern\.channel_shuffle", r"q\.ctx\.r6\."],
                       note="Transpose pairs are merged or cancelled by onnxruntime. Rank-6 "
                            "permutations between Reshapes (Swin window partition/reverse, "
                            "pixel shuffle) run on the NPU; a rank-6 tensor that would cross "
                            "into the CPU partition (a rank-6 graph input/output, a rank-6 "
                            "element-wise op) keeps its Reshape/Transpose on the CPU (errata). "
                            "An int64 Transpose between graph input and output ran on the CPU, "
                            "inside a graph on the NPU (errata)."),
        "Expand": E("npu", note="a non-constant shape runs on the CPU ('Cannot get shape'; "
                                "generic static_shape rule)."),
        "Slice": E("npu", probes=[r"ctx\.Slice", r"pattern\.focus"],
                   note="non-constant starts/ends run on the CPU ('Cannot get shape'; generic "
                        "static_shape rule); YOLO Focus slices + Concat are fused into "
                        "SpaceToDepth by onnxruntime."),
        # -- ops that never reach the NPU / special cases -------------------------------------
        "Erf": E("cpu", probes=[r"ctx\.Erf", r"pattern\.conv_erf", r"pattern\.gelu_erf",
                                r"q\.pattern\.gelu_erf"],
                 note="'Operators of type `Erf` are not supported by QNN EP.' The QNN EP takes "
                      "erf-GELU as one Gelu unit: from QNN 2.51.0 in every probed form "
                      "(x/sqrt2 or x*(1/sqrt2), then *x*0.5 or *0.5*x); QNN 2.49.40 only when x "
                      "is multiplied before 0.5 (the TorchScript order, not the dynamo order), "
                      "QNN 2.47.0 only for the x/sqrt2 form in that order. The GELU patterns "
                      "follow the probes: the *_torchscript_order ones pin the Mul order with "
                      "at_input, so dynamo-order GELUs keep their Erf on the CPU."),
        "Dropout": E("cpu", probes=[r"prepass\.dropout_middle"],
                     note="'Operators of type `Dropout` are not supported by QNN EP.' Inside a "
                          "network onnxruntime removes it first (eliminate_identity); a "
                          "Dropout that produces a graph output stays and runs on the CPU "
                          "(eliminate_identity keeps it)."),
        "Identity": E("npu", probes=[r"prepass\.identity_middle", r"ctx\.Identity"],
                      note="removed by onnxruntime inside a network; a lone Identity between "
                           "graph input and output runs on the NPU."),
        "Shape": E("cpu", probes=[r"prepass\.shape_", r"ConstantOfShape\.shape=from_Shape"],
                   note="Shape of a static tensor is folded by onnxruntime (fold_shape_ops); "
                        "the QNN EP has no Shape builder."),
        "Range": E("cpu", probes=[r"Range\.inputs=const"],
                   note="'Range: all inputs (start, limit, delta) must be constant "
                        "initializers.' With constant inputs onnxruntime folds it."),
        "ConstantOfShape": E("cpu", probes=[r"ConstantOfShape\.shape=(const|from_Shape)"],
                             note="not supported by the QNN EP; folded by onnxruntime when the "
                                  "shape is constant."),
        "Reciprocal": E(
            "npu", probes=[r"q\.pattern\.rmsnorm"],
            note="the decomposed RMSNorm Pow(x,2) -> ReduceMean -> Add eps -> Sqrt -> Reciprocal "
                 "-> Mul(x, r) -> Mul(weight, .) with the weight as the FIRST input of the last "
                 "Mul (what the dynamo exporter writes for LLaMA/T5 RMSNorm) makes the HTP "
                 "backend fail to finalize the fp16 graph (QNN_COMMON_ERROR_MEM_ALLOC): pattern "
                 "rmsnorm_reciprocal_weight_first (unsupported). Weight second, Mul(r, x), Div "
                 "instead of Reciprocal (TorchScript export) or int8 are fine."),
        "IsInf": E("cpu", note="'QNN EP does not support IsInf on the HTP backend (graphFinalize "
                               "fails with error 1002 / QNN_COMMON_ERROR_MEM_ALLOC).'"),
        "AveragePool": E(
            "npu",
            C("any_of", [r"(q\.)?AveragePool\.k=1[135]\.s=1\.p=[5-7]\.f32"], "unsupported",
              constraints=[sub("attr_range", attr="pads", max=4),
                           sub("attr_in", attr="count_include_pad", values=[1]),
                           sub("attr_range", attr="strides", min=2)],
              note="stride-1 average pools padded by 5 or more (kernels 11, 13, 15) without "
                   "count_include_pad crash the HTP backend (SIGSEGV) while the graph is "
                   "prepared; pads <= 4, count_include_pad=1 or stride 2 (k=13, p=6) were "
                   "fine (absent strides/pads take their ONNX defaults 1 / 0)"),
            probes=[r"ctx\.AveragePool", r"q\.AveragePool"]),
    }
    if _vkey(version) >= (2, 51):
        # a rank-6 Gather result by its readers (q.Gather.ctx=rank6.*, probed on 2.51.0 only)
        rules["Gather"] = E("npu", *(rules["Gather"]["constraints"] if "Gather" in rules else ()), *[
            C("any_of", [r"q\.Gather\.ctx=rank6\.(data_r5|data_r2|unit_axis|pair_axis|qkv)"],
              constraints=[sub("rank", tensor="output", index=0, max=5), sub("feeds_only", ops=["Transpose"])],
              note="a rank-6 result runs on the NPU when only Transposes read it (ConvBERT's span convolution: a "
                   "2-D [[0]] index into a (1, 16, 9, 16, 1) tensor, then a rank-6 Transpose); read by a "
                   "Reshape, or by another op, it is not added ('Failed to add node.')"),
        ])
        # CumSum by rank (q.CumSum.ctx=rank.*, probed on 2.51.0 only)
        rules["CumSum"]["constraints"] = list(rules["CumSum"]["constraints"]) + [
            C("rank", [r"q\.CumSum\.ctx=rank\..*\.r5$"], tensor="input", index=0, max=4,
              note="rank-5 data runs on the CPU on every axis ('Failed to add node.': Kimi-Linear's chunk "
                   "cumsum over (1, 32, 1, 64, 128)); ranks 2-4 ran on the NPU, (1, 32, 64, 128) too"),
        ]
        # GatherND by index shape and data dtype (q.GatherND.ctx=index.*, probed on 2.51.0 only)
        rules["GatherND"]["constraints"] = list(rules["GatherND"]["constraints"]) + [
            C("dtype", [r"q\.GatherND\.ctx=index\.\w+\.idx=r\d\.d\d\.b\."], tensor="input", index=0,
              allowed=FLOATS + ["int32", "int64"],
              note="bool data runs on the CPU ('Failed to create GatherND node.') whatever the indices: the "
                   "padding-mask lookup mask[batch_idx, kv_idx] that the dynamo exporter writes for "
                   "transformers text models (bool mask, constant int64 indices (B, 1, 1, T, 2))"),
            C("rank", [r"q\.GatherND\.ctx=index\.mask\.idx=r5\.d2\.f32"], tensor="input", index=1, max=4,
              note="indices of rank 5 or more run on the CPU ('Failed to create GatherND node.'); rank 2-4 "
                   "indices of float data ran on the NPU"),
            C("any_of", [r"q\.GatherND\.ctx=index\.mask\.idx=r5\.d2\.i(64|32)"], "unsupported",
              constraints=[sub("rank", tensor="input", index=1, max=4),
                           sub("dtype", tensor="input", index=0, allowed=FLOATS + ["bool"])],
              note="integer (int32/int64) data with rank-5 indices: " + FINALIZE +
                   "; with rank 2-4 indices it ran on the NPU"),
        ]
        # rank-6 tensors whose leading dim is not 1 (Hiera's token unroll: q.Transpose.ctx=unroll.*)
        relu_split = [r"q\.Transpose\.ctx=unroll\.s16\.c8\.b2\.relu"]
        chain6 = [r"q\.Reshape\.ctx=rank6\.", r"q\.Reshape\.ctx=rank6_gemm\.", r"q\.Reshape\.ctx=merged\."]
        r6note = ("HTP has no rank-6 Reshape or Transpose: the QNN EP builds a Reshape -> Transpose -> Reshape "
                  "chain through rank-6 tensors in rank 5 when the Transpose keeps a dim of size 1 in place "
                  "(Hiera's first unroll block (1, 28, 2, 28, 2, C), MViTv2's (1, 1, 56, 56, 14, 14), Swin's "
                  "window partition; a leading dim above 1 with a unit dim elsewhere too), and when the chain ends in "
                  "a MatMul by a matrix with a bias Add, whose input onnxruntime's MatMulAddFusion flattens to "
                  "2-D (Twins-SVT's window qkv projection); any other rank-6 "
                  "Reshape or Transpose (Hiera's second block (4, 14, 2, 14, 2, C), a Transpose moving the "
                  "unit dim, an element-wise op or Unsqueeze between them, MViTv2's rel-pos Adds) is not "
                  "added to the QNN graph ('Failed to add node.')")
        rules["Transpose"]["constraints"] = list(rules["Transpose"]["constraints"]) + [
            C("any_of", relu_split + chain6,
              constraints=[sub("rank", tensor="input", index=0, max=5),
                           sub("dim", tensor="input", index=0, axis=0, max=1),
                           sub("rank6_unit_dim_chain")],
              note=r6note + "; a rank-6 Transpose with a leading dim of 1 outside such a chain ran on the NPU "
                            "in NesT (perm (3, 0, 4, 1, 2, 5) between a CPU Reshape and a CPU Split) but not "
                            "in the q.Reshape.ctx=rank6.* probes (errata): the leading-dim form is kept"),
            C("rank", [r"q\.Transpose\.ctx=high_rank\."], tensor="input", index=0, max=6,
              note="rank 7 or 8 runs on the CPU whatever its leading dims ('Failed to add node.': Swin3D's window "
                   "partition (1, 4, 2, 8, 7, 8, 7, 96) with every leading 1 kept in place; dropping one unit dim "
                   "cannot bring it to rank 5)")]
        rules["Reshape"]["constraints"] = list(rules["Reshape"]["constraints"]) + [
            C("rank6_unit_dim_chain", relu_split + chain6, note=r6note)] + [
            C("any_of", [r"q\.Transpose\.ctx=unroll\.s\d+\.c\d+\.b[23]\.f32"], "unsupported",
              constraints=[sub("rank", tensor="output", index=0, max=5),
                           sub("dim", tensor="output", index=0, axis=0, max=1),
                           sub("producer_not", index=0, chain=["Transpose"], skip=["Reshape"])],
              note="two unroll blocks back to back (a rank-6 Transpose -> Reshape to rank 6 with a leading "
                   "dim above 1, as the dynamo exporter writes it, or through a second Reshape, which "
                   "onnxruntime merges into it, as TorchScript writes it): " + FINALIZE +
                   " (every exported Hiera); with an element-wise op between the blocks the second block "
                   "runs on the CPU instead")]
        # a MatMul's bias Add read by a Reshape: MatMulAddFusion's output Reshape (named after the Add)
        # merges with it, so the Add goes where a rank-6 Reshape goes (NesT's qkv projection)
        bias_view = [r"q\.Add\.ctx=matmul_bias_reshape\."]
        rules["Add"] = dict(rules.get("Add") or E("npu"))
        gemm_bias = [r"q\.Reshape\.ctx=rank6_gemm\.", r"q\.ctx\.r6\.add", r"q\.MatMul\.ctx=rank6\."]
        rules["Add"]["constraints"] = list(rules["Add"].get("constraints", [])) + [
            C("any_of", gemm_bias, constraints=[sub("rank", tensor=t, index="*", max=5), sub("matmul_add_gemm")],
              note="HTP ops take and produce at most 5 dimensions (a rank-6 Add: 'Failed to add node.'), except a "
                   "MatMul's bias Add that only a Reshape reads: MatMulAddFusion makes the pair a 2-D Gemm and "
                   "its Reshape back merges into that Reshape, whose own rank decides (Twins-SVT's qkv "
                   "projection of rank-6 windows followed by a Reshape to 2-D ran on the NPU)")
            for t in ("input", "output")] + [
            C("any_of", bias_view, constraints=[
                sub("producer_not", index=i, chain=["MatMul"]),
                sub("consumers_pass", ops=["Reshape"], constraint=sub("rank6_unit_dim_chain"))],
              note="a MatMul's bias Add (the MatMul's result as input %d) read by a Reshape that runs on the "
                   "CPU for its rank-6 result: onnxruntime's MatMulAddFusion turns the pair into a 2-D Gemm "
                   "and a Reshape back named after the Add, which the Reshape after it merges into "
                   "(placed on the CPU without a validation failure of its own)" % i)
            for i in (0, 1)]
        rules["Pad"]["constraints"] = list(rules["Pad"]["constraints"]) + [
            C("dtype", [r"q\.Pad\.ctx=dtype\.int"], tensor="input", index=0, allowed=FLOATS,
              note="integer data (Longformer pads its int64 input ids to the attention window) is not added "
                   "to the QNN graph ('Failed to add node.'); float32 data ran on the NPU")]
        rules["Split"] = E("npu", note="a Split with a part of size 0 runs on the CPU (generic nonempty rule: "
                                       "'Failed to add node.', q.Split.ctx=empty.*)")
        rules["OneHot"] = E("npu", C("dtype", [r"q\.OneHot\.ctx=values\.int64"], tensor="input", index=2,
                                     allowed=FLOATS + ["int32"],
                                     note="int64 values (F.one_hot of a router's TopK indices, as TorchScript "
                                          "writes it) are not added to the QNN graph ('Failed to add node.'); "
                                          "float32 and int32 values ran on the NPU"),
                            probes=[r"q\.OneHot\.ctx=values\."])
        rules["Gather"]["note"] = ("Gathers with rank-6 data ran on the CPU ('Failed to add node.'), as the generic "
                                   "rank-5 limit says, also behind a rank-6 Reshape -> Transpose of a packed q/k/v "
                                   "projection, whose Reshape then went to the CPU too; a rank-6 result only when "
                                   "something other than a Transpose reads it (q.Gather.ctx=rank6.*, errata)")
    if _vkey(version) < (2, 51):
        # onnxruntime-qnn < 2.7: variadic Sum/Max/Min take exactly two inputs; bool Slice fails
        for op, msg in (("Sum", "'QNN EP supports Sum operator with QNN_OP_ELEMENT_WISE_ADD, "
                                "which takes exactly 2 inputs.'"),
                        ("Max", "'QNN EP only supports Max operator with exactly 2 inputs.'"),
                        ("Min", "'QNN EP only supports Min operator with exactly 2 inputs.'")):
            base = rules.get(op, E("npu"))
            base["constraints"] = list(base["constraints"]) + [
                C("input_count", [r"%s\.n=3\." % op], max=2, note=msg)]
            rules[op] = base
        rules["Slice"]["constraints"] = list(rules["Slice"]["constraints"]) + [
            C("dtype", [r"Slice\..*\.bool\.r4"], tensor="input", index=0,
              allowed=FLOATS + ["int32", "int64", "int8", "uint8"],
              note="a bool Slice is rejected ('Failed to add node.')")]
    if _vkey(version) < (2, 49):
        # onnxruntime-qnn < 2.4 has no Selu builder (GRU, LpPool, OneHot, ReduceLogSumExp and
        # Xor are missing too; their probes all ran on the CPU, so no rule is needed)
        rules["Selu"] = E("cpu", probes=[r"ctx\.Selu"],
                          note="'Operators of type `Selu` are not supported by QNN EP.'")
        rules["LogSoftmax"]["constraints"] = list(rules["LogSoftmax"]["constraints"]) + [
            C("any_of", [r"LogSoftmax\.axis=1\.f32\.r5"], "unsupported",
              constraints=[sub("rank", tensor="input", index=0, max=4),
                           sub("axis_in", attr="axis", values=[4])],
              note="a rank-5 LogSoftmax over an inner axis makes the graph fail to finalize")]
    return rules


def generic_rules(version: str = "0") -> list[dict[str, Any]]:
    """Constraints for every node (``version``: the QNN SDK version the table is for)."""
    # 2.51.0: a Gather's rank-6 result read by a Transpose runs on the NPU (its own entry judges it)
    gather6 = ["ai.onnx:Gather"] if _vkey(version) >= (2, 51) else []
    # 2.51.0: an Add is judged by its own entry, which knows MatMulAddFusion's bias Add (q.Reshape.ctx=rank6_gemm.*)
    add6 = ["ai.onnx:Add"] if _vkey(version) >= (2, 51) else []
    return [
        C("static_shape", [r"dynamic\.(batch|hw|unknown_dim|seq)\.(conv_relu|matmul_softmax)",
                           r"prepass\.shape_gather_reshape\.dynbatch",
                           r"(Reshape\.shape|Expand\.shape|Slice\.starts|Pad\.mode=constant\.pads)"
                           r"=dyn", r"Resize\..*dyn=yes"],
          tensors="all",
          note="the QNN EP needs static shapes on every input and output of a node ('Cannot "
               "get shape'; docs: 'no dynamic shapes'): nodes with symbolic dims, or whose "
               "output shape depends on run-time values, stay on the CPU"),
        dict(C("rank", [r"q\.ctx\.r6\.add"], tensor="input", index="*", max=5,
               note="HTP ops take at most 5 dimensions (a rank-6 Add: 'Failed to add node.'); "
                    "Reshape and Transpose are exempt: rank-6 Reshape -> Transpose -> Reshape "
                    "chains run on the NPU (q.ctx.r6.window_partition, ...)"),
             except_ops=["ai.onnx:Reshape", "ai.onnx:Transpose", "ai.onnx:ScatterND", "ai.onnx:MatMul"] + add6),
        dict(C("rank", [r"q\.ctx\.r6\.add"], tensor="output", index="*", max=5,
               note="HTP ops produce at most 5 dimensions; Reshape and Transpose are exempt"
                    + (", and so is a Gather (its entry says when)" if gather6 else "")),
             except_ops=["ai.onnx:Reshape", "ai.onnx:Transpose", "ai.onnx:MatMul"] + gather6 + add6),
        C("nonempty", [r"q\.(Slice|Split)\.ctx=empty\."], tensor="output", index="*",
          note="an op whose output is empty (a dim of size 0: the pass-through part of a partial "
               "rotary embedding whose rotary dims are the whole head) is not added to the QNN "
               "graph ('Failed to add node.') and runs on the CPU"),
        dict(C("nonempty", [r"q\.(Slice|CumSum)\.ctx=empty\."], "unsupported", tensor="input", index="*",
               note="an op that reads an empty activation (a Neg, a CumSum of it) makes the QNN graph "
                    "fail to compose ('QNN.graphAddNode() failed'): the session is not created; a "
                    "Concat that joins it to other parts runs on the NPU"),
             except_ops=["ai.onnx:Concat"]),
    ]


def patterns(verdicts: Mapping[str, str],
             placements: Mapping[str, Mapping[str, str]] | None = None) -> list[dict[str, Any]]:
    """Fusions that change a placement, chosen by the probes' verdicts (``{probe id: verdict}``).

    * the QNN EP's GELU node unit: taken when every GELU probe of that form (both Mul orders:
      ``*x`` then ``*0.5``, as TorchScript writes it, and ``*0.5`` then ``*x``, as the dynamo
      exporter writes it) ran on the NPU; the rule language cannot tell the two orders apart;
    * the same node unit for GELU with ``Mul(x, 0.5)`` beside the Erf branch and one Mul joining them
      (SEW-D): taken when both operand orders of that Mul ran on the NPU and the form without the
      0.5 kept its Erf on the CPU;
    * a MatMul -> Add -> Reshape -> Transpose -> Reshape chain that the QNN EP leaves on the CPU
      (QNN 2.49.40: the Swin window reverse after the attention projection).
    """
    def all_npu(rx: str) -> list[str]:
        ids = [i for i in verdicts if re.match(rx, i)]
        return ids if ids and all(verdicts[i] == "npu" for i in ids) else []

    # the node unit is formed only where the QNN EP gets the shapes: behind a Loop, a sequence or a
    # data-dependent dim (q.shape.ctx=opaque_source.*) each node is judged alone ('Cannot get shape';
    # the Erf is no HTP op)
    shaped = [{"rule": "static_shape", "params": {"tensors": "all"}}]
    opaque = r"q\.shape\.ctx=opaque_source\..*\.gelu\."

    def gelu(name: str, first: str, what: str, probes: list[str]) -> dict[str, Any]:
        return {
            "name": name, "fused_op": "Gelu", "status": "npu",
            "description": "GELU written as %s -> Erf -> Add 1 -> Mul -> Mul (x and 0.5 in "
                           "either order); the QNN EP groups it into one Gelu node unit on "
                           "the NPU (a lone Erf runs on the CPU), where the shape of its input is "
                           "static: behind a Loop, a sequence or a data-dependent dim its nodes "
                           "run on the CPU ('Cannot get shape')" % what,
            "nodes": [{"id": "scale", "op": first, "constraints": shaped},
                      {"id": "erf", "op": "Erf", "after": ["scale"]},
                      {"id": "add", "op": "Add", "after": ["erf"]},
                      {"id": "mul", "op": "Mul", "after": ["add"]},
                      {"id": "mul2", "op": "Mul", "after": ["mul"]}],
            "_probes": probes + [opaque]}
    def gelu_ts(name: str, first: str, what: str, probes: list[str]) -> dict[str, Any]:
        # only TorchScript's order fused: ... -> Mul(x, a) -> Mul(m, 0.5); the dynamo exporter's
        # ... -> Mul(0.5, a) -> Mul(x, h) has the previous Mul at input 1 of the last one
        pat = gelu(name, first, what, probes)
        pat["nodes"][-1]["at_input"] = {"mul": 0}
        pat["description"] = ("GELU written as %s -> Erf -> Add 1 -> Mul x -> Mul 0.5 (TorchScript's "
                              "order: the first Mul's output is input 0 of the last Mul); the QNN "
                              "EP groups it into one Gelu node unit on the NPU. The dynamo "
                              "exporter's order (Mul 0.5, then Mul x) is not grouped: its Erf "
                              "runs on the CPU" % what)
        return pat

    out = []
    ts_div, ts_mul = r"(pattern\.gelu_erf\.div|pattern\.ffn_gelu_erf)", r"pattern\.gelu_erf\.mul"
    # the x_half_first / no_half probes (Mul(x, 0.5) beside the Erf branch, one Mul joining them):
    # a second branch from x (`same_input_as`); see gelu_x_half below
    rx_div = r"(pattern\.gelu_erf\.div|pattern\.ffn_gelu_erf|q\.pattern\.gelu_erf\.div\.half_first)"
    rx_mul = r"(pattern\.gelu_erf\.mul|q\.pattern\.gelu_erf\.mul\.half_first)"
    dyn = {k: [i for i in verdicts if i.startswith("q.pattern.gelu_erf.%s.half_first" % k)]
           for k in ("div", "mul")}
    if all_npu(rx_div) and any(i.startswith("q.pattern.gelu_erf.div") for i in all_npu(rx_div)):
        out.append(gelu("gelu_erf_div", "Div", "x / sqrt(2)", [rx_div]))
    elif all_npu(ts_div) and dyn["div"] and all(verdicts[i] != "npu" for i in dyn["div"]):
        out.append(gelu_ts("gelu_erf_div_torchscript_order", "Div", "x / sqrt(2)", [rx_div]))
    if all_npu(rx_mul) and any(i.startswith("q.pattern.gelu_erf.mul") for i in all_npu(rx_mul)):
        out.append(gelu("gelu_erf_mul", "Mul", "x * (1/sqrt(2))", [rx_mul]))
    elif all_npu(ts_mul) and dyn["mul"] and all(verdicts[i] != "npu" for i in dyn["mul"]):
        out.append(gelu_ts("gelu_erf_mul_torchscript_order", "Mul", "x * (1/sqrt(2))", [rx_mul]))
    for tag, first, what in (("div", "Div", "x / sqrt(2)"), ("mul", "Mul", "x * (1/sqrt(2))")):
        # taken when every x_half_first probe of the form (both operand orders of the joining Mul)
        # ran on the NPU and the form without the half (x * (1 + erf)) kept its Erf on the CPU
        rx = r"q\.pattern\.gelu_erf\.%s\.(x_half_first|no_half)\." % tag
        halves = all_npu(r"q\.pattern\.gelu_erf\.%s\.x_half_first\." % tag)
        bare = [i for i in verdicts if re.match(r"q\.pattern\.gelu_erf\.%s\.no_half\." % tag, i)]
        if halves and bare and all(verdicts[i] != "npu" for i in bare):
            out.append({
                "name": "gelu_erf_%s_x_half" % tag, "fused_op": "Gelu", "status": "npu",
                "description": "GELU with the half taken of the input beside the Erf branch (SEW-D): "
                               "%s -> Erf -> Add 1 and Mul(x, 0.5), joined by one Mul (either operand "
                               "order); the QNN EP groups it into one Gelu node unit on the NPU. "
                               "Without the half, x * (1 + erf), the Erf runs on the CPU" % what,
                "nodes": [{"id": "scale", "op": first, "constraints": shaped},
                          {"id": "erf", "op": "Erf", "after": ["scale"]},
                          {"id": "add", "op": "Add", "after": ["erf"]},
                          {"id": "half", "op": "Mul", "same_input_as": "scale"},
                          {"id": "mul", "op": "Mul", "after": ["half", "add"]}],
                "_probes": [rx, opaque]})
    rms = "q.pattern.rmsnorm.%s.f32.r3"
    if (verdicts.get(rms % "recip.w_first") == "unsupported"
            and all(verdicts.get(rms % t) == "npu" for t in ("recip.w_second", "div.w_first"))):
        # the input positions are the probed ones: Mul(x, r) and Mul(weight, normed) fail,
        # Mul(r, x) or Mul(normed, weight) build (when probed: recip.r_first.w_first)
        r_first = verdicts.get(rms % "recip.r_first.w_first")
        norm = {"id": "norm", "op": "Mul", "after": ["rsqrt"]}
        if r_first == "npu":
            norm["at_input"] = {"rsqrt": 1}
        out.append({
            "name": "rmsnorm_reciprocal_weight_first", "fused_op": "RMSNorm (graph fails to finalize)",
            "status": "unsupported",
            "description": "RMSNorm as torch's dynamo exporter writes it (LLaMA, T5): Pow(x, 2) -> "
                           "ReduceMean -> Add eps -> Sqrt -> Reciprocal -> Mul(x, r) -> Mul(weight, .) "
                           "with the weight as the first input of the last Mul; the HTP backend fails "
                           "to finalize the fp16 graph (QNN_COMMON_ERROR_MEM_ALLOC), so the session "
                           "cannot be created. The weight second, Mul(r, x), or Div instead of "
                           "Reciprocal (the TorchScript export) build and run on the NPU",
            "nodes": [{"id": "pow", "op": "Pow"},
                      {"id": "mean", "op": "ReduceMean", "after": ["pow"]},
                      {"id": "eps", "op": "Add", "after": ["mean"]},
                      {"id": "sqrt", "op": "Sqrt", "after": ["eps"]},
                      {"id": "rsqrt", "op": "Reciprocal", "after": ["sqrt"]}, norm,
                      {"id": "scale", "op": "Mul", "after": ["norm"], "at_input": {"norm": 1}}],
            "_probes": [r"q\.pattern\.rmsnorm\."]})
    ts_chain = ["rs_in", "mm", "bias", "rs4", "rs6", "tp6", "rs_hw", "rs_back"]
    ts_ops = ["Reshape", "MatMul", "Add", "Reshape", "Reshape", "Transpose", "Reshape", "Reshape"]
    for tag, n_nodes, name, what in (
            ("", 8, "reshape_linear_reshape2_transpose_reshape2", "-> Reshape -> Reshape"),
            (".roll", 7, "reshape_linear_reshape2_transpose_reshape",
             "-> Reshape, rolled back by Slice/Concat (shifted windows; the roll runs on the NPU)")):
        pid = "q.ctx.r6.after_linear.torchscript%s.f32.r6" % tag
        placed = (placements or {}).get(pid) or {}
        if not placed or any(placed.get(n) != "cpu" for n in ts_chain[:n_nodes]):
            continue
        out.append({
            "name": name, "fused_op": "Gemm+Reshape", "status": "cpu",
            "description": "the Swin window reverse as TorchScript exports it: Reshape -> MatMul -> "
                           "Add -> Reshape -> Reshape (rank 6) -> Transpose %s; onnxruntime fuses "
                           "MatMul+Add into Gemm and merges the Reshapes around it, and the QNN EP "
                           "leaves all %d on the CPU" % (what, n_nodes),
            "nodes": [{"id": n, "op": op} if i == 0 else {"id": n, "op": op, "after": [ts_chain[i - 1]]}
                      for i, (n, op) in enumerate(zip(ts_chain[:n_nodes], ts_ops))],
            "_probes": [re.escape(pid)]})
    if verdicts.get("q.ctx.r6.after_linear.f32.r6") == "cpu":
        out.append({
            "name": "linear_reshape_transpose_reshape", "fused_op": "Gemm+Reshape", "status": "cpu",
            "description": "MatMul -> Add -> Reshape -> Transpose -> Reshape (e.g. the Swin window "
                           "reverse after the attention projection, rank 6): onnxruntime fuses "
                           "MatMul+Add into Gemm and merges its output Reshape; the QNN EP rejects "
                           "the chain ('Failed to add node.') and all five run on the CPU. Chains "
                           "through rank <= 5 were not probed and are predicted CPU as well.",
            "nodes": [{"id": "mm", "op": "MatMul"}, {"id": "bias", "op": "Add", "after": ["mm"]},
                      {"id": "rs", "op": "Reshape", "after": ["bias"]},
                      {"id": "tp", "op": "Transpose", "after": ["rs"]},
                      {"id": "rs2", "op": "Reshape", "after": ["tp"]}],
            "_probes": [r"q\.ctx\.r6\.after_linear"]})
    return out


PREPASS_PROBES = {
    "eliminate_identity": [r"prepass\.(identity|dropout)_middle", r"ctx\.Identity"],
    "eliminate_same_type_casts": [r"q\.Cast\.ctx=same_type\."],
    "eliminate_noop_expand_slice": [r"q\.(Expand|Slice)\.ctx=noop_layout\.", r"q\.NonZero\.ctx=duplicate_chain\.expand_noop\."],
    "merge_identical_nodes": [r"q\.(Shape|Relu)\.ctx=duplicate\.", r"q\.(NonZero|Relu)\.ctx=duplicate_chain\."],
    "eliminate_noop_arithmetic": [r"q\.(Add|Sub|Mul|Div)\.ctx=noop(_datadep)?\."],
    "eliminate_unused_nodes": [r"q\.(Pad|Sigmoid)\.ctx=dead\."],
    "fuse_reshape_target": [r"q\.Reshape\.ctx=fuse_target\."],
    "fold_constants": [r"prepass\.fold_constant", r"prepass\.constant_node",
                       r"prepass\.const_transpose_weight", r"Range\.inputs=const",
                       r"ConstantOfShape\.shape=const"],
    "fold_shape_ops": [r"prepass\.shape_(gather_reshape\.f32|cast_arith|resize_sizes)",
                       r"ConstantOfShape\.shape=from_Shape", r"Shape\.f32"],
    "fuse_conv_bn": [r"pattern\.conv_bn"],
    "fuse_patterns": [r"pattern\.gelu_erf\.div", r"pattern\.ffn_gelu_erf",
                      r"pattern\.layernorm_decomposed", r"pattern\.matmul_add"],
}

DOC_SOURCE = {
    "title": "ONNX Runtime QNN Execution Provider documentation (Supported ONNX operators)",
    "url": "https://onnxruntime.ai/docs/execution-providers/QNN-ExecutionProvider.html",
    "note": "Model requirements (static shapes) and the list of ops with QNN builders; facts "
            "only, used for comparison. Where the probes and the page disagree the probes win.",
}

# --------------------------------------------------------------------------------------------
# building
# --------------------------------------------------------------------------------------------


def _expand(patterns_: Iterable[str], ids: Sequence[str], what: str) -> list[str]:
    out: list[str] = []
    for pat in patterns_:
        rx = re.compile(pat)
        hit = [i for i in ids if rx.match(i)]
        if not hit:
            raise ValueError("%s: probe selector %r matches no probe" % (what, pat))
        out.extend(h for h in hit if h not in out)
    return out


def _clean(c: Mapping[str, Any], ids: Sequence[str], what: str) -> dict[str, Any]:
    c2 = {k: v for k, v in c.items() if not k.startswith("_")}
    c2["probes"] = _expand(c["_probes"], ids, what)
    return c2


def _reasons(rec: Mapping[str, Any]) -> list[str]:
    out: list[str] = []
    for node in rec.get("focus") or []:
        for r in (rec.get("reasons") or {}).get(node, []):
            r = r.split(".%s node" % rec["op"])[0].strip()
            if r not in out:
                out.append(r)
    return out


_QUANTIZER_ARTEFACT = re.compile(r"\.f16\.r\d$")


def int8_differences(fp16: Mapping[str, Any], int8: Mapping[str, Any]
                     ) -> dict[str, list[tuple[str, str, str, str]]]:
    """``{op: [(probe, fp16 verdict, int8 verdict, why)]}`` for probes whose verdict differs.

    Probes with float16 inputs (the quantizer writes an invalid model for them) and probes
    whose float model the quantizer could not run (``quantize_failed``) are left out.
    """
    by_id = {p["id"]: p for p in int8["probes"]}
    out: dict[str, list[tuple[str, str, str, str]]] = defaultdict(list)
    for p in fp16["probes"]:
        q = by_id.get(p["id"])
        if q is None or q["verdict"] == p["verdict"] or q["status"] == "quantize_failed" \
                or _QUANTIZER_ARTEFACT.search(p["id"]):
            continue
        if {p["verdict"], q["verdict"]} <= {"npu", "folded"}:
            continue
        why = "; ".join(_reasons(q)) or (q.get("message") or "").split("\n")[0][:160]
        out[p["op"] if p["kind"] in ("op", "context") else "*" + p["kind"]].append(
            (p["id"], p["verdict"], q["verdict"], why))
    return out


def merge_results(main: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """The main results with the extra probes' records appended (same toolchain/soc)."""
    out = dict(main)
    if extra:
        for k in ("version", "soc", "precision"):
            if extra.get(k) != main.get(k):
                raise ValueError("extra results are for %s=%s, not %s" % (k, extra.get(k),
                                                                          main.get(k)))
        out["probes"] = list(main["probes"]) + list(extra["probes"])
        out["extra_count"] = len(extra["probes"])
    return out


def build_table(results: Mapping[str, Any], int8: Mapping[str, Any] | None = None
                ) -> dict[str, Any]:
    """Make the support table from a probe-results document (fp16, extra probes merged with
    :func:`merge_results`) and optionally the int8 results of the same architecture."""
    version, soc = results["version"], results["soc"]
    arch = int(soc.rsplit("v", 1)[1])
    src = "probe:qnn-%s-%s" % (version, soc)
    src8 = src + "-int8"
    probes = results["probes"]
    ids = [p["id"] for p in probes]
    by_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for p in probes:
        if p["kind"] in ("op", "context"):
            by_op[p["op"]].append(p)
    rules = op_rules(arch, version)
    diffs8 = int8_differences(results, int8) if int8 else {}

    ops: dict[str, Any] = {}
    undecided: list[str] = []
    for op in sorted(set(by_op) | set(rules)):
        recs = by_op.get(op, [])
        verdicts = Counter(r["verdict"] for r in recs)
        plain = {"npu" if v == "folded" else v for v in verdicts}
        spec = rules.get(op)
        if spec is None:
            if plain == {"npu"}:
                spec = E("npu")
            elif plain == {"cpu"}:
                why = sorted({w for r in recs for w in _reasons(r)})
                spec = E("cpu", note="; ".join("'%s'" % w for w in why) if why else None)
            else:
                undecided.append("%s: %s" % (op, dict(verdicts)))
                continue
        entry: dict[str, Any] = {"status": spec["status"]}
        if spec.get("opset"):
            entry["opset"] = spec["opset"]
        cons = [_clean(c, ids, "%s/%s" % (op, c["rule"])) for c in spec["constraints"]]
        if cons:
            entry["constraints"] = cons
        if spec.get("not_folded"):
            nf = spec["not_folded"]
            entry["not_folded"] = {"dtypes": nf["dtypes"],
                                   "probes": _expand(nf["_probes"], ids, "%s/not_folded" % op)}
        entry["source"] = src
        plist = [r["id"] for r in recs]
        plist += [x for x in _expand(spec["_probes"], ids, op) if x not in plist]
        if not plist:
            raise ValueError("no probe supports the entry for %s" % op)
        entry["probes"] = plist
        notes = [spec["note"]] if spec.get("note") else []
        d8 = diffs8.get(op)
        if d8:
            shown = ["%s %s->%s%s" % (pid, a, b, " (%s)" % w if w else "") for pid, a, b, w in d8]
            notes.append("int8 (QDQ, %s): %s" % (src8, "; ".join(shown)))
        if notes:
            entry["note"] = " ".join(notes)
        ops["ai.onnx:%s" % op] = entry
    if undecided:
        raise ValueError("ops with disagreeing probes need a rule in op_rules():\n  "
                         + "\n  ".join(undecided))

    generic = []
    for c in generic_rules(version):
        c2 = _clean(c, ids, "generic/%s" % c["rule"])
        c2["source"] = src
        generic.append(c2)
    pats = []
    for pat in patterns({p["id"]: p["verdict"] for p in probes},
                        {p["id"]: p.get("placement") or {} for p in probes}):
        p2 = {k: v for k, v in pat.items() if not k.startswith("_")}
        p2["source"] = src
        p2["probes"] = _expand(pat["_probes"], ids, "pattern/%s" % pat["name"])
        if int8 and pat["fused_op"] == "Gelu":
            v8 = {q["id"]: q["verdict"] for q in int8["probes"]}
            off = [pid for pid in p2["probes"] if v8.get(pid, "npu") != "npu"]
            if off:
                p2["description"] += (". int8 (QDQ): not taken as one unit, the Erf runs on the "
                                      "CPU (%s)" % ", ".join(off))
        pats.append(p2)

    opset_ok = sorted({p["attributes"]["opset"] for p in probes
                       if p["kind"] == "opset" and p["status"] == "ok"})
    opset_bad = sorted({p["attributes"]["opset"] for p in probes
                        if p["kind"] == "opset" and p["status"] != "ok"})
    lo, hi = opset_ok[0], opset_ok[-1]
    assert opset_ok == list(range(lo, hi + 1)), "non-contiguous opset support"
    assert all(o < lo for o in opset_bad), "opset failures above the accepted range"

    prepass_ev = {k: _expand(v, ids, "prepass/" + k) for k, v in PREPASS_PROBES.items()}
    pkg = results.get("package_version")
    sources: dict[str, Any] = {
        src: {
            "title": "Probe models placed by onnxruntime-qnn %s (QNN HTP backend %s, htp_arch=%d, "
                     "fp16) in x86 emulation" % (pkg, results.get("backend_build"), arch),
            "note": "%d single-op / pattern / opset / dynamic-shape probes (%d of them "
                    "QNN-specific extra probes, ids q.*); raw results in "
                    "probes/qnn/%s/%s.fp16[.extra].results.json (python -m "
                    "pytest_npucheck.probe.qnn_probe [--extra]). Placement from "  # the committed tables name the module before its move
                    "InferenceSession.get_provider_graph_assignment_info(); reasons from the "
                    "verbose log. Provider options: %s. Prepass evidence: %s." % (
                        len(probes), results.get("extra_count", 0), version, soc,
                        json.dumps(results.get("provider_options")),
                        "; ".join("%s <- %s" % (k, ", ".join(v[:3]))
                                  for k, v in prepass_ev.items())),
        },
        "doc:ort-qnn-ep": DOC_SOURCE,
    }
    if int8:
        n8 = sum(len(v) for v in diffs8.values())
        sources[src8] = {
            "title": "The same probes QDQ-quantized (uint8 activations and weights, random "
                     "calibration) and placed with onnxruntime-qnn %s, htp_arch=%d" % (pkg, arch),
            "note": "raw results in probes/qnn/%s/%s.int8[.extra].results.json; %d probes "
                    "differ from "
                    "fp16 (listed in the notes of their op entries, 'int8 (QDQ)')."
                    % (version, soc, n8),
        }
    int8_other = {k: v for k, v in diffs8.items() if k.startswith("*")}
    description = (
        "Qualcomm QNN HTP v%d (QNN SDK %s as reported by the backend library, through "
        "onnxruntime-qnn %s / onnxruntime %s) operator placement for fp16 models "
        "(enable_htp_fp16_precision=1, soc_model %s), derived from %d probe models placed with "
        "the real QNN execution provider in x86 HTP emulation. ONNX Runtime assigns every node: "
        "what the QNN EP does not take runs on the CPU execution provider. Accepted ONNX "
        "opsets: %d..%d (opsets %s have no onnxruntime kernels)." % (
            arch, version, pkg, results.get("onnxruntime"),
            (results.get("provider_options") or {}).get("soc_model"), len(probes), lo, hi,
            ", ".join(map(str, opset_bad)) or "none"))
    if int8_other:
        description += " int8 (QDQ) differences outside single-op probes: %s." % "; ".join(
            "%s %s->%s" % (pid, a, b) for v in int8_other.values() for pid, a, b, _ in v)
    table = {
        "format": 1,
        "toolchain": "qnn",
        "version": version,
        "soc": soc,
        "description": description,
        "precision": {"default": "float16", "supported": ["float16", "int8"]},
        "provenance": {
            "method": "probed",
            "toolchain_package": "onnxruntime-qnn==%s" % pkg,
            "generated": _dt.date.today().isoformat(),
            "generator": "pytest_npucheck.probe.qnn_table",  # as the committed tables record it (module since moved)
            "errata": [],
            "sources": sources,
        },
        "opsets": {"ai.onnx": [lo, hi]},
        "prepasses": ["eliminate_identity", "eliminate_same_type_casts", "eliminate_noop_expand_slice",
                      "merge_identical_nodes",
                      "eliminate_noop_arithmetic",
                      "fold_constants", "fold_shape_ops", "fuse_reshape_target", "eliminate_unused_nodes", "fuse_conv_bn",
                      "fuse_patterns"],
        "default_verdict": "cpu",
        "generic_constraints": generic,
        "patterns": pats,
        "ops": dict(sorted(ops.items())),
    }
    return table


# --------------------------------------------------------------------------------------------
# verification against the probes (through the plugin's matcher)
# --------------------------------------------------------------------------------------------


def predict(table: Any, model: Any) -> dict[str, str]:
    """Per-node verdicts the table gives a model (the plugin's own matcher)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match

    res = match(facts_from_model(model), table)
    pred = {n.name: n.verdict for n in res.nodes if not n.graph}
    if res.model_issues:
        pred = {name: "unsupported" for name in pred}
    return pred


def _real(v: str) -> str:
    return "npu" if v in ("npu", "folded", "removed") else v


def compare(pred: Mapping[str, str], observed_status: str, observed: Mapping[str, str],
            focus: Sequence[str] | None = None) -> list[tuple[str, str, str]]:
    """Disagreements ``(node, predicted, observed)``; ``("*", ...)`` for model-level ones."""
    rejected = "unsupported" in pred.values()
    if observed_status != "ok":
        return [] if rejected else [("*", "ok", observed_status)]
    if rejected:
        bad = [n for n, v in pred.items() if v == "unsupported"]
        return [("*", "unsupported(%s)" % ",".join(bad[:3]), "ok")]
    out = []
    for n in (focus or list(observed)):
        p, o = pred.get(n), observed.get(n)
        if p is None or o is None:
            continue
        if _real(p) != _real(o):
            out.append((n, p, o))
    return out


def verify_table(table: Mapping[str, Any], results: Mapping[str, Any],
                 extra_models: Mapping[str, Any] | None = None
                 ) -> tuple[Counter[str], list[str]]:
    """Predict every probe with the table and compare with the real placement."""
    from pytest_npucheck.toolchains.qnn.probe import extra_probes, select_probes
    from pytest_npucheck.tables import table_from_data

    t = table_from_data(table)
    models = {p.id: p.model for p in select_probes()}
    models.update({p.id: p.model for p in extra_probes()})
    models.update(extra_models or {})
    stats: Counter[str] = Counter()
    lines: list[str] = []
    for rec in results["probes"]:
        model = models.get(rec["id"])
        if model is None:
            continue
        diff = compare(predict(t, model), rec["status"], rec["placement"], rec["focus"])
        if diff:
            stats["disagree"] += 1
            for node, want, got in diff:
                op = next((n["op_type"] for n in rec["nodes"] if n["name"] == node), "model")
                lines.append("probe %s: %s %s -> table says %s, onnxruntime-qnn %s" % (
                    rec["id"], op, node, want, got if got != "ok" else "created the session"))
        else:
            stats["agree"] += 1
    return stats, lines


def validate(table: Mapping[str, Any], schema_path: Path) -> None:
    """Validate against the JSON schema and the project's semantic checks (raises)."""
    from pytest_npucheck.tables import validate_table_data

    rel = (table["toolchain"], table["version"], table["soc"])
    problems = validate_table_data(table, Path("%s/%s/%s.json" % rel), schema_path, rel)
    if problems:
        raise ValueError("table fails the project's table checks:\n  " + "\n  ".join(problems))


def make_table(results: Mapping[str, Any], int8: Mapping[str, Any] | None = None,
               schema_path: Path | None = None, *, verify: bool = True, log: Any = None
               ) -> dict[str, Any]:
    """The validated table of fp16 probe results (extra probes merged with
    :func:`merge_results`) and optionally the int8 results: :func:`build_table`, the probe
    self-check as ``provenance.errata`` (unless ``verify`` is false) and :func:`validate`.
    Progress lines go to ``log`` (default: stderr)."""
    def say(text: str) -> None:
        print(text, file=log or sys.stderr)

    table = build_table(results, int8)
    if verify:
        stats, lines = verify_table(table, results)
        table["provenance"]["errata"] = [
            "self-check: the table reproduces the placement of %d of %d probes; the "
            "disagreements below are behaviours the rules cannot express (see the op notes)"
            % (stats["agree"], stats["agree"] + stats["disagree"])] + lines
        say("self-check: %s" % dict(stats))
        for ln in lines:
            say("  " + ln)
    validate(table, Path(schema_path) if schema_path else ROOT / "op_support_tables/schema.json")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description="Build a QNN HTP support table from probe results.")
    ap.add_argument("--results", default=str(ROOT / "probes/qnn/2.51.0/htp-v73.fp16.results.json"))
    ap.add_argument("--int8", default=None, help="int8 results of the same arch (default: the "
                    "sibling *.int8.results.json if present)")
    ap.add_argument("--out", default=None, help="default op_support_tables/qnn/<version>/<soc>.json")
    ap.add_argument("--schema", default=str(ROOT / "op_support_tables/schema.json"))
    ap.add_argument("--no-verify", action="store_true", help="skip the probe self-check")
    ap.add_argument("--no-extra", action="store_true",
                    help="ignore the sibling *.extra.results.json files")
    args = ap.parse_args(argv)
    with open(args.results, encoding="utf-8") as fh:
        results = json.load(fh)
    int8_path = Path(args.int8) if args.int8 else Path(
        args.results.replace(".fp16.results.json", ".int8.results.json"))
    int8 = None
    if int8_path.is_file() and int8_path != Path(args.results):
        with open(int8_path, encoding="utf-8") as fh:
            int8 = json.load(fh)
    def sibling(path: Path, suffix: str) -> dict[str, Any] | None:
        p = Path(str(path).replace(".results.json", suffix))
        if p.is_file() and p != path:
            with open(p, encoding="utf-8") as fh:
                return json.load(fh)
        return None

    if not args.no_extra:
        results = merge_results(results, sibling(Path(args.results), ".extra.results.json"))
        if int8 is not None:
            int8 = merge_results(int8, sibling(int8_path, ".extra.results.json"))
    table = make_table(results, int8, Path(args.schema), verify=not args.no_verify)
    out = Path(args.out) if args.out else (ROOT / "op_support_tables" / "qnn" /
                                           table["version"] / ("%s.json" % table["soc"]))
    out.parent.mkdir(parents=True, exist_ok=True)
    from pytest_npucheck.tables import with_release_fields

    table = with_release_fields(table, out)  # the replaced file's revision and errata
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(table, fh, indent=1)
        fh.write("\n")
    print("wrote %s (%d op entries, %d patterns)" % (out, len(table["ops"]),
                                                     len(table["patterns"])), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
