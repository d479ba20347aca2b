"""Element-wise ops with a constant on tensors of rank 5 and 6, on RKNN (issue 22, Twins-SVT).

timm's Twins-SVT applies its qkv Linear to the windows viewed as (1, h, w, ws, ws, C): a MatMul and the bias
Add at rank 6, the bias the Add's first input. rknn-toolkit2 2.5.0's rewrite ``squeeze_nd_add``
(``_p_squeeze_nd_elementwise_op``) raises on it ("'IRGraph' object has no attribute 'node_use_target_const'"),
build() fails. The family varies the rank (4, 5, 6), the constant's side, the producer (MatMul, Relu), the op
(Add, Mul, Sub) and the constant's shape (per-channel vector, full, scalar; or a computed operand).

Ids ``x.{Add,Mul,Sub}.ctx=squeeze_nd.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

#: (label, input shape)
SHAPES = (("twins", [1, 8, 8, 7, 7, 32]), ("small6", [1, 2, 2, 4, 4, 16]), ("r5", [1, 4, 7, 7, 32]),
          ("r4", [1, 8, 49, 32]))


def _squeeze_nd(op: str, shape: list[int], first: bool, producer: str, const: str) -> GraphBuilder:
    """x -> pre (MatMul by a (C, C) weight, or Relu) -> focus_op(constant, .) or (., constant) -> Relu."""
    gb = GraphBuilder(17)
    c = shape[-1]
    x = gb.input("x", "float32", shape)
    if producer == "matmul":
        x = gb.node("MatMul", [x, gb.const(rand([c, c]))], name="pre_matmul")
    else:
        x = gb.node("Relu", [x], name="pre_relu")
    if const == "computed":
        k = gb.node("Sigmoid", [gb.input("y", "float32", [c])], name="pre_other")
    else:
        k = gb.const(rand({"vec": [c], "full": shape, "scalar": []}[const]) + 1.0)
    y = gb.node(op, [k, x] if first else [x, k], name="focus_op")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def squeeze_nd_extra(c: Collector) -> None:
    """Add/Mul with a constant at ranks 4 to 6."""
    cases = [("Add", "twins", True, "matmul", "vec"), ("Add", "twins", False, "matmul", "vec"),
             ("Add", "twins", True, "relu", "vec"), ("Add", "twins", False, "relu", "vec"),
             ("Add", "small6", True, "matmul", "vec"), ("Add", "small6", False, "matmul", "vec"),
             ("Add", "small6", True, "matmul", "full"), ("Add", "small6", True, "matmul", "scalar"),
             ("Mul", "small6", True, "matmul", "vec"), ("Mul", "small6", False, "matmul", "vec"),
             ("Add", "r5", True, "matmul", "vec"), ("Add", "r5", False, "matmul", "vec"),
             ("Add", "r4", True, "matmul", "vec"), ("Add", "r4", False, "matmul", "vec"),
             ("Add", "small6", True, "matmul", "computed"), ("Sub", "small6", False, "matmul", "vec")]
    shapes = dict(SHAPES)
    for op, label, first, producer, const in cases:
        shape = shapes[label]
        c.add("x.%s.ctx=squeeze_nd.%s.%s.%s.%s.f32.r%d" % (op, label, "const_first" if first else "const_second",
                                                         producer, const, len(shape)),
              op, _squeeze_nd(op, shape, first, producer, const), kind="context", focus=["focus_op"])


FAMILIES: list[Callable[[Collector], None]] = [squeeze_nd_extra]


#: (label, input (B, h, w, C), heads): MaxViT-rw's window attention qkv on (windows, h, w, C)
QKV4 = (("maxvit", [64, 8, 8, 32], 1), ("b4", [4, 8, 8, 32], 1), ("b1", [1, 8, 8, 32], 1), ("b64.h2", [64, 8, 8, 32], 2),
        ("b16.w4", [16, 4, 4, 32], 1))


def _qkv4(shape: list[int], heads: int, bias: bool, after: str) -> GraphBuilder:
    """x (B, h, w, C) -> Relu -> focus_mm MatMul (C, 3C) [-> focus_bias Add(bias (3C,))] -> ``after``: "reshape"
    (B, h w, heads, 3C / heads) -> Transpose (0, 2, 1, 3) -> Relu, or "relu"."""
    gb = GraphBuilder(17)
    b, h, w, c = shape
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    y = gb.node("MatMul", [x, gb.const(rand([c, 3 * c]))], name="focus_mm")
    if bias:
        y = gb.node("Add", [y, gb.const(rand([3 * c]))], name="focus_bias")
    if after == "reshape":
        y = gb.node("Reshape", [y, gb.ints([b, h * w, heads, 3 * c // heads])], name="focus_rs")
        y = gb.node("Transpose", [y], perm=[0, 2, 1, 3], name="post_tp")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def qkv4_extra(c: Collector) -> None:
    """MaxViT-rw's qkv Linear of rank-4 windows, with and without its bias and the head Reshape."""
    for label, shape, heads in QKV4:
        for bias, after in ((True, "reshape"), (False, "reshape"), (True, "relu")):
            if label != "maxvit" and not (bias and after == "reshape"):
                continue
            c.add("x.Add.ctx=qkv4.%s.%s.%s.f32.r4" % (label, "bias" if bias else "no_bias", after), "Add",
                  _qkv4(shape, heads, bias, after), kind="context", focus=["focus_mm", "focus_bias", "focus_rs"])


