"""Strict JSON reading (no duplicate keys, no NaN/Infinity) and atomic writing."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import stat
from pathlib import Path
from typing import Any, Iterable, Iterator

from .errors import NpuCheckError


class JsonFileError(NpuCheckError):
    """A JSON file is unreadable or not strict JSON."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = dict(pairs)
    if len(out) == len(pairs):  # the common case, built in C; else find the first duplicate in order
        return out
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


class _Refused:
    """Stands in for a number the parser refused (NaN, Infinity, 1e999) until its path is known."""

    __slots__ = ("why",)

    def __init__(self, why: str) -> None:
        self.why = why


#: Deepest nesting of arrays and objects a file the plugin reads may have. Ours reach about 12;
#: Python's parser gives up near 1,000 (``RecursionError``), and the code that walks a parsed
#: document (schema validation, error messages that quote a value) recurses too.
MAX_DEPTH = 100


def loads_strict(text: str | bytes) -> Any:
    """Parse JSON, rejecting duplicate keys, NaN/Infinity literals, numbers too large for a float
    (``1e999`` would be infinity) and nesting deeper than :data:`MAX_DEPTH`.

    Every failure is a ``ValueError`` (``json.JSONDecodeError`` for syntax, with line and column;
    a refused number names its JSON path, ``$.releases.1.0.tests.t.atol``). This is the one JSON
    reader of the package: files, ini values and cache entries."""
    refused: list[_Refused] = []

    def constant(name: str) -> _Refused:
        refused.append(_Refused(f"non-standard JSON literal {name}"))
        return refused[-1]

    def number(digits: str) -> Any:
        value = float(digits)
        if value in (_INF, -_INF):
            refused.append(_Refused(f"number {digits} is too large (it would be read as infinity)"))
            return refused[-1]
        return value

    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=constant, parse_float=number)
    except RecursionError:
        raise ValueError(f"nested too deeply (more than {MAX_DEPTH} levels of arrays and objects)") from None
    _check_depth(value, refused)
    if refused:  # a top-level literal: nothing was walked
        raise ValueError(f"$: {refused[0].why}")
    return value


_INF = float("inf")
_TOO_DEEP = f"nested too deeply (more than {MAX_DEPTH} levels of arrays and objects)"


def _check_depth(value: Any, refused: list[_Refused]) -> None:
    """Raise for nesting deeper than MAX_DEPTH, or for the first refused number (with its path)."""
    if not isinstance(value, (dict, list)):
        return
    if not refused:  # only the depth to check: one level at a time, no paths kept
        level, depth = [value], 1
        while level:
            if depth > MAX_DEPTH:
                raise ValueError(_TOO_DEEP)
            level = [c for item in level for c in (item.values() if isinstance(item, dict) else item)
                     if isinstance(c, (dict, list))]
            depth += 1
        return
    stack: list[tuple[Any, int, tuple[Any, ...]]] = [(value, 1, ())]
    while stack:
        item, depth, path = stack.pop()
        if depth > MAX_DEPTH:
            raise ValueError(_TOO_DEEP)
        pairs = item.items() if isinstance(item, dict) else enumerate(item)
        for key, child in pairs:
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1, (path, key) if refused else ()))
            elif refused and isinstance(child, _Refused):
                raise ValueError(f"{_path_text((path, key))}: {child.why}")


def _path_text(path: tuple[Any, ...]) -> str:
    keys: list[str] = []
    while path:
        path, key = path
        keys.append(str(key))
    return "$" + "".join("." + k for k in reversed(keys))


def load_strict(path: Path) -> Any:
    """Read a strict JSON file; every failure names the file (and line/column where known). Only a
    regular file is read (a FIFO or a link to ``/dev/zero`` is an error naming it, not a hang)."""
    try:
        raw = read_regular(path)
    except OSError as exc:
        raise JsonFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    return parse_strict(path, raw)


