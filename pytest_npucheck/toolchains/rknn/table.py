"""Build the RKNN operator-support table from probe results (+ a few documented facts).

Usage::

    python -m pytest_npucheck.toolchains.rknn.table \\
        --results probes/rknn/2.5.0/rk3588.results.json \\
        --out op_support_tables/rknn/2.5.0/rk3588.json

The op rules below were read off the probe results (``probes/rknn/<version>/<soc>.results.json``,
produced by :mod:`pytest_npucheck.toolchains.rknn.probe`); every entry and constraint lists the probes
that show it.  Where Rockchip's published operator list (2.3.2) states a limit the 2.5.0 compiler
does not enforce, the entry follows the compiler and says so in its note.

The hand-written rules were read from the 2.5.0/rk3588 probes. For any other version or SoC,
:func:`adapt_to_results` adjusts them per op to that target's own probe results (drop a
constraint, or a plain npu/cpu/unsupported status, whichever reproduces strictly more of the op's
probes without losing one inside a network), drops fused patterns its probes do not show, and
states each adjustment in the op's note. rv1106 probes are int8 builds; their tables say
``precision.default = int8``.

After building, the table is checked against every probe with the plugin's own matcher; probes where
the table cannot express the compiler's behaviour are listed in ``provenance.errata``.
The output is validated against ``op_support_tables/schema.json``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import itertools
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence


__all__ = ["build_table", "adapt_to_results", "merge_results", "verify_table", "main",
           "OP_SPECS"]

ROOT = Path(__file__).resolve().parents[3]
DOC = "doc:rknn-op-support-2.3.2"

# --------------------------------------------------------------------------------------------
# spec helpers
# --------------------------------------------------------------------------------------------


_REDUCE_AXIS0_NOTE = (
    "reducing over axis 0 (the batch) runs on the NPU at ranks 2 to 4, with keepdims 0 or 1, of a graph "
    "input or a computed tensor (CrossViT's mean and EfficientViM's sum of stacked logits: a Reshape to "
    "(1, N, 1, X) and a 1x1 Conv); a size-1 axis kept (keepdims=1) is removed. Not expressible: that "
    "no-op alone between a graph input and a graph output (the single-op probe *.axes=0.keepdims=1.f32.r4) "
    "stays as a CPU row (self-check)")


def C(rule: str, probes: Sequence[str] = (), else_: str = "cpu", note: str | None = None,
      source: str | None = None, before_rewrites: bool = False, **params: Any) -> dict[str, Any]:
    """A constraint; ``probes`` are probe-id regexes (expanded against the results)."""
    c: dict[str, Any] = {"rule": rule, "params": params, "else": else_, "_probes": list(probes)}
    if before_rewrites:
        c["before_rewrites"] = True
    if note:
        c["note"] = note
    if source:
        c["source"] = source
    return c


def E(status: str, *constraints: dict[str, Any], note: str | None = None,
      probes: Sequence[str] = (), source: str | None = None,
      opset: Sequence[int] | None = None) -> dict[str, Any]:
    """An op entry; ``probes`` are extra probe-id regexes beyond the probes of the op itself."""
    e: dict[str, Any] = {"status": status, "constraints": list(constraints),
                         "_probes": list(probes)}
    if note:
        e["note"] = note
    if source:
        e["source"] = source
    if opset:
        e["opset"] = list(opset)
    return e


FLOATS = ["float32", "float16"]

#: alternatives of the LayerNormalization rules: not a rank-4 input, or a batch of two or more
_NOT_RANK4 = {"rule": "any_of", "params": {"constraints": [
    {"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 3}},
    {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 5}}]}}
_BATCH2 = {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 0, "min": 2}}

#: CRNN's classifier behind an RNN: Reshape <- Gemm <- (layout ops) <- LSTM/GRU/RNN
_RNN_CHAIN = {"index": 0, "chain": ["Gemm", ["GRU", "LSTM", "RNN"]],
              "skip": ["Flatten", "Reshape", "Squeeze", "Transpose", "Unsqueeze"]}


def _rnn_head(multiple: int) -> list[dict[str, Any]]:
    """any_of alternatives: not an RNN's classifier head, or a class count that is a multiple."""
    return [{"rule": "producer_not", "params": dict(_RNN_CHAIN)},
            {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -1, "multiple_of": multiple}}]


_RNN_HEAD_NOTE = ("behind an LSTM or GRU the compiler runs the per-step classifier (Gemm) over the sequence as "
                  "a convolution; the Reshape of its (T, N) result back to (T, 1, N) ran on the CPU when N, the "
                  "class count, was not a multiple of %d (CRNN's 37 classes), whatever read it")


#: Einsum equations that ran on the NPU (probes Einsum.eq=*, x.Einsum.*.spaces=no/arrow/comma).
EINSUM_NPU = ["bij,bjk->bik", "bhid,bhjd->bhij", "bhij,bhjd->bhid", "ij->ji", "bij->bji",
              "i,j->ij", "bchw,kc->bkhw", "...ij,...jk->...ik", "bij,bij->bi", "bid,bjd->bij",
              "bij,bjd->bid", "bij,bjk -> bik", "bij, bjk->bik", "bhlk,bhtk->bl",
              # XLNet's relative attention and LongT5's local attention (x.Einsum.ctx=letters.xlnet_*, longt5_*)
              "ibh,hnd->ibnd", "ibnd,jbnd->bnij", "ijbn->bnij", "bnij,jbnd->ibnd", "ibnd,hnd->ibh",
              "...qhd,...khd->...hqk", "...hqk,...khd->...qhd",
              # PEGASUS-X's block-local attention with global tokens, SAM's relative positions
              # (x.Einsum.ctx=letters.pegasus_x_*, sam_rel_*)
              "BHNKF,BHGF->BHNKG", "BHNKF,BHNXF->BHNKX", "BHNKG,BHGF->BHNKF", "BHNKX,BHNXF->BHNKF",
              "bhwc,hkc->bhwk", "bhwc,wkc->bhwk",
              # MViTv2's rank-5 relative positions (x.Einsum.ctx=relpos5.*, x.Einsum.ctx=letters.mvit_rel_*)
              "byhwc,hkc->byhwk", "byhwc,wkc->byhwk"]

_MASK_SWAP_NOTE = ("on a mask path the compiler moves the layout change in front of the integer op that makes the "
                   "mask (int64/int32 -> bool/float Cast, Equal of an int64 mask: x.Reshape.ctx=mask_cast.*, "
                   "mask_head.*): the Reshape/Unsqueeze then runs on the integer data on the CPU (layer row "
                   "'Reshape INT64 CPU <mask>_rs'); behind a bool -> float Cast it stayed on the NPU")

#: layout ops RKNN merges into one Reshape (fuse_two_reshape; a Gather of constant indices becomes a Reshape)
_MERGED_LAYOUT = ["Flatten", "Gather", "Reshape", "Squeeze", "Unsqueeze"]

_MASK_CHAIN_NOTE = ("; a chain of layout ops after that op (TorchScript's padding-mask lookup Flatten -> Gather -> "
                    "Reshape -> Reshape, x.Reshape.ctx=mask_lookup.*) is merged into one int64 CPU Reshape named "
                    "after the chain's last op, with or without a Cast in front (swap_cast_reshape or not): the "
                    "verdict lands on that last op, the ops merged into it pass")


#: an integer layout op whose input another op computed and whose result only embedding Gathers read as
#: their indices: 'Reshape INT64 NPU' (x.{Reshape,Unsqueeze,Squeeze}.ctx=gather_ids.*)
_GATHER_IDS = {"rule": "computed_indices", "params": {"ops": ["Gather"]}}
#: the generic integer rule as an alternative of an any_of: float or bool data passes (GENERIC[1])
_FLOAT_DATA = {"rule": "dtype", "params": {"tensor": "input", "index": 0, "allowed": ["float32", "float16", "bool"]}}

_GATHER_IDS_NOTE = ("; in front of the indices of an embedding Gather (its only readers) it runs on the NPU (row "
                    "'Reshape INT64 NPU') when another op computed its input (an int64 Add, Mul, CumSum, a Cast "
                    "to int64: Kosmos-2.5's position ids flattened (1, T) -> (T,)), and on the CPU when it reads a "
                    "graph input, whatever its rank or length (x.{Reshape,Unsqueeze,Squeeze}.ctx=gather_ids.*)")


