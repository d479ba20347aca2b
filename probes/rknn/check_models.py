"""Agreement check on real architectures: export small torch models, compile them with RKNN.

Builds ~10 architectures from code (random weights, no torchvision), exports each with
``torch.onnx.export`` (``dynamo=True``, the default, and ``dynamo=False``; each at torch's default
opset and at an explicit opset RKNN accepts: 18 for dynamo, 17 for TorchScript), compiles every
ONNX file with rknn-toolkit2 through :mod:`pytest_npucheck.toolchains.rknn.adapter` and writes the real
per-node placement to ``probes/rknn/<version>/<soc>.models.json``.  The ONNX files go to a
temporary directory (or ``--keep-onnx DIR``); they are not part of the repository.

    python probes/rknn/check_models.py --soc rk3588 --python /path/to/rknn-venv/bin/python

The main venv (torch, onnx) runs this script; rknn runs in its own venv.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import hashlib
import io
import json
import math
import os
import sys
import tempfile
import warnings
from collections import Counter
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any, Callable

import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from pytest_npucheck.toolchains.rknn import adapter as oracle  # noqa: E402

torch.manual_seed(0)


# ------------------------------------------------------------------------------------------------
# architectures
# ------------------------------------------------------------------------------------------------


def conv_bn_act(cin: int, cout: int, k: int = 3, s: int = 1, groups: int = 1,
                act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """Conv -> BatchNorm -> activation."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
                               nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class BasicBlock(nn.Module):
    """ResNet basic block."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = conv_bn_act(cin, cout, 3, stride)
        self.c2 = conv_bn_act(cout, cout, 3, 1, act=None)
        self.down = (conv_bn_act(cin, cout, 1, stride, act=None)
                     if stride != 1 or cin != cout else nn.Identity())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.c2(self.c1(x)) + self.down(x))


class ResNetTiny(nn.Module):
    """ResNet-like classifier: stem conv 7x7/2, maxpool, 3 stages, GAP, FC."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn_act(3, 16, 7, 2), nn.MaxPool2d(3, 2, 1))
        self.layers = nn.Sequential(BasicBlock(16, 16, 1), BasicBlock(16, 32, 2),
                                    BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layers(self.stem(x))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(x)


class SqueezeExcite(nn.Module):
    """SE block with hard-sigmoid gate (MobileNetV3 style)."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // 4, 1)
        self.fc2 = nn.Conv2d(c // 4, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = F.adaptive_avg_pool2d(x, 1)
        return x * F.hardsigmoid(self.fc2(F.relu(self.fc1(s))))


class InvertedResidual(nn.Module):
    """MobileNetV2/V3 inverted residual with depthwise conv."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, act: type[nn.Module],
                 se: bool) -> None:
        super().__init__()
        mid = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.block = nn.Sequential(
            conv_bn_act(cin, mid, 1, act=act),
            conv_bn_act(mid, mid, 3, stride, groups=mid, act=act),
            SqueezeExcite(mid) if se else nn.Identity(),
            conv_bn_act(mid, cout, 1, act=None))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.block(x)
        return x + y if self.use_res else y


