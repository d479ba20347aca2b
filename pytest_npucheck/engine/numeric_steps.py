"""The numeric steps of one check, after the static verdicts: PyTorch vs ONNX Runtime (fp32), each
target's precision emulated (with a layer diagnosis when it fails), stored goldens, the per-release
budgets, and the real toolchains as oracles. Each step fills its part of the test's entry and returns
what fails the test. No pytest import; torch, onnx and onnxruntime load inside the steps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

from .. import isolate
from ..budget import report_entry
from ..emulate import diagnose, emulate, random_inputs, run_model, run_with_margins, seed_for
from ..errors import NpuCheckError
from ..golden import GoldenStore
from ..numerics import compare_outputs, policy_for, precision_key
from ..oracles.oracle import run_target
from ..toolchains.registry import default_precision
from .context import RunContext
from .entry import CheckEntry
from .settings import CheckSpec
from .torch_values import NoNumerics, input_arrays, rebuild, torch_outputs, torch_outputs_named


def oracle_step(ctx: RunContext, model: Any, example_inputs: Any, onnx_path: Path, graph: Any,
                results: Sequence[Any], tables: Sequence[Any], entry: CheckEntry) -> bool:
    """Build and run the model with each target's real toolchain where it is installed.

    Fills ``entry.oracle``; returns True when the test must fail (strict mode and a disagreement
    between the real placement and the static verdict on any target)."""

    test_id = ctx.test_id
    mode = ctx.settings.oracle_mode
    info: dict[str, Any] = {"mode": mode, "targets": [], "disagreements": 0, "notes": []}
    entry.oracle = info
    budgets = ctx.budgets
    release = ctx.settings.release if budgets is not None else None
    test_budget = budgets.for_test(release, test_id, type(model).__name__) if budgets is not None else None
    try:
        flat = input_arrays(example_inputs)
    except NoNumerics as exc:
        info["notes"].append(f"the oracles did not run: {exc}")
        return False
    feeds = dict(zip(graph.inputs, flat)) if len(flat) == len(graph.inputs) else None
    reference, reference_source, inputs_source = None, "pytorch", "given"
    if feeds is not None:
        try:
            reference = torch_outputs(model, example_inputs, graph.outputs)
        except NoNumerics as exc:
            info["notes"].append(f"the oracles did not run: {exc}")
            return False
        except ValueError as exc:
            info["notes"].append(f"no PyTorch reference: {exc}; the reference is ONNX Runtime fp32")
    else:
        feeds, inputs_source = random_inputs(onnx_path, seed_for(test_id)), "random"
        info["notes"].append("the example inputs do not line up with the ONNX inputs: seeded random inputs, "
                             "reference ONNX Runtime fp32")
    if reference is None:
        reference, reference_source = isolate.call("onnxruntime", run_model, onnx_path, feeds), "onnxruntime_fp32"
    for r, table in zip(results, tables):
        key, note = target_precision(test_budget, r.target, table, default_precision(table.toolchain))
        if note:
            info["notes"].append(note)
        policy = (test_budget.policy_for(key) if test_budget is not None
                  else policy_for("fp16" if key == "fp32" else key))
        o = run_target(onnx_path, r, table, feeds, reference, reference_source=reference_source,
                       inputs_source=inputs_source, seed=seed_for(test_id), precision=key, policy=policy,
                       calibration=[feeds], calibration_source=inputs_source,
                       budget_entry=lambda comp: report_entry(test_id, comp, test_budget))
        info["targets"].append(o.to_json())
        info["disagreements"] += o.disagreements
    return mode == "strict" and info["disagreements"] > 0


def target_precision(test_budget: Any, target: str, table: Any, fallback: str) -> tuple[str, Optional[str]]:
    """(precision key, note) a target's numerics run at: the test budget's precision for it, else the
    table's default; the note says when a budget changes a target's default."""

    default = str((table.precision or {}).get("default") or fallback)
    if test_budget is None:
        return precision_key(default), None
    return test_budget.precision_for(target, default)


def numerics_step(ctx: RunContext, spec: CheckSpec, model: Any, example_inputs: Any, onnx_path: Path,
                  graph: Any, results: Sequence[Any], tables: Sequence[Any], entry: CheckEntry) -> list[str]:
    """PyTorch vs ONNX Runtime (fp32), the targets' precision emulated, goldens and budgets.

    Fills ``entry.numerics`` and returns the failure lines (empty when everything passed)."""

    test_id = ctx.test_id
    info: dict[str, Any] = {"enabled": True, "passed": True, "error": None, "notes": [], "release": None,
                            "budget_keys": [], "onnx_vs_pytorch": None, "emulation": [], "golden": None}
    entry.numerics = info
    fail: list[str] = []
    budgets = ctx.budgets
    release = ctx.settings.release if budgets is not None else None
    info["release"] = release
    model_name = type(model).__name__
    test_budget = budgets.for_test(release, test_id, model_name) if budgets is not None else None
    if test_budget is not None:
        info["budget_keys"].append(test_budget.key)

    try:
        flat_inputs = input_arrays(example_inputs)
        feeds = dict(zip(graph.inputs, flat_inputs)) if len(flat_inputs) == len(graph.inputs) else None
        if feeds is None:
            info["notes"].append(f"example inputs ({len(flat_inputs)} tensor(s)) do not line up with the ONNX "
                                 f"inputs ({len(graph.inputs)}): emulation on seeded random inputs, no PyTorch "
                                 "comparison")
        reference, own_names = None, {}
        prefetched: Optional[tuple[str, Any]] = None  # (precision, emulation result or what it raised)
        if feeds is not None:
            try:
                reference, own_names = torch_outputs_named(model, example_inputs, graph.outputs)
            except ValueError as exc:
                info["notes"].append(f"no PyTorch comparison: {exc}")
        # 1) the exported graph on ONNX Runtime CPU (fp32) vs PyTorch
        if reference is not None:
            # a model run in half precision is compared as fp16 (one ulp of fp16 is 1e-3 relative,
            # beyond every fp32 bound); its other outputs keep their own dtypes' exactness
            half = any(str(getattr(v, "dtype", "")) == "float16" for v in reference.values())
            ort_key = "fp16" if half else "fp32"
            if half:
                info["notes"].append("the model computes in float16: ONNX Runtime vs PyTorch is compared with "
                                     "the fp16 policy")
            # integer outputs are labels: the logits ONNX Runtime computes tell a near-tie from a flip.
            # The first target precision's emulation runs in the same child, on this fp32 run
            first = first_emulation(test_budget, results, tables)
            plan = None if first is None else (*first, {"test_id": test_id, "calibration": [feeds] if feeds else None,
                                                        "model_names": own_names})
            onnx_out, margins, prefetched = fp32_run(onnx_path, feeds, plan)
            comp = compare_outputs(reference, onnx_out, policy_for(ort_key), margins=margins, model_names=own_names)
            info["onnx_vs_pytorch"] = comp.to_json()
            if not comp.passed:
                fail.append(f"ONNX export (ONNX Runtime CPU, {'float16 model' if half else 'fp32'}) vs PyTorch "
                            f"eager, {ort_key} policy:")
                fail += ["  " + line for line in comp.lines()]
        # 2) the target's precision, emulated
        done: dict[str, Any] = {}
        first_target: dict[str, str] = {}
        for r, table in zip(results, tables):
            key, note = target_precision(test_budget, r.target, table, "float32")
            if note:  # a budget changing a target's default precision is said, in the reports and the terminal
                info["notes"].append(note)
                ctx.warn(f"npu_check: {note}")
            if key == "fp32":
                continue
            if key in done:
                info["emulation"].append({**done[key], "target": r.target})
                if not done[key]["passed"]:  # one emulation per precision: say which targets share its failure
                    fail.append(f"{r.target}: {key} emulation vs fp32: FAIL, the same emulation as "
                                f"{first_target[key]} above")
                continue
            first_target[key] = r.target
            policy = test_budget.policy_for(key) if test_budget is not None else policy_for(key)
            if prefetched is not None and prefetched[0] == key:
                emu = prefetched[1]
                prefetched = None
                if isinstance(emu, BaseException):
                    raise emu  # as the emulation's own call would have raised it
            else:
                emu = isolate.call(f"onnxruntime ({key} emulation)", emulate, onnx_path, key, feeds, test_id=test_id,
                                   calibration=[feeds] if feeds else None, policy=policy, model_names=own_names)
            ej_result = emu.to_json()
            ej_result.pop("seconds", None)  # reports stay identical across runs and processes
            ej: dict[str, Any] = {"target": r.target, "precision": key, "passed": emu.passed, "result": ej_result,
                                  "budget": report_entry(test_id, emu.comparison, test_budget)}
            done[key] = {k: v for k, v in ej.items() if k != "target"}
            info["emulation"].append(ej)
            if not emu.passed:
                where = f" (budget {test_budget.key!r}, release {test_budget.release})" if test_budget else ""
                fail.append(f"{r.target}: {key} emulation vs fp32, policy {emu.comparison.policy}{where}:")
                fail += ["  " + line for line in emu.lines()]
                try:
                    diag = isolate.call(f"onnxruntime ({key} layer diagnosis)", diagnose, onnx_path, key, feeds,
                                        test_id=test_id, calibration=[feeds] if feeds else None, policy=policy)
                    done[key]["diagnosis"] = diag.to_json()
                    info["emulation"][-1]["diagnosis"] = diag.to_json()
                    fail += ["  " + line for line in diag.lines()]
                except Exception as exc:  # the diagnosis is a help, never the verdict
                    fail.append(f"  (no layer diagnosis: {type(exc).__name__}: {exc})")
        # 3) stored goldens
        if ctx.settings.golden_on(spec):
            fail += golden_step(ctx, model, example_inputs, feeds, reference, graph, info)
    except NoNumerics as exc:
        info["error"] = str(exc)
        fail.append(f"the numeric check could not run: {exc}")
    except Exception as exc:
        if not isinstance(exc, (NpuCheckError, ValueError, RuntimeError, OSError)):
            raise
        info["error"] = f"{type(exc).__name__}: {exc}"
        where = "" if str(onnx_path) in str(exc) else f" (model {onnx_path})"  # F1: which file ORT refused
        fail.append(f"the numeric check could not run: {info['error']}{where}")
    info["passed"] = not fail
    if not fail:
        return []
    return [f"numerics: {test_id} fails the numeric checks"] + fail


def first_emulation(test_budget: Any, results: Sequence[Any], tables: Sequence[Any]) -> Optional[tuple[str, Any]]:
    """(precision key, policy) of the first target whose precision is emulated (not fp32), as the
    emulation loop of :func:`numerics_step` finds it; None when every target runs fp32."""
    for r, table in zip(results, tables):
        key, _ = target_precision(test_budget, r.target, table, "float32")
        if key != "fp32":
            return key, (test_budget.policy_for(key) if test_budget is not None else policy_for(key))
    return None


def fp32_run(onnx_path: Path, feeds: dict, emulation: Optional[tuple[str, Any, dict]]
             ) -> tuple[Any, Any, Optional[tuple[str, Any]]]:
    """(outputs, label margins) of the exported graph on ONNX Runtime CPU fp32, and when
    ``emulation`` = (precision, policy, emulate's keywords) is given, that emulation on the same
    fp32 run: (precision, its result or the exception it raised), for the emulation loop.

    One isolated child does both (one fork, one fp32 session: the emulation's reference side is
    this same run). A child that dies (crash, memory) is run again as two separate steps, so the
    error names the step it died in, as it did before they shared a child."""
    if emulation is None:
        return (*isolate.call("onnxruntime", run_with_margins, onnx_path, feeds), None)
    try:
        return isolate.call("onnxruntime", _fp32_and_emulation, onnx_path, feeds, emulation)
    except isolate.IsolationError as exc:
        if exc.kind == "timeout":
            raise
    return (*isolate.call("onnxruntime", run_with_margins, onnx_path, feeds), None)


def _fp32_and_emulation(onnx_path: Path, feeds: dict, emulation: tuple[str, Any, dict]
                        ) -> tuple[Any, Any, tuple[str, Any]]:
    from ..emulate import _load

    key, policy, keywords = emulation
    proto = _load(onnx_path)  # read once: neither run changes it (the emulated model is a copy)
    outputs, margins = run_with_margins(proto, feeds)
    try:
        emu: Any = emulate(proto, key, feeds, policy=policy, fp32_run=(outputs, margins), **keywords)
    except Exception as exc:  # noqa: BLE001 - raised by the parent where the emulation's own call would raise it
        emu = isolate._portable(exc)  # one that does not pickle comes back as its text
    return outputs, margins, (key, emu)


def golden_step(ctx: RunContext, model: Any, example_inputs: Any, feeds: Optional[dict],
                 reference: Optional[dict], graph: Any, info: dict[str, Any]) -> list[str]:
    store = GoldenStore(ctx.settings.golden_root, anchor=ctx.rootpath, max_bytes=ctx.settings.golden_max_bytes)
    test_id = ctx.test_id
    policy = policy_for("fp32")
    if feeds is None or reference is None:
        info["golden"] = {"status": "error", "message": "goldens need example inputs and outputs that line up "
                                                       "with the ONNX graph"}
        return [f"golden: {info['golden']['message']}"]
    if ctx.settings.update_golden:
        res = store.check(test_id, reference, policy, feeds, update=True)
    else:
        golden = store.load(test_id)
        if golden is not None and list(golden.inputs) == list(feeds) and all(
                (golden.inputs[n].shape, golden.inputs[n].dtype) == (feeds[n].shape, feeds[n].dtype) for n in feeds):
            # the same inputs but for their values (seeded or random): run the model on the stored ones
            inputs = dict(golden.inputs)
            outputs = torch_outputs(model, rebuild(example_inputs, [inputs[n] for n in graph.inputs]),
                                     graph.outputs)
        else:  # no golden, or inputs of other names, shapes or dtypes: a mismatch that says so
            inputs, outputs = feeds, reference
        res = store.check(test_id, outputs, policy, inputs)
    info["golden"] = res.to_json()
    return [] if res.passed else ["golden: " + line for line in res.lines()[:1]] + res.lines()[1:]

