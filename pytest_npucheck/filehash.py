"""SHA-256 of files, computed once per file version in a process.

The caches (exports, graph facts) check the content hash of what they read against the hash
recorded when the entry was written: a same-size edit that kept the mtime was used as is before.
A file is hashed again when anything ``os.stat`` reports about it changes; ``st_ctime`` changes on
every write and cannot be set back by the writer, so an edited file is never taken for the version
hashed before.
"""

from __future__ import annotations

import hashlib
import os
from typing import Union

_MEMO: dict[tuple[int, ...], str] = {}
_CHUNK = 1 << 20


def _key(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def fingerprint(path: Union[str, os.PathLike[str]]) -> tuple[int, ...]:
    """What ``os.stat`` says about a regular file that changes with any write to it (OSError when it
    cannot be read): device, inode, size, mtime and ctime, in nanoseconds. A caller may record it
    beside a digest it checked, and trust the digest while the fingerprint is unchanged."""
    st = os.stat(path)
    if not (st.st_mode & 0o170000 == 0o100000):  # S_ISREG without importing stat
        raise OSError(f"{path}: not a regular file")
    return _key(st)


def remember(key: tuple[int, ...], digest: str) -> None:
    """Take ``digest`` as the SHA-256 of the file version ``key`` (a :func:`fingerprint`) for this
    process, as if :func:`sha256_file` had computed it: for a digest checked by an earlier process
    whose record of the fingerprint still matches (the export cache's stamp)."""
    if len(_MEMO) > 4096:
        _MEMO.clear()
    _MEMO[tuple(key)] = digest


def sha256_file(path: Union[str, os.PathLike[str]]) -> str:
    """Hex SHA-256 of a regular file's bytes (OSError when it cannot be read)."""
    with open(path, "rb") as fh:
        st = os.fstat(fh.fileno())
        if not (st.st_mode & 0o170000 == 0o100000):  # S_ISREG without importing stat
            raise OSError(f"{path}: not a regular file")
        key = _key(st)
        digest = _MEMO.get(key)
        if digest is None:
            h = hashlib.sha256()
            for chunk in iter(lambda: fh.read(_CHUNK), b""):
                h.update(chunk)
            digest = h.hexdigest()
            if len(_MEMO) > 4096:
                _MEMO.clear()
            _MEMO[key] = digest
    return digest


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


__all__ = ["fingerprint", "remember", "sha256_bytes", "sha256_file"]