class MobileNetTiny(nn.Module):
    """MobileNetV2/V3-like: ReLU6 and Hardswish blocks, SE, dropout classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn_act(3, 16, 3, 2, act=nn.Hardswish)
        self.blocks = nn.Sequential(
            InvertedResidual(16, 16, 1, 2, nn.ReLU6, False),
            InvertedResidual(16, 24, 2, 4, nn.ReLU6, False),
            InvertedResidual(24, 24, 1, 4, nn.Hardswish, True),
            InvertedResidual(24, 40, 2, 4, nn.Hardswish, True))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(40, 64), nn.Hardswish(),
                                  nn.Dropout(0.2), nn.Linear(64, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.head(F.adaptive_avg_pool2d(x, 1))


class UNetTiny(nn.Module):
    """UNet with reflect padding, max-pool down, bilinear up (one path align_corners=True)."""

    def __init__(self) -> None:
        super().__init__()

        def block(cin: int, cout: int) -> nn.Sequential:
            return nn.Sequential(
                nn.Conv2d(cin, cout, 3, padding=1, padding_mode="reflect"), nn.BatchNorm2d(cout),
                nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1, padding_mode="reflect"),
                nn.ReLU())
        self.e1, self.e2, self.e3 = block(3, 8), block(8, 16), block(16, 32)
        self.d2, self.d1 = block(32 + 16, 16), block(16 + 8, 8)
        self.out = nn.Conv2d(8, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.e1(x)
        e2 = self.e2(F.max_pool2d(e1, 2))
        e3 = self.e3(F.max_pool2d(e2, 2))
        u2 = F.interpolate(e3, scale_factor=2, mode="bilinear", align_corners=False)
        d2 = self.d2(torch.cat([u2, e2], 1))
        u1 = F.interpolate(d2, scale_factor=2, mode="bilinear", align_corners=True)
        d1 = self.d1(torch.cat([u1, e1], 1))
        return torch.sigmoid(self.out(d1))


class EncoderBlock(nn.Module):
    """Pre-norm transformer encoder block with hand-written attention and erf-GELU MLP."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        qkv = self.qkv(self.n1(x)).reshape(b, n, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)
        att = (q @ k.transpose(-2, -1)) * (d // self.heads) ** -0.5
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
        x = x + self.proj(y)
        return x + self.mlp(self.n2(x))


class ViTTiny(nn.Module):
    """ViT: patch-embed conv, cls token, position embedding, 2 encoder blocks, head."""

    def __init__(self, dim: int = 64, depth: int = 2, heads: int = 4) -> None:
        super().__init__()
        self.patch = nn.Conv2d(3, dim, 8, 8)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, dim) * 0.02)
        self.blocks = nn.Sequential(*[EncoderBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        x = self.norm(self.blocks(x))
        return self.head(x[:, 0])


class BertTiny(nn.Module):
    """BERT-like encoder: token/position embeddings (int64 ids), nn.TransformerEncoder (GELU)."""

    def __init__(self, vocab: int = 100, dim: int = 64, seq: int = 16) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.norm = nn.LayerNorm(dim)
        layer = nn.TransformerEncoderLayer(dim, 4, 4 * dim, dropout=0.1, activation="gelu",
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.pool = nn.Linear(dim, dim)
        self.register_buffer("positions", torch.arange(seq).unsqueeze(0), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.norm(self.tok(ids) + self.pos(self.positions))
        x = self.enc(x)
        return torch.tanh(self.pool(x[:, 0]))


class GPTTiny(nn.Module):
    """Decoder-only block with a causal mask (triu + masked_fill) and tanh-GELU."""

    def __init__(self, vocab: int = 100, dim: int = 64, seq: int = 16, heads: int = 4) -> None:
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.n1, self.n2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * dim, dim))
        self.lm = nn.Linear(dim, vocab)
        self.register_buffer("mask", torch.triu(torch.ones(seq, seq, dtype=torch.bool), 1),
                             persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids)
        b, n, d = x.shape
        q, k, v = self.qkv(self.n1(x)).split(d, -1)
        q, k, v = (t.reshape(b, n, self.heads, -1).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        att = att.masked_fill(self.mask, float("-inf")).softmax(-1)
        x = x + self.proj((att @ v).transpose(1, 2).reshape(b, n, d))
        x = x + self.mlp(self.n2(x))
        return self.lm(x)


class RecurrentNet(nn.Module):
    """LSTM (bidirectional) followed by a GRU and a linear head."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(32, 48, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(96, 32, batch_first=True)
        self.fc = nn.Linear(32, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.lstm(x)
        y, _ = self.gru(y)
        return self.fc(y[:, -1])


class DetectTiny(nn.Module):
    """YOLO-style backbone (SiLU, SPPF max-pools, nearest upsample + concat) and decode head."""

    def __init__(self, nc: int = 4, na: int = 3) -> None:
        super().__init__()
        self.na, self.no = na, nc + 5
        self.b1 = conv_bn_act(3, 16, 3, 2, act=nn.SiLU)
        self.b2 = conv_bn_act(16, 32, 3, 2, act=nn.SiLU)
        self.b3 = conv_bn_act(32, 64, 3, 2, act=nn.SiLU)
        self.sppf_cv = conv_bn_act(64, 32, 1, act=nn.SiLU)
        self.sppf_out = conv_bn_act(128, 64, 1, act=nn.SiLU)
        self.lat = conv_bn_act(64 + 32, 32, 1, act=nn.SiLU)
        self.head = nn.Conv2d(32, na * self.no, 1)
        self.register_buffer("anchors", torch.rand(1, na, 1, 1, 2) * 4 + 1, persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p2 = self.b2(self.b1(x))
        p3 = self.b3(p2)
        y = self.sppf_cv(p3)
        m1 = F.max_pool2d(y, 5, 1, 2)
        m2 = F.max_pool2d(m1, 5, 1, 2)
        m3 = F.max_pool2d(m2, 5, 1, 2)
        p3 = self.sppf_out(torch.cat([y, m1, m2, m3], 1))
        up = F.interpolate(p3, scale_factor=2.0, mode="nearest")
        f = self.lat(torch.cat([up, p2], 1))
        out = self.head(f)
        b, _, h, w = out.shape
        out = out.view(b, self.na, self.no, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        gy, gx = torch.meshgrid(torch.arange(h), torch.arange(w), indexing="ij")
        grid = torch.stack((gx, gy), 2).view(1, 1, h, w, 2).float()
        xy = (out[..., :2] * 2 - 0.5 + grid) * 4.0
        wh = (out[..., 2:4] * 2) ** 2 * self.anchors
        return torch.cat((xy, wh, out[..., 4:]), -1).view(b, -1, self.no)


class WarpTopK(nn.Module):
    """Flow-warp with F.grid_sample, then top-k scoring over flattened positions."""

    def __init__(self) -> None:
        super().__init__()
        self.flow = nn.Conv2d(3, 2, 3, padding=1)
        self.score = nn.Conv2d(3, 1, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        b, _, h, w = x.shape
        ys = torch.linspace(-1, 1, h)
        xs = torch.linspace(-1, 1, w)
        gy, gx = torch.meshgrid(ys, xs, indexing="ij")
        base = torch.stack((gx, gy), -1).unsqueeze(0)
        grid = base + torch.tanh(self.flow(x)).permute(0, 2, 3, 1) * 0.1
        warped = F.grid_sample(x, grid, mode="bilinear", padding_mode="border",
                               align_corners=False)
        s = self.score(warped).flatten(1)
        vals, idx = torch.topk(s, 8, dim=1)
        return warped, vals


class PoolZoo(nn.Module):
    """Pooling/layout variety: AvgPool 3x3/1 pad 1, adaptive pool, pixel/channel shuffle,
    nearest upsample, cumsum, argmax."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = conv_bn_act(3, 16, 3, 1)
        self.avg = nn.AvgPool2d(3, 1, 1)
        self.ps = nn.PixelShuffle(2)
        self.c2 = nn.Conv2d(4, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.avg(self.c1(x))
        b, c, h, w = y.shape
        y = y.view(b, 2, c // 2, h, w).transpose(1, 2).reshape(b, c, h, w)  # channel shuffle
        y = self.c2(self.ps(y))
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        y = torch.cumsum(y, dim=1)
        seg = y.argmax(1)
        return F.adaptive_avg_pool2d(y, (4, 4)), seg


class ConvNeXtTiny(nn.Module):
    """ConvNeXt block: depthwise 7x7, channels-last LayerNorm, GELU MLP, layer scale."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, dim, 4, 4)
        self.dw = nn.Conv2d(dim, dim, 7, padding=3, groups=dim)
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.pw1 = nn.Linear(dim, 4 * dim)
        self.pw2 = nn.Linear(4 * dim, dim)
        self.gamma = nn.Parameter(torch.full((dim,), 1e-2))
        self.head = nn.Linear(dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem(x)
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.norm(y)))) * self.gamma
        x = x + y.permute(0, 3, 1, 2)
        return self.head(x.mean((2, 3)))


MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "resnet_tiny": (ResNetTiny, lambda: (torch.randn(1, 3, 64, 64),)),
    "mobilenet_tiny": (MobileNetTiny, lambda: (torch.randn(1, 3, 64, 64),)),
    "unet_tiny": (UNetTiny, lambda: (torch.randn(1, 3, 64, 64),)),
    "vit_tiny": (ViTTiny, lambda: (torch.randn(1, 3, 32, 32),)),
    "bert_tiny": (BertTiny, lambda: (torch.randint(0, 100, (1, 16)),)),
    "gpt_tiny": (GPTTiny, lambda: (torch.randint(0, 100, (1, 16)),)),
    "recurrent": (RecurrentNet, lambda: (torch.randn(1, 12, 32),)),
    "detect_tiny": (DetectTiny, lambda: (torch.randn(1, 3, 64, 64),)),
    "warp_topk": (WarpTopK, lambda: (torch.randn(1, 3, 32, 32),)),
    "pool_zoo": (PoolZoo, lambda: (torch.randn(1, 3, 32, 32),)),
    "convnext_tiny": (ConvNeXtTiny, lambda: (torch.randn(1, 3, 64, 64),)),
}


# ------------------------------------------------------------------------------------------------
# export + compile
# ------------------------------------------------------------------------------------------------


def export(name: str, dynamo: bool, out_dir: Path, opset: int | None = None) -> dict[str, Any]:
    """Export one model; returns ``{"path", "opset", "error"}``."""
    factory, inputs = MODELS[name]
    model = factory().eval()
    args = inputs()
    tag = "dynamo" if dynamo else "torchscript"
    if opset:
        tag += "-opset%d" % opset
    path = out_dir / ("%s.%s.onnx" % (name, tag))
    sink = io.StringIO()
    try:
        with warnings.catch_warnings(), redirect_stdout(sink), redirect_stderr(sink):
            warnings.simplefilter("ignore")
            kw: dict[str, Any] = {"dynamo": dynamo}
            if opset:
                kw["opset_version"] = opset
            if dynamo:
                kw["external_data"] = False
            torch.onnx.export(model, args, str(path), **kw)
    except Exception as exc:  # export problems are recorded, not fatal
        return {"path": None, "exporter": tag, "error": "%s: %s" % (type(exc).__name__,
                                                                     str(exc)[:500])}
    m = onnx.load(str(path))
    opset_v = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    return {"path": str(path), "exporter": tag, "opset": opset_v, "ir_version": m.ir_version,
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(), "error": None}


def _summary(res: oracle.RknnResult, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    placement = oracle.onnx_placement(res, nodes)
    by_op: dict[str, Counter[str]] = {}
    for n in nodes:
        by_op.setdefault(n["op_type"], Counter())[placement[n["name"]]] += 1
    return {
        "status": res.status,
        "message": res.message,
        "warnings": res.warnings,
        "placement": {n["name"]: {"op_type": n["op_type"], "verdict": placement[n["name"]]}
                      for n in nodes},
        "by_op_type": {k: dict(v) for k, v in sorted(by_op.items())},
        "cpu_nodes": [n["name"] for n in nodes if placement[n["name"]] == "cpu"],
        "attribution": oracle.attribute_rows(res, nodes) if res.ok else {},
        "rows": [{"op_type": r.op_type, "target": r.target, "dtype": r.dtype,
                  "full_name": r.full_name} for r in res.rows if not r.is_io],
        "seconds": res.seconds,
    }


def _selfcheck(table: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    """Compare the table's prediction (the plugin's own matcher) with the compiler's placement
    for one model."""
    from pytest_npucheck.toolchains.rknn.table import compare, predict
    from pytest_npucheck.tables import table_from_data

    pred = predict(table_from_data(table), onnx.load(entry["path"]))
    observed = {n: v["verdict"] for n, v in entry["placement"].items()}
    diff = compare(pred, entry["status"], observed)
    return {"table": "%s/%s/%s" % (table["toolchain"], table["version"], table["soc"]),
            "agree": not diff,
            "disagreements": [{"node": n, "op_type": entry["placement"].get(n, {}).get(
                "op_type", "model"), "table": p, "compiler": o} for n, p, o in diff]}


def run(soc: str, python: str | None, out_path: Path, keep_onnx: str | None,
        names: list[str] | None = None, extra_opsets: list[int] | None = None,
        table_path: str | None = None) -> dict[str, Any]:
    """Export all models with both exporters, compile them, write the JSON report."""
    tmp_ctx = tempfile.TemporaryDirectory(prefix="npucheck-models-")
    out_dir = Path(keep_onnx) if keep_onnx else Path(tmp_ctx.name)
    out_dir.mkdir(parents=True, exist_ok=True)
    entries: list[dict[str, Any]] = []
    for name in names or list(MODELS):
        # torch's default opset (20 for torch 2.13) is above what RKNN 2.5.0 accepts (<= 19),
        # so both exporters are also run at an explicit opset that RKNN loads.
        variants = [(True, None), (False, None), (True, 18), (False, 17)]
        variants += [(True, o) for o in (extra_opsets or []) if o != 18]
        for dynamo, opset in variants:
            info = export(name, dynamo, out_dir, opset)
            info["model"] = name
            entries.append(info)
            print("exported %-16s %-22s %s" % (name, info["exporter"],
                                              info["error"] or "opset %s" % info["opset"]),
                  file=sys.stderr)
    todo = [e for e in entries if e["path"]]
    table = None
    if table_path and Path(table_path).is_file():
        with open(table_path, encoding="utf-8") as fh:
            table = json.load(fh)
    results = oracle.compile_models([{"path": e["path"], "key": Path(e["path"]).name}
                                     for e in todo], soc, python, timeout=600, workers=2)
    by_key = {r.key: r for r in results}
    version = next((r.extra.get("rknn_version") for r in results
                    if r.extra.get("rknn_version")), "unknown")
    for e in todo:
        nodes = oracle.onnx_nodes(e["path"])
        e["nodes"] = len(nodes)
        e["op_types"] = dict(sorted(Counter(n["op_type"] for n in nodes).items()))
        e.update(_summary(by_key[Path(e["path"]).name], nodes))
        if table is not None:
            e["selfcheck"] = _selfcheck(table, e)
        e["onnx_file"] = Path(e.pop("path")).name
    for e in entries:
        e.pop("path", None)
    doc = {
        "toolchain": "rknn", "package": "rknn-toolkit2", "version": version, "soc": soc,
        "generated": _dt.date.today().isoformat(), "generator": "probes/rknn/check_models.py",
        "torch": torch.__version__, "onnx": onnx.__version__,
        "build": {"do_quantization": False, "float_dtype": "float16"},
        "notes": ("placement per ONNX node: 'cpu' when a CPU row of RKNN's layer table names "
                  "the node (or RKNN replaced it by CPU-only ops), 'npu' otherwise when the "
                  "build succeeded, 'unsupported' for every node when load/build failed."),
        "models": entries,
    }
    out_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1)
        fh.write("\n")
    tmp_ctx.cleanup()
    for e in entries:
        if e.get("selfcheck") and not e["selfcheck"]["agree"]:
            print("selfcheck %s/%s: %s" % (e["model"], e["exporter"],
                                          e["selfcheck"]["disagreements"][:6]), file=sys.stderr)
    for e in entries:
        print("%-16s %-22s %-12s cpu=%s %s" % (
            e["model"], e["exporter"], e.get("status", "export-failed"),
            sorted(Counter(e["placement"][n]["op_type"] for n in e.get("cpu_nodes", [])).items())
            if e.get("placement") else "", (e.get("message") or e.get("error") or "")[:100]),
            file=sys.stderr)
    return doc


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--soc", default="rk3588")
    ap.add_argument("--python", help="python of the rknn-toolkit2 venv "
                    "(default: $%s)" % oracle.ENV_VAR)
    ap.add_argument("--version", default=None,
                    help="toolkit version for the default output path (default: installed)")
    ap.add_argument("--out", help="output JSON (default probes/rknn/<version>/<soc>.models.json)")
    ap.add_argument("--keep-onnx", help="directory to keep the exported ONNX files in")
    ap.add_argument("--model", action="append", help="only these models (repeatable)")
    ap.add_argument("--extra-opset", type=int, action="append",
                    help="also export with dynamo at this opset (repeatable)")
    ap.add_argument("--table", help="support table to self-check against (default: "
                    "op_support_tables/rknn/<version>/<soc>.json if present; 'none' to skip)")
    args = ap.parse_args(argv)
    version = args.version or "2.5.0"
    out = Path(args.out) if args.out else (Path(__file__).resolve().parent / version /
                                           ("%s.models.json" % args.soc))
    table = args.table or str(ROOT / "op_support_tables" / "rknn" / version /
                              ("%s.json" % args.soc))
    run(args.soc, args.python, out, args.keep_onnx, args.model, args.extra_opset,
        None if table == "none" else table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
