"""Compare a reference output with a candidate output: metrics, a tolerance policy, a verdict.

Plain module: numpy only (imported lazily), no pytest, no torch. The rules, chosen against the
pitfalls listed in ``reliability.md`` section 3:

* shapes and dtypes must match exactly: nothing broadcasts, an empty candidate never matches a
  non-empty reference, ``float16`` is not ``float32``;
* NaN/Inf fail unless the output's tolerance sets ``allow_nonfinite`` (then NaN matches NaN and
  an infinity matches the same infinity; every other non-finite position is a mismatch);
* integer and bool outputs are differenced exactly without wrap-around (``uint8`` 3 vs 5 is 2,
  never 254), then measured in float64; floats are promoted to float64 before subtracting.

The verdict for one output (:class:`Tolerance`, all of it documented in ``docs/numerics.md``)::

    pass  =  cosine >= cosine_min
         AND |norm_ratio - 1| <= norm_ratio_tol                  (magnitude: cosine is scale-blind)
         AND ( out_of_tolerance_fraction <= mismatch_fraction     (element-wise:
                                                                     |c-r| > atol_eff + rtol*|r|)
               OR snr_db >= snr_db_min )                         (or a whole-tensor SNR)

with ``atol_eff = max(atol, peak_atol * max|r|)`` so a default policy works for outputs of any
scale. Any bound set to ``None`` is not checked (``snr_db_min=None`` means "element-wise only").

Integer and bool outputs are labels (class ids, argmax/TopK indices, masks), never measured with
float metrics: an element either matches or it flips. A flip counts only when the reference's own
margin between its top candidates (the logits the label was taken from, :func:`label_margins`)
exceeds the tie tolerance ``2 * max(atol, peak_atol * max|logits|)``: both candidates may each move
by the tolerance, so a closer race is a near-tie, reported and not failed. Where the margins are not
known, every flip counts. The output passes when the counted flips are at most ``mismatch_fraction``
of its elements (default 0).

A failing :class:`OutputComparison` carries shapes, the count of elements out of tolerance, the
five worst elements with both values, each metric as "measured vs allowed", and the minimum
tolerance that would have passed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "Check",
    "LabelStats",
    "label_margins",
    "Comparison",
    "DEFAULT_POLICIES",
    "Metrics",
    "OutputComparison",
    "Policy",
    "Tolerance",
    "Worst",
    "compare_arrays",
    "compare_outputs",
    "json_float",
    "policy_for",
    "precision_key",
]

_WORST_K = 5


def json_float(x: float | None) -> float | str | None:
    """A float for JSON: NaN becomes the string "nan", infinities "inf"/"-inf"; None stays None."""
    if x is None:
        return None
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _from_json_float(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, str):
        return float(x)  # "inf", "-inf", "nan"
    return float(x)


# --------------------------------------------------------------------------- tolerance / policy


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Bounds for one output; ``None`` disables a bound. See the module docstring for the rule.

    ``cosine_min``: minimum cosine similarity (flattened). ``norm_ratio_tol``: allowed
    ``|‖c‖/‖r‖ - 1|``. ``atol``/``peak_atol``/``rtol``: the element-wise bound
    ``|c-r| <= max(atol, peak_atol*max|r|) + rtol*|r|``. ``mismatch_fraction``: fraction of
    elements allowed outside that bound (0: none). ``snr_db_min``: a whole-tensor SNR that
    passes the output even when single elements are out of bounds (int8 rounding).
    ``rel_floor``: denominator floor of the reported relative error (``None``: ``1e-3*max|r|``).
    ``allow_nonfinite``: NaN/Inf allowed when they sit at the same positions in both.
    """

    cosine_min: float | None = 0.9999
    norm_ratio_tol: float | None = 1e-3
    atol: float = 0.0
    peak_atol: float = 1e-4
    rtol: float = 1e-4
    mismatch_fraction: float = 0.0
    snr_db_min: float | None = None
    rel_floor: float | None = None
    allow_nonfinite: bool = False

    _FIELDS = (
        "cosine_min", "norm_ratio_tol", "atol", "peak_atol", "rtol", "mismatch_fraction",
        "snr_db_min", "rel_floor", "allow_nonfinite",
    )

    def __post_init__(self) -> None:
        for f in ("atol", "peak_atol", "rtol", "mismatch_fraction"):
            v = getattr(self, f)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not v >= 0:
                raise ValueError(f"tolerance {f} must be a number >= 0, got {v!r}")
        if self.cosine_min is not None and not -1.0 <= self.cosine_min <= 1.0:
            raise ValueError(f"tolerance cosine_min must be in [-1, 1], got {self.cosine_min!r}")
        if self.mismatch_fraction > 1:
            raise ValueError(f"tolerance mismatch_fraction must be <= 1, got {self.mismatch_fraction}")

    def updated(self, changes: Mapping[str, Any]) -> Tolerance:
        """A copy with ``changes`` applied (keys are field names; unknown keys are an error)."""
        unknown = set(changes) - set(self._FIELDS)
        if unknown:
            raise ValueError(
                f"unknown tolerance key(s) {', '.join(sorted(unknown))}; known: {', '.join(self._FIELDS)}"
            )
        conv = {k: (_from_json_float(v) if k not in ("allow_nonfinite",) else bool(v)) for k, v in changes.items()}
        for k in ("atol", "peak_atol", "rtol", "mismatch_fraction"):
            if k in conv and conv[k] is None:
                raise ValueError(f"tolerance {k} cannot be null")
        return dataclasses.replace(self, **conv)

    def to_json(self) -> dict[str, Any]:
        return {f: (getattr(self, f) if f == "allow_nonfinite" else json_float(getattr(self, f)))
                for f in self._FIELDS}


