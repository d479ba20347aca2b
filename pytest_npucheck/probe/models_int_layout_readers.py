"""Integer layout ops of rank below 4 read by integer CPU ops that RKNN relayouts to 4-D (issue 22).

``models_int_layout`` found that an int64 Unsqueeze/Reshape/Squeeze of rank below 4 read only by Casts
leaves no layer row: rknn-toolkit2 2.5.0 merges it into the Cast's own 4-D relayout of its input
(``unsqueeze_to_4d_cast``). The zoo's JetMoE (mixture-of-attention router, TorchScript) has the same
shape of chain in front of other integer ops: the router's ``Reshape (16, 1) -> (16)`` of TopK's indices
read by a second TopK (sorting the experts), and ``Unsqueeze (16) -> (16, 1)`` of the sorted indices read
by an Expand (the ScatterElements indices); the build log shows ``unsqueeze_to_4d_topk`` /
``unsqueeze_to_4d_expand`` relayouts that bypass_two_reshape / fuse_two_reshape merge the layout op into,
and no row of its own.

This family puts one int64 layout op between an int64 producer (a graph input; TopK's indices) and each
such reader: an Expand of the size-1 axis, a TopK along the sorted axis, a Div by a constant, a Gather
of the op's result as data; and the float Expand as the control. Ids ``x.<Op>.ctx=int_readers.*``.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, producer, reader, dtype)
INT_READERS = (
    ("unsqueeze.input.expand", "Unsqueeze", "input", "expand", "int64"),
    ("unsqueeze.topk.expand", "Unsqueeze", "topk", "expand", "int64"),
    ("unsqueeze.input.div", "Unsqueeze", "input", "div", "int64"),
    ("unsqueeze.input.gather_data", "Unsqueeze", "input", "gather_data", "int64"),
    ("reshape.topk.topk", "Reshape", "topk", "topk", "int64"),
    ("reshape.input.topk", "Reshape", "input", "topk", "int64"),
    ("reshape.topk.div", "Reshape", "topk", "div", "int64"),
    ("reshape.input.expand", "Reshape", "input", "expand", "int64"),
    ("unsqueeze.input.expand", "Unsqueeze", "input", "expand", "float32"),
    ("reshape.input.topk", "Reshape", "input", "topk", "float32"),
)


def _int_readers(op: str, producer: str, reader: str, dtype: str, t: int) -> GraphBuilder:
    """``<producer> (t,) or (t, 1) -> <op> -> <reader> -> Cast to float -> Mul``: Unsqueeze (t,) -> (t, 1),
    Reshape (t, 1) -> (t,); producer ``topk``: the indices of a TopK (k = 1) of a float (t, 2) (``(t, 1)``,
    squeezed first for an Unsqueeze)."""
    gb = GraphBuilder(17)
    np_t = np.int64 if dtype == "int64" else np.float32
    src = [t] if op == "Unsqueeze" else [t, 1]
    if producer == "topk":
        logits = gb.node("Relu", [gb.input("logits", "float32", [t, 2])], name="pre_relu")
        _, x = gb.node("TopK", [logits, gb.ints([1])], n_out=2, axis=1, name="pre_topk")
        if op == "Unsqueeze":
            x = gb.node("Squeeze", [x, gb.ints([1])], name="pre_squeeze")
    else:
        x = gb.input("ids", dtype, src)
    if op == "Unsqueeze":
        y = gb.node("Unsqueeze", [x, gb.ints([1])], name="focus_layout")
    else:
        y = gb.node("Reshape", [x, gb.ints([t])], name="focus_layout")
    if reader == "expand":
        if op == "Reshape":  # (t,) -> (4, t)
            y = gb.node("Expand", [y, gb.ints([4, t])], name="post_read")
        else:  # (t, 1) -> (t, 32)
            y = gb.node("Expand", [y, gb.ints([t, 32])], name="post_read")
    elif reader == "topk":  # sort along the layout op's last axis
        y, _ = gb.node("TopK", [y, gb.ints([t if op == "Reshape" else 1])], n_out=2, axis=-1, name="post_read")
    elif reader == "div":
        y = gb.node("Div", [y, gb.const(np.array(2, dtype=np_t))], name="post_read")
    else:  # gather_data: rows of the (t, 1) result
        y = gb.node("Gather", [y, gb.ints([0, 2, 3])], axis=0, name="post_read")
    if dtype != "float32":
        y = gb.node("Cast", [y], to=1, name="post_cast")
    gb.output(gb.node("Mul", [y, gb.const(np.float32(0.5))], name="post_use"))
    return gb


def int_readers_extra(c: Collector) -> None:
    """Each INT_READERS row at t = 16 and t = 10."""
    for label, op, producer, reader, dtype in INT_READERS:
        for t in (16, 10):
            c.add("x.%s.ctx=int_readers.%s.t=%d.%s.r2" % (op, label, t, "i64" if dtype == "int64" else "f32"), op,
                  _int_readers(op, producer, reader, dtype, t), kind="context", dtype=dtype, focus=["focus_layout"])


FAMILIES: list[Callable[[Collector], None]] = [int_readers_extra]
