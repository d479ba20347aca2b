"""The torch-free half of tests/corpus/test_fuzz.py: the seeded mutations of a real exported model,
and the two runs over them, each case checked in this process (``run_models``: the check's API;
``run_cli``: ``npucheck check``'s ``main``, as the console script calls it).

test_fuzz.py runs them in a fresh process that never imports torch (``python fuzz_cases.py
models|cli MODEL WORKDIR OUT``, OUT: the JSON result): every case forks the check's isolated child,
and a fork of a process that holds torch costs about as much CPU as the rest of the case (the 250
model cases took 9.0-10.4 CPU-s with torch imported, 5.3-5.4 without, side by side). No pytest, no
torch here.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import sys
import traceback
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Callable

import onnx
from onnx import TensorProto, helper

from pytest_npucheck import isolate
from pytest_npucheck.errors import NpuCheckError
from pytest_npucheck.isolate import IsolationError

SCALE = float(os.environ.get("NPUCHECK_FUZZ_SCALE", "1"))
SEED = int(os.environ.get("NPUCHECK_FUZZ_SEED", "20261130"))
BUDGET = {  # cases per category
    "model: bit flips": 60, "model: truncation": 30, "model: field mutations": 90, "model: random ops": 70,
    "table: text mutations": 40, "table: value mutations": 80,
    "comparator: random arrays": 200, "golden: mutated files": 80,
    "baseline: value mutations": 40, "budgets: value mutations": 40,
    "cli: bit flips": 90, "cli: truncation": 40, "cli: field mutations": 120, "cli: random ops": 90,
}
TARGETS = ["rknn@2.5.0/rk3588", "qnn@2.51.0/htp-v73"]


def _n(category: str) -> int:
    return max(1, int(BUDGET[category] * SCALE))


class Tally:
    def __init__(self) -> None:
        self.counts: dict[str, Counter[str]] = {}
        self.unexpected: list[str] = []

    def run(self, category: str, seed: int, case: Callable[[], Any]) -> None:
        c = self.counts.setdefault(category, Counter())
        c["cases"] += 1
        try:
            case()
            c["result"] += 1
        except IsolationError as exc:
            c[f"contained {exc.kind}"] += 1
        except NpuCheckError as exc:
            assert str(exc).strip(), "an error without a message"
            c["clear error"] += 1
        except Exception as exc:  # noqa: BLE001 - this is what the fuzz run hunts for
            c["UNEXPECTED"] += 1
            tb = traceback.extract_tb(exc.__traceback__)
            where = f" at {Path(tb[-1].filename).name}:{tb[-1].lineno}" if tb else ""
            self.unexpected.append(f"{category} seed {seed}: {type(exc).__name__}: {str(exc)[:300]}{where}")

    def lines(self) -> list[str]:
        out = []
        for cat, c in self.counts.items():
            rest = ", ".join(f"{k} {v}" for k, v in sorted(c.items()) if k != "cases")
            out.append(f"  {cat}: {c['cases']} cases ({rest})")
        total = sum(c["cases"] for c in self.counts.values())
        crashes = sum(v for c in self.counts.values() for k, v in c.items() if k == "contained crash")
        out.append(f"  total {total} cases; unexpected exceptions {len(self.unexpected)}; native crashes "
                   f"contained {crashes}; crashes of the run 0")
        return out


# -- models -------------------------------------------------------------------------------------

_DTYPES = [TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64, TensorProto.INT8, TensorProto.BOOL,
           TensorProto.STRING, TensorProto.DOUBLE, TensorProto.UINT8, TensorProto.BFLOAT16, 0, 99]
_OPS = ["Conv", "Relu", "MatMul", "Softmax", "Reshape", "Gather", "Resize", "LayerNormalization", "Loop", "If",
        "Frobnicate", "", "Add\x00", "<script>", "x" * 300]


def _mutate_fields(m: Any, rng: random.Random) -> None:
    g = m.graph
    choice = rng.randrange(16)
    node = g.node[rng.randrange(len(g.node))] if len(g.node) else None
    if choice == 0 and node is not None:
        node.op_type = rng.choice(_OPS)
    elif choice == 1 and node is not None:
        node.domain = rng.choice(["com.example", "ai.onnx.ml", "com.microsoft", "ai.onnx", "\u2603"])
    elif choice == 2 and node is not None and len(node.attribute):
        del node.attribute[rng.randrange(len(node.attribute))]
    elif choice == 3 and node is not None and len(node.attribute):
        a = node.attribute[rng.randrange(len(node.attribute))]
        kind = rng.randrange(5)
        name = a.name
        a.Clear()
        a.name = name
        if kind == 0:
            a.type, a.f = onnx.AttributeProto.FLOAT, rng.choice([float("nan"), -1e30, 0.5])
        elif kind == 1:
            a.type, a.i = onnx.AttributeProto.INT, rng.choice([-(2**62), -1, 0, 2**62])
        elif kind == 2:
            a.type = onnx.AttributeProto.INTS
            a.ints.extend(rng.choice([-5, 0, 1, 10**9]) for _ in range(rng.randrange(0, 9)))
        elif kind == 3:
            a.type, a.s = onnx.AttributeProto.STRING, rng.choice([b"", b"\xff\xfe", b"nearest", b"x" * 5000])
        else:
            a.type = onnx.AttributeProto.GRAPH
            a.g.name = "empty"
    elif choice == 4 and node is not None:
        node.attribute.add(name=rng.choice(["axis", "bogus", "pads", ""]), type=onnx.AttributeProto.INT,
                           i=rng.randrange(-3, 99))
    elif choice == 5 and node is not None and len(node.input):
        node.input[rng.randrange(len(node.input))] = rng.choice(["", "nonexistent", g.output[0].name if len(g.output) else "y"])
    elif choice == 6 and node is not None:
        node.output.append(rng.choice([node.output[0] if len(node.output) else "o", "extra", ""]))
    elif choice == 7 and len(g.initializer):
        t = g.initializer[rng.randrange(len(g.initializer))]
        t.data_type = rng.choice(_DTYPES)
    elif choice == 8 and len(g.initializer):
        t = g.initializer[rng.randrange(len(g.initializer))]
        dims = rng.choice([[-1], [0], [2**40, 2**40], [3, 3, 3, 3, 3, 3, 3, 3, 3]])
        del t.dims[:]
        t.dims.extend(dims)
    elif choice == 9 and len(g.input):
        g.input[rng.randrange(len(g.input))].type.tensor_type.elem_type = rng.choice(_DTYPES)
    elif choice == 10 and len(g.input):
        dims = g.input[0].type.tensor_type.shape.dim
        if len(dims):
            d = dims[rng.randrange(len(dims))]
            if rng.random() < 0.5:
                d.dim_value = rng.choice([-5, 0, 2**40])
            else:
                d.dim_param = rng.choice(["", "batch", "\x1b[31m", "n" * 2000])
    elif choice == 11:
        del m.opset_import[:]
        if rng.random() < 0.7:
            m.opset_import.append(helper.make_opsetid(rng.choice(["", "ai.onnx", "com.example"]),
                                                      rng.choice([-1, 0, 1, 7, 17, 99, 2**40])))
    elif choice == 12:
        m.ir_version = rng.choice([0, 1, 3, 99, -1])
    elif choice == 13:
        if rng.random() < 0.5:
            del g.output[:]
        else:
            del g.node[:]
    elif choice == 14 and len(g.initializer):
        t = g.initializer[rng.randrange(len(g.initializer))]
        t.data_location = TensorProto.EXTERNAL
        t.external_data.add(key="location", value=rng.choice(["../../etc/passwd", "/etc/passwd", "w.bin", ""]))
    elif node is not None:  # 15: duplicate a node (two producers of one name)
        g.node.append(copy.deepcopy(node))


def _random_op_model(rng: random.Random) -> Any:
    from onnx import defs

    schemas = [s for s in defs.get_all_schemas() if s.domain == "" and not s.deprecated]
    s = rng.choice(sorted(schemas, key=lambda s: s.name))
    n_in = len(s.inputs) + (rng.randrange(0, 3) if s.inputs and s.inputs[-1].option.name == "Variadic" else 0)
    n_in = max(0, n_in - (rng.randrange(0, 2) if n_in else 0))
    inputs, vis = [], []
    for k in range(n_in):
        shape = [rng.choice([1, 2, 3, 4, "n", None]) for _ in range(rng.randrange(0, 5))]
        vis.append(helper.make_tensor_value_info(f"in{k}", rng.choice(_DTYPES[:9]), shape))
        inputs.append(f"in{k}")
    attrs = {}
    for name, a in sorted(s.attributes.items()):
        if rng.random() < 0.5:
            continue
        t = a.type
        A = onnx.AttributeProto
        if t == A.INT:
            attrs[name] = rng.choice([-1, 0, 1, 2, 3, 10**6])
        elif t == A.FLOAT:
            attrs[name] = rng.choice([0.0, 1e-5, -2.5, float("inf")])
        elif t == A.INTS:
            attrs[name] = [rng.choice([-1, 0, 1, 2, 3]) for _ in range(rng.randrange(1, 6))]
        elif t == A.FLOATS:
            attrs[name] = [rng.random() for _ in range(rng.randrange(1, 4))]
        elif t == A.STRING:
            attrs[name] = rng.choice(["", "constant", "NOTSET", "linear", "\u2603"])
        elif t == A.STRINGS:
            attrs[name] = ["a", "b"]
        elif t == A.TENSOR:
            attrs[name] = helper.make_tensor("t", TensorProto.FLOAT, [2], [1.0, 2.0])
    outs = [f"out{k}" for k in range(max(1, len(s.outputs)))]
    node = helper.make_node(s.name, inputs, outs, name=f"fuzz_{s.name}", **attrs)
    graph = helper.make_graph([node], "fuzz", vis, [helper.make_empty_tensor_value_info(o) for o in outs])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", rng.choice([11, 13, 17, 19]))],
                             ir_version=9)


def _model_cases(real_model: Any, prefix: str, base: int) -> Any:
    """(category, seed, bytes) of each mutated model: bit flips, truncation, field mutations of the
    real exported model and single-node models of random ops; ``prefix`` names the budget entries,
    ``base`` keeps the seeds of two runs apart."""
    data = real_model.SerializeToString()
    for i in range(_n(f"{prefix}bit flips")):
        seed = (SEED + base) * 1000 + i
        rng = random.Random(seed)
        blob = bytearray(data)
        for _ in range(rng.randrange(1, 9)):
            blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        yield f"{prefix}bit flips", seed, bytes(blob)
    for i in range(_n(f"{prefix}truncation")):
        seed = (SEED + base) * 2000 + i
        rng = random.Random(seed)
        yield f"{prefix}truncation", seed, data[:rng.randrange(0, len(data))]
    for i in range(_n(f"{prefix}field mutations")):
        seed = (SEED + base) * 3000 + i
        rng = random.Random(seed)
        m = copy.deepcopy(real_model)
        for _ in range(rng.randrange(1, 4)):
            _mutate_fields(m, rng)
        yield f"{prefix}field mutations", seed, m.SerializeToString()
    for i in range(_n(f"{prefix}random ops")):
        seed = (SEED + base) * 4000 + i
        rng = random.Random(seed)
        yield f"{prefix}random ops", seed, _random_op_model(rng).SerializeToString()


def contained() -> isolate.Settings:
    """Isolation on, with limits small enough for a fuzz case (a mutated dim must not eat the
    machine); returns the settings before."""
    return isolate.configure(enabled=isolate.env_enabled(), timeout=60, memory_mb=1024)


def run_models(model_path: Path, work: Path) -> dict[str, Any]:
    """Every mutated model checked through the API against both targets: {category: counts},
    and the unexpected exceptions with the seeds that reproduce them."""
    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.tables import Catalog

    catalog = Catalog.discover()
    tables = [catalog.table(t) for t in TARGETS]
    tally = Tally()
    for case_no, (category, seed, blob) in enumerate(_model_cases(onnx.load(str(model_path)), "model: ", 0)):
        path = work / f"case{case_no}.onnx"
        path.write_bytes(blob)
        tally.run(category, seed, lambda: check_graph(graph_facts(path), tables))
    return {"counts": {cat: dict(c) for cat, c in tally.counts.items()}, "unexpected": tally.unexpected}


def run_cli(model_path: Path, work: Path) -> dict[str, Any]:
    """Every mutated model through ``npucheck check`` (its ``main``, fix suggestions included, JSON
    output): {category: {exit code: count}}, and the cases that ended otherwise than with exit 0, 1 or
    2 without a traceback."""
    from pytest_npucheck.cli import main

    codes: dict[str, Counter[str]] = {}
    bad: list[str] = []
    for case_no, (category, seed, blob) in enumerate(_model_cases(onnx.load(str(model_path)), "cli: ", 1)):
        path = work / f"cli{case_no:04d}-{seed}.onnx"
        path.write_bytes(blob)
        err = io.StringIO()
        with redirect_stdout(io.StringIO()), redirect_stderr(err):
            try:
                code: Any = main(["check", str(path), "--target", TARGETS[0], "--target", TARGETS[1],
                                  "--format", "json"])
            except BaseException as exc:  # noqa: BLE001 - what the console script would die of
                code = f"raised {type(exc).__name__}"
        codes.setdefault(category, Counter())[str(code)] += 1
        text = err.getvalue()
        if code not in (0, 1, 2) or "Traceback" in text:
            bad.append(f"{category} seed {seed}: exit {code}: {text.strip()[-400:]}")
    return {"codes": {cat: dict(c) for cat, c in codes.items()}, "bad": bad}


if __name__ == "__main__":
    kind, model, work, out = sys.argv[1:5]
    contained()
    doc = {"models": run_models, "cli": run_cli}[kind](Path(model), Path(work))
    doc["torch_imported"] = "torch" in sys.modules
    Path(out).write_text(json.dumps(doc))
