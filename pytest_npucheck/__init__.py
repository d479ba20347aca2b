"""pytest-npucheck: make "this PyTorch model deploys on our NPU" a unit test."""

__version__ = "0.1.0"

# the committed baseline's file name, beside the rootdir by default (here, not in baseline.py: the
# plugin needs it at session start of every pytest run, without importing the baseline module)
BASELINE_NAME = "npucheck-baseline.json"
