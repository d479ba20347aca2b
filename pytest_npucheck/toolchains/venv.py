"""Shared plumbing of the toolchain adapters (stdlib only)."""

from __future__ import annotations

import os
import shutil


def find_python(explicit: str | os.PathLike[str] | None, env_var: str, venv_dir: str) -> str | None:
    """The python of a toolchain's own venv: ``explicit``, else ``$env_var``, else
    ``<cwd>/<venv_dir>/bin/python``; None when none of them is an executable file."""
    candidates: list[str] = []
    if explicit:
        candidates.append(os.fspath(explicit))
    env = os.environ.get(env_var)
    if env:
        candidates.append(env)
    candidates.append(os.path.join(os.getcwd(), venv_dir, "bin", "python"))
    for c in candidates:
        resolved = shutil.which(c) if os.sep not in c else c
        if resolved and os.path.isfile(resolved) and os.access(resolved, os.X_OK):
            return resolved
    return None
