"""The `torch` engine: the HPD model in plain PyTorch (CPU, CUDA or Apple MPS).

It is the reference implementation of the model and of HPD decoding (see engines/torch/decoding.py):
pages are decoded together, every live branch of every page advancing in one batched forward pass
per step, with optional P-MTP speculative decoding. `TorchOptions.schedule` (``--engine-option
schedule=serial``) decodes one branch per page at a time, for comparisons; the text is the same.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from hpdparse.engines.base import (
    FINISH_ERROR,
    PageRequest,
    PageResult,
    cancelled_result,
    page_token_limit,
)
from hpdparse.engines.local import LocalEngine
from hpdparse.engines.torch.options import TorchOptions
from hpdparse.errors import EngineError
from hpdparse.hpd.logprobs import PageLogprobs

DTYPES = ("float32", "bfloat16", "float16")
_END = object()


def pick_device(requested: str | None) -> str:
    import torch

    if requested and requested != "auto":
        if requested.startswith("cuda") and not torch.cuda.is_available():
            raise EngineError(f"device {requested} requested but CUDA is not available")
        if requested == "mps" and not torch.backends.mps.is_available():
            raise EngineError("device mps requested but Apple MPS is not available")
        if requested != "cpu" and not requested.startswith(("cuda", "mps")):
            raise EngineError(f"unknown device {requested!r}; use cpu, cuda, cuda:N or mps")
        return requested
    if torch.cuda.is_available():
        return "cuda"
    return "mps" if torch.backends.mps.is_available() else "cpu"


def pick_dtype(requested: str | None, device: str) -> Any:
    import torch

    if requested in (None, "", "auto"):
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    if requested not in DTYPES:
        raise EngineError(f"unknown dtype {requested!r}; use one of {', '.join(DTYPES)} or auto")
    return getattr(torch, requested)


class TorchEngine(LocalEngine):
    name = "torch"
    options_class = TorchOptions
    options: TorchOptions
    _model: Any = None
    _decoder: Any = None  # decoding.HpdDecoder, set by start()
    device: str | None = None

    def start(self) -> None:
        if self._model is not None:
            return
        import torch

        from hpdparse.engines.torch.decoding import HpdDecoder
        from hpdparse.engines.torch.loading import load_model

        ckpt = self.checkpoint
        self.device = pick_device(self.config.device)
        dtype = pick_dtype(self.config.dtype, self.device)
        self._load_tokenizer()
        try:
            self._model = load_model(ckpt, device=self.device, dtype=dtype)
        except torch.cuda.OutOfMemoryError:
            raise EngineError(f"model {ckpt.model_id}: out of GPU memory while loading") from None
        try:
            self._decoder = HpdDecoder(self._model, self.ids, self.config, self.options.schedule)
        except ValueError as exc:
            raise EngineError(f"torch engine: {exc}") from None

    def close(self) -> None:
        self._model = self._decoder = None

    def _admit(self, request: PageRequest) -> Any:
        """The page in the decoder (a `decoding._Page`)."""
        import torch

        from hpdparse.engines.torch.decoding import PageJob
        from hpdparse.hpd.tiling import normalize_torch

        tiles = request.payload
        if not isinstance(tiles, np.ndarray) or tiles.ndim != 4 or tiles.dtype != np.uint8:
            raise ValueError("payload is not a uint8 tile array from this engine's preparer")
        tiling = self.tiling
        if tiles.shape[1] != tiling.tile_size:
            raise ValueError(f"tiles are {tiles.shape[1]} px, the model wants {tiling.tile_size}")
        with torch.inference_mode():
            pixels = normalize_torch(tiles, tiling, dtype=self._decoder.dtype, device=self.device)
            features = self._model.image_features(pixels)
            features = features.reshape(-1, features.shape[-1])
        prompt = self.prompts.build(features.shape[0], self.config.fork)
        max_tokens = page_token_limit(request, self.config.max_tokens)
        job = PageJob(request.key, prompt, features, max_tokens, self.answers(request))
        job.on_tokens, job.on_logprobs = request.on_tokens, request.on_logprobs
        job.cancel = request.cancel
        return self._decoder.new_page(job)

    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        if self._model is None:
            self.start()
        pending = iter(requests)
        live: list[Any] = []  # the decoder's pages (decoding._Page)
        exhausted = False
        limit = max(1, max_in_flight)
        while True:
            while not exhausted and len(live) < limit:
                request = next(pending, _END)
                if request is _END:
                    exhausted = True
                    break
                if request is None:  # "no request now": decode what is live, ask again later
                    break
                try:
                    live.append(self._admit(request))
                except Exception as exc:  # one bad page must not stop the others
                    yield PageResult(request.key, "", FINISH_ERROR, error=_one_line(exc))
            for page in [p for p in live if p.job.cancel is not None and p.job.cancel.is_set()]:
                live.remove(page)
                yield cancelled_result(page.job.key, seconds=time.monotonic() - page.job.started)
            if not live:
                if exhausted:
                    return
                continue  # nothing live: ask the source again (a live source blocks)
            try:
                self._decoder.step(live)
            except Exception as exc:  # e.g. out of memory: fail these pages, keep going
                error = f"torch: {_one_line(exc)}"
                for page in live:
                    yield PageResult(page.job.key, "", FINISH_ERROR, error=error)
                live = []
                continue
            still = []
            for page in live:
                page.tree.stream_settled(page.job.on_tokens, page.job.on_logprobs)
                if page.done:
                    yield self._result(page)
                else:
                    still.append(page)
            live = still

    def _result(self, page: Any) -> PageResult:
        decoded = self._decoder.result(page)
        stats = decoded.stats
        return PageResult(
            key=decoded.key,
            text=self.detokenize(decoded.token_ids),
            finish_reason=decoded.finish_reason,
            prompt_tokens=decoded.prompt_tokens,
            output_tokens=stats["parent_tokens"] + stats["child_tokens"],
            seconds=time.monotonic() - page.job.started,
            stats=stats,
            logprobs=PageLogprobs.of_ids(decoded.token_ids, decoded.logprobs, self.ids),
        )


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