@dataclasses.dataclass(frozen=True)
class Policy:
    """A default :class:`Tolerance` plus per-output overrides (by output name)."""

    default: Tolerance
    overrides: Mapping[str, Tolerance] = dataclasses.field(default_factory=dict, hash=False)
    name: str = "custom"

    def for_output(self, name: str) -> Tolerance:
        return self.overrides.get(name, self.default)

    def with_overrides(self, default: Mapping[str, Any] | None = None,
                       outputs: Mapping[str, Mapping[str, Any]] | None = None) -> Policy:
        """A policy whose default is updated by ``default`` and whose listed outputs get
        ``outputs[name]`` applied on top of the (updated) default."""
        base = self.default.updated(default or {})
        over = dict(self.overrides)
        for out, changes in (outputs or {}).items():
            over[out] = over.get(out, base).updated(changes)
        return Policy(base, over, self.name)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "default": self.default.to_json(),
                "overrides": {k: v.to_json() for k, v in sorted(self.overrides.items())}}


#: Default tolerances per precision, measured on 22 corpus architectures (docs/numerics.md):
#: fp32 vs fp32 (PyTorch eager vs ONNX Runtime, the widest fp32-vs-fp32 gap we can produce):
#: worst peak-relative error 1.9e-6, |norm ratio - 1| 3.3e-7, 1 - cosine 1.6e-12;
#: fp16 emulation: worst peak-relative error 3.5e-3, |norm ratio - 1| 1.5e-3, cosine 0.999996,
#: SNR 50.0 dB (vit_tiny); int8 QDQ: worst cosine 0.9848 and SNR 15.2 dB (t5_encoder_tiny),
#: |norm ratio - 1| 0.035 (distilbert_tiny); vit_tiny fails int8 (cosine 0.964) on purpose.
DEFAULT_POLICIES: Mapping[str, Policy] = {
    # Goldens and re-runs of fp32: about 10x the fp32-vs-fp32 noise; any real bug measured
    # (BatchNorm/LayerNorm eps, a swapped channel) is >= 4x beyond it.
    "fp32": Policy(Tolerance(cosine_min=0.999999, norm_ratio_tol=1e-5, peak_atol=2e-5, rtol=0.0,
                             snr_db_min=None), name="fp32"),
    # fp16 emulation (fp16 weights and activations, fp32 graph I/O): ~3x the worst model.
    "fp16": Policy(Tolerance(cosine_min=0.9999, norm_ratio_tol=5e-3, peak_atol=1e-2, rtol=0.0,
                             snr_db_min=40.0), name="fp16"),
    # int8 QDQ emulation (per-tensor int8 activations, per-channel int8 weights): just below
    # the worst passing model; int8 noise overlaps small bugs (those are the goldens' job).
    "int8": Policy(Tolerance(cosine_min=0.98, norm_ratio_tol=0.05, peak_atol=0.1, rtol=0.0,
                             snr_db_min=14.0), name="int8"),
}

