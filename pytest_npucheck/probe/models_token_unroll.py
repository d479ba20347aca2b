"""Hiera's token unroll on RKNN (issue 22).

Hiera unrolls its patch tokens before the first stage: a chain of rank-6 ``Reshape (B, s/2, 2, s/2, 2, C) ->
Transpose (0, 2, 4, 1, 3, 5) -> Reshape (4 B, s/2, s/2, C)`` blocks (models_unroll.py probes the same chain on
QNN). The RKNN table calls each rank-6 Transpose CPU (it moves five or six blocks of axes, more than the four
a lone rank-6 Transpose may move), while rknn-toolkit2 2.5.0 ran all three of the zoo's Hiera (TorchScript)
on the NPU: it laid the tokens out channels first and made rank-4 Transposes and an exWindow of the chain.
The family varies the source of the tokens (a channels-last graph input behind a Relu, or a channels-first
map flattened and transposed to tokens as Hiera's patch embedding does), the grid side, the channels and
the number of blocks.

Ids ``x.Transpose.ctx=unroll.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, grid side, channels, unroll blocks)
UNROLL = (
    ("s56.c32.b1", 56, 32, 1),
    ("s56.c32.b2", 56, 32, 2),
    ("s56.c32.b3", 56, 32, 3),
    ("s16.c8.b2", 16, 8, 2),
    ("s16.c32.b1", 16, 32, 1),
    ("s14.c16.b1", 14, 16, 1),
    ("s8.c8.b3", 8, 8, 3),
)

SOURCES = ("relu", "tokens")

#: one block of another stride or batch: (label, grid side, channels, stride k, batch)
UNROLL_ONE = (
    ("s28.c16.k4", 28, 16, 4, 1),
    ("s28.c16.k7", 28, 16, 7, 1),
    ("s16.c32.k2.n2", 16, 32, 2, 2),
    ("s28.c16.k4.n2", 28, 16, 4, 2),
)


def _token_unroll(side: int, channels: int, blocks: int, source: str, k: int = 2, batch: int = 1) -> GraphBuilder:
    """``source`` ``relu``: x (1, side, side, C) -> Relu; ``tokens``: x (1, C, side, side) -> Relu -> Reshape
    (1, C, side side) -> Transpose (0, 2, 1) -> Reshape (1, side, side, C); then ``blocks`` unroll blocks
    (focus_transpose<b>) of stride ``k`` -> Sigmoid; ``batch`` images."""
    gb = GraphBuilder(17)
    if source == "relu":
        x = gb.node("Relu", [gb.input("x", "float32", [batch, side, side, channels])], name="pre_relu")
    else:
        x = gb.node("Relu", [gb.input("x", "float32", [batch, channels, side, side])], name="pre_relu")
        x = gb.node("Reshape", [x, gb.ints([batch, channels, side * side])], name="pre_flatten")
        x = gb.node("Transpose", [x], perm=[0, 2, 1], name="pre_tokens")
        x = gb.node("Reshape", [x, gb.ints([batch, side, side, channels])], name="pre_grid")
    s = side
    for b in range(blocks):
        r6 = gb.node("Reshape", [x, gb.ints([batch, s // k, k, s // k, k, channels])], name="focus_split%d" % b)
        t6 = gb.node("Transpose", [r6], perm=[0, 2, 4, 1, 3, 5], name="focus_transpose%d" % b)
        batch, s = batch * k * k, s // k
        x = gb.node("Reshape", [t6, gb.ints([batch, s, s, channels])], name="focus_merge%d" % b)
    gb.output(gb.node("Sigmoid", [x], name="post_sigmoid"))
    return gb


def token_unroll_extra(c: Collector) -> None:
    """UNROLL from each of SOURCES, and one block of UNROLL_ONE."""
    for label, side, channels, blocks in UNROLL:
        for source in SOURCES:
            c.add("x.Transpose.ctx=unroll.%s.%s.f32.r6" % (source, label), "Transpose",
                  _token_unroll(side, channels, blocks, source), kind="context",
                  focus=["focus_transpose%d" % b for b in range(blocks)])
    for label, side, channels, k, batch in UNROLL_ONE:
        for source in SOURCES:
            c.add("x.Transpose.ctx=unroll.%s.%s.f32.r6" % (source, label), "Transpose",
                  _token_unroll(side, channels, 1, source, k, batch), kind="context", focus=["focus_transpose0"])


FAMILIES: list[Callable[[Collector], None]] = [token_unroll_extra]
