"""Context probes of RKNN placements found by cutting real corpus exports down (session 6):
RK3566's layout changes into RNNs, attention value splits, affine_grid reshapes and one-channel
Conv2d inputs; RV1106's grouped-query K expansion, rotary rotate_half and Swin's five-block qkv
split. Each family is built with :mod:`.builder` and listed in FAMILIES (in build order)."""

from __future__ import annotations

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder, llama_attention, rnn_layer




def rnn_input_transpose_extra(c: Collector) -> None:
    """The Transpose that brings a conv feature map into an RNN's seq-first layout (T, 1, C).
    CRNN: (1, C, T) -> Transpose(2, 0, 1) -> LSTM; KWS: (1, C, F, T) -> Transpose(0, 3, 1, 2) ->
    Reshape (1, T, C*F) -> Transpose(1, 0, 2) -> GRU. RK3566 runs the moving transpose on the CPU
    (the compiler merges the KWS pair into one Transpose (1, C, F, T) -> (T, 1, C, F), named after
    the first node on 2.2.0/2.3.2 and after the second on 2.5.0); a Transpose that only moves a
    size-1 axis (batch-first (1, T, C) -> (T, 1, C)) is a reshape and stays on the NPU."""
    # CRNN form: (1, C, T) -> Transpose(2, 0, 1) -> RNN / other readers
    for rnn, cin, seq, post in [("LSTM", 128, 26, "rnn"), ("LSTM", 128, 32, "rnn"), ("GRU", 64, 16, "rnn"),
                                ("LSTM", 128, 26, "add"), ("LSTM", 128, 26, "matmul")]:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, cin, 1, seq])
        y = gb.node("Conv", [x, gb.weight([cin, cin, 1, 3]), gb.weight([cin])], kernel_shape=[1, 3],
                    pads=[0, 1, 0, 1], name="pre_conv")
        y = gb.node("Squeeze", [y, gb.ints([2])], name="pre_squeeze")
        y = gb.node("Transpose", [y], perm=[2, 0, 1], name="focus_t")
        if post == "rnn":
            y = rnn_layer(gb, y, rnn, cin)
            ctx = "conv_%s" % rnn
        elif post == "add":
            y = gb.node("Add", [y, gb.weight([seq, 1, cin])], name="post_add")
            ctx = "conv_add"
        else:
            y = gb.node("MatMul", [y, gb.weight([cin, 16])], name="post_mm")
            ctx = "conv_matmul"
        gb.output(y)
        c.add("x.Transpose.perm=2_0_1.ctx=%s.c=%d.t=%d.f32.r3" % (ctx, cin, seq), "Transpose", gb,
              kind="context", focus=["focus_t"])
    # batch-first form: (1, T, C) -> Transpose(1, 0, 2) -> RNN (moves only the size-1 axis)
    for rnn in ("LSTM", "GRU"):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 26, 128])
        y = gb.node("Relu", [x], name="pre_relu")
        y = gb.node("Transpose", [y], perm=[1, 0, 2], name="focus_t")
        gb.output(rnn_layer(gb, y, rnn, 128))
        c.add("x.Transpose.perm=1_0_2.ctx=relu_%s.c=128.t=26.f32.r3" % rnn, "Transpose", gb,
              kind="context", focus=["focus_t"])
    # KWS form: (1, C, F, T) -> Transpose(0, 3, 1, 2) -> Reshape (1, T, C*F) -> Transpose(1, 0, 2) -> RNN
    for rnn, ch, fr, seq in [("GRU", 32, 5, 32), ("LSTM", 32, 5, 32), ("GRU", 16, 4, 24)]:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, ch, 2 * fr, seq])
        y = gb.node("MaxPool", [x], kernel_shape=[2, 1], strides=[2, 1], name="pre_pool")
        y = gb.node("Transpose", [y], perm=[0, 3, 1, 2], name="focus_t0")
        y = gb.node("Reshape", [y, gb.ints([1, seq, ch * fr])], name="flat")
        y = gb.node("Transpose", [y], perm=[1, 0, 2], name="focus_t1")
        gb.output(rnn_layer(gb, y, rnn, ch * fr))
        c.add("x.Transpose.perm=0_3_1_2+1_0_2.ctx=pool_%s.c=%d.f=%d.t=%d.f32.r4" % (rnn, ch, fr, seq), "Transpose",
              gb, kind="context", focus=["focus_t0", "focus_t1"])


