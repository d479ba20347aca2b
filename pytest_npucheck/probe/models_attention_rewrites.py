"""rknn-toolkit2 rewrites of attention forms that hang or fail the build (issue 22, item 4).

* ``mask_chains_extra``: the padding mask of transformers' masking code as TorchScript writes it
  (``attention_mask -> Cast(bool) -> Flatten -> Gather -> Reshape -> Reshape -> Cast -> And(causal or
  all-true base) -> Expand -> Where(0, -max)``) added to attention scores. An encoder-decoder model
  builds it twice from the same input: once for the encoder's self-attention ([T, T]) and once for
  the decoder's cross-attention ([S, T]). rknn-toolkit2 2.5.0's rewrite ``cvt_and_to_fp_mul``
  removes the mask's bool Cast when it rewrites the first And; when that Cast is also read by a
  second chain, build() never returns (the build log stops, the process keeps one core busy in
  the graph optimizer). One change each: one chain only, each chain with its own Cast (the toolkit
  merges parallel Casts), two mask inputs, the second chain the old ``(1 - m) * min`` form, both
  chains of one shape, a short chain (Cast -> Reshape -> And).
* ``qkv_split_cast_extra``: GPT-1's fused q/k/v Split (Gemm -> Reshape -> Split -> attention, the
  family ``qkv_split_extra`` of :mod:`.models_rejections`) with a Cast between the Softmax and the
  value MatMul, as GPT-2's ``attn_weights.type(value.dtype)`` exports it: the rewrite
  ``fuse_multihead_attention_reshape_to_gather_split`` that raises on GPT-1 does not match it.

Built with :mod:`.builder` like every family and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import TensorProto, helper

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_rejections import _qkv_split

_MIN = np.float32(-3.4e38)


def _padding_chain(gb: GraphBuilder, mask: str, q: int, t: int, nm: str, form: str = "and") -> str:
    """The [1, 1, q, t] float mask (0 or -max) of a bool [1, t] ``mask``: ``and`` as transformers'
    masking code exports (Flatten -> Gather of the batch rows -> Reshape -> Reshape -> Cast -> And
    with the all-true base -> Expand -> Where), ``short`` (Reshape -> And -> Expand -> Where) or
    ``old`` (Unsqueeze twice -> Cast float -> (1 - m) * min)."""
    if form == "old":
        m = gb.node("Unsqueeze", [gb.node("Unsqueeze", [mask, gb.ints([1])], name=f"{nm}_u0"), gb.ints([2])],
                    name=f"{nm}_u1")
        m = gb.node("Cast", [m], to=TensorProto.FLOAT, name=f"{nm}_castf")
        return gb.node("Mul", [gb.node("Sub", [gb.const(np.float32(1)), m], name=f"{nm}_sub"), gb.const(_MIN)],
                       name=f"{nm}_min")
    base = gb.node("GreaterOrEqual", [gb.const(np.arange(q, dtype=np.int64).reshape(1, 1, q, 1)),
                                      gb.const(np.int64(0))], name=f"{nm}_ge")
    if form == "short":
        keys = gb.node("Reshape", [mask, gb.ints([1, 1, 1, t])], name=f"{nm}_r1")
    else:
        flat = gb.node("Flatten", [mask], axis=2, name=f"{nm}_flatten")
        rows = gb.node("Gather", [gb.node("Shape", [mask], name=f"{nm}_shape"), gb.ints([1])], axis=0, name=f"{nm}_rows")
        idx = gb.node("Add", [gb.const(np.arange(t, dtype=np.int64).reshape(1, 1, 1, t)),
                              gb.node("Mul", [gb.const(np.zeros([1, 1, 1, 1], np.int64)), rows], name=f"{nm}_bmul")],
                      name=f"{nm}_idx")
        keys = gb.node("Reshape", [gb.node("Gather", [flat, idx], axis=0, name=f"{nm}_gather"), gb.ints([-1])],
                       name=f"{nm}_r0")
        keys = gb.node("Reshape", [keys, gb.ints([1, 1, 1, t])], name=f"{nm}_r1")
        keys = gb.node("Cast", [keys], to=TensorProto.BOOL, name=f"{nm}_cast")
        true = gb.node("ConstantOfShape", [gb.ints([])], value=helper.make_tensor("v", TensorProto.BOOL, [1], [True]),
                       name=f"{nm}_true")
        base = gb.node("And", [true, gb.node("Cast", [base], to=TensorProto.BOOL, name=f"{nm}_basecast")],
                       name=f"{nm}_base")
    keep = gb.node("And", [base, keys], name=f"{nm}_and")
    keep = gb.node("Expand", [keep, gb.ints([1, 1, q, t])], name=f"{nm}_expand")
    return gb.node("Where", [keep, gb.const(np.float32(0)), gb.const(_MIN)], name=f"{nm}_where")


def _attention(gb: GraphBuilder, xq: str, xkv: str, mask: str, d: int, nm: str) -> str:
    """One head: ``xq + softmax(q k^T / sqrt(d) + mask) v``."""
    q = gb.node("MatMul", [xq, gb.weight([d, d])], name=f"{nm}_q")
    k = gb.node("Transpose", [gb.node("MatMul", [xkv, gb.weight([d, d])], name=f"{nm}_k")], perm=[0, 2, 1],
                name=f"{nm}_kt")
    v = gb.node("MatMul", [xkv, gb.weight([d, d])], name=f"{nm}_v")
    s = gb.node("Mul", [gb.node("MatMul", [q, k], name=f"{nm}_qk"), gb.const(np.float32(d ** -0.5))], name=f"{nm}_scale")
    s = gb.node("Add", [gb.node("Unsqueeze", [s, gb.ints([1])], name=f"{nm}_heads"), mask], name=f"{nm}_addmask")
    p = gb.node("Squeeze", [gb.node("Softmax", [s], axis=-1, name=f"{nm}_softmax"), gb.ints([1])], name=f"{nm}_sq")
    return gb.node("Add", [xq, gb.node("MatMul", [p, v], name=f"{nm}_pv")], name=f"{nm}_res")


#: (label, keyword arguments of _mask_chains): BART's encoder self-attention and decoder
#: cross-attention masks first, then one change each
MASK_CHAINS = (
    ("enc_cross", {}),
    ("enc_only", {"blocks": "enc"}),
    ("cross_only", {"blocks": "cross"}),
    ("enc_cross.own_casts", {"casts": "own"}),
    ("enc_cross.two_inputs", {"casts": "two_inputs"}),
    ("enc_cross.cross=old", {"forms": ("and", "old")}),
    ("enc_cross.enc=old", {"forms": ("old", "and")}),
    ("enc_cross.short", {"forms": ("short", "short")}),
    ("enc_cross.s=16", {"s": 16}),
    ("enc_enc", {"blocks": "enc_enc"}),
)


def _mask_chains(blocks: str = "enc_cross", t: int = 16, s: int = 8, d: int = 32, casts: str = "shared",
                 forms: tuple[str, str] = ("and", "and")) -> GraphBuilder:
    """``x_enc [1, t, d]``, ``x_dec [1, s, d]``, ``mask`` int64 [1, t]: an encoder self-attention with
    the [t, t] padding mask and a decoder cross-attention over its result with the [s, t] mask
    (``enc_cross``), one of them (``enc``, ``cross``), or two encoder blocks (``enc_enc``). The
    chains read one Cast of the mask to bool (``shared``), one Cast each (``own``), or Casts of
    two mask inputs (``two_inputs``)."""
    gb = GraphBuilder(17)
    x_enc = gb.input("x_enc", "float32", [1, t, d])
    x_dec = gb.input("x_dec", "float32", [1, s, d])
    m1 = gb.input("mask", "int64", [1, t])
    m2 = gb.input("mask2", "int64", [1, t]) if casts == "two_inputs" else m1
    b1 = gb.node("Cast", [m1], to=TensorProto.BOOL, name="focus_mask_cast")
    b2 = b1 if casts == "shared" else gb.node("Cast", [m2], to=TensorProto.BOOL, name="focus_mask_cast2")
    h = x_enc
    if blocks in ("enc_cross", "enc", "enc_enc"):
        h = _attention(gb, x_enc, x_enc, _padding_chain(gb, b1, t, t, "enc_mask", forms[0]), d, "enc")
    y = h
    if blocks in ("enc_cross", "cross"):
        y = _attention(gb, x_dec, h, _padding_chain(gb, b2, s, t, "cross_mask", forms[1]), d, "cross")
    elif blocks == "enc_enc":
        y = _attention(gb, h, h, _padding_chain(gb, b2, t, t, "enc2_mask", forms[1]), d, "enc2")
    gb.output(y)
    return gb


def mask_chains_extra(c: Collector) -> None:
    """Padding masks built from one input for two attentions (MASK_CHAINS)."""
    for label, kw in MASK_CHAINS:
        gb = _mask_chains(**kw)
        focus = [n.name for n in gb.nodes if n.op_type == "And" and not n.name.endswith("_base")]
        c.add("x.And.ctx=mask_chains.%s.bool.r4" % label, "And", gb, kind="context", dtype="bool",
              focus=focus or ["focus_mask_cast"])


#: (label, keyword arguments of models_rejections._qkv_split): GPT-2's Cast between the Softmax and
#: the value MatMul, then the same Cast elsewhere
QKV_SPLIT_CAST = (
    ("proj=gemm_reshape.softmax_cast.attn", {"softmax_cast": True}),
    ("proj=gemm_reshape.softmax_cast.causal_mask.attn", {"softmax_cast": True, "mask": True}),
    ("proj=gemm_reshape.scores_cast.attn", {"scores_cast": True}),
)


def qkv_split_cast_extra(c: Collector) -> None:
    """The fused q/k/v Split of GPT-1's form with a float Cast in its attention (QKV_SPLIT_CAST)."""
    for label, kw in QKV_SPLIT_CAST:
        c.add("x.Split.ctx=qkv_heads.%s.f32.r3" % label, "Split", _qkv_split(**kw), kind="context",
              focus=["focus_split"])


FAMILIES: list[Callable[[Collector], None]] = [mask_chains_extra, qkv_split_cast_extra]
