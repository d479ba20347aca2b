"""The tiled relative-position logits of BoTNet-style attention (issue 22, item 4: a rejection the static
check missed).

* ``rel_pos_tile_extra``: ``src -> Reshape [B, H, 1, W, W] -> Expand [B, H, H, W, W] -> Transpose(perm)``, the
  end of timm's ``rel_logits_1d`` (``x.reshape(B, H, 1, W, win).expand(-1, -1, win, -1, -1).permute(mask)``)
  for the height axis, with ``src`` the slice of the padded logits (``x_pad[:, :W, win - 1:]``).
  rknn-toolkit2 2.5.0's rewrite ``reduce_tp_in_mesh_forward`` raises ("3 is not in list") for the height
  permutation (0, 3, 1, 4, 2) and for (0, 3, 2, 1, 4), with B = 4 or 2, W = 16 or 8, the Slice at any offset
  of the last axis, behind a Relu, or a MatMul in place of the Slice ("4 is not in list"); it builds the
  width permutation (0, 1, 3, 2, 4) and the other permutations probed, B = 1, no Expand, no Transpose, the
  Slice on the middle axis, and a graph input or its Relu in place of the Slice.

Built with :mod:`.builder` like every family and listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, keyword arguments of _rel_pos_tile)
REL_POS_TILE = (
    ("slice.b=4.w=16.p=03142", {}),
    ("slice.b=2.w=16.p=03142", {"b": 2}),
    ("slice.b=1.w=16.p=03142", {"b": 1}),
    ("slice.b=4.w=8.p=03142", {"n": 8}),
    ("slice.b=4.w=16.p=03214", {"perm": (0, 3, 2, 1, 4)}),
    ("slice.b=4.w=16.p=01324", {"perm": (0, 1, 3, 2, 4)}),
    ("slice.b=4.w=16.p=02134", {"perm": (0, 2, 1, 3, 4)}),
    ("slice.b=4.w=16.p=01243", {"perm": (0, 1, 2, 4, 3)}),
    ("slice.b=4.w=16.p=12034", {"perm": (1, 2, 0, 3, 4)}),
    ("slice.b=4.w=16.p=03412", {"perm": (0, 3, 4, 1, 2)}),
    ("slice.b=4.w=16.p=30124", {"perm": (3, 0, 1, 2, 4)}),
    ("slice_first.b=4.w=16.p=03142", {"start": 0}),
    ("slice_of_20.b=4.w=16.p=03142", {"last": 20, "start": 4}),
    ("slice_axis1.b=4.w=16.p=03142", {"slice_axis": 1}),
    ("slice_relu.b=4.w=16.p=03142", {"src": "slice_relu"}),
    ("slice.noexpand.b=4.w=16.p=03142", {"expand": False}),
    ("slice.notranspose.b=4.w=16", {"transpose": False}),
    ("matmul.b=4.w=16.p=03142", {"src": "matmul"}),
    ("relu_matmul.b=4.w=16.p=03142", {"src": "relu_matmul"}),
    ("input.b=4.w=16.p=03142", {"src": "input"}),
    ("relu.b=4.w=16.p=03142", {"src": "relu"}),
)


def _rel_pos_tile(n: int = 16, b: int = 4, perm: tuple[int, ...] = (0, 3, 1, 4, 2), src: str = "slice",
                  last: int = 0, start: int = -1, slice_axis: int = 2, expand: bool = True,
                  transpose: bool = True) -> GraphBuilder:
    """``src -> Reshape [b, n, 1, n, n] [-> Expand [b, n, n, n, n]] [-> Transpose(perm)]``; ``src`` is a Slice of
    n of the ``last`` (default 2n - 1) entries of axis ``slice_axis`` of x [b * n, n, last] from ``start``
    (default n - 1), that Slice's Relu, a MatMul of x by a [last, n] weight, a MatMul of Relu(x [b * n, n, n]), x
    [b * n, n, n] itself or its Relu."""
    gb = GraphBuilder(17)
    last = last or 2 * n - 1
    start = n - 1 if start < 0 else start
    if src in ("slice", "slice_relu"):
        x = gb.input("x", "float32", [b * n, n, last] if slice_axis == 2 else [b * n, last, n])
        h = gb.node("Slice", [x, gb.ints([start]), gb.ints([start + n]), gb.ints([slice_axis])], name="src_slice")
        if src == "slice_relu":
            h = gb.node("Relu", [h], name="src_relu")
    elif src == "matmul":
        x = gb.input("x", "float32", [b * n, n, last])
        h = gb.node("MatMul", [x, gb.weight([last, n])], name="src_matmul")
    elif src == "relu_matmul":
        x = gb.input("x", "float32", [b * n, n, n])
        h = gb.node("MatMul", [gb.node("Relu", [x], name="src_relu"), gb.weight([n, n])], name="src_matmul")
    else:
        x = gb.input("x", "float32", [b * n, n, n])
        h = gb.node("Relu", [x], name="src_relu") if src == "relu" else x
    y = gb.node("Reshape", [h, gb.ints([b, n, 1, n, n])], name="tile_reshape")
    if expand:
        y = gb.node("Expand", [y, gb.ints([b, n, n, n, n])], name="tile_expand")
    if transpose:
        y = gb.node("Transpose", [y], perm=list(perm), name="focus_transpose")
    gb.output(y)
    return gb


def rel_pos_tile_extra(c: Collector) -> None:
    """The height logits of rel_logits_1d, tiled and permuted (REL_POS_TILE)."""
    for label, kw in REL_POS_TILE:
        focus = ["focus_transpose"] if kw.get("transpose", True) else ["tile_expand"]
        c.add("x.Transpose.ctx=rel_pos_tile.%s.f32.r5" % label, "Transpose", _rel_pos_tile(**kw), kind="context",
              focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [rel_pos_tile_extra]
