"""The file names of `--npu-keep-onnx` (pytest_npucheck/keep_onnx.py); the pytester runs are in
tests/acceptance/test_cli_keep_onnx.py."""

from __future__ import annotations

import pytest

from pytest_npucheck.errors import UsageError
from pytest_npucheck.keep_onnx import keep, kept_name


def test_names_are_safe_distinct_and_bounded():
    a = kept_name("tests/test_zoo.py::test_unet[cpu/1]")
    b = kept_name("tests/test_zoo.py::test_unet[cpu_1]")
    assert a.startswith("tests_test_zoo.py_test_unet_cpu_1-") and a != b  # alike once sanitized, kept apart
    assert all(c.isalnum() or c in "._-" for c in a)
    long = kept_name("t.py::test_" + "x" * 1000)
    assert len(long) < 140 and long != kept_name("t.py::test_" + "x" * 999)
    assert kept_name("t.py::test_m", 2) == kept_name("t.py::test_m") + "-call2"
    assert not kept_name("../../etc::x").startswith(".")


def test_keep_copies_the_model_and_its_external_data_not_the_cache_files(tmp_path):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    export = tmp_path / "cache" / "k1"
    export.mkdir(parents=True)
    w = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(1, 4096), "w")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 4096])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4096])], [w]))
    onnx.save(model, str(export / "model.onnx"))
    for cache_file in ("meta.json", "facts.json"):  # the export and facts caches' own files
        (export / cache_file).write_text("{}")
    dest = keep(export / "model.onnx", tmp_path / "kept", "t.py::test_a")
    assert dest == tmp_path / "kept" / f"{kept_name('t.py::test_a')}.onnx"
    assert dest.read_bytes() == (export / "model.onnx").read_bytes()
    onnx.save(model, str(export / "model.onnx"), save_as_external_data=True, location="weights.bin",
              size_threshold=0)
    dest = keep(export / "model.onnx", tmp_path / "kept", "t.py::test_a")
    assert dest == tmp_path / "kept" / kept_name("t.py::test_a") / "model.onnx"
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model.onnx", "weights.bin"]
    kept = onnx.load(str(dest))  # loads with its weights from the kept copy
    assert numpy_helper.to_array(kept.graph.initializer[0]).sum() == np.arange(4096).sum()
    assert not [p for p in (tmp_path / "kept").iterdir() if p.name.endswith(".tmp")]


def test_an_unusable_directory_is_a_usage_error_naming_it(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"x")
    blocker = tmp_path / "afile"
    blocker.write_text("")
    with pytest.raises(UsageError, match="npu_keep_onnx: cannot create the directory .*afile"):
        keep(tmp_path / "m.onnx", blocker / "sub", "t.py::test_a")
