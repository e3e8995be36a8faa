"""The Engine interface shared by every engine, and a page's two shapes around it.

Data flow: the pipeline rasterizes a page and runs `engine.preparer()`'s function on it in a
worker (CPU work such as PNG encoding or tiling), which makes the page's `PageRequest` (the
payload, the page's geometry, its text layer when asked), and hands a lazy iterator of requests
to `engine.run(...)`. The engine pulls requests as it has room (at most `max_in_flight` pages
decoding at once) and yields a `PageResult` for each, in completion order; the result is what the
page's raw record keeps of its decoding (`store.raw_pages.RawPage`).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from PIL import Image

from hpdparse.engines.options import EngineConfig, EngineOptions
from hpdparse.hpd.logprobs import PageLogprobs
from hpdparse.hpd.protocol import FINISH_ERROR as FINISH_ERROR  # re-exported: PageResult's values
from hpdparse.hpd.protocol import FINISH_LENGTH as FINISH_LENGTH
from hpdparse.hpd.protocol import FINISH_STOP as FINISH_STOP
from hpdparse.hpd.protocol import instruction
from hpdparse.settings import TextLayerMode
from hpdparse.sources.document import PageGeometry
from hpdparse.sources.text_layer import PageText

CANCELLED = "cancelled"  # the error of a page dropped because its PageRequest.cancel was set


@dataclass(frozen=True)
class EngineInfo:
    """What produced a raw page. Raw output is reused on a rerun only when this matches."""

    engine: str
    model: str
    revision: str | None
    prompt: str
    max_tokens: int
    # PREFER when children were answered from the PDF's text layer (--text-layer prefer)
    text_layer: TextLayerMode | None = None

    def reuse_key_at(self, requested_dpi: int) -> ReuseKey:
        """What a saved raw page must match to be reused in a run at `requested_dpi` (--dpi)."""
        return ReuseKey(self.reuse_key(), requested_dpi)

    def reuse_key(self) -> DecodeKey:
        """What a saved raw page's text depends on (not the engine: every engine gives the same
        text for the same model and prompt)."""
        return DecodeKey(self.model, self.revision, self.prompt, self.max_tokens, self.text_layer)


@dataclass(frozen=True)
class DecodeKey:
    """What a page's decoded text depends on: raw/*.json's and raw/document.json's "reuse_key".
    Pages made with ``--text-layer prefer`` carry "text_layer": their text is partly the file's,
    so they are reused only by a prefer run, and a prefer run decodes the pages of other runs
    again."""

    model: str
    revision: str | None
    prompt: str
    max_tokens: int
    text_layer: TextLayerMode | None = None

    def to_json(self) -> dict[str, Any]:
        """The JSON object, in the order of every version; "text_layer" only when set."""
        key = asdict(self)
        if self.text_layer is None:
            del key["text_layer"]
        return key

    @classmethod
    def from_json(cls, data: Any) -> DecodeKey | None:
        """The key a JSON object holds; None when it holds none (a page never reused then)."""
        try:
            mode = data.get("text_layer")
            fields = data["model"], data["revision"], data["prompt"], data["max_tokens"]
            return cls(*fields, TextLayerMode(mode) if mode is not None else None)
        except (AttributeError, KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True)
class ReuseKey:
    """A saved raw page is reused only when it was made with the same model, revision, prompt and
    max tokens (`DecodeKey`) from a page rasterized at the same requested dpi
    ("requested_dpi")."""

    decode: DecodeKey
    requested_dpi: int


@dataclass
class PageRequest:
    """One page to decode. `key` is opaque to the engine and comes back on the result; `payload`
    is what `Engine.preparer()` made of the page's image, and `geometry` that image's size, dpi
    and label (the engines do not read it: it is kept with the page's raw record).

    `on_tokens`, when set, streams the page (vllm and torch engines; the openai engine ignores
    it): after each engine step in which the page's *settled* output grew, the engine calls it
    with the newly settled token ids, from the thread that iterates `run()`'s results and before
    the page's result is yielded. Settled means it can no longer change: the parent's tokens up
    to a `<FORK>` whose child is still decoding, then `<CHILD>` and that child's tokens so far
    (see hpd/fork_tree.py). The calls' ids, concatenated, are exactly the ids the page's
    `PageResult.text` is decoded from (`Engine.detokenize` turns them into text); a page that
    fails ends with an error result whatever was streamed. An exception it raises ends the run.
    `on_logprobs`, when set too, is called just before each `on_tokens` call with those tokens'
    log-probabilities (when the engine has them: vllm and torch do).

    `text_layer`: the page's words from the PDF (``--text-layer prefer``): the vllm and torch
    engines in fork mode then take the content of text-like blocks whose text is trusted from it
    instead of decoding their children (engines/text_layer.py); the openai engine ignores it.

    `max_tokens` lowers the engine's token limit for this page (never raises it). `cancel`, once
    set (from any thread), makes the vllm and torch engines drop the page between steps: its
    requests are freed and its result has finish_reason FINISH_ERROR and error CANCELLED.
    """

    key: Hashable
    payload: Any
    geometry: PageGeometry | None = None
    on_tokens: Callable[[list[int]], None] | None = None
    max_tokens: int | None = None
    cancel: threading.Event | None = None
    on_logprobs: Callable[[list[float]], None] | None = None
    text_layer: PageText | None = None


@dataclass
class PageResult:
    """The raw HPD stream of one page (children spliced in, stop tokens removed) and how decoding
    it went; a raw page read back from its folder carries the one it was saved from (its key is
    then the page number, its seconds to the ms, its finish reason None when an early version
    did not record it)."""

    key: Hashable
    text: str
    finish_reason: str | None  # FINISH_STOP, FINISH_LENGTH or FINISH_ERROR
    error: str | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    # Engine statistics, all optional: decoding_steps, forks, child_tokens, cached_tokens,
    # drafted_tokens, accepted_tokens, retries ...
    stats: dict[str, int | float] = field(default_factory=dict)
    # The chosen tokens' log-probabilities by block (None when the engine or server gave none).
    logprobs: PageLogprobs | None = None

    @property
    def ok(self) -> bool:
        return self.finish_reason != FINISH_ERROR


def cancelled_result(key: Hashable, prompt_tokens: int = 0, seconds: float = 0.0) -> PageResult:
    """The result of a page dropped because its request was cancelled."""
    return PageResult(
        key, "", FINISH_ERROR, error=CANCELLED, prompt_tokens=prompt_tokens, seconds=seconds
    )


def page_token_limit(request: PageRequest, configured: int) -> int:
    """The token limit for one page: the engine's, or the request's when lower."""
    if request.max_tokens is None:
        return configured
    return max(1, min(configured, request.max_tokens))


class Engine(ABC):
    """A running model. Use as a context manager or call start()/close().

    Lifecycle: ``open()`` (resolve the model and its revision, no weights), then ``start()``
    (load the model or check the server; calls ``open()`` itself when needed), ``run(...)``,
    ``close()``. `info` is valid from ``open()`` on and does not change after it."""

    name: str = "base"
    options_class: ClassVar[type[EngineOptions]] = EngineOptions
    # Honours PageRequest.text_layer in fork mode (--text-layer prefer): vllm and torch.
    answers_from_text_layer: ClassVar[bool] = False

    def __init__(
        self, config: EngineConfig, options: EngineOptions | Mapping[str, Any] | None = None
    ) -> None:
        self.config = config
        # Checked here: an unknown option or a wrong value fails before anything is loaded.
        self.options = self.options_class.coerce(options)

    @property
    def info(self) -> EngineInfo:
        """Model id, revision (if known), prompt and max tokens: recorded with every raw page.
        Valid after open() (engines with a checkpoint open it here when needed)."""
        return EngineInfo(
            engine=self.name,
            model=self.config.model,
            revision=self.revision,
            prompt=instruction(self.config.fork),
            max_tokens=self.config.max_tokens,
        )

    @property
    def revision(self) -> str | None:
        """The model's commit, when the engine knows it (None: a server does not say)."""
        return None

    def open(self) -> None:  # noqa: B027 - optional hook
        """Resolve the model and its revision without loading weights (cheap, idempotent).
        `info` and `preparer()` are valid after it. Raise EngineError with a one-line message."""

    def start(self) -> None:  # noqa: B027 - optional hook
        """Load the model or check the server (calling open() first when it was not).
        Raise EngineError with a one-line message."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Free the model or connections."""

    @abstractmethod
    def preparer(self) -> Callable[[Image.Image], Any]:
        """A picklable function image -> payload, run in worker processes ahead of the engine."""

    def detokenize(self, token_ids: list[int]) -> str:
        """The text `token_ids` decode to, special tokens kept, as the engine decodes
        `PageResult.text` (for the ids `PageRequest.on_tokens` streams). Needs a started engine;
        the openai engine has no tokenizer and raises NotImplementedError."""
        raise NotImplementedError(f"the {self.name} engine does not detokenize")

    @abstractmethod
    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        """Decode pages, pulling `requests` lazily so that at most `max_in_flight` pages are in
        the engine at once; yield one result per request in completion order. A page that fails
        yields a result with finish_reason FINISH_ERROR; only engine-wide failures raise.

        A live source (a server's queue) may yield None, meaning "no request now": the engine
        then stops pulling for this round and keeps decoding the pages it has; it calls next()
        again on a later round, and at once when it has nothing in flight (so such a source
        should block there until a request arrives, and end with StopIteration). next() runs
        in the thread that iterates the results, between engine steps. An exception raised by
        next() ends the run: the engine drops its pages in flight and the exception propagates.
        The vllm and torch engines support None, and honour PageRequest.max_tokens and
        PageRequest.cancel; the openai engine does none of these."""

    def __enter__(self) -> Engine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
