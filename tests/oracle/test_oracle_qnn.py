"""Tests for the onnxruntime-qnn (QNN HTP emulation) oracle adapter.

The parsing/mapping tests run everywhere.  The end-to-end tests need a python with
onnxruntime-qnn installed (``scripts/setup-qnn-venv.sh``), named by ``NPUCHECK_QNN_PYTHON``;
they are skipped otherwise.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pytest_npucheck.toolchains.qnn import adapter as oracle

# --------------------------------------------------------------------------------------------
# log parsing and placement mapping (no QNN needed)
# --------------------------------------------------------------------------------------------

P = "2026-01-01 10:00:00.000000000 [V:onnxruntime:, qnn_execution_provider.cc:1 GetCapability] "
SAMPLE_LOG = "\n".join([
    P + "GetCapability pass 1 (pre-Layout-Transform)",
    P + "Backend build version: v2.51.0.260929181845",
    P + "/x/libQnnHtp.so interface version: 2.40.0",
    P + "Validation PASSED for 1 nodes in OrtNodeUnit (Conv) :",
    "\tOperator type: Conv Node name: conv Node index: 0",
    P + "Validation FAILED for 1 nodes in OrtNodeUnit (Erf) :",
    "\tOperator type: Erf Node name: /blk/erf Node index: 1",
    "\tREASON : Operators of type `Erf` are not supported by QNN EP.",
    P + "Validation FAILED for 2 nodes in OrtNodeUnit (Gelu) :",
    "\tOperator type: Div Node name: d Node index: 4",
    "\tOperator type: Mul Node name: m Node index: 5",
    "\tREASON : Failed to add node.",
    P + "GetCapability pass 2 (post-Layout-Transform)",
    P + "Validation PASSED for 1 nodes in OrtNodeUnit (Conv) :",
    "\tOperator type: Conv Node name: conv_token_1 Node index: 7",
    "\x1b[0;93m" + P.replace("[V:", "[W:") + "something\x1b[m",
    P + "Node placements",
    P + " Node(s) placed on [QNNExecutionProvider]. Number of nodes: 2",
    P + " Node(s) placed on [CPUExecutionProvider]. Number of nodes: 1",
])


def test_parse_validations() -> None:
    vs = oracle.parse_validations(SAMPLE_LOG)
    assert [(v.passed, v.op_type, v.name, v.index, v.pass_no) for v in vs] == [
        (True, "Conv", "conv", 0, 1), (False, "Erf", "/blk/erf", 1, 1),
        (False, "Div", "d", 4, 1), (False, "Mul", "m", 5, 1), (True, "Conv", "conv_token_1", 7, 2)]
    assert vs[1].reason.startswith("Operators of type `Erf`")
    assert vs[2].reason == vs[3].reason == "Failed to add node."  # one reason per node unit
    assert vs[2].unit == "Gelu"


def test_parse_versions_and_summary() -> None:
    assert oracle.parse_backend_version(SAMPLE_LOG) == ("2.51.0", "2.51.0.260929181845", "2.40.0")
    assert oracle.parse_backend_version("nothing") == (None, None, None)
    assert oracle.parse_placement_summary(SAMPLE_LOG) == {"QNNExecutionProvider": 2,
                                                          "CPUExecutionProvider": 1}


def _n(name: str, op: str, ins: list[str], outs: list[str]) -> dict[str, object]:
    return {"name": name, "op_type": op, "inputs": ins, "outputs": outs}


def test_map_placement() -> None:
    nodes = [
        _n("c_add", "Add", ["k1", "k2"], ["c"]),          # constant-folded
        _n("conv", "Conv", ["x", "w"], ["y"]),            # renamed by the layout transform
        _n("bn", "BatchNormalization", ["y", "s", "b", "m", "v"], ["z"]),  # fused into conv
        _n("id", "Identity", ["z"], ["z2"]),              # eliminated
        _n("mm", "MatMul", ["z2", "c"], ["p"]),           # fused into mm/MatMulAddFusion
        _n("bias", "Add", ["p", "bvec"], ["q"]),
        _n("erf", "Erf", ["q"], ["r"]),                   # CPU
        _n("tp", "Transpose", ["r"], ["out"]),            # in no partition
    ]
    l1 = {"nodes": [_n("conv", "Conv", ["x", "w"], ["z"]),
                    _n("mm/MatMulAddFusion", "Gemm", ["z", "c", "bvec"], ["q"]),
                    _n("erf", "Erf", ["q"], ["r"]),
                    _n("tp", "Transpose", ["r"], ["out"])],
          "initializers": ["w", "c", "bvec"]}
    assignment = [
        {"ep": "QNNExecutionProvider", "nodes": [
            {"name": "Transpose", "op_type": "Transpose"},
            {"name": "conv_token_1", "op_type": "Conv", "domain": "com.ms.internal.nhwc"},
            {"name": "mm/MatMulAddFusion", "op_type": "Gemm"}]},
        {"ep": "CPUExecutionProvider", "nodes": [{"name": "erf", "op_type": "Erf"}]},
    ]
    vs = oracle.parse_validations(P + "Validation FAILED for 1 nodes in OrtNodeUnit (Erf) :\n"
                                  "\tOperator type: Erf Node name: erf Node index: 2\n"
                                  "\tREASON : no Erf\n")
    m = oracle.map_placement(nodes, assignment, l1, vs)
    assert m["placement"] == {"c_add": "folded", "conv": "npu", "bn": "npu", "id": "folded",
                              "mm": "npu", "bias": "npu", "erf": "cpu", "tp": "removed"}
    assert "constant-folded" in m["via"]["c_add"]
    assert "eliminated" in m["via"]["id"]
    assert m["via"]["conv"] == "placed as conv_token_1"
    assert m["via"]["bn"].startswith("fused into conv (Conv)")
    assert m["via"]["mm"] == "fused into mm/MatMulAddFusion (Gemm)"
    assert m["reasons"] == {"erf": ["no Erf"]}
    assert m["helpers"] == {"QNNExecutionProvider": ["Transpose:Transpose"]}


def test_map_placement_a_removed_node_of_a_cpu_island_is_the_cpu_helper_that_replaced_it() -> None:
    """onnxruntime moves the second Transpose of a Conformer convolution module on a data-dependent
    length after partitioning: the ONNX node is in no partition and a new Transpose runs on the CPU
    (probe q.Transpose.ctx=cpu_island.conv_module.datadep). The node counts as that CPU op; a removed
    Transpose between NPU nodes (a Transpose pair the layout transformation cancels) and one with no CPU
    helper left stay removed."""
    nodes = [_n("rows", "Gather", ["x", "i"], ["h"]),
             _n("t_in", "Transpose", ["h"], ["t"]),
             _n("conv", "Conv", ["t", "w"], ["c"]),
             _n("t_out", "Transpose", ["c"], ["b"]),
             _n("res", "Add", ["b", "h"], ["r"]),
             _n("t_cpu2", "Transpose", ["r"], ["r2"]),
             _n("sig", "Sigmoid", ["r2"], ["s"]),
             _n("relu", "Relu", ["s"], ["u"]),
             _n("t_npu", "Transpose", ["u"], ["v"]),
             _n("tanh", "Tanh", ["v"], ["out"])]
    l1 = {"nodes": [dict(n) for n in nodes], "initializers": ["w", "i"]}
    assignment = [{"ep": "CPUExecutionProvider", "nodes": [{"name": n, "op_type": "x"} for n in (
        "rows", "t_in", "conv", "res", "sig")] + [{"name": "Transpose_token_3", "op_type": "Transpose"}]},
        {"ep": "QNNExecutionProvider", "nodes": [{"name": "relu", "op_type": "Relu"},
                                                 {"name": "tanh", "op_type": "Tanh"}]}]
    m = oracle.map_placement(nodes, assignment, l1)
    assert m["placement"]["t_out"] == "cpu"
    assert "replaced by the CPU helper Transpose_token_3" in m["via"]["t_out"]
    # one helper, two candidates: the first in graph order takes it; a Transpose between NPU nodes stays removed
    assert (m["placement"]["t_cpu2"], m["placement"]["t_npu"]) == ("removed", "removed")
    assert oracle.onnx_placement(oracle.QnnResult(key="k", path="m.onnx", status="ok", placement=m["placement"]))["t_out"] == "cpu"
    assert oracle.cpu_helper_replacements(nodes, m["placement"] | {"t_out": "removed"}, {}) == {}


def test_map_placement_a_removed_node_whose_reader_stays_was_eliminated() -> None:
    """An RMSNorm's head Cast to its own dtype: onnxruntime removes it (its readers read its
    input) and fuses the Mul it feeds into the Div (DivMulFusion). A reader of the removed node
    is still in the optimized graph, so the Cast was eliminated, not fused into what its other
    reader became (probe q.Cast.ctx=same_type.rmsnorm.*); a merged duplicate likewise."""
    nodes = [_n("relu", "Relu", ["x"], ["a"]),
             _n("cast", "Cast", ["a"], ["b"]),                # removed: pow reads a
             _n("pow", "Pow", ["b", "two"], ["p"]),
             _n("inv", "Div", ["one", "p"], ["i"]),
             _n("mul", "Mul", ["b", "i"], ["m"]),             # fused into inv
             _n("dup", "Relu", ["x"], ["a2"]),                # merged into relu
             _n("sig", "Sigmoid", ["a2"], ["s"]),             # merged into sig0
             _n("sig0", "Sigmoid", ["a"], ["s0"]),
             _n("add", "Add", ["s", "m"], ["o1"]),
             _n("add0", "Add", ["s0", "o1"], ["out"])]
    l1 = {"nodes": [_n("relu", "Relu", ["x"], ["a"]), _n("pow", "Pow", ["a", "two"], ["p"]),
                    _n("inv", "Div", ["a", "p"], ["m"]), _n("sig0", "Sigmoid", ["a"], ["s0"]),
                    _n("add", "Add", ["s0", "m"], ["o1"]), _n("add0", "Add", ["s0", "o1"], ["out"])],
          "initializers": ["two", "one"]}
    assignment = [{"ep": "QNNExecutionProvider", "nodes": [
        {"name": n, "op_type": "x"} for n in ("relu", "pow", "inv", "sig0", "add", "add0")]}]
    m = oracle.map_placement(nodes, assignment, l1)
    assert m["placement"] == {"relu": "npu", "cast": "folded", "pow": "npu", "inv": "npu", "mul": "npu",
                              "dup": "folded", "sig": "folded", "sig0": "npu", "add": "npu", "add0": "npu"}
    assert m["via"]["cast"] == m["via"]["dup"] == m["via"]["sig"] == "eliminated by onnxruntime before partitioning"
    assert m["via"]["mul"] == "fused into inv (Div)"


def test_map_placement_a_noop_expand_between_merged_reshapes_is_eliminated_not_fused(tmp_path) -> None:
    """MViTv2's rel-pos bias (timm mvitv2_tiny, TorchScript): Reshape -> Expand to its own shape -> Reshape.
    onnxruntime's ExpandElimination removes the Expand, then ReshapeFusion merges the two Reshapes into a new one
    on the CPU (q.Reshape.ctx=merged.r6.noop_expand; with ExpandElimination disabled the Expand stays and nothing
    merges). The Expand ran nowhere: folded, while the Reshape after it is fused into the CPU Reshape."""
    from onnx import helper, numpy_helper, save
    import numpy as np

    nodes = [_n("back", "Reshape", ["x", "t1"], ["r"]),
             _n("noop_expand", "Expand", ["r", "own"], ["e"]),
             _n("focus_reshape", "Reshape", ["e", "t2"], ["y"])]
    l1 = {"nodes": [_n("back_new_reshape", "Reshape", ["x", "t3"], ["y"])],
          "initializers": ["t3"], "inputs": ["x"]}
    assignment = [{"ep": "CPUExecutionProvider", "nodes": [{"name": "back_new_reshape", "op_type": "Reshape"}]}]
    before = oracle.map_placement(nodes, assignment, l1)
    assert before["placement"]["noop_expand"] == "cpu"  # walked to the CPU Reshape its reader became
    m = oracle.map_placement(nodes, assignment, l1, noops={"noop_expand"})
    assert m["placement"] == {"back": "cpu", "noop_expand": "folded", "focus_reshape": "cpu"}
    assert m["via"]["noop_expand"] == "eliminated by onnxruntime before partitioning"
    # which Expands are no-ops: the facts' static shapes of the file (an Expand that widens is not)
    inits = [numpy_helper.from_array(np.array(v, dtype=np.int64), k)
             for k, v in (("t1", [2, 3, 4]), ("own", [2, 3, 4]), ("wide", [2, 2, 3, 4]), ("t2", [6, 4]))]
    model = helper.make_model(helper.make_graph(
        [helper.make_node("Reshape", ["x", "t1"], ["r"], name="back"),
         helper.make_node("Expand", ["r", "own"], ["e"], name="noop_expand"),
         helper.make_node("Expand", ["r", "wide"], ["w"], name="widen"),
         helper.make_node("Reshape", ["e", "t2"], ["y"], name="focus_reshape")], "g",
        [helper.make_tensor_value_info("x", 1, [24])],
        [helper.make_tensor_value_info("y", 1, None), helper.make_tensor_value_info("w", 1, None)], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    save(model, tmp_path / "m.onnx")
    file_nodes = [_n(n.name, n.op_type, list(n.input), list(n.output)) for n in model.graph.node]
    assert oracle.noop_expands(tmp_path / "m.onnx", file_nodes, l1) == {"noop_expand"}
    # nothing vanished: the file is not read
    assert oracle.noop_expands(tmp_path / "missing.onnx", file_nodes, {"nodes": file_nodes}) == set()


def test_map_placement_a_folded_shape_computation_is_folded_when_a_fusion_took_its_value() -> None:
    """Twins-SVT's window attention (timm twins_svt_small, TorchScript): the target of the Reshape after
    the qkv MatMul is computed from the Shape of a Pad whose pads are constants. onnxruntime folds the
    chain (the same Cast also feeds an earlier Reshape target, which stays an initializer), then merges
    MatMulAddFusion's Reshape back with that Reshape into a new one with a new constant target. The
    shape chain ran at load time: folded, not "fused into" the CPU Reshape; the Add is fused into it."""
    nodes = [_n("pad", "Pad", ["x", "pads"], ["p"]),
             _n("shape", "Shape", ["p"], ["s"]),
             _n("gather", "Gather", ["s", "i1"], ["h"]),
             _n("div", "Div", ["h", "seven"], ["d"]),
             _n("cast", "Cast", ["d"], ["c"]),
             _n("unsq", "Unsqueeze", ["c", "ax"], ["u"]),
             _n("concat", "Concat", ["one", "u", "seven1"], ["t1"]),    # folded: its value stays
             _n("rs", "Reshape", ["p", "t1"], ["r"]),
             _n("mm", "MatMul", ["r", "w"], ["m"]),
             _n("add", "Add", ["b", "m"], ["a"]),
             _n("mul", "Mul", ["c", "c"], ["cc"]),                      # folded too (constant inputs)
             _n("unsq2", "Unsqueeze", ["cc", "ax"], ["u2"]),
             _n("concat2", "Concat", ["one", "u2", "k"], ["t2"]),
             _n("rs2", "Reshape", ["a", "t2"], ["out"])]
    l1 = {"nodes": [_n("pad", "Pad", ["x", "pads"], ["p"]),
                    _n("rs", "Reshape", ["p", "t1"], ["r"]),
                    _n("gemm_input_reshape", "Reshape", ["r", "gs"], ["g"]),
                    _n("mm/MatMulAddFusion", "Gemm", ["g", "w", "b"], ["ga"]),
                    _n("gemm_output_reshape_new_reshape", "Reshape", ["ga", "new_shape"], ["out"])],
          "initializers": ["pads", "t1", "gs", "w", "b", "new_shape"], "inputs": ["x"]}
    assignment = [{"ep": "QNNExecutionProvider", "nodes": [
        {"name": n, "op_type": "x"} for n in ("pad", "rs", "gemm_input_reshape", "mm/MatMulAddFusion")]},
        {"ep": "CPUExecutionProvider", "nodes": [{"name": "gemm_output_reshape_new_reshape",
                                                  "op_type": "Reshape"}]}]
    m = oracle.map_placement(nodes, assignment, l1)
    assert m["placement"] == {"pad": "npu", "shape": "folded", "gather": "folded", "div": "folded",
                              "cast": "folded", "unsq": "folded", "concat": "folded", "rs": "npu",
                              "mm": "npu", "add": "cpu", "mul": "folded", "unsq2": "folded",
                              "concat2": "folded", "rs2": "cpu"}
    assert m["via"]["shape"] == m["via"]["concat2"] == "constant-folded by onnxruntime before partitioning"
    assert m["via"]["add"] == "fused into gemm_output_reshape_new_reshape (Reshape)"
    # without the graph inputs nothing tells an initializer from data: only what reaches a folded value
    m2 = oracle.map_placement(nodes, assignment, {k: v for k, v in l1.items() if k != "inputs"})
    assert (m2["placement"]["cast"], m2["placement"]["concat2"]) == ("folded", "cpu")


def test_map_placement_prefers_own_name_and_folds_constants() -> None:
    """A function op the CPU-only optimized graph inlined, but the QNN EP took whole, is
    placed by its own name; a Constant node is data."""
    nodes = [_n("k", "Constant", [], ["c"]), _n("hsw", "HardSwish", ["x"], ["y"]),
             _n("mul", "Mul", ["y", "c"], ["z"])]
    l1 = {"nodes": [_n("", "HardSigmoid", ["x"], ["h"]), _n("", "Mul", ["x", "h"], ["y"]),
                    _n("mul", "Mul", ["y", "c2"], ["z"])], "initializers": ["c2"]}
    assignment = [{"ep": "QNNExecutionProvider", "nodes": [
        {"name": "hsw", "op_type": "HardSwish"}]},
        {"ep": "CPUExecutionProvider", "nodes": [{"name": "mul", "op_type": "Mul"}]}]
    m = oracle.map_placement(nodes, assignment, l1)
    assert m["placement"] == {"k": "folded", "hsw": "npu", "mul": "cpu"}


def test_map_placement_int8_session_nodes() -> None:
    nodes = [_n("relu", "Relu", ["x"], ["y"])]
    sess = [_n("x_q", "QuantizeLinear", ["x", "s", "z"], ["xq"]),
            _n("x_dq", "DequantizeLinear", ["xq", "s", "z"], ["xd"]),
            _n("relu", "Relu", ["xd"], ["y0"]),
            _n("y_q", "QuantizeLinear", ["y0", "s", "z"], ["yq"]),
            _n("y_dq", "DequantizeLinear", ["yq", "s", "z"], ["y"])]
    assignment = [{"ep": "QNNExecutionProvider", "nodes": [
        {"name": n["name"], "op_type": n["op_type"]} for n in sess]}]
    m = oracle.map_placement(nodes, assignment, {"nodes": sess, "initializers": ["s", "z"]},
                             session_nodes=sess)
    assert m["placement"] == {"relu": "npu"}
    assert sorted(m["helpers"]["QNNExecutionProvider"]) == [
        "x_dq:DequantizeLinear", "x_q:QuantizeLinear", "y_dq:DequantizeLinear",
        "y_q:QuantizeLinear"]


def test_onnx_placement_for_compare() -> None:
    ok = oracle.QnnResult(key="m", path="m.onnx", status="ok",
                          placement={"a": "npu", "b": "cpu", "c": "folded", "d": "removed"})
    assert oracle.onnx_placement(ok) == {"a": "npu", "b": "cpu", "c": "npu", "d": "npu"}
    bad = oracle.QnnResult(key="m", path="m.onnx", status="session_failed",
                           op_types={"a": "Relu", "b": "Erf"})
    assert oracle.onnx_placement(bad) == {"a": "unsupported", "b": "unsupported"}


def test_provider_options() -> None:
    assert oracle.provider_options(73) == {"htp_arch": "73", "soc_model": "43",
                                           "enable_htp_fp16_precision": "1"}
    assert oracle.provider_options(68, precision="int8") == {"htp_arch": "68", "soc_model": "39"}
    with pytest.raises(ValueError):
        oracle.provider_options(73, precision="int4")


def test_find_python_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(oracle.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    assert oracle.find_qnn_python(str(tmp_path / "nope")) is None
    exe = tmp_path / "py"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    assert oracle.find_qnn_python(str(exe)) == str(exe)
    monkeypatch.setenv(oracle.ENV_VAR, str(exe))
    assert oracle.find_qnn_python() == str(exe)


def test_unavailable_raises(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(oracle.ENV_VAR, raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(oracle.QnnUnavailable):
        oracle.place_models([str(tmp_path / "m.onnx")], 73)


def test_worker_failure_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A python without onnxruntime-qnn: the worker says so instead of hanging."""
    import sys

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\nexec %s -S -I \"$@\"\n" % sys.executable)  # no site-packages
    fake.chmod(0o755)
    with pytest.raises(oracle.QnnUnavailable, match="cannot set up onnxruntime-qnn"):
        oracle.place_models([str(tmp_path / "m.onnx")], 73, str(fake), startup_timeout=60)


