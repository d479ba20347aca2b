"""ONNX's operator schemas, asked once per process: attribute defaults, including those of attributes a
later version of an op added (``_added_later``)."""

from __future__ import annotations

import functools
from typing import Any, Mapping, Optional


@functools.lru_cache(maxsize=None)
def op_schema(op_type: str, opset: int, domain: str) -> Optional[Any]:
    """ONNX's schema of ``op_type`` as of ``opset`` in ``domain`` ("" for the default domain), or None
    (an unknown op, a custom domain), looked up once per process (the facts, the shape walk and the
    validity check all ask)."""
    from onnx import defs

    try:
        return defs.get_schema(op_type, opset, domain)
    except Exception:  # noqa: BLE001 - SchemaError: no such operator at this opset
        return None


# Attributes a later version of an op added whose default is not what the op did before: (domain,
# op type, attribute) -> the value that names the earlier behaviour, or None when no value of the
# attribute does. ONNX Runtime runs Resize-10 with 'asymmetric' coordinates and its own nearest
# rounding ("simple", none of Resize-11's nearest modes), and RoiAlign-10 without the half-pixel
# shift ("output_half_pixel"); Resize-11 and RoiAlign-16 default to 'half_pixel'.
_BEHAVIOUR_BEFORE: dict[tuple[str, str, str], Optional[str]] = {
    ("", "Resize", "coordinate_transformation_mode"): "asymmetric",
    ("", "Resize", "nearest_mode"): None,
    ("", "RoiAlign", "coordinate_transformation_mode"): "output_half_pixel",
}


@functools.lru_cache(maxsize=1024)
def _added_later(op_type: str, domain: str, since: int) -> Mapping[str, Any]:
    """{attribute: default} of the attributes that versions of an op newer than the one introduced
    at opset ``since`` have and that version does not (``ceil_mode`` of AveragePool-7, added in 10).

    ONNX adds an attribute with a default that keeps the old behaviour, so a node of the older
    version behaves as that default says; the default is the newest version's that has the
    attribute (an attribute it has without a default gets none). _BEHAVIOUR_BEFORE lists where
    ONNX broke that rule. Schemas are fixed for a process: each op version is looked up once.
    """
    from onnx import defs, helper

    try:
        schema = defs.get_schema(op_type, domain=domain)
        have = set(defs.get_schema(op_type, max_inclusive_version=since, domain=domain).attributes)
    except Exception:  # an op without schemas: nothing to add
        return {}
    added: dict[str, Any] = {}
    seen: set[str] = set()
    while schema.since_version > since:  # newest version first: its defaults win
        for name, attr in schema.attributes.items():
            if name in have or name in seen:
                continue
            seen.add(name)
            dv = attr.default_value
            if (domain, op_type, name) in _BEHAVIOUR_BEFORE:
                before = _BEHAVIOUR_BEFORE[(domain, op_type, name)]
                if before is not None:
                    added[name] = before
            elif dv is not None and dv.type != 0:
                added[name] = _attr_value(helper.get_attribute_value(dv))
        try:
            schema = defs.get_schema(op_type, max_inclusive_version=schema.since_version - 1, domain=domain)
        except Exception:
            break
    return added


def _attr_value(v: Any) -> Any:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [_attr_value(x) for x in v]
    return v
