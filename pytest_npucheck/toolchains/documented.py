"""The toolchains whose tables come from vendor documentation only: SNPE and CANN.

Their tables are built by :mod:`pytest_npucheck.tabletools.from_docs`; they have no oracle, no
probe runner and no zoo scoring, so ``--npu-oracle`` reports them as having no oracle and
``npucheck probe`` refuses them.
"""

from __future__ import annotations

from .registry import Toolchain

SNPE = Toolchain(name="snpe", title="Qualcomm SNPE (DSP/HTP runtime)")
CANN = Toolchain(name="cann", title="Huawei Ascend CANN (ATC ONNX parser)")
