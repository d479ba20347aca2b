"""Context probes of RKNN placements found by cutting real corpus exports down (session 7): the
remaining missed CPU fallbacks of the rk3566 tables. Each family is built like those of
:mod:`.builder` and listed in FAMILIES, which :mod:`.extra_families` runs."""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder


def _pool_branch(gb: GraphBuilder, feat: str, axes: tuple[int, ...], ch: int, out_ch: int, hw: int) -> str:
    """ASPP's image pooling: ReduceMean (keepdims) -> 1x1 Conv -> Relu -> bilinear Resize to (hw, hw)."""
    m = gb.node("ReduceMean", [feat, gb.ints(list(axes))], keepdims=1, name="pool")
    y = gb.node("Relu", [gb.node("Conv", [m, gb.weight([out_ch, ch, 1, 1]), gb.weight([out_ch])],
                                 name="pool_conv")], name="pool_relu")
    return gb.node("Resize", [y, "", "", gb.ints([1, out_ch, hw, hw])], mode="linear",
                   coordinate_transformation_mode="half_pixel", name="pool_resize")


def aspp_pool_extra(c: Collector) -> None:
    """DeepLabV3's ASPP image pooling: a feature map read by a global-average ReduceMean (keepdims=1,
    the dynamo exporter's axes (-1, -2) or ascending (2, 3)) -> 1x1 Conv -> Relu -> Resize, and, in
    the network, also by the other ASPP branches (1x1 and dilated 3x3 Convs) whose results are
    concatenated with the pooled one and projected by a 1x1 Conv. Readers of the pooled map: the
    four ASPP Convs (``aspp``), one 1x1 Conv whose result is added to the pooled one (``conv_add``),
    the Concat alone (``concat``), or the ReduceMean only (``sole``). RK3566 runs such a ReduceMean
    as a CPU Reshape/Transpose of the map, an NPU Conv and a CPU Transpose back; the relayout of the
    map is named after the map, so it belongs to the ReduceMean only when nothing else reads the
    map (focus: the ReduceMean)."""
    ch, out_ch, hw = 64, 16, 8
    for axes in ((-1, -2), (2, 3)):
        for readers in ("aspp", "conv_add", "concat", "sole"):
            gb = GraphBuilder(18)
            x = gb.input("x", "float32", [1, ch, hw, hw])
            f = gb.node("Relu", [gb.node("Conv", [x, gb.weight([ch, ch, 3, 3]), gb.weight([ch])], pads=[1, 1, 1, 1],
                                         name="pre_conv")], name="pre_relu")
            pooled = _pool_branch(gb, f, axes, ch, out_ch, hw)
            if readers == "aspp":
                branches = []
                for i, dil in enumerate((0, 2, 4, 6)):
                    k, pad = (1, 0) if not dil else (3, dil)
                    conv = gb.node("Conv", [f, gb.weight([out_ch, ch, k, k]), gb.weight([out_ch])],
                                   kernel_shape=[k, k], pads=[pad] * 4, dilations=[max(dil, 1)] * 2,
                                   name="branch%d_conv" % i)
                    branches.append(gb.node("Relu", [conv], name="branch%d_relu" % i))
                y = gb.node("Concat", branches + [pooled], axis=1, name="cat")
                y = gb.node("Conv", [y, gb.weight([out_ch, 5 * out_ch, 1, 1]), gb.weight([out_ch])], name="project")
            elif readers == "conv_add":
                b = gb.node("Conv", [f, gb.weight([out_ch, ch, 1, 1]), gb.weight([out_ch])], name="branch0_conv")
                y = gb.node("Add", [b, pooled], name="merge")
            elif readers == "concat":
                y = gb.node("Concat", [f, pooled], axis=1, name="cat")
                y = gb.node("Conv", [y, gb.weight([out_ch, ch + out_ch, 1, 1]), gb.weight([out_ch])], name="project")
            else:
                y = gb.node("Conv", [pooled, gb.weight([out_ch, out_ch, 1, 1]), gb.weight([out_ch])], name="project")
            gb.output(y)
            c.add("x.ReduceMean.ctx=aspp.readers=%s.axes=%s.f32.r4" % (readers, "_".join(map(str, axes))),
                  "ReduceMean", gb, kind="context", focus=["pool"])


