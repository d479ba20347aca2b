"""Zoo-scale agreement of the static verdicts with the real compilers (issue #22).

Builds every architecture the installed ``transformers`` can build from a small config, plus a
torch.nn zoo (``scripts/zoo_models.py``) and the torchvision/timm vision family
(``scripts/zoo_vision.py``, ``--zoo vision``), gives each non-degenerate weights, exports it with both
exporters (TorchScript opset 17, dynamo opset 18), compiles every file with the real toolchains
(rknn-toolkit2 fp16 via ``NPUCHECK_RKNN_PYTHON``; onnxruntime-qnn HTP fp16 via
``NPUCHECK_QNN_PYTHON``) in their long-lived, time-limited workers (a crash or hang costs one
model and restarts the worker: :mod:`pytest_npucheck.toolchains.rknn.adapter` / ``.qnn``) and scores the
static verdicts node by node (:mod:`pytest_npucheck.oracles.zoo_score`).

Resumable: every step writes one file per model (and exporter, and toolchain) under ``--root``
and skips what is there::

    ROOT/models/<arch>/meta.json             build/export status and why an arch was skipped
    ROOT/models/<arch>/<exporter>.onnx
    ROOT/results/<toolchain>/<arch>.<exporter>.json   the compiler's placement (or rejection)
    ROOT/summary.json, ROOT/summary.md       figures per table and exporter, classified disagreements
    ROOT/NEW-CLASSES.md                      the classes docs/tables.md does not list yet

Run everything (each step can also run alone, and ``compile`` can run beside ``export``; it
picks up new files until ``export`` has finished)::

    python scripts/zoo_agreement.py export --root /work/agree/zoo
    python scripts/zoo_agreement.py compile --toolchain rknn --root /work/agree/zoo --follow
    python scripts/zoo_agreement.py compile --toolchain qnn --root /work/agree/zoo --follow
    python scripts/zoo_agreement.py score --root /work/agree/zoo
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Iterable

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "scripts")]

EXPORTERS = {"torchscript": 17, "dynamo": 18}
TARGETS = {"rknn": "rknn@2.5.0/rk3588", "qnn": "qnn@2.51.0/htp-v73"}
EXPORT_DONE = "export.done"


def _write_json(path: Path, doc: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------------------------
# export
# --------------------------------------------------------------------------------------------


class _Timeout(Exception):
    pass


def _alarm(seconds: int) -> None:
    def handler(*_: Any) -> None:
        raise _Timeout(f"building took longer than {seconds} s")

    signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)


def builders(which: str, only: Iterable[str] | None) -> list[tuple[str, Any]]:
    import zoo_models

    out = list(zoo_models.all_builders(which))
    if only:  # in the order given: a priority list (cheapest architectures first) is walked as written
        rank = {n: i for i, n in enumerate(dict.fromkeys(only))}
        out = sorted(((n, b) for n, b in out if n in rank), key=lambda nb: rank[nb[0]])
    return out


def _error_text(exc: BaseException) -> str:
    """The first line of an export error and, when the exporter buries the cause further down
    (dynamo: "Failed to convert the exported program ... Next steps:"), the last line that names
    an exception."""
    lines = [ln.strip() for ln in str(exc).strip().splitlines() if ln.strip()]
    head = lines[0][:300] if lines else ""
    cause = (next((ln[len("Caused by "):] for ln in reversed(lines[1:]) if ln.startswith("Caused by ")), "")
             # export.py names each chained cause, innermost last
             or next((ln for ln in reversed(lines[1:]) if re.match(r"^[\w.]*(Error|Exception)\b", ln)), ""))
    if not cause:  # the cause is only chained (raise ... from): the innermost exception's first line
        inner, seen = exc, {id(exc)}
        while (nxt := inner.__cause__ or inner.__context__) is not None and id(nxt) not in seen:
            inner = nxt
            seen.add(id(inner))
        if inner is not exc:
            text = next((ln.strip() for ln in str(inner).splitlines() if ln.strip()), "")
            cause = f"{type(inner).__name__}: {text}"
    return f"{type(exc).__name__}: {head}" + (f" | {cause[:300]}" if cause else "")


def _retryable(reason: str) -> bool:
    """A skip that a newer builder may get past: the small config did not build, and the
    fallback (one layer at the architecture's own widths) has not been tried yet."""
    return reason.startswith("does not build from a small config") and "with its own widths" not in reason


def export_all(root: Path, which: str, only: Iterable[str] | None, exporters: list[str],
               timeout: float, build_timeout: int, reverse: bool = False, start: int = 0,
               retry_skipped: bool = False) -> None:
    import torch

    from pytest_npucheck import isolate

    isolate.configure(timeout=timeout)
    torch.set_num_threads(1)
    models = root / "models"
    todo = builders(which, only)
    if reverse:  # a second export process beside the first meets it in the middle
        todo.reverse()
    todo = todo[start:] + todo[:start]  # or starts somewhere else
    if which in ("all", "transformers") and not only:
        import zoo_models

        for name, why in zoo_models.transformers_zoo()[1].items():
            meta_path = models / f"hf_{name}" / "meta.json"
            if not meta_path.exists():
                _write_json(meta_path, {"arch": f"hf_{name}", "status": "skipped", "reason": why})
    for n, (name, build) in enumerate(todo):
        meta_path = models / name / "meta.json"
        meta = _read_json(meta_path) or {"arch": name}
        retry = retry_skipped and meta.get("status") == "skipped" and _retryable(meta.get("reason", ""))
        if (meta.get("status") == "skipped" and not retry) or all(e in meta.get("exports", {}) for e in exporters):
            continue
        if not claim(root, "export", name):  # another exporter (--start, --reverse) is building it
            continue
        meta = _read_json(meta_path) or meta  # it may have finished it just before
        if (meta.get("status") == "skipped" and not retry) or all(e in meta.get("exports", {}) for e in exporters):
            release(root, "export", name)
            continue
        try:
            _export_one(models, name, build, meta, exporters, build_timeout, f"[{n + 1}/{len(todo)}]")
        finally:
            release(root, "export", name)
    if which == "all" and not only and not reverse and not start:
        (root / EXPORT_DONE).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))