FAMILIES = [rnn_input_transpose_extra]


def mha_value_reshape_extra(c: Collector) -> None:
    """Attention as torch writes it batch-first (wav2vec2, HF encoders): x (1, L, D) -> q/k/v MatMul+Add
    -> Reshape (1, L, H, D/H) -> Transpose (0, 2, 1, 3) (k: (0, 2, 3, 1)) -> MatMul -> Softmax ->
    MatMul(probs, v) -> Transpose -> Reshape (1, L, D). The q and k head transposes fold into the
    score MatMul; the value's Reshape + Transpose must be materialised ((H, D/H, 1, L) -> (H, L, 1, D/H)
    in RKNN's layout) and on RK3566 (2.2.0, 2.3.2, 2.5.0) the value Reshape ran on the CPU when L was not a
    multiple of 4 (15, 18, 49, 50, 65), whatever the head count (focus: the value Reshape)."""
    cases = [(seq, 4, 64) for seq in (15, 16, 18, 20, 24, 28, 49, 64, 65)]
    cases += [(49, 8, 64), (20, 8, 64), (18, 2, 32), (20, 2, 32), (50, 4, 64), (52, 4, 64)]
    for seq, heads, dim in cases:
        if True:
            gb = GraphBuilder(17)
            x = gb.input("x", "float32", [1, seq, dim])
            dh = dim // heads

            def proj(tag: str) -> str:
                y = gb.node("MatMul", [x, gb.weight([dim, dim])], name=tag + "_mm")
                return gb.node("Add", [gb.weight([dim]), y], name=tag + "_add")

            q = gb.node("Mul", [proj("q"), gb.const(np.array(0.25, np.float32))], name="q_scale")
            q = gb.node("Reshape", [q, gb.ints([1, seq, heads, dh])], name="q_view")
            q = gb.node("Transpose", [q], perm=[0, 2, 1, 3], name="q_t")
            k = gb.node("Reshape", [proj("k"), gb.ints([1, seq, heads, dh])], name="k_view")
            k = gb.node("Transpose", [k], perm=[0, 2, 3, 1], name="k_t")
            v = gb.node("Reshape", [proj("v"), gb.ints([1, seq, heads, dh])], name="focus_v_view")
            v = gb.node("Transpose", [v], perm=[0, 2, 1, 3], name="focus_v_t")
            s = gb.node("MatMul", [q, k], name="scores")
            p = gb.node("Softmax", [s], axis=-1, name="probs")
            o = gb.node("MatMul", [p, v], name="ctx")
            o = gb.node("Transpose", [o], perm=[0, 2, 1, 3], name="o_t")
            o = gb.node("Reshape", [o, gb.ints([1, seq, dim])], name="o_view")
            o = gb.node("MatMul", [o, gb.weight([dim, dim])], name="out_mm")
            gb.output(o)
            c.add("x.Reshape.ctx=mha_value.l=%d.h=%d.d=%d.f32.r3" % (seq, heads, dim), "Reshape", gb,
                  kind="context", focus=["focus_v_view", "focus_v_t"])


FAMILIES.append(mha_value_reshape_extra)


