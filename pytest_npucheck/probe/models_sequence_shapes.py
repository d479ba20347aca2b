"""Tensors that come out of a Loop, a sequence or an If (issue 22). Ids start with ``q.``.

torchvision's MViT-v2, exported by TorchScript, splits the class token off its tokens with a ``Loop``
(trip count 1) that inserts a Slice into a ``SequenceEmpty``, a ``SequenceInsert`` of the rest,
two ``SequenceAt`` and a ``Concat`` back; its skip path ends in an ``If``. Neither ONNX's nor
onnxruntime's shape inference gives the tensors after them a shape, and the QNN EP places every node
whose shape it cannot get on the CPU ("Cannot get shape"): the MLP's GELU too, which it otherwise
groups into one Gelu node unit (its Erf, alone, is not an HTP op). ``sequence_shapes_extra`` places a
GELU (TorchScript's order: Div, Erf, Add 1, Mul x, Mul 0.5), an elementwise chain of depth 1 to 3 and a
Reshape to a constant shape followed by a Sigmoid behind five sources: the Loop/sequence split
(``loop_seq``), a sequence without a Loop (``seq``), a Loop whose carried tensor comes out
(``loop_tensor``), an If with branches of the same shape (``if``) and the rows a run-time NonZero picks
(``nonzero``, a data-dependent dim); and the plain input (``plain``) as the reference.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
from onnx import TensorProto, helper

from pytest_npucheck.probe.builder import Collector, GraphBuilder
from pytest_npucheck.probe.models_common_subexpressions import _dynamic_rows  # the rows a run-time NonZero picks

_RNG = np.random.default_rng(29)
_T, _D = 17, 16  # tokens (a class token and 16 others), channels


def _loop_seq(gb: GraphBuilder, x: str) -> str:
    """MViT's class-token split: Loop(1) { SequenceInsert(seq, x[:, 0:1]) } -> SequenceInsert(x[:, 1:]) ->
    SequenceAt 0 and 1 -> Concat on the token axis: (1, 17, 16) again."""
    empty = gb.node("SequenceEmpty", [], name="src_seq_empty", dtype=TensorProto.FLOAT)
    i = helper.make_tensor_value_info("src_i", TensorProto.INT64, [])
    cond = helper.make_tensor_value_info("src_cond", TensorProto.BOOL, [])
    seq_in = helper.make_tensor_sequence_value_info("src_seq_in", TensorProto.FLOAT, None)
    start = helper.make_node("Unsqueeze", ["src_i", "src_axes0"], ["src_start"], name="src_body_start")
    stop = helper.make_node("Add", ["src_start", "src_one"], ["src_stop"], name="src_body_stop")
    piece = helper.make_node("Slice", [x, "src_start", "src_stop", "src_axes1"], ["src_piece"], name="src_body_slice")
    ins = helper.make_node("SequenceInsert", ["src_seq_in", "src_piece"], ["src_seq_out"], name="src_body_insert")
    keep = helper.make_node("Identity", ["src_cond"], ["src_cond_out"], name="src_body_cond")
    consts = [helper.make_tensor("src_axes0", TensorProto.INT64, [1], [0]),
              helper.make_tensor("src_one", TensorProto.INT64, [1], [1]),
              helper.make_tensor("src_axes1", TensorProto.INT64, [1], [1])]
    body = helper.make_graph([start, stop, piece, ins, keep], "src_body", [i, cond, seq_in],
                             [helper.make_tensor_value_info("src_cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_sequence_value_info("src_seq_out", TensorProto.FLOAT, None)],
                             consts)
    seq = gb.node("Loop", [gb.const(np.int64(1)), gb.const(np.bool_(True)), empty], name="src_loop", body=body)
    rest = gb.node("Slice", [x, gb.ints([1]), gb.ints([_T]), gb.ints([1])], name="src_rest")
    seq = gb.node("SequenceInsert", [seq, rest], name="src_seq_insert")
    head = gb.node("SequenceAt", [seq, gb.const(np.int64(0))], name="src_seq_at0")
    tail = gb.node("SequenceAt", [seq, gb.const(np.int64(1))], name="src_seq_at1")
    return gb.node("Concat", [head, tail], axis=1, name="src_concat")


def _seq(gb: GraphBuilder, x: str) -> str:
    """The same split without the Loop: SequenceEmpty -> SequenceInsert x2 -> SequenceAt x2 -> Concat."""
    empty = gb.node("SequenceEmpty", [], name="src_seq_empty", dtype=TensorProto.FLOAT)
    head = gb.node("Slice", [x, gb.ints([0]), gb.ints([1]), gb.ints([1])], name="src_head")
    rest = gb.node("Slice", [x, gb.ints([1]), gb.ints([_T]), gb.ints([1])], name="src_rest")
    seq = gb.node("SequenceInsert", [gb.node("SequenceInsert", [empty, head], name="src_seq_insert0"), rest],
                  name="src_seq_insert1")
    a = gb.node("SequenceAt", [seq, gb.const(np.int64(0))], name="src_seq_at0")
    b = gb.node("SequenceAt", [seq, gb.const(np.int64(1))], name="src_seq_at1")
    return gb.node("Concat", [a, b], axis=1, name="src_concat")


def _loop_tensor(gb: GraphBuilder, x: str) -> str:
    """A Loop (trip count 2) whose loop-carried tensor (x, plus 0.5 each pass) comes out."""
    i = helper.make_tensor_value_info("src_i", TensorProto.INT64, [])
    cond = helper.make_tensor_value_info("src_cond", TensorProto.BOOL, [])
    v = helper.make_tensor_value_info("src_v_in", TensorProto.FLOAT, [1, _T, _D])
    add = helper.make_node("Add", ["src_v_in", "src_half"], ["src_v_out"], name="src_body_add")
    keep = helper.make_node("Identity", ["src_cond"], ["src_cond_out"], name="src_body_cond")
    body = helper.make_graph([add, keep], "src_body", [i, cond, v],
                             [helper.make_tensor_value_info("src_cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("src_v_out", TensorProto.FLOAT, [1, _T, _D])],
                             [helper.make_tensor("src_half", TensorProto.FLOAT, [], [0.5])])
    return gb.node("Loop", [gb.const(np.int64(2)), gb.const(np.bool_(True)), x], name="src_loop", body=body)


def _if(gb: GraphBuilder, x: str) -> str:
    """An If on a run-time condition (the sum of x > 0) whose branches give x + 1 and x - 1."""
    cond = gb.node("Greater", [gb.node("ReduceSum", [x], keepdims=0, name="src_sum"), gb.const(np.float32(0.0))],
                   name="src_cond")
    branches = {}
    for tag, c in (("then", 1.0), ("else", -1.0)):
        n = helper.make_node("Add", [x, "src_%s_c" % tag], ["src_%s_out" % tag], name="src_%s_add" % tag)
        branches[tag] = helper.make_graph(
            [n], "src_%s" % tag, [], [helper.make_tensor_value_info("src_%s_out" % tag, TensorProto.FLOAT, None)],
            [helper.make_tensor("src_%s_c" % tag, TensorProto.FLOAT, [], [c])])
    return gb.node("If", [cond], name="src_if", then_branch=branches["then"], else_branch=branches["else"])


SOURCES: dict[str, Callable[[GraphBuilder, str], str]] = {
    "plain": lambda gb, x: gb.node("Relu", [x], name="src_relu"),
    "loop_seq": _loop_seq,
    "seq": _seq,
    "loop_tensor": _loop_tensor,
    "if": _if,
    "nonzero": _dynamic_rows,
}


def _tail(gb: GraphBuilder, y: str, tail: str) -> None:
    if tail == "gelu":  # MatMul + bias Add, TorchScript's erf-GELU, MatMul: an MLP
        h = gb.node("Add", [gb.const((_RNG.standard_normal(32) * 0.1).astype(np.float32)),
                            gb.node("MatMul", [y, gb.const((_RNG.standard_normal((_D, 32)) * 0.2).astype(np.float32))],
                                    name="post_fc1")], name="post_fc1_bias")
        e = gb.node("Erf", [gb.node("Div", [h, gb.const(np.float32(1.4142135))], name="focus_div")], name="focus_erf")
        m = gb.node("Mul", [h, gb.node("Add", [e, gb.const(np.float32(1.0))], name="focus_add")], name="focus_mul")
        g = gb.node("Mul", [m, gb.const(np.float32(0.5))], name="focus_mul_half")
        y = gb.node("MatMul", [g, gb.const((_RNG.standard_normal((32, _D)) * 0.2).astype(np.float32))],
                    name="post_fc2")
    elif tail.startswith("chain"):  # Add c, Mul c, Sigmoid: the first `depth` of them
        ops = (("Add", 0.25), ("Mul", 1.5), ("Sigmoid", None))[:int(tail[-1])]
        for k, (op, c) in enumerate(ops):
            y = gb.node(op, [y] if c is None else [y, gb.const(np.float32(c))], name="focus_%d_%s" % (k, op.lower()))
    else:  # reshape: to a constant shape of as many elements as the source has (static sources only)
        r = gb.node("Reshape", [y, gb.ints([_T, _D])], name="focus_reshape")
        y = gb.node("Sigmoid", [r], name="post_sigmoid")
    # a scalar graph output: the declared output type must not give the nodes before it a shape
    gb.output(gb.node("ReduceSum", [y], keepdims=0, name="post_sum"))


TAILS = ("gelu", "chain1", "chain2", "chain3", "reshape")


def _model(source: str, tail: str) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.input("x", "float32", [1, _T, _D])
    _tail(gb, SOURCES[source](gb, x), tail)
    return gb


def sequence_shapes_extra(c: Collector) -> None:
    """A GELU, elementwise chains and a Reshape to a constant behind a Loop, a sequence, an If, a NonZero."""
    for source in SOURCES:
        for tail in TAILS:
            if tail == "reshape" and source == "nonzero":
                continue  # its element count depends on the data
            gb = _model(source, tail)
            focus = [n.name for n in gb.nodes if n.name.startswith(("focus_", "post_"))]
            c.add("q.shape.ctx=opaque_source.%s.%s.f32.r3" % (source, tail), "Erf" if tail == "gelu" else "Add", gb,
                  kind="context", focus=focus,
                  note="%s behind %s" % (tail, source))


QNN_FAMILIES: list[Callable[[Collector], None]] = [sequence_shapes_extra]
