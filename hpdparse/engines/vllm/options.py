"""Options of the vllm engine (``--engine-option KEY=VALUE``).

Besides its own two, the engine passes any other key to vLLM's ``EngineArgs`` unchanged
(``max_num_seqs=256``, ``gpu_memory_utilization=0.8``, ``tensor_parallel_size=2``); the names are
checked against ``EngineArgs`` when the engine starts, since that needs vLLM imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hpdparse.engines.options import EngineOptions, option

DEFAULT_CPU_KV_CACHE_GIB = 2.0
# Admission control: pull a new page only while fewer requests than this wait in vLLM's scheduler.
# We top the queue up before every step, so it only has to hold what the scheduler can start in
# one step. That is bounded by its encoder budget (max_num_encoder_input_tokens, the larger of
# max_num_batched_tokens and one page's image): with the 1B model a full page's image is
# 25 x 256 = 6,400 tokens against 2,048-16,384, so 1-3 new pages a step; 8 leaves room for pages
# of fewer tiles and for children that fork in the same step, at ~120 MB of waiting tiles.
DEFAULT_MAX_WAITING = 8


@dataclass
class VllmOptions(EngineOptions):
    """The vllm engine's own options, plus vLLM ``EngineArgs`` fields passed through."""

    engine: ClassVar[str] = "vllm"
    PASSTHROUGH: ClassVar[str | None] = "engine_args"
    PASSTHROUGH_TAKES: ClassVar[str] = "vLLM EngineArgs fields"
    PASSTHROUGH_HELP: ClassVar[str] = (
        "any vLLM EngineArgs field (max_num_seqs=256, gpu_memory_utilization=0.8)"
    )

    max_waiting: int | None = option(
        DEFAULT_MAX_WAITING,
        "requests waiting in vLLM before no new page enters; null: no limit",
        example="max_waiting=8",
        bound="positive",
    )
    kv_cache_gib: float = option(
        DEFAULT_CPU_KV_CACHE_GIB,
        "GiB of KV cache on CPU",
        example="kv_cache_gib=8",
        bound="positive",
    )
    engine_args: dict[str, Any] = option(
        {}, "vLLM EngineArgs fields, passed through unchanged", settable=False
    )
