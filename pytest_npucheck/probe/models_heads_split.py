"""The split of a (1, C, H, W) map into attention heads, (1, h, k d, H W), in front of attention on RKNN
(issue 22).

``models_reshape_heads`` found the split on the CPU by its input plane (14 x 14, 7 x 7: not a multiple of
8) between Relus, and on the NPU in front of a Transpose (0, 1, 3, 2) when the head width d is a multiple
of 8: the compiler lays the heads on the batch axis, ``(1, h d, H, W) -> (h, d, 1, H W)``, and folds the
Transpose into the ops after it. The zoo's CoAtNet, CPU-Bone and EfficientViT-B0 split q, k and v at once,
``(1, 3 h d, H, W) -> (1, h, 3 d, H W)``, and read the parts through Slices: CoAtNet slices the heads'
axis 2 and transposes q and v (softmax attention), CPU-Bone transposes first and slices axis 3 (softmax
attention), EfficientViT-B0 transposes first and runs ReLU linear attention (no Softmax); all three ran
the split on the NPU. CoaT's convolutional relative position encoding ran its split on the CPU: there the
Transpose is read by a Mul whose other operand is itself a Transpose (0, 1, 3, 2) (``q_img * conv_v``,
q in the heads' (1, h, L, d) layout), and the compiler moved both Transposes behind the Mul
(reduce_tp_in_mesh_forward), leaving the split bare.

Forms (ids ``x.Reshape.ctx=heads_split.<form>.h=.d=.s=.f32.r4``):

- ``slice_sdpa``: CoAtNet, ``Reshape (1, h, 3 d, L) -> Slice axis 2 -> q^T k -> Softmax -> (v^T)``.
- ``t_slice_sdpa``: CPU-Bone, ``Reshape -> Transpose -> Slice axis 3 -> q k^T -> Softmax -> v``.
- ``t_slice_linear``: EfficientViT-B0, ``Reshape -> Transpose -> Slice axis 3 -> ReLU(q) (ReLU(k)^T v)``.
- ``t_mul_t``, ``t_add_t``: CoaT, ``Reshape (1, h, d, L) -> Transpose -> Mul / Add`` with a second operand
  ``Transpose (0, 1, 3, 2)`` of a (1, h, d, L) input.
- ``t_mul_t_mm``: as ``t_mul_t`` with the product read by a MatMul (d, d) (attention after it).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (heads, head width d, map side): the zoo's CoAtNet (4, 32, 14), CPU-Bone (2, 32, 7), EfficientViT-B0
#: (8, 16, 14) and CoaT (8, 32, 14), (8, 40, 7), plus a small head and head widths not a multiple of 8
SIZES = ((4, 32, 14), (2, 32, 7), (8, 16, 14), (8, 40, 7), (2, 8, 5), (4, 5, 5), (8, 3, 7))

FORMS = ("slice_sdpa", "t_slice_sdpa", "t_slice_linear", "t_mul_t", "t_add_t", "t_mul_t_mm")


def _slices(gb: GraphBuilder, x: str, d: int, axis: int) -> list[str]:
    return [gb.node("Slice", [x, gb.ints([i * d]), gb.ints([(i + 1) * d]), gb.ints([axis])], name="post_slice_%d" % i)
            for i in range(3)]


def _t(gb: GraphBuilder, x: str, name: str) -> str:
    return gb.node("Transpose", [x], perm=[0, 1, 3, 2], name=name)


def _heads_split(form: str, h: int, d: int, s: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    L = s * s
    parts = 1 if form.startswith("t_mul") or form.startswith("t_add") else 3
    x = gb.node("Relu", [gb.input("x", "float32", [1, parts * h * d, s, s])], name="pre_relu")
    y = gb.node("Reshape", [x, gb.ints([1, h, parts * d, L])], name="focus_reshape")
    if form == "slice_sdpa":  # (1, h, d, L) each
        q, k, v = _slices(gb, y, d, 2)
        scores = gb.node("MatMul", [_t(gb, q, "post_q_t"), k], name="post_scores")
        p = gb.node("Softmax", [scores], axis=-1, name="post_softmax")
        out = gb.node("MatMul", [p, _t(gb, v, "post_v_t")], name="post_av")
    elif form in ("t_slice_sdpa", "t_slice_linear"):  # (1, h, L, d) each
        q, k, v = _slices(gb, _t(gb, y, "post_t"), d, 3)
        if form == "t_slice_sdpa":
            scores = gb.node("MatMul", [q, _t(gb, k, "post_k_t")], name="post_scores")
            p = gb.node("Softmax", [scores], axis=-1, name="post_softmax")
            out = gb.node("MatMul", [p, v], name="post_av")
        else:
            q = gb.node("Relu", [q], name="post_q_relu")
            k = gb.node("Relu", [k], name="post_k_relu")
            kv = gb.node("MatMul", [_t(gb, k, "post_k_t"), v], name="post_kv")
            out = gb.node("MatMul", [q, kv], name="post_qkv")
    else:
        other = _t(gb, gb.node("Relu", [gb.input("q", "float32", [1, h, d, L])], name="q_relu"), "q_t")
        op = "Add" if form.startswith("t_add") else "Mul"
        out = gb.node(op, [other, _t(gb, y, "post_t")], name="post_" + op.lower())
        if form.endswith("_mm"):
            out = gb.node("MatMul", [out, gb.weight([d, d])], name="post_matmul")
    gb.output(gb.node("Relu", [out], name="post_relu"))
    return gb


def heads_split_extra(c: Collector) -> None:
    """Each FORM for each SIZES row."""
    for form in FORMS:
        for h, d, s in SIZES:
            c.add("x.Reshape.ctx=heads_split.%s.h=%d.d=%d.s=%d.f32.r4" % (form, h, d, s), "Reshape",
                  _heads_split(form, h, d, s), kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [heads_split_extra]
