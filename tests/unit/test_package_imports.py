"""The package's static import graph: no cycle anywhere, and the facts cache key covers what the facts import.

Every module of ``pytest_npucheck`` is parsed with ``ast`` (nothing is imported) and every import
statement counts, at module level and inside functions alike: a function-level import is a
dependency that only runs later, and a cycle through it is still two modules that each need the
other (tables -> rules -> rules_context -> prepass -> tables was one, closed by a function-level
import). ``importlib.import_module`` of a package module by a constant or ``f"{__package__}.x"``
name counts too.

An import of ``a.b.c`` also runs ``a`` and ``a.b`` first, so it is an edge to each of those
packages as well, except the importer's own enclosing packages, which Python has already started
(a submodule importing a sibling does not run its package's ``__init__`` again).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_npucheck
from pytest_npucheck import facts_cache

PACKAGE = Path(pytest_npucheck.__file__).parent


def modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} of every module under ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


def _imported(tree: ast.AST, name: str, is_package: bool, known: dict[str, tuple[Path, bool]]
              ) -> list[tuple[str, int]]:
    """(module, line) of every import of a package module in ``tree``."""
    here = name.split(".") if is_package else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(here[:len(here) - node.level + 1] + ([node.module] if node.module else [])) \
                if node.level else (node.module or "")
            # `from a import b`: the submodule a.b when there is one, else a name of a
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module" \
                and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                targets = [arg.value]
            elif isinstance(arg, ast.JoinedStr) and len(arg.values) == 2 \
                    and isinstance(arg.values[0], ast.FormattedValue) \
                    and getattr(arg.values[0].value, "id", None) == "__package__" \
                    and isinstance(arg.values[1], ast.Constant):
                targets = [".".join(here) + str(arg.values[1].value)]
        out += [(t, node.lineno) for t in targets]
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, dict[str, int]]:
    """{module: {module it imports: line of the first such import}} over the package's modules."""
    known = modules(root)
    graph: dict[str, dict[str, int]] = {}
    for name, (path, is_package) in known.items():
        edges: dict[str, int] = {}
        enclosing = set()
        parts = name.split(".")
        for i in range(1, len(parts) + (0 if not is_package else 1)):
            enclosing.add(".".join(parts[:i]))
        for target, line in _imported(ast.parse(path.read_text(encoding="utf-8"), str(path)), name, is_package, known):
            steps = target.split(".")
            for i in range(1, len(steps) + 1):
                dep = ".".join(steps[:i])
                if dep in known and dep != name and (dep == target or dep not in enclosing):
                    edges.setdefault(dep, line)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One cycle (``a -> b -> ... -> a``) per strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's algorithm; the package is a few dozen modules deep at most
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_cycle_in(graph, set(component)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _cycle_in(graph: dict[str, dict[str, int]], component: set[str]) -> list[str]:
    """A closed path through the component, starting at its first module by name."""
    start = min(component)
    path, seen = [start], {start}
    while True:
        nxt = min(w for w in graph[path[-1]] if w in component)
        if nxt in seen:
            return path[path.index(nxt):] + [nxt]
        path.append(nxt)
        seen.add(nxt)


def _describe(graph: dict[str, dict[str, int]], cycle: list[str]) -> str:
    return " -> ".join(f"{a} (line {graph[a][b]})" for a, b in zip(cycle, cycle[1:])) + f" -> {cycle[-1]}"


def test_the_package_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 40 and "pytest_npucheck.rules.context" in graph
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(_describe(graph, c) for c in found)


def test_a_cycle_is_found_and_named(tmp_path):
    """The check itself: a cycle closed by a function-level import, one through a package's
    ``__init__``, and one through ``import_module`` are each reported with their modules."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "sub" / "__init__.py").write_text("from .inner import y\n")
    (pkg / "sub" / "inner.py").write_text("from ..c import z\n")
    (pkg / "c.py").write_text("def g():\n    from .sub.inner import y\n")
    (pkg / "d.py").write_text("import importlib\nimportlib.import_module(f'{__package__}.e')\n")
    (pkg / "e.py").write_text("from .d import w\n")
    (pkg / "ok.py").write_text("from .sub import inner\nfrom . import a\n")
    graph = import_graph(pkg)
    found = sorted(sorted(set(c)) for c in cycles(graph))
    assert found == [["toy.a", "toy.b"], ["toy.c", "toy.sub", "toy.sub.inner"], ["toy.d", "toy.e"]]
    text = _describe(graph, cycles(graph)[0])
    assert text.startswith("toy.a (line 1) -> toy.b (line 2) -> toy.a"), text


def test_the_facts_cache_key_covers_every_module_the_graph_package_imports():
    """facts_cache.FACTS_SOURCES lists the graph package and what it imports from the rest of the
    package (all the way down): a module added to that closure without being hashed would let cached
    facts outlive the code that computed them."""
    graph = import_graph()
    todo = [m for m in graph if m == "pytest_npucheck.graph" or m.startswith("pytest_npucheck.graph.")]
    closure = set(todo)
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in closure and dep != "pytest_npucheck":
                closure.add(dep)
                todo.append(dep)
    hashed = {f.resolve() for f in facts_cache.source_files()}
    known = modules()
    missing = sorted(m for m in closure if known[m][0].resolve() not in hashed)
    assert not missing, f"facts_cache.FACTS_SOURCES leaves out {missing}"