def _export_one(models: Path, name: str, build: Any, meta: dict[str, Any], exporters: list[str],
                build_timeout: int, counter: str) -> None:
    import torch

    from pytest_npucheck.export import ExportOptions, export_model

    meta_path = models / name / "meta.json"
    t0 = time.time()
    try:
        _alarm(build_timeout)
        torch.manual_seed(0)
        model, inputs = build()
    except BaseException as exc:  # noqa: BLE001 - an arch that does not build is skipped, with why
        if isinstance(exc, KeyboardInterrupt):
            raise
        if type(exc).__name__ == "NotImportable":  # zoo_models: a missing optional dependency
            meta.update(status="skipped", reason=str(exc))
        else:
            meta.update(status="skipped", reason=f"does not build from a small config: {type(exc).__name__}: "
                        + str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__)
        _write_json(meta_path, meta)
        print(f"{counter} {name}: skipped ({meta['reason'][:120]})", flush=True)
        return
    finally:
        signal.alarm(0)
    meta["status"] = "built"
    meta.pop("reason", None)  # a skip an earlier builder recorded (--retry-skipped)
    meta["parameters"] = int(sum(p.numel() for p in model.parameters()))
    meta["inputs"] = [list(t.shape) for t in inputs]
    exports = meta.setdefault("exports", {})
    for exporter in exporters:
        if exporter in exports:
            continue
        t1 = time.time()
        try:
            res = export_model(model, inputs, ExportOptions(exporter=exporter, opset=EXPORTERS[exporter]))
            dest = models / name / f"{exporter}.onnx"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(res.path, dest.with_suffix(".tmp"))  # a compile run beside us
            os.replace(dest.with_suffix(".tmp"), dest)             # sees whole files only
            shutil.rmtree(res.path.parent, ignore_errors=True)
            exports[exporter] = {"status": "ok", "opset": res.opset, "seconds": round(time.time() - t1, 1)}
        except Exception as exc:  # noqa: BLE001 - recorded per exporter
            exports[exporter] = {"status": "failed", "error": _error_text(exc)}
        _write_json(meta_path, meta)
    print(f"{counter} {name}: " + ", ".join(f"{e} {v['status']}" for e, v in exports.items())
          + f" ({time.time() - t0:.0f} s)", flush=True)
    del model, inputs


# --------------------------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------------------------


