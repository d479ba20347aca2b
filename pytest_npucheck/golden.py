"""Stored goldens: the inputs and reference outputs of a test, one ``.npz`` file per test id.

The life cycle follows pytest-regressions, which keeps a regeneration from ever being green:

* no golden      -> :attr:`GoldenStatus.MISSING` (fails; the message says to run with
  ``--npu-update-golden``);
* update run     -> :attr:`GoldenStatus.WRITTEN` (the file is written and the status still fails
  with "golden written, re-run");
* match          -> :attr:`GoldenStatus.PASSED` (a stale ``.obtained.npz`` is removed);
* mismatch       -> :attr:`GoldenStatus.MISMATCH` with the numerics report, and the obtained
  outputs saved beside the golden as ``<name>.obtained.npz``.

Files are written atomically (``np.savez`` into memory, then temp file + fsync + ``os.replace``
via :func:`pytest_npucheck.jsonio.write_atomic`) and read with ``allow_pickle=False``. A corrupt,
truncated or Git-LFS-pointer file raises :class:`GoldenError` naming the file. A golden path that
resolves outside the golden root (``..``, symbolic links) is refused.

Layout of a file: arrays ``input/<name>`` and ``output/<name>``, plus ``__meta__`` (a 0-d string
array holding JSON: format version and test id). No pytest, no torch.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import io
import json
import os
import re
import struct
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import NpuCheckError
from .jsonio import loads_strict, read_regular, write_atomic
from .numerics import Comparison, Policy, compare_outputs

__all__ = [
    "GOLDEN_FORMAT",
    "UPDATE_OPTION",
    "Golden",
    "GoldenError",
    "GoldenResult",
    "GoldenStatus",
    "GoldenStore",
]

GOLDEN_FORMAT = 1
#: The command-line flag the glue exposes for regeneration (quoted in messages).
UPDATE_OPTION = "--npu-update-golden"
#: What one golden may hold at most, in MiB (the arrays as their headers declare them, before
#: anything is read; and the file itself). The glue's ``--npu-golden-max-mb`` / ini
#: ``npu_golden_max_mb`` raise it.
DEFAULT_MAX_MB = 256
#: The option that raises the limit (quoted in messages).
LIMIT_OPTION = "--npu-golden-max-mb"
_INPUT = "input/"
_OUTPUT = "output/"
_META = "__meta__"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class GoldenError(NpuCheckError):
    """A golden file is unreadable, corrupt, or its path is unsafe."""


class GoldenStatus(str, enum.Enum):
    PASSED = "passed"
    MISSING = "missing"
    WRITTEN = "written"
    MISMATCH = "mismatch"


@dataclasses.dataclass(frozen=True)
class Golden:
    """What a golden file holds (arrays in file order)."""

    test_id: str
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]
    path: Path


@dataclasses.dataclass(frozen=True)
class GoldenResult:
    """The outcome of :meth:`GoldenStore.check`; only ``PASSED`` is a pass."""

    status: GoldenStatus
    test_id: str
    path: Path
    message: str
    obtained_path: Path | None = None
    comparison: Comparison | None = None

    @property
    def passed(self) -> bool:
        return self.status is GoldenStatus.PASSED

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status.value,
            "test_id": self.test_id,
            "path": str(self.path),
            # what the gate compared against: a reviewer sees when a change edits the golden (F10)
            "sha256": hashlib.sha256(self.path.read_bytes()).hexdigest() if self.path.is_file() else None,
            "obtained_path": str(self.obtained_path) if self.obtained_path else None,
            "message": self.message,
            "comparison": self.comparison.to_json() if self.comparison else None,
        }

    def lines(self) -> list[str]:
        out = [self.message]
        if self.comparison is not None and not self.comparison.passed:
            out += ["  " + line for line in self.comparison.lines()]
        return out


def _slug(test_id: str) -> str:
    """A file name for a test id: readable part + 8 hex digits of its sha256 (no collisions
    between ids that sanitise alike, nothing that can climb out of the directory)."""
    digest = hashlib.sha256(test_id.encode("utf-8")).hexdigest()[:8]
    readable = _UNSAFE.sub("_", test_id.replace("::", "__")).strip("._-")[:100] or "golden"
    return f"{readable}-{digest}"


class GoldenStore:
    """Golden files under ``root`` (the glue passes e.g. ``<rootdir>/tests/goldens``)."""

    def __init__(self, root: Path | str, *, anchor: Path | str | None = None,
                 max_bytes: int | None = None) -> None:
        """``anchor``: the directory the root is configured relative to (the rootdir); no component of
        the root below it may be a symbolic link. ``max_bytes``: what one golden may hold (None:
        DEFAULT_MAX_MB)."""
        self.root = Path(root)
        self.anchor = Path(anchor) if anchor is not None else None
        self.max_bytes = DEFAULT_MAX_MB << 20 if max_bytes is None else max_bytes

    # -- paths

    def path_for(self, test_id: str, filename: str | None = None) -> Path:
        """The golden of ``test_id``; ``filename`` (relative to the root) overrides the default
        name. Refuses any path that resolves outside the root."""
        rel = filename if filename is not None else _slug(test_id) + ".npz"
        if not rel.endswith(".npz"):
            rel += ".npz"
        candidate = self.root / rel
        self._ensure_inside(candidate)
        return candidate

    @staticmethod
    def obtained_path(path: Path) -> Path:
        return path.with_name(path.name[: -len(".npz")] + ".obtained.npz")

    def _ensure_inside(self, path: Path) -> None:
        self._refuse_linked_root()
        if Path(path).is_absolute() and not str(path).startswith(str(self.root)):
            raise GoldenError(f"{path}: golden path is outside the golden root {self.root}")
        root = self.root.resolve()
        resolved = Path(path).resolve()
        if resolved != root and root not in resolved.parents:
            raise GoldenError(
                f"{path}: golden path resolves to {resolved}, outside the golden root {root}"
                " (a '..' component or a symbolic link); refusing to read or write it"
            )

    def _refuse_linked_root(self) -> None:
        """The root itself (and each of its directories below ``anchor``) must not be a symbolic link:
        resolving the root along with the path let a linked root send `.obtained.npz` files out of the
        repository."""
        root = self.root if self.root.is_absolute() or self.anchor is None else self.anchor / self.root
        parts = [root]
        if self.anchor is not None:
            try:
                rel = root.relative_to(self.anchor)
            except ValueError:
                rel = None
            if rel is not None:
                parts = [self.anchor.joinpath(*rel.parts[:k]) for k in range(len(rel.parts), 0, -1)]
        for part in parts:
            if part.is_symlink():
                raise GoldenError(f"{part}: the golden directory is a symbolic link (to {os.path.realpath(part)}); "
                                  "goldens are not read or written through links (ini key npu_golden_dir)")

    # -- read / write

    def load(self, test_id: str, filename: str | None = None) -> Golden | None:
        """The stored golden, or None when there is no file. Raises :class:`GoldenError` if the
        file exists but cannot be read."""
        path = self.path_for(test_id, filename)
        self._check_root()
        if not path.exists():
            return None
        return self._read(test_id, path, filename)

    def _check_root(self) -> None:
        if self.root.exists() and not self.root.is_dir():
            raise GoldenError(f"{self.root}: the golden directory is a file, not a directory (ini key npu_golden_dir)")

    def _read(self, test_id: str, path: Path, filename: str | None) -> Golden:
        golden = read_golden(path, self.max_bytes)
        if golden.test_id != test_id and filename is None:  # a golden file named for one test holds another's
            what = f"test {golden.test_id!r}" if golden.test_id else "no test (no __meta__ record)"
            raise GoldenError(f"{path}: this golden was recorded for {what}, not {test_id!r} (a copied or renamed "
                              f"file?); re-create it with {UPDATE_OPTION}")
        return golden

    def save(self, test_id: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any],
             filename: str | None = None) -> Path:
        path = self.path_for(test_id, filename)
        _write_npz(path, test_id, inputs, outputs)
        return path

    # -- the check

    def check(self, test_id: str, outputs: Mapping[str, Any], policy: Policy | str,
              inputs: Mapping[str, Any] | None = None, *, update: bool = False,
              filename: str | None = None) -> GoldenResult:
        """Compare ``outputs`` with the golden of ``test_id`` (matched by output name).

        ``inputs`` are the feeds that produced ``outputs``: stored on update, and on a check
        they must equal the stored ones exactly (else the comparison is meaningless and fails).
        Use :meth:`load` first to run the model on the golden's own inputs.
        ``update=True`` writes the golden and returns ``WRITTEN`` (never a pass)."""
        path = self.path_for(test_id, filename)
        obtained = self.obtained_path(path)
        self._check_root()
        if update:
            _refuse_nonfinite(path, outputs, policy)
            _write_npz(path, test_id, inputs or {}, outputs)
            if obtained.exists() and not obtained.is_symlink():
                obtained.unlink()
            return GoldenResult(
                GoldenStatus.WRITTEN, test_id, path,
                f"golden written to {path} ({len(outputs)} output(s)); re-run without"
                f" {UPDATE_OPTION} to check against it",
            )
        if not path.exists():
            return GoldenResult(
                GoldenStatus.MISSING, test_id, path,
                f"no golden for {test_id} at {path}; run `pytest {UPDATE_OPTION}` to create it"
                " (then review and commit the file)",
            )
        golden = self._read(test_id, path, filename)
        problems: list[str] = []
        if inputs is not None:
            problems += _input_problems(golden.inputs, inputs)
        comp = compare_outputs(golden.outputs, outputs, policy)
        if comp.passed and not problems:
            if obtained.exists() and not obtained.is_symlink():
                obtained.unlink()
            return GoldenResult(GoldenStatus.PASSED, test_id, path,
                                f"matches golden {path} (policy {comp.policy})", None, comp)
        self._ensure_inside(obtained)
        _write_npz(obtained, test_id, inputs or {}, outputs)
        failed = [o.name for o in comp.outputs if not o.passed] + list(comp.missing) + list(comp.extra)
        what = "; ".join(problems + ([f"outputs out of tolerance: {', '.join(failed)}"] if failed else [])
                         + ([f"unknown tolerance overrides: {', '.join(comp.unknown_overrides)}"]
                            if comp.unknown_overrides else []))
        return GoldenResult(
            GoldenStatus.MISMATCH, test_id, path,
            f"differs from golden {path} (policy {comp.policy}): {what}; obtained values saved to"
            f" {obtained} (accept them with {UPDATE_OPTION})",
            obtained, comp,
        )


def _refuse_nonfinite(path: Path, outputs: Mapping[str, Any], policy: Policy | str) -> None:
    """A golden with NaN or inf would make every later comparison meaningless: refuse to write
    one unless the tolerance of that output allows non-finite values (``allow_nonfinite``)."""
    import numpy as np

    from .numerics import policy_for

    pol = policy if isinstance(policy, Policy) else policy_for(str(policy))
    for name, value in outputs.items():
        arr = np.asarray(value)
        if arr.dtype.kind not in "fc" or pol.for_output(name).allow_nonfinite:
            continue
        bad = ~np.isfinite(arr)
        if bad.any():
            first = tuple(int(i) for i in np.argwhere(bad)[0])
            raise GoldenError(
                f"{path}: refusing to write a golden with non-finite values: output {name!r} has "
                f"{int(np.isnan(arr).sum())} NaN and {int(np.isinf(arr).sum())} inf, the first at index {first}; "
                "fix the model, or allow non-finite values for this output in its tolerance (allow_nonfinite)")


def _too_large(path: Path, what: str, size: int, max_bytes: int) -> GoldenError:
    mib = f" ({max_bytes >> 20} MiB)" if max_bytes and not max_bytes % (1 << 20) else ""
    return GoldenError(f"{path}: golden too large: {what} {size} bytes, over the limit of {max_bytes} bytes{mib} "
                       "that one golden may hold; nothing was read. Raise it with "
                       f"{LIMIT_OPTION} (ini npu_golden_max_mb) if the golden is genuine, else delete it and "
                       f"re-create it with {UPDATE_OPTION}")


def _check_sizes(path: Path, raw: bytes, max_bytes: int = DEFAULT_MAX_MB << 20) -> None:
    """Every array's header must declare exactly the bytes its member holds (a forged shape would
    make numpy allocate for it first), and all of them together at most ``max_bytes`` (a DEFLATE
    member declared at 2 GiB is a zip bomb of 1 MiB). Checked from the headers, before any array
    is read; a member that is not an array would be read whole by numpy, so it is refused."""
    import math

    import numpy as np

    fmt = np.lib.format
    total = 0
    with zipfile.ZipFile(io.BytesIO(raw)) as zf:
        for info in zf.infolist():
            if not info.filename.endswith(".npy"):
                raise GoldenError(f"{path}: unexpected member {info.filename!r} in golden (not an array); delete "
                                  f"it and re-create it with {UPDATE_OPTION}")
            total += info.file_size
            if total > max_bytes:
                raise _too_large(path, "its members declare", total, max_bytes)
            with zf.open(info) as fh:
                version = fmt.read_magic(fh)
                read_header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
                shape, _, dtype = read_header(fh)
                header = fh.tell()
            name = info.filename[: -len(".npy")]
            if dtype.hasobject:
                continue  # a pickle: np.load(allow_pickle=False) refuses it without unpickling
            declared = math.prod(shape) * dtype.itemsize
            if declared != info.file_size - header:
                raise GoldenError(f"{path}: array {name!r} declares shape {tuple(shape)} {dtype} ({declared} bytes) "
                                  f"but holds {info.file_size - header} bytes: golden too large or invalid; "
                                  f"delete it and re-create it with {UPDATE_OPTION}")


def _input_problems(stored: Mapping[str, Any], given: Mapping[str, Any]) -> list[str]:
    import numpy as np

    out = []
    if set(stored) != set(given):
        out.append(f"inputs differ from the golden's: stored {sorted(stored)} vs given {sorted(given)}")
        return out
    for name in stored:
        a, b = np.asarray(stored[name]), np.asarray(given[name])
        if a.shape != b.shape or a.dtype != b.dtype:
            out.append(f"input {name!r} is {b.dtype}{list(b.shape)} now and {a.dtype}{list(a.shape)} in the golden: "
                       f"the test's inputs changed since it was recorded (re-record it with {UPDATE_OPTION} if "
                       "that is intended)")
        elif not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
            out.append(f"input {name!r} differs from the golden's ({a.dtype}{list(a.shape)} vs "
                       f"{b.dtype}{list(b.shape)}); run the model on Golden.inputs")
    return out


def _write_npz(path: Path, test_id: str, inputs: Mapping[str, Any], outputs: Mapping[str, Any]) -> None:
    import numpy as np

    arrays: dict[str, Any] = {}
    for prefix, group in ((_INPUT, inputs), (_OUTPUT, outputs)):
        for name, value in group.items():
            arr = np.asarray(value)
            if arr.dtype.kind not in "biuf":
                raise GoldenError(f"{path}: {prefix}{name} has dtype {arr.dtype}; only bool, integer"
                                  " and float arrays can be stored")
            arrays[prefix + name] = arr
    arrays[_META] = np.array(json.dumps({"format": GOLDEN_FORMAT, "test_id": test_id}))
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    write_atomic(path, buf.getvalue())


def read_golden(path: Path, max_bytes: int = DEFAULT_MAX_MB << 20) -> Golden:
    """Read a golden file; every failure is a :class:`GoldenError` naming the file. A golden whose
    file or arrays (as declared) exceed ``max_bytes`` is refused before it is read."""
    import numpy as np

    path = Path(path)
    try:
        size = os.stat(path).st_size
        if size > max_bytes:
            raise _too_large(path, "the file is", size, max_bytes)
        raw = read_regular(path, max_bytes)
    except OSError as exc:
        raise GoldenError(f"{path}: cannot read golden: {exc.strerror or exc}") from None
    if raw.startswith(b"version https://git-lfs.github.com/spec/"):
        raise GoldenError(f"{path}: is a Git LFS pointer, not the golden itself (run `git lfs pull`)")
    if not raw.startswith(b"PK"):
        raise GoldenError(f"{path}: not an .npz file (no zip header); corrupt golden - delete it and"
                          f" re-create it with {UPDATE_OPTION}")
    inputs: dict[str, Any] = {}
    outputs: dict[str, Any] = {}
    test_id = ""
    try:
        _check_sizes(path, raw, max_bytes)
        with np.load(io.BytesIO(raw), allow_pickle=False) as data:
            for key in data.files:
                arr = data[key]
                if key == _META:
                    meta = loads_strict(str(arr))
                    if not isinstance(meta, dict):
                        raise GoldenError(f"{path}: its __meta__ record is not a JSON object; re-create it with "
                                          f"{UPDATE_OPTION}")
                    if meta.get("format") != GOLDEN_FORMAT:
                        raise GoldenError(f"{path}: golden format {meta.get('format')!r}, expected"
                                          f" {GOLDEN_FORMAT}; re-create it with {UPDATE_OPTION}")
                    test_id = str(meta.get("test_id", ""))
                elif key.startswith(_INPUT):
                    inputs[key[len(_INPUT):]] = arr
                elif key.startswith(_OUTPUT):
                    outputs[key[len(_OUTPUT):]] = arr
                else:
                    raise GoldenError(f"{path}: unexpected array {key!r} in golden")
    except GoldenError:
        raise
    except (zipfile.BadZipFile, ValueError, OSError, EOFError, KeyError, json.JSONDecodeError,
            # a damaged zip directory can claim encryption, other versions or compressions
            # (found by tests/corpus/test_fuzz.py)
            NotImplementedError, RuntimeError, zlib.error, struct.error, OverflowError, IndexError) as exc:
        raise GoldenError(f"{path}: corrupt or truncated golden ({type(exc).__name__}: {exc}); delete"
                          f" it and re-create it with {UPDATE_OPTION}") from None
    if not outputs:
        raise GoldenError(f"{path}: golden holds no outputs")
    return Golden(test_id, inputs, outputs, path)
