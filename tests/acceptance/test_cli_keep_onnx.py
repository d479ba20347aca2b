"""`--npu-keep-onnx DIR` / ini `npu_keep_onnx` (issue 26 item 5): the export of each marked test is
kept under a name made from its test id, the same with and without pytest-xdist."""

from __future__ import annotations

import onnx
import pytest

from conftest import TOY_TABLES

from pytest_npucheck.keep_onnx import kept_name

pytestmark = pytest.mark.usefixtures("heavy_modules_loaded")

SUITE = """
import pytest, torch

class Net(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op
    def forward(self, x):
        return self.op(x)

@pytest.mark.npu_deployable(targets=["toy@1.0", "toy@1.1/soc-b"], exporter="torchscript", numerics=False)
@pytest.mark.parametrize("op", ["relu", "sig/moid"])
def test_m(npu_check, op):
    npu_check(Net(torch.relu if op == "relu" else torch.sigmoid), torch.randn(1, 4))

@pytest.mark.npu_deployable(targets=["toy@1.0"], exporter="torchscript", numerics=False)
def test_twice(npu_check):
    npu_check(Net(torch.relu), torch.randn(1, 4))
    npu_check(Net(torch.tanh), torch.randn(1, 4))
"""

IDS = {"test_keep.py::test_m[relu]": "Relu", "test_keep.py::test_m[sig/moid]": "Sigmoid",
       "test_keep.py::test_twice": "Relu"}


def _kept(where):
    files = sorted(p.name for p in where.iterdir())
    expected = sorted([f"{kept_name(n)}.onnx" for n in IDS] + [f"{kept_name('test_keep.py::test_twice', 2)}.onnx"])
    assert files == expected, files
    for nodeid, op in IDS.items():
        model = onnx.load(str(where / f"{kept_name(nodeid)}.onnx"))
        onnx.checker.check_model(model)
        assert [n.op_type for n in model.graph.node] == [op]
    second = onnx.load(str(where / f"{kept_name('test_keep.py::test_twice', 2)}.onnx"))
    assert [n.op_type for n in second.graph.node] == ["Tanh"]
    return {name: (where / name).read_bytes() for name in files}


@pytest.mark.without_xdist(reason="it compares a plain run with a -n 2 run itself")
def test_keep_onnx_with_and_without_xdist(pytester):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:randomly\n")
    pytester.makepyfile(test_keep=SUITE)
    res = pytester.runpytest_subprocess("--npu-keep-onnx", "kept")
    assert res.ret == 0, res.stdout.str()[-3000:]
    serial = _kept(pytester.path / "kept")
    res = pytester.runpytest_subprocess("--npu-keep-onnx", "kept2", "-n", "2")
    assert res.ret == 0, res.stdout.str()[-3000:]
    assert _kept(pytester.path / "kept2") == serial  # the same files, byte for byte, from two workers


def test_ini_key_relative_to_the_ini_file_and_a_bad_dir_fails_naming_it(pytester):
    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:randomly\nnpu_keep_onnx = out/onnx\n")
    pytester.makepyfile(test_keep=SUITE)
    res = pytester.runpytest_subprocess("test_keep.py")
    assert res.ret == 0, res.stdout.str()[-3000:]
    _kept(pytester.path / "out" / "onnx")
    (pytester.path / "blocker").write_text("")
    res = pytester.runpytest_subprocess("test_keep.py", "--npu-keep-onnx", "blocker/sub")
    assert res.ret == pytest.ExitCode.TESTS_FAILED
    assert "npu_keep_onnx: cannot create the directory" in res.stdout.str() and "blocker" in res.stdout.str()
