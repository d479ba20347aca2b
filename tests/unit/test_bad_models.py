"""Legacy and malformed inputs the static check must judge right, or refuse with a clear error.

* an attribute a later opset added takes the default of the newest schema that has it (D9);
* a negative dim is invalid ONNX: an unknown dim, never a size (D8);
* an initializer whose raw_data does not hold dims x dtype bytes is refused, as ONNX Runtime
  refuses it (D7);
* `npucheck tables validate FILE` checks the file against its location, as the directory form does
  (D12).

Every model is a real ONNX file built with onnx.helper; every table a copy of a bundled one.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from pytest_npucheck import graph
from pytest_npucheck.check import check_file
from pytest_npucheck.cli import main
from pytest_npucheck.errors import ModelError, TableError
from pytest_npucheck.partition import node_macs
from pytest_npucheck.tables import Catalog, bundled_tables_dir

TARGET = "rknn@2.5.0/rk3588"
V = helper.make_tensor_value_info


@pytest.fixture(scope="module")
def catalog():
    return Catalog.discover()


def _model(nodes, inputs, outputs, initializers=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


def _save(tmp_path, model, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return path


def _cli(capsys, *args):
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


# -- D9: attributes a later opset added ------------------------------------------------------------

def _avgpool(opset, size=8, **attrs):
    node = helper.make_node("AveragePool", ["x"], ["y"], name="ap", kernel_shape=[2, 2], strides=[2, 2], **attrs)
    out = -(-size // 2) if attrs.get("ceil_mode") else size // 2
    return _model([node], [V("x", TensorProto.FLOAT, [1, 3, size, size])],
                  [V("y", TensorProto.FLOAT, [1, 3, out, out])], opset=opset)


@pytest.mark.parametrize("opset", [7, 8, 9])
def test_ceil_mode_before_opset_10_is_floor(tmp_path, catalog, opset):
    """ceil_mode came with AveragePool-10 (default 0, floor): before, the output was always floored."""
    path = _save(tmp_path, _avgpool(opset))
    [node] = graph.load_graph(path).nodes
    assert node.attrs["ceil_mode"] == 0 and "ceil_mode" not in node.explicit_attrs
    [res] = check_file(path, [TARGET], catalog)  # the rknn table requires ceil_mode 0
    assert res.passed, [r.message for n in res.nodes for r in n.reasons]


def test_explicit_ceil_mode_is_still_judged(tmp_path, catalog):
    # 9 x 9: ceil_mode=1 leaves a partial last window, which the rknn table sends to the CPU
    # (with whole windows, 8 x 8, ceil_mode changes nothing and the pool runs on the NPU)
    [res] = check_file(_save(tmp_path, _avgpool(10, size=9, ceil_mode=1)), [TARGET], catalog)
    assert not res.passed
    assert any("ceil_mode=1" in r.message for n in res.nodes for r in n.reasons)


def test_the_node_opset_schema_keeps_its_own_defaults(tmp_path):
    """An attribute the node's schema has keeps that schema's default, not a later one:
    Softmax's axis is 1 up to opset 12 and -1 from 13."""
    def softmax_axis(opset):
        m = _model([helper.make_node("Softmax", ["x"], ["y"], name="sm")], [V("x", TensorProto.FLOAT, [2, 3])],
                   [V("y", TensorProto.FLOAT, [2, 3])], opset=opset)
        return graph.load_graph(_save(tmp_path, m, f"sm{opset}.onnx")).nodes[0].attrs["axis"]

    assert (softmax_axis(11), softmax_axis(13)) == (1, -1)


def test_later_attribute_where_onnx_changed_the_old_behaviour(tmp_path):
    """Resize-10 resizes as 'asymmetric' and RoiAlign-10 as 'output_half_pixel' (what ONNX Runtime runs),
    not as the later default 'half_pixel'; Resize-10's nearest rounding is none of the later modes."""
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "s")
    resize = _model([helper.make_node("Resize", ["x", "s"], ["y"], name="rs", mode="nearest")],
                    [V("x", TensorProto.FLOAT, [1, 3, 4, 4])], [V("y", TensorProto.FLOAT, [1, 3, 8, 8])], [scales],
                    opset=10)
    [node] = graph.load_graph(_save(tmp_path, resize, "rs.onnx")).nodes
    assert node.attrs["coordinate_transformation_mode"] == "asymmetric"
    assert "nearest_mode" not in node.attrs
    assert node.attrs["exclude_outside"] == 0  # the convention holds for the others
    roi = _model([helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], name="ra")],
                 [V("x", TensorProto.FLOAT, [1, 3, 8, 8]), V("rois", TensorProto.FLOAT, [2, 4]),
                  V("idx", TensorProto.INT64, [2])], [V("y", TensorProto.FLOAT, [2, 3, 1, 1])], opset=10)
    [node] = graph.load_graph(_save(tmp_path, roi, "ra.onnx")).nodes
    assert node.attrs["coordinate_transformation_mode"] == "output_half_pixel"


# -- D8: negative dims -----------------------------------------------------------------------------

def _negconv(tmp_path):
    w = numpy_helper.from_array(np.ones((4, 3, 3, 3), np.float32), "w")
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0", pads=[1, 1, 1, 1])],
               [V("x", TensorProto.FLOAT, [-5, 3, 8, 8])], [V("y", TensorProto.FLOAT, [-5, 4, 8, 8])], [w])
    return _save(tmp_path, m, "negconv.onnx")