def parse_strict(path: Path, raw: bytes) -> Any:
    """:func:`load_strict` of bytes already read from ``path`` (named in every error)."""
    if raw.startswith(b"version https://git-lfs.github.com/spec/"):
        raise JsonFileError(f"{path}: is a Git LFS pointer, not the file itself (run `git lfs pull`)")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JsonFileError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        return loads_strict(text)
    except json.JSONDecodeError as exc:
        raise JsonFileError(f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except ValueError as exc:
        raise JsonFileError(f"{path}: invalid JSON: {exc}") from None


class EncodedList:
    """A list of objects, each already as its compact JSON text (``compact``): ``dumps`` writes it as it
    would write the list of the objects themselves, without encoding them again where the list gets
    lines of its own (a target's nodes). What makes the texts can share one text between equal objects
    (the nodes of a report: most of each node's entry repeats from layer to layer). Inside an element
    that ``dumps`` writes compactly (a document of more than eight targets or files) it is written from
    the objects read back from the texts: the same text. Not a list, so that no encoder mistakes it for
    a list of strings; only ``dumps`` writes it (``json.dumps`` refuses it)."""

    __slots__ = ("texts",)

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.texts = list(texts)

    def __len__(self) -> int:
        return len(self.texts)

    def objects(self) -> list[Any]:
        return [json.loads(t) for t in self.texts]


def _default(value: Any) -> Any:
    """The C encoder's hook for what it does not know: an EncodedList as its objects."""
    if type(value) is EncodedList:
        return value.objects()
    return json.JSONEncoder.default(_ENCODER, value)  # its TypeError


_ENCODER = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "), default=_default)
try:  # JSONEncoder.encode builds a new C encoder per call: for 9,000 small pieces, build it once
    from json.encoder import c_make_encoder, encode_basestring

    _C_ENCODE = c_make_encoder(None, _default, encode_basestring, None, ": ", ", ", False, False, False) \
        if c_make_encoder is not None else None
except ImportError:  # pragma: no cover - CPython always has the C encoder
    _C_ENCODE = None


def _encode(value: Any) -> str:
    if _C_ENCODE is None or isinstance(value, (str, int, float)) or value is None:
        return _ENCODER.encode(value)
    return "".join(_C_ENCODE(value, 0))
_LONG_LIST = LONG_LIST = 8  # lists of objects longer than this print one compact element per line


def compact(value: Any) -> str:
    """The compact text ``dumps`` writes for ``value`` as an element of a long list (one line)."""
    return _encode(value)


def dumps(data: Any) -> str:
    """Serialise for files we write: stable key order, strict (NaN is an error).

    Objects are indented by two spaces; a list of more than eight objects or lists (the nodes of
    a report) prints one compact element per line. ``json.dumps(indent=2)`` takes Python's pure
    encoder, which was as slow as the whole check of a 1,000-node model; the compact pieces here
    come from the C encoder. The text parses to the same data.
    """
    parts: list[str] = []
    was_enabled = gc.isenabled()  # the pieces are acyclic and short-lived: no collection need scan them
    gc.disable()
    try:
        _emit(data, "", parts)
        parts.append("\n")
        return "".join(parts)  # one copy of a report's megabytes of text, not a second for the newline
    finally:
        if was_enabled:
            gc.enable()


def _emit(value: Any, indent: str, parts: list[str]) -> None:
    encode = _encode
    inner = indent + "  "
    if type(value) is EncodedList:
        if len(value) > _LONG_LIST:  # one compact element per line: the texts as they are, joined once
            parts += ("[\n" + inner, (",\n" + inner).join(value.texts), "\n" + indent + "]")
        else:  # a short list prints its objects indented: from the objects
            _emit(value.objects(), indent, parts)
        return
    if isinstance(value, dict) and value:
        sep = "{\n"
        for key, item in value.items():
            if not isinstance(key, str):
                key = json.loads(encode({key: None}))  # json's own key coercion (int, float, bool, None)
                key = next(iter(key))
            parts.append(sep + inner + encode(key) + ": ")
            sep = ",\n"
            _emit(item, inner, parts)
        parts.append("\n" + indent + "}")
    elif isinstance(value, (list, tuple)) and value and any(isinstance(v, (dict, list, tuple)) for v in value):
        if len(value) > _LONG_LIST:
            if _C_ENCODE is None:
                parts.append("[\n" + inner + (",\n" + inner).join(map(encode, value)) + "\n" + indent + "]")
                return
            # the same text, from the C encoder's pieces of every element joined once (9,000 nodes)
            sep, c_encode = ",\n" + inner, _C_ENCODE
            parts.append("[\n" + inner)
            for item in value:
                if isinstance(item, (str, int, float)) or item is None:
                    parts.append(encode(item))
                else:
                    parts.extend(c_encode(item, 0))
                parts.append(sep)
            parts[-1] = "\n" + indent + "]"
            return
        sep = "[\n"
        for item in value:
            parts.append(sep + inner)
            sep = ",\n"
            _emit(item, inner, parts)
        parts.append("\n" + indent + "]")
    else:
        parts.append(encode(value))


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write a file so readers see the old or the new content, never a partial one.

    The temporary file lives in the same directory and replaces the target with
    ``os.replace``. Only a regular file or a new path is written: a symbolic link is refused rather
    than followed, and so is a device, a FIFO, a socket or a directory (``os.replace`` would put a
    regular file in place of ``/dev/null``). Checked before the data is written and again just
    before the replace.
    """
    path = Path(path)
    refuse_unwritable_target(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8") if isinstance(text, str) else text
    remove_stale_temps(path)
    import tempfile  # here: it imports random, ~15 ms at the start of every `npucheck` command

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _mode_for(path))  # mkstemp makes 0600: a report or baseline is a shared artifact
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        refuse_unwritable_target(path)  # again: the path may have changed while the data was written
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link"))


def file_kind(mode: int) -> str:
    """What a ``st_mode`` names, in words ("a character device"); "a regular file" for one."""
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def special_file(path: Path, follow: bool = False) -> str | None:
    """None when ``path`` does not exist or is a regular file; else what it is ("a FIFO (named pipe)").
    ``follow``: look through symbolic links (a link to a regular file is then fine)."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"not accessible ({exc.strerror or exc})"
    return None if stat.S_ISREG(st.st_mode) else file_kind(st.st_mode)


def refuse_unwritable_target(path: Path) -> None:
    """Raise NpuCheckError unless ``path`` is a regular file or does not exist yet (a report, baseline,
    golden or manifest is only ever written to such a path)."""
    kind = special_file(Path(path))
    if kind == "a symbolic link":
        raise NpuCheckError(f"{path}: refusing to write through a symbolic link")
    if kind is not None:
        raise NpuCheckError(f"{path}: is {kind}, not a regular file; refusing to replace it (only regular "
                            "files or new paths are written)")


def read_regular(path: Path, limit: int | None = None) -> bytes:
    """The bytes of ``path``, which must be a regular file (after symbolic links); OSError otherwise.

    Opened without blocking, then checked on the open descriptor: a FIFO would hang ``read_bytes``
    and ``/dev/zero`` would fill the memory. ``limit``: a larger file is an OSError too."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise OSError(f"is {file_kind(st.st_mode)}, not a regular file")
        if limit is not None and st.st_size > limit:
            raise OSError(f"is {st.st_size} bytes, more than the {limit} read at most")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        with os.fdopen(fd, "rb", closefd=False) as fh:
            return fh.read()
    finally:
        os.close(fd)


@contextlib.contextmanager
def directory_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on the directory of ``path`` (``flock``; no lock file to leave behind)
    while a read-modify-write of ``path`` runs, so that two processes updating it at once do not
    lose each other's changes. Where ``flock`` does not exist (Windows) this does nothing."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    directory = Path(path).parent
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _mode_for(path: Path) -> int:
    """The permissions of the file that ``path`` replaces, or of a new file under this process's umask
    (what ``open(path, "w")`` would give)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def remove_stale_temps(path: Path) -> list[Path]:
    """Delete the temporary files that writers of ``path`` killed mid-write left behind.

    :func:`write_atomic` names them ``.<name>.<pid>.<random>.tmp``; one whose writer process is
    gone is debris (a ``kill -9`` between create and replace). Files of a live writer, and files
    that do not follow the pattern, are left alone. Returns what was removed."""
    path = Path(path)
    removed = []
    prefix = f".{path.name}."
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        pid_text = name[len(prefix):].split(".", 1)[0]
        if not pid_text.isdigit() or pid_alive(int(pid_text)):
            continue
        try:
            os.unlink(path.parent / name)
            removed.append(path.parent / name)
        except OSError:
            pass
    return removed


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` may still be writing: it exists and is not a zombie (this process is)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) has stopped writing
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True
