"""GatherND lookups that are reshapes (issue 22): the dynamo exporter writes a padding-mask lookup
``mask[batch_idx, kv_idx]`` as a GatherND whose constant indices pick every element of the
``[B, T]`` mask in order (indices ``[1, 1, 1, T, 2]`` holding ``(0, j)``). rknn-toolkit2 2.5.0
rewrites such a GatherND into a Reshape (``remove_invalid_gathernd``); a GatherND whose indices
skip, repeat or reorder elements stays a CPU GatherND. The family varies the data (a float
activation, a bool mask cast from an int64 input as the exporter writes it, int64), the order of
the indices, and what reads the result.

Built with :mod:`.builder` like every family and listed in FAMILIES (ids ``x.GatherND.ctx=lookup.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _lookup): the dynamo padding mask first, then one change each
LOOKUPS = (
    ("mask.i64_cast_bool.in_order", {}),
    ("mask.i64_cast_bool.reversed", {"order": "reversed"}),
    ("data.f32.in_order", {"data": "float"}),
    ("data.f32.reversed", {"data": "float", "order": "reversed"}),
    ("data.f32.repeat", {"data": "float", "order": "repeat"}),
    ("data.f32.in_order.t=64", {"data": "float", "t": 64}),
    ("data.f32.rows=2.in_order", {"data": "float", "rows": 2}),
)


def _lookup(data: str = "mask", order: str = "in_order", t: int = 16, rows: int = 1) -> GraphBuilder:
    """``GatherND(data [rows, t], indices [1, 1, rows, t, 2])`` of (i, j) pairs in row-major order
    (``in_order``), with j reversed, or with j repeating its first half (``repeat``); the data a float
    activation (Relu of an input) or a bool mask cast from an int64 input; the result multiplied
    into a float tensor as an attention mask (cast to float first when bool)."""
    gb = GraphBuilder(18)
    if data == "mask":
        src = gb.node("Cast", [gb.input("mask", "int64", [rows, t])], to=9, name="pre_cast")
    else:
        src = gb.node("Relu", [gb.input("m", "float32", [rows, t])], name="pre_relu")
    j = np.arange(t)
    if order == "reversed":
        j = j[::-1]
    elif order == "repeat":
        j = np.concatenate([j[: t // 2], j[: t // 2]])
    idx = np.stack(np.broadcast_arrays(np.arange(rows)[:, None], j[None, :]), axis=-1).reshape(1, 1, rows, t, 2)
    y = gb.node("GatherND", [src, gb.const(idx.astype(np.int64))], name="focus_gathernd")
    if data == "mask":
        y = gb.node("Cast", [y], to=1, name="post_cast")
    x = gb.input("x", "float32", [1, 4, rows, t])
    gb.output(gb.node("Mul", [x, y], name="post_mul"))
    return gb


def gathernd_lookup_extra(c: Collector) -> None:
    """GatherND lookups in order and not (LOOKUPS)."""
    for label, kw in LOOKUPS:
        c.add("x.GatherND.ctx=lookup.%s.r2" % label, "GatherND", _lookup(**kw), kind="context",
              focus=["focus_gathernd"])


FAMILIES: list[Callable[[Collector], None]] = [gathernd_lookup_extra]