def _mask_swap(probes: Sequence[str], gather_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The mask-swap constraint of a layout op: CPU when a chain of layout ops reaches back to an integer
    Cast/Equal and this op is the chain's last (its readers are not layout ops RKNN merges it into); with
    ``gather_ids`` (probe patterns), a computed input read only as a Gather's indices passes."""
    alternatives: list[dict[str, Any]] = [
        {"rule": "producer_pass",
         "params": {"index": 0, "ops": ["Cast", "Equal"], "skip": _MERGED_LAYOUT,
                    "constraint": {"rule": "dtype",
                                   "params": {"tensor": "input", "index": 0,
                                              "allowed": ["bool", "float16", "float32"]}}}},
        {"rule": "feeds_only", "params": {"ops": _MERGED_LAYOUT}},
        # integer data in: no mask Cast in front (an int64 -> int64 Cast, which the compiler
        # removes: JetMoE's router); the integer-layout rule judges it
        {"rule": "dtype", "params": {"tensor": "input", "index": 0, "allowed": ["int64", "int32"]}}]
    if gather_ids:
        alternatives.append(_GATHER_IDS)
    return C("any_of", list(probes) + list(gather_ids), constraints=alternatives,
             note=_MASK_SWAP_NOTE + _MASK_CHAIN_NOTE + "; a layout op whose input is itself integer (behind an int64 -> "
                  "int64 Cast, which the compiler removes: JetMoE's router) has no mask Cast to move in front of"
                  + (_GATHER_IDS_NOTE if gather_ids else ""))


_INT_LAYOUT_NOTE = ("integer (int64/int32) data runs on the CPU, except in a chain of layout ops RKNN merges into one "
                    "Reshape (fuse_two_reshape; a constant-index Gather becomes a Reshape): only the chain's last op, "
                    "whose readers are not such layout ops, runs (as the merged Reshape, on the CPU); the ops merged "
                    "into it pass (x.Reshape.ctx=mask_lookup.i64.flatten.gather / i64.unsqueeze2: Flatten -> Gather "
                    "-> Reshape -> Reshape and Unsqueeze -> Unsqueeze on int64 data, one CPU row named after the last)")


_INT_CAST_NOTE = ("; a layout op of rank below 4 on integer data read only by Casts leaves no row: RKNN "
                  "merges it into the Cast's own 4-D relayout of its input (unsqueeze_to_4d_cast; the row "
                  "'Reshape <result>_rs' is the Cast's glue, x.{Unsqueeze,Reshape,Squeeze}.ctx=int_layout.*.input."
                  "cast_*: a graph input, an int64 Mul's result in the zoo's Bloom), while a rank-4 result "
                  "(mask[:, None, None, :]) is a CPU Reshape of its own (x.Reshape.ctx=mask_lookup.i64.unsqueeze2)")


def _plane(tensor: str) -> dict[str, Any]:
    """A float Reshape between rank-4 tensors: the (H, W) plane of ``tensor`` holds a multiple of 8 elements, or one."""
    # only between two rank-4 tensors: a padding mask (1, T) viewed as (1, 1, 1, T) ran on the NPU at T = 15
    # (x.Reshape.ctx=sdpa_mask.*), and so did ViT's and PoolFormer's flattening of a Conv's 2 x 2 map to rank 3
    # in front of a Transpose or an InstanceNormalization, which a Relu -> Reshape -> Relu probe ran on the CPU
    sides = ("input", "output")
    # the heads of a (1, C, H, W) map merged back, (1, h, d, H W) -> (1, h d, H, W): the output plane does not
    # count when both channel dims are multiples of 8 (x.Reshape.ctx=heads.merge.*; the split keeps its input rule)
    # or when it reads attention's Transpose (0, 1, 3, 2) of (1, h, L, d) with d a multiple of 8, whatever h
    # (x.Reshape.ctx=heads_t.merge.*)
    heads = ([{"rule": "channels_multiple_of", "params": {"multiple_of": 8}},
              {"rule": "behind_heads_transpose", "params": {"multiple_of": 8}}] if tensor == "output" else
             # the split (1, h d, H, W) -> (1, h, d, H W) of a map into heads read by attention (CoAtNet, CPU-Bone,
             # EfficientViT-B0: x.Reshape.ctx=heads_split.*): the input plane does not count
             [{"rule": "splits_heads_for_attention", "params": {"multiple_of": 8}}])
    # the rows of a channels-last (1, A, B, W) map folded into the batch, (A B, 1, 1, W) (RAFT's coords per pixel):
    # NPU whatever either plane (x.Reshape.ctx=batch_fold.*)
    heads.append({"rule": "folds_rows_into_batch", "params": {}})
    # MViTv2's pooled keys/values (1, C, h, w) -> (1, 1, C, h w): a flattening of the plane that keeps the channels,
    # on the NPU whatever the plane when C is a multiple of 8 (x.Reshape.ctx=pool_flat.*)
    flat = [{"rule": "plane_flatten_channels", "params": {"multiple_of": 8}}] if tensor == "input" else []
    return C("any_of", [r"x\.Reshape\.ctx=plane(_unfold)?\.", r"x\.Reshape\.ctx=sdpa_mask\.",
                        r"x\.Reshape\.ctx=heads(_t|_split)?\.", r"x\.Reshape\.ctx=batch_fold\."]
             + ([r"x\.Reshape\.ctx=pool_flat\."] if tensor == "input" else []),
             constraints=[*({"rule": "rank", "params": {"tensor": side, "index": 0, "max": 3}} for side in sides),
                          *({"rule": "rank", "params": {"tensor": side, "index": 0, "min": 5}} for side in sides),
                          {"rule": "dtype", "params": {"tensor": tensor, "index": 0,
                                                       "allowed": ["int64", "int32", "bool"]}},
                          {"rule": "elements_max", "params": {"tensor": tensor, "index": 0, "axes": [2, 3], "max": 1}},
                          {"rule": "beside_trivial_transpose", "params": {}},
                          {"rule": "elements_multiple_of", "params": {"tensor": tensor, "index": 0, "axes": [2, 3],
                                                                      "multiple_of": 8}}, *heads, *flat],
             note="a float Reshape between two rank-4 tensors runs on the CPU unless its %s's last two dims hold a "
                  "multiple of 8 elements, or one: (1, 2, 19, 10) -> (1, 2, 10, 19), (1, 2, 18, 10) -> (1, 2, 10, 18), "
                  "(1, 16, 4, 4) -> (32, 2, 2, 2) and back, (1, 4, 5, 5) -> (1, 2, 2, 25) ran on the CPU, "
                  "(1, 2, 20, 10) -> (1, 2, 10, 20), (1, 2, 16, 8) -> (1, 2, 8, 16), (1, 4, 4, 4) -> (2, 2, 4, 4) and "
                  "(1, 16, 4, 4) -> (1, 32, 2, 4) on the NPU, whatever the batch or the channels "
                  "(x.Reshape.ctx=plane.*: MobileViT's unfold and fold of 2 x 2 patches, the relative position "
                  "shift of Conformer attention); next to a Transpose that moves only axes of size 1 the compiler "
                  "merges the Reshapes into the Transposes around them and no Reshape is left (MobileViT's unfold "
                  "with one patch per side: x.Reshape.ctx=plane_unfold.*). From or to another rank the table does "
                  "not judge the plane: a (1, 15) padding mask viewed as (1, 1, 1, 15) ran on the NPU "
                  "(x.Reshape.ctx=sdpa_mask.*), and a Conv's 2 x 2 map flattened to rank 3 ran on the NPU in front of "
                  "a Transpose (ViT) or an InstanceNormalization (PoolFormer), while (1, 4, 2, 2) -> (1, 4, 4) between "
                  "two Relus and an FPN head's flattening in front of a Concat ran on the CPU: what decides that "
                  "is not found yet%s%s" % (tensor, _HEADS_NOTE if tensor == "output" else _SPLIT_NOTE + _FLAT_NOTE, _FOLD_NOTE))


_FLAT_NOTE = ("; a flattening of the plane that keeps the channels, (1, C, h, w) -> (1, 1, C, h w) (MViTv2's pooled "
              "keys and values, laid out as (1, C, 1, h w)), ran on the NPU behind a depthwise Conv whatever its "
              "plane (14 x 14, 7 x 7, 5 x 5) when C was a multiple of 8 (96, 16), on the CPU at C = 12 with 7 x 7, "
              "and so with the heads in the batch, (h, C, s, s) -> (1, h, C, s s) (x.Reshape.ctx=pool_flat.*)")


_HEADS_NOTE = ("; a rank-4 (1, h, d, H W) merged into (1, h d, H, W) (the heads of a convolutional attention "
               "put back on the map: CoaT, CoAtNet, EfficientViT) ran on the NPU whatever its output plane when "
               "both channel dims were multiples of 8 (h = 8, 16 with d = 3 to 40, planes 7 x 7 and 14 x 14), on "
               "the CPU with h = 2 or 4 (x.Reshape.ctx=heads.merge.*); the split (1, h d, H, W) -> (1, h, d, H W) ran "
               "on the CPU by its input plane whatever h, between Relus or behind a Conv, and on the NPU in front of "
               "a Transpose(0, 1, 3, 2) when d was a multiple of 8, whatever read the Transpose "
               "(x.Reshape.ctx=heads.split.*.transpose, heads_t.split.*: not expressed, in CoaT the compiler moved "
               "that Transpose through the Mul after it and ran the split on the CPU); behind attention's "
               "Transpose(0, 1, 3, 2) of (1, h, L, d) the merge ran on the NPU when d was a multiple of 8, whatever "
               "h ((4, 96), (2, 8); CoAtNet, CPU-Bone), and on the CPU at (4, 5), (2, 2) (x.Reshape.ctx=heads_t.merge.*)")


_SPLIT_NOTE = ("; the split of a map into attention heads, (1, k h d, H, W) -> (1, h, k d, H W), ran on the NPU "
               "whatever its input plane when k d was a multiple of 8 and every path from it reached attention's "
               "Transpose (0, 1, 3, 2) or a MatMul (through Slices of q, k and v on axis 2 or 3 and scalings): the "
               "compiler lays the heads on the batch axis, (h, k d, 1, H W); CoAtNet's softmax attention slicing "
               "axis 2, CPU-Bone's transposing first, EfficientViT-B0's ReLU linear attention, h = 2 to 8, d = 8 "
               "to 40, 5 x 5 to 14 x 14 maps (x.Reshape.ctx=heads_split.*); on the CPU at k d = 15, 9, 5, 3, between "
               "Relus, and when the Transpose is read by a Mul or Add with a second transposed operand that a "
               "MatMul reads (the compiler moves both Transposes behind the Mul and leaves the split bare: CoaT's "
               "q * conv(v)); that Mul read by a Relu ran on the NPU (not expressed)")


_FOLD_NOTE = ("; a channels-last (1, A, B, W) map whose rows are folded into the batch, (A B, 1, 1, W) or (A, 1, B, W) "
              "(RAFT's coords.reshape(B H W, 1, 1, 2)), ran on the NPU whatever either plane: W = 2, 3, 7, 8 on 16 x 16, "
              "7 x 7, 5 x 3 and 4 x 4 maps, behind a Relu or RAFT's Transpose (0, 2, 3, 1), read by a Relu or a broadcast "
              "Add (x.Reshape.ctx=batch_fold.*)")


def _squeeze_nd(op: str) -> dict[str, Any]:
    """A rank-6 Add/Sub with a constant operand: rknn-toolkit2 2.5.0's rewrite squeeze_nd_add raises."""
    return C("any_of", [r"x\.%s\.ctx=squeeze_nd\." % op], "unsupported",
             constraints=[{"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 5}},
                          {"rule": "computed_input", "params": {"index": [0, 1]}},
                          # behind a Reshape to rank 6 (through other Adds/Subs), it builds: MViTv2's relative
                          # position terms (x.Reshape.ctx=rank6_merge.relpos.*, x.Add.ctx=squeeze_nd_b.reshape.*)
                          *({"rule": "producer_is", "params": {"index": i, "chain": ["Reshape"], "skip": ["Add", "Sub"]}}
                            for i in (0, 1))],
             note="a rank-6 %s with a constant operand (a per-channel bias, a full tensor or a scalar, first or "
                  "second; Twins-SVT's qkv bias on (1, h, w, ws, ws, C) windows) makes build() fail when a MatMul "
                  "or a Relu computes the other operand: the rewrite squeeze_nd_add raises ('IRGraph' object has "
                  "no attribute 'node_use_target_const'); at rank 5 and 4, with two computed operands, a Mul, or "
                  "the other operand a Reshape of a rank-4 map to rank 6 (also through other Adds of constants: "
                  "MViTv2's relative positions), it builds (x.{Add,Mul,Sub}.ctx=squeeze_nd.*, squeeze_nd_b.*, "
                  "x.Reshape.ctx=rank6_merge.relpos.*)" % op)


def _sdpa_bias_gate(op: str) -> list[dict[str, Any]]:
    """The element-wise op computing the additive bias of a fused attention from a gate of shape (B*H, T, 1)
    Reshaped from rank 4, broadcast along its last axis (WavLM's gated relative position bias): CPU. One
    constraint per input index, the gate being either operand."""
    out = []
    for index in (0, 1):
        out.append(C("any_of", [r"x\.%s\.ctx=sdpa_bias\." % op],
                     constraints=[
                         {"rule": "feeds_not", "params": {"path": ["Add", "Softmax", "MatMul"], "skip": ["Cast", "Reshape"]}},
                         {"rule": "dim", "params": {"tensor": "input", "index": index, "axis": -1, "min": 2}},
                         {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": -1, "max": 1}},
                         {"rule": "producer_pass", "params": {"index": index, "ops": ["Reshape"], "constraint": {
                             "rule": "rank", "params": {"tensor": "input", "index": 0, "max": 3}}}}],
                     note="the additive bias of an attention RKNN fuses into exSDPAttention (MatMul -> Add(bias) "
                          "-> Softmax -> MatMul), computed by %s from a gate of shape (B*H, T, 1) that is a "
                          "Reshape of a rank-4 (1, B*H, T, 1) result and broadcast along its last axis, runs on "
                          "the CPU: the compiler keeps the gate's rank-4 layout and broadcasts over the batch "
                          "axis (row '%s (1,2,12,1),(12,2,12,1)'; WavLM's gated relative position bias); the same "
                          "gate computed in rank 3, a full (B*H, T, T) gate, or an attention that is not fused "
                          "stayed on the NPU (x.%s.ctx=sdpa_bias.*)" % (op, op, op)))
    return out


def _int_layout(probes: Sequence[str], cast_probes: Sequence[str] = (), reader_probes: Sequence[str] = (),
                gather_ids: Sequence[str] = ()) -> dict[str, Any]:
    """The generic dtype rule of a layout op RKNN merges with the layout ops reading it (it is excepted
    from the generic rule): integer data passes when the op is merged into its readers; with
    ``cast_probes`` also when only Casts read its result of rank below 4; with ``reader_probes`` also
    when only the integer ops of _INT_RELAYOUT_READERS (and Shape) read it; with ``gather_ids`` also when
    another op computed its input and only Gathers read its result, as their indices."""
    alternatives: list[dict[str, Any]] = [
        _FLOAT_DATA,
        {"rule": "feeds_only", "params": {"ops": _MERGED_LAYOUT}}]
    if cast_probes:
        alternatives.append({"rule": "feeds_only", "params": {"ops": ["Cast"], "max_rank": 3}})
    if reader_probes:
        alternatives.append({"rule": "feeds_only", "params": {"ops": _INT_RELAYOUT_READERS, "max_rank": 3}})
    if gather_ids:
        alternatives.append(_GATHER_IDS)
    return C("any_of", list(probes) + list(cast_probes) + list(reader_probes) + list(gather_ids),
             constraints=alternatives,
             note=_INT_LAYOUT_NOTE + (_INT_CAST_NOTE if cast_probes else "")
             + (_INT_READERS_NOTE if reader_probes else "") + (_GATHER_IDS_NOTE if gather_ids else ""))


#: integer ops that make a 4-D relayout of their input (unsqueeze_to_4d_<op>) into which RKNN merges a layout op of
#: rank below 4 in front of them (x.{Unsqueeze,Reshape}.ctx=int_readers.*, int_layout.unsqueeze.input.mul); a Shape
#: reads only the static shape (fold_constant). Not a Gather reading it as indices: that is a CPU Reshape of its own
_INT_RELAYOUT_READERS = ["Cast", "Div", "Expand", "Mul", "Shape", "TopK"]

_INT_READERS_NOTE = ("; so does one of rank below 4 read only by int64 Expand, TopK, Div or Mul ops (and Shape): "
                     "JetMoE's router Reshape (16, 1) -> (16) of TopK's indices in front of a second TopK and its "
                     "Unsqueeze (16) -> (16, 1) in front of an Expand left no row (x.{Unsqueeze,Reshape}.ctx="
                     "int_readers.*: Unsqueeze and Reshape between a graph input or TopK's indices and an Expand, "
                     "a TopK, a Div, 10 and 16 indices; the reader's relayout 'Reshape <result>_rs' is its glue), "
                     "while as the indices of a Gather it is a CPU Reshape of its own")

def _int_unit_split_concat(probes: Sequence[str]) -> dict[str, Any]:
    """The generic dtype rule of Slice and Concat (both are excepted from it): integer data runs on the CPU
    unless the op is a Slice, or the Concat, of Slices tiling one axis in pieces of one, concatenated in
    order on the next axis, which the compiler turns into one NPU Reshape."""
    return C("any_of", list(probes) + [r"x\.Slice\.ctx=split_concat\.", r"x\.Pad\.ctx=block_mask\.t16"],
             constraints=[_FLOAT_DATA,
                          {"rule": "unit_split_concat", "params": {}}],
             note="integer (int64/int32) data runs on the CPU, except Slices that tile one axis of a static "
                  "tensor in pieces of one and the Concat joining them in order on the next axis: the "
                  "compiler makes one Split of the Slices (replace_parallel_slice_by_split) and one Reshape of "
                  "the Split and Concat (replace_split_concat_by_reshape), an int64 Reshape on the NPU (LongT5's "
                  "block mask with one block: (1, 3, blk) sliced [0:1], [1:2], [2:3] and joined on axis 2; "
                  "x.Slice.ctx=split_concat.tile.*, x.Pad.ctx=block_mask.t16.*). Pieces of two, overlapping "
                  "Slices (LongT5 with two or more blocks) or Slices covering part of the axis ran on the CPU "
                  "(x.Slice.ctx=split_concat.{tile.p2.e2,overlap,part}.*; the generic integer rule excepts Slice "
                  "and Concat)")


# --------------------------------------------------------------------------------------------
# the op rules (RKNN 2.5.0, rk3588, fp16 build)
# --------------------------------------------------------------------------------------------

OP_SPECS: dict[str, dict[str, Any]] = {
    # -- element-wise activations on the NPU --------------------------------------------------
    "Relu": E("npu", probes=[r"pattern\.conv_relu", r"pattern\.conv_bn_relu"]),
    "Sigmoid": E("npu", probes=[r"pattern\.conv_sigmoid", r"pattern\.conv_silu"]),
    "Tanh": E("npu", probes=[r"pattern\.gelu_tanh"]),
    "Softplus": E("npu", probes=[r"pattern\.conv_mish_decomposed"]),
    "Elu": E("npu"),
    "HardSigmoid": E("npu"),
    "HardSwish": E("npu", probes=[r"pattern\.conv_hardswish"]),
    "LeakyRelu": E("npu"),
    "ThresholdedRelu": E("npu"),
    "PRelu": E("npu", C("const_input", [r"PRelu\.slope=dynamic"], "unsupported", index=1,
                        note="a non-constant slope makes build() fail")),
    "Clip": E("npu", probes=[r"pattern\.conv_relu6"],
              note="min/max may be constants, absent or graph inputs."),
    "Abs": E("npu", probes=[r"ctx\.Abs"], note="compiled as LeakyRelu."),
    "Neg": E("npu", probes=[r"ctx\.Neg"], note="compiled as Mul by -1."),
    "Sqrt": E("npu", C("rank", [r"Sqrt\.f32\.r5"], max=4, tensor="input", index=0,
                       note="a rank-5 Sqrt ran on the CPU"), probes=[r"ctx\.Sqrt"]),
    "Identity": E("npu", probes=[r"prepass\.identity_middle", r"ctx\.Identity"],
                  note="eliminated by the compiler (eliminate_identity)."),
    "Dropout": E("npu", probes=[r"prepass\.dropout_middle"],
                 note="eliminated by the compiler (inference mode)."),
    # -- element-wise math only implemented on the CPU ----------------------------------------
    "Erf": E("cpu", probes=[r"ctx\.Erf", r"pattern\.conv_erf", r"pattern\.gelu_erf\.mul",
                            r"pattern\.gelu_erf_partial"],
             note="a lone Erf runs on the CPU; inside the Div->Erf->Add->Mul->Mul GELU pattern "
                  "it is fused into exGelu on the NPU (pattern gelu_erf). The variant that "
                  "scales by Mul(1/sqrt 2) instead of Div(sqrt 2) is NOT fused."),
    "Exp": E("cpu", probes=[r"ctx\.Exp"]),
    "Log": E("cpu", probes=[r"ctx\.Log"]),
    "Floor": E("cpu", probes=[r"ctx\.Floor"]),
    "Ceil": E("cpu"),
    "Round": E("cpu"),
    "Sin": E("cpu", probes=[r"ctx\.Sin"]),
    "Cos": E("cpu"),
    "Tan": E("cpu"),
    "Atan": E("cpu"),
    "Softsign": E("cpu", probes=[r"ctx\.Softsign"]),
    "Sign": E("cpu"),
    "Selu": E("cpu", probes=[r"ctx\.Selu"]),
    "Celu": E("cpu"),
    "Mish": E("cpu", probes=[r"ctx\.Mish"],
              note="the Mish op runs on the CPU, while Softplus->Tanh->Mul is fused on the NPU "
                   "(ConvExMish after a Conv)."),
    "Reciprocal": E("cpu", probes=[r"ctx\.Reciprocal", r"pattern\.rmsnorm_decomposed"],
                    note="rewritten to a Div with a constant numerator, which runs on the CPU."),
    "IsNaN": E("cpu"),
    "IsInf": E("cpu"),
    "Hardmax": E("cpu"),
    "BitShift": E("cpu"),
    "Not": E("cpu", probes=[r"pattern\.equal_not_cast"]),
    # -- binary element-wise -------------------------------------------------------------------
    "Add": E("npu", _squeeze_nd("Add"), *_sdpa_bias_gate("Add"),
             C("any_of", [r"x\.Add\.ctx=sdpa_bias_bcast\.", r"x\.Add\.ctx=bias5\."],
               constraints=[{"rule": "feeds_not", "params": {"path": ["Add", "Softmax", ["Einsum", "MatMul"]],
                                                             "skip": ["Cast", "Reshape", "Transpose"]}},
                            {"rule": "not_const_head_broadcast", "params": {}}],
               note="the bias of a fused attention (its result added to the scores of an Einsum or MatMul, "
                    "then Softmax -> Einsum/MatMul) made at rank 5 of a constant (1, 1, H, q, k) position bias "
                    "and a computed mask of size 1 on the head axis runs on the CPU in fp32 (row 'Add "
                    "(2,8,1,24),(1,8,1,24) FLOAT'): the compiler lays it out like the scores, heads on the "
                    "batch axis, and broadcasts the mask over it (LongT5's local attention). With a computed "
                    "bias, the mask given every head, two blocks on axis 1, at rank 4, added to the scores "
                    "first, or without the attention behind it the Add ran on the NPU "
                    "(x.Add.ctx=sdpa_bias_bcast.*, x.Add.ctx=bias5.*)"),
             probes=[r"pattern\.conv_add", r"pattern\.matmul_add"],
             note="int32 Add ran on the NPU in a probe (with CPU reshapes), but the generic "
                  "dtype rule predicts CPU for it."),
    "Sub": E("npu", _squeeze_nd("Sub")),
    "Mul": E("npu", *_sdpa_bias_gate("Mul")),
    "Div": E("npu",
             C("dtype", [r"x\.Div\.b=(const4|const_vec|dyn_pos)\.i64", r"Div\.b=same\.i64"],
               tensor="input", index=0, allowed=FLOATS,
               note="int64 Divs (index arithmetic such as flat // width) run on the CPU; the "
                    "probe dividing two random int64 graph inputs crashed the toolkit with "
                    "SIGFPE - an integer division by zero in its own test data, not a limit of "
                    "the op (errata)"),
             C("any_of", [r"x\.Div\.ctx=norm_div\."],
               constraints=[{"rule": "feeds_not", "params": {"path": [["MatMul", "Transpose"]], "skip": ["Add", "Mul"]}},
                            {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 1, "min": 2}},
                            {"rule": "producer_not", "params": {"index": 0, "chain": [
                                ["ReduceL2", "ReduceMax", "ReduceMean", "ReduceSum", "Sqrt"]]}}],
               note="Global Response Normalisation (ConvNeXt-V2: the spatial L2 norm of each channel divided "
                    "by its mean over the channels) runs its Div on the CPU when the normalised tensor goes "
                    "on into a MatMul (the block's pwconv2, through the gamma/beta Mul/Add and the residual): "
                    "a Div of a reduced per-channel vector (size 1 on axis 1) by another; so does a GRN whose "
                    "result is transposed back to channels first (the torch.nn zoo's GRN between two permutes; "
                    "at 16 and 32 channels, 8 x 8 and 32 x 32 maps); the same GRN ending "
                    "in a Relu, and x / mean(x) of the full tensor, ran on the NPU (x.Div.ctx=norm_div.*)"),
             C("rank", [r"Div\.a=const_scalar", r"x\.Div\.a=const_scalar"], tensor="input",
               index=0, min=1,
               note="a scalar numerator (c / x) is compiled as a CPU Div, for every probed "
                    "shape of x; inside an RMSNorm (pattern rmsnorm_div) it is fused on the "
                    "NPU")),
    "Pow": E("npu", C("const_input", [r"Pow\.exp=dyn"], index=1,
                      note="a non-constant exponent runs on the CPU"),
             C("any_of", [r"x\.Pow\.exp="],
               constraints=[{"rule": "const_value_range", "params": {"index": 1, "min": 1, "max": 3, "integer": True}},
                            {"rule": "const_value_range", "params": {"index": 1, "min": 0.5, "max": 0.5}},
                            {"rule": "const_value_range", "params": {"index": 1, "min": -0.5, "max": -0.5}}],
               note="only the exponents 1, 2, 3, 0.5 and -0.5 ran on the NPU; 4, 5, 8, 9, -1, -2, 0.25, 1.5 and 2.5 "
                    "ran on the CPU (x.Pow.exp=*: YOSO's (1 - x) ** 9)")),
    "Max": E("npu", C("rank", [r"Max\.b=same\.f32\.r[23]", r"Max\.b=const_scalar",
                               r"Max\.a=const_scalar", r"Max\.b=dyn_lastdim",
                               r"Max\.b=const_1elem", r"Max\.b=const_lastdim",
                               r"ctx\.Max\.b=const_scalar"],
                      tensor="input", index="*", min=4,
                      note="both operands must be rank >= 4; scalar / 1-D / rank-2-3 operands "
                           "run on the CPU"),
             probes=[r"ctx\.Max"]),
    "Min": E("cpu", probes=[r"ctx\.Min"],
             note="every Min probe (any rank, broadcast or dtype) ran on the CPU."),
    "Sum": E("npu", note="compiled as a chain of Adds."),
    "Mean": E("cpu"),
    "Mod": E("cpu"),
    "Equal": E("cpu", probes=[r"ctx\.Equal", r"pattern\.equal_not_cast"]),
    "Greater": E("cpu", probes=[r"pattern\.greater_where", r"ctx\.Cast\.to=float32\.bool"]),
    "Less": E("cpu"),
    "GreaterOrEqual": E("cpu"),
    "LessOrEqual": E("cpu"),
    "And": E("npu",
             C("identity_operand", [r"x\.And\.ctx=const_input\."], value=True,
               note="an And with a constant all-true operand that does not broadcast the other "
                    "(VisualBERT's (1, 1, 1, 1) mask computed from constants) is left as the CPU Cast "
                    "of cvt_and_to_fp_mul: the Mul by one is removed; a true row that broadcasts the "
                    "mask, or a mixed constant, keeps the NPU Mul"),
             C("mask_cast_one_chain", [r"x\.And\.ctx=mask_chains\."], "unsupported",
               through=["Cast", "Expand", "Flatten", "Gather", "Identity", "Reshape", "Slice", "Squeeze",
                        "Transpose", "Unsqueeze"],
               note="a padding mask combined by an And whose bool Cast of the mask input is also read by a second "
                    "chain (an encoder-decoder's self-attention [T, T] and cross-attention [S, T] masks of one "
                    "attention_mask, as transformers' masking code exports them) makes build() hang: rewrite "
                    "cvt_and_to_fp_mul removes that Cast with the first And and the graph optimizer never "
                    "returns (the build log stops; probes x.And.ctx=mask_chains.*: with each chain's own Cast, "
                    "with the second chain in the old (1 - m) * min form, a short Cast -> Reshape -> And, or "
                    "two chains computing the same mask: the toolkit does not merge them). One chain, or two "
                    "chains of two mask inputs, build on the NPU"),
             note="compiled as Cast->Mul (NPU) with a CPU Cast back to bool."),
    "Or": E("cpu"),
    "Xor": E("cpu"),
    "Where": E("npu", C("dtype", [r"Where\.xy=dyn\.i64", r"Where\.xy=dyn\.i32"], tensor="input",
                        index=1, allowed=FLOATS,
                        note="int64 data runs on the CPU (an int32 Where crashed the compiler)"),
               C("any_of", [r"Where\.xy=dyn|x\.(Reshape|Cast|Where)\.ctx=mask_cast\."], "unsupported",
                 constraints=[{"rule": "feeds_not", "params": {"path": ["Softmax"]}},
                              {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -2, "min": 2}},
                              {"rule": "const_value_range", "params": {"index": 0, "max": 0}},
                              {"rule": "const_value_range", "params": {"index": 0, "min": 1}}],
                 note="a Where whose condition is broadcast over the query axis (size 1 on axis -2: a padding "
                      "mask viewed as (B, 1, 1, T)) and whose result goes straight into a Softmax makes build() "
                      "abort ('Encountered First Conv unsupported subgraph: exSoftmaxMask', SIGABRT), whether the "
                      "mask is cast from int64/int32, computed by a Greater or a bool graph input; a (B, 1, T, T) "
                      "or expanded mask, Where(m, 0, -big) added to the scores, or a Where read by another op "
                      "built (x.*.ctx=mask_cast.*); a constant mask aborts the build too, unless it has one value "
                      "everywhere (SEW-D's all-False mask): then the Where is one of its branches and leaves no "
                      "row (x.Where.ctx=mask_cast.bool.bool.const*)"),
               probes=[r"pattern\.greater_where", r"ctx\.Equal", r"pattern\.attention\.mha_wh"]),
    "Cast": E("npu",
              C("dtype", [r"Cast\.to=float32\.u8"], "unsupported", tensor="input", index=0,
                allowed=["float32", "float16", "int32", "int64", "bool", "int8"],
                note="a uint8 input crashed the compiler ('Not Support Dtype')"),
              C("dtype", [r"Cast\.to=\w+\.i64"], tensor="input", index=0,
                allowed=["float32", "float16", "int32", "bool", "int8"],
                note="casts from int64 run on the CPU"),
              C("attr_in", [r"Cast\.to=(int64|int32)\.", r"x\.Cast\.to=int32\.bool"], attr="to",
                values=[1, 10, 3, 9],
                note="casts to int64/int32 run on the CPU; to float32/float16/int8 on the NPU"),
              C("any_of", [r"Cast\.to=bool\.f32", r"x\.Cast\.to=bool\.(ctx=where\.)?bool"],
                constraints=[{"rule": "attr_not_in", "params": {"attr": "to", "values": [9]}},
                             {"rule": "dtype", "params": {"tensor": "input", "index": 0,
                                                          "allowed": ["bool"]}}],
                note="a cast to bool runs on the CPU unless its input is already bool (the "
                     "no-op mask casts TorchScript writes; ran on the NPU in front of a Where "
                     "- a lone rank-4 one at the graph boundary stayed on the CPU, errata)"),
              probes=[r"ctx\.Cast"],
              note="float->float casts are removed inside a network (ctx.Cast probes); a "
                   "stand-alone rank-4 float Cast between graph input and output stayed on "
                   "the CPU (boundary effect, listed in errata)."),
    # -- linear algebra --------------------------------------------------------------------------
    "MatMul": E("npu", C("dtype", [r"MatMul\.b=dyn\.i64"], "unsupported", tensor="input",
                         index=0, allowed=FLOATS,
                         note="an int64 MatMul crashed the compiler ('Unsupport type bits 64')"),
                C("any_of", [r"x\.MatMul\.ctx=sdpa_query\."], "unsupported", before_rewrites=True,
                  constraints=[{"rule": "computed_input", "params": {"index": 0}},
                               {"rule": "const_input", "params": {"index": 1}},
                               {"rule": "feeds_not", "params": {"path": ["Softmax", "MatMul"],
                                                                "skip": ["Add", "Div", "Mul"]}}],
                  note="attention whose queries are constants (learned queries: DETR's decoder cross-attention, "
                       "AIMv2's attention pooling; a constant, or the projection of one, folded) makes build() "
                       "fail: rewrite fuse_matmul_softmax_matmul_to_sdpa raises ('inputs or outputs must be "
                       "set') on MatMul(q, k) [-> Mul scale] [-> Add mask] -> Softmax -> MatMul, with 1, 10 or "
                       "16 queries, 1 or 2 heads, with and without the mask and the scale; the same attention "
                       "with queries computed from an input (also a constant plus the input) runs on the NPU "
                       "(exSDPAttention); with constant keys too the whole attention is folded"),
                C("linear_pair_add", [r"x\.MatMul\.ctx=dual_head\."], "unsupported",
                  note="see Gemm: two MatMuls by constant weights (with their bias Adds) of one input, added, "
                       "make build() fail in fuse_conv_conv_add"),
                C("any_of", [r"x\.MatMul\.ctx=sdpa_bcast\."], "cpu",
                  constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 3}},
                               {"rule": "dim", "params": {"tensor": "input", "index": 1, "axis": -3, "min": 2}},
                               {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -3, "max": 1}},
                               {"rule": "feeds_not", "params": {"path": ["Softmax", "MatMul"],
                                                                "skip": ["Add", "Div", "Mul"]}}],
                  note="multi-query attention written as a broadcast (timm's MobileNetV4 hybrid blocks): the "
                       "scores MatMul reads queries (1, H, N, d) and keys with one head (1, 1, d, M); "
                       "fuse_matmul_softmax_matmul_to_sdpa makes exSDPAttention (NPU) and inserts a CPU Expand "
                       "of the keys (and of the values when the output MatMul broadcasts them too), named after "
                       "the key tensor: the scores MatMul's work on the CPU. With H heads of keys, without the "
                       "output MatMul (no fusion: exMatMul broadcasts on the NPU) it stays on the NPU; a "
                       "broadcast of the values alone leaves a CPU Expand that the output MatMul's NPU "
                       "exSDPAttention row outweighs (x.MatMul.ctx=sdpa_bcast.*: 2, 4 and 8 query heads, "
                       "d 16 and 64, with and without the scale)"),
                probes=[r"pattern\.matmul_add", r"pattern\.attention", r"pattern\.sdpa",
                        r"prepass\.const_transpose_weight"],
                note="constant right operand -> Conv, dynamic -> exMatMul; both on the NPU."),
    "Gemm": E("npu",
              C("gemm_scale_fold", [r"x\.Gemm\.ctx=input_scale\."], "unsupported",
                note="a Gemm whose weight is stored [K, N] (transB=0, N != K, as a GPT-2 Conv1D/addmm exports) "
                     "reading a Mul by a per-feature [K] constant (the weight of a hand-written norm): the rewrite "
                     "fuse_mul_into_gemm folds the scale into the weight along the wrong axis and build() raises "
                     "('operands could not be broadcast together'); with transB=1 or N == K it builds"),
              C("linear_pair_add", [r"x\.Gemm\.ctx=dual_head\."], "unsupported",
                note="two linear layers by constant weights reading one input (directly or through a BatchNormalization "
                     "each) with their results added, as a distilled classifier's (head(x) + head_dist(x)) / 2 "
                     "exports (timm RepViT, EfficientFormer, LeViT): the compiler turns both into 1x1 Convs and "
                     "its rewrite fuse_conv_conv_add raises ('NoneType' object is unsliceable), for Gemm and "
                     "MatMul + bias, rank 2 or 3, any K and N, with or without bias or Div; Sub or Mul of the "
                     "two, two different inputs, one head, and two real Convs build"),
              probes=[r"pattern\.gemm_bn1d", r"pattern\.classifier_head"]),
    "Einsum": E("npu",
                C("einsum_equation_in", [r"x\.Einsum\..*spaces=yes", r"x\.Einsum\..*spaces=(no|arrow|comma)",
                                         r"Einsum\.eq=", r"x\.Einsum\.ctx=letters\.", r"x\.Einsum\.ctx=relpos5\."],
                  values=EINSUM_NPU,
                  note="an equation with spaces between the subscript letters ('b i d, b j d -> "
                       "b i j', as einops-style torch.einsum calls write it) or before a comma ('bhlk , bhtk "
                       "-> bhlt') runs on the CPU; the same equation without them runs on the NPU (a space "
                       "after ',' or around '->' is fine). Which letters name the subscripts does not "
                       "matter (x.Einsum.ctx=letters.*: CvT's 'bhlk,bhtk->bhlt', capitals): the equations "
                       "are compared with their letters renamed in order of first appearance. Only probed "
                       "forms are listed: an unlisted form is predicted CPU"),
                note="the probed equations were lowered to NPU MatMul/Transpose/Mul."),
    # -- convolution -------------------------------------------------------------------------------
    "Conv": E("npu",
              C("any_of", [r"x\.Conv\.ctx=pad1d\."], "unsupported",
                constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4}},
                             {"rule": "attr_not_in", "params": {"attr": "auto_pad", "values": ["SAME_UPPER", "SAME_LOWER"]}}],
                note="a 1-D Conv (rank-3 input) padded by auto_pad SAME_UPPER or SAME_LOWER makes build() fail: "
                     "rknn-toolkit2 2.5.0 makes it a 2-D Conv and keeps the auto_pad beside the pads it adds (ONNX "
                     "Runtime refuses 'both auto_pad and pads' in fold_constant; a kernel-32 one is cut by "
                     "seperate_large_kernel_conv first; LASR's Conformer conv). The same padding as explicit pads, "
                     "VALID, and a rank-4 SAME_UPPER Conv build (x.Conv.ctx=pad1d.*)"),
              probes=[r"pattern\.conv_", r"opset\.\d+\.conv", r"x\.Conv\.ctx=dual_head\."],
              note="the published RK3588 limits (kernel <= 31, stride <= 7, pads <= 15, "
                   "dilation <= 31; doc 2.3.2 sec. 3.2.5) are not placement limits in 2.5.0: "
                   "kernel 32, stride 8, pads 16 and dilation 32 compile to several NPU ops "
                   "(probes Conv.k=32, Conv.k=3.s=8, Conv.k=3.p=16, Conv.k=3.d=32). 1-D and "
                   "3-D convolutions also ran on the NPU."),
    "ConvTranspose": E("npu", note="stride 3 adds a CPU padding helper (exConvTransposePad) "
                                   "but the convolution itself runs on the NPU; the 1.4.0 "
                                   "doc's stride in {2,4,8} is not a placement limit."),
    # -- normalisation -----------------------------------------------------------------------------
    "BatchNormalization": E(
        "npu",
        C("attr_in", [r"x\.BatchNormalization\.ctx=train="], "unsupported", before_rewrites=True,
          attr="training_mode", values=[0],
          note="training_mode=1 (what TorchScript writes for F.batch_norm(..., training=True), e.g. BiT's "
               "weight standardisation of its Conv weights) makes build() fail ('is in Training mode, which "
               "is not supported'), with one output or three, of a weight or of an activation"),
        probes=[r"pattern\.conv_bn", r"pattern\.gemm_bn1d"],
        note="folded into a preceding Conv/Gemm (fuse_conv_bn)."),
    "InstanceNormalization": E("npu"),
    "LpNormalization": E("npu"),
    "LayerNormalization": E(
        "npu",
        C("attr_present", [r"LayerNormalization\.axis=m1\.(bias=no|outputs=3)", r"x\.LayerNormalization\.ctx=no_bias\."],
          "unsupported", attrs=["epsilon"],
          note="a LayerNormalization that does not write its epsilon attribute makes build() fail (KeyError "
               "'LayerNormalization'), with or without its bias input, at opset 17 and 18; with epsilon written "
               "the two-input form (no bias: OLMo, MPT, ModernBERT) builds and runs on the NPU "
               "(x.LayerNormalization.ctx=no_bias.*). The op probes of the bias-less and the 3-output forms "
               "wrote no epsilon"),
        C("any_of", [r"LayerNormalization\.axis=0\.", r"x\.LayerNormalization\.ctx=axes\.axis=0\."], "unsupported",
          constraints=[_NOT_RANK4, {"rule": "axis_in", "params": {"values": [1, 2, 3]}}, _BATCH2],
          note="a LayerNormalization over all four axes of a batch-1 rank-4 tensor makes build() fail "
               "(rewrite swap_reshape_norm: 'cannot reshape array of size N*C*H*W into shape (1, N, 1, 1)')"),
        C("any_of", [r"LayerNormalization\.axis=1\.f32\.r4", r"x\.LayerNormalization\.ctx=axes\.axis=(1|m3)\."],
          "unsupported",
          constraints=[_NOT_RANK4, {"rule": "axis_in", "params": {"values": [0, 2, 3]}}, _BATCH2,
                       {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 2, "not_multiple_of": 8}},
                       {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 3, "max": 1}}],
          note="a LayerNormalization over (C, H, W) of a batch-1 rank-4 tensor (torch's nn.LayerNorm([C, H, "
               "W]) after a Conv) makes build() fail when H is a multiple of 8 and W >= 2 (rewrite "
               "swap_reshape_norm: 'cannot reshape array of size C*H*W into shape (1, C, H, 1)'; H = 8, 16, 24, "
               "32, 40, 56 failed); H = 2, 4 ... 7, 9, 12, 14, W = 1 or batch 2 build and run on the NPU"),
        C("any_of", [r"x\.LayerNormalization\.ctx=axes\.axis=(1|m3)\."], "unsupported",
          constraints=[_NOT_RANK4, {"rule": "axis_in", "params": {"values": [0, 2, 3]}}, _BATCH2,
                       {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 1, "min": 2}}],
          note="the same over (1, H, W) (one channel) makes build() fail in another rewrite "
               "(squeeze_to_4d_relu, convert_identity_to_reshape) at any H and W"),
        probes=[r"pattern\.layernorm_decomposed"],
        note="compiled to exNorm. The 3-output op probe failed without an epsilon attribute (the rule above); "
             "the 3-output form with epsilon is not probed."),
    "GroupNormalization": E("cpu", note="the opset-18 form runs on the CPU; the opset-21 form "
                                        "cannot be loaded (opset > 19)."),
    "MeanVarianceNormalization": E("cpu"),
    "LRN": E("cpu"),
    "Softmax": E("npu", C("producer_pass", [r"x\.Softmax\.ctx=where_mask\."], index=0, ops=["Where"],
                          skip=["Reshape"],
                          constraint={"rule": "any_of", "params": {"constraints": [
                              {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -2, "min": 2}},
                              {"rule": "const_input", "params": {"index": 0}}]}},
                          note="a Softmax reading, through the Reshape that merges batch and heads, a Where whose "
                               "condition is broadcast over the queries (a padding mask (1, 1, 1, T): FSMT) is fused "
                               "with it into exSoftmaxMask, which runs on the CPU; with a (1, 1, T, T) mask, a constant "
                               "condition (SEW-D's all-False mask) or a Relu between them, the Softmax stays on the NPU "
                               "(x.Softmax.ctx=where_mask.*; the Where "
                               "straight into the Softmax makes build() abort: see Where)"),
                 C("any_of", [r"Softmax\.axis=m1\.(wide|shape=)|x\.Softmax\.ctx=attn_size\."],
                          constraints=[{"rule": "elements_max", "params": {"tensor": "input", "index": 0,
                                                                           "axes": [2, 3], "max": 65536}},
                                       {"rule": "producer_is", "params": {"index": 0, "chain": ["MatMul"],
                                                                          "skip": ["Div", "Mul"]}}],
                          note="rank-4 inputs with H*W > 65536 fall back to the CPU ('align_surf overflow'; "
                               "measured with axis=-1) when the Softmax reads a graph input or a masked Add; "
                               "reading the scores MatMul (q @ k^T, directly or through the scale Mul/Div) it "
                               "ran on the NPU at every probed size, 257 x 257 to 1024 x 1024, alone or in a "
                               "fused attention (x.Softmax.ctx=attn_size.*)"),
                 probes=[r"ctx\.Softmax", r"pattern\.attention"],
                 note="compiled to exSoftmax13 for every axis (the 2.3.2 doc's 'axis 1 or 3 "
                      "only' is not a placement limit in 2.5.0)."),
    "LogSoftmax": E("cpu", probes=[r"ctx\.LogSoftmax"]),
    # -- reductions --------------------------------------------------------------------------------
    "ReduceMean": E("npu",
                    C("const_input", [r"ReduceMean\.axes=dyn"], "unsupported", index=1,
                      note="non-constant axes make build() fail"),
                    note=_REDUCE_AXIS0_NOTE,
                    probes=[r"ctx\.ReduceMean", r"pattern\.layernorm_decomposed", r"x\.ReduceMean\.ctx=axis0\."]),
    "ReduceSum": E("npu", note=_REDUCE_AXIS0_NOTE, probes=[r"x\.ReduceSum\.ctx=axis0\."]),
    "ReduceL2": E("npu"),
    "ReduceMax": E("cpu", probes=[r"ctx\.ReduceMax"]),
    "ReduceMin": E("cpu"),
    "ReduceProd": E("cpu"),
    "ReduceSumSquare": E("cpu"),
    "ReduceLogSumExp": E("cpu"),
    "ReduceL1": E("cpu"),
    "ArgMax": E("cpu"),
    "ArgMin": E("cpu"),
    # -- pooling -----------------------------------------------------------------------------------
    "MaxPool": E("npu", C("rank", [r"MaxPool\.k=2\.s=2\.f32\.r5"], "unsupported", tensor="input",
                          index=0, max=4, note="a rank-5 (3-D) MaxPool crashed the compiler"),
                 note="kernels above the documented 7 (8, 9, 13, 16), strides above 8, "
                      "ceil_mode=1, dilations and auto_pad all compiled to NPU MaxPools "
                      "(doc 2.3.2 sec. 3.2.44 lists kernel <= 7, ceil_mode unsupported). "
                      "Not expressible here: asking for the Indices output moves it to the "
                      "CPU (errata)."),
    "AveragePool": E(
        "npu",
        C("any_of", [r"AveragePool\.k=(3\.s=[12]\.p=1|5\.s=1\.p=2|9\.s=1|13\.s=1)\.f32",
                     r"AveragePool\.k=1x3", r"ctx\.AveragePool"],
          constraints=[{"rule": "attr_range", "params": {"attr": "pads", "max": 0}},
                       {"rule": "attr_in", "params": {"attr": "count_include_pad", "values": [1]}}],
          note="padded average pools run on the CPU unless count_include_pad=1 (a padded pool "
               "with count_include_pad=1 ran on the NPU in the real-model check)"),
        C("any_of", [r"AveragePool\.k=\d\.s=2\.ceil=1", r"x\.AveragePool\.ctx=ceil\."],
          constraints=[{"rule": "attr_in", "params": {"attr": "count_include_pad", "values": [1]}},
                       {"rule": "pool_whole_windows", "params": {}}],
          note="ceil_mode=1 with count_include_pad=0 runs on the CPU when it leaves a partial last "
               "window on some axis (ceil and floor give different output sizes: 'AveragePool "
               "count_include_pad=0, fallback to cpu'); where every window is whole (timm's ResNet-D "
               "downsample AvgPool2d(2, 2, ceil_mode=True) of an even map), or with "
               "count_include_pad=1, it runs on the NPU"),
        C("attr_in", [r"AveragePool\.k=3\.auto_pad=SAME_UPPER"], attr="auto_pad",
          values=["NOTSET", "VALID"], note="SAME_* auto padding runs on the CPU")),
    "GlobalAveragePool": E("npu"),
    "GlobalMaxPool": E("npu"),
    "LpPool": E("cpu"),
    # -- padding / resizing ----------------------------------------------------------------------
    "Pad": E("npu",
             C("const_input", [r"Pad\.mode=constant\.pads=dyn"], "unsupported", index=1,
               note="non-constant pads make build() fail ('need to be constant')"),
             C("attr_in", [r"Pad\.mode=wrap"], attr="mode", values=["constant", "reflect", "edge"],
               note="wrap (opset 19) runs on the CPU"),
             C("any_of", [r"Pad\.mode=\w+\.pads=hw\.f32\.r5", r"x\.Pad\.ctx=one_axis\.[\w.]+\.f32\.r5"],
               constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 4}},
                            {"rule": "pad_rank5_one_axis", "params": {}}],
               note="a rank-5 Pad runs on the CPU unless axis 0 has size 1 and one other axis is padded: the "
                    "compiler drops axis 0 and pads a rank-4 tensor on the NPU (LongT5's key/value blocks padded "
                    "on axis 1 of (1, 1, blk, H, d), axes 1, 2 and 4 of (1, 1, 16, 2, 8) and (1, 4, 4, 8, 8): "
                    "x.Pad.ctx=one_axis.*.f32.r5); a rank-5 Pad of zeros leaves no row (Swin3D's window padding of a map "
                    "that holds whole windows; x.Pad.ctx=one_axis.c*.none); three axes of (1, 4, 4, 8, 8), or axis 1 "
                    "of a batch of 2, ran on the CPU"),
             C("any_of", [r"x\.Pad\.ctx=one_axis\.[\w.]+\.i64", r"x\.Pad\.ctx=block_mask\."],
               constraints=[_FLOAT_DATA,
                            {"rule": "pad_not_channel_axis", "params": {}}],
               note="integer (int64) data pads on the NPU unless the channel axis is padded (axis 0 at rank 2, "
                    "axis 1 at rank 3 and 4: the compiler's (N, C, 1, W) layout), into a Cast or as the graph "
                    "output, a rank-3 channel axis of size 1 excepted (LongT5's block mask: the padding mask "
                    "padded to whole blocks, (1, 1, blk) padded by a block on each side of axis 1; "
                    "x.Pad.ctx=one_axis.*.i64, x.Pad.ctx=block_mask.*; the generic integer rule excepts Pad)"),
             C("rank", [r"Pad\.mode=\w+\.pads=hw\.axes=2_3"], tensor="input", index=3, max=0,
               note="giving the opset-18 axes input (input 3, a 1-D tensor, so this rank "
                    "check fails whenever it is present) moves the Pad to the CPU"),
             C("const_value_range", [r"Pad\.mode=constant\.pads=neg"], index=1, min=0,
               note="negative pads (cropping) run on the CPU"),
             C("pad_channel_tail", [r"x\.Pad\.ctx=(side|channel_tail)\.s=\d+x\d+(x\d+)?\."],
               multiple=8, ranks=[2, 3],
               note="a rank-2 or rank-3 constant Pad of the end but not the start of the channel "
                    "axis (axis 1 at rank 3, axis 0 at rank 2: the compiler lays them out as "
                    "(N, C, 1, W)) runs on the CPU unless the channel count is a multiple of 8 "
                    "(MobileBERT's trigram shift pad(x[:, 1:], [0, 0, 0, 1]) of 15 positions); "
                    "padding its start, or both sides, becomes an NPU Conv, and the other axes pad "
                    "on the NPU. Rank 4 is not modelled (errata: the probes ran the same Pad of "
                    "axis 1 on the CPU, Mask2Former's Swin window Pads of (1, H, W, C) maps on the "
                    "NPU)"),
             C("any_of", [r"x\.Pad\.reflect\.pre=conv_in_relu", r"x\.Pad\.reflect\.pre=conv\."],
               constraints=[
                   {"rule": "attr_in", "params": {"attr": "mode", "values": ["constant", "edge"]}},
                   {"rule": "producer_not", "params": {"index": 0, "exclusive": True,
                                                       "chain": ["Relu", "InstanceNormalization"]}}],
               note="a reflect Pad that alone reads InstanceNormalization -> Relu (the second pad "
                    "of a CycleGAN ResnetBlock) runs on the CPU; behind Conv or Conv -> Relu, or "
                    "when the Relu's result is also read elsewhere (a residual branch), it runs on "
                    "the NPU"),
             probes=[r"ctx\.Pad"],
             note="reflect and edge run on the NPU too (doc 2.3.2 sec. 3.2.43 lists constant "
                  "and reflect only); the documented reflect width limit (<= 8176) did not "
                  "move a width-8178 pad to the CPU."),
    "Resize": E(
        "npu",
        C("attr_in", [r"Resize\.mode=cubic"], "unsupported", attr="mode",
          values=["nearest", "linear"], note="mode=cubic crashed the compiler (SIGSEGV)"),
        C("rank", [r"Resize\.mode=\w+\.ctm=\w+\.scale=2\.f32\.r5"], "unsupported",
          tensor="input", index=0, max=4, note="a rank-5 Resize crashed the compiler"),
        C("const_input", [r"Resize\.mode=\w+\.ctm=\w+\.scale=2\.dyn=yes"], "unsupported",
          index=[1, 2, 3], note="non-constant roi/scales/sizes make build() fail"),
        C("attr_not_in", [r"Resize\.mode=linear\.ctm=align_corners",
                          r"ctx\.Resize\.mode=linear\.ctm=align_corners"],
          attr="coordinate_transformation_mode", values=["align_corners"],
          note="linear + align_corners runs on the CPU (errata: nearest + align_corners, and "
               "linear align_corners with scale 8 or from a 1x1 input, ran on the NPU)"),
        C("const_value_range", [r"Resize\.mode=linear\.ctm=(half_pixel|pytorch_half_pixel|"
                                r"asymmetric)\.scale=(1\.5|2\.5|1\.25)", r"ctx\.Resize\.mode=linear"
                                r"\.ctm=half_pixel\.scale=1\.5"],
          index=2, integer=True, ignore=[0.5, 0.25, 0.125],
          note="linear resizes with non-integer up-scales (1.5, 2.5, 1.25) run on the CPU; "
               "integer scales 2..16 and down-scales 1/2, 1/3, 1/4 run on the NPU (errata: "
               "nearest resizes with fractional scales also run on the NPU)"),
        probes=[r"pattern\.fpn_upsample_concat", r"prepass\.shape_resize_sizes", r"ctx\.Resize"],
        note="compiler vs doc 2.3.2 sec. 3.2.54: the doc allows half_pixel, pytorch_half_pixel "
             "and align_corners with integer scales 2..8; the 2.5.0 compiler also puts "
             "asymmetric, tf_half_pixel_for_nn, every nearest_mode, scales up to 16 and "
             "integer down-scales on the NPU, and puts linear+align_corners on the CPU."),
    "Upsample": E("npu", note="opset-9 Upsample is compiled as an NPU Resize."),
    # -- layout ------------------------------------------------------------------------------------
    "Reshape": E("npu",
                 C("rank6_sum_plane", [r"x\.Reshape\.ctx=rank6_merge\."], multiple_of=8,
                   note="a rank-6 sum of two computed tensors viewed back as rank 4 (MViTv2's decomposed relative "
                        "position bias: attn.view(B, h, s, s, s, s) + rel_h + rel_w, then view(B, h, s s, s s)) runs on "
                        "the CPU unless the last two dims hold a multiple of 8 elements: the compiler lays the sum out "
                        "as (B, h s s, s, s) and the Reshape back is a Reshape of that plane (row 'Reshape (1,784,14,14) "
                        "-> (1,4,196,196)' CPU at s = 14, 7, 6, 5, NPU at s = 8, 4, 16: x.Reshape.ctx=rank6_merge."
                        "relpos_in.*); with constant biases the compiler folds the chain and no Reshape is left "
                        "(relpos.*), and a Relu of a rank-6 input viewed as rank 4 ran on the CPU at s = 7, 5 and on the "
                        "NPU at 14, 6 (relu.*: not expressed)"),
                 C("const_input", [r"Reshape\.shape=dyn"], "unsupported", index=1,
                   note="a non-constant shape makes build() fail"),
                 _plane("input"), _plane("output"),
                 C("any_of", [r"x\.Reshape\.ctx=seq_map\.to_map\."],
                   constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 2}},
                                {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4}},
                                {"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 3}},
                                {"rule": "rank", "params": {"tensor": "output", "index": 0, "min": 5}},
                                {"rule": "dtype", "params": {"tensor": "input", "index": 0,
                                                             "allowed": ["int64", "int32", "bool"]}},
                                {"rule": "beside_trivial_transpose", "params": {}},
                                {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": 1,
                                                           "multiple_of": 8}},
                                {"rule": "elements_max", "params": {"tensor": "output", "index": 0, "axes": [2, 3],
                                                                    "max": 1}},
                                {"rule": "elements_multiple_of", "params": {"tensor": "output", "index": 0,
                                                                            "axes": [2, 3], "multiple_of": 8}}],
                   note="a float sequence (N, C, L), which the compiler lays out as (N, C, 1, L), viewed as a map "
                        "(N, C', H, W) runs on the CPU unless C' or H * W is a multiple of 8, or H * W is 1 "
                        "(the zoo's GroupNorm, (1, 30, 1568) -> (1, 240, 14, 14), and ECA's (1, 1, 256) -> "
                        "(1, 256, 1, 1) ran on the NPU; EfficientViM's "
                        "(1, 147, 196) -> (1, 147, 14, 14) between a Conv1d and a depthwise Conv: CPU; 7, 12, 20, 147 "
                        "and 150 channels with 7 x 7, 10 x 10, 14 x 14 maps on the CPU, 8, 16, 24, 40, 48, 128 and 144 "
                        "channels, or 16 x 16 maps, on the NPU, between Convs or Relus, and behind the Transpose of SwiftFormer's "
                        "tokens (1, L, C) -> (1, C, L): 220 channels on 7 x 7 and 147 on 14 x 14 CPU, 112 NPU: "
                        "x.Reshape.ctx=seq_map.to_map.*)"),
                 C("any_of", [r"x\.Reshape\.ctx=window\."],
                   constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 5}},
                                {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 7}},
                                {"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 3}},
                                {"rule": "rank", "params": {"tensor": "output", "index": 0, "min": 5}},
                                {"rule": "producer_not", "params": {"index": 0, "chain": ["Transpose"]}},
                                {"rule": "feeds_not", "params": {"path": ["Transpose"]}},
                                {"rule": "elements_multiple_of", "params": {"tensor": "output", "index": 0,
                                                                            "axes": [1, 2], "multiple_of": 8}}],
                   note="a channels-last window partition or reverse between Transposes (EfficientViT-M: "
                        "(1, H, W, C) -> Reshape (1, H/w, w, W/w, w, C) -> Transpose (0, 1, 3, 2, 4, 5) -> Reshape "
                        "(nW, w, w, C) -> Transpose to channels first, and back): the compiler merges the chain and "
                        "runs the closing rank-6 -> rank-4 Reshape as a Reshape of the channels-first (h, w) plane, "
                        "on the CPU unless that plane (dims 1 and 2 of the channels-last result: w x w for the "
                        "partition, H x W for the reverse) holds a multiple of 8 elements (windows of 5 and 7, maps "
                        "of 10 x 10 and 14 x 14 on the CPU; windows of 4 and 8, a 28 x 28 map on the NPU: "
                        "x.Reshape.ctx=window.*; the rank-5 Transpose the compiler makes of the Transposes around "
                        "it ran on the CPU in every probe, while the zoo's EfficientViT-M partition kept its "
                        "Transpose on the NPU: not judged)"),
                 C("concat_flatten_plane", [r"x\.Reshape\.ctx=flatten3\.\w+\.concat\."], multiple_of=8,
                   note="a Conv's (N, C, H, W) map flattened to (N, C, H * W) in front of a Concat of such "
                        "flattenings on the last axis (an FPN head) is relaid as the Concat's rows: the compiler "
                        "lays the Concat out as (N, C, L / g, g), g a map width that divides every input's length, "
                        "the one leaving the fewest maps of another width (the earlier input on a tie), removes the flattening of a map g wide and runs any other as a Reshape of "
                        "its H * W plane, on the CPU unless that is a multiple of 8 (maps of 2 x 2 and 8 x 8: "
                        "rows of 2, both on the NPU; 3 x 3 and 8 x 8: rows of 1, the 3 x 3 one on the CPU; the FPN's "
                        "16 x 16, 8 x 8, 4 x 4 and 2 x 2: rows of 4, the 2 x 2 one on the CPU; 8 x 8, 2 x 2 and 4 x 4: "
                        "rows of 2; 6 x 6 and 3 x 3: rows of 3, the 6 x 6 one on the CPU; with no such width (8 x 8 "
                        "and 3 x 3) the Concat relays its input itself, a row of its own glue: "
                        "x.Reshape.ctx=flatten3.*.concat)"),
                 _int_layout([r"Reshape\.case=r2_to_r1\.i64", r"Reshape\..*\.i32", r"x\.Reshape\.ctx=mask_lookup\.i64\.(flatten|unsqueeze2)"],
                             [r"x\.Reshape\.ctx=int_layout\.reshape\.(input|mul)\.cast_"],
                             [r"x\.Reshape\.ctx=int_readers\."], gather_ids=[r"x\.Reshape\.ctx=gather_ids\."]),
                 _mask_swap([r"x\.Reshape\.ctx=mask_(cast|head|lookup)\."], [r"x\.Reshape\.ctx=gather_ids\."]),
                 C("any_of", [r"x\.Reshape\.ctx=gemm_(logsoftmax|none)", r"x\.Reshape\.ctx=rnn_head\."],
                   constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["Gemm"]}},
                                {"rule": "feeds_not", "params": {"path": ["LogSoftmax"]}},
                                {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -1,
                                                           "multiple_of": 4}}],
                   note="a Reshape between a Gemm of 37 outputs and a LogSoftmax (a CPU op; CRNN's "
                        "per-step classifier) runs on the CPU; behind an RNN, with 40 or 64 outputs it stayed "
                        "on the NPU (the RNN rule below tells multiples of 4 from multiples of 8)"),
                 C("any_of", [r"x\.Reshape\.ctx=rnn_head\."], constraints=_rnn_head(8),
                   note=_RNN_HEAD_NOTE % 8),
                 C("any_of", [r"x\.Reshape\.ctx=gemm_none"],
                   constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["Gemm"]}},
                                {"rule": "not_graph_output", "params": {}}],
                   note="a Reshape of a Gemm result that is a graph output runs on the CPU"),
                 probes=[r"prepass\.shape_gather_reshape\.f32", r"Reshape\.case=zero\.allowzero=1"],
                 note="allowzero=1 with an explicit shape, as the dynamo exporter writes every Reshape, builds "
                      "and runs on the NPU (probed again for revision 2); the revision-1 probe of allowzero=1 with "
                      "a 0 in the shape was an invalid model (512 elements to none), not a limit of the compiler."),
    "Flatten": E("npu", _int_layout([r"x\.Reshape\.ctx=mask_lookup\.i64\.(flatten|unsqueeze2)"]),
                 _mask_swap([r"x\.Reshape\.ctx=mask_lookup\.i64\.cast\.flatten"]),
                 C("any_of", [r"x\.Flatten\.ctx="],
                   constraints=[{"rule": "not_graph_output", "params": {"from_node": True}},
                                {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": -1,
                                                           "multiple_of": 8}}],
                   note="a Flatten that produces a graph output from another op's result runs on "
                        "the CPU (the layout conversion back to NCHW) unless its flattened size "
                        "(the output's last dim) is a multiple of 8: a classifier head's "
                        "(1, 1000, 1, 1) -> (1, 1000) stays on the NPU, (1, 10, 1, 1) -> (1, 10) "
                        "does not")),
    "Squeeze": E("npu", _int_layout([], [r"x\.Squeeze\.ctx=int_layout\.squeeze\.input\.cast_"],
                                    gather_ids=[r"x\.Squeeze\.ctx=gather_ids\."])),
    "Unsqueeze": E("npu", _int_layout([r"Unsqueeze\.axes=0\.i(64|32)", r"x\.Reshape\.ctx=mask_lookup\.i64\.(flatten|unsqueeze2)"],
                                      [r"x\.Unsqueeze\.ctx=int_layout\.unsqueeze\.(input|mul)\.cast_",
                                       r"x\.Unsqueeze\.axes=\d\.shape=\w+\.post=cast\.i64"],
                                      [r"x\.Unsqueeze\.ctx=int_(readers\.|layout\.unsqueeze\.input\.mul)"],
                                      gather_ids=[r"x\.Unsqueeze\.ctx=(gather_ids|int_layout\.unsqueeze\.\w+\.gather_idx)\."]),
                   _mask_swap([r"x\.Reshape\.ctx=mask_cast\.i64\.\w+\.unsqueeze"],
                              [r"x\.Unsqueeze\.ctx=(gather_ids|int_layout\.unsqueeze\.\w+\.gather_idx)\."]),
                   C("any_of", [r"x\.Unsqueeze\.axes=2\.ctx=", r"x\.Unsqueeze\.ctx=scatter_upd\."],
                     constraints=[{"rule": "feeds_not", "params": {"path": ["ScatterElements"], "from_node": True}},
                                  {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -1,
                                                             "multiple_of": 8}},
                                  {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 3}}],
                     note="an Unsqueeze of a computed rank-2 tensor that makes the updates of a ScatterElements "
                          "(a CPU op) runs on the CPU as a Reshape when the last axis is not a multiple of 8: the "
                          "compiler holds the tensor as (1, 1, 1, W) and relays it for the CPU op (SimpleBaseline's "
                          "17 keypoints, (1, 17) -> (1, 17, 1) or (1, 1, 17), behind a Sub or a Relu: CPU; 16 or 64 "
                          "on the NPU; a graph input read directly on the NPU: x.Unsqueeze.ctx=scatter_upd.*)"),
                   C("any_of", [r"x\.Unsqueeze\.axes=2\.ctx=", r"x\.Unsqueeze\.ctx=scatter_upd\."],
                     constraints=[{"rule": "feeds_not", "params": {"path": ["ScatterElements"]}},
                                  {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": -1,
                                                             "multiple_of": 8}},
                                  {"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 4}}],
                     note="an Unsqueeze to rank 5 that makes the updates of a ScatterElements runs on the CPU when "
                          "the last axis is not a multiple of 8, computed or a graph input ((1, 32, 1, 17) and "
                          "(1, 3, 1, 17) -> (.., 1, 17): CPU); with 64 on the last axis it stays on the NPU (the "
                          "dynamo select_scatter of MiniCPM-OCR's gated delta rule, (1, 32, 1, 64) -> "
                          "(1, 32, 1, 1, 64) behind a Concat), and a rank-3 input unsqueezed to rank 4 "
                          "((1, 4, 17) -> (1, 4, 1, 17), the compiler's own 4-D layout of it) on the NPU whatever "
                          "its last axis (x.Unsqueeze.ctx=scatter_upd.*)")),
    "Transpose": E("npu", C("any_of", [r"x\.Transpose\.ctx=window_close\."],
                            constraints=[
                                {"rule": "attr_not_in", "params": {"attr": "perm", "values": [[0, 3, 1, 2]]}},
                                {"rule": "producer_not", "params": {"index": 0,
                                                                    "chain": ["Reshape", "Transpose", "Reshape"]}},
                                {"rule": "producer_pass", "params": {"index": 0, "ops": ["Reshape"], "constraint": {
                                    "rule": "rank", "params": {"tensor": "input", "index": 0, "max": 5}}}},
                                {"rule": "producer_is", "params": {"index": 0,
                                                                   "chain": ["Reshape", "Transpose", "Reshape", "Pad"]}}],
                            note="the Transpose (0, 3, 1, 2) back to channels first that closes a channels-last "
                                 "window partition or reverse (Reshape to rank 6 -> Transpose -> Reshape to rank 4: "
                                 "EfficientViT-M's local window attention) runs on the CPU: the compiler merges the "
                                 "chain into a rank-5 CPU Transpose named after it (row 'Transpose <close>#1 "
                                 "(2,2,64,7,7) -> (64,2,7,2,7)'), for windows of 4, 7 and 8; a partition that starts "
                                 "with a Pad (zero or not) becomes an NPU exWindow instead and the Transpose stays "
                                 "on the NPU (x.Transpose.ctx=window_close.*)"),
                   C("any_of", [r"Transpose\.perm=[\d_]+\.f32\.r6",
                                       r"x\.Transpose\.perm=[\d_]+\.shape=[\d_]+\.f32\.r6",
                                r"x\.Transpose\.ctx=unroll\."],
                            constraints=[
                                {"rule": "rank", "params": {"tensor": "input", "index": 0,
                                                            "max": 5}},
                                {"rule": "transpose_blocks", "params": {"max": 4}},
                                {"rule": "window_unroll", "params": {}}],
                            note="a rank-6 transpose runs on the NPU when it moves at most 4 blocks of "
                                 "axes once size-1 axes are dropped and axes that stay neighbours are "
                                 "merged (Swin's window partition/reverse, perm 0,1,3,2,4,5; Hiera's q/k/v "
                                 "split, perm 3,0,4,2,1,5 on (1, N, T, 3, 1, d); 3-block perms at batch 2), "
                                 "else on the CPU (two swaps 0,1,3,2,5,4 of six non-1 axes, pixel-shuffle-"
                                 "like perms, Hiera's q/k/v perm without size-1 axes), except the first block "
                                 "of a window unroll: Hiera's perm 0,2,4,1,3,5 of a Reshape (B, H, W, C) -> "
                                 "(B, H/k, k, W/k, k, C), read by Reshapes, runs on the NPU as exWindow (strides "
                                 "2, 4 and 7, batch 1 and 2, 8 to 32 channels, a channels-last input or Hiera's "
                                 "tokens of a channels-first map: x.Transpose.ctx=unroll.*). The next blocks "
                                 "(the map the merged result of a block) are not judged: the compiler made "
                                 "another exWindow of 6 of the 10 probed and a CPU rank-6 Transpose of 4, "
                                 "depending on the blocks after (2 blocks of 56 x 56 CPU, 3 blocks NPU); they "
                                 "stay CPU"),
                   C("any_of", [r"x\.Transpose\.perm=0_2_1\.ctx=gemm_reshape"],
                     constraints=[{"rule": "producer_not", "params": {"index": 0,
                                                                      "chain": ["Reshape", "Gemm"]}},
                                  {"rule": "rank", "params": {"tensor": "input", "index": 0,
                                                              "min": 4}},
                                  {"rule": "attr_not_in", "params": {"attr": "perm",
                                                                     "values": [[0, 2, 1]]}}],
                     note="a rank-3 Transpose(0, 2, 1) of a reshaped Gemm result (STN's "
                          "affine_grid: fc -> view(-1, 2, 3) -> transpose) runs on the CPU as a "
                          "Reshape; the head transposes of attention blocks (rank 4, or rank 3 "
                          "with perm 1, 0, 2) stay on the NPU"),
                   C("any_of", [r"Transpose\.perm=1_0\.i64", r"Transpose\..*\.i32",
                                r"x\.Transpose\.ctx=int_layout\."],
                     constraints=[_FLOAT_DATA,
                                  {"rule": "transpose_blocks", "params": {"max": 1}},
                                  {"rule": "feeds_only", "params": {"ops": ["Cast"]}}],
                     note="integer (int64/int32) data runs on the CPU, except a Transpose that moves only "
                          "axes of size 1 (XLNet's input_ids.transpose(0, 1) of (1, T)), which leaves no "
                          "row of its own whatever reads it (a Reshape at most, given to its reader), and one "
                          "read only by Casts, which the compiler moves behind the Cast onto the NPU "
                          "(swap_transpose_cast: x.Transpose.ctx=int_layout.*); (4, T) -> (T, 4) into an "
                          "embedding's indices is a CPU Transpose"),
                   C("tile_transpose_perm", [r"x\.Transpose\.ctx=rel_pos_tile\."], "unsupported",
                     perms=[[0, 3, 1, 4, 2], [0, 3, 2, 1, 4]], sources=["Slice", "MatMul"], through=["Relu"],
                     note="BoTNet's tiled relative-position logits (timm rel_logits_1d for the height axis: "
                          "x_pad[:, :W, win - 1:].reshape(B, H, 1, W, win).expand(...).permute(0, 3, 1, 4, 2)) make "
                          "build() fail: rewrite reduce_tp_in_mesh_forward raises ('3 is not in list') for perms "
                          "(0, 3, 1, 4, 2) and (0, 3, 2, 1, 4), B 2 or 4, W 8 or 16, a Slice of the last axis at any "
                          "offset, behind a Relu, or a MatMul in its place; B = 1, the width perm (0, 1, 3, 2, 4) and "
                          "four other perms, no Expand, a Slice of the middle axis, a graph input or its Relu build. "
                          "Only the probed perms and sources are listed"),
                   probes=[r"ctx\.Transpose", r"pattern\.channel_shuffle",
                           r"pattern\.pixel_shuffle"],
                   note="the documented RK3588 h*w <= 8192 limit for some perms (doc 2.3.2) "
                        "did not move fp16 transposes up to 128x128 / 96x96x64 to the CPU. "
                        "A pixel shuffle written as Reshape -> rank-6 Transpose -> Reshape was "
                        "fused into an NPU ConvTranspose (errata); torch exports PixelShuffle "
                        "as DepthToSpace."),
    "Concat": E("npu", _int_unit_split_concat([r"Concat\.axis=0\.i64", r"Concat\..*\.i32"]),
                probes=[r"pattern\.focus", r"pattern\.fpn"]),
    "Split": E("npu", C("any_of", [r"x\.Split\.ctx=qkv_heads\."], "unsupported",
                        constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["Reshape", "Gemm"]}},
                                     {"rule": "feeds_not", "params": {"path": ["MatMul", "Softmax", "MatMul"],
                                                                      "skip": ["Add", "Div", "Mul", "Reshape",
                                                                               "Transpose"]}}],
                        note="the q/k/v Split of a fused projection written as Gemm -> Reshape (GPT-1's Conv1D as "
                             "TorchScript exports it: the tokens flattened to 2-D, a Gemm, reshaped back) that feeds "
                             "an attention whose Softmax feeds the value MatMul makes build() fail: rewrite "
                             "fuse_multihead_attention_reshape_to_gather_split raises ('assignment destination is "
                             "read-only'), with 1 or 2 heads, 16 or 64 tokens, the scores scaled and masked or not, "
                             "behind a LayerNormalization or a Relu; with a float Cast between the Softmax and the "
                             "value MatMul (GPT-2's attn_weights.type(value.dtype): GPT-SW3) the rewrite does not "
                             "match and it builds, as does the split behind a MatMul projection, of a graph input, as "
                             "three Slices, or not feeding an attention")),
    "Slice": E("npu",
               C("const_input", [r"Slice\.starts=dyn"], "unsupported", index=[1, 2, 3, 4],
                 note="non-constant starts/ends/axes/steps make build() fail"),
               _int_unit_split_concat([r"Slice\..*\.i32"]),
               C("any_of", [r"Slice\.axis=\w+\.step=(2|3)\.f32\.r[234]",
                            r"Slice\.axes=2_3\.step=2", r"Slice\.axis=1\.step=m1\.f32\.r4",
                            r"ctx\.Slice", r"x\.Slice\.ctx=s2d\.", r"x\.Slice\.ctx=(two_slices|slice_pair)\."],
                 constraints=[{"rule": "const_value_range", "params": {"index": 4, "min": 1, "max": 1}},
                              {"rule": "space_to_depth", "params": {}},
                              {"rule": "second_of_slice_pair", "params": {}}],
                 note="steps other than 1 run on the CPU (errata: a reversing step -1 on the "
                      "last axis of a rank-3 tensor ran on the NPU), except the Slices of a space-to-depth: "
                      "the four stride-2 quadrants of one rank-4 tensor concatenated in the order (0, 0), "
                      "(1, 0), (0, 1), (1, 1) on the remaining axis, channels first (YOLOv5's Focus) or "
                      "channels last (Swin's patch merging), one two-axis Slice or a row and a column Slice "
                      "per quadrant, are fused into one stride-2 Conv (rewrite fuse_focus_slice2; probe "
                      "family x.Slice.ctx=s2d.*). Another quadrant order, two or three quadrants, or a "
                      "Concat on another axis is not fused and the stride-2 row Slices run on the CPU. "
                      "A Slice whose only reader is a Slice of other axes is merged with it into one Slice named "
                      "after the first (fuse_two_slice): the second passes here, the first is judged by both "
                      "steps (the constraint below); two Slices of one axis, or a first Slice with a second "
                      "reader, stay two, each judged by its own step (x.Slice.ctx=two_slices.*, slice_pair.*)"),
               C("slice_pair_steps", [r"x\.Slice\.ctx=(two_slices|slice_pair)\."],
                 note="a Slice read only by a Slice of other axes runs on the CPU when that reader's step is not "
                      "1: the compiler merges the pair into one Slice named after the first (LeViT's queries "
                      "subsample x[:, ::2, ::2] as two Slices; a crop then a stride, the stride first, rank 3 and "
                      "4, either axis order: one CPU row, the first's; two crops: NPU; x.Slice.ctx=two_slices.*, "
                      "slice_pair.*)"),
               probes=[r"pattern\.focus"],
               note="matches doc 2.3.2 sec. 3.2.55 (steps must be 1) but for the space-to-depth. "
                    "In a block that is not fused, the column Slice of a row-sliced quadrant ran on the NPU "
                    "(x.Slice.ctx=s2d.*.quads=2): it is the second of a merged Slice pair. A Concat with a fifth input after "
                    "the four quadrants, or nine stride-3 pieces, made build() fail (x.Slice.ctx=s2d.*."
                    "extra_input, step=3). A lone rank-5 Slice "
                    "became a CPU Gather in the probes (errata), but rank-5 slices that "
                    "partition an axis (YOLO decode heads: [..., :2], [..., 2:4], [..., 4:]) "
                    "were merged into an NPU Split, so no rank limit is given."),
    "Gather": E("npu", C("const_input", [r"Gather\.axis=1\.idx=dyn", r"Gather\.axis=0\.case=emb"],
                         index=1, note="non-constant indices (e.g. token-embedding lookups) run "
                                       "on the CPU"),
                _int_layout([r"Gather\.axis=1\.idx=const_vec\.i(32|64)", r"x\.Reshape\.ctx=mask_lookup\.i64\.flatten"]),
                probes=[r"pattern\.gather_scalar_relu"],
                note="constant indices are lowered to NPU Slice/Conv."),
    "GatherElements": E("npu", C("const_input", [r"GatherElements\.axis=\w+\.idx=dyn"], index=1,
                                 note="non-constant indices run on the CPU")),
    "GatherND": E("npu", C("gathernd_in_order", [r"x\.GatherND\.ctx=lookup\.", r"GatherND\."],
                           note="a GatherND whose constant indices pick every element of its data once, in "
                                "order (the dynamo exporter's padding-mask lookup mask[batch_idx, kv_idx]), is "
                                "rewritten into a Reshape (remove_invalid_gathernd) and runs with its "
                                "neighbours; indices that reverse, repeat or skip elements, or are computed, "
                                "keep a CPU GatherND. Indices of more than 64 values are not read by the "
                                "checker (judged CPU)"),
                  C("producer_pass", [r"x\.GatherND\.ctx=lookup\.mask\."], index=0, ops=["Cast", "Equal"],
                    constraint={"rule": "dtype", "params": {"tensor": "input", "index": 0,
                                                            "allowed": ["bool", "float16", "float32"]}},
                    note="the Reshape it becomes follows the Reshape's rule: " + _MASK_SWAP_NOTE + ". The "
                         "CPU row is named after the GatherND (held-out ALBERT, dynamo) or after the mask "
                         "input (the probe, OPT), whichever the compiler's rewrite chain kept"),
                  note="runs on the CPU unless it is a reshape (the constraints)."),
    "ScatterND": E("npu",
                   C("const_input", [r"ScatterND\.idx=dyn"], index=1,
                     note="non-constant indices run on the CPU"),
                   C("attr_in", [r"ScatterND\.reduction=(add|mul)"], attr="reduction",
                     values=["none"], note="reduction add/mul runs on the CPU")),
    "ScatterElements": E("cpu"),
    "Expand": E("npu", C("const_input", [r"Expand\.shape=dyn"], "unsupported", index=1,
                         note="a non-constant shape makes build() fail"),
                C("any_of", [r"Expand\.from=1_8_16_16\.to=2_8_16_16", r"ctx\.Expand\.to=batch2",
                             r"x\.Expand\.ctx=expand_shape\.", r"Expand\.from=1_32\.to=16_32"],
                  constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 2}},
                               {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": 0, "max": 1}},
                               {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 0, "min": 2}}],
                  note="expanding axis 0 (1 -> n) of a rank-3 to rank-5 tensor runs on the CPU (a batch "
                       "expansion); a rank-2 or rank-1 input expanded on axis 0 ran on the NPU"),
                C("not_rank5_axis1_broadcast", [r"x\.Expand\.ctx=rank5_axis1\.", r"x\.Expand\.ctx=kv_repeat\.head_axis\."],
                  note="a rank-5 broadcast of axis 1 (1 -> n) behind a leading axis of size 1, axis 2 kept, runs on the CPU: the "
                       "compiler drops the leading axis and expands the batch axis of a rank-4 tensor (GCViT's global "
                       "query (1, 1, 7, 7, C) tiled over the windows: 'Expand (1, 7, 7, C) -> (B, 7, 7, C)' CPU); with "
                       "axis 0 of size 2, axis 2 repeated too, or axis 2 alone it ran on the NPU, as Tile and as Expand "
                       "(x.{Tile,Expand}.ctx=rank5_axis1.*, x.Expand.ctx=kv_repeat.head_axis)"),
                C("any_of", [r"x\.Expand\.ctx=(repeat_between|kv_repeat|gqa_k|kv_path|kv_tail|kv_shared|kv_norm)\."],
                  constraints=[{"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 1, "min": 2}},
                               {"rule": "producer_not", "params": {"index": 0, "chain": ["MatMul"], "skip": [
                                   "Add", "Cast", "Concat", "Div", "Mul", "Neg", "Pow", "Reciprocal", "ReduceMean",
                                   "Relu", "Reshape", "Slice", "Split", "Sqrt", "Sub", "Transpose", "Unsqueeze"],
                                   "computed_input": True,
                                   "max_skip": 24}},
                               {"rule": "feeds_not", "params": {"path": ["MatMul"], "skip": [
                                   "Cast", "Concat", "Div", "Mul", "Reshape", "ScatterND", "Transpose"]}}],
                  note="the key/value repeat of multi-query attention (one K/V head, axis 1 of size 1, repeated "
                       "over the query heads: Unsqueeze -> Expand -> Reshape, with the shape written in full or "
                       "with ones as the dynamo exporter writes repeat_interleave, and the rank-4 Expand of the "
                       "head axis) runs on the CPU between the K/V projection MatMul and the attention MatMul "
                       "(the compiler lays the tensor out as (1, T, 1, d) and expands the batch axis); two K/V "
                       "heads, or a repeat that does not sit between two MatMuls, ran on the NPU "
                       "(x.Expand.ctx=repeat_between.*, x.Expand.ctx=kv_repeat.*), however many element-wise and "
                       "layout ops sit on the key path (QK-norm, rotary embedding and the Casts of a TorchScript "
                       "export: ten and more; Phi-3's Slice of a fused q/k/v projection and its rotary embedding "
                       "over part of the head, Sliced and Concatenated back; GPT-BigCode's Split of a fused k/v "
                       "projection: x.Expand.ctx=kv_path.*), and however the key is put together after it "
                       "(multi-head latent attention's rotary part of the key, one head expanded over all of "
                       "them, joined to the per-head part by a Concat or written into the key by a ScatterND "
                       "as TorchScript exports DeepSeek-V3, its rotary ending in a Sub; a Cast before the "
                       "scores: x.Expand.ctx=kv_tail.*), whether or not the key and value Expands read one shape "
                       "constant, as dynamo writes it (x.Expand.ctx=kv_shared.*), and behind an RMSNorm written "
                       "with Reciprocal or Div (x.Expand.ctx=kv_norm.*). Not expressed: the dynamo exports of "
                       "FLINT, OLMo-2 and OLMo-3 ran the value repeat on the NPU (the key repeat on the CPU); cut "
                       "down on the compiler, that held only while their input RMSNorm wrote rsqrt as Reciprocal, "
                       "which the compiler does not fuse (replace_rms_norm fuses the Div form, and the value "
                       "repeat went to the CPU), and its per-head q/k norms too; a Llama block with both norms "
                       "in the Reciprocal form ran one of its repeats on the NPU as an expansion of axis 2, the "
                       "key's (x.Expand.ctx=kv_norm.reciprocal.qk=reciprocal.*, in the self-check list), with "
                       "either in the Div form none: which repeat is not told by the graph"),
                C("feeds_not", [r"x\.Expand\.ctx=attn_mask_", r"x\.Expand\.ctx=sdpa_mask_cast\."],
                  path=["Add", "Softmax", "MatMul"], skip=["Cast", "Reshape"],
                  note="the Expand of an additive attention mask runs on the CPU when RKNN "
                       "fuses the attention (MatMul -> Add(mask) -> Softmax -> MatMul) into "
                       "exSDPAttention; without the second MatMul it stays on the NPU; float Casts to float "
                       "between the Softmax and the MatMul or between the Expand and the Add (TorchScript's "
                       "Doge: Softmax -> Cast -> Cast -> MatMul) do not stop the fusion, nor does a rank-5 "
                       "Expand of the heads Reshaped back to rank 4 (x.Expand.ctx=sdpa_mask_cast.*)"),
                C("producer_pass", [r"x\.Expand\.ctx=mask_cast_swap\.", r"x\.Reshape\.ctx=mask_cast\.i(64|32)\.bool\.\w+\.expand"],
                  index=0, ops=["Cast"], skip=_MERGED_LAYOUT,
                  constraint={"rule": "any_of", "params": {"constraints": [
                      {"rule": "dtype", "params": {"tensor": "input", "index": 0,
                                                   "allowed": ["bool", "float16", "float32", "int32", "int8"]}},
                      {"rule": "attr_not_in", "params": {"attr": "to", "values": [9]}}]}},
                  note="behind an int64 -> bool Cast of a mask, through the layout ops between them (Unsqueeze, "
                       "Reshape), the compiler moves the Cast after the Expand, which then runs on the int64 data "
                       "on the CPU (the dynamo export of Reformer: Cast -> Unsqueeze -> Unsqueeze -> Expand -> "
                       "Where); behind an int32 -> bool Cast, a Cast to float or a bool mask it stayed on the NPU "
                       "(x.Expand.ctx=mask_cast_swap.*)"),
                note="an Expand of axis 1 from size 1 over five axes whose axis 2 stays 1 (x.Expand.ctx="
                     "kv_repeat.head_axis) ran on the CPU (errata)."),
    "Tile": E("npu",
              C("any_of", [r"Tile\.repeats=2_1\.", r"Tile\.repeats=1_1_3\.", r"Tile\.repeats=1_4_1",
                           r"Tile\.repeats=1_1_2_1_1", r"x\.Tile\.ctx=broadcast\."],
                constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4, "max": 4}},
                             {"rule": "tile_broadcast", "params": {}}],
                note="only rank-4 tiles ran on the NPU, and tiles of any rank that repeat only axes of size 1 "
                     "(a broadcast: SwiftFormer's (1, 1, C) query tiled over the tokens became an NPU Expand, "
                     "repeats of ones were removed; x.Tile.ctx=broadcast.*)"),
              C("any_of", [r"Tile\.repeats=2_1_1_1", r"x\.Tile\.ctx=broadcast\.r[23]\.axis0",
                           r"x\.Tile\.ctx=rank5_axis1\.a1\.batch2"],
                constraints=[{"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": 0, "max": 1}},
                             {"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 2}},
                             {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 0, "min": 2}}],
                note="tiling the batch axis (1 -> n) runs on the CPU (a rank-2 broadcast of axis 0 ran on the NPU, "
                     "as the Expand it becomes does; a batch of 2 that is not repeated, tiled on axis 1, ran on "
                     "the NPU: x.Tile.ctx=rank5_axis1.a1.batch2)"),
              C("not_rank5_axis1_broadcast", [r"x\.Tile\.ctx=rank5_axis1\."],
                note="a rank-5 broadcast of axis 1 (1 -> n) behind a leading axis of size 1, axis 2 kept, runs on the CPU: the "
                       "compiler drops the leading axis and expands the batch axis of a rank-4 tensor (GCViT's global "
                       "query (1, 1, 7, 7, C) tiled over the windows: 'Expand (1, 7, 7, C) -> (B, 7, 7, C)' CPU); with "
                       "axis 0 of size 2, axis 2 repeated too, or axis 2 alone it ran on the NPU, as Tile and as Expand "
                       "(x.{Tile,Expand}.ctx=rank5_axis1.*, x.Expand.ctx=kv_repeat.head_axis)"),
              C("any_of", [r"x\.Tile\.ctx=broadcast\.kv_(repeat|heads)\."],
                constraints=[{"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 1, "min": 2}},
                             {"rule": "producer_not", "params": {"index": 0, "chain": ["MatMul"], "skip": [
                                 "Add", "Cast", "Concat", "Div", "Mul", "Neg", "Pow", "Reciprocal", "ReduceMean",
                                 "Relu", "Reshape", "Slice", "Split", "Sqrt", "Transpose", "Unsqueeze"],
                                 "computed_input": True, "max_skip": 24}},
                             {"rule": "feeds_not", "params": {"path": ["MatMul"], "skip": [
                                 "Div", "Mul", "Reshape", "Transpose"]}}],
                note="the key/value repeat of multi-query attention written as a Tile (TorchScript's "
                     "repeat_interleave: one K/V head tiled over the query heads between the projection and the "
                     "attention MatMul) becomes the Expand of that repeat and runs on the CPU, as the Expand "
                     "does; with two K/V heads on the NPU (x.Tile.ctx=broadcast.kv_repeat.*)"),
              note="repeating more than one axis ([1,1,2,2], [1,2,2,1]) runs on the CPU, not "
                   "expressible here (errata)."),
    "DepthToSpace": E("npu",
                      C("attr_in", [r"x\.DepthToSpace\.blocksize=[35]\.", r"DepthToSpace\.blocksize=[24]",
                                    r"x\.DepthToSpace\.blocksize=[24]\."],
                        attr="blocksize", values=[2, 4],
                        note="blocksize 3 and 5 (e.g. PixelShuffle(3) in ESPCN x3) run on the CPU, "
                             "in both modes, for 1-4 output channels and after a Conv; 2 and 4 "
                             "run on the NPU (other sizes not probed)"),
                      probes=[r"pattern\.pixel_shuffle"],
                      note="DCR and CRD, compiled as ConvTranspose."),
    "SpaceToDepth": E("cpu", probes=[r"ctx\.SpaceToDepth"]),
    # -- index / sequence ops ----------------------------------------------------------------------
    "TopK": E("cpu", probes=[r"ctx\.TopK"]),
    "CumSum": E("npu", note="compiled as a Conv."),
    "Trilu": E("cpu"),
    "OneHot": E("cpu"),
    "GridSample": E("cpu", probes=[r"ctx\.GridSample"]),
    "NonZero": E("unsupported", note="build() fails: 'need to be constant ... dynamic graph'."),
    "Range": E("npu", C("const_input", [r"Range\.limit=dyn"], "unsupported", index=[0, 1, 2],
                        note="non-constant inputs make build() fail"),
               note="folded when its inputs are constant."),
    "Shape": E("npu", probes=[r"prepass\.shape_"],
               note="always folded with static input shapes (fold_shape_ops). A model whose "
                    "outputs are all constants (e.g. only the Shape of its input) fails "
                    "build() (errata)."),
    "Size": E("cpu", note="a Size feeding the graph output was not folded and ran on the CPU "
                          "(fold_shape_ops folds it in the table's evaluation: errata)."),
    "ConstantOfShape": E("npu", C("const_input", [r"ConstantOfShape\.shape=dyn"], "unsupported",
                                  index=0),
                         C("attr_present", [r"x\.ConstantOfShape\.ctx=value="], "unsupported", before_rewrites=True,
                           attrs=["value"],
                           note="without its value attribute (the default float32 zero; torch's dynamo exporter "
                                "writes zeros that way in some models) load_onnx fails ('numpy.ndarray' object has "
                                "no attribute 'data_type'), of a constant or of a computed shape; with the value "
                                "written it is folded or runs"),
                         note="folded when its shape is constant."),
    "Constant": E("npu", probes=[r"prepass\.constant_node"], note="folded."),
    "RandomUniform": E("unsupported", note="build() fails: 'Found Random node'."),
    "RandomNormal": E("unsupported", note="build() fails: 'Found Random node'."),
    "RandomUniformLike": E("unsupported", note="build() fails: 'Found Random node'."),
    "RandomNormalLike": E("unsupported", note="build() fails: 'Found Random node'."),
    "Bernoulli": E("cpu"),
    # -- recurrent ---------------------------------------------------------------------------------
    "LSTM": E("npu", C("input_count", [r"LSTM\.dir=forward\.bias=no"], "unsupported", min=4,
                       note="an LSTM without the B input crashed the compiler; only caught "
                            "when no later optional input is given (errata)"),
              C("attr_absent", [r"LSTM\..*layout="], "unsupported", attrs=["layout"],
                note="an explicit 'layout' attribute (even layout=0, as the dynamo exporter "
                     "writes it) makes build() fail with 'Unrecognized attribute: layout'"),
              note="compiled to exLSTM."),
    "GRU": E("npu", C("input_count", [r"GRU\.dir=forward\.bias=no"], "unsupported", min=4,
                      note="a GRU without the B input crashed the compiler; only caught when "
                           "no later optional input is given (errata)"),
             C("attr_absent", [r"GRU\..*layout="], "unsupported", attrs=["layout"],
               note="an explicit 'layout' attribute makes build() fail with 'Unrecognized "
                    "attribute: layout'"),
             note="compiled to exGRU; linear_before_reset 0 and 1."),
    "RNN": E("cpu"),
    # -- ops that only exist at opsets RKNN 2.5.0 rejects ------------------------------------------
    "Gelu": E("unsupported", opset=[20, 23],
              note="Gelu exists from opset 20, which RKNN 2.5.0 rejects at load_onnx; export "
                   "at opset <= 19 (GELU becomes Div/Erf/Add/Mul/Mul, fused to exGelu)."),
    "Attention": E("unsupported", opset=[23, 23], note="opset 23 only; rejected at load_onnx."),
    "RMSNormalization": E("unsupported", opset=[23, 23],
                          note="opset 23 only; rejected at load_onnx."),
}

