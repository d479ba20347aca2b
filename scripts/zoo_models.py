"""The model zoo of ``scripts/zoo_agreement.py``: a torch.nn zoo and every transformers architecture
that builds from a small config.

Each entry is ``(name, build)`` where ``build()`` returns ``(model, example_inputs)`` with the
model in eval mode and NON-DEGENERATE weights (:func:`perturb`): every parameter and float buffer
is re-drawn, including the ones random init sets to 0 or 1 (norm gammas and betas, GRN
gamma/beta, layer-scale, biases), so that no compiler can fold a branch away as dead code.

A transformers architecture that cannot be built, run or shrunk is skipped with the reason
(:func:`transformers_zoo` returns those reasons beside the builders).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Optional

Builder = Callable[[], tuple[Any, tuple[Any, ...]]]

SEQ = 16
IMAGE = 32
VOCAB = 256


def perturb(model: Any, seed: int = 0) -> Any:
    """Re-draw every parameter and float buffer with values that are neither 0 nor 1 anywhere.

    Matrices get ``N(0, 1/fan_in)``; vectors named like scales (weight, gamma, scale, alpha,
    layer-scale) get ``U(0.5, 1.5)``; every other vector (bias, beta, shift) ``N(0, 0.1)``;
    BatchNorm running variances ``U(0.5, 1.5)``. Integer buffers (position ids, counters) are
    kept."""
    import torch

    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in list(model.named_parameters()) + [
                (n, b) for n, b in model.named_buffers() if b.is_floating_point()]:
            leaf = name.rsplit(".", 1)[-1].lower()
            if "freq" in leaf:  # rotary tables: keep their meaning
                continue
            shape = p.shape
            if "running_var" in leaf:
                new = torch.rand(shape, generator=g) + 0.5
            elif "running_mean" in leaf:
                new = torch.randn(shape, generator=g) * 0.1
            elif p.dim() >= 2:
                fan_in = max(1, p[0].numel())
                new = torch.randn(shape, generator=g) / math.sqrt(fan_in)
            elif p.dim() == 0:
                new = torch.rand((), generator=g) * 0.5 + 0.5
            elif any(k in leaf for k in ("weight", "gamma", "scale", "alpha", "lambda")):
                new = torch.rand(shape, generator=g) + 0.5
            else:
                new = torch.randn(shape, generator=g) * 0.1
                new = torch.where(new.abs() < 1e-3, torch.full_like(new, 0.01), new)
            p.copy_(new.to(p.dtype))
    return model


# --------------------------------------------------------------------------------------------
# torch.nn zoo
# --------------------------------------------------------------------------------------------


def torch_zoo() -> list[tuple[str, Builder]]:
    """Small torch.nn models: conv nets, a UNet, RNNs, transformer layers, attention variants."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class ConvNet(nn.Module):
        def __init__(self, act: Any = nn.ReLU, norm: str = "bn", depthwise: bool = False) -> None:
            super().__init__()
            layers: list[nn.Module] = []
            c = 3
            for out in (8, 16, 16):
                layers.append(nn.Conv2d(c, out, 3, padding=1, stride=2))
                layers.append(nn.BatchNorm2d(out) if norm == "bn" else nn.GroupNorm(4, out))
                layers.append(act())
                if depthwise:
                    layers += [nn.Conv2d(out, out, 3, padding=1, groups=out), nn.Conv2d(out, out, 1), act()]
                c = out
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(c, 10)

        def forward(self, x: Any) -> Any:
            x = self.features(x)
            return self.head(x.mean((2, 3)))

    class ResBlock(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.c1, self.b1 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)
            self.c2, self.b2 = nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c)

        def forward(self, x: Any) -> Any:
            return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 3, padding=1)
            self.pool = nn.MaxPool2d(2)
            self.blocks = nn.Sequential(ResBlock(16), ResBlock(16))
            self.fc = nn.Linear(16, 10)

        def forward(self, x: Any) -> Any:
            x = self.blocks(self.pool(F.relu(self.stem(x))))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class UNet(nn.Module):
        def __init__(self, up: str = "transpose") -> None:
            super().__init__()
            self.d1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
            self.d2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1, stride=2), nn.ReLU())
            self.mid = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
            self.up_mode = up
            self.up = nn.ConvTranspose2d(16, 8, 2, stride=2)
            self.red = nn.Conv2d(16, 8, 1)
            self.out = nn.Conv2d(16, 2, 1)

        def forward(self, x: Any) -> Any:
            a = self.d1(x)
            b = self.mid(self.d2(a))
            if self.up_mode == "transpose":
                u = self.up(b)
            else:
                u = self.red(F.interpolate(b, scale_factor=2.0, mode=self.up_mode))
            return self.out(torch.cat([a, u], 1))

    class RNN(nn.Module):
        def __init__(self, kind: str, bidirectional: bool = False, layers: int = 1) -> None:
            super().__init__()
            cls = {"lstm": nn.LSTM, "gru": nn.GRU, "rnn": nn.RNN}[kind]
            self.rnn = cls(16, 24, num_layers=layers, batch_first=True, bidirectional=bidirectional)
            self.fc = nn.Linear(24 * (2 if bidirectional else 1), 4)

        def forward(self, x: Any) -> Any:
            y, _ = self.rnn(x)
            return self.fc(y[:, -1])

    class Attention(nn.Module):
        """Hand-written attention: multi-head, multi-query or grouped-query, with optional
        causal mask, ALiBi bias or rotary embedding."""

        def __init__(self, d: int = 32, heads: int = 4, kv_heads: int = 4, causal: bool = False,
                     alibi: bool = False, rotary: bool = False) -> None:
            super().__init__()
            self.h, self.kv, self.dh = heads, kv_heads, d // heads
            self.q = nn.Linear(d, d)
            self.k = nn.Linear(d, self.kv * self.dh)
            self.v = nn.Linear(d, self.kv * self.dh)
            self.o = nn.Linear(d, d)
            self.causal, self.alibi, self.rotary = causal, alibi, rotary

        def forward(self, x: Any) -> Any:
            b, t, d = x.shape
            q = self.q(x).view(b, t, self.h, self.dh).transpose(1, 2)
            k = self.k(x).view(b, t, self.kv, self.dh).transpose(1, 2)
            v = self.v(x).view(b, t, self.kv, self.dh).transpose(1, 2)
            if self.rotary:
                pos = torch.arange(t, dtype=torch.float32)
                inv = 1.0 / (10000 ** (torch.arange(0, self.dh, 2, dtype=torch.float32) / self.dh))
                ang = pos[:, None] * inv[None]
                cos, sin = torch.cat([ang.cos()] * 2, -1), torch.cat([ang.sin()] * 2, -1)

                def rot(z: Any) -> Any:
                    z1, z2 = z[..., : self.dh // 2], z[..., self.dh // 2:]
                    return z * cos + torch.cat([-z2, z1], -1) * sin

                q, k = rot(q), rot(k)
            if self.kv != self.h:
                k = k.repeat_interleave(self.h // self.kv, dim=1)
                v = v.repeat_interleave(self.h // self.kv, dim=1)
            s = q @ k.transpose(-1, -2) / math.sqrt(self.dh)
            if self.alibi:
                slopes = torch.tensor([2 ** (-8 * (i + 1) / self.h) for i in range(self.h)])
                rel = torch.arange(t)[None, :] - torch.arange(t)[:, None]
                s = s + slopes[:, None, None] * rel[None].float()
            if self.causal:
                mask = torch.ones(t, t, dtype=torch.bool).triu(1)
                s = s.masked_fill(mask, float("-inf"))
            y = s.softmax(-1) @ v
            return self.o(y.transpose(1, 2).reshape(b, t, d))

    class SDPA(nn.Module):
        def __init__(self, causal: bool) -> None:
            super().__init__()
            self.qkv = nn.Linear(32, 96)
            self.causal = causal

        def forward(self, x: Any) -> Any:
            b, t, _ = x.shape
            q, k, v = self.qkv(x).view(b, t, 3, 4, 8).permute(2, 0, 3, 1, 4)
            return F.scaled_dot_product_attention(q, k, v, is_causal=self.causal).transpose(1, 2).reshape(b, t, 32)

    class RMSNorm(nn.Module):
        def __init__(self, d: int = 32) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.ones(d))
            self.fc = nn.Linear(d, d)

        def forward(self, x: Any) -> Any:
            y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.w
            return self.fc(y)

    class GRN(nn.Module):
        def __init__(self, c: int = 16) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, c, 3, padding=1)
            self.gamma = nn.Parameter(torch.zeros(1, 1, 1, c))
            self.beta = nn.Parameter(torch.zeros(1, 1, 1, c))

        def forward(self, x: Any) -> Any:
            x = self.conv(x).permute(0, 2, 3, 1)
            gx = torch.norm(x, p=2, dim=(1, 2), keepdim=True)
            nx = gx / (gx.mean(dim=-1, keepdim=True) + 1e-6)
            return (self.gamma * (x * nx) + self.beta + x).permute(0, 3, 1, 2)

    class Bicubic(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x: Any) -> Any:
            return F.interpolate(self.conv(x), scale_factor=2.0, mode="bicubic", align_corners=False)

    class Tok(nn.Module):
        def __init__(self, layer: nn.Module, decoder: bool = False) -> None:
            super().__init__()
            self.emb = nn.Embedding(100, 32)
            self.layer = layer
            self.decoder = decoder

        def forward(self, ids: Any) -> Any:
            x = self.emb(ids)
            return self.layer(x, x) if self.decoder else self.layer(x)

    def img(model_fn: Callable[[], Any], size: int = IMAGE) -> Builder:
        return lambda: (perturb(model_fn().eval()), (torch.randn(1, 3, size, size),))

    def seq(model_fn: Callable[[], Any], d: int = 16) -> Builder:
        return lambda: (perturb(model_fn().eval()), (torch.randn(1, 8, d),))

    def ids(model_fn: Callable[[], Any]) -> Builder:
        return lambda: (perturb(model_fn().eval()), (torch.randint(0, 100, (1, SEQ)),))

    zoo: list[tuple[str, Builder]] = [
        ("nn_convnet_relu", img(ConvNet)),
        ("nn_convnet_silu_gn", img(lambda: ConvNet(nn.SiLU, "gn"))),
        ("nn_convnet_gelu_dw", img(lambda: ConvNet(nn.GELU, depthwise=True))),
        ("nn_convnet_hardswish", img(lambda: ConvNet(nn.Hardswish))),
        ("nn_resnet", img(ResNet)),
        ("nn_unet_transpose", img(UNet)),
        ("nn_unet_nearest", img(lambda: UNet("nearest"))),
        ("nn_unet_bilinear", img(lambda: UNet("bilinear"))),
        ("nn_upsample_bicubic", img(Bicubic)),
        ("nn_grn", img(GRN)),
        ("nn_lstm", seq(lambda: RNN("lstm"))),
        ("nn_lstm_bi2", seq(lambda: RNN("lstm", True, 2))),
        ("nn_gru", seq(lambda: RNN("gru"))),
        ("nn_gru_bi", seq(lambda: RNN("gru", True))),
        ("nn_rnn_tanh", seq(lambda: RNN("rnn"))),
        ("nn_transformer_encoder", ids(lambda: Tok(nn.TransformerEncoderLayer(32, 4, 64, batch_first=True)))),
        ("nn_transformer_encoder_gelu_prenorm", ids(lambda: Tok(nn.TransformerEncoderLayer(
            32, 4, 64, activation="gelu", norm_first=True, batch_first=True)))),
        ("nn_transformer_decoder", ids(lambda: Tok(nn.TransformerDecoderLayer(32, 4, 64, batch_first=True), True))),
        ("nn_multihead_attention", seq(lambda: _MHA(), 32)),
        ("nn_attention_mha", seq(lambda: Attention(), 32)),
        ("nn_attention_mqa", seq(lambda: Attention(kv_heads=1), 32)),
        ("nn_attention_gqa_causal", seq(lambda: Attention(kv_heads=2, causal=True), 32)),
        ("nn_attention_alibi", seq(lambda: Attention(alibi=True, causal=True), 32)),
        ("nn_attention_rotary", seq(lambda: Attention(rotary=True), 32)),
        ("nn_sdpa", seq(lambda: SDPA(False), 32)),
        ("nn_sdpa_causal", seq(lambda: SDPA(True), 32)),
        ("nn_rmsnorm", seq(RMSNorm, 32)),
    ]

    class _MHA(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.MultiheadAttention(32, 4, batch_first=True)

        def forward(self, x: Any) -> Any:
            return self.a(x, x, x, need_weights=False)[0]

    return zoo


# --------------------------------------------------------------------------------------------
# torch.nn zoo: what deployment engineers ship (built from code; torchvision's own: zoo_vision.py)
# --------------------------------------------------------------------------------------------


def deployment_zoo() -> list[tuple[str, Builder]]:
    """Small versions of the architectures that ship to NPUs and that transformers does not
    cover: MobileNetV2/V3, EfficientNet, ResNet-50 bottlenecks, a YOLO neck and decode head, a
    DETR-style decoder, a deeper UNet, ConvNeXt, a conformer block, WaveNet, a CRNN with a CTC
    head, PixelShuffle super-resolution, normalisation variants, Swin window attention with
    roll, an FPN and a point-cloud MLP. Random non-degenerate weights (:func:`perturb`)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    def conv_bn(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1, act: Any = nn.ReLU) -> nn.Module:
        layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
        if act is not None:
            layers.append(act())
        return nn.Sequential(*layers)

    class SqueezeExcite(nn.Module):
        def __init__(self, c: int, gate: Any = nn.Hardsigmoid, act: Any = nn.ReLU) -> None:
            super().__init__()
            mid = max(4, c // 4)
            self.fc1, self.act, self.fc2, self.gate = nn.Conv2d(c, mid, 1), act(), nn.Conv2d(mid, c, 1), gate()

        def forward(self, x: Any) -> Any:
            s = F.adaptive_avg_pool2d(x, 1)
            return x * self.gate(self.fc2(self.act(self.fc1(s))))

    class InvertedResidual(nn.Module):
        """MobileNetV2/V3 block and EfficientNet's MBConv: expand 1x1, depthwise kxk, optional
        squeeze-excite, project 1x1, residual when shapes allow."""

        def __init__(self, cin: int, cout: int, expand: int, k: int, s: int, act: Any, se: Any = None) -> None:
            super().__init__()
            mid = cin * expand
            layers: list[nn.Module] = []
            if expand != 1:
                layers.append(conv_bn(cin, mid, 1, act=act))
            layers.append(conv_bn(mid, mid, k, s, groups=mid, act=act))
            if se is not None:
                layers.append(se(mid))
            layers.append(conv_bn(mid, cout, 1, act=None))
            self.block = nn.Sequential(*layers)
            self.residual = s == 1 and cin == cout

        def forward(self, x: Any) -> Any:
            y = self.block(x)
            return x + y if self.residual else y

    class MobileNet(nn.Module):
        def __init__(self, version: int) -> None:
            super().__init__()
            if version == 2:
                act, se = nn.ReLU6, None
                cfg = [(16, 1, 3, 1, False), (24, 6, 3, 2, False), (24, 6, 3, 1, False), (32, 6, 3, 2, False)]
            else:  # V3: hard-swish, squeeze-excite with a hard-sigmoid gate, 5x5 depthwise
                act, se = nn.Hardswish, SqueezeExcite
                cfg = [(16, 1, 3, 2, True), (24, 4, 3, 2, False), (24, 3, 3, 1, False), (40, 6, 5, 2, True),
                       (40, 6, 5, 1, True)]
            self.stem = conv_bn(3, 16, 3, 2, act=act)
            blocks, c = [], 16
            for cout, e, k, s, use_se in cfg:
                blocks.append(InvertedResidual(c, cout, e, k, s, act, se if use_se else None))
                c = cout
            self.blocks = nn.Sequential(*blocks)
            self.head = nn.Sequential(conv_bn(c, 64, 1, act=act))
            self.fc = nn.Sequential(nn.Linear(64, 32), act(), nn.Dropout(0.2), nn.Linear(32, 10))

        def forward(self, x: Any) -> Any:
            x = self.head(self.blocks(self.stem(x)))
            return self.fc(F.adaptive_avg_pool2d(x, 1).flatten(1))

    class EfficientNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            se = lambda c: SqueezeExcite(c, nn.Sigmoid, nn.SiLU)  # noqa: E731
            self.stem = conv_bn(3, 16, 3, 2, act=nn.SiLU)
            self.blocks = nn.Sequential(InvertedResidual(16, 16, 1, 3, 1, nn.SiLU, se),
                                        InvertedResidual(16, 24, 6, 3, 2, nn.SiLU, se),
                                        InvertedResidual(24, 24, 6, 5, 1, nn.SiLU, se))
            self.head = conv_bn(24, 64, 1, act=nn.SiLU)
            self.fc = nn.Linear(64, 10)

        def forward(self, x: Any) -> Any:
            x = self.head(self.blocks(self.stem(x)))
            return self.fc(x.mean((2, 3)))

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, mid: int, s: int) -> None:
            super().__init__()
            self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, s), conv_bn(mid, mid * 4, 1, act=None))
            self.down = conv_bn(cin, mid * 4, 1, s, act=None) if s != 1 or cin != mid * 4 else None

        def forward(self, x: Any) -> Any:
            return F.relu(self.body(x) + (self.down(x) if self.down is not None else x))

    class ResNet50(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 16, 7, 2, 3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            self.layers = nn.Sequential(Bottleneck(16, 8, 1), Bottleneck(32, 8, 1), Bottleneck(32, 16, 2))
            self.fc = nn.Linear(64, 10)

        def forward(self, x: Any) -> Any:
            return self.fc(torch.flatten(F.adaptive_avg_pool2d(self.layers(self.stem(x)), (1, 1)), 1))

    class YoloNeckHead(nn.Module):
        """A YOLOv5-style detector: a SiLU conv backbone with three strides, a top-down neck
        (nearest upsample, concat), and a decode head: sigmoid, grid offsets, stride and anchor
        arithmetic, the boxes of all levels concatenated."""

        def __init__(self, classes: int = 3, anchors: int = 3) -> None:
            super().__init__()
            s = nn.SiLU
            self.b1 = nn.Sequential(conv_bn(3, 8, 3, 2, act=s), conv_bn(8, 16, 3, 2, act=s))   # /4
            self.b2 = conv_bn(16, 32, 3, 2, act=s)                                           # /8
            self.b3 = conv_bn(32, 64, 3, 2, act=s)                                           # /16
            self.lat3 = conv_bn(64, 32, 1, act=s)
            self.fuse2 = conv_bn(64, 32, 3, act=s)
            self.lat2 = conv_bn(32, 16, 1, act=s)
            self.fuse1 = conv_bn(32, 16, 3, act=s)
            self.na, self.no = anchors, classes + 5
            self.heads = nn.ModuleList(nn.Conv2d(c, anchors * self.no, 1) for c in (16, 32, 32))
            self.strides = (4, 8, 16)
            self.register_buffer("anchor_wh", torch.tensor([[[4.0, 5], [8, 10], [12, 9]],
                                                            [[16, 30], [33, 23], [30, 61]],
                                                            [[62, 45], [59, 119], [116, 90]]]))

        def forward(self, x: Any) -> Any:
            p1 = self.b1(x)
            p2 = self.b2(p1)
            p3 = self.b3(p2)
            t3 = self.lat3(p3)
            n2 = self.fuse2(torch.cat([F.interpolate(t3, scale_factor=2.0, mode="nearest"), p2], 1))
            t2 = self.lat2(n2)
            n1 = self.fuse1(torch.cat([F.interpolate(t2, scale_factor=2.0, mode="nearest"), p1], 1))
            out = []
            for i, feat in enumerate((n1, n2, t3)):
                y = self.heads[i](feat)
                b, _, h, w = y.shape
                y = y.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
                gy, gx = torch.meshgrid(torch.arange(h, dtype=torch.float32), torch.arange(w, dtype=torch.float32),
                                        indexing="ij")
                grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2)
                xy = (y[..., 0:2] * 2 - 0.5 + grid) * self.strides[i]
                wh = (y[..., 2:4] * 2) ** 2 * self.anchor_wh[i].view(1, self.na, 1, 1, 2)
                out.append(torch.cat((xy, wh, y[..., 4:]), -1).view(b, -1, self.no))
            return torch.cat(out, 1)

    class DetrDecoder(nn.Module):
        """DETR-style: conv features flattened to a sequence with a sine position encoding,
        learned object queries, a transformer decoder layer (self- and cross-attention), class
        logits and sigmoid boxes."""

        def __init__(self, d: int = 32, queries: int = 10, classes: int = 5) -> None:
            super().__init__()
            self.backbone = nn.Sequential(conv_bn(3, 16, 3, 2), conv_bn(16, d, 3, 2))
            self.query = nn.Parameter(torch.randn(queries, d))
            self.dec = nn.TransformerDecoderLayer(d, 4, 64, dropout=0.0, batch_first=True)
            self.cls = nn.Linear(d, classes + 1)
            self.box = nn.Sequential(nn.Linear(d, d), nn.ReLU(), nn.Linear(d, 4))
            self.d = d

        def forward(self, x: Any) -> Any:
            f = self.backbone(x)
            b, c, h, w = f.shape
            ys = torch.arange(h, dtype=torch.float32)[:, None].expand(h, w)
            xs = torch.arange(w, dtype=torch.float32)[None, :].expand(h, w)
            freq = 10000 ** (torch.arange(c // 4, dtype=torch.float32) * 4 / c)
            pos = torch.cat([(ys[..., None] / freq).sin(), (ys[..., None] / freq).cos(),
                             (xs[..., None] / freq).sin(), (xs[..., None] / freq).cos()], -1)
            mem = f.flatten(2).transpose(1, 2) + pos.view(1, h * w, c)
            q = self.query.unsqueeze(0).expand(b, -1, -1)
            y = self.dec(q, mem)
            return torch.cat([self.cls(y).softmax(-1), self.box(y).sigmoid()], -1)

    class UNetDeep(nn.Module):
        """A three-level UNet: double convs with BatchNorm, max-pool down, transposed-conv up,
        skip concatenations."""

        def __init__(self) -> None:
            super().__init__()

            def double(cin: int, cout: int) -> nn.Module:
                return nn.Sequential(conv_bn(cin, cout), conv_bn(cout, cout))

            self.e1, self.e2, self.e3 = double(3, 8), double(8, 16), double(16, 32)
            self.up2, self.d2 = nn.ConvTranspose2d(32, 16, 2, 2), double(32, 16)
            self.up1, self.d1 = nn.ConvTranspose2d(16, 8, 2, 2), double(16, 8)
            self.out = nn.Conv2d(8, 2, 1)

        def forward(self, x: Any) -> Any:
            a = self.e1(x)
            b = self.e2(F.max_pool2d(a, 2))
            c = self.e3(F.max_pool2d(b, 2))
            y = self.d2(torch.cat([self.up2(c), b], 1))
            y = self.d1(torch.cat([self.up1(y), a], 1))
            return self.out(y)

    class ConvNeXtBlock(nn.Module):
        def __init__(self, c: int) -> None:
            super().__init__()
            self.dw = nn.Conv2d(c, c, 7, padding=3, groups=c)
            self.norm = nn.LayerNorm(c, eps=1e-6)
            self.pw1, self.pw2 = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)
            self.gamma = nn.Parameter(torch.full((c,), 1e-6))

        def forward(self, x: Any) -> Any:
            y = self.norm(self.dw(x).permute(0, 2, 3, 1))
            y = self.gamma * self.pw2(F.gelu(self.pw1(y)))
            return x + y.permute(0, 3, 1, 2)

    class ConvNeXt(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(3, 16, 4, 4)
            self.stem_norm = nn.GroupNorm(1, 16)  # LayerNorm over channels, as ConvNeXt's channels-first norm
            self.stage1 = ConvNeXtBlock(16)
            self.down = nn.Conv2d(16, 32, 2, 2)
            self.stage2 = ConvNeXtBlock(32)
            self.norm = nn.LayerNorm(32)
            self.fc = nn.Linear(32, 10)

        def forward(self, x: Any) -> Any:
            x = self.stage2(self.down(self.stage1(self.stem_norm(self.stem(x)))))
            return self.fc(self.norm(x.mean((2, 3))))

    class Conformer(nn.Module):
        """A conformer block (macaron feed-forwards, multi-head self-attention, a convolution
        module with GLU, depthwise Conv1d, BatchNorm and SiLU) behind a Conv2d subsampling stem."""

        def __init__(self, d: int = 32) -> None:
            super().__init__()
            self.sub = nn.Sequential(nn.Conv2d(1, 8, 3, 2), nn.ReLU(), nn.Conv2d(8, 8, 3, 2), nn.ReLU())
            self.proj = nn.Linear(8 * 3, d)

            def ff() -> nn.Module:
                return nn.Sequential(nn.LayerNorm(d), nn.Linear(d, 4 * d), nn.SiLU(), nn.Linear(4 * d, d))

            self.ff1, self.ff2 = ff(), ff()
            self.att_norm = nn.LayerNorm(d)
            self.att = nn.MultiheadAttention(d, 4, batch_first=True)
            self.conv_norm = nn.LayerNorm(d)
            self.pw1 = nn.Conv1d(d, 2 * d, 1)
            self.dw = nn.Conv1d(d, d, 15, padding=7, groups=d)
            self.bn = nn.BatchNorm1d(d)
            self.pw2 = nn.Conv1d(d, d, 1)
            self.out_norm = nn.LayerNorm(d)

        def forward(self, feats: Any) -> Any:  # (B, T, 16 mel bins)
            x = self.sub(feats.unsqueeze(1))      # (B, 8, T', 3)
            b, c, t, f = x.shape
            x = self.proj(x.permute(0, 2, 1, 3).reshape(b, t, c * f))
            x = x + 0.5 * self.ff1(x)
            a = self.att_norm(x)
            x = x + self.att(a, a, a, need_weights=False)[0]
            y = self.conv_norm(x).transpose(1, 2)
            y = F.glu(self.pw1(y), dim=1)
            y = self.pw2(F.silu(self.bn(self.dw(y))))
            x = x + y.transpose(1, 2)
            x = x + 0.5 * self.ff2(x)
            return self.out_norm(x)

    class WaveNet(nn.Module):
        """Dilated causal Conv1d stack (left padding), gated tanh x sigmoid activations,
        residual and skip connections."""

        def __init__(self, c: int = 16, dilations: tuple[int, ...] = (1, 2, 4, 8)) -> None:
            super().__init__()
            self.inp = nn.Conv1d(1, c, 1)
            self.dil = nn.ModuleList(nn.Conv1d(c, 2 * c, 2, dilation=d) for d in dilations)
            self.res = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in dilations)
            self.skip = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in dilations)
            self.dilations = dilations
            self.out = nn.Sequential(nn.ReLU(), nn.Conv1d(c, c, 1), nn.ReLU(), nn.Conv1d(c, 8, 1))

        def forward(self, x: Any) -> Any:
            x = self.inp(x)
            skips = 0
            for d, dil, res, skip in zip(self.dilations, self.dil, self.res, self.skip):
                h = dil(F.pad(x, (d, 0)))
                filt, gate = h.chunk(2, dim=1)
                z = torch.tanh(filt) * torch.sigmoid(gate)
                skips = skips + skip(z)
                x = x + res(z)
            return self.out(skips).log_softmax(1)

    class CRNN(nn.Module):
        """Text recognition: a conv stack collapsed over the height into a sequence, a
        bidirectional LSTM and a CTC head (log-softmax over the classes per time step)."""

        def __init__(self, classes: int = 12) -> None:
            super().__init__()
            self.cnn = nn.Sequential(conv_bn(1, 16), nn.MaxPool2d(2), conv_bn(16, 32), nn.MaxPool2d(2),
                                     conv_bn(32, 32), nn.MaxPool2d((2, 1)))
            self.rnn = nn.LSTM(32 * 2, 24, batch_first=True, bidirectional=True)
            self.fc = nn.Linear(48, classes)

        def forward(self, x: Any) -> Any:  # (B, 1, 16, 64)
            f = self.cnn(x)                # (B, 32, 2, 16)
            b, c, h, w = f.shape
            seq = f.permute(0, 3, 1, 2).reshape(b, w, c * h)
            y, _ = self.rnn(seq)
            return self.fc(y).log_softmax(-1)

    class PixelShuffleSR(nn.Module):
        """ESPCN-style x3 super-resolution: convs with tanh, a sub-pixel conv, PixelShuffle,
        plus the bilinear-upsampled input as the residual."""

        def __init__(self, r: int = 3) -> None:
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(3, 16, 5, padding=2), nn.Tanh(), nn.Conv2d(16, 8, 3, padding=1),
                                      nn.Tanh(), nn.Conv2d(8, 3 * r * r, 3, padding=1))
            self.shuffle = nn.PixelShuffle(r)
            self.r = r

        def forward(self, x: Any) -> Any:
            base = F.interpolate(x, scale_factor=float(self.r), mode="bilinear", align_corners=False)
            return (self.shuffle(self.body(x)) + base).clamp(0, 1)

    class NormNet(nn.Module):
        """Convs with one kind of normalisation: GroupNorm, InstanceNorm (affine), LayerNorm over
        (C, H, W), or LayerNorm over channels in channels-last layout."""

        def __init__(self, kind: str) -> None:
            super().__init__()
            self.kind = kind
            self.c1, self.c2 = nn.Conv2d(3, 16, 3, 2, 1), nn.Conv2d(16, 16, 3, 1, 1)
            if kind == "group":
                self.n1, self.n2 = nn.GroupNorm(4, 16), nn.GroupNorm(8, 16)
            elif kind == "instance":
                self.n1, self.n2 = nn.InstanceNorm2d(16, affine=True), nn.InstanceNorm2d(16, affine=True)
            elif kind == "layer_chw":
                self.n1, self.n2 = nn.LayerNorm([16, 16, 16]), nn.LayerNorm([16, 16, 16])
            else:
                self.n1, self.n2 = nn.LayerNorm(16), nn.LayerNorm(16)
            self.fc = nn.Linear(16, 4)

        def norm(self, n: nn.Module, x: Any) -> Any:
            if self.kind == "layer_channels_last":
                return n(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
            return n(x)

        def forward(self, x: Any) -> Any:
            x = F.gelu(self.norm(self.n1, self.c1(x)))
            x = F.gelu(self.norm(self.n2, self.c2(x))) + x
            return self.fc(x.mean((2, 3)))

    class SwinBlock(nn.Module):
        """A Swin-style block: cyclic shift with torch.roll, window partition by view/permute,
        window attention with a relative position bias gathered from a table and the shifted
        window mask, window merge and reverse roll."""

        def __init__(self, d: int = 32, heads: int = 2, window: int = 4, shift: int = 2, size: int = 8) -> None:
            super().__init__()
            self.d, self.h, self.ws, self.shift, self.size = d, heads, window, shift, size
            self.embed = nn.Conv2d(3, d, 4, 4)
            self.norm1, self.norm2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.mlp = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))
            self.bias_table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.02)
            coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window), indexing="ij")).flatten(1)
            rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + (window - 1)
            self.register_buffer("rel_index", rel[..., 0] * (2 * window - 1) + rel[..., 1], persistent=False)
            img = torch.zeros(1, size, size, 1)
            cnt = 0
            for hs in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                for wsl in (slice(0, -window), slice(-window, -shift), slice(-shift, None)):
                    img[:, hs, wsl, :] = cnt
                    cnt += 1
            win = self._partition(img).squeeze(-1)
            mask = win[:, None, :] - win[:, :, None]
            self.register_buffer("attn_mask", mask.masked_fill(mask != 0, -100.0).masked_fill(mask == 0, 0.0),
                                 persistent=False)
            self.head = nn.Linear(d, 10)

        def _partition(self, x: Any) -> Any:
            b, h, w, c = x.shape
            ws = self.ws
            return x.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws * ws, c)

        def forward(self, img: Any) -> Any:
            x = self.embed(img).permute(0, 2, 3, 1)  # (B, 8, 8, d)
            b, hh, ww, d = x.shape
            shortcut = x
            x = torch.roll(self.norm1(x), shifts=(-self.shift, -self.shift), dims=(1, 2))
            win = self._partition(x)  # (B*nW, N, d)
            bw, n, _ = win.shape
            qkv = self.qkv(win).reshape(bw, n, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            attn = (q * (d // self.h) ** -0.5) @ k.transpose(-2, -1)
            bias = self.bias_table[self.rel_index.view(-1)].view(n, n, -1).permute(2, 0, 1)
            attn = attn + bias.unsqueeze(0)
            nw = self.attn_mask.shape[0]
            attn = attn.view(bw // nw, nw, self.h, n, n) + self.attn_mask.view(1, nw, 1, n, n)
            attn = attn.view(-1, self.h, n, n).softmax(-1)
            y = self.proj((attn @ v).transpose(1, 2).reshape(bw, n, d))
            ws = self.ws
            y = y.view(b, hh // ws, ww // ws, ws, ws, d).permute(0, 1, 3, 2, 4, 5).reshape(b, hh, ww, d)
            x = shortcut + torch.roll(y, shifts=(self.shift, self.shift), dims=(1, 2))
            x = x + self.mlp(self.norm2(x))
            return self.head(x.mean((1, 2)))

    class FPN(nn.Module):
        """A feature pyramid (no deformable convs): a strided backbone, lateral 1x1 convs,
        top-down nearest upsampling and addition, 3x3 output convs, an extra max-pooled level,
        and a shared classification head over all levels."""

        def __init__(self, d: int = 16) -> None:
            super().__init__()
            self.c2 = nn.Sequential(conv_bn(3, 8, 3, 2), conv_bn(8, 16, 3, 2))
            self.c3, self.c4 = conv_bn(16, 24, 3, 2), conv_bn(24, 32, 3, 2)
            self.lat = nn.ModuleList(nn.Conv2d(c, d, 1) for c in (16, 24, 32))
            self.smooth = nn.ModuleList(nn.Conv2d(d, d, 3, padding=1) for _ in range(3))
            self.cls = nn.Conv2d(d, 4, 3, padding=1)

        def forward(self, x: Any) -> Any:
            c2 = self.c2(x)
            c3 = self.c3(c2)
            c4 = self.c4(c3)
            p4 = self.lat[2](c4)
            p3 = self.lat[1](c3) + F.interpolate(p4, size=c3.shape[-2:], mode="nearest")
            p2 = self.lat[0](c2) + F.interpolate(p3, size=c2.shape[-2:], mode="nearest")
            levels = [s(p) for s, p in zip(self.smooth, (p2, p3, p4))]
            levels.append(F.max_pool2d(levels[-1], 1, 2))
            return torch.cat([self.cls(p).flatten(2) for p in levels], 2).sigmoid()

    class PointNet(nn.Module):
        """A point-cloud MLP: shared per-point layers as Conv1d with BatchNorm, a max-pool over
        the points, and a classifier."""

        def __init__(self) -> None:
            super().__init__()
            self.mlp = nn.Sequential(nn.Conv1d(3, 16, 1), nn.BatchNorm1d(16), nn.ReLU(),
                                     nn.Conv1d(16, 32, 1), nn.BatchNorm1d(32), nn.ReLU(),
                                     nn.Conv1d(32, 64, 1), nn.BatchNorm1d(64), nn.ReLU())
            self.fc = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 8))

        def forward(self, pts: Any) -> Any:  # (B, 3, N)
            return self.fc(torch.max(self.mlp(pts), 2)[0]).log_softmax(-1)

    def make(model_fn: Callable[[], Any], *shape: int) -> Builder:
        def build() -> tuple[Any, tuple[Any, ...]]:
            return perturb(model_fn().eval()), (torch.randn(*shape),)

        return build

    return [
        ("nn_mobilenet_v2", make(lambda: MobileNet(2), 1, 3, IMAGE, IMAGE)),
        ("nn_mobilenet_v3", make(lambda: MobileNet(3), 1, 3, IMAGE, IMAGE)),
        ("nn_efficientnet", make(EfficientNet, 1, 3, IMAGE, IMAGE)),
        ("nn_resnet50_bottleneck", make(ResNet50, 1, 3, IMAGE, IMAGE)),
        ("nn_yolo_neck_head", make(YoloNeckHead, 1, 3, 64, 64)),
        ("nn_detr_decoder", make(DetrDecoder, 1, 3, IMAGE, IMAGE)),
        ("nn_unet_skips", make(UNetDeep, 1, 3, IMAGE, IMAGE)),
        ("nn_convnext", make(ConvNeXt, 1, 3, IMAGE, IMAGE)),
        ("nn_conformer", make(Conformer, 1, 32, 16)),
        ("nn_wavenet", make(WaveNet, 1, 1, 64)),
        ("nn_crnn_ctc", make(CRNN, 1, 1, 16, 64)),
        ("nn_pixelshuffle_sr", make(PixelShuffleSR, 1, 3, 16, 16)),
        ("nn_groupnorm", make(lambda: NormNet("group"), 1, 3, IMAGE, IMAGE)),
        ("nn_instancenorm", make(lambda: NormNet("instance"), 1, 3, IMAGE, IMAGE)),
        ("nn_layernorm_chw", make(lambda: NormNet("layer_chw"), 1, 3, IMAGE, IMAGE)),
        ("nn_layernorm_channels_last", make(lambda: NormNet("layer_channels_last"), 1, 3, IMAGE, IMAGE)),
        ("nn_swin_window", make(SwinBlock, 1, 3, IMAGE, IMAGE)),
        ("nn_fpn", make(FPN, 1, 3, 64, 64)),
        ("nn_pointnet", make(PointNet, 1, 3, 128)),
    ]


#: the small torch.nn models the CI subset of the harness runs (tests/oracle/test_zoo_agreement.py)
CI_SUBSET = ("nn_convnet_relu", "nn_unet_nearest", "nn_gru", "nn_attention_mqa", "nn_rmsnorm", "nn_upsample_bicubic")


# --------------------------------------------------------------------------------------------
# transformers zoo
# --------------------------------------------------------------------------------------------

_LAYERS = ("num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
           "num_encoder_layers", "num_decoder_layers", "num_blocks", "n_layers_encoder")
_HEADS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads", "decoder_attention_heads",
          "num_heads", "attention_heads")
_HIDDEN = ("hidden_size", "d_model", "n_embd", "dim", "embed_dim", "hidden_dim", "embedding_size",
           "word_embed_proj_dim", "projection_dim", "d_embed", "text_embed_dim", "vision_embed_dim")
_FFN = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff", "n_inner",
        "ffn_hidden_size", "mlp_dim", "intermediate_dim", "moe_intermediate_size",
        "shared_expert_intermediate_size", "linear_units")
_POS = ("max_position_embeddings", "n_positions", "max_seq_len", "max_sequence_length",
        "n_ctx", "max_source_positions", "max_target_positions", "seq_length")


def _shrink(cfg: Any, *, hidden: int = 32, heads: int = 2, widths: bool = True) -> None:
    """Make a transformers config small: 1 layer, ``hidden`` wide, ``heads`` heads, a 256-word
    vocabulary, 32x32 images; nested sub-configs (text/vision/audio) the same way. With
    ``widths=False`` only the depth (1 layer, 1 block per stage) and the vocabulary shrink: the
    architecture's own widths, heads and image size stay consistent with each other (the
    fallback for configs whose derived sizes do not follow a narrower width)."""
    d = cfg.to_dict()
    for key, value in d.items():
        if isinstance(value, bool) or value is None:
            continue
        sub = getattr(cfg, key, None)
        if hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
            _shrink(sub, hidden=hidden, heads=heads, widths=widths)
            continue
        new: Any = None
        if not widths:
            if isinstance(value, int) and key in _LAYERS and value > 1:
                new = 1
            elif isinstance(value, int) and key == "vocab_size" and value > VOCAB:
                new = VOCAB
            elif isinstance(value, int) and key.endswith("_token_id") and value >= VOCAB:
                new = VOCAB - 1 - (hash(key) % 8)
            elif (isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
                  and key in ("depths", "num_layers", "layers", "block_repeats", "num_blocks")):
                new = [1] * len(value)
        elif isinstance(value, int):
            if key in _LAYERS and value > 1:
                new = 1
            elif key in _HEADS:
                new = heads
            elif key == "num_key_value_heads":
                new = 1
            elif key in _HIDDEN:
                new = hidden
            elif key in _FFN:
                new = hidden * 2
            elif key == "head_dim":
                new = hidden // heads
            elif key == "vocab_size" and value > VOCAB:
                new = VOCAB
            elif key in _POS and value > 64:
                new = 64
            elif key in ("image_size", "img_size") and value > IMAGE:
                new = IMAGE
            elif key in ("num_experts", "num_local_experts", "n_routed_experts") and value > 2:
                new = 2
            elif key in ("num_experts_per_tok", "top_k", "moe_topk") and value > 1:
                new = 1
            elif key.endswith("_token_id") and value >= VOCAB:
                new = VOCAB - 1 - (hash(key) % 8)
            elif key in ("num_labels",):
                new = 2
        elif isinstance(value, list) and value and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            if key in ("depths", "num_layers", "layers", "block_repeats", "num_blocks"):
                new = [1] * len(value)
            elif key in ("hidden_sizes", "embed_dims", "dims", "hidden_dims", "channels", "embed_dim"):
                new = [16 * (i + 1) for i in range(len(value))]
            elif key in ("num_heads", "num_attention_heads", "heads"):
                new = [1] * len(value)
        if new is not None and new != value:
            try:
                setattr(cfg, key, new)
            except Exception:  # noqa: BLE001 - a property without a setter: keep the value
                pass
    if widths and isinstance(getattr(cfg, "qk_rope_head_dim", None), int):
        _shrink_latent_attention(cfg, hidden // heads)
    for k in ("use_cache", "output_attentions", "output_hidden_states"):
        try:
            setattr(cfg, k, False)
        except Exception:  # noqa: BLE001
            pass
    try:
        cfg._attn_implementation = "eager"
    except Exception:  # noqa: BLE001
        pass


def _shrink_latent_attention(cfg: Any, head: int) -> None:
    """Multi-head latent attention (DeepSeek-V2/V3, GLM-4-MoE-Lite, Kimi, ...) sizes its query
    and key/value projections by low ranks and splits every head into a rotary and a plain part;
    its rotary embedding takes ``head_dim`` as the rotary part, and every head has its own keys.
    Scaled together to a ``head``-wide head (the defaults are 512/768 ranks, 64+192 head parts)."""
    sizes = {"kv_lora_rank": head, "q_lora_rank": head, "qk_rope_head_dim": head // 2,
             "qk_nope_head_dim": head // 2, "v_head_dim": head, "qk_head_dim": head,
             "head_dim": head // 2, "num_key_value_heads": getattr(cfg, "num_attention_heads", None)}
    for key, value in sizes.items():
        if value is not None and (getattr(cfg, key, None) is not None or key in ("head_dim", "num_key_value_heads")):
            try:
                setattr(cfg, key, value)
            except Exception:  # noqa: BLE001 - a derived property: keep it
                pass


def _wrap(model: Any, keys: tuple[str, ...]) -> Any:
    import torch

    class Wrapped(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = model
            self.keys = keys

        def forward(self, *args: Any) -> Any:
            out = self.inner(**dict(zip(self.keys, args)))
            return _first_tensor(out)

    return Wrapped()


def _first_tensor(out: Any) -> Any:
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "to_tuple"):
        out = out.to_tuple()
    if isinstance(out, dict):
        out = tuple(out.values())
    if isinstance(out, (tuple, list)):
        for o in out:
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


def _inputs_for(model: Any, cfg: Any) -> dict[str, Any]:
    """Example inputs for a transformers model, from its forward() signature and main input."""
    import inspect

    import torch

    params = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    feeds: dict[str, Any] = {}
    text_cfg = getattr(cfg, "text_config", None) or cfg
    vocab = min(getattr(text_cfg, "vocab_size", VOCAB) or VOCAB, VOCAB)
    vision_cfg = getattr(cfg, "vision_config", None) or cfg
    channels = getattr(vision_cfg, "num_channels", 3) or 3
    size = getattr(vision_cfg, "image_size", IMAGE) or IMAGE
    if isinstance(size, (list, tuple)):
        size = size[0]
    size = int(size) if isinstance(size, int) else IMAGE
    if main == "input_ids" or "input_ids" in params and main not in params:
        feeds["input_ids"] = torch.randint(3, max(4, vocab - 10), (1, SEQ))
    if main == "pixel_values" or ("pixel_values" in params and "input_ids" in feeds):
        feeds["pixel_values"] = torch.randn(1, channels, size, size)
    if main == "input_values":
        feeds["input_values"] = torch.randn(1, 4000)
    if main == "input_features":
        mel = getattr(cfg, "num_mel_bins", None) or getattr(cfg, "feature_size", 80) or 80
        # (batch, mel, frames) for Whisper-style encoders; the others read (batch, frames, mel):
        # as many frames as mel bins fits both layouts
        frames = 2 * getattr(cfg, "max_source_positions", 32) if hasattr(cfg, "max_source_positions") else mel
        feeds["input_features"] = torch.randn(1, mel, frames)
    if "attention_mask" in params and "input_ids" in feeds:  # as real callers do (the padding-mask path)
        feeds["attention_mask"] = torch.ones(1, SEQ, dtype=torch.long)
    if "decoder_input_ids" in params and feeds:  # encoder-decoders, text or speech (whisper)
        feeds["decoder_input_ids"] = torch.randint(3, max(4, vocab - 10), (1, 8))
    if not feeds and main in params:
        feeds[main] = torch.randint(3, max(4, vocab - 10), (1, SEQ))
    return feeds


def transformers_zoo(limit: int | None = None) -> tuple[list[tuple[str, Builder]], dict[str, str]]:
    """A builder per transformers base-model architecture (``MODEL_MAPPING_NAMES``), and the
    architectures skipped before building with the reason. Building may still fail later (the
    harness records that as a skip with the error)."""
    from transformers.models.auto import modeling_auto

    builders: list[tuple[str, Builder]] = []
    skipped: dict[str, str] = {}
    seen_classes: set[str] = set()
    for model_type, class_name in sorted(modeling_auto.MODEL_MAPPING_NAMES.items()):
        if isinstance(class_name, (list, tuple)):
            class_name = class_name[0]
        if class_name in seen_classes:
            skipped[model_type] = f"same class {class_name} as another model type"
            continue
        seen_classes.add(class_name)
        # the class is imported when the builder runs: importing all ~600 modeling modules up
        # front cost every export process minutes of start-up on a loaded machine
        builders.append((f"hf_{model_type}", _hf_builder(model_type, class_name)))
        if limit and len(builders) >= limit:
            break
    return builders, skipped


class NotImportable(RuntimeError):
    """The architecture's class cannot be imported here (an optional dependency is missing)."""


#: the fallback build (the architecture's own widths, one layer) is tried up to this size only
FALLBACK_MAX_PARAMETERS = 10_000_000


def _parameter_count(cls: Any, cfg: Any) -> Optional[int]:
    """Parameters of ``cls(cfg)`` counted on the meta device (no memory, no init); None when the
    model cannot be built there."""
    import torch

    try:
        with torch.device("meta"):
            model = cls(cfg)
        return int(sum(p.numel() for p in model.parameters()))
    except Exception:  # noqa: BLE001 - an __init__ that needs real tensors: unknown
        return None


def _hf_builder(model_type: str, class_name: str) -> Builder:
    def attempt(widths: bool) -> tuple[Any, tuple[Any, ...]]:
        import torch
        import transformers
        from transformers import AutoConfig

        cls = getattr(transformers, class_name, None)
        if cls is None:
            raise NotImportable(f"{class_name} not importable here (missing optional dependency)")

        cfg = AutoConfig.for_model(model_type)
        _shrink(cfg, widths=widths)
        if not widths:
            n = _parameter_count(cls, cfg)
            if n is not None and n > FALLBACK_MAX_PARAMETERS:
                raise RuntimeError(f"{n / 1e6:.0f}M parameters with its own widths (limit "
                                   f"{FALLBACK_MAX_PARAMETERS / 1e6:.0f}M)")
        torch.manual_seed(0)
        model = cls(cfg).eval()
        perturb(model)
        feeds = _inputs_for(model, cfg)
        if not feeds:
            raise RuntimeError("no example inputs known for its forward()")
        with torch.no_grad():
            try:
                out = _first_tensor(model(**feeds))
            except Exception:
                if "input_features" not in feeds:
                    raise
                # audio features are (batch, mel, frames) for some encoders, (batch, frames,
                # mel) for others: the other layout
                feeds["input_features"] = feeds["input_features"].transpose(1, 2).contiguous()
                out = _first_tensor(model(**feeds))
        if out is None:
            raise RuntimeError("forward() returned no tensor")
        keys = tuple(feeds)
        return _wrap(model, keys).eval(), tuple(feeds[k] for k in keys)

    def build() -> tuple[Any, tuple[Any, ...]]:
        """Hidden size 32 first; when that config does not build or run (sizes derived from the
        default width), one layer with the architecture's own widths."""
        try:
            return attempt(widths=True)
        except NotImportable:
            raise
        except Exception as narrow:  # noqa: BLE001 - the fallback below says why both failed
            if type(narrow).__name__ == "_Timeout":  # the harness's build time limit: no second try
                raise
            first = f"{type(narrow).__name__}: " + (str(narrow).strip().splitlines() or [""])[0][:200]
        try:
            return attempt(widths=False)
        except Exception as wide:  # noqa: BLE001
            second = f"{type(wide).__name__}: " + (str(wide).strip().splitlines() or [""])[0][:200]
            raise RuntimeError(f"{first}; with its own widths and one layer: {second}") from None

    return build


def all_builders(which: str = "all") -> Iterator[tuple[str, Builder]]:
    if which in ("all", "torch"):
        yield from torch_zoo()
        yield from deployment_zoo()
    if which in ("all", "transformers"):
        yield from transformers_zoo()[0]
    if which in ("all", "vision"):
        import zoo_vision

        yield from zoo_vision.vision_zoo()
