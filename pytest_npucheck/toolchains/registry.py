"""The toolchain registry: every toolchain the package knows, built in or added by another package.

A toolchain is a :class:`Toolchain`: its name (the ``toolchain`` field of its tables), the
precision its targets use unless a test says otherwise, and, for a toolchain that can run here,
the hooks that drive it, each a ``"module:attribute"`` reference imported only when used:

* ``oracle``: an object with ``find_python(explicit)`` (the python of the toolchain's own venv,
  or None) and ``simulate(onnx_path, table, feeds, output_names, precision, calibration, python,
  timeout)`` returning ``{precision: oracles.simulate.SimRun}`` (build, placement, outputs);
  ``--npu-oracle`` uses it (:mod:`pytest_npucheck.oracles.oracle`);
* ``probes``: the probe runner and table builder of ``npucheck probe`` (see
  :class:`pytest_npucheck.probe.refresh.ProbeRunner` for what it offers; the venv's python is
  found with the ``oracle`` hook's ``find_python``, so a toolchain with probes has an oracle);
* ``zoo``: the quirks of scoring a model zoo against recorded compiler results
  (:mod:`pytest_npucheck.oracles.zoo_score`): ``placement(onnx_path, record, log)``,
  ``reason(node, record)`` and ``rejection(message, log, names, graph)``.

Documentation-only toolchains (SNPE, CANN) are registered with no hooks: their tables are
checked statically and ``--npu-oracle`` reports them as having no oracle.

Another package adds a toolchain without editing this one through the entry-point group
``pytest_npucheck.toolchains``: each entry point names a :class:`Toolchain` or a callable
returning one. Entry points are read with :mod:`importlib.metadata` on the first lookup, never
at import (the pytest plugin imports nothing from here until a check runs). A plug-in may ship
its own support tables (``tables``: a directory laid out like ``op_support_tables/``); the
catalog reads them after the bundled ones.

Plain module: no pytest, no torch, nothing imported at module level but the standard library.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Optional, Union

from ..errors import UsageError

__all__ = ["ENTRY_POINT_GROUP", "Toolchain", "ToolchainError", "default_precision", "find", "get", "load_hook", "names", "registered",
           "reset", "table_dirs"]

#: the entry-point group other packages register toolchains under
ENTRY_POINT_GROUP = "pytest_npucheck.toolchains"


class ToolchainError(UsageError):
    """An unknown toolchain, a broken plug-in or a hook it does not have."""


@dataclass(frozen=True)
class Toolchain:
    """One toolchain; the hooks are ``"module:attribute"`` references, imported when first used."""

    name: str
    title: str = ""
    default_precision: str = "fp16"
    package: Optional[str] = None
    """The distribution that is the toolchain (``rknn-toolkit2``), installed in its own venv."""
    env_var: Optional[str] = None
    """The environment variable naming that venv's python (``NPUCHECK_RKNN_PYTHON``)."""
    setup_hint: str = ""
    """How to install it (``scripts/setup-rknn-venv.sh``), for the error that says it is missing."""
    engine: str = ""
    """What runs the model in the oracle (``RKNN simulator``): the numerics candidate's name."""
    oracle: Optional[str] = None
    probes: Optional[str] = None
    zoo: Optional[str] = None
    tables: Optional[Union[str, Path]] = None
    """A directory of support tables the plug-in ships (``<toolchain>/<version>/<soc>.json``)."""
    source: str = "built in"
    """Where the registration came from: ``built in`` or ``entry point <name> (<distribution>)``."""

    @property
    def has_oracle(self) -> bool:
        return self.oracle is not None

    def hook(self, kind: str) -> Any:
        """The object a hook names (``oracle``, ``probes``, ``zoo``), imported now."""
        ref = getattr(self, kind)
        if ref is None:
            raise ToolchainError(f"toolchain {self.name!r} has no {kind} hook ({self.source})")
        return load_hook(ref, f"the {kind} hook of toolchain {self.name!r} ({self.source})")

    def unavailable_reason(self, python: Optional[str] = None) -> Optional[str]:
        """Why this toolchain's oracle cannot run here (None when its python is found)."""
        if self.oracle is None:
            return (f"no oracle for toolchain {self.name!r} (oracles exist for "
                    f"{', '.join(n for n in names() if get(n).has_oracle) or 'none'})")
        if self.hook("oracle").find_python(python) is not None:
            return None
        package = self.package or self.name
        where = (f"set {self.env_var} to the python of a venv with {package}" if self.env_var
                 else f"no python of a venv with {package} found (.venv-{self.name}/bin/python)")
        return f"{package} is not installed: {where}" + (f" ({self.setup_hint})" if self.setup_hint else "")


#: the toolchains of this package: name -> "module:attribute" of its Toolchain (imported on lookup)
BUILT_IN = {
    "rknn": "pytest_npucheck.toolchains.rknn.toolchain:TOOLCHAIN",
    "qnn": "pytest_npucheck.toolchains.qnn.toolchain:TOOLCHAIN",
    "snpe": "pytest_npucheck.toolchains.documented:SNPE",
    "cann": "pytest_npucheck.toolchains.documented:CANN",
}

