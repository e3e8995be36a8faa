"""vLLM engine test helpers: the tiny checkpoint, test engine settings, the sample pages, the
"forking" checkpoint (tiny-hpd rewired into a chain that forks every 47 tokens) and the pool of
engines the vLLM test modules share.

Imported by the vLLM tests and the benchmarks; needs torch and safetensors, not vLLM."""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from PIL import Image

from hpdparse.engines.base import EngineConfig
from hpdparse.engines.vllm.options import VllmOptions
from tests.helpers.paths import FIXTURES, SAMPLES

if TYPE_CHECKING:
    from hpdparse.engines.vllm.engine import VllmEngine

TINY = FIXTURES / "tiny-hpd"
MAX_TOKENS = 160
MAX_MODEL_LEN = 4096
DPI = 72
# The forking chain: <BLOCK>, PARENT_RUN tokens, <FORK>, TAIL_RUN tokens, then <BLOCK> again.
PARENT_RUN, TAIL_RUN, CHILD_RUN = 40, 5, 12
CYCLE = PARENT_RUN + TAIL_RUN + 2  # <BLOCK>, the run, <FORK>, the tail


def vllm_config(model: Path, fork: bool, max_tokens: int = MAX_TOKENS) -> EngineConfig:
    """The test settings, for the vllm engine and (the same text) the torch engine."""
    return EngineConfig(
        model=str(model),
        fork=fork,
        mtp=False,  # P-MTP has its own tests (test_vllm_mtp.py)
        # HPDPARSE_TEST_DEVICE=cuda: the engine's GPU defaults (CUDA graphs, bfloat16).
        device=os.environ.get("HPDPARSE_TEST_DEVICE", "cpu"),
        max_tokens=max_tokens,
        max_model_len=MAX_MODEL_LEN,
    )


def vllm_options(**engine_options: object) -> VllmOptions:
    """The vllm engine's test options (a small KV cache on CPU), as ``--engine-option`` pairs."""
    return VllmOptions.from_mapping({"kv_cache_gib": 0.25, **engine_options})


def sample_pages() -> list[tuple[tuple[str, int], Image.Image]]:
    import pymupdf

    pages = []
    for pdf in sorted(SAMPLES.glob("*.pdf")):
        with pymupdf.open(pdf) as doc:
            for number, page in enumerate(doc, start=1):
                pix = page.get_pixmap(dpi=DPI)
                image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
                pages.append(((pdf.stem, number), image))
    for png in sorted(SAMPLES.glob("*.png")):
        pages.append(((png.stem, 1), Image.open(png).convert("RGB")))
    assert pages, f"no sample pages in {SAMPLES}"
    return pages


def write_forking_checkpoint(out: Path) -> Path:
    """Copy tiny-hpd and rewire its decoder into a deterministic chain that forks."""
    import torch
    from safetensors.torch import load_file, save_file

    from hpdparse.hpd.checkpoint import open_checkpoint
    from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids

    shutil.copytree(TINY, out)
    ckpt = open_checkpoint(str(out))
    tokenizer = load_tokenizer(ckpt.path, str(out))
    ids = token_ids(tokenizer, ckpt.config, str(out))
    builder = PromptBuilder(tokenizer, ids, ckpt.chat_template())
    last = {builder.build(1, fork)[-1] for fork in (True, False)}
    assert len(last) == 1, "fork and plain prompts should end on the same token"

    weights = load_file(str(out / "model.safetensors"))
    embed_key = "language_model.model.embed_tokens.weight"
    vocab, hidden = weights[embed_key].shape
    generator = torch.Generator().manual_seed(0)
    embed = torch.randn(vocab, hidden, generator=generator)
    for name in weights:
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            weights[name] = torch.zeros_like(weights[name])
    weights[embed_key] = embed
    unit = embed / embed.norm(dim=1, keepdim=True)
    head = torch.zeros(vocab, hidden)
    special = {ids.block, ids.fork, ids.child, ids.im_end, ids.img_context, *last}
    special |= {ids.img_start, ids.img_end} | set(ids.stop)
    plain = [t for t in range(vocab) if t not in special][: PARENT_RUN + TAIL_RUN + CHILD_RUN]
    run_p, run_t, run_c = (
        plain[:PARENT_RUN],
        plain[PARENT_RUN : PARENT_RUN + TAIL_RUN],
        plain[PARENT_RUN + TAIL_RUN :],
    )
    chains = [
        [*last, ids.block],
        [ids.block, *run_p, ids.fork, *run_t, ids.block],
        # A child writes <FORK> too, then runs on along the parent's chain until max_tokens:
        # children never fork, so its <FORK>s must stay in its text.
        [ids.child, *run_c, ids.fork],
    ]
    for chain in chains:
        for a, b in itertools.pairwise(chain):
            head[b] += 4.0 * unit[a] * hidden**0.5
    weights["language_model.lm_head.weight"] = head
    weights["language_model.model.norm.weight"] = torch.ones(hidden)
    save_file({k: v.contiguous() for k, v in weights.items()}, str(out / "model.safetensors"))
    return out


