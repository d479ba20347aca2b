"""The vision family of the agreement zoo (``scripts/zoo_agreement.py --zoo vision``): the model
definitions of torchvision and timm, built from code with random non-degenerate weights.

Neither library is a dependency of the package, nor installed in its venv: the wheel of
torchvision that matches the CPU ``torch==2.13.0`` (0.28.0) is built against the CUDA torch, so
its C++ extension (``torchvision/_C.so``: nms, roi_align, deform_conv2d ...) does not load here,
and ``import torchvision`` then fails in ``torchvision/_meta_registrations.py`` on
``torch.library.register_fake("torchvision::nms")`` ("operator torchvision::nms does not exist").
Every model definition except those ops is plain Python. So the harness installs torchvision
0.28.0, pillow and timm with ``--no-deps`` into a folder of its own (``--target``, never the
project venv; :data:`LIBS_ENV` names it)::

    .venv/bin/pip install --no-deps --target /work/agree/visionlibs torchvision==0.28.0 pillow timm

and :func:`import_vision` imports them with that folder appended to ``sys.path`` and
``torch.library.register_fake`` made a no-op for the duration of the import: the fake (meta)
kernels of the missing C++ ops are simply not registered. The models that call those ops
(detection heads: nms, roi_align; deformable convolution) are left out of the zoo; everything
else runs in eager mode and exports as usual.

Architectures: about 30 torchvision classification, segmentation, video and optical-flow models
and one variant (the smallest, or one with a distinct block) of each timm family, at the input
size they are deployed at (their default configuration, mostly 224x224), ``pretrained=False``.
Transformers deeper than the compile budget of a loaded two-core machine allows are built with
fewer blocks (``depth``/``depths`` overrides, named in the list): the operators of one block are
the same in every block. Models over :data:`MAX_PARAMETERS` after that are skipped with the count.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable, Iterator

Builder = Callable[[], tuple[Any, tuple[Any, ...]]]

#: the folder torchvision, pillow and timm are installed into for the harness (``pip --target``)
LIBS_ENV = "NPUCHECK_ZOO_VISION_LIBS"
DEFAULT_LIBS = "/work/agree/visionlibs"
#: larger models are skipped: fp16 conversion and constant folding of the weights dominate the
#: compile time of both toolchains
MAX_PARAMETERS = 40_000_000


class NotImportable(RuntimeError):
    """torchvision or timm cannot be imported here (the harness's folder is missing)."""

    # scripts/zoo_agreement.py records an exception of this name as a skip with its reason


def libs_dir() -> str:
    return os.environ.get(LIBS_ENV, DEFAULT_LIBS)


def import_vision() -> tuple[Any, Any]:
    """``(torchvision, timm)`` from :func:`libs_dir`, torchvision's missing C++ ops stubbed.

    Raises :class:`NotImportable` naming the folder and the failing import."""
    import torch
    import torch.library

    where = libs_dir()
    if not os.path.isdir(os.path.join(where, "torchvision")) or not os.path.isdir(os.path.join(where, "timm")):
        raise NotImportable(f"torchvision and timm are not installed in {where} (set {LIBS_ENV}; "
                            f"pip install --no-deps --target {where} torchvision==0.28.0 pillow timm)")
    if "torchvision" in sys.modules and "timm" in sys.modules:
        return sys.modules["torchvision"], sys.modules["timm"]
    if where not in sys.path:
        sys.path.append(where)  # after the venv: never shadows one of its packages

    original = torch.library.register_fake

    def no_fake_kernel(*_: Any, **__: Any) -> Callable[[Any], Any]:
        return lambda fn: fn

    torch.library.register_fake = no_fake_kernel  # type: ignore[assignment]
    try:
        import torchvision
        import timm
    except Exception as exc:  # noqa: BLE001 - named in the skip
        raise NotImportable(f"torchvision/timm from {where} do not import: {type(exc).__name__}: {exc}") from exc
    finally:
        torch.library.register_fake = original  # type: ignore[assignment]
    return torchvision, timm


def _perturbed(model: Any) -> Any:
    import zoo_models

    model.eval()
    return zoo_models.perturb(model)


def _last_tensor_module(model: Any, call: Callable[..., Any] | None = None) -> Any:
    """``model`` whose forward returns one tensor: a segmentation dict's ``out``, a flow list's
    last entry, a tuple's first tensor."""
    import torch

    import zoo_models

    class Single(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model

        def forward(self, *args: Any) -> Any:
            out = call(self.inner, *args) if call is not None else self.inner(*args)
            if isinstance(out, dict) and "out" in out:
                return out["out"]
            if isinstance(out, list):
                return out[-1]
            return zoo_models._first_tensor(out)

    return Single()


def _check_size(name: str, model: Any) -> None:
    n = sum(p.numel() for p in model.parameters())
    if n > MAX_PARAMETERS:
        raise NotImportable(f"{name}: {n / 1e6:.1f}M parameters, over the zoo's {MAX_PARAMETERS / 1e6:.0f}M")


# --------------------------------------------------------------------------------------------
# torchvision: (name, constructor kwargs, input shapes, forward kwargs)
# --------------------------------------------------------------------------------------------

IMG = (1, 3, 224, 224)
VIDEO = (1, 3, 8, 112, 112)

TORCHVISION: tuple[tuple[str, dict[str, Any], tuple[tuple[int, ...], ...], dict[str, Any]], ...] = (
    ("resnet18", {}, (IMG,), {}),
    ("mobilenet_v2", {}, (IMG,), {}),
    ("mobilenet_v3_small", {}, (IMG,), {}),
    ("shufflenet_v2_x1_0", {}, (IMG,), {}),
    ("squeezenet1_0", {}, (IMG,), {}),
    ("squeezenet1_1", {}, (IMG,), {}),
    ("mnasnet0_5", {}, (IMG,), {}),
    ("googlenet", {"aux_logits": False, "init_weights": False}, (IMG,), {}),
    ("inception_v3", {"aux_logits": False, "init_weights": False}, ((1, 3, 299, 299),), {}),
    ("densenet121", {}, (IMG,), {}),
    ("efficientnet_b0", {}, (IMG,), {}),
    ("efficientnet_v2_s", {}, ((1, 3, 384, 384),), {}),
    ("regnet_x_400mf", {}, (IMG,), {}),
    ("regnet_y_400mf", {}, (IMG,), {}),
    ("resnext50_32x4d", {}, (IMG,), {}),
    ("resnet50", {}, (IMG,), {}),
    ("convnext_tiny", {}, (IMG,), {}),
    ("swin_t", {}, (IMG,), {}),
    ("swin_v2_t", {}, ((1, 3, 256, 256),), {}),
    ("maxvit_t", {}, (IMG,), {}),
    ("vit_b_16", {}, (IMG,), {}),
    ("lraspp_mobilenet_v3_large", {"weights_backbone": None}, ((1, 3, 256, 256),), {}),
    ("deeplabv3_mobilenet_v3_large", {"aux_loss": False, "weights_backbone": None}, ((1, 3, 256, 256),), {}),
    ("fcn_resnet50", {"aux_loss": False, "weights_backbone": None}, ((1, 3, 256, 256),), {}),
    ("deeplabv3_resnet50", {"aux_loss": False, "weights_backbone": None}, ((1, 3, 256, 256),), {}),
    ("r3d_18", {}, (VIDEO,), {}),
    ("mc3_18", {}, (VIDEO,), {}),
    ("r2plus1d_18", {}, (VIDEO,), {}),
    ("s3d", {}, ((1, 3, 16, 224, 224),), {}),
    ("swin3d_t", {}, ((1, 3, 8, 112, 112),), {}),
    ("mvit_v2_s", {}, ((1, 3, 16, 224, 224),), {}),
    ("raft_small", {}, ((1, 3, 128, 128), (1, 3, 128, 128)), {"num_flow_updates": 3}),
    ("alexnet", {}, (IMG,), {}),
    ("vgg11_bn", {}, (IMG,), {}),
    ("wide_resnet50_2", {}, (IMG,), {}),
)

#: torchvision models too large for MAX_PARAMETERS at their own depth: built from their classes
#: with fewer blocks (same widths and block types)
_TV_SMALLER: dict[str, Callable[[Any], Any]] = {
    "vit_b_16": lambda tv: tv.models.vision_transformer.VisionTransformer(
        image_size=224, patch_size=16, num_layers=4, num_heads=12, hidden_dim=768, mlp_dim=3072),
}


def _tv_builder(name: str, kwargs: dict[str, Any], shapes: tuple[tuple[int, ...], ...],
                fwd: dict[str, Any]) -> Builder:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch

        tv, _ = import_vision()
        smaller = _TV_SMALLER.get(name)
        model = smaller(tv) if smaller else tv.models.get_model(name, weights=None, **kwargs)
        _check_size(f"tv_{name}", model)
        _perturbed(model)
        call = (lambda m, *a: m(*a, **fwd)) if fwd else None
        wrapped = _last_tensor_module(model, call).eval()
        inputs = tuple(torch.randn(s) for s in shapes)
        with torch.no_grad():
            out = wrapped(*inputs)
        if not isinstance(out, torch.Tensor):
            raise RuntimeError(f"tv_{name}: the forward returned {type(out).__name__}, not a tensor")
        return wrapped, inputs

    return build


# --------------------------------------------------------------------------------------------
# timm: one variant per family (the smallest, or a distinct block), with overrides
# --------------------------------------------------------------------------------------------

TIMM: tuple[tuple[str, dict[str, Any]], ...] = (
    ("convnext_atto", {}),
    ("convnextv2_atto", {}),
    ("mobilenetv3_small_050", {}),
    ("mobilenetv4_conv_small", {}),
    ("mobilenetv4_hybrid_medium", {}),
    ("lcnet_050", {}),
    ("fbnetv3_b", {}),
    ("tf_efficientnet_lite0", {}),
    ("tf_efficientnet_b0", {}),
    ("efficientnet_b0_gn", {}),
    ("mixnet_s", {}),
    ("tinynet_e", {}),
    ("efficientnetv2_rw_t", {}),
    ("ghostnet_050", {}),
    ("ghostnetv2_100", {}),
    ("hardcorenas_a", {}),
    ("rexnet_100", {}),
    ("repghostnet_050", {}),
    ("repvit_m0_9", {}),
    ("regnetx_002", {}),
    ("regnety_002", {}),
    ("regnetz_b16", {}),
    ("resnet10t", {}),
    ("resnet18d", {}),
    ("seresnext26d_32x4d", {}),
    ("ecaresnet26t", {}),
    ("legacy_seresnet18", {}),
    ("skresnet18", {}),
    ("resnest14d", {}),
    ("res2net50_26w_4s", {}),
    ("resnetv2_18", {}),
    ("resnetv2_50x1_bit", {}),
    ("repvgg_a0", {}),
    ("mobileone_s0", {}),
    ("gernet_s", {}),
    ("gcresnext26ts", {}),
    ("eca_halonext26ts", {}),
    ("botnet26t_256", {}),
    ("cs3darknet_focus_s", {}),
    ("cspdarknet53", {}),
    ("cspnext_tiny", {}),
    ("densenetblur121d", {}),
    ("dla34", {}),
    ("dpn48b", {}),
    ("hrnet_w18_small", {}),
    ("selecsls42b", {}),
    ("ese_vovnet19b_dw", {}),
    ("xception41", {}),
    ("legacy_xception", {}),
    ("inception_v4", {}),
    ("inception_resnet_v2", {}),
    ("tresnet_m", {}),
    ("nf_regnet_b0", {}),
    ("hgnet_tiny", {}),
    ("hgnetv2_b0", {}),
    ("lcnetv2_small", {}),
    ("fasternet_t0", {}),
    ("starnet_s050", {}),
    ("mambaout_femto", {}),
    ("inception_next_atto", {}),
    ("rdnet_tiny", {}),
    ("convmixer_768_32", {}),  # its entry point sets depth itself
    ("poolformer_s12", {}),
    ("caformer_s18", {}),
    ("convformer_s18", {}),
    ("edgenext_xx_small", {}),
    ("efficientformer_l1", {}),
    ("efficientformerv2_s0", {}),
    ("efficientvit_b0", {}),
    ("efficientvit_m0", {}),
    ("efficientvim_m1", {}),
    ("fastvit_t8", {}),
    ("mobilevit_xxs", {}),
    ("mobilevitv2_050", {}),
    ("levit_128s", {}),
    ("shvit_s1", {}),
    ("swiftformer_xs", {}),
    ("lowformer_b0", {}),
    ("cpubone_b0_bfrobust", {}),
    ("tiny_vit_5m_224", {}),
    ("vit_tiny_patch16_224", {}),
    ("deit_tiny_distilled_patch16_224", {}),
    ("vit_tiny_r_s16_p8_224", {}),
    ("vit_relpos_small_patch16_224", {"depth": 4}),
    ("eva02_tiny_patch14_224", {}),
    ("beit_base_patch16_224", {"depth": 2}),
    ("samvit_base_patch16_224", {"depth": 2}),
    ("cait_xxs24_224", {"depth": 4}),
    ("xcit_nano_12_p16_224", {}),
    ("pit_ti_224", {}),
    ("convit_tiny", {}),
    ("crossvit_tiny_240", {}),
    ("tnt_s_patch16_224", {"depth": 4}),
    ("visformer_tiny", {}),
    ("coat_lite_tiny", {}),
    ("twins_svt_small", {}),
    ("pvt_v2_b0", {}),
    ("nest_tiny", {}),
    ("swin_tiny_patch4_window7_224", {}),
    ("swinv2_tiny_window8_256", {}),
    ("swinv2_cr_tiny_224", {}),
    ("davit_tiny", {}),
    ("focalnet_tiny_srf", {}),
    ("gcvit_xxtiny", {}),
    ("coatnet_nano_rw_224", {}),
    ("maxvit_pico_rw_256", {}),
    ("mvitv2_tiny", {}),
    ("hiera_tiny_224", {}),
    ("nextvit_small", {}),
    ("volo_d1_224", {}),
    ("vitamin_small_224", {}),
    ("mixer_s16_224", {}),
    ("gmlp_ti16_224", {}),
    ("resmlp_12_224", {}),
    ("sequencer2d_s", {}),
)


def _timm_builder(name: str, overrides: dict[str, Any]) -> Builder:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch

        _, timm = import_vision()
        model = timm.create_model(name, pretrained=False, **overrides)
        _check_size(f"timm_{name}", model)
        _perturbed(model)
        cfg = getattr(model, "pretrained_cfg", None) or {}
        size = tuple(cfg.get("input_size") or (3, 224, 224))
        wrapped = _last_tensor_module(model).eval()
        x = torch.randn((1, *size))
        with torch.no_grad():
            out = wrapped(x)
        if not isinstance(out, torch.Tensor):
            raise RuntimeError(f"timm_{name}: the forward returned {type(out).__name__}, not a tensor")
        return wrapped, (x,)

    return build


def vision_zoo() -> Iterator[tuple[str, Builder]]:
    """torchvision (``tv_*``) then timm (``timm_*``), interleaved so that a run that stops early
    has both: the cheaper and more common architectures of each come first."""
    tv = [(f"tv_{n}", _tv_builder(n, k, s, f)) for n, k, s, f in TORCHVISION]
    tm = [(f"timm_{n}", _timm_builder(n, o)) for n, o in TIMM]
    for i in range(max(len(tv), len(tm))):
        if i < len(tv):
            yield tv[i]
        if i < len(tm):
            yield tm[i]
