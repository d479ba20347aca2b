"""Tests for pytest_npucheck.export: real torch models, real exporters, real files."""

from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from pytest_npucheck.export import (  # noqa: E402
    MODEL_FILENAME,
    VERIFIED_FILENAME,
    ExportError,
    ExportOptions,
    ExportResult,
    _publish,
    cache_key,
    export_model,
)

REPO = pathlib.Path(__file__).resolve().parents[2]


class SmallCNN(torch.nn.Module):
    def __init__(self, stride: int = 1) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=stride, padding=1)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x):
        h = torch.relu(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


class SmallCNNOtherCode(SmallCNN):
    def forward(self, x):
        h = torch.sigmoid(self.bn(self.conv(x)))
        return self.fc(h.mean(dim=(2, 3)))


class TwoInputs(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x, y):
        return self.fc(x) + y


SCALE = 2.0


def _scaled(x):
    return x * SCALE


class UsesHelper(torch.nn.Module):
    def forward(self, x):
        return _scaled(x) + 1


class PairAndVarargs(torch.nn.Module):
    def forward(self, pair, *rest):
        return pair[0] * pair[1] + sum(rest)


class DataDependent(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # Python control flow on a tensor value
            return x * 2
        return x - 1


class NoSymbolic(torch.nn.Module):
    def forward(self, x):
        return torch.special.zeta(x, x)  # no ONNX symbolic / torchlib function


def small_cnn(**kwargs) -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNN(**kwargs).eval()


def example() -> torch.Tensor:
    return torch.linspace(-1.0, 1.0, 2 * 3 * 8 * 8).reshape(2, 3, 8, 8)


def graph_inputs(path: pathlib.Path) -> dict[str, list[int | str]]:
    proto = onnx.load(str(path), load_external_data=False)
    return {
        i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim]
        for i in proto.graph.input
    }


def cache_listing(cache_dir: pathlib.Path) -> list[str]:
    return sorted(p.name for p in cache_dir.iterdir()) if cache_dir.exists() else []


@pytest.fixture(scope="module")
def dynamo_cached(tmp_path_factory) -> tuple[pathlib.Path, ExportResult]:
    """One dynamo export of SmallCNN shared by the tests that only read it."""
    cache_dir = tmp_path_factory.mktemp("cache")
    return cache_dir, export_model(small_cnn(), example(), ExportOptions(), cache_dir)


# --------------------------------------------------------------------------- import, options


def test_module_import_does_not_import_heavy_libraries():
    code = (
        "import pytest_npucheck.export, sys; "
        "heavy = [m for m in ('torch', 'onnx', 'numpy', 'pytest') if m in sys.modules]; "
        "assert not heavy, heavy"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


def test_options_are_validated_and_hashable():
    with pytest.raises(ValueError, match="unknown exporter"):
        ExportOptions(exporter="onnxscript")
    with pytest.raises(ValueError, match="opset"):
        ExportOptions(opset=0)
    with pytest.raises(ValueError, match="axis"):
        ExportOptions(dynamic_axes={"x": {"0": "batch"}})
    options = ExportOptions(dynamic_axes={"x": [0]}, input_names=["x"])
    assert dict(options.dynamic_axes["x"]) == {0: "x_dim0"}
    assert options.input_names == ("x",)
    assert options == ExportOptions(dynamic_axes={"x": {0: "x_dim0"}}, input_names=("x",))
    assert len({options, ExportOptions(dynamic_axes={"x": [0]}, input_names=["x"])}) == 1


# --------------------------------------------------------------------------- exporting


@pytest.mark.parametrize(
    ("exporter", "opset", "expected_opset"),
    [("dynamo", None, 20), ("dynamo", 18, 18), ("torchscript", None, 20), ("torchscript", 13, 13)],
)
def test_export_writes_loadable_onnx_with_expected_opset(
    tmp_path, exporter, opset, expected_opset
):
    ort = pytest.importorskip("onnxruntime")
    model, x = small_cnn(), example()
    result = export_model(model, x, ExportOptions(exporter=exporter, opset=opset), tmp_path)

    assert result.path == tmp_path / result.key / MODEL_FILENAME
    assert not result.cache_hit
    assert result.exporter == exporter
    assert result.opset == expected_opset
    assert sorted(p.name for p in result.path.parent.iterdir()) == ["meta.json", "model.onnx", "verified.json"]
    proto = onnx.load(str(result.path))
    onnx.checker.check_model(proto)
    assert {(i.domain or "ai.onnx"): i.version for i in proto.opset_import}["ai.onnx"] == (
        expected_opset
    )
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(got), model(x), rtol=1e-4, atol=1e-5)


def test_dynamo_export_keeps_source_metadata_and_prints_nothing(dynamo_cached, capfd):
    _, result = dynamo_cached
    proto = onnx.load(str(result.path))
    metadata = [{p.key: p.value for p in node.metadata_props} for node in proto.graph.node]
    assert all("namespace" in m and "pkg.torch.onnx.name_scopes" in m for m in metadata)
    traces = [m.get("pkg.torch.onnx.stack_trace", "") for m in metadata]
    assert any(__file__ in trace and "in forward" in trace for trace in traces)
    scopes = {m["pkg.torch.onnx.name_scopes"] for m in metadata}
    assert any("'fc'" in s for s in scopes)

    # A fresh (uncached) export: the exporter's progress lines and warnings are captured.
    capfd.readouterr()
    export_model(TwoInputs().eval(), (torch.ones(2, 8), torch.ones(2, 4)), ExportOptions())
    out, err = capfd.readouterr()
    assert out == "" and err == ""


def test_torchscript_export_keeps_scoped_node_names(tmp_path, capfd):
    capfd.readouterr()
    result = export_model(small_cnn(), example(), ExportOptions(exporter="torchscript"), tmp_path)
    assert capfd.readouterr() == ("", "")  # the DeprecationWarning is captured too
    names = [node.name for node in onnx.load(str(result.path)).graph.node]
    assert "/conv/Conv" in names
    assert any(name.startswith("/fc/") for name in names)
    assert list(graph_inputs(result.path)) == ["x"]  # named after forward(), not "input.1"


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_model_mode_is_left_as_given(exporter):
    model = small_cnn().train()
    export_model(model, example(), ExportOptions(exporter=exporter))
    assert model.training and all(m.training for m in model.modules())
    model.eval()
    export_model(model, example(), ExportOptions(exporter=exporter))
    assert not any(m.training for m in model.modules())


def test_export_without_cache_dir_uses_a_fresh_directory():
    model, x, options = small_cnn(), example(), ExportOptions(exporter="torchscript")
    first = export_model(model, x, options)
    second = export_model(model, x, options)
    try:
        assert not first.cache_hit and not second.cache_hit
        assert first.key == second.key
        assert first.path != second.path
        assert first.path.stat().st_size > 0
    finally:
        for result in (first, second):
            for p in result.path.parent.iterdir():
                p.unlink()
            result.path.parent.rmdir()


def test_warm_up_freezes_the_heap_and_released_models_are_still_freed(tmp_path):
    """After the exporter's warm-up the long-lived heap is frozen (gc.freeze, once per process);
    a model the caller releases is still freed, and a later export does not freeze again."""
    code = """
import gc, json, pathlib, sys, weakref
import torch
from pytest_npucheck import isolate
from pytest_npucheck.export import ExportOptions, export_model
assert isolate.settings().enabled
cache = pathlib.Path(sys.argv[1])
model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval()
ref = weakref.ref(model)
before = gc.get_freeze_count()
first = export_model(model, torch.zeros(1, 3, 8, 8), ExportOptions(), cache)
frozen = gc.get_freeze_count()
del model
other = torch.nn.Sequential(torch.nn.Linear(4, 4)).eval()
second = export_model(other, torch.zeros(2, 4), ExportOptions(), cache)
print(json.dumps({"before": before, "frozen": frozen, "after_second": gc.get_freeze_count(),
                  "model_alive": ref() is not None, "files": [first.path.is_file(), second.path.is_file()],
                  "hits": [first.cache_hit, second.cache_hit]}))
"""
    env = {k: v for k, v in os.environ.items() if k != "NPUCHECK_ISOLATE"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["before"] == 0
    assert out["frozen"] > 10_000  # torch and the warmed exporter
    assert out["after_second"] <= out["frozen"]  # frozen once; frozen objects freed since lower it
    assert out["model_alive"] is False  # frozen, and still freed when released
    assert out["files"] == [True, True] and out["hits"] == [False, False]


def test_dynamo_registry_is_built_once_per_process_and_exports_are_unchanged(tmp_path):
    """torch builds the dynamo exporter's operator registry on every export; the plugin builds it
    once per process (in the process that forks the export children), each export gets its own
    copy of the mapping, and the exported files are byte-identical to torch's own behaviour."""
    code = """
import hashlib, json, os, pathlib, sys
import torch
from onnxscript._framework_apis import torch_2_5
from torch.onnx._internal.exporter import _registration
from pytest_npucheck import export, isolate
from pytest_npucheck.export import ExportOptions, export_model

log = pathlib.Path(sys.argv[1]) / "builds.txt"
inner = _registration.onnxscript_apis.get_torchlib_ops

def counted():  # what from_torchlib spends its time in: one line per build, from any process
    with open(log, "a") as fh:
        fh.write(f"{os.getpid()}\\n")
    return inner()

_registration.onnxscript_apis.get_torchlib_ops = counted
torch_own = _registration.ONNXRegistry.__dict__["from_torchlib"]
assert isolate.settings().enabled
models = [torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval(),
          torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8)).eval()]
inputs = [torch.zeros(1, 3, 8, 8), torch.zeros(2, 4)]
opsets = [None, 17, 17]  # the exporter's default, then the opset a table asks for (twice)
models.append(torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1), torch.nn.Sigmoid()).eval())
inputs.append(torch.zeros(1, 3, 4, 4))
digest = lambda p: hashlib.sha256(p.read_bytes()).hexdigest()
reused = [digest(export_model(m, x, ExportOptions(opset=o), pathlib.Path(sys.argv[1]) / "a").path)
          for m, x, o in zip(models, inputs, opsets)]
builds = [int(line) for line in log.read_text().split()]
patched = _registration.ONNXRegistry.__dict__["from_torchlib"]
# one registry's mapping is its own: what one export registers does not reach the next
first = _registration.ONNXRegistry.from_torchlib(opset_version=20)
first.register_op(torch.ops.aten.relu.default, lambda x: x)
second = _registration.ONNXRegistry.from_torchlib(opset_version=20)
custom = [len(first.get_decomps(torch.ops.aten.relu.default)), len(second.get_decomps(torch.ops.aten.relu.default))]
# torch's own behaviour, in the same process: isolation off, the original classmethod back
os.environ["NPUCHECK_ISOLATE"] = "0"
export._reuse_torchlib_registry = lambda: None
_registration.ONNXRegistry.from_torchlib = torch_own
before = len(log.read_text().split())
own = [digest(export_model(m, x, ExportOptions(opset=o), pathlib.Path(sys.argv[1]) / "b").path)
       for m, x, o in zip(models, inputs, opsets)]
own_builds = len(log.read_text().split()) - before
# a torchlib function registered after the registry was built is in the next one, as without the memo
# (last: it changes what a ReLU exports to)
from torch.onnx._internal.exporter._torchlib._torchlib_registry import onnx_impl
onnx_impl(torch.ops.aten.relu.default, trace_only=True)(lambda self: self)
_registration.ONNXRegistry.from_torchlib = patched
third = _registration.ONNXRegistry.from_torchlib(opset_version=20)
custom.append(len(third.get_decomps(torch.ops.aten.relu.default)))
print(json.dumps({"parent": os.getpid(), "builds": builds, "reused": reused, "own": own,
                  "own_builds": own_builds, "custom": custom,
                  "patched": patched is not torch_own}))
"""
    env = {k: v for k, v in os.environ.items() if k != "NPUCHECK_ISOLATE"}
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["patched"] is True
    # built once per opset, by the warm-ups in the parent: no forked export child built it again
    assert out["builds"] == [out["parent"], out["parent"]]
    assert out["own_builds"] == 3  # torch's own classmethod builds it for every export
    assert out["reused"] == out["own"]  # the same bytes as torch's own behaviour
    assert out["custom"][0] == out["custom"][1] + 1
    assert out["custom"][2] == out["custom"][1] + 1  # built again with the newly registered function


_CLASSES_SRC = """
import functools


def deco(cls):
    return cls


@deco
class Decorated:
    "doc"

    class Inner:
        x = 1

    def forward(self, x):
        return x


def factory():
    class Local:
        def go(self):
            return 1
    return Local


class Twice:
    a = 1


if True:
    class Twice:  # the second definition of the name: inspect finds the first
        a = 2
"""


def test_class_source_is_inspects_with_one_parse_per_file(tmp_path, monkeypatch):
    import ast
    import importlib.util
    import inspect

    from pytest_npucheck import export

    path = tmp_path / "npucheck_classes_mod.py"
    path.write_text(_CLASSES_SRC)
    spec = importlib.util.spec_from_file_location("npucheck_classes_mod", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "npucheck_classes_mod", mod)
    spec.loader.exec_module(mod)
    classes = [mod.Decorated, mod.Decorated.Inner, mod.factory(), mod.Twice]
    from models import corpus  # a 3,000-line file of real model classes

    classes += [v for v in vars(corpus).values() if isinstance(v, type) and v.__module__ == corpus.__name__]
    parses = []
    real_parse = ast.parse
    monkeypatch.setattr(ast, "parse", lambda *a, **k: parses.append(1) or real_parse(*a, **k))
    export._CLASS_LINES.clear()
    ours = [export._class_source(c) for c in classes]
    assert len(parses) == 2  # one per file, whatever the number of classes
    # the reference: inspect.getsource parses the whole file again for every class (3.11's
    # findsource), 15 CPU-s over the corpus; the same trees, parsed once per source text, give the
    # same answers (its class finder only reads them)
    trees: dict[str, ast.AST] = {}

    def parse_once(source, *args, **kwargs):
        if args or kwargs or not isinstance(source, str):
            return real_parse(source, *args, **kwargs)
        if source not in trees:
            trees[source] = real_parse(source)
        return trees[source]

    monkeypatch.setattr(ast, "parse", parse_once)
    assert ours == [inspect.getsource(c) for c in classes]
    monkeypatch.setattr(ast, "parse", real_parse)
    assert ours[0].startswith("@deco") and "a = 1" in ours[3]
    # an edit on disk is read again, as inspect reads it
    path.write_text(_CLASSES_SRC.replace("return x", "return x + 1"))
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert "return x + 1" in export._class_source(mod.Decorated) == inspect.getsource(mod.Decorated)


# --------------------------------------------------------------------------- cache behaviour


def test_second_call_is_a_cache_hit_and_does_not_rewrite(dynamo_cached):
    cache_dir, first = dynamo_cached
    before = first.path.stat().st_mtime_ns
    second = export_model(small_cnn(), example(), ExportOptions(), cache_dir)
    assert second.cache_hit
    assert second.key == first.key
    assert second.path == first.path
    assert second.opset == first.opset == 20
    assert second.path.stat().st_mtime_ns == before
    assert second.seconds < first.seconds
    assert cache_listing(cache_dir) == [first.key]


def test_a_hit_in_a_new_process_trusts_the_stamp_the_export_wrote(dynamo_cached, monkeypatch):
    """The export (in its isolated child) stamps the files it hashed: a later process's hit reads
    none of them again while they are unchanged (tests/unit/test_export_cache_entry.py: edits)."""
    from pytest_npucheck import filehash

    cache_dir, first = dynamo_cached
    assert (first.path.parent / VERIFIED_FILENAME).is_file()
    monkeypatch.setattr(filehash, "_MEMO", {})  # as in a new process
    hashed = []
    real = filehash.sha256_file
    monkeypatch.setattr(filehash, "sha256_file", lambda p: hashed.append(p) or real(p))
    assert export_model(small_cnn(), example(), ExportOptions(), cache_dir).cache_hit
    assert hashed == []


def test_damaged_entry_is_rebuilt(tmp_path):
    model, x, options = small_cnn(), example(), ExportOptions(exporter="torchscript")
    entry = tmp_path / cache_key(model, x, options)
    entry.mkdir()
    (entry / MODEL_FILENAME).write_bytes(b"")
    result = export_model(model, x, options, tmp_path)
    assert not result.cache_hit
    assert result.path.stat().st_size > 0
    onnx.checker.check_model(onnx.load(str(result.path)))
    assert cache_listing(tmp_path) == [result.key]
    assert export_model(model, x, options, tmp_path).cache_hit


def test_losing_a_publish_race_keeps_the_winner(tmp_path):
    model, x, options = small_cnn(), example(), ExportOptions(exporter="torchscript")
    winner = export_model(model, x, options, tmp_path)
    loser = tmp_path / ".tmp-loser"
    loser.mkdir()
    (loser / MODEL_FILENAME).write_bytes(b"not the winner")
    assert _publish(loser, winner.path.parent) is False
    assert not loser.exists()
    assert winner.path.read_bytes() != b"not the winner"


def _concurrent_worker(cache_dir: str, barrier, queue) -> None:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    x = torch.linspace(-1.0, 1.0, 2 * 3 * 8 * 8).reshape(2, 3, 8, 8)
    options = ExportOptions(exporter="torchscript")
    barrier.wait(timeout=120)
    result = export_model(model, x, options, pathlib.Path(cache_dir))
    queue.put((result.key, str(result.path), result.cache_hit))


def test_concurrent_exports_from_two_processes_leave_one_entry(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(2), ctx.Queue()
    procs = [
        ctx.Process(target=_concurrent_worker, args=(str(tmp_path), barrier, queue))
        for _ in range(2)
    ]
    for proc in procs:
        proc.start()
    results = [queue.get(timeout=180) for _ in procs]
    for proc in procs:
        proc.join(timeout=60)
        assert proc.exitcode == 0

    expected_key = cache_key(small_cnn(), example(), ExportOptions(exporter="torchscript"))
    assert {key for key, _, _ in results} == {expected_key}  # stable across processes
    assert len({path for _, path, _ in results}) == 1
    assert cache_listing(tmp_path) == [expected_key]  # no tmp or trash dirs left
    onnx.checker.check_model(onnx.load(results[0][1]))


# --------------------------------------------------------------------------- cache key


def _with_weight_changed(model, x, options):
    with torch.no_grad():
        model.conv.weight[0, 0, 0, 0] += 1e-3
    return model, x, options


def _with_running_mean_changed(model, x, options):
    model.bn.running_mean[3] = 0.5
    return model, x, options


def _with_extra_submodule(model, x, options):
    model.extra = torch.nn.Linear(8, 4)
    return model, x, options


def _with_instance_forward(model, x, options):
    def forward(t):
        return model.fc(model.conv(t).amax(dim=(2, 3)))

    model.forward = forward
    return model, x, options


def _with_submodule_in_training(model, x, options):
    model.bn.train()
    return model, x, options


def _with_forward_hook(model, x, options):
    model.fc.register_forward_hook(lambda mod, args, out: out * 2)
    return model, x, options


CHANGES = {
    "weight": _with_weight_changed,
    "bn_running_mean": _with_running_mean_changed,
    "extra_submodule": _with_extra_submodule,
    "instance_forward": _with_instance_forward,
    "forward_hook": _with_forward_hook,
    "training_flag": lambda m, x, o: (m.train(), x, o),
    "submodule_training_flag": _with_submodule_in_training,
    "conv_stride_attribute": lambda m, x, o: (small_cnn(stride=2), x, o),
    "class_code": lambda m, x, o: (_other_code_model(), x, o),
    "input_shape": lambda m, x, o: (m, torch.zeros(1, 3, 8, 8), o),
    "input_values": lambda m, x, o: (m, x + 1, o),
    "input_dtype": lambda m, x, o: (m, x.double(), o),
    "input_as_kwargs": lambda m, x, o: (m, {"x": x}, o),
    "exporter": lambda m, x, o: (m, x, ExportOptions(exporter="torchscript")),
    "opset": lambda m, x, o: (m, x, ExportOptions(opset=18)),
    "dynamic_axes": lambda m, x, o: (m, x, ExportOptions(dynamic_axes={"x": {0: "batch"}})),
    "input_names": lambda m, x, o: (m, x, ExportOptions(input_names=["images"])),
}


def _other_code_model() -> SmallCNN:
    torch.manual_seed(0)
    return SmallCNNOtherCode().eval()


def test_cache_key_is_stable_for_an_unchanged_model():
    first = cache_key(small_cnn(), example(), ExportOptions())
    assert first == cache_key(small_cnn(), example(), ExportOptions())
    assert first == cache_key(small_cnn(), (example(),), ExportOptions())  # x == (x,)
    assert len(first) == 64 and int(first, 16) >= 0


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_cache_key_changes_when_anything_that_shapes_the_export_changes(change):
    base = cache_key(small_cnn(), example(), ExportOptions())
    model, x, options = CHANGES[change](small_cnn(), example(), ExportOptions())
    assert cache_key(model, x, options) != base


def test_cache_key_sees_tied_weights():
    class Tied(torch.nn.Module):
        def __init__(self, tie: bool) -> None:
            super().__init__()
            self.a = torch.nn.Linear(4, 4, bias=False)
            self.b = torch.nn.Linear(4, 4, bias=False)
            with torch.no_grad():
                self.b.weight.copy_(self.a.weight)
            if tie:
                self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    torch.manual_seed(0)
    tied = cache_key(Tied(True), torch.ones(1, 4), ExportOptions())
    torch.manual_seed(0)
    untied = cache_key(Tied(False), torch.ones(1, 4), ExportOptions())
    assert tied != untied


def test_cache_key_follows_module_level_helpers_and_constants(monkeypatch):
    x = torch.ones(2, 2)
    base = cache_key(UsesHelper(), x, ExportOptions())
    assert cache_key(UsesHelper(), x, ExportOptions()) == base
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 3.0)
    scaled = cache_key(UsesHelper(), x, ExportOptions())
    assert scaled != base
    monkeypatch.setattr(sys.modules[__name__], "_scaled", lambda t: t * 3.0)
    assert cache_key(UsesHelper(), x, ExportOptions()) not in {base, scaled}


def test_cache_key_of_a_100mb_model_is_fast():
    model = torch.nn.Linear(5000, 5000)  # 100 MB of float32 weights
    start = time.perf_counter()
    cache_key(model, torch.ones(1, 5000), ExportOptions())
    assert time.perf_counter() - start < 5.0


# --------------------------------------------------------------------------- inputs


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_dict_inputs_are_keyword_arguments(tmp_path, exporter):
    model = TwoInputs().eval()
    inputs = {"y": torch.ones(2, 4), "x": torch.ones(2, 8)}
    result = export_model(model, inputs, ExportOptions(exporter=exporter), tmp_path)
    assert set(graph_inputs(result.path)) == {"x", "y"}
    assert graph_inputs(result.path)["x"] == [2, 8]


class DictArgument(torch.nn.Module):
    """A model whose only positional parameter is a dict of tensors."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 3), torch.nn.Linear(4, 3)

    def forward(self, inputs):
        return self.a(inputs["left"]) + self.b(inputs["right"])


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_a_dict_inside_a_tuple_is_a_positional_argument(tmp_path, exporter):
    """torch.onnx.export reads a dict that ends ``args`` as the keywords; a tuple of inputs is
    positional arguments (``_split_inputs``), so a dict in it is the model's own parameter."""
    ort = pytest.importorskip("onnxruntime")
    model = DictArgument().eval()
    inputs = {"left": torch.randn(2, 4), "right": torch.randn(2, 4)}
    result = export_model(model, (inputs,), ExportOptions(exporter=exporter), tmp_path)
    names = list(graph_inputs(result.path))
    assert len(names) == 2 and all(graph_inputs(result.path)[n] == [2, 4] for n in names)
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, dict(zip(names, (inputs["left"].numpy(), inputs["right"].numpy()))))
    assert torch.allclose(torch.from_numpy(got), model(inputs).detach(), atol=1e-5)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
@pytest.mark.parametrize(
    ("options", "batch", "input_name"),
    [
        (dict(dynamic_axes={"x": {0: "batch"}}), 1, "x"),
        (dict(dynamic_axes={"images": {0: "batch"}}, input_names=["images"]), 2, "images"),
    ],
    ids=["by-parameter-batch1", "by-input-name"],
)
def test_dynamic_axes_give_a_symbolic_dim(tmp_path, exporter, options, batch, input_name):
    ort = pytest.importorskip("onnxruntime")
    model = small_cnn()
    x = torch.randn(batch, 3, 8, 8)
    result = export_model(model, x, ExportOptions(exporter=exporter, **options), tmp_path)
    assert graph_inputs(result.path) == {input_name: ["batch", 3, 8, 8]}
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    (got,) = session.run(None, {input_name: torch.randn(3, 3, 8, 8).numpy()})
    assert got.shape == (3, 4)


@pytest.mark.parametrize("exporter", ["dynamo", "torchscript"])
def test_nested_and_varargs_inputs_are_named_alike_by_both_exporters(tmp_path, exporter):
    a = torch.ones(2, 4)
    axes = {name: {0: "n"} for name in ("pair_0", "pair_1", "rest_0")}
    options = ExportOptions(exporter=exporter, dynamic_axes=axes)
    result = export_model(PairAndVarargs(), ((a, a), a), options, tmp_path)
    assert graph_inputs(result.path) == {
        "pair_0": ["n", 4], "pair_1": ["n", 4], "rest_0": ["n", 4]
    }


def test_dynamic_axes_with_an_unknown_name_is_a_usage_error(tmp_path):
    options = ExportOptions(exporter="torchscript", dynamic_axes={"images": {0: "batch"}})
    with pytest.raises(ValueError, match="images"):
        export_model(small_cnn(), example(), options, tmp_path)
    assert cache_listing(tmp_path) == []


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    ("exporter", "model", "expected"),
    [
        ("dynamo", DataDependent(), "Could not guard on data-dependent expression"),
        ("dynamo", NoSymbolic(), "No ONNX function found for <OpOverload(op='prims.zeta'"),
        ("torchscript", NoSymbolic(), "Exporting the operator 'aten::special_zeta' to ONNX"),
    ],
    ids=["dynamo-data-dependent", "dynamo-no-onnx-function", "torchscript-no-symbolic"],
)
def test_export_failure_raises_export_error_and_leaves_nothing(
    tmp_path, capfd, caplog, exporter, model, expected
):
    capfd.readouterr()
    caplog.set_level("DEBUG")
    # other code in this process (a direct torch.onnx.export) may have left torch's ONNX log on;
    # what matters is that export_model leaves it as it found it
    log_was_enabled = torch._C._jit_is_onnx_log_enabled()
    with pytest.raises(ExportError) as info:
        export_model(model, torch.randn(4, 4), ExportOptions(exporter=exporter), tmp_path)
    err = info.value
    message = str(err)
    assert message.startswith(f"{exporter} exporter failed to export {__name__}.")
    assert type(model).__name__ in message
    assert expected in message
    assert "\x1b[" not in message  # ANSI colour codes stripped
    assert err.exporter == exporter and err.model_class.endswith(type(model).__name__)
    assert err.__cause__ is not None
    assert cache_listing(tmp_path) == []  # no entry, no tmp dir
    assert capfd.readouterr() == ("", "")  # the exporter's chatter went into err.output
    assert [r for r in caplog.records if not r.name.startswith("torch.__")] == []
    if exporter == "dynamo":
        assert "[torch.onnx]" in err.output
    assert torch._C._jit_is_onnx_log_enabled() == log_was_enabled


