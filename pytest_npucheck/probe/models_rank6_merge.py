"""Rank-6 -> rank-4 Reshapes that merge the axes of a decomposed relative position bias on RKNN (issue 22).

timm's MViTv2 adds its relative position bias to the attention scores in rank 6: ``attn.view(B, h, qh, qw, kh,
kw) + rel_h[..., None] + rel_w[..., None, :]`` and views the sum back as ``(B, h, qh qw, kh kw)``. rknn-toolkit2
2.5.0 lays the rank-6 sum out as ``(B, h qh qw, kh, kw)`` and ran the closing Reshape on the CPU (row 'Reshape
(1,784,14,14) -> (1,4,196,196)' CPU, 14 x 14 windows), which the tables called npu (the plane rule judges rank 4
to rank 4 only). This family varies the key plane (kh, kw) (14 x 14, 7 x 7, 6 x 6, 8 x 8, 4 x 4, 16 x 16) and the
head count (4, 1), in MViTv2's form (``Reshape to rank 6 -> Add (.., 1) -> Add (.., 1, ..) -> Reshape back ->
Softmax``) and alone (``Relu of a rank-6 input -> Reshape -> Relu``). Ids ``x.Reshape.ctx=rank6_merge.*``.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (heads, q side = k side)
SIZES = ((4, 14), (4, 7), (4, 6), (4, 8), (4, 4), (1, 16), (1, 14), (4, 5))
FORMS = ("relpos", "relu", "relpos_in")


def _rank6_merge(form: str, h: int, s: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    L = s * s
    six = [1, h, s, s, s, s]
    if form.startswith("relpos"):
        x = gb.node("Relu", [gb.input("x", "float32", [1, h, L, L])], name="pre_relu")
        x = gb.node("Reshape", [x, gb.ints(six)], name="pre_view")
        if form == "relpos_in":  # the biases computed (MViTv2: Einsums of q with the position tables), not constants
            bh = gb.node("Relu", [gb.input("bh", "float32", [1, h, s, s, s, 1])], name="pre_bh")
            bw = gb.node("Relu", [gb.input("bw", "float32", [1, h, s, s, 1, s])], name="pre_bw")
        else:
            bh, bw = gb.weight([1, h, s, s, s, 1]), gb.weight([1, h, s, s, 1, s])
        x = gb.node("Add", [x, bh], name="pre_add_h")
        x = gb.node("Add", [x, bw], name="pre_add_w")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", six)], name="pre_relu")
    y = gb.node("Reshape", [x, gb.ints([1, h, L, L])], name="focus_reshape")
    if form == "relpos":
        y = gb.node("Softmax", [y], axis=-1, name="post_softmax")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def rank6_merge_extra(c: Collector) -> None:
    """Each FORM for each SIZES row."""
    for form in FORMS:
        for h, s in SIZES:
            c.add("x.Reshape.ctx=rank6_merge.%s.h=%d.s=%d.f32.r6" % (form, h, s), "Reshape", _rank6_merge(form, h, s),
                  kind="context", focus=["focus_reshape"])


FAMILIES: list[Callable[[Collector], None]] = [rank6_merge_extra]