GENERIC = [
    C("static_shape", [r"dynamic\.(batch|hw|unknown_dim|seq)\.(conv_relu|matmul_softmax)",
                       r"prepass\.shape_gather_reshape\.dynbatch"],
      "unsupported", tensors="inputs",
      note="symbolic/unknown input dims make load_onnx fail unless the shapes are fixed with "
           "load_onnx(inputs=..., input_size_list=...) or config(dynamic_input=...) (probes "
           "dynamic.*.fixed_by_load / dynamic.*.dynamic_input build)"),
    C("dtype", [r"(Add|Sub|Mul)\.b=same\.i64", r"Abs\.i64", r"Neg\.i64", r"Concat\.axis=0\.i64",
                r"Transpose\.perm=1_0\.i64", r"Reshape\.case=r2_to_r1\.i64",
                r"Unsqueeze\.axes=0\.i(64|32)", r"(Reshape|Transpose|Concat|Slice)\..*\.i32",
                r"Gather\.axis=1\.idx=const_vec\.i(32|64)", r"CumSum\.axis=1\.i64"],
      tensor="input", index=0, allowed=["float32", "float16", "bool"],
      note="integer (int64/int32) data tensors run on the CPU; bool data moves on the NPU"),
]
GENERIC[1]["except_ops"] = ["ai.onnx:Cast", "ai.onnx:Shape", "ai.onnx:Size", "ai.onnx:Pad",
                            "ai.onnx:ConstantOfShape", "ai.onnx:Range", "ai.onnx:NonZero",
                            "ai.onnx:Div", "ai.onnx:MatMul", "ai.onnx:Transpose", "ai.onnx:Slice",
                            "ai.onnx:Concat"] \
    + ["ai.onnx:" + op for op in _MERGED_LAYOUT]

