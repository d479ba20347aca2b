"""JUnit properties: what pytest's own ``--junitxml`` writes for each checked test.

The properties ride on ``item.user_properties`` (as ``record_property`` does), so they travel
from xdist workers with the test's reports and pytest's junitxml writer puts them in the
``<properties>`` of the test case. One group per target, named ``npucheck[TARGET].FIELD``.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..result import VERDICTS


def _share(x: Any) -> str:
    return "" if x is None else f"{x:.4f}"


def properties(entry: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(name, value) pairs for one per-test entry of the JSON report."""
    out: list[tuple[str, str]] = []
    for t in entry.get("targets") or []:
        p = f"npucheck[{t['target']}]"
        table = t.get("table") or {}
        b = t.get("baseline") or {}
        part = t.get("partition") or {}
        out += [
            (f"{p}.gate", "pass" if b.get("passed", t["passed"]) else "fail"),
            (f"{p}.verdict", str(t["verdict"])),
            (f"{p}.table_version", f"{table.get('toolchain', '')}@{table.get('version', '')}/{table.get('soc', '')}"),
            (f"{p}.table_revision", str(table.get("revision", ""))),
            (f"{p}.table_sha256", str(table.get("sha256", ""))),
        ]
        out += [(f"{p}.{v}", str(t["summary"].get(v, 0))) for v in VERDICTS]
        out += [
            (f"{p}.npu_share_nodes", _share(part.get("npu_share_nodes"))),
            (f"{p}.npu_share_macs", _share(part.get("npu_share_macs"))),
            (f"{p}.new_fallbacks", str(len(b.get("new", [])))),
            (f"{p}.accepted_fallbacks", str(len(b.get("accepted", [])))),
        ]
    return out


__all__ = ["properties"]
