"""Small ONNX probe models (single ops and small patterns) built with ``onnx.helper``.

Every probe is one tiny model that isolates one question ("does a reflect Pad of a rank-4 float
tensor run on the NPU?", "is GELU written as Div/Erf/Add/Mul/Mul fused?").  Probe ids read like
``Pad.mode=reflect.f32.r4``: op, the varied attributes, the input dtype and the input rank.

The ops covered are those ``torch.onnx.export`` (both the TorchScript and the dynamo exporter,
opsets 17-20) commonly emits for CNNs and transformers, plus the patterns that decide fusion,
constant folding and shape-subgraph folding, a sweep over opsets and a few dynamic-shape models.

Nothing in this module depends on a vendor toolchain.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Sequence

import numpy as np
from onnx import TensorProto, numpy_helper

from pytest_npucheck.probe.builder import (  # noqa: F401 - GraphBuilder, Probe, save_probes: this module's API
    DEFAULT_OPSET,
    DTYPES,
    SHAPES,
    Collector,
    GraphBuilder,
    Probe,
    pid,
    rand,
    reset_rng,
    rng,
    save_probes,
)

__all__ = ["Probe", "GraphBuilder", "build_probes", "save_probes", "DEFAULT_OPSET"]

def _single(c: Collector, op: str, *, rank: int = 4, dtype: str = "float32",
            attrs: dict[str, Any] | None = None, parts: dict[str, Any] | None = None,
            const_inputs: Sequence[Any] = (), shape: Sequence[int] | None = None,
            n_out: int = 1, opset: int = DEFAULT_OPSET, extra: str | None = None,
            probe_id: str | None = None, note: str = "", domain: str = "") -> None:
    """One op on one dynamic input (plus constant inputs)."""
    gb = GraphBuilder(opset)
    shape = list(shape) if shape is not None else SHAPES[rank]
    x = gb.input("x", dtype, shape)
    ins = [x] + [("" if ci is None else gb.const(*ci) if isinstance(ci, tuple) else gb.const(ci))
                 for ci in const_inputs]
    out = gb.node(op, ins, n_out=n_out, domain=domain, **(attrs or {}))
    gb.output(*(out if isinstance(out, list) else [out]))
    a = dict(attrs or {})
    c.add(probe_id or pid(op, parts if parts is not None else a, dtype, len(shape), extra), op,
          gb, attributes=a, dtype=dtype, note=note)


def _multi(c: Collector, op: str, inputs: Sequence[tuple[str, Sequence[int]]], *,
           dtype: str = "float32", attrs: dict[str, Any] | None = None,
           parts: dict[str, Any] | None = None, n_out: int = 1, opset: int = DEFAULT_OPSET,
           extra: str | None = None, rank: int | None = None, probe_id: str | None = None,
           consts: dict[int, Any] | None = None, note: str = "") -> None:
    """One op whose inputs are all graph inputs (``(dtype, shape)``) or constants."""
    gb = GraphBuilder(opset)
    names = []
    consts = consts or {}
    for i, spec in enumerate(inputs):
        if i in consts:
            names.append(gb.const(consts[i]) if consts[i] is not None else "")
        else:
            dt, shp = spec
            names.append(gb.input("in%d" % i, dt, shp))
    out = gb.node(op, names, n_out=n_out, **(attrs or {}))
    gb.output(*(out if isinstance(out, list) else [out]))
    dyn_ranks = [len(spec[1]) for i, spec in enumerate(inputs) if i not in consts]
    r = rank if rank is not None else max(dyn_ranks or [len(inputs[0][1])])
    c.add(probe_id or pid(op, parts if parts is not None else dict(attrs or {}), dtype, r, extra),
          op, gb, attributes=dict(attrs or {}), dtype=dtype, note=note)


# ------------------------------------------------------------------------------------------------
# single-op families
# ------------------------------------------------------------------------------------------------

UNARY = ["Relu", "Sigmoid", "Tanh", "Erf", "Softplus", "Sqrt", "Reciprocal", "Exp", "Log", "Abs",
         "Neg", "Floor", "Ceil", "Round", "Sin", "Cos", "Softsign", "Sign", "Tan", "Atan",
         "Identity", "Selu", "Elu", "HardSigmoid", "LeakyRelu", "HardSwish", "Mish", "Gelu"]
_UNARY_OPSET = {"Mish": 18, "Gelu": 20}


def unary_probes(c: Collector) -> None:
    """Element-wise unary activations / math over ranks 2-5, plus attribute variants."""
    for op in UNARY:
        for r in (2, 3, 4, 5):
            _single(c, op, rank=r, opset=_UNARY_OPSET.get(op, DEFAULT_OPSET), parts={})
    _single(c, "LeakyRelu", attrs={"alpha": 0.2})
    _single(c, "LeakyRelu", attrs={"alpha": 0.01})
    _single(c, "Elu", attrs={"alpha": 0.5})
    _single(c, "HardSigmoid", attrs={"alpha": 1.0 / 6, "beta": 0.5},
            parts={"alpha": "1_6", "beta": 0.5})
    _single(c, "Gelu", attrs={"approximate": "tanh"}, opset=20)
    _single(c, "Gelu", attrs={"approximate": "none"}, opset=20)
    _single(c, "Celu", attrs={"alpha": 1.0}, opset=17)
    _single(c, "ThresholdedRelu", attrs={"alpha": 1.0})
    _single(c, "Relu", dtype="float16", parts={})
    _single(c, "Sigmoid", dtype="float16", parts={})
    _single(c, "Abs", rank=2, dtype="int64", parts={})
    _single(c, "Neg", rank=2, dtype="int64", parts={})
    _single(c, "Relu", rank=4, shape=[1, 64, 128, 128], parts={}, extra="big")
    _single(c, "Erf", rank=3, shape=[1, 197, 768], parts={}, extra="vit")
    # Clip
    for r in (2, 3, 4, 5):
        _single(c, "Clip", rank=r, const_inputs=[np.float32(0), np.float32(6)],
                parts={"min": 0, "max": 6})
    _single(c, "Clip", const_inputs=[np.float32(-1.0)], parts={"min": -1, "max": "none"})
    _single(c, "Clip", const_inputs=[None, np.float32(1.0)], parts={"min": "none", "max": 1})
    _single(c, "Clip", const_inputs=[], parts={"min": "none", "max": "none"})
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    lo = gb.input("lo", "float32", [])
    hi = gb.input("hi", "float32", [])
    gb.output(gb.node("Clip", [x, lo, hi]))
    c.add(pid("Clip", {"min": "dyn", "max": "dyn"}, "float32", 4), "Clip", gb,
          attributes={"min": "dynamic", "max": "dynamic"})
    _single(c, "Clip", rank=2, dtype="int64",
            const_inputs=[np.int64(0), np.int64(6)], parts={"min": 0, "max": 6})
    # PRelu
    for r, slope in ((4, [8, 1, 1]), (3, [16, 1]), (2, [32]), (5, [4, 1, 1, 1])):
        _single(c, "PRelu", rank=r, const_inputs=[rand(slope)], parts={"slope": "per_channel"})
    _single(c, "PRelu", const_inputs=[np.full([1], 0.25, np.float32)], parts={"slope": "scalar"})
    _multi(c, "PRelu", [("float32", SHAPES[4]), ("float32", [8, 1, 1])],
           parts={"slope": "dynamic"})
    # Dropout / Identity in inference form
    _single(c, "Dropout", const_inputs=[np.float32(0.1)], parts={"ratio": 0.1})
    _single(c, "Dropout", parts={"ratio": "none"})
    _single(c, "Dropout", n_out=2, parts={"mask": "yes"})


BINARY_ARITH = ["Add", "Sub", "Mul", "Div", "Max", "Min"]
COMPARE = ["Equal", "Greater", "Less", "GreaterOrEqual", "LessOrEqual"]


def binary_probes(c: Collector) -> None:
    """Element-wise binary ops: same shape, broadcasting, constant operands, dtypes."""
    for op in BINARY_ARITH:
        for r in (2, 3, 4, 5):
            _multi(c, op, [("float32", SHAPES[r])] * 2, parts={"b": "same"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [])], consts={1: np.float32(2.0)},
               parts={"b": "const_scalar"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [])],
               consts={1: rand([1, 8, 1, 1]) + 1}, parts={"b": "const_channel"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [])],
               consts={1: rand([1, 8, 16, 16]) + 1}, parts={"b": "const_full"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [1, 8, 1, 1])],
               parts={"b": "dyn_channel"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [1, 1, 16, 16])],
               parts={"b": "dyn_spatial"})
        _multi(c, op, [("float32", SHAPES[3]), ("float32", [32])], parts={"b": "dyn_lastdim"})
        _multi(c, op, [("float32", [1, 8, 1, 16]), ("float32", [1, 1, 16, 1])],
               parts={"b": "dyn_both"})
        _multi(c, op, [("float32", []), ("float32", SHAPES[4])], consts={0: np.float32(3.0)},
               parts={"a": "const_scalar"})
        _multi(c, op, [("int64", SHAPES[2])] * 2, dtype="int64", parts={"b": "same"})
        _multi(c, op, [("float16", SHAPES[4])] * 2, dtype="float16", parts={"b": "same"})
    _multi(c, "Add", [("int32", SHAPES[2])] * 2, dtype="int32", parts={"b": "same"})
    _multi(c, "Add", [("float32", [1, 64, 128, 128])] * 2, parts={"b": "same"}, extra="big")
    # Pow
    for e in (2.0, 3.0, 0.5):
        for r in (2, 3, 4):
            _multi(c, "Pow", [("float32", SHAPES[r]), ("float32", [])],
                   consts={1: np.float32(e)}, parts={"exp": e})
    _multi(c, "Pow", [("float32", SHAPES[4])] * 2, parts={"exp": "dyn"})
    _multi(c, "Pow", [("float32", SHAPES[4]), ("int64", [])], consts={1: np.int64(2)},
           parts={"exp": "2i64"})
    # Mod
    _multi(c, "Mod", [("int64", SHAPES[2]), ("int64", [])], dtype="int64",
           consts={1: np.int64(3)}, parts={"fmod": 0})
    _multi(c, "Mod", [("float32", SHAPES[4]), ("float32", [])], attrs={"fmod": 1},
           consts={1: np.float32(3)})
    # comparisons
    for op in COMPARE:
        for r in (2, 4):
            _multi(c, op, [("float32", SHAPES[r])] * 2, parts={"b": "same"})
        _multi(c, op, [("float32", SHAPES[4]), ("float32", [])], consts={1: np.float32(0.0)},
               parts={"b": "const_scalar"})
        _multi(c, op, [("int64", SHAPES[2])] * 2, dtype="int64", parts={"b": "same"})
    # logic
    for op in ("And", "Or", "Xor"):
        for r in (2, 4):
            _multi(c, op, [("bool", SHAPES[r])] * 2, dtype="bool", parts={})
    for r in (2, 4):
        _single(c, "Not", rank=r, dtype="bool", parts={})
    # variadic
    for op in ("Sum", "Mean", "Max", "Min"):
        _multi(c, op, [("float32", SHAPES[4])] * 3, parts={"n": 3})
    _multi(c, "Sum", [("float32", SHAPES[4])] * 2, parts={"n": 2})
    _multi(c, "Mean", [("float32", SHAPES[4])] * 2, parts={"n": 2})
    _multi(c, "Sum", [("float32", SHAPES[4]), ("float32", [1, 8, 1, 1])], parts={"n": "2bcast"})
    # Where
    for r in (2, 3, 4):
        _multi(c, "Where", [("bool", SHAPES[r]), ("float32", SHAPES[r]), ("float32", SHAPES[r])],
               parts={"xy": "dyn"}, dtype="float32", rank=r)
    _multi(c, "Where", [("bool", SHAPES[4]), ("float32", []), ("float32", SHAPES[4])],
           consts={1: np.float32(-1e4)}, parts={"x": "const_scalar"})
    _multi(c, "Where", [("bool", [1, 1, 16, 16]), ("float32", SHAPES[4]), ("float32", [])],
           consts={2: np.float32(0.0)}, parts={"y": "const_scalar", "cond": "bcast"})
    _multi(c, "Where", [("bool", SHAPES[2]), ("int64", SHAPES[2]), ("int64", SHAPES[2])],
           dtype="int64", parts={"xy": "dyn"})


def cast_probes(c: Collector) -> None:
    """Cast between the dtypes exporters produce."""
    pairs = [("float32", "float16"), ("float32", "int64"), ("float32", "int32"),
             ("float32", "bool"), ("int64", "float32"), ("int32", "float32"),
             ("bool", "float32"), ("float16", "float32"), ("int64", "int32"),
             ("int32", "int64"), ("bool", "int64"), ("float32", "float32"), ("float32", "int8"),
             ("uint8", "float32")]
    for src, dst in pairs:
        for r in (2, 4):
            _single(c, "Cast", rank=r, dtype=src, attrs={"to": DTYPES[dst]}, parts={"to": dst})


def matmul_probes(c: Collector) -> None:
    """MatMul (const and dynamic right operand, ranks 2-4) and Gemm variants."""
    for r, xs in ((2, [16, 32]), (3, [1, 16, 32]), (4, [1, 8, 16, 32])):
        _multi(c, "MatMul", [("float32", xs), ("float32", [32, 64])],
               consts={1: rand([32, 64])}, parts={"b": "const"}, rank=r)
    _multi(c, "MatMul", [("float32", [1, 16, 32]), ("float32", [1, 32, 64])],
           consts={1: rand([1, 32, 64])}, parts={"b": "const3d"})
    for r, a, b in ((2, [16, 32], [32, 8]), (3, [1, 16, 32], [1, 32, 8]),
                    (4, [1, 4, 16, 32], [1, 4, 32, 16]), (5, [1, 2, 4, 16, 32], [1, 2, 4, 32, 16])):
        _multi(c, "MatMul", [("float32", a), ("float32", b)], parts={"b": "dyn"}, rank=r)
    _multi(c, "MatMul", [("float32", [2, 16, 32]), ("float32", [2, 32, 8])],
           parts={"b": "dyn", "batch": 2})
    _multi(c, "MatMul", [("float32", [1, 4, 16, 32]), ("float32", [32, 16])],
           parts={"b": "dyn_bcast"})
    _multi(c, "MatMul", [("float32", [1, 16, 32]), ("float32", [32])],
           consts={1: rand([32])}, parts={"b": "const_vec"})
    _multi(c, "MatMul", [("float32", [1, 197, 768]), ("float32", [768, 3072])],
           consts={1: rand([768, 3072], scale=0.02)}, parts={"b": "const"}, extra="vit")
    _multi(c, "MatMul", [("int64", [4, 8]), ("int64", [8, 4])], dtype="int64",
           parts={"b": "dyn"})
    _multi(c, "MatMul", [("float16", [1, 16, 32]), ("float16", [32, 64])], dtype="float16",
           consts={1: rand([32, 64], "float16")}, parts={"b": "const"})
    # Gemm
    base = [("float32", [4, 32]), ("float32", [64, 32]), ("float32", [64])]
    cw = {1: rand([64, 32]), 2: rand([64])}
    _multi(c, "Gemm", base, consts=cw, attrs={"transB": 1}, parts={"transB": 1, "bias": "yes"})
    _multi(c, "Gemm", [("float32", [1, 32])] + base[1:], consts=cw, attrs={"transB": 1},
           parts={"transB": 1, "bias": "yes", "m": 1})
    _multi(c, "Gemm", base[:2], consts={1: rand([64, 32])}, attrs={"transB": 1},
           parts={"transB": 1, "bias": "no"})
    _multi(c, "Gemm", [("float32", [4, 32]), ("float32", [32, 64]), ("float32", [64])],
           consts={1: rand([32, 64]), 2: rand([64])}, parts={"transB": 0, "bias": "yes"})
    _multi(c, "Gemm", [("float32", [32, 4]), ("float32", [32, 64]), ("float32", [64])],
           consts={1: rand([32, 64]), 2: rand([64])}, attrs={"transA": 1},
           parts={"transA": 1})
    _multi(c, "Gemm", base, consts=cw, attrs={"transB": 1, "alpha": 0.5, "beta": 2.0},
           parts={"alpha": 0.5, "beta": 2.0})
    _multi(c, "Gemm", [("float32", [4, 32]), ("float32", [64, 32]), ("float32", [64])],
           consts={2: rand([64])}, attrs={"transB": 1}, parts={"b": "dyn"})
    _multi(c, "Gemm", [("float32", [4, 32]), ("float32", [64, 32]), ("float32", [4, 64])],
           consts={1: rand([64, 32]), 2: rand([4, 64])}, attrs={"transB": 1},
           parts={"bias": "full"})
    # Einsum
    for eq, shapes in (("bij,bjk->bik", [[2, 16, 32], [2, 32, 8]]),
                       ("bhid,bhjd->bhij", [[1, 4, 16, 32], [1, 4, 16, 32]]),
                       ("bhij,bhjd->bhid", [[1, 4, 16, 16], [1, 4, 16, 32]]),
                       ("ij->ji", [[16, 32]]),
                       ("bij->bji", [[2, 16, 32]]),
                       ("i,j->ij", [[16], [32]]),
                       ("bchw,kc->bkhw", [[1, 8, 16, 16], [4, 8]]),
                       ("...ij,...jk->...ik", [[1, 16, 32], [1, 32, 8]]),
                       ("bij,bij->bi", [[1, 16, 32], [1, 16, 32]])):
        safe = eq.replace(",", "_").replace("->", "_to_").replace("...", "E")
        _multi(c, "Einsum", [("float32", s) for s in shapes], attrs={"equation": eq},
               parts={"eq": safe}, rank=len(shapes[0]))


def conv_probes(c: Collector) -> None:
    """Conv / ConvTranspose over kernel, stride, padding, dilation, group, rank."""
    def conv(parts: dict[str, Any], cin: int = 8, cout: int = 16, k: Sequence[int] = (3, 3),
             hw: Sequence[int] = (32, 32), bias: bool = True, dyn_w: bool = False,
             dtype: str = "float32", op: str = "Conv", group: int = 1, **attrs: Any) -> None:
        gb = GraphBuilder()
        x = gb.input("x", dtype, [1, cin] + list(hw))
        if op == "Conv":
            wshape = [cout, cin // group] + list(k)
        else:
            wshape = [cin, cout // group] + list(k)
        w = gb.input("w", dtype, wshape) if dyn_w else gb.const(rand(wshape, dtype))
        ins = [x, w]
        if bias:
            ins.append(gb.const(rand([cout], dtype)))
        if group != 1:
            attrs["group"] = group
        gb.output(gb.node(op, ins, kernel_shape=list(k), **attrs))
        a = dict(attrs, kernel_shape=list(k))
        c.add(pid(op, parts, dtype, 2 + len(hw)), op, gb, attributes=a, dtype=dtype)

    conv({"k": 1})
    conv({"k": 1, "s": 1, "bias": "no"}, k=(1, 1), bias=False)
    conv({"k": 1, "s": 1}, k=(1, 1))
    conv({"k": 3, "s": 1, "p": 1}, pads=[1, 1, 1, 1])
    conv({"k": 3, "s": 2, "p": 1}, pads=[1, 1, 1, 1], strides=[2, 2])
    conv({"k": 5, "s": 1, "p": 2}, k=(5, 5), pads=[2, 2, 2, 2])
    conv({"k": 7, "s": 2, "p": 3}, cin=3, k=(7, 7), pads=[3, 3, 3, 3], strides=[2, 2], hw=(64, 64))
    conv({"k": 3, "d": 2, "p": 2}, pads=[2, 2, 2, 2], dilations=[2, 2])
    conv({"k": 3, "group": "dw"}, cout=8, group=8, pads=[1, 1, 1, 1])
    conv({"k": 3, "group": "dw", "s": 2}, cout=8, group=8, pads=[1, 1, 1, 1], strides=[2, 2])
    conv({"k": 3, "group": 2}, group=2, pads=[1, 1, 1, 1])
    conv({"k": "1x7"}, k=(1, 7), pads=[0, 3, 0, 3])
    conv({"k": 3, "pads": "asym"}, pads=[0, 0, 1, 1], strides=[2, 2])
    conv({"k": 3, "auto_pad": "SAME_UPPER"}, auto_pad="SAME_UPPER")
    conv({"k": 3, "auto_pad": "SAME_LOWER"}, auto_pad="SAME_LOWER")
    conv({"k": 3, "auto_pad": "VALID"}, auto_pad="VALID")
    conv({"k": 3, "w": "dyn"}, dyn_w=True, pads=[1, 1, 1, 1])
    conv({"k": 3}, dtype="float16", pads=[1, 1, 1, 1])
    conv({"k": 4, "s": 4}, cin=3, k=(4, 4), strides=[4, 4], hw=(64, 64))
    conv({"k": 16, "s": 16}, cin=3, cout=32, k=(16, 16), strides=[16, 16], hw=(64, 64))
    # documented limits (RK3588: kernel <= 31, stride <= 7, pads <= 15, dilation <= 31)
    conv({"k": 31}, cin=4, cout=4, k=(31, 31), hw=(40, 40))
    conv({"k": 32}, cin=4, cout=4, k=(32, 32), hw=(40, 40))
    conv({"k": 3, "s": 7}, strides=[7, 7], hw=(36, 36))
    conv({"k": 3, "s": 8}, strides=[8, 8], hw=(36, 36))
    conv({"k": 9, "s": 8}, k=(9, 9), strides=[8, 8], hw=(36, 36))
    conv({"k": 3, "p": 15}, cin=4, cout=4, pads=[15, 15, 15, 15])
    conv({"k": 3, "p": 16}, cin=4, cout=4, pads=[16, 16, 16, 16])
    conv({"k": 3, "d": 31}, cin=4, cout=4, dilations=[31, 31], hw=(70, 70))
    conv({"k": 3, "d": 32}, cin=4, cout=4, dilations=[32, 32], hw=(70, 70))
    # other ranks
    conv({"k": 3, "p": 1}, k=(3,), hw=(32,), pads=[1, 1])
    conv({"k": 3, "s": 2}, k=(3,), hw=(64,), strides=[2])
    conv({"k": 3, "group": "dw"}, k=(3,), hw=(32,), cout=8, group=8, pads=[1, 1])
    conv({"k": 3, "p": 1}, cin=4, cout=8, k=(3, 3, 3), hw=(4, 8, 8), pads=[1] * 6)
    conv({"k": 1}, cin=4, cout=8, k=(1, 1, 1), hw=(4, 8, 8))
    # ConvTranspose
    ct = "ConvTranspose"
    conv({"k": 2, "s": 2}, op=ct, k=(2, 2), strides=[2, 2], hw=(16, 16))
    conv({"k": 4, "s": 2, "p": 1}, op=ct, k=(4, 4), strides=[2, 2], pads=[1, 1, 1, 1], hw=(16, 16))
    conv({"k": 3, "s": 2, "p": 1, "op": 1}, op=ct, strides=[2, 2], pads=[1, 1, 1, 1],
         output_padding=[1, 1], hw=(16, 16))
    conv({"k": 3, "s": 1, "p": 1}, op=ct, pads=[1, 1, 1, 1], hw=(16, 16))
    conv({"k": 4, "s": 2, "group": "dw"}, op=ct, cout=8, group=8, k=(4, 4), strides=[2, 2],
         pads=[1, 1, 1, 1], hw=(16, 16))
    conv({"k": 4, "s": 4}, op=ct, k=(4, 4), strides=[4, 4], hw=(16, 16))
    conv({"k": 3, "s": 3}, op=ct, strides=[3, 3], hw=(16, 16))
    conv({"k": 8, "s": 8}, op=ct, k=(8, 8), strides=[8, 8], hw=(8, 8))
    conv({"k": 3, "d": 2}, op=ct, dilations=[2, 2], hw=(16, 16))
    conv({"k": 2, "s": 2, "bias": "no"}, op=ct, k=(2, 2), strides=[2, 2], hw=(16, 16), bias=False)
    conv({"k": 2, "s": 2, "w": "dyn"}, op=ct, k=(2, 2), strides=[2, 2], hw=(16, 16), dyn_w=True)
    conv({"k": 4, "s": 2, "p": 1}, op=ct, k=(4,), strides=[2], pads=[1, 1], hw=(32,))
    conv({"k": 2, "s": 2}, op=ct, cin=4, cout=4, k=(2, 2, 2), strides=[2, 2, 2], hw=(4, 8, 8))
    conv({"k": 2, "s": 2}, op=ct, k=(2, 2), strides=[2, 2], hw=(16, 16), dtype="float16")


def norm_probes(c: Collector) -> None:
    """BatchNormalization, Instance/Group/LayerNormalization, Softmax/LogSoftmax, LRN."""
    def bn(shape: list[int]) -> None:
        ch = shape[1]
        _single(c, "BatchNormalization", shape=shape,
                const_inputs=[rand([ch]) + 1, rand([ch]), rand([ch]), np.abs(rand([ch])) + 1],
                attrs={"epsilon": 1e-5}, parts={})
    for r in (2, 3, 4, 5):
        bn(SHAPES[r] if r != 2 else [4, 32])
    for shape in ([1, 8, 16, 16], [1, 16, 32]):
        ch = shape[1]
        _single(c, "InstanceNormalization", shape=shape,
                const_inputs=[rand([ch]) + 1, rand([ch])], parts={})
    for opset, sshape in ((18, 4), (21, 8)):
        _single(c, "GroupNormalization", shape=[1, 8, 16, 16], opset=opset,
                attrs={"num_groups": 4}, const_inputs=[rand([sshape]) + 1, rand([sshape])],
                parts={"num_groups": 4, "opset": opset})
    for shape, axis in (([1, 16, 32], -1), ([4, 32], -1), ([1, 8, 16, 16], -1),
                        ([1, 8, 16, 16], 1), ([1, 16, 32], 1), ([1, 197, 768], -1)):
        norm = int(np.prod(shape[axis:])) if axis != -1 else shape[-1]
        nshape = shape[axis:] if axis != -1 else [shape[-1]]
        del norm
        _single(c, "LayerNormalization", shape=shape, attrs={"axis": axis, "epsilon": 1e-5},
                const_inputs=[rand(nshape) + 1, rand(nshape)],
                parts={"axis": axis}, extra="vit" if shape[-1] == 768 else None)
    _single(c, "LayerNormalization", shape=[1, 16, 32], attrs={"axis": -1},
            const_inputs=[rand([32]) + 1], parts={"axis": -1, "bias": "no"})
    _single(c, "LayerNormalization", shape=[1, 16, 32], opset=17, attrs={"axis": -1},
            const_inputs=[rand([32]) + 1, rand([32])], n_out=3,
            parts={"axis": -1, "outputs": 3})
    for op in ("Softmax", "LogSoftmax"):
        for shape, axis in (([4, 32], -1), ([1, 16, 32], -1), ([1, 16, 32], 1),
                            ([1, 8, 16, 16], 1), ([1, 8, 16, 16], 2), ([1, 8, 16, 16], -1),
                            ([1, 4, 4, 8, 8], -1), ([1, 4, 4, 8, 8], 1)):
            _single(c, op, shape=shape, attrs={"axis": axis})
    _single(c, "Softmax", shape=[1, 12, 197, 197], attrs={"axis": -1}, extra="vit")
    _single(c, "Softmax", shape=[1, 4, 64, 4096], attrs={"axis": -1}, extra="wide")
    _single(c, "Softmax", shape=[1, 8192, 4], attrs={"axis": 1}, extra="tall")
    _single(c, "Softmax", shape=[1, 8, 16, 16], attrs={"axis": -1}, dtype="float16")
    _single(c, "Softmax", shape=[1, 16, 32], attrs={"axis": -1}, opset=11,
            parts={"axis": -1, "opset": 11})
    _single(c, "LRN", attrs={"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0},
            parts={"size": 5})
    _single(c, "LpNormalization", shape=[1, 16, 32], attrs={"axis": -1, "p": 2})
    _single(c, "MeanVarianceNormalization", parts={})


REDUCE = ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceProd",
          "ReduceSumSquare", "ReduceLogSumExp", "ReduceL1"]


def reduce_probes(c: Collector) -> None:
    """Reduce* over axes/keepdims/rank, axes as attribute (opset 17) and as input (opset 18)."""
    cases = [(3, [-1], 1), (3, [-1], 0), (4, [1], 1), (4, [2, 3], 1), (4, [2, 3], 0),
             (4, [1, 2, 3], 1), (4, [-1], 1), (4, [0], 1), (2, [-1], 1), (2, [0], 0),
             (5, [-1], 1), (4, None, 0), (3, [1], 1)]
    main_ops = REDUCE[:5]
    for op in REDUCE:
        sel = cases if op in main_ops else [c_ for c_ in cases if c_[0] in (3, 4)][:4]
        for r, axes, keep in sel:
            attrs: dict[str, Any] = {"keepdims": keep}
            consts: list[Any] = []
            if axes is not None:
                if op == "ReduceSum":
                    consts = [np.asarray(axes, np.int64)]
                else:
                    attrs["axes"] = axes
            _single(c, op, rank=r, attrs=attrs, const_inputs=consts,
                    parts={"axes": axes if axes is not None else "all", "keepdims": keep})
    for op in main_ops:
        for r, axes, keep in ((3, [-1], 1), (4, [2, 3], 1), (4, [1], 0)):
            _single(c, op, rank=r, opset=18, attrs={"keepdims": keep},
                    const_inputs=[np.asarray(axes, np.int64)],
                    parts={"axes": axes, "keepdims": keep, "opset": 18})
    gb = GraphBuilder(18)
    x = gb.input("x", "float32", SHAPES[4])
    ax = gb.input("axes", "int64", [1])
    gb.output(gb.node("ReduceMean", [x, ax], keepdims=1))
    c.add(pid("ReduceMean", {"axes": "dyn", "opset": 18}, "float32", 4), "ReduceMean", gb,
          attributes={"axes": "dynamic"})
    _single(c, "ReduceMean", shape=[1, 8, 64, 64], attrs={"axes": [2, 3], "keepdims": 1},
            parts={"axes": [2, 3], "keepdims": 1}, extra="big")
    _single(c, "ReduceSum", rank=2, dtype="int64", attrs={"keepdims": 1},
            const_inputs=[np.asarray([-1], np.int64)], parts={"axes": [-1], "keepdims": 1})
    # ArgMax / ArgMin
    for op in ("ArgMax", "ArgMin"):
        for r, axis, keep in ((4, 1, 1), (3, -1, 0), (2, -1, 1), (2, 0, 0), (4, -1, 1)):
            _single(c, op, rank=r, attrs={"axis": axis, "keepdims": keep})
        _single(c, op, rank=3, attrs={"axis": -1, "keepdims": 1, "select_last_index": 1})


def pool_probes(c: Collector) -> None:
    """MaxPool / AveragePool / global pools / LpPool over kernel, stride, pads, ceil, rank."""
    def pool(op: str, parts: dict[str, Any], k: Sequence[int], shape: Sequence[int] | None = None,
             n_out: int = 1, **attrs: Any) -> None:
        shape = list(shape or [1, 8, 32, 32])
        attrs["kernel_shape"] = list(k)
        _single(c, op, shape=shape, attrs=attrs, parts=parts, n_out=n_out)

    for op in ("MaxPool", "AveragePool"):
        pool(op, {"k": 2, "s": 2}, (2, 2), strides=[2, 2])
        pool(op, {"k": 3, "s": 2, "p": 1}, (3, 3), strides=[2, 2], pads=[1, 1, 1, 1])
        pool(op, {"k": 3, "s": 1, "p": 1}, (3, 3), pads=[1, 1, 1, 1])
        pool(op, {"k": 3, "s": 2, "ceil": 1}, (3, 3), strides=[2, 2], ceil_mode=1)
        pool(op, {"k": 2, "s": 2, "ceil": 1}, (2, 2), strides=[2, 2], ceil_mode=1,
             shape=[1, 8, 33, 33])
        pool(op, {"k": 5, "s": 1, "p": 2}, (5, 5), pads=[2, 2, 2, 2])
        pool(op, {"k": 7, "s": 1}, (7, 7))
        pool(op, {"k": 8, "s": 1}, (8, 8))
        pool(op, {"k": 9, "s": 1, "p": 4}, (9, 9), pads=[4, 4, 4, 4])
        pool(op, {"k": 13, "s": 1, "p": 6}, (13, 13), pads=[6, 6, 6, 6])
        pool(op, {"k": 8, "s": 8}, (8, 8), strides=[8, 8])
        pool(op, {"k": 9, "s": 9}, (9, 9), strides=[9, 9], shape=[1, 8, 36, 36])
        pool(op, {"k": 16, "s": 16}, (16, 16), strides=[16, 16])
        pool(op, {"k": 2, "s": 1}, (2, 2))
        pool(op, {"k": 3, "auto_pad": "SAME_UPPER"}, (3, 3), auto_pad="SAME_UPPER")
        pool(op, {"k": 3, "auto_pad": "VALID"}, (3, 3), auto_pad="VALID")
        pool(op, {"k": "1x3"}, (1, 3), pads=[0, 1, 0, 1])
        pool(op, {"k": 3, "s": 2}, (3,), strides=[2], shape=[1, 8, 32])
        pool(op, {"k": 2, "s": 2}, (2, 2, 2), strides=[2, 2, 2], shape=[1, 4, 4, 8, 8])
        pool(op, {"k": 2, "s": 2, "hw": "1024x64"}, (2, 2), strides=[2, 2],
             shape=[1, 8, 1024, 64])
    pool("MaxPool", {"k": 3, "d": 2}, (3, 3), dilations=[2, 2])
    pool("MaxPool", {"k": 2, "s": 2, "indices": "yes"}, (2, 2), strides=[2, 2], n_out=2)
    pool("AveragePool", {"k": 3, "s": 1, "p": 1, "cip": 1}, (3, 3), pads=[1, 1, 1, 1],
         count_include_pad=1)
    pool("AveragePool", {"k": 3, "s": 2, "p": 1, "cip": 1}, (3, 3), strides=[2, 2],
         pads=[1, 1, 1, 1], count_include_pad=1)
    pool("LpPool", {"k": 2, "s": 2, "p": 2}, (2, 2), strides=[2, 2], p=2)
    for op in ("GlobalAveragePool", "GlobalMaxPool"):
        for shape in ([1, 8, 16, 16], [1, 8, 32], [1, 4, 4, 8, 8], [1, 64, 64, 64],
                      [1, 8, 128, 128], [1, 1280, 7, 7]):
            _single(c, op, shape=shape, parts={},
                    extra=None if shape in ([1, 8, 16, 16], [1, 8, 32], [1, 4, 4, 8, 8])
                    else "hw%dx%dc%d" % (shape[2], shape[3], shape[1]))


def pad_probes(c: Collector) -> None:
    """Pad: modes constant / reflect / edge / wrap, pad placement, rank, constant pads input."""
    def pad(parts: dict[str, Any], pads: list[int], mode: str = "constant", value: float | None =
            None, shape: Sequence[int] | None = None, opset: int = DEFAULT_OPSET,
            axes: list[int] | None = None) -> None:
        shape = list(shape or SHAPES[4])
        consts: list[Any] = [np.asarray(pads, np.int64)]
        if value is not None or axes is not None:
            consts.append(np.float32(value) if value is not None else None)
        if axes is not None:
            consts.append(np.asarray(axes, np.int64))
        _single(c, "Pad", shape=shape, attrs={"mode": mode}, const_inputs=consts,
                parts=dict({"mode": mode}, **parts), opset=opset)

    hw = [0, 0, 1, 1, 0, 0, 1, 1]
    for mode in ("constant", "reflect", "edge"):
        pad({}, hw, mode)
        pad({"pads": "hw_asym"}, [0, 0, 0, 1, 0, 0, 2, 3], mode)
        pad({"pads": "last"}, [0, 0, 2, 0, 0, 2], mode, shape=SHAPES[3])
        pad({"pads": "c"}, [0, 1, 0, 0, 0, 1, 0, 0], mode)
        pad({"pads": "hw"}, [0, 0, 0, 1, 1, 0, 0, 1, 1, 1], mode, shape=SHAPES[5])
        pad({"pads": "last"}, [0, 2, 0, 2], mode, shape=SHAPES[2])
        pad({"pads": "big"}, [0, 0, 3, 3, 0, 0, 3, 3], mode)
        pad({"pads": "hw"}, hw, mode, opset=18, axes=None)
        pad({"pads": "hw", "axes": "2_3"}, [1, 1, 1, 1], mode, opset=18, axes=[2, 3])
    pad({"value": 1.5}, hw, "constant", value=1.5)
    pad({"value": -1e4}, hw, "constant", value=-1e4)
    pad({"pads": "n"}, [1, 0, 0, 0, 0, 0, 0, 0], "constant")
    pad({"pads": "neg"}, [0, 0, -1, -1, 0, 0, -1, -1], "constant")
    pad({}, hw, "wrap", opset=19)
    pad({"w": 8176}, [0, 0, 0, 1, 0, 0, 0, 1], "reflect", shape=[1, 1, 2, 8174])
    pad({"w": 8178}, [0, 0, 0, 1, 0, 0, 0, 1], "reflect", shape=[1, 1, 2, 8176])
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    p = gb.input("pads", "int64", [8])
    gb.output(gb.node("Pad", [x, p], mode="constant"))
    c.add(pid("Pad", {"mode": "constant", "pads": "dyn"}, "float32", 4), "Pad", gb,
          attributes={"mode": "constant", "pads": "dynamic"})
    gb = GraphBuilder(11)
    x = gb.input("x", "float32", SHAPES[4])
    gb.output(gb.node("Pad", [x, gb.ints(hw)], mode="reflect"))
    c.add(pid("Pad", {"mode": "reflect", "opset": 11}, "float32", 4), "Pad", gb,
          attributes={"mode": "reflect"})


def resize_probes(c: Collector) -> None:
    """Resize: mode x coordinate mode x scale, nearest_mode, sizes vs scales, ranks; Upsample."""
    def resize(parts: dict[str, Any], scales: Sequence[float] | None = None,
               sizes: Sequence[int] | None = None, shape: Sequence[int] | None = None,
               opset: int = DEFAULT_OPSET, dyn: bool = False, **attrs: Any) -> None:
        shape = list(shape or SHAPES[4])
        gb = GraphBuilder(opset)
        x = gb.input("x", "float32", shape)
        if dyn:
            s = gb.input("scales", "float32", [len(shape)])
            ins = [x, "", s]
        elif sizes is not None:
            ins = [x, "", "", gb.ints(sizes)]
        else:
            ins = [x, "", gb.const(np.asarray(scales, np.float32))]
        gb.output(gb.node("Resize", ins, **attrs))
        a = dict(attrs)
        if scales is not None:
            a["scales"] = [float(v) for v in scales]
        if sizes is not None:
            a["sizes"] = list(sizes)
        c.add(pid("Resize", parts, "float32", len(shape)), "Resize", gb, attributes=a)

    coords = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
    for mode in ("nearest", "linear", "cubic"):
        for ctm in coords:
            for s in (2.0, 0.5, 1.5, 4.0):
                extra = {}
                if mode == "nearest" and ctm == "asymmetric":
                    extra["nearest_mode"] = "floor"
                resize({"mode": mode, "ctm": ctm, "scale": s}, [1, 1, s, s], mode=mode,
                       coordinate_transformation_mode=ctm, **extra)
    # scales beyond the documented 2..8 integer range, non-uniform
    for mode, ctm in (("nearest", "asymmetric"), ("linear", "half_pixel"),
                      ("linear", "align_corners")):
        nm = {"nearest_mode": "floor"} if mode == "nearest" else {}
        for s in (3.0, 8.0, 16.0):
            resize({"mode": mode, "ctm": ctm, "scale": s}, [1, 1, s, s], mode=mode,
                   coordinate_transformation_mode=ctm, shape=[1, 8, 8, 8], **nm)
        resize({"mode": mode, "ctm": ctm, "scale": "2x3"}, [1, 1, 2.0, 3.0], mode=mode,
               coordinate_transformation_mode=ctm, **nm)
        resize({"mode": mode, "ctm": ctm, "scale": "1x2"}, [1, 1, 1.0, 2.0], mode=mode,
               coordinate_transformation_mode=ctm, **nm)
        resize({"mode": mode, "ctm": ctm, "sizes": "32x32"}, sizes=[1, 8, 32, 32], mode=mode,
               coordinate_transformation_mode=ctm, **nm)
        resize({"mode": mode, "ctm": ctm, "sizes": "24x24"}, sizes=[1, 8, 24, 24], mode=mode,
               coordinate_transformation_mode=ctm, **nm)
        resize({"mode": mode, "ctm": ctm, "from": "1x1"}, sizes=[1, 8, 16, 16], mode=mode,
               coordinate_transformation_mode=ctm, shape=[1, 8, 1, 1], **nm)
        resize({"mode": mode, "ctm": ctm, "scale": 2, "dyn": "yes"}, mode=mode, dyn=True,
               coordinate_transformation_mode=ctm, **nm)
    for nm in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
        resize({"mode": "nearest", "ctm": "half_pixel", "nearest_mode": nm, "scale": 2},
               [1, 1, 2.0, 2.0], mode="nearest", coordinate_transformation_mode="half_pixel",
               nearest_mode=nm)
    resize({"mode": "nearest", "ctm": "asymmetric", "nearest_mode": "round_prefer_floor",
            "scale": 2}, [1, 1, 2.0, 2.0], mode="nearest",
           coordinate_transformation_mode="asymmetric")
    resize({"mode": "nearest", "ctm": "tf_half_pixel_for_nn", "scale": 2}, [1, 1, 2.0, 2.0],
           mode="nearest", coordinate_transformation_mode="tf_half_pixel_for_nn")
    resize({"mode": "cubic", "ctm": "half_pixel", "cubic_coeff_a": -0.5, "scale": 2},
           [1, 1, 2.0, 2.0], mode="cubic", coordinate_transformation_mode="half_pixel",
           cubic_coeff_a=-0.5)
    resize({"mode": "linear", "ctm": "half_pixel", "antialias": 1, "scale": 0.5},
           [1, 1, 0.5, 0.5], mode="linear", coordinate_transformation_mode="half_pixel",
           antialias=1, opset=18)
    resize({"mode": "linear", "ctm": "half_pixel", "scale": 2, "opset": 19},
           [1, 1, 2.0, 2.0], mode="linear", coordinate_transformation_mode="half_pixel", opset=19)
    resize({"mode": "linear", "ctm": "half_pixel", "scale": 2, "c": 2}, [1, 2, 2.0, 2.0],
           mode="linear", coordinate_transformation_mode="half_pixel")
    resize({"mode": "linear", "ctm": "half_pixel", "scale": 2}, [1, 1, 2.0], mode="linear",
           coordinate_transformation_mode="half_pixel", shape=SHAPES[3])
    resize({"mode": "nearest", "ctm": "asymmetric", "scale": 2}, [1, 1, 2.0], mode="nearest",
           coordinate_transformation_mode="asymmetric", nearest_mode="floor", shape=SHAPES[3])
    resize({"mode": "nearest", "ctm": "asymmetric", "scale": 2}, [1, 1, 2.0, 2.0, 2.0],
           mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor",
           shape=SHAPES[5])
    resize({"mode": "linear", "ctm": "half_pixel", "scale": 2}, [1, 1, 2.0, 2.0, 2.0],
           mode="linear", coordinate_transformation_mode="half_pixel", shape=SHAPES[5])
    # Upsample (deprecated since opset 10): opset 9 model and inside an opset-17 model
    for opset in (9,):
        for mode in ("nearest", "linear"):
            gb = GraphBuilder(opset)
            x = gb.input("x", "float32", SHAPES[4])
            gb.output(gb.node("Upsample", [x, gb.const(np.asarray([1, 1, 2, 2], np.float32))],
                              mode=mode))
            c.add(pid("Upsample", {"mode": mode, "scale": 2, "opset": opset}, "float32", 4),
                  "Upsample", gb, attributes={"mode": mode, "scales": [1, 1, 2, 2]})


def shape_probes(c: Collector) -> None:
    """Layout ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split, Slice,
    Expand, Tile, DepthToSpace, SpaceToDepth."""
    # Reshape
    for parts, shape, target in ((("r4_to_r2"), SHAPES[4], [1, -1]),
                                 ("r2_to_r4", [4, 32], [1, 4, 4, 8]),
                                 ("r3_split_heads", [1, 16, 32], [1, 16, 4, 8]),
                                 ("r4_merge_heads", [1, 16, 4, 8], [1, 16, 32]),
                                 ("zero", [1, 16, 32], [0, 0, 4, 8]),
                                 ("r4_to_r3", SHAPES[4], [1, 8, 256]),
                                 ("r4_to_r5", [1, 8, 16, 16], [1, 2, 4, 16, 16]),
                                 ("r5_to_r4", [1, 2, 4, 16, 16], [1, 8, 16, 16]),
                                 ("r4_to_r6", [1, 8, 16, 16], [1, 8, 4, 4, 4, 4]),
                                 ("batch", [4, 32], [2, 2, 32]),
                                 ("r4_to_r1", SHAPES[4], [-1]),
                                 ("same", SHAPES[4], SHAPES[4])):
        _single(c, "Reshape", shape=shape, const_inputs=[np.asarray(target, np.int64)],
                parts={"case": parts})
    _single(c, "Reshape", shape=[1, 16, 32], const_inputs=[np.asarray([0, 0, 4, 8], np.int64)],
            attrs={"allowzero": 1}, parts={"case": "zero", "allowzero": 1})
    # allowzero=1 with an explicit shape: what the dynamo exporter writes for every view/flatten
    _single(c, "Reshape", shape=[1, 16, 32], const_inputs=[np.asarray([1, 16, 4, 8], np.int64)],
            attrs={"allowzero": 1}, parts={"case": "r3_split_heads", "allowzero": 1})
    _multi(c, "Reshape", [("float32", SHAPES[4]), ("int64", [2])], parts={"shape": "dyn"})
    _single(c, "Reshape", rank=2, dtype="int64", const_inputs=[np.asarray([-1], np.int64)],
            parts={"case": "r2_to_r1"})
    # Flatten
    for shape, axis in ((SHAPES[4], 1), (SHAPES[4], 0), (SHAPES[4], 2), (SHAPES[3], 1),
                        (SHAPES[5], 1), (SHAPES[4], -1)):
        _single(c, "Flatten", shape=shape, attrs={"axis": axis})
    # Transpose
    perms = {4: [[0, 2, 3, 1], [0, 3, 1, 2], [0, 1, 3, 2], [0, 2, 1, 3], [1, 0, 2, 3],
                 [3, 2, 1, 0], [0, 3, 2, 1], [1, 2, 0, 3], [2, 3, 0, 1]],
             3: [[0, 2, 1], [1, 0, 2], [2, 0, 1], [1, 2, 0], [2, 1, 0]],
             2: [[1, 0]],
             5: [[0, 2, 1, 3, 4], [0, 1, 3, 4, 2], [0, 2, 3, 4, 1], [0, 1, 2, 4, 3]],
             6: [[0, 1, 3, 5, 2, 4], [0, 2, 4, 3, 5, 1]]}
    for r, plist in perms.items():
        for p in plist:
            _single(c, "Transpose", rank=r, attrs={"perm": p})
    # size limits documented as h*w <= 8192 (RK3588) for some perms
    for shape in ([1, 4, 64, 128], [1, 4, 65, 128], [1, 8, 128, 128], [1, 64, 96, 96]):
        for p in ([0, 2, 3, 1], [0, 1, 3, 2], [0, 3, 1, 2]):
            _single(c, "Transpose", shape=shape, attrs={"perm": p},
                    extra="c%dh%dw%d" % tuple(shape[1:]))
    _single(c, "Transpose", shape=[1, 197, 12, 64], attrs={"perm": [0, 2, 1, 3]}, extra="vit")
    _single(c, "Transpose", rank=2, dtype="int64", attrs={"perm": [1, 0]})
    _single(c, "Transpose", rank=4, dtype="float16", attrs={"perm": [0, 2, 3, 1]})
    # Squeeze / Unsqueeze (axes as input since opset 13)
    for shape, axes in (([1, 1, 16, 16], [1]), ([1, 8, 16, 1], [3]), ([1, 8, 16, 1], [-1]),
                        ([1, 16, 32], [0]), ([1, 8, 1, 1], [2, 3]), ([1, 1, 32], [0, 1]),
                        ([1, 4, 1, 8, 8], [2])):
        _single(c, "Squeeze", shape=shape, const_inputs=[np.asarray(axes, np.int64)],
                parts={"axes": axes})
    _single(c, "Squeeze", shape=[1, 1, 16, 16], parts={"axes": "none"})
    for shape, axes in (([4, 32], [0]), ([4, 32], [1]), ([4, 32], [-1]), ([1, 16, 32], [1]),
                        ([1, 16, 32], [-1]), ([8, 16], [0, 1]), ([1, 8], [2, 3]),
                        ([1, 8, 16, 16], [2])):
        _single(c, "Unsqueeze", shape=shape, const_inputs=[np.asarray(axes, np.int64)],
                parts={"axes": axes})
    _single(c, "Unsqueeze", rank=2, dtype="int64", const_inputs=[np.asarray([0], np.int64)],
            parts={"axes": [0]})
    # Concat
    for r, axis, n in ((4, 1, 2), (4, 1, 3), (4, 2, 2), (4, 3, 2), (4, -1, 2), (4, 0, 2),
                       (3, 1, 2), (3, -1, 2), (3, 0, 2), (2, 0, 2), (2, 1, 2), (5, 1, 2),
                       (5, 2, 2), (4, 1, 8)):
        _multi(c, "Concat", [("float32", SHAPES[r])] * n, attrs={"axis": axis},
               parts={"axis": axis, "n": n})
    _multi(c, "Concat", [("float32", SHAPES[4]), ("float32", SHAPES[4])],
           consts={1: rand(SHAPES[4])}, attrs={"axis": 1}, parts={"axis": 1, "b": "const"})
    _multi(c, "Concat", [("float32", [1, 1, 32]), ("float32", [1, 16, 32])],
           consts={0: rand([1, 1, 32])}, attrs={"axis": 1}, parts={"axis": 1, "a": "cls_token"})
    _multi(c, "Concat", [("int64", [2]), ("int64", [2])], dtype="int64", attrs={"axis": 0},
           parts={"axis": 0})
    _multi(c, "Concat", [("float32", [1, 3, 16, 16]), ("float32", [1, 5, 16, 16])],
           attrs={"axis": 1}, parts={"axis": 1, "c": "3_5"})
    _multi(c, "Concat", [("float16", SHAPES[4])] * 2, dtype="float16", attrs={"axis": 1},
           parts={"axis": 1, "n": 2})
    # Split
    for shape, axis, split, n in ((SHAPES[4], 1, [4, 4], 2), (SHAPES[4], 1, [2, 6], 2),
                                  (SHAPES[4], 2, [8, 8], 2), (SHAPES[4], 3, [4, 12], 2),
                                  (SHAPES[3], -1, [16, 16], 2), (SHAPES[3], 1, [4, 4, 8], 3),
                                  (SHAPES[2], 1, [8, 24], 2), (SHAPES[2], 0, [2, 2], 2),
                                  (SHAPES[5], 1, [2, 2], 2), (SHAPES[4], 0, None, 1),
                                  ([1, 96, 16], -1, [8, 8], 2), ([1, 16, 96], -1, [32] * 3, 3)):
        consts = [np.asarray(split, np.int64)] if split is not None else []
        _single(c, "Split", shape=shape, attrs={"axis": axis}, const_inputs=consts, n_out=n,
                parts={"axis": axis, "split": split if split else "none"})
    _single(c, "Split", shape=SHAPES[4], attrs={"axis": 1, "num_outputs": 2}, n_out=2,
            opset=18, parts={"axis": 1, "num_outputs": 2, "opset": 18})
    _single(c, "Split", shape=SHAPES[4], attrs={"axis": 1}, n_out=2,
            parts={"axis": 1, "split": "none_n2"})
    # Slice
    def slc(parts: dict[str, Any], shape: Sequence[int], starts: list[int], ends: list[int],
            axes: list[int] | None, steps: list[int] | None, dtype: str = "float32") -> None:
        consts: list[Any] = [np.asarray(starts, np.int64), np.asarray(ends, np.int64)]
        if axes is not None or steps is not None:
            consts.append(np.asarray(axes if axes is not None else list(range(len(starts))),
                                     np.int64))
        if steps is not None:
            consts.append(np.asarray(steps, np.int64))
        _single(c, "Slice", shape=list(shape), const_inputs=consts, parts=parts, dtype=dtype)

    big = 2 ** 62
    for r, axis, dim in ((4, 1, 8), (4, 2, 16), (4, 3, 16), (4, 0, 1), (3, -1, 32), (3, 1, 16),
                         (2, -1, 32), (2, 0, 4), (5, 2, 4), (5, -1, 8)):
        for step in (1, 2):
            slc({"axis": axis, "step": step}, SHAPES[r], [0], [max(1, dim // 2)], [axis], [step])
        if dim > 1:
            slc({"axis": axis, "step": 1, "start": 1}, SHAPES[r], [1], [big], [axis], [1])
    slc({"axis": 2, "step": 2, "start": 1}, SHAPES[4], [1], [big], [2], [2])
    slc({"axis": 3, "step": 3}, SHAPES[4], [0], [big], [3], [3])
    slc({"axis": -1, "step": -1}, SHAPES[3], [-1], [-big], [-1], [-1])
    slc({"axis": 1, "step": -1}, SHAPES[4], [-1], [-big], [1], [-1])
    slc({"axis": -1, "start": -4}, SHAPES[3], [-4], [big], [-1], None)
    slc({"axes": "2_3", "step": 1}, SHAPES[4], [2, 2], [10, 10], [2, 3], [1, 1])
    slc({"axes": "2_3", "step": 2}, SHAPES[4], [0, 0], [big, big], [2, 3], [2, 2])
    slc({"axes": "none"}, SHAPES[4], [0, 0, 0, 0], [1, 4, 8, 8], None, None)
    slc({"axis": 1, "cls": "first"}, [1, 17, 32], [0], [1], [1], None)
    slc({"axis": 0, "step": 1}, [8], [2], [6], [0], [1], dtype="int64")
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    st = gb.input("starts", "int64", [1])
    gb.output(gb.node("Slice", [x, st, gb.ints([8]), gb.ints([2])]))
    c.add(pid("Slice", {"starts": "dyn"}, "float32", 4), "Slice", gb,
          attributes={"starts": "dynamic"})
    # Expand / Tile
    for shape, target in (([1, 8, 1, 1], [1, 8, 16, 16]), ([1, 32], [16, 32]),
                          ([1, 1, 32], [1, 16, 32]), ([1, 8, 16, 16], [1, 8, 16, 16]),
                          ([1, 8, 16, 16], [2, 8, 16, 16]), ([32], [4, 32]),
                          ([1, 1, 16, 16], [1, 8, 16, 16]), ([1, 4, 1, 8, 8], [1, 4, 4, 8, 8])):
        _single(c, "Expand", shape=shape, const_inputs=[np.asarray(target, np.int64)],
                parts={"from": shape, "to": target})
    _multi(c, "Expand", [("float32", [1, 8, 1, 1]), ("int64", [4])], parts={"shape": "dyn"})
    _single(c, "Expand", shape=[1, 1, 32], dtype="int64",
            const_inputs=[np.asarray([1, 16, 32], np.int64)],
            parts={"from": [1, 1, 32], "to": [1, 16, 32]})
    for shape, rep in ((SHAPES[4], [1, 2, 1, 1]), (SHAPES[4], [1, 1, 2, 2]),
                       (SHAPES[4], [2, 1, 1, 1]), (SHAPES[2], [2, 1]), (SHAPES[3], [1, 1, 3]),
                       (SHAPES[3], [1, 4, 1]), (SHAPES[5], [1, 1, 2, 1, 1])):
        _single(c, "Tile", shape=shape, const_inputs=[np.asarray(rep, np.int64)],
                parts={"repeats": rep})
    # DepthToSpace / SpaceToDepth
    for mode in ("DCR", "CRD"):
        for b in (2, 4):
            _single(c, "DepthToSpace", shape=[1, 32, 8, 8], attrs={"blocksize": b, "mode": mode})
    for b in (2, 4):
        _single(c, "SpaceToDepth", shape=[1, 8, 16, 16], attrs={"blocksize": b})


def index_probes(c: Collector) -> None:
    """Gather, GatherElements, GatherND, ScatterND, ScatterElements, TopK, CumSum, NonZero,
    Trilu, Range, Shape, ConstantOfShape, OneHot, GridSample, random ops."""
    # Gather
    for shape, axis, idx, tag in ((SHAPES[4], 1, [0, 2, 4], "const_vec"),
                                  (SHAPES[4], 1, 0, "const_scalar"),
                                  (SHAPES[3], 1, 0, "const_scalar"),
                                  (SHAPES[3], 1, -1, "const_neg"),
                                  (SHAPES[2], 0, [1, 3], "const_vec"),
                                  (SHAPES[3], -1, [0, 5, 9], "const_vec"),
                                  (SHAPES[4], 0, 0, "const_scalar"),
                                  (SHAPES[4], 3, [[0, 1], [2, 3]], "const_2d")):
        _single(c, "Gather", shape=shape, attrs={"axis": axis},
                const_inputs=[np.asarray(idx, np.int64)], parts={"axis": axis, "idx": tag})
    _single(c, "Gather", shape=SHAPES[3], attrs={"axis": 1},
            const_inputs=[np.asarray([0, 2], np.int32)], parts={"axis": 1, "idx": "const_i32"})
    _multi(c, "Gather", [("float32", SHAPES[3]), ("int64", [4])], attrs={"axis": 1},
           parts={"axis": 1, "idx": "dyn"})
    _multi(c, "Gather", [("float32", [100, 32]), ("int64", [1, 16])],
           consts={0: rand([100, 32])}, attrs={"axis": 0}, parts={"axis": 0, "case": "embedding"})
    _multi(c, "Gather", [("float32", [100, 32]), ("int32", [1, 16])],
           consts={0: rand([100, 32])}, attrs={"axis": 0},
           parts={"axis": 0, "case": "embedding_i32"})
    _multi(c, "Gather", [("int64", [4]), ("int64", [])], dtype="int64",
           consts={1: np.int64(1)}, attrs={"axis": 0}, parts={"axis": 0, "idx": "const_scalar"})
    # GatherElements / GatherND
    _multi(c, "GatherElements", [("float32", SHAPES[3]), ("int64", [1, 16, 4])],
           attrs={"axis": -1}, parts={"axis": -1, "idx": "dyn"})
    _multi(c, "GatherElements", [("float32", SHAPES[4]), ("int64", [1, 8, 16, 16])],
           consts={1: rng().integers(0, 8, [1, 8, 16, 16]).astype(np.int64)}, attrs={"axis": 1},
           parts={"axis": 1, "idx": "const"})
    _multi(c, "GatherElements", [("float32", SHAPES[2]), ("int64", [4, 8])],
           attrs={"axis": 1}, parts={"axis": 1, "idx": "dyn"})
    _multi(c, "GatherND", [("float32", SHAPES[3]), ("int64", [1, 4, 1])],
           consts={1: np.asarray([[[0], [3], [5], [7]]], np.int64)}, attrs={"batch_dims": 1},
           parts={"batch_dims": 1})
    _multi(c, "GatherND", [("float32", SHAPES[3]), ("int64", [2, 2])],
           consts={1: np.asarray([[0, 3], [0, 5]], np.int64)}, parts={"batch_dims": 0})
    # ScatterND / ScatterElements
    for red, opset in (("none", 16), ("add", 16), ("mul", 16)):
        _multi(c, "ScatterND", [("float32", [1, 8, 32]), ("int64", [1, 2, 2]),
                                ("float32", [1, 2, 32])],
               consts={1: np.asarray([[[0, 1], [0, 5]]], np.int64)},
               attrs={"reduction": red}, opset=opset, parts={"reduction": red})
    _multi(c, "ScatterND", [("float32", [1, 8, 32]), ("int64", [1, 2, 2]),
                            ("float32", [1, 2, 32])], parts={"idx": "dyn"})
    _multi(c, "ScatterND", [("float32", [4, 32]), ("int64", [2, 1]), ("float32", [2, 32])],
           consts={1: np.asarray([[0], [2]], np.int64)}, parts={"reduction": "none", "r": 2})
    _multi(c, "ScatterElements", [("float32", SHAPES[3]), ("int64", [1, 2, 32]),
                                  ("float32", [1, 2, 32])],
           consts={1: rng().integers(0, 16, [1, 2, 32]).astype(np.int64)}, attrs={"axis": 1},
           parts={"axis": 1})
    # TopK
    for shape, axis, k, extra in ((SHAPES[2], -1, 5, {}), (SHAPES[4], 1, 3, {}),
                                  (SHAPES[3], -1, 1, {}), (SHAPES[3], -1, 5, {"largest": 0}),
                                  (SHAPES[3], 1, 5, {"sorted": 0}), ([1, 1000], -1, 100, {})):
        attrs = dict({"axis": axis}, **extra)
        _single(c, "TopK", shape=shape, attrs=attrs, const_inputs=[np.asarray([k], np.int64)],
                n_out=2, parts=dict(attrs, k=k))
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[2])
    vals, _ = gb.node("TopK", [x, gb.ints([5])], n_out=2, axis=-1)
    gb.output(vals)
    c.add(pid("TopK", {"axis": -1, "k": 5, "out": "values_only"}, "float32", 2), "TopK", gb,
          attributes={"axis": -1, "k": 5})
    # CumSum
    for shape, axis, extra in ((SHAPES[4], 1, {}), (SHAPES[3], -1, {}), (SHAPES[3], 1, {}),
                               (SHAPES[2], 0, {}), (SHAPES[2], 1, {"exclusive": 1}),
                               (SHAPES[2], 1, {"reverse": 1}), (SHAPES[4], 3, {})):
        _single(c, "CumSum", shape=shape, attrs=extra, const_inputs=[np.int64(axis)],
                parts=dict({"axis": axis}, **extra))
    _single(c, "CumSum", shape=SHAPES[2], dtype="int64", const_inputs=[np.int64(1)],
            parts={"axis": 1})
    _single(c, "CumSum", shape=SHAPES[2], const_inputs=[np.int32(1)],
            parts={"axis": 1, "axis_dtype": "i32"})
    # NonZero / Trilu / Range / Shape / ConstantOfShape / OneHot
    for r in (2, 4):
        _single(c, "NonZero", rank=r, parts={})
    _single(c, "NonZero", rank=2, dtype="bool", parts={})
    for upper in (0, 1):
        for shape, k in (([16, 16], None), ([1, 16, 16], None), ([1, 4, 16, 16], None),
                         ([16, 16], 1)):
            consts = [np.int64(k)] if k is not None else []
            _single(c, "Trilu", shape=shape, attrs={"upper": upper}, const_inputs=consts,
                    parts={"upper": upper, "k": k if k is not None else 0})
    gb = GraphBuilder()
    lim = gb.input("limit", "int64", [])
    gb.output(gb.node("Range", [gb.const(np.int64(0)), lim, gb.const(np.int64(1))]))
    c.add(pid("Range", {"limit": "dyn"}, "int64", 0), "Range", gb, dtype="int64",
          attributes={"start": 0, "delta": 1})
    gb = GraphBuilder()
    lim = gb.input("limit", "float32", [])
    gb.output(gb.node("Range", [gb.const(np.float32(0)), lim, gb.const(np.float32(1))]))
    c.add(pid("Range", {"limit": "dyn"}, "float32", 0), "Range", gb,
          attributes={"start": 0.0, "delta": 1.0})
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    r = gb.node("Range", [gb.const(np.float32(0)), gb.const(np.float32(32)),
                          gb.const(np.float32(1))])
    gb.output(gb.node("Add", [x, r]))
    c.add(pid("Range", {"inputs": "const"}, "float32", 0), "Range", gb, kind="prepass",
          attributes={"start": 0.0, "limit": 32.0, "delta": 1.0},
          note="all-constant Range feeding an Add: is it folded?")
    for r in (2, 4):
        gb = GraphBuilder()
        x = gb.input("x", "float32", SHAPES[r])
        gb.output(gb.node("Shape", [x]))
        c.add(pid("Shape", {}, "float32", r), "Shape", gb, note="Shape of a static input, "
              "as graph output")
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    gb.output(gb.node("Shape", [x], start=2))
    c.add(pid("Shape", {"start": 2}, "float32", 4), "Shape", gb, attributes={"start": 2})
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    gb.output(gb.node("Size", [x]))
    c.add(pid("Size", {}, "float32", 4), "Size", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    z = gb.node("ConstantOfShape", [gb.ints(SHAPES[4])],
                value=numpy_helper.from_array(np.asarray([1.0], np.float32)))
    gb.output(gb.node("Add", [x, z]))
    c.add(pid("ConstantOfShape", {"shape": "const"}, "float32", 4), "ConstantOfShape", gb,
          kind="prepass")
    gb = GraphBuilder()
    s = gb.input("shape", "int64", [4])
    gb.output(gb.node("ConstantOfShape", [s],
                      value=numpy_helper.from_array(np.asarray([0.0], np.float32))))
    c.add(pid("ConstantOfShape", {"shape": "dyn"}, "int64", 1), "ConstantOfShape", gb,
          dtype="int64")
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    z = gb.node("ConstantOfShape", [gb.node("Shape", [x])],
                value=numpy_helper.from_array(np.asarray([1.0], np.float32)))
    gb.output(gb.node("Mul", [x, z]))
    c.add(pid("ConstantOfShape", {"shape": "from_Shape"}, "float32", 4), "ConstantOfShape", gb,
          kind="prepass")
    _multi(c, "OneHot", [("int64", [1, 16]), ("int64", []), ("float32", [2])],
           consts={1: np.int64(10), 2: np.asarray([0, 1], np.float32)}, attrs={"axis": -1},
           dtype="int64", parts={"axis": -1})
    # GridSample (opset 16 modes bilinear/nearest/bicubic; opset 20 linear/cubic, rank 5)
    for mode, pad, ac in (("bilinear", "zeros", 0), ("bilinear", "zeros", 1),
                          ("bilinear", "border", 0), ("bilinear", "reflection", 0),
                          ("nearest", "zeros", 0), ("nearest", "border", 1),
                          ("bicubic", "zeros", 0)):
        _multi(c, "GridSample", [("float32", SHAPES[4]), ("float32", [1, 16, 16, 2])],
               attrs={"mode": mode, "padding_mode": pad, "align_corners": ac}, opset=17,
               parts={"mode": mode, "padding_mode": pad, "align_corners": ac})
    _multi(c, "GridSample", [("float32", SHAPES[4]), ("float32", [1, 16, 16, 2])],
           consts={1: (rng().random([1, 16, 16, 2]) * 2 - 1).astype(np.float32)},
           attrs={"mode": "bilinear", "padding_mode": "zeros", "align_corners": 0},
           parts={"mode": "bilinear", "grid": "const"})
    for mode in ("linear", "nearest", "cubic"):
        _multi(c, "GridSample", [("float32", SHAPES[4]), ("float32", [1, 16, 16, 2])],
               attrs={"mode": mode}, opset=20, parts={"mode": mode, "opset": 20})
    _multi(c, "GridSample", [("float32", SHAPES[5]), ("float32", [1, 4, 8, 8, 3])],
           attrs={"mode": "linear"}, opset=20, parts={"mode": "linear", "opset": 20})
    # Random ops
    for op in ("RandomUniform", "RandomNormal"):
        gb = GraphBuilder()
        x = gb.input("x", "float32", SHAPES[4])
        rnd = gb.node(op, [], shape=SHAPES[4], dtype=TensorProto.FLOAT)
        gb.output(gb.node("Add", [x, rnd]))
        c.add(pid(op, {}, "float32", 4), op, gb)
    for op in ("RandomUniformLike", "RandomNormalLike"):
        gb = GraphBuilder()
        x = gb.input("x", "float32", SHAPES[4])
        rnd = gb.node(op, [x])
        gb.output(gb.node("Add", [x, rnd]))
        c.add(pid(op, {}, "float32", 4), op, gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    gb.output(gb.node("Bernoulli", [x]))
    c.add(pid("Bernoulli", {}, "float32", 4), "Bernoulli", gb)


def rnn_probes(c: Collector) -> None:
    """LSTM / GRU / RNN as exported by torch (layout 0, batch 1 and 2)."""
    seq, inp, hid = 8, 16, 32

    def rnn(op: str, parts: dict[str, Any], direction: str = "forward", batch: int = 1,
            bias: bool = True, init: bool = True, outs: int = 3, **attrs: Any) -> None:
        gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
        nd = 2 if direction == "bidirectional" else 1
        gb = GraphBuilder()
        x = gb.input("x", "float32", [seq, batch, inp])
        ins = [x, gb.const(rand([nd, gates * hid, inp])), gb.const(rand([nd, gates * hid, hid]))]
        ins.append(gb.const(rand([nd, 2 * gates * hid])) if bias else "")
        if init:
            ins += ["", gb.input("h0", "float32", [nd, batch, hid])]
            if op == "LSTM":
                ins.append(gb.input("c0", "float32", [nd, batch, hid]))
        n_out = 3 if op == "LSTM" else 2
        res = gb.node(op, ins, n_out=n_out, direction=direction, hidden_size=hid, **attrs)
        gb.output(*res[:outs])
        a = dict(attrs, direction=direction, hidden_size=hid)
        c.add(pid(op, parts, "float32", 3), op, gb, attributes=a)

    for op in ("LSTM", "GRU", "RNN"):
        extra = {"linear_before_reset": 1} if op == "GRU" else {}
        outs = 3 if op == "LSTM" else 2
        rnn(op, {"dir": "forward"}, outs=outs, **extra)
        rnn(op, {"dir": "bidirectional"}, "bidirectional", outs=outs, **extra)
        rnn(op, {"dir": "reverse"}, "reverse", outs=outs, **extra)
        rnn(op, {"dir": "forward", "batch": 2}, batch=2, outs=outs, **extra)
        rnn(op, {"dir": "forward", "init": "none"}, init=False, outs=1, **extra)
        rnn(op, {"dir": "forward", "bias": "no"}, bias=False, outs=outs, **extra)
    rnn("GRU", {"dir": "forward", "linear_before_reset": 0}, outs=2)
    # the dynamo exporter writes the (default) layout attribute explicitly
    rnn("LSTM", {"dir": "forward", "layout": 0}, outs=3, layout=0)
    rnn("GRU", {"dir": "forward", "layout": 0}, outs=2, layout=0, linear_before_reset=1)
    rnn("LSTM", {"dir": "bidirectional", "layout": 0, "input_forget": 0}, "bidirectional",
        outs=3, layout=0, input_forget=0)
    rnn("LSTM", {"dir": "forward", "Y_only": "yes"}, outs=1)


def misc_probes(c: Collector) -> None:
    """Ops added in late opsets and miscellany."""
    # Attention / RMSNormalization exist from opset 23 (rknn's onnx 1.18 knows them)
    _multi(c, "Attention", [("float32", [1, 4, 16, 32])] * 3, opset=23, parts={"opset": 23},
           rank=4)
    _single(c, "RMSNormalization", shape=[1, 16, 32], attrs={"axis": -1}, opset=23,
            const_inputs=[rand([32]) + 1], parts={"axis": -1, "opset": 23})
    _single(c, "Hardmax", shape=SHAPES[3], attrs={"axis": -1})
    _single(c, "IsNaN", rank=4, parts={})
    _single(c, "IsInf", rank=4, parts={})
    _multi(c, "BitShift", [("uint8", [4, 8]), ("uint8", [4, 8])], dtype="uint8",
           attrs={"direction": "LEFT"}, parts={"direction": "LEFT"})


# ------------------------------------------------------------------------------------------------
# patterns (fusion, prepasses)
# ------------------------------------------------------------------------------------------------


def _gelu_erf(gb: GraphBuilder, x: str, use_mul: bool = False) -> str:
    if use_mul:
        d = gb.node("Mul", [x, gb.const(np.float32(1 / math.sqrt(2)))], name="gelu_scale")
    else:
        d = gb.node("Div", [x, gb.const(np.float32(math.sqrt(2)))], name="gelu_div")
    e = gb.node("Erf", [d], name="gelu_erf")
    a = gb.node("Add", [e, gb.const(np.float32(1.0))], name="gelu_add")
    m = gb.node("Mul", [x, a], name="gelu_mul")
    return gb.node("Mul", [m, gb.const(np.float32(0.5))], name="gelu_mul2")


def _layernorm_decomposed(gb: GraphBuilder, x: str, dim: int, square: str = "Pow",
                          opset18: bool = False) -> str:
    def rmean(v: str, name: str) -> str:
        if opset18:
            return gb.node("ReduceMean", [v, gb.ints([-1])], name=name, keepdims=1)
        return gb.node("ReduceMean", [v], name=name, axes=[-1], keepdims=1)
    mu = rmean(x, "ln_mean")
    d = gb.node("Sub", [x, mu], name="ln_sub")
    if square == "Pow":
        sq = gb.node("Pow", [d, gb.const(np.float32(2.0))], name="ln_pow")
    else:
        sq = gb.node("Mul", [d, d], name="ln_sq")
    var = rmean(sq, "ln_var")
    ve = gb.node("Add", [var, gb.const(np.float32(1e-5))], name="ln_eps")
    sd = gb.node("Sqrt", [ve], name="ln_sqrt")
    n = gb.node("Div", [d, sd], name="ln_div")
    s = gb.node("Mul", [n, gb.const(rand([dim]) + 1)], name="ln_gamma")
    return gb.node("Add", [s, gb.const(rand([dim]))], name="ln_beta")


def pattern_probes(c: Collector) -> None:
    """Multi-node patterns: GELU, LayerNorm/RMSNorm decompositions, Conv/BN/activation fusion,
    MatMul+Add, HardSwish/SiLU/Mish decompositions, attention, shape subgraphs, constant
    folding, Identity/Dropout elimination, detection-head decode."""
    def P(probe_id: str, op: str, gb: GraphBuilder, note: str = "", kind: str = "pattern",
          focus: Sequence[str] | None = None, **kw: Any) -> None:
        c.add(probe_id, op, gb, kind=kind, note=note,
              focus=focus if focus is not None else [n.name for n in gb.nodes], **kw)

    # GELU
    for use_mul, tag in ((False, "div"), (True, "mul")):
        for shape in ([1, 16, 32], [1, 8, 16, 16], [4, 32]):
            gb = GraphBuilder()
            x = gb.input("x", "float32", shape)
            gb.output(_gelu_erf(gb, x, use_mul))
            P("pattern.gelu_erf.%s.f32.r%d" % (tag, len(shape)), "Erf", gb,
              "GELU as %s->Erf->Add->Mul->Mul" % ("Div" if tag == "div" else "Mul"))
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    h = gb.node("MatMul", [x, gb.weight([32, 64])], name="fc1")
    h = gb.node("Add", [h, gb.weight([64])], name="fc1_bias")
    g = _gelu_erf(gb, h)
    h = gb.node("MatMul", [g, gb.weight([64, 32])], name="fc2")
    gb.output(gb.node("Add", [h, gb.weight([32])], name="fc2_bias"))
    P("pattern.ffn_gelu_erf.f32.r3", "Erf", gb, "transformer FFN with erf-GELU")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    e = gb.node("Erf", [gb.node("Div", [x, gb.const(np.float32(1.4142135))])])
    gb.output(gb.node("Add", [e, gb.const(np.float32(1.0))]))
    P("pattern.gelu_erf_partial.f32.r3", "Erf", gb, "Div->Erf->Add only (incomplete GELU)")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    x3 = gb.node("Pow", [x, gb.const(np.float32(3.0))], name="gt_pow")
    t = gb.node("Mul", [x3, gb.const(np.float32(0.044715))], name="gt_mul_c")
    t = gb.node("Add", [x, t], name="gt_add")
    t = gb.node("Mul", [t, gb.const(np.float32(math.sqrt(2 / math.pi)))], name="gt_mul_s")
    t = gb.node("Tanh", [t], name="gt_tanh")
    t = gb.node("Add", [t, gb.const(np.float32(1.0))], name="gt_add1")
    t = gb.node("Mul", [x, t], name="gt_mul_x")
    gb.output(gb.node("Mul", [t, gb.const(np.float32(0.5))], name="gt_mul_half"))
    P("pattern.gelu_tanh.f32.r3", "Tanh", gb, "tanh-approximated GELU decomposition")
    # LayerNorm / RMSNorm decompositions
    for square, opset18 in (("Pow", False), ("Mul", False), ("Pow", True)):
        gb = GraphBuilder(18 if opset18 else 17)
        x = gb.input("x", "float32", [1, 16, 32])
        gb.output(_layernorm_decomposed(gb, x, 32, square, opset18))
        P("pattern.layernorm_decomposed.%s%s.f32.r3" % (square.lower(),
                                                        ".opset18" if opset18 else ""),
          "ReduceMean", gb, "LayerNorm as ReduceMean/Sub/%s/ReduceMean/Add/Sqrt/Div/Mul/Add"
          % square)
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    ms = gb.node("ReduceMean", [gb.node("Pow", [x, gb.const(np.float32(2.0))])], axes=[-1],
                 keepdims=1)
    r = gb.node("Reciprocal", [gb.node("Sqrt", [gb.node("Add", [ms, gb.const(np.float32(1e-6))])])])
    gb.output(gb.node("Mul", [gb.node("Mul", [x, r]), gb.const(rand([32]) + 1)]))
    P("pattern.rmsnorm_decomposed.f32.r3", "ReduceMean", gb, "RMSNorm decomposition")
    # Conv + BN / activations
    def conv_chain(tag: str, tail: Callable[[GraphBuilder, str], str], bn: bool = False,
                   note: str = "") -> None:
        gb = GraphBuilder()
        x = gb.input("x", "float32", [1, 8, 16, 16])
        y = gb.node("Conv", [x, gb.weight([16, 8, 3, 3]), gb.weight([16])], name="conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        if bn:
            y = gb.node("BatchNormalization", [y, gb.const(rand([16]) + 1), gb.weight([16]),
                                               gb.weight([16]), gb.const(np.abs(rand([16])) + 1)],
                        name="bn")
        gb.output(tail(gb, y))
        P("pattern.%s.f32.r4" % tag, "Conv", gb, note)

    conv_chain("conv_bn", lambda gb, y: y, bn=True, note="does BN leave its own row?")
    conv_chain("conv_bn_relu", lambda gb, y: gb.node("Relu", [y], name="relu"), bn=True)
    conv_chain("conv_relu", lambda gb, y: gb.node("Relu", [y], name="relu"))
    conv_chain("conv_relu6", lambda gb, y: gb.node(
        "Clip", [y, gb.const(np.float32(0)), gb.const(np.float32(6))], name="relu6"))
    conv_chain("conv_sigmoid", lambda gb, y: gb.node("Sigmoid", [y], name="sig"))
    conv_chain("conv_silu", lambda gb, y: gb.node("Mul", [y, gb.node("Sigmoid", [y], name="sig")],
                                                  name="silu_mul"))
    conv_chain("conv_bn_silu", lambda gb, y: gb.node(
        "Mul", [y, gb.node("Sigmoid", [y], name="sig")], name="silu_mul"), bn=True)
    conv_chain("conv_hardswish", lambda gb, y: gb.node("HardSwish", [y], name="hsw"))
    conv_chain("conv_leakyrelu", lambda gb, y: gb.node("LeakyRelu", [y], name="lrelu", alpha=0.1))
    conv_chain("conv_erf", lambda gb, y: gb.node("Erf", [y], name="erf"))

    def hswish_dec(gb: GraphBuilder, y: str) -> str:
        a = gb.node("Add", [y, gb.const(np.float32(3.0))], name="hs_add")
        cl = gb.node("Clip", [a, gb.const(np.float32(0)), gb.const(np.float32(6))], name="hs_clip")
        m = gb.node("Mul", [y, cl], name="hs_mul")
        return gb.node("Div", [m, gb.const(np.float32(6.0))], name="hs_div")
    conv_chain("conv_hardswish_decomposed", hswish_dec)

    def mish_dec(gb: GraphBuilder, y: str) -> str:
        t = gb.node("Tanh", [gb.node("Softplus", [y], name="sp")], name="tanh")
        return gb.node("Mul", [y, t], name="mish_mul")
    conv_chain("conv_mish_decomposed", mish_dec)

    def res_add(gb: GraphBuilder, y: str) -> str:
        return gb.node("Add", [y, gb.node("Conv", [y, gb.weight([16, 16, 1, 1])], name="conv2",
                                         kernel_shape=[1, 1])], name="res_add")
    conv_chain("conv_add", res_add)
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 8, 16, 16])
    y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3])], name="conv", kernel_shape=[3, 3],
                pads=[1, 1, 1, 1])
    gb.output(gb.node("Relu", [gb.node("Add", [y, x], name="res_add")], name="relu"))
    P("pattern.conv_add_relu.f32.r4", "Conv", gb)
    # BN after non-conv
    gb = GraphBuilder()
    x = gb.input("x", "float32", [4, 32])
    y = gb.node("Gemm", [x, gb.weight([16, 32]), gb.weight([16])], transB=1, name="fc")
    gb.output(gb.node("BatchNormalization", [y, gb.const(rand([16]) + 1), gb.weight([16]),
                                             gb.weight([16]), gb.const(np.abs(rand([16])) + 1)],
                      name="bn"))
    P("pattern.gemm_bn1d.f32.r2", "BatchNormalization", gb)
    # MatMul + Add
    for act in (None, "Relu"):
        gb = GraphBuilder()
        x = gb.input("x", "float32", [1, 16, 32])
        y = gb.node("MatMul", [x, gb.weight([32, 64])], name="mm")
        y = gb.node("Add", [y, gb.weight([64])], name="bias")
        if act:
            y = gb.node(act, [y], name="act")
        gb.output(y)
        P("pattern.matmul_add%s.f32.r3" % ("_relu" if act else ""), "MatMul", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    wt = gb.node("Transpose", [gb.weight([64, 32])], perm=[1, 0], name="w_t")
    gb.output(gb.node("MatMul", [x, wt], name="mm"))
    P("prepass.const_transpose_weight.f32.r3", "Transpose", gb,
      "constant weight transposed in-graph (folding)", kind="prepass")
    # constant folding
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    k = gb.node("Mul", [gb.node("Add", [gb.const(np.float32(1.0)), gb.const(np.float32(2.0))],
                                name="c_add"), gb.const(np.float32(3.0))], name="c_mul")
    k = gb.node("Sqrt", [k], name="c_sqrt")
    gb.output(gb.node("Mul", [x, k], name="x_mul"))
    P("prepass.fold_constants.f32.r4", "Mul", gb, "constant subgraph Add/Mul/Sqrt", kind="prepass")
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    cst = gb.node("Constant", [], value=numpy_helper.from_array(np.asarray(2.0, np.float32)),
                  name="const_node")
    gb.output(gb.node("Mul", [x, cst], name="x_mul"))
    P("prepass.constant_node.f32.r4", "Constant", gb, "Constant node operand", kind="prepass")
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    e = gb.node("Erf", [gb.const(rand([1, 8, 1, 1]))], name="c_erf")
    gb.output(gb.node("Mul", [x, e], name="x_mul"))
    P("prepass.fold_constant_cpu_op.f32.r4", "Erf", gb, "Erf on a constant (CPU op) is folded?",
      kind="prepass")
    # Identity / Dropout in the middle
    for op in ("Identity", "Dropout"):
        gb = GraphBuilder()
        x = gb.input("x", "float32", SHAPES[4])
        y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3])], name="conv", kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1])
        y = gb.node(op, [y], name=op.lower())
        gb.output(gb.node("Relu", [y], name="relu"))
        P("prepass.%s_middle.f32.r4" % op.lower(), op, gb, kind="prepass")
    # shape subgraphs (TorchScript style flatten / reshape by computed shape)
    for sym in (False, True):
        gb = GraphBuilder()
        x = gb.input("x", "float32", ["N", 8, 16, 16] if sym else SHAPES[4])
        s = gb.node("Shape", [x], name="shape")
        b = gb.node("Gather", [s, gb.const(np.int64(0))], name="gather", axis=0)
        u = gb.node("Unsqueeze", [b, gb.ints([0])], name="unsqueeze")
        cc = gb.node("Concat", [u, gb.ints([-1])], name="concat", axis=0)
        gb.output(gb.node("Reshape", [x, cc], name="reshape"))
        P("prepass.shape_gather_reshape%s.f32.r4" % (".dynbatch" if sym else ""), "Shape", gb,
          "Shape->Gather->Unsqueeze->Concat->Reshape", kind="prepass" if not sym else "dynamic")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 32])
    s = gb.node("Shape", [x], name="shape")
    hw = gb.node("Slice", [s, gb.ints([1]), gb.ints([2])], name="slice")
    f = gb.node("Cast", [hw], name="cast", to=TensorProto.FLOAT)
    sc = gb.node("Sqrt", [f], name="sqrt")
    gb.output(gb.node("Div", [x, sc], name="div"))
    P("prepass.shape_cast_arith.f32.r3", "Shape", gb, "Shape->Slice->Cast->Sqrt feeding Div",
      kind="prepass")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 8, 16, 16])
    s = gb.node("Shape", [x], name="shape")
    hw = gb.node("Slice", [s, gb.ints([2]), gb.ints([4])], name="slice")
    hw2 = gb.node("Mul", [hw, gb.ints([2, 2])], name="mul")
    sz = gb.node("Concat", [gb.node("Slice", [s, gb.ints([0]), gb.ints([2])], name="slice_nc"),
                            hw2], name="concat", axis=0)
    gb.output(gb.node("Resize", [x, "", "", sz], name="resize", mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor"))
    P("prepass.shape_resize_sizes.f32.r4", "Resize", gb, "Resize sizes computed from Shape",
      kind="prepass")
    # attention
    def attention(tag: str, mask: str | None = None, heads: int = 4, dim: int = 64,
                  seq: int = 32, scale_split: bool = False, opset: int = 17) -> None:
        gb = GraphBuilder(opset)
        x = gb.input("x", "float32", [1, seq, dim])
        hd = dim // heads

        def proj(name: str) -> str:
            y = gb.node("MatMul", [x, gb.weight([dim, dim])], name=name + "_mm")
            y = gb.node("Add", [y, gb.weight([dim])], name=name + "_bias")
            y = gb.node("Reshape", [y, gb.ints([1, seq, heads, hd])], name=name + "_rs")
            return gb.node("Transpose", [y], perm=[0, 2, 1, 3], name=name + "_tp")
        q, k, v = proj("q"), proj("k"), proj("v")
        kt = gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")
        if scale_split:
            s = np.float32(hd ** -0.25)
            q = gb.node("Mul", [q, gb.const(s)], name="q_scale")
            kt = gb.node("Mul", [kt, gb.const(s)], name="k_scale")
            sc = gb.node("MatMul", [q, kt], name="qk")
        else:
            sc = gb.node("MatMul", [q, kt], name="qk")
            sc = gb.node("Div", [sc, gb.const(np.float32(math.sqrt(hd)))], name="scale")
        if mask == "add":
            sc = gb.node("Add", [sc, gb.const(np.triu(np.full([1, 1, seq, seq], -1e4,
                                                              np.float32), 1))], name="mask_add")
        elif mask == "where":
            cond = gb.const(np.triu(np.ones([1, 1, seq, seq], bool), 1))
            sc = gb.node("Where", [cond, gb.const(np.float32(-np.inf)), sc], name="mask_where")
        p = gb.node("Softmax", [sc], axis=-1, name="softmax")
        o = gb.node("MatMul", [p, v], name="pv")
        o = gb.node("Transpose", [o], perm=[0, 2, 1, 3], name="o_tp")
        o = gb.node("Reshape", [o, gb.ints([1, seq, dim])], name="o_rs")
        o = gb.node("MatMul", [o, gb.weight([dim, dim])], name="o_mm")
        gb.output(gb.node("Add", [o, gb.weight([dim])], name="o_bias"))
        P("pattern.attention.%s.f32.r3" % tag, "MatMul", gb, "multi-head self-attention block")

    attention("mha")
    attention("mha_addmask", mask="add")
    attention("mha_wheremask", mask="where")
    attention("mha_scale_split", scale_split=True, opset=18)
    attention("mha_vit", heads=12, dim=768, seq=197)
    gb = GraphBuilder()
    q = gb.input("q", "float32", [1, 4, 32, 16])
    k = gb.input("k", "float32", [1, 4, 32, 16])
    v = gb.input("v", "float32", [1, 4, 32, 16])
    s = gb.node("MatMul", [q, gb.node("Transpose", [k], perm=[0, 1, 3, 2], name="k_t")],
                name="qk")
    s = gb.node("Mul", [s, gb.const(np.float32(0.25))], name="scale")
    gb.output(gb.node("MatMul", [gb.node("Softmax", [s], axis=-1, name="softmax"), v], name="pv"))
    P("pattern.sdpa.f32.r4", "MatMul", gb, "bare scaled dot-product attention on inputs")
    # misc layout patterns
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 16, 16, 16])
    y = gb.node("Reshape", [x, gb.ints([1, 2, 8, 16, 16])], name="cs_rs1")
    y = gb.node("Transpose", [y], perm=[0, 2, 1, 3, 4], name="cs_tp")
    gb.output(gb.node("Reshape", [y, gb.ints([1, 16, 16, 16])], name="cs_rs2"))
    P("pattern.channel_shuffle.f32.r4", "Transpose", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 32, 8, 8])
    y = gb.node("Reshape", [x, gb.ints([1, 8, 2, 2, 8, 8])], name="ps_rs1")
    y = gb.node("Transpose", [y], perm=[0, 1, 4, 2, 5, 3], name="ps_tp")
    gb.output(gb.node("Reshape", [y, gb.ints([1, 8, 16, 16])], name="ps_rs2"))
    P("pattern.pixel_shuffle_reshape.f32.r4", "Transpose", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 3, 32, 32])
    big = 2 ** 62
    parts = []
    for i, (h0, w0) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
        parts.append(gb.node("Slice", [x, gb.ints([h0, w0]), gb.ints([big, big]), gb.ints([2, 3]),
                                       gb.ints([2, 2])], name="focus_slice%d" % i))
    gb.output(gb.node("Concat", parts, axis=1, name="focus_cat"))
    P("pattern.focus_space_to_depth.f32.r4", "Slice", gb, "YOLOv5 Focus, one 2-axis Slice "
      "per quadrant")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 3, 32, 32])
    rows = [gb.node("Slice", [x, gb.ints([r]), gb.ints([big]), gb.ints([2]), gb.ints([2])],
                    name="focus_rows%d" % r) for r in (0, 1)]
    quads = []
    for i, (r, col) in enumerate(((0, 0), (1, 0), (0, 1), (1, 1))):
        quads.append(gb.node("Slice", [rows[r], gb.ints([col]), gb.ints([big]), gb.ints([3]),
                                       gb.ints([2])], name="focus_q%d" % i))
    gb.output(gb.node("Concat", quads, axis=1, name="focus_cat"))
    P("pattern.focus_space_to_depth_torch.f32.r4", "Slice", gb,
      "YOLOv5 Focus as torch exports it: row slices, then column slices, then Concat")
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 8, 16, 16])
    skip = gb.input("skip", "float32", [1, 8, 32, 32])
    up = gb.node("Resize", [x, "", gb.const(np.asarray([1, 1, 2, 2], np.float32))], name="up",
                 mode="nearest", coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    gb.output(gb.node("Concat", [up, skip], axis=1, name="cat"))
    P("pattern.fpn_upsample_concat.f32.r4", "Resize", gb)
    # detection decode head
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 255, 8, 8])
    y = gb.node("Reshape", [x, gb.ints([1, 3, 85, 8, 8])], name="det_rs")
    y = gb.node("Transpose", [y], perm=[0, 1, 3, 4, 2], name="det_tp")
    y = gb.node("Sigmoid", [y], name="det_sig")
    xy, wh, conf = gb.node("Split", [y, gb.ints([2, 2, 81])], n_out=3, axis=4, name="det_split")
    xy = gb.node("Add", [gb.node("Mul", [xy, gb.const(np.float32(2.0))], name="xy_mul"),
                         gb.const(rand([1, 1, 8, 8, 2]))], name="xy_add")
    wh = gb.node("Mul", [gb.node("Pow", [gb.node("Mul", [wh, gb.const(np.float32(2.0))],
                                                 name="wh_mul"),
                                         gb.const(np.float32(2.0))], name="wh_pow"),
                         gb.const(rand([1, 3, 1, 1, 2]))], name="wh_anchor")
    y = gb.node("Concat", [xy, wh, conf], axis=4, name="det_cat")
    gb.output(gb.node("Reshape", [y, gb.ints([1, -1, 85])], name="det_out"))
    P("pattern.yolo_decode.f32.r4", "Sigmoid", gb, "YOLO-style decode head")
    # masked fill via comparisons
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    cond = gb.node("Greater", [x, gb.const(np.float32(0.0))], name="gt")
    gb.output(gb.node("Where", [cond, x, gb.const(np.float32(0.0))], name="where"))
    P("pattern.greater_where.f32.r4", "Where", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    cond = gb.node("Equal", [x, gb.const(np.float32(0.0))], name="eq")
    gb.output(gb.node("Cast", [gb.node("Not", [cond], name="not")], name="cast",
                      to=TensorProto.FLOAT))
    P("pattern.equal_not_cast.f32.r4", "Equal", gb)
    gb = GraphBuilder()
    x = gb.input("x", "float32", SHAPES[4])
    g = gb.node("Gather", [x, gb.const(np.int64(0))], axis=1, name="gather")
    gb.output(gb.node("Relu", [g], name="relu"))
    P("pattern.gather_scalar_relu.f32.r4", "Gather", gb)
    # Softmax with the exported dims of a classifier head
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, 1280, 7, 7])
    y = gb.node("GlobalAveragePool", [x], name="gap")
    y = gb.node("Flatten", [y], axis=1, name="flatten")
    y = gb.node("Gemm", [y, gb.weight([10, 1280]), gb.weight([10])], transB=1, name="fc")
    gb.output(gb.node("Softmax", [y], axis=1, name="softmax"))
    P("pattern.classifier_head.f32.r4", "Gemm", gb)


def opset_probes(c: Collector) -> None:
    """The same small Conv/Relu/Add/Resize model declared with opsets 7..23."""
    for opset in range(3, 24):
        gb = GraphBuilder(opset)
        x = gb.input("x", "float32", SHAPES[4])
        y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3]), gb.weight([8])], name="conv",
                    kernel_shape=[3, 3], pads=[1, 1, 1, 1])
        y = gb.node("Relu", [y], name="relu")
        gb.output(gb.node("Add", [y, x], name="add"))
        c.add("opset.%d.conv_relu_add" % opset, "Conv", gb, kind="opset",
              attributes={"opset": opset}, focus=[n.name for n in gb.nodes])
    for opset in (13, 17, 18, 19, 20, 21, 22):
        gb = GraphBuilder(opset)
        x = gb.input("x", "float32", [1, 16, 32])
        gb.output(gb.node("Softmax", [gb.node("MatMul", [x, gb.weight([32, 32])], name="mm")],
                          axis=-1, name="softmax"))
        c.add("opset.%d.matmul_softmax" % opset, "MatMul", gb, kind="opset",
              attributes={"opset": opset}, focus=[n.name for n in gb.nodes])


def dynamic_probes(c: Collector) -> None:
    """Symbolic input dims with and without ``dynamic_input`` / fixed ``input_size_list``."""
    def conv_model(shape: list[Any]) -> GraphBuilder:
        gb = GraphBuilder()
        x = gb.input("x", "float32", shape)
        y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3])], name="conv", kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1])
        gb.output(gb.node("Relu", [y], name="relu"))
        return gb

    cases = [("batch", ["N", 8, 16, 16], {}, {}),
             ("batch.fixed_by_load", ["N", 8, 16, 16], {},
              {"inputs": ["x"], "input_size_list": [[1, 8, 16, 16]]}),
             ("batch.dynamic_input", ["N", 8, 16, 16],
              {"dynamic_input": [[[1, 8, 16, 16]], [[2, 8, 16, 16]], [[4, 8, 16, 16]]]}, {}),
             ("hw", [1, 8, "H", "W"], {}, {}),
             ("hw.dynamic_input", [1, 8, "H", "W"],
              {"dynamic_input": [[[1, 8, 16, 16]], [[1, 8, 32, 32]]]}, {}),
             ("unknown_dim", [1, 8, None, 16], {}, {}),
             ("static.dynamic_input", [1, 8, 16, 16],
              {"dynamic_input": [[[1, 8, 16, 16]], [[1, 8, 32, 32]]]}, {})]
    for tag, shape, cfg, load in cases:
        gb = conv_model(shape)
        c.add("dynamic.%s.conv_relu" % tag, "Conv", gb, kind="dynamic", config=cfg, load=load,
              attributes={"input_shape": [s if s is not None else "?" for s in shape]},
              focus=[n.name for n in gb.nodes])
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, "S", 32])
    y = gb.node("MatMul", [x, gb.weight([32, 32])], name="mm")
    gb.output(gb.node("Softmax", [y], axis=-1, name="softmax"))
    c.add("dynamic.seq.matmul_softmax", "MatMul", gb, kind="dynamic",
          attributes={"input_shape": [1, "S", 32]}, focus=["mm", "softmax"])
    gb = GraphBuilder()
    x = gb.input("x", "float32", [1, "S", 32])
    y = gb.node("MatMul", [x, gb.weight([32, 32])], name="mm")
    gb.output(gb.node("Softmax", [y], axis=-1, name="softmax"))
    c.add("dynamic.seq.dynamic_input.matmul_softmax", "MatMul", gb, kind="dynamic",
          config={"dynamic_input": [[[1, 16, 32]], [[1, 32, 32]]]},
          attributes={"input_shape": [1, "S", 32]}, focus=["mm", "softmax"])


def context_probes(c: Collector) -> None:
    """Ops between a Conv and a Conv, to check that single-op placement (next to the graph
    inputs/outputs) carries over to the middle of a network."""
    def ctx(tag: str, op: str, body: Callable[[GraphBuilder, str], str], cin: int = 8,
            hw: int = 16, cout_after: int | None = None, opset: int = DEFAULT_OPSET) -> None:
        gb = GraphBuilder(opset)
        x = gb.input("x", "float32", [1, 8, hw, hw])
        y = gb.node("Conv", [x, gb.weight([cin, 8, 3, 3])], name="pre_conv", kernel_shape=[3, 3],
                    pads=[1, 1, 1, 1])
        before = len(gb.nodes)
        z = body(gb, y)
        focus = [n.name for n in gb.nodes[before:]]
        if cout_after:
            z = gb.node("Conv", [z, gb.weight([8, cout_after, 1, 1])], name="post_conv",
                        kernel_shape=[1, 1])
        else:
            z = gb.node("Relu", [z], name="post_relu")
        gb.output(z)
        c.add("ctx.%s" % tag, op, gb, kind="context", focus=focus,
              note="%s between a Conv and a consumer" % op)

    f32 = TensorProto.FLOAT
    ctx("Cast.to=float32.f32.r4", "Cast", lambda gb, y: gb.node("Cast", [y], to=f32))
    ctx("Cast.to=float16.f32.r4", "Cast",
        lambda gb, y: gb.node("Cast", [gb.node("Cast", [y], to=TensorProto.FLOAT16)], to=f32))
    ctx("Cast.to=float32.bool.r4", "Cast", lambda gb, y: gb.node(
        "Cast", [gb.node("Greater", [y, gb.const(np.float32(0))])], to=f32))
    ctx("Max.b=const_scalar.f32.r4", "Max", lambda gb, y: gb.node("Max", [y, gb.const(
        np.float32(0.1))]))
    ctx("Max.b=const_channel.f32.r4", "Max", lambda gb, y: gb.node("Max", [y, gb.const(
        rand([1, 8, 1, 1]))]))
    ctx("Min.b=const_channel.f32.r4", "Min", lambda gb, y: gb.node("Min", [y, gb.const(
        rand([1, 8, 1, 1]))]))
    for op in ("Exp", "Log", "Erf", "Sqrt", "Reciprocal", "Identity", "Floor", "Sin", "Neg",
               "Softsign", "Mish", "Selu", "Abs"):
        ctx("%s.f32.r4" % op, op, lambda gb, y, op=op: gb.node(op, [y]),
            opset=18 if op == "Mish" else DEFAULT_OPSET)
    ctx("Softmax.axis=1.f32.r4", "Softmax", lambda gb, y: gb.node("Softmax", [y], axis=1))
    ctx("Slice.axis=2.step=2.f32.r4", "Slice", lambda gb, y: gb.node(
        "Slice", [y, gb.ints([0]), gb.ints([16]), gb.ints([2]), gb.ints([2])]), cout_after=8)
    ctx("Tile.repeats=1_1_2_2.f32.r4", "Tile",
        lambda gb, y: gb.node("Tile", [y, gb.ints([1, 1, 2, 2])]))
    ctx("SpaceToDepth.blocksize=2.f32.r4", "SpaceToDepth",
        lambda gb, y: gb.node("SpaceToDepth", [y], blocksize=2))
    ctx("ReduceMax.axes=1.keepdims=1.f32.r4", "ReduceMax",
        lambda gb, y: gb.node("ReduceMax", [y], axes=[1], keepdims=1))
    ctx("ReduceMean.axes=1.keepdims=1.f32.r4", "ReduceMean",
        lambda gb, y: gb.node("ReduceMean", [y], axes=[1], keepdims=1))
    ctx("Resize.mode=linear.ctm=half_pixel.scale=1.5.f32.r4", "Resize", lambda gb, y: gb.node(
        "Resize", [y, "", gb.const(np.asarray([1, 1, 1.5, 1.5], np.float32))], mode="linear",
        coordinate_transformation_mode="half_pixel"))
    ctx("Resize.mode=linear.ctm=align_corners.scale=2.f32.r4", "Resize", lambda gb, y: gb.node(
        "Resize", [y, "", gb.const(np.asarray([1, 1, 2, 2], np.float32))], mode="linear",
        coordinate_transformation_mode="align_corners"))
    ctx("AveragePool.k=3.s=1.p=1.f32.r4", "AveragePool", lambda gb, y: gb.node(
        "AveragePool", [y], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
    ctx("Transpose.perm=0_2_3_1.f32.r4", "Transpose", lambda gb, y: gb.node(
        "Transpose", [gb.node("Transpose", [y], perm=[0, 2, 3, 1])], perm=[0, 3, 1, 2]))
    ctx("Equal.b=const_scalar.f32.r4", "Equal", lambda gb, y: gb.node("Where", [gb.node(
        "Equal", [y, gb.const(np.float32(0))]), gb.const(np.float32(1)), y]))
    ctx("Pad.mode=reflect.f32.r4", "Pad", lambda gb, y: gb.node(
        "Pad", [y, gb.ints([0, 0, 1, 1, 0, 0, 1, 1])], mode="reflect"))
    ctx("LogSoftmax.axis=1.f32.r4", "LogSoftmax", lambda gb, y: gb.node("LogSoftmax", [y],
                                                                        axis=1))
    ctx("GridSample.f32.r4", "GridSample", lambda gb, y: gb.node(
        "GridSample", [y, gb.const((rng().random([1, 16, 16, 2]) * 2 - 1).astype(np.float32))]))
    ctx("TopK.axis=1.k=4.f32.r4", "TopK", lambda gb, y: gb.node(
        "TopK", [y, gb.ints([4])], n_out=2, axis=1)[0], cout_after=4)
    ctx("Expand.to=batch2.f32.r4", "Expand", lambda gb, y: gb.node(
        "Expand", [y, gb.ints([2, 8, 16, 16])]))


def sweep_probes(c: Collector) -> None:
    """Size/attribute sweeps around thresholds seen in the single-op probes."""
    for w in (1024, 2048, 2049, 3072, 4095, 4096, 8192):
        _single(c, "Softmax", shape=[1, 1, 4, w], attrs={"axis": -1},
                parts={"axis": -1, "len": w})
    for w in (1024, 2048, 4096, 8192):
        _single(c, "Softmax", shape=[1, 16, w], attrs={"axis": -1},
                parts={"axis": -1, "len": w})
    for shape in ([1, 1, 64, 4096], [1, 4, 16, 4096], [1, 1, 256, 4096], [1, 4, 64, 1024],
                  [1, 8, 512, 512], [1, 16, 256, 256], [1, 4, 256, 1024], [1, 2, 64, 4096],
                  [1, 1, 64, 1024], [1, 1, 65, 1024], [1, 1, 4096, 32], [1, 1, 256, 256],
                  [1, 1, 256, 257], [1, 512, 512], [1, 4, 4096, 16]):
        _single(c, "Softmax", shape=shape, attrs={"axis": -1},
                parts={"axis": -1, "shape": "x".join(str(d) for d in shape[1:])})
    for ch in (2048, 4096, 8192, 16384):
        _single(c, "Softmax", shape=[1, ch, 2, 2], attrs={"axis": 1},
                parts={"axis": 1, "len": ch})
    for shape, axis in (([1, 8, 16, 16], 2), ([1, 8, 16, 16], 3), ([1, 4, 4, 8, 8], -1),
                        ([4, 32], 0), ([1, 16, 32], 0), ([1, 16, 4096], -1)):
        nshape = shape[axis:] if axis >= 0 else shape[axis:]
        _single(c, "LayerNormalization", shape=shape, attrs={"axis": axis, "epsilon": 1e-5},
                const_inputs=[rand(nshape) + 1, rand(nshape)],
                parts={"axis": axis}, extra="len%d" % shape[-1] if shape[-1] == 4096 else None)
    for mode, ctm, scales in (("linear", "half_pixel", 0.25), ("linear", "half_pixel", 2.5),
                              ("linear", "half_pixel", 1.25), ("linear", "half_pixel", 1 / 3),
                              ("linear", "pytorch_half_pixel", 0.25),
                              ("nearest", "asymmetric", 0.25), ("nearest", "asymmetric", 2.5),
                              ("nearest", "asymmetric", 1 / 3)):
        gb = GraphBuilder()
        x = gb.input("x", "float32", [1, 8, 24, 24])
        nm = {"nearest_mode": "floor"} if mode == "nearest" else {}
        gb.output(gb.node("Resize", [x, "", gb.const(np.asarray([1, 1, scales, scales],
                                                                 np.float32))],
                          mode=mode, coordinate_transformation_mode=ctm, **nm))
        c.add(pid("Resize", {"mode": mode, "ctm": ctm, "scale": round(scales, 3)}, "float32", 4),
              "Resize", gb, attributes=dict(mode=mode, coordinate_transformation_mode=ctm,
                                            scales=[1, 1, scales, scales], **nm))
    for b, tag in ((np.float32(0.5).reshape([1]), "const_1elem"), (rand([16]), "const_lastdim"),
                   (np.full([1, 1, 1, 1], 0.5, np.float32), "const_1111"),
                   (rand([1, 8, 16, 1]), "const_c_h")):
        for op in ("Max", "Min"):
            _multi(c, op, [("float32", SHAPES[4]), ("float32", [])], consts={1: b},
                   parts={"b": tag})
    _multi(c, "Max", [("float32", [1, 8, 16, 16]), ("float32", [1, 8, 16, 16])],
           parts={"b": "same"}, extra="vs_r3", rank=4, probe_id="Max.b=same.f32.r4.again")
    for rep in ([1, 1, 1, 2], [1, 1, 2, 1], [1, 3, 1, 1], [1, 2, 2, 1]):
        _single(c, "Tile", shape=SHAPES[4], const_inputs=[np.asarray(rep, np.int64)],
                parts={"repeats": rep})
    for shape, target in (([1, 1, 16, 16], [1, 8, 16, 16]), ([1, 8, 1, 16], [1, 8, 16, 16]),
                          ([1, 8, 16, 1], [1, 8, 16, 16])):
        _single(c, "Expand", shape=shape, const_inputs=[np.asarray(target, np.int64)],
                parts={"from": shape, "to": target}, extra="sweep")
    # other integer / bool dtypes through common data-movement ops
    for dt in ("int32", "bool"):
        _single(c, "Reshape", shape=[4, 32], dtype=dt,
                const_inputs=[np.asarray([1, 4, 4, 8], np.int64)], parts={"case": "r2_to_r4"})
        _single(c, "Transpose", shape=SHAPES[4], dtype=dt, attrs={"perm": [0, 2, 3, 1]})
        _multi(c, "Concat", [(dt, SHAPES[4])] * 2, dtype=dt, attrs={"axis": 1},
               parts={"axis": 1, "n": 2})
        _single(c, "Slice", shape=SHAPES[4], dtype=dt,
                const_inputs=[np.asarray([0], np.int64), np.asarray([4], np.int64),
                              np.asarray([1], np.int64)], parts={"axis": 1, "step": 1})
        _single(c, "Unsqueeze", shape=[4, 32], dtype=dt, const_inputs=[np.asarray([0], np.int64)],
                parts={"axes": [0]})
    _multi(c, "Mul", [("int32", SHAPES[4])] * 2, dtype="int32", parts={"b": "same"})
    _multi(c, "Where", [("bool", SHAPES[4]), ("int32", SHAPES[4]), ("int32", SHAPES[4])],
           dtype="int32", parts={"xy": "dyn"})
    _multi(c, "Gather", [("int32", SHAPES[3]), ("int64", [2])], dtype="int32",
           consts={1: np.asarray([0, 2], np.int64)}, attrs={"axis": 1},
           parts={"axis": 1, "idx": "const_vec"})
    _multi(c, "Gather", [("int64", SHAPES[3]), ("int64", [2])], dtype="int64",
           consts={1: np.asarray([0, 2], np.int64)}, attrs={"axis": 1},
           parts={"axis": 1, "idx": "const_vec"})


def build_probes(select: Iterable[str] | None = None) -> list[Probe]:
    """Build every probe model (optionally only those whose id starts with one of ``select``;
    the others are never built). The random constants are drawn afresh for each call, so a probe
    is the same model whichever probes are selected and however often this is called."""
    reset_rng()
    c = Collector(select)
    for fam in (unary_probes, binary_probes, cast_probes, matmul_probes, conv_probes,
                norm_probes, reduce_probes, pool_probes, pad_probes, resize_probes, shape_probes,
                index_probes, rnn_probes, misc_probes, pattern_probes, opset_probes,
                dynamic_probes, context_probes, sweep_probes):
        fam(c)
    return c.probes
