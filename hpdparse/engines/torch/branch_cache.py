"""The key/value caches of the torch engine's branches (see `decoding`): a branch's own growable
`KvSegment`, and the `StepCache` that hands transformers' attention a batch's padded past."""

from __future__ import annotations

import torch
from transformers.cache_utils import DynamicCache


class KvSegment:
    """A growable run of cache positions: keys/values per layer, (kv_heads, capacity, head_dim)."""

    def __init__(self, like: list[torch.Tensor], capacity: int) -> None:
        self.k = [
            torch.empty(t.shape[0], capacity, t.shape[2], dtype=t.dtype, device=t.device)
            for t in like
        ]
        self.v = [torch.empty_like(t) for t in self.k]
        self.n = 0

    def append(self, ks: list[torch.Tensor], vs: list[torch.Tensor]) -> None:
        t = ks[0].shape[1]
        cap = self.k[0].shape[1]
        if self.n + t > cap:
            new_cap = max(2 * cap, self.n + t)
            for lst in (self.k, self.v):
                for i, old in enumerate(lst):
                    grown = old.new_empty(old.shape[0], new_cap, old.shape[2])
                    grown[:, : self.n] = old[:, : self.n]
                    lst[i] = grown
        for i in range(len(ks)):
            self.k[i][:, self.n : self.n + t] = ks[i]
            self.v[i][:, self.n : self.n + t] = vs[i]
        self.n += t


class StepCache(DynamicCache):
    """Hands transformers' attention the batch's padded past keys/values and keeps the new ones."""

    def __init__(self, past_k: list[torch.Tensor], past_v: list[torch.Tensor]) -> None:
        super().__init__()
        self.past_k, self.past_v = past_k, past_v
        self.new_k: list[torch.Tensor | None] = [None] * len(past_k)
        self.new_v: list[torch.Tensor | None] = [None] * len(past_k)

    def update(self, key_states, value_states, layer_idx, *args, **kwargs):
        self.new_k[layer_idx], self.new_v[layer_idx] = key_states, value_states
        return (
            torch.cat([self.past_k[layer_idx], key_states], dim=2),
            torch.cat([self.past_v[layer_idx], value_states], dim=2),
        )
