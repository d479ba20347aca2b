"""Tiles that only broadcast on RKNN (issue 22): SwiftFormer's and GIT's Tiles.

The rknn 2.5.0 tables put every Tile that is not rank 4 on the CPU (``Tile.repeats=1_4_1.f32.r3``
repeats an axis of size 4). SwiftFormer's additive attention tiles a (1, 1, C) query over the
tokens (repeats (1, N, 1)), and GIT tiles with repeats of ones: rknn-toolkit2 2.5.0 turned the
first into an NPU Expand (row ``Expand:<Tile>#1``) and removed the second. A Tile that repeats
only axes of size 1 is a broadcast. The family varies the rank, which axes are repeated and
whether their size is 1, and the multi-query K/V repeat written as a Tile (which, as a broadcast, the
compiler runs as the Expand of that repeat: on the CPU with one K/V head).

Built like the families of models_extra.py and listed in FAMILIES (ids ``x.Tile.ctx=broadcast.*``).
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, input shape, repeats): broadcasts first, then repeats of an axis longer than 1
TILES = (
    ("swiftformer.r3", [1, 1, 16], [1, 64, 1]),
    ("r3.axis0", [1, 8, 16], [4, 1, 1]),
    ("r2.axis0", [1, 16], [8, 1]),
    ("r3.last", [1, 8, 1], [1, 1, 16]),
    ("r3.two_axes", [1, 1, 1], [1, 8, 16]),
    ("r5.axis2", [1, 2, 1, 8, 8], [1, 1, 4, 1, 1]),
    ("r3.ones", [1, 8, 16], [1, 1, 1]),
    ("r2.ones", [8, 16], [1, 1]),
    ("r3.long_axis", [1, 4, 16], [1, 2, 1]),
    ("r3.mixed", [1, 1, 16], [1, 8, 2]),
)


def _tile(shape: list[int], repeats: list[int]) -> GraphBuilder:
    """``Relu(x) -> Tile(repeats) -> Mul(y)`` with y of the tiled shape (SwiftFormer multiplies the tiled query)."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    t = gb.node("Tile", [x, gb.ints(repeats)], name="focus_tile")
    out = [d * r for d, r in zip(shape, repeats)]
    gb.output(gb.node("Mul", [t, gb.input("y", "float32", out)], name="post_mul"))
    return gb


def _tile_between(kv: int = 1, t: int = 8, d: int = 8, heads: int = 4) -> GraphBuilder:
    """The multi-query K/V repeat written as a Tile (TorchScript's repeat_interleave): ``K = x @ W (1, kv, T, d)
    -> Unsqueeze(2) -> Tile (1, 1, heads/kv, 1, 1) -> Reshape (1, heads, T, d) -> q @ K``."""
    gb = GraphBuilder(17)
    k = gb.node("MatMul", [gb.input("x", "float32", [1, kv, t, d]), gb.weight([d, d])], name="pre_proj")
    k = gb.node("Unsqueeze", [k, gb.ints([2])], name="pre_unsq")
    k = gb.node("Tile", [k, gb.ints([1, 1, heads // kv, 1, 1])], name="focus_tile")
    k = gb.node("Reshape", [k, gb.ints([1, heads, t, d])], name="post_view")
    gb.output(gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, t]), k], name="post_attn"))
    return gb


def tile_broadcast_extra(c: Collector) -> None:
    """Tiles by rank and by the size of the repeated axes (TILES), and the K/V repeat as a Tile."""
    for label, shape, repeats in TILES:
        c.add("x.Tile.ctx=broadcast.%s.f32.r%d" % (label, len(shape)), "Tile", _tile(shape, repeats),
              kind="context", focus=["focus_tile"])
    for kv in (1, 2):
        c.add("x.Tile.ctx=broadcast.kv_repeat.kv=%d.f32.r5" % kv, "Tile", _tile_between(kv), kind="context",
              focus=["focus_tile"])


def _tile_heads(kv: int = 1, t: int = 8, d: int = 8, heads: int = 4) -> GraphBuilder:
    """The K/V repeat as JetMoE writes it: ``K = x @ W (1, kv, T, d) -> Tile (1, heads/kv, 1, 1)`` on the
    head axis of the rank-4 key, no Unsqueeze, ``-> Transpose -> q @ K^T``."""
    gb = GraphBuilder(17)
    k = gb.node("MatMul", [gb.input("x", "float32", [1, kv, t, d]), gb.weight([d, d])], name="pre_proj")
    k = gb.node("Tile", [k, gb.ints([1, heads // kv, 1, 1])], name="focus_tile")
    k = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="post_kt")
    gb.output(gb.node("MatMul", [gb.input("q", "float32", [1, heads, t, d]), k], name="post_scores"))
    return gb


def tile_heads_extra(c: Collector) -> None:
    """The rank-4 K/V repeat Tile of the head axis between two MatMuls, one and two K/V heads."""
    for kv in (1, 2):
        c.add("x.Tile.ctx=broadcast.kv_heads.kv=%d.f32.r4" % kv, "Tile", _tile_heads(kv), kind="context",
              focus=["focus_tile"])


FAMILIES: list[Callable[[Collector], None]] = [tile_broadcast_extra, tile_heads_extra]
