"""Block-local attention masks and their rank-5 bias on RKNN (issue 22, LongT5).

LongT5's local attention (``_get_local_attention_mask``) splits the int64 padding mask into blocks:
``Pad`` to a multiple of the block length, ``Reshape (B, nb, blk)``, ``Pad`` one block on each side of
the block axis, three ``Slice``s of nb blocks ``Concat``ed on the sequence axis (``_concatenate_3_blocks``),
``Unsqueeze`` of each side, Casts to bool, ``And``; the ``Where`` of that mask is added to the constant
relative-position bias at rank 5, ``(1, 1, H, blk, 3 blk) + (1, 1, 1, blk, 3 blk)``, and the sum to the
scores. rknn-toolkit2 2.5.0 built LongT5 with the int64 Pads and the Slice/Concat/Unsqueeze chain on the
NPU (int64 rows) and that bias Add on the CPU (fp32 row ``Add (2,384,1,128),(1,384,1,128)``).

Two families:

* ``x.Pad.ctx=block_mask.*``: the int64 chain (block length, sequence length, the chain cut after the
  first Pad, after the Reshape, or whole), in front of Casts to bool as in LongT5, or with the int64
  result as a graph output (the control: an int64 op with no Cast behind it).
* ``x.Add.ctx=bias5.*``: the rank-5 Add of a (1, A, H, M, N) tensor and a (1, A, 1, M, N) one, the first a
  constant or computed, H 2 or 4, A 1 or 2, in front of a Softmax; the same at rank 4 and without the
  broadcast as controls.

Listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, sequence length, block length)
BLOCKS = (("t16.b128", 16, 128), ("t20.b8", 20, 8), ("t40.b16", 40, 16))


def _block_mask(t: int, blk: int, cut: str, tail: str) -> GraphBuilder:
    """int64 mask (1, t) -> focus_pad (to nb * blk) [-> focus_blocks Reshape (1, nb, blk) [-> focus_pad3 ->
    3 x focus_slice -> focus_concat]] -> Unsqueeze(s) -> Cast bool [-> And] -> Where -> Add(scores) -> Softmax
    (``tail`` "cast"), or the int64 result as the output (``tail`` "output")."""
    gb = GraphBuilder(17)
    nb = -(-t // blk)
    length = nb * blk
    m = gb.input("mask", "int64", [1, t])
    p = gb.node("Pad", [m, gb.ints([0, 0, 0, length - t]), gb.const(np.array(0, dtype=np.int64))],
                name="focus_pad", mode="constant")
    if cut == "pad":
        if tail == "output":
            gb.output(p)
            return gb
        c = gb.node("Cast", [gb.node("Unsqueeze", [p, gb.ints([1])], name="focus_unsq")], name="post_cast", to=9)
        w = gb.node("Where", [c, gb.const(np.array(0.0, dtype=np.float32)),
                              gb.const(np.array(-1e4, dtype=np.float32))], name="post_where")
        s = gb.node("Add", [gb.input("scores", "float32", [1, length, length]), w], name="post_add")
        gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
        return gb
    r = gb.node("Reshape", [p, gb.ints([1, nb, blk])], name="focus_blocks")
    if cut == "reshape":
        if tail == "output":
            gb.output(r)
            return gb
        three = r
        n3 = blk
    else:
        p3 = gb.node("Pad", [r, gb.ints([0, 1, 0, 0, 1, 0]), gb.const(np.array(0, dtype=np.int64))],
                     name="focus_pad3", mode="constant")
        parts = [gb.node("Slice", [p3, gb.ints([i]), gb.ints([i + nb]), gb.ints([1]), gb.ints([1])],
                         name="focus_slice%d" % i) for i in range(3)]
        three = gb.node("Concat", parts, axis=2, name="focus_concat")
        n3 = 3 * blk
        if tail == "output":
            gb.output(three)
            return gb
    a = gb.node("Cast", [gb.node("Unsqueeze", [r, gb.ints([-1])], name="focus_unsq_q")], name="post_cast_q", to=9)
    b = gb.node("Cast", [gb.node("Unsqueeze", [three, gb.ints([-2])], name="focus_unsq_k")], name="post_cast_k", to=9)
    both = gb.node("And", [a, b], name="post_and")
    w = gb.node("Where", [both, gb.const(np.array(0.0, dtype=np.float32)),
                          gb.const(np.array(-1e4, dtype=np.float32))], name="post_where")
    s = gb.node("Add", [gb.input("scores", "float32", [1, nb, blk, n3]), w], name="post_add")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def block_mask_extra(c: Collector) -> None:
    """LongT5's block mask chain on int64 data, cut at three points, into Casts or as the output."""
    for label, t, blk in BLOCKS:
        for cut in ("pad", "reshape", "three"):
            for tail in ("cast", "output"):
                c.add("x.Pad.ctx=block_mask.%s.%s.%s.i64.r2" % (label, cut, tail), "Pad", _block_mask(t, blk, cut, tail),
                      kind="context", dtype="int64",
                      focus=[n for n in ("focus_pad", "focus_blocks", "focus_pad3", "focus_slice0", "focus_slice1",
                                         "focus_slice2", "focus_concat", "focus_unsq", "focus_unsq_q", "focus_unsq_k")
                             if cut != "pad" or n in ("focus_pad", "focus_unsq")])


