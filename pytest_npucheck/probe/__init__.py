"""Probe models for deriving operator-support tables from real NPU toolchains.

* :mod:`pytest_npucheck.probe.models` builds small single-op and small-pattern ONNX models.
* :mod:`pytest_npucheck.toolchains.rknn.probe` compiles them with rknn-toolkit2 and records placement.
* :mod:`pytest_npucheck.toolchains.rknn.table` turns the recorded results into a support table.

These modules need ``onnx`` and ``numpy`` (the probe generator), not the vendor toolchain itself:
the toolchain runs in its own environment through :mod:`pytest_npucheck.toolchains.rknn.adapter`.
"""