_PRECISION_ALIASES = {
    "fp32": "fp32", "float32": "fp32", "float": "fp32", "tf32": "fp32",
    "fp16": "fp16", "float16": "fp16", "half": "fp16", "bf16": "fp16", "bfloat16": "fp16",
    "int8": "int8", "uint8": "int8", "i8": "int8", "qint8": "int8", "quint8": "int8", "a8w8": "int8",
}


def precision_key(precision: str) -> str:
    """Normalise a table precision (``float16``, ``int8``...) to ``fp32``/``fp16``/``int8``."""
    key = _PRECISION_ALIASES.get(str(precision).strip().lower())
    if key is None:
        raise ValueError(
            f"unknown precision {precision!r}; known: {', '.join(sorted(_PRECISION_ALIASES))}"
        )
    return key


def policy_for(precision: str) -> Policy:
    """The default policy for a precision name as the tables spell it (``float16`` -> fp16).

    bfloat16 is mapped to the fp16 policy (a placeholder: bf16 has fewer mantissa bits and is
    not measured yet)."""
    return DEFAULT_POLICIES[precision_key(precision)]


# --------------------------------------------------------------------------- results


@dataclasses.dataclass(frozen=True)
class Check:
    """One bound: ``measured`` compared with ``allowed`` using ``op`` (">=" or "<=")."""

    metric: str
    measured: float | None
    op: str
    allowed: float | None
    passed: bool

    def to_json(self) -> dict[str, Any]:
        return {"metric": self.metric, "measured": json_float(self.measured), "op": self.op,
                "allowed": json_float(self.allowed), "passed": self.passed}

    def text(self) -> str:
        mark = "ok  " if self.passed else "FAIL"
        measured, allowed = _fmt_apart(self.measured, self.allowed)
        return f"{mark} {self.metric}: needed {measured} {self.op} allowed {allowed}"


@dataclasses.dataclass(frozen=True)
class Worst:
    """An element far from the reference: its index, both values and the absolute error."""

    index: tuple[int, ...]
    reference: float | int | None
    candidate: float | int | None
    abs_error: float | None

    def to_json(self) -> dict[str, Any]:
        def val(v: Any) -> Any:
            return json_float(v) if isinstance(v, float) else v
        return {"index": list(self.index), "reference": val(self.reference),
                "candidate": val(self.candidate), "abs_error": json_float(self.abs_error)}


