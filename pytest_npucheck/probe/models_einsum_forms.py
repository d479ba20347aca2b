"""Einsum equations by structure, not by spelling (issue 22). Ids start with ``q.`` (QNN extra probes).

The QNN tables listed the Einsum equations that ran on the NPU as text, so an equation of the same
shape with other letters (CvT's attention ``bhlk,bhtk->bhlt``, ``bhlt,bhtv->bhlv``) was predicted
CPU while QNN HTP ran it. ``einsum_form_extra`` probes each structural form with letters and ranks
other than the ones probed before (uppercase ones too), plus equations one step off each form (an
ellipsis, an implicit output, a permuted output, mixed operand ranks, a Hadamard product, an outer
product, three operands): which of them run says whether QNN matches the structure
(rules.einsum) or the text. On QNN 2.51.0 every form ran whatever its letters, and every
equation off the forms ran on the CPU ("Einsum unsupported equation: ...").

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, equation, operand shapes): label = the structural form the equation has (or "off.<why>")
EINSUM_FORMS = (
    # a batched MatMul: same batch letters, (m, k) x (k, n) -> (m, n)
    ("matmul.cvt", "bhlt,bhtv->bhlv", [[1, 2, 8, 8], [1, 2, 8, 4]]),
    ("matmul.r3", "xyz,xzw->xyw", [[2, 8, 4], [2, 4, 6]]),
    ("matmul.r5", "abcij,abcjk->abcik", [[1, 2, 2, 4, 3], [1, 2, 2, 3, 5]]),
    ("matmul.r2", "mk,kn->mn", [[8, 4], [4, 6]]),
    ("matmul.upper", "BIJ,BJK->BIK", [[2, 8, 4], [2, 4, 6]]),
    # a batched MatMul with the right operand transposed: (m, k) x (n, k) -> (m, n)
    ("matmul_tb.cvt", "bhlk,bhtk->bhlt", [[1, 2, 8, 4], [1, 2, 6, 4]]),
    ("matmul_tb.r3", "nqd,nkd->nqk", [[2, 8, 4], [2, 6, 4]]),
    ("matmul_tb.r2", "id,jd->ij", [[8, 4], [6, 4]]),
    # rank 4, both operands and the result with axes 1 and 3 swapped (b, k, h, m) x (b, n, h, k) -> (b, n, h, m)
    ("matmul_tall.ref", "bchq,bkhc->bkhq", [[1, 4, 2, 8], [1, 6, 2, 4]]),
    ("matmul_tall.renamed", "nadm,nbda->nbdm", [[1, 4, 2, 8], [1, 6, 2, 4]]),
    # rank 4 x rank 3, right operand transposed and broadcast over the first axis
    ("matmul_btb.renamed", "nijc,ikc->nijk", [[1, 4, 5, 8], [4, 6, 8]]),
    # rank 4 x rank 3 contracted over the last axis, aligned on axis 2 (relative position terms)
    ("rsum_mul.renamed", "nijc,jkc->nijk", [[1, 4, 5, 8], [5, 6, 8]]),
    # one step off
    ("off.ellipsis", "...ij,...jk->...ik", [[2, 8, 4], [2, 4, 6]]),
    ("off.implicit", "bij,bjk", [[2, 8, 4], [2, 4, 6]]),
    ("off.out_permuted", "bij,bjk->bki", [[2, 8, 4], [2, 4, 6]]),
    ("off.mixed_rank", "bhij,bjk->bhik", [[2, 3, 8, 4], [2, 4, 6]]),
    ("off.hadamard", "bij,bij->bij", [[2, 8, 4], [2, 8, 4]]),
    ("off.three", "ij,jk,kl->il", [[8, 4], [4, 6], [6, 5]]),
    ("off.outer", "bi,bj->bij", [[2, 8], [2, 6]]),
)


def _einsum(eq: str, shapes: list[list[int]]) -> GraphBuilder:
    gb = GraphBuilder(17)
    ins = [gb.node("Relu", [gb.input("in%d" % i, "float32", s)], name="pre_relu%d" % i) for i, s in enumerate(shapes)]
    y = gb.node("Einsum", ins, equation=eq, name="focus_einsum")
    gb.output(gb.node("Add", [y, gb.const(np.float32(1.0))], name="post_add"))
    return gb


def einsum_form_extra(c: Collector) -> None:
    """Einsum equations by structural form, with other letters and ranks (EINSUM_FORMS)."""
    for label, eq, shapes in EINSUM_FORMS:
        c.add("q.Einsum.ctx=form.%s.f32.r%d" % (label, len(shapes[0])), "Einsum", _einsum(eq, shapes),
              kind="context", attributes={"equation": eq}, focus=["focus_einsum"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [einsum_form_extra]
