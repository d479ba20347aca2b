"""Benchmark models, built from code with random weights and cached outside the repository.

Every model is written once to ``$NPUCHECK_BENCH_DIR`` (default ``~/.cache/npucheck-bench``) and
reused; delete the directory to rebuild. Nothing here is committed but the code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Callable

CACHE = Path(os.environ.get("NPUCHECK_BENCH_DIR", Path.home() / ".cache" / "npucheck-bench"))


# -- model code (torch imported lazily so `run.py --help` stays light) -----------------------------

def _bert(layers: int, hidden: int, heads: int, seq: int, vocab: int = 0):
    import torch
    from torch import nn

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
            self.o = nn.Linear(hidden, hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, s, _ = x.shape
            d = hidden // heads

            def split(t: torch.Tensor) -> torch.Tensor:
                return t.reshape(b, s, heads, d).transpose(1, 2)

            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            att = torch.softmax(q @ k.transpose(-1, -2) / d ** 0.5, dim=-1)
            return self.o((att @ v).transpose(1, 2).reshape(b, s, hidden))

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.att = Attention()
            self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
            self.ff1, self.ff2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = self.ln1(x + self.att(x))
            return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))

    class Encoder(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.head = nn.Linear(hidden, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = layer(x)
            return self.head(x[:, 0])

    torch.manual_seed(0)
    return Encoder().eval(), (torch.randn(1, seq, hidden),)


def _resnet50():
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin: int, width: int, stride: int) -> None:
            super().__init__()
            cout = width * 4
            self.c1, self.b1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
            self.c2, self.b2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
            self.c3, self.b3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = torch.relu(self.b1(self.c1(x)))
            y = torch.relu(self.b2(self.c2(y)))
            y = self.b3(self.c3(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    class ResNet(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                                      nn.MaxPool2d(3, 2, 1))
            blocks, cin = [], 64
            for width, n, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
                for i in range(n):
                    blocks.append(Bottleneck(cin, width, stride if i == 0 else 1))
                    cin = width * 4
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, 1000)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))

    torch.manual_seed(0)
    return ResNet().eval(), (torch.randn(1, 3, 224, 224),)


def _encoder(layers: int, d: int = 64, heads: int = 4, seq: int = 32):
    """torch's own nn.TransformerEncoder (post-norm, ReLU), ``layers`` deep and ``d`` wide: issue 29's
    whole-process CLI model (300 layers: ~26,000 ONNX nodes with the TorchScript exporter)."""
    import torch
    from torch import nn

    # eval under no_grad takes torch's fused fast path (aten::_transformer_encoder_layer_fwd), which
    # the TorchScript exporter cannot convert: the layers' own operators are what users export
    torch.backends.mha.set_fastpath_enabled(False)
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d, heads, dim_feedforward=2 * d, dropout=0.0, batch_first=True)
    model = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()
    return model, (torch.randn(1, seq, d),)


# -- the benchmark set ---------------------------------------------------------------------------

# name -> (builder, exporter, opset, external weights)
MODELS: dict[str, tuple[Callable[[], tuple], str, int, bool]] = {
    # ~1,000 ONNX nodes: 1,000-ish small BERT layers are what a PR-sized transformer test looks like
    "bert_1k": (lambda: _bert(layers=30, hidden=64, heads=4, seq=32), "dynamo", 18, False),
    # ~1,000 nodes with the 9k model's exporter: the pair shows how matching grows with size
    "bert_1k_ts": (lambda: _bert(layers=22, hidden=64, heads=4, seq=32), "torchscript", 17, False),
    # ~200 nodes: exported afresh by the goal-3 benchmark (a marked test's first run)
    "bert_small": (lambda: _bert(layers=6, hidden=64, heads=4, seq=32), "dynamo", 18, False),
    # ~9,000 nodes; the TorchScript exporter at opset 17 (dynamo takes minutes at this size)
    "bert_9k": (lambda: _bert(layers=200, hidden=64, heads=4, seq=32), "torchscript", 17, False),
    # issue 29 goal 4: nn.TransformerEncoder, 300 layers, d=64, TorchScript at opset 17 (~26k nodes)
    "encoder_26k": (lambda: _encoder(layers=300), "torchscript", 17, False),
    # ResNet-50-sized CNN (25.6 M parameters)
    "resnet50": (_resnet50, "dynamo", 18, False),
    # BERT-base-sized encoder (12 x 768), ~340 MB of float32 weights in an external-data file
    "bert_base_ext": (lambda: _bert(layers=12, hidden=768, heads=12, seq=128), "dynamo", 18, True),
}


def path_of(name: str) -> Path:
    return CACHE / name / "model.onnx"


def build(name: str, log: Callable[[str], None] = lambda s: print(s, file=sys.stderr)) -> Path:
    """The model file of ``name``, exported on first use."""
    path = path_of(name)
    if path.is_file():
        return path
    import torch
    import onnx

    builder, exporter, opset, external = MODELS[name]
    model, inputs = builder()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.onnx")
    log(f"building {name} ({exporter}, opset {opset}) -> {path}")
    with torch.no_grad():
        if exporter == "dynamo":
            prog = torch.onnx.export(model, inputs, dynamo=True, opset_version=opset, external_data=False)
            prog.save(os.fspath(tmp))
        else:
            torch.onnx.export(model, inputs, os.fspath(tmp), dynamo=False, opset_version=opset)
    if external:
        proto = onnx.load(os.fspath(tmp))
        onnx.save(proto, os.fspath(path), save_as_external_data=True, all_tensors_to_one_file=True,
                  location="model.onnx.data", size_threshold=1024)
        tmp.unlink()
    else:
        tmp.replace(path)
    return path


if __name__ == "__main__":
    for n in sys.argv[1:] or list(MODELS):
        p = build(n)
        import onnx

        m = onnx.load(os.fspath(p), load_external_data=False)
        print(n, len(m.graph.node), "nodes", p.stat().st_size // 1024, "KB")
