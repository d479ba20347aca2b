"""Gather index shapes and dtypes on QNN HTP (issue 22). Ids start with ``q.`` (QNN extra probes).

* ``gathernd_index_extra``: GatherND by data dtype and rank, index rank, index depth (the last
  index dim: whole elements or slices), index dtype, constant or computed indices. The dynamo
  exporter writes transformers' padding-mask lookup ``mask[batch_idx, kv_idx]`` as
  ``GatherND(mask (B, T) bool, constant int64 indices (B, 1, 1, T, 2))`` -> Not -> Where; QNN HTP
  refuses it ("Failed to create GatherND node") while the single-op probe (float data, rank-2
  indices of depth 2) runs on the NPU.
* ``gather_rank6_extra``: Gather on rank-6 data or with a rank-6 result (window attention's
  relative-position tables, stacked heads); the generic rank-5 limit of the QNN tables refused
  them, while QNN placed such Gathers on the NPU.

Built with the Collector of models.py; listed in QNN_FAMILIES, which qnn_probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder


def _mask_indices(lead: list[int], t: int, b: int = 1) -> np.ndarray:
    """(b, t) element indices of a (b, t) mask, broadcast to ``lead + [t, 2]`` (``lead`` starts with b)."""
    bi = np.broadcast_to(np.arange(b).reshape([b] + [1] * len(lead)), lead + [t])
    ki = np.broadcast_to(np.arange(t).reshape([1] * len(lead) + [t]), lead + [t])
    return np.stack([bi, ki], -1).astype(np.int64)


#: (label, keyword arguments of _gathernd): the dynamo padding-mask form first, then one change each
GATHERND = (
    ("mask.idx=r5.d2.b", {}),
    ("mask.idx=r5.d2.b.out", {"use": "out"}),
    ("mask.idx=r5.d2.f32", {"dtype": "float32"}),
    ("mask.idx=r5.d2.i64", {"dtype": "int64"}),
    ("mask.idx=r5.d2.i32", {"dtype": "int32"}),
    ("mask.idx=r4.d2.b", {"lead": [1, 1]}),
    ("mask.idx=r3.d2.b", {"lead": [1]}),
    ("mask.idx=r2.d2.b", {"lead": []}),
    ("mask.idx=r4.d2.f32", {"lead": [1, 1], "dtype": "float32"}),
    ("mask.idx=r3.d2.f32", {"lead": [1], "dtype": "float32"}),
    ("mask.idx=r2.d2.f32", {"lead": [], "dtype": "float32"}),
    ("mask.idx=r5.d2.f32.out", {"dtype": "float32", "use": "out"}),
    ("mask.idx=r4.d2.f32.out", {"dtype": "float32", "use": "out", "lead": [1, 1]}),
    ("mask.idx=r4.d2.i64", {"dtype": "int64", "lead": [1, 1]}),
    ("mask.idx=r2.d2.i64", {"dtype": "int64", "lead": []}),
    ("mask.idx=r4.d2.i32", {"dtype": "int32", "lead": [1, 1]}),
    ("mask.idx=r5.d2.b.idx_dyn", {"idx_src": "input"}),
    ("mask.idx=r5.d2.b.batch2", {"b": 2}),
    ("rows.idx=r2.d1.f32", {"kind": "rows", "dtype": "float32"}),
    ("rows.idx=r3.d1.f32", {"kind": "rows", "dtype": "float32", "lead": [1]}),
    ("rows.idx=r2.d1.b", {"kind": "rows"}),
    ("rows.idx=r2.d2.f32", {"kind": "rows2", "dtype": "float32"}),
)


def _gathernd(dtype: str = "bool", lead: list[int] | None = None, use: str = "mask", idx_src: str = "const", b: int = 1, kind: str = "mask", t: int = 16) -> tuple[GraphBuilder, str]:
    """``kind='mask'``: GatherND of a (b, t) mask with element indices of shape ``lead + [t, 2]``
    (default (b, 1, 1, t, 2), the dynamo padding-mask lookup) -> Not/Greater -> Where -> Softmax
    over (b, 4, t, t) scores (use='mask'), or the GatherND result as the graph output (use='out').
    ``kind='rows'``: row indices (depth 1) of a (8, t) table; ``'rows2'``: depth-2 indices of a
    (2, 8, t) tensor (whole rows). Returns the builder and the probe's data dtype."""
    if kind == "mask":
        lead = [b, 1, 1] if lead is None else ([b] + lead[1:] if lead else [])
    else:
        lead = lead or []
    gb = GraphBuilder(17)
    if kind == "mask":
        data = gb.input("mask", dtype, [b, t])
        idx = _mask_indices(lead, t, b) if lead else _mask_indices([], t, b)[None][0]
        if not lead:  # rank-2 indices (t, 2): row 0 of the mask
            idx = np.stack([np.zeros(t, np.int64), np.arange(t)], -1)
    elif kind == "rows":
        data = gb.input("x", dtype, [8, t])
        idx = np.array([[1], [3], [5], [7]], np.int64).reshape((lead or []) + [4, 1])
    else:
        data = gb.input("x", dtype, [2, 8, t])
        idx = np.array([[0, 1], [1, 3], [0, 5], [1, 7]], np.int64)
    if idx_src == "input":
        ind = gb.input("idx", "int64", list(idx.shape))
    else:  # GatherND takes int64 indices only
        ind = gb.const(idx.astype(np.int64))
    g = gb.node("GatherND", [data, ind], name="focus_gathernd")
    if kind != "mask" or use == "out":
        gb.output(gb.node("Relu", [g], name="post_relu") if dtype == "float32" and kind != "mask" else g)
        return gb, dtype
    if dtype == "bool":
        keep = g
    else:
        keep = gb.node("Greater", [g, gb.const(np.zeros([], dtype=np.dtype(dtype) if dtype != "float32"
                                                         else np.float32))], name="post_greater")
    gshape = list(idx.shape[:-1])
    scores = gb.input("s", "float32", [b, 4, t, t])
    if len(gshape) < 4:  # broadcast the looked-up mask over (b, heads, q, t)
        keep = gb.node("Reshape", [keep, gb.ints([b, 1, 1, t])], name="post_view")
    y = gb.node("Where", [gb.node("Not", [keep], name="post_not"), gb.const(np.float32(-1e4)), scores],
                name="post_where")
    gb.output(gb.node("Softmax", [y], axis=-1, name="post_softmax"))
    return gb, dtype