def pending(root: Path, toolchain: str, only: Iterable[str] | None = None, retry_timeouts: bool = False
            ) -> list[tuple[str, str, Path]]:
    """Files without a result for ``toolchain`` (with ``retry_timeouts``, also those whose compile
    timed out: on a loaded machine a slow build is not a hang; re-run them with a longer timeout)."""
    out = []
    wanted = set(only) if only else None
    for onnx_path in sorted((root / "models").glob("*/*.onnx")):
        arch, exporter = onnx_path.parent.name, onnx_path.stem
        if wanted is not None and arch not in wanted:
            continue
        result = root / "results" / toolchain / f"{arch}.{exporter}.json"
        if not result.exists() or (retry_timeouts and (_read_json(result) or {}).get("status") == "timeout"):
            out.append((arch, exporter, onnx_path))
    # architectures the toolchain has not seen yet first (one file each), then the other exporter
    done = {p.name.split(".")[0] for p in (root / "results" / toolchain).glob("*.json")}
    first: dict[str, tuple[str, str, Path]] = {}
    for t in out:
        if t[0] not in done and (t[0] not in first or t[1] == "torchscript"):
            first[t[0]] = t
    return list(first.values()) + [t for t in out if t not in first.values()]


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:  # gone since it was listed: last
        return 1 << 62


def _rknn_record(res: Any, path: Path) -> dict[str, Any]:
    from pytest_npucheck.toolchains.rknn import adapter as rknn

    nodes = rknn.onnx_nodes(path)
    attributed = rknn.attribute_rows(res, nodes)
    return {"status": res.status, "message": res.message, "seconds": res.seconds, "stage": res.stage,
            "placement": rknn.onnx_placement(res, nodes),
            "rows": [{"op_type": r.op_type, "target": r.target, "dtype": r.dtype, "full_name": r.full_name,
                      "input_shape": r.input_shape, "output_shape": r.output_shape}
                     for r in res.rows if not r.is_io],
            "attributed": attributed, "warnings": res.warnings[:40],
            "version": res.extra.get("rknn_version"), "earlier_attempts": res.extra.get("earlier_attempts"),
            "cpu_seconds": res.extra.get("cpu_seconds")}


def _qnn_record(res: Any, path: Path) -> dict[str, Any]:
    from pytest_npucheck.toolchains.qnn import adapter as qnn

    return {"status": res.status, "message": res.message, "seconds": res.seconds, "stage": res.stage,
            "placement": qnn.onnx_placement(res), "raw_placement": res.placement, "via": res.via,
            "reasons": res.reasons, "op_types": res.op_types, "helpers": res.helpers,
            "version": res.backend_version, "versions": res.extra.get("versions")}


def _claim_path(root: Path, toolchain: str, key: str) -> Path:
    return root / "claims" / toolchain / key


def _claim_owner(path: Path) -> int | None:
    try:
        return int(path.read_text(encoding="utf-8").strip() or 0) or None
    except (OSError, ValueError):
        return None


def claimed_elsewhere(root: Path, toolchain: str, key: str) -> bool:
    """Whether another live compile process of ``toolchain`` has taken the file ``key`` (two
    processes on one toolchain, one ``--reverse``, never build the same file twice)."""
    from pytest_npucheck.jsonio import pid_alive

    owner = _claim_owner(_claim_path(root, toolchain, key))
    return owner is not None and owner != os.getpid() and pid_alive(owner)


def claim(root: Path, toolchain: str, key: str) -> bool:
    """Take the file ``key`` for this process (``ROOT/claims/<toolchain>/<key>`` holds the pid);
    False when another live process holds it. The claim of a process that died is taken over."""
    import fcntl

    path = _claim_path(root, toolchain, key)
    path.parent.mkdir(parents=True, exist_ok=True)
    # one claim at a time per step: two processes that both find the claim of a dead process
    # (a restart) would otherwise both take it over and build the same model twice
    with open(path.parent / ".lock", "a", encoding="utf-8") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        if path.exists() and claimed_elsewhere(root, toolchain, key):
            return False
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(str(os.getpid()), encoding="utf-8")
        os.replace(tmp, path)
        return True


def release(root: Path, toolchain: str, key: str) -> None:
    path = _claim_path(root, toolchain, key)
    if _claim_owner(path) == os.getpid():
        path.unlink(missing_ok=True)


#: seconds between looks for new files while a ``--follow`` compile gathers a batch
GATHER_POLL = 15.0
#: a compile run gives up after this many worker start failures in a row
MAX_START_FAILURES = 3
#: seconds it waits before starting a worker again after one failed to start
RESTART_PAUSE = 30.0


def gather_now(n_pending: int, waited: float, min_batch: int, gather: float) -> bool:
    """Whether a ``--follow`` compile starts a worker on ``n_pending`` files now: each batch
    costs one worker start (rknn-toolkit2 imports for tens of seconds on a loaded machine), so
    while the exporters are still writing, it waits for ``min_batch`` files, but not longer than
    ``gather`` seconds after it first saw one."""
    return n_pending >= max(1, min_batch) or waited >= gather


