"""The JSON report: one document for a whole run, validated by a published schema."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path
from typing import Any, Iterable, Mapping

from .. import __version__

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "report.schema.json"
REPORT_FORMAT = 1


def run_document(tests: Iterable[Mapping[str, Any]], created: str | None = None) -> dict[str, Any]:
    """The whole-run document; `tests` are the per-test entries in node-id order."""
    entries = sorted(tests, key=lambda t: (t["nodeid"], int(t.get("call", 1))))
    totals = {"tests": len(entries), "passed": 0, "failed": 0, "error": 0}
    for t in entries:
        totals[t["status"]] = totals.get(t["status"], 0) + 1
    return {
        "format": REPORT_FORMAT,
        "tool": {"name": "pytest-npucheck", "version": __version__},
        "created": created or _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
        "totals": totals,
        "tests": entries,
    }


def validate(document: Any) -> list[str]:
    """Problems of a report document against the published schema (empty when valid)."""
    import jsonschema

    from ..jsonio import load_strict

    schema = load_strict(SCHEMA_PATH)
    validator = jsonschema.validators.validator_for(schema)(schema)
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in validator.iter_errors(document)]
