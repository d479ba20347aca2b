"""`npucheck check` exit codes under broken input and crashes (issue 27, items 13 and 17).

A crash of npucheck itself exits 3 with the traceback and a hint to report it, never 1 (which is a
verdict); a bad external-data location is exit 2 naming the tensor, with and without isolation."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import make_model

from pytest_npucheck import cli, isolate

rel = pytest.mark.reliability


def _external_model(path, location: str):
    w = numpy_helper.from_array(np.ones((4, 4), np.float32), "w")
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    for key, value in (("location", location), ("offset", "0"), ("length", "64")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    onnx.save(make_model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")], [("x", (1, 4))], ["y"], [w]),
              path)
    return path


@pytest.fixture(params=[True, False], ids=["isolated", "in-process"])
def isolation(request):
    before = isolate.configure(enabled=request.param)
    yield request.param
    isolate.configure(enabled=before.enabled)


@rel("G13")
@pytest.mark.parametrize("location", ["a\x00b", "x" * 300], ids=["nul", "300-chars"])
def test_unusable_external_data_location_exits_2_with_or_without_isolation(tmp_path, capsys, isolation, location):
    path = _external_model(tmp_path / "m.onnx", location)
    code = cli.main(["check", str(path), "--target", "rknn@2.5.0/rk3588"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_USAGE, out + err
    assert "Traceback" not in err
    assert f"{path}: initializer 'w' external data location" in err, err


@rel("G13")
def test_the_isolated_static_check_raises_the_same_error_as_in_process(tmp_path, monkeypatch):
    """Whatever the child raises on a bad file comes back as the ModelError an in-process run gives."""
    from pytest_npucheck import check, graph
    from pytest_npucheck.errors import ModelError

    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y"]), path)

    def broken(*args, **kwargs):
        raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")

    monkeypatch.setattr(graph, "load_model_proto", broken)
    messages = []
    for enabled in (True, False):
        before = isolate.configure(enabled=enabled)
        try:
            with pytest.raises(ModelError) as info:
                check._isolated_facts(path)
        finally:
            isolate.configure(enabled=before.enabled)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "malformed ONNX model" in messages[0] and str(path) in messages[0]


@rel("G17")
def test_a_crash_exits_3_with_the_traceback_never_1(tmp_path, capsys, monkeypatch):
    from pytest_npucheck import check

    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y"]), path)

    def bug(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for +: 'int' and 'NoneType'")

    monkeypatch.setattr(check, "check_graph", bug)
    code = cli.main(["check", str(path), "--target", "rknn@2.5.0/rk3588"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_INTERNAL == 3
    assert "Traceback (most recent call last)" in err and "TypeError: unsupported operand" in err
    assert "internal error" in err and "not a verdict" in err and "report it" in err
    assert out == ""


def test_exit_codes_are_in_the_help(capsys):
    for argv in (["--help"], ["check", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = " ".join(capsys.readouterr().out.split())
        assert "3 internal error" in text and "1 a node falls back" in text and "2 usage or input error" in text


@rel("G11")
def test_a_deeply_nested_table_exits_2_naming_the_file(tmp_path, capsys):
    import shutil

    from conftest import TOY_TABLES

    root = tmp_path / "tables"
    shutil.copytree(TOY_TABLES, root)
    table = root / "toy" / "1.0" / "soc-a.json"
    table.write_text("[" * 200_000)
    path = tmp_path / "m.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"], name="r")], [("x", (1, 4))], ["y"]), path)
    code = cli.main(["--tables", str(root), "check", str(path), "--target", "toy@1.0/soc-a"])
    out, err = capsys.readouterr()
    assert code == cli.EXIT_USAGE, out + err
    assert str(table) in err and "nested too deeply" in err and "Traceback" not in err
