"""The HPD checkpoint's config.json (InternVL's original `internvl_chat` format), typed.

Only the keys the torch model and the engines need are typed, the tiling among them
(`hpdparse.hpd.tiling.TilingConfig.from_model_config`); `llm` keeps the decoder's own settings
for transformers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hpdparse.hpd.tiling import TilingConfig

ARCHITECTURE = "InternVLChatModel"


@dataclass(frozen=True)
class VisionConfig:
    """InternViT (`vision_config`, InternVisionModel)."""

    hidden_size: int
    num_attention_heads: int
    intermediate_size: int
    num_hidden_layers: int
    patch_size: int
    image_size: int
    qkv_bias: bool = True
    qk_normalization: bool = False
    norm_type: str = "layer_norm"
    layer_norm_eps: float = 1e-6
    hidden_act: str = "gelu"
    initializer_factor: float = 1.0

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VisionConfig:
        names = cls.__dataclass_fields__.keys()
        return cls(**{k: d[k] for k in names if k in d})


@dataclass(frozen=True)
class HpdModelConfig:
    """The parts of an HPD `config.json` that define the model and its special tokens."""

    vision: VisionConfig
    llm: dict[str, Any]  # `llm_config`, passed to transformers' Qwen3Config
    image_size: int  # tile size: force_image_size, else the vision image size
    downsample_ratio: float
    ps_version: str
    select_layer: int
    template: str | None
    fork_token_id: int
    child_token_id: int
    eos_token_id: int | None
    tiling: TilingConfig

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> HpdModelConfig:
        """Parse config.json. Raises KeyError/TypeError/ValueError on a malformed dict
        (checkpoint.py turns them into one-line EngineErrors)."""
        vision = VisionConfig.from_dict(d["vision_config"])
        llm = dict(d["llm_config"])
        eos = d.get("eos_token_id", llm.get("eos_token_id"))
        if isinstance(eos, list):
            eos = eos[0] if eos else None
        return cls(
            vision=vision,
            llm=llm,
            image_size=int(d.get("force_image_size") or vision.image_size),
            downsample_ratio=float(d.get("downsample_ratio", 0.5)),
            ps_version=str(d.get("ps_version", "v1")),
            select_layer=int(d.get("select_layer", -1)),
            template=d.get("template"),
            fork_token_id=int(d["fork_token_id"]),
            child_token_id=int(d["child_token_id"]),
            eos_token_id=None if eos is None else int(eos),
            tiling=TilingConfig.from_model_config(d),
        )

    @property
    def hidden_size(self) -> int:
        return int(self.llm["hidden_size"])

    @property
    def max_position_embeddings(self) -> int | None:
        """The decoder's longest sequence, when config.json says."""
        limit = self.llm.get("max_position_embeddings")
        return int(limit) if limit else None

    @property
    def vision_layers_used(self) -> int:
        """InternVL takes the features of layer `select_layer` (negative: from the end)."""
        n = self.vision.num_hidden_layers
        return n + self.select_layer + 1 if self.select_layer < 0 else self.select_layer + 1

    def qwen3_config(self) -> Any:
        """transformers' Qwen3Config for the decoder (imported lazily: transformers is heavy)."""
        from transformers import Qwen3Config

        keys = {k: v for k, v in self.llm.items() if k not in ("architectures", "auto_map")}
        cfg = Qwen3Config(**keys)
        cfg._attn_implementation = "sdpa"
        return cfg
