"""The arguments of a check, validated once at the boundary (marker, ``npu_check(...)``, ini keys).

The ``npu_deployable`` marker, the keyword arguments of ``npu_check(...)`` and the ini keys give the
same settings; each goes through the one function here that parses it, so a value means the same
everywhere and a bad one fails with one sentence naming the argument (``where``) and the value
(issue 27, items 12, 16, 21). Every error is a :class:`~pytest_npucheck.errors.UsageError`; the
plugin turns it into a pytest usage error at collection and a test failure inside ``npu_check``.
No pytest, torch or onnx import.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Optional

from .errors import UsageError

EXPORTERS = ("dynamo", "torchscript")
#: The ONNX opsets the exporters of the supported torch can write (torch.onnx._constants
#: ONNX_MIN_OPSET and ONNX_MAX_OPSET of torch 2.13; tests/acceptance/test_check_arguments.py checks them).
MIN_OPSET, MAX_OPSET = 7, 23

DynamicAxes = dict[str, dict[int, str]]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def targets(value: Any, where: str) -> Optional[tuple[str, ...]]:
    """A target or a list of targets (``'rknn@2.5.0/rk3588'``); None when not given."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(t, str) and t.strip() for t in value):
        raise UsageError(f"{where}: targets={value!r}: expected a target or a non-empty list of targets like "
                         "'rknn@2.5.0/rk3588'")
    return tuple(value)


def exporter(value: Any, where: str) -> Optional[str]:
    if value is None:
        return None
    if value not in EXPORTERS:
        raise UsageError(f"{where}: exporter={value!r}: expected one of {', '.join(EXPORTERS)}")
    return str(value)


def opset(value: Any, where: str) -> Optional[int]:
    """An ONNX opset the exporters can write: a whole number from MIN_OPSET to MAX_OPSET."""
    if value is None:
        return None
    if not _is_int(value) or not MIN_OPSET <= value <= MAX_OPSET:
        raise UsageError(f"{where}: opset={value!r}: expected a whole number from {MIN_OPSET} to {MAX_OPSET} "
                         f"(the opsets torch's exporters write; torchscript writes up to 20)")
    return int(value)


def names(value: Any, where: str, key: str) -> Optional[tuple[str, ...]]:
    """``input_names`` / ``output_names``: a name or a list of names (a str is one name, not its
    characters)."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(n, str) and n for n in value):
        raise UsageError(f"{where}: {key}={value!r}: expected a name or a list of names (strings)")
    if len(set(value)) != len(value):
        raise UsageError(f"{where}: {key}={value!r}: a name is given twice")
    return tuple(value) or None


def flag(value: Any, where: str, key: str) -> Optional[bool]:
    """``numerics`` / ``golden``: True or False (a string such as ``"false"`` is refused: it is true
    to Python and would switch the check on)."""
    if value is None:
        return None
    if not isinstance(value, bool):
        raise UsageError(f"{where}: {key}={value!r}: expected True or False")
    return value


def dynamic_axes(value: Any, where: str) -> Optional[DynamicAxes]:
    """``{input name: [axis, ...]}`` or ``{input name: {axis: dim name}}``; axes are whole numbers
    (a JSON object's keys may be their decimal text), dim names strings."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise UsageError(f"{where}: dynamic_axes={value!r}: expected {{input name: [axis, ...]}} or "
                         "{input name: {axis: dim name}}")
    out: DynamicAxes = {}
    for name, axes in value.items():
        if not isinstance(name, str) or not name:
            raise UsageError(f"{where}: dynamic_axes: input name {name!r} is not a string")
        here = f"{where}: dynamic_axes[{name!r}]"
        if isinstance(axes, (list, tuple)):
            bad = [a for a in axes if not _is_int(a)]
            if bad:
                raise UsageError(f"{here}={axes!r}: axis {bad[0]!r} is not a whole number")
            out[name] = {int(a): f"{name}_dim{a}" for a in axes}
        elif isinstance(axes, Mapping):
            one: dict[int, str] = {}
            for axis, dim in axes.items():
                number = _axis_number(axis)
                if number is None:
                    raise UsageError(f"{here}: axis {axis!r} is not a whole number")
                if not isinstance(dim, str) or not dim:
                    raise UsageError(f"{here}[{axis!r}]={dim!r}: the dim name must be a non-empty string")
                one[number] = dim
            out[name] = one
        else:
            raise UsageError(f"{here}={axes!r}: expected a list of axes or {{axis: dim name}}")
    return out


def _axis_number(axis: Any) -> Optional[int]:
    if _is_int(axis):
        return int(axis)
    if isinstance(axis, str) and axis.strip().lstrip("-").isdigit():
        return int(axis)
    return None


#: The keyword arguments the marker and ``npu_check`` accept, with their parser.
PARSERS = {
    "targets": targets,
    "exporter": exporter,
    "opset": opset,
    "dynamic_axes": dynamic_axes,
    "input_names": lambda v, where: names(v, where, "input_names"),
    "output_names": lambda v, where: names(v, where, "output_names"),
    "numerics": lambda v, where: flag(v, where, "numerics"),
    "golden": lambda v, where: flag(v, where, "golden"),
}


def parse(kwargs: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Every given argument, parsed (unknown names are an error naming them)."""
    unknown = set(kwargs) - set(PARSERS)
    if unknown:
        raise UsageError(f"{where}: unknown argument(s) {', '.join(sorted(unknown))}; expected "
                         f"{', '.join(sorted(PARSERS))}")
    return {key: PARSERS[key](value, where) for key, value in kwargs.items()}
