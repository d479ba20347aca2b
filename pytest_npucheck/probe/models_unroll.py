"""Hiera's token unroll on QNN HTP (issue 22). Ids start with ``q.``.

Hiera (and the SAM2 Hiera backbone) "unrolls" its patch tokens before the first stage: a chain of
rank-6 ``Reshape -> Transpose(0, 2, 4, 1, 3, 5) -> Reshape`` blocks, each moving a 2x2 stride of
the spatial grid into the batch dimension, ``(1, 56, 56, C) -> (4, 28, 28, C) -> (16, 14, 14, C)``.
onnxruntime-qnn 2.7.0 failed to finalize every exported Hiera (QNN_COMMON_ERROR_MEM_ALLOC), and a
cut of the TorchScript graph after the second block's Reshape already failed; one rank-6 block
(a window partition) builds (q.ctx.r6.window_partition). ``unroll_extra`` asks how many blocks, of
which size, make the finalisation fail.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, grid side, channels, unroll blocks)
UNROLL = (
    ("s56.c32.b1", 56, 32, 1),
    ("s56.c32.b2", 56, 32, 2),
    ("s56.c32.b3", 56, 32, 3),
    ("s16.c32.b2", 16, 32, 2),
    ("s16.c8.b2", 16, 8, 2),
    ("s16.c8.b2.relu", 16, 8, 2),
)


def _unroll(side: int, channels: int, blocks: int, between: bool = False) -> GraphBuilder:
    """``blocks`` unroll blocks of x (1, side, side, channels); ``between``: a Relu after each block."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, side, side, channels])], name="pre_relu")
    batch, s = 1, side
    for b in range(blocks):
        r6 = gb.node("Reshape", [x, gb.ints([batch, s // 2, 2, s // 2, 2, channels])], name="focus_split%d" % b)
        t6 = gb.node("Transpose", [r6], perm=[0, 2, 4, 1, 3, 5], name="focus_transpose%d" % b)
        batch, s = batch * 4, s // 2
        x = gb.node("Reshape", [t6, gb.ints([batch, s, s, channels])], name="focus_merge%d" % b)
        if between:
            x = gb.node("Relu", [x], name="post_relu%d" % b)
    gb.output(gb.node("Sigmoid", [x], name="post_sigmoid"))
    return gb


def unroll_extra(c: Collector) -> None:
    """Chains of rank-6 unroll blocks (UNROLL)."""
    for label, side, channels, blocks in UNROLL:
        c.add("q.Transpose.ctx=unroll.%s.f32.r6" % label, "Transpose",
              _unroll(side, channels, blocks, label.endswith(".relu")), kind="context",
              focus=["focus_%s%d" % (k, b) for b in range(blocks) for k in ("split", "transpose", "merge")])


#: (label, rank-4 input, rank-6 shape, Transpose perm or None, op between the Transpose and the last Reshape)
RANK6 = (
    ("lead1.unit1.keep", (1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), (0, 1, 2, 4, 3, 5), None),
    ("lead1.c8.keep", (1, 8, 64, 16), (1, 8, 8, 8, 4, 4), (0, 1, 2, 4, 3, 5), None),
    ("lead2.unit1.keep", (2, 1, 64, 16), (2, 1, 8, 8, 4, 4), (0, 1, 2, 4, 3, 5), None),
    ("lead1.c8.moved", (1, 8, 64, 16), (1, 8, 8, 8, 4, 4), (1, 0, 2, 3, 4, 5), None),
    ("lead1.c8.relu", (1, 8, 64, 16), (1, 8, 8, 8, 4, 4), (0, 1, 2, 4, 3, 5), "Relu"),
    ("lead1.unit1.relu", (1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), (0, 1, 2, 4, 3, 5), "Relu"),
    ("lead1.unit1.notranspose", (1, 1, 3136, 196), (1, 1, 56, 56, 14, 14), None, "Relu"),
)


def _rank6(shape4: tuple[int, ...], shape6: tuple[int, ...], perm: tuple[int, ...] | None,
           between: str | None) -> GraphBuilder:
    """Relu -> Reshape to ``shape6`` -> [Transpose ``perm``] -> [``between``] -> Reshape back -> Relu."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", list(shape4))], name="pre_relu")
    x = gb.node("Reshape", [x, gb.ints(list(shape6))], name="split6")
    if perm is not None:
        x = gb.node("Transpose", [x], perm=list(perm), name="transpose6")
    if between:
        x = gb.node(between, [x], name="between6")
    x = gb.node("Reshape", [x, gb.ints(list(shape4))], name="merge6")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def rank6_chain_extra(c: Collector) -> None:
    """Rank-6 Reshape -> Transpose -> Reshape chains: where the unit dim is, what sits between (RANK6)."""
    for label, shape4, shape6, perm, between in RANK6:
        focus = ["split6"] + (["transpose6"] if perm else []) + (["between6"] if between else []) + ["merge6"]
        c.add("q.Reshape.ctx=rank6.%s.f32.r6" % label, "Reshape", _rank6(shape4, shape6, perm, between),
              kind="context", focus=focus)


def _rank6_matmul(bias: bool, const_b: bool) -> GraphBuilder:
    """Relu -> MatMul of a rank-6 x (1, 2, 2, 4, 4, 16) by a (16, 24) matrix [-> Add bias] -> Sigmoid."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 2, 2, 4, 4, 16])], name="pre_relu")
    b = gb.weight([16, 24]) if const_b else gb.node("Relu", [gb.input("w", "float32", [16, 24])], name="w_relu")
    y = gb.node("MatMul", [x, b], name="focus_matmul")
    if bias:
        y = gb.node("Add", [y, gb.weight([24])], name="focus_bias")
    gb.output(gb.node("Sigmoid", [y], name="post_sigmoid"))
    return gb


def rank6_matmul_extra(c: Collector) -> None:
    """A MatMul of rank-6 activations: onnxruntime's MatMulAddFusion makes a constant-weight MatMul with a
    bias Add a Gemm of the input flattened to 2-D (the Add names the Reshape back to rank 6)."""
    for label, bias, const_b in (("bias.const", True, True), ("nobias.const", False, True),
                                 ("bias.dyn", True, False)):
        c.add("q.MatMul.ctx=rank6.%s.f32.r6" % label, "MatMul", _rank6_matmul(bias, const_b), kind="context",
              focus=["focus_matmul"] + (["focus_bias"] if bias else []))


def _bias_then_reshape(shape: tuple[int, ...], bias_first: bool) -> GraphBuilder:
    """x (1, 4, 16, 24) @ (24, 48) + bias -> Reshape to ``shape`` -> Relu/Transpose -> ... -> Sigmoid."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 4, 16, 24])], name="pre_relu")
    y = gb.node("MatMul", [x, gb.weight([24, 48])], name="focus_matmul")
    bias = gb.weight([48])
    y = gb.node("Add", [bias, y] if bias_first else [y, bias], name="focus_bias")
    y = gb.node("Reshape", [y, gb.ints(list(shape))], name="focus_view")
    if len(shape) == 6:  # NesT's qkv split: a Transpose that moves the 3 to the front, then the CPU
        y = gb.node("Transpose", [y], perm=[3, 0, 4, 1, 2, 5], name="qkv_transpose")
    gb.output(gb.node("Sigmoid", [y], name="post_sigmoid"))
    return gb


def matmul_bias_reshape_extra(c: Collector) -> None:
    """MatMul + bias Add read by a Reshape: onnxruntime's MatMulAddFusion ends in a Reshape named after
    the Add, which the Reshape after it merges into; the Add goes where that Reshape goes."""
    for label, shape, bias_first in (("r6.bias_first", (1, 4, 16, 2, 3, 8), True),
                                     ("r6.bias_last", (1, 4, 16, 2, 3, 8), False),
                                     ("r5.bias_first", (1, 4, 16, 6, 8), True)):
        c.add("q.Add.ctx=matmul_bias_reshape.%s.f32.r4" % label, "Add", _bias_then_reshape(shape, bias_first),
              kind="context", focus=["focus_matmul", "focus_bias", "focus_view"])


#: (label, rank-6 shape, Transpose perm, bias Add after the MatMul): Twins-SVT's locally-grouped attention
#: partitions (1, 56, 56, C) into (1, 8, 7, 8, 7, C) windows, swaps the middle axes and projects qkv
RANK6_GEMM = (
    ("keep.bias", (1, 8, 7, 8, 7, 16), (0, 1, 3, 2, 4, 5), True),
    ("keep.nobias", (1, 8, 7, 8, 7, 16), (0, 1, 3, 2, 4, 5), False),
    ("moved.bias", (1, 8, 7, 8, 7, 16), (1, 0, 3, 2, 4, 5), True),
    ("lead2.keep.bias", (2, 4, 7, 1, 7, 16), (0, 1, 3, 2, 4, 5), True),
)


def _rank6_gemm(shape6: tuple[int, ...], perm: tuple[int, ...], bias: bool) -> GraphBuilder:
    """Relu -> Reshape to ``shape6`` -> Transpose ``perm`` -> MatMul by a (C, 3C) weight [-> Add bias] ->
    Reshape to (rows, 3C) -> Relu."""
    gb = GraphBuilder(17)
    b, h, wh, w, ww, ch = shape6
    x = gb.node("Relu", [gb.input("x", "float32", [b, h * wh, w * ww, ch])], name="pre_relu")
    x = gb.node("Reshape", [x, gb.ints(list(shape6))], name="split6")
    x = gb.node("Transpose", [x], perm=list(perm), name="transpose6")
    x = gb.node("MatMul", [x, gb.weight([ch, 3 * ch])], name="focus_matmul")
    if bias:
        x = gb.node("Add", [gb.weight([3 * ch]), x], name="focus_bias")
    x = gb.node("Reshape", [x, gb.ints([-1, 3 * ch])], name="merge2")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def rank6_gemm_chain_extra(c: Collector) -> None:
    """A rank-6 Reshape -> Transpose read by a MatMul (RANK6_GEMM): with a bias Add, MatMulAddFusion flattens
    the MatMul's input to 2-D, a Reshape that ends the chain as a Reshape back would."""
    for label, shape6, perm, bias in RANK6_GEMM:
        c.add("q.Reshape.ctx=rank6_gemm.%s.f32.r6" % label, "Reshape", _rank6_gemm(shape6, perm, bias),
              kind="context", focus=["split6", "transpose6", "focus_matmul"] + (["focus_bias"] if bias else []))


#: (label, rank of the tensor the first Reshape reads, what sits between the two Reshapes): MViTv2's rel-pos
#: bias, added in rank 6 and reshaped back to (1, 1, 3136, 196), then Expanded to its own shape and reshaped
#: again for the ScatterND that writes it into the attention
MERGED_RESHAPES = (
    ("r6.direct", 6, None),
    ("r6.noop_expand", 6, "Expand"),
    ("r6.relu", 6, "Relu"),
    ("r5.direct", 5, None),
)


def _merged_reshapes(rank: int, between: str | None) -> GraphBuilder:
    """x (1, 1, 64, 16) -> Reshape to rank ``rank`` -> Sigmoid -> Reshape back -> [``between``] -> Reshape to
    (1, 64, 16) -> Relu. The Sigmoid of a rank-6 tensor fails, so the Reshape back reads a CPU result."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 1, 64, 16])], name="pre_relu")
    shape = [1, 1, 8, 8, 4, 4] if rank == 6 else [1, 8, 8, 4, 4]
    x = gb.node("Reshape", [x, gb.ints(shape)], name="split")
    x = gb.node("Sigmoid", [x], name="mid_sigmoid")
    x = gb.node("Reshape", [x, gb.ints([1, 1, 64, 16])], name="back")
    if between == "Expand":
        x = gb.node("Expand", [x, gb.ints([1, 1, 64, 16])], name="noop_expand")
    elif between:
        x = gb.node(between, [x], name="between")
    x = gb.node("Reshape", [x, gb.ints([1, 64, 16])], name="focus_reshape")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def merged_reshapes_extra(c: Collector) -> None:
    """A Reshape reading a Reshape (directly or through a no-op Expand): onnxruntime merges the two, so the second
    goes where a Reshape of the first one's input goes (MERGED_RESHAPES)."""
    for label, rank, between in MERGED_RESHAPES:
        c.add("q.Reshape.ctx=merged.%s.f32.r4" % label, "Reshape", _merged_reshapes(rank, between), kind="context",
              focus=["back", "focus_reshape"] + (["noop_expand"] if between == "Expand" else []))


#: (label, rank-4 input, high-rank shape, Transpose perm): Swin3D's window partition, (1, 8, 56, 56, 96) as
#: (1, 4, 2, 8, 7, 8, 7, 96) with the window axes moved together, every leading dim 1 kept in place
HIGH_RANK = (
    ("r8.lead1", (1, 8, 56, 96), (1, 4, 2, 8, 7, 8, 7, 96), (0, 1, 3, 5, 2, 4, 6, 7)),
    ("r7.lead1", (1, 8, 56, 96), (1, 8, 8, 7, 8, 7, 96), (0, 1, 2, 4, 3, 5, 6)),
    ("r7.lead1.unit2", (1, 8, 56, 96), (1, 1, 8, 7, 64, 7, 12), (0, 1, 2, 4, 3, 5, 6)),
)


def high_rank_chain_extra(c: Collector) -> None:
    """Reshape -> Transpose -> Reshape through rank 7 and 8 with a leading 1 (and a second unit dim) kept in place
    (HIGH_RANK): dropping one unit dim cannot bring them to rank 5."""
    for label, shape4, shape_hi, perm in HIGH_RANK:
        c.add("q.Transpose.ctx=high_rank.%s.f32.r%d" % (label, len(shape_hi)), "Transpose",
              _rank6(shape4, shape_hi, perm, None), kind="context", focus=["split6", "transpose6", "merge6"])


#: (label, input shape, bias Add): Swin3D's patch merging projects (1, 4, 14, 14, 384) to 192 without a bias
MATMUL_RANK = (
    ("r5.nobias", (1, 4, 14, 14, 384), False),
    ("r5.bias", (1, 4, 14, 14, 384), True),
    ("r5.small.nobias", (1, 2, 4, 4, 32), False),
    ("r4.nobias", (4, 14, 14, 384), False),
)


def _matmul_rank(shape: tuple[int, ...], bias: bool) -> GraphBuilder:
    """Relu -> MatMul by a (C, C/2) weight [-> Add bias] -> Relu."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", list(shape))], name="pre_relu")
    x = gb.node("MatMul", [x, gb.weight([shape[-1], shape[-1] // 2])], name="focus_matmul")
    if bias:
        x = gb.node("Add", [x, gb.weight([shape[-1] // 2])], name="focus_bias")
    gb.output(gb.node("Relu", [x], name="post_relu"))
    return gb


def matmul_rank_extra(c: Collector) -> None:
    """A MatMul of rank-5 activations by a constant matrix, with and without a bias Add (MATMUL_RANK)."""
    for label, shape, bias in MATMUL_RANK:
        c.add("q.MatMul.ctx=rank.%s.f32.r%d" % (label, len(shape)), "MatMul", _matmul_rank(shape, bias),
              kind="context", focus=["focus_matmul"] + (["focus_bias"] if bias else []))


QNN_FAMILIES: list[Callable[[Collector], None]] = [unroll_extra, rank6_chain_extra, rank6_matmul_extra,
                                                   matmul_bias_reshape_extra, rank6_gemm_chain_extra,
                                                   merged_reshapes_extra, high_rank_chain_extra, matmul_rank_extra]