#: (label, shape of the broadcast side (1, A, 1, M, N) at rank 5, heads H)
BIAS5 = (("a1.h2.m8", [1, 1, 1, 8, 24], 2), ("a1.h4.m8", [1, 1, 1, 8, 24], 4),
         ("a1.h2.m128", [1, 1, 1, 128, 384], 2), ("a2.h2.m8", [1, 2, 1, 8, 24], 2))


def _bias5(shape: list[int], heads: int, first: str, rank: int, broadcast: bool) -> GraphBuilder:
    """``pre_where`` of a computed mask (Relu(x) > ...: a Where of a Greater of the input) of ``shape``,
    added by focus_add to ``first`` ("const": a constant, "input": a graph input, through a Relu) of shape
    ``shape`` with H on axis 2 -> post_add (scores) -> Softmax. ``rank`` 4 drops axis 1; ``broadcast`` False
    gives the mask side H too."""
    gb = GraphBuilder(17)
    side = list(shape)
    if rank == 4:
        side = side[:1] + side[2:]
    hax = 2 if rank == 5 else 1
    full = list(side)
    full[hax] = heads
    mside = full if not broadcast else side
    x = gb.node("Relu", [gb.input("x", "float32", mside)], name="pre_relu")
    g = gb.node("Greater", [x, gb.const(np.array(0.05, dtype=np.float32))], name="pre_greater")
    w = gb.node("Where", [g, gb.const(np.array(0.0, dtype=np.float32)),
                          gb.const(np.array(-1e4, dtype=np.float32))], name="pre_where")
    if first == "const":
        bias = gb.const(rand(full))
    else:
        bias = gb.node("Relu", [gb.input("bias", "float32", full)], name="pre_bias")
    a = gb.node("Add", [bias, w], name="focus_add")
    s = gb.node("Add", [gb.input("scores", "float32", full), a], name="post_add")
    gb.output(gb.node("Softmax", [s], axis=-1, name="post_softmax"))
    return gb


def bias5_extra(c: Collector) -> None:
    """The rank-5 bias Add of BIAS5, constant and computed, with rank-4 and no-broadcast controls."""
    for label, shape, heads in BIAS5:
        for first in ("const", "input"):
            for rank, broadcast, tag in ((5, True, "r5"), (4, True, "r4"), (5, False, "r5.same")):
                if tag != "r5" and label not in ("a1.h2.m8", "a1.h2.m128"):
                    continue
                c.add("x.Add.ctx=bias5.%s.%s.%s.f32.r%d" % (label, first, tag.replace("r5", "b").replace("r4", "b4"),
                                                           rank),
                      "Add", _bias5(shape, heads, first, rank, broadcast), kind="context", focus=["focus_add"])


