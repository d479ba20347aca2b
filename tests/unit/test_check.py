"""check: one file against several targets, targets resolved before any work, unreadable models refused."""

from __future__ import annotations

import os

import pytest
from onnx import helper

from conftest import make_model

from pytest_npucheck.check import check_file
from pytest_npucheck.errors import ModelError, UsageError


def _relu_sin():
    return make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                       helper.make_node("Sin", ["r"], ["y"], name="sin")], [("x", (1, 4))], ["y"])


def _isolated(path):
    """``check._isolated_facts(path)`` with the isolation on (60 s timeout), then the settings as they were."""
    from pytest_npucheck import check, isolate

    before = isolate.configure(enabled=True, timeout=60)
    try:
        return check._isolated_facts(path)
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)


def test_one_result_per_target_in_order(save, toy_catalog):
    path = save(_relu_sin())
    results = check_file(path, ["toy@1.1/soc-b", "toy@1.0/soc-a"], toy_catalog)
    assert [r.target for r in results] == ["toy@1.1/soc-b", "toy@1.0/soc-a"]
    for r in results:
        assert [n.name for n in r.nodes] == ["relu", "sin"]
        assert {n.name: n.verdict for n in r.nodes}["relu"] == "npu"


def test_an_unknown_target_fails_before_the_model_is_read(tmp_path, toy_catalog):
    missing = tmp_path / "not-there.onnx"
    with pytest.raises(UsageError, match="unknown toolchain 'nosuch' in target 'nosuch@9'"):
        check_file(missing, ["toy@1.0/soc-a", "nosuch@9"], toy_catalog)


def test_a_model_without_the_default_opset_is_refused(save, toy_catalog):
    model = _relu_sin()
    del model.opset_import[:]
    model.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(ModelError, match="imports no opset of the default ONNX domain"):
        check_file(save(model), ["toy@1.0/soc-a"], toy_catalog)


def _reshaped():
    """A graph whose shapes only inference gives (no value_info): Relu -> Reshape by a constant."""
    shape = helper.make_tensor("shape", 7, [2], [2, 2])  # INT64
    model = make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                        helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")], [("x", (1, 4))], ["y"])
    model.graph.initializer.append(shape)
    return model


@pytest.mark.parametrize("isolated", [True, False], ids=["isolated", "in-process"])
def test_the_isolated_childs_shape_inference_is_the_one_the_facts_use(save, monkeypatch, isolated):
    """With isolation the child infers the shapes and this process reads its result, with the same
    facts as inferring here; without it, this process infers them itself."""
    from onnx import shape_inference

    from pytest_npucheck import check, isolate

    path = save(_reshaped())
    reference = check._facts_or_model_error(path)  # inferred in this process, no child involved
    calls: list[int] = []
    original = shape_inference.infer_shapes
    monkeypatch.setattr(shape_inference, "infer_shapes", lambda *a, **k: calls.append(1) or original(*a, **k))
    before = isolate.configure(enabled=isolated, timeout=60)
    try:
        facts = check._isolated_facts(path)
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)
    assert calls == ([] if isolated else [1])  # a child's calls are not seen here
    assert facts.nodes == reference.nodes and facts.tensors == reference.tensors
    assert facts.tensors["y"].shape == (2, 2)


def test_the_file_is_parsed_once_when_the_child_inferred_its_shapes(save, monkeypatch):
    """The child read the file with every check and returned its shape inference's result: this
    process reads its facts from that model and does not parse the file again; the facts are those
    of an in-process read."""
    from pytest_npucheck import check, graph, isolate

    path = save(_reshaped())
    reference = check._facts_or_model_error(path)
    reads: list[object] = []
    original = graph.load_model_proto
    monkeypatch.setattr(graph, "load_model_proto", lambda *a, **k: reads.append(a[0]) or original(*a, **k))
    facts = _isolated(path)
    assert reads == []  # the child's read is not seen here
    assert facts.nodes == reference.nodes and facts.tensors == reference.tensors
    assert (facts.producer, facts.consumers, facts.inputs, facts.outputs, facts.initializers) == (
        reference.producer, reference.consumers, reference.inputs, reference.outputs, reference.initializers)


def _relu_sin_typed():
    """_relu_sin with every node output typed and static in the file (as the dynamo exporter writes)."""
    from onnx import TensorProto

    model = _relu_sin()
    model.graph.value_info.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, [1, 4]))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4]))
    return model


