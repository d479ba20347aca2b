"""Record, and compare, the graph facts and the results of many models against every table.

Every performance change must leave the facts and the results exactly as they were. Record them
with the code before the change and with the code after it, then compare:

    python benchmarks/identical.py write before.json [--onnx-dir DIR]   # code before the change
    python benchmarks/identical.py write after.json [--onnx-dir DIR]    # code after it
    python benchmarks/identical.py compare before.json after.json

To run the code before a change without touching the checkout, export that commit to a directory
(``git archive <commit> | tar -x -C /tmp/before``) and run ``write`` with ``PYTHONPATH=/tmp/before``:
its own tables come with it, so both sides judge against the same tables. The models are the
benchmark models (benchmarks/models.py) plus every ``*.onnx`` in ``--onnx-dir`` (for example exports
of the test corpus, tests/models/export_corpus.py). Each document holds, per model,
``facts_cache.to_json`` of the facts and ``TargetResult.to_json()`` against every table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

BENCH_MODELS = ("bert_1k", "bert_1k_ts", "bert_9k", "resnet50", "bert_base_ext")


def write(out: Path, onnx_dir: Path | None) -> int:
    import models  # noqa: E402 - benchmarks/models.py

    import pytest_npucheck
    from pytest_npucheck import check, facts_cache, graph
    from pytest_npucheck.tables import Catalog

    catalog = Catalog.discover()
    targets = [r["target"] for r in catalog.listing() if "error" not in r]
    tables = [catalog.table(t) for t in targets]
    paths: dict[str, Path] = {name: Path(models.build(name)) for name in BENCH_MODELS}
    if onnx_dir is not None:
        paths.update({p.name: p for p in sorted(onnx_dir.glob("*.onnx"))})
    doc: dict[str, Any] = {}
    for name, path in paths.items():
        graph.clear_caches()
        facts = graph.load_graph(path)
        doc[name] = {"facts": facts_cache.to_json(facts),
                     "results": [r.to_json() for r in check.check_graph(facts, tables)]}
    out.write_text(json.dumps({"code": str(Path(pytest_npucheck.__file__).parent), "targets": targets,
                               "models": doc}, sort_keys=True))
    print(f"{out}: {len(paths)} models x {len(targets)} tables, code {Path(pytest_npucheck.__file__).parent}")
    return 0


def compare(a_path: Path, b_path: Path) -> int:
    a, b = json.loads(a_path.read_text()), json.loads(b_path.read_text())
    if a["targets"] != b["targets"] or sorted(a["models"]) != sorted(b["models"]):
        print("the two documents cover different models or tables")
        return 2
    facts = results = total = 0
    for name, left in a["models"].items():
        right = b["models"][name]
        facts += left["facts"] == right["facts"]
        if left["facts"] != right["facts"]:
            print(f"facts differ: {name}")
        for x, y in zip(left["results"], right["results"]):
            total += 1
            results += x == y
            if x != y:
                print(f"results differ: {name} against {x['target']}: "
                      + ", ".join(k for k in x if x[k] != y.get(k)))
    n = len(a["models"])
    print(f"facts {facts} of {n} identical, results {results} of {total} identical")
    return 0 if facts == n and results == total else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write", help="record facts and results with the code on PYTHONPATH")
    w.add_argument("out", type=Path)
    w.add_argument("--onnx-dir", type=Path, help="also every *.onnx file in this directory")
    c = sub.add_parser("compare", help="compare two recordings")
    c.add_argument("a", type=Path)
    c.add_argument("b", type=Path)
    args = p.parse_args()
    if args.cmd == "write":
        return write(args.out, args.onnx_dir)
    return compare(args.a, args.b)


if __name__ == "__main__":
    sys.exit(main())