FAMILIES.append(qkv4_extra)


#: (label, heads, query map side, key map side): MViTv2's decomposed relative positions
RELPOS6 = (("h1.q8.k4", 1, 8, 4), ("h1.q8.k7", 1, 8, 7), ("h2.q8.k4", 2, 8, 4), ("h2.q8.k7", 2, 8, 7),
           ("h1.q8.k8", 1, 8, 8), ("h1.q8.k14", 1, 8, 14), ("h1.q7.k7", 1, 7, 7), ("h1.q4.k2", 1, 4, 2))


def _relpos6(heads: int, q: int, k: int, adds: bool, expand: bool = False) -> GraphBuilder:
    """scores (1, heads, q q, k k) -> Reshape (1, heads, q, q, k, k) [-> Add (., ., ., ., k, 1) -> Add (., ., ., ., 1,
    k): the height and width terms, computed] (``adds``; else a Relu) -> focus_merge Reshape (1, heads, q q, k k) ->
    Softmax."""
    gb = GraphBuilder(17)
    s = gb.node("Relu", [gb.input("s", "float32", [1, heads, q * q, k * k])], name="pre_relu")
    x = gb.node("Reshape", [s, gb.ints([1, heads, q, q, k, k])], name="pre_split")
    if adds:
        rh = gb.node("Relu", [gb.input("rh", "float32", [1, heads, q, q, k, 1])], name="pre_rh")
        rw = gb.node("Relu", [gb.input("rw", "float32", [1, heads, q, q, 1, k])], name="pre_rw")
        x = gb.node("Add", [gb.node("Add", [x, rh], name="pre_add_h"), rw], name="pre_add_w")
    else:
        x = gb.node("Relu", [x], name="pre_relu6")
    x = gb.node("Reshape", [x, gb.ints([1, heads, q * q, k * k])], name="focus_merge")
    if expand:  # timm's attn[:, :, sp:, sp:] = ...: an Expand to the same shape in front of a ScatterND
        x = gb.node("Expand", [x, gb.ints([1, heads, q * q, k * k])], name="post_expand")
    gb.output(gb.node("Softmax", [x], axis=-1, name="post_softmax"))
    return gb


def relpos6_extra(c: Collector) -> None:
    """The rank-6 -> rank-4 merge of MViTv2's relative-position scores (RELPOS6), with the two Adds and with a Relu."""
    for label, heads, q, k in RELPOS6:
        for adds, expand in ((True, False), (False, False), (True, True)):
            if (not adds or expand) and label not in ("h1.q8.k7", "h1.q8.k4"):
                continue
            c.add("x.Reshape.ctx=relpos6.%s.%s%s.f32.r6" % (label, "adds" if adds else "relu", ".expand" if expand else ""),
                  "Reshape", _relpos6(heads, q, k, adds, expand), kind="context", focus=["focus_merge"])


FAMILIES.append(relpos6_extra)


#: MViTv2's decomposed relative positions (timm cal_rel_pos_type): the query map (B, heads, qh, qw, C) against the
#: (q, k, C) position tables, height and width; the zoo's sizes (56 x 56 queries, 14 keys) and smaller
MVIT_EQUATIONS = (("mvit_rel_h", "byhwc,hkc->byhwk", [[1, 1, 56, 56, 96], [56, 14, 96]]),
                  ("mvit_rel_w", "byhwc,wkc->byhwk", [[1, 1, 56, 56, 96], [56, 14, 96]]),
                  ("mvit_rel_h.small", "byhwc,hkc->byhwk", [[1, 2, 8, 8, 16], [8, 4, 16]]),
                  ("mvit_rel_w.small", "byhwc,wkc->byhwk", [[1, 2, 8, 8, 16], [8, 4, 16]]))


