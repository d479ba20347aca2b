"""What running the graph facts in a child process (isolate.py) costs, on the benchmark models.

For each model: the static check (graph facts + verdicts for one target) with isolation on and off,
alternating, every per-process cache cleared, in one process that has torch, onnx and onnxruntime
imported (as a pytest run has). Prints medians and the ratio; ``--json PATH`` writes them.

    python scripts/isolation_overhead.py [--reps 7] [--models bert_1k,bert_9k,resnet50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--models", default="bert_1k,bert_9k,resnet50")
    ap.add_argument("--target", default="rknn@2.5.0/rk3588")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    import models  # benchmarks/models.py
    import onnxruntime  # noqa: F401 - a pytest run with numerics has it loaded: fork pays for it
    import torch  # noqa: F401

    from pytest_npucheck import check, facts_cache, isolate
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table(args.target)

    def once(path: Path, enabled: bool) -> float:
        facts_cache.clear_in_process()
        isolate.configure(enabled=enabled)
        t = time.perf_counter()
        check.check_graph(check.graph_facts(path), [table])  # no facts cache: a file outside an export entry
        return time.perf_counter() - t

    def noop() -> float:
        isolate.configure(enabled=True)
        t = time.perf_counter()
        isolate.call("noop", int)
        return time.perf_counter() - t

    out = {}
    for name in args.models.split(","):
        path = models.build(name)
        once(path, False)  # warm the file cache and the imports
        on, off, bare = [], [], []
        for _ in range(args.reps):
            off.append(once(path, False))
            on.append(once(path, True))
            bare.append(noop())
        m_on, m_off, m_bare = (statistics.median(v) * 1000 for v in (on, off, bare))
        out[name] = {"isolated_ms": round(m_on, 1), "in_process_ms": round(m_off, 1),
                     "ratio": round(m_on / m_off, 3), "overhead_ms": round(m_on - m_off, 1),
                     "empty_child_ms": round(m_bare, 1)}
        print(f"{name}: isolated {m_on:.0f} ms, in-process {m_off:.0f} ms, ratio {m_on / m_off:.2f}, "
              f"overhead {m_on - m_off:.0f} ms (an empty child: {m_bare:.0f} ms)", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