def test_negative_dim_is_unknown_not_a_size(tmp_path, capsys):
    path = _negconv(tmp_path)
    facts = graph.load_graph(path)
    assert facts.tensor("x").shape == (None, 3, 8, 8) and not facts.tensor("x").static
    assert facts.tensor("y").shape[0] == graph.DYNAMIC_DIM  # it follows the input's unknown dim: dynamic
    assert graph.tensor_bytes(facts.tensor("x")) is None
    code, out, _ = _cli(capsys, "check", path, "-t", TARGET, "--format", "json", "--no-fixes")
    doc = json.loads(out)["files"][0]["targets"][0]
    assert doc["model"]["inputs"]["x"]["shape"] == [None, 3, 8, 8]
    assert doc["partition"]["macs"] >= 0 and doc["partition"]["macs_npu"] >= 0  # the report schema: macs >= 0
    assert code == 1 and any("is dynamic" in r["message"] for r in doc["nodes"][0]["reasons"])  # rknn: static shapes


def test_negative_dims_of_a_constant_give_no_negative_size(tmp_path):
    """A weight with a negative dim and no data (ONNX Runtime refuses it) is still read: its size and
    the MACs of its Conv are never negative."""
    w = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4, -3, 3, 3])
    m = _model([helper.make_node("Conv", ["x", "w"], ["y"], name="conv0", pads=[1, 1, 1, 1])],
               [V("x", TensorProto.FLOAT, [1, 3, 8, 8])], [V("y", TensorProto.FLOAT, [1, 4, 8, 8])], [w])
    facts = graph.load_graph(_save(tmp_path, m))
    assert graph.tensor_bytes(facts.tensor("w")) is None
    assert node_macs(facts.nodes[0], facts) >= 0


# -- D7: raw_data that does not hold dims x dtype --------------------------------------------------

def _add_with(tmp_path, w, name="bad.onnx"):
    shape = list(w.dims)
    m = _model([helper.make_node("Add", ["x", "w"], ["y"], name="add0")], [V("x", TensorProto.FLOAT, shape)],
               [V("y", TensorProto.FLOAT, shape)], [w])
    return _save(tmp_path, m, name)


def _raw(name, dims, nbytes, dtype=TensorProto.FLOAT):
    return TensorProto(name=name, data_type=dtype, dims=dims, raw_data=b"\x01" * nbytes)


@pytest.mark.parametrize("dims, nbytes, need", [
    ([1, 4], 8, 16),            # small: its values are read (_small_initializers)
    ([1, 4], 20, 16),           # longer than its dims
    ([16, 32], 100, 2048),      # large, and short enough to be kept whole by the light read
    ([16, 32], 2000, 2048),     # large: its values are left out before parsing (_without_weights)
    ([16, 32], 3000, 2048),
])
def test_raw_data_of_the_wrong_size_is_refused(tmp_path, capsys, dims, nbytes, need):
    path = _add_with(tmp_path, _raw("weight_7", dims, nbytes))
    with pytest.raises(ModelError) as exc:
        graph.load_graph(path)
    text = str(exc.value)
    assert str(path) in text and "'weight_7'" in text and f"{nbytes} bytes" in text and f"{need} bytes" in text
    code, _, err = _cli(capsys, "check", path, "-t", TARGET)
    assert code == 2 and "'weight_7'" in err and f"{nbytes} bytes" in err


def test_raw_data_of_the_right_size_and_other_dtypes_pass(tmp_path):
    for i, (dims, dtype, nbytes) in enumerate([([1, 4], TensorProto.FLOAT, 16), ([16, 32], TensorProto.FLOAT, 2048),
                                               ([16, 32], TensorProto.FLOAT16, 1024)]):
        path = _add_with(tmp_path, _raw("w", dims, nbytes, dtype), f"ok{i}.onnx")
        assert graph.load_graph(path).tensor("w").shape == tuple(dims)


# -- D12: a table file checked against its location ------------------------------------------------

def _table_copy(tmp_path, where, **changes):
    data = json.loads((bundled_tables_dir() / "rknn" / "2.5.0" / "rk3588.json").read_text())
    data.update(changes)
    path = tmp_path.joinpath(*where)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("where, changes, field", [
    (("rknn", "2.5.0", "rk3588.json"), {"version": "2.6.0"}, "version"),
    (("rknn", "2.5.0", "rk3588.json"), {"soc": "rk3566"}, "soc"),
    (("qnn", "2.5.0", "rk3588.json"), {}, "toolchain"),
])
def test_table_file_is_checked_against_its_location(tmp_path, capsys, where, changes, field):
    path = _table_copy(tmp_path, where, **changes)
    code, out, err = _cli(capsys, "tables", "validate", path)
    assert code == 2 and "all tables valid" not in out
    assert f"$.{field}:" in err and "does not match its location" in err
    directory = Catalog.discover([tmp_path])  # the directory form finds the same problems
    [ref] = [r for r in directory.refs.values() if r.root == tmp_path]
    with pytest.raises(TableError) as exc:
        directory.load(ref, full=True)
    assert err.splitlines() == [f"{path}: {problem}" for problem in exc.value.problems]


def test_table_file_in_its_place_or_outside_a_table_layout_is_valid(tmp_path, capsys):
    """A copy where it belongs, and copies where no known toolchain names a location, validate."""
    for where in (("mine.json",), ("rknn", "2.5.0", "rk3588.json"), ("work", "2.6.0", "other.json")):
        code, out, err = _cli(capsys, "tables", "validate", _table_copy(tmp_path, where))
        assert (code, err) == (0, "") and "all tables valid" in out
