"""The facts cache key (``facts_cache.code_hash``) changes with any module the facts depend on."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest_npucheck
from pytest_npucheck import facts_cache

PACKAGE = Path(pytest_npucheck.__file__).parent


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "pytest_npucheck"
    for name in facts_cache.FACTS_SOURCES:
        src = PACKAGE / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            root.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, root / name)
    return root


def test_editing_any_graph_or_rules_module_changes_the_key(tmp_path):
    root = _copy(tmp_path)
    base = facts_cache.code_hash(root)
    assert base == facts_cache.code_hash(PACKAGE)  # the same sources, wherever they are
    edited = sorted((root / "graph").rglob("*.py")) + sorted((root / "rules").rglob("*.py"))
    assert {p.name for p in (root / "graph").glob("*.py")} >= {"__init__.py", "build.py", "propagate.py",
                                                               "location.py", "protobuf.py", "fold.py"}
    assert {p.name for p in (root / "rules").glob("*.py")} >= {"__init__.py", "registry.py", "node.py", "context.py"}
    for path in edited:
        text = path.read_bytes()
        path.write_bytes(text + b"\n# edited\n")
        try:
            assert facts_cache.code_hash(root) != base, f"editing {path.relative_to(root)} left the key unchanged"
        finally:
            path.write_bytes(text)
        assert facts_cache.code_hash(root) == base


def test_a_module_added_moved_or_removed_changes_the_key(tmp_path):
    root = _copy(tmp_path)
    base = facts_cache.code_hash(root)
    (root / "graph" / "extra.py").write_text("")
    assert facts_cache.code_hash(root) != base
    (root / "graph" / "extra.py").unlink()
    assert facts_cache.code_hash(root) == base
    # the same bytes under another name are other code
    (root / "graph" / "ops.py").rename(root / "graph" / "op_sets.py")
    assert facts_cache.code_hash(root) != base


def test_the_key_of_a_cached_document_names_the_code_hash(tmp_path):
    model = tmp_path / "m.onnx"
    model.write_bytes(b"x")
    key = facts_cache.file_key(model)
    assert key is not None and key["code"].endswith(f"/graph-{facts_cache.code_hash()}")
