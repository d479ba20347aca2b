"""Constant Pads of one side of the channel axis on RKNN (issue 22): MobileBERT's trigram embedding.

MobileBERT builds its trigram input as ``pad(x[:, 1:], [0, 0, 0, 1])`` and
``pad(x[:, :-1], [0, 0, 1, 0])`` on a ``[1, S - 1, D]`` tensor: two rank-3 constant Pads of the
sequence axis, one at its end, one at its start. rknn-toolkit2 2.5.0 rewrote the start Pad to a Conv
(NPU) and ran the end Pad on the CPU. The compiler lays ranks 2 and 3 out as ``(N, C, 1, W)``, so
that axis is its channel axis: a Pad of the end (not the start) of the channel axis runs on the CPU
unless the channel count is a multiple of 8, at any rank, plane and pad amount.

Families (ids ``x.Pad.ctx=*``), built like those of models_op_context.py and listed in FAMILIES:
``side.*`` pads one side or both of one axis (``Relu -> Pad -> Relu``); ``channel_tail.*`` varies the
channel count and the pad amount of the end of axis 1, and pads a second axis with it;
``channels_last.*`` is Swin's window padding of a ``(1, H, W, C)`` map behind a Reshape (on the CPU
here; Mask2Former's ran on the NPU, a context these probes do not reproduce).
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


def _pads(rank: int, axis: int, side: str, amount: int = 1) -> list[int]:
    pads = [0] * (2 * rank)
    if side != "end":
        pads[axis] = amount
    if side != "begin":
        pads[axis + rank] = amount
    return pads


def _pad_side(shape: Sequence[int], axis: int, side: str, amount: int = 1) -> GraphBuilder:
    """``Relu -> Pad(constant, 1 at the ``begin``, the ``end`` or ``both`` sides of ``axis``) -> Relu``;
    the Pad is ``focus_pad``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", list(shape))], name="pre_relu")
    y = gb.node("Pad", [x, gb.ints(_pads(len(shape), axis, side, amount))], name="focus_pad", mode="constant")
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


#: (input shape, pad at the end of axis 1): the channel count and the pad amount
CHANNEL_TAILS = (
    ([1, 16, 32], 1), ([1, 16, 32], 496), ([1, 15, 32], 497), ([1, 8, 32], 1), ([1, 12, 32], 1),
    ([1, 17, 32], 1), ([1, 31, 32], 1), ([1, 32, 32], 1), ([1, 15, 32], 2), ([1, 14, 32], 2),
    ([1, 16, 1, 32], 1), ([1, 15, 1, 32], 17), ([1, 15, 4, 16], 1), ([1, 12, 15, 16], 1),
)

#: (input shape, pads) that pad the end of axis 1 and of another axis (Swin's window padding of a
#: channels-last (1, H, W, C) map)
TWO_AXIS_TAILS = (
    ([1, 1, 1, 256], [0, 0, 0, 0, 0, 6, 6, 0]),
    ([1, 15, 1, 32], [0, 0, 0, 0, 0, 1, 0, 1]),
    ([1, 15, 32], [0, 0, 0, 0, 1, 1]),
)


def pad_channel_tail_extra(c: Collector) -> None:
    """:func:`_pad_side` at the end of axis 1 over CHANNEL_TAILS (channel counts, pad amounts)."""
    for shape, amount in CHANNEL_TAILS:
        gb = _pad_side(shape, 1, "end", amount)
        c.add("x.Pad.ctx=channel_tail.s=%s.p=%d.f32.r%d" % ("x".join(map(str, shape)), amount, len(shape)),
              "Pad", gb, kind="context",
              attributes={"mode": "constant", "pads": _pads(len(shape), 1, "end", amount)},
              focus=["focus_pad"])
    for shape, pads in TWO_AXIS_TAILS:
        gb = GraphBuilder(17)
        x = gb.node("Relu", [gb.input("x", "float32", list(shape))], name="pre_relu")
        y = gb.node("Pad", [x, gb.ints(pads)], name="focus_pad", mode="constant")
        gb.output(gb.node("Relu", [y], name="post_relu"))
        c.add("x.Pad.ctx=channel_tail.s=%s.pads=%s.f32.r%d" % ("x".join(map(str, shape)), "_".join(map(str, pads)), len(shape)),
              "Pad", gb, kind="context", attributes={"mode": "constant", "pads": list(pads)},
              focus=["focus_pad"])



def pad_channels_last_extra(c: Collector) -> None:
    """Swin's window padding in its network: ``(1, L, C) -> [LayerNormalization | Relu] -> Reshape
    (1, H, W, C) -> Pad(end of H and W) -> Reshape (1, L', C)``."""
    import numpy as np

    for pre in ("layernorm", "relu"):
        for hw, pad in ((1, 6), (5, 2)):
            gb = GraphBuilder(17)
            x = gb.input("x", "float32", [1, hw * hw, 256])
            if pre == "layernorm":
                y = gb.node("LayerNormalization", [x, gb.const(np.ones(256, np.float32)),
                                                   gb.const(np.zeros(256, np.float32))], name="pre_ln", axis=-1, epsilon=1e-5)
            else:
                y = gb.node("Relu", [x], name="pre_relu")
            y = gb.node("Reshape", [y, gb.ints([1, hw, hw, 256])], name="pre_reshape")
            pads = [0, 0, 0, 0, 0, pad, pad, 0]
            y = gb.node("Pad", [y, gb.ints(pads)], name="focus_pad", mode="constant")
            n = (hw + pad) ** 2
            gb.output(gb.node("Reshape", [y, gb.ints([1, n, 256])], name="post_reshape"))
            c.add("x.Pad.ctx=channels_last.pre=%s.hw=%d.p=%d.f32.r4" % (pre, hw, pad), "Pad", gb,
                  kind="context", attributes={"mode": "constant", "pads": pads}, focus=["focus_pad"])


FAMILIES: list[Callable[[Collector], None]] = [pad_side_extra, pad_channel_tail_extra, pad_channels_last_extra]