@dataclasses.dataclass(frozen=True)
class Metrics:
    """Error statistics over the finite, comparable elements (float64 arithmetic)."""

    max_abs: float
    mean_abs: float
    max_rel: float
    rel_floor: float
    cosine: float
    norm_ratio: float
    snr_db: float
    peak: float
    compared: int

    def to_json(self) -> dict[str, Any]:
        return {f.name: (json_float(getattr(self, f.name)) if f.name != "compared" else self.compared)
                for f in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class LabelStats:
    """An integer or bool output compared as labels: elements that differ (``flips``), those of them
    that count (the reference's margin exceeds ``tie_tolerance``, or margins unknown) and the
    near-ties (reported, not failed). ``margins_known`` says whether the logits were found."""

    flips: int
    counted: int
    near_ties: int
    margins_known: bool
    tie_tolerance: float | None
    flipped: tuple[tuple[tuple[int, ...], int, int, float | None], ...]  # (index, ref, cand, margin), first 5

    def to_json(self) -> dict[str, Any]:
        return {"flips": self.flips, "counted": self.counted, "near_ties": self.near_ties,
                "margins_known": self.margins_known, "tie_tolerance": json_float(self.tie_tolerance),
                "flipped": [{"index": list(i), "reference": r, "candidate": c, "margin": json_float(m)}
                            for i, r, c, m in self.flipped]}


@dataclasses.dataclass(frozen=True)
class OutputComparison:
    """The verdict for one output. ``reasons`` lists structural failures (shape, dtype,
    non-finite); ``checks`` the metric bounds; ``min_passing`` the loosest-needed tolerance."""

    name: str
    passed: bool
    reference_shape: tuple[int, ...]
    candidate_shape: tuple[int, ...]
    reference_dtype: str
    candidate_dtype: str
    size: int
    reasons: tuple[str, ...]
    metrics: Metrics | None
    checks: tuple[Check, ...]
    out_of_tolerance: int
    worst: tuple[Worst, ...]
    min_passing: Mapping[str, float | None]
    tolerance: Tolerance
    labels: LabelStats | None = None  # set for integer and bool outputs
    model_name: str | None = None  # the model's own name of this output (dict key, namedtuple field)

    def check(self, metric: str) -> Check | None:
        for c in self.checks:
            if c.metric == metric:
                return c
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "reference": {"shape": list(self.reference_shape), "dtype": self.reference_dtype},
            "candidate": {"shape": list(self.candidate_shape), "dtype": self.candidate_dtype},
            "size": self.size,
            "reasons": list(self.reasons),
            "metrics": self.metrics.to_json() if self.metrics else None,
            "checks": [c.to_json() for c in self.checks],
            "out_of_tolerance": self.out_of_tolerance,
            "worst": [w.to_json() for w in self.worst],
            "min_passing": {k: json_float(v) for k, v in self.min_passing.items()},
            "tolerance": self.tolerance.to_json(),
            **({"labels": self.labels.to_json()} if self.labels is not None else {}),
            **({"model_name": self.model_name} if self.model_name else {}),
        }

    @property
    def title(self) -> str:
        """``'labels'`` (the model's name for it) and, when it differs, the ONNX output name."""
        if self.model_name and self.model_name != self.name:
            return f"{self.model_name!r} (ONNX output {self.name!r})"
        return repr(self.name)

    def summary_lines(self) -> list[str]:
        """The one line of an output among others: a pass without its details, a failure in full."""
        if not self.passed:
            return self.lines()
        m = self.metrics
        nums = (f": cosine {_fmt4(m.cosine)}, SNR {_fmt4(m.snr_db)} dB, max_abs {_fmt4(m.max_abs)}"
                if m is not None else "")
        return [f"PASS output {self.title}{nums}"]

    def lines(self) -> list[str]:
        """A human report, one string per line."""
        head = "PASS" if self.passed else "FAIL"
        out = [f"{head} output {self.title}: reference {self.reference_dtype}{list(self.reference_shape)}"
               f" vs candidate {self.candidate_dtype}{list(self.candidate_shape)}"]
        out += [f"  {r}" for r in self.reasons]
        if self.labels is not None:
            lab = self.labels
            if not lab.margins_known:
                how = "margins unknown (the logits were not found): every flip counts"
            else:
                how = (f"{lab.counted} beyond the reference's margin, {lab.near_ties} near-tie(s) within the tie "
                       f"tolerance {_fmt(lab.tie_tolerance)} (reported, not failed)")
            out.append(f"  compared as labels: {lab.flips} of {self.size} element(s) differ; {how}")
            out += [f"  {c.text()}" for c in self.checks]
            if lab.flipped:
                out.append("  flipped elements (index: reference -> candidate, the reference's margin):")
                out += [f"    {list(i)}: {r} -> {c}, margin {_fmt(m)}" for i, r, c, m in lab.flipped]
            return out
        if self.metrics is not None:
            m = self.metrics
            pct = 100.0 * self.out_of_tolerance / self.size if self.size else 0.0
            out.append(f"  elements out of tolerance: {self.out_of_tolerance} / {self.size} ({pct:.3g}%)")
            out.append(f"  max_abs {_fmt(m.max_abs)}  mean_abs {_fmt(m.mean_abs)}  max_rel {_fmt(m.max_rel)}"
                       f" (floor {_fmt(m.rel_floor)})  cosine {_fmt4(m.cosine)}  norm_ratio {_fmt(m.norm_ratio)}"
                       f"  snr {_fmt(m.snr_db)} dB  peak |ref| {_fmt(m.peak)}")
            out += [f"  {c.text()}" for c in self.checks]
            if self.worst:
                out.append("  worst elements (index: reference -> candidate, |error|):")
                out += [f"    {list(w.index)}: {_fmt(w.reference)} -> {_fmt(w.candidate)}, {_fmt(w.abs_error)}"
                        for w in self.worst]
            if not self.passed and self.min_passing:
                parts = ", ".join(f"{k}={_fmt_bound(v, lower=k in _LOWER_BOUNDS)}"
                                  for k, v in self.min_passing.items() if v is not None)
                out.append(f"  minimum tolerance that would have passed: {parts}")
        return out


