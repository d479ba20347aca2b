"""Ops in context: extra probe models isolating the cases where the first probe set and the real-model agreement
check (``scripts/rknn_agreement.py``) disagreed.

Each family varies one attribute / shape / dtype / neighbourhood of an op that an exported
architecture put on a different unit than the table predicted, so the deciding fact can be read
off the compiler's placement.  Ids follow :mod:`pytest_npucheck.probe.models` and start with
``x.`` (``x.Pad.reflect.ctx=in_relu.c=64.hw=16.p=1.f32.r4``).

Results: ``probes/rknn/<version>/<soc>.extra.results.json`` (``python -m
pytest_npucheck.toolchains.rknn.probe --extra``), read by :mod:`pytest_npucheck.toolchains.rknn.table`
together with the main results.
"""

from __future__ import annotations

from typing import Callable, Sequence

import numpy as np
from onnx import TensorProto

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand, rnn_layer

__all__ = ["FAMILIES"]

F32 = TensorProto.FLOAT


def _conv(gb: GraphBuilder, x: str, cin: int, cout: int, k: int = 3, pad: int = 1,
          name: str | None = None) -> str:
    return gb.node("Conv", [x, gb.weight([cout, cin, k, k]), gb.weight([cout])], name=name,
                   kernel_shape=[k, k], pads=[pad] * 4)


def _chain(c: Collector, probe_id: str, op: str, shape: Sequence[int],
           body: Callable[[GraphBuilder, str], str], *, pre: str = "none",
           post: str = "output", dtype: str = "float32", opset: int = 17,
           attributes: dict | None = None, note: str = "") -> None:
    """``input -> [pre] -> body -> [post]``; ``focus`` = the nodes ``body`` adds.

    pre: ``none`` (the op reads the graph input), ``conv`` (Conv 3x3), ``conv_relu``,
    ``conv_in_relu`` (Conv -> InstanceNorm -> Relu, as in ResNet generators).
    post: ``output`` or ``conv`` (a 3x3 Conv without padding reads the result).
    """
    gb = GraphBuilder(opset)
    x = gb.input("x", dtype, list(shape))
    y = x
    cin = shape[1] if len(shape) == 4 else 0
    if pre != "none":
        y = _conv(gb, x, cin, cin, name="pre_conv")
        if pre == "conv_in_relu":
            y = gb.node("InstanceNormalization", [y, gb.const(np.ones(cin, np.float32)),
                                                  gb.const(np.zeros(cin, np.float32))],
                        name="pre_in")
        if pre in ("conv_relu", "conv_in_relu"):
            y = gb.node("Relu", [y], name="pre_relu")
    before = len(gb.nodes)
    z = body(gb, y)
    focus = [n.name for n in gb.nodes[before:]]
    if post == "conv":
        z = _conv(gb, z, cin, cin, pad=0, name="post_conv")
    gb.output(z)
    c.add(probe_id, op, gb, kind="op" if pre == "none" and post == "output" else "context",
          attributes=dict(attributes or {}), dtype=dtype, focus=focus, note=note)


# ------------------------------------------------------------------------------------------------
# Pad (reflect) - CycleGAN ResnetGenerator: ReflectionPad2d(1)/(3) before unpadded convs
# ------------------------------------------------------------------------------------------------


def pad_extra(c: Collector) -> None:
    def pads(p: int) -> list[int]:
        return [0, 0, p, p, 0, 0, p, p]

    for mode in ("reflect", "constant", "edge"):
        for ch, hw, p in ((3, 64, 3), (16, 64, 3), (16, 64, 1), (64, 16, 1), (64, 16, 3),
                          (256, 16, 1), (32, 32, 1), (8, 16, 1), (8, 16, 2), (8, 16, 3),
                          (8, 16, 4), (8, 64, 3), (128, 16, 1)):
            for pre, post in (("none", "output"), ("conv_relu", "conv")):
                if pre != "none" and mode != "reflect" and (ch, hw, p) not in (
                        (64, 16, 1), (16, 64, 3)):
                    continue
                _chain(c, "x.Pad.%s.pre=%s.c=%d.hw=%d.p=%d.f32.r4" % (mode, pre, ch, hw, p),
                       "Pad", [1, ch, hw, hw],
                       lambda gb, y, p=p, mode=mode: gb.node("Pad", [y, gb.ints(pads(p))],
                                                             mode=mode),
                       pre=pre, post=post, attributes={"mode": mode, "pads": pads(p)})
    # neighbourhood of the ResnetBlock's second pad: Conv -> IN -> Relu -> Pad -> Conv
    for ch, hw, p in ((64, 16, 1), (16, 64, 3), (8, 16, 1)):
        for pre in ("conv", "conv_in_relu"):
            _chain(c, "x.Pad.reflect.pre=%s.c=%d.hw=%d.p=%d.f32.r4" % (pre, ch, hw, p), "Pad",
                   [1, ch, hw, hw],
                   lambda gb, y, p=p: gb.node("Pad", [y, gb.ints(pads(p))], mode="reflect"),
                   pre=pre, post="conv", attributes={"mode": "reflect", "pads": pads(p)})
    # asymmetric / one-sided reflect pads on a 64-channel map
    for tag, pp in (("h_only", [0, 0, 1, 0, 0, 0, 1, 0]), ("w_only", [0, 0, 0, 1, 0, 0, 0, 1]),
                    ("asym", [0, 0, 0, 1, 0, 0, 1, 0])):
        _chain(c, "x.Pad.reflect.pre=none.c=64.hw=16.pads=%s.f32.r4" % tag, "Pad",
               [1, 64, 16, 16], lambda gb, y, pp=pp: gb.node("Pad", [y, gb.ints(pp)],
                                                           mode="reflect"),
               attributes={"mode": "reflect", "pads": pp})


# ------------------------------------------------------------------------------------------------
# DepthToSpace - ESPCN PixelShuffle(3)
# ------------------------------------------------------------------------------------------------


