"""A machine-checked guard for refactors: record the JSON reports of a fixed corpus, compare two recordings.

    python scripts/report_guard.py record OUTDIR [--parts examples,bench,corpus] [--cache DIR]
    python scripts/report_guard.py compare DIR_A DIR_B

``record`` writes one normalised JSON document per part into OUTDIR:

- ``examples.json``: the examples/ suite run by pytest with ``--npu-report json:PATH`` (the suite
  ends red on purpose; its exit status is recorded too);
- ``bench.json``: the benchmark models of ``benchmarks/models.py`` (``--bench`` names them; the
  340 MB ``bert_base_ext`` is left out by default) checked with ``npucheck check --format json``
  against every bundled target;
- ``corpus.json``: the tests' corpus models (``tests/models/corpus.py``) exported with each
  exporter they support and checked the same way;
- ``renders.json`` (with ``examples``): the Markdown, HTML and JUnit texts the report renderers make of
  the examples' report and of the merged document of ``benchmarks/merge_shards.py`` (8 shards, 300
  tests), rendered in this process with every timing set to 0 and a fixed ``created``: compared
  character for character, so a renderer made faster is shown to write the same bytes.

The ONNX files are exported once into ``--cache`` (default ``$NPUCHECK_GUARD_CACHE`` or
``~/.cache/npucheck-guard``; the benchmark models use ``benchmarks/models.py``'s own cache) and
reused: they are made by torch, not by this package, so a recording before and one after a change
check the same files, and a second recording takes a few minutes. The source locations in those
files name the checkout that exported them (``CACHE/corpus/EXPORTED_FROM``): it is ``<repo>`` too.
The benchmark models' cache is ``benchmarks/models.py``'s; record both sides from checkouts at the
same path, or delete that cache first, when its files were exported elsewhere.

Normalising drops what differs from run to run without a change of behaviour: timings and
durations (keys named ``duration``, ``seconds``, ``elapsed``, ``time``, ... and ``*_s``/``*_ms``),
whether an export came from the cache (``cache_hit``),
and absolute paths (the repository, the cache and the output directories become ``<repo>``,
``<cache>``, ``<out>``; pytest's temporary directories ``<tmp>``).

``compare`` prints every difference between two recordings (file by file, JSON path by JSON
path) and exits 1 when there is any, 0 when they are identical.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

REPO = Path(__file__).resolve().parent.parent
PARTS = ("examples", "bench", "corpus")
DEFAULT_BENCH = ("bert_small", "bert_1k", "bert_1k_ts", "bert_9k", "resnet50")

# keys whose values are measurements of the run (or depend on what an earlier run cached), not results
_TIMING_KEYS = {"duration", "durations", "seconds", "elapsed", "time", "times", "timing", "timings",
                "wall", "cpu", "started", "finished", "timestamp", "created", "when", "date", "pid",
                "cache_hit"}
_TIMING_SUFFIXES = ("_s", "_ms", "_seconds", "_sec", "_time", "_duration", "_at")


def _is_timing_key(key: str) -> bool:
    k = key.lower()
    return k in _TIMING_KEYS or k.endswith(_TIMING_SUFFIXES)


# pytest's tmp_path roots and tempfile names
_TMP_RE = re.compile(r"(/tmp|/var/tmp|/private/var/folders/[^/]+/[^/]+/T)/[^\s\"':,)\]]*")
# a measured time inside a text ("in 1.23 s", "0.4s", "12 ms")
_SECONDS_RE = re.compile(r"\b\d+(\.\d+)?\s?(s|ms|seconds)\b")


def normalise(doc: Any, roots: Mapping[str, str] | Sequence[tuple[str, str]]) -> Any:
    """``doc`` without timings, with the absolute paths of ``roots`` (placeholder -> path, or pairs when
    one placeholder stands for several paths) replaced by their placeholders; other absolute
    temporary paths become ``<tmp>``."""
    pairs = list(roots.items()) if isinstance(roots, Mapping) else list(roots)
    ordered = sorted(pairs, key=lambda kv: -len(kv[1]))

    def text(s: str) -> str:
        for name, root in ordered:
            if root:
                s = s.replace(root, name)
        s = _TMP_RE.sub("<tmp>", s)
        return s

    def walk(x: Any) -> Any:
        if isinstance(x, dict):
            return {text(k): walk(v) for k, v in x.items() if not _is_timing_key(k)}
        if isinstance(x, list):
            return [walk(v) for v in x]
        if isinstance(x, str):
            return text(x)
        if isinstance(x, float):
            return round(x, 9)
        return x

    return walk(doc)


def _normalise_text(text: str, roots: Sequence[tuple[str, str]]) -> str:
    """A rendered report with the absolute paths of ``roots`` and temporary paths replaced (as
    :func:`normalise` does inside a document)."""
    return normalise([text], roots)[0]


def differences(a: Any, b: Any, where: str = "$") -> Iterator[str]:
    """Every difference between two JSON values, as `path: a != b` lines."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in b:
                yield f"{where}.{k}: only in A: {_short(a[k])}"
            elif k not in a:
                yield f"{where}.{k}: only in B: {_short(b[k])}"
            else:
                yield from differences(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{where}[{i}]")
        if len(a) != len(b):
            yield f"{where}: {len(a)} items in A, {len(b)} in B"
    elif isinstance(a, str) and isinstance(b, str) and a != b and max(len(a), len(b)) > 160:
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        yield (f"{where}: texts differ from character {at} ({len(a)} and {len(b)} characters): "
               f"{_short(a[max(0, at - 40):at + 80])} != {_short(b[max(0, at - 40):at + 80])}")
    elif a != b or type(a) is not type(b):
        yield f"{where}: {_short(a)} != {_short(b)}"


def _short(x: Any, n: int = 160) -> str:
    s = json.dumps(x, sort_keys=True, ensure_ascii=False)
    return s if len(s) <= n else s[:n] + "..."


def compare_dirs(dir_a: Path, dir_b: Path) -> list[str]:
    """The differences between two recordings: a file present in one only, then per file."""
    out: list[str] = []
    names_a = {p.name for p in dir_a.glob("*.json")}
    names_b = {p.name for p in dir_b.glob("*.json")}
    for name in sorted(names_a ^ names_b):
        out.append(f"{name}: only in {'A' if name in names_a else 'B'}")
    for name in sorted(names_a & names_b):
        a = json.loads((dir_a / name).read_text(encoding="utf-8"))
        b = json.loads((dir_b / name).read_text(encoding="utf-8"))
        out.extend(f"{name}: {line}" for line in differences(a, b))
    return out


# -- recording -----------------------------------------------------------------------------------

def _python() -> str:
    return sys.executable


def _targets() -> list[str]:
    sys.path.insert(0, str(REPO))
    from pytest_npucheck.tables import Catalog

    return [row["target"] for row in Catalog.discover().listing()]


def _check(files: list[Path], jobs: int) -> dict[str, Any]:
    """``npucheck check --format json`` of ``files`` against every bundled target."""
    cmd = [_python(), "-m", "pytest_npucheck.cli", "check", "--format", "json", "--jobs", str(jobs)]
    for t in _targets():
        cmd += ["--target", t]
    cmd += [os.fspath(f) for f in files]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        doc = {"stdout": proc.stdout[-4000:]}
    return {"exit": proc.returncode, "stderr": proc.stderr.strip().splitlines()[-20:] if proc.returncode > 1 else [],
            "report": doc}


def _zero_timings(x: Any) -> Any:
    """``x`` with every timing value 0 and ``created`` fixed: deterministic input for the renderers."""
    if isinstance(x, dict):
        return {k: (0 if _is_timing_key(k) and isinstance(v, (int, float)) and not isinstance(v, bool) else
                    "2000-01-01T00:00:00+00:00" if k == "created" else _zero_timings(v)) for k, v in x.items()}
    if isinstance(x, list):
        return [_zero_timings(v) for v in x]
    return x


def record_renders(examples_doc: Any) -> dict[str, Any]:
    """The report renderers' texts (Markdown, HTML, JUnit) of the examples' report and of the merged
    document of the merge benchmark, rendered by the package of this checkout."""
    sys.path.insert(0, str(REPO))
    sys.path.insert(0, str(REPO / "benchmarks"))
    from merge_shards import build  # noqa: E402 - the benchmark's shard files

    from pytest_npucheck import merge
    from pytest_npucheck.report import html, junit, markdown

    docs: dict[str, tuple[Any, list]] = {}
    if examples_doc is not None:
        docs["examples"] = (_zero_timings(examples_doc), [])
    with tempfile.TemporaryDirectory(prefix="npucheck-guard-") as tmp:
        merged = merge.merge([merge.load_shard(p) for p in build(Path(tmp), 8, 300)], Path(tmp))
        docs["merge_bench"] = (_zero_timings(merged.doc), merged.failures)
    return {name: {"md": markdown.render(doc), "html": html.render(doc), "junit": junit.render(doc, failures)}
            for name, (doc, failures) in docs.items()}


def record_examples(out: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="npucheck-guard-") as tmp:
        raw = Path(tmp) / "examples.json"
        proc = subprocess.run([_python(), "-m", "pytest", "examples", "-q", "-p", "no:cacheprovider",
                               "-p", "no:randomly", f"--npu-report=json:{raw}"],
                              cwd=REPO, capture_output=True, text=True)
        doc = json.loads(raw.read_text(encoding="utf-8")) if raw.is_file() else None
        summary = [ln for ln in proc.stdout.splitlines() if re.match(r"^(PASSED|FAILED|ERROR)\b", ln)]
        return {"exit": proc.returncode, "report": doc, "outcomes": summary,
                "stderr": proc.stderr.strip().splitlines()[-20:] if doc is None else []}


def record_bench(names: list[str], jobs: int) -> dict[str, Any]:
    import importlib.util

    # loaded under its own name: `models` is the tests' corpus package (tests/models)
    spec = importlib.util.spec_from_file_location("npucheck_bench_models", REPO / "benchmarks" / "models.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)

    files = [bench.build(n) for n in names]
    return _check(files, jobs)


def exported_from(cache: Path) -> str:
    """The checkout whose tests/models exported the cached corpus files (their nodes' source
    locations name its files): written with the first export, read by every later recording."""
    marker = cache / "corpus" / "EXPORTED_FROM"
    if not marker.is_file():
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(str(REPO), encoding="utf-8")
    return marker.read_text(encoding="utf-8").strip()


def _corpus_files(cache: Path, log) -> tuple[list[Path], dict[str, str]]:
    sys.path.insert(0, str(REPO / "tests"))
    from models.corpus import ARCHS
    from models.export_corpus import export

    exported_from(cache)
    files: list[Path] = []
    failed: dict[str, str] = {}
    for name, arch in ARCHS.items():
        for exporter in arch.exporters:
            path = cache / "corpus" / f"{name}.{exporter}.onnx"
            marker = path.with_suffix(".failed")
            if marker.is_file():
                failed[path.name] = marker.read_text(encoding="utf-8")
                continue
            if not path.is_file():
                log(f"exporting {path.name}")
                tmp = path.with_name(path.stem + ".tmp.onnx")
                try:
                    model, inputs = arch.build()
                    export(model, inputs, tmp, exporter)
                    tmp.replace(path)
                except Exception as exc:  # noqa: BLE001 - recorded, the same file fails the same way next time
                    marker.parent.mkdir(parents=True, exist_ok=True)
                    marker.write_text(f"{type(exc).__name__}", encoding="utf-8")
                    failed[path.name] = type(exc).__name__
                    continue
            files.append(path)
    return files, failed


def record_corpus(cache: Path, jobs: int, log) -> dict[str, Any]:
    files, failed = _corpus_files(cache, log)
    doc = _check(files, jobs)
    doc["export_failed"] = failed
    return doc


def record(out: Path, parts: list[str], cache: Path, bench_names: list[str], jobs: int) -> None:
    out.mkdir(parents=True, exist_ok=True)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    bench_cache = os.environ.get("NPUCHECK_BENCH_DIR", str(Path.home() / ".cache" / "npucheck-bench"))
    roots = [("<repo>", str(REPO)), ("<cache>", str(cache.resolve())), ("<bench>", str(Path(bench_cache).resolve())),
             ("<out>", str(out.resolve())), ("<home>", str(Path.home()))]
    if "corpus" in parts:  # the cached corpus files name the checkout that exported them: <repo> too
        roots.append(("<repo>", exported_from(cache)))
    for part in parts:
        log(f"recording {part} ...")
        if part == "examples":
            doc = record_examples(out)
        elif part == "bench":
            doc = record_bench(bench_names, jobs)
        elif part == "corpus":
            doc = record_corpus(cache, jobs, log)
        else:
            raise SystemExit(f"unknown part {part!r}; expected {', '.join(PARTS)}")
        (out / f"{part}.json").write_text(json.dumps(normalise(doc, roots), indent=1, sort_keys=True,
                                                     ensure_ascii=False) + "\n", encoding="utf-8")
        log(f"  wrote {out / (part + '.json')}")
        if part == "examples":
            renders = record_renders(doc["report"])
            texts = {name: {fmt: _normalise_text(t, roots) for fmt, t in r.items()} for name, r in renders.items()}
            (out / "renders.json").write_text(json.dumps(texts, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                                              encoding="utf-8")
            log(f"  wrote {out / 'renders.json'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record", help="run the corpus and write normalised JSON reports into OUTDIR")
    rec.add_argument("outdir", type=Path)
    rec.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    rec.add_argument("--cache", type=Path,
                     default=Path(os.environ.get("NPUCHECK_GUARD_CACHE", Path.home() / ".cache" / "npucheck-guard")))
    rec.add_argument("--bench", default=",".join(DEFAULT_BENCH), help="benchmark model names (benchmarks/models.py)")
    rec.add_argument("--jobs", type=int, default=2)
    cmp_ = sub.add_parser("compare", help="print the differences between two recordings; exit 1 if any")
    cmp_.add_argument("dir_a", type=Path)
    cmp_.add_argument("dir_b", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "record":
        record(args.outdir, [p for p in args.parts.split(",") if p], args.cache,
               [n for n in args.bench.split(",") if n], args.jobs)
        return 0
    diffs = compare_dirs(args.dir_a, args.dir_b)
    for line in diffs:
        print(line)
    print(f"{len(diffs)} difference(s)" if diffs else "identical", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