# --------------------------------------------------------------------------------------------
# end to end with the real QNN EP
# --------------------------------------------------------------------------------------------

QNN_PY = os.environ.get(oracle.ENV_VAR)
needs_qnn = pytest.mark.skipif(
    not (QNN_PY and os.path.isfile(QNN_PY) and os.access(QNN_PY, os.X_OK)),
    reason="set %s to the python of an onnxruntime-qnn venv (scripts/setup-qnn-venv.sh)"
           % oracle.ENV_VAR)


def _save(tmp_path: Path, name: str, build) -> str:  # type: ignore[no-untyped-def]
    import onnx

    from pytest_npucheck.probe.models import GraphBuilder

    gb = GraphBuilder(17)
    build(gb)
    path = tmp_path / (name + ".onnx")
    onnx.save(gb.build(), str(path))
    return str(path)


def _conv_erf(gb) -> None:  # type: ignore[no-untyped-def]
    x = gb.input("x", "float32", [1, 8, 16, 16])
    y = gb.node("Conv", [x, gb.weight([8, 8, 3, 3])], name="conv", kernel_shape=[3, 3],
                pads=[1, 1, 1, 1])
    gb.output(gb.node("Relu", [gb.node("Erf", [y], name="erf")], name="relu"))


def _dynamic(gb) -> None:  # type: ignore[no-untyped-def]
    x = gb.input("x", "float32", ["N", 8, 16, 16])
    gb.output(gb.node("Relu", [gb.node("Conv", [x, gb.weight([8, 8, 3, 3])], name="conv",
                                       kernel_shape=[3, 3], pads=[1, 1, 1, 1])], name="relu"))


