"""A toolchain plug-in as another package would write one (tests/unit/test_toolchains_registry.py).

The "ACME NPU" runs a model on ONNX Runtime's CPU provider in this process and says it puts every
Pad on its CPU and everything else on its NPU. It registers through the entry point in
``acme_npu-1.0.dist-info/entry_points.txt`` (group ``pytest_npucheck.toolchains``) and ships its
support table under ``tables/``; nothing in pytest_npucheck names it.
"""

from __future__ import annotations

from pathlib import Path

from pytest_npucheck.toolchains.registry import Toolchain

TOOLCHAIN = Toolchain(
    name="acme",
    title="ACME NPU",
    default_precision="int8",  # its table names a precision: the registry's default is for tables that do not
    package="acme-npu-sdk",
    env_var="ACME_NPU_PYTHON",
    setup_hint="pip install acme-npu-sdk",
    engine="ACME emulator",
    oracle="acme_npu.oracle",
    tables=Path(__file__).with_name("tables"),
)
