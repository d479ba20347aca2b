"""Einsum equations on RKNN (issue 22): the same contraction written with other letters.

The rknn 2.5.0 tables list the probed equations (``bhid,bhjd->bhij``, ...) and predicted every
other equation CPU. CvT's attention writes ``bhlk,bhtk->bhlt`` and ``bhlt,bhtv->bhlv``: the same
batched MatMuls with other subscript letters, and rknn-toolkit2 2.5.0 runs them on the NPU. The
family writes each probed equation with renamed letters (capital letters too), keeps the
spelling that does matter (spaces between the letters of one operand), and adds the equations of
held-out models the table did not list (XLNet, LongT5).

Built like the families of models_extra.py and listed in FAMILIES (ids ``x.Einsum.ctx=letters.*``).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, equation, input shapes): CvT's two, then renamed forms of the table's probed equations
EQUATIONS = (
    ("cvt_qk", "bhlk,bhtk->bhlt", [[1, 2, 16, 8], [1, 2, 16, 8]]),
    ("cvt_pv", "bhlt,bhtv->bhlv", [[1, 2, 16, 16], [1, 2, 16, 8]]),
    ("qk.nqkd", "bnqd,bnkd->bnqk", [[1, 2, 16, 8], [1, 2, 16, 8]]),
    ("mm.xyz", "xyz,xzw->xyw", [[2, 8, 16], [2, 16, 8]]),
    ("mm.caps", "BIJ,BJK->BIK", [[2, 8, 16], [2, 16, 8]]),
    ("transpose.ab", "ab->ba", [[8, 16]]),
    ("outer.uv", "u,v->uv", [[8], [16]]),
    ("proj.nchw", "nchw,oc->nohw", [[1, 8, 4, 4], [16, 8]]),
    ("qk.spaces_inside", "b h l k, b h t k -> b h l t", [[1, 2, 16, 8], [1, 2, 16, 8]]),
    ("qk.spaces_around", "bhlk , bhtk -> bhlt", [[1, 2, 16, 8], [1, 2, 16, 8]]),
    # not a renaming of a probed equation: a contraction over two axes
    ("contract2", "bhlk,bhtk->bl", [[1, 2, 16, 8], [1, 2, 16, 8]]),
    # XLNet's relative attention and LongT5's local attention (held-out TorchScript exports)
    ("xlnet_proj", "ibh,hnd->ibnd", [[16, 1, 32], [32, 2, 16]]),
    ("xlnet_qk", "ibnd,jbnd->bnij", [[16, 1, 2, 16], [16, 1, 2, 16]]),
    ("xlnet_perm", "ijbn->bnij", [[16, 16, 1, 2]]),
    ("xlnet_pv", "bnij,jbnd->ibnd", [[1, 2, 16, 16], [16, 1, 2, 16]]),
    ("xlnet_out", "ibnd,hnd->ibh", [[16, 1, 2, 16], [32, 2, 16]]),
    ("longt5_qk", "...qhd,...khd->...hqk", [[1, 4, 8, 2, 16], [1, 4, 24, 2, 16]]),
    ("longt5_pv", "...hqk,...khd->...qhd", [[1, 4, 2, 8, 24], [1, 4, 24, 2, 16]]),
    # PEGASUS-X's block-local attention with global tokens, SAM's decomposed relative positions (held-out
    # TorchScript exports; PEGASUS-X's blocks of 512 tokens shortened to 128)
    ("pegasus_x_qg", "BHNKF,BHGF->BHNKG", [[1, 2, 1, 128, 16], [1, 2, 32, 16]]),
    ("pegasus_x_qk", "BHNKF,BHNXF->BHNKX", [[1, 2, 1, 128, 16], [1, 2, 1, 128, 16]]),
    ("pegasus_x_pg", "BHNKG,BHGF->BHNKF", [[1, 2, 1, 128, 32], [1, 2, 32, 16]]),
    ("pegasus_x_pv", "BHNKX,BHNXF->BHNKF", [[1, 2, 1, 128, 128], [1, 2, 1, 128, 16]]),
    ("sam_rel_h", "bhwc,hkc->bhwk", [[2, 14, 14, 16], [14, 14, 16]]),
    ("sam_rel_w", "bhwc,wkc->bhwk", [[2, 14, 14, 16], [14, 14, 16]]),
)


def _einsum(equation: str, shapes: list[list[int]]) -> GraphBuilder:
    """``Relu(inputs) -> Einsum(equation) -> Relu`` (the Einsum between two computed tensors)."""
    gb = GraphBuilder(17)
    ins = [gb.node("Relu", [gb.input("x%d" % i, "float32", s)], name="pre_relu%d" % i) for i, s in enumerate(shapes)]
    y = gb.node("Einsum", ins, equation=equation, name="focus_einsum")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def einsum_letters_extra(c: Collector) -> None:
    """Einsum equations by their letters and spacing (EQUATIONS)."""
    for label, eq, shapes in EQUATIONS:
        c.add("x.Einsum.ctx=letters.%s.f32.r%d" % (label, len(shapes[0])), "Einsum", _einsum(eq, shapes),
              kind="context", attributes={"equation": eq}, focus=["focus_einsum"])


FAMILIES: list[Callable[[Collector], None]] = [einsum_letters_extra]