@dataclasses.dataclass(frozen=True)
class Comparison:
    """All outputs of a run. Outputs are matched by name; a missing or extra output fails."""

    outputs: tuple[OutputComparison, ...]
    missing: tuple[str, ...] = ()
    extra: tuple[str, ...] = ()
    policy: str = ""
    unknown_overrides: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return (not self.missing and not self.extra and not self.unknown_overrides
                and all(o.passed for o in self.outputs))

    def output(self, name: str) -> OutputComparison:
        for o in self.outputs:
            if o.name == name:
                return o
        raise KeyError(name)

    def to_json(self) -> dict[str, Any]:
        return {"passed": self.passed, "policy": self.policy, "missing": list(self.missing),
                "extra": list(self.extra), "unknown_overrides": list(self.unknown_overrides), "outputs": [o.to_json() for o in self.outputs]}

    def lines(self) -> list[str]:
        out: list[str] = []
        if self.missing:
            out.append(f"FAIL outputs missing from the candidate: {', '.join(self.missing)}")
        if self.extra:
            out.append(f"FAIL outputs not in the reference: {', '.join(self.extra)}")
        if self.unknown_overrides:
            out.append("FAIL tolerance overrides name no output (typo?): "
                       + ", ".join(self.unknown_overrides))
        for o in self.outputs:
            # a failure shows the details of the outputs that failed; one that passed gets one line
            out += o.summary_lines() if not self.passed else o.lines()
        return out


# --------------------------------------------------------------------------- comparison


def _fmt4(x: Any) -> str:
    """A metric with the digits that matter (``report.formatting.number``)."""
    from .report.formatting import number

    return number(x)


def _fmt(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, (bool, int)) and not isinstance(x, float):
        return str(x)
    try:
        x = float(x)
    except (TypeError, ValueError):
        return str(x)
    if math.isnan(x) or math.isinf(x):
        return str(x)
    return f"{x:.6g}"


_LOWER_BOUNDS = frozenset({"cosine_min", "snr_db_min"})  # tolerances that are minimums: a metric must reach them


def _fmt_apart(a: Any, b: Any) -> tuple[str, str]:
    """Two numbers with as many digits as it takes to tell them apart (0.99999998 is not 1)."""
    fa, fb = _fmt(a), _fmt(b)
    if fa != fb or not all(isinstance(v, float) and math.isfinite(v) for v in (a, b)) or a == b:
        return fa, fb
    for digits in range(7, 18):
        fa, fb = f"{a:.{digits}g}", f"{b:.{digits}g}"
        if fa != fb:
            break
    return fa, fb


def _fmt_bound(x: Any, lower: bool) -> str:
    """A tolerance that passes when given back as written: six digits, unless rounding them would
    move the bound past the measured value (a minimum of 0.99999998 printed as 1 would fail)."""
    text = _fmt(x)
    if not isinstance(x, float) or not math.isfinite(x):
        return text
    for digits in range(6, 18):
        text = f"{x:.{digits}g}"
        printed = float(text)
        if (printed <= x) if lower else (printed >= x):
            return text
    return repr(x)


def _exact_abs_diff(ref: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """|cand - ref| as float64, exact for integers (no wrap-around), promoted for floats."""
    import numpy as np

    if ref.dtype == np.bool_:
        return (ref != cand).astype(np.float64)
    if np.issubdtype(ref.dtype, np.integer):
        # Modular uint64 subtraction of the larger minus the smaller is the exact difference.
        if np.issubdtype(ref.dtype, np.signedinteger):
            a, b = ref.astype(np.int64), cand.astype(np.int64)
        else:
            a, b = ref.astype(np.uint64), cand.astype(np.uint64)
        ua, ub = a.astype(np.uint64), b.astype(np.uint64)
        diff = np.where(a >= b, ua - ub, ub - ua)
        return diff.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf: handled as non-finite
        return np.abs(cand.astype(np.float64) - ref.astype(np.float64))


def _scalar(v: Any) -> float | int | None:
    import numpy as np

    if isinstance(v, (np.bool_, bool)):
        return int(bool(v))
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, np.complexfloating):
        return None
    return None


def _structural_result(name: str, ref: Any, cand: Any, tol: Tolerance, reasons: list[str],
                       ref_shape: tuple[int, ...], cand_shape: tuple[int, ...],
                       ref_dtype: str, cand_dtype: str, size: int) -> OutputComparison:
    return OutputComparison(name, False, ref_shape, cand_shape, ref_dtype, cand_dtype, size,
                            tuple(reasons), None, (), 0, (), {}, tol)