def test_export_failure_without_cache_dir_leaves_no_temp_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr("tempfile.tempdir", None)
    with pytest.raises(ExportError):
        export_model(NoSymbolic(), torch.randn(4, 4), ExportOptions(exporter="torchscript"))
    assert [p for p in tmp_path.iterdir() if p.name.startswith("npucheck-export-")] == []


def test_export_error_survives_pickling():
    import pickle

    err = ExportError("dynamo exporter failed", exporter="dynamo", model_class="m.C", output="o")
    copy = pickle.loads(pickle.dumps(err))
    assert (str(copy), copy.exporter, copy.model_class, copy.output) == (
        "dynamo exporter failed", "dynamo", "m.C", "o"
    )


# --------------------------------------------------------------------------- round two (issue 27)

_ACT_MODULE = '''
import torch


class Act:
    def __call__(self, x):
        return {body}
'''


class _Net(torch.nn.Module):
    """Holds an activation object it is given (its class is named nowhere in this code)."""

    def __init__(self, act):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.act = act

    def forward(self, x):
        return self.act(self.fc(x))


@pytest.mark.reliability("S8")
def test_cache_key_covers_the_code_of_callables_a_module_holds(tmp_path, monkeypatch):
    """Changing ``Act.__call__`` from relu to topk (Act is not a Module) kept the key: the cache hit
    gave the old [Gemm, Relu] export while a fresh export has TopK. Now the key changes, and the
    export is redone."""
    import importlib

    import onnx

    monkeypatch.syspath_prepend(str(tmp_path))
    src = tmp_path / "npucheck_act_model.py"
    src.write_text(_ACT_MODULE.format(body="torch.relu(x)"))
    mod = importlib.import_module("npucheck_act_model")
    x = torch.randn(1, 4)
    options = ExportOptions(exporter="torchscript")
    torch.manual_seed(0)
    net = _Net(mod.Act()).eval()
    relu_key = cache_key(net, x, options)
    first = export_model(net, x, options, cache_dir=tmp_path / "cache")
    src.write_text(_ACT_MODULE.format(body="torch.topk(x, 2).values"))
    mod = importlib.reload(mod)
    torch.manual_seed(0)
    net = _Net(mod.Act()).eval()
    assert cache_key(net, x, options) != relu_key
    second = export_model(net, x, options, cache_dir=tmp_path / "cache")
    assert not second.cache_hit and second.path != first.path
    assert "TopK" in {n.op_type for n in onnx.load(str(second.path)).graph.node}


def _scaler(k):
    def scale(x):
        return x * k
    return scale


class _Holder:
    def __init__(self, k):
        self.k = k

    def apply(self, x):
        return x * self.k


class _HoldsCallables(torch.nn.Module):
    def __init__(self, fn, extra=()):
        super().__init__()
        self.fn = fn
        self.extra = list(extra)

    def forward(self, x):
        for f in self.extra:
            x = f(x)
        return self.fn(x)


@pytest.mark.reliability("S8")
def test_cache_key_covers_closures_bound_methods_and_objects_in_containers():
    x = torch.ones(1, 2)
    key = lambda m: cache_key(m, x, ExportOptions())  # noqa: E731
    assert key(_HoldsCallables(_scaler(2))) == key(_HoldsCallables(_scaler(2)))
    assert key(_HoldsCallables(_scaler(2))) != key(_HoldsCallables(_scaler(3)))  # the closure's value
    assert key(_HoldsCallables(_Holder(2).apply)) != key(_HoldsCallables(_Holder(3).apply))  # the method's object
    assert key(_HoldsCallables(torch.relu, [_scaler(2)])) != key(_HoldsCallables(torch.relu, [_scaler(5)]))