FAMILIES: list[Callable[[Collector], None]] = [aspp_pool_extra]


def mha_qkv4_dynamo_extra(c: Collector) -> None:
    """x.Transpose.ctx=mha_qkv4 (nn.MultiheadAttention's packed q/k/v split with rank-4 heads) as the
    dynamo exporter writes it: the in_proj bias added second (Add(MatMul, bias); TorchScript writes
    Add(bias, MatMul)) and the Reshapes with allowzero=1. An untrained MultiheadAttention's in_proj bias
    is all zeros (``zero``; ``rand``: a trained one). On 2.5.0/rk3566, for token counts that are not a
    multiple of 4, the Reshape ((1, 3C, 1, N) -> (3, C, 1, N) in RKNN's layout) ran on the CPU with the
    Transpose in every form; it kept the Reshape's name only when the compiler dropped the Add of zeros
    added second (the MatMul's Conv then has no bias), otherwise it was named after the Unsqueeze's
    result and counts for the Transpose (focus: the Reshape, the Unsqueeze and the Transpose)."""
    import numpy as np

    for bias, n_tok in [("zero_second", n) for n in (15, 16, 18, 20, 64, 65)] + [
            ("zero_first", 15), ("zero_first", 65), ("rand_second", 15), ("rand_second", 65)]:
        gb = GraphBuilder(18)
        x = gb.input("x", "float32", [1, n_tok, 64])
        x = gb.node("Transpose", [x], perm=[1, 0, 2], name="batch_second")
        mm = gb.node("MatMul", [x, gb.weight([64, 192])], name="in_proj")
        b = gb.weight([192]) if bias.startswith("rand") else gb.const(np.zeros(192, np.float32))
        p_ = gb.node("Add", [mm, b] if bias.endswith("second") else [b, mm], name="in_bias")
        r = gb.node("Reshape", [p_, gb.ints([n_tok, 1, 3, 64])], allowzero=1, name="qkv_view")
        u = gb.node("Unsqueeze", [r, gb.ints([0])], name="qkv_unsqueeze")
        t = gb.node("Transpose", [u], perm=[3, 1, 2, 0, 4], name="qkv_transpose")
        s_ = gb.node("Squeeze", [t, gb.ints([-2])], name="qkv_squeeze")
        heads = []
        for i, nm in enumerate("qkv"):
            g = gb.node("Gather", [s_, gb.const(np.array(i, np.int64))], axis=0, name="pick_" + nm)
            v = gb.node("Reshape", [g, gb.ints([n_tok, 4, 16])], allowzero=1, name="view_" + nm)
            h = gb.node("Transpose", [v], perm=[1, 0, 2], name="heads_" + nm)
            heads.append(gb.node("Reshape", [h, gb.ints([1, 4, n_tok, 16])], allowzero=1, name="heads4_" + nm))
        kt = gb.node("Transpose", [heads[1]], perm=[0, 1, 3, 2], name="k_t")
        q = gb.node("Mul", [heads[0], gb.const(np.float32(0.5))], name="q_scale")
        kt = gb.node("Mul", [kt, gb.const(np.float32(0.5))], name="k_scale")
        sc = gb.node("Softmax", [gb.node("MatMul", [q, kt], name="scores")], axis=-1, name="softmax")
        o = gb.node("Transpose", [gb.node("MatMul", [sc, heads[2]], name="attn_v")], perm=[2, 0, 1, 3], name="merge_t")
        o = gb.node("Reshape", [o, gb.ints([n_tok, 64])], allowzero=1, name="merge")
        gb.output(gb.node("Gemm", [o, gb.weight([64, 64]), gb.weight([64])], transB=1, name="out_proj"))
        c.add("x.Reshape.ctx=mha_qkv4.bias=%s.n=%d.f32.r5" % (bias, n_tok), "Reshape", gb, kind="context",
              focus=["qkv_view", "qkv_unsqueeze", "qkv_transpose"])