def compare_arrays(reference: Any, candidate: Any, tolerance: Tolerance | None = None,
                   name: str = "output", margins: Any = None, logits_peak: float | None = None
                   ) -> OutputComparison:
    """Compare one output. ``reference`` is the trusted side (golden / fp32 run).

    Arrays are taken as given (``np.asarray`` without dtype conversion); Python scalars are
    0-d arrays of numpy's default dtype, so pass arrays when dtype matters. Integer and bool
    outputs are compared as labels; ``margins`` (the reference's margin between its top
    candidates per element, same size) and ``logits_peak`` (max |logits|) tell near-ties apart.
    """
    import numpy as np

    tol = tolerance or DEFAULT_POLICIES["fp32"].default
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    rs, cs = tuple(int(d) for d in ref.shape), tuple(int(d) for d in cand.shape)
    rd, cd = str(ref.dtype), str(cand.dtype)
    reasons: list[str] = []
    if rs != cs:
        what = ("an empty candidate vs a non-empty reference" if cand.size == 0 and ref.size
                else "a non-empty candidate vs an empty reference" if ref.size == 0 and cand.size
                else "no broadcasting")
        reasons.append(f"shape mismatch: reference {list(rs)} vs candidate {list(cs)} ({what})")
    if rd != cd:
        reasons.append(f"dtype mismatch: reference {rd} vs candidate {cd} (dtypes must match exactly)")
    for label, arr in (("reference", ref), ("candidate", cand)):
        if arr.dtype.kind not in "biuf":
            reasons.append(f"{label} dtype {arr.dtype} cannot be compared numerically")
    if reasons:
        return _structural_result(name, ref, cand, tol, reasons, rs, cs, rd, cd, int(ref.size))

    size = int(ref.size)
    if size == 0:
        return OutputComparison(name, True, rs, cs, rd, cd, 0, (), None, (), 0, (), {}, tol)
    if ref.dtype.kind in "biu":
        return _compare_labels(name, ref, cand, tol, margins, logits_peak)

    diff = _exact_abs_diff(ref, cand)
    ref64 = ref.astype(np.float64)
    cand64 = cand.astype(np.float64)
    finite_r = np.isfinite(ref64)
    finite_c = np.isfinite(cand64)
    both_finite = finite_r & finite_c
    nonfinite_mismatch = np.zeros(ref.shape, dtype=bool)
    if not (finite_r.all() and finite_c.all()):
        if not tol.allow_nonfinite:
            for label, arr, fin in (("reference", ref64, finite_r), ("candidate", cand64, finite_c)):
                if not fin.all():
                    n_nan = int(np.isnan(arr).sum())
                    n_inf = int(np.isinf(arr).sum())
                    first = [list(map(int, i)) for i in np.argwhere(~fin)[:_WORST_K]]
                    reasons.append(f"{label} has {n_nan} NaN and {n_inf} Inf value(s) (first at {first});"
                                   " set allow_nonfinite for this output if that is expected")
        same = (np.isnan(ref64) & np.isnan(cand64)) | (np.isinf(ref64) & (ref64 == cand64))
        nonfinite_mismatch = ~both_finite & ~same
        if tol.allow_nonfinite and nonfinite_mismatch.any():
            first = [list(map(int, i)) for i in np.argwhere(nonfinite_mismatch)[:_WORST_K]]
            reasons.append(f"{int(nonfinite_mismatch.sum())} non-finite value(s) differ between reference"
                           f" and candidate (first at {first})")

    d = np.where(both_finite, diff, 0.0)
    r = np.where(both_finite, ref64, 0.0)
    c = np.where(both_finite, cand64, 0.0)
    compared = int(both_finite.sum())
    peak = float(np.max(np.abs(r))) if compared else 0.0
    max_abs = float(d.max()) if compared else 0.0
    mean_abs = float(d.sum() / compared) if compared else 0.0
    rel_floor = tol.rel_floor if tol.rel_floor is not None else max(1e-3 * peak, 1e-12)
    max_rel = float((d / np.maximum(np.abs(r), rel_floor)).max()) if compared else 0.0
    nr = float(np.sqrt(np.sum(r * r)))
    nc = float(np.sqrt(np.sum(c * c)))
    nd = float(np.sqrt(np.sum(d * d)))
    if nr == 0.0 and nc == 0.0:
        cosine, norm_ratio = 1.0, 1.0
    elif nr == 0.0 or nc == 0.0:
        cosine, norm_ratio = 0.0, (math.inf if nr == 0.0 else 0.0)
    else:
        cosine = float(np.clip(np.sum(r * c) / (nr * nc), -1.0, 1.0))
        norm_ratio = nc / nr
    if nd == 0.0:
        snr_db = math.inf
    elif nr == 0.0:
        snr_db = -math.inf
    else:
        snr_db = float(20.0 * math.log10(nr / nd))
    metrics = Metrics(max_abs, mean_abs, max_rel, float(rel_floor), cosine, norm_ratio, snr_db,
                      peak, compared)

    atol_eff = max(tol.atol, tol.peak_atol * peak)
    allowed = atol_eff + tol.rtol * np.abs(r)
    out_mask = (both_finite & (d > allowed)) | nonfinite_mismatch
    n_out = int(out_mask.sum())
    frac = n_out / size

    checks: list[Check] = []
    if tol.cosine_min is not None:
        checks.append(Check("cosine", cosine, ">=", tol.cosine_min, cosine >= tol.cosine_min))
    if tol.norm_ratio_tol is not None:
        dev = abs(norm_ratio - 1.0)
        checks.append(Check("norm_ratio_deviation", dev, "<=", tol.norm_ratio_tol, dev <= tol.norm_ratio_tol))
    elem = Check("out_of_tolerance_fraction", frac, "<=", tol.mismatch_fraction, frac <= tol.mismatch_fraction)
    checks.append(Check("max_abs", max_abs, "<=", atol_eff + tol.rtol * peak if tol.rtol else atol_eff,
                        max_abs <= atol_eff + (tol.rtol * peak if tol.rtol else 0.0)))
    checks.append(elem)
    snr_ok = False
    if tol.snr_db_min is not None:
        snr_ok = snr_db >= tol.snr_db_min
        checks.append(Check("snr_db", snr_db, ">=", tol.snr_db_min, snr_ok))
    direction_ok = all(c_.passed for c_ in checks if c_.metric in ("cosine", "norm_ratio_deviation"))
    passed = not reasons and direction_ok and (elem.passed or snr_ok)

    # The five worst elements: non-finite mismatches first, then by absolute error.
    score = np.where(nonfinite_mismatch, np.inf, np.where(both_finite, d, -1.0)).ravel()
    k = min(_WORST_K, size)
    idx = np.argpartition(-score, k - 1)[:k] if k < size else np.arange(size)
    idx = idx[np.argsort(-score[idx], kind="stable")]
    worst = []
    for flat in idx:
        if score[flat] <= 0 and not nonfinite_mismatch.ravel()[flat]:
            continue
        pos = tuple(int(i) for i in np.unravel_index(int(flat), ref.shape))
        worst.append(Worst(pos, _scalar(ref[pos]), _scalar(cand[pos]),
                           float(diff[pos]) if both_finite[pos] else None))

    # Loosest tolerance needed: keep rtol, find the smallest atol / peak_atol; the metrics as-is.
    min_passing: dict[str, float | None] = {}
    if compared:
        need = float(np.max(np.where(both_finite, d - tol.rtol * np.abs(r), -np.inf)))
        need = max(need, 0.0)
        if tol.mismatch_fraction > 0:
            # The element budget may absorb the worst ones: the (allowed count + 1)-th largest.
            allowed_n = int(math.floor(tol.mismatch_fraction * size))
            over = np.sort(np.where(both_finite, d - tol.rtol * np.abs(r), -np.inf).ravel())[::-1]
            need = max(float(over[allowed_n]) if allowed_n < over.size else 0.0, 0.0)
        min_passing["atol"] = need
        min_passing["peak_atol"] = need / peak if peak > 0 else (0.0 if need == 0 else math.inf)
        min_passing["mismatch_fraction"] = frac
    min_passing["cosine_min"] = cosine
    min_passing["norm_ratio_tol"] = abs(norm_ratio - 1.0)
    min_passing["snr_db_min"] = snr_db
    return OutputComparison(name, passed, rs, cs, rd, cd, size, tuple(reasons), metrics,
                            tuple(checks), n_out, tuple(worst), min_passing, tol)