def _folded(gb) -> None:  # type: ignore[no-untyped-def]
    import numpy as np

    x = gb.input("x", "float32", [1, 16, 32])
    c = gb.node("Sqrt", [gb.const(np.full([32], 4.0, np.float32))], name="c_sqrt")
    gb.output(gb.node("Mul", [gb.node("Identity", [x], name="ident"), c], name="mul"))


@needs_qnn
def test_e2e_placement_reasons_and_versions(tmp_path: Path) -> None:
    paths = [_save(tmp_path, "conv_erf", _conv_erf), _save(tmp_path, "dynamic", _dynamic),
             _save(tmp_path, "folded", _folded)]
    res = oracle.place_models(paths, 73, QNN_PY, run=True)
    erf, dyn, fold = res
    assert erf.ok and erf.placement == {"conv": "npu", "erf": "cpu", "relu": "npu"}
    assert any("Erf" in r for r in erf.reasons["erf"])
    assert erf.backend_version and erf.backend_version.count(".") == 2
    assert erf.extra.get("run_status") == "ok"
    assert dyn.ok and set(dyn.placement.values()) == {"cpu"}  # dynamic shapes stay on the CPU
    assert fold.ok and fold.placement["c_sqrt"] == "folded" and fold.placement["mul"] == "npu"
    assert fold.placement["ident"] in ("folded", "npu")