class EnginePool:
    """Started vLLM engines by configuration, so that test modules share one start of each.

    `get` hands an engine over as if fresh: vLLM's prefix, encoder and multimodal caches are
    emptied, so no test sees another module's pages served from them (its own model counters
    keep counting: tests read their differences). Configurations that differ only in
    `max_tokens` share an engine: the engine reads its token limit at each run, and `get` sets
    it to the one asked for. Call it where the engine is used after other
    engines may have been closed: vLLM keeps its parallel groups process-wide and an in-process
    engine's shutdown tears them down for every engine (`cleanup_dist_env_and_memory`); `get`
    sets them up again, as the engine's worker did at start."""

    def __init__(self) -> None:
        self._engines: dict[str, VllmEngine] = {}
        self.starts = 0

    def get(self, config: EngineConfig, **engine_options: object) -> VllmEngine:
        """The started engine of `config` and `vllm_options(**engine_options)`."""
        import copy
        import dataclasses

        from hpdparse.engines.vllm.engine import VllmEngine

        options = sorted(engine_options.items())
        fields = dataclasses.asdict(config)
        del fields["max_tokens"]  # read at each run (VllmEngine.run)
        key = repr((sorted(fields.items()), options))
        engine = self._engines.get(key)
        if engine is None:
            engine = VllmEngine(copy.deepcopy(config), vllm_options(**engine_options))
            engine.start()
            self.starts += 1
            self._engines[key] = engine
        else:
            _restore_parallel_state(engine)
            llm = engine.llm_engine
            assert not llm.has_unfinished_requests(), "a shared engine was left mid-run"
            assert llm.reset_prefix_cache(), "the prefix cache was not emptied"
            llm.reset_encoder_cache()
            llm.reset_mm_cache()
            engine.config.max_tokens = config.max_tokens
        return engine

    def close_all(self) -> None:
        engines, self._engines = list(self._engines.values()), {}
        for engine in engines:
            engine.close()


def _restore_parallel_state(engine: VllmEngine) -> None:
    """Set vLLM's process-wide parallel groups up again for an in-process, single-worker engine
    if another engine's shutdown destroyed them (as its worker's init_device does)."""
    from vllm.config import set_current_vllm_config
    from vllm.distributed import parallel_state
    from vllm.platforms import current_platform
    from vllm.v1.worker.gpu_worker import init_worker_distributed_environment

    if parallel_state.model_parallel_is_initialized():
        return
    core = engine.llm_engine.engine_core.engine_core  # in-process: no engine-core subprocess
    worker = core.model_executor.driver_worker.worker
    with set_current_vllm_config(worker.vllm_config):
        init_worker_distributed_environment(
            worker.vllm_config,
            worker.rank,
            worker.distributed_init_method,
            worker.local_rank,
            current_platform.dist_backend,
        )
