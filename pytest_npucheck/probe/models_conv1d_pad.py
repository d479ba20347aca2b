"""A 1-D Conv padded by ``auto_pad`` on RKNN (issue 22, LASR).

LASR's Conformer convolution module ends in a depthwise ``Conv1d(kernel 32, padding="same")``, exported by
TorchScript as ``Conv(auto_pad=SAME_UPPER)`` on a rank-3 input. rknn-toolkit2 2.5.0 turns a 1-D Conv into a 2-D
one; with ``auto_pad`` SAME_* its build fails (ONNX Runtime refuses "both 'auto_pad' and 'pads'" when
fold_constant runs the rewritten graph; in LASR a KeyError after seperate_large_kernel_conv). The family varies
the padding (SAME_UPPER, SAME_LOWER, VALID, the same padding as explicit pads), the kernel (3, 32), the groups
(1, depthwise) and the rank (3; a rank-4 (1, k) Conv as the control).

Ids ``x.Conv.ctx=pad1d.*``; listed in FAMILIES.
"""

from __future__ import annotations

from typing import Callable

from pytest_npucheck.probe.builder import Collector, GraphBuilder, rand

C, L = 32, 29


def _conv(pad: str, kernel: int, depthwise: bool, rank: int) -> GraphBuilder:
    """x -> Relu -> focus_conv (auto_pad ``pad`` or explicit pads) -> Relu."""
    gb = GraphBuilder(17)
    shape = [1, C, L] if rank == 3 else [1, C, 1, L]
    x = gb.node("Relu", [gb.input("x", "float32", shape)], name="pre_relu")
    k = [kernel] if rank == 3 else [1, kernel]
    group = C if depthwise else 1
    attrs: dict = {"kernel_shape": k, "group": group}
    if pad == "explicit":
        lo, hi = (kernel - 1) // 2, kernel - 1 - (kernel - 1) // 2
        attrs["pads"] = [lo, hi] if rank == 3 else [0, lo, 0, hi]
    else:
        attrs["auto_pad"] = pad
    y = gb.node("Conv", [x, gb.const(rand([C, C // group] + k))], name="focus_conv", **attrs)
    gb.output(gb.node("Relu", [y], name="post_relu"))
    return gb


def conv1d_pad_extra(c: Collector) -> None:
    """Conv1d with auto_pad SAME_UPPER / SAME_LOWER / VALID / explicit pads; a rank-4 control."""
    for rank in (3, 4):
        for kernel in (3, 32):
            for depthwise in (True, False):
                pads = ("SAME_UPPER", "SAME_LOWER", "VALID", "explicit") if rank == 3 else ("SAME_UPPER",)
                if kernel > L:  # VALID with a kernel longer than the input is no model
                    pads = tuple(p for p in pads if p != "VALID")
                for pad in pads:
                    c.add("x.Conv.ctx=pad1d.%s.k=%d.%s.f32.r%d" % (pad.lower(), kernel, "dw" if depthwise else "g1",
                                                                 rank),
                          "Conv", _conv(pad, kernel, depthwise, rank), kind="context", focus=["focus_conv"])


FAMILIES: list[Callable[[Collector], None]] = [conv1d_pad_extra]
