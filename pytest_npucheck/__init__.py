"""pytest-npucheck: make "this PyTorch model deploys on our NPU" a unit test."""

__version__ = "0.1.0"
