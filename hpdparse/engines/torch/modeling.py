"""The HPD-Parsing model in PyTorch: InternViT, pixel shuffle, the `mlp1` projector, transformers'
Qwen3 decoder and the P-MTP draft head.

Module and parameter names follow InternVL's original checkpoint format (the names vLLM's
`InternVLChatModel` loader expects), so `state_dict()` keys equal the safetensors keys:
`vision_model.embeddings.*`, `vision_model.encoder.layers.N.{attn.qkv,attn.proj,mlp.fc1,mlp.fc2,
norm1,norm2,ls1,ls2}`, `mlp1.{0,1,3}`, `language_model.model.*`, `language_model.lm_head`,
`language_model.mtp.*`.

P-MTP (this implementation's definition; the public description leaves open where `h` is taken):
`h` is the decoder's hidden state AFTER its final norm (the vector `lm_head` reads) at the last
position, `e` the input embedding of the token that position predicted; one draft step is
`x = fc(cat(pre_fc_norm_hidden(h), pre_fc_norm_embedding(e)))`, `h' = norm(x + mlp(x))`,
draft token `argmax(lm_head(h'))`; the next draft step uses `h'` and the embedding of that draft.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hpdparse.engines.pmtp_head import PMtpHead
from hpdparse.hpd.model_config import HpdModelConfig, VisionConfig


class InternRMSNorm(nn.Module):
    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def _norm(cfg: VisionConfig, size: int) -> nn.Module:
    if cfg.norm_type == "rms_norm":
        return InternRMSNorm(size, cfg.layer_norm_eps)
    return nn.LayerNorm(size, eps=cfg.layer_norm_eps)


class InternVisionEmbeddings(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.image_size = cfg.image_size
        self.patch_size = cfg.patch_size
        dim = cfg.hidden_size
        self.class_embedding = nn.Parameter(torch.randn(1, 1, dim))
        self.patch_embedding = nn.Conv2d(3, dim, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.num_patches = (cfg.image_size // cfg.patch_size) ** 2
        self.position_embedding = nn.Parameter(torch.randn(1, self.num_patches + 1, dim))

    def _position_embedding(self, h: int, w: int) -> torch.Tensor:
        pos = self.position_embedding
        if h * w == self.num_patches:
            return pos
        side = self.image_size // self.patch_size
        grid = pos[:, 1:].float().reshape(1, side, side, -1).permute(0, 3, 1, 2)
        grid = F.interpolate(grid, size=(h, w), mode="bicubic", align_corners=False)
        grid = grid.reshape(1, -1, h * w).permute(0, 2, 1).to(pos.dtype)
        return torch.cat([pos[:, :1], grid], dim=1)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embedding(pixel_values.to(self.patch_embedding.weight.dtype))
        b, _, h, w = patches.shape
        patches = patches.flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(b, 1, -1).to(patches.dtype)
        return torch.cat([cls, patches], dim=1) + self._position_embedding(h, w).to(patches.dtype)


class InternAttention(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        dim = cfg.hidden_size
        self.qkv = nn.Linear(dim, 3 * dim, bias=cfg.qkv_bias)
        self.proj = nn.Linear(dim, dim)
        self.qk_normalization = cfg.qk_normalization
        if cfg.qk_normalization:
            self.q_norm = InternRMSNorm(dim, cfg.layer_norm_eps)
            self.k_norm = InternRMSNorm(dim, cfg.layer_norm_eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        if self.qk_normalization:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k, v = (t.reshape(b, n, self.num_heads, -1).transpose(1, 2) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)
        return self.proj(out.transpose(1, 2).reshape(b, n, c))


class InternMLP(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size)
        self.approximate = "tanh" if cfg.hidden_act == "gelu_pytorch_tanh" else "none"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x), approximate=self.approximate))


class InternVisionEncoderLayer(nn.Module):
    def __init__(self, cfg: VisionConfig) -> None:
        super().__init__()
        self.attn = InternAttention(cfg)
        self.mlp = InternMLP(cfg)
        self.norm1 = _norm(cfg, cfg.hidden_size)
        self.norm2 = _norm(cfg, cfg.hidden_size)
        self.ls1 = nn.Parameter(cfg.initializer_factor * torch.ones(cfg.hidden_size))
        self.ls2 = nn.Parameter(cfg.initializer_factor * torch.ones(cfg.hidden_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x)) * self.ls1
        return x + self.mlp(self.norm2(x)) * self.ls2


class InternVisionModel(nn.Module):
    """InternViT without a final norm; `num_layers` < config layers when select_layer < -1."""

    def __init__(self, cfg: VisionConfig, num_layers: int) -> None:
        super().__init__()
        self.embeddings = InternVisionEmbeddings(cfg)
        layers = [InternVisionEncoderLayer(cfg) for _ in range(num_layers)]
        self.encoder = nn.Module()  # holds the layers, named as in the checkpoint
        self.encoder.layers = nn.ModuleList(layers)

    def forward(self, pixel_values: torch.Tensor) -> torch.Tensor:
        x = self.embeddings(pixel_values)
        for layer in self.encoder.layers:
            x = layer(x)
        return x


def pixel_shuffle(x: torch.Tensor, scale: float, ps_version: str) -> torch.Tensor:
    """InternVL's pixel shuffle: (N, W, H, C) -> (N, H*s, W*s, C/s^2), transposed back for v2."""
    n, w, h, c = x.size()
    x = x.view(n, w, int(h * scale), int(c / scale))
    x = x.permute(0, 2, 1, 3).contiguous()
    x = x.view(n, int(h * scale), int(w * scale), int(c / (scale * scale)))
    if ps_version != "v1":
        x = x.permute(0, 2, 1, 3).contiguous()
    return x