def depth_to_space_extra(c: Collector) -> None:
    for bs in (2, 3, 4, 5):
        for mode in ("CRD", "DCR"):
            for cout, hw in ((1, 32), (2, 16), (4, 8)):
                _chain(c, "x.DepthToSpace.blocksize=%d.mode=%s.cout=%d.hw=%d.f32.r4"
                       % (bs, mode, cout, hw), "DepthToSpace", [1, cout * bs * bs, hw, hw],
                       lambda gb, y, bs=bs, mode=mode: gb.node("DepthToSpace", [y],
                                                               blocksize=bs, mode=mode),
                       attributes={"blocksize": bs, "mode": mode})
    for bs in (2, 3):
        _chain(c, "x.DepthToSpace.blocksize=%d.mode=CRD.pre=conv_relu.f32.r4" % bs,
               "DepthToSpace", [1, bs * bs, 32, 32],
               lambda gb, y, bs=bs: gb.node("DepthToSpace", [y], blocksize=bs, mode="CRD"),
               pre="conv_relu", attributes={"blocksize": bs, "mode": "CRD"})


# ------------------------------------------------------------------------------------------------
# Einsum - attention written with torch.einsum (equations with spaces, as users write them)
# ------------------------------------------------------------------------------------------------


def einsum_extra(c: Collector) -> None:
    def ein(tag: str, eq: str, a: Sequence[int], b: Sequence[int]) -> None:
        gb = GraphBuilder(17)
        x = gb.input("in0", "float32", list(a))
        y = gb.input("in1", "float32", list(b))
        gb.output(gb.node("Einsum", [x, y], equation=eq))
        c.add("x.Einsum.%s" % tag, "Einsum", gb, attributes={"equation": eq})

    for n, d in ((256, 8), (16, 8), (64, 16)):
        ein("qk.spaces=no.n=%d.d=%d.f32.r3" % (n, d), "bid,bjd->bij", [4, n, d], [4, n, d])
        ein("qk.spaces=yes.n=%d.d=%d.f32.r3" % (n, d), "b i d, b j d -> b i j", [4, n, d],
            [4, n, d])
        ein("pv.spaces=no.n=%d.d=%d.f32.r3" % (n, d), "bij,bjd->bid", [4, n, n], [4, n, d])
        ein("pv.spaces=yes.n=%d.d=%d.f32.r3" % (n, d), "b i j, b j d -> b i d", [4, n, n],
            [4, n, d])
    ein("mm.spaces=arrow.f32.r3", "bij,bjk -> bik", [2, 16, 32], [2, 32, 8])
    ein("mm.spaces=comma.f32.r3", "bij, bjk->bik", [2, 16, 32], [2, 32, 8])
    ein("mm.spaces=no.f32.r3", "bij,bjk->bik", [2, 16, 32], [2, 32, 8])
    ein("qk4.spaces=yes.f32.r4", "b h i d, b h j d -> b h i j", [1, 4, 16, 32], [1, 4, 16, 32])
    ein("qk4.spaces=no.f32.r4", "bhid,bhjd->bhij", [1, 4, 16, 32], [1, 4, 16, 32])


# ------------------------------------------------------------------------------------------------
# Expand - relative-position / mask broadcasts in attention (conformer, centernet)
# ------------------------------------------------------------------------------------------------


def expand_extra(c: Collector) -> None:
    def exp(src: Sequence[int], dst: Sequence[int], pre: str = "none") -> None:
        tag = "from=%s.to=%s" % ("_".join(map(str, src)), "_".join(map(str, dst)))
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", list(src))
        y = gb.node("Relu", [x], name="pre_relu") if pre == "relu" else x
        before = len(gb.nodes)
        z = gb.node("Expand", [y, gb.ints(list(dst))])
        focus = [n.name for n in gb.nodes[before:]]
        if pre == "relu":
            z = gb.node("Relu", [z], name="post_relu")
        gb.output(z)
        c.add("x.Expand.%s.pre=%s.f32.r%d" % (tag, pre, len(dst)), "Expand", gb,
              kind="op" if pre == "none" else "context", focus=focus)

    for src, dst in (([1, 1, 1, 15], [1, 4, 1, 15]), ([1, 1, 1, 16], [1, 4, 1, 16]),
                     ([1, 1, 1, 15], [1, 4, 15, 15]), ([1, 1, 1, 16], [1, 4, 16, 16]),
                     ([1, 1, 16, 16], [1, 4, 16, 16]), ([1, 1, 15, 15], [1, 4, 15, 15]),
                     ([1, 1, 1, 32], [1, 4, 1, 32]), ([1, 1, 1, 64], [1, 8, 1, 64]),
                     ([1, 1, 15], [1, 4, 15]), ([1, 1, 1, 15], [1, 1, 4, 15]),
                     ([1, 1, 4, 1], [1, 1, 4, 15]), ([1, 1, 1, 1], [1, 4, 1, 15]),
                     ([1, 8, 1, 1], [1, 8, 16, 16]), ([1, 1, 1, 256], [1, 4, 1, 256])):
        exp(src, dst)
        exp(src, dst, pre="relu")

    # conformer relative-position mask: [1, T] -> Reshape [1,1,1,T] -> Expand [1,H,1,T] -> Add
    for t, post in ((15, "add"), (16, "add"), (15, "add2"), (15, "where_add")):
        gb = GraphBuilder(17)
        m = gb.input("m", "float32", [1, t])
        s4 = gb.input("s", "float32", [1, 4, t, t])
        y = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="pre_reshape")
        if post == "where_add":
            y = gb.node("Where", [gb.node("Greater", [y, gb.const(np.float32(0))]),
                                  gb.const(np.float32(-1e4)), y], name="pre_where")
        e = gb.node("Expand", [y, gb.ints([1, 4, 1, t])])
        focus = [gb.last()]
        out = gb.node("Add", [s4, e], name="post_add")
        if post == "add2":
            gb.output(gb.node("Add", [out, gb.node("Add", [e, gb.const(np.float32(1))],
                                                   name="post_add2")], name="post_add3"))
        else:
            gb.output(out)
        c.add("x.Expand.from=1_1_1_%d.to=1_4_1_%d.ctx=%s.f32.r4" % (t, t, post), "Expand", gb,
              kind="context", focus=focus)


# ------------------------------------------------------------------------------------------------
# rank-6 Transpose - Swin window partition / reverse (perm 0,1,3,2,4,5)
# ------------------------------------------------------------------------------------------------


