"""The recorded results of the QNN probes the tables are built from (``probes/qnn/<version>/``), each
file read once per test process: the tests of this layer look up one record per parametrised case."""

from __future__ import annotations

import copy
import functools
import json

from pytest_npucheck.tables import bundled_tables_dir

ROOT = bundled_tables_dir().parent


@functools.lru_cache(maxsize=None)
def _qnn_extra(version: str, arch: str) -> dict[str, list[dict]]:
    path = ROOT / "probes" / "qnn" / version / f"htp-v{arch}.fp16.extra.results.json"
    index: dict[str, list[dict]] = {}
    for probe in json.loads(path.read_text(encoding="utf-8"))["probes"]:
        index.setdefault(probe["id"], []).append(probe)
    return index


def qnn_extra_record(arch: str, pid: str, version: str = "2.51.0") -> dict:
    """The record of probe ``pid`` in the fp16 extra results of HTP ``arch`` (``"73"``, ``"68"``); a
    ValueError unless the file holds exactly one. A copy: a test may change it."""
    [rec] = _qnn_extra(version, arch).get(pid, [])
    return copy.deepcopy(rec)


@functools.lru_cache(maxsize=None)
def rknn_extra_records(soc: str = "rk3588", version: str = "2.5.0") -> dict[str, dict]:
    """probe id -> record of the RKNN extra probe results of ``soc`` (6 MB for rk3588: parsed once per
    process). Shared by every caller: read it, do not change it."""
    path = ROOT / "probes" / "rknn" / version / f"{soc}.extra.results.json"
    return {p["id"]: p for p in json.loads(path.read_text(encoding="utf-8"))["probes"]}