def _compare_labels(name: str, ref: np.ndarray, cand: np.ndarray, tol: Tolerance, margins: Any,
                    logits_peak: float | None) -> OutputComparison:
    """Integer/bool outputs as labels (see the module docstring)."""
    import numpy as np

    size = int(ref.size)
    flips = ref != cand
    n_flips = int(flips.sum())
    known = margins is not None and np.asarray(margins).size == size
    tie: float | None = None
    if known:
        m = np.asarray(margins, dtype=np.float64).reshape(ref.shape)
        tie = 2.0 * max(tol.atol, tol.peak_atol * float(logits_peak or 0.0))
        near = flips & (m <= tie)
        counted_mask = flips & ~near
    else:
        m = None
        near = np.zeros(ref.shape, dtype=bool)
        counted_mask = flips
    counted, near_ties = int(counted_mask.sum()), int(near.sum())
    frac = counted / size
    check = Check("label_flip_fraction", frac, "<=", tol.mismatch_fraction, frac <= tol.mismatch_fraction)
    order = np.argwhere(counted_mask).tolist() + np.argwhere(near).tolist()  # counted flips first
    flipped = tuple((tuple(int(i) for i in idx), int(ref[tuple(idx)]), int(cand[tuple(idx)]),
                     float(m[tuple(idx)]) if m is not None else None) for idx in order[:_WORST_K])
    labels = LabelStats(n_flips, counted, near_ties, known, tie, flipped)
    return OutputComparison(name, check.passed, tuple(ref.shape), tuple(cand.shape), str(ref.dtype), str(cand.dtype),
                            size, (), None, (check,), counted, (), {"mismatch_fraction": frac}, tol, labels)