FAMILIES.append(mha_qkv4_dynamo_extra)


def attn_merge_transpose_extra(c: Collector) -> None:
    """The Transpose (0, 2, 1, 3) merging attention heads back, (B, H, N, d) -> (B, N, H, d) ->
    Reshape (B, N, H*d) -> output MatMul, behind the probs @ V product: a MatMul over a batch of B
    windows (Swin: B = 16, 4 or 1) or an Einsum over (B*H, N, d) viewed back as (1, H, N, d) (a
    diffusion UNet's attention, einops style 'b i j, b j d -> b i d', which RKNN runs on the CPU;
    ``einsum_np``: the same equation without spaces, run on the NPU). The scores come from a graph
    input through a Softmax, V from a MatMul of the tokens (focus: the merging Transpose)."""
    cases = [("matmul", 16, 2, 16, 16), ("matmul", 4, 4, 16, 16), ("matmul", 1, 8, 16, 16), ("matmul", 1, 4, 64, 16),
             ("einsum", 1, 4, 256, 8), ("einsum", 1, 4, 64, 16), ("einsum_np", 1, 4, 64, 16)]
    for pre, b, h, n, d in cases:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [b, n, h * d])
        s = gb.input("s", "float32", [b * h, n, n] if pre != "matmul" else [b, h, n, n])
        v = gb.node("MatMul", [x, gb.weight([h * d, h * d])], name="v_proj")
        v = gb.node("Reshape", [v, gb.ints([b, n, h, d])], name="v_view")
        v = gb.node("Transpose", [v], perm=[0, 2, 1, 3], name="v_heads")
        p = gb.node("Softmax", [s], axis=-1, name="softmax")
        if pre == "matmul":
            o = gb.node("MatMul", [p, v], name="attn_v")
        else:
            v = gb.node("Reshape", [v, gb.ints([b * h, n, d])], name="v_flat")
            eq = "b i j, b j d -> b i d" if pre == "einsum" else "bij,bjd->bid"
            o = gb.node("Einsum", [p, v], equation=eq, name="attn_v")
            o = gb.node("Reshape", [o, gb.ints([b, h, n, d])], name="o_view")
        o = gb.node("Transpose", [o], perm=[0, 2, 1, 3], name="merge_t")
        o = gb.node("Reshape", [o, gb.ints([b, n, h * d])], name="merge")
        gb.output(gb.node("MatMul", [o, gb.weight([h * d, h * d])], name="out_proj"))
        c.add("x.Transpose.ctx=attn_merge.pre=%s.b=%d.h=%d.n=%d.d=%d.f32.r4" % (pre, b, h, n, d), "Transpose", gb,
              kind="context", focus=["merge_t"])


FAMILIES.append(attn_merge_transpose_extra)


def conv_tokens_transpose_extra(c: Collector) -> None:
    """A conv subsampling front end turned into tokens (Conformer): Conv -> Relu (1, C, T, F) ->
    Transpose (0, 2, 1, 3) -> Reshape (1, T, C*F) -> MatMul (the input linear layer), for T x F of
    15 x 9 (Conformer's) and 16 x 8 (focus: the Transpose)."""
    for ch, t, f in ((16, 15, 9), (16, 16, 8), (8, 15, 9)):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 1, 2 * t + 1, 2 * f + 1])
        y = gb.node("Conv", [x, gb.weight([ch, 1, 3, 3]), gb.weight([ch])], strides=[2, 2], name="sub_conv")
        y = gb.node("Relu", [y], name="sub_relu")
        y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="to_tokens")
        y = gb.node("Reshape", [y, gb.ints([1, t, ch * f])], name="flat")
        gb.output(gb.node("MatMul", [y, gb.weight([ch * f, 64])], name="input_linear"))
        c.add("x.Transpose.ctx=conv_tokens.c=%d.t=%d.f=%d.f32.r4" % (ch, t, f), "Transpose", gb, kind="context",
              focus=["to_tokens"])


FAMILIES.append(conv_tokens_transpose_extra)
