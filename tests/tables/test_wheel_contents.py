"""The sdist and the wheel carry every file of the package tree: the modules and every data file the
code opens (tables, schemas, recipes, the probe's doc facts). The expected list is read from the
tree itself (git's list of tracked files when this is a checkout), never written by hand, so a data
file added later without a packaging rule fails here."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# source directory -> where its files land in the wheel (pyproject.toml's package-dir mapping)
TREES = {"pytest_npucheck": "pytest_npucheck", "op_support_tables": "pytest_npucheck/op_support_tables"}


def _tree_files() -> list[str]:
    """Every file under the package trees, as repository-relative POSIX paths."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *TREES], cwd=REPO, check=True,
                             capture_output=True).stdout.decode()
        files = [f for f in out.split("\0") if f]
    except (OSError, subprocess.CalledProcessError):  # not a git checkout (an unpacked sdist)
        files = [p.relative_to(REPO).as_posix() for t in TREES for p in (REPO / t).rglob("*") if p.is_file()]
    files = [f for f in files if "__pycache__" not in f and not f.endswith((".pyc", ".pyo"))]
    assert files, f"no files found under {list(TREES)} in {REPO}"
    return sorted(files)


def _in_wheel(path: str) -> str:
    top, _, rest = path.partition("/")
    return f"{TREES[top]}/{rest}"


def _backend_installed() -> bool:
    """The build backend pyproject.toml names (setuptools >= 68; its own bdist_wheel since 70.1) is
    installed here: build with it rather than in a fresh isolated environment, which installs
    setuptools first and costs four times the CPU (2.0 vs 8.1 CPU-s, side by side). Both give the
    same file lists (compared when this was written); the isolated build, as a user's `pip install`
    makes it, is CI's installed lane (.ci/installed-lane.sh)."""
    try:
        from importlib.metadata import version

        major, minor = (int(x) for x in version("setuptools").split(".")[:2])
        import setuptools.command.bdist_wheel  # noqa: F401
    except (ImportError, ValueError):
        return False
    return (major, minor) >= (70, 1)


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    pytest.importorskip("build", reason="the test extra installs `build`")
    out = tmp_path_factory.mktemp("dist")
    local = ["--no-isolation", "--skip-dependency-check"] if _backend_installed() else []
    proc = subprocess.run([sys.executable, "-m", "build", *local, "--sdist", "--wheel", "--outdir", str(out), str(REPO)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sdist,), (wheel,) = sorted(out.glob("*.tar.gz")), sorted(out.glob("*.whl"))
    return sdist, wheel


@pytest.mark.slow
def test_wheel_holds_every_file_of_the_package_tree(dists):
    _, wheel = dists
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    expected = {_in_wheel(f) for f in _tree_files()}
    missing = sorted(expected - names)
    assert not missing, f"{wheel.name} lacks {len(missing)} file(s) of the package tree: {missing}"
    data = sorted(n for n in expected if not n.endswith(".py"))
    # the files the code opens by path: tables, the schemas, the recipes, the probe's doc facts
    for needed in ("pytest_npucheck/recipes.json", "pytest_npucheck/op_support_tables/schema.json",
                   "pytest_npucheck/op_support_tables/catalog.json", "pytest_npucheck/schemas/report.schema.json"):
        assert needed in data
    assert any(n.startswith("pytest_npucheck/tabletools/doc_facts/") for n in data)
    # nothing outside the package (tests, examples, probes results) and no byte code
    stray = sorted(n for n in names if not n.startswith(("pytest_npucheck/", "pytest_npucheck-"))
                   or n.endswith((".pyc", ".pyo")))
    assert not stray, f"{wheel.name} holds files outside the package: {stray}"


@pytest.mark.slow
def test_sdist_holds_every_file_of_the_package_tree(dists):
    sdist, _ = dists
    with tarfile.open(sdist) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    expected = set(_tree_files()) | {"pyproject.toml", "README.md", "MANIFEST.in", "constraints.txt", "CHANGELOG.md"}
    missing = sorted(expected - names)
    assert not missing, f"{sdist.name} lacks {len(missing)} file(s): {missing}"
