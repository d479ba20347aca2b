"""Seeded fuzz run: mutated ONNX models and mutated support tables end in a result or a clear error.

Every case is derived from real inputs: a model exported from PyTorch (TorchScript exporter), the
bundled RKNN and QNN tables. Each case must end in a check result or an ``NpuCheckError`` (a
native crash in a child process counts as contained, as ``IsolationError``); any other exception
fails the test with the seeds that reproduce it. The run is bounded by a case budget per
category (``NPUCHECK_FUZZ_SCALE`` multiplies it), not by time; the counts go to the test output.

Reproduce one case: ``NPUCHECK_FUZZ_SEED=<seed> pytest tests/test_fuzz.py -s``.
"""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys
from pathlib import Path
from collections import Counter
from typing import Any, Callable

import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")

from corpus import fuzz_cases  # noqa: E402
from corpus.fuzz_cases import SCALE, SEED, Tally, _n, contained as _contained  # noqa: E402
from pytest_npucheck.check import check_graph, graph_facts  # noqa: E402
from pytest_npucheck.errors import NpuCheckError  # noqa: E402
from pytest_npucheck.tables import Catalog, bundled_tables_dir, load_table  # noqa: E402


class _Net(torch.nn.Module):
    """A small real model: conv, norm, pooling, attention-like matmul, softmax, reshape."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.ln = torch.nn.LayerNorm(16)
        self.fc = torch.nn.Linear(16, 16)

    def forward(self, x: Any) -> Any:
        y = torch.nn.functional.gelu(self.bn(self.conv(x)))
        y = torch.nn.functional.max_pool2d(y, 2).flatten(2)  # (1, 8, 16)
        y = self.ln(y)
        att = torch.softmax(self.fc(y) @ y.transpose(1, 2) / 4.0, dim=-1)
        return (att @ y).reshape(1, -1).clamp(-3, 3)


@pytest.fixture(scope="module")
def real_model(tmp_path_factory) -> "onnx.ModelProto":
    from pytest_npucheck.export import ExportOptions, export_model

    d = tmp_path_factory.mktemp("fuzz-export")
    r = export_model(_Net().eval(), torch.randn(1, 3, 8, 8), ExportOptions(exporter="torchscript", opset=17), d)
    return onnx.load(str(r.path))


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.discover()


@pytest.fixture
def contained():
    """Isolation on, with limits small enough for a fuzz case (a mutated dim must not eat the machine)."""
    from pytest_npucheck import isolate

    before = _contained()
    yield
    isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


@pytest.fixture(scope="module")
def real_model_path(real_model, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("fuzz-model") / "real.onnx"
    path.write_bytes(real_model.SerializeToString())
    return path


def _in_fresh_process(kind: str, model: Path, work: Path) -> dict[str, Any]:
    """``fuzz_cases.run_models`` / ``run_cli`` in a new python that never imports torch (the cases
    fork the check's isolated child: a fork of a process holding torch costs as much as the case)."""
    out = work / f"fuzz-{kind}.json"
    proc = subprocess.run([sys.executable, fuzz_cases.__file__, kind, str(model), str(work), str(out)],
                          capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0 and out.is_file(), proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc.pop("torch_imported") is False
    return doc


def _report(tally: Tally, name: str) -> None:
    print(f"\nfuzz ({name}, seed {SEED}, scale {SCALE:g}):")
    print("\n".join(tally.lines()))
    out = os.environ.get("NPUCHECK_FUZZ_JSON")
    if out:
        doc = json.loads(Path(out).read_text()) if Path(out).exists() else {}
        doc[name] = {cat: dict(c) for cat, c in tally.counts.items()}
        Path(out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    assert not tally.unexpected, "\n".join(tally.unexpected[:20])


@pytest.mark.slow  # 250 mutated models, each checked in a forked child
def test_fuzz_models(real_model_path, tmp_path):
    doc = _in_fresh_process("models", real_model_path, tmp_path)
    tally = Tally()
    tally.counts = {cat: Counter(c) for cat, c in doc["counts"].items()}
    tally.unexpected = doc["unexpected"]
    assert sum(c["cases"] for c in tally.counts.values()) == sum(
        _n(f"model: {k}") for k in ("bit flips", "truncation", "field mutations", "random ops"))
    _report(tally, "models")


def test_fuzz_cli(real_model_path, tmp_path):
    """Mutated models through ``npucheck check`` (its ``main``, as the console script calls it, fix
    suggestions included): every case ends with exit code 0, 1 or 2 and no traceback (issue 27: the
    audit's run had 2 tracebacks in 360). ``NPUCHECK_FUZZ_KEEP=DIR`` keeps the files, e.g. to run the
    installed ``npucheck`` over them."""
    keep = os.environ.get("NPUCHECK_FUZZ_KEEP")
    where = Path(keep) if keep else tmp_path
    where.mkdir(parents=True, exist_ok=True)
    doc = _in_fresh_process("cli", real_model_path, where)
    codes, bad = doc["codes"], doc["bad"]
    total = sum(sum(c.values()) for c in codes.values())
    print(f"\nfuzz (npucheck check, seed {SEED}, scale {SCALE:g}): {total} cases")
    for category, c in codes.items():
        print(f"  {category}: " + ", ".join(f"exit {k} {v}" for k, v in sorted(c.items())))
    out = os.environ.get("NPUCHECK_FUZZ_JSON")
    if out:
        doc = json.loads(Path(out).read_text()) if Path(out).exists() else {}
        doc["cli"] = codes
        Path(out).write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    assert total >= 300 * min(SCALE, 1.0)
    assert not bad, "\n".join(bad[:20])


# -- tables -------------------------------------------------------------------------------------

def _small_real_table(path: Path, rng: random.Random) -> dict[str, Any]:
    """A real table cut to a few of its ops (validation cost grows with the table size)."""
    doc = json.loads(path.read_text())
    keys = sorted(doc["ops"])
    keep = set(rng.sample(keys, min(6, len(keys)))) | {k for k in ("Conv", "ai.onnx:Conv") if k in doc["ops"]}
    doc["ops"] = {k: v for k, v in doc["ops"].items() if k in keep}
    doc.get("provenance", {}).pop("errata", None)
    return doc


def _slots(x: Any, out: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    if isinstance(x, dict):
        for k, v in x.items():
            out.append((x, k))
            _slots(v, out)
    elif isinstance(x, list):
        for k, v in enumerate(x):
            out.append((x, k))
            _slots(v, out)
    return out


_VALUES = [None, True, 0, -1, 13.0, 2**70, "", "npu", "\x00", "x" * 3000, [], [1, "a"], {}, {"rule": "nope"},
           {"unexpected": 1}]


def _mutate_value(doc: Any, rng: random.Random) -> None:
    container, key = rng.choice(_slots(doc, []))
    op = rng.randrange(4)
    if op == 0:
        del container[key]
    elif op == 1:
        container[key] = copy.deepcopy(rng.choice(_VALUES))
    elif op == 2 and isinstance(container, dict):
        container[rng.choice(["dtype", "extra", "opset", key + "_"]) if isinstance(key, str) else "extra"] = 1
    else:
        v = container[key]
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            container[key] = rng.choice([-v, v * 1000, str(v), float(v) + 0.5])
        elif isinstance(v, str):
            container[key] = rng.choice([v.upper(), v + "x", v[:1], 7])
        elif isinstance(v, list) and v:
            container[key] = v * 2 if rng.random() < 0.5 else v[1:]
        else:
            container[key] = copy.deepcopy(rng.choice(_VALUES))


def _mutate_text(text: str, rng: random.Random) -> str:
    op = rng.randrange(6)
    if op == 0:
        return text[:rng.randrange(len(text))]
    if op == 1:
        i = rng.randrange(len(text))
        return text[:i] + chr(rng.randrange(32, 127)) + text[i + 1:]
    if op == 2:
        return text.replace(": 1", ": NaN", 1) if ": 1" in text else text.replace("1", "Infinity", 1)
    if op == 3:  # a duplicate key
        return text.replace('"toolchain":', '"toolchain": "x", "toolchain":', 1)
    if op == 4:
        return text.replace("]", ",]", 1)
    return "\ufeff" + text if rng.random() < 0.5 else text.encode("utf-8").decode("latin-1")


@pytest.mark.slow  # 120 mutated tables, each loaded and matched
def test_fuzz_tables(real_model, catalog, tmp_path, contained):
    model_path = tmp_path / "real.onnx"
    model_path.write_bytes(real_model.SerializeToString())
    facts = graph_facts(model_path)
    sources = sorted(p for p in bundled_tables_dir().rglob("*.json")
                     if p.name not in ("schema.json", "catalog.json") and p.parts[-3] in ("rknn", "qnn"))
    assert sources, "no bundled tables found"
    tally = Tally()

    def case(text: str, n: int) -> Callable[[], Any]:
        path = tmp_path / f"t{n}" / "table.json"
        path.parent.mkdir()
        path.write_bytes(text.encode("utf-8", "surrogatepass"))

        def run() -> Any:
            try:
                return check_graph(facts, [load_table(path)])
            except NpuCheckError as exc:
                assert str(path) in str(exc), f"the error does not name the table file: {exc}"
                raise

        return run

    n = 0
    for i in range(_n("table: text mutations")):
        seed = SEED * 5000 + i
        rng = random.Random(seed)
        doc = _small_real_table(rng.choice(sources), rng)
        n += 1
        tally.run("table: text mutations", seed, case(_mutate_text(json.dumps(doc, indent=1), rng), n))
    for i in range(_n("table: value mutations")):
        seed = SEED * 6000 + i
        rng = random.Random(seed)
        doc = _small_real_table(rng.choice(sources), rng)
        for _ in range(rng.randrange(1, 4)):
            _mutate_value(doc, rng)
        n += 1
        tally.run("table: value mutations", seed, case(json.dumps(doc), n))
    _report(tally, "tables")
    # the cut, unmutated tables are valid: the mutations, not the cutting, cause the errors
    rng = random.Random(SEED)
    for src in sources[:2]:
        n += 1
        case(json.dumps(_small_real_table(src, rng)), n)()


# -- comparator and golden files ------------------------------------------------------------------

_SPECIAL = [0.0, -0.0, 1e-45, 1e-10, 65504.0, -65504.0, 3.4e38, float("nan"), float("inf"), float("-inf")]
_CMP_DTYPES = ["float32", "float16", "float64", "int8", "uint8", "int32", "int64", "bool"]


def _random_array(rng: random.Random, shape: tuple[int, ...], dtype: str) -> Any:
    import numpy as np

    n = int(np.prod(shape)) if shape else 1
    vals = [rng.choice(_SPECIAL) if rng.random() < 0.2 else rng.uniform(-300, 300) for _ in range(n)]
    arr = np.array(vals, dtype=np.float64).reshape(shape)
    if dtype == "bool":
        return arr > 0
    with np.errstate(over="ignore", invalid="ignore"):
        if dtype[0] in "iu":
            info = np.iinfo(dtype)
            return np.nan_to_num(arr, nan=0, posinf=info.max, neginf=info.min).clip(info.min, info.max).astype(dtype)
        return arr.astype(dtype)


def test_fuzz_comparator():
    """Random arrays (NaN, inf, signed zeros, subnormals, fp16 extremes, integer limits, empty and
    mismatched shapes, every dtype pair): a result every time, never a pass where the rules say fail."""
    import numpy as np

    from pytest_npucheck.numerics import Tolerance, compare_arrays

    tally = Tally()
    for i in range(_n("comparator: random arrays")):
        seed = SEED * 7000 + i
        rng = random.Random(seed)
        shape = tuple(rng.choice([0, 1, 2, 3, 5]) for _ in range(rng.randrange(0, 4)))
        d1 = rng.choice(_CMP_DTYPES)
        d2 = d1 if rng.random() < 0.7 else rng.choice(_CMP_DTYPES)
        shape2 = shape if rng.random() < 0.8 else tuple(rng.choice([0, 1, 3]) for _ in range(rng.randrange(0, 3)))
        ref = _random_array(rng, shape, d1)
        cand = ref.copy() if rng.random() < 0.3 and shape2 == shape and d2 == d1 else _random_array(rng, shape2, d2)
        tol = Tolerance(allow_nonfinite=rng.random() < 0.3)

        def case(ref: Any = ref, cand: Any = cand, tol: Any = tol) -> Any:
            c = compare_arrays(ref, cand, tol)
            json.dumps(c.to_json(), allow_nan=True)
            c.lines()
            if ref.shape != cand.shape or ref.dtype != cand.dtype:
                assert not c.passed, "a shape or dtype mismatch passed"
            elif ref.dtype.kind == "f" and not tol.allow_nonfinite and not np.isfinite(ref).all():
                assert not c.passed, "non-finite values passed without allow_nonfinite"
            return c

        tally.run("comparator: random arrays", seed, case)
    _report(tally, "comparator")


def test_fuzz_golden_files(tmp_path):
    """Bit flips, truncations and spliced headers of a real golden: it loads or fails with a
    GoldenError naming the file; it never allocates for a forged shape or unpickles anything."""
    import numpy as np

    from pytest_npucheck.golden import GoldenStore, read_golden

    store = GoldenStore(tmp_path / "g")
    good = store.save("tests/t.py::test_fuzz", {"x": np.linspace(0, 1, 64, dtype=np.float32).reshape(8, 8)},
                      {"y": np.arange(100, dtype=np.int64), "z": np.ones((4, 4), np.float16)}).read_bytes()
    tally = Tally()
    for i in range(_n("golden: mutated files")):
        seed = SEED * 8000 + i
        rng = random.Random(seed)
        blob = bytearray(good)
        op = rng.randrange(4)
        if op == 0:
            for _ in range(rng.randrange(1, 9)):
                blob[rng.randrange(len(blob))] ^= 1 << rng.randrange(8)
        elif op == 1:
            blob = blob[:rng.randrange(len(blob))]
        elif op == 2:  # a header that declares another shape
            k = bytes(blob).find(b"'shape': (")
            if k >= 0:
                new = rng.choice([b"'shape': (99999999999,", b"'shape': (-1,", b"'shape': (0,", b"'shape': ((),"])
                blob = blob[:k] + new + blob[k + len(b"'shape': (") + 3:]
        else:
            blob[rng.randrange(len(blob))] = rng.randrange(256)
        path = tmp_path / f"case{i}.npz"
        path.write_bytes(bytes(blob))

        def case(path: Path = path) -> Any:
            try:
                return read_golden(path)
            except NpuCheckError as exc:
                assert str(path) in str(exc), f"the error does not name the golden: {exc}"
                raise

        tally.run("golden: mutated files", seed, case)
    _report(tally, "goldens")


_BUDGETS = {
    "format": 1,
    "releases": {
        "1.2.0": {
            "tests": {
                "tests/test_models.py::test_resnet[rk3588]": {
                    "precision": "fp16", "default": {"cosine_min": 0.9995}, "outputs": {"logits": {"peak_atol": 0.01}}},
                "*bert*": {"precision": "int8", "default": {"snr_db_min": 20}},
            },
            "targets": {"rknn@2.5.0/rk3588": {"max_cpu_fallback_nodes": 2, "min_npu_share": 0.9}},
        },
        "1.3.0": {"tests": {"*bert*": {"precision": "int8", "default": {"snr_db_min": 25}}}},
    },
}
_BASELINE = {"format": 1, "entries": [
    {"test": f"tests/test_m.py::test_{i}", "target": "rknn@2.5.0/rk3588", "op_type": "Resize",
     "node": f"/layer{i}/Resize", "verdict": "cpu", "reason": "accepted",
     "location": {"module": f"layer{i}", "file": "model.py", "line": 10 + i} if i % 2 else None}
    for i in range(6)]}


def test_fuzz_baseline_and_budgets(tmp_path):
    """Value mutations of a valid baseline and a valid budgets file: loaded and used, or an error
    naming the file."""
    from pytest_npucheck import baseline
    from pytest_npucheck.budget import load_budgets

    tally = Tally()

    def case(kind: str, doc: Any, n: int) -> Callable[[], Any]:
        path = tmp_path / f"{kind}{n}.json"
        path.write_text(json.dumps(doc))

        def run() -> Any:
            try:
                if kind == "baseline":
                    b = baseline.load(path)
                    return b.dumps(), b.tests()
                b = load_budgets(path)
                return [b.for_test(r, "tests/test_models.py::test_resnet[rk3588]", "ResNet")
                        for r in ("1.2.0", "1.2.5", "1.3.0", "2.0")]
            except NpuCheckError as exc:
                assert str(path) in str(exc), f"the error does not name the file: {exc}"
                raise

        return run

    assert case("baseline", _BASELINE, -1)()[1] and case("budgets", _BUDGETS, -1)()  # the originals are valid
    for kind, base in (("baseline", _BASELINE), ("budgets", _BUDGETS)):
        cat = f"{kind}: value mutations"
        for i in range(_n(cat)):
            seed = SEED * (9000 if kind == "baseline" else 9500) + i
            rng = random.Random(seed)
            doc = copy.deepcopy(base)
            for _ in range(rng.randrange(1, 4)):
                _mutate_value(doc, rng)
            tally.run(cat, seed, case(kind, doc, i))
    _report(tally, "baseline and budgets")
