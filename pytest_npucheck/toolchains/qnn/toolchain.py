"""QNN registered as a toolchain: its metadata and the hooks the registry hands out.

Imported when the registry is first read, so it imports nothing heavy: each hook imports its
modules (:mod:`.adapter`, :mod:`.simulate`, :mod:`.probe`, :mod:`.table`) when called.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ...errors import UsageError
from ..registry import Toolchain

__all__ = ["PROBES", "TOOLCHAIN", "ZOO", "qnn_arch"]

_SOC = re.compile(r"^htp-v(?P<arch>\d+)$")


def qnn_arch(soc: str) -> int:
    """``htp-v73`` -> 73; anything else is a UsageError."""
    m = _SOC.match(soc)
    if not m:
        raise UsageError(f"invalid QNN SoC {soc!r}: expected htp-v<ARCH>, e.g. htp-v73")
    return int(m.group("arch"))


class Probes:
    """``npucheck probe qnn``: onnxruntime-qnn places the probes (:mod:`.probe`); :mod:`.table` builds the table."""

    version_words = "the QNN SDK version the HTP backend reports (onnxruntime-qnn 2.7.0 reports 2.51.0)"
    precisions = ("fp16", "int8")
    precision_note = ""

    def check_soc(self, soc: str) -> None:
        from .adapter import DEFAULT_SOC_MODEL

        if qnn_arch(soc) not in DEFAULT_SOC_MODEL:
            raise UsageError(f"unknown QNN HTP architecture {soc!r}; known: "
                             f"{', '.join('htp-v%d' % a for a in sorted(DEFAULT_SOC_MODEL))}")

    def check_installed(self, t: Any, installed: str, catalog: Any, setup: str) -> None:
        """onnxruntime-qnn is not versioned like its tables (its HTP backend reports the QNN SDK
        version, known only once a session runs): it is compared with the package a committed
        table of that version records, when there is one."""
        for soc in catalog.socs(t.toolchain, t.version):
            try:
                prov = catalog.load(catalog.refs[(t.toolchain, t.version, soc)]).provenance
            except Exception:  # an invalid table is reported by `npucheck tables validate`
                continue
            want = str(prov.get("toolchain_package", "")).partition("==")[2]
            if want and want != installed:
                raise UsageError(f"{t.python} has onnxruntime-qnn {installed}; qnn@{t.version} tables were made with "
                                 f"onnxruntime-qnn {want}")
            break

    def results_path(self, t: Any, *, extra: bool, precision: str, root: Path) -> Path:
        return root / "qnn" / t.version / f"{t.soc}.{precision}{'.extra' if extra else ''}.results.json"

    def run(self, t: Any, out: Path, *, select: Optional[Sequence[str]], extra: bool, precision: str,
            workers: int, timeout: float, run_sessions: bool, verbose: bool) -> dict[str, Any]:
        from .probe import run_probes

        # a prefix (qnn@2.53 before any 2.53.x table exists) is checked against what the backend reports
        full = t.version.count(".") >= 2
        doc = run_probes(qnn_arch(t.soc), precision, t.python, out, version=t.version if full else None,
                         select=select, workers=workers, timeout=timeout, run=run_sessions, extra=extra,
                         verbose=verbose)
        if not full and not str(doc["version"]).startswith(t.version + "."):
            raise UsageError(f"the QNN backend of {t.python} reports {doc['version']}, not {t.version} "
                             f"(results left in {out})")
        return doc

    def build_table(self, results_path: Path, *, schema_path: Optional[Path], log: Any) -> dict[str, Any]:
        from ...probe.refresh import read_results
        from . import table as builder

        stem = re.sub(r"\.(fp16|int8)(\.extra)?\.results\.json$", "", results_path.name)

        def load(prec: str) -> Optional[dict[str, Any]]:
            main = read_results(results_path.with_name(f"{stem}.{prec}.results.json"))
            if main is None:
                return None
            return builder.merge_results(main, read_results(results_path.with_name(f"{stem}.{prec}.extra.results.json")))

        fp16 = load("fp16")
        if fp16 is None:
            raise UsageError(f"--write-table needs the fp16 probe results {results_path.with_name(stem + '.fp16.results.json')} "
                             "(run with --precision fp16, without --extra, first)")
        return builder.make_table(fp16, load("int8"), schema_path, log=log)

    def probe_models(self, ids: Sequence[str]) -> dict[str, Any]:
        from .probe import extra_probes, select_probes

        wanted = set(ids)
        return {p.id: p.model for build in (select_probes, extra_probes) for p in build(ids) if p.id in wanted}

    def predict(self, table: Any, model: Any) -> Any:
        from .table import predict

        return predict(table, model)

    def compare(self, predicted: Any, status: str, placement: Mapping[str, str], focus: Sequence[str]
                ) -> list[tuple[str, str, str]]:
        from .table import compare

        return compare(predicted, status, placement, focus)


class Zoo:
    """How a stored onnxruntime-qnn record of a zoo model is scored (:mod:`pytest_npucheck.oracles.zoo_score`)."""

    def placement(self, onnx_path: Path, real: Mapping[str, Any], log: Optional[str]
                  ) -> tuple[dict[str, str], dict[str, Any], dict[str, Any]]:
        """The placement the record holds (the EP's assignment), with the nodes in no partition that a CPU
        helper of their op type stands for on the CPU (:func:`.adapter.cpu_helper_replacements`; records
        written before the adapter did this)."""
        from ...check import graph_facts
        from .adapter import cpu_helper_replacements

        placement = dict(real.get("placement") or {})
        raw = real.get("raw_placement") or {}
        if (real.get("helpers") or {}).get("CPUExecutionProvider") and "removed" in raw.values():
            nodes = [{"name": n.name, "op_type": n.op_type, "inputs": n.inputs, "outputs": n.outputs}
                     for n in graph_facts(Path(onnx_path)).nodes if not n.graph]
            for name in cpu_helper_replacements(nodes, raw, real["helpers"]):
                placement[name] = "cpu"
        return placement, dict(real), {}

    def reason(self, node: str, real: Mapping[str, Any]) -> str:
        """The EP's REASON for the node, with names and numbers taken out."""
        from ...oracles.zoo_score import normalise_reason

        texts = (real.get("reasons") or {}).get(node) or []
        if texts:
            return normalise_reason(texts[0])
        return "no REASON in the QNN log (placed on CPU without a validation failure)"

    def rejection(self, message: str, log: Optional[str], names: set[str], graph: Any = None
                  ) -> Optional[tuple[str, list[str], str]]:
        return None


PROBES = Probes()
ZOO = Zoo()

TOOLCHAIN = Toolchain(
    name="qnn",
    title="Qualcomm QNN HTP (onnxruntime-qnn)",
    default_precision="fp16",
    package="onnxruntime-qnn",
    env_var="NPUCHECK_QNN_PYTHON",
    setup_hint="scripts/setup-qnn-venv.sh",
    engine="QNN HTP emulator",
    oracle="pytest_npucheck.toolchains.qnn.simulate",
    probes="pytest_npucheck.toolchains.qnn.toolchain:PROBES",
    zoo="pytest_npucheck.toolchains.qnn.toolchain:ZOO",
)