def test_the_child_infers_no_shapes_the_facts_would_not_use(save, monkeypatch):
    """A file that types every node output statically gets no shape inference in the facts
    (graph.build._already_inferred), so the isolated child runs none either: nothing to contain,
    a pass to save. A file with one value untyped is inferred as before, and the facts are the same
    with and without isolation."""
    from onnx.onnx_cpp2py_export import shape_inference as c_pass  # what onnx.shape_inference calls too

    from pytest_npucheck import check, isolate

    typed, untyped = save(_relu_sin_typed()), save(_reshaped())
    calls: list[int] = []
    original = c_pass.infer_shapes
    monkeypatch.setattr(c_pass, "infer_shapes", lambda *a, **k: calls.append(1) or original(*a, **k))
    assert check._native_steps(typed) is None and calls == []
    inferred = check._native_steps(untyped)
    assert calls == [1] and inferred
    monkeypatch.undo()
    before = isolate.configure(enabled=True, timeout=60)
    try:
        for path in (typed, untyped):
            facts = check._isolated_facts(path)
            reference = check._facts_or_model_error(path)
            assert facts.nodes == reference.nodes and facts.tensors == reference.tensors
            assert facts.shape_inference_error is None
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)
    assert check._isolated_facts(typed).tensors["r"].shape == (1, 4)


def test_the_child_returns_the_passes_bytes_without_parsing_them(save, monkeypatch):
    """The isolated child sends the bytes onnx's C++ pass returned, as they came: parsing them into a
    ModelProto (what ``onnx.shape_inference.infer_shapes`` does) only to serialise them again cost
    the child ~9 ms on the 26k-node encoder. The bytes are those the wrapper's model serialises to."""
    import onnx
    from onnx import shape_inference

    from pytest_npucheck import check

    path = save(_reshaped())
    expected = check._native_steps(path)
    assert expected is not None
    reference = shape_inference.infer_shapes(onnx.load(path), check_type=False, strict_mode=False, data_prop=True)

    def no_parse(*args, **kwargs):
        raise AssertionError("the child parsed the inferred model")

    monkeypatch.setattr(onnx, "load_from_string", no_parse)
    inferred = check._native_steps(path)
    assert inferred == expected and inferred == reference.SerializeToString()


