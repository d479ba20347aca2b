"""Run every probe model through ONNX Runtime's QNN EP (HTP emulation); record the placement.

Usage::

    python -m pytest_npucheck.toolchains.qnn.probe --htp-arch 73 --precision fp16 \\
        --python /work/venvs/qnn/bin/python

writes ``probes/qnn/<sdk-version>/htp-v<arch>.<precision>.results.json``; ``<sdk-version>`` is
the QNN SDK version the HTP backend library reports (``Backend build version: v2.51.0.<stamp>``
-> ``2.51.0``) unless ``--version`` is given.  See ``probes/qnn/README.md``.

The probe models are those of :func:`pytest_npucheck.probe.models.build_probes` (single ops at
opset 17 unless the op needs a later one, patterns, an opset sweep 3..23, dynamic shapes).
Probes that only exist to measure RKNN load/config options (``Probe.config`` / ``Probe.load``)
are skipped: those options do not exist for ONNX Runtime.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any, Sequence

from pytest_npucheck.toolchains.qnn import adapter as oracle
from pytest_npucheck.probe.models import GraphBuilder, Probe, build_probes, save_probes

__all__ = ["run_probes", "summarise_placement", "probe_record", "select_probes",
           "extra_probes", "main"]

ROOT = Path(__file__).resolve().parents[3]


def summarise_placement(placement: dict[str, str], focus: Sequence[str], status: str = "ok"
                        ) -> str:
    """One verdict for the nodes under test.

    ``unsupported`` when the session could not be created, ``folded`` when onnxruntime removed
    every focus node before partitioning, else ``npu`` / ``cpu`` / ``mixed`` (``folded`` and
    ``removed`` nodes run nowhere and count with the NPU side).
    """
    if status != "ok":
        return "unsupported"
    vals = [placement.get(n, "removed") for n in focus] or list(placement.values())
    if vals and all(v == "folded" for v in vals):
        return "folded"
    norm = {"cpu" if v == "cpu" else "npu" if v in ("npu", "folded", "removed") else v
            for v in vals}
    if norm == {"cpu"}:
        return "cpu"
    if "cpu" in norm:
        return "mixed"
    if norm - {"npu"}:
        return "/".join(sorted(norm))
    return "npu"


def probe_record(p: Probe, res: oracle.QnnResult) -> dict[str, Any]:
    """JSON record of one probe and its QNN EP placement."""
    rec: dict[str, Any] = {
        "id": p.id,
        "op": p.op,
        "kind": p.kind,
        "opset": p.opset,
        "attributes": p.attributes,
        "dtype": p.dtype,
        "shapes": p.shapes,
        "nodes": p.node_list(),
        "focus": p.focus,
        "status": res.status,
        "verdict": summarise_placement(res.placement, p.focus, res.status),
        "placement": res.placement,
        "message": res.message,
    }
    if res.via:
        rec["via"] = res.via
    if res.reasons:
        rec["reasons"] = res.reasons
    if res.helpers:
        rec["helpers"] = res.helpers
    for k in ("run_status", "run_exception", "quantizer", "l1_error"):
        if k in res.extra:
            rec[k] = res.extra[k]
    rec["seconds"] = res.seconds
    if p.note:
        rec["note"] = p.note
    return rec


def select_probes(select: Sequence[str] | None = None) -> list[Probe]:
    """The probes that apply to ONNX Runtime (no RKNN load/config option probes)."""
    return [p for p in build_probes(select) if not p.config and not p.load]


# --------------------------------------------------------------------------------------------
# QNN-specific extra probes (ids start with "q.")
# --------------------------------------------------------------------------------------------


def _probe(pid: str, op: str, gb: GraphBuilder, kind: str = "op", focus: Sequence[str] = (),
           note: str = "", **attributes: Any) -> Probe:
    model = gb.build()
    return Probe(id=pid, op=op, model=model, kind=kind, attributes=dict(attributes),
                 dtype="float32", shapes=dict(gb.shapes), opset=gb.opset,
                 focus=list(focus) or [n.name for n in gb.nodes if n.op_type == op],
                 note=note)


def extra_probes(select: Sequence[str] | None = None) -> list[Probe]:
    """Probes for the questions the first probe set and the real-model check left open.

    * Einsum: which equations the QNN EP maps (plain and with spaces, as torch writes them);
    * Cast / Neg / Transpose on int64 and casts to int64 / int8 *inside* a graph (the single-op
      probes have them at the graph boundary);
    * rank-6 Reshape -> Transpose -> Reshape (window partition, pixel shuffle) inside a graph;
    * AveragePool / MaxPool with large kernels and pads (one probe crashed the backend);
    * the decomposed RMSNorm whose last Mul takes the weight first (fails to finalize).
    """
    import numpy as np
    from onnx import TensorProto

    from pytest_npucheck.probe.builder import GraphBuilder as GB

    out: list[Probe] = []
    rng = np.random.default_rng(1)

    def w(shape: Sequence[int], scale: float = 0.1) -> Any:
        return (rng.standard_normal(list(shape)) * scale).astype(np.float32)

    # -- Einsum equations ------------------------------------------------------------------
    eqs = [("bid,bjd->bij", [[4, 32, 8], [4, 32, 8]]),
           ("bij,bjd->bid", [[4, 32, 32], [4, 32, 8]]),
           ("bhqd,bhkd->bhqk", [[1, 4, 16, 8], [1, 4, 16, 8]]),
           ("bhqk,bhkd->bhqd", [[1, 4, 16, 16], [1, 4, 16, 8]]),
           ("ij,jk->ik", [[16, 32], [32, 8]]),
           ("bij,jk->bik", [[2, 16, 32], [32, 8]]),
           ("bhwc,hkc->bhwk", [[1, 8, 8, 16], [8, 8, 16]]),
           ("bhwc,wkc->bhwk", [[1, 8, 8, 16], [8, 8, 16]]),
           ("b i d, b j d -> b i j", [[4, 32, 8], [4, 32, 8]]),
           ("b i j, b j d -> b i d", [[4, 32, 32], [4, 32, 8]]),
           ("b h i d, b h j d -> b h i j", [[1, 4, 16, 8], [1, 4, 16, 8]]),
           ("b h i j, b h j d -> b h i d", [[1, 4, 16, 16], [1, 4, 16, 8]]),
           ("bij, bjk -> bik", [[2, 16, 32], [2, 32, 8]])]
    for eq, shapes in eqs:
        gb = GB()
        ins = [gb.input("in%d" % i, "float32", s) for i, s in enumerate(shapes)]
        gb.output(gb.node("Einsum", ins, equation=eq))
        tag = "_".join(eq.replace("->", " to ").replace(",", " ").split())
        out.append(_probe("q.Einsum.eq=%s%s.f32.r%d" % (tag, ".spaced" if " " in eq else "",
                                                        len(shapes[0])), "Einsum", gb,
                          equation=eq))

    # -- integer data and int casts inside a graph ---------------------------------------------
    def mid(pid: str, op: str, body: Any, note: str) -> None:
        gb = GB()
        x = gb.input("x", "float32", [1, 8, 16, 16])
        y = gb.node("Relu", [x], name="pre")
        z = body(gb, y)
        gb.output(gb.node("Relu", [z], name="post"))
        out.append(_probe(pid, op, gb, kind="context", note=note,
                          focus=[n.name for n in gb.nodes if n.name not in ("pre", "post")]))

    i64, f32, i8 = TensorProto.INT64, TensorProto.FLOAT, TensorProto.INT8
    mid("q.ctx.Cast.to=int64.f32.r4", "Cast",
        lambda gb, y: gb.node("Cast", [gb.node("Cast", [gb.node("Floor", [y])], to=i64,
                                               name="cast_i64")], to=f32, name="cast_back"),
        "float -> int64 -> float inside a graph")
    mid("q.ctx.Cast.to=int64.bool.r4", "Cast",
        lambda gb, y: gb.node("Cast", [gb.node("Cast", [gb.node(
            "Greater", [y, gb.const(np.float32(0.5))])], to=i64, name="cast_i64")], to=f32,
            name="cast_back"), "bool -> int64 -> float inside a graph")
    mid("q.ctx.Cast.to=int8.f32.r4", "Cast",
        lambda gb, y: gb.node("Cast", [gb.node("Cast", [gb.node("Floor", [y])], to=i8,
                                               name="cast_i8")], to=f32, name="cast_back"),
        "float -> int8 -> float inside a graph")
    mid("q.ctx.Neg.i64.r4", "Neg",
        lambda gb, y: gb.node("Cast", [gb.node("Neg", [gb.node("Cast", [y], to=i64)],
                                               name="neg_i64")], to=f32),
        "int64 Neg inside a graph")
    mid("q.ctx.Transpose.perm=0_1_3_2.i64.r4", "Transpose",
        lambda gb, y: gb.node("Cast", [gb.node("Transpose", [gb.node("Cast", [y], to=i64)],
                                               perm=[0, 1, 3, 2], name="tp_i64")], to=f32),
        "int64 Transpose inside a graph")
    gb = GB()
    x = gb.input("x", "float32", [1, 8, 16, 16])
    gb.output(gb.node("Cast", [gb.node("Floor", [x], name="floor")], to=i64, name="cast_i64"))
    out.append(_probe("q.Cast.to=int64.after_floor.f32.r4", "Cast", gb,
                      note="float -> int64 as the graph output", focus=["cast_i64"]))

    # -- rank-6 Reshape -> Transpose -> Reshape inside a graph ---------------------------------
    def r6(pid: str, shape6: list[int], perm: list[int], back: list[int], note: str,
           elementwise: bool = False) -> None:
        gb = GB()
        x = gb.input("x", "float32", [1, 16, 16, 32])
        y = gb.node("Relu", [x], name="pre")
        y = gb.node("Reshape", [y, gb.ints(shape6)], name="rs6")
        if elementwise:
            y = gb.node("Add", [y, gb.const(np.float32(1.0))], name="add6")
        else:
            y = gb.node("Transpose", [y], perm=perm, name="tp6")
        y = gb.node("Reshape", [y, gb.ints(back)], name="rs_back")
        gb.output(gb.node("Relu", [y], name="post"))
        out.append(_probe(pid, "Transpose" if not elementwise else "Add", gb, kind="pattern",
                          note=note, focus=[n.name for n in gb.nodes
                                            if n.name not in ("pre", "post")]))

    r6("q.ctx.r6.window_partition.f32.r6", [1, 4, 4, 4, 4, 32], [0, 1, 3, 2, 4, 5],
       [16, 16, 32], "Swin window partition (ws=4)")
    r6("q.ctx.r6.window_reverse.f32.r6", [1, 4, 4, 4, 4, 32], [0, 1, 3, 2, 4, 5],
       [1, 16, 16, 32], "Swin window reverse")
    r6("q.ctx.r6.scramble.f32.r6", [1, 4, 4, 4, 4, 32], [0, 2, 4, 1, 3, 5], [1, 16, 16, 32],
       "rank-6 permutation that moves every axis")
    r6("q.ctx.r6.last_two.f32.r6", [1, 4, 4, 4, 4, 32], [0, 1, 2, 3, 5, 4], [1, 16, 16, 32],
       "rank-6 swap of the last two axes")
    r6("q.ctx.r6.add.f32.r6", [1, 4, 4, 4, 4, 32], [], [1, 16, 16, 32],
       "element-wise Add on a rank-6 tensor", elementwise=True)
    gb = GB()
    x = gb.input("x", "float32", [1, 16, 16, 32])
    y = gb.node("Reshape", [gb.node("Relu", [x], name="pre"), gb.ints([1, 4, 4, 4, 4, 32])],
                name="rs6")
    gb.output(gb.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5], name="tp6"))
    out.append(_probe("q.r6.output.f32.r6", "Transpose", gb, kind="pattern",
                      note="rank-6 graph output", focus=["rs6", "tp6"]))

    gb = GB()
    x = gb.input("x", "float32", [1, 256, 32])
    y = gb.node("Add", [gb.node("MatMul", [x, gb.const(w([32, 32]))], name="mm"),
                        gb.const(w([32]))], name="bias")
    y = gb.node("Reshape", [y, gb.ints([1, 4, 4, 4, 4, 32])], name="rs6")
    y = gb.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5], name="tp6")
    y = gb.node("Reshape", [y, gb.ints([1, 256, 32])], name="rs_back")
    gb.output(gb.node("Relu", [y], name="post"))
    out.append(_probe("q.ctx.r6.after_linear.f32.r6", "Transpose", gb, kind="pattern",
                      note="Swin window reverse right after the attention projection "
                           "(MatMul + Add -> rank-6 Reshape -> Transpose -> Reshape)",
                      focus=["mm", "bias", "rs6", "tp6", "rs_back"]))

    # the same, as TorchScript exports Swin: Transpose -> Reshape (rank 3) -> MatMul -> Add bias
    # -> Reshape (rank 4) -> Reshape (rank 6) -> Transpose -> Reshape (rank 4) -> Reshape (rank 3)
    # (".roll": a shifted-window block, the rank-4 result is rolled back by Slice/Concat first)
    for roll in (False, True):
        gb = GB()
        a = gb.input("attn", "float32", [16, 2, 16, 16])
        res = gb.input("res", "float32", [1, 256, 32])
        y = gb.node("Transpose", [a], perm=[0, 2, 1, 3], name="heads")
        y = gb.node("Reshape", [y, gb.ints([16, 16, 32])], name="rs_in")
        y = gb.node("MatMul", [y, gb.weight([32, 32])], name="mm")
        y = gb.node("Add", [gb.weight([32]), y], name="bias")
        y = gb.node("Reshape", [y, gb.ints([16, 4, 4, 32])], name="rs4")
        y = gb.node("Reshape", [y, gb.ints([1, 4, 4, 4, 4, 32])], name="rs6")
        y = gb.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5], name="tp6")
        y = gb.node("Reshape", [y, gb.ints([1, 16, 16, 32])], name="rs_hw")
        if roll:
            for axis in (1, 2):
                lo = gb.node("Slice", [y, gb.ints([14]), gb.ints([16]), gb.ints([axis])],
                             name="roll%d_a" % axis)
                hi = gb.node("Slice", [y, gb.ints([0]), gb.ints([14]), gb.ints([axis])],
                             name="roll%d_b" % axis)
                y = gb.node("Concat", [lo, hi], axis=axis, name="roll%d" % axis)
        y = gb.node("Reshape", [y, gb.ints([1, 256, 32])], name="rs_back")
        gb.output(gb.node("Add", [res, y], name="residual"))
        out.append(_probe("q.ctx.r6.after_linear.torchscript%s.f32.r6" % (".roll" if roll else ""),
                          "Transpose", gb, kind="pattern",
                          note="Swin window reverse after the attention projection as TorchScript "
                               "exports it (Reshape -> MatMul -> Add -> Reshape -> rank-6 Reshape "
                               "-> Transpose -> Reshape%s -> Reshape)" % (
                                   " -> roll by Slice/Concat on H and W" if roll else ""),
                          focus=[n.name for n in gb.nodes]))

    # -- GELU in the dynamo exporter's order: ... -> Add 1 -> Mul 0.5 -> Mul x ---------------
    for tag, first in (("div", "Div"), ("mul", "Mul")):
        gb = GB()
        x = gb.input("x", "float32", [1, 16, 32])
        c = np.float32(1.4142135) if first == "Div" else np.float32(0.70710677)
        e = gb.node("Erf", [gb.node(first, [x, gb.const(c)], name="gelu_scale")],
                    name="gelu_erf")
        a = gb.node("Add", [e, gb.const(np.float32(1.0))], name="gelu_add")
        h = gb.node("Mul", [gb.const(np.float32(0.5)), a], name="gelu_half")
        gb.output(gb.node("Mul", [x, h], name="gelu_mul"))
        out.append(_probe("q.pattern.gelu_erf.%s.half_first.f32.r3" % tag, "Erf", gb,
                          kind="pattern", focus=[n.name for n in gb.nodes],
                          note="GELU as %s -> Erf -> Add 1 -> Mul 0.5 -> Mul x (the dynamo "
                               "exporter's order)" % first))

    # -- GELU with x halved first: Mul(x, 0.5) beside x / sqrt(2) -> Erf -> Add 1, then one Mul ----
    for tag, first in (("div", "Div"), ("mul", "Mul")):
        for swap in (False, True, None):  # None: no 0.5 at all, x * (1 + erf(x / sqrt(2)))
            gb = GB()
            x = gb.input("x", "float32", [1, 16, 32])
            c = np.float32(1.4142135) if first == "Div" else np.float32(0.70710677)
            h = x if swap is None else gb.node("Mul", [x, gb.const(np.float32(0.5))], name="gelu_half")
            e = gb.node("Erf", [gb.node(first, [x, gb.const(c)], name="gelu_scale")], name="gelu_erf")
            a = gb.node("Add", [e, gb.const(np.float32(1.0))], name="gelu_add")
            gb.output(gb.node("MatMul", [gb.node("Mul", [a, h] if swap else [h, a], name="gelu_mul"),
                                         gb.const(np.linspace(-0.5, 0.5, 512, dtype=np.float32).reshape(32, 16))],
                                        name="post_matmul"))
            label = "no_half" if swap is None else "x_half_first" + (".swapped" if swap else "")
            out.append(_probe("q.pattern.gelu_erf.%s.%s.f32.r3" % (tag, label),
                              "Erf", gb, kind="pattern", focus=[n.name for n in gb.nodes],
                              note="GELU as Mul(x, 0.5) beside %s -> Erf -> Add 1, joined by one Mul "
                                   "(%s), read by a MatMul" % (first, {False: "half first: SEW-D's "
                                   "intermediate activation", True: "Add first", None: "without the "
                                   "0.5: x * (1 + erf)"}[swap])))

    # -- pools with large kernels / pads ------------------------------------------------------
    for op, k, p_, s_, cip in (("AveragePool", 11, 5, 1, 0), ("AveragePool", 13, 5, 1, 0),
                               ("AveragePool", 13, 6, 1, 1), ("AveragePool", 13, 6, 2, 0),
                               ("AveragePool", 15, 7, 1, 0), ("AveragePool", 9, 4, 1, 0),
                               ("AveragePool", 7, 3, 1, 0), ("AveragePool", 13, 0, 1, 0),
                               ("MaxPool", 13, 6, 1, 0), ("MaxPool", 9, 4, 1, 0)):
        gb = GB()
        x = gb.input("x", "float32", [1, 8, 32, 32])
        attrs: dict[str, Any] = {"kernel_shape": [k, k], "pads": [p_] * 4, "strides": [s_, s_]}
        if op == "AveragePool" and cip:
            attrs["count_include_pad"] = 1
        gb.output(gb.node(op, [x], **attrs))
        out.append(_probe("q.%s.k=%d.s=%d.p=%d%s.f32.r4" % (op, k, s_, p_,
                                                           ".cip=1" if cip else ""),
                          op, gb, **attrs))

    # -- decomposed RMSNorm: weight as the first / second input of the last Mul --------------
    # (and, to pin the input positions: the reciprocal first in Mul(x, r), no MatMul after)
    for tag, first, recip, r_first, proj in (
            ("recip.w_first", True, True, False, True), ("recip.w_second", False, True, False, True),
            ("div.w_first", True, False, False, True), ("recip.r_first.w_first", True, True, True, True),
            ("recip.w_first.out", True, True, False, False)):
        gb = GB()
        x = gb.input("x", "float32", [1, 16, 64])
        ms = gb.node("ReduceMean", [gb.node("Pow", [x, gb.const(np.float32(2.0))],
                                            name="pow")], name="mean", axes=[-1], keepdims=1)
        sd = gb.node("Sqrt", [gb.node("Add", [ms, gb.const(np.float32(1e-6))], name="eps")],
                     name="sqrt")
        if recip:
            r = gb.node("Reciprocal", [sd], name="rsqrt")
            y = gb.node("Mul", [r, x] if r_first else [x, r], name="norm")
        else:
            y = gb.node("Div", [x, sd], name="norm")
        wt = gb.const(w([64], 1.0) + 1, name="weight")
        y = gb.node("Mul", [wt, y] if first else [y, wt], name="scale")
        gb.output(gb.node("MatMul", [y, gb.const(w([64, 64]))], name="proj") if proj else y)
        out.append(_probe("q.pattern.rmsnorm.%s.f32.r3" % tag, "ReduceMean", gb,
                          kind="pattern", focus=[n.name for n in gb.nodes],
                          note="Pow/ReduceMean/Add/Sqrt/%s, then Mul(%s)%s" % (
                              ("Reciprocal/Mul(r, x)" if r_first else "Reciprocal/Mul(x, r)")
                              if recip else "Div",
                              "weight, x" if first else "x, weight",
                              " and a MatMul" if proj else " as the graph output")))
    # -- probe families of the topic modules (GatherND index shapes, rank-6 Gathers, RMSNorm) ----
    from pytest_npucheck.probe.builder import Collector
    from pytest_npucheck.probe.models_common_subexpressions import QNN_FAMILIES as duplicate_families
    from pytest_npucheck.probe.models_data_dependent_shape import QNN_FAMILIES as datadep_families
    from pytest_npucheck.probe.models_einsum_forms import QNN_FAMILIES as einsum_families
    from pytest_npucheck.probe.models_gather_index import QNN_FAMILIES as gather_families
    from pytest_npucheck.probe.models_noop_arithmetic import QNN_FAMILIES as noop_families
    from pytest_npucheck.probe.models_noop_layout import QNN_FAMILIES as noop_layout_families
    from pytest_npucheck.probe.models_cpu_transposes import QNN_FAMILIES as cpu_transpose_families
    from pytest_npucheck.probe.models_datadep_contraction import QNN_FAMILIES as contraction_families
    from pytest_npucheck.probe.models_cumsum_rank import QNN_FAMILIES as cumsum_families
    from pytest_npucheck.probe.models_dead_nodes import QNN_FAMILIES as dead_families
    from pytest_npucheck.probe.models_wide_matmul import QNN_FAMILIES as wide_families
    from pytest_npucheck.probe.models_rejections import QNN_FAMILIES as rejection_families
    from pytest_npucheck.probe.models_scatter_index import QNN_FAMILIES as scatter_families
    from pytest_npucheck.probe.models_empty_tensors import QNN_FAMILIES as empty_families
    from pytest_npucheck.probe.models_int64_boundary import QNN_FAMILIES as int64_families
    from pytest_npucheck.probe.models_unroll import QNN_FAMILIES as unroll_families
    from pytest_npucheck.probe.models_reshape_fusion import QNN_FAMILIES as reshape_fusion_families
    from pytest_npucheck.probe.models_cnn_shapes import QNN_FAMILIES as cnn_shape_families
    from pytest_npucheck.probe.models_sequence_shapes import QNN_FAMILIES as sequence_shape_families
    from pytest_npucheck.probe.models_conv_channel_split import QNN_FAMILIES as conv_split_families
    from pytest_npucheck.probe.models_scaled_softmax import QNN_FAMILIES as scaled_softmax_families

    col = Collector()
    for fam in (gather_families + rejection_families + einsum_families + datadep_families
                + duplicate_families + noop_families + wide_families + scatter_families + empty_families
                + int64_families + unroll_families + noop_layout_families
                + cpu_transpose_families + contraction_families + cumsum_families
                + dead_families + reshape_fusion_families + cnn_shape_families + sequence_shape_families
                + conv_split_families + scaled_softmax_families):
        fam(col)
    out += col.probes
    if select:
        sel = tuple(select)
        out = [p for p in out if p.id.startswith(sel)]
    return out


def run_probes(htp_arch: int, precision: str, python: str | None,
               out_path: str | os.PathLike[str] | None = None, *, version: str | None = None,
               soc_model: int | None = None, select: Sequence[str] | None = None,
               workers: int = 2, timeout: float = 120.0, run: bool = True,
               extra: bool = False, verbose: bool = True) -> dict[str, Any]:
    """Place all probes with the QNN EP of ``python`` and save the results.

    Args:
        htp_arch: HTP architecture (68, 73, ...).
        precision: ``fp16`` or ``int8`` (QDQ-quantized with random calibration data).
        python: python executable of the onnxruntime-qnn venv (default ``NPUCHECK_QNN_PYTHON``).
        out_path: output path; default ``probes/qnn/<sdk>/htp-v<arch>.<precision>.results.json``.
        version: expected QNN SDK version (``None``: what the backend reports); a mismatch raises.
        select: only probes whose id starts with one of these prefixes.
        workers: parallel worker processes.
        timeout: per-model timeout in seconds.
        run: also run each session once on random inputs (HTP emulation).
        extra: place the QNN-specific extra probes (:func:`extra_probes`) instead; output
            ``...<precision>.extra.results.json``.
    """
    probes = extra_probes(select) if extra else select_probes(select)
    t0 = time.time()
    done = [0]

    def progress(r: oracle.QnnResult) -> None:
        done[0] += 1
        if verbose and (done[0] % 100 == 0 or r.status in ("crashed", "timeout")):
            print("  %d/%d  (%s: %s)" % (done[0], len(probes), r.key, r.status), file=sys.stderr)

    with tempfile.TemporaryDirectory(prefix="npucheck-qnn-probes-") as tmp:
        paths = save_probes(probes, tmp)
        jobs = [oracle.ModelJob(path=str(path), key=p.id) for p, path in zip(probes, paths)]
        if verbose:
            print("placing %d probes on htp-v%d (%s) ..." % (len(jobs), htp_arch, precision),
                  file=sys.stderr)
        results = oracle.place_models(jobs, htp_arch, python, soc_model=soc_model,
                                      precision=precision, run=run, timeout=timeout,
                                      workers=workers, progress=progress)
    builds = Counter(r.backend_build for r in results if r.backend_build)
    sdks = Counter(r.backend_version for r in results if r.backend_version)
    installed = sdks.most_common(1)[0][0] if sdks else None
    if version and installed and installed != version:
        raise RuntimeError("the QNN backend reports %s, not %s" % (installed, version))
    version = version or installed or "unknown"
    versions = next((r.extra.get("versions") for r in results if r.extra.get("versions")), {})
    iface = next((r.interface_version for r in results if r.interface_version), None)
    import onnx

    soc = "htp-v%d" % htp_arch
    doc = {
        "toolchain": "qnn",
        "package": "onnxruntime-qnn",
        "package_version": versions.get("onnxruntime_qnn_dist") or versions.get("onnxruntime_qnn"),
        "onnxruntime": versions.get("onnxruntime"),
        "version": version,
        "backend_build": builds.most_common(1)[0][0] if builds else None,
        "qnn_interface": iface,
        "soc": soc,
        "precision": precision,
        "provider_options": oracle.provider_options(htp_arch, soc_model, precision),
        "generated": _dt.date.today().isoformat(),
        "generator": "pytest_npucheck.toolchains.qnn.probe" + (" --extra" if extra else ""),
        "onnx_version_used_to_write_probes": onnx.__version__,
        "worker_versions": versions,
        "notes": ("placement per ONNX node from InferenceSession.get_provider_graph_assignment_"
                  "info(): npu = QNNExecutionProvider, cpu = CPUExecutionProvider, folded = "
                  "removed by onnxruntime's basic optimizations before partitioning, removed = "
                  "in no partition (e.g. cancelled by the layout transformation); reasons are "
                  "the REASON lines of the verbose log."
                  + (" int8: the probe was QDQ-quantized in the worker (uint8 activations and "
                     "weights, random calibration data); placement is reported for the "
                     "probe's own nodes, Q/DQ nodes are listed under helpers."
                     if precision == "int8" else "")),
        "run": run,
        "seconds": round(time.time() - t0, 1),
        "count": len(probes),
        "probes": [probe_record(p, r) for p, r in zip(probes, results)],
    }
    if out_path is None:
        out_path = ROOT / "probes" / "qnn" / version / ("%s.%s%s.results.json" % (
            soc, precision, ".extra" if extra else ""))
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    if verbose:
        print("wrote %s in %.0f s: %s" % (out, doc["seconds"],
                                          dict(Counter(r["verdict"] for r in doc["probes"]))),
              file=sys.stderr)
    return doc


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description="Place probe models with onnxruntime-qnn (HTP).")
    ap.add_argument("--htp-arch", type=int, default=73)
    ap.add_argument("--soc-model", type=int, default=None)
    ap.add_argument("--precision", choices=["fp16", "int8"], default="fp16")
    ap.add_argument("--python", help="python of the onnxruntime-qnn venv "
                    "(default: $%s)" % oracle.ENV_VAR)
    ap.add_argument("--version", help="expected QNN SDK version (default: what the backend "
                    "reports)")
    ap.add_argument("--out", help="output JSON (default probes/qnn/<sdk>/htp-v<arch>."
                    "<precision>.results.json)")
    ap.add_argument("--select", action="append", help="only probe ids with this prefix")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--no-run", action="store_true", help="do not run the sessions once")
    ap.add_argument("--extra", action="store_true", help="the QNN-specific extra probes")
    args = ap.parse_args(argv)
    run_probes(args.htp_arch, args.precision, args.python, args.out, version=args.version,
               soc_model=args.soc_model, select=args.select, workers=args.workers,
               timeout=args.timeout, run=not args.no_run, extra=args.extra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
