"""Rank-5 Einsums of a decomposed relative position bias on RKNN (issue 22).

timm's MViTv2 computes its relative position terms per query position in rank 5, ``torch.einsum("byhwc,hkc->byhwk",
q, Rh)`` and ``"byhwc,wkc->byhwk"`` (q as (B, heads, qh, qw, C)); rknn-toolkit2 2.5.0 ran them on the NPU
(timm_mvitv2_tiny, 20 nodes), while the table's equation list only had SAM's rank-4 ``bhwc,hkc->bhwk``. This family
builds the two equations between computed tensors (``models_einsum_equations._einsum``) at MViTv2-T's sizes
(4 heads over 14 x 14 queries, 96 channels) and at 1 head over 7 x 7 and 2 heads over 28 x 28. Ids
``x.Einsum.ctx=relpos5.*``.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector
from pytest_npucheck.probe.models_einsum_equations import _einsum

#: (heads, side, channels)
SIZES = ((4, 14, 96), (1, 7, 96), (2, 28, 48))
EQUATIONS = (("rel_h", "byhwc,hkc->byhwk"), ("rel_w", "byhwc,wkc->byhwk"))


def einsum_relpos5_extra(c: Collector) -> None:
    """Each EQUATIONS entry at each SIZES row."""
    for label, eq in EQUATIONS:
        for h, s, ch in SIZES:
            c.add("x.Einsum.ctx=relpos5.%s.h=%d.s=%d.f32.r5" % (label, h, s), "Einsum",
                  _einsum(eq, [[1, h, s, s, ch], [s, s, ch]]), kind="context", attributes={"equation": eq},
                  focus=["focus_einsum"])


FAMILIES: list[Callable[[Collector], None]] = [einsum_relpos5_extra]
