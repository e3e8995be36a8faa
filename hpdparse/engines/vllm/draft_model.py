"""P-MTP's draft head as a vLLM model (``EaglePMtpHpdForCausalLM``), registered by name.

``mtp.register_draft_model`` registers ``hpdparse.engines.vllm.draft_model:EaglePMtpHpdForCausalLM``
as a "module:Class" string, so vLLM imports this module (and with it torch and vLLM's layers) only
when a speculative engine builds its draft; ``hpdparse.engines.vllm.mtp`` itself needs neither.
The head itself is ``hpdparse.engines.pmtp_head.PMtpHead``, made here with vLLM's RMSNorm; what the
draft computes and why it carries an attention layer is in ``mtp``'s docstring.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from vllm.config import VllmConfig
from vllm.distributed import get_tensor_model_parallel_world_size
from vllm.model_executor.layers.attention import Attention
from vllm.model_executor.layers.layernorm import RMSNorm
from vllm.model_executor.layers.logits_processor import LogitsProcessor
from vllm.model_executor.model_loader.weight_utils import default_weight_loader

from hpdparse.engines.pmtp_head import PMtpHead


class EaglePMtpHpdForCausalLM(nn.Module):
    # Tell vLLM's proposer to share the target's embedding and lm_head.
    has_own_embed_tokens = False
    has_own_lm_head = False

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = "") -> None:
        super().__init__()
        spec = vllm_config.speculative_config
        assert spec is not None and spec.draft_model_config is not None
        config = spec.draft_model_config.hf_config
        self.config = config
        hidden = config.hidden_size
        # model.embed_tokens: a one-row placeholder that vLLM replaces with the target's
        # embedding (it checks only that the widths match).
        self.model = nn.Module()
        self.model.embed_tokens = nn.Embedding(1, hidden)
        self.mtp = PMtpHead(hidden, config.intermediate_size, config.rms_norm_eps, RMSNorm)
        self.lm_head = nn.Linear(hidden, 1, bias=False)  # placeholder: the target's is shared
        self.logits_processor = LogitsProcessor(config.vocab_size)
        # Never called. vLLM's V1 proposer reads its KV block size from the draft's attention
        # layers and fails when there are none; one layer shaped like the target's keeps
        # the draft in the target's KV cache group (cost: one layer's KV blocks). Shaped per
        # tensor-parallel rank as Qwen3Attention shapes the target's layers: with the total
        # head counts its KV pages would outsize a target layer's under TP > 1 (a KV tensor
        # of its own, fewer KV blocks for everyone).
        tp = get_tensor_model_parallel_world_size()
        heads = config.num_attention_heads
        target_layers = vllm_config.model_config.get_num_layers(vllm_config.parallel_config)
        head_dim = getattr(config, "head_dim", None) or hidden // heads
        self.kv_anchor = Attention(
            num_heads=heads // tp,
            head_size=head_dim,
            scale=head_dim**-0.5,
            num_kv_heads=max(1, config.num_key_value_heads // tp),
            cache_config=vllm_config.cache_config,
            # vLLM reads a layer index from the name: the one after the target's layers.
            prefix=f"pmtp_draft.layers.{target_layers}.kv_anchor",
        )

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

    def forward(
        self,
        input_ids: torch.Tensor | None,
        positions: torch.Tensor,
        hidden_states: torch.Tensor,
        inputs_embeds: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if inputs_embeds is None:
            inputs_embeds = self.embed_input_ids(input_ids)
        out = self.mtp(hidden_states, inputs_embeds)
        # The same vector gives the logits and is fed back: P-MTP is recurrent in h'.
        return out, out

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor | None:
        return self.logits_processor(self.lm_head, hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        params = dict(self.named_parameters())
        loaded: set[str] = set()
        for name, tensor in weights:
            name = name.removeprefix("language_model.")
            if name not in params:
                continue  # embedding / lm_head copies: shared with the target instead
            param = params[name]
            getattr(param, "weight_loader", default_weight_loader)(param, tensor)
            loaded.add(name)
        missing = {n for n in params if n.startswith("mtp.")} - loaded
        if missing:
            raise ValueError(f"P-MTP draft: weights missing: {sorted(missing)}")
        # Embedding and lm_head are replaced by the target's after loading.
        return set(params)
