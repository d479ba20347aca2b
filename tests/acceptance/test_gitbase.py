"""The budgets ratchet in a real git repository: a loosening committed on a branch fails against the
merge base of the pull request (``--npu-budget-base``, GitHub's and GitLab's variables), HEAD with a note
otherwise (pytester runs)."""

from __future__ import annotations

import json
import subprocess

import pytest


# -- the ratchet compares with the pull request's base (issue 25, item 2) ---------------------------

_CI_VARS = ("GITHUB_EVENT_NAME", "GITHUB_BASE_REF", "CI_MERGE_REQUEST_DIFF_BASE_SHA",
            "CI_MERGE_REQUEST_TARGET_BRANCH_NAME")


@pytest.mark.usefixtures("heavy_modules_loaded")
def test_a_loosening_committed_on_a_branch_fails_against_the_merge_base(pytester, monkeypatch):
    """In a PR's checkout the loosening is committed: HEAD shows it, the merge base with the target does not."""
    from conftest import TOY_TABLES

    for var in _CI_VARS:
        monkeypatch.delenv(var, raising=False)

    def git(*args):
        return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=pytester.path,
                              check=True, capture_output=True, text=True).stdout.strip()

    def budgets(limit):
        (pytester.path / "npu-budgets.json").write_text(json.dumps({"format": 1, "releases": {"1.0.0": {
            "targets": {"toy@*": {"max_cpu_fallback_nodes": limit}}}}}))

    pytester.makeini(f"[pytest]\naddopts = --npu-tables={TOY_TABLES} -p no:cacheprovider --npu-release=1.0.0 "
                     "--npu-no-numerics\n")
    pytester.makepyfile(test_net="""
        import pytest, torch

        @pytest.mark.npu_deployable(targets=["toy@1.0/soc-a"])
        def test_net(npu_check):
            npu_check(torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU()).eval(), torch.randn(1, 3, 8, 8))
    """)
    budgets(0)
    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-qm", "budgets")
    main_sha = git("rev-parse", "HEAD")
    git("checkout", "-q", "-b", "feature")
    budgets(50)
    git("commit", "-qam", "loosen the budget")  # committed, as in every PR checkout

    r = pytester.runpytest()
    r.assert_outcomes(passed=1)  # HEAD shows the loosened file: nothing to compare, and the run says so
    assert "compared with HEAD (no --npu-budget-base, no pull-request variables" in r.stdout.str()

    def fails(*args):
        r = pytester.runpytest(*args)
        r.assert_outcomes(passed=1, failed=1)  # the loosening is a failure pytest counts
        out = r.stdout.str()
        assert "releases/1.0.0/targets/toy@*: max_cpu_fallback_nodes loosened 0 -> 50" in out
        assert "FAILED npu-budgets.json::loosened" in out
        return out

    assert "against the merge base of HEAD and main (--npu-budget-base)" in fails("--npu-budget-base", "main")
    monkeypatch.setenv("GITHUB_EVENT_NAME", "pull_request")
    monkeypatch.setenv("GITHUB_BASE_REF", "main")
    assert "(GITHUB_BASE_REF)" in fails()
    monkeypatch.setenv("GITHUB_BASE_REF", "release-9")  # a shallow checkout without the base: HEAD, with a note
    r = pytester.runpytest()
    r.assert_outcomes(passed=1)
    assert "the pull request's base 'release-9' is not in this clone" in r.stdout.str()
    for var in _CI_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("CI_MERGE_REQUEST_TARGET_BRANCH_NAME", "main")
    assert "(CI_MERGE_REQUEST_TARGET_BRANCH_NAME)" in fails()
    monkeypatch.setenv("CI_MERGE_REQUEST_DIFF_BASE_SHA", main_sha)
    assert f"the merge request's diff base {main_sha[:12]}" in fails()
    # an approved loosening passes against the same base
    doc = json.loads((pytester.path / "npu-budgets.json").read_text())
    doc["releases"]["1.0.0"]["targets"]["toy@*"]["loosened"] = {"reason": "a new op on the CPU, accepted for release 1.0", "approved_by": "lead@example.com"}
    (pytester.path / "npu-budgets.json").write_text(json.dumps(doc))
    pytester.runpytest().assert_outcomes(passed=1)
    r = pytester.runpytest("--npu-budget-base", "no-such-branch")
    assert r.ret == pytest.ExitCode.USAGE_ERROR and "--npu-budget-base no-such-branch" in r.stderr.str()