def gathernd_index_extra(c: Collector) -> None:
    """GatherND by index shape and dtype (GATHERND)."""
    for label, kw in GATHERND:
        gb, dtype = _gathernd(**kw)
        c.add("q.GatherND.ctx=index.%s.r%d" % (label, 3 if kw.get("kind") == "rows2" else 2), "GatherND", gb,
              kind="context",
              dtype=dtype, focus=["focus_gathernd"])


#: (label, data shape, axis, indices): Gathers whose data or result has rank 6
GATHER6 = (
    ("data_r6.scalar", [1, 2, 2, 4, 4, 8], 1, np.int64(1)),
    ("data_r6.vec", [1, 2, 2, 4, 4, 8], 3, np.array([0, 2], np.int64)),
    ("data_r5.vec2d.out_r6", [1, 2, 4, 4, 8], 2, np.array([[0, 1], [2, 3]], np.int64)),
    ("data_r2.idx_r5.out_r6", [49, 8], 0, np.arange(49 * 4).reshape(1, 1, 7, 7, 4) % 49),
    ("data_r6.scalar.last", [1, 2, 2, 4, 4, 8], 5, np.int64(0)),
)


#: (label, rank-6 view of a (1, 64, 96) projection, perm, axis, index): a packed q/k/v projection viewed
#: and permuted to rank 6 (the Reshape -> Transpose chain QNN runs at rank 6), then split by a Gather
GATHER6_QKV = (
    ("qkv.scalar", [1, 4, 16, 3, 2, 16], [3, 0, 1, 4, 2, 5], 0, np.int64(0)),
    ("qkv.scalar.last", [1, 4, 16, 3, 2, 16], [3, 0, 1, 4, 2, 5], 0, np.int64(2)),
    ("qkv.vec", [1, 4, 16, 3, 2, 16], [3, 0, 1, 4, 2, 5], 0, np.array([1, 2], np.int64)),
    ("qkv.scalar.axis2", [1, 4, 16, 3, 2, 16], [0, 1, 3, 4, 2, 5], 2, np.int64(1)),
)