def _gelu_nodes(mul2_reads_mul_at: int) -> list[dict[str, Any]]:
    """Div -> Erf -> Add -> Mul(., erf + 1) -> Mul: the last Mul reads the first at this input."""
    return [{"id": "div", "op": "Div"}, {"id": "erf", "op": "Erf", "after": ["div"]},
            {"id": "add", "op": "Add", "after": ["erf"]},
            {"id": "mul", "op": "Mul", "after": ["add"], "at_input": {"add": 1}},
            {"id": "mul2", "op": "Mul", "after": ["mul"], "at_input": {"mul": mul2_reads_mul_at}}]


#: a stride-2 Slice of the last axis of a rank-4 tensor (one phase of an interleaved rotary)
_ROTARY_SLICE = [{"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4, "max": 4}},
                 {"rule": "axis_in", "params": {"input": 3, "values": [3]}},
                 {"rule": "const_value_range", "params": {"index": 4, "min": 2, "max": 2}}]


def _rotary_pair_nodes(negate: str | None) -> list[dict[str, Any]]:
    """x[..., 0::2] and x[..., 1::2] of one tensor (either first), one of them through ``negate``
    (Neg, Mul by -1, or nothing), each Unsqueezed on a new last axis and Concatenated there (stack)."""
    nodes: list[dict[str, Any]] = [
        {"id": "slice_a", "op": "Slice", "constraints": _ROTARY_SLICE},
        {"id": "slice_b", "op": "Slice", "same_input_as": "slice_a", "constraints": _ROTARY_SLICE}]
    last_b = "slice_b"
    if negate is not None:
        nodes.append({"id": "negate", "op": negate, "after": ["slice_b"]})
        last_b = "negate"
    return nodes + [{"id": "unsq_a", "op": "Unsqueeze", "after": ["slice_a"]},
                    {"id": "unsq_b", "op": "Unsqueeze", "after": [last_b]},
                    {"id": "stack", "op": "Concat", "after": ["unsq_a", "unsq_b"]}]


def _layernorm_nodes(square_id: str, square_op: str) -> list[dict[str, Any]]:
    """Decomposed LayerNorm; the squaring step is Pow(d, 2) or Mul(d, d)."""
    return [{"id": "mean", "op": "ReduceMean"}, {"id": "sub", "op": "Sub", "after": ["mean"]},
            {"id": square_id, "op": square_op, "after": ["sub"]},
            {"id": "var", "op": "ReduceMean", "after": [square_id]},
            {"id": "eps", "op": "Add", "after": ["var"]},
            {"id": "sqrt", "op": "Sqrt", "after": ["eps"]},
            {"id": "div", "op": "Div", "after": ["sub", "sqrt"]},
            {"id": "gamma", "op": "Mul", "after": ["div"]},
            {"id": "beta", "op": "Add", "after": ["gamma"]}]


#: how a pattern status adopted from a target's probes reads in the pattern's description
_STATUS_WORDS = {"unsupported": "the build fails (no CPU fallback)", "cpu": "runs on the CPU", "npu": "fused on the NPU"}


#: what to do about an RMSNorm the compiler cannot build (probes x.Mul.ctx=rmsnorm_weight.*)
_RMSNORM_FIX = ("; rknn-toolkit2 2.3.2 and later build it on the NPU; written with "
                "torch.reciprocal(torch.sqrt(.)) instead of torch.rsqrt, it builds here too, with the "
                "Reciprocal on the CPU")


def _rmsnorm_nodes() -> list[dict[str, Any]]:
    """RMSNorm as the TorchScript exporter writes it: Pow 2 -> ReduceMean -> Add eps -> Sqrt ->
    Div(1, .) -> Mul x."""
    return [{"id": "pow", "op": "Pow"}, {"id": "mean", "op": "ReduceMean", "after": ["pow"]},
            {"id": "eps", "op": "Add", "after": ["mean"]}, {"id": "sqrt", "op": "Sqrt", "after": ["eps"]},
            {"id": "div", "op": "Div", "after": ["sqrt"]}, {"id": "mul", "op": "Mul", "after": ["div"]}]


def _params_text(params: Mapping[str, Any]) -> str:
    """A constraint's params as the adjustment notes quote them (at most 80 characters)."""
    text = json.dumps(params, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


PATTERNS = [
    {"name": "gelu_erf", "fused_op": "exGelu", "status": "npu",
     "description": "GELU as x/sqrt(2) -> Erf -> +1 -> x * . -> . * 0.5 (the TorchScript "
                    "exporter's order); fused to exGelu (ConvExGelu after a MatMul)",
     "nodes": _gelu_nodes(mul2_reads_mul_at=0),
     "_probes": [r"pattern\.gelu_erf\.div", r"pattern\.ffn_gelu_erf"]},
    {"name": "gelu_erf_half_first", "fused_op": "exGelu", "status": "npu",
     "description": "GELU in the order torch's dynamo exporter writes it: x/sqrt(2) -> Erf -> +1 -> "
                    "0.5 * . -> x * . ; fused from rknn-toolkit2 2.5.0 on (2.2.0 and 2.3.2 left the "
                    "Erf on the CPU). Operand order counts: Mul(erf + 1, x) -> * 0.5 was fused by none",
     "nodes": _gelu_nodes(mul2_reads_mul_at=1),
     "_probes": [r"x\.pattern\.gelu_erf\.half_first"]},
    {"name": "gelu_erf_x_half", "fused_op": "exGelu", "status": "npu",
     "description": "GELU with the half taken of the input beside the Erf branch (SEW-D): x/sqrt(2) "
                    "-> Erf -> +1 and 0.5 * x, joined by Mul(0.5 * x, erf + 1); fused to exGelu. "
                    "Joined the other way round, Mul(erf + 1, 0.5 * x), or without the half, "
                    "x * (1 + erf), the Erf stays on the CPU (x.pattern.gelu_erf.x_half.*)",
     "nodes": [{"id": "div", "op": "Div"}, {"id": "erf", "op": "Erf", "after": ["div"]},
               {"id": "add", "op": "Add", "after": ["erf"]},
               {"id": "half", "op": "Mul", "same_input_as": "div"},
               {"id": "mul", "op": "Mul", "after": ["half", "add"], "at_input": {"half": 0, "add": 1}}],
     "_probes": [r"x\.pattern\.gelu_erf\.x_half\."]},
    {"name": "rotary_interleaved_neg", "fused_op": "Conv", "status": "npu",
     "description": "interleaved rotary (RoFormer, ERNIE 4.5, Helium): the stride-2 Slices x[..., 0::2] "
                    "and x[..., 1::2] of the last axis of a rank-4 tensor, one negated, stacked on a "
                    "new last axis (Unsqueeze, Concat), are rewritten into one Conv "
                    "(fuse_slice_slice_mul_concat_to_conv), so the Slices, CPU ops on their own, run "
                    "on the NPU; at rank 3 the Slices stay on the CPU (x.Slice.ctx=rotary_pair.*)",
     "nodes": _rotary_pair_nodes("Neg"),
     "_probes": [r"x\.Slice\.ctx=rotary_pair\."]},
    {"name": "rotary_interleaved_mul", "fused_op": "Conv", "status": "npu",
     "description": "the interleaved rotary with the negation written as a Mul by -1 (fused as with Neg)",
     "nodes": _rotary_pair_nodes("Mul"),
     "_probes": [r"x\.Slice\.ctx=rotary_pair\."]},
    {"name": "rotary_interleaved", "fused_op": "Conv", "status": "npu",
     "description": "the two phases of the interleaved rotary stacked without a negation (fused as "
                    "with one)",
     "nodes": _rotary_pair_nodes(None),
     "_probes": [r"x\.Slice\.ctx=rotary_pair\."]},
    {"name": "layernorm_pow", "fused_op": "exNorm", "status": "npu",
     "description": "decomposed LayerNorm (ReduceMean, Sub, Pow 2, ReduceMean, Add eps, Sqrt, "
                    "Div, Mul, Add) fused to exNorm",
     "nodes": _layernorm_nodes("pow", "Pow"),
     "_cpu_candidates": ["mean"],
     "_probes": [r"pattern\.layernorm_decomposed\.pow"]},
    {"name": "layernorm_mul", "fused_op": "exNorm", "status": "npu",
     "description": "decomposed LayerNorm squaring with Mul(d, d) instead of Pow",
     "nodes": _layernorm_nodes("sq", "Mul"),
     "_cpu_candidates": ["mean"],
     "_probes": [r"pattern\.layernorm_decomposed\.mul"]},
    {"name": "rmsnorm_div_cast_weight", "fused_op": "exNorm", "status": "npu",
     "description": "RMSNorm with its weight as the TorchScript exporter writes LLaMA's: Pow 2 -> "
                    "ReduceMean -> Add eps -> Sqrt -> Div(1, .) -> Mul x -> Cast (float32 to "
                    "float32) -> Mul weight",
     "nodes": _rmsnorm_nodes() + [{"id": "cast", "op": "Cast", "after": ["mul"]},
                                  {"id": "weight", "op": "Mul", "after": ["cast"]}],
     "_status_candidates": ["unsupported"],
     "_status_notes": {"unsupported": _RMSNORM_FIX},
     "_cpu_candidates": ["mean"],
     "_probes": [r"x\.Mul\.ctx=rmsnorm_weight\.cast\."]},
    {"name": "rmsnorm_div_weight", "fused_op": "exNorm", "status": "npu",
     "description": "RMSNorm with its weight as the TorchScript exporter writes T5's: Pow 2 -> "
                    "ReduceMean -> Add eps -> Sqrt -> Div(1, .) -> Mul x -> Mul weight",
     "nodes": _rmsnorm_nodes() + [{"id": "weight", "op": "Mul", "after": ["mul"]}],
     "_status_candidates": ["unsupported"],
     "_status_notes": {"unsupported": _RMSNORM_FIX},
     "_cpu_candidates": ["mean"],
     "_probes": [r"x\.Mul\.ctx=rmsnorm_weight\.(base|w_first|t=)", r"x\.Div\.ctx=rmsnorm"]},
    {"name": "rmsnorm_div", "fused_op": "exNorm", "status": "npu",
     "description": "RMSNorm as the TorchScript exporter writes it, without a weight Mul after "
                    "it: Pow 2 -> ReduceMean -> Add eps -> Sqrt -> Div(1, .) -> Mul x; fused to "
                    "exNorm, so the scalar-numerator Div (CPU on its own) runs on the NPU",
     "nodes": _rmsnorm_nodes(),
     "_cpu_candidates": ["mean"],
     "_probes": [r"x\.Div\.ctx=rmsnorm", r"x\.Mul\.ctx=rmsnorm_weight\.no_weight\."]},
    {"name": "sdpa_div", "fused_op": "exSDPAttention", "status": "npu",
     "description": "Q@K^T / sqrt(d) -> Softmax -> @V fused to exSDPAttention",
     "nodes": [{"id": "qk", "op": "MatMul"}, {"id": "scale", "op": "Div", "after": ["qk"]},
               {"id": "softmax", "op": "Softmax", "after": ["scale"]},
               {"id": "pv", "op": "MatMul", "after": ["softmax"]}],
     "_probes": [r"pattern\.attention\.mha\.", r"pattern\.attention\.mha_(addmask|vit)"]},
    {"name": "sdpa_mul", "fused_op": "exSDPAttention", "status": "npu",
     "description": "Q@K^T * scale -> Softmax -> @V fused to exSDPAttention",
     "nodes": [{"id": "qk", "op": "MatMul"}, {"id": "scale", "op": "Mul", "after": ["qk"]},
               {"id": "softmax", "op": "Softmax", "after": ["scale"]},
               {"id": "pv", "op": "MatMul", "after": ["softmax"]}],
     "_probes": [r"pattern\.sdpa\."]},
]

PREPASS_PROBES = {
    "eliminate_identity": [r"prepass\.(identity|dropout)_middle"],
    "fold_constants": [r"prepass\.fold_constant", r"prepass\.constant_node",
                       r"prepass\.const_transpose_weight", r"Range\.inputs=const"],
    "fold_shape_ops": [r"prepass\.shape_(gather_reshape\.f32|cast_arith|resize_sizes)",
                       r"ConstantOfShape\.shape=from_Shape"],
    "merge_parallel_casts": [r"x\.Cast\.ctx=int_arith\.cast_t"],
    "fuse_constant_offsets": [r"x\.(Add|Sub)\.ctx=int_arith\.(sub1|add1)\."],
    "eliminate_noop_add_mul": [r"x\.(Add|Sub|Mul|Div)\.ctx=int_arith\.(add0|sub0|mul1|div1|argmax)"],
    "eliminate_noop_layout": [r"x\.\w+\.ctx=int_layout\.\w+_noop", r"x\.Slice\.ctx=int_arith\.slice_all"],
    "fuse_conv_bn": [r"pattern\.conv_bn", r"pattern\.gemm_bn1d"],
    "fuse_patterns": [r"pattern\.gelu_erf\.div", r"pattern\.layernorm_decomposed",
                      r"pattern\.attention"],
}

DOC_SOURCE = {
    "title": "Rockchip RKNN Compiler Support Operator List V2.3.2 (RK3588 chapter)",
    "url": "https://github.com/airockchip/rknn-toolkit2/blob/42aa1d4/doc/"
           "05_RKNN_Compiler_Support_Operator_List_V2.3.2.pdf",
    "note": "Published per-op limits for RK3588 (facts only). Used for comparison; where the "
            "2.5.0 compiler disagrees, the table follows the compiler and says so in the note.",
}


# --------------------------------------------------------------------------------------------
# building
# --------------------------------------------------------------------------------------------


def _expand(patterns: Iterable[str], ids: Sequence[str], what: str) -> list[str]:
    out: list[str] = []
    for pat in patterns:
        rx = re.compile(pat)
        hit = [i for i in ids if rx.match(i)]
        if not hit:
            raise ValueError("%s: probe selector %r matches no probe" % (what, pat))
        out.extend(h for h in hit if h not in out)
    return out


def merge_results(main: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """The main probe results plus the extra probes (same toolkit version and SoC)."""
    for k in ("version", "soc"):
        if main[k] != extra[k]:
            raise ValueError("extra probe results are for %s=%s, not %s" % (k, extra[k], main[k]))
    ids = {p["id"] for p in main["probes"]}
    dup = [p["id"] for p in extra["probes"] if p["id"] in ids]
    if dup:
        raise ValueError("extra probe ids clash with the main probes: %s" % dup[:5])
    out = dict(main)
    out["probes"] = list(main["probes"]) + list(extra["probes"])
    return out


def build_table(results: Mapping[str, Any]) -> dict[str, Any]:
    """Make the support table from a probe-results document."""
    version, soc = results["version"], results["soc"]
    probe_src = "probe:rknn-%s-%s" % (version, soc)
    probes = results["probes"]
    ids = [p["id"] for p in probes]
    by_op: dict[str, list[str]] = {}
    for p in probes:
        if p["kind"] in ("op", "context"):
            by_op.setdefault(p["op"], []).append(p["id"])

    ops: dict[str, Any] = {}
    for op, spec in OP_SPECS.items():
        entry: dict[str, Any] = {"status": spec["status"]}
        if "opset" in spec:
            entry["opset"] = spec["opset"]
        cons = []
        for c in spec["constraints"]:
            c2 = {k: v for k, v in c.items() if not k.startswith("_")}
            c2["probes"] = _expand(c["_probes"], ids, "%s/%s" % (op, c["rule"]))
            cons.append(c2)
        if cons:
            entry["constraints"] = cons
        entry["source"] = spec.get("source", probe_src)
        plist = list(by_op.get(op, []))
        for x in _expand(spec["_probes"], ids, op):
            if x not in plist:
                plist.append(x)
        if not plist:
            raise ValueError("no probe supports the entry for %s" % op)
        entry["probes"] = plist
        if spec.get("note"):
            entry["note"] = spec["note"]
        ops["ai.onnx:%s" % op] = entry

    generic = []
    for c in GENERIC:
        c2 = {k: v for k, v in c.items() if not k.startswith("_")}
        c2["probes"] = _expand(c["_probes"], ids, "generic/%s" % c["rule"])
        c2["source"] = probe_src
        generic.append(c2)
    patterns = []
    for pat in PATTERNS:
        p2 = {k: v for k, v in pat.items() if not k.startswith("_")}
        p2["source"] = probe_src
        p2["probes"] = _expand(pat["_probes"], ids, "pattern/%s" % pat["name"])
        patterns.append(p2)

    # opset range: every accepted opset probe built, rejected ones failed in load_onnx
    opset_ok = sorted({p["attributes"]["opset"] for p in probes
                       if p["kind"] == "opset" and p["status"] == "ok"})
    opset_bad = sorted({p["attributes"]["opset"] for p in probes
                        if p["kind"] == "opset" and p["status"] == "load_failed"})
    if not opset_ok:
        raise ValueError("no opset probe built for %s/%s" % (version, soc))
    lo, hi = opset_ok[0], opset_ok[-1]
    # opsets inside [lo, hi] that did not build (e.g. an int8 build crashing on an old-opset
    # probe) are not load_onnx rejections; they show up in the self-check instead
    if any(lo < o < hi for o in opset_bad):
        raise ValueError("non-contiguous opset support: load_onnx rejected %s inside %d..%d"
                         % ([o for o in opset_bad if lo < o < hi], lo, hi))

    # IR versions: load_onnx of 2.2.x checks models with onnx 1.14 (IR <= 9)
    ir_ok = sorted({p["attributes"]["ir_version"] for p in probes if p["kind"] == "ir" and p["status"] == "ok"})
    ir_bad = sorted({p["attributes"]["ir_version"] for p in probes
                     if p["kind"] == "ir" and p["status"] == "load_failed"})
    ir_range = [3, ir_ok[-1]] if ir_ok and ir_bad and ir_bad[0] > ir_ok[-1] else None
    prepass_notes = {k: _expand(v, ids, "prepass/" + k) for k, v in PREPASS_PROBES.items()}
    int8 = bool((results.get("build") or {}).get("do_quantization"))
    build_words = ("int8 build (do_quantization=True, random calibration set per probe; the "
                   "NPU of this SoC only runs quantized models)" if int8 else
                   "fp16 build (do_quantization=False)")
    table = {
        "format": 1,
        "toolchain": "rknn",
        "version": version,
        "soc": soc,
        "description": (
            "RKNN (rknn-toolkit2 %s) operator placement for %s, %s, "
            "derived from %d probe models compiled with the real "
            "toolkit. Accepted ONNX opsets: %d..%d (opsets %s were rejected by load_onnx). "
            "Input shapes must be static unless fixed at load time.%s" % (
                version, soc.upper(), build_words, len(probes), lo, hi,
                ", ".join(map(str, opset_bad)) or "none",
                (" ONNX IR versions up to %d load; IR %s failed in load_onnx (x.ir_version probes)."
                 % (ir_ok[-1], ", ".join(map(str, ir_bad)))) if ir_range else "")),
        "precision": ({"default": "int8", "supported": ["int8"]} if int8 else
                      {"default": "float16", "supported": ["float16", "int8"]}),
        "provenance": {
            "method": "probed+documented",
            "toolchain_package": "rknn-toolkit2==%s" % version,
            "generated": _dt.date.today().isoformat(),
            "generator": "pytest_npucheck.probe.rknn_table",  # as the committed tables record it (module since moved)
            "errata": [],
            "sources": {
                probe_src: {
                    "title": "Probe models compiled with rknn-toolkit2 %s, target_platform=%s%s"
                             % (version, soc, ", int8" if int8 else ""),
                    "note": "%d single-op / pattern / opset / dynamic-shape probes; raw results "
                            "in probes/rknn/%s/%s.results.json (regenerate with python -m "
                            "pytest_npucheck.probe.rknn_probe). Placement read from the verbose "  # the committed tables name the module before its move
                            "build log's Network Layer Information Table. Prepass evidence: %s."
                            % (len(probes), version, soc,
                               "; ".join("%s <- %s" % (k, ", ".join(v[:3]))
                                         for k, v in prepass_notes.items())),
                },
                DOC: DOC_SOURCE,
            },
        },
        "opsets": {"ai.onnx": [lo, hi]},
        **({"ir_version": ir_range} if ir_range else {}),
        "prepasses": ["eliminate_identity", "fold_constants", "fold_shape_ops", "merge_parallel_casts",
                      "eliminate_noop_add_mul", "fuse_constant_offsets",
                      "eliminate_noop_layout",
                      "fuse_conv_bn", "fuse_patterns"],
        "default_verdict": "cpu",
        "generic_constraints": generic,
        "patterns": patterns,
        "ops": dict(sorted(ops.items())),
    }
    return table


# --------------------------------------------------------------------------------------------
# verification against the probes
# --------------------------------------------------------------------------------------------


def predict(table: Any, model: Any) -> dict[str, str]:
    """Per-node verdicts the table gives a probe model, from the plugin's own matcher."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.matcher import match

    res = match(facts_from_model(model), table)
    pred = {n.name: n.verdict for n in res.nodes if not n.graph}
    if res.model_issues:
        pred = {name: "unsupported" for name in pred}
    return pred


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
        if ("npu" if p == "folded" else p) != o:
            out.append((n, p, o))
    return out


def verify_table(table: Mapping[str, Any], results: Mapping[str, Any]
                 ) -> tuple[Counter[str], list[str]]:
    """Predict every probe with the table (through the plugin's matcher) and compare with the
    compiler's placement.

    Returns a counter (``agree``/``disagree`` per probe) and one line per disagreement.
    """
    from pytest_npucheck.probe.models import build_probes
    from pytest_npucheck.tables import table_from_data

    from pytest_npucheck.probe.extra_families import build_extra_probes

    t = table_from_data(table)
    models = {p.id: p for p in build_probes()}
    models.update({p.id: p for p in build_extra_probes()})
    stats: Counter[str] = Counter()
    lines: list[str] = []
    for rec in results["probes"]:
        p = models.get(rec["id"])
        if p is None or rec.get("config") or rec.get("load"):
            continue  # probes built with extra load/config options measure those options
        diff = compare(predict(t, p.model), rec["status"], rec["placement"], rec["focus"])
        if diff:
            stats["disagree"] += 1
            for node, want, got in diff:
                op = next((n["op_type"] for n in rec["nodes"] if n["name"] == node), "model")
                lines.append("probe %s: %s %s -> table says %s, compiler %s" % (
                    rec["id"], op, node, want, got if got != "ok" else "built it"))
        else:
            stats["agree"] += 1
    return stats, lines


#: the target whose probes the hand-written rules (OP_SPECS, PATTERNS) were read from
BASE_TARGET = ("2.5.0", "rk3588")

#: Layout-only ops whose status is never flipped by :func:`adapt_to_results`: a single-op probe
#: of them reads a graph input and writes a graph output, so on RK3566 it measures RKNN's
#: layout conversion at the graph boundary (CPU), while inside the corpus networks the same ops
#: ran on the NPU (scripts/rknn_agreement.py: a status-cpu Reshape on rknn@2.5.0/rk3566 made
#: 757 false alarms). Transpose likewise: on RK3566 every probed rank-4/5 transpose ran on the CPU,
#: alone and between two Muls (x.Transpose.*.ctx=mul_mul), while in the corpus networks most of them
#: ran on the NPU, merged into the MatMul, Conv or LayerNormalization next to them.
LAYOUT_GLUE = frozenset({"Reshape", "Squeeze", "Unsqueeze", "Flatten", "Transpose"})


#: Constraints the 2.5.0/rk3588 probes do not show but other targets' probes may: for a target
#: whose probes of the op disagree with the table, :func:`adapt_to_results` also tries the entry
#: with each candidate added (to the base entry and to each drop-one variant) and keeps it only
#: when it reproduces strictly more of the op's probes and loses none inside a network.
#: ops a layout change can be merged into (RK3566: a Transpose reaching none ran on the CPU)
COMPUTE_OPS = ["BatchNormalization", "Conv", "ConvTranspose", "GRU", "Gemm", "GroupNormalization",
               "InstanceNormalization", "LSTM", "LayerNormalization", "MatMul", "RNN"]
#: ops a layout change passes through on its way to one
LAYOUT_THROUGH = ["Add", "Cast", "Clip", "Concat", "Div", "Dropout", "Erf", "Expand", "Flatten", "Gather",
                  "GlobalAveragePool", "HardSigmoid", "HardSwish", "Identity", "Mod", "Mul", "Neg", "Pow",
                  "ReduceMean", "Relu", "Reshape", "Sigmoid", "Slice", "Softmax", "Split", "Sqrt", "Squeeze",
                  "Sub", "Tanh", "Tile", "Transpose", "Unsqueeze", "Where"]
_REACH_NOTE = ("a Transpose of rank 4 or more that moves axes ran on the NPU only when its result reached a "
               "compute op (MatMul, Conv, a normalization, an RNN) through layout and element-wise ops: "
               "attention's head split read by a MatMul stayed, the same split read by a CPU Einsum (a "
               "diffusion UNet's attention) ran on the CPU with the Reshape before it, and so did a detection "
               "head's Conv -> Transpose -> Reshape -> Concat and a Transpose between two Muls")

#: a squeeze-and-excitation block: the pooled channels gate the block's input through two 1x1 Convs
SE_PATH = {"path": ["Conv", "Conv", "Mul"],
           "skip": ["Add", "BatchNormalization", "Clip", "Div", "HardSigmoid", "HardSwish", "Mul", "Relu", "Sigmoid"]}
_SE_NOTE = ("global average pooling written as ReduceMean over (-1, -2) (the dynamo exporter's form) ran on "
            "the CPU as Reshape/Transpose layers when it fed a squeeze-and-excitation block (Conv -> Conv "
            "-> Mul gating the block's input: EfficientNet, MobileNetV3, RegNetY, GhostNet); read by a lone "
            "Conv or a classifier head it stayed on the NPU")

_POOL_NOTE = ("global average pooling written as ReduceMean over (-1, -2) (the dynamo exporter's form) ran as a CPU "
              "Reshape/Transpose of the map, an NPU Conv and a CPU Transpose back; the relayout is named after the map, "
              "so it counts for the ReduceMean only when nothing else reads the map: with other readers (DeepLab's ASPP "
              "branches, an SE block's gating Mul) the ReduceMean kept only CPU layers, read alone (a lone Conv, a "
              "classifier head) it counted as NPU")

#: torch.nn.MultiheadAttention's packed q/k/v split: (1, N, 1, 3, C) -> (3, N, 1, 1, C)
_MHA_QKV = {"rule": "attr_not_in", "params": {"attr": "perm", "values": [[3, 1, 2, 0, 4]]}}
_MHA_TOKENS = {"rule": "dim", "params": {"tensor": "input", "index": 0, "axis": 1, "multiple_of": 4}}
#: the heads viewed as (1, heads, N, d) after the split, as MultiheadAttention does
_MHA_HEADS4 = {"rule": "feeds_not", "params": {"path": ["Gather", "Reshape", "Transpose", "Reshape"], "skip": ["Squeeze"]}}
_MHA_NOTE = ("nn.MultiheadAttention's packed q/k/v Transpose (3, 1, 2, 0, 4) ran on the CPU when the token count "
             "was not a multiple of 4 (15, 18, 65 tokens; 16, 20, 24, 40, 64 stayed on the NPU)")

_LAYOUT_OPS = ["Flatten", "Reshape", "Squeeze", "Transpose", "Unsqueeze"]
_RNN_OPS = ["GRU", "LSTM", "RNN"]
_TO_RNN_NOTE = ("RK3566 ran on the CPU the Transpose that brings a feature map into an RNN's sequence-first layout "
                "(CRNN's (1, C, T) -> (T, 1, C); KWS's (1, C, F, T) -> (1, T, C, F) -> Reshape -> (T, 1, C*F)); "
                "one that only moves a size-1 axis is a reshape and stayed on the NPU")
_GQA_NOTE = ("Llama's repeat_kv of K (Unsqueeze -> Expand (1, kv, g, T, d) -> Reshape) behind the rotary "
             "embedding (an Add) became a Gather along the head axis, run on the CPU by the int8 RV1106 build; "
             "V's (read from its projection) was folded into v_proj's weights, and K's behind a Relu became an "
             "NPU Conv")
_ROTARY_NOTE = ("rotary's rotate_half (Slice, Slice, Neg, Concat -> Mul(sin) -> Add) whose result goes on into an "
                "attention the compiler fuses (MatMul -> Softmax -> MatMul) became a Gather over the last axis, run "
                "on the CPU by 2.5.0's int8 RV1106 build; keys going through repeat_kv (grouped-query attention) "
                "and queries with no Softmax -> MatMul after became NPU 1x1 Convs")

#: a recurrent layer's output squeezed or reshaped (through a Transpose: the exporters' form of
#: nn.LSTM/nn.GRU's output) into a MatMul or another RNN: the graph optimizer rewrites the layer there
_LAYOUT_TAIL = {"path": [["Reshape", "Squeeze"], ["GRU", "LSTM", "MatMul", "RNN"]], "skip": ["Transpose"]}
_LAYOUT_TAIL_NOTE = ("an explicit 'layout' attribute (layout=0, as the dynamo exporter writes every LSTM and GRU) makes "
                     "build() fail with 'Unrecognized attribute: layout' when the layer's output goes through "
                     "(Transpose ->) Reshape into a MatMul or another RNN (a stacked LSTM): the whole model is "
                     "rejected. Into a Gemm (CRNN's classifier) or a Relu it built; the probes of the output "
                     "squeezed or reshaped straight out of the model also failed, which the rule does not cover. "
                     "Export with the TorchScript exporter, or drop the attribute (0 is its default)")
_MEAN_NOTE = ("a rank-4 ReduceMean over the spatial axes with keepdims=0 (x.mean((2, 3)) before a classifier) becomes a "
              "global pooling that keeps rank 4, and build() fails once a node reads it ('Got: 4 Expected: 2'): the "
              "whole model is rejected. keepdims=1 (then Flatten), one spatial axis, other ranks, or the mean as "
              "the model's output built; written wider than the probes: a mean over (1, 2, 3) also counts")
_SDPA_MASK_NOTE = ("the key padding mask of torch's MultiheadAttention (Conformer: Where(pad, -inf, 0) -> Reshape "
                   "(1, 1, 1, keys) -> Expand over the heads -> Add to the scores -> Softmax -> MatMul -> Transpose -> "
                   "Reshape -> Gemm, the output projection) ran its Reshape on the CPU with the Expand when the mask "
                   "was computed in the model; a mask that is a graph input, or an attention result without the Gemm "
                   "projection after it, kept it on the NPU. With the scale applied after the scores' MatMul "
                   "(one probe) it also stayed on the NPU, which the rule does not see")
_TOKENS_NOTE = ("DeiT's token sequence (class and distillation tokens in front of the patch embeddings, Conv -> "
                "Reshape -> Transpose) makes build() fail with a KeyError naming the Transpose's result once two or "
                "more tokens come before it: the whole model is rejected. One token (ViT), the patches first, or "
                "no Transpose built; so did tokens computed in the model (one probe), which the rule does not "
                "tell from parameters")


CANDIDATES: dict[str, list[dict[str, Any]]] = {
    "Transpose": [C("any_of", [r"x\.Transpose\.perm=[\d_+]+\.ctx=(conv|relu)_"],
                    constraints=[{"rule": "feeds_not", "params": {"path": [_RNN_OPS], "skip": _LAYOUT_OPS[:3] + ["Unsqueeze"]}},
                                 {"rule": "transpose_blocks", "params": {"max": 1}}],
                    note=_TO_RNN_NOTE),
                  C("any_of", [r"x\.Transpose\.perm=0_3_1_2\+1_0_2\.ctx=pool_"],
                    constraints=[{"rule": "feeds_not", "params": {"path": [_RNN_OPS], "skip": _LAYOUT_OPS[:3] + ["Unsqueeze"]}},
                                 {"rule": "producer_not", "params": {"index": 0, "chain": ["Transpose"],
                                                                    "skip": _LAYOUT_OPS[:3] + ["Unsqueeze"]}}],
                    note="two Transposes on the way into an RNN (KWS: (1, C, F, T) -> (1, T, C, F) -> Reshape -> "
                         "(T, 1, C*F)) were merged into one CPU Transpose named after the second"),
                  C("any_of", [r"x\.Transpose\.perm=[\d_+]+\.ctx=(conv|relu|pool)_"],
                    constraints=[{"rule": "feeds_not", "params": {"path": [_RNN_OPS], "skip": _LAYOUT_OPS}},
                                 {"rule": "transpose_blocks", "params": {"max": 1}}],
                    note=_TO_RNN_NOTE + "; the compiler merges a chain of such Transposes into one named after "
                                        "the first"),
                  C("any_of", [r"x\.Transpose\.ctx=(swin_qkv|pixel_shuffle|window_qkv)\."],
                    constraints=[{"rule": "transpose_blocks", "params": {"max": 4}},
                                 {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 6}},
                                 {"rule": "feeds_compute", "params": {"ops": ["Split"], "through": ["Identity"]}}],
                    note="a rank-5 transpose moving five blocks of axes (Swin's qkv split of a window batch) read by "
                         "Gathers became a CPU Gather; a rank-6 one (a pixel shuffle written as Reshape -> Transpose "
                         "-> Reshape) was fused into an NPU ConvTranspose, and one read by a Split stayed on the NPU"),
                  C("any_of", [r"x\.Transpose\.ctx=mha_qkv4?\."], constraints=[_MHA_QKV, _MHA_TOKENS],
                    note=_MHA_NOTE + ", whatever reads the heads"),
                  C("any_of", [r"x\.Transpose\.ctx=mha_qkv4?\."], constraints=[_MHA_QKV, _MHA_TOKENS, _MHA_HEADS4],
                    note=_MHA_NOTE + ", with the heads viewed as (1, heads, N, d) for rank-4 attention (ViT, "
                         "Conformer); with rank-3 heads (an exploratory probe form) it stayed on the NPU"),
                  C("any_of", [r"x\.Transpose\.ctx=(head_split|conv_head)\.",
                               r"x\.Transpose\.perm=[\d_]+\.ctx=mul_mul\."],
                    constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 3}},
                                 {"rule": "transpose_blocks", "params": {"max": 1}},
                                 {"rule": "feeds_compute", "params": {"ops": COMPUTE_OPS,
                                                                      "through": LAYOUT_THROUGH}}],
                    note=_REACH_NOTE),
                  C("transpose_blocks", [r"x\.Transpose\.ctx=window_qkv\.",
                                         r"x\.Transpose\.perm=[\d_]+\.ctx=mul_mul\.",
                                         r"x\.Transpose\.perm=[\d_]+\.shape=[\d_]+\.f32\.r6"],
                    max=4,
                    note="a transpose moving five blocks of axes (Swin's qkv split (2, 0, 3, 1, 4) "
                         "of a window batch, (16, 16, 3, 2, 16)) ran on the CPU between two NPU ops; "
                         "the same perm with a batch of one (three blocks) stayed on the NPU. With "
                         "three Gathers as its only readers, each a graph output (an exploratory "
                         "probe, not kept), the compiler rewrote it and ran it on the NPU: the "
                         "constraint follows Swin itself"),
                  C("producer_pass", [r"x\.Transpose\.ctx=attn_merge\."], index=0, ops=["Einsum"], skip=["Reshape"],
                    constraint={"rule": "einsum_equation_in", "params": {"values": EINSUM_NPU}},
                    note="the Transpose (0, 2, 1, 3) merging attention heads behind an Einsum the compiler runs on "
                         "the CPU (a diffusion UNet's einops-style 'b i j, b j d -> b i d', viewed back as (1, H, N, d)) "
                         "ran on the CPU with it; behind an NPU Einsum ('bij,bjd->bid') it stayed on the NPU"),
                  C("any_of", [r"x\.Transpose\.ctx=conv_tokens\."],
                    constraints=[{"rule": "attr_not_in", "params": {"attr": "perm", "values": [[0, 2, 1, 3]]}},
                                 {"rule": "producer_not", "params": {"index": 0, "chain": ["Conv"],
                                                                    "skip": ["Relu", "Clip", "BatchNormalization"]}}],
                    note="a conv front end turned into tokens (Conformer's subsampling: Conv -> Relu (1, C, T, F) -> "
                         "Transpose (0, 2, 1, 3) -> Reshape (1, T, C*F) -> MatMul) ran that Transpose on the CPU"),
                  C("any_of", [r"x\.Transpose\.ctx=attn_merge\."],
                    constraints=[{"rule": "transpose_blocks", "params": {"max": 3}},
                                 {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 5}}],
                    note="the rank-4 Transpose (0, 2, 1, 3) merging the heads of a batch of attention windows (Swin: "
                         "(16, 2, 16, 16), (4, 4, 16, 16): four blocks of axes) ran on the CPU; with one window "
                         "((1, 8, 16, 16): three blocks) it stayed on the NPU (rank 5 and 6: see the five-block rule)")],
    "Concat": [*(C("producer_not", [r"x\.Concat\.ctx=tokens\."], "unsupported", index=i, chain=["Transpose"],
                   skip=["Relu"], note=_TOKENS_NOTE) for i in (2, 3)),  # the patches after two or three tokens
               C("not_spatial_roll", [r"x\.Concat\.ctx=(norm_)?roll\."],
                 channels_last_after=["LayerNormalization", "MatMul", "Gemm"],
                 note="a torch.roll (Slice + Slice -> Concat) along a spatial axis became a Gather on "
                      "the CPU; along the channel axis it became a 1x1 Conv on the NPU. Axis 1 of a grid "
                      "from the input is the channel axis; behind a LayerNormalization (Swin's roll) the "
                      "features are, and H and W both rolled on the CPU. When the rolled grid is viewed "
                      "back as tokens, the compiler merged the rolls of H and W into one Gather, named "
                      "after the first: the second then shows as NPU")],
    "Reshape": [C("any_of", [r"x\.Reshape\.ctx=mask_head\."],
                  constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["Equal"]}},
                               {"rule": "graph_lacks", "params": {"ops": ["Gemm"]}}],
                  note="the Reshape of an Equal's mask (DistilBERT's (mask == 0).view(...)) ran on the CPU "
                       "once the graph held a Gemm anywhere (the classifier at the far end, or an unrelated "
                       "branch); with a MatMul head or none it stayed on the NPU"),
                C("any_of", [r"x\.Reshape\.ctx=mha_value\."],
                  constraints=[{"rule": "feeds_not", "params": {"path": ["Transpose", "MatMul", "Transpose"]}},
                               {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": -3, "multiple_of": 4}}],
                  note="attention's value head split (Reshape -> Transpose -> MatMul(probs, v) -> Transpose) ran on "
                       "the CPU when the sequence length (axis -3 of the split) was not a multiple of 4 (wav2vec2's 49; "
                       "15, 18, 50, 65 on the CPU, 16, 20, 24, 28, 52, 64 on the NPU)"),
                C("any_of", [r"x\.Reshape\.ctx=mha_qkv4\."],
                  constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["Add", "MatMul"]}},
                               {"rule": "consumers_pass", "params": {
                                   "ops": ["Transpose"], "skip": ["Unsqueeze"],
                                   "constraint": {"rule": "any_of", "params": {"constraints": [
                                       _MHA_QKV, _MHA_TOKENS, _MHA_HEADS4]}}}}],
                  note="nn.MultiheadAttention's Reshape (N, 1, 3, C) in front of the packed q/k/v Transpose ran on "
                       "the CPU with that Transpose (token counts not a multiple of 4). It kept its own name only "
                       "when the in_proj bias was added second (Add(MatMul, bias): the dynamo exporter's form) and "
                       "was all zeros (an untrained MultiheadAttention), so that the compiler dropped the Add; "
                       "with the bias first (TorchScript) or a non-zero one the same CPU Reshape was named after "
                       "the Unsqueeze's result and counted for the Transpose. The table cannot see a 192-value "
                       "bias, so it says CPU for every bias added second"),
                C("any_of", [r"x\.Reshape\.ctx=affine_grid\."],
                  constraints=[{"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4}},
                               {"rule": "rank", "params": {"tensor": "input", "index": 0, "max": 2}},
                               {"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 3}},
                               {"rule": "feeds_compute", "params": {"ops": COMPUTE_OPS, "through": LAYOUT_THROUGH}}],
                  note="a rank-3 to rank-4 Reshape whose result reaches no compute op (affine_grid's base grid "
                       "before a GridSample, a graph output) ran on the CPU"),
                C("any_of", [r"x\.Reshape\.ctx=rnn_head\."], constraints=_rnn_head(8), note=_RNN_HEAD_NOTE % 8),
                C("any_of", [r"x\.Reshape\.ctx=rnn_head\."], constraints=_rnn_head(4), note=_RNN_HEAD_NOTE % 4),
                C("feeds_compute", [r"x\.Transpose\.ctx=head_split\."], ops=COMPUTE_OPS,
                  through=LAYOUT_THROUGH, via=["Transpose"], note=_REACH_NOTE),
                C("consumers_pass", [r"x\.Reshape\.ctx=window_qkv\."], ops=["Transpose"],
                  constraint={"rule": "transpose_blocks", "params": {"max": 4}},
                  note="the Reshape splitting Swin's qkv for a five-block Transpose ran on the CPU with it"),
                C("any_of", [r"x\.Reshape\.ctx=group_norm\."],
                  constraints=[{"rule": "producer_not", "params": {"index": 0, "chain": ["InstanceNormalization"]}},
                               {"rule": "dim", "params": {"tensor": "output", "index": 0, "axis": 1, "min": 32}}],
                  note="GroupNorm as the TorchScript exporter writes it (Reshape -> InstanceNormalization -> "
                       "Reshape -> Mul -> Add): the Reshape back to (N, C, H, W) ran on the CPU for 16 channels in "
                       "8 groups, on the NPU for 32 and 64 (where between 16 and 32 it changes was not probed: "
                       "below 32 the table says CPU)"),
                C("feeds_not", [r"x\.Reshape\.ctx=sdpa_mask\."],
                  path=["Expand", "Add", "Softmax", "MatMul", "Transpose", "Reshape", "Gemm"], skip=["Reshape"],
                  from_node=True, note=_SDPA_MASK_NOTE),
                C("producer_not", [r"x\.Reshape\.ctx=group_norm\."], index=0, chain=["InstanceNormalization"],
                  note="GroupNorm as the TorchScript exporter writes it (Reshape -> InstanceNormalization -> "
                       "Reshape -> Mul -> Add): the Reshape back to (N, C, H, W) ran on the CPU")],
    "ReduceMean": [C("any_of", [r"x\.ReduceMean\.ctx=(?!global_mean)"],
                     constraints=[{"rule": "axes_ascending", "params": {"attr": "axes"}},
                                  {"rule": "sole_reader", "params": {"index": 0}}],
                     note=_POOL_NOTE + "; with its axes in ascending order ((2, 3), (-2, -1)) it ran as NPU Convs"),
                   C("sole_reader", [r"x\.ReduceMean\.ctx=(?!global_mean)"], index=0, note=_POOL_NOTE + ", whatever the order of its axes"),
                   C("any_of", [r"x\.ReduceMean\.ctx=(?!global_mean)"],
                     constraints=[{"rule": "axes_ascending", "params": {"attr": "axes"}},
                                  {"rule": "feeds_not", "params": SE_PATH}],
                     note=_SE_NOTE + "; with its axes in ascending order ((2, 3), (-2, -1)) it stayed on the NPU"),
                   C("feeds_not", [r"x\.ReduceMean\.ctx=(?!global_mean)"], note=_SE_NOTE + ", whatever the order of its axes",
                     **SE_PATH),
                   C("any_of", [r"x\.ReduceMean\.ctx=global_mean\."], "unsupported",
                     constraints=[{"rule": "feeds_not", "params": {"path": ["*"]}},
                                  {"rule": "attr_in", "params": {"attr": "keepdims", "values": [1]}},
                                  {"rule": "rank", "params": {"max": 3}},
                                  {"rule": "rank", "params": {"min": 5}},
                                  {"rule": "axis_in", "params": {"attr": "axes", "values": [0, 1, 2]}},
                                  {"rule": "axis_in", "params": {"attr": "axes", "values": [0, 1, 3]}}],
                     note=_MEAN_NOTE)],
    "LSTM": [C("any_of", [r"x\.LSTM\.ctx=layout_tail\."], "unsupported",
               constraints=[{"rule": "attr_absent", "params": {"attrs": ["layout"]}},
                            {"rule": "feeds_not", "params": _LAYOUT_TAIL}],
               note=_LAYOUT_TAIL_NOTE)],
    "GRU": [C("any_of", [r"x\.GRU\.ctx=layout_tail\."], "unsupported",
              constraints=[{"rule": "attr_absent", "params": {"attrs": ["layout"]}},
                           {"rule": "feeds_not", "params": _LAYOUT_TAIL}],
              note=_LAYOUT_TAIL_NOTE),
            C("attr_absent", [r"x\.GRU\.ctx=layout_tail\."], "unsupported", attrs=["layout"],
              note="an explicit 'layout' attribute (even layout=0, as the dynamo exporter writes it) makes build() "
                   "fail with 'Unrecognized attribute: layout', wherever the GRU's output goes")],
    "Unsqueeze": [C("any_of", [r"x\.Unsqueeze\.axes=[\d_]+\.ctx="],
                    constraints=[{"rule": "rank", "params": {"tensor": "output", "index": 0, "max": 3}},
                                 {"rule": "rank", "params": {"tensor": "input", "index": 0, "min": 4}},
                                 {"rule": "feeds_not", "params": {"path": ["Conv"]}},
                                 {"rule": "axis_in", "params": {"input": 1, "values": [0, 2, 3]}}],
                    note="an Unsqueeze inserting axis 1 to make a one-channel Conv2d input (Conformer's features "
                         "(1, F, T) -> (1, 1, F, T)) turns the channel axis into a spatial one; RK3566 ran that "
                         "relayout on the CPU")],
    "Expand": [C("producer_not", [r"x\.Expand\.ctx=gqa_"], index=0, chain=["Add"], skip=["Unsqueeze"], note=_GQA_NOTE)],
    "Neg": [C("feeds_not", [r"x\.Neg\.ctx=rotary_"], path=["Concat", "Mul", "Add", "MatMul", "Softmax", "MatMul"],
              skip=["Add", "Div", "Mul", "Reshape", "Transpose"], note=_ROTARY_NOTE)],
    "Cast": [C("any_of", [r"Cast\.to=float32\.bool\."],
               constraints=[{"rule": "dtype", "params": {"tensor": "input", "index": 0, "allowed": [
                   "float32", "float16", "float64", "int8", "int16", "int32", "int64", "uint8"]}},
                   {"rule": "attr_in", "params": {"attr": "to", "values": [9]}}],
               note="a cast of a bool mask to numbers runs on the CPU")],
    # 2.2.0 runs the model through its onnxruntime 1.16, which has no bool Trilu kernel: GPT-2's causal
    # mask (Trilu of a constant bool matrix) fails the build, and the compiler cannot fold it either
    "Trilu": [dict(C("dtype", [r"x\.Trilu\.ctx=causal_mask\."], "unsupported", tensor="input", index=0,
                     allowed=["float32", "float16", "bfloat16", "float64", "int8", "int16", "int32", "int64",
                              "uint8", "uint16", "uint32", "uint64"],
                     note="a Trilu of a bool tensor fails the build: the toolkit's onnxruntime has no bool "
                          "Trilu kernel, whether the mask is a constant (GPT-2's causal mask) or an input; "
                          "a float mask builds"),
                   _entry={"not_folded": {"dtypes": ["bool"], "_probes": [r"x\.Trilu\.ctx=causal_mask\..*\.bool\."]}})],
}


def _probe_facts(results: Mapping[str, Any]) -> dict[str, Any]:
    """Graph facts of every probe that the self-check uses (built once per run)."""
    from pytest_npucheck.graph import facts_from_model
    from pytest_npucheck.probe.models import build_probes
    from pytest_npucheck.probe.extra_families import build_extra_probes

    models = {p.id: p for p in build_probes()}
    models.update({p.id: p for p in build_extra_probes()})
    out = {}
    for rec in results["probes"]:
        p = models.get(rec["id"])
        if p is None or rec.get("config") or rec.get("load"):
            continue
        out[rec["id"]] = facts_from_model(p.model)
    return out


def _agrees(table: Any, facts: Any, rec: Mapping[str, Any]) -> bool:
    from pytest_npucheck.matcher import match

    res = match(facts, table)
    pred = {n.name: n.verdict for n in res.nodes if not n.graph}
    if res.model_issues:
        pred = {name: "unsupported" for name in pred}
    return not compare(pred, rec["status"], rec["placement"], rec["focus"])


def _focus_ops(rec: Mapping[str, Any]) -> set[str]:
    focus = set(rec.get("focus") or [])
    return {n["op_type"] for n in rec["nodes"] if n["name"] in focus}


#: probe kinds whose nodes sit inside a small network rather than alone between graph input
#: and output
IN_NETWORK_KINDS = ("context", "pattern", "prepass")


def _score(data: Mapping[str, Any], recs: Sequence[Mapping[str, Any]],
           facts: Mapping[str, Any]) -> tuple[int, int]:
    """``(probes inside a network reproduced, all probes reproduced)``. An adjustment must not
    lose any probe inside a network: a lone Transpose or Reshape between graph input and output
    can land on the CPU where the same op inside a network runs on the NPU, and users' models
    are networks."""
    from pytest_npucheck.tables import table_from_data

    t = table_from_data(data)
    ok = [_agrees(t, facts[r["id"]], r) for r in recs]
    return (sum(a for a, r in zip(ok, recs) if r["kind"] in IN_NETWORK_KINDS), sum(ok))


def _variants(entry: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """Alternative entries for one op, in order of preference (the base entry first)."""
    out: list[tuple[str, dict[str, Any]]] = [("", dict(entry))]
    cons = list(entry.get("constraints") or [])
    # drop one constraint, then two, ... (all of them: the status variants below): a target can
    # differ from the base in two constraints at once, and one round keeps one variant per op
    most = 1 if len(cons) == 1 else len(cons) - 1 if len(cons) <= 6 else 2
    for k in range(1, most + 1):
        for drop in itertools.combinations(range(len(cons)), k):
            e = dict(entry)
            rest = [c for i, c in enumerate(cons) if i not in drop]
            if rest:
                e["constraints"] = rest
            else:
                e.pop("constraints", None)
            out.append(("without the " + " and the ".join(
                "%s constraint %s" % (cons[i]["rule"], _params_text(cons[i].get("params", {}))) for i in drop), e))
    for status in ("npu", "cpu", "unsupported"):
        if status == entry["status"] and not cons:
            continue
        e = {k: v for k, v in entry.items() if k not in ("constraints", "note")}
        e["status"] = status
        out.append(("status %s with no constraint" % status, e))
    # a CPU op can still make build() fail: the other status, keeping the constraints that reject
    # the model (RV1106 runs GRU on the CPU and still fails on its 'layout' attribute)
    rejecting = [c for c in cons if c.get("else") == "unsupported"]
    for status in ("npu", "cpu"):
        if status == entry["status"] or not rejecting:
            continue
        e = {k: v for k, v in entry.items() if k != "note"}
        e["status"], e["constraints"] = status, rejecting
        out.append(("status %s keeping the %s" % (status, " and the ".join(
            "%s constraint %s" % (c["rule"], _params_text(c.get("params", {}))) for c in rejecting)), e))
    return out


def _with_candidates(op: str, entry: Mapping[str, Any], ids: Sequence[str]
                     ) -> list[tuple[str, dict[str, Any]]]:
    """The entry and its drop-one variants, each with one of the op's CANDIDATES added."""
    out: list[tuple[str, dict[str, Any]]] = []
    def hits(patterns: Sequence[str]) -> list[str]:  # the probe ids the patterns match, each once
        return list(dict.fromkeys(i for pat in patterns for i in ids if re.match(pat, i)))

    for cand in CANDIDATES.get(op, []):
        hit = hits(cand["_probes"])
        if not hit:
            continue  # a results file without the probes that would support it
        c2 = {k: v for k, v in cand.items() if not k.startswith("_")}
        c2["probes"] = hit
        label = "with the %s constraint %s" % (c2["rule"], _params_text(c2["params"]))
        fields = {}  # entry fields that come with the constraint (``not_folded``), their probes expanded
        for key, value in (cand.get("_entry") or {}).items():
            fields[key] = {k: v for k, v in value.items() if not k.startswith("_")}
            if "_probes" in value:
                fields[key]["probes"] = hits(value["_probes"])
            label += " and %s %s" % (key, _params_text({k: v for k, v in fields[key].items() if k != "probes"}))
        for what, e in _variants(entry):
            if e["status"] != entry["status"]:
                continue
            e = dict(e, **fields)
            e["constraints"] = list(e.get("constraints") or []) + [c2]
            out.append(((what + ", " if what else "") + label, e))
    return out


def adapt_to_results(table: dict[str, Any], results: Mapping[str, Any]
                     ) -> tuple[dict[str, Any], list[str]]:
    """Adjust the hand-written rules (read from the 2.5.0/rk3588 probes) to another target's
    probe results.

    For every op whose probes the table does not reproduce, the alternatives of
    :func:`_variants` (drop one constraint; a plain npu/cpu/unsupported status) are scored on
    the probes whose nodes under test include that op, and the best one replaces the entry when
    it reproduces strictly more of them. Then every fused pattern whose removal reproduces
    strictly more probes is removed. The op's note says what was changed and by which figures.
    Returns the adjusted table and one line per adjustment.
    """
    version, soc = results["version"], results["soc"]
    if (version, soc) == BASE_TARGET:
        return table, []
    from pytest_npucheck.tables import table_from_data

    facts = _probe_facts(results)
    recs = [r for r in results["probes"] if r["id"] in facts]
    ids = [r["id"] for r in results["probes"]]
    data = json.loads(json.dumps(table))
    t = table_from_data(data)
    bad = [r for r in recs if not _agrees(t, facts[r["id"]], r)]
    ops_to_try: list[str] = []
    for r in bad:
        for op in sorted(_focus_ops(r)):
            if "ai.onnx:%s" % op in data["ops"] and op not in ops_to_try:
                ops_to_try.append(op)
    changes: list[str] = []
    base_name = "%s/%s" % BASE_TARGET
    adjusted: list[str] = []
    # more rounds while they change something (at most six): a probe of two ops under test (a
    # Reshape and the Transpose it feeds) can only be reproduced once the other op is adjusted too,
    # and each round adds at most one candidate constraint per op
    for round_no in range(6):
        second = round_no > 0
        changed_in_round = 0
        for op in ops_to_try:
            key = "ai.onnx:%s" % op
            scope = [r for r in recs if op in _focus_ops(r)]
            n_net = sum(1 for r in scope if r["kind"] in IN_NETWORK_KINDS)
            base_sc = _score(data, scope, facts)
            best: tuple[tuple[int, int], str, dict[str, Any]] | None = None
            for what, entry in _variants(data["ops"][key]) + _with_candidates(op, data["ops"][key], ids):
                if op in LAYOUT_GLUE and entry["status"] != data["ops"][key]["status"]:
                    continue  # see LAYOUT_GLUE
                trial = dict(data)
                trial["ops"] = dict(data["ops"])
                trial["ops"][key] = entry
                sc = _score(trial, scope, facts)
                if sc[0] < base_sc[0]:
                    continue  # loses a probe inside a network
                if best is None or (sc[1], sc[0]) > (best[0][1], best[0][0]):
                    best = (sc, what, entry)
                if best[0] == (n_net, len(scope)):
                    break
            if best is None or not best[1] or (best[0][1], best[0][0]) <= (base_sc[1], base_sc[0]):
                continue
            sc, what, entry = best
            if second:
                msg = ("then, with the other ops adjusted: %s (%d of %d probes of the op reproduced, %d of "
                       "%d inside a network, instead of %d and %d)" % (what, sc[1], len(scope), sc[0], n_net,
                                                                        base_sc[1], base_sc[0]))
            else:
                msg = ("%s/%s probes: %s (%d of %d probes of the op reproduced, %d of %d inside a "
                       "network; with the %s rules: %d and %d)" % (
                           version, soc, what, sc[1], len(scope), sc[0], n_net, base_name,
                           base_sc[1], base_sc[0]))
            entry = dict(entry)
            if second:
                entry["note"] = "%s. T%s." % (entry.get("note", "").rstrip("."), msg[1:]) if op in adjusted else (
                    "%s/%s probes, %s. %s: %s" % (version, soc, msg, base_name, entry["note"]) if entry.get("note")
                    else "%s/%s probes, %s." % (version, soc, msg))
            else:
                entry["note"] = ("%s. %s: %s" % (msg, base_name, entry["note"]) if entry.get("note")
                                 else msg + ".")
            data["ops"][key] = entry
            adjusted.append(op)
            changed_in_round += 1
            changes.append("%s: %s" % (op, msg))
        if not changed_in_round:
            break
    for i, gc in enumerate(list(data.get("generic_constraints") or [])):
        # e.g. integer graph inputs: the int8 build of rv1106 crashes where fp16 ran on the CPU
        base_sc = _score(data, recs, facts)
        for what, alt in (("else %s" % v, dict(gc, **{"else": v}))
                          for v in ("unsupported", "cpu") if v != gc.get("else")):
            trial = dict(data)
            trial["generic_constraints"] = list(data["generic_constraints"])
            trial["generic_constraints"][i] = alt
            sc = _score(trial, recs, facts)
            if sc[1] > base_sc[1] and sc[0] >= base_sc[0]:
                alt["note"] = ("%s/%s probes: %s (%d probes reproduced, %d with the %s rule). "
                               "%s" % (version, soc, what, sc[1], base_sc[1], base_name,
                                       gc.get("note", "")))
                data = trial
                changes.append("generic %s constraint: %s (%d probes reproduced instead of %d)"
                               % (gc["rule"], what, sc[1], base_sc[1]))
                break
    for pat in list(data.get("patterns") or []):
        trial = dict(data)
        trial["patterns"] = [p for p in data["patterns"] if p is not pat]
        with_p, without_p = _score(data, recs, facts), _score(trial, recs, facts)
        if without_p[1] > with_p[1] and without_p[0] >= with_p[0]:
            data = trial
            changes.append("pattern %s dropped: not fused by %s for %s (%d probes reproduced "
                           "without it, %d with it)" % (pat["name"], version, soc, without_p[1],
                                                        with_p[1]))
            continue
        spec = next((sp for sp in PATTERNS if sp["name"] == pat["name"]), {})
        for status in spec.get("_status_candidates", ()):
            # a fused op the compiler cannot build (2.2.0 dies on the weighted RMSNorm of T5 and
            # LLaMA): the pattern's status changes when that reproduces strictly more probes
            alt = dict(pat, status=status)
            trial = dict(data)
            trial["patterns"] = [alt if p is pat else p for p in data["patterns"]]
            base_p, alt_p = _score(data, recs, facts), _score(trial, recs, facts)
            if alt_p[1] > base_p[1] and alt_p[0] >= base_p[0]:
                alt["description"] = pat["description"] + (
                    ". %s/%s probes: %s, not %s (%d probes reproduced, %d without this)%s" % (
                        version, soc, _STATUS_WORDS[status], pat["status"], alt_p[1], base_p[1],
                        spec.get("_status_notes", {}).get(status, "")))
                data = trial
                pat = alt
                changes.append("pattern %s: status %s (%d probes reproduced instead of %d)"
                               % (alt["name"], status, alt_p[1], base_p[1]))
                break
        for pid in spec.get("_cpu_candidates", ()):
            alt = json.loads(json.dumps(pat))
            node = next(n for n in alt["nodes"] if n["id"] == pid)
            node["runs_on"] = "cpu"
            trial = dict(data)
            trial["patterns"] = [alt if p is pat else p for p in data["patterns"]]
            # every placed node counts here (a probe's focus may be another node of the pattern)
            wide = [dict(r, focus=sorted(r["placement"])) if r.get("placement") else r for r in recs]
            base_p, cpu_p = _score(data, wide, facts), _score(trial, wide, facts)
            if cpu_p[1] > base_p[1] and cpu_p[0] >= base_p[0]:
                alt["description"] += (" %s/%s probes: fused, but the %s node (%s) stays on the CPU "
                                       "(%d probes reproduced, %d without this)" % (
                                           version, soc, pid, node["op"], cpu_p[1], base_p[1]))
                data = trial
                pat = alt
                changes.append("pattern %s: node %s stays on the CPU (%d probes reproduced instead "
                               "of %d)" % (alt["name"], pid, cpu_p[1], base_p[1]))
    if changes:
        data["description"] += (
            " Op rules were read from the %s probes and adjusted where this target's probes "
            "differ (%d adjustments, each stated in the op's note)." % (base_name, len(changes)))
    return data, changes


def validate(table: Mapping[str, Any], schema_path: Path) -> None:
    """Validate against the JSON schema (raises on error)."""
    import jsonschema

    with open(schema_path, encoding="utf-8") as fh:
        schema = json.load(fh)
    jsonschema.validate(table, schema)
    try:  # the project's own loader adds semantic checks (e.g. pattern structure)
        from pytest_npucheck.tables import validate_table_data
    except ImportError:
        return
    rel = (table["toolchain"], table["version"], table["soc"])
    problems = validate_table_data(table, Path("%s/%s/%s.json" % rel), schema_path, rel)
    if problems:
        raise ValueError("table fails the project's table checks:\n  " + "\n  ".join(problems))


def make_table(results: Mapping[str, Any], schema_path: Path | None = None, *,
               verify: bool = True, log: Any = None) -> dict[str, Any]:
    """The validated table of a probe-results document (extra probes already merged with
    :func:`merge_results`): :func:`build_table`, :func:`adapt_to_results` for targets other than
    :data:`BASE_TARGET`, the probe self-check as ``provenance.errata`` (unless ``verify`` is
    false) and :func:`validate`. Progress lines go to ``log`` (default: stderr)."""
    def say(text: str) -> None:
        print(text, file=log or sys.stderr)

    table = build_table(results)
    table, changes = adapt_to_results(table, results)
    for ln in changes:
        say("adjusted " + ln)
    if verify:
        stats, lines = verify_table(table, results)
        table["provenance"]["errata"] = [
            "self-check: the table reproduces the compiler's placement for %d of %d probes; "
            "the disagreements below are compiler behaviours the table format cannot express "
            "(each is explained in the op's note)" % (stats["agree"],
                                                      stats["agree"] + stats["disagree"])
        ] + lines
        say("self-check: %s" % dict(stats))
        for ln in lines:
            say("  " + ln)
    validate(table, Path(schema_path) if schema_path else ROOT / "op_support_tables/schema.json")
    return table


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point (see module docstring)."""
    ap = argparse.ArgumentParser(description="Build the RKNN support table from probe results.")
    ap.add_argument("--results", default=str(ROOT / "probes/rknn/2.5.0/rk3588.results.json"))
    ap.add_argument("--out", default=None,
                    help="default op_support_tables/rknn/<version>/<soc>.json")
    ap.add_argument("--extra-results", default=None,
                    help="results of the extra probes (pytest_npucheck.probe.extra_families); "
                         "default: <results>.extra.results.json next to --results, if present")
    ap.add_argument("--schema", default=str(ROOT / "op_support_tables/schema.json"))
    ap.add_argument("--no-verify", action="store_true", help="skip the probe self-check")
    args = ap.parse_args(argv)
    with open(args.results, encoding="utf-8") as fh:
        results = json.load(fh)
    extra_path = Path(args.extra_results or re.sub(r"\.results\.json$", ".extra.results.json",
                                                   args.results))
    if extra_path.exists() and extra_path != Path(args.results):
        results = merge_results(results, json.loads(extra_path.read_text(encoding="utf-8")))
    table = make_table(results, Path(args.schema), verify=not args.no_verify)
    out = Path(args.out) if args.out else (ROOT / "op_support_tables" / "rknn" /
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