def _sdpa_bias(rank: int, heads: int, nb: int, first: str, broadcast: bool, order: str, q: int = 8, k: int = 24,
               d: int = 16) -> GraphBuilder:
    """Attention whose additive bias is the sum of a position bias (``first``: "const" or a computed
    "input") and a computed mask (Where of a Greater), the mask broadcast over the heads (``broadcast``) or
    not. ``order`` "bias": focus_add = bias + mask, then scores + focus_add (LongT5's local attention);
    "scores": scores + bias, then focus_add = that + mask (T5's decoder). Rank 5: LongT5's Einsums over
    (1, nb, blk, H, d) blocks; rank 4: MatMuls over (1, H, T, d)."""
    gb = GraphBuilder(17)
    if rank == 5:
        qx = gb.input("q", "float32", [1, nb, q, heads, d])
        kx = gb.input("k", "float32", [1, nb, k, heads, d])
        vx = gb.input("v", "float32", [1, nb, k, heads, d])
        scores = gb.node("Einsum", [qx, kx], equation="...qhd,...khd->...hqk", name="pre_scores")
        full = [1, nb, heads, q, k]
        bias_shape = [1, 1, heads, q, k]
        mask_shape = [1, nb, 1, q, k] if broadcast else [1, nb, heads, q, k]
    else:
        qx = gb.input("q", "float32", [1, heads, q, d])
        kx = gb.input("k", "float32", [1, heads, d, k])
        vx = gb.input("v", "float32", [1, heads, k, d])
        scores = gb.node("MatMul", [qx, kx], name="pre_scores")
        full = bias_shape = [1, heads, q, k]
        mask_shape = [1, 1, q, k] if broadcast else full
    x = gb.node("Relu", [gb.input("x", "float32", mask_shape)], name="pre_relu")
    g = gb.node("Greater", [x, gb.const(np.array(0.05, dtype=np.float32))], name="pre_greater")
    w = gb.node("Where", [g, gb.const(np.array(0.0, dtype=np.float32)),
                          gb.const(np.array(-1e4, dtype=np.float32))], name="pre_where")
    bias = gb.const(rand(bias_shape)) if first == "const" else gb.node(
        "Relu", [gb.input("bias", "float32", bias_shape)], name="pre_bias")
    if order == "bias":
        b = gb.node("Add", [bias, w], name="focus_add")
        s = gb.node("Add", [scores, b], name="post_add")
    else:
        s = gb.node("Add", [gb.node("Add", [scores, bias], name="post_add"), w], name="focus_add")
    p = gb.node("Softmax", [s], axis=-1, name="post_softmax")
    if rank == 5:
        out = gb.node("Einsum", [p, vx], equation="...hqk,...khd->...qhd", name="post_out")
    else:
        out = gb.node("MatMul", [p, vx], name="post_out")
    gb.output(out)
    return gb


def sdpa_bias_extra(c: Collector) -> None:
    """The bias + mask Add of an attention, the mask broadcast over the heads (LongT5's local attention)."""
    cases = [(5, 2, 1, "const", True, "bias"), (5, 2, 1, "input", True, "bias"), (5, 4, 1, "const", True, "bias"),
             (5, 2, 2, "const", True, "bias"), (5, 2, 1, "const", False, "bias"), (5, 2, 1, "const", True, "scores"),
             (4, 2, 1, "const", True, "bias"), (4, 2, 1, "input", True, "bias"), (4, 4, 1, "const", True, "bias"),
             (4, 2, 1, "const", False, "bias"), (4, 2, 1, "const", True, "scores")]
    for rank, heads, nb, first, broadcast, order in cases:
        label = "h%d%s.%s.%s.%s" % (heads, ".nb%d" % nb if rank == 5 else "", first,
                                     "bcast" if broadcast else "same", order)
        c.add("x.Add.ctx=sdpa_bias_bcast.%s.f32.r%d" % (label, rank), "Add",
              _sdpa_bias(rank, heads, nb, first, broadcast, order), kind="context", focus=["focus_add"])


#: (label, input shape, padded axis): rank-5 Pads of one axis, float (LongT5's key/value block padding: axis 1
#: of (1, nb, blk, H, d) with nb = 1) and rank 2-4 Pads of one axis, int64 (the block mask)
PAD_AXES_F32 = (("b1.axis1", [1, 1, 16, 2, 8], 1), ("b2.axis1", [1, 2, 16, 2, 8], 1), ("b1.axis2", [1, 1, 16, 2, 8], 2),
                ("b1.axis4", [1, 1, 16, 2, 8], 4), ("c4.axis1", [1, 4, 4, 8, 8], 1), ("c4.axis4", [1, 4, 4, 8, 8], 4),
                ("batch2.axis1", [2, 1, 16, 2, 8], 1), ("c4.none", [1, 4, 8, 8, 16], -1),
                ("c3.none", [1, 3, 8, 16, 16], -1))
PAD_AXES_I64 = (("r2.axis1", [1, 20], 1), ("r2.axis0", [3, 8], 0), ("r2c3.axis1", [3, 8], 1),
                ("r3c1.axis1", [1, 1, 16], 1), ("r3c3.axis1", [1, 3, 16], 1), ("r3c3.axis2", [1, 3, 16], 2),
                ("r4.axis1", [1, 3, 4, 16], 1), ("r4.axis2", [1, 3, 4, 16], 2), ("r4.axis3", [1, 3, 4, 16], 3))


