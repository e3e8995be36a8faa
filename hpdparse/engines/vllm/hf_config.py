"""A transformers config class for HPD-Parsing's InternVL-layout ``config.json`` (model_type
``internvl_chat``), so vLLM can read the checkpoint without running the hub's remote code."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig
from transformers.models.auto.configuration_auto import CONFIG_MAPPING


class HpdVisionConfig(PretrainedConfig):
    """InternViT settings, with the attribute names vLLM's ``InternVisionModel`` reads."""

    model_type = "intern_vit_6b"

    def __init__(
        self,
        hidden_size: int = 1024,
        intermediate_size: int = 4096,
        num_hidden_layers: int = 24,
        num_attention_heads: int = 16,
        num_channels: int = 3,
        patch_size: int = 14,
        image_size: int = 448,
        qkv_bias: bool = True,
        qk_normalization: bool = False,
        norm_type: str = "layer_norm",
        layer_norm_eps: float = 1e-6,
        hidden_act: str = "gelu",
        initializer_factor: float = 1.0,
        initializer_range: float = 0.02,
        dropout: float = 0.0,
        attention_dropout: float = 0.0,
        drop_path_rate: float = 0.0,
        use_flash_attn: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.hidden_size = hidden_size
        self.intermediate_size = intermediate_size
        self.num_hidden_layers = num_hidden_layers
        self.num_attention_heads = num_attention_heads
        self.num_channels = num_channels
        self.patch_size = patch_size
        self.image_size = image_size
        self.qkv_bias = qkv_bias
        self.qk_normalization = qk_normalization
        self.norm_type = norm_type
        self.layer_norm_eps = layer_norm_eps
        self.hidden_act = hidden_act
        self.initializer_factor = initializer_factor
        self.initializer_range = initializer_range
        self.dropout = dropout
        self.attention_dropout = attention_dropout
        self.drop_path_rate = drop_path_rate
        self.use_flash_attn = use_flash_attn


class HpdChatConfig(PretrainedConfig):
    """The top-level ``internvl_chat`` config: vision tower, projector settings, Qwen3 decoder."""

    model_type = "internvl_chat"
    sub_configs = {"vision_config": HpdVisionConfig, "llm_config": PretrainedConfig}

    def __init__(
        self,
        vision_config: dict[str, Any] | PretrainedConfig | None = None,
        llm_config: dict[str, Any] | PretrainedConfig | None = None,
        downsample_ratio: float = 0.5,
        force_image_size: int | None = None,
        select_layer: int = -1,
        ps_version: str = "v2",
        template: str | None = None,
        dynamic_image_size: bool = True,
        use_thumbnail: bool = True,
        min_dynamic_patch: int = 1,
        max_dynamic_patch: int = 24,
        **kwargs: Any,
    ) -> None:
        # Sub-configs first: PretrainedConfig.__init__ validates token ids against the text config.
        if isinstance(vision_config, dict):
            vision_config = HpdVisionConfig(**vision_config)
        self.vision_config = vision_config or HpdVisionConfig()
        if isinstance(llm_config, dict):
            llm_config = _text_config(llm_config)
        self.llm_config = llm_config or CONFIG_MAPPING["qwen3"]()
        self.downsample_ratio = downsample_ratio
        self.force_image_size = force_image_size
        self.select_layer = select_layer
        self.ps_version = ps_version
        self.template = template
        self.dynamic_image_size = dynamic_image_size
        self.use_thumbnail = use_thumbnail
        self.min_dynamic_patch = min_dynamic_patch
        self.max_dynamic_patch = max_dynamic_patch
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