def label_margins(op_type: str, logits: Any, *, axis: int = -1, keepdims: int = 1, largest: int = 1,
                  k: int | None = None) -> Any:
    """The reference's margin between its top candidates, per element of the index output of an
    ArgMax/ArgMin (``top1 - top2`` along ``axis``) or TopK (for rank j, the gap to the nearer of the
    values ranked j-1 and j+1, the (K+1)-th included). None for another op."""
    import numpy as np

    x = np.asarray(logits, dtype=np.float64)
    if op_type == "ArgMin" or (op_type == "TopK" and not largest):
        x = -x
    axis = axis % x.ndim if x.ndim else 0
    n = x.shape[axis] if x.ndim else 1
    s = -np.sort(-x, axis=axis)  # descending along axis
    if op_type in ("ArgMax", "ArgMin"):
        top1 = np.take(s, 0, axis=axis)
        top2 = np.take(s, 1, axis=axis) if n > 1 else np.full_like(top1, np.inf)
        margin = top1 - top2
        return np.expand_dims(margin, axis) if keepdims else margin
    if op_type == "TopK" and k is not None:
        k = min(int(k), n)
        idx = np.arange(k)
        here = np.take(s, idx, axis=axis)
        above = np.take(s, np.maximum(idx - 1, 0), axis=axis)
        below = np.take(s, idx + 1, axis=axis) if n > k else np.concatenate(
            [np.take(s, idx[1:], axis=axis), np.full_like(np.take(s, [0], axis=axis), -np.inf)], axis=axis)
        gap_above = np.where(np.reshape(idx > 0, [-1 if a == axis else 1 for a in range(s.ndim)]), above - here, np.inf)
        return np.minimum(gap_above, here - below)
    return None


def compare_outputs(reference: Mapping[str, Any], candidate: Mapping[str, Any],
                    policy: Policy | str = "fp32", margins: Mapping[str, tuple[Any, float]] | None = None,
                    model_names: Mapping[str, str] | None = None) -> Comparison:
    """Compare every output by name. Missing or extra outputs fail the comparison (unlike
    Polygraphy, which only warns). ``policy`` is a :class:`Policy` or a precision name.
    ``margins``: per integer output, (the reference's margins, max |logits|) for the label
    comparison; ``model_names``: the model's own name of an output, shown beside the ONNX name."""
    pol = policy if isinstance(policy, Policy) else policy_for(policy)
    margins = margins or {}
    names = model_names or {}
    unknown = tuple(sorted(set(pol.overrides) - set(reference) - set(names.values())))
    missing = tuple(n for n in reference if n not in candidate)
    extra = tuple(n for n in candidate if n not in reference)
    def tol(n: str) -> Tolerance:
        return pol.overrides[n] if n in pol.overrides else pol.for_output(names.get(n, n))

    outs = tuple(dataclasses.replace(compare_arrays(reference[n], candidate[n], tol(n), n, *margins.get(n, (None, None))),
                                     model_name=names.get(n))
                 for n in reference if n in candidate)
    # An override naming no output is a typo that would silently keep the default: it fails.
    return Comparison(outs, missing, extra, pol.name, unknown)