def mvit_einsum_extra(c: Collector) -> None:
    """MVIT_EQUATIONS, between Relus (as ``x.Einsum.ctx=letters.*``)."""
    from pytest_npucheck.probe.models_einsum_equations import _einsum

    for label, eq, shapes in MVIT_EQUATIONS:
        c.add("x.Einsum.ctx=letters.%s.f32.r%d" % (label, len(shapes[0])), "Einsum", _einsum(eq, shapes),
              kind="context", attributes={"equation": eq}, focus=["focus_einsum"])


FAMILIES.append(mvit_einsum_extra)


#: (label, channels, map side): MViTv2's pooled keys/values (1, C, h, w) -> (1, 1, C, h w)
POOL_FLAT = (("c96.14", 96, 14), ("c96.7", 96, 7), ("c16.5", 16, 5), ("c16.8", 16, 8), ("c12.7", 12, 7))
#: the same with the heads in the batch, (h, C, s, s) -> (1, h, C, s s) (MViTv2's later stages)
POOL_FLAT_HEADS = (("h2.c96.14", 2, 96, 14), ("h4.c96.7", 4, 96, 7), ("h2.c12.7", 2, 12, 7))


def _pool_flat(c: int, s: int, after: str, heads: int = 1) -> GraphBuilder:
    """x (1, C, s, s) -> depthwise Conv 3x3 -> focus_flat Reshape (1, 1, C, s s) -> Transpose (0, 1, 3, 2) ->
    LayerNormalization (``after`` "ln", MViTv2's norm_k) or Relu ("relu")."""
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [heads, c, s, s])
    x = gb.node("Conv", [x, gb.const(rand([c, 1, 3, 3]))], group=c, kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                name="pre_conv")
    x = gb.node("Reshape", [x, gb.ints([1, heads, c, s * s])], name="focus_flat")
    x = gb.node("Transpose", [x], perm=[0, 1, 3, 2], name="post_tp")
    if after == "ln":
        x = gb.node("LayerNormalization", [x, gb.const(rand([c]) + 1.0), gb.const(rand([c]))], axis=-1,
                    epsilon=1e-6, name="post_ln")
    else:
        x = gb.node("Relu", [x], name="post_relu")
    gb.output(x)
    return gb


def pool_flat_extra(c: Collector) -> None:
    """POOL_FLAT behind a depthwise Conv, in front of a Transpose and a LayerNorm or a Relu."""
    for label, ch, s in POOL_FLAT:
        for after in ("ln", "relu"):
            c.add("x.Reshape.ctx=pool_flat.%s.%s.f32.r4" % (label, after), "Reshape", _pool_flat(ch, s, after),
                  kind="context", focus=["focus_flat"])
    for label, heads, ch, s in POOL_FLAT_HEADS:
        c.add("x.Reshape.ctx=pool_flat.%s.ln.f32.r4" % label, "Reshape", _pool_flat(ch, s, "ln", heads),
              kind="context", focus=["focus_flat"])


FAMILIES.append(pool_flat_extra)


#: (label, constant shape given the rank-6 input (1, 2, 4, 4, 4, 8)): which constants squeeze_nd_add raises on
SQUEEZE_CONSTS = (("vec", [8]), ("unit_last", [1, 2, 4, 4, 4, 1]), ("unit_mid", [1, 2, 4, 4, 1, 8]))


def _squeeze_nd_b(producer: str, const: str) -> GraphBuilder:
    """x -> pre (MatMul by an (8, 8) weight at rank 6, a Relu at rank 6, or a Reshape of a rank-4 (1, 2, 16, 32)
    map) -> focus_op Add(., constant) -> Relu: separates the producer from the constant's shape (MViTv2's
    rank-6 relative-position Adds of constants, behind a Reshape, build)."""
    gb = GraphBuilder(17)
    six = [1, 2, 4, 4, 4, 8]
    if producer == "reshape":
        x = gb.node("Relu", [gb.input("x", "float32", [1, 2, 16, 32])], name="pre_relu4")
        x = gb.node("Reshape", [x, gb.ints(six)], name="pre_view")
    elif producer == "matmul":
        x = gb.node("MatMul", [gb.input("x", "float32", six), gb.const(rand([8, 8]))], name="pre_matmul")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", six)], name="pre_relu")
    k = gb.const(rand(dict(SQUEEZE_CONSTS)[const]) + 1.0)
    y = gb.node("Add", [x, k], name="focus_op")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def squeeze_nd_b_extra(c: Collector) -> None:
    """Each producer (matmul, relu, reshape) with each constant shape of SQUEEZE_CONSTS."""
    for producer in ("matmul", "relu", "reshape"):
        for const, _ in SQUEEZE_CONSTS:
            c.add("x.Add.ctx=squeeze_nd_b.%s.%s.f32.r6" % (producer, const), "Add", _squeeze_nd_b(producer, const),
                  kind="context", focus=["focus_op"])


FAMILIES.append(squeeze_nd_b_extra)
