"""Options of the vllm engine (``--engine-option KEY=VALUE``).

Besides its own options, the engine passes any other key to vLLM's ``EngineArgs`` unchanged
(``max_num_seqs=256``, ``gpu_memory_utilization=0.8``, ``tensor_parallel_size=2``); the names are
checked against ``EngineArgs`` when the engine starts, since that needs vLLM imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from hpdparse.engines.options import EngineOptions
from hpdparse.settings import setting

# Admission control: pull a new page only while the requests waiting in vLLM's scheduler hold
# fewer prompt tokens still to compute than this many steps' token budget
# (max_num_batched_tokens). We top the queue up before every step, so it only has to hold what
# the scheduler can start in one step; two keep it full when a page is larger than the rest of a
# step's budget. A count of pages would be wrong both ways: 8 waiting one-tile pages are less
# than one step on a CPU (the batch fills late, measured: 431 steps where LLM.generate takes 400
# for the same 256 pages), 8 waiting 25-tile pages are ~120 MB of tiles that wait for steps.
# Twice 16,384 tokens (a GPU's budget) is 128 tiles, at most ~77 MB of colour tiles.
WAITING_STEPS = 2


@dataclass
class VllmOptions(EngineOptions):
    """The vllm engine's own options, plus vLLM ``EngineArgs`` fields passed through."""

    engine: ClassVar[str] = "vllm"
    PASSTHROUGH: ClassVar[str | None] = "engine_args"
    PASSTHROUGH_TAKES: ClassVar[str] = "vLLM EngineArgs fields"
    PASSTHROUGH_HELP: ClassVar[str] = (
        "any vLLM EngineArgs field (max_num_seqs=256, gpu_memory_utilization=0.8)"
    )

    max_waiting: int | None = setting(
        None,
        "requests waiting in vLLM before no new page enters; null (default): no count limit",
        example="max_waiting=8",
        low=0,
        low_open=True,
    )
    max_waiting_tokens: int | None = setting(
        None,
        "prompt tokens waiting in vLLM before no new page enters; null (default): twice "
        "max_num_batched_tokens",
        example="max_waiting_tokens=32768",
        low=0,
        low_open=True,
    )
    engine_core: Literal["inline", "process"] = setting(
        # Chosen by measurement (README, Performance): see engines/vllm/core_process.py.
        "inline",
        "where vLLM's engine core runs: inline (in this process, one thread) or process (its own "
        "process, vLLM's default: scheduling and the model overlap hpdparse's own work)",
        example="engine_core=process",
    )
    kv_cache_gib: float = setting(
        2.0,
        "GiB of KV cache on CPU",
        example="kv_cache_gib=8",
        low=0,
        low_open=True,
    )
    logprobs: bool = setting(
        True,
        "keep each chosen token's log-probability (the confidence scores); false: confidence null",
        example="logprobs=false",
    )
    engine_args: dict[str, Any] = setting(
        {}, "vLLM EngineArgs fields, passed through unchanged", settable=False
    )