def transpose6_extra(c: Collector) -> None:
    for perm in ([0, 1, 3, 2, 4, 5], [0, 2, 1, 3, 4, 5], [0, 1, 2, 4, 3, 5],
                 [0, 1, 3, 2, 5, 4], [0, 1, 4, 2, 5, 3], [0, 3, 1, 4, 2, 5]):
        for shape in ([1, 4, 4, 4, 4, 32], [1, 2, 4, 2, 4, 64], [1, 2, 2, 4, 4, 4]):
            _chain(c, "x.Transpose.perm=%s.shape=%s.f32.r6" % ("_".join(map(str, perm)),
                                                                "_".join(map(str, shape))),
                   "Transpose", shape,
                   lambda gb, y, perm=perm: gb.node("Transpose", [y], perm=perm),
                   attributes={"perm": perm})


#: (perm, shape): how many blocks of axes a rank-6 permutation moves once size-1 axes are dropped
#: and axes that stay neighbours merged (rule transpose_blocks): Hiera's q/k/v split (size-1 axes,
#: 4 blocks) and unroll (5 blocks), the same perms without size-1 axes, 3- and 4-block perms at batch 2
TRANSPOSE6_BLOCKS = (
    ([3, 0, 4, 2, 1, 5], [1, 64, 49, 3, 1, 32]),
    ([3, 0, 4, 2, 1, 5], [1, 16, 49, 3, 1, 16]),
    ([3, 0, 4, 2, 1, 5], [2, 4, 6, 3, 2, 8]),
    ([0, 2, 4, 1, 3, 5], [1, 28, 2, 28, 2, 32]),
    ([0, 2, 4, 1, 3, 5], [2, 4, 2, 4, 2, 8]),
    ([2, 3, 0, 1, 4, 5], [2, 3, 4, 5, 6, 8]),
    ([4, 5, 2, 3, 0, 1], [2, 3, 4, 5, 6, 8]),
    ([0, 1, 3, 2, 4, 5], [2, 2, 4, 2, 4, 8]),
    ([0, 1, 3, 2, 5, 4], [1, 1, 4, 4, 4, 32]),
    ([0, 3, 1, 4, 2, 5], [1, 4, 1, 4, 2, 8]),
)


def transpose6_blocks_extra(c: Collector) -> None:
    """Rank-6 transposes by the number of axis blocks they move (TRANSPOSE6_BLOCKS)."""
    for perm, shape in TRANSPOSE6_BLOCKS:
        _chain(c, "x.Transpose.perm=%s.shape=%s.f32.r6" % ("_".join(map(str, perm)), "_".join(map(str, shape))),
               "Transpose", shape, lambda gb, y, perm=perm: gb.node("Transpose", [y], perm=perm),
               attributes={"perm": perm})


# ------------------------------------------------------------------------------------------------
# int64 Unsqueeze (attention masks, timesteps) and scalar-numerator Div (RMSNorm rsqrt)
# ------------------------------------------------------------------------------------------------


def int_and_div_extra(c: Collector) -> None:
    for shape, axes in (([1], [1]), ([1, 16], [1]), ([4, 32], [0])):
        for post in ("output", "cast"):
            gb = GraphBuilder(17)
            x = gb.input("x", "int64", shape)
            u = gb.node("Unsqueeze", [x, gb.ints(axes)])
            focus = [gb.last()]
            if post == "cast":
                u = gb.node("Mul", [gb.node("Cast", [u], to=F32, name="post_cast"),
                                    gb.const(np.float32(2.0))], name="post_mul")
            gb.output(u)
            c.add("x.Unsqueeze.axes=%s.shape=%s.post=%s.i64.r%d" % (
                "_".join(map(str, axes)), "_".join(map(str, shape)), post, len(shape)),
                "Unsqueeze", gb, kind="op" if post == "output" else "context", dtype="int64",
                focus=focus)
    for shape in ([1, 16, 1], [1, 16, 32], [1, 8, 16, 16], [16, 1]):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", shape)
        gb.output(gb.node("Div", [gb.const(np.float32(1.0)), x]))
        c.add("x.Div.a=const_scalar.shape=%s.f32.r%d" % ("_".join(map(str, shape)), len(shape)),
              "Div", gb)
    # int64 Div (index arithmetic: flat_index // width) with a non-zero divisor
    for tag, shape, div in (("const4", [1, 20], np.int64(4)), ("const_vec", [1, 20], None),
                            ("dyn_pos", [1, 20], "dyn")):
        gb = GraphBuilder(17)
        x = gb.input("x", "int64", shape)
        if div == "dyn":
            d = gb.node("Add", [gb.node("Abs", [gb.input("y", "int64", shape)], name="pre_abs"),
                                gb.const(np.int64(1))], name="pre_add")
        elif div is None:
            d = gb.const(np.arange(1, 21, dtype=np.int64).reshape(1, 20))
        else:
            d = gb.const(div)
        gb.output(gb.node("Div", [x, d]))
        c.add("x.Div.b=%s.i64.r2" % tag, "Div", gb, dtype="int64",
              kind="op" if div != "dyn" else "context", focus=[gb.last()])
    # RMSNorm as TorchScript writes it: x * (1 / sqrt(mean(x^2) + eps)) * w
    for dim in (32, 64):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 16, dim])
        v = gb.node("ReduceMean", [gb.node("Pow", [x, gb.const(np.float32(2.0))])], axes=[-1],
                    keepdims=1)
        r = gb.node("Div", [gb.const(np.float32(1.0)),
                            gb.node("Sqrt", [gb.node("Add", [v, gb.const(np.float32(1e-6))])])])
        focus = [gb.last()]
        gb.output(gb.node("Mul", [gb.node("Mul", [x, r]), gb.const(rand([dim]))]))
        c.add("x.Div.ctx=rmsnorm.d=%d.f32.r3" % dim, "Div", gb, kind="context", focus=focus)


# ------------------------------------------------------------------------------------------------
# glue next to CPU ops / the graph output (crnn_ocr, squeezenet, stn)
# ------------------------------------------------------------------------------------------------


