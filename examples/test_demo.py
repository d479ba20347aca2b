"""The bundled demo: a model suite whose run shows the per-operator fallback report.

Run it with `pytest examples`. Expected on an RK3588 with rknn-toolkit2 2.5.0 (each verdict was
confirmed with the real compiler, see probes/rknn/README.md):

- the ResNet passes: every node runs on the NPU;
- the UNet fails: bicubic Resize (mode='cubic') is rejected by the compiler;
- the detection head fails: ReduceMax, TopK, Expand and GatherElements run on the CPU; its
  numerics fail too, because two near-equal scores swap places under fp16, so TopK gathers the
  boxes in another order (a real difference on the device, worth knowing for ranking heads);
- the ResNet exported with a dynamic batch fails: RKNN needs static input shapes;
- the transformer encoder (marker-only form) fails: the embedding lookup (Gather on run-time token
  ids) runs on the CPU.
"""

import pytest
import torch

from models import DetectionHead, SmallUNet, TinyResNet

RK3588 = "rknn@2.5.0/rk3588"


# explicit form: the test hands the model and its example inputs to npu_check
@pytest.mark.npu_deployable(targets=[RK3588])
def test_resnet_deploys(npu_check):
    npu_check(TinyResNet().eval(), torch.randn(1, 3, 64, 64))


@pytest.mark.npu_deployable(targets=[RK3588])
def test_unet_deploys(npu_check):
    npu_check(SmallUNet().eval(), torch.randn(1, 3, 64, 64))


@pytest.mark.npu_deployable(targets=[RK3588])
def test_detection_head_deploys(npu_check):
    npu_check(DetectionHead().eval(), torch.randn(1, 3, 64, 64))


@pytest.mark.npu_deployable(targets=[RK3588], dynamic_axes={"x": {0: "batch"}})
def test_resnet_with_dynamic_batch_deploys(npu_check):
    npu_check(TinyResNet().eval(), torch.randn(2, 3, 64, 64))


# marker-only form: an existing test of the model (fixtures `model` and `example_inputs` in
# conftest.py) gains the marker and nothing else; the plugin checks the model after the test passes
@pytest.mark.npu_deployable(targets=[RK3588])
def test_encoder_output_shape(model, example_inputs):
    assert model(example_inputs).shape == (1, 2)
