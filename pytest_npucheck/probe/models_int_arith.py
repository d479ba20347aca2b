"""Integer index arithmetic the RKNN compiler may absorb (issue 22). Ids ``x.<Op>.ctx=int_arith.*``.

On the zoo the rknn 2.5.0 tables flagged int64 index arithmetic by the generic ``dtype`` rule although
the compiler left no layer row for it: CLIP's pooled-token index ``argmax(ids) + arange(B) * T`` (at batch
1 an ``Add`` of a one-element zero), OPT's position ids ``cumsum(mask) * mask - 1`` followed by ``+ 2``,
Mamba's two identical ``Cast``s of one int64 mask, and Flaubert's, Jamba's and LFM's ``mask[:, -T:]``
(a ``Slice`` that keeps the whole tensor). The family places each form behind an int64 graph input
``ids (1, T)``, read by an embedding Gather's indices or by a Cast to float, with controls that are not
no-ops (``+ 2``, a Slice that drops a column, two Casts to different types), and JetMoE's ``indices / 1``.

Listed in FAMILIES, which probe/extra_families.py builds last.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, op, form, reader): the form of the int64 op on ids (1, T), and who reads its result
INT_ARITH = (
    ("add0.one.gather_idx", "Add", "add0", "gather_idx"),
    ("add0.one.cast_f32", "Add", "add0", "cast_f32"),
    ("add0.scalar.cast_f32", "Add", "add0.scalar", "cast_f32"),
    ("sub0.one.cast_f32", "Sub", "sub0", "cast_f32"),
    ("mul1.one.cast_f32", "Mul", "mul1", "cast_f32"),
    ("div1.one.cast_f32", "Div", "div1", "cast_f32"),
    ("add2.one.cast_f32", "Add", "add2", "cast_f32"),
    ("argmax.add0.gather_rows", "Add", "argmax_add0", "gather_rows"),
    ("sub1.add2.gather_idx", "Sub", "sub1_add2", "gather_idx"),
    # OPT's offsets again: which constant Add/Sub the compiler folds into the Add after it (fuse_two_add)
    ("add1.add2.gather_idx", "Add", "add1_add2", "gather_idx"),
    ("sub1.cast.add2.gather_idx", "Sub", "sub1_cast_add2", "gather_idx"),
    ("sub1.add2.shared.gather_idx", "Sub", "sub1_add2_shared", "gather_idx"),
    ("sub1.mul2.gather_idx", "Sub", "sub1_mul2", "gather_idx"),
    ("slice_all.gather_idx", "Slice", "slice_all", "gather_idx"),
    ("slice_all.cast_f32", "Slice", "slice_all", "cast_f32"),
    ("slice_part.cast_f32", "Slice", "slice_part", "cast_f32"),
    ("cast_twice.same", "Cast", "cast_twice", "two_casts"),
    ("cast_twice.differ", "Cast", "cast_twice", "two_casts.differ"),
    # which copy RKNN keeps (remove_parallel_cast): the first in graph order or the first by name
    ("cast_twice.same.second_first", "Cast", "cast_twice", "two_casts.swapped"),
    # parallel Casts to an integer and to a float type: not the same Cast
    ("cast_twice.int32_f32", "Cast", "cast_twice", "two_casts.int32"),
    ("cast_thrice.same", "Cast", "cast_twice", "three_casts"),
    # Mamba's mask: unsqueezed to (1, T, 1), then cast twice
    ("cast_twice.same.r3", "Cast", "cast_twice", "two_casts.r3"),
)


def _int_arith(form: str, reader: str, t: int = 16) -> GraphBuilder:
    gb = GraphBuilder(17)
    ids = gb.input("ids", "int64", [1, t])

    def one(v: int) -> str:
        return gb.const(np.array([v], dtype=np.int64))

    if form in ("add0", "add2"):
        y = gb.node("Add", [ids, one(0 if form == "add0" else 2)], name="focus_op")
    elif form == "add0.scalar":
        y = gb.node("Add", [ids, gb.const(np.array(0, dtype=np.int64))], name="focus_op")
    elif form == "sub0":
        y = gb.node("Sub", [ids, one(0)], name="focus_op")
    elif form == "mul1":
        y = gb.node("Mul", [ids, one(1)], name="focus_op")
    elif form == "div1":  # JetMoE's router: top-k indices // 1
        y = gb.node("Div", [ids, one(1)], name="focus_op")
    elif form == "argmax_add0":  # CLIP: hidden[arange(B), ids.argmax(-1)] on the flattened (B*T, C) states
        idx = gb.node("ArgMax", [ids], axis=-1, keepdims=0, name="pre_argmax")
        y = gb.node("Add", [idx, one(0)], name="focus_op")
    elif form == "sub1_add2":  # OPT: position ids - 1, then the embedding's offset + 2
        y = gb.node("Sub", [ids, one(1)], name="focus_op")
        y = gb.node("Add", [y, one(2)], name="post_add")
    elif form == "add1_add2":
        y = gb.node("Add", [gb.node("Add", [ids, one(1)], name="focus_op"), one(2)], name="post_add")
    elif form == "sub1_cast_add2":  # an int64 -> int64 Cast between them (OPT's .long())
        y = gb.node("Cast", [gb.node("Sub", [ids, one(1)], name="focus_op")], to=7, name="mid_cast")
        y = gb.node("Add", [y, one(2)], name="post_add")
    elif form == "sub1_add2_shared":  # the Sub has a second reader
        s1 = gb.node("Sub", [ids, one(1)], name="focus_op")
        gb.output(gb.node("Cast", [s1], to=1, name="post_other"))
        y = gb.node("Add", [s1, one(2)], name="post_add")
    elif form == "sub1_mul2":
        y = gb.node("Mul", [gb.node("Sub", [ids, one(1)], name="focus_op"), one(2)], name="post_mul")
    elif form in ("slice_all", "slice_part"):  # mask[:, -T:] (all of it) or mask[:, -(T-1):]
        start = -t if form == "slice_all" else -(t - 1)
        y = gb.node("Slice", [ids, gb.ints([start]), gb.ints([2 ** 62]), gb.ints([1]), gb.ints([1])],
                    name="focus_op")
    else:  # cast_twice: two (or three) Casts of one int64 tensor, the same target type or not
        src = ids
        if reader == "two_casts.r3":
            src = gb.node("Unsqueeze", [ids, gb.ints([-1])], name="pre_unsqueeze")
        if reader == "two_casts.swapped":  # the node named focus_op_1 comes first in the graph
            b = gb.node("Cast", [src], to=1, name="focus_op_1")
            a = gb.node("Cast", [src], to=1, name="focus_op")
        else:
            a = gb.node("Cast", [src], to=1, name="focus_op")
            b = gb.node("Cast", [src], to={"two_casts.differ": 10, "two_casts.int32": 6}.get(reader, 1),
                        name="focus_op_1")
        if reader in ("two_casts.differ", "two_casts.int32"):
            b = gb.node("Cast", [b], to=1, name="post_back")
        out = gb.node("Mul", [gb.node("Mul", [a, gb.const(np.float32(0.5))], name="post_a"),
                              gb.node("Mul", [b, gb.const(np.float32(0.25))], name="post_b")], name="post_use")
        if reader == "three_casts":
            c = gb.node("Cast", [src], to=1, name="focus_op_2")
            out = gb.node("Add", [out, gb.node("Mul", [c, gb.const(np.float32(0.125))], name="post_c")],
                          name="post_sum")
        gb.output(out)
        return gb
    if reader == "gather_idx":
        gb.output(gb.node("Gather", [gb.weight([64, 32]), y], axis=0, name="post_use"))
    elif reader == "gather_rows":
        h = gb.node("Relu", [gb.input("h", "float32", [t, 32])], name="pre_states")
        gb.output(gb.node("Gather", [h, y], axis=0, name="post_use"))
    else:
        y = gb.node("Cast", [y], to=1, name="post_cast")
        gb.output(gb.node("Mul", [y, gb.const(np.float32(0.5))], name="post_use"))
    return gb


def int_arith_extra(c: Collector) -> None:
    """Integer no-op arithmetic, merged constant offsets, full-range Slices and repeated Casts (INT_ARITH)."""
    for label, op, form, reader in INT_ARITH:
        focus = ["focus_op"] + (["focus_op_1"] if form == "cast_twice" else []) \
            + (["focus_op_2"] if reader == "three_casts" else [])
        c.add("x.%s.ctx=int_arith.%s.i64.r2" % (op, label), op, _int_arith(form, reader),
              kind="context", dtype="int64", focus=focus)


FAMILIES: list[Callable[[Collector], None]] = [int_arith_extra]
