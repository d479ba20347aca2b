"""Run an exported ONNX model in fp32 and under the precision an NPU target uses, emulated on CPU.

* ``fp32``: ONNX Runtime CPU as is (the reference).
* ``fp16``: by default "storage" emulation - weights and every activation rounded through fp16
  (overflow becomes inf), arithmetic inside a node in fp32; or ``fp16_method="converter"``:
  ``onnxruntime.transformers.float16.convert_float_to_float16`` (ORT ships its own copy of
  onnxconverter-common's converter; onnxconverter-common itself is not installed) with
  ``keep_io_types=True``. Graph inputs/outputs stay fp32 either way, so the candidate is fed
  and compared like the reference. Why storage is the default: :func:`emulated_model`.
* ``int8``: ``onnxruntime.quantization.quantize_static`` in QDQ format (int8 activations with
  MinMax calibration, per-channel int8 weights), calibrated on the inputs the caller supplies;
  only when none are given are seeded random inputs used, and the result says so.

When an emulated comparison fails, :func:`diagnose` finds where precision is lost: every
intermediate tensor of the fp32 model against the emulated one, in two modes -

* ``accumulated``: both whole models run with every intermediate tensor exposed (errors add up
  along the graph, like rknn ``accuracy_analysis`` "entire");
* ``per_layer``: each node runs alone in the emulated precision on the fp32 values of its inputs
  (local error only, like "single");

then lists the first node over tolerance, the five worst layers, and greedily which layers kept in
fp32 (the converter's ``node_block_list`` / the quantizer's ``nodes_to_exclude``) bring the
outputs back within the policy.

No pytest and no torch here; numpy, onnx and onnxruntime are imported inside the functions.
Intermediate runs use ``ORT_DISABLE_ALL`` so that every tensor exists (fusions would remove them).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .errors import NpuCheckError
from .numerics import (
    Comparison,
    Policy,
    Tolerance,
    compare_arrays,
    compare_outputs,
    json_float,
    policy_for,
    precision_key,
)

if TYPE_CHECKING:
    import numpy as np
    import onnx

__all__ = [
    "Diagnosis",
    "EmulationError",
    "EmulationResult",
    "GreedyStep",
    "LayerError",
    "diagnose",
    "emulate",
    "emulated_model",
    "input_specs",
    "label_sources",
    "random_inputs",
    "run_model",
    "run_with_margins",
    "seed_for",
]

Feeds = Mapping[str, Any]

# models whose protobuf is larger than this go to ONNX Runtime through a file with external
# weights (protobuf cannot serialize a message of 2 GiB or more)
PROTOBUF_LIMIT = 2**31 - 2**24


class EmulationError(NpuCheckError):
    """The model cannot be converted or run under the emulated precision."""


def seed_for(test_id: str) -> int:
    """A stable 31-bit seed from a test id (sha256, not the salted built-in ``hash``)."""
    return int.from_bytes(hashlib.sha256(test_id.encode("utf-8")).digest()[:4], "big") & 0x7FFFFFFF


# --------------------------------------------------------------------------- loading / inputs


def _load(model: Any) -> onnx.ModelProto:
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    try:
        return onnx.load(str(model))
    except Exception as exc:  # noqa: BLE001 - any parse failure is reported the same way
        raise EmulationError(f"{model}: cannot load ONNX model: {exc}") from None


def input_specs(model: Any) -> list[tuple[str, Any, tuple[int | str | None, ...]]]:
    """``(name, numpy dtype, shape)`` of every graph input that is not an initializer."""
    from onnx import helper

    proto = _load(model)
    inits = {i.name for i in proto.graph.initializer}
    out = []
    for vi in proto.graph.input:
        if vi.name in inits:
            continue
        tt = vi.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                      for d in tt.shape.dim)
        out.append((vi.name, dtype, shape))
    return out


def random_inputs(model: Any, seed: int, dims: Mapping[str, int] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every graph input: floats ~ N(0, 1), integers in [0, 10), bools.

    Symbolic dims take ``dims[name]`` or 1. Integer inputs are often token ids or indices whose
    valid range the graph does not state, so supply real inputs where they matter."""
    import numpy as np

    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for name, dtype, shape in input_specs(model):
        concrete = tuple(d if isinstance(d, int) and d > 0 else int((dims or {}).get(str(d), 1))
                         for d in shape)
        if np.issubdtype(dtype, np.floating):
            feeds[name] = rng.standard_normal(concrete).astype(dtype)
        elif dtype == np.bool_:
            feeds[name] = rng.integers(0, 2, concrete).astype(np.bool_)
        else:
            feeds[name] = rng.integers(0, 10, concrete).astype(dtype)
    return feeds


