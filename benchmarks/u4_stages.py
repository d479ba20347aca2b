"""CPU seconds of the verdict and report stages of one in-process check (issue 29, goal u4).

    python benchmarks/u4_stages.py [MODEL] [N]     # MODEL of benchmarks/models.py (encoder_26k), N runs

Builds the graph facts once (no isolation), then N times: pre-passes, rules and the per-node loop,
partition (the whole ``matcher.match``), fix suggestions, ``to_json`` as ``npucheck check --format json``
of one file and one target makes it, and the JSON text; prints the least of the N runs of each stage.
To compare two checkouts, run it with ``PYTHONPATH`` set to each, alternately.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

os.environ["NPUCHECK_ISOLATE"] = "0"
sys.path.insert(0, str(Path(__file__).resolve().parent))

import models  # noqa: E402

from pytest_npucheck import check, fixes, matcher, partition, prepass  # noqa: E402
from pytest_npucheck.jsonio import dumps  # noqa: E402
from pytest_npucheck.tables import Catalog  # noqa: E402

TARGET = "rknn@2.5.0/rk3588"


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 else "encoder_26k"
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    path = models.build(name)
    table = Catalog.discover().table(TARGET)
    graph = check._facts_or_model_error(path)
    spent: dict[str, float] = {}

    def timed(stage: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[stage] = spent.get(stage, 0.0) + time.process_time() - t
        return run

    matcher.run_prepasses = timed("prepasses", prepass.run_prepasses)  # type: ignore[attr-defined]
    matcher.partition = timed("partition", partition.partition)  # type: ignore[attr-defined]
    best: dict[str, float] = {}
    for _ in range(runs):
        spent.clear()
        result = timed("match", matcher.match)(graph, table)
        result = timed("fixes", fixes.with_fixes)(result, path, table)
        try:  # to_json as the CLI's JSON run makes it (nodes as text, where the checkout has that)
            doc = timed("to_json", result.to_json)(nodes_text=True)
        except TypeError:
            doc = timed("to_json", result.to_json)()
        timed("json_text", dumps)({"files": [{"path": str(path), "targets": [doc]}], "exit_status": 0})
        spent["rules_and_loop"] = spent["match"] - spent["prepasses"] - spent["partition"]
        for stage, s in spent.items():
            best[stage] = min(best.get(stage, s), s)
    print(f"{name} ({len(graph.nodes)} nodes) against {TARGET}, least of {runs} runs, CPU s:")
    for stage in ("prepasses", "rules_and_loop", "partition", "match", "fixes", "to_json", "json_text"):
        print(f"  {stage:15} {best[stage]:.4f}")


if __name__ == "__main__":
    main()
