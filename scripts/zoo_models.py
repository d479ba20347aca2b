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
from typing import Any, Callable, Iterator

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
        return lambda: (model_fn().eval(), (torch.randn(1, 3, size, size),))

    def seq(model_fn: Callable[[], Any], d: int = 16) -> Builder:
        return lambda: (model_fn().eval(), (torch.randn(1, 8, d),))

    def ids(model_fn: Callable[[], Any]) -> Builder:
        return lambda: (model_fn().eval(), (torch.randint(0, 100, (1, SEQ)),))

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


def _shrink(cfg: Any, *, hidden: int = 32, heads: int = 2) -> None:
    """Make a transformers config small: 1 layer, ``hidden`` wide, ``heads`` heads, a 256-word
    vocabulary, 32x32 images; nested sub-configs (text/vision/audio) the same way."""
    d = cfg.to_dict()
    for key, value in d.items():
        if isinstance(value, bool) or value is None:
            continue
        sub = getattr(cfg, key, None)
        if hasattr(sub, "to_dict") and hasattr(sub, "model_type"):
            _shrink(sub, hidden=hidden, heads=heads)
            continue
        new: Any = None
        if isinstance(value, int):
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
    for k in ("use_cache", "output_attentions", "output_hidden_states"):
        try:
            setattr(cfg, k, False)
        except Exception:  # noqa: BLE001
            pass
    try:
        cfg._attn_implementation = "eager"
    except Exception:  # noqa: BLE001
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
        frames = 2 * getattr(cfg, "max_source_positions", 32) if hasattr(cfg, "max_source_positions") else 64
        feeds["input_features"] = torch.randn(1, mel, frames)
    if "attention_mask" in params and "input_ids" in feeds:  # as real callers do (the padding-mask path)
        feeds["attention_mask"] = torch.ones(1, SEQ, dtype=torch.long)
    if "decoder_input_ids" in params and "input_ids" in feeds:
        feeds["decoder_input_ids"] = torch.randint(3, max(4, vocab - 10), (1, 8))
    if not feeds and main in params:
        feeds[main] = torch.randint(3, max(4, vocab - 10), (1, SEQ))
    return feeds


def transformers_zoo(limit: int | None = None) -> tuple[list[tuple[str, Builder]], dict[str, str]]:
    """A builder per transformers base-model architecture (``MODEL_MAPPING_NAMES``), and the
    architectures skipped before building with the reason. Building may still fail later (the
    harness records that as a skip with the error)."""
    import transformers
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
        cls = getattr(transformers, class_name, None)
        if cls is None:
            skipped[model_type] = f"{class_name} not importable here (missing optional dependency)"
            continue
        builders.append((f"hf_{model_type}", _hf_builder(model_type, cls)))
        if limit and len(builders) >= limit:
            break
    return builders, skipped


def _hf_builder(model_type: str, cls: Any) -> Builder:
    def build() -> tuple[Any, tuple[Any, ...]]:
        import torch
        from transformers import AutoConfig

        cfg = AutoConfig.for_model(model_type)
        _shrink(cfg)
        torch.manual_seed(0)
        model = cls(cfg).eval()
        perturb(model)
        feeds = _inputs_for(model, cfg)
        if not feeds:
            raise RuntimeError("no example inputs known for its forward()")
        with torch.no_grad():
            out = _first_tensor(model(**feeds))
        if out is None:
            raise RuntimeError("forward() returned no tensor")
        keys = tuple(feeds)
        return _wrap(model, keys).eval(), tuple(feeds[k] for k in keys)

    return build


def all_builders(which: str = "all") -> Iterator[tuple[str, Builder]]:
    if which in ("all", "torch"):
        yield from torch_zoo()
    if which in ("all", "transformers"):
        yield from transformers_zoo()[0]
