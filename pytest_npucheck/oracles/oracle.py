"""The oracle check of one exported model on one target: real placement and real numerics.

For a target whose toolchain can run here (RKNN: rknn-toolkit2; QNN: onnxruntime-qnn; any toolchain
registered with an ``oracle`` hook, :mod:`pytest_npucheck.toolchains.registry`), the model is built
and run with the real toolchain (its hook's ``simulate``) at the precision the target uses, and

* the real placement is compared node by node with the static verdicts
  (:func:`.compare.compare`): every disagreement is a bug in the support table;
* the real outputs (RKNN simulator / QNN HTP emulator) are compared with the reference outputs
  (PyTorch when the test's inputs line up with the graph, else ONNX Runtime fp32) with the same
  metrics and policy as the emulated candidates (:mod:`pytest_npucheck.numerics`).

Targets of other toolchains (SNPE, CANN, test tables) have no oracle; a toolchain that is not
installed is reported as ``unavailable`` with the reason. Plain module: no pytest, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from ..numerics import Comparison, Policy, compare_outputs, policy_for, precision_key
from ..result import TargetResult
from .compare import Agreement, compare

__all__ = ["OracleTarget", "oracle_toolchain", "run_target", "unavailable_reason"]


def oracle_toolchain(toolchain: str) -> Optional[str]:
    """The oracle package of a toolchain, or None when it has none (or is not registered)."""
    from ..toolchains import registry

    tc = registry.find(toolchain)
    return tc.package if tc is not None and tc.has_oracle else None


def unavailable_reason(toolchain: str, python: Optional[str] = None) -> Optional[str]:
    """Why the toolchain's oracle cannot run here (None when its python is found)."""
    from ..toolchains import registry

    tc = registry.find(toolchain)
    if tc is None:
        with_oracle = [n for n, t in registry.registered().items() if t.has_oracle]
        return f"no oracle for toolchain {toolchain!r} (oracles exist for {', '.join(sorted(with_oracle))})"
    return tc.unavailable_reason(python)


@dataclass
class OracleTarget:
    """What the real toolchain said about one model on one target."""

    target: str
    toolchain: str
    status: str
    """``ran`` (built or rejected by the toolchain), ``unavailable`` (not installed, or no oracle
    for this toolchain) or ``error`` (the toolchain crashed, timed out or could not start)."""
    reason: str = ""
    precision: Optional[str] = None
    package: Optional[str] = None
    package_version: Optional[str] = None
    toolchain_version: Optional[str] = None
    table_version: Optional[str] = None
    build_status: Optional[str] = None
    build_message: str = ""
    agreement: Optional[Agreement] = None
    numerics: Optional[dict[str, Any]] = None
    notes: list[str] = field(default_factory=list)
    real_reasons: dict[str, list[str]] = field(default_factory=dict)
    """Node -> what the toolchain said about it (RKNN: the CPU layer rows; QNN: the EP's REASON)."""
    comparison: Optional[Comparison] = field(default=None, repr=False)

    @property
    def disagreements(self) -> int:
        return len(self.agreement.disagreements) if self.agreement is not None else 0

    def to_json(self) -> dict[str, Any]:
        agreement = self.agreement.to_json() if self.agreement is not None else None
        for d in (agreement or {}).get("disagreements", []):
            d["real_reasons"] = list(self.real_reasons.get(d["node"], []))
        return {"target": self.target, "toolchain": self.toolchain, "status": self.status,
                "reason": self.reason, "package": self.package,
                "package_version": self.package_version, "precision": self.precision,
                "toolchain_version": self.toolchain_version, "table_version": self.table_version,
                "build_status": self.build_status, "build_message": self.build_message,
                "agreement": agreement,
                "numerics": self.numerics, "notes": list(self.notes)}


def _as_reference_dtype(reference: Mapping[str, Any], outputs: Mapping[str, Any], notes: list[str]
                        ) -> dict[str, Any]:
    """Float outputs cast to the reference's float dtype (a toolchain may hand back float16)."""
    import numpy as np

    out: dict[str, Any] = {}
    for name, arr in outputs.items():
        arr = np.asarray(arr)
        ref = reference.get(name)
        if ref is not None and arr.dtype != np.asarray(ref).dtype and arr.dtype.kind == "f" \
                and np.asarray(ref).dtype.kind == "f":
            notes.append(f"output {name!r}: the toolchain returned {arr.dtype}, compared as {np.asarray(ref).dtype}")
            arr = arr.astype(np.asarray(ref).dtype)
        out[name] = arr
    return out


