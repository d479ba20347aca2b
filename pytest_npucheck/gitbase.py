"""Which commit a budgets file is compared with: the pull request's base, not only HEAD.

In a pull request's CI checkout every change is committed, so ``git show HEAD:path`` shows the
changed file itself and a loosening never fires. The file is compared instead with its version at
the merge base of HEAD and the branch the change goes into, found from (first match wins):

1. ``--npu-budget-base REF`` (any ref or commit: ``origin/main``, a tag, a SHA);
2. GitLab merge request pipelines: ``CI_MERGE_REQUEST_DIFF_BASE_SHA`` (GitLab's own merge base),
   else ``CI_MERGE_REQUEST_TARGET_BRANCH_NAME``;
3. GitHub Actions pull requests (``GITHUB_EVENT_NAME`` ``pull_request`` or
   ``pull_request_target``): ``GITHUB_BASE_REF``;
4. otherwise HEAD, with a note: a loosening committed on the branch is not seen there.

A branch name is looked up as ``origin/NAME``, then ``NAME``. A base the variables name but the
clone lacks (a shallow checkout) falls back to HEAD with a note saying how to fetch it; a base given
with ``--npu-budget-base`` that does not resolve is an error.

Plain module: runs ``git``; no pytest, no torch.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Optional

from .errors import NpuCheckError

__all__ = ["Base", "BaseError", "committed_text", "find_base"]

_TIMEOUT = 30


class BaseError(NpuCheckError):
    """--npu-budget-base names a ref git cannot resolve, or git cannot find a merge base with it."""


@dataclass(frozen=True)
class Base:
    """The commit the budgets file is compared with.

    ``commit`` is None outside a git work tree (only the rules within the file are checked);
    ``label`` says in words what it is; ``note`` is set when the comparison fell back to HEAD."""

    commit: Optional[str]
    label: str
    source: str  # option, gitlab, github, head, none
    note: Optional[str] = None

    def to_json(self) -> dict[str, Optional[str]]:
        return {"commit": self.commit, "label": self.label, "source": self.source, "note": self.note}


def _git(cwd: Path, *args: str) -> Optional[str]:
    try:
        done = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=_TIMEOUT)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _commit(cwd: Path, ref: str) -> Optional[str]:
    return _git(cwd, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")


def _merge_base(cwd: Path, ref: str) -> Optional[tuple[str, str]]:
    """(merge-base commit, the ref that resolved) of HEAD and ``ref`` (tried as origin/REF, then REF)."""
    for candidate in ([ref] if ref.startswith(("origin/", "refs/")) else [f"origin/{ref}", ref]):
        if _commit(cwd, candidate) is None:
            continue
        mb = _git(cwd, "merge-base", "HEAD", candidate)
        if mb:
            return mb, candidate
    return None


def find_base(cwd: Path | str, option: Optional[str] = None, env: Optional[Mapping[str, str]] = None) -> Base:
    """The commit to compare a budgets file in ``cwd`` with (see the module docstring)."""
    cwd = Path(cwd)
    env = os.environ if env is None else env
    if _git(cwd, "rev-parse", "--is-inside-work-tree") != "true":
        return Base(None, "no git work tree", "none", "not in a git work tree: only the rules within the file "
                                                       "are checked")
    if option:
        found = _merge_base(cwd, option)
        if found is None:
            raise BaseError(f"--npu-budget-base {option}: git finds no commit {option!r} (nor origin/{option}) with a "
                            "merge base with HEAD; fetch it first (git fetch origin " + option + ")")
        return Base(found[0], f"the merge base of HEAD and {found[1]} (--npu-budget-base)", "option")
    head = _commit(cwd, "HEAD")
    gitlab_sha = env.get("CI_MERGE_REQUEST_DIFF_BASE_SHA", "").strip()
    gitlab_branch = env.get("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "").strip()
    if gitlab_sha or gitlab_branch:
        if gitlab_sha and _commit(cwd, gitlab_sha):
            return Base(_commit(cwd, gitlab_sha), f"the merge request's diff base {gitlab_sha[:12]} "
                                                  "(CI_MERGE_REQUEST_DIFF_BASE_SHA)", "gitlab")
        if gitlab_branch and (found := _merge_base(cwd, gitlab_branch)):
            return Base(found[0], f"the merge base of HEAD and {found[1]} (CI_MERGE_REQUEST_TARGET_BRANCH_NAME)",
                        "gitlab")
        return Base(head, "HEAD", "head", "the merge request's base is not in this clone (a shallow fetch): "
                                          "compared with HEAD, so a loosening committed on the branch is not seen; "
                                          "set GIT_DEPTH: 0 or fetch the target branch")
    if env.get("GITHUB_EVENT_NAME", "") in ("pull_request", "pull_request_target") and env.get("GITHUB_BASE_REF"):
        base_ref = env["GITHUB_BASE_REF"].strip()
        found = _merge_base(cwd, base_ref)
        if found:
            return Base(found[0], f"the merge base of HEAD and {found[1]} (GITHUB_BASE_REF)", "github")
        return Base(head, "HEAD", "head", f"the pull request's base {base_ref!r} is not in this clone (a shallow "
                                          "checkout): compared with HEAD, so a loosening committed on the branch "
                                          "is not seen; use actions/checkout with fetch-depth: 0")
    return Base(head, "HEAD", "head", "compared with HEAD (no --npu-budget-base, no pull-request variables of "
                                      "GitHub or GitLab): a loosening already committed is not seen")


def committed_text(path: Path | str, base: Base) -> Optional[str]:
    """The file's text at ``base`` (None when it did not exist there or there is no base)."""
    if base.commit is None:
        return None
    path = Path(path)
    return _git(path.parent, "show", f"{base.commit}:./{path.name}")