def _shape_arithmetic(x_shape):
    """x -> Shape -> Gather 0 -> Unsqueeze -> Concat with [-1] -> Reshape x: the target shape is
    computed, so ONNX's pass knows the Reshape's first dim only with data propagation."""
    from onnx import TensorProto

    from conftest import const

    nodes = [helper.make_node("Shape", ["x"], ["s"], name="shape"),
             helper.make_node("Constant", [], ["i0"], name="i0",
                              value=helper.make_tensor("i0", TensorProto.INT64, [], [0])),
             helper.make_node("Gather", ["s", "i0"], ["g"], name="gather", axis=0),
             helper.make_node("Unsqueeze", ["g", "axes"], ["u"], name="unsqueeze"),
             helper.make_node("Concat", ["u", "rest"], ["c"], name="concat", axis=0),
             helper.make_node("Reshape", ["x", "c"], ["r"], name="reshape"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    return make_model(nodes, [("x", x_shape)], ["y"],
                      initializers=[const("axes", [0], "int64"), const("rest", [-1], "int64")])


def _range_of_data():
    """Static inputs, and still a dim only the data gives: Range(0, ReduceMax(x)) -> Shape ->
    Concat with [4] -> Reshape z. Data propagation carries the unknown dim on and finds the 4."""
    from onnx import TensorProto

    from conftest import const

    nodes = [helper.make_node("ReduceMax", ["x"], ["m"], name="max", keepdims=0),
             helper.make_node("Range", ["zero", "m", "one"], ["r"], name="range"),
             helper.make_node("Shape", ["r"], ["s"], name="shape"),
             helper.make_node("Concat", ["s", "four"], ["c"], name="concat", axis=0),
             helper.make_node("Reshape", ["z", "c"], ["y"], name="reshape")]
    model = make_model(nodes, [("x", (5,))], ["y"], dtype=TensorProto.INT64,
                       initializers=[const("zero", 0, "int64"), const("one", 1, "int64"),
                                     const("four", [4], "int64")])
    model.graph.input.append(helper.make_tensor_value_info("z", TensorProto.FLOAT, [8]))
    return model


@pytest.mark.parametrize("case", ["static", "dynamic", "range"])
def test_the_child_leaves_data_propagation_out_only_where_the_facts_stay_the_same(save, case):
    """The child infers without data propagation where graph.build.propagation_may_be_moot holds,
    and the facts are kept only if every shape in them is static; else the pass runs again with
    it. Whichever way, the facts are those of the pass with data propagation (in this process)."""
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import DYNAMIC_DIM as DYNAMIC

    model = {"static": lambda: _shape_arithmetic((2, 3, 4)), "dynamic": lambda: _shape_arithmetic(("N", 3, 4)),
             "range": _range_of_data}[case]()
    path = save(model)
    passed = check._native_pass(path)
    assert passed is not None and passed[1] == (case == "dynamic")  # propagated: only with a dynamic input
    reference = check._facts_or_model_error(path)  # in this process: with data propagation
    quick = check._facts_or_model_error(path, inferred=passed[0], confirm=True)
    assert (quick is not None) == (case == "static")  # the range's unknown dim sends it back
    facts = _isolated(path)
    for got in (facts, quick) if quick is not None else (facts,):
        assert got.nodes == reference.nodes and list(got.tensors.items()) == list(reference.tensors.items())
        assert (got.shape_inference_error, got.dynamic_rank) == (reference.shape_inference_error,
                                                                 reference.dynamic_rank)
    derived = {"static": (2, 12), "dynamic": ("N", DYNAMIC), "range": (DYNAMIC, 4)}[case]
    shape = facts.tensors["r" if case != "range" else "y"].shape
    assert shape == derived, shape


def test_all_static_asks_every_tensor():
    from pytest_npucheck import check
    from pytest_npucheck.graph import TensorInfo

    class Facts:
        shape_inference_error = None
        dynamic_rank = frozenset()
        tensors = {"a": TensorInfo("a", "float32", (1, 2)), "b": TensorInfo("b", "float32", ())}

    assert check._all_static(Facts())  # type: ignore[arg-type]
    for shape in (None, (1, "N"), (1, None)):
        Facts.tensors = {"a": TensorInfo("a", "float32", (1, 2)), "b": TensorInfo("b", "float32", shape)}
        assert not check._all_static(Facts())  # type: ignore[arg-type]
    Facts.tensors = {"a": TensorInfo("a", "float32", (1, 2))}
    Facts.shape_inference_error = "ShapeInferenceError: x"
    assert not check._all_static(Facts())  # type: ignore[arg-type]


def _weighted():
    """Relu -> MatMul by a 64x64 weight (more than SMALL_CONSTANT elements: left out of the read)
    -> Reshape by a constant; shapes only inference gives."""
    import numpy as np
    from onnx import numpy_helper

    weight = numpy_helper.from_array(np.arange(64 * 64, dtype=np.float32).reshape(64, 64), "w")
    shape = helper.make_tensor("shape", 7, [2], [8, 8])  # INT64
    return make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                       helper.make_node("MatMul", ["r", "w"], ["m"], name="mm"),
                       helper.make_node("Reshape", ["m", "shape"], ["y"], name="reshape")],
                      [("x", (1, 64))], ["y"], initializers=[weight, shape])


def test_the_nodes_are_read_from_the_cut_bytes_while_the_child_infers(save, monkeypatch):
    """The parent cuts the weights out before the fork and the child infers those bytes; the parent
    reads their nodes meanwhile, and the facts take them instead of the nodes of the child's result
    (never read): the facts are those of an in-process read, field by field."""
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import build, protobuf

    path = save(_weighted())
    reference = check._facts_or_model_error(path)
    light = protobuf.read_without_weights(path)
    assert light is not None and len(light) < path.stat().st_size
    late_reads: list[object] = []
    original = build._read_nodes_serialized
    monkeypatch.setattr(build, "_read_nodes_serialized", lambda *a: late_reads.append(a) or original(*a))
    facts = _isolated(path)
    assert late_reads == []
    assert facts == reference and list(facts.tensors) == list(reference.tensors)
    assert facts.nodes == reference.nodes and facts.tensors["y"].shape == (8, 8)
    assert (facts.producer, facts.consumers, facts.first_of_signatures, facts.foldable) == (
        reference.producer, reference.consumers, reference.first_of_signatures, reference.foldable)