def affine_grid_reshape_extra(c: Collector) -> None:
    """STN's affine_grid as torch exports it: theta (1, 6) -> Reshape (1, 2, 3) -> Transpose (0, 2, 1)
    -> MatMul(base grid (1, H*W, 3), .) -> Reshape (1, H, W, 2) -> GridSample (a CPU op). The focus is
    the last Reshape (rank 3 -> 4, last dim 2). Variants: grid size, and the reader (GridSample, a graph
    output, an NPU op)."""
    for side, post in [(28, "gridsample"), (32, "gridsample"), (16, "gridsample"), (28, "output"), (28, "relu"),
                       (32, "output")]:
        gb = GraphBuilder(17)
        img = gb.input("img", "float32", [1, 1, side, side])
        t = gb.node("Flatten", [img], axis=1, name="pre_flat")
        t = gb.node("Gemm", [t, gb.weight([6, side * side]), gb.weight([6])], transB=1, name="pre_fc")
        t = gb.node("Reshape", [t, gb.ints([1, 2, 3])], name="theta_view")
        t = gb.node("Transpose", [t], perm=[0, 2, 1], name="theta_t")
        base = gb.const(np.random.RandomState(0).rand(1, side * side, 3).astype(np.float32))
        g = gb.node("MatMul", [base, t], name="grid_mm")
        g = gb.node("Reshape", [g, gb.ints([1, side, side, 2])], name="focus_grid_view")
        if post == "gridsample":
            g = gb.node("GridSample", [img, g], align_corners=0, name="post_gs")
        elif post == "relu":
            g = gb.node("Relu", [g], name="post_relu")
        gb.output(g)
        c.add("x.Reshape.ctx=affine_grid.post=%s.hw=%d.f32.r3" % (post, side), "Reshape", gb, kind="context",
              focus=["focus_grid_view"])


FAMILIES.append(affine_grid_reshape_extra)


def input_unsqueeze_extra(c: Collector) -> None:
    """Conformer's front end: features (1, F, T) -> Unsqueeze(1) -> (1, 1, F, T) -> Conv2d (one input
    channel). The Unsqueeze turns the channel axis F of a rank-3 tensor into a spatial axis; RK3566 does
    that relayout on the CPU (a Reshape, or a Transpose (1, F, 1, T) -> (1, 1, F, T) behind a Conv1d)
    and names it after the Unsqueeze. Controls: Unsqueeze at the end (1, F, T, 1) read by an
    element-wise op, the rank-2 input (1, L) -> (1, 1, L) of wav2vec2's Conv1d front end."""
    cases = [("input", [1, 64, 40], [1], "conv"), ("input", [1, 80, 100], [1], "conv"),
             ("conv1d", [1, 64, 40], [1], "conv"), ("matmul", [1, 64, 40], [1], "conv"),
             ("input", [64, 40], [0, 1], "conv"), ("input", [1, 64, 40], [3], "mul"),
             ("input", [1, 4000], [1], "conv1d")]
    for src, shape, axes, post in cases:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", list(shape))
        y = x
        if src == "conv1d":
            y = gb.node("Conv", [x, gb.weight([shape[1], shape[1], 1]), gb.weight([shape[1]])], kernel_shape=[1],
                        name="pre_conv1d")
        elif src == "matmul":
            y = gb.node("MatMul", [x, gb.weight([shape[-1], shape[-1]])], name="pre_mm")
        y = gb.node("Unsqueeze", [y, gb.ints(axes)], name="focus_unsq")
        if post == "conv":
            y = gb.node("Conv", [y, gb.weight([16, 1, 3, 3]), gb.weight([16])], kernel_shape=[3, 3], strides=[2, 2],
                        name="post_conv")
        elif post == "conv1d":
            y = gb.node("Conv", [y, gb.weight([16, 1, 10]), gb.weight([16])], kernel_shape=[10], strides=[5],
                        name="post_conv")
        else:
            y = gb.node("Mul", [y, gb.const(np.float32(0.5))], name="post_mul")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        c.add("x.Unsqueeze.axes=%s.ctx=%s_%s.shape=%s.f32.r%d" % ("_".join(map(str, axes)), src, post,
                                                                  "_".join(map(str, shape)), len(shape)),
              "Unsqueeze", gb, kind="context", focus=["focus_unsq"])


FAMILIES.append(input_unsqueeze_extra)




