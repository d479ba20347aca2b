"""Integer layout ops between integer producers and readers on RKNN (issue 22).

The rknn 2.5.0 tables put every op with int64/int32 data on the CPU (the generic ``dtype`` rule). On the
zoo, int64 index arithmetic of transformers' embeddings and masks (``position_ids.unsqueeze(0)``,
``token_type_ids`` expanded, the mask viewed as (B, 1, 1, T)) was flagged although the compiler
left no layer row of its own for it. The family puts one int64 layout op (Unsqueeze, Reshape,
Squeeze, Flatten) between an int64 producer (a graph input, an int64 Mul, an int64 Add) and each kind
of reader (an int64 -> float or -> bool Cast, the indices of an embedding Gather, an int64 Mul, a
graph output), and the same ops on float data as the control.

Built like the families of models_extra.py and listed in FAMILIES (ids ``x.<Op>.ctx=int_layout.*``).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, producer, reader)
INT_LAYOUT = (
    ("unsqueeze.input.cast_f32", "Unsqueeze", "input", "cast_f32"),
    ("unsqueeze.input.cast_bool", "Unsqueeze", "input", "cast_bool"),
    ("unsqueeze.input.gather_idx", "Unsqueeze", "input", "gather_idx"),
    ("unsqueeze.input.mul", "Unsqueeze", "input", "mul"),
    ("unsqueeze.mul.cast_f32", "Unsqueeze", "mul", "cast_f32"),
    ("unsqueeze.mul.gather_idx", "Unsqueeze", "mul", "gather_idx"),
    ("unsqueeze.add.gather_idx", "Unsqueeze", "add", "gather_idx"),
    ("reshape.input.cast_f32", "Reshape", "input", "cast_f32"),
    ("reshape.input.gather_idx", "Reshape", "input", "gather_idx"),
    ("reshape.mul.cast_f32", "Reshape", "mul", "cast_f32"),
    ("squeeze.input.cast_f32", "Squeeze", "input", "cast_f32"),
    ("flatten.input.gather_idx", "Flatten", "input", "gather_idx"),
    # XLNet's input_ids.transpose(0, 1): a Transpose of (1, T) that moves only a size-1 axis, and the
    # same perm on (4, T), a real transpose
    ("transpose.input.cast_f32", "Transpose", "input", "cast_f32"),
    ("transpose.input.gather_idx", "Transpose", "input", "gather_idx"),
    ("transpose.input.mul", "Transpose", "input", "mul"),
    ("transpose.mul.cast_f32", "Transpose", "mul", "cast_f32"),
    ("transpose_rows.input.cast_f32", "Transpose", "input", "cast_f32.rows"),
    ("transpose_rows.input.gather_idx", "Transpose", "input", "gather_idx.rows"),
    # the shape unchanged: input_ids.view(-1, T) and token_type_ids.expand(1, T) at batch 1
    ("reshape_noop.input.gather_idx", "Reshape", "input", "gather_idx.noop"),
    ("reshape_noop.input.cast_f32", "Reshape", "input", "cast_f32.noop"),
    ("expand_noop.input.gather_idx", "Expand", "input", "gather_idx.noop"),
    ("expand_noop.mul.gather_idx", "Expand", "mul", "gather_idx.noop"),
)


def _int_layout(op: str, producer: str, reader: str, dtype: str = "int64", t: int = 16) -> GraphBuilder:
    """``ids (1, T) [-> Mul/Add int] -> <op> -> <reader>``; the layout op's result has shape (1, 1, T) for
    Unsqueeze/Reshape, (1, T) for Squeeze (of (1, 1, T)) and Flatten, (T, 1) for Transpose; a reader ending
    in ``.noop``: the op (a Reshape or an Expand) writes the input's own shape (1, T); in ``.rows``: ids is
    (4, T)."""
    gb = GraphBuilder(17)
    np_t = np.int64 if dtype == "int64" else np.float32
    rows = reader.endswith(".rows")  # a Transpose of (4, T): every axis larger than 1
    reader = reader.removesuffix(".rows")
    shape = [1, 1, t] if op == "Squeeze" else [4 if rows else 1, t]
    x = gb.input("ids", dtype, shape)
    if producer == "mul":
        x = gb.node("Mul", [x, gb.input("m", dtype, shape)], name="pre_mul")
    elif producer == "add":
        x = gb.node("Add", [x, gb.const(np.array(2, dtype=np_t))], name="pre_add")
    noop = reader.endswith(".noop")
    reader = reader.removesuffix(".noop")
    if noop:  # the output shape is the input shape
        y = gb.node(op, [x, gb.ints([1, t])], name="focus_layout")
    elif op == "Unsqueeze":
        y = gb.node("Unsqueeze", [x, gb.ints([0])], name="focus_layout")
    elif op == "Reshape":
        y = gb.node("Reshape", [x, gb.ints([1, 1, t])], name="focus_layout")
    elif op == "Transpose":
        y = gb.node("Transpose", [x], perm=[1, 0], name="focus_layout")
    elif op == "Squeeze":
        y = gb.node("Squeeze", [x, gb.ints([0])], name="focus_layout")
    else:
        y = gb.node("Flatten", [x], axis=1, name="focus_layout")
    if reader == "cast_f32":
        y = gb.node("Cast", [y], to=1, name="post_cast")
        gb.output(gb.node("Mul", [y, gb.const(np.float32(0.5))], name="post_use"))
    elif reader == "cast_bool":
        y = gb.node("Cast", [y], to=9, name="post_cast")
        gb.output(gb.node("Where", [y, gb.input("s", "float32", [1, 4, t, t]), gb.const(np.float32(-1e4))],
                          name="post_use"))
    elif reader == "gather_idx":
        gb.output(gb.node("Gather", [gb.weight([64, 32]), y], axis=0, name="post_use"))
    elif reader == "mul":
        y = gb.node("Mul", [y, gb.const(np.array(3, dtype=np_t))], name="post_mul")
        gb.output(gb.node("Cast", [y], to=1, name="post_use"))
    else:
        gb.output(y)
    return gb


def int_layout_extra(c: Collector) -> None:
    """An int64 layout op between int64 producers and readers (INT_LAYOUT), and the float controls."""
    for label, op, producer, reader in INT_LAYOUT:
        c.add("x.%s.ctx=int_layout.%s.i64.r2" % (op, label), op, _int_layout(op, producer, reader),
              kind="context", dtype="int64", focus=["focus_layout"])
    for label, op, producer, reader in INT_LAYOUT[:1] + INT_LAYOUT[7:8] + INT_LAYOUT[-3:-2]:
        c.add("x.%s.ctx=int_layout.%s.f32.r2" % (op, label), op, _int_layout(op, producer, reader, "float32"),
              kind="context", dtype="float32", focus=["focus_layout"])


#: (label, keyword arguments of models_attention_limits._repeat_between): the rank-5 repeat of one head outside
#: the K/V path (Doge's dynamic attention mask, repeated over the query groups and added to the scores)
REPEAT_MASK = (
    ("kv=1.pre=where.post=add_softmax", {"pre": "where", "post": "add_softmax"}),
    ("kv=2.pre=where.post=add_softmax", {"kv": 2, "pre": "where", "post": "add_softmax"}),
    ("kv=1.pre=relu.post=add_softmax", {"pre": "relu", "post": "add_softmax"}),
    ("kv=1.pre=none.post=add_softmax", {"pre": "none", "post": "add_softmax"}),
    ("kv=1.pre=where.post=none", {"pre": "where", "post": "none"}),
    ("kv=1.pre=relu.post=none", {"pre": "relu", "post": "none"}),
    ("kv=1.pre=where.post=add_softmax.r4", {"pre": "where", "post": "add_softmax", "rank": 4}),
)


def repeat_mask_extra(c: Collector) -> None:
    """The rank-5 one-head repeat Expand between other producers and readers than two MatMuls (REPEAT_MASK)."""
    from pytest_npucheck.probe.models_attention_limits import _repeat_between

    for label, kw in REPEAT_MASK:
        c.add("x.Expand.ctx=repeat_mask.%s.f32.r%d" % (label, kw.get("rank", 5)), "Expand",
              _repeat_between(**kw), kind="context", focus=["focus_expand"])


FAMILIES: list[Callable[[Collector], None]] = [int_layout_extra, repeat_mask_extra]
