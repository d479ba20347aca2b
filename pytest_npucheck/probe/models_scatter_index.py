"""ScatterND with index tensors of rank 6 (issue 22). Ids start with ``q.``.

A TorchScript export of a hybrid attention model (``hf_bailing_hybrid``) writes 64 ScatterNDs into
rank-5 data with constant rank-6 indices (1, 32, 1, 1, 1, 5); the QNN tables' generic limit of 5
dimensions on every input called them CPU, and onnxruntime-qnn ran them on the NPU.
``scatternd_rank6_extra`` places ScatterND on rank-5 data by index rank (5 or 6), constant or
run-time indices.

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (label, index lead shape (the rank-5 point indices: lead + [5]), indices constant)
SCATTER = (
    ("idx_r6.const", [1, 4, 1, 1, 1], True),
    ("idx_r6.input", [1, 4, 1, 1, 1], False),
    ("idx_r5.const", [1, 4, 1, 1], True),
    ("idx_r2.const", [4], True),
)


def _scatter(lead: list[int], const: bool) -> GraphBuilder:
    gb = GraphBuilder(17)
    data = gb.node("Relu", [gb.input("x", "float32", [1, 4, 1, 8, 8])], name="pre_relu")
    pts = np.zeros(lead + [5], np.int64)
    pts[..., 1] = np.arange(4).reshape([4 if d == 4 else 1 for d in lead])  # one point per head
    pts[..., 3] = 2
    pts[..., 4] = 5
    idx = gb.const(pts, name="idx") if const else gb.input("idx", "int64", lead + [5])
    upd = gb.node("Relu", [gb.input("u", "float32", lead)], name="pre_upd")
    y = gb.node("ScatterND", [data, idx, upd], name="focus_scatter")
    gb.output(gb.node("Add", [y, gb.const(np.float32(1.0))], name="post_add"))
    return gb


def scatternd_rank6_extra(c: Collector) -> None:
    """ScatterND on rank-5 data with rank-5/6 (and 2) indices, constant or not (SCATTER)."""
    for label, lead, const in SCATTER:
        c.add("q.ScatterND.ctx=index.%s.f32.r5" % label, "ScatterND", _scatter(lead, const), kind="context",
              focus=["focus_scatter"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [scatternd_rank6_extra]