def gqa_expand_extra(c: Collector) -> None:
    """Llama's repeat_kv (Unsqueeze -> Expand (1, kv, g, T, d) -> Reshape) on K and V.
    RKNN folds the V expansion into v_proj's weights; the K expansion behind the rotary embedding
    (a computed tensor) becomes a Gather along the head axis, which RV1106 (2.3.2, 2.5.0) runs on
    the CPU. k_pre=none / relu: K read straight from its projection / through a Relu."""
    for k_pre in ("rotary", "none", "relu"):
        for q_heads, kv_heads in ((4, 2), (4, 1), (8, 2)):
            gb = llama_attention(q_heads=q_heads, kv_heads=kv_heads, k_pre=k_pre)
            c.add("x.Expand.ctx=gqa_k.pre=%s.h=%d.kv=%d.f32.r5" % (k_pre, q_heads, kv_heads), "Expand", gb,
                  kind="context", focus=["k_expand"])
        # one probe per op under test: the V Expand of the same graph
    gb = llama_attention(k_pre="rotary")
    c.add("x.Expand.ctx=gqa_v.pre=proj.h=4.kv=2.f32.r5", "Expand", gb, kind="context", focus=["v_expand"])
    gb = llama_attention(k_pre="rotary", attn="scores")
    c.add("x.Expand.ctx=gqa_k.pre=rotary.h=4.kv=2.attn=scores.f32.r5", "Expand", gb, kind="context",
          focus=["k_expand"])


def rotary_neg_extra(c: Collector) -> None:
    """rotate_half (Slice, Slice, Neg, Concat) on q and k of a Llama attention block: with and without
    grouped-query attention (kv < h), the q scale, and the fused attention (attn=scores: none)."""
    for q_heads, kv_heads in ((4, 2), (4, 4)):
        for scale in (True, False):
            gb = llama_attention(q_heads=q_heads, kv_heads=kv_heads, scale=scale)
            tag = "h=%d.kv=%d.scale=%d" % (q_heads, kv_heads, int(scale))
            c.add("x.Neg.ctx=rotary_q.%s.f32.r4" % tag, "Neg", gb, kind="context", focus=["q_neg"])
            c.add("x.Neg.ctx=rotary_k.%s.f32.r4" % tag, "Neg", gb, kind="context", focus=["k_neg"])
    for q_heads, kv_heads in ((4, 2), (4, 4)):
        gb = llama_attention(q_heads=q_heads, kv_heads=kv_heads, attn="scores")
        tag = "h=%d.kv=%d.attn=scores" % (q_heads, kv_heads)
        c.add("x.Neg.ctx=rotary_q.%s.f32.r4" % tag, "Neg", gb, kind="context", focus=["q_neg"])
        c.add("x.Neg.ctx=rotary_k.%s.f32.r4" % tag, "Neg", gb, kind="context", focus=["k_neg"])