def _session(proto: onnx.ModelProto, optimize: bool = True) -> Any:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    try:
        if proto.ByteSize() <= PROTOBUF_LIMIT:
            return ort.InferenceSession(proto.SerializeToString(), so, providers=["CPUExecutionProvider"])
        # over protobuf's 2 GB limit the model cannot be serialized in one piece: ONNX Runtime
        # loads it from a file whose weights are external data (unlinking the files afterwards
        # is safe: the session has read them)
        import onnx

        with tempfile.TemporaryDirectory(prefix="npucheck-ort-") as tmp:
            path = os.path.join(tmp, "model.onnx")
            onnx.save_model(proto, path, save_as_external_data=True, all_tensors_to_one_file=True,
                            location="model.weights", size_threshold=1024)
            return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001
        raise EmulationError(f"ONNX Runtime cannot load the model: {exc}") from None


# ops between a label and the ArgMax/TopK that chose it that keep its elements in order
_ORDER_KEEPING = frozenset({"Identity", "Cast", "Reshape", "Squeeze", "Unsqueeze", "Flatten"})


def label_sources(model: Any) -> dict[str, dict[str, Any]]:
    """Graph outputs that are the indices of an ArgMax, ArgMin or TopK (through order-keeping ops):
    ``{output: {"op", "logits", "axis", "keepdims", "largest", "k"}}``, where ``logits`` is the
    tensor the label was chosen from. Outputs whose source is not found are left out (their flips
    all count)."""
    from onnx import helper, numpy_helper

    proto = _load(model)
    producer = {o: n for n in proto.graph.node for o in n.output if o}
    consts = {t.name: t for t in proto.graph.initializer}
    consts.update({n.output[0]: a.t for n in proto.graph.node if n.op_type == "Constant"
                   for a in n.attribute if a.name == "value"})
    out: dict[str, dict[str, Any]] = {}
    for o in proto.graph.output:
        tensor, node = o.name, producer.get(o.name)
        while node is not None and node.op_type in _ORDER_KEEPING and node.input:
            tensor, node = node.input[0], producer.get(node.input[0])
        if node is None or node.domain not in ("", "ai.onnx"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type in ("ArgMax", "ArgMin"):
            out[o.name] = {"op": node.op_type, "logits": node.input[0], "axis": int(attrs.get("axis", 0)),
                           "keepdims": int(attrs.get("keepdims", 1)), "largest": 1, "k": None}
        elif node.op_type == "TopK" and len(node.output) > 1 and tensor == node.output[1]:
            k_tensor = consts.get(node.input[1]) if len(node.input) > 1 else None
            if k_tensor is None:
                continue  # K computed at run time: margins unknown
            out[o.name] = {"op": "TopK", "logits": node.input[0], "axis": int(attrs.get("axis", -1)),
                           "keepdims": 1, "largest": int(attrs.get("largest", 1)),
                           "k": int(numpy_helper.to_array(k_tensor).reshape(-1)[0])}
    return out


def run_with_margins(model: Any, feeds: Feeds, optimize: bool = True
                     ) -> tuple[dict[str, np.ndarray], dict[str, tuple[np.ndarray, float]]]:
    """Run on ONNX Runtime CPU with the logits of every label output (:func:`label_sources`) made
    extra outputs: ``(outputs, {label output: (its margins, max |logits|)})``."""
    import copy

    import numpy as np
    from onnx import helper

    from .numerics import label_margins

    proto = _load(model)
    sources = label_sources(proto)
    if not sources:
        return run_model(proto, feeds, optimize), {}
    names = [o.name for o in proto.graph.output]
    exposed = copy.deepcopy(proto)
    typed = _typed_intermediates(exposed)
    present = set(names)
    for src in sources.values():
        t = src["logits"]
        if t not in present:
            vi = typed.get(t)
            if vi is None and t not in {i.name for i in exposed.graph.input}:
                continue
            elem = vi.type.tensor_type.elem_type if vi is not None else next(
                i.type.tensor_type.elem_type for i in exposed.graph.input if i.name == t)
            exposed.graph.output.append(helper.make_tensor_value_info(t, elem, None))
            present.add(t)
    values = run_model(exposed, feeds, optimize)
    margins: dict[str, tuple[np.ndarray, float]] = {}
    for name, src in sources.items():
        logits = values.get(src["logits"])
        if logits is None or not np.issubdtype(np.asarray(logits).dtype, np.floating):
            continue
        m = label_margins(src["op"], logits, axis=src["axis"], keepdims=src["keepdims"], largest=src["largest"],
                          k=src["k"])
        if m is not None:
            finite = np.abs(np.asarray(logits, dtype=np.float64))
            margins[name] = (m, float(finite[np.isfinite(finite)].max()) if finite.size else 0.0)
    return {n: values[n] for n in names}, margins


def run_model(model: Any, feeds: Feeds, optimize: bool = True) -> dict[str, np.ndarray]:
    """Run on ONNX Runtime CPU; returns ``{output name: array}`` in graph order."""
    import numpy as np

    sess = _session(_load(model), optimize)
    names = [o.name for o in sess.get_outputs()]
    try:
        values = sess.run(names, {k: np.asarray(v) for k, v in feeds.items()})
    except Exception as exc:  # noqa: BLE001
        raise EmulationError(f"ONNX Runtime failed to run the model: {exc}") from None
    return dict(zip(names, values))


# --------------------------------------------------------------------------- conversion


class _Reader:
    """An ``onnxruntime.quantization.CalibrationDataReader`` over a list of feeds."""

    def __init__(self, samples: Sequence[Feeds]) -> None:
        self._it = iter([dict(s) for s in samples])

    def get_next(self) -> dict[str, Any] | None:
        return next(self._it, None)

    def rewind(self) -> None:  # pragma: no cover - not used by MinMax
        pass


#: fp16 emulation methods: see :func:`emulated_model`.
FP16_METHODS = ("storage", "converter")


def emulated_model(model: Any, precision: str, calibration: Sequence[Feeds] | None = None,
                   keep_fp32: Iterable[str] = (), fp16_method: str = "storage") -> onnx.ModelProto:
    """The model converted to emulate ``precision`` (``fp32``/``float16``/``int8``...).

    ``keep_fp32``: node names left in fp32 (fp16 ``node_block_list`` / int8 ``nodes_to_exclude``).
    ``calibration`` (int8 only, required): the samples the activation ranges come from.

    ``fp16_method``:

    * ``"storage"`` (default): weights rounded to fp16 (saturating at +-65504) and every float
      activation rounded through fp16 after the node that produces it (``Cast`` to FLOAT16 and
      back, so an overflow becomes inf), arithmetic inside a node in fp32 - what an NPU that
      stores fp16 and accumulates wider does. Node and tensor names are unchanged.
    * ``"converter"``: ``onnxruntime.transformers.float16.convert_float_to_float16`` with
      ``keep_io_types=True``. Measured caveat: ONNX Runtime's CPU provider has no fp16 kernel
      for many ops (Pow, ReduceMean, ...), computes them in fp32 and removes the casts between
      two such ops, so an overflow inside such a run (LayerNorm's variance) is not seen.
    """
    import onnx

    proto = _load(model)
    key = precision_key(precision)
    keep = sorted(set(keep_fp32))
    if key == "fp32":
        return proto
    if key == "fp16":
        if fp16_method == "storage":
            return _fp16_storage(proto, set(keep))
        if fp16_method != "converter":
            raise ValueError(f"fp16_method must be one of {FP16_METHODS}, got {fp16_method!r}")
        import copy
        import logging

        from onnxruntime.transformers.float16 import convert_float_to_float16

        logging.getLogger("onnxruntime.transformers.float16").setLevel(logging.ERROR)
        try:
            return convert_float_to_float16(copy.deepcopy(proto), keep_io_types=True,
                                            node_block_list=keep or None)
        except Exception as exc:  # noqa: BLE001
            raise EmulationError(f"fp16 conversion failed: {exc}") from None
    # int8
    if not calibration:
        raise EmulationError("int8 emulation needs calibration samples")
    import logging

    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    # The quantiser logs advice ("consider pre-processing", per-channel axis notes) on the root
    # logger; silence it for the call and restore the level afterwards.
    root = logging.getLogger()
    old_level = root.level
    root.setLevel(logging.ERROR)
    with tempfile.TemporaryDirectory(prefix="npucheck-int8-") as tmp:
        src, dst = os.path.join(tmp, "fp32.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(proto, src)
        try:
            quantize_static(src, dst, _Reader(calibration), quant_format=QuantFormat.QDQ,
                            per_channel=True, activation_type=QuantType.QInt8,
                            weight_type=QuantType.QInt8, nodes_to_exclude=keep or None,
                            calibrate_method=CalibrationMethod.MinMax,
                            extra_options={"CalibTensorRangeSymmetric": False})
        except Exception as exc:  # noqa: BLE001
            raise EmulationError(f"int8 QDQ quantisation failed: {exc}") from None
        finally:
            root.setLevel(old_level)
        return onnx.load(dst)


def _fp16_storage(proto: onnx.ModelProto, keep: set[str]) -> onnx.ModelProto:
    """fp16 storage emulation (see :func:`emulated_model`); nodes in ``keep`` stay fp32."""
    import copy

    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    m = copy.deepcopy(proto)
    g = m.graph
    typed = _typed_intermediates(m)
    fmax = float(np.finfo(np.float16).max)

    def rounded(arr: np.ndarray) -> np.ndarray:
        return np.clip(arr, -fmax, fmax).astype(np.float16).astype(np.float32)

    kept_only: set[str] = set()
    if keep:
        users: dict[str, set[bool]] = {}
        for node in g.node:
            for x in node.input:
                users.setdefault(x, set()).add(node.name in keep)
        kept_only = {k for k, v in users.items() if v == {True}}
    for i, init in enumerate(g.initializer):
        if init.data_type == TensorProto.FLOAT and init.name not in kept_only:
            arr = numpy_helper.to_array(init)
            g.initializer[i].CopyFrom(numpy_helper.from_array(rounded(arr), init.name))
    nodes = []
    for node in g.node:
        if node.op_type == "Constant" and node.name not in keep:
            for a in node.attribute:
                if a.name == "value" and a.t.data_type == TensorProto.FLOAT:
                    a.t.CopyFrom(numpy_helper.from_array(rounded(numpy_helper.to_array(a.t)), a.t.name))
            nodes.append(node)
            continue
        if node.name in keep:
            nodes.append(node)
            continue
        extra = []
        for j, out in enumerate(node.output):
            vi = typed.get(out)
            if not out or vi is None or vi.type.tensor_type.elem_type != TensorProto.FLOAT:
                continue
            raw, half = f"{out}__fp32", f"{out}__fp16"
            node.output[j] = raw
            tag = node.name or out
            extra.append(helper.make_node("Cast", [raw], [half], to=TensorProto.FLOAT16,
                                          name=f"{tag}__to_fp16_{j}"))
            extra.append(helper.make_node("Cast", [half], [out], to=TensorProto.FLOAT,
                                          name=f"{tag}__from_fp16_{j}"))
        nodes.append(node)
        nodes.extend(extra)
    del g.node[:]
    g.node.extend(nodes)
    return m


# --------------------------------------------------------------------------- emulate


@dataclasses.dataclass(frozen=True)
class EmulationResult:
    """fp32 reference vs emulated run on the same inputs.

    ``inputs_source`` is ``"given"`` or ``"random"``; ``calibration_source`` likewise for int8
    (``None`` for other precisions); ``seed`` drew the random inputs (recorded even if unused).
    ``reference``/``candidate`` hold the outputs (not serialised)."""

    precision: str
    seed: int
    inputs_source: str
    calibration_source: str | None
    calibration_samples: int
    keep_fp32: tuple[str, ...]
    comparison: Comparison
    seconds: float
    reference: Mapping[str, Any] = dataclasses.field(repr=False, compare=False, hash=False)
    candidate: Mapping[str, Any] = dataclasses.field(repr=False, compare=False, hash=False)

    @property
    def passed(self) -> bool:
        return self.comparison.passed

    def to_json(self) -> dict[str, Any]:
        return {
            "precision": self.precision, "seed": self.seed, "inputs_source": self.inputs_source,
            "calibration_source": self.calibration_source,
            "calibration_samples": self.calibration_samples, "keep_fp32": list(self.keep_fp32),
            "passed": self.passed, "seconds": json_float(self.seconds),
            "comparison": self.comparison.to_json(),
        }

    def lines(self) -> list[str]:
        head = (f"{self.precision} emulation vs fp32 (ONNX Runtime CPU), seed {self.seed}, "
                f"inputs {self.inputs_source}")
        if self.calibration_source:
            head += f", calibration {self.calibration_source} ({self.calibration_samples} sample(s))"
        if self.inputs_source == "random" or self.calibration_source == "random":
            head += " [random inputs: supply real inputs for meaningful int8 ranges]"
        return [head] + self.comparison.lines()


def emulate(model: Any, precision: str, inputs: Feeds | None = None, *, test_id: str = "",
            calibration: Sequence[Feeds] | None = None, policy: Policy | None = None,
            keep_fp32: Iterable[str] = (), random_calibration_samples: int = 8,
            fp16_method: str = "storage", model_names: Mapping[str, str] | None = None,
            fp32_run: tuple[Mapping[str, Any], Mapping[str, Any]] | None = None) -> EmulationResult:
    """Run ``model`` (path or ModelProto) in fp32 and emulated ``precision`` and compare.

    ``inputs``: the feeds to evaluate on (None: random, seeded by ``seed_for(test_id)``).
    ``calibration``: int8 calibration samples; default ``[inputs]`` when inputs are given,
    else ``random_calibration_samples`` seeded random feeds. ``policy``: default
    ``policy_for(precision)``. ``fp32_run``: what :func:`run_with_margins` returned for this model
    and these ``inputs`` when the caller already ran it (the fp32 side is then not run again)."""
    start = time.perf_counter()
    proto = _load(model)
    key = precision_key(precision)
    seed = seed_for(test_id)
    if inputs is None:
        feeds, inputs_source = random_inputs(proto, seed), "random"
    else:
        feeds, inputs_source = dict(inputs), "given"
    calib_source: str | None = None
    samples: list[Feeds] = []
    if key == "int8":
        if calibration:
            samples, calib_source = list(calibration), "given"
        elif inputs is not None:
            samples, calib_source = [feeds], "given"
        else:
            samples = [random_inputs(proto, seed + 1 + i) for i in range(random_calibration_samples)]
            calib_source = "random"
    if fp32_run is not None and inputs is not None:
        import numpy as np

        # copies: the caller compares its own outputs too, and nothing may share their memory
        ref = {n: np.array(v, copy=True) for n, v in fp32_run[0].items()}
        margins = {n: (np.array(m, copy=True), peak) for n, (m, peak) in fp32_run[1].items()}
    else:
        ref, margins = run_with_margins(proto, feeds)  # integer outputs are labels: the logits tell near-ties
    cand = run_model(emulated_model(proto, key, samples, keep_fp32, fp16_method), feeds)
    comp = compare_outputs(ref, cand, policy or policy_for(key), margins=margins, model_names=model_names)
    return EmulationResult(key, seed, inputs_source, calib_source, len(samples),
                           tuple(sorted(set(keep_fp32))), comp, time.perf_counter() - start,
                           ref, cand)


# --------------------------------------------------------------------------- diagnosis


@dataclasses.dataclass(frozen=True)
class LayerError:
    """Error of one node's (first float) output tensor, fp32 vs emulated."""

    index: int
    node: str
    op_type: str
    tensor: str
    passed: bool
    cosine: float | None
    max_abs: float | None
    snr_db: float | None
    peak: float | None

    @property
    def badness(self) -> float:
        """Sort key: higher is worse (negative SNR; a NaN/unusable comparison is worst)."""
        if self.snr_db is None:
            return float("inf")
        return -self.snr_db

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "node": self.node, "op_type": self.op_type, "tensor": self.tensor,
                "passed": self.passed, "cosine": json_float(self.cosine),
                "max_abs": json_float(self.max_abs), "snr_db": json_float(self.snr_db),
                "peak": json_float(self.peak)}


@dataclasses.dataclass(frozen=True)
class GreedyStep:
    """After keeping ``keep_fp32`` in fp32: did the outputs pass, and the worst output SNR."""

    keep_fp32: tuple[str, ...]
    passed: bool
    worst_output_snr_db: float | None

    def to_json(self) -> dict[str, Any]:
        return {"keep_fp32": list(self.keep_fp32), "passed": self.passed,
                "worst_output_snr_db": json_float(self.worst_output_snr_db)}


@dataclasses.dataclass(frozen=True)
class Diagnosis:
    """Where the emulated precision loses accuracy (node names as in the ONNX graph)."""

    precision: str
    mode: str
    layers: tuple[LayerError, ...]
    first_divergent: LayerError | None
    worst: tuple[LayerError, ...]
    greedy: tuple[GreedyStep, ...]
    keep_fp32: tuple[str, ...] | None  # the set that passes, None when the search gave up

    def to_json(self) -> dict[str, Any]:
        return {"precision": self.precision, "mode": self.mode,
                "first_divergent": self.first_divergent.to_json() if self.first_divergent else None,
                "worst": [w.to_json() for w in self.worst],
                "greedy": [g.to_json() for g in self.greedy],
                "keep_fp32": list(self.keep_fp32) if self.keep_fp32 is not None else None,
                "layers_compared": len(self.layers)}

    def lines(self) -> list[str]:
        out = [f"{self.precision} layer analysis ({self.mode}, {len(self.layers)} layers compared)"]
        f = self.first_divergent
        from .report.formatting import number

        out.append(f"  first node over tolerance: {f.node} ({f.op_type}) snr {number(f.snr_db)} dB, "
                   f"cosine {number(f.cosine)}" if f else "  no layer over tolerance")
        over = [w for w in self.worst if not w.passed]  # the layers within tolerance are not the story
        if over:
            out.append("  worst layers over tolerance:")
            out += [f"    {w.node} ({w.op_type}): snr {number(w.snr_db)} dB, cosine {number(w.cosine)}, "
                    f"max_abs {number(w.max_abs)}" for w in over]
        for g in self.greedy:
            out.append(f"  keep in fp32 {list(g.keep_fp32)}: {'PASS' if g.passed else 'still failing'}"
                       f" (worst output snr {number(g.worst_output_snr_db)} dB)")
        if self.keep_fp32 is not None:
            out.append(f"  => keeping {list(self.keep_fp32)} in fp32 brings the outputs within budget")
        elif self.greedy:
            out.append("  => no small set of fp32 layers found that passes")
        return out


def _typed_intermediates(proto: onnx.ModelProto) -> dict[str, Any]:
    """name -> ValueInfoProto with an element type, after shape inference."""
    import onnx

    try:
        inferred = onnx.shape_inference.infer_shapes(proto)
    except Exception:  # noqa: BLE001 - fall back to whatever the file carries
        inferred = proto
    out = {}
    for vi in list(inferred.graph.value_info) + list(inferred.graph.output):
        if vi.type.tensor_type.elem_type:
            out[vi.name] = vi
    return out


def _expose_all(proto: onnx.ModelProto) -> onnx.ModelProto:
    """A copy whose graph outputs include every typed intermediate tensor."""
    import copy

    from onnx import helper

    m = copy.deepcopy(proto)
    typed = _typed_intermediates(m)
    present = {o.name for o in m.graph.output}
    for node in m.graph.node:
        for t in node.output:
            if t and t not in present and t in typed:
                vi = typed[t]
                m.graph.output.append(helper.make_tensor_value_info(t, vi.type.tensor_type.elem_type, None))
                present.add(t)
    return m


def _float_node_outputs(proto: onnx.ModelProto) -> list[tuple[int, Any, str]]:
    """(index, node, first float output) for every node with a float output, in graph order."""
    from onnx import TensorProto

    typed = _typed_intermediates(proto)
    floats = {TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.DOUBLE, TensorProto.BFLOAT16}
    out = []
    for i, node in enumerate(proto.graph.node):
        if node.op_type in ("Constant", "Shape", "Size"):
            continue
        for t in node.output:
            if t and t in typed and typed[t].type.tensor_type.elem_type in floats:
                out.append((i, node, t))
                break
    return out


def _layer_error(i: int, node: Any, tensor: str, ref: Any, cand: Any, tol: Tolerance) -> LayerError:
    import numpy as np

    r = np.asarray(ref)
    c = np.asarray(cand).astype(r.dtype) if np.asarray(cand).dtype != r.dtype else np.asarray(cand)
    res = compare_arrays(r, c, tol, tensor)
    m = res.metrics
    if res.reasons:  # non-finite values (fp16 overflow): metrics over the rest would flatter it
        return LayerError(i, node.name or f"#{i}", node.op_type, tensor, False, None, None, None,
                          m.peak if m else None)
    return LayerError(i, node.name or f"#{i}", node.op_type, tensor, res.passed,
                      m.cosine if m else None, m.max_abs if m else None,
                      m.snr_db if m else None, m.peak if m else None)


def _accumulated(proto: onnx.ModelProto, emulated: onnx.ModelProto, feeds: Feeds,
                 tol: Tolerance) -> tuple[list[LayerError], dict[str, Any]]:
    ref = run_model(_expose_all(proto), feeds, optimize=False)
    cand = run_model(_expose_all(emulated), feeds, optimize=False)
    layers = []
    for i, node, t in _float_node_outputs(proto):
        if t in ref and t in cand:
            layers.append(_layer_error(i, node, t, ref[t], cand[t], tol))
    return layers, ref


def _per_layer(proto: onnx.ModelProto, key: str, ref_values: Mapping[str, Any], feeds: Feeds,
               tol: Tolerance, max_nodes: int | None, fp16_method: str = "storage") -> list[LayerError]:
    import numpy as np
    from onnx import helper, numpy_helper

    inits = {i.name: i for i in proto.graph.initializer}
    values = dict(ref_values)
    values.update({k: np.asarray(v) for k, v in feeds.items()})
    opset = list(proto.opset_import)
    layers: list[LayerError] = []
    todo = _float_node_outputs(proto)
    if max_nodes is not None:
        todo = todo[:max_nodes]
    for i, node, t in todo:
        if any(a.type in (5, 10) for a in node.attribute):  # GRAPH / GRAPHS: control flow
            continue
        if t not in values or any(x and x not in values and x not in inits for x in node.input):
            continue
        g_inputs, g_inits, sample = [], [], {}
        for x in dict.fromkeys(n for n in node.input if n):
            if x in inits:
                g_inits.append(inits[x])
            else:
                arr = np.asarray(values[x])
                if arr.dtype.kind == "f":
                    g_inputs.append(helper.make_tensor_value_info(
                        x, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
                    sample[x] = arr
                else:  # shapes, indices: constants for this node
                    g_inits.append(numpy_helper.from_array(arr, x))
        outs = [o for o in node.output if o and o in values]
        g_outputs = [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.asarray(values[o]).dtype),
                                                   list(np.asarray(values[o]).shape)) for o in outs]
        single = helper.make_model(helper.make_graph([node], "layer", g_inputs, g_outputs, g_inits),
                                   opset_imports=opset, ir_version=proto.ir_version)
        try:
            em = emulated_model(single, key, [sample] if sample else [{}], (), fp16_method)
            got = run_model(em, sample, optimize=False)
        except EmulationError:
            continue
        layers.append(_layer_error(i, node, t, values[t], got[t], tol))
    return layers


def diagnose(model: Any, precision: str, inputs: Feeds | None = None, *, test_id: str = "",
             calibration: Sequence[Feeds] | None = None, policy: Policy | None = None,
             mode: str = "accumulated", layer_tolerance: Tolerance | None = None,
             max_keep: int = 5, max_nodes: int | None = None,
             fp16_method: str = "storage") -> Diagnosis:
    """Locate the layers that lose accuracy under ``precision`` and search a set to keep in fp32.

    ``mode``: ``"accumulated"`` or ``"per_layer"``. ``layer_tolerance``: the bound for one
    intermediate tensor (default: the policy's default tolerance). The greedy search keeps the
    worst remaining layer (by SNR in the chosen mode) in fp32, re-emulates the whole model and
    re-compares the outputs with ``policy``, up to ``max_keep`` layers. ``max_nodes`` limits the
    per-layer mode to the first N float nodes (it builds one small model per node)."""
    if mode not in ("accumulated", "per_layer"):
        raise ValueError(f"mode must be 'accumulated' or 'per_layer', got {mode!r}")
    proto = _load(model)
    key = precision_key(precision)
    pol = policy or policy_for(key)
    tol = layer_tolerance or pol.default
    seed = seed_for(test_id)
    feeds = dict(inputs) if inputs is not None else random_inputs(proto, seed)
    if key == "int8":
        samples = list(calibration) if calibration else (
            [feeds] if inputs is not None else [random_inputs(proto, seed + 1 + i) for i in range(8)])
    else:
        samples = []
    emulated = emulated_model(proto, key, samples, (), fp16_method)
    layers, ref_values = _accumulated(proto, emulated, feeds, tol)
    if mode == "per_layer":
        layers = _per_layer(proto, key, ref_values, feeds, tol, max_nodes, fp16_method)
    first = next((e for e in sorted(layers, key=lambda e: e.index) if not e.passed), None)
    # Stable sort: among equally bad layers (several overflowing) the earliest comes first.
    ranked = sorted(layers, key=lambda e: e.badness, reverse=True)
    worst = tuple(ranked[:5])

    steps: list[GreedyStep] = []
    kept: list[str] = []
    found: tuple[str, ...] | None = None
    ref_out = run_model(proto, feeds)

    def check(keep: list[str]) -> tuple[bool, float | None]:
        cand = run_model(emulated_model(proto, key, samples, keep, fp16_method), feeds)
        comp = compare_outputs(ref_out, cand, pol)
        snrs = [o.metrics.snr_db for o in comp.outputs if o.metrics is not None]
        return comp.passed, (min(snrs) if snrs else None)

    ok, _ = check([])
    if ok:
        found = ()
    else:
        for layer in ranked:
            if len(kept) >= max_keep:
                break
            if layer.passed or not layer.node or layer.node.startswith("#"):
                continue
            kept.append(layer.node)
            ok, snr = check(kept)
            steps.append(GreedyStep(tuple(kept), ok, snr))
            if ok:
                found = tuple(kept)
                break
    return Diagnosis(key, mode, tuple(layers), first, worst, tuple(steps), found)