@needs_qnn
def test_e2e_crash_and_timeout_isolation(tmp_path: Path) -> None:
    path = _save(tmp_path, "conv_erf", _conv_erf)
    jobs = [{"path": path, "key": "before"}, {"path": path, "key": "crash", "debug": {"crash": 7}},
            {"path": path, "key": "hang", "debug": {"hang": 60}}, {"path": path, "key": "after"}]
    res = oracle.place_models(jobs, 73, QNN_PY, timeout=20)
    assert [r.status for r in res] == ["ok", "crashed", "timeout", "ok"]
    assert "exit code 7" in res[1].message
    assert res[3].placement["erf"] == "cpu"


@needs_qnn
def test_e2e_int8_quantizes_in_worker(tmp_path: Path) -> None:
    [r] = oracle.place_models([_save(tmp_path, "conv_erf", _conv_erf)], 73, QNN_PY,
                              precision="int8")
    assert r.ok and r.placement["conv"] == "npu"
    assert "quantize" in r.extra.get("quantizer", "")
    helpers = [h for hs in r.helpers.values() for h in hs]
    assert any(h.endswith(":QuantizeLinear") or h.endswith(":DequantizeLinear") for h in helpers)


# --------------------------------------------------------------------------------------------
# the bundled table against the real QNN EP, on a sample of its entries' probes
# --------------------------------------------------------------------------------------------

