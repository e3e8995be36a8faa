"""A transformers config class for HPD-Parsing's InternVL-layout ``config.json`` (model_type
``internvl_chat``), so vLLM can read the checkpoint without running the hub's remote code."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

# InternViT's settings and their defaults, under the attribute names vLLM's InternVisionModel reads.
_VISION_DEFAULTS: dict[str, int | float | bool | str] = {
    "hidden_size": 1024,
    "intermediate_size": 4096,
    "num_hidden_layers": 24,
    "num_attention_heads": 16,
    "num_channels": 3,
    "patch_size": 14,
    "image_size": 448,
    "qkv_bias": True,
    "qk_normalization": False,
    "norm_type": "layer_norm",
    "layer_norm_eps": 1e-6,
    "hidden_act": "gelu",
    "initializer_factor": 1.0,
    "initializer_range": 0.02,
    "dropout": 0.0,
    "attention_dropout": 0.0,
    "drop_path_rate": 0.0,
    "use_flash_attn": False,
}
# The top-level settings (projector, tiling) and their defaults.
_CHAT_DEFAULTS: dict[str, int | float | bool | str | None] = {
    "downsample_ratio": 0.5,
    "force_image_size": None,
    "select_layer": -1,
    "ps_version": "v2",
    "template": None,
    "dynamic_image_size": True,
    "use_thumbnail": True,
    "min_dynamic_patch": 1,
    "max_dynamic_patch": 24,
}


class HpdVisionConfig(PretrainedConfig):
    """InternViT settings (`_VISION_DEFAULTS` for those not given)."""

    model_type = "intern_vit_6b"

    def __init__(self, **kwargs: Any) -> None:
        own = {name: kwargs.pop(name, default) for name, default in _VISION_DEFAULTS.items()}
        super().__init__(**kwargs)
        for name, value in own.items():
            setattr(self, name, value)


class HpdChatConfig(PretrainedConfig):
    """The top-level ``internvl_chat`` config: vision tower, projector settings, Qwen3 decoder
    (`_CHAT_DEFAULTS` for the settings not given)."""

    model_type = "internvl_chat"
    sub_configs = {"vision_config": HpdVisionConfig, "llm_config": PretrainedConfig}

    def __init__(
        self,
        vision_config: dict[str, Any] | PretrainedConfig | None = None,
        llm_config: dict[str, Any] | PretrainedConfig | None = None,
        **kwargs: Any,
    ) -> None:
        # Sub-configs first: PretrainedConfig.__init__ validates token ids against the text config.
        if isinstance(vision_config, dict):
            vision_config = HpdVisionConfig(**vision_config)
        self.vision_config = vision_config or HpdVisionConfig()
        if isinstance(llm_config, dict):
            llm_config = _text_config(llm_config)
        self.llm_config = llm_config or CONFIG_MAPPING["qwen3"]()
        for name, default in _CHAT_DEFAULTS.items():
            setattr(self, name, kwargs.pop(name, default))
        super().__init__(**kwargs)

    @property
    def text_config(self) -> PretrainedConfig:
        return self.llm_config

    def get_text_config(self, *args: Any, **kwargs: Any) -> PretrainedConfig:
        return self.llm_config

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("text_config", None)
        return out


def _text_config(values: dict[str, Any]) -> PretrainedConfig:
    model_type = values.get("model_type")
    if model_type is None:
        architecture = (values.get("architectures") or ["Qwen3ForCausalLM"])[0]
        model_type = "qwen2" if architecture.startswith("Qwen2") else "qwen3"
    if model_type not in CONFIG_MAPPING:
        raise ValueError(f"llm_config has an unknown model_type {model_type!r}")
    values = {k: v for k, v in values.items() if k != "model_type"}
    return CONFIG_MAPPING[model_type](**values)
