"""Constant Pads of one side of one axis on RKNN (issue 22): MobileBERT's trigram embedding.

MobileBERT builds its trigram input as ``pad(x[:, 1:], [0, 0, 0, 1])`` and
``pad(x[:, :-1], [0, 0, 1, 0])`` on a ``[1, S - 1, D]`` tensor: two rank-3 constant Pads of the
sequence axis, one at its end, one at its start. rknn-toolkit2 2.5.0 rewrote the start Pad to a Conv
(NPU) and ran the end Pad on the CPU. These probes pad one side of one axis, alone
(``Relu -> Pad -> Relu``), over the ranks and axes the exporters give.

Built like the families of models_op_context.py and listed in FAMILIES (ids ``x.Pad.ctx=side.*``).
"""

from __future__ import annotations

from typing import Callable, Sequence

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (input shape, axes probed)
SHAPES = (
    ([1, 15, 32], (1, 2)),
    ([1, 8, 15, 16], (1, 2, 3)),
    ([15, 32], (0, 1)),
    ([1, 15, 1, 32], (1,)),
    ([2, 15, 32], (1,)),
)

SIDES = ("begin", "end", "both")


def _pads(rank: int, axis: int, side: str) -> list[int]:
    pads = [0] * (2 * rank)
    if side != "end":
        pads[axis] = 1
    if side != "begin":
        pads[axis + rank] = 1
    return pads


def _pad_side(shape: Sequence[int], axis: int, side: str) -> GraphBuilder:
    """``Relu -> Pad(constant, 1 at the ``begin``, the ``end`` or ``both`` sides of ``axis``) -> Relu``;
    the Pad is ``focus_pad``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", list(shape))], name="pre_relu")
    y = gb.node("Pad", [x, gb.ints(_pads(len(shape), axis, side))], name="focus_pad", mode="constant")
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def pad_side_extra(c: Collector) -> None:
    """:func:`_pad_side` over SHAPES, their axes and the three sides."""
    for shape, axes in SHAPES:
        for axis in axes:
            for side in SIDES:
                gb = _pad_side(shape, axis, side)
                c.add("x.Pad.ctx=side.s=%s.axis%d.%s.f32.r%d"
                      % ("x".join(map(str, shape)), axis, side, len(shape)), "Pad", gb,
                      kind="context", attributes={"mode": "constant", "pads": _pads(len(shape), axis, side)}, focus=["focus_pad"])


FAMILIES: list[Callable[[Collector], None]] = [pad_side_extra]
