"""MatMuls with a very wide output, as a vocabulary projection writes them (issue 22). Ids start with ``q.``.

A TorchScript export of FSMT (its default 42,024-word target vocabulary) failed QNN graph
finalisation with QNN_COMMON_ERROR_MEM_ALLOC, the whole session lost; cut after its last MatMul
(hidden 32 -> 42,024 logits) the graph built. ``wide_matmul_extra`` places (1, T, K) x (K, N)
MatMuls with a constant weight by output width N, rows T and depth K, to find the general form
(a limit on N, on the weight's size or on the output's size). On QNN 2.51.0 it is none of these:
HTP v73 failed to finalize only for T=8, K=32 and N in 42,000..42,032 (40,000, 45,000, 65,536 and
the same N with T=1 or 4, or K=8 or 16, built), and v68 built every probe: a narrow band the
tables cannot state as a rule yet (the v73 table's self-check lists these probes as disagreements).

Built with the Collector of probe/builder.py; listed in QNN_FAMILIES, which toolchains/qnn/probe.extra_probes runs.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from pytest_npucheck.probe.builder import Collector, GraphBuilder

#: (T, K, N)
WIDE = (
    (8, 32, 16384), (8, 32, 32000), (8, 32, 32768), (8, 32, 32769), (8, 32, 42024), (8, 32, 65536),
    (1, 32, 42024), (8, 8, 42024), (8, 64, 32768), (64, 32, 16384), (8, 128, 16384),
    (8, 32, 40000), (8, 32, 42000), (8, 32, 42016), (8, 32, 42032), (8, 32, 45000), (8, 32, 50257),
    (8, 32, 60000), (8, 16, 42024), (4, 32, 42024), (8, 32, 36000),
)


def _wide(t: int, k: int, n: int) -> GraphBuilder:
    gb = GraphBuilder(17)
    x = gb.node("Relu", [gb.input("x", "float32", [1, t, k])], name="pre_relu")
    w = gb.const((np.random.default_rng(n + k).standard_normal((k, n)) * 0.05).astype(np.float32), name="w")
    gb.output(gb.node("MatMul", [x, w], name="focus_matmul"))
    return gb


def wide_matmul_extra(c: Collector) -> None:
    """(1, T, K) x (K, N) MatMuls with a constant weight, N up to 65,536 (WIDE)."""
    for t, k, n in WIDE:
        c.add("q.MatMul.ctx=wide.t=%d.k=%d.n=%d.f32.r3" % (t, k, n), "MatMul", _wide(t, k, n), kind="context",
              focus=["focus_matmul"])


QNN_FAMILIES: list[Callable[[Collector], None]] = [wide_matmul_extra]