def compile_all(root: Path, toolchain: str, python: str | None, timeout: float, batch: int,
                follow: bool, only: Iterable[str] | None = None, retry_timeouts: bool = False,
                reverse: bool = False, min_batch: int = 1, gather: float = 0.0,
                smallest_first: bool = False, startup_timeout: float = 300.0) -> None:
    from pytest_npucheck.toolchains.qnn import adapter as qnn
    from pytest_npucheck.toolchains.rknn import adapter as rknn

    out_dir = root / "results" / toolchain
    logs = root / "logs" / toolchain
    logs.mkdir(parents=True, exist_ok=True)
    tried: set[str] = set()
    waited = 0.0
    start_failures = 0
    answered: set[str] = set()
    while True:
        todo = [t for t in pending(root, toolchain, only, retry_timeouts)
                if f"{t[0]}.{t[1]}" not in tried and not claimed_elsewhere(root, toolchain, f"{t[0]}.{t[1]}")]
        if follow and not (root / EXPORT_DONE).exists() and todo and not gather_now(len(todo), waited, min_batch, gather):
            time.sleep(GATHER_POLL)  # every batch starts a worker (rknn: ~20 s of imports): gather files
            waited += GATHER_POLL
            continue
        waited = 0.0
        if smallest_first:  # --retry-timeouts with a long budget: the quickest answers first
            todo.sort(key=lambda t: _size(t[2]))
        if reverse:  # a second compile process beside the first, from the other end
            done = {p.name.split(".")[0] for p in out_dir.glob("*.json")}
            fresh = {t[0]: t for t in reversed(todo) if t[0] not in done}  # one file per new arch
            todo = list(fresh.values()) + [t for t in reversed(todo) if t not in fresh.values()]
        tried.update(f"{a}.{e}" for a, e, _ in todo[:batch])  # a timeout retried once per run
        if not todo:
            if follow and not (root / EXPORT_DONE).exists():
                time.sleep(30)
                continue
            return
        todo = [t for t in todo[:batch] if claim(root, toolchain, f"{t[0]}.{t[1]}")]
        by_key = {f"{a}.{e}": (a, e, p) for a, e, p in todo}
        jobs = [{"path": str(p), "key": f"{a}.{e}"} for a, e, p in todo]

        def done(res: Any) -> None:
            arch, exporter, path = by_key[res.key]
            try:
                rec = (_rknn_record if toolchain == "rknn" else _qnn_record)(res, path)
            except Exception as exc:  # noqa: BLE001 - keep the run going, record why
                rec = {"status": "harness_error", "message": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()[-2000:], "placement": {}}
            rec.update(arch=arch, exporter=exporter, toolchain=toolchain, onnx=str(path))
            if getattr(res, "log", None):
                with gzip.open(logs / f"{res.key}.log.gz", "wt", encoding="utf-8") as fh:
                    fh.write(res.log)
            _write_json(out_dir / f"{res.key}.json", rec)
            answered.add(res.key)
            release(root, toolchain, res.key)
            print(f"{toolchain} {res.key}: {rec['status']} {rec.get('seconds')} s "
                  f"cpu={sum(1 for v in rec['placement'].values() if v == 'cpu')}", flush=True)

        try:
            if toolchain == "rknn":
                rknn.compile_models(jobs, "rk3588", python, timeout=timeout, startup_timeout=startup_timeout,
                                    keep_logs=True, progress=done)
            else:
                qnn.place_models(jobs, 73, python, precision="fp16", timeout=timeout,
                                 startup_timeout=startup_timeout, keep_logs=True, progress=done)
            start_failures = 0
        except (rknn.RknnUnavailable, qnn.QnnUnavailable) as exc:
            # on a loaded machine the worker's imports can outlast the start-up budget: the files
            # without a result go back to the queue and the next round starts a fresh worker;
            # a toolchain that cannot start three times running is really unavailable
            start_failures += 1
            if start_failures >= MAX_START_FAILURES:
                raise
            unanswered = [k for k in by_key if k not in answered]
            tried.difference_update(unanswered)
            print(f"{toolchain}: worker failed ({exc}); {len(unanswered)} files back in the queue "
                  f"(attempt {start_failures} of {MAX_START_FAILURES})", flush=True)
            time.sleep(RESTART_PAUSE)
        finally:
            for key in by_key:
                release(root, toolchain, key)


# --------------------------------------------------------------------------------------------
# score
# --------------------------------------------------------------------------------------------


