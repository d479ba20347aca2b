#!/usr/bin/env bash
# The installed-package lane: what a user gets from the wheel, outside this checkout.
#
# Builds the sdist and the wheel, checks them with `twine check`, installs the wheel (not editable)
# with only its documented extra into a fresh venv, and from a directory outside the checkout runs
# the demo suite, `npucheck targets`, `npucheck check` on a model with a fallback, pytest's
# --fixtures/--markers and the pre-commit hook's command. Fails on the first step that does not do
# what it should. Called by .ci/run; run it by hand the same way: .ci/installed-lane.sh
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/npucheck-installed.XXXXXX")
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
step() { printf '\n== installed lane: %s\n' "$*"; }
fail() { echo "installed lane FAILED: $*" >&2; exit 1; }

step "build sdist and wheel, twine check"
python3 -m venv "$work/tools"
"$work/tools/bin/pip" install -q build twine 2>&1 | grep -v "^WARNING: Location" || true
"$work/tools/bin/python" -m build --sdist --wheel --outdir "$work/dist" "$repo" >"$work/build.log" 2>&1 \
  || { tail -n 40 "$work/build.log"; fail "python -m build"; }
"$work/tools/bin/twine" check --strict "$work"/dist/*
wheel=$(ls "$work"/dist/*.whl)

step "fresh venv with only the wheel and its torch extra (constraints.txt keeps torch at the CPU build)"
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q -c "$repo/constraints.txt" "${wheel}[torch]" 2>&1 | grep -v "^WARNING: Location" || true
py="$work/venv/bin/python"
mkdir "$work/run" && cd "$work/run"
export PATH="$work/venv/bin:$PATH"
where=$("$py" -c 'import pytest_npucheck, os; print(os.path.dirname(pytest_npucheck.__file__))')
case "$where" in "$work/venv/"*) ;; *) fail "pytest_npucheck imported from $where, not from the installed wheel";; esac
echo "installed at $where"

step "the demo suite (ends red on purpose: 1 passed, 4 failed, with the fallback report)"
cp -r "$repo/examples" "$work/run/examples"
set +e
pytest examples -p no:cacheprovider -p no:randomly >"$work/demo.log" 2>&1
code=$?
set -e
tail -n 3 "$work/demo.log"
[ "$code" -eq 1 ] || { tail -n 60 "$work/demo.log"; fail "demo exited $code, expected 1 (tests failed)"; }
grep -Eq "^=+ 4 failed, 1 passed" "$work/demo.log" || fail "demo outcome is not '4 failed, 1 passed'"
grep -Eq "rknn@2.5.0/rk3588 \[table revision [0-9]+, sha256 [0-9a-f]+\]: FAIL" "$work/demo.log" || fail "no report header"
grep -q "Resize   node_upsample_bicubic2d  unsupported" "$work/demo.log" || fail "no per-operator fallback report"
grep -q "fixes (each checked by re-running the verdict" "$work/demo.log" || fail "no checked fixes in the report"
! grep -Eq "JsonFileError|ModuleNotFoundError|cannot read" "$work/demo.log" || fail "the demo hit a missing file or package"

step "npucheck targets"
npucheck targets >"$work/targets.txt"
grep -q "^rknn@2.5.0/rk3588" "$work/targets.txt" || fail "npucheck targets does not list rknn@2.5.0/rk3588"
wc -l <"$work/targets.txt"

step "npucheck check on ONNX models (one with a fallback, one clean)"
"$py" - <<'EOF'
from onnx import TensorProto, helper, save

def model(path, nodes, inits=()):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=list(inits))
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)

scales = helper.make_tensor("scales", TensorProto.FLOAT, [4], [1, 1, 2, 2])
model("fallback.onnx", [helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")], [scales])
model("clean.onnx", [helper.make_node("Relu", ["x"], ["y"])])
EOF
set +e
npucheck check fallback.onnx --target rknn@2.5.0/rk3588 >"$work/check.txt" 2>&1
code=$?
set -e
cat "$work/check.txt"
[ "$code" -eq 1 ] || fail "npucheck check on a fallback exited $code, expected 1"
grep -q "mode='cubic' not in" "$work/check.txt" || fail "no reason in the report"
grep -q "Use an interpolation mode the NPU supports" "$work/check.txt" || fail "no fix in the report (recipes.json)"
npucheck check clean.onnx --target rknn@2.5.0/rk3588 --format json >"$work/clean.json" || fail "clean model did not exit 0"

step "pytest --fixtures / --markers"
# (into files first: `pytest | grep -q` would end pytest with SIGPIPE, which pipefail counts as a failure)
pytest --fixtures -p no:cacheprovider >"$work/fixtures.txt" 2>&1 || fail "pytest --fixtures exited $?"
grep -q "^npu_check -- .*site-packages/pytest_npucheck/plugin.py" "$work/fixtures.txt" \
  || fail "npu_check (from the installed package) is not in pytest --fixtures"
pytest --markers -p no:cacheprovider >"$work/markers.txt" 2>&1 || fail "pytest --markers exited $?"
grep -q "^@pytest.mark.npu_deployable" "$work/markers.txt" || fail "npu_deployable is not in pytest --markers"

step "the pre-commit hook's command (.pre-commit-hooks.yaml entry, run as pre-commit runs it)"
hook() {
  "$py" - "$repo/.pre-commit-hooks.yaml" "$@" <<'EOF'
import re, shlex, subprocess, sys
text = open(sys.argv[1], encoding="utf-8").read()
entry = re.search(r"^  entry: (.*)$", text, re.M).group(1)
sys.exit(subprocess.run([*shlex.split(entry), *sys.argv[2:]]).returncode)
EOF
}
set +e
hook --target rknn@2.5.0/rk3588 clean.onnx fallback.onnx >"$work/hook.txt" 2>&1
code=$?
set -e
[ "$code" -eq 1 ] || { cat "$work/hook.txt"; fail "hook on a fallback model exited $code, expected 1"; }
grep -q "mode='cubic'" "$work/hook.txt" || fail "hook output lacks the report"
hook --target rknn@2.5.0/rk3588 clean.onnx >/dev/null || fail "hook on a clean model did not exit 0"

step "README's \"Add it to your project\": pyproject ini keys, a first marked test, the first baseline"
mkdir -p "$work/proj/tests" && cd "$work/proj"
cat >pyproject.toml <<'EOF'
[tool.pytest.ini_options]
npu_targets = ["rknn@2.5.0/rk3588"]
npu_baseline = "npucheck-baseline.json"
npu_baseline_strict = "true"
EOF
cat >tests/test_npu.py <<'EOF'
import pytest, torch

class MyNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x):
        return torch.topk(self.conv(x).flatten(1), 5).values  # TopK: a CPU fallback on RKNN

@pytest.mark.npu_deployable
def test_mynet_deploys(npu_check):
    torch.manual_seed(0)
    npu_check(MyNet().eval(), torch.randn(1, 3, 16, 16))
EOF
set +e
pytest tests/test_npu.py -p no:randomly >"$work/proj1.log" 2>&1
code=$?
set -e
[ "$code" -eq 1 ] && grep -Eq "NEW +TopK +node_topk" "$work/proj1.log" \
  || { tail -n 40 "$work/proj1.log"; fail "first run of the project's marked test: exit $code, expected 1 with the report"; }
pytest tests/test_npu.py -p no:randomly --npu-update-baseline >"$work/proj2.log" 2>&1 \
  || { tail -n 40 "$work/proj2.log"; fail "--npu-update-baseline was not green"; }
grep -q '"op_type": "TopK"' npucheck-baseline.json || fail "the baseline does not record the TopK fallback"
pytest tests/test_npu.py -p no:randomly >"$work/proj3.log" 2>&1 \
  || { tail -n 40 "$work/proj3.log"; fail "with the baseline committed the project's test is not green"; }

step "passed"