def glue_extra(c: Collector) -> None:
    for post in ("LogSoftmax", "Softmax", "none"):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [26, 64])
        g = gb.node("Gemm", [x, gb.weight([37, 64]), gb.weight([37])], transB=1)
        r = gb.node("Reshape", [g, gb.ints([26, 1, -1])])
        focus = [gb.last()]
        if post != "none":
            r = gb.node(post, [r], axis=2)
        gb.output(r)
        c.add("x.Reshape.ctx=gemm_%s.f32.r2" % post.lower(), "Reshape", gb, kind="context",
              focus=focus)
    for hw in (1, 4):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 10, 13, 13])
        y = gb.node("GlobalAveragePool", [gb.node("Relu", [x])]) if hw == 1 else gb.node("Relu", [x])
        gb.output(gb.node("Flatten", [y], axis=1))
        c.add("x.Flatten.ctx=%s.f32.r4" % ("gap" if hw == 1 else "relu"), "Flatten", gb,
              kind="context")
    for shape in ([1, 2, 3], [1, 16, 32]):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", shape)
        t = gb.node("Transpose", [x], perm=[0, 2, 1])
        focus = [gb.last()]
        gb.output(gb.node("MatMul", [gb.const(rand([1, 64, shape[2]])), t]))
        c.add("x.Transpose.perm=0_2_1.ctx=matmul.shape=%s.f32.r3" % "_".join(map(str, shape)),
              "Transpose", gb, kind="context", focus=focus)
    # CRNN's own tail: the per-step classifier reads a computed tensor (an RNN output), not a
    # graph input
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [26, 1, 64])
    y = gb.node("Relu", [x], name="pre_relu")
    y = gb.node("Reshape", [y, gb.ints([26, 64])], name="pre_reshape")
    g = gb.node("Gemm", [y, gb.weight([37, 64]), gb.weight([37])], transB=1, name="pre_gemm")
    r = gb.node("Reshape", [g, gb.ints([26, 1, -1])])
    focus = [gb.last()]
    gb.output(gb.node("LogSoftmax", [r], axis=2, name="post_logsoftmax"))
    c.add("x.Reshape.ctx=relu_gemm_logsoftmax.f32.r2", "Reshape", gb, kind="context", focus=focus)


# ------------------------------------------------------------------------------------------------
# Cast bool -> bool (TorchScript attention masks: mask.to(torch.bool) on a bool tensor)
# ------------------------------------------------------------------------------------------------


def cast_extra(c: Collector) -> None:
    for shape in ([1, 1, 16, 32], [4, 32]):
        r = len(shape)
        gb = GraphBuilder(17)
        x = gb.input("x", "bool", shape)
        gb.output(gb.node("Cast", [x], to=TensorProto.BOOL))
        c.add("x.Cast.to=bool.bool.r%d" % r, "Cast", gb, dtype="bool",
              attributes={"to": TensorProto.BOOL})
        gb = GraphBuilder(17)
        m = gb.input("m", "bool", shape)
        x = gb.input("x", "float32", shape)
        k = gb.node("Cast", [m], to=TensorProto.BOOL)
        focus = [gb.last()]
        gb.output(gb.node("Where", [k, gb.const(np.float32(-1e4)), x], name="post_where"))
        c.add("x.Cast.to=bool.ctx=where.bool.r%d" % r, "Cast", gb, kind="context", dtype="bool",
              focus=focus, attributes={"to": TensorProto.BOOL})
        gb = GraphBuilder(17)
        m = gb.input("m", "bool", shape)
        gb.output(gb.node("Cast", [m], to=TensorProto.INT32))
        c.add("x.Cast.to=int32.bool.r%d" % r, "Cast", gb, dtype="bool",
              attributes={"to": TensorProto.INT32})


# ------------------------------------------------------------------------------------------------
# neighbourhoods the context rules state (rules_context): the mask Expand of a fused attention
# (conformer), a Transpose behind Gemm -> Reshape (stn_mnist's affine_grid), an Unsqueeze
# feeding ScatterElements (simplebaseline_pose's keypoint decoding)
# ------------------------------------------------------------------------------------------------


def context_extra(c: Collector) -> None:
    for heads, t in ((4, 15), (4, 16), (8, 32)):
        for post in ("softmax", "none", "sdpa"):
            gb = GraphBuilder(17)
            q = gb.input("q", "float32", [1, heads, t, 16])
            k = gb.input("k", "float32", [1, heads, 16, t])
            m = gb.input("m", "float32", [1, t])
            scores = gb.node("MatMul", [q, k], name="pre_matmul")
            if post == "sdpa":  # scaled dot-product attention: RKNN fuses it (exSDPAttention)
                scores = gb.node("Mul", [scores, gb.const(np.float32(0.25))], name="pre_scale")
            mask = gb.node("Reshape", [m, gb.ints([1, 1, 1, t])], name="pre_reshape")
            e = gb.node("Expand", [mask, gb.ints([1, heads, 1, t])])
            focus = [gb.last()]
            y = gb.node("Add", [scores, e], name="post_add")
            if post in ("softmax", "sdpa"):
                y = gb.node("Softmax", [y], axis=-1, name="post_softmax")
            if post == "sdpa":
                v = gb.input("v", "float32", [1, heads, t, 16])
                y = gb.node("MatMul", [y, v], name="post_matmul")
            gb.output(y)
            c.add("x.Expand.ctx=attn_mask_%s.h=%d.t=%d.f32.r4" % (post, heads, t), "Expand", gb,
                  kind="context", focus=focus)
    for n, rows in ((6, 784), (6, 64)):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 32])
        g = gb.node("Gemm", [x, gb.weight([n, 32]), gb.weight([n])], transB=1, name="pre_gemm")
        r = gb.node("Reshape", [g, gb.ints([1, 2, 3])], name="pre_reshape")
        t = gb.node("Transpose", [r], perm=[0, 2, 1])
        focus = [gb.last()]
        gb.output(gb.node("MatMul", [gb.const(rand([1, rows, 3])), t], name="post_matmul"))
        c.add("x.Transpose.perm=0_2_1.ctx=gemm_reshape.rows=%d.f32.r3" % rows, "Transpose", gb,
              kind="context", focus=focus)
    for pre in ("sub", "none"):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 17])
        d = gb.input("d", "float32", [1, 17, 2])
        y = gb.node("Sub", [x, gb.const(np.float32(0.5))], name="pre_sub") if pre == "sub" else x
        u = gb.node("Unsqueeze", [y, gb.ints([2])])
        focus = [gb.last()]
        idx = gb.const(np.zeros([1, 17, 1], np.int64))
        gb.output(gb.node("ScatterElements", [d, idx, u], axis=2, name="post_scatter"))
        c.add("x.Unsqueeze.axes=2.ctx=%s_scatter.f32.r2" % pre, "Unsqueeze", gb,
              kind="context" if pre != "none" else "context", focus=focus)



