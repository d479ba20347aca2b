"""RKNN registered as a toolchain: its metadata and the hooks the registry hands out.

Imported when the registry is first read, so it imports nothing heavy: each hook imports its
modules (:mod:`.adapter`, :mod:`.simulate`, :mod:`.probe`, :mod:`.table`) when called.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ...errors import UsageError
from ..registry import Toolchain

__all__ = ["PROBES", "SOCS", "TOOLCHAIN", "ZOO"]

#: rknn-toolkit2 ``target_platform`` values (rknn-toolkit2 2.x)
SOCS = ("rk3588", "rk3576", "rk3566", "rk3568", "rk3562", "rv1106", "rv1103", "rk2118")
_RULE_RE = re.compile(r"Rule: (?P<rule>\w+)\s*\nSubgraph:\s*\nOp type: (?P<op>\w+)\s*\nOp name: (?P<name>\S+)")
_ABNORMAL_SHAPE_RE = re.compile(r"The shape of '(?P<tensor>[^']+)' is (?P<shape>\([^)]*\b0\b[^)]*\)), it is abnormal")


class Probes:
    """``npucheck probe rknn``: rknn-toolkit2 compiles the probes (:mod:`.probe`); :mod:`.table` builds the table."""

    version_words = "the rknn-toolkit2 version (e.g. 2.5.0)"
    precisions = ("fp16",)
    precision_note = "RKNN SoCs that only run int8 are probed int8 automatically"

    def check_soc(self, soc: str) -> None:
        if soc not in SOCS:
            raise UsageError(f"unknown RKNN SoC {soc!r}; rknn-toolkit2 targets: {', '.join(SOCS)}")

    def check_installed(self, t: Any, installed: str, catalog: Any, setup: str) -> None:
        if installed != t.version:
            raise UsageError(f"{t.python} has rknn-toolkit2 {installed}, not {t.version}; pass the python of a "
                             f"{t.version} venv (`{setup} .venv-rknn-{t.version} {t.version}`)")

    def results_path(self, t: Any, *, extra: bool, precision: str, root: Path) -> Path:
        return root / "rknn" / t.version / f"{t.soc}.{'extra.' if extra else ''}results.json"

    def run(self, t: Any, out: Path, *, select: Optional[Sequence[str]], extra: bool, precision: str,
            workers: int, timeout: float, run_sessions: bool, verbose: bool) -> dict[str, Any]:
        from .probe import run_probes

        return run_probes(t.version, t.soc, t.python, out, select=select, workers=workers,
                          timeout=timeout, verbose=verbose, extra=extra)

    def build_table(self, results_path: Path, *, schema_path: Optional[Path], log: Any) -> dict[str, Any]:
        from ...probe.refresh import read_results
        from . import table as builder

        stem = re.sub(r"(\.extra)?\.results\.json$", "", results_path.name)
        main = read_results(results_path.with_name(f"{stem}.results.json"))
        extra = read_results(results_path.with_name(f"{stem}.extra.results.json"))
        if main is None:
            raise UsageError(f"--write-table needs the main probe results {results_path.with_name(stem + '.results.json')} "
                             "(run without --extra first)")
        results = builder.merge_results(main, extra) if extra else main
        return builder.make_table(results, schema_path, log=log)

    def probe_models(self, ids: Sequence[str]) -> dict[str, Any]:
        from ...probe.extra_families import build_extra_probes
        from ...probe.models import build_probes

        wanted = set(ids)
        return {p.id: p.model for build in (build_probes, build_extra_probes) for p in build(ids) if p.id in wanted}

    def predict(self, table: Any, model: Any) -> Any:
        from .table import predict

        return predict(table, model)

    def compare(self, predicted: Any, status: str, placement: Mapping[str, str], focus: Sequence[str]
                ) -> list[tuple[str, str, str]]:
        from .table import compare

        return compare(predicted, status, placement, focus)


class Zoo:
    """How a stored rknn-toolkit2 record of a zoo model is scored (:mod:`pytest_npucheck.oracles.zoo_score`)."""

    def placement(self, onnx_path: Path, real: Mapping[str, Any], log: Optional[str]
                  ) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        """``(placement, real, extra fields of the record)``: the placement recomputed from the
        record's layer rows and the build log's rewrite trace (so a record compiled before a
        mapping fix is scored with the fix), the record with the rows attributed to each node,
        and the CPU rows no ONNX node could be given."""
        placement, attributed = rknn_placement(onnx_path, real, log)
        lost = [r for k, v in attributed.get("", {}).items() if k.startswith("cpu") for r in v]
        return placement, {**real, "attributed": attributed}, {"unmapped_cpu_rows": lost}

    def reason(self, node: str, real: Mapping[str, Any]) -> str:
        attributed = (real.get("attributed") or {}).get(node) or {}
        cpu = [r for k, v in attributed.items() if k.startswith("cpu") for r in v]
        if cpu:
            return "cpu row " + ",".join(sorted({c.split(":", 1)[0] for c in cpu}))
        return "cpu via rewrite"

    def rejection(self, message: str, log: Optional[str], names: set[str], graph: Any = None
                  ) -> Optional[tuple[str, list[str], str]]:
        """RKNN's own trace of the graph rewrite that raised (the last ``Rule: ... Op name: ...``
        before the build log's traceback): ``rknn_rule:<rule>``, the ops it shows mapped back to
        ONNX nodes through the rewrite trace (they are often nodes an earlier rewrite made,
        ``/c1/Conv_output_0_tp_rs``); a tensor with a zero-sized dimension, which rknn-toolkit2
        calls abnormal: ``empty_tensor``, the node that produced it named."""
        text = log or ""
        tb = text.find("Traceback")
        found = list(_RULE_RE.finditer(text[:tb])) if tb >= 0 else []
        if found:
            from .adapter import rewrite_lineage

            m = found[-1]
            lineage = rewrite_lineage(text)
            nodes: list[str] = []
            for op_name in re.findall(r"Op name: (\S+)", text[m.start():tb]):
                for origin in [op_name] if op_name in names else sorted(lineage.get(op_name, ())):
                    if origin in names and origin not in nodes:
                        nodes.append(origin)
            return (f"rknn_rule:{m.group('rule')}", nodes,
                    f"rknn-toolkit2's graph rewrite {m.group('rule')} raises on the {m.group('op')} it matched")
        m = _ABNORMAL_SHAPE_RE.search(message or "")
        if m:
            i = graph.producer.get(m.group("tensor")) if graph is not None else None
            producer = graph.nodes[i] if i is not None else None
            return ("empty_tensor", [producer.name] if producer is not None and producer.name else [],
                    f"rknn-toolkit2 refuses a tensor with a zero-sized dimension {m.group('shape')} "
                    "(an empty tensor the exporter left in the graph)")
        return None


def rknn_placement(onnx_path: Path, real: Mapping[str, Any], log: Optional[str]
                   ) -> tuple[dict[str, str], dict[str, dict[str, list[str]]]]:
    """The RKNN placement of a stored record and the rows attributed to each node, recomputed
    from its layer rows and the build log's rewrite trace."""
    from . import adapter as rknn

    rows = []
    for i, r in enumerate(real.get("rows") or []):
        full = r.get("full_name", "")
        rows.append(rknn.LayerRow(id=i, op_type=r["op_type"], dtype=r.get("dtype", ""), target=r["target"],
                                  input_shape=r.get("input_shape", ""), output_shape=r.get("output_shape", ""),
                                  full_name=full, onnx_name=full.split(":", 1)[1] if ":" in full else None))
    res = rknn.RknnResult(key="", path=str(onnx_path), status=real.get("status", "ok"), rows=rows)
    nodes = rknn.onnx_nodes(onnx_path)
    lineage = rknn.rewrite_lineage(log) if log else {}
    return rknn.onnx_placement(res, nodes, lineage), rknn.attribute_rows(res, nodes, lineage)


PROBES = Probes()
ZOO = Zoo()

TOOLCHAIN = Toolchain(
    name="rknn",
    title="Rockchip RKNN (rknn-toolkit2)",
    default_precision="fp16",
    package="rknn-toolkit2",
    env_var="NPUCHECK_RKNN_PYTHON",
    setup_hint="scripts/setup-rknn-venv.sh",
    engine="RKNN simulator",
    oracle="pytest_npucheck.toolchains.rknn.simulate",
    probes="pytest_npucheck.toolchains.rknn.toolchain:PROBES",
    zoo="pytest_npucheck.toolchains.rknn.toolchain:ZOO",
)
