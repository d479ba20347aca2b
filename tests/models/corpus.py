"""A corpus of real architectures, written from code the way their reference implementations are.

Every entry builds a small configuration (inputs 32x32-96x96, sequences of 16-64, widths of
16-128) with random, seeded weights: no downloads, no torchvision.  The modules follow the
structure of the reference code (torchvision, timm, HuggingFace transformers, the DETR, YOLOv5,
milesial UNet, CycleGAN, CompVis/diffusers repositories, ...) so that the exported ONNX graphs
contain the op patterns deployment engineers actually meet: BN/conv chains, depthwise convs,
channel shuffles, squeeze-excite, erf GELU, LayerNorm, attention with masks, relative position
biases, RoPE, recurrent layers, GridSample, PixelShuffle, reflect padding, TopK/ArgMax decoding.

Each entry exports with both ``torch.onnx.export(dynamo=True, opset_version=19)`` and
``torch.onnx.export(dynamo=False, opset_version=17)`` and ONNX Runtime reproduces PyTorch's
outputs (``tests/models/test_corpus.py``).  Where an exporter needed the code changed the way
real code bases change it for export, ``Arch.notes`` says so.

    from tests.models.corpus import ARCHS, get
    model, inputs = get("resnet18_small").build()   # eval() model, tuple of example inputs
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["Arch", "ARCHS", "FAMILIES", "EXPORTERS", "get", "names"]

FAMILIES = ("cnn", "vision_transformer", "text_transformer", "audio", "detection",
            "segmentation", "recurrent", "generative")
EXPORTERS = ("dynamo", "torchscript")


@dataclass(frozen=True)
class Arch:
    name: str
    family: str
    build: Callable[[], tuple[nn.Module, tuple[Tensor, ...]]]
    notes: str = ""
    exporters: tuple[str, ...] = EXPORTERS


ARCHS: dict[str, Arch] = {}


def get(name: str) -> Arch:
    try:
        return ARCHS[name]
    except KeyError:
        raise KeyError(f"unknown architecture {name!r}; known: {', '.join(sorted(ARCHS))}") from None


def names(family: str | None = None) -> list[str]:
    return [n for n, a in ARCHS.items() if family is None or a.family == family]


def _perturb_norms(model: nn.Module, seed: int) -> None:
    """Give norm layers non-trivial statistics/affine parameters, as a trained model has.

    Freshly initialised BatchNorm is the identity in eval mode (mean 0, var 1, weight 1, bias 0),
    which would let an exporter or a converter get away with dropping it."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.running_mean is not None:
                m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.GroupNorm, nn.LayerNorm,
                              nn.modules.instancenorm._InstanceNorm)):
                if getattr(m, "weight", None) is not None:
                    m.weight.copy_(1.0 + torch.randn(m.weight.shape, generator=g) * 0.1)
                if getattr(m, "bias", None) is not None:
                    m.bias.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)


def register(name: str, family: str, notes: str = "",
             exporters: tuple[str, ...] = EXPORTERS) -> Callable[[Callable[[], tuple]], Callable]:
    """Register ``fn() -> (model, inputs)``; the registered build seeds, perturbs norms, eval()s."""
    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}")

    def deco(fn: Callable[[], tuple[nn.Module, tuple[Tensor, ...]]]) -> Callable:
        seed = sum(name.encode()) % 10_000

        def build() -> tuple[nn.Module, tuple[Tensor, ...]]:
            torch.manual_seed(seed)
            model, inputs = fn()
            _perturb_norms(model, seed)
            model.eval()
            return model, tuple(inputs)

        build.__name__ = f"build_{name}"
        build.__doc__ = fn.__doc__
        if name in ARCHS:
            raise ValueError(f"duplicate architecture {name!r}")
        ARCHS[name] = Arch(name=name, family=family, build=build, notes=notes,
                           exporters=tuple(exporters))
        return fn

    return deco


def _make_divisible(v: float, divisor: int = 8, min_value: int | None = None) -> int:
    """torchvision/TF rounding of channel counts."""
    if min_value is None:
        min_value = divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def _image(c: int = 3, h: int = 64, w: int | None = None, n: int = 1) -> Tensor:
    return torch.randn(n, c, h, w if w is not None else h)


def _tokens(vocab: int, length: int, n: int = 1) -> Tensor:
    return torch.randint(0, vocab, (n, length), dtype=torch.long)


# ============================================================================ CNN classifiers

# ---------------------------------------------------------------- ResNet (torchvision layout)


def conv3x3(in_planes: int, out_planes: int, stride: int = 1, groups: int = 1,
            dilation: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=dilation,
                     groups=groups, bias=False, dilation=dilation)


def conv1x1(in_planes: int, out_planes: int, stride: int = 1) -> nn.Conv2d:
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, dilation: int = 1) -> None:
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inplanes: int, planes: int, stride: int = 1,
                 downsample: nn.Module | None = None, dilation: int = 1) -> None:
        super().__init__()
        self.conv1 = conv1x1(inplanes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride, dilation=dilation)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x: Tensor) -> Tensor:
        identity = x
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block: type[BasicBlock] | type[Bottleneck], layers: list[int],
                 widths: tuple[int, ...] = (16, 32, 64, 128), num_classes: int = 10,
                 replace_stride_with_dilation: tuple[bool, bool, bool] = (False, False, False)
                 ) -> None:
        super().__init__()
        self.inplanes = widths[0]
        self.dilation = 1
        self.conv1 = nn.Conv2d(3, self.inplanes, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(self.inplanes)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, widths[0], layers[0])
        self.layer2 = self._make_layer(block, widths[1], layers[1], stride=2,
                                       dilate=replace_stride_with_dilation[0])
        self.layer3 = self._make_layer(block, widths[2], layers[2], stride=2,
                                       dilate=replace_stride_with_dilation[1])
        self.layer4 = self._make_layer(block, widths[3], layers[3], stride=2,
                                       dilate=replace_stride_with_dilation[2])
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(widths[3] * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def _make_layer(self, block: type[BasicBlock] | type[Bottleneck], planes: int, blocks: int,
                    stride: int = 1, dilate: bool = False) -> nn.Sequential:
        downsample = None
        previous_dilation = self.dilation
        if dilate:
            self.dilation *= stride
            stride = 1
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.inplanes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.inplanes, planes, stride, downsample, previous_dilation)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes, dilation=self.dilation))
        return nn.Sequential(*layers)

    def features(self, x: Tensor) -> list[Tensor]:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        c2 = self.layer1(x)
        c3 = self.layer2(c2)
        c4 = self.layer3(c3)
        c5 = self.layer4(c4)
        return [c2, c3, c4, c5]

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)[-1]
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


@register("resnet18_small", "cnn",
          "torchvision ResNet-18 layout (BasicBlock [2,2,2,2]), widths /4: Conv+BN+ReLU, "
          "MaxPool pad 1, residual Add, GlobalAveragePool, Flatten, Gemm")
def _resnet18() -> tuple:
    return ResNet(BasicBlock, [2, 2, 2, 2]), (_image(3, 64),)


@register("resnet50_small", "cnn",
          "torchvision ResNet-50 layout (Bottleneck 1x1-3x3-1x1, expansion 4, strided 3x3, "
          "projection shortcuts), depths [2,2,2,2], base width 8")
def _resnet50() -> tuple:
    return ResNet(Bottleneck, [2, 2, 2, 2], widths=(8, 16, 32, 64)), (_image(3, 64),)


# ---------------------------------------------------------------- MobileNetV2 (torchvision)


class ConvBNActivation(nn.Sequential):
    def __init__(self, in_planes: int, out_planes: int, kernel_size: int = 3, stride: int = 1,
                 groups: int = 1, activation_layer: Callable[..., nn.Module] | None = nn.ReLU6,
                 dilation: int = 1) -> None:
        padding = (kernel_size - 1) // 2 * dilation
        layers: list[nn.Module] = [
            nn.Conv2d(in_planes, out_planes, kernel_size, stride, padding, dilation=dilation,
                      groups=groups, bias=False),
            nn.BatchNorm2d(out_planes),
        ]
        if activation_layer is not None:
            layers.append(activation_layer(inplace=True))
        super().__init__(*layers)
        self.out_channels = out_planes


class InvertedResidualV2(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int, expand_ratio: int) -> None:
        super().__init__()
        hidden_dim = int(round(inp * expand_ratio))
        self.use_res_connect = stride == 1 and inp == oup
        layers: list[nn.Module] = []
        if expand_ratio != 1:
            layers.append(ConvBNActivation(inp, hidden_dim, kernel_size=1))
        layers.extend([
            ConvBNActivation(hidden_dim, hidden_dim, stride=stride, groups=hidden_dim),
            nn.Conv2d(hidden_dim, oup, 1, 1, 0, bias=False),
            nn.BatchNorm2d(oup),
        ])
        self.conv = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        if self.use_res_connect:
            return x + self.conv(x)
        return self.conv(x)