_registry: Optional[dict[str, Toolchain]] = None
_plugins: Optional[dict[str, Toolchain]] = None  # the entry points' toolchains alone (``_load_plugins``)


def load_hook(ref: str, what: str) -> Any:
    """Import ``module:attribute``; an error names ``what`` and the reference."""
    module, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split(".") if attr else ():
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ToolchainError(f"{what}: cannot load {ref!r}: {type(exc).__name__}: {exc}") from None
    return obj


def _entry_points() -> Iterable[Any]:
    from importlib.metadata import entry_points

    return entry_points(group=ENTRY_POINT_GROUP)


def _from_entry_point(ep: Any) -> Toolchain:
    dist = getattr(getattr(ep, "dist", None), "name", None) or "unknown distribution"
    where = f"entry point {ep.name!r} ({dist}) of group {ENTRY_POINT_GROUP}"
    try:
        obj = ep.load()
    except Exception as exc:  # noqa: BLE001 - a broken plug-in is named, never a crash of ours
        raise ToolchainError(f"{where}: cannot load {ep.value!r}: {type(exc).__name__}: {exc}") from None
    if callable(obj) and not isinstance(obj, Toolchain):
        try:
            obj = obj()
        except Exception as exc:  # noqa: BLE001
            raise ToolchainError(f"{where}: {ep.value}() raised {type(exc).__name__}: {exc}") from None
    if not isinstance(obj, Toolchain):
        raise ToolchainError(f"{where}: {ep.value!r} is a {type(obj).__name__}, not a "
                             "pytest_npucheck.toolchains.registry.Toolchain (or a callable returning one)")
    if obj.name != ep.name:
        raise ToolchainError(f"{where}: the entry point is named {ep.name!r} but registers toolchain {obj.name!r}")
    return _with_source(obj, f"entry point {ep.name!r} ({dist})")


def _with_source(tc: Toolchain, source: str) -> Toolchain:
    from dataclasses import replace

    return replace(tc, source=source)


def _load() -> dict[str, Toolchain]:
    global _registry
    if _registry is not None:
        return _registry
    found: dict[str, Toolchain] = {}
    for name, ref in BUILT_IN.items():
        found[name] = load_hook(ref, f"built-in toolchain {name!r}")
    found.update(_load_plugins())
    _registry = found
    return found


def _load_plugins() -> dict[str, Toolchain]:
    """The toolchains the entry points register, in entry-point order; a name taken by a built-in
    toolchain or an earlier entry point is an error. The built-in toolchains' modules are not
    imported here (~2.5 ms): ``table_dirs``, which every ``Catalog.discover`` asks, needs only the
    plug-ins, and the check of one target reads no other toolchain hook."""
    global _plugins
    if _plugins is not None:
        return _plugins
    found: dict[str, Toolchain] = {}
    for ep in _entry_points():
        if ep.name in BUILT_IN or ep.name in found:
            source = found[ep.name].source if ep.name in found else "built in"
            raise ToolchainError(f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP} registers toolchain "
                                 f"{ep.name!r}, which is already registered ({source})")
        found[ep.name] = _from_entry_point(ep)
    _plugins = found
    return found


def reset() -> None:
    """Forget the registry: the next lookup reads the entry points again (tests, after installing
    a plug-in in the running process)."""
    global _registry, _plugins
    _registry = _plugins = None


def registered() -> dict[str, Toolchain]:
    """Every toolchain, by name (built in first, then the plug-ins in entry-point order)."""
    return dict(_load())


def names() -> list[str]:
    return sorted(_load())


def get(name: str) -> Toolchain:
    """The toolchain called ``name``; an unknown one is an error listing the registered ones."""
    reg = _load()
    tc = reg.get(name)
    if tc is None:
        raise ToolchainError(f"unknown toolchain {name!r}; registered toolchains: {', '.join(sorted(reg))} "
                             f"(another package adds one through the entry-point group {ENTRY_POINT_GROUP})")
    return tc


def find(name: str) -> Optional[Toolchain]:
    """The toolchain called ``name``, or None (a table of a toolchain nobody registered is still
    checked statically)."""
    return _load().get(name)


def default_precision(toolchain: str) -> str:
    """The precision a target of ``toolchain`` runs at when its table names none (fp16 for a
    toolchain nobody registered)."""
    tc = _load().get(toolchain)
    return tc.default_precision if tc is not None else "fp16"


def table_dirs() -> list[Path]:
    """The support-table directories the plug-ins ship, in registration order. A built-in toolchain
    ships none (its tables are the bundled ones; tests/unit/test_toolchains_registry.py holds it)."""
    return [Path(tc.tables) for tc in _load_plugins().values() if tc.tables is not None]
