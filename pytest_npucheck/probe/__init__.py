"""Probe models for deriving operator-support tables from real NPU toolchains.

* :mod:`.builder`: what every family shares (GraphBuilder, Probe, Collector, probe ids, the random
  constants, graph parts several families use).
* :mod:`.models`: the main probes, small single-op and small-pattern ONNX models.
* :mod:`.extra_families`: the extra probes (``x.*``) of the topic modules ``models_*.py``, in build order.
* :mod:`.refresh`: ``npucheck probe``, driving a toolchain's probe runner.

The toolchains run the probes and build the tables (``toolchains/rknn/probe.py`` and
``table.py``, the same for QNN). These modules need ``onnx`` and ``numpy``, not the vendor
toolchain itself: the toolchain runs in its own environment.
"""