#: (op entry, probe id): NPU ops, CPU-only ops and constraint cases of the v73 table
SAMPLE = [
    ("Conv", "Conv.k=3.s=2.p=1.f32.r4"),
    ("Erf", "Erf.f32.r4"),
    ("LayerNormalization", "LayerNormalization.axis=1.f32.r3"),
    ("LayerNormalization", "LayerNormalization.axis=m1.f32.r3"),
    ("Resize", "Resize.mode=nearest.ctm=asymmetric.scale=2.f32.r4"),
    ("Cast", "Cast.to=int64.f32.r4"),
    ("Einsum", "Einsum.eq=bij_bjk_to_bik.f32.r3"),
    ("Pad", "Pad.mode=wrap.f32.r4"),
    ("Tanh", "Tanh.f32.r5"),
    ("Gemm", "Gemm.alpha=0.5.beta=2.f32.r2"),
]


@needs_qnn
def test_table_sample_matches_real_placement(tmp_path: Path) -> None:
    import onnx

    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.toolchains.qnn.probe import select_probes
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("qnn/htp-v73")
    probes = {p.id: p for p in select_probes([pid for _, pid in SAMPLE])}
    paths = []
    for op, pid in SAMPLE:
        entry = table.ops["ai.onnx:" + op]
        assert entry is not None
        path = tmp_path / (pid + ".onnx")
        onnx.save(probes[pid].model, str(path))
        paths.append(str(path))
    real = oracle.place_models(paths, 73, QNN_PY, workers=2)
    for (op, pid), path, r in zip(SAMPLE, paths, real):
        [static] = check_graph(graph_facts(Path(path)), [table])
        predicted = {n.name: ("npu" if n.verdict == "folded" else n.verdict)
                     for n in static.nodes}
        observed = oracle.onnx_placement(r)
        for node in probes[pid].focus:
            assert predicted[node] == observed[node], (pid, node, predicted, observed, r.reasons)