def _pad_axis(shape: list[int], axis: int, dtype: str, tail: str) -> GraphBuilder:
    """float: Relu(x) -> focus_pad (1 on each side of ``axis``) -> Relu; int64: x -> focus_pad -> Cast to bool
    (``tail`` "cast") or the output ("output")."""
    gb = GraphBuilder(17)
    r = len(shape)
    pads = [0] * (2 * r)
    if axis >= 0:  # -1: a Pad of zeros (Swin3D's window padding where the map is a whole number of windows)
        pads[axis] = pads[r + axis] = 1
    if dtype == "float32":
        x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
        p = gb.node("Pad", [x, gb.ints(pads), gb.const(np.array(0.0, dtype=np.float32))], name="focus_pad",
                    mode="constant")
        gb.output(gb.node("Relu", [p], name="post_relu"))
        return gb
    p = gb.node("Pad", [gb.input("x", "int64", shape), gb.ints(pads), gb.const(np.array(0, dtype=np.int64))],
                name="focus_pad", mode="constant")
    gb.output(gb.node("Cast", [p], to=9, name="post_cast") if tail == "cast" else p)
    return gb


def pad_axes_extra(c: Collector) -> None:
    """Pads of one axis: PAD_AXES_F32 at rank 5, PAD_AXES_I64 into a Cast to bool and as the output."""
    for label, shape, axis in PAD_AXES_F32:
        c.add("x.Pad.ctx=one_axis.%s.f32.r5" % label, "Pad", _pad_axis(shape, axis, "float32", ""), kind="context",
              focus=["focus_pad"])
    for label, shape, axis in PAD_AXES_I64:
        for tail in ("cast", "output"):
            c.add("x.Pad.ctx=one_axis.%s.%s.i64.r%d" % (label, tail, len(shape)), "Pad",
                  _pad_axis(shape, axis, "int64", tail), kind="context", dtype="int64", focus=["focus_pad"])


def _window_close(w: int, n: int, c: int, direction: str, pad: int) -> GraphBuilder:
    """EfficientViT-M's window attention: x (1, C, S, S) -> Transpose to channels last [-> Pad of ``pad`` rows
    and columns at the end (0: a zero Pad, -1: none)] -> Reshape (1, n, w, n, w, C) -> Transpose (0, 1, 3, 2, 4,
    5) -> Reshape (n n, w, w, C) -> focus_close Transpose (0, 3, 1, 2) -> Relu (``partition``); ``reverse``: x
    (n n, C, w, w) -> Transpose (0, 2, 3, 1) -> Reshape (1, n, n, w, w, C) -> Transpose -> Reshape (1, n w, n w,
    C) -> focus_close Transpose (0, 3, 1, 2) -> Relu."""
    gb = GraphBuilder(17)
    s = n * w
    if direction == "partition":
        x = gb.node("Relu", [gb.input("x", "float32", [1, c, s - max(pad, 0), s - max(pad, 0)])], name="pre_relu")
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_nhwc")
        if pad >= 0:
            x = gb.node("Pad", [x, gb.ints([0, 0, 0, 0, 0, pad, pad, 0]), gb.const(np.array(0.0, dtype=np.float32))],
                        name="pre_pad", mode="constant")
        x = gb.node("Reshape", [x, gb.ints([1, n, w, n, w, c])], name="pre_split")
        x = gb.node("Transpose", [x], perm=[0, 1, 3, 2, 4, 5], name="pre_swap")
        x = gb.node("Reshape", [x, gb.ints([n * n, w, w, c])], name="pre_merge")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", [n * n, c, w, w])], name="pre_relu")
        x = gb.node("Transpose", [x], perm=[0, 2, 3, 1], name="pre_nhwc")
        x = gb.node("Reshape", [x, gb.ints([1, n, n, w, w, c])], name="pre_split")
        x = gb.node("Transpose", [x], perm=[0, 1, 3, 2, 4, 5], name="pre_swap")
        x = gb.node("Reshape", [x, gb.ints([1, s, s, c])], name="pre_merge")
    x = gb.node("Transpose", [x], perm=[0, 3, 1, 2], name="focus_close")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def window_close_extra(c: Collector) -> None:
    """The channels-first Transpose closing a window partition (with a zero Pad, a real Pad, none) or reverse."""
    for w, n, ch in ((7, 2, 64), (4, 2, 16), (8, 2, 32)):
        for direction, pad in (("partition", 0), ("partition", 1), ("partition", -1), ("reverse", -1)):
            tag = direction + {0: ".pad0", 1: ".pad1", -1: ""}[pad]
            c.add("x.Transpose.ctx=window_close.%s.w=%d.n=%d.c=%d.f32.r4" % (tag, w, n, ch), "Transpose",
                  _window_close(w, n, ch, direction, pad), kind="context", focus=["focus_close"])


FAMILIES: list[Callable[[Collector], None]] = [block_mask_extra, bias5_extra, sdpa_bias_extra, pad_axes_extra,
                                               window_close_extra]