def run_target(onnx_path: Any, result: TargetResult, table: Any, feeds: Mapping[str, Any],
               reference: Mapping[str, Any], *, reference_source: str = "pytorch",
               inputs_source: str = "given", seed: Optional[int] = None, precision: str = "fp16",
               policy: Optional[Policy] = None, calibration: Optional[Sequence[Mapping[str, Any]]] = None,
               calibration_source: str = "given", python: Optional[str] = None,
               timeout: float = 600.0, budget_entry: Any = None) -> OracleTarget:
    """Build and run the model with ``table``'s real toolchain and compare with the static result.

    ``feeds``/``reference``: the inputs and the reference outputs (by ONNX output name) the numbers
    are compared with. ``precision``: the target's precision (``fp32`` runs as ``fp16``: neither
    NPU computes in fp32). ``budget_entry``: callable ``(comparison) -> dict`` giving the budget
    view of a comparison (metrics, budget applied, margin); default: the comparison alone.
    """
    tc = table.toolchain
    try:
        return _run_target(onnx_path, result, table, feeds, reference, reference_source=reference_source,
                           inputs_source=inputs_source, seed=seed, precision=precision, policy=policy,
                           calibration=calibration, calibration_source=calibration_source, python=python,
                           timeout=timeout, budget_entry=budget_entry)
    except Exception as exc:  # noqa: BLE001 - an oracle that breaks is reported, never the test's verdict
        return OracleTarget(target=result.target, toolchain=tc, status="error", package=oracle_toolchain(tc),
                            table_version=table.version, reason=f"{type(exc).__name__}: {exc}")


def _run_target(onnx_path: Any, result: TargetResult, table: Any, feeds: Mapping[str, Any],
                reference: Mapping[str, Any], *, reference_source: str, inputs_source: str, seed: Optional[int],
                precision: str, policy: Optional[Policy], calibration: Optional[Sequence[Mapping[str, Any]]],
                calibration_source: str, python: Optional[str], timeout: float, budget_entry: Any) -> OracleTarget:
    from ..toolchains import registry
    from .simulate import ToolchainUnavailable

    tc = table.toolchain
    out = OracleTarget(target=result.target, toolchain=tc, status="unavailable",
                       package=oracle_toolchain(tc), table_version=table.version)
    why = unavailable_reason(tc, python)
    if why is not None:
        out.reason = why
        return out
    key = precision_key(precision)
    if key == "fp32":
        out.notes.append("the target's precision is fp32; the toolchain builds fp16 (neither NPU computes in fp32)")
        key = "fp16"
    out.precision = key
    pol = policy or policy_for(key)
    names = list(reference) if reference else []
    toolchain = registry.get(tc)
    try:
        runs = toolchain.hook("oracle").simulate(onnx_path, table, feeds, names, (key,), calibration, python, timeout)
    except (ToolchainUnavailable, ValueError, OSError) as exc:
        out.status, out.reason = "error", f"{type(exc).__name__}: {exc}"
        return out
    run = runs[key]
    out.toolchain_version = run.toolchain_version
    out.package_version = run.package_version
    if run.status in ("crashed", "timeout"):
        out.status, out.reason = "error", run.message
        return out
    out.status = "ran"
    out.build_status = run.status
    out.build_message = run.message
    if run.toolchain_version and table.version and not _same_version(run.toolchain_version, table.version):
        out.notes.append(f"the installed {out.package} is {tc} {run.toolchain_version}, the table is for "
                         f"{table.version}: a disagreement may be a difference between the versions")
    out.agreement = compare(result, run.placement, run.built)
    out.real_reasons = {k: list(v) for k, v in run.reasons.items()}
    num: dict[str, Any] = {"candidate": f"{toolchain.engine or tc} {key}", "precision": key, "reference": reference_source,
                           "inputs_source": inputs_source, "seed": seed, "passed": None, "status": None,
                           "message": "", "comparison": None, "budget": None}
    if key == "int8":
        num["calibration_source"] = calibration_source
        num["calibration_samples"] = len(calibration or [feeds])
    if not run.built:
        num["status"] = "not_built"
        num["message"] = "the toolchain did not build the model"
    elif not run.ran:
        num["status"] = run.inference_status or "not_run"
        num["message"] = run.inference_message or "the toolchain did not produce outputs"
    else:
        cand = _as_reference_dtype(reference, run.outputs, out.notes)
        comp = compare_outputs(reference, cand, pol)
        out.comparison = comp
        num.update(status="ok", passed=comp.passed, comparison=comp.to_json(),
                   budget=budget_entry(comp) if budget_entry is not None else None)
    out.numerics = num
    return out


def _same_version(installed: str, table: str) -> bool:
    """``2.51.0`` matches ``2.51.0`` and ``2.51``; build stamps after the third part are ignored."""
    a, b = installed.split("."), table.split(".")
    n = min(len(b), 3)
    return a[:n] == b[:n]


def lines(o: OracleTarget | Mapping[str, Any]) -> list[str]:
    """Text for the terminal and the failure message (:func:`pytest_npucheck.report.text.oracle_lines`)."""
    from ..report.text import oracle_lines

    return oracle_lines(o.to_json() if isinstance(o, OracleTarget) else o)