def _gather6_qkv(view: list[int], perm: list[int], axis: int, idx: Any) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, 64, 32])
    y = gb.node("MatMul", [x, gb.weight([32, 96])], name="pre_qkv")
    y = gb.node("Transpose", [gb.node("Reshape", [y, gb.ints(view)], name="pre_view")], perm=perm, name="pre_perm")
    g = gb.node("Gather", [y, gb.const(np.asarray(idx, np.int64))], axis=axis, name="focus_gather")
    rest = int(np.prod(view)) // (view[perm[axis]]) * max(1, np.asarray(idx).size)
    flat = gb.node("Reshape", [g, gb.ints([1, 1, rest // 32, 32])], name="post_view")
    gb.output(gb.node("Add", [flat, gb.const(np.float32(1.0))], name="post_add"))
    return gb


def _gather6(shape: list[int], axis: int, idx: Any) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    g = gb.node("Gather", [x, gb.const(np.asarray(idx, np.int64))], axis=axis, name="focus_gather")
    out_rank = len(shape) - 1 + np.asarray(idx).ndim
    if out_rank > 4:  # back to rank 4 before the compute op, as window attention does
        flat = gb.node("Reshape", [g, gb.ints([1, 1, -1, shape[-1] if axis != len(shape) - 1 else 1])],
                       name="post_view")
    else:
        flat = g
    gb.output(gb.node("Add", [flat, gb.const(np.float32(1.0))], name="post_add"))
    return gb


def gather_rank6_extra(c: Collector) -> None:
    """Gathers with rank-6 data or a rank-6 result (GATHER6)."""
    for label, shape, axis, idx in GATHER6:
        c.add("q.Gather.ctx=rank6.%s.f32.r%d" % (label, len(shape)), "Gather", _gather6(shape, axis, idx),
              kind="context", focus=["focus_gather"])
    for label, view, perm, axis, idx in GATHER6_QKV:
        c.add("q.Gather.ctx=rank6.%s.f32.r6" % label, "Gather", _gather6_qkv(view, perm, axis, idx),
              kind="context", focus=["focus_gather"])


#: (label, data shape, axis, indices, transpose after): a Gather of a 2-D index from a rank-5 tensor (rank-6 result);
#: ConvBERT's span-based convolution reads its unit last axis with a computed [[0]]
GATHER_UNIT_AXIS = (
    ("unit_axis.idx00", [1, 16, 9, 16, 1], 4, np.array([[0]], np.int64), False),
    ("unit_axis.idx00.transpose", [1, 16, 9, 16, 1], 4, np.array([[0]], np.int64), True),
    ("pair_axis.idx11", [1, 16, 9, 16, 2], 4, np.array([[1]], np.int64), False),
    ("pair_axis.idx01", [1, 16, 9, 16, 2], 4, np.array([[0, 1]], np.int64), False),
)


def _gather_unit_axis(shape: list[int], axis: int, idx: Any, transpose: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    g = gb.node("Gather", [x, gb.const(idx)], axis=axis, name="focus_gather")
    if transpose:
        g = gb.node("Transpose", [g], perm=[0, 1, 2, 4, 3, 5], name="focus_transpose")
    flat = gb.node("Reshape", [g, gb.ints([1, 16, 9, -1])], name="post_view")
    gb.output(gb.node("Add", [flat, gb.const(np.float32(1.0))], name="post_add"))
    return gb


def gather_unit_axis_extra(c: Collector) -> None:
    """Rank-6 results of a 2-D index into rank-5 data, from an axis of size 1 and of size 2 (GATHER_UNIT_AXIS)."""
    for label, shape, axis, idx, transpose in GATHER_UNIT_AXIS:
        c.add("q.Gather.ctx=rank6.%s.f32.r5" % label, "Gather", _gather_unit_axis(shape, axis, idx, transpose),
              kind="context", focus=["focus_gather"] + (["focus_transpose"] if transpose else []))


QNN_FAMILIES: list[Callable[[Collector], None]] = [gathernd_index_extra, gather_rank6_extra, gather_unit_axis_extra]