# ------------------------------------------------------------------------------------------------
# ONNX IR versions load_onnx accepts (rknn-toolkit2 2.2.0 pins onnx 1.14, whose checker stops at
# IR 9; torch's dynamo exporter writes IR 10)
# ------------------------------------------------------------------------------------------------


def ir_extra(c: Collector) -> None:
    for ir in (7, 8, 9, 10):
        gb = GraphBuilder(13, ir_version=ir)
        x = gb.input("x", "float32", [1, 8, 16, 16])
        gb.output(gb.node("Relu", [x]))
        c.add("x.ir_version=%d.opset=13" % ir, "Relu", gb, kind="ir", attributes={"ir_version": ir})



# ------------------------------------------------------------------------------------------------
# InstanceNormalization at the sizes of real generators / GroupNorm exports (rv1106's int8 build
# put most of them on the CPU)
# ------------------------------------------------------------------------------------------------


def instance_norm_extra(c: Collector) -> None:
    for shape in ([1, 8, 16, 16], [1, 64, 16, 16], [1, 16, 64, 64], [1, 32, 32, 32],
                  [1, 8, 512], [1, 8, 1024], [1, 32, 64]):
        for pre in ("none", "conv"):
            if pre == "conv" and len(shape) != 4:
                continue
            ch = shape[1]
            gb = GraphBuilder(17)
            x = gb.input("x", "float32", list(shape))
            y = _conv(gb, x, ch, ch, name="pre_conv") if pre == "conv" else x
            z = gb.node("InstanceNormalization", [y, gb.const(np.ones(ch, np.float32)),
                                                  gb.const(np.zeros(ch, np.float32))])
            focus = [gb.last()]
            gb.output(gb.node("Relu", [z], name="post_relu"))
            c.add("x.InstanceNormalization.pre=%s.shape=%s.f32.r%d"
                  % (pre, "_".join(map(str, shape)), len(shape)), "InstanceNormalization", gb,
                  kind="op" if pre == "none" else "context", focus=focus)


# ------------------------------------------------------------------------------------------------
# Transposes inside a network (an NPU op on both sides) at the shapes of real attention and
# detection heads: swin/deit qkv split (2, 0, 3, 1, 4) with and without a batch of windows,
# vit/conformer in_proj split (3, 1, 2, 0, 4), detection heads NCHW -> NHWC before a Reshape,
# yolov5's (0, 1, 3, 4, 2), attention head split (0, 2, 1, 3)
# ------------------------------------------------------------------------------------------------


def transpose_net_extra(c: Collector) -> None:
    cases = [((2, 0, 3, 1, 4), (16, 16, 3, 2, 16)), ((2, 0, 3, 1, 4), (4, 16, 3, 4, 16)),
             ((2, 0, 3, 1, 4), (1, 16, 3, 8, 16)), ((2, 0, 3, 1, 4), (1, 66, 3, 4, 16)),
             ((3, 1, 2, 0, 4), (1, 65, 1, 3, 64)), ((3, 1, 2, 0, 4), (1, 16, 1, 3, 64)),
             ((3, 1, 2, 0, 4), (1, 15, 1, 3, 64)), ((0, 1, 3, 4, 2), (1, 3, 13, 8, 8)),
             ((0, 1, 3, 4, 2), (1, 3, 16, 8, 8)), ((0, 2, 1, 3), (1, 256, 4, 8)),
             ((0, 2, 1, 3), (1, 32, 4, 16)), ((0, 2, 3, 1), (1, 24, 12, 12)),
             ((0, 2, 3, 1), (1, 2, 16, 16)), ((0, 2, 3, 1), (1, 32, 16, 16))]
    for perm, shape in cases:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", list(shape))
        y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
        t = gb.node("Transpose", [y], perm=list(perm))
        focus = [gb.last()]
        gb.output(gb.node("Mul", [t, gb.const(np.float32(0.5))], name="post_mul"))
        c.add("x.Transpose.perm=%s.ctx=mul_mul.shape=%s.f32.r%d"
              % ("_".join(map(str, perm)), "_".join(map(str, shape)), len(shape)), "Transpose", gb,
              kind="context", focus=focus, attributes={"perm": list(perm)})


# ------------------------------------------------------------------------------------------------
# GELU in the order torch's dynamo exporter writes it: Div -> Erf -> Add -> Mul(0.5, .) -> Mul(x, .)
# (TorchScript: Mul(x, .) -> Mul(., 0.5)); rknn-toolkit2 2.3.2 fused only the TorchScript order
# ------------------------------------------------------------------------------------------------


def gelu_order_extra(c: Collector) -> None:
    import math

    for order in ("half_first", "x_second"):
        for shape, ffn in (([1, 16, 32], False), ([1, 8, 16, 16], False), ([1, 16, 32], True)):
            gb = GraphBuilder(17)
            x = gb.input("x", "float32", list(shape))
            h = x
            if ffn:
                h = gb.node("MatMul", [x, gb.weight([shape[-1], 64])], name="fc1")
                h = gb.node("Add", [h, gb.weight([64])], name="fc1_bias")
            d = gb.node("Div", [h, gb.const(np.float32(math.sqrt(2)))], name="gelu_div")
            e = gb.node("Erf", [d], name="gelu_erf")
            a = gb.node("Add", [e, gb.const(np.float32(1.0))], name="gelu_add")
            if order == "half_first":
                m = gb.node("Mul", [gb.const(np.float32(0.5)), a], name="gelu_mul")
                y = gb.node("Mul", [h, m], name="gelu_mul2")
            else:
                m = gb.node("Mul", [a, h], name="gelu_mul")
                y = gb.node("Mul", [m, gb.const(np.float32(0.5))], name="gelu_mul2")
            if ffn:
                y = gb.node("MatMul", [y, gb.weight([64, shape[-1]])], name="fc2")
            gb.output(y)
            c.add("x.pattern.gelu_erf.%s%s.f32.r%d" % (order, ".ffn" if ffn else "", len(shape)),
                  "Erf", gb, kind="pattern", focus=[n.name for n in gb.nodes if n.name.startswith("gelu_")])