class MobileNetV2(nn.Module):
    def __init__(self, num_classes: int = 10, width_mult: float = 0.35,
                 round_nearest: int = 8) -> None:
        super().__init__()
        input_channel = _make_divisible(32 * width_mult, round_nearest)
        self.last_channel = _make_divisible(1280 * max(1.0, width_mult), round_nearest) // 4
        settings = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 2, 2],
                    [6, 96, 2, 1], [6, 160, 2, 2], [6, 320, 1, 1]]  # t, c, n, s (n trimmed)
        features: list[nn.Module] = [ConvBNActivation(3, input_channel, stride=2)]
        for t, c, n, s in settings:
            output_channel = _make_divisible(c * width_mult, round_nearest)
            for i in range(n):
                features.append(InvertedResidualV2(input_channel, output_channel,
                                                   s if i == 0 else 1, expand_ratio=t))
                input_channel = output_channel
        features.append(ConvBNActivation(input_channel, self.last_channel, kernel_size=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(self.last_channel, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        x = self.features(x)
        x = F.adaptive_avg_pool2d(x, (1, 1))
        x = torch.flatten(x, 1)
        return self.classifier(x)


@register("mobilenet_v2_small", "cnn",
          "torchvision MobileNetV2 x0.35: inverted residuals, depthwise 3x3 (group=C), ReLU6 "
          "(Clip 0..6), linear bottlenecks, residual Add")
def _mobilenet_v2() -> tuple:
    return MobileNetV2(), (_image(3, 64),)


# ---------------------------------------------------------------- MobileNetV3 (torchvision)


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation."""

    def __init__(self, input_channels: int, squeeze_channels: int,
                 activation: Callable[..., nn.Module] = nn.ReLU,
                 scale_activation: Callable[..., nn.Module] = nn.Sigmoid) -> None:
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(input_channels, squeeze_channels, 1)
        self.fc2 = nn.Conv2d(squeeze_channels, input_channels, 1)
        self.activation = activation()
        self.scale_activation = scale_activation()

    def forward(self, x: Tensor) -> Tensor:
        scale = self.avgpool(x)
        scale = self.fc2(self.activation(self.fc1(scale)))
        return self.scale_activation(scale) * x


@dataclass
class _V3Cfg:
    input_channels: int
    kernel: int
    expanded_channels: int
    out_channels: int
    use_se: bool
    use_hs: bool
    stride: int

    @staticmethod
    def scaled(c: int, k: int, e: int, o: int, se: bool, act: str, s: int,
               width_mult: float) -> "_V3Cfg":
        return _V3Cfg(_make_divisible(c * width_mult), k, _make_divisible(e * width_mult),
                      _make_divisible(o * width_mult), se, act == "HS", s)


class InvertedResidualV3(nn.Module):
    def __init__(self, cnf: _V3Cfg) -> None:
        super().__init__()
        self.use_res_connect = cnf.stride == 1 and cnf.input_channels == cnf.out_channels
        act = nn.Hardswish if cnf.use_hs else nn.ReLU
        layers: list[nn.Module] = []
        if cnf.expanded_channels != cnf.input_channels:
            layers.append(ConvBNActivation(cnf.input_channels, cnf.expanded_channels, 1,
                                           activation_layer=act))
        layers.append(ConvBNActivation(cnf.expanded_channels, cnf.expanded_channels, cnf.kernel,
                                       cnf.stride, groups=cnf.expanded_channels,
                                       activation_layer=act))
        if cnf.use_se:
            squeeze = _make_divisible(cnf.expanded_channels // 4, 8)
            layers.append(SqueezeExcitation(cnf.expanded_channels, squeeze,
                                            scale_activation=nn.Hardsigmoid))
        layers.append(ConvBNActivation(cnf.expanded_channels, cnf.out_channels, 1,
                                       activation_layer=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        result = self.block(x)
        if self.use_res_connect:
            result = result + x
        return result


class MobileNetV3(nn.Module):
    def __init__(self, num_classes: int = 10, width_mult: float = 0.5) -> None:
        super().__init__()
        spec = [  # mobilenet_v3_small: in, kernel, expanded, out, SE, activation, stride
            (16, 3, 16, 16, True, "RE", 2), (16, 3, 72, 24, False, "RE", 2),
            (24, 3, 88, 24, False, "RE", 1), (24, 5, 96, 40, True, "HS", 2),
            (40, 5, 240, 40, True, "HS", 1), (40, 5, 120, 48, True, "HS", 1),
            (48, 5, 288, 96, True, "HS", 2), (96, 5, 576, 96, True, "HS", 1),
        ]
        cfgs = [_V3Cfg.scaled(*s, width_mult=width_mult) for s in spec]
        first = cfgs[0].input_channels
        layers: list[nn.Module] = [ConvBNActivation(3, first, 3, 2, activation_layer=nn.Hardswish)]
        layers += [InvertedResidualV3(c) for c in cfgs]
        last_conv = 6 * cfgs[-1].out_channels
        layers.append(ConvBNActivation(cfgs[-1].out_channels, last_conv, 1,
                                       activation_layer=nn.Hardswish))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Linear(last_conv, 128), nn.Hardswish(inplace=True),
                                        nn.Dropout(0.2, inplace=True), nn.Linear(128, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


@register("mobilenet_v3_small", "cnn",
          "torchvision MobileNetV3-Small x0.5: HardSwish, HardSigmoid squeeze-excite "
          "(GlobalAveragePool, 1x1 convs, Mul), depthwise 5x5")
def _mobilenet_v3() -> tuple:
    return MobileNetV3(), (_image(3, 64),)


# ---------------------------------------------------------------- EfficientNet-B0 (torchvision)


class MBConv(nn.Module):
    def __init__(self, expand_ratio: float, kernel: int, stride: int, input_channels: int,
                 out_channels: int, stochastic_depth_prob: float) -> None:
        super().__init__()
        self.use_res_connect = stride == 1 and input_channels == out_channels
        layers: list[nn.Module] = []
        expanded = _make_divisible(input_channels * expand_ratio, 8)
        if expanded != input_channels:
            layers.append(ConvBNActivation(input_channels, expanded, 1, activation_layer=nn.SiLU))
        layers.append(ConvBNActivation(expanded, expanded, kernel, stride, groups=expanded,
                                       activation_layer=nn.SiLU))
        squeeze = max(1, input_channels // 4)
        layers.append(SqueezeExcitation(expanded, squeeze, activation=nn.SiLU))
        layers.append(ConvBNActivation(expanded, out_channels, 1, activation_layer=None))
        self.block = nn.Sequential(*layers)
        self.stochastic_depth_prob = stochastic_depth_prob

    def forward(self, x: Tensor) -> Tensor:
        result = self.block(x)
        if self.use_res_connect:
            if self.training and self.stochastic_depth_prob > 0:  # StochasticDepth("row")
                keep = torch.rand(x.shape[0], 1, 1, 1) >= self.stochastic_depth_prob
                result = result * keep / (1.0 - self.stochastic_depth_prob)
            result = result + x
        return result


class EfficientNet(nn.Module):
    def __init__(self, width_mult: float = 0.25, depth_mult: float = 0.34,
                 num_classes: int = 10) -> None:
        super().__init__()
        base = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2),
                (6, 3, 2, 40, 80, 3), (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4),
                (6, 3, 1, 192, 320, 1)]  # expand, kernel, stride, in, out, layers
        adjust = lambda c: _make_divisible(c * width_mult, 8)  # noqa: E731
        first = adjust(base[0][3])
        layers: list[nn.Module] = [ConvBNActivation(3, first, 3, 2, activation_layer=nn.SiLU)]
        total = sum(int(math.ceil(b[5] * depth_mult)) for b in base)
        block_id = 0
        for e, k, s, cin, cout, n in base:
            stage: list[nn.Module] = []
            for i in range(int(math.ceil(n * depth_mult))):
                sd_prob = 0.2 * float(block_id) / total
                stage.append(MBConv(e, k, s if i == 0 else 1, adjust(cin) if i == 0 else adjust(cout),
                                    adjust(cout), sd_prob))
                block_id += 1
            layers.append(nn.Sequential(*stage))
        last = adjust(base[-1][4])
        head = 4 * last
        layers.append(ConvBNActivation(last, head, 1, activation_layer=nn.SiLU))
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.classifier = nn.Sequential(nn.Dropout(0.2, inplace=True), nn.Linear(head, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


@register("efficientnet_b0_small", "cnn",
          "torchvision EfficientNet-B0 (width 0.25, depth 0.34): MBConv with SiLU (Sigmoid*Mul "
          "or Swish), sigmoid squeeze-excite, depthwise 3x3/5x5, stochastic depth (no-op in eval)")
def _efficientnet_b0() -> tuple:
    return EfficientNet(), (_image(3, 64),)


# ---------------------------------------------------------------- ShuffleNetV2 (torchvision)


def channel_shuffle(x: Tensor, groups: int) -> Tensor:
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    return x.view(batchsize, num_channels, height, width)


class ShuffleInvertedResidual(nn.Module):
    def __init__(self, inp: int, oup: int, stride: int) -> None:
        super().__init__()
        self.stride = stride
        branch_features = oup // 2
        if self.stride > 1:
            self.branch1 = nn.Sequential(
                nn.Conv2d(inp, inp, 3, stride, 1, bias=False, groups=inp),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, 1, 1, 0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if stride > 1 else branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
            nn.Conv2d(branch_features, branch_features, 3, stride, 1, bias=False,
                      groups=branch_features),
            nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, 1, 1, 0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
        )

    def forward(self, x: Tensor) -> Tensor:
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


class ShuffleNetV2(nn.Module):
    def __init__(self, stages_repeats: list[int], stages_out_channels: list[int],
                 num_classes: int = 10) -> None:
        super().__init__()
        input_channels = 3
        output_channels = stages_out_channels[0]
        self.conv1 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        stages = []
        for repeats, output_channels in zip(stages_repeats, stages_out_channels[1:]):
            seq = [ShuffleInvertedResidual(input_channels, output_channels, 2)]
            seq += [ShuffleInvertedResidual(output_channels, output_channels, 1)
                    for _ in range(repeats - 1)]
            stages.append(nn.Sequential(*seq))
            input_channels = output_channels
        self.stage2, self.stage3, self.stage4 = stages
        output_channels = stages_out_channels[-1]
        self.conv5 = nn.Sequential(nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
                                   nn.BatchNorm2d(output_channels), nn.ReLU(inplace=True))
        self.fc = nn.Linear(output_channels, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.stage4(self.stage3(self.stage2(x)))
        x = self.conv5(x)
        x = x.mean([2, 3])  # global pool
        return self.fc(x)


@register("shufflenet_v2_small", "cnn",
          "torchvision ShuffleNetV2: channel shuffle as view(b,g,c/g,h,w)+transpose+view "
          "(Reshape/Transpose), chunk(2) (Split with dynamo, Slice with TorchScript), Concat, "
          "ReduceMean global pool")
def _shufflenet_v2() -> tuple:
    return ShuffleNetV2([2, 3, 2], [24, 32, 64, 128, 256]), (_image(3, 64),)


# ---------------------------------------------------------------- DenseNet (torchvision)


class _DenseLayer(nn.Module):
    def __init__(self, num_input_features: int, growth_rate: int, bn_size: int) -> None:
        super().__init__()
        self.norm1 = nn.BatchNorm2d(num_input_features)
        self.relu1 = nn.ReLU(inplace=True)
        self.conv1 = nn.Conv2d(num_input_features, bn_size * growth_rate, 1, 1, bias=False)
        self.norm2 = nn.BatchNorm2d(bn_size * growth_rate)
        self.relu2 = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(bn_size * growth_rate, growth_rate, 3, 1, 1, bias=False)

    def forward(self, inputs: list[Tensor]) -> Tensor:
        concated = torch.cat(inputs, 1)
        bottleneck = self.conv1(self.relu1(self.norm1(concated)))
        return self.conv2(self.relu2(self.norm2(bottleneck)))


class _DenseBlock(nn.ModuleDict):
    def __init__(self, num_layers: int, num_input_features: int, bn_size: int,
                 growth_rate: int) -> None:
        super().__init__()
        for i in range(num_layers):
            self.add_module(f"denselayer{i + 1}",
                            _DenseLayer(num_input_features + i * growth_rate, growth_rate, bn_size))

    def forward(self, init_features: Tensor) -> Tensor:
        features = [init_features]
        for layer in self.values():
            features.append(layer(features))
        return torch.cat(features, 1)


class _Transition(nn.Sequential):
    def __init__(self, num_input_features: int, num_output_features: int) -> None:
        super().__init__()
        self.norm = nn.BatchNorm2d(num_input_features)
        self.relu = nn.ReLU(inplace=True)
        self.conv = nn.Conv2d(num_input_features, num_output_features, 1, 1, bias=False)
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)


class DenseNet(nn.Module):
    def __init__(self, growth_rate: int = 8, block_config: tuple[int, ...] = (2, 3, 4, 3),
                 num_init_features: int = 16, bn_size: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential()
        self.features.add_module("conv0", nn.Conv2d(3, num_init_features, 7, 2, 3, bias=False))
        self.features.add_module("norm0", nn.BatchNorm2d(num_init_features))
        self.features.add_module("relu0", nn.ReLU(inplace=True))
        self.features.add_module("pool0", nn.MaxPool2d(kernel_size=3, stride=2, padding=1))
        num_features = num_init_features
        for i, num_layers in enumerate(block_config):
            self.features.add_module(f"denseblock{i + 1}",
                                     _DenseBlock(num_layers, num_features, bn_size, growth_rate))
            num_features += num_layers * growth_rate
            if i != len(block_config) - 1:
                self.features.add_module(f"transition{i + 1}",
                                         _Transition(num_features, num_features // 2))
                num_features //= 2
        self.features.add_module("norm5", nn.BatchNorm2d(num_features))
        self.classifier = nn.Linear(num_features, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        out = F.relu(self.features(x), inplace=True)
        out = F.adaptive_avg_pool2d(out, (1, 1))
        return self.classifier(torch.flatten(out, 1))


@register("densenet_small", "cnn",
          "torchvision DenseNet (growth 8, blocks [2,3,4,3]): dense Concat of all previous "
          "features, pre-activation BN-ReLU-Conv, AveragePool transitions")
def _densenet() -> tuple:
    return DenseNet(), (_image(3, 64),)


# ---------------------------------------------------------------- SqueezeNet 1.1 (torchvision)


class Fire(nn.Module):
    def __init__(self, inplanes: int, squeeze_planes: int, expand1x1_planes: int,
                 expand3x3_planes: int) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(inplanes, squeeze_planes, kernel_size=1)
        self.squeeze_activation = nn.ReLU(inplace=True)
        self.expand1x1 = nn.Conv2d(squeeze_planes, expand1x1_planes, kernel_size=1)
        self.expand1x1_activation = nn.ReLU(inplace=True)
        self.expand3x3 = nn.Conv2d(squeeze_planes, expand3x3_planes, kernel_size=3, padding=1)
        self.expand3x3_activation = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        x = self.squeeze_activation(self.squeeze(x))
        return torch.cat([self.expand1x1_activation(self.expand1x1(x)),
                          self.expand3x3_activation(self.expand3x3(x))], 1)


class SqueezeNet(nn.Module):
    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, kernel_size=3, stride=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(32, 8, 32, 32),
            Fire(64, 8, 32, 32),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(64, 16, 64, 64),
            Fire(128, 16, 64, 64),
            nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True),
            Fire(128, 24, 96, 96),
            Fire(192, 24, 96, 96),
            Fire(192, 32, 128, 128),
        )
        final_conv = nn.Conv2d(256, num_classes, kernel_size=1)
        self.classifier = nn.Sequential(nn.Dropout(p=0.5), final_conv, nn.ReLU(inplace=True),
                                        nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x: Tensor) -> Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


@register("squeezenet1_1_small", "cnn",
          "torchvision SqueezeNet 1.1 at half width: Fire modules (1x1 squeeze, 1x1/3x3 expand, "
          "Concat), MaxPool ceil_mode=True on odd sizes, conv classifier")
def _squeezenet() -> tuple:
    return SqueezeNet(), (_image(3, 64),)


# ---------------------------------------------------------------- VGG-11 with BN (torchvision)


class VGG(nn.Module):
    def __init__(self, cfg: list[int | str], num_classes: int = 10, pool: int = 2) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_channels = 3
        for v in cfg:
            if v == "M":
                layers += [nn.MaxPool2d(kernel_size=2, stride=2)]
            else:
                assert isinstance(v, int)
                layers += [nn.Conv2d(in_channels, v, kernel_size=3, padding=1),
                           nn.BatchNorm2d(v), nn.ReLU(inplace=True)]
                in_channels = v
        self.features = nn.Sequential(*layers)
        # torchvision pools to 7x7 for 224 inputs; at 64x64 the map is 2x2, so pool to 2x2.
        self.avgpool = nn.AdaptiveAvgPool2d((pool, pool))
        self.classifier = nn.Sequential(
            nn.Linear(in_channels * pool * pool, 128), nn.ReLU(True), nn.Dropout(),
            nn.Linear(128, 128), nn.ReLU(True), nn.Dropout(), nn.Linear(128, num_classes))

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.features(x))
        return self.classifier(torch.flatten(x, 1))


@register("vgg11_bn_small", "cnn",
          "torchvision VGG-11-BN (cfg 'A', widths /8): Conv3x3+BN+ReLU stacks, MaxPool 2x2, "
          "AdaptiveAvgPool to the map size, 3-layer MLP classifier")
def _vgg11_bn() -> tuple:
    return VGG([8, "M", 16, "M", 32, 32, "M", 64, 64, "M", 64, 64, "M"]), (_image(3, 64),)


# ---------------------------------------------------------------- ConvNeXt (facebookresearch)


class LayerNorm2d(nn.Module):
    """ConvNeXt's LayerNorm supporting channels_last (F.layer_norm) or channels_first (manual)."""

    def __init__(self, normalized_shape: int, eps: float = 1e-6,
                 data_format: str = "channels_last") -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(normalized_shape))
        self.bias = nn.Parameter(torch.zeros(normalized_shape))
        self.eps = eps
        self.data_format = data_format
        self.normalized_shape = (normalized_shape,)

    def forward(self, x: Tensor) -> Tensor:
        if self.data_format == "channels_last":
            return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
        u = x.mean(1, keepdim=True)
        s = (x - u).pow(2).mean(1, keepdim=True)
        x = (x - u) / torch.sqrt(s + self.eps)
        return self.weight[:, None, None] * x + self.bias[:, None, None]


class ConvNeXtBlock(nn.Module):
    def __init__(self, dim: int, layer_scale_init_value: float = 1e-6) -> None:
        super().__init__()
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim)
        self.norm = LayerNorm2d(dim, eps=1e-6)
        self.pwconv1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.pwconv2 = nn.Linear(4 * dim, dim)
        # a trained model's layer scale is far from its 1e-6 init
        self.gamma = nn.Parameter(layer_scale_init_value * torch.ones(dim) + 0.5 * torch.rand(dim))

    def forward(self, x: Tensor) -> Tensor:
        shortcut = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv2(self.act(self.pwconv1(x)))
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        return shortcut + x


class ConvNeXt(nn.Module):
    def __init__(self, depths: tuple[int, ...] = (1, 1, 2, 1),
                 dims: tuple[int, ...] = (16, 32, 64, 128), num_classes: int = 10) -> None:
        super().__init__()
        self.downsample_layers = nn.ModuleList()
        self.downsample_layers.append(nn.Sequential(
            nn.Conv2d(3, dims[0], kernel_size=4, stride=4),
            LayerNorm2d(dims[0], eps=1e-6, data_format="channels_first")))
        for i in range(3):
            self.downsample_layers.append(nn.Sequential(
                LayerNorm2d(dims[i], eps=1e-6, data_format="channels_first"),
                nn.Conv2d(dims[i], dims[i + 1], kernel_size=2, stride=2)))
        self.stages = nn.ModuleList(nn.Sequential(*[ConvNeXtBlock(dims[i]) for _ in range(d)])
                                    for i, d in enumerate(depths))
        self.norm = nn.LayerNorm(dims[-1], eps=1e-6)
        self.head = nn.Linear(dims[-1], num_classes)

    def forward(self, x: Tensor) -> Tensor:
        for down, stage in zip(self.downsample_layers, self.stages):
            x = stage(down(x))
        return self.head(self.norm(x.mean([-2, -1])))


@register("convnext_small", "cnn",
          "ConvNeXt (reference code, depths [1,1,2,1], dims 16..128): patchify 4x4/s4 stem, "
          "depthwise 7x7, permute to NHWC + LayerNorm + Linear (MatMul on rank 4), exact GELU "
          "(Erf), layer scale, channels_first LayerNorm written as ReduceMean/Pow/Sqrt/Div")
def _convnext() -> tuple:
    return ConvNeXt(), (_image(3, 64),)


# ---------------------------------------------------------------- RegNetY (torchvision layout)


class RegNetYBlock(nn.Module):
    """ResBottleneckBlock with group conv and SE (bottleneck multiplier 1)."""

    def __init__(self, width_in: int, width_out: int, stride: int, group_width: int,
                 se_ratio: float = 0.25) -> None:
        super().__init__()
        groups = width_out // group_width
        self.proj = None
        if width_in != width_out or stride != 1:
            self.proj = ConvBNActivation(width_in, width_out, 1, stride, activation_layer=None)
        self.a = ConvBNActivation(width_in, width_out, 1, activation_layer=nn.ReLU)
        self.b = ConvBNActivation(width_out, width_out, 3, stride, groups=groups,
                                  activation_layer=nn.ReLU)
        self.se = SqueezeExcitation(width_out, int(round(se_ratio * width_in)))
        self.c = ConvBNActivation(width_out, width_out, 1, activation_layer=None)
        self.activation = nn.ReLU(inplace=True)

    def forward(self, x: Tensor) -> Tensor:
        shortcut = self.proj(x) if self.proj is not None else x
        return self.activation(shortcut + self.c(self.se(self.b(self.a(x)))))


class RegNetY(nn.Module):
    def __init__(self, widths: tuple[int, ...] = (16, 32, 64, 128),
                 depths: tuple[int, ...] = (1, 2, 2, 1), group_width: int = 8,
                 num_classes: int = 10) -> None:
        super().__init__()
        self.stem = ConvBNActivation(3, 16, 3, 2, activation_layer=nn.ReLU)
        blocks: list[nn.Module] = []
        w_in = 16
        for w, d in zip(widths, depths):
            for i in range(d):
                blocks.append(RegNetYBlock(w_in, w, 2 if i == 0 else 1, group_width))
                w_in = w
        self.trunk_output = nn.Sequential(*blocks)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(w_in, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.avgpool(self.trunk_output(self.stem(x)))
        return self.fc(x.flatten(start_dim=1))


@register("regnety_small", "cnn",
          "torchvision RegNetY layout: grouped 3x3 convs (group width 8), squeeze-excite, "
          "projection shortcuts")
def _regnety() -> tuple:
    return RegNetY(), (_image(3, 64),)


# ---------------------------------------------------------------- GhostNet (huawei-noah)


def hard_sigmoid(x: Tensor, inplace: bool = False) -> Tensor:
    if inplace:
        return x.add_(3.0).clamp_(0.0, 6.0).div_(6.0)
    return F.relu6(x + 3.0) / 6.0


class GhostSqueezeExcite(nn.Module):
    def __init__(self, in_chs: int, se_ratio: float = 0.25, divisor: int = 4) -> None:
        super().__init__()
        reduced = _make_divisible((in_chs * se_ratio), divisor)
        self.avg_pool = nn.AdaptiveAvgPool2d(1)
        self.conv_reduce = nn.Conv2d(in_chs, reduced, 1, bias=True)
        self.act1 = nn.ReLU(inplace=True)
        self.conv_expand = nn.Conv2d(reduced, in_chs, 1, bias=True)

    def forward(self, x: Tensor) -> Tensor:
        x_se = self.conv_expand(self.act1(self.conv_reduce(self.avg_pool(x))))
        return x * hard_sigmoid(x_se)


class GhostModule(nn.Module):
    def __init__(self, inp: int, oup: int, kernel_size: int = 1, ratio: int = 2,
                 dw_size: int = 3, stride: int = 1, relu: bool = True) -> None:
        super().__init__()
        self.oup = oup
        init_channels = math.ceil(oup / ratio)
        new_channels = init_channels * (ratio - 1)
        self.primary_conv = nn.Sequential(
            nn.Conv2d(inp, init_channels, kernel_size, stride, kernel_size // 2, bias=False),
            nn.BatchNorm2d(init_channels),
            nn.ReLU(inplace=True) if relu else nn.Sequential())
        self.cheap_operation = nn.Sequential(
            nn.Conv2d(init_channels, new_channels, dw_size, 1, dw_size // 2,
                      groups=init_channels, bias=False),
            nn.BatchNorm2d(new_channels),
            nn.ReLU(inplace=True) if relu else nn.Sequential())

    def forward(self, x: Tensor) -> Tensor:
        x1 = self.primary_conv(x)
        x2 = self.cheap_operation(x1)
        out = torch.cat([x1, x2], dim=1)
        return out[:, :self.oup, :, :]


class GhostBottleneck(nn.Module):
    def __init__(self, in_chs: int, mid_chs: int, out_chs: int, dw_kernel_size: int = 3,
                 stride: int = 1, se_ratio: float = 0.0) -> None:
        super().__init__()
        self.stride = stride
        self.ghost1 = GhostModule(in_chs, mid_chs, relu=True)
        if self.stride > 1:
            self.conv_dw = nn.Conv2d(mid_chs, mid_chs, dw_kernel_size, stride,
                                     (dw_kernel_size - 1) // 2, groups=mid_chs, bias=False)
            self.bn_dw = nn.BatchNorm2d(mid_chs)
        self.se = GhostSqueezeExcite(mid_chs, se_ratio) if se_ratio > 0 else None
        self.ghost2 = GhostModule(mid_chs, out_chs, relu=False)
        if in_chs == out_chs and self.stride == 1:
            self.shortcut = nn.Sequential()
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_chs, in_chs, dw_kernel_size, stride, (dw_kernel_size - 1) // 2,
                          groups=in_chs, bias=False),
                nn.BatchNorm2d(in_chs),
                nn.Conv2d(in_chs, out_chs, 1, 1, 0, bias=False),
                nn.BatchNorm2d(out_chs))

    def forward(self, x: Tensor) -> Tensor:
        residual = x
        x = self.ghost1(x)
        if self.stride > 1:
            x = self.bn_dw(self.conv_dw(x))
        if self.se is not None:
            x = self.se(x)
        x = self.ghost2(x)
        return x + self.shortcut(residual)


class GhostNet(nn.Module):
    def __init__(self, width: float = 0.5, num_classes: int = 10) -> None:
        super().__init__()
        cfgs = [  # k, exp, c, se, s
            [3, 16, 16, 0, 1], [3, 48, 24, 0, 2], [3, 72, 24, 0, 1], [5, 72, 40, 0.25, 2],
            [5, 120, 40, 0.25, 1], [3, 240, 80, 0, 2], [3, 184, 80, 0, 1],
            [3, 480, 112, 0.25, 1], [5, 672, 160, 0.25, 2],
        ]
        output_channel = _make_divisible(16 * width, 4)
        self.conv_stem = nn.Conv2d(3, output_channel, 3, 2, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(output_channel)
        self.act1 = nn.ReLU(inplace=True)
        input_channel = output_channel
        stages: list[nn.Module] = []
        for k, exp_size, c, se_ratio, s in cfgs:
            output_channel = _make_divisible(c * width, 4)
            hidden_channel = _make_divisible(exp_size * width, 4)
            stages.append(GhostBottleneck(input_channel, hidden_channel, output_channel, k, s,
                                          se_ratio=se_ratio))
            input_channel = output_channel
        output_channel = _make_divisible(exp_size * width, 4)
        stages.append(ConvBNActivation(input_channel, output_channel, 1, activation_layer=nn.ReLU))
        self.blocks = nn.Sequential(*stages)
        self.global_pool = nn.AdaptiveAvgPool2d((1, 1))
        self.conv_head = nn.Conv2d(output_channel, 256, 1, 1, 0, bias=True)
        self.act2 = nn.ReLU(inplace=True)
        self.classifier = nn.Linear(256, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.act1(self.bn1(self.conv_stem(x)))
        x = self.global_pool(self.blocks(x))
        x = self.act2(self.conv_head(x))
        x = x.view(x.size(0), -1)
        x = F.dropout(x, p=0.2, training=self.training)
        return self.classifier(x)


@register("ghostnet_small", "cnn",
          "GhostNet (huawei-noah reference, width 0.5): ghost modules = primary 1x1 conv + cheap "
          "depthwise conv, Concat then Slice to the output channels, hard-sigmoid SE written "
          "as relu6(x+3)/6, view(x.size(0), -1)")
def _ghostnet() -> tuple:
    return GhostNet(), (_image(3, 64),)


# ---------------------------------------------------------------- Spatial transformer network


class AffineGrid(nn.Module):
    """``F.affine_grid(theta, (N, C, H, W), align_corners=False)`` as an explicit base grid.

    ONNX only has AffineGrid from opset 20 and the TorchScript exporter has no opset-17 lowering
    of aten::affine_grid_generator, so exportable STN code (e.g. LPRNet's STN, kornia) builds
    the normalised base grid once and applies theta with a batched matmul."""

    def __init__(self, height: int, width: int) -> None:
        super().__init__()
        xs = (torch.arange(width, dtype=torch.float32) * 2 + 1) / width - 1
        ys = (torch.arange(height, dtype=torch.float32) * 2 + 1) / height - 1
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        base = torch.stack([gx, gy, torch.ones_like(gx)], dim=-1)  # (H, W, 3)
        self.register_buffer("base_grid", base.reshape(1, height * width, 3), persistent=False)
        self.height, self.width = height, width

    def forward(self, theta: Tensor) -> Tensor:
        n = theta.shape[0]
        grid = torch.matmul(self.base_grid.expand(n, -1, -1), theta.transpose(1, 2))
        return grid.view(n, self.height, self.width, 2)


class STNNet(nn.Module):
    """The PyTorch spatial transformer tutorial network."""

    def __init__(self, size: int = 28, num_classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, kernel_size=5)
        self.conv2 = nn.Conv2d(10, 20, kernel_size=5)
        self.conv2_drop = nn.Dropout2d()
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, num_classes)
        self.localization = nn.Sequential(
            nn.Conv2d(1, 8, kernel_size=7), nn.MaxPool2d(2, stride=2), nn.ReLU(True),
            nn.Conv2d(8, 10, kernel_size=5), nn.MaxPool2d(2, stride=2), nn.ReLU(True))
        self.fc_loc = nn.Sequential(nn.Linear(10 * 3 * 3, 32), nn.ReLU(True), nn.Linear(32, 3 * 2))
        with torch.no_grad():  # near-identity transform, as after training
            self.fc_loc[2].weight.mul_(0.1)
            self.fc_loc[2].bias.copy_(torch.tensor([1, 0, 0, 0, 1, 0], dtype=torch.float))
        self.affine_grid = AffineGrid(size, size)

    def stn(self, x: Tensor) -> Tensor:
        xs = self.localization(x)
        xs = xs.view(-1, 10 * 3 * 3)
        theta = self.fc_loc(xs).view(-1, 2, 3)
        grid = self.affine_grid(theta)
        return F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stn(x)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2_drop(self.conv2(x)), 2))
        x = x.view(-1, 320)
        x = F.dropout(F.relu(self.fc1(x)), training=self.training)
        return F.log_softmax(self.fc2(x), dim=1)


@register("stn_mnist", "cnn",
          "PyTorch spatial-transformer tutorial: localisation net -> theta, affine grid, "
          "GridSample (bilinear, zeros, align_corners=False), LogSoftmax. Changed for export: "
          "F.affine_grid replaced by base grid @ theta^T (no opset-17 TorchScript lowering of "
          "affine_grid_generator; ONNX AffineGrid needs opset 20)")
def _stn() -> tuple:
    return STNNet(), (torch.randn(1, 1, 28, 28),)


# ============================================================================ vision transformers

# ---------------------------------------------------------------- ViT (torchvision layout)


class MLPBlock(nn.Sequential):
    def __init__(self, in_dim: int, mlp_dim: int, dropout: float = 0.0) -> None:
        super().__init__(nn.Linear(in_dim, mlp_dim), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(mlp_dim, in_dim), nn.Dropout(dropout))


class EncoderBlock(nn.Module):
    def __init__(self, num_heads: int, hidden_dim: int, mlp_dim: int, dropout: float = 0.0,
                 attention_dropout: float = 0.0) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.self_attention = nn.MultiheadAttention(hidden_dim, num_heads,
                                                    dropout=attention_dropout, batch_first=True)
        self.dropout = nn.Dropout(dropout)
        self.ln_2 = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.mlp = MLPBlock(hidden_dim, mlp_dim, dropout)

    def forward(self, input: Tensor) -> Tensor:
        x = self.ln_1(input)
        x, _ = self.self_attention(x, x, x, need_weights=False)
        x = self.dropout(x) + input
        y = self.mlp(self.ln_2(x))
        return x + y


class VisionTransformer(nn.Module):
    def __init__(self, image_size: int = 64, patch_size: int = 8, num_layers: int = 4,
                 num_heads: int = 4, hidden_dim: int = 64, mlp_dim: int = 128,
                 num_classes: int = 10) -> None:
        super().__init__()
        self.patch_size = patch_size
        self.hidden_dim = hidden_dim
        self.conv_proj = nn.Conv2d(3, hidden_dim, kernel_size=patch_size, stride=patch_size)
        seq_length = (image_size // patch_size) ** 2 + 1
        self.class_token = nn.Parameter(torch.randn(1, 1, hidden_dim) * 0.02)
        self.pos_embedding = nn.Parameter(torch.empty(1, seq_length, hidden_dim).normal_(std=0.02))
        self.layers = nn.Sequential(*[EncoderBlock(num_heads, hidden_dim, mlp_dim)
                                      for _ in range(num_layers)])
        self.ln = nn.LayerNorm(hidden_dim, eps=1e-6)
        self.heads = nn.Sequential(nn.Linear(hidden_dim, num_classes))

    def _process_input(self, x: Tensor) -> Tensor:
        n, c, h, w = x.shape
        p = self.patch_size
        n_h, n_w = h // p, w // p
        x = self.conv_proj(x)  # (n, c, h, w) -> (n, hidden_dim, n_h, n_w)
        x = x.reshape(n, self.hidden_dim, n_h * n_w)
        return x.permute(0, 2, 1)

    def forward(self, x: Tensor) -> Tensor:
        x = self._process_input(x)
        n = x.shape[0]
        batch_class_token = self.class_token.expand(n, -1, -1)
        x = torch.cat([batch_class_token, x], dim=1)
        x = self.ln(self.layers(x + self.pos_embedding))
        return self.heads(x[:, 0])


@register("vit_tiny", "vision_transformer",
          "torchvision ViT (patch 8 on 64x64, 4 layers, dim 64, 4 heads): patch-embedding Conv "
          "stride=kernel, class token Expand+Concat, learned position embedding Add, "
          "nn.MultiheadAttention (Softmax, MatMul), exact GELU (Erf), LayerNorm, Gather of token 0. "
          "TorchScript export must run with grad enabled: under torch.no_grad() (or with "
          "requires_grad=False weights) eval-mode MHA takes the fused fast path "
          "aten::_native_multi_head_attention, which has no ONNX lowering")
def _vit() -> tuple:
    return VisionTransformer(), (_image(3, 64),)


# ---------------------------------------------------------------- DeiT (timm layout)


class Attention(nn.Module):
    """timm.models.vision_transformer.Attention (explicit softmax path)."""

    def __init__(self, dim: int, num_heads: int = 8, qkv_bias: bool = True) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.scale = self.head_dim ** -0.5
        self.qkv = nn.Linear(dim, dim * 3, bias=qkv_bias)
        self.attn_drop = nn.Dropout(0.0)
        self.proj = nn.Linear(dim, dim)
        self.proj_drop = nn.Dropout(0.0)

    def forward(self, x: Tensor) -> Tensor:
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.num_heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        attn = self.attn_drop(attn.softmax(dim=-1))
        x = (attn @ v).transpose(1, 2).reshape(B, N, C)
        return self.proj_drop(self.proj(x))


class Mlp(nn.Module):
    def __init__(self, in_features: int, hidden_features: int,
                 act_layer: Callable[..., nn.Module] = nn.GELU) -> None:
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.fc2 = nn.Linear(hidden_features, in_features)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int, num_heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, num_heads)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class PatchEmbed(nn.Module):
    def __init__(self, img_size: int = 64, patch_size: int = 8, in_chans: int = 3,
                 embed_dim: int = 64, norm_layer: Callable[..., nn.Module] | None = None) -> None:
        super().__init__()
        self.num_patches = (img_size // patch_size) ** 2
        self.grid = img_size // patch_size
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = norm_layer(embed_dim) if norm_layer else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        x = self.proj(x).flatten(2).transpose(1, 2)  # BCHW -> BNC
        return self.norm(x)


class DistilledVisionTransformer(nn.Module):
    def __init__(self, img_size: int = 64, patch_size: int = 8, embed_dim: int = 64,
                 depth: int = 4, num_heads: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, 3, embed_dim)
        num_patches = self.patch_embed.num_patches
        self.cls_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.dist_token = nn.Parameter(torch.randn(1, 1, embed_dim) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, num_patches + 2, embed_dim) * 0.02)
        self.pos_drop = nn.Dropout(0.0)
        self.blocks = nn.Sequential(*[Block(embed_dim, num_heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)
        self.head_dist = nn.Linear(embed_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        B = x.shape[0]
        x = self.patch_embed(x)
        cls_tokens = self.cls_token.expand(B, -1, -1)
        dist_token = self.dist_token.expand(B, -1, -1)
        x = torch.cat((cls_tokens, dist_token, x), dim=1)
        x = self.pos_drop(x + self.pos_embed)
        x = self.norm(self.blocks(x))
        x, x_dist = self.head(x[:, 0]), self.head_dist(x[:, 1])
        if self.training:
            return x, x_dist
        return (x + x_dist) / 2


@register("deit_tiny_distilled", "vision_transformer",
          "DeiT (timm layout): cls + distillation tokens, fused qkv Linear reshaped/permuted to "
          "(3,B,H,N,d) and unbind, q*scale @ k^T, Softmax, exact GELU, two heads averaged")
def _deit() -> tuple:
    return DistilledVisionTransformer(), (_image(3, 64),)


# ---------------------------------------------------------------- MLP-Mixer (timm layout)


class MixerBlock(nn.Module):
    def __init__(self, dim: int, seq_len: int, mlp_ratio: tuple[float, float] = (0.5, 4.0)) -> None:
        super().__init__()
        tokens_dim, channels_dim = int(mlp_ratio[0] * dim), int(mlp_ratio[1] * dim)
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp_tokens = Mlp(seq_len, tokens_dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp_channels = Mlp(dim, channels_dim)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.mlp_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.mlp_channels(self.norm2(x))


class MlpMixer(nn.Module):
    def __init__(self, img_size: int = 64, patch_size: int = 8, embed_dim: int = 64,
                 depth: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = PatchEmbed(img_size, patch_size, 3, embed_dim)
        self.blocks = nn.Sequential(*[MixerBlock(embed_dim, self.stem.num_patches)
                                      for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim, eps=1e-6)
        self.head = nn.Linear(embed_dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.blocks(self.stem(x)))
        return self.head(x.mean(dim=1))


@register("mlp_mixer_small", "vision_transformer",
          "MLP-Mixer (timm layout): token-mixing MLP over transposed tokens (Transpose, MatMul), "
          "channel MLP, exact GELU, LayerNorm, mean pooling")
def _mixer() -> tuple:
    return MlpMixer(), (_image(3, 64),)


# ---------------------------------------------------------------- Swin Transformer (reference)


def window_partition(x: Tensor, window_size: int) -> Tensor:
    B, H, W, C = x.shape
    x = x.view(B, H // window_size, window_size, W // window_size, window_size, C)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, window_size, window_size, C)


def window_reverse(windows: Tensor, window_size: int, H: int, W: int) -> Tensor:
    B = int(windows.shape[0] / (H * W / window_size / window_size))
    x = windows.view(B, H // window_size, W // window_size, window_size, window_size, -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class WindowAttention(nn.Module):
    def __init__(self, dim: int, window_size: tuple[int, int], num_heads: int) -> None:
        super().__init__()
        self.dim = dim
        self.window_size = window_size
        self.num_heads = num_heads
        head_dim = dim // num_heads
        self.scale = head_dim ** -0.5
        self.relative_position_bias_table = nn.Parameter(
            torch.randn((2 * window_size[0] - 1) * (2 * window_size[1] - 1), num_heads) * 0.02)
        coords_h = torch.arange(window_size[0])
        coords_w = torch.arange(window_size[1])
        coords = torch.stack(torch.meshgrid([coords_h, coords_w], indexing="ij"))  # 2, Wh, Ww
        coords_flatten = torch.flatten(coords, 1)
        relative_coords = coords_flatten[:, :, None] - coords_flatten[:, None, :]
        relative_coords = relative_coords.permute(1, 2, 0).contiguous()
        relative_coords[:, :, 0] += window_size[0] - 1
        relative_coords[:, :, 1] += window_size[1] - 1
        relative_coords[:, :, 0] *= 2 * window_size[1] - 1
        self.register_buffer("relative_position_index", relative_coords.sum(-1))
        self.qkv = nn.Linear(dim, dim * 3, bias=True)
        self.proj = nn.Linear(dim, dim)
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, x: Tensor, mask: Tensor | None = None) -> Tensor:
        B_, N, C = x.shape
        qkv = self.qkv(x).reshape(B_, N, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        q = q * self.scale
        attn = q @ k.transpose(-2, -1)
        relative_position_bias = self.relative_position_bias_table[
            self.relative_position_index.view(-1)].view(
            self.window_size[0] * self.window_size[1], self.window_size[0] * self.window_size[1], -1)
        relative_position_bias = relative_position_bias.permute(2, 0, 1).contiguous()
        attn = attn + relative_position_bias.unsqueeze(0)
        if mask is not None:
            nW = mask.shape[0]
            attn = attn.view(B_ // nW, nW, self.num_heads, N, N) + mask.unsqueeze(1).unsqueeze(0)
            attn = attn.view(-1, self.num_heads, N, N)
        attn = self.softmax(attn)
        x = (attn @ v).transpose(1, 2).reshape(B_, N, C)
        return self.proj(x)


class SwinTransformerBlock(nn.Module):
    def __init__(self, dim: int, input_resolution: tuple[int, int], num_heads: int,
                 window_size: int = 4, shift_size: int = 0, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.dim = dim
        self.input_resolution = input_resolution
        self.window_size = window_size
        self.shift_size = shift_size
        if min(self.input_resolution) <= self.window_size:
            self.shift_size = 0
            self.window_size = min(self.input_resolution)
        self.norm1 = nn.LayerNorm(dim)
        self.attn = WindowAttention(dim, (self.window_size, self.window_size), num_heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))
        if self.shift_size > 0:
            H, W = self.input_resolution
            img_mask = torch.zeros((1, H, W, 1))
            slices = (slice(0, -self.window_size), slice(-self.window_size, -self.shift_size),
                      slice(-self.shift_size, None))
            cnt = 0
            for h in slices:
                for w in slices:
                    img_mask[:, h, w, :] = cnt
                    cnt += 1
            mask_windows = window_partition(img_mask, self.window_size)
            mask_windows = mask_windows.view(-1, self.window_size * self.window_size)
            attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
            attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(
                attn_mask == 0, float(0.0))
        else:
            attn_mask = None
        self.register_buffer("attn_mask", attn_mask)

    def forward(self, x: Tensor) -> Tensor:
        H, W = self.input_resolution
        B, L, C = x.shape
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        if self.shift_size > 0:
            shifted_x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
        else:
            shifted_x = x
        x_windows = window_partition(shifted_x, self.window_size)
        x_windows = x_windows.view(-1, self.window_size * self.window_size, C)
        attn_windows = self.attn(x_windows, mask=self.attn_mask)
        attn_windows = attn_windows.view(-1, self.window_size, self.window_size, C)
        shifted_x = window_reverse(attn_windows, self.window_size, H, W)
        if self.shift_size > 0:
            x = torch.roll(shifted_x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        else:
            x = shifted_x
        x = shortcut + x.view(B, H * W, C)
        return x + self.mlp(self.norm2(x))


class PatchMerging(nn.Module):
    def __init__(self, input_resolution: tuple[int, int], dim: int) -> None:
        super().__init__()
        self.input_resolution = input_resolution
        self.reduction = nn.Linear(4 * dim, 2 * dim, bias=False)
        self.norm = nn.LayerNorm(4 * dim)

    def forward(self, x: Tensor) -> Tensor:
        H, W = self.input_resolution
        B, L, C = x.shape
        x = x.view(B, H, W, C)
        x0 = x[:, 0::2, 0::2, :]
        x1 = x[:, 1::2, 0::2, :]
        x2 = x[:, 0::2, 1::2, :]
        x3 = x[:, 1::2, 1::2, :]
        x = torch.cat([x0, x1, x2, x3], -1).view(B, -1, 4 * C)
        return self.reduction(self.norm(x))


class SwinTransformer(nn.Module):
    def __init__(self, img_size: int = 64, patch_size: int = 4, embed_dim: int = 32,
                 depths: tuple[int, ...] = (2, 2, 2), num_heads: tuple[int, ...] = (2, 4, 8),
                 window_size: int = 4, num_classes: int = 10) -> None:
        super().__init__()
        self.patch_embed = PatchEmbed(img_size, patch_size, 3, embed_dim, norm_layer=nn.LayerNorm)
        res = img_size // patch_size
        layers: list[nn.Module] = []
        dim = embed_dim
        for i, (depth, heads) in enumerate(zip(depths, num_heads)):
            blocks = [SwinTransformerBlock(dim, (res, res), heads, window_size,
                                           0 if j % 2 == 0 else window_size // 2)
                      for j in range(depth)]
            if i < len(depths) - 1:
                blocks.append(PatchMerging((res, res), dim))
                res //= 2
                dim *= 2
            layers.append(nn.Sequential(*blocks))
        self.layers = nn.Sequential(*layers)
        self.norm = nn.LayerNorm(dim)
        self.avgpool = nn.AdaptiveAvgPool1d(1)
        self.head = nn.Linear(dim, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.norm(self.layers(self.patch_embed(x)))  # B L C
        x = self.avgpool(x.transpose(1, 2))  # B C 1
        return self.head(torch.flatten(x, 1))


@register("swin_tiny_small", "vision_transformer",
          "Swin Transformer (reference code, embed 32, depths [2,2,2], window 4): cyclic shift "
          "torch.roll (Slice+Concat), window partition/reverse view+permute (rank-6 Transpose), "
          "relative position bias gathered from a table, shifted-window attention mask, "
          "PatchMerging strided slices + Concat, AdaptiveAvgPool1d")
def _swin() -> tuple:
    return SwinTransformer(), (_image(3, 64),)


# ============================================================================ text transformers

# ---------------------------------------------------------------- BERT (HF transformers layout)


@dataclass(frozen=True)
class TextConfig:
    vocab_size: int = 512
    hidden_size: int = 64
    num_hidden_layers: int = 2
    num_attention_heads: int = 4
    intermediate_size: int = 128
    max_position_embeddings: int = 64
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    num_labels: int = 3


class BertEmbeddings(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)
        self.register_buffer("position_ids",
                             torch.arange(config.max_position_embeddings).expand((1, -1)),
                             persistent=False)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        seq_length = input_ids.shape[1]
        position_ids = self.position_ids[:, :seq_length]
        embeddings = (self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
                      + self.position_embeddings(position_ids))
        return self.dropout(self.LayerNorm(embeddings))


class BertSelfAttention(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = self.num_attention_heads * self.attention_head_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(0.1)

    def transpose_for_scores(self, x: Tensor) -> Tensor:
        new_x_shape = x.size()[:-1] + (self.num_attention_heads, self.attention_head_size)
        return x.view(new_x_shape).permute(0, 2, 1, 3)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor) -> Tensor:
        query_layer = self.transpose_for_scores(self.query(hidden_states))
        key_layer = self.transpose_for_scores(self.key(hidden_states))
        value_layer = self.transpose_for_scores(self.value(hidden_states))
        attention_scores = torch.matmul(query_layer, key_layer.transpose(-1, -2))
        attention_scores = attention_scores / math.sqrt(self.attention_head_size)
        attention_scores = attention_scores + attention_mask
        attention_probs = self.dropout(nn.functional.softmax(attention_scores, dim=-1))
        context_layer = torch.matmul(attention_probs, value_layer).permute(0, 2, 1, 3).contiguous()
        new_context_layer_shape = context_layer.size()[:-2] + (self.all_head_size,)
        return context_layer.view(new_context_layer_shape)


class BertLayer(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.attention = BertSelfAttention(config)
        self.attention_output = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.intermediate = nn.Linear(config.hidden_size, config.intermediate_size)
        self.intermediate_act_fn = nn.GELU()
        self.output = nn.Linear(config.intermediate_size, config.hidden_size)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states: Tensor, attention_mask: Tensor) -> Tensor:
        attn = self.dropout(self.attention_output(self.attention(hidden_states, attention_mask)))
        attention_output = self.attention_norm(attn + hidden_states)
        intermediate = self.intermediate_act_fn(self.intermediate(attention_output))
        return self.output_norm(self.dropout(self.output(intermediate)) + attention_output)


class BertModel(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(config)
        self.layer = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = nn.Linear(config.hidden_size, config.hidden_size)
        self.pooler_activation = nn.Tanh()

    def forward(self, input_ids: Tensor, attention_mask: Tensor,
                token_type_ids: Tensor) -> tuple[Tensor, Tensor]:
        dtype = torch.float32
        extended_attention_mask = attention_mask[:, None, None, :].to(dtype=dtype)
        extended_attention_mask = (1.0 - extended_attention_mask) * torch.finfo(dtype).min
        hidden_states = self.embeddings(input_ids, token_type_ids)
        for layer in self.layer:
            hidden_states = layer(hidden_states, extended_attention_mask)
        pooled_output = self.pooler_activation(self.pooler(hidden_states[:, 0]))
        return hidden_states, pooled_output


def _text_inputs(config: TextConfig, length: int = 32, pad: int = 5,
                 token_types: bool = True) -> tuple[Tensor, ...]:
    input_ids = _tokens(config.vocab_size, length)
    input_ids[:, -pad:] = 0
    attention_mask = torch.ones(1, length, dtype=torch.long)
    attention_mask[:, -pad:] = 0
    if not token_types:
        return input_ids, attention_mask
    token_type_ids = torch.zeros(1, length, dtype=torch.long)
    token_type_ids[:, length // 2:] = 1
    return input_ids, attention_mask, token_type_ids


@register("bert_tiny", "text_transformer",
          "BERT (HF layout, 2 layers, hidden 64): word/position/token-type nn.Embedding (Gather), "
          "LayerNorm eps 1e-12, padding mask (1-mask)*finfo.min added to the scores, exact GELU, "
          "tanh pooler; int64 input_ids/attention_mask/token_type_ids inputs")
def _bert() -> tuple:
    config = TextConfig()
    return BertModel(config), _text_inputs(config)


# ---------------------------------------------------------------- DistilBERT (HF layout)


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.n_heads = config.num_attention_heads
        self.dim = config.hidden_size
        self.q_lin = nn.Linear(self.dim, self.dim)
        self.k_lin = nn.Linear(self.dim, self.dim)
        self.v_lin = nn.Linear(self.dim, self.dim)
        self.out_lin = nn.Linear(self.dim, self.dim)
        self.dropout = nn.Dropout(0.1)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, mask: Tensor) -> Tensor:
        bs, q_length, dim = query.size()
        k_length = key.size(1)
        dim_per_head = self.dim // self.n_heads
        mask_reshp = (bs, 1, 1, k_length)

        def shape(x: Tensor) -> Tensor:
            return x.view(bs, -1, self.n_heads, dim_per_head).transpose(1, 2)

        def unshape(x: Tensor) -> Tensor:
            return x.transpose(1, 2).contiguous().view(bs, -1, self.n_heads * dim_per_head)

        q = shape(self.q_lin(query))
        k = shape(self.k_lin(key))
        v = shape(self.v_lin(value))
        q = q / math.sqrt(dim_per_head)
        scores = torch.matmul(q, k.transpose(2, 3))
        mask = (mask == 0).view(mask_reshp).expand_as(scores)
        scores = scores.masked_fill(mask, torch.tensor(torch.finfo(scores.dtype).min))
        weights = self.dropout(nn.functional.softmax(scores, dim=-1))
        context = unshape(torch.matmul(weights, v))
        return self.out_lin(context)


class TransformerBlock(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.attention = MultiHeadSelfAttention(config)
        self.sa_layer_norm = nn.LayerNorm(normalized_shape=config.hidden_size, eps=1e-12)
        self.lin1 = nn.Linear(config.hidden_size, config.intermediate_size)
        self.lin2 = nn.Linear(config.intermediate_size, config.hidden_size)
        self.activation = nn.GELU()
        self.dropout = nn.Dropout(0.1)
        self.output_layer_norm = nn.LayerNorm(normalized_shape=config.hidden_size, eps=1e-12)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        sa_output = self.sa_layer_norm(self.attention(x, x, x, attn_mask) + x)
        ffn_output = self.dropout(self.lin2(self.activation(self.lin1(sa_output))))
        return self.output_layer_norm(ffn_output + sa_output)


class DistilBertForSequenceClassification(nn.Module):
    def __init__(self, config: TextConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.LayerNorm = nn.LayerNorm(config.hidden_size, eps=1e-12)
        self.dropout = nn.Dropout(0.1)
        self.layer = nn.ModuleList(TransformerBlock(config) for _ in range(config.num_hidden_layers))
        self.pre_classifier = nn.Linear(config.hidden_size, config.hidden_size)
        self.classifier = nn.Linear(config.hidden_size, config.num_labels)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        seq_length = input_ids.size(1)
        position_ids = torch.arange(seq_length, dtype=torch.long, device=input_ids.device)
        position_ids = position_ids.unsqueeze(0).expand_as(input_ids)
        x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)
        x = self.dropout(self.LayerNorm(x))
        for layer in self.layer:
            x = layer(x, attention_mask)
        pooled_output = nn.ReLU()(self.pre_classifier(x[:, 0]))
        return self.classifier(self.dropout(pooled_output))


@register("distilbert_tiny", "text_transformer",
          "DistilBERT for sequence classification (HF layout): arange position ids, "
          "(mask == 0).view().expand_as(scores) + masked_fill(finfo.min) (Where on bool), "
          "exact GELU, LayerNorm, int64 inputs")
def _distilbert() -> tuple:
    config = TextConfig(num_hidden_layers=3)
    return DistilBertForSequenceClassification(config), _text_inputs(config, token_types=False)


# ---------------------------------------------------------------- GPT-2 (nanoGPT / HF layout)


class Conv1D(nn.Module):
    """HF GPT-2's transposed linear: addmm(bias, x.view(-1, nx), weight)."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf).normal_(std=0.02))
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x: Tensor) -> Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.c_attn = Conv1D(3 * n_embd, n_embd)
        self.c_proj = Conv1D(n_embd, n_embd)
        self.n_head = n_head
        self.n_embd = n_embd
        self.attn_dropout = nn.Dropout(0.1)

    def forward(self, x: Tensor) -> Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal_mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=x.device), diagonal=1)
        att = att.masked_fill(causal_mask, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPT2Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.c_fc = Conv1D(4 * n_embd, n_embd)
        self.gelu = nn.GELU(approximate="tanh")  # GPT-2's gelu_new
        self.c_proj = Conv1D(n_embd, 4 * n_embd)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab_size: int = 512, n_positions: int = 64, n_embd: int = 64,
                 n_layer: int = 2, n_head: int = 4) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(n_positions, n_embd)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList(GPT2Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying

    def forward(self, idx: Tensor) -> Tensor:
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@register("gpt2_tiny", "text_transformer",
          "GPT-2 decoder (HF/nanoGPT layout, 2 layers): Conv1D as addmm (Gemm), qkv split, causal "
          "mask torch.triu(ones, 1) + masked_fill(-inf) (Trilu/Where, often constant-folded), "
          "tanh-approximate GELU (gelu_new), tied lm_head (MatMul with the embedding table)")
def _gpt2() -> tuple:
    return GPT2LMHeadModel(), (_tokens(512, 32),)


# ---------------------------------------------------------------- T5 encoder (HF layout)


class T5LayerNorm(nn.Module):
    """RMSNorm: no mean subtraction, no bias; variance in float32."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: Tensor) -> Tensor:
        variance = hidden_states.to(torch.float32).pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states


class T5Attention(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_kv: int, has_relative_attention_bias: bool,
                 num_buckets: int = 32, max_distance: int = 128) -> None:
        super().__init__()
        self.has_relative_attention_bias = has_relative_attention_bias
        self.relative_attention_num_buckets = num_buckets
        self.relative_attention_max_distance = max_distance
        self.n_heads = n_heads
        self.key_value_proj_dim = d_kv
        self.inner_dim = n_heads * d_kv
        self.q = nn.Linear(d_model, self.inner_dim, bias=False)
        self.k = nn.Linear(d_model, self.inner_dim, bias=False)
        self.v = nn.Linear(d_model, self.inner_dim, bias=False)
        self.o = nn.Linear(self.inner_dim, d_model, bias=False)
        if self.has_relative_attention_bias:
            self.relative_attention_bias = nn.Embedding(num_buckets, n_heads)

    @staticmethod
    def _relative_position_bucket(relative_position: Tensor, bidirectional: bool = True,
                                  num_buckets: int = 32, max_distance: int = 128) -> Tensor:
        relative_buckets = 0
        if bidirectional:
            num_buckets //= 2
            relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
            relative_position = torch.abs(relative_position)
        else:
            relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        relative_position_if_large = max_exact + (
            torch.log(relative_position.float() / max_exact)
            / math.log(max_distance / max_exact) * (num_buckets - max_exact)).to(torch.long)
        relative_position_if_large = torch.min(
            relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1))
        relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
        return relative_buckets

    def compute_bias(self, query_length: int, key_length: int, device: torch.device) -> Tensor:
        context_position = torch.arange(query_length, dtype=torch.long, device=device)[:, None]
        memory_position = torch.arange(key_length, dtype=torch.long, device=device)[None, :]
        relative_position = memory_position - context_position
        relative_position_bucket = self._relative_position_bucket(
            relative_position, bidirectional=True, num_buckets=self.relative_attention_num_buckets,
            max_distance=self.relative_attention_max_distance)
        values = self.relative_attention_bias(relative_position_bucket)  # (q, k, heads)
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden_states: Tensor, mask: Tensor,
                position_bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
        batch_size, seq_length = hidden_states.shape[:2]

        def shape(states: Tensor) -> Tensor:
            return states.view(batch_size, -1, self.n_heads, self.key_value_proj_dim).transpose(1, 2)

        query_states = shape(self.q(hidden_states))
        key_states = shape(self.k(hidden_states))
        value_states = shape(self.v(hidden_states))
        scores = torch.matmul(query_states, key_states.transpose(3, 2))  # T5: no 1/sqrt(d)
        if position_bias is None:
            position_bias = self.compute_bias(seq_length, seq_length, scores.device)
            position_bias = position_bias + mask
        scores += position_bias
        attn_weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        attn_output = torch.matmul(attn_weights, value_states)
        attn_output = attn_output.transpose(1, 2).contiguous().view(batch_size, -1, self.inner_dim)
        return self.o(attn_output), position_bias


class T5Block(nn.Module):
    def __init__(self, d_model: int, n_heads: int, d_kv: int, d_ff: int,
                 has_relative_attention_bias: bool) -> None:
        super().__init__()
        self.layer_norm = T5LayerNorm(d_model)
        self.SelfAttention = T5Attention(d_model, n_heads, d_kv, has_relative_attention_bias)
        self.ff_layer_norm = T5LayerNorm(d_model)
        self.wi = nn.Linear(d_model, d_ff, bias=False)
        self.wo = nn.Linear(d_ff, d_model, bias=False)
        self.dropout = nn.Dropout(0.1)

    def forward(self, hidden_states: Tensor, mask: Tensor,
                position_bias: Tensor | None) -> tuple[Tensor, Tensor]:
        attn, position_bias = self.SelfAttention(self.layer_norm(hidden_states), mask, position_bias)
        hidden_states = hidden_states + self.dropout(attn)
        ff = self.wo(self.dropout(F.relu(self.wi(self.ff_layer_norm(hidden_states)))))
        return hidden_states + self.dropout(ff), position_bias


class T5EncoderModel(nn.Module):
    def __init__(self, vocab_size: int = 512, d_model: int = 64, n_heads: int = 4, d_kv: int = 16,
                 d_ff: int = 128, num_layers: int = 2) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, d_model)
        self.block = nn.ModuleList(T5Block(d_model, n_heads, d_kv, d_ff, i == 0)
                                   for i in range(num_layers))
        self.final_layer_norm = T5LayerNorm(d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        hidden_states = self.dropout(self.embed_tokens(input_ids))
        extended = attention_mask[:, None, None, :].to(hidden_states.dtype)
        extended = (1.0 - extended) * torch.finfo(hidden_states.dtype).min
        position_bias = None
        for layer in self.block:
            hidden_states, position_bias = layer(hidden_states, extended, position_bias)
        return self.dropout(self.final_layer_norm(hidden_states))


@register("t5_encoder_tiny", "text_transformer",
          "T5 encoder (HF layout): RMSNorm (Pow, ReduceMean, Rsqrt->Sqrt+Reciprocal, Mul), "
          "unscaled attention, bidirectional relative position buckets (Abs, Log, Cast, Min, "
          "Where over arange) + Embedding bias shared by all layers, ReLU FFN")
def _t5() -> tuple:
    return T5EncoderModel(), _text_inputs(TextConfig(), token_types=False)


# ---------------------------------------------------------------- LLaMA-style decoder (HF layout)


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: Tensor) -> Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class LlamaRotaryEmbedding(nn.Module):
    def __init__(self, dim: int, base: float = 10000.0) -> None:
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: Tensor, position_ids: Tensor) -> tuple[Tensor, Tensor]:
        inv_freq_expanded = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        position_ids_expanded = position_ids[:, None, :].float()
        freqs = (inv_freq_expanded @ position_ids_expanded).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: Tensor) -> Tensor:
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor]:
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(hidden_states: Tensor, n_rep: int) -> Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep,
                                                           slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


class LlamaAttention(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, num_key_value_heads: int) -> None:
        super().__init__()
        self.head_dim = hidden_size // num_heads
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_key_value_groups = num_heads // num_key_value_heads
        self.q_proj = nn.Linear(hidden_size, num_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(num_heads * self.head_dim, hidden_size, bias=False)

    def forward(self, hidden_states: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        bsz, q_len, _ = hidden_states.size()
        q = self.q_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        k = self.k_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        v = self.v_proj(hidden_states).view(bsz, q_len, -1, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.num_key_value_groups)
        v = repeat_kv(v, self.num_key_value_groups)
        attn_output = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


class LlamaDecoderLayer(nn.Module):
    def __init__(self, hidden_size: int, intermediate_size: int, num_heads: int,
                 num_key_value_heads: int) -> None:
        super().__init__()
        self.self_attn = LlamaAttention(hidden_size, num_heads, num_key_value_heads)
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()
        self.input_layernorm = LlamaRMSNorm(hidden_size)
        self.post_attention_layernorm = LlamaRMSNorm(hidden_size)

    def forward(self, hidden_states: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        hidden_states = hidden_states + self.self_attn(self.input_layernorm(hidden_states), cos, sin)
        h = self.post_attention_layernorm(hidden_states)
        return hidden_states + self.down_proj(self.act_fn(self.gate_proj(h)) * self.up_proj(h))


class LlamaForCausalLM(nn.Module):
    def __init__(self, vocab_size: int = 512, hidden_size: int = 64, intermediate_size: int = 128,
                 num_layers: int = 2, num_heads: int = 4, num_key_value_heads: int = 2) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab_size, hidden_size)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(hidden_size, intermediate_size, num_heads, num_key_value_heads)
            for _ in range(num_layers))
        self.norm = LlamaRMSNorm(hidden_size)
        self.rotary_emb = LlamaRotaryEmbedding(hidden_size // num_heads)
        self.lm_head = nn.Linear(hidden_size, vocab_size, bias=False)

    def forward(self, input_ids: Tensor) -> Tensor:
        hidden_states = self.embed_tokens(input_ids)
        position_ids = torch.arange(input_ids.shape[1], device=input_ids.device).unsqueeze(0)
        cos, sin = self.rotary_emb(hidden_states, position_ids)
        for layer in self.layers:
            hidden_states = layer(hidden_states, cos, sin)
        return self.lm_head(self.norm(hidden_states))


@register("llama_tiny", "text_transformer",
          "LLaMA-style decoder (HF layout, 2 layers, GQA 4q/2kv heads): RMSNorm, rotary position "
          "embedding (Cos/Sin of inv_freq @ positions, rotate_half Slice+Neg+Concat), repeat_kv "
          "Expand+Reshape, F.scaled_dot_product_attention(is_causal=True), SwiGLU MLP (SiLU*up)")
def _llama() -> tuple:
    return LlamaForCausalLM(), (_tokens(512, 32),)


# ============================================================================ audio

# ---------------------------------------------------------------- wav2vec 2.0 (HF layout)


class Wav2Vec2FeatureEncoder(nn.Module):
    """conv_feature_layers with feat_extract_norm="group": GroupNorm(C, C) on the first layer."""

    def __init__(self, conv_dim: tuple[int, ...], conv_kernel: tuple[int, ...],
                 conv_stride: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_dim = 1
        for i, (dim, k, s) in enumerate(zip(conv_dim, conv_kernel, conv_stride)):
            layer = nn.Sequential(nn.Conv1d(in_dim, dim, kernel_size=k, stride=s, bias=False))
            if i == 0:
                layer.append(nn.GroupNorm(num_groups=dim, num_channels=dim, affine=True))
            layer.append(nn.GELU())
            layers.append(layer)
            in_dim = dim
        self.conv_layers = nn.ModuleList(layers)

    def forward(self, input_values: Tensor) -> Tensor:
        hidden_states = input_values[:, None]
        for conv_layer in self.conv_layers:
            hidden_states = conv_layer(hidden_states)
        return hidden_states


class Wav2Vec2PositionalConvEmbedding(nn.Module):
    def __init__(self, hidden_size: int, kernel: int = 16, groups: int = 4) -> None:
        super().__init__()
        conv = nn.Conv1d(hidden_size, hidden_size, kernel_size=kernel, padding=kernel // 2,
                         groups=groups)
        self.conv = nn.utils.parametrizations.weight_norm(conv, name="weight", dim=2)
        self.num_pad_remove = 1 if kernel % 2 == 0 else 0  # Wav2Vec2SamePadLayer
        self.activation = nn.GELU()

    def forward(self, hidden_states: Tensor) -> Tensor:
        hidden_states = self.conv(hidden_states.transpose(1, 2))
        if self.num_pad_remove > 0:
            hidden_states = hidden_states[:, :, : -self.num_pad_remove]
        return self.activation(hidden_states).transpose(1, 2)


class Wav2Vec2EncoderLayer(nn.Module):
    def __init__(self, hidden_size: int, num_heads: int, intermediate_size: int) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = hidden_size // num_heads
        self.scaling = self.head_dim ** -0.5
        self.q_proj = nn.Linear(hidden_size, hidden_size)
        self.k_proj = nn.Linear(hidden_size, hidden_size)
        self.v_proj = nn.Linear(hidden_size, hidden_size)
        self.out_proj = nn.Linear(hidden_size, hidden_size)
        self.layer_norm = nn.LayerNorm(hidden_size, eps=1e-5)
        self.intermediate_dense = nn.Linear(hidden_size, intermediate_size)
        self.intermediate_act_fn = nn.GELU()
        self.output_dense = nn.Linear(intermediate_size, hidden_size)
        self.final_layer_norm = nn.LayerNorm(hidden_size, eps=1e-5)

    def forward(self, hidden_states: Tensor) -> Tensor:
        bsz, tgt_len, embed_dim = hidden_states.size()
        shape = (bsz, tgt_len, self.num_heads, self.head_dim)
        q = (self.q_proj(hidden_states) * self.scaling).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        attn_weights = F.softmax(torch.matmul(q, k.transpose(2, 3)), dim=-1)
        attn_output = torch.matmul(attn_weights, v).transpose(1, 2).reshape(bsz, tgt_len, embed_dim)
        hidden_states = self.layer_norm(hidden_states + self.out_proj(attn_output))
        ff = self.output_dense(self.intermediate_act_fn(self.intermediate_dense(hidden_states)))
        return self.final_layer_norm(hidden_states + ff)


class Wav2Vec2Model(nn.Module):
    def __init__(self, conv_dim: int = 32, hidden_size: int = 64, num_layers: int = 1) -> None:
        super().__init__()
        self.feature_extractor = Wav2Vec2FeatureEncoder(
            (conv_dim,) * 5, (10, 3, 3, 3, 2), (5, 2, 2, 2, 2))
        self.feature_projection_norm = nn.LayerNorm(conv_dim, eps=1e-5)
        self.feature_projection = nn.Linear(conv_dim, hidden_size)
        self.dropout = nn.Dropout(0.1)
        self.pos_conv_embed = Wav2Vec2PositionalConvEmbedding(hidden_size)
        self.encoder_layer_norm = nn.LayerNorm(hidden_size, eps=1e-5)
        self.layers = nn.ModuleList(Wav2Vec2EncoderLayer(hidden_size, 4, 2 * hidden_size)
                                    for _ in range(num_layers))

    def forward(self, input_values: Tensor) -> Tensor:
        extract_features = self.feature_extractor(input_values).transpose(1, 2)
        hidden_states = self.feature_projection(self.feature_projection_norm(extract_features))
        hidden_states = self.dropout(hidden_states)
        hidden_states = hidden_states + self.pos_conv_embed(hidden_states)
        hidden_states = self.dropout(self.encoder_layer_norm(hidden_states))
        for layer in self.layers:
            hidden_states = layer(hidden_states)
        return hidden_states


@register("wav2vec2_tiny", "audio",
          "wav2vec 2.0 base layout (HF): raw waveform -> Conv1d feature encoder (k10/s5 then "
          "k3/s2, k2/s2), GroupNorm(C,C) on the first conv (InstanceNormalization or "
          "GroupNormalization in ONNX), exact GELU, LayerNorm + Linear projection, weight-normed "
          "grouped positional Conv1d (k16) with SamePad slice, one post-norm encoder layer")
def _wav2vec2() -> tuple:
    return Wav2Vec2Model(), (torch.randn(1, 4000) * 0.1,)


# ---------------------------------------------------------------- KWS CRNN (Conv2d on log-mel + GRU)


class KWSCRNN(nn.Module):
    """Keyword-spotting CRNN (Arik et al. 2017 / hello-edge style)."""

    def __init__(self, n_mels: int = 40, num_classes: int = 12, hidden: int = 32) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=(5, 3), stride=(2, 1), padding=(2, 1), bias=False),
            nn.BatchNorm2d(16), nn.ReLU(inplace=True),
            nn.Conv2d(16, 32, kernel_size=3, stride=(2, 2), padding=1, bias=False),
            nn.BatchNorm2d(32), nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=(2, 1)),
        )
        freq = n_mels // 8
        self.gru = nn.GRU(32 * freq, hidden, num_layers=2, batch_first=True, bidirectional=True)
        self.attention = nn.Linear(2 * hidden, 1)
        self.fc = nn.Linear(2 * hidden, num_classes)

    def forward(self, mel: Tensor) -> Tensor:
        x = self.conv(mel)  # (B, C, F', T')
        b, c, f, t = x.shape
        x = x.permute(0, 3, 1, 2).reshape(b, t, c * f)
        x, _ = self.gru(x)  # (B, T', 2H)
        weights = torch.softmax(self.attention(x), dim=1)  # attention pooling over time
        x = (weights * x).sum(dim=1)
        return self.fc(x)


@register("kws_crnn", "audio",
          "keyword-spotting CRNN on a 40x64 log-mel patch: Conv2d+BN+ReLU, MaxPool, permute+reshape "
          "to (B, T, C*F), 2-layer bidirectional GRU (ONNX GRU), softmax attention pooling")
def _kws() -> tuple:
    return KWSCRNN(), (torch.randn(1, 1, 40, 64),)


# ---------------------------------------------------------------- Conformer (torchaudio layout)


class _ConvolutionModule(nn.Module):
    def __init__(self, input_dim: int, num_channels: int, depthwise_kernel_size: int) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(input_dim)
        self.sequential = nn.Sequential(
            nn.Conv1d(input_dim, 2 * num_channels, 1, stride=1, padding=0),
            nn.GLU(dim=1),
            nn.Conv1d(num_channels, num_channels, depthwise_kernel_size, stride=1,
                      padding=(depthwise_kernel_size - 1) // 2, groups=num_channels),
            nn.BatchNorm1d(num_channels),
            nn.SiLU(),
            nn.Conv1d(num_channels, input_dim, kernel_size=1, stride=1, padding=0),
            nn.Dropout(0.1),
        )

    def forward(self, input: Tensor) -> Tensor:
        x = self.layer_norm(input).transpose(1, 2)
        return self.sequential(x).transpose(1, 2)


class _FeedForwardModule(nn.Sequential):
    def __init__(self, input_dim: int, hidden_dim: int) -> None:
        super().__init__(nn.LayerNorm(input_dim), nn.Linear(input_dim, hidden_dim), nn.SiLU(),
                         nn.Dropout(0.1), nn.Linear(hidden_dim, input_dim), nn.Dropout(0.1))


class ConformerLayer(nn.Module):
    def __init__(self, input_dim: int, ffn_dim: int, num_attention_heads: int,
                 depthwise_conv_kernel_size: int) -> None:
        super().__init__()
        self.ffn1 = _FeedForwardModule(input_dim, ffn_dim)
        self.self_attn_layer_norm = nn.LayerNorm(input_dim)
        self.self_attn = nn.MultiheadAttention(input_dim, num_attention_heads, dropout=0.1)
        self.self_attn_dropout = nn.Dropout(0.1)
        self.conv_module = _ConvolutionModule(input_dim, input_dim, depthwise_conv_kernel_size)
        self.ffn2 = _FeedForwardModule(input_dim, ffn_dim)
        self.final_layer_norm = nn.LayerNorm(input_dim)

    def forward(self, input: Tensor, key_padding_mask: Tensor) -> Tensor:
        # input: (T, B, D) as in torchaudio
        x = input + 0.5 * self.ffn1(input)
        residual = x
        x = self.self_attn_layer_norm(x)
        x, _ = self.self_attn(query=x, key=x, value=x, key_padding_mask=key_padding_mask,
                              need_weights=False)
        x = self.self_attn_dropout(x) + residual
        residual = x
        x = x.transpose(0, 1)
        x = self.conv_module(x).transpose(0, 1) + residual
        x = x + 0.5 * self.ffn2(x)
        return self.final_layer_norm(x)


class ConformerEncoder(nn.Module):
    """Conv2d subsampling (x4) + Conformer layers + CTC head, lengths-aware."""

    def __init__(self, n_mels: int = 40, d_model: int = 64, num_layers: int = 2,
                 vocab: int = 32) -> None:
        super().__init__()
        self.subsampling = nn.Sequential(nn.Conv2d(1, 16, 3, 2), nn.ReLU(),
                                         nn.Conv2d(16, 16, 3, 2), nn.ReLU())
        f = ((n_mels - 1) // 2 - 1) // 2
        self.input_linear = nn.Linear(16 * f, d_model)
        self.conformer_layers = nn.ModuleList(ConformerLayer(d_model, 2 * d_model, 4, 15)
                                              for _ in range(num_layers))
        self.ctc = nn.Linear(d_model, vocab)

    def forward(self, features: Tensor, lengths: Tensor) -> tuple[Tensor, Tensor]:
        x = self.subsampling(features.unsqueeze(1))  # (B, C, T', F')
        b, c, t, f = x.size()
        x = self.input_linear(x.transpose(1, 2).contiguous().view(b, t, c * f))
        lengths = torch.div(torch.div(lengths - 1, 2, rounding_mode="floor") - 1, 2,
                            rounding_mode="floor")
        padding_mask = torch.arange(t, device=lengths.device).expand(b, t) >= lengths.unsqueeze(1)
        x = x.transpose(0, 1)
        for layer in self.conformer_layers:
            x = layer(x, padding_mask)
        logits = self.ctc(x.transpose(0, 1))
        return F.log_softmax(logits, dim=-1), lengths


@register("conformer_small", "audio",
          "Conformer (torchaudio layout, 2 layers, d 64): Conv2d x4 subsampling, half-step "
          "macaron FFNs with SiLU (swish), nn.MultiheadAttention (T,B,D) with a key_padding_mask "
          "computed from an int64 lengths input (Less/Greater on arange), conv module "
          "pointwise Conv1d -> GLU -> depthwise Conv1d k15 -> BatchNorm1d -> SiLU, CTC LogSoftmax")
def _conformer() -> tuple:
    return ConformerEncoder(), (torch.randn(1, 64, 40), torch.tensor([60], dtype=torch.long))


# ============================================================================ recurrent


class RNNModel(nn.Module):
    """pytorch/examples word_language_model (LSTM, tied weights)."""

    def __init__(self, ntoken: int = 512, ninp: int = 64, nhid: int = 64, nlayers: int = 2,
                 dropout: float = 0.2) -> None:
        super().__init__()
        self.ntoken = ntoken
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.decoder.weight = self.encoder.weight  # tie_weights
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input: Tensor, h0: Tensor, c0: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        emb = self.drop(self.encoder(input))  # (T, B, ninp)
        output, (h, c) = self.rnn(emb, (h0, c0))
        output = self.drop(output)
        decoded = self.decoder(output).view(-1, self.ntoken)
        return F.log_softmax(decoded, dim=1), h, c


@register("lstm_lm", "recurrent",
          "pytorch/examples word-language-model: Embedding, 2-layer LSTM (seq-first) with explicit "
          "(h0, c0) state inputs and outputs, tied decoder, LogSoftmax")
def _lstm_lm() -> tuple:
    model = RNNModel()
    tokens = torch.randint(0, 512, (32, 1), dtype=torch.long)
    h0 = torch.randn(2, 1, 64) * 0.1
    c0 = torch.randn(2, 1, 64) * 0.1
    return model, (tokens, h0, c0)


class BidirectionalLSTM(nn.Module):
    def __init__(self, nIn: int, nHidden: int, nOut: int) -> None:
        super().__init__()
        self.rnn = nn.LSTM(nIn, nHidden, bidirectional=True)
        self.embedding = nn.Linear(nHidden * 2, nOut)

    def forward(self, input: Tensor) -> Tensor:
        recurrent, _ = self.rnn(input)
        T, b, h = recurrent.size()
        output = self.embedding(recurrent.view(T * b, h))
        return output.view(T, b, -1)


class CRNN(nn.Module):
    """Text-recognition CRNN (meijieru/crnn.pytorch layout, as in OCR pipelines)."""

    def __init__(self, imgH: int = 32, nc: int = 1, nclass: int = 37, nh: int = 32) -> None:
        super().__init__()
        ks, ps, ss = [3, 3, 3, 3, 3, 3, 2], [1, 1, 1, 1, 1, 1, 0], [1] * 7
        nm = [16, 32, 64, 64, 128, 128, 128]
        cnn = nn.Sequential()

        def convRelu(i: int, batchNormalization: bool = False) -> None:
            nIn = nc if i == 0 else nm[i - 1]
            cnn.add_module(f"conv{i}", nn.Conv2d(nIn, nm[i], ks[i], ss[i], ps[i]))
            if batchNormalization:
                cnn.add_module(f"batchnorm{i}", nn.BatchNorm2d(nm[i]))
            cnn.add_module(f"relu{i}", nn.ReLU(True))

        convRelu(0)
        cnn.add_module("pooling0", nn.MaxPool2d(2, 2))
        convRelu(1)
        cnn.add_module("pooling1", nn.MaxPool2d(2, 2))
        convRelu(2, True)
        convRelu(3)
        cnn.add_module("pooling2", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(4, True)
        convRelu(5)
        cnn.add_module("pooling3", nn.MaxPool2d((2, 2), (2, 1), (0, 1)))
        convRelu(6, True)
        self.cnn = cnn
        self.rnn = nn.Sequential(BidirectionalLSTM(128, nh, nh), BidirectionalLSTM(nh, nh, nclass))

    def forward(self, input: Tensor) -> Tensor:
        conv = self.cnn(input)
        b, c, h, w = conv.size()
        assert h == 1, "the height of conv must be 1"
        conv = conv.squeeze(2).permute(2, 0, 1)  # [w, b, c]
        output = self.rnn(conv)
        return F.log_softmax(output, dim=2)


@register("crnn_ocr", "recurrent",
          "text-recognition CRNN (crnn.pytorch layout) on a 32x100 crop: VGG-ish conv stack with "
          "asymmetric MaxPool (2,1) strides and padding, Squeeze+Transpose to (W, B, C), two "
          "bidirectional LSTMs, CTC LogSoftmax")
def _crnn() -> tuple:
    return CRNN(), (torch.randn(1, 1, 32, 100),)


# ============================================================================ detection

# ---------------------------------------------------------------- YOLOv5 (ultralytics layout)


def autopad(k: int, p: int | None = None) -> int:
    return k // 2 if p is None else p


class Conv(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 1, s: int = 1, p: int | None = None,
                 g: int = 1, act: bool = True) -> None:
        super().__init__()
        self.conv = nn.Conv2d(c1, c2, k, s, autopad(k, p), groups=g, bias=False)
        self.bn = nn.BatchNorm2d(c2, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU() if act else nn.Identity()

    def forward(self, x: Tensor) -> Tensor:
        return self.act(self.bn(self.conv(x)))


class YoloBottleneck(nn.Module):
    def __init__(self, c1: int, c2: int, shortcut: bool = True, e: float = 1.0) -> None:
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_, c2, 3, 1)
        self.add = shortcut and c1 == c2

    def forward(self, x: Tensor) -> Tensor:
        return x + self.cv2(self.cv1(x)) if self.add else self.cv2(self.cv1(x))


class C3(nn.Module):
    def __init__(self, c1: int, c2: int, n: int = 1, shortcut: bool = True, e: float = 0.5) -> None:
        super().__init__()
        c_ = int(c2 * e)
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c1, c_, 1, 1)
        self.cv3 = Conv(2 * c_, c2, 1)
        self.m = nn.Sequential(*(YoloBottleneck(c_, c_, shortcut, e=1.0) for _ in range(n)))

    def forward(self, x: Tensor) -> Tensor:
        return self.cv3(torch.cat((self.m(self.cv1(x)), self.cv2(x)), 1))


class SPPF(nn.Module):
    def __init__(self, c1: int, c2: int, k: int = 5) -> None:
        super().__init__()
        c_ = c1 // 2
        self.cv1 = Conv(c1, c_, 1, 1)
        self.cv2 = Conv(c_ * 4, c2, 1, 1)
        self.m = nn.MaxPool2d(kernel_size=k, stride=1, padding=k // 2)

    def forward(self, x: Tensor) -> Tensor:
        x = self.cv1(x)
        y1 = self.m(x)
        y2 = self.m(y1)
        return self.cv2(torch.cat((x, y1, y2, self.m(y2)), 1))


class Detect(nn.Module):
    def __init__(self, nc: int, anchors: list[list[int]], ch: tuple[int, ...],
                 strides: tuple[float, ...]) -> None:
        super().__init__()
        self.nc = nc
        self.no = nc + 5
        self.nl = len(anchors)
        self.na = len(anchors[0]) // 2
        self.register_buffer("stride", torch.tensor(strides))
        a = torch.tensor(anchors, dtype=torch.float32).view(self.nl, -1, 2)
        self.register_buffer("anchors", a / self.stride.view(-1, 1, 1))
        self.m = nn.ModuleList(nn.Conv2d(x, self.no * self.na, 1) for x in ch)

    def _make_grid(self, nx: int, ny: int, i: int) -> tuple[Tensor, Tensor]:
        d, t = self.anchors[i].device, self.anchors[i].dtype
        shape = 1, self.na, ny, nx, 2
        y, x = torch.arange(ny, device=d, dtype=t), torch.arange(nx, device=d, dtype=t)
        yv, xv = torch.meshgrid(y, x, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(shape) - 0.5  # add grid offset, i.e. y = 2.0 * x - 0.5
        anchor_grid = (self.anchors[i] * self.stride[i]).view((1, self.na, 1, 1, 2)).expand(shape)
        return grid, anchor_grid

    def forward(self, xs: list[Tensor]) -> Tensor:
        z = []
        for i in range(self.nl):
            x = self.m[i](xs[i])
            bs, _, ny, nx = x.shape
            x = x.view(bs, self.na, self.no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
            grid, anchor_grid = self._make_grid(nx, ny, i)
            xy, wh, conf = x.sigmoid().split((2, 2, self.nc + 1), 4)
            xy = (xy * 2 + grid) * self.stride[i]
            wh = (wh * 2) ** 2 * anchor_grid
            y = torch.cat((xy, wh, conf), 4)
            z.append(y.view(bs, self.na * nx * ny, self.no))
        return torch.cat(z, 1)


class YOLOv5(nn.Module):
    """yolov5n-style backbone (Conv/C3/SPPF), PAN head and Detect with in-graph box decoding."""

    def __init__(self, nc: int = 8, w: int = 8) -> None:
        super().__init__()
        self.b0 = Conv(3, w, 6, 2, 2)              # P1/2
        self.b1 = Conv(w, 2 * w, 3, 2)             # P2/4
        self.b2 = C3(2 * w, 2 * w, 1)
        self.b3 = Conv(2 * w, 4 * w, 3, 2)         # P3/8
        self.b4 = C3(4 * w, 4 * w, 2)
        self.b5 = Conv(4 * w, 8 * w, 3, 2)         # P4/16
        self.b6 = C3(8 * w, 8 * w, 2)
        self.b7 = Conv(8 * w, 16 * w, 3, 2)        # P5/32
        self.b8 = C3(16 * w, 16 * w, 1)
        self.b9 = SPPF(16 * w, 16 * w, 5)
        self.h10 = Conv(16 * w, 8 * w, 1, 1)
        self.up = nn.Upsample(None, 2, "nearest")
        self.h13 = C3(16 * w, 8 * w, 1, False)
        self.h14 = Conv(8 * w, 4 * w, 1, 1)
        self.h17 = C3(8 * w, 4 * w, 1, False)      # P3 out
        self.h18 = Conv(4 * w, 4 * w, 3, 2)
        self.h20 = C3(8 * w, 8 * w, 1, False)      # P4 out
        self.h21 = Conv(8 * w, 8 * w, 3, 2)
        self.h23 = C3(16 * w, 16 * w, 1, False)    # P5 out
        anchors = [[10, 13, 16, 30, 33, 23], [30, 61, 62, 45, 59, 119],
                   [116, 90, 156, 198, 373, 326]]
        self.detect = Detect(nc, anchors, (4 * w, 8 * w, 16 * w), (8.0, 16.0, 32.0))

    def forward(self, x: Tensor) -> Tensor:
        x = self.b2(self.b1(self.b0(x)))
        p3 = self.b4(self.b3(x))
        p4 = self.b6(self.b5(p3))
        p5 = self.b9(self.b8(self.b7(p4)))
        h10 = self.h10(p5)
        h13 = self.h13(torch.cat([self.up(h10), p4], 1))
        h14 = self.h14(h13)
        out3 = self.h17(torch.cat([self.up(h14), p3], 1))
        out4 = self.h20(torch.cat([self.h18(out3), h14], 1))
        out5 = self.h23(torch.cat([self.h21(out4), h10], 1))
        return self.detect([out3, out4, out5])


@register("yolov5_nano_small", "detection",
          "YOLOv5 (ultralytics layout, width 8): Conv+BN+SiLU, C3 CSP blocks, SPPF (3 chained "
          "MaxPool k5 + Concat), nearest Upsample x2 (Resize), PAN Concat, Detect: view+permute "
          "of anchors (rank-5 Transpose), Sigmoid, Split, meshgrid grid, (xy*2+grid)*stride, "
          "(wh*2)**2*anchor (Pow), Concat of 3 levels")
def _yolov5() -> tuple:
    return YOLOv5(), (_image(3, 64),)


# ---------------------------------------------------------------- SSDLite / RetinaNet-style head


class SSDLite(nn.Module):
    """MobileNetV2-style backbone + extra layers, per-level class/box heads, softmax, box decode."""

    def __init__(self, num_classes: int = 6, image_size: int = 96) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.stem = ConvBNActivation(3, 16, stride=2)
        self.stage1 = nn.Sequential(InvertedResidualV2(16, 16, 1, 1), InvertedResidualV2(16, 24, 2, 6),
                                    InvertedResidualV2(24, 24, 1, 6))            # /4
        self.stage2 = nn.Sequential(InvertedResidualV2(24, 32, 2, 6),
                                    InvertedResidualV2(32, 32, 1, 6))            # /8
        self.stage3 = nn.Sequential(InvertedResidualV2(32, 64, 2, 6),
                                    InvertedResidualV2(64, 64, 1, 6))            # /16
        self.extras = nn.ModuleList([
            nn.Sequential(ConvBNActivation(64, 32, 1), ConvBNActivation(32, 32, 3, 2, groups=32),
                          ConvBNActivation(32, 64, 1)),                          # /32
            nn.Sequential(ConvBNActivation(64, 32, 1), ConvBNActivation(32, 32, 3, 2, groups=32),
                          ConvBNActivation(32, 64, 1)),                          # /64
        ])
        channels = [32, 64, 64, 64]
        self.num_anchors = [4, 6, 6, 4]
        self.cls_heads = nn.ModuleList(
            nn.Sequential(ConvBNActivation(c, c, 3, groups=c),
                          nn.Conv2d(c, a * num_classes, 1)) for c, a in zip(channels, self.num_anchors))
        self.reg_heads = nn.ModuleList(
            nn.Sequential(ConvBNActivation(c, c, 3, groups=c), nn.Conv2d(c, a * 4, 1))
            for c, a in zip(channels, self.num_anchors))
        sizes = [math.ceil(image_size / s) for s in (8, 16, 32, 64)]
        self.register_buffer("priors", self._default_boxes(sizes, self.num_anchors))
        self.variances = (0.1, 0.2)

    @staticmethod
    def _default_boxes(fmap_sizes: list[int], num_anchors: list[int]) -> Tensor:
        boxes = []
        k = len(fmap_sizes)
        scales = [0.2 + (0.95 - 0.2) * i / (k - 1) for i in range(k)] + [1.0]
        for i, (f, na) in enumerate(zip(fmap_sizes, num_anchors)):
            ratios = [1.0, 2.0, 0.5, 3.0, 1.0 / 3.0][: na - 1]
            for y in range(f):
                for x in range(f):
                    cx, cy = (x + 0.5) / f, (y + 0.5) / f
                    s = scales[i]
                    boxes.append([cx, cy, s, s])
                    for r in ratios[:na - 1]:
                        if r == 1.0:
                            s2 = math.sqrt(scales[i] * scales[i + 1])
                            boxes.append([cx, cy, s2, s2])
                        else:
                            boxes.append([cx, cy, s * math.sqrt(r), s / math.sqrt(r)])
        return torch.tensor(boxes, dtype=torch.float32).clamp_(0, 1)

    def forward(self, images: Tensor) -> tuple[Tensor, Tensor]:
        x = self.stage1(self.stem(images))
        f1 = self.stage2(x)
        f2 = self.stage3(f1)
        feats = [f1, f2]
        for extra in self.extras:
            feats.append(extra(feats[-1]))
        n = images.shape[0]
        cls, reg = [], []
        for f, ch, rh in zip(feats, self.cls_heads, self.reg_heads):
            cls.append(ch(f).permute(0, 2, 3, 1).reshape(n, -1, self.num_classes))
            reg.append(rh(f).permute(0, 2, 3, 1).reshape(n, -1, 4))
        logits = torch.cat(cls, 1)
        deltas = torch.cat(reg, 1)
        scores = F.softmax(logits, dim=-1)
        priors = self.priors.unsqueeze(0)
        cxcy = deltas[..., :2] * self.variances[0] * priors[..., 2:] + priors[..., :2]
        wh = torch.exp(deltas[..., 2:] * self.variances[1]) * priors[..., 2:]
        boxes = torch.cat([cxcy - wh / 2, cxcy + wh / 2], dim=-1)
        return scores, boxes


@register("ssdlite_small", "detection",
          "SSDLite-style detector (96x96): MobileNetV2 blocks, extra layers, 4 levels of "
          "depthwise class/box heads, permute+reshape per level, Concat, Softmax over classes, "
          "prior-box decoding with Exp (center/size variances) and xyxy Concat")
def _ssdlite() -> tuple:
    return SSDLite(), (_image(3, 96),)


# ---------------------------------------------------------------- DETR (facebookresearch layout)


class PositionEmbeddingSine(nn.Module):
    def __init__(self, num_pos_feats: int = 32, temperature: int = 10000,
                 normalize: bool = True) -> None:
        super().__init__()
        self.num_pos_feats = num_pos_feats
        self.temperature = temperature
        self.normalize = normalize
        self.scale = 2 * math.pi

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        not_mask = ~mask
        y_embed = not_mask.cumsum(1, dtype=torch.float32)
        x_embed = not_mask.cumsum(2, dtype=torch.float32)
        if self.normalize:
            eps = 1e-6
            y_embed = y_embed / (y_embed[:, -1:, :] + eps) * self.scale
            x_embed = x_embed / (x_embed[:, :, -1:] + eps) * self.scale
        dim_t = torch.arange(self.num_pos_feats, dtype=torch.float32, device=x.device)
        dim_t = self.temperature ** (2 * torch.div(dim_t, 2, rounding_mode="floor") / self.num_pos_feats)
        pos_x = x_embed[:, :, :, None] / dim_t
        pos_y = y_embed[:, :, :, None] / dim_t
        pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
        pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
        return torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)


class DetrEncoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.1)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, src: Tensor, src_key_padding_mask: Tensor, pos: Tensor) -> Tensor:
        q = k = src + pos
        src2 = self.self_attn(q, k, value=src, key_padding_mask=src_key_padding_mask)[0]
        src = self.norm1(src + self.dropout(src2))
        src2 = self.linear2(self.dropout(F.relu(self.linear1(src))))
        return self.norm2(src + self.dropout(src2))


class DetrDecoderLayer(nn.Module):
    def __init__(self, d_model: int, nhead: int, dim_feedforward: int) -> None:
        super().__init__()
        self.self_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.1)
        self.multihead_attn = nn.MultiheadAttention(d_model, nhead, dropout=0.1)
        self.linear1 = nn.Linear(d_model, dim_feedforward)
        self.linear2 = nn.Linear(dim_feedforward, d_model)
        self.norm1 = nn.LayerNorm(d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.norm3 = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(0.1)

    def forward(self, tgt: Tensor, memory: Tensor, memory_key_padding_mask: Tensor, pos: Tensor,
                query_pos: Tensor) -> Tensor:
        q = k = tgt + query_pos
        tgt2 = self.self_attn(q, k, value=tgt)[0]
        tgt = self.norm1(tgt + self.dropout(tgt2))
        tgt2 = self.multihead_attn(query=tgt + query_pos, key=memory + pos, value=memory,
                                   key_padding_mask=memory_key_padding_mask)[0]
        tgt = self.norm2(tgt + self.dropout(tgt2))
        tgt2 = self.linear2(self.dropout(F.relu(self.linear1(tgt))))
        return self.norm3(tgt + self.dropout(tgt2))


class DetrMLP(nn.Module):
    def __init__(self, input_dim: int, hidden_dim: int, output_dim: int, num_layers: int) -> None:
        super().__init__()
        self.num_layers = num_layers
        h = [hidden_dim] * (num_layers - 1)
        self.layers = nn.ModuleList(nn.Linear(n, k) for n, k in zip([input_dim] + h, h + [output_dim]))

    def forward(self, x: Tensor) -> Tensor:
        for i, layer in enumerate(self.layers):
            x = F.relu(layer(x)) if i < self.num_layers - 1 else layer(x)
        return x


class DETR(nn.Module):
    def __init__(self, num_classes: int = 10, num_queries: int = 16, hidden_dim: int = 64,
                 nheads: int = 4, enc_layers: int = 1, dec_layers: int = 2) -> None:
        super().__init__()
        self.backbone = ResNet(BasicBlock, [1, 1, 1, 1], widths=(16, 32, 64, 128))
        self.input_proj = nn.Conv2d(128, hidden_dim, kernel_size=1)
        self.position_embedding = PositionEmbeddingSine(hidden_dim // 2)
        self.encoder = nn.ModuleList(DetrEncoderLayer(hidden_dim, nheads, 2 * hidden_dim)
                                     for _ in range(enc_layers))
        self.decoder = nn.ModuleList(DetrDecoderLayer(hidden_dim, nheads, 2 * hidden_dim)
                                     for _ in range(dec_layers))
        self.decoder_norm = nn.LayerNorm(hidden_dim)
        self.query_embed = nn.Embedding(num_queries, hidden_dim)
        self.class_embed = nn.Linear(hidden_dim, num_classes + 1)
        self.bbox_embed = DetrMLP(hidden_dim, hidden_dim, 4, 3)

    def forward(self, samples: Tensor) -> tuple[Tensor, Tensor]:
        src = self.backbone.features(samples)[-1]
        bs, _, h, w = src.shape
        mask = torch.zeros((bs, h, w), dtype=torch.bool, device=src.device)  # no padding
        pos = self.position_embedding(src, mask)
        src = self.input_proj(src).flatten(2).permute(2, 0, 1)  # (HW, B, C)
        pos = pos.flatten(2).permute(2, 0, 1)
        mask = mask.flatten(1)
        query_pos = self.query_embed.weight.unsqueeze(1).repeat(1, bs, 1)
        tgt = torch.zeros_like(query_pos)
        memory = src
        for layer in self.encoder:
            memory = layer(memory, mask, pos)
        hs = tgt
        for layer in self.decoder:
            hs = layer(hs, memory, mask, pos, query_pos)
        hs = self.decoder_norm(hs).transpose(0, 1)  # (B, Q, C)
        return self.class_embed(hs), self.bbox_embed(hs).sigmoid()


@register("detr_small", "detection",
          "DETR (facebookresearch layout): ResNet features, sine position embedding (CumSum of "
          "the not-mask, Pow, Sin/Cos, stack+flatten; TorchScript keeps it in the graph, the "
          "dynamo exporter folds it to a constant), 1x1 input_proj, flatten+permute to "
          "(HW, B, C), nn.MultiheadAttention encoder/decoder with key_padding_mask, learned "
          "object queries (Embedding weight repeat), class Linear and sigmoid box MLP")
def _detr() -> tuple:
    return DETR(), (_image(3, 128),)


# ---------------------------------------------------------------- FPN + PAN neck


class FPNPAN(nn.Module):
    """torchvision FeaturePyramidNetwork (+LastLevelMaxPool) followed by a PANet bottom-up path."""

    def __init__(self, in_channels_list: tuple[int, ...] = (16, 32, 64, 128),
                 out_channels: int = 32) -> None:
        super().__init__()
        self.body = ResNet(BasicBlock, [1, 1, 1, 1], widths=in_channels_list)
        self.inner_blocks = nn.ModuleList(nn.Conv2d(c, out_channels, 1) for c in in_channels_list[1:])
        self.layer_blocks = nn.ModuleList(nn.Conv2d(out_channels, out_channels, 3, padding=1)
                                          for _ in in_channels_list[1:])
        n = len(in_channels_list) - 1
        self.downsample_blocks = nn.ModuleList(
            ConvBNActivation(out_channels, out_channels, 3, 2, activation_layer=nn.ReLU)
            for _ in range(n - 1))
        self.pan_blocks = nn.ModuleList(
            ConvBNActivation(out_channels, out_channels, 3, activation_layer=nn.ReLU)
            for _ in range(n - 1))

    def forward(self, x: Tensor) -> list[Tensor]:
        feats = self.body.features(x)[1:]  # C3, C4, C5
        last_inner = self.inner_blocks[-1](feats[-1])
        results = [self.layer_blocks[-1](last_inner)]
        for idx in range(len(feats) - 2, -1, -1):
            inner_lateral = self.inner_blocks[idx](feats[idx])
            feat_shape = inner_lateral.shape[-2:]
            inner_top_down = F.interpolate(last_inner, size=feat_shape, mode="nearest")
            last_inner = inner_lateral + inner_top_down
            results.insert(0, self.layer_blocks[idx](last_inner))
        # PANet bottom-up augmentation
        outs = [results[0]]
        for i, (down, pan) in enumerate(zip(self.downsample_blocks, self.pan_blocks)):
            outs.append(pan(results[i + 1] + down(outs[-1])))
        outs.append(F.max_pool2d(outs[-1], 1, 2, 0))  # LastLevelMaxPool ("pool")
        return outs


@register("fpn_pan_neck", "detection",
          "torchvision FeaturePyramidNetwork over ResNet C3-C5 (1x1 laterals, nearest "
          "F.interpolate to the lateral's size, 3x3 outputs) + PANet bottom-up path (stride-2 "
          "convs + Add) + LastLevelMaxPool (MaxPool k1 s2); four outputs")
def _fpn_pan() -> tuple:
    return FPNPAN(), (_image(3, 128),)


# ---------------------------------------------------------------- CenterNet (TopK decoding)


class CenterNet(nn.Module):
    """CenterNet ctdet: ResNet + deconv neck, heatmap/wh/reg heads, in-graph _nms + _topk decode."""

    def __init__(self, num_classes: int = 4, head_conv: int = 32, K: int = 20) -> None:
        super().__init__()
        self.K = K
        self.backbone = ResNet(BasicBlock, [1, 1, 1, 1], widths=(16, 32, 64, 128))
        layers: list[nn.Module] = []
        inplanes = 128
        for planes in (64, 32, 32):
            layers += [nn.ConvTranspose2d(inplanes, planes, 4, 2, 1, output_padding=0, bias=False),
                       nn.BatchNorm2d(planes), nn.ReLU(inplace=True)]
            inplanes = planes
        self.deconv_layers = nn.Sequential(*layers)
        self.heads = nn.ModuleDict({
            name: nn.Sequential(nn.Conv2d(32, head_conv, 3, padding=1, bias=True),
                                nn.ReLU(inplace=True), nn.Conv2d(head_conv, c, 1))
            for name, c in (("hm", num_classes), ("wh", 2), ("reg", 2))})
        with torch.no_grad():
            self.heads["hm"][-1].bias.fill_(-2.19)

    @staticmethod
    def _nms(heat: Tensor, kernel: int = 3) -> Tensor:
        hmax = F.max_pool2d(heat, (kernel, kernel), stride=1, padding=(kernel - 1) // 2)
        keep = (hmax == heat).float()
        return heat * keep

    @staticmethod
    def _gather_feat(feat: Tensor, ind: Tensor) -> Tensor:
        dim = feat.size(2)
        ind = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
        return feat.gather(1, ind)

    def _transpose_and_gather_feat(self, feat: Tensor, ind: Tensor) -> Tensor:
        feat = feat.permute(0, 2, 3, 1).contiguous()
        feat = feat.view(feat.size(0), -1, feat.size(3))
        return self._gather_feat(feat, ind)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        y = self.deconv_layers(self.backbone.features(x)[-1])
        heat = self.heads["hm"](y).sigmoid()
        wh, reg = self.heads["wh"](y), self.heads["reg"](y)
        batch, cat, height, width = heat.size()
        heat = self._nms(heat)
        topk_scores, topk_inds = torch.topk(heat.view(batch, -1), self.K)
        topk_clses = torch.div(topk_inds, height * width, rounding_mode="floor")
        topk_inds = topk_inds % (height * width)
        topk_ys = torch.div(topk_inds, width, rounding_mode="floor").float()
        topk_xs = (topk_inds % width).float()
        reg = self._transpose_and_gather_feat(reg, topk_inds)
        xs = topk_xs.view(batch, self.K, 1) + reg[:, :, 0:1]
        ys = topk_ys.view(batch, self.K, 1) + reg[:, :, 1:2]
        wh = self._transpose_and_gather_feat(wh, topk_inds)
        bboxes = torch.cat([xs - wh[..., 0:1] / 2, ys - wh[..., 1:2] / 2,
                            xs + wh[..., 0:1] / 2, ys + wh[..., 1:2] / 2], dim=2)
        return bboxes, topk_scores, topk_clses


@register("centernet_small", "detection",
          "CenterNet ctdet (xingyizhou layout): ResNet + 3 ConvTranspose2d k4 s2, heatmap/wh/reg "
          "heads, in-graph decoding: 3x3 MaxPool NMS (Equal, Cast, Mul), TopK over the "
          "flattened heatmap (data-dependent indices), floor Div / Mod on int64, GatherElements")
def _centernet() -> tuple:
    return CenterNet(), (_image(3, 64),)


# ---------------------------------------------------------------- SimpleBaseline pose (ArgMax)


class PoseResNet(nn.Module):
    """Microsoft SimpleBaselines pose_resnet + get_max_preds in the graph."""

    def __init__(self, num_joints: int = 17) -> None:
        super().__init__()
        self.backbone = ResNet(BasicBlock, [1, 1, 1, 1], widths=(16, 32, 64, 128))
        layers: list[nn.Module] = []
        inplanes = 128
        for planes in (32, 32, 32):
            layers += [nn.ConvTranspose2d(inplanes, planes, kernel_size=4, stride=2, padding=1,
                                          output_padding=0, bias=False),
                       nn.BatchNorm2d(planes), nn.ReLU(inplace=True)]
            inplanes = planes
        self.deconv_layers = nn.Sequential(*layers)
        self.final_layer = nn.Conv2d(32, num_joints, kernel_size=1, stride=1, padding=0)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        heatmaps = self.final_layer(self.deconv_layers(self.backbone.features(x)[-1]))
        batch_size, num_joints, _, width = heatmaps.shape
        heatmaps_reshaped = heatmaps.reshape(batch_size, num_joints, -1)
        idx = torch.argmax(heatmaps_reshaped, dim=2, keepdim=True)
        maxvals = torch.amax(heatmaps_reshaped, dim=2, keepdim=True)
        preds = idx.repeat(1, 1, 2).float()
        preds[:, :, 0] = preds[:, :, 0] % width
        preds[:, :, 1] = torch.floor(preds[:, :, 1] / width)
        pred_mask = (maxvals > 0.0).repeat(1, 1, 2).float()
        return heatmaps, preds * pred_mask, maxvals


@register("simplebaseline_pose", "detection",
          "SimpleBaselines pose_resnet (256x192 layout scaled to 64x48): ResNet, 3 ConvTranspose2d "
          "k4 s2 + BN + ReLU, 17 heatmaps, get_max_preds in the graph: ArgMax + ReduceMax over "
          "the flattened map, Mod/Floor to x/y, in-place index assignment (ScatterND), mask")
def _pose() -> tuple:
    return PoseResNet(), (_image(3, 64, 48),)


# ============================================================================ segmentation

# ---------------------------------------------------------------- UNet (milesial/Pytorch-UNet)


class DoubleConv(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, mid_channels: int | None = None) -> None:
        super().__init__()
        if not mid_channels:
            mid_channels = out_channels
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, mid_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(mid_channels), nn.ReLU(inplace=True),
            nn.Conv2d(mid_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(inplace=True))

    def forward(self, x: Tensor) -> Tensor:
        return self.double_conv(x)


class Down(nn.Module):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__()
        self.maxpool_conv = nn.Sequential(nn.MaxPool2d(2), DoubleConv(in_channels, out_channels))

    def forward(self, x: Tensor) -> Tensor:
        return self.maxpool_conv(x)


class Up(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, bilinear: bool = True) -> None:
        super().__init__()
        if bilinear:
            self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
            self.conv = DoubleConv(in_channels, out_channels, in_channels // 2)
        else:
            self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
            self.conv = DoubleConv(in_channels, out_channels)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        x1 = self.up(x1)
        diffY = x2.size()[2] - x1.size()[2]
        diffX = x2.size()[3] - x1.size()[3]
        x1 = F.pad(x1, [diffX // 2, diffX - diffX // 2, diffY // 2, diffY - diffY // 2])
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


class UNet(nn.Module):
    def __init__(self, n_channels: int = 3, n_classes: int = 2, bilinear: bool = False,
                 base: int = 8) -> None:
        super().__init__()
        factor = 2 if bilinear else 1
        self.inc = DoubleConv(n_channels, base)
        self.down1 = Down(base, base * 2)
        self.down2 = Down(base * 2, base * 4)
        self.down3 = Down(base * 4, base * 8)
        self.down4 = Down(base * 8, base * 16 // factor)
        self.up1 = Up(base * 16, base * 8 // factor, bilinear)
        self.up2 = Up(base * 8, base * 4 // factor, bilinear)
        self.up3 = Up(base * 4, base * 2 // factor, bilinear)
        self.up4 = Up(base * 2, base, bilinear)
        self.outc = nn.Conv2d(base, n_classes, kernel_size=1)

    def forward(self, x: Tensor) -> Tensor:
        x1 = self.inc(x)
        x2 = self.down1(x1)
        x3 = self.down2(x2)
        x4 = self.down3(x3)
        x5 = self.down4(x4)
        x = self.up1(x5, x4)
        x = self.up2(x, x3)
        x = self.up3(x, x2)
        x = self.up4(x, x1)
        return self.outc(x)


@register("unet_small", "segmentation",
          "UNet (milesial/Pytorch-UNet, base 8, bilinear=False): DoubleConv Conv+BN+ReLU, "
          "MaxPool 2x2 encoder, ConvTranspose2d k2 s2 decoder, F.pad to the skip's size (no-op "
          "Pad at even sizes), Concat skip connections")
def _unet() -> tuple:
    return UNet(bilinear=False), (_image(3, 64),)


@register("unet_bilinear_small", "segmentation",
          "UNet (milesial/Pytorch-UNet, bilinear=True): nn.Upsample(scale 2, bilinear, "
          "align_corners=True) = Resize linear/align_corners, Concat skips, 1x1 classifier")
def _unet_bilinear() -> tuple:
    return UNet(bilinear=True), (_image(3, 64),)


# ---------------------------------------------------------------- DeepLabV3 (torchvision)


class ASPPConv(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, dilation: int) -> None:
        super().__init__(nn.Conv2d(in_channels, out_channels, 3, padding=dilation,
                                   dilation=dilation, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class ASPPPooling(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int) -> None:
        super().__init__(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x: Tensor) -> Tensor:
        size = x.shape[-2:]
        for mod in self:
            x = mod(x)
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)


class ASPP(nn.Module):
    def __init__(self, in_channels: int, atrous_rates: list[int], out_channels: int = 64) -> None:
        super().__init__()
        modules: list[nn.Module] = [nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                                  nn.BatchNorm2d(out_channels), nn.ReLU())]
        modules += [ASPPConv(in_channels, out_channels, rate) for rate in atrous_rates]
        modules.append(ASPPPooling(in_channels, out_channels))
        self.convs = nn.ModuleList(modules)
        self.project = nn.Sequential(
            nn.Conv2d(len(self.convs) * out_channels, out_channels, 1, bias=False),
            nn.BatchNorm2d(out_channels), nn.ReLU(), nn.Dropout(0.5))

    def forward(self, x: Tensor) -> Tensor:
        return self.project(torch.cat([conv(x) for conv in self.convs], dim=1))


class DeepLabV3(nn.Module):
    def __init__(self, num_classes: int = 5) -> None:
        super().__init__()
        # output stride 8: dilate the last two stages, as torchvision's deeplabv3_resnet50 does
        self.backbone = ResNet(Bottleneck, [1, 1, 2, 1], widths=(8, 16, 32, 64),
                               replace_stride_with_dilation=(False, True, True))
        self.classifier = nn.Sequential(
            ASPP(256, [2, 4, 6]),
            nn.Conv2d(64, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
            nn.Conv2d(64, num_classes, 1))

    def forward(self, x: Tensor) -> Tensor:
        input_shape = x.shape[-2:]
        features = self.backbone.features(x)[-1]
        x = self.classifier(features)
        return F.interpolate(x, size=input_shape, mode="bilinear", align_corners=False)


@register("deeplabv3_small", "segmentation",
          "DeepLabV3 (torchvision layout): ResNet-Bottleneck backbone with dilated last stages "
          "(output stride 8, dilation 2/4), ASPP with atrous 3x3 convs (rates 2,4,6), image "
          "pooling branch (GlobalAveragePool + bilinear F.interpolate back to the map size), "
          "Concat, final bilinear resize to the input (Resize linear, half_pixel)")
def _deeplabv3() -> tuple:
    return DeepLabV3(), (_image(3, 64),)


# ============================================================================ generative / image-to-image

# ---------------------------------------------------------------- ESPCN super-resolution


class ESPCN(nn.Module):
    """Shi et al. 2016 (pytorch/examples super_resolution layout), x3 on the Y channel."""

    def __init__(self, upscale_factor: int = 3) -> None:
        super().__init__()
        self.relu = nn.ReLU()
        self.conv1 = nn.Conv2d(1, 32, (5, 5), (1, 1), (2, 2))
        self.conv2 = nn.Conv2d(32, 32, (3, 3), (1, 1), (1, 1))
        self.conv3 = nn.Conv2d(32, 16, (3, 3), (1, 1), (1, 1))
        self.conv4 = nn.Conv2d(16, upscale_factor ** 2, (3, 3), (1, 1), (1, 1))
        self.pixel_shuffle = nn.PixelShuffle(upscale_factor)

    def forward(self, x: Tensor) -> Tensor:
        x = self.relu(self.conv1(x))
        x = self.relu(self.conv2(x))
        x = self.relu(self.conv3(x))
        return self.pixel_shuffle(self.conv4(x))


@register("espcn_x3", "generative",
          "ESPCN super-resolution (pytorch/examples): conv stack then PixelShuffle(3) "
          "(DepthToSpace CRD, or Reshape/Transpose/Reshape), 32x32 -> 96x96")
def _espcn() -> tuple:
    return ESPCN(), (torch.rand(1, 1, 32, 32),)


# ---------------------------------------------------------------- CycleGAN ResnetGenerator


class ResnetBlock(nn.Module):
    def __init__(self, dim: int, padding_type: str = "reflect", use_dropout: bool = False) -> None:
        super().__init__()
        norm_layer = nn.InstanceNorm2d
        conv_block: list[nn.Module] = []
        assert padding_type == "reflect"
        conv_block += [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=True),
                       norm_layer(dim), nn.ReLU(True)]
        if use_dropout:
            conv_block += [nn.Dropout(0.5)]
        conv_block += [nn.ReflectionPad2d(1), nn.Conv2d(dim, dim, kernel_size=3, padding=0, bias=True),
                       norm_layer(dim)]
        self.conv_block = nn.Sequential(*conv_block)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.conv_block(x)


class ResnetGenerator(nn.Module):
    def __init__(self, input_nc: int = 3, output_nc: int = 3, ngf: int = 16, n_blocks: int = 3) -> None:
        super().__init__()
        norm_layer = nn.InstanceNorm2d
        use_bias = True  # InstanceNorm without affine
        model: list[nn.Module] = [nn.ReflectionPad2d(3),
                                  nn.Conv2d(input_nc, ngf, kernel_size=7, padding=0, bias=use_bias),
                                  norm_layer(ngf), nn.ReLU(True)]
        n_downsampling = 2
        for i in range(n_downsampling):
            mult = 2 ** i
            model += [nn.Conv2d(ngf * mult, ngf * mult * 2, kernel_size=3, stride=2, padding=1,
                                bias=use_bias), norm_layer(ngf * mult * 2), nn.ReLU(True)]
        mult = 2 ** n_downsampling
        for _ in range(n_blocks):
            model += [ResnetBlock(ngf * mult)]
        for i in range(n_downsampling):
            mult = 2 ** (n_downsampling - i)
            model += [nn.ConvTranspose2d(ngf * mult, int(ngf * mult / 2), kernel_size=3, stride=2,
                                         padding=1, output_padding=1, bias=use_bias),
                      norm_layer(int(ngf * mult / 2)), nn.ReLU(True)]
        model += [nn.ReflectionPad2d(3), nn.Conv2d(ngf, output_nc, kernel_size=7, padding=0), nn.Tanh()]
        self.model = nn.Sequential(*model)

    def forward(self, input: Tensor) -> Tensor:
        return self.model(input)


@register("cyclegan_resnet_generator", "generative",
          "CycleGAN/pix2pix ResnetGenerator (junyanz layout, ngf 16, 3 blocks): ReflectionPad2d "
          "(Pad mode=reflect) before every unpadded conv, InstanceNorm2d (no affine), strided "
          "downsampling, ConvTranspose2d k3 s2 output_padding=1, Tanh")
def _cyclegan() -> tuple:
    return ResnetGenerator(), (_image(3, 64),)


# ---------------------------------------------------------------- VAE decoder (Stable Diffusion)


def Normalize(in_channels: int, num_groups: int = 8) -> nn.GroupNorm:
    return nn.GroupNorm(num_groups=num_groups, num_channels=in_channels, eps=1e-6, affine=True)


class ResnetBlockSD(nn.Module):
    """CompVis ldm ResnetBlock (optional timestep embedding)."""

    def __init__(self, in_channels: int, out_channels: int | None = None,
                 temb_channels: int = 0) -> None:
        super().__init__()
        out_channels = in_channels if out_channels is None else out_channels
        self.norm1 = Normalize(in_channels)
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, 1, 1)
        if temb_channels > 0:
            self.temb_proj = nn.Linear(temb_channels, out_channels)
        self.norm2 = Normalize(out_channels)
        self.dropout = nn.Dropout(0.0)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, 1, 1)
        self.nin_shortcut = (nn.Conv2d(in_channels, out_channels, 1, 1, 0)
                             if in_channels != out_channels else None)

    def forward(self, x: Tensor, temb: Tensor | None = None) -> Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        if temb is not None:
            h = h + self.temb_proj(F.silu(temb))[:, :, None, None]
        h = self.conv2(self.dropout(F.silu(self.norm2(h))))
        if self.nin_shortcut is not None:
            x = self.nin_shortcut(x)
        return x + h


class AttnBlock(nn.Module):
    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.norm = Normalize(in_channels)
        self.q = nn.Conv2d(in_channels, in_channels, 1)
        self.k = nn.Conv2d(in_channels, in_channels, 1)
        self.v = nn.Conv2d(in_channels, in_channels, 1)
        self.proj_out = nn.Conv2d(in_channels, in_channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        h_ = self.norm(x)
        q, k, v = self.q(h_), self.k(h_), self.v(h_)
        b, c, h, w = q.shape
        q = q.reshape(b, c, h * w).permute(0, 2, 1)  # b, hw, c
        k = k.reshape(b, c, h * w)                     # b, c, hw
        w_ = torch.bmm(q, k) * (int(c) ** (-0.5))
        w_ = F.softmax(w_, dim=2)
        v = v.reshape(b, c, h * w)
        h_ = torch.bmm(v, w_.permute(0, 2, 1)).reshape(b, c, h, w)
        return x + self.proj_out(h_)


class UpsampleSD(nn.Module):
    def __init__(self, in_channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, in_channels, 3, 1, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class VAEDecoder(nn.Module):
    def __init__(self, z_channels: int = 4, ch: int = 16, ch_mult: tuple[int, ...] = (1, 2, 4),
                 out_ch: int = 3) -> None:
        super().__init__()
        block_in = ch * ch_mult[-1]
        self.post_quant_conv = nn.Conv2d(z_channels, z_channels, 1)
        self.conv_in = nn.Conv2d(z_channels, block_in, 3, 1, 1)
        self.mid_block_1 = ResnetBlockSD(block_in)
        self.mid_attn_1 = AttnBlock(block_in)
        self.mid_block_2 = ResnetBlockSD(block_in)
        self.up = nn.ModuleList()
        for i_level in reversed(range(len(ch_mult))):
            block_out = ch * ch_mult[i_level]
            stage = nn.Module()
            stage.block = nn.ModuleList([ResnetBlockSD(block_in, block_out)])
            block_in = block_out
            stage.upsample = UpsampleSD(block_in) if i_level != 0 else None
            self.up.append(stage)
        self.norm_out = Normalize(block_in)
        self.conv_out = nn.Conv2d(block_in, out_ch, 3, 1, 1)

    def forward(self, z: Tensor) -> Tensor:
        h = self.conv_in(self.post_quant_conv(z / 0.18215))
        h = self.mid_block_2(self.mid_attn_1(self.mid_block_1(h)))
        for stage in self.up:
            for block in stage.block:
                h = block(h)
            if stage.upsample is not None:
                h = stage.upsample(h)
        return self.conv_out(F.silu(self.norm_out(h)))


@register("sd_vae_decoder_small", "generative",
          "Stable Diffusion VAE decoder (CompVis ldm layout, ch 16, mult 1,2,4): GroupNorm(8) + "
          "SiLU ResNet blocks, single-head spatial self-attention (bmm, Softmax), nearest x2 "
          "upsampling + conv, latent 4x8x8 -> 3x32x32")
def _vae_decoder() -> tuple:
    return VAEDecoder(), (torch.randn(1, 4, 8, 8) * 0.18215,)


# ---------------------------------------------------------------- Diffusion UNet (ldm openaimodel)


def timestep_embedding(timesteps: Tensor, dim: int, max_period: int = 10000) -> Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(max_period)
                      * torch.arange(start=0, end=half, dtype=torch.float32) / half
                      ).to(device=timesteps.device)
    args = timesteps[:, None].float() * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class CrossAttention(nn.Module):
    def __init__(self, query_dim: int, context_dim: int | None = None, heads: int = 4,
                 dim_head: int = 8) -> None:
        super().__init__()
        inner_dim = dim_head * heads
        context_dim = query_dim if context_dim is None else context_dim
        self.scale = dim_head ** -0.5
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(0.0))

    def forward(self, x: Tensor, context: Tensor | None = None) -> Tensor:
        h = self.heads
        context = x if context is None else context
        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)
        b = q.shape[0]
        q, k, v = (t.reshape(b, t.shape[1], h, -1).permute(0, 2, 1, 3).reshape(b * h, t.shape[1], -1)
                   for t in (q, k, v))
        sim = torch.einsum("b i d, b j d -> b i j", q, k) * self.scale
        attn = sim.softmax(dim=-1)
        out = torch.einsum("b i j, b j d -> b i d", attn, v)
        out = out.reshape(b, h, out.shape[1], -1).permute(0, 2, 1, 3).reshape(b, out.shape[1], -1)
        return self.to_out(out)


class GEGLU(nn.Module):
    def __init__(self, dim_in: int, dim_out: int) -> None:
        super().__init__()
        self.proj = nn.Linear(dim_in, dim_out * 2)

    def forward(self, x: Tensor) -> Tensor:
        x, gate = self.proj(x).chunk(2, dim=-1)
        return x * F.gelu(gate)


class BasicTransformerBlock(nn.Module):
    def __init__(self, dim: int, n_heads: int, d_head: int, context_dim: int) -> None:
        super().__init__()
        self.attn1 = CrossAttention(dim, heads=n_heads, dim_head=d_head)
        self.ff = nn.Sequential(GEGLU(dim, dim * 4), nn.Dropout(0.0), nn.Linear(dim * 4, dim))
        self.attn2 = CrossAttention(dim, context_dim, heads=n_heads, dim_head=d_head)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim)

    def forward(self, x: Tensor, context: Tensor) -> Tensor:
        x = self.attn1(self.norm1(x)) + x
        x = self.attn2(self.norm2(x), context=context) + x
        return self.ff(self.norm3(x)) + x


class SpatialTransformer(nn.Module):
    def __init__(self, in_channels: int, n_heads: int, d_head: int, context_dim: int) -> None:
        super().__init__()
        inner_dim = n_heads * d_head
        self.norm = Normalize(in_channels)
        self.proj_in = nn.Conv2d(in_channels, inner_dim, 1)
        self.transformer_blocks = nn.ModuleList(
            [BasicTransformerBlock(inner_dim, n_heads, d_head, context_dim)])
        self.proj_out = nn.Conv2d(inner_dim, in_channels, 1)

    def forward(self, x: Tensor, context: Tensor) -> Tensor:
        b, c, h, w = x.shape
        x_in = x
        x = self.proj_in(self.norm(x))
        x = x.permute(0, 2, 3, 1).reshape(b, h * w, -1)  # b c h w -> b (h w) c
        for block in self.transformer_blocks:
            x = block(x, context=context)
        x = x.reshape(b, h, w, -1).permute(0, 3, 1, 2)
        return self.proj_out(x) + x_in


class TinyDiffusionUNet(nn.Module):
    """Two-level ldm UNetModel: ResBlocks with timestep embedding, SpatialTransformer with
    cross-attention to a text context, strided-conv downsampling, nearest upsampling, skip Concat."""

    def __init__(self, in_channels: int = 4, model_channels: int = 32, context_dim: int = 32) -> None:
        super().__init__()
        mc = model_channels
        time_embed_dim = mc * 4
        self.model_channels = mc
        self.time_embed = nn.Sequential(nn.Linear(mc, time_embed_dim), nn.SiLU(),
                                        nn.Linear(time_embed_dim, time_embed_dim))
        self.conv_in = nn.Conv2d(in_channels, mc, 3, padding=1)
        self.down_res = ResnetBlockSD(mc, mc, time_embed_dim)
        self.down_attn = SpatialTransformer(mc, 4, mc // 4, context_dim)
        self.downsample = nn.Conv2d(mc, mc, 3, stride=2, padding=1)
        self.down_res2 = ResnetBlockSD(mc, 2 * mc, time_embed_dim)
        self.mid_res1 = ResnetBlockSD(2 * mc, 2 * mc, time_embed_dim)
        self.mid_attn = SpatialTransformer(2 * mc, 4, mc // 2, context_dim)
        self.mid_res2 = ResnetBlockSD(2 * mc, 2 * mc, time_embed_dim)
        self.up_res2 = ResnetBlockSD(4 * mc, 2 * mc, time_embed_dim)
        self.upsample = UpsampleSD(2 * mc)
        self.up_res = ResnetBlockSD(3 * mc, mc, time_embed_dim)
        self.up_attn = SpatialTransformer(mc, 4, mc // 4, context_dim)
        self.out = nn.Sequential(Normalize(mc), nn.SiLU(), nn.Conv2d(mc, in_channels, 3, padding=1))

    def forward(self, x: Tensor, timesteps: Tensor, context: Tensor) -> Tensor:
        emb = self.time_embed(timestep_embedding(timesteps, self.model_channels))
        h0 = self.conv_in(x)
        h1 = self.down_attn(self.down_res(h0, emb), context)
        h2 = self.down_res2(self.downsample(h1), emb)
        h = self.mid_res2(self.mid_attn(self.mid_res1(h2, emb), context), emb)
        h = self.up_res2(torch.cat([h, h2], dim=1), emb)
        h = self.upsample(h)
        h = self.up_attn(self.up_res(torch.cat([h, h1], dim=1), emb), context)
        return self.out(h)


@register("diffusion_unet_tiny", "generative",
          "latent-diffusion UNet (CompVis openaimodel layout, 2 levels): sinusoidal timestep "
          "embedding (Exp, Cos, Sin, Concat) from an int64 timestep input, time MLP with SiLU "
          "added per channel, GroupNorm+SiLU ResBlocks, SpatialTransformer with self- and "
          "cross-attention (einsum), GEGLU (chunk + exact GELU), nearest upsampling, skip Concat")
def _diffusion_unet() -> tuple:
    return TinyDiffusionUNet(), (torch.randn(1, 4, 16, 16), torch.tensor([500], dtype=torch.long),
                                 torch.randn(1, 8, 32))