@needs_qnn
def test_rmsnorm_weight_first_fails_in_the_real_backend_as_the_table_says(tmp_path: Path) -> None:
    """The dynamo RMSNorm (weight first, Mul(x, r)) makes the HTP graph fail to finalize; the
    other operand orders and the Div form build. The bundled table predicts exactly that."""
    import onnx

    from pytest_npucheck.check import check_graph, graph_facts
    from pytest_npucheck.toolchains.qnn.probe import extra_probes
    from pytest_npucheck.tables import Catalog

    table = Catalog.discover().table("qnn/htp-v73")
    probes = extra_probes(["q.pattern.rmsnorm."])
    paths = []
    for p in probes:
        path = tmp_path / (p.id + ".onnx")
        onnx.save(p.model, str(path))
        paths.append(str(path))
    real = oracle.place_models(paths, 73, QNN_PY, workers=2, run=False)
    failed = {p.id for p, r in zip(probes, real) if not r.ok}
    assert failed == {"q.pattern.rmsnorm.recip.w_first.f32.r3", "q.pattern.rmsnorm.recip.w_first.out.f32.r3"}
    assert all("finalize" in r.message for r in real if not r.ok)
    for p, path in zip(probes, paths):
        [static] = check_graph(graph_facts(Path(path)), [table])
        assert (static.verdict == "unsupported") == (p.id in failed), p.id