# ------------------------------------------------------------------------------------------------
# torch.roll as the exporters write it (Swin's shifted windows): Slice + Slice -> Concat per rolled
# dim, between two NPU ops (the RV1106 int8 build ran Swin's on the CPU)
# ------------------------------------------------------------------------------------------------


def roll_extra(c: Collector) -> None:
    for shape in ((1, 16, 16, 32), (1, 8, 8, 64)):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", list(shape))
        y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
        focus = []
        for axis in (1, 2):
            n = shape[axis]
            a = gb.node("Slice", [y, gb.ints([2]), gb.ints([n]), gb.ints([axis])], name="roll_a%d" % axis)
            b = gb.node("Slice", [y, gb.ints([0]), gb.ints([2]), gb.ints([axis])], name="roll_b%d" % axis)
            y = gb.node("Concat", [a, b], axis=axis, name="roll_concat%d" % axis)
            focus += ["roll_a%d" % axis, "roll_b%d" % axis, "roll_concat%d" % axis]
        gb.output(gb.node("Mul", [y, gb.const(np.float32(0.5))], name="post_mul"))
        c.add("x.Concat.ctx=roll.shape=%s.f32.r4" % "_".join(map(str, shape)), "Concat", gb,
              kind="context", focus=focus)


def roll_layout_extra(c: Collector) -> None:
    """The roll of a Swin block: LayerNormalization over the features, a view as (1, H, W, C), the
    roll on H and W (or on H alone), a view back to tokens and a MatMul. The normalization makes
    the compiler lay the features out as its channels, so H and W are spatial axes here, where in
    ``x.Concat.ctx=roll`` (a grid straight from the input) axis 1 is the channel axis."""
    for axes in ((1, 2), (1,), (2,)):
        h = w = 16
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, h * w, 32])
        y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
        y = gb.node("LayerNormalization", [y, gb.weight([32]), gb.weight([32])], axis=-1, epsilon=1e-5,
                    name="pre_norm")
        y = gb.node("Reshape", [y, gb.ints([1, h, w, 32])], name="pre_view")
        focus = []
        for axis in axes:
            a = gb.node("Slice", [y, gb.ints([2]), gb.ints([16]), gb.ints([axis])], name="roll_a%d" % axis)
            b = gb.node("Slice", [y, gb.ints([0]), gb.ints([2]), gb.ints([axis])], name="roll_b%d" % axis)
            y = gb.node("Concat", [a, b], axis=axis, name="roll_concat%d" % axis)
            focus += ["roll_concat%d" % axis]
        y = gb.node("Reshape", [y, gb.ints([1, h * w, 32])], name="post_view")
        gb.output(gb.node("MatMul", [y, gb.weight([32, 32])], name="post_matmul"))
        c.add("x.Concat.ctx=norm_roll.axes=%s.f32.r4" % "_".join(map(str, axes)), "Concat", gb,
              kind="context", focus=focus)


def layout_reach_extra(c: Collector) -> None:
    """A Transpose (and the Reshape before it) whose result does or does not reach a compute op.

    Attention's head split, MatMul -> Reshape (1, N, h, d) -> Transpose (0, 2, 1, 3), read by a
    MatMul (directly, or through a Reshape to (h, N, d)) or by an Einsum whose spaced equation the
    compiler leaves on the CPU (a diffusion UNet's attention); a detection head's Conv ->
    Transpose (0, 2, 3, 1) -> Reshape, read by a Concat that is a graph output or by a MatMul."""
    for n_tok in (32, 256):
        for cons in ("matmul", "reshape_matmul", "reshape_cpu_einsum"):
            gb = GraphBuilder(17)
            x = gb.input("x", "float32", [1, n_tok, 64])
            q = gb.node("MatMul", [x, gb.weight([64, 64])], name="q_proj")
            v = gb.node("Reshape", [q, gb.ints([1, n_tok, 4, 16])], name="head_view")
            t = gb.node("Transpose", [v], perm=[0, 2, 1, 3], name="head_split")
            if cons == "matmul":
                y = gb.node("MatMul", [t, gb.weight([16, 16])], name="head_matmul")
            else:
                m = gb.node("Reshape", [t, gb.ints([4, n_tok, 16])], name="merge_heads")
                if cons == "reshape_matmul":
                    y = gb.node("MatMul", [m, gb.weight([16, 16])], name="head_matmul")
                else:
                    y = gb.node("Einsum", [m, m], equation="b i d, b j d -> b i j", name="head_einsum")
            gb.output(y)
            c.add("x.Transpose.ctx=head_split.%s.n=%d.f32.r4" % (cons, n_tok), "Transpose", gb, kind="context",
                  focus=["head_view", "head_split"])
    for cons in ("concat_out", "matmul"):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, 16, 12, 12])
        y = gb.node("Conv", [x, gb.weight([24, 16, 1, 1])], name="head_conv")
        t = gb.node("Transpose", [y], perm=[0, 2, 3, 1], name="to_nhwc")
        r = gb.node("Reshape", [t, gb.ints([1, 144 * 6, 4] if cons == "concat_out" else [1, 144, 24])], name="flat")
        if cons == "concat_out":
            z = gb.input("z", "float32", [1, 8, 4])
            gb.output(gb.node("Concat", [r, z], axis=1, name="cat"))
        else:
            gb.output(gb.node("MatMul", [r, gb.weight([24, 24])], name="tail_matmul"))
        c.add("x.Transpose.ctx=conv_head.%s.f32.r4" % cons, "Transpose", gb, kind="context",
              focus=["to_nhwc", "flat"])