def vision_projector(vision_hidden: int, downsample_ratio: float, hidden: int) -> nn.Sequential:
    """InternVL's `mlp1`: pixel-shuffled ViT features -> the decoder's width (vllm's too)."""
    vit_out = vision_hidden * int(1 / downsample_ratio) ** 2
    return nn.Sequential(
        nn.LayerNorm(vit_out), nn.Linear(vit_out, hidden), nn.GELU(), nn.Linear(hidden, hidden)
    )


def project_vision(
    vit: torch.Tensor, mlp1: nn.Module, scale: float, ps_version: str
) -> torch.Tensor:
    """ViT output (tiles, 1 + patches, C) -> (tiles, image tokens per tile, hidden): the class
    token dropped, the patches pixel-shuffled and projected by `mlp1` (vllm's model too)."""
    vit = vit[:, 1:, :]
    side = int(vit.shape[1] ** 0.5)
    vit = pixel_shuffle(vit.reshape(vit.shape[0], side, side, -1), scale, ps_version)
    return mlp1(vit.reshape(vit.shape[0], -1, vit.shape[-1]))


class HpdModel(nn.Module):
    """InternVLChatModel with an HPD decoder: vision_model, mlp1, language_model (+ .mtp)."""

    def __init__(self, config: HpdModelConfig, with_mtp: bool = True) -> None:
        super().__init__()
        from transformers import Qwen3ForCausalLM
        from transformers.models.qwen3.modeling_qwen3 import Qwen3RMSNorm

        self.config = config
        self.vision_model = InternVisionModel(config.vision, config.vision_layers_used)
        self.mlp1 = vision_projector(
            config.vision.hidden_size, config.downsample_ratio, config.hidden_size
        )
        qcfg = config.qwen3_config()
        self.language_model = Qwen3ForCausalLM(qcfg)
        if with_mtp:
            self.language_model.mtp = PMtpHead(
                qcfg.hidden_size, qcfg.intermediate_size, qcfg.rms_norm_eps, Qwen3RMSNorm
            )

    @property
    def has_mtp(self) -> bool:
        return hasattr(self.language_model, "mtp")

    @property
    def decoder(self) -> nn.Module:
        """transformers' Qwen3Model (embeddings, layers, final norm)."""
        return self.language_model.model

    @property
    def mtp(self) -> PMtpHead:
        return self.language_model.mtp

    def image_features(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """(tiles, 3, S, S) normalised pixels -> (tiles, image tokens per tile, hidden)."""
        vit = self.vision_model(pixel_values)
        return project_vision(vit, self.mlp1, self.config.downsample_ratio, self.config.ps_version)

    def embed_tokens(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.decoder.embed_tokens(input_ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.language_model.lm_head(hidden)
