"""int64 values that leave a QNN partition for the CPU (issue 22). Ids start with ``q.``.

The QNN EP carries int64 tensors as int32 and casts them back where they leave its partition. A
TorchScript export of a mixture-of-experts router (OpenAI's privacy filter) one-hot encodes the
TopK expert indices, transposes them (int64, (16, 1, 2) -> (2, 1, 16)) and reads the result on
both sides of a NonZero (a ReduceSum -> Greater -> NonZero on the CPU, Gathers at indices the CPU
computes): onnxruntime-qnn 2.7.0 failed to compose the graph ("QNN.graphAddNode() failed for node
`..._cast_int64` of type `Cast`"). ``int64_boundary_extra`` cuts that router down: which int64
producer, read by which CPU consumer, makes the session fail? ``onehot_values_extra`` places the
router's OneHot alone with values of each dtype (the single-op OneHot probe has float32 values;
``F.one_hot`` writes int64 ones). ``pad_dtype_extra`` pads input ids as Longformer pads them to its
attention window (an int64 (1, 16) -> (1, 512) constant Pad with the pad token id), and the same
Pad of float32 and int32 data. ``cast_int64_readers_extra`` asks where a Cast to int64 runs by what
reads its result (the Cast entry: a cast to int64 that is a graph output "Failed to create Cast
node."): LongT5's local-attention mask (a bool mask cast to int64, compared with 0, a Where of two
float constants), the same cast that is also a graph output, and a float cast read by an int64 Add.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, one-hot the indices first (None: the one-hot tensor is a graph input), transpose them, read
#: them by a Gather at a CPU-computed index too)
BOUNDARY = (
    ("router", True, True, True),
    ("router.no_gather", True, True, False),
    ("router.no_onehot", False, True, True),
    ("router.no_transpose", True, False, True),
    ("input", None, True, True),
    ("input.no_gather", None, True, False),
)


def _router(onehot: bool | None, transpose: bool, gather: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    if onehot is None:
        t = gb.input("hot", "int64", [16, 1, 2])
    else:
        x = gb.input("x", "float32", [16, 2])
        logits = gb.node("Relu", [x], name="pre_relu")
        _, idx = gb.node("TopK", [logits, gb.ints([1])], n_out=2, axis=-1, name="pre_topk")  # (16, 1) int64
        t = gb.node("OneHot", [idx, gb.const(np.int64(2)), gb.ints([0, 1])], axis=-1, name="focus_onehot") \
            if onehot else gb.node("Unsqueeze", [idx, gb.ints([2])], name="focus_unsqueeze")
    if transpose:
        t = gb.node("Transpose", [t], perm=[2, 1, 0], name="focus_transpose")
    hit = gb.node("Greater", [gb.node("ReduceSum", [t, gb.ints([1, 2])], keepdims=0, name="post_sum"),
                              gb.const(np.int64(0))], name="post_greater")
    nz = gb.node("NonZero", [hit], name="post_nonzero")  # CPU
    outs = [nz]
    if gather:
        first = gb.node("Gather", [gb.node("Reshape", [nz, gb.ints([-1])], name="post_flat"), gb.const(np.int64(0))],
                        axis=0, name="post_first")
        picked = gb.node("Gather", [t, first], axis=0, name="post_pick")
        outs.append(gb.node("Cast", [picked], to=9, name="post_cast"))
    gb.output(*outs)
    return gb


def int64_boundary_extra(c: Collector) -> None:
    """A cut-down mixture-of-experts router whose int64 one-hot indices leave the NPU (BOUNDARY)."""
    for label, onehot, transpose, gather in BOUNDARY:
        first = {True: ["focus_onehot"], False: ["focus_unsqueeze"], None: []}[onehot]
        c.add("q.Transpose.ctx=int64_boundary.%s.i64.r3" % label, "Transpose", _router(onehot, transpose, gather),
              kind="context", focus=first + (["focus_transpose"] if transpose else []))


#: the dtypes of a OneHot's values (and output)
ONEHOT_VALUES = ("float32", "int64", "int32")


def _onehot(dtype: str) -> GraphBuilder:
    """x (16, 2) -> TopK indices (16, 1) -> OneHot depth 2 with ``dtype`` values -> Transpose -> Cast to float."""
    gb = GraphBuilder(17)
    _, idx = gb.node("TopK", [gb.node("Relu", [gb.input("x", "float32", [16, 2])], name="pre_relu"), gb.ints([1])],
                     n_out=2, axis=-1, name="pre_topk")
    hot = gb.node("OneHot", [idx, gb.const(np.int64(2)), gb.const(np.array([0, 1], dtype))], axis=-1,
                  name="focus_onehot")
    gb.output(gb.node("Cast", [gb.node("Transpose", [hot], perm=[2, 1, 0], name="post_transpose")], to=1,
                      name="post_cast"))
    return gb


def onehot_values_extra(c: Collector) -> None:
    """OneHot of TopK indices with float32, int64 and int32 values (ONEHOT_VALUES)."""
    for dtype in ONEHOT_VALUES:
        c.add("q.OneHot.ctx=values.%s.i64.r2" % dtype, "OneHot", _onehot(dtype), kind="context", focus=["focus_onehot"])


#: (np dtype name, ONNX 'to' of the Cast in front of the Pad)
PAD_DTYPES = (("float32", 1), ("int64", 7), ("int32", 6))


def _pad(dtype: str, to: int) -> GraphBuilder:
    """x (1, 16) -> Relu -> Cast to ``dtype`` -> constant Pad to (1, 512) with value 1 -> Cast to float."""
    gb = GraphBuilder(17)
    ids = gb.node("Cast", [gb.node("Relu", [gb.input("x", "float32", [1, 16])], name="pre_relu")], to=to, name="pre_cast")
    padded = gb.node("Pad", [ids, gb.ints([0, 0, 0, 496]), gb.const(np.array(1, dtype))], mode="constant", name="focus_pad")
    gb.output(gb.node("Cast", [padded], to=1, name="post_cast"))
    return gb


def pad_dtype_extra(c: Collector) -> None:
    """A constant Pad of float32, int64 and int32 data (PAD_DTYPES)."""
    for dtype, to in PAD_DTYPES:
        c.add("q.Pad.ctx=dtype.%s.r2" % dtype, "Pad", _pad(dtype, to), kind="context", focus=["focus_pad"])


#: (label, what the int64 cast reads: "bool" (a mask) or "float" (a Floor), its result is a graph output too)
CAST_READERS = (
    ("mask_where", "bool", False),
    ("mask_where.output", "bool", True),
    ("floor_add", "float", False),
    ("floor_add.output", "float", True),
)


def _cast_readers(source: str, output: bool) -> GraphBuilder:
    """x (1, 8, 16) -> Relu -> Greater 0.5 (bool) or Floor -> Cast to int64 -> Greater 0 -> Where of two
    float constants -> Mul x (the mask) or Add 1 -> Cast to float -> Sigmoid; the int64 cast is also a
    graph output when ``output``."""
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, 8, 16])], name="pre_relu")
    if source == "bool":
        pre = gb.node("Greater", [x, gb.const(np.float32(0.5))], name="pre_mask")
    else:
        pre = gb.node("Floor", [gb.node("Mul", [x, gb.const(np.float32(4.0))], name="pre_scale")], name="pre_floor")
    cast = gb.node("Cast", [pre], to=7, name="focus_cast")
    if source == "bool":
        keep = gb.node("Greater", [cast, gb.const(np.int64(0))], name="post_greater")
        bias = gb.node("Where", [keep, gb.const(np.float32(0.0)), gb.const(np.float32(-1e4))], name="post_where")
        out = gb.node("Sigmoid", [gb.node("Add", [x, bias], name="post_add")], name="post_sigmoid")
    else:
        added = gb.node("Add", [cast, gb.const(np.int64(1))], name="post_add")
        out = gb.node("Sigmoid", [gb.node("Cast", [added], to=1, name="post_cast")], name="post_sigmoid")
    if output:
        gb.output(out, cast)
    else:
        gb.output(out)
    return gb


def cast_int64_readers_extra(c: Collector) -> None:
    """A Cast to int64 read inside the graph, and the same Cast also a graph output (CAST_READERS)."""
    for label, source, output in CAST_READERS:
        c.add("q.Cast.ctx=int64_readers.%s.r3" % label, "Cast", _cast_readers(source, output), kind="context",
              focus=["focus_cast"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [int64_boundary_extra, onehot_values_extra, pad_dtype_extra,
                                                   cast_int64_readers_extra]