def reduce_order_extra(c: Collector) -> None:
    """Global average pooling as the dynamo exporter writes it: ReduceMean over axes (-1, -2), in
    that order, keepdims=1. Read by an SE block (Conv -> Relu -> Conv -> Sigmoid -> Mul), by a lone
    Conv, or by a classifier head (Reshape -> Gemm); the same with the axes in ascending order."""
    for axes in ((-1, -2), (2, 3), (-2, -1), (3, 2)):
        for cons in ("se", "conv", "head"):
            gb = GraphBuilder(18)
            x = gb.input("x", "float32", [1, 48, 8, 8])
            r = gb.node("Relu", [gb.node("Conv", [x, gb.weight([48, 48, 1, 1])], name="pre_conv")], name="pre_relu")
            m = gb.node("ReduceMean", [r, gb.ints(list(axes))], keepdims=1, name="pool")
            if cons == "se":
                s1 = gb.node("Relu", [gb.node("Conv", [m, gb.weight([8, 48, 1, 1])], name="se_fc1")], name="se_relu")
                g = gb.node("Sigmoid", [gb.node("Conv", [s1, gb.weight([48, 8, 1, 1])], name="se_fc2")], name="se_gate")
                y = gb.node("Mul", [r, g], name="se_scale")
            elif cons == "conv":
                y = gb.node("Conv", [m, gb.weight([8, 48, 1, 1])], name="se_fc1")
            else:
                f = gb.node("Reshape", [m, gb.ints([1, 48])], name="flat")
                y = gb.node("Gemm", [f, gb.weight([10, 48])], transB=1, name="fc")
            gb.output(y)
            c.add("x.ReduceMean.ctx=%s.axes=%s.f32.r4" % (cons, "_".join(map(str, axes))), "ReduceMean", gb,
                  kind="context", focus=["pool"])


def _mha_split(gb: GraphBuilder, packed: str, n_tok: int, rank4: bool = False) -> list[str]:
    """MultiheadAttention's packed q/k/v split as the exporters write it: Reshape (N, 1, 3, C) ->
    Unsqueeze(0) -> Transpose (3, 1, 2, 0, 4) -> Squeeze -> Gather q/k/v -> Reshape (N, 4, 16) ->
    Transpose; with ``rank4`` each head then viewed as (1, 4, N, 16). Returns the q, k, v heads."""
    r = gb.node("Reshape", [packed, gb.ints([n_tok, 1, 3, 64])], name="qkv_view")
    u = gb.node("Unsqueeze", [r, gb.ints([0])], name="qkv_unsqueeze")
    t = gb.node("Transpose", [u], perm=[3, 1, 2, 0, 4], name="qkv_transpose")
    s_ = gb.node("Squeeze", [t, gb.ints([3])], name="qkv_squeeze")
    heads = []
    for i, nm in enumerate("qkv"):
        g = gb.node("Gather", [s_, gb.const(np.array(i, np.int64))], axis=0, name="pick_" + nm)
        v = gb.node("Reshape", [g, gb.ints([n_tok, 4, 16])], name="view_" + nm)
        h = gb.node("Transpose", [v], perm=[1, 0, 2], name="heads_" + nm)
        heads.append(gb.node("Reshape", [h, gb.ints([1, 4, n_tok, 16])], name="heads4_" + nm) if rank4 else h)
    return heads


def mha_qkv_extra(c: Collector) -> None:
    """torch.nn.MultiheadAttention's packed projection as the exporters write it (ViT, Conformer):
    in_proj MatMul -> Reshape (N, 1, 3, C) -> Unsqueeze(0) -> Transpose (3, 1, 2, 0, 4) -> Squeeze
    -> Gather q/k/v -> heads -> attention, for token counts N that are and are not multiples of 8."""
    for n_tok in (15, 16, 64, 65):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [n_tok, 1, 64])
        heads = _mha_split(gb, gb.node("MatMul", [x, gb.weight([64, 192])], name="in_proj"), n_tok)
        kt = gb.node("Transpose", [heads[1]], perm=[0, 2, 1], name="k_t")
        sc = gb.node("Softmax", [gb.node("MatMul", [heads[0], kt], name="scores")], axis=-1, name="softmax")
        gb.output(gb.node("MatMul", [sc, heads[2]], name="attn_v"))
        c.add("x.Transpose.ctx=mha_qkv.n=%d.f32.r5" % n_tok, "Transpose", gb, kind="context",
              focus=["qkv_view", "qkv_unsqueeze", "qkv_transpose"])


def mha_qkv4_extra(c: Collector) -> None:
    """The same packed projection with the heads as torch.nn.MultiheadAttention really views them
    (ViT, Conformer): each of q/k/v -> Reshape (N, heads, d) -> Transpose -> Reshape (1, heads, N, d),
    so the attention MatMuls are rank 4 (the probes above keep them rank 3), then the heads merged
    and the output projection."""
    for n_tok in (15, 16, 18, 20, 24, 40, 64, 65):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, n_tok, 64])
        x = gb.node("Transpose", [x], perm=[1, 0, 2], name="batch_second")
        p_ = gb.node("Add", [gb.weight([192]), gb.node("MatMul", [x, gb.weight([64, 192])], name="in_proj")],
                     name="in_bias")
        heads = _mha_split(gb, p_, n_tok, rank4=True)
        kt = gb.node("Transpose", [heads[1]], perm=[0, 1, 3, 2], name="k_t")
        # scaled as MultiheadAttention does it, q and k^T each by sqrt(1 / sqrt(d)): without these
        # Muls 2.2.0 ran the split on the CPU where ViT's and Conformer's ran on the NPU
        q = gb.node("Mul", [heads[0], gb.const(np.float32(0.5))], name="q_scale")
        kt = gb.node("Mul", [kt, gb.const(np.float32(0.5))], name="k_scale")
        sc = gb.node("Softmax", [gb.node("MatMul", [q, kt], name="scores")], axis=-1, name="softmax")
        o = gb.node("Transpose", [gb.node("MatMul", [sc, heads[2]], name="attn_v")], perm=[2, 0, 1, 3], name="merge_t")
        o = gb.node("Reshape", [o, gb.ints([n_tok, 64])], name="merge")
        # the output projection: without it 2.5.0 fails to build this graph for rk3588, rk3576 and
        # rv1106 ("list index out of range"); every real MultiheadAttention has one
        gb.output(gb.node("Gemm", [o, gb.weight([64, 64]), gb.weight([64])], transB=1, name="out_proj"))
        c.add("x.Transpose.ctx=mha_qkv4.n=%d.f32.r5" % n_tok, "Transpose", gb, kind="context",
              focus=["qkv_view", "qkv_unsqueeze", "qkv_transpose"])