def test_a_file_with_nothing_to_cut_has_its_nodes_read_while_the_child_infers(save, monkeypatch):
    """Small weights only: nothing is cut, the child reads the file as before (no bytes handed to
    it), and the parent reads the nodes of the file's own bytes meanwhile: the facts are those of
    an in-process read, and the child's result's nodes are never read."""
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import build, protobuf

    shape = helper.make_tensor("shape", 7, [2], [2, 2])  # INT64
    path = save(make_model([helper.make_node("Relu", ["x"], ["r"], name="relu"),
                            helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")],
                           [("x", (1, 4))], ["y"], initializers=[shape]))
    assert protobuf.read_without_weights(path) is None
    reference = check._facts_or_model_error(path)
    handed: list[object] = []
    original_start = isolate.start_mapped
    monkeypatch.setattr(isolate, "start_mapped", lambda *a, **k: handed.append(a[-1]) or original_start(*a, **k))
    late_reads: list[object] = []
    original = build._read_nodes_serialized
    monkeypatch.setattr(build, "_read_nodes_serialized", lambda *a: late_reads.append(a) or original(*a))
    facts = _isolated(path)
    assert handed == [None] and late_reads == []
    assert facts == reference and list(facts.tensors) == list(reference.tensors)
    assert facts.nodes == reference.nodes and facts.tensors["y"].shape == (2, 2)
    assert (facts.producer, facts.consumers, facts.first_of_signatures, facts.foldable) == (
        reference.producer, reference.consumers, reference.first_of_signatures, reference.foldable)


def test_a_file_replaced_after_the_parent_read_it_gives_the_facts_of_the_child_read_alone(save, monkeypatch):
    """Nothing cut: the child reads the file itself. Re-exported after the parent read its nodes (the
    same node count, another op), the facts are the new file's, not its types on the old nodes."""
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import protobuf

    shape = helper.make_tensor("shape", 7, [2], [2, 2])  # INT64

    def model(op, name):
        return make_model([helper.make_node(op, ["x"], ["r"], name=name),
                           helper.make_node("Reshape", ["r", "shape"], ["y"], name="reshape")],
                          [("x", (1, 4))], ["y"], initializers=[shape])

    path = save(model("Relu", "relu"))
    newer = save(model("Sigmoid", "a_sigmoid_node"))
    assert protobuf.read_without_weights(path) is None
    original = protobuf.read_ahead

    def read_then_replaced(p):
        got = original(p)
        os.replace(newer, path)  # as an exporter writes a new version: another inode
        return got

    monkeypatch.setattr(protobuf, "read_ahead", read_then_replaced)
    facts = _isolated(path)
    monkeypatch.undo()
    assert [n.op_type for n in facts.nodes] == ["Sigmoid", "Reshape"]
    assert facts == check._facts_or_model_error(path)


def test_an_interrupt_while_the_child_infers_kills_the_child(save, monkeypatch):
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import protobuf

    started: list[isolate.Pending] = []
    original = isolate.start_mapped
    monkeypatch.setattr(isolate, "start_mapped", lambda *a, **k: started.append(original(*a, **k)) or started[-1])

    def interrupted(data):
        raise KeyboardInterrupt

    monkeypatch.setattr(protobuf, "nodes_serialized", interrupted)
    before = isolate.configure(enabled=True, timeout=60)
    try:
        with pytest.raises(KeyboardInterrupt):
            check._isolated_facts(save(_weighted()))
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)
    assert len(started) == 1 and started[0]._pid == 0  # cancelled: killed and left to be reaped


def test_a_bad_weight_fails_the_same_way_when_the_parent_cuts_first(save):
    """A weight whose raw data does not hold its dims: the parent's cut gives up quietly, and the
    child's reading of the file raises the ModelError an in-process read raises."""
    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import protobuf

    model = _weighted()
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]
    path = save(model)
    assert protobuf.read_without_weights(path) is None
    with pytest.raises(ModelError) as in_process:
        check._facts_or_model_error(path)
    before = isolate.configure(enabled=True, timeout=60)
    try:
        with pytest.raises(ModelError) as isolated:
            check._isolated_facts(path)
    finally:
        isolate.configure(enabled=before.enabled, timeout=before.timeout, memory_mb=before.memory_mb)
    assert str(isolated.value) == str(in_process.value) and "raw_data size" in str(isolated.value)


def test_a_file_that_gives_every_shape_is_cut_once_in_this_process(save, monkeypatch):
    """The child runs no pass for a file that types every value (the dynamo exporter's): this
    process reads the file itself, from the bytes it cut before the fork (not cut a second time)."""
    from onnx import TensorProto

    from pytest_npucheck import check, isolate
    from pytest_npucheck.graph import protobuf

    model = _weighted()
    for name, shape in (("r", [1, 64]), ("m", [1, 64])):
        model.graph.value_info.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 8]))
    path = save(model)
    reference = check._facts_or_model_error(path)
    cuts: list[object] = []
    original = protobuf._without_weights
    monkeypatch.setattr(protobuf, "_without_weights", lambda *a: cuts.append(a) or original(*a))
    facts = _isolated(path)
    assert len(cuts) == 1 and facts == reference and list(facts.tensors) == list(reference.tensors)
