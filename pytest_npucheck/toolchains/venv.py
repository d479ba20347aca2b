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


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system, its waited-for children included) the live process ``pid`` has
    used, from ``/proc/<pid>/stat``; None where there is no such file (not Linux, or the process
    is gone). A build that runs out of a wall-clock budget on a loaded machine may have had little
    of the CPU: this tells a starved build from a hang."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the command name in parentheses may hold spaces
    try:
        ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))  # utime stime cutime cstime (fields 14-17)
        return ticks / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError):
        return None