def group_norm_extra(c: Collector) -> None:
    """GroupNorm as the TorchScript exporter writes it: Reshape (N, groups, -1) ->
    InstanceNormalization -> Reshape back -> Mul (gamma) -> Add (beta), between two Convs
    (a diffusion UNet's and a VAE decoder's resnet blocks)."""
    for channels, hw in ((32, 16), (64, 8), (16, 32), (32, 32)):
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, channels, hw, hw])
        y = gb.node("Conv", [x, gb.weight([channels, channels, 3, 3])], pads=[1, 1, 1, 1], name="pre_conv")
        r = gb.node("Reshape", [y, gb.ints([1, 8, -1])], name="gn_view")
        n = gb.node("InstanceNormalization", [r, gb.const(np.ones(8, np.float32)), gb.const(np.zeros(8, np.float32))],
                    epsilon=1e-5, name="gn_norm")
        b = gb.node("Reshape", [n, gb.ints([1, channels, hw, hw])], name="gn_back")
        m = gb.node("Mul", [b, gb.weight([channels, 1, 1])], name="gn_gamma")
        a = gb.node("Add", [m, gb.weight([channels, 1, 1])], name="gn_beta")
        gb.output(gb.node("Conv", [a, gb.weight([channels, channels, 3, 3])], pads=[1, 1, 1, 1], name="post_conv"))
        c.add("x.Reshape.ctx=group_norm.c=%d%s.f32.r4" % (channels, "" if hw < 32 else ".hw=%d" % hw), "Reshape", gb,
              kind="context",
              focus=["gn_view", "gn_norm", "gn_back"])


def window_qkv_extra(c: Collector) -> None:
    """Swin's window attention from the token grid: view (1, H/ws, ws, W/ws, ws, C), Transpose,
    view (windows, ws*ws, C) -> qkv MatMul -> Reshape (windows, N, 3, heads, d) -> Transpose
    (2, 0, 3, 1, 4) -> Gather q/k/v -> attention. With 16 windows the qkv Transpose moves five
    blocks of axes; with one window, three."""
    for hw in (16, 4):
        ws, ch, heads = 4, 32, 2
        n_win, n_tok, d = (hw // ws) ** 2, ws * ws, ch // heads
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [1, hw * hw, ch])
        y = gb.node("Mul", [x, gb.const(np.float32(1.5))], name="pre_mul")
        y = gb.node("Reshape", [y, gb.ints([1, hw // ws, ws, hw // ws, ws, ch])], name="win_view")
        y = gb.node("Transpose", [y], perm=[0, 1, 3, 2, 4, 5], name="win_perm")
        y = gb.node("Reshape", [y, gb.ints([n_win, n_tok, ch])], name="win_flat")
        y = gb.node("MatMul", [y, gb.weight([ch, 3 * ch])], name="qkv_linear")
        y = gb.node("Reshape", [y, gb.ints([n_win, n_tok, 3, heads, d])], name="qkv_view")
        t = gb.node("Transpose", [y], perm=[2, 0, 3, 1, 4], name="qkv_transpose")
        q, k, v = (gb.node("Gather", [t, gb.const(np.array(i, np.int64))], axis=0, name="pick_" + nm)
                   for i, nm in enumerate("qkv"))
        kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")
        sc = gb.node("Softmax", [gb.node("MatMul", [q, kt], name="scores")], axis=-1, name="softmax")
        gb.output(gb.node("MatMul", [sc, v], name="attn_v"))
        # one probe per op under test: each op's constraint is judged on its own node
        c.add("x.Transpose.ctx=window_qkv.windows=%d.f32.r5" % n_win, "Transpose", gb, kind="context",
              focus=["qkv_transpose"])
        c.add("x.Reshape.ctx=window_qkv.windows=%d.f32.r5" % n_win, "Reshape", gb, kind="context",
              focus=["qkv_view"])


def rnn_head_extra(c: Collector) -> None:
    """CRNN's per-step classifier behind an RNN: (T, 1, C) -> LSTM/GRU -> Transpose -> Reshape
    (T, 2H) -> Gemm (T, N) -> Reshape (T, 1, N) -> LogSoftmax. After an RNN the compiler runs the
    Gemm over the sequence as a convolution, and the Reshape back to (T, 1, N) is a layout change
    whose cost depends on N (the class count; 37 in a digits + letters OCR head)."""
    seq, hid = 26, 32
    cases = [("LSTM", n, "logsoftmax") for n in (36, 37, 38, 40, 64)]
    cases += [("GRU", 37, "logsoftmax"), ("GRU", 40, "logsoftmax"), ("LSTM", 37, "softmax"), ("LSTM", 64, "softmax")]
    for op, n, post in cases:
        gb = GraphBuilder(17)
        x = gb.input("x", "float32", [seq, 1, hid])
        y = gb.node("Relu", [x], name="pre_relu")
        y = rnn_layer(gb, y, op, hid, hid)
        y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="rnn_t")
        y = gb.node("Reshape", [y, gb.ints([seq, 2 * hid])], name="rnn_flat")
        y = gb.node("Gemm", [y, gb.weight([n, 2 * hid]), gb.weight([n])], transB=1, name="head")
        y = gb.node("Reshape", [y, gb.ints([seq, 1, n])], name="head_view")
        gb.output(gb.node("LogSoftmax" if post == "logsoftmax" else "Softmax", [y], axis=2, name="post"))
        c.add("x.Reshape.ctx=rnn_head.rnn=%s.n=%d.post=%s.f32.r2" % (op, n, post), "Reshape", gb, kind="context",
              focus=["head_view"])


FAMILIES: list[Callable[[Collector], None]] = [cast_extra, pad_extra, depth_to_space_extra, einsum_extra,
                                                expand_extra, transpose6_extra, transpose6_blocks_extra,
                                                int_and_div_extra, glue_extra, context_extra, ir_extra, instance_norm_extra,
                                                transpose_net_extra, gelu_order_extra, roll_extra,
                                                roll_layout_extra, layout_reach_extra,
                                                reduce_order_extra, mha_qkv_extra, mha_qkv4_extra,
                                                group_norm_extra, window_qkv_extra, rnn_head_extra]
