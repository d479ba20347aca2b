"""`--npu-keep-onnx DIR`: keep the ONNX export of each marked test, named after the test id.

No pytest or torch import. Each file is written by the process that ran the test (the controller,
or the pytest-xdist worker that ran it): a test id runs on one worker, and the name carries a hash
of the full test id, so no two tests (nor two workers) ever write the same file.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from pathlib import Path

from .errors import UsageError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_STEM = 120  # file names stay well under the usual 255-byte limit, hash and suffix included


def kept_name(nodeid: str, call: int = 1) -> str:
    """`tests/test_zoo.py::test_unet[cpu-1]` -> `tests_test_zoo.py_test_unet_cpu-1_-<8 hex>`: the id
    with every run of characters outside [A-Za-z0-9._-] made one `_`, shortened if long, then a hash
    of the exact id (two ids that sanitize alike stay apart) and `-callN` from a test's second call on.
    The same for every target: one export serves all the targets of a call."""
    stem = _UNSAFE.sub("_", nodeid).strip("._") or "test"
    stem = stem[:_MAX_STEM]
    digest = hashlib.sha256(nodeid.encode("utf-8")).hexdigest()[:8]
    return f"{stem}-{digest}" + (f"-call{call}" if call != 1 else "")


def external_locations(model_path: Path) -> list[str]:
    """The external-data files a model refers to (relative to it), sorted; the export cache's own
    files beside it (meta.json, facts.json) are not part of the model and are left out."""
    import onnx

    from .safety import iter_external

    model = onnx.load(str(model_path), load_external_data=False)
    return sorted({e.value for _, t in iter_external(model) for e in t.external_data if e.key == "location"})


def keep(model_path: Path, dest_dir: Path, nodeid: str, call: int = 1) -> Path:
    """Copy an export into ``dest_dir``: ``<name>.onnx``, or ``<name>/`` holding ``model.onnx`` and
    its external-data files when the exporter wrote any (their references are relative to the model).
    Written under a temporary name and renamed, so a reader never sees half a model. Returns the path."""
    model_path = Path(model_path)
    dest_dir = Path(dest_dir)
    try:
        dest_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--npu-keep-onnx / npu_keep_onnx: cannot create the directory {dest_dir}: "
                         f"{exc.strerror or exc}") from None
    name = kept_name(nodeid, call)
    extra = [model_path.parent / loc for loc in external_locations(model_path)]
    try:
        if not extra:
            dest = dest_dir / f"{name}.onnx"
            fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=f".{name}.", suffix=".tmp")
            os.close(fd)
            shutil.copyfile(model_path, tmp)
            os.replace(tmp, dest)
            return dest
        dest = dest_dir / name
        tmpdir = Path(tempfile.mkdtemp(dir=dest_dir, prefix=f".{name}.", suffix=".tmp"))
        for p in (model_path, *extra):
            shutil.copyfile(p, tmpdir / p.name)
        if dest.exists():  # the previous run's copy of this test: replaced whole
            shutil.rmtree(dest)
        os.replace(tmpdir, dest)
        return dest / model_path.name
    except OSError as exc:
        raise UsageError(f"--npu-keep-onnx / npu_keep_onnx: cannot write {nodeid}'s export into {dest_dir}: "
                         f"{exc.strerror or exc}") from None
