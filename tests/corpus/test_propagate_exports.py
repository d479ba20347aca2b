"""The shape arithmetic PyTorch models trace into their graphs folds, and the compute is judged on
static shapes (issue 22): four model classes that had every later node called dynamic, exported
with both exporters. Verified against rknn-toolkit2 2.5.0 (rk3588): no CPU row for any of them but
the ops the tables list as CPU ops."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from pytest_npucheck.check import check_graph
from pytest_npucheck.graph import load_graph
from pytest_npucheck.tables import Catalog

TARGETS = ("rknn@2.5.0/rk3588", "qnn@2.51/htp-v73")
# ops of the shape arithmetic: with static inputs every one of them folds
SHAPE_OPS = {"Shape", "Gather", "Unsqueeze", "Squeeze", "Concat", "Slice", "Div", "Mod", "Add", "Sub", "Mul", "Cast",
             "Constant", "ConstantOfShape", "Where", "Equal", "Range", "Reshape", "Expand", "Neg", "Ceil", "Floor"}


class SwinWindows(nn.Module):
    """Swin-style window partition and reverse, the padding and view sizes computed from x.shape."""

    def __init__(self, dim: int = 16, ws: int = 4) -> None:
        super().__init__()
        self.ws = ws
        self.norm = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B H W C
        B, H, W, C = x.shape
        ws = self.ws
        x = F.pad(self.norm(x), (0, 0, 0, (ws - W % ws) % ws, 0, (ws - H % ws) % ws))
        Hp, Wp = x.shape[1], x.shape[2]
        w = x.view(B, Hp // ws, ws, Wp // ws, ws, C).permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, ws * ws, C)
        q, k, v = self.qkv(w).reshape(w.shape[0], w.shape[1], 3, C).permute(2, 0, 1, 3)
        a = self.proj(torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(C), dim=-1) @ v)
        a = a.view(B, Hp // ws, Wp // ws, ws, ws, C).permute(0, 1, 3, 2, 4, 5).contiguous().view(B, Hp, Wp, C)
        return a[:, :H, :W, :]


class EncodecPad(nn.Module):
    """EnCodec-style convolution padding: the extra padding from math.ceil of length / stride."""

    def __init__(self, c: int = 8, k: int = 7, stride: int = 2) -> None:
        super().__init__()
        self.conv = nn.Conv1d(c, c, k, stride)
        self.k, self.stride = k, stride

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        length = x.shape[-1]
        padding_total = self.k - self.stride
        n_frames = (length - self.k + padding_total) / self.stride + 1
        extra = (math.ceil(n_frames) - 1) * self.stride + (self.k - padding_total) - length
        return F.elu(self.conv(F.pad(x, (padding_total, extra))))


class SelectiveScan(nn.Module):
    """An unrolled selective scan: a Python loop over the sequence, slicing and stacking."""

    def __init__(self, d: int = 8, n: int = 4) -> None:
        super().__init__()
        self.A = nn.Parameter(-torch.rand(d, n))
        self.inp, self.Bp, self.Cp = nn.Linear(d, d), nn.Linear(d, n), nn.Linear(d, n)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B L D
        B, L, D = x.shape
        delta = F.softplus(self.inp(x))
        Bm, Cm = self.Bp(x), self.Cp(x)
        dA = torch.exp(delta.unsqueeze(-1) * self.A)
        dBx = delta.unsqueeze(-1) * Bm.unsqueeze(2) * x.unsqueeze(-1)
        h = torch.zeros(B, D, self.A.shape[1])
        ys = []
        for i in range(L):
            h = dA[:, i] * h + dBx[:, i]
            ys.append((h * Cm[:, i].unsqueeze(1)).sum(-1))
        return torch.stack(ys, dim=1)


class DynamicConv(nn.Module):
    """A per-sample (dynamic) convolution built with F.unfold."""

    def __init__(self, c: int = 8, k: int = 3) -> None:
        super().__init__()
        self.k = k
        self.gen = nn.Linear(c, c * c * k * k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # B C H W
        B, C, H, W = x.shape
        weights = self.gen(x.mean((2, 3))).view(B, C, C * self.k * self.k)
        cols = F.unfold(x, self.k, padding=self.k // 2)
        return torch.bmm(weights, cols).view(B, C, H, W)


CASES = {
    "swin": (SwinWindows, (1, 14, 14, 16)),
    "encodec": (EncodecPad, (1, 8, 101)),
    "scan": (SelectiveScan, (1, 12, 8)),
    "dynconv": (DynamicConv, (1, 8, 10, 10)),
}


@pytest.fixture(scope="module")
def tables():
    catalog = Catalog.discover()
    return [catalog.table(t) for t in TARGETS]


@pytest.mark.parametrize("exporter,opset", [("torchscript", 17), ("dynamo", 18)])
@pytest.mark.parametrize("case", sorted(CASES))
def test_shape_arithmetic_folds_and_compute_is_judged_on_static_shapes(case, exporter, opset, tables, tmp_path):
    torch.manual_seed(0)
    cls, shape = CASES[case]
    path = tmp_path / f"{case}.{exporter}.onnx"
    torch.onnx.export(cls().eval(), (torch.randn(*shape),), path, opset_version=opset, dynamo=exporter == "dynamo")
    facts = load_graph(path)
    not_static = [name for name, t in facts.tensors.items() if not t.static]
    assert not not_static, not_static  # every shape worked out, none dynamic
    assert facts.shape_unknown_at == ()
    for result in check_graph(facts, tables):
        for n in result.nodes:
            rules = {r.rule for r in n.reasons}
            # nothing is called dynamic or unknown, and no int64 shape value is judged as compute
            assert not rules & {"static_shape", "known_shape", "shape_unknown"}, (result.target, n.name, n.reasons)
            node = facts.nodes[n.index]
            t = facts.tensor(node.outputs[0]) if node.outputs else None
            if t is not None and t.dtype == "int64" and node.op_type in SHAPE_OPS:
                assert n.verdict == "folded", (result.target, n.name, n.verdict, n.reasons)
