"""P-MTP's draft head (`language_model.mtp.*`), defined once for the two engines that run it: the
torch engine's model (`engines.torch.modeling`, with transformers' Qwen3RMSNorm) and vLLM's draft
model (`engines.vllm.draft_model`, with vLLM's RMSNorm and its fused kernel). Same parameters,
same computation; what it computes is in `engines.torch.modeling`'s docstring.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn


class PMtpMlp(nn.Module):
    """Qwen3's gated MLP (SiLU), under the checkpoint's names."""

    def __init__(self, hidden: int, intermediate: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class PMtpHead(nn.Module):
    """The recurrent draft head; shares the decoder's embedding and lm_head. `norm` makes each
    RMS norm from (size, eps=...)."""

    def __init__(
        self, hidden: int, intermediate: int, eps: float, norm: Callable[..., nn.Module]
    ) -> None:
        super().__init__()
        self.fc = nn.Linear(2 * hidden, hidden, bias=False)
        self.pre_fc_norm_hidden = norm(hidden, eps=eps)
        self.pre_fc_norm_embedding = norm(hidden, eps=eps)
        # One layer holding the MLP, named as in the checkpoint (layers.0.mlp.*).
        self.layers = nn.ModuleList([nn.ModuleDict({"mlp": PMtpMlp(hidden, intermediate)})])
        self.norm = norm(hidden, eps=eps)

    def forward(self, hidden: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        """One draft step: (h, e) -> h'. Works on any leading shape."""
        x = self.fc(
            torch.cat([self.pre_fc_norm_hidden(hidden), self.pre_fc_norm_embedding(embedding)], -1)
        )
        return self.norm(x + self.layers[0].mlp(x))