def _swin_qkv(gb, n_win=16, ch=32, heads=2, ws=4, post="gather", pre="matmul"):
    """Swin's qkv split: (windows, N, 3C) -> Reshape (windows, N, 3, heads, d) -> Transpose
    (2, 0, 3, 1, 4) -> [Gather q/k/v -> attention | Reshape back to rank 3 -> Mul]."""
    n_tok, d = ws * ws, ch // heads
    x = gb.input("x", "float32", [n_win, n_tok, ch])
    y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
    if pre == "matmul":
        y = gb.node("MatMul", [y, gb.weight([ch, 3 * ch])], name="qkv_linear")
    else:  # the 3C features come from a Concat of three element-wise results
        y = gb.node("Concat", [y, gb.node("Relu", [y], name="pre_relu"), gb.node("Sigmoid", [y], name="pre_sig")],
                    axis=-1, name="pre_cat")
    y = gb.node("Reshape", [y, gb.ints([n_win, n_tok, 3, heads, d])], name="qkv_view")
    t = gb.node("Transpose", [y], perm=[2, 0, 3, 1, 4], name="qkv_transpose")
    if post == "gather":
        q, k, v = (gb.node("Gather", [t, gb.const(np.array(i, np.int64))], axis=0, name="pick_" + nm)
                   for i, nm in enumerate("qkv"))
        kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")
        sc = gb.node("Softmax", [gb.node("MatMul", [q, kt], name="scores")], axis=-1, name="softmax")
        gb.output(gb.node("MatMul", [sc, v], name="attn_v"))
    elif post == "split":
        q, k, v = gb.node("Split", [t, gb.ints([1, 1, 1])], n_out=3, axis=0, name="split_qkv")
        q, k, v = (gb.node("Squeeze", [z, gb.ints([0])], name="sq_" + nm) for z, nm in zip((q, k, v), "qkv"))
        kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")
        sc = gb.node("Softmax", [gb.node("MatMul", [q, kt], name="scores")], axis=-1, name="softmax")
        gb.output(gb.node("MatMul", [sc, v], name="attn_v"))
    else:  # reshape: merged back to rank 3, read by a Mul
        r = gb.node("Reshape", [t, gb.ints([3 * n_win * heads, n_tok, d])], name="post_view")
        gb.output(gb.node("Mul", [r, gb.const(np.float32(0.5))], name="post_mul"))


def _pixel_shuffle(gb, c=8, r=2, hw=8, post="reshape"):
    """Reshape (1, c, r, r, h, w) -> Transpose (0, 1, 4, 2, 5, 3) -> [Reshape (1, c, h*r, w*r) | Mul]."""
    x = gb.input("x", "float32", [1, c * r * r, hw, hw])
    y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
    y = gb.node("Reshape", [y, gb.ints([1, c, r, r, hw, hw])], name="ps_rs1")
    t = gb.node("Transpose", [y], perm=[0, 1, 4, 2, 5, 3], name="ps_tp")
    if post == "reshape":
        t = gb.node("Reshape", [t, gb.ints([1, c, hw * r, hw * r])], name="ps_rs2")
    gb.output(gb.node("Mul", [t, gb.const(np.float32(0.5))], name="post_mul"))


def five_block_transpose_extra(c: Collector) -> None:
    """Transposes moving five blocks of axes: Swin's qkv split (rank 5, batch of windows) read by
    Gathers / a Split / a Reshape, and a pixel shuffle written as Reshape -> rank-6 Transpose
    (0, 1, 4, 2, 5, 3) -> Reshape (fused by RKNN into a depth-to-space), with and without the
    second Reshape."""
    from pytest_npucheck.probe.builder import GraphBuilder as GB
    for n_win in (16, 4):
        for post in ("gather", "split", "reshape"):
            gb = GB(17)
            _swin_qkv(gb, n_win=n_win, ch=32 if n_win == 16 else 64, heads=2 if n_win == 16 else 4, post=post)
            c.add("x.Transpose.ctx=swin_qkv.windows=%d.post=%s.f32.r5" % (n_win, post), "Transpose", gb,
                  kind="context", focus=["qkv_transpose"])
    gb = GB(17)
    _swin_qkv(gb, n_win=16, post="gather", pre="concat")
    c.add("x.Transpose.ctx=swin_qkv.windows=16.pre=concat.post=gather.f32.r5", "Transpose", gb, kind="context",
          focus=["qkv_transpose"])
    for cc, r, hw, post in ((8, 2, 8, "reshape"), (8, 2, 8, "mul"), (4, 4, 4, "reshape"), (16, 2, 16, "reshape")):
        gb = GB(17)
        _pixel_shuffle(gb, c=cc, r=r, hw=hw, post=post)
        c.add("x.Transpose.ctx=pixel_shuffle.c=%d.r=%d.hw=%d.post=%s.f32.r6" % (cc, r, hw, post), "Transpose", gb,
              kind="context", focus=["ps_tp"])


FAMILIES += [gqa_expand_extra, rotary_neg_extra, five_block_transpose_extra]