def score_all(root: Path, toolchains: list[str], only: Iterable[str] | None = None) -> dict[str, Any]:
    from pytest_npucheck.oracles import zoo_score
    from pytest_npucheck.tables import Catalog

    catalog = Catalog.discover()
    wanted = set(only) if only else None
    records = []
    skipped: dict[str, str] = {}
    for toolchain in toolchains:
        table = catalog.table(TARGETS[toolchain])
        for path in sorted((root / "results" / toolchain).glob("*.json")):
            real = _read_json(path)
            if not real or (wanted is not None and real.get("arch") not in wanted):
                continue
            log_path = root / "logs" / toolchain / f"{real['arch']}.{real['exporter']}.log.gz"
            log = None
            if toolchain == "rknn" and log_path.exists():
                with gzip.open(log_path, "rt", encoding="utf-8") as fh:
                    log = fh.read()
            try:
                records.append(zoo_score.score_model(Path(real["onnx"]), table, real, log))
            except Exception as exc:  # noqa: BLE001 - a model the checker cannot read is listed
                skipped[f"{real['arch']}.{real['exporter']}@{toolchain}"] = f"static check failed: {type(exc).__name__}: {exc}"[:300]
    for meta_path in sorted((root / "models").glob("*/meta.json")):
        meta = _read_json(meta_path) or {}
        if wanted is not None and meta.get("arch") not in wanted:
            continue
        if meta.get("status") == "skipped":
            skipped[meta.get("arch", meta_path.parent.name)] = meta.get("reason", "")
        for exporter, e in (meta.get("exports") or {}).items():
            if e.get("status") != "ok":
                skipped[f"{meta.get('arch')}.{exporter}"] = e.get("error", "")
    summary = zoo_score.summarise(records, skipped)
    _write_json(root / "summary.json", summary)
    (root / "summary.md").write_text("\n".join(zoo_score.markdown(summary)) + "\n", encoding="utf-8")
    doc = (REPO / "docs" / "tables.md").read_text(encoding="utf-8")
    (root / "NEW-CLASSES.md").write_text(
        "\n".join(zoo_score.new_classes_markdown(summary, zoo_score.known_classes(doc), doc)) + "\n", encoding="utf-8")
    return summary


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("step", choices=["export", "compile", "score", "all"])
    p.add_argument("--root", type=Path, default=Path("/work/agree/zoo"))
    p.add_argument("--zoo", choices=["all", "torch", "transformers", "vision"], default="all")
    p.add_argument("--only", nargs="*", default=None, help="architecture names")
    p.add_argument("--exporters", nargs="*", default=list(EXPORTERS))
    p.add_argument("--toolchain", nargs="*", default=list(TARGETS), choices=list(TARGETS))
    p.add_argument("--python", default=None, help="python of the toolchain venv (else its env var)")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds per model and step")
    p.add_argument("--build-timeout", type=int, default=120)
    p.add_argument("--batch", type=int, default=40, help="models per worker run")
    p.add_argument("--start", type=int, default=0, help="export: begin at this index of the zoo")
    p.add_argument("--reverse", action="store_true", help="export/compile: walk the zoo from its end")
    p.add_argument("--retry-timeouts", action="store_true",
                   help="compile: build again the files whose build timed out (use a longer --timeout)")
    p.add_argument("--retry-skipped", action="store_true",
                   help="export: try again the architectures whose small config did not build (the builder "
                        "now falls back to one layer at the architecture's own widths)")
    p.add_argument("--startup-timeout", type=float, default=300.0,
                   help="compile: seconds a toolchain worker may take to start (its imports; minutes under load)")
    p.add_argument("--smallest-first", action="store_true",
                   help="compile: build the smallest files first (with --retry-timeouts and a long --timeout)")
    p.add_argument("--follow", action="store_true", help="compile: wait for files until export is done")
    p.add_argument("--min-batch", type=int, default=6,
                   help="compile --follow: start a worker once this many files wait (each start costs its imports)")
    p.add_argument("--gather", type=float, default=180.0,
                   help="compile --follow: ... or once the first waiting file has waited this many seconds")
    args = p.parse_args(argv)
    root = args.root
    root.mkdir(parents=True, exist_ok=True)
    if args.step in ("export", "all"):
        export_all(root, args.zoo, args.only, args.exporters, args.timeout, args.build_timeout, args.reverse, args.start,
                   args.retry_skipped)
    if args.step in ("compile", "all"):
        for tc in args.toolchain:
            compile_all(root, tc, args.python, args.timeout, args.batch, args.follow, args.only,
                        args.retry_timeouts, args.reverse, args.min_batch, args.gather, args.smallest_first,
                        args.startup_timeout)
    if args.step in ("score", "all"):
        summary = score_all(root, args.toolchain, args.only)
        print("\n".join(__import__("pytest_npucheck.oracles.zoo_score", fromlist=["x"]).markdown(summary)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
