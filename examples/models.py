"""Small real models for the demo, built from code with random weights (no downloads)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class TinyResNet(nn.Module):
    """ResNet-style classifier: Conv/BN/ReLU/residual Add/MaxPool/global pooling/Linear."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        self.layer1 = BasicBlock(16, 16)
        self.layer2 = BasicBlock(16, 32, stride=2)
        self.layer3 = BasicBlock(32, 64, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer3(self.layer2(self.layer1(self.stem(x))))
        return self.fc(torch.flatten(self.pool(x), 1))


class DoubleConv(nn.Module):
    def __init__(self, cin: int, cout: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3)
        self.conv2 = nn.Conv2d(cout, cout, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # reflect padding keeps borders natural in image-to-image models
        x = F.gelu(self.conv1(F.pad(x, (1, 1, 1, 1), mode="reflect")))
        return F.gelu(self.conv2(F.pad(x, (1, 1, 1, 1), mode="reflect")))


class SmallUNet(nn.Module):
    """UNet with reflect padding, exact (erf) GELU and bicubic upsampling: a common image-to-image shape."""

    def __init__(self) -> None:
        super().__init__()
        self.down1 = DoubleConv(3, 16)
        self.down2 = DoubleConv(16, 32)
        self.up1 = DoubleConv(48, 16)
        self.head = nn.Conv2d(16, 3, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        d1 = self.down1(x)
        d2 = self.down2(F.max_pool2d(d1, 2))
        u = F.interpolate(d2, scale_factor=2, mode="bicubic", align_corners=False)
        return self.head(self.up1(torch.cat([u, d1], dim=1)))


class DetectionHead(nn.Module):
    """Anchor-free detection head that keeps the top-k scoring boxes (TopK runs where?)."""

    def __init__(self, k: int = 20) -> None:
        super().__init__()
        self.k = k
        self.backbone = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.cls = nn.Conv2d(32, 4, 1)
        self.box = nn.Conv2d(32, 4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        f = self.backbone(x)
        scores = torch.sigmoid(self.cls(f)).flatten(2).amax(1)  # (N, H*W)
        boxes = self.box(f).flatten(2).transpose(1, 2)  # (N, H*W, 4)
        top, idx = torch.topk(scores, self.k, dim=1)
        return top, torch.gather(boxes, 1, idx.unsqueeze(-1).expand(-1, -1, 4))


class TinyEncoder(nn.Module):
    """Transformer encoder (self-attention, LayerNorm, GELU MLP) over a token sequence."""

    def __init__(self, dim: int = 64, depth: int = 2, heads: int = 4, vocab: int = 100) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        layer = nn.TransformerEncoderLayer(dim, heads, dim * 2, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, depth, enable_nested_tensor=False)
        self.head = nn.Linear(dim, 2)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(self.embed(tokens)).mean(1))
