"""docs/ci.md's sharded recipes: the GitHub Actions and GitLab CI files are well-formed YAML with the
jobs they promise, and the commands their jobs call, run here as the jobs run them (four shards,
then the merge), give the merged verdict and reports."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TOY_TABLES

from acceptance.conftest import CHILD_PLUGINS, ENV_WARM
from acceptance.test_merge_shards import NETS, TESTS, baseline_entries

SECTION = (REPO / "docs" / "ci.md").read_text().split("## Sharded CI")[1].split("\n## ")[0]
BLOCKS = re.findall(r"```yaml\n(.*?)```", SECTION, flags=re.S)


def _key_paths(text: str) -> set[str]:
    """The mapping keys of a YAML block as dotted paths (a minimal structural reader: PyYAML is not
    a test dependency). Checks what a YAML parser would reject in these files: tabs, indentation
    that is not a multiple of two, a key more indented than its parent allows."""
    paths: set[str] = set()
    stack: list[tuple[int, str]] = []
    block_indent = None  # inside a `|` or `>` scalar: lines more indented than its key
    for n, raw in enumerate(text.splitlines(), 1):
        assert "\t" not in raw, f"line {n}: a tab"
        line = raw.split(" #")[0].rstrip() if not raw.lstrip().startswith("#") else ""
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip())
        if block_indent is not None and indent > block_indent:
            continue
        block_indent = None
        assert indent % 2 == 0, f"line {n}: indentation {indent}: {raw!r}"
        body = line.strip()
        if body.startswith("- "):
            body, indent = body[2:], indent + 2
        m = re.match(r"([A-Za-z0-9_.-]+|\"[^\"]+\"):(\s|$)", body)
        if not m:
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, m.group(1)))
        paths.add(".".join(k for _, k in stack))
        if body.rstrip().endswith(("|", ">")):
            block_indent = indent
    return paths


def _run_block(text: str, step: str) -> list[str]:
    """The commands of a GitHub step's ``run: |`` block."""
    part = text.split(f"- name: {step}\n")[1]
    lines = part.split("run: |\n")[1].splitlines()
    indent = len(lines[0]) - len(lines[0].lstrip())
    out = []
    for ln in lines:
        if ln.strip() and len(ln) - len(ln.lstrip()) < indent:
            break
        out.append(ln.strip())
    return [c for c in out if c]


def _gitlab_script(text: str, job: str) -> list[str]:
    part = text.split(f"\n{job}:\n")[1].split("  script:\n")[1]
    return [ln.strip()[2:] for ln in part.splitlines() if ln.startswith("    - ")
            and not ln.strip()[2:].startswith(">")][:6]


def test_the_recipes_are_yaml_with_the_jobs_they_promise():
    github, gitlab = BLOCKS
    gh = _key_paths(github)
    assert {"jobs.shard.strategy.matrix.shard", "jobs.shard.env.NPU_SHARD", "jobs.merge.needs",
            "jobs.merge.if", "jobs.shard.steps.uses", "jobs.merge.steps.run"} <= gh
    assert "actions/cache/restore@v4" in github and "actions/cache/save@v4" in github
    assert "$GITHUB_STEP_SUMMARY" in github and "gh pr comment" in github
    gl = _key_paths(gitlab)
    assert {"npucheck-shard.parallel", "npucheck-shard.cache.paths", "npucheck-merge.needs.job",
            "npucheck-merge.artifacts.reports.junit", "npucheck-merge.after_script"} <= gl
    # both run the same shard and merge commands
    shard = _run_block(github, "NPU deployability (one shard)")
    merge = _run_block(github, "Merge the shards")
    assert _gitlab_script(gitlab, "npucheck-shard")[3:] == shard
    assert merge[0] in gitlab
    # both prune the export cache with the same command before saving it, also after red tests
    [prune] = _run_block(github, "Prune the export cache")
    assert prune.startswith("npucheck cache ") and f"after_script:   # runs when the tests fail too, before the cache " \
        f"is saved\n    - {prune}\n" in gitlab
    assert "npucheck-shard.cache.when" in gl
    with pytest.raises(AssertionError, match="indentation 3"):
        _key_paths("a:\n   b: 1\n")


@pytest.mark.slow  # four pytest processes with xdist workers, exporting the suite's models
def test_the_recipe_commands_run_end_to_end(tmp_path, warm_workers):
    pytest.importorskip("xdist")
    github = BLOCKS[0]
    shard = "\n".join(_run_block(github, "NPU deployability (one shard)"))
    merge = "\n".join(_run_block(github, "Merge the shards"))
    (tmp_path / "nets.py").write_text(NETS.lstrip("\n"))
    (tmp_path / "test_suite.py").write_text(TESTS.lstrip("\n"))
    (tmp_path / "pytest.ini").write_text(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} --npu-no-numerics\n")
    (tmp_path / "npucheck-baseline.json").write_text(json.dumps({"format": 1, "entries": baseline_entries()}))
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "NPU_SHARDS": "4", "PYTEST_ADDOPTS": ""}
    env.pop("PYTEST_XDIST_WORKER", None)
    # the shards' `pytest -n auto` fork their workers warm, as the [n2] pytester runs do (conftest.py):
    # the same pytest, xdist and plugin code in each worker, without a fresh interpreter importing torch
    env.update({"PYTHONPATH": os.pathsep.join(filter(None, [str(CHILD_PLUGINS), env.get("PYTHONPATH")])),
                "PYTEST_PLUGINS": "xdist_warm_workers", ENV_WARM: warm_workers})
    for k in range(1, 5):
        proc = subprocess.run(["bash", "-ec", shard], cwd=tmp_path, env={**env, "NPU_SHARD": str(k)},
                              capture_output=True, text=True, timeout=900)
        assert proc.returncode in (0, 1), proc.stdout[-3000:] + proc.stderr[-3000:]
        assert (tmp_path / f"npucheck-shard-{k}.json").exists()
    prune = "\n".join(_run_block(github, "Prune the export cache"))
    proc = subprocess.run(["bash", "-ec", prune], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.match(r"npucheck cache \.pytest_cache/d/npucheck-exports: \d+ entries", proc.stdout), proc.stdout
    assert "removed" not in proc.stdout  # every entry was used by this run, and they fit in 2G
    proc = subprocess.run(["bash", "-c", merge], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # a new fallback and a stale entry (strict)
    assert "FAILED npucheck-baseline.json::stale" in proc.stdout
    doc = json.loads((tmp_path / "npucheck.json").read_text())
    assert doc["shard"]["merged_from"] == 4 and doc["totals"]["tests"] == 14
    assert doc["shard"]["selection"]["marked_deselected"] == []
    assert (tmp_path / "npucheck.md").read_text().startswith("## NPU check: failed")
    assert (tmp_path / "junit.xml").exists() and (tmp_path / "npucheck.html").exists()
