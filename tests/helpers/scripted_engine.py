"""A scripted engine for fast runner tests: an `Engine` with no model, whose answers the test
chooses, behind the real interface (the runner cannot tell it from a real engine).

    engine = ScriptedEngine(order="reverse", fail={1})
    report = Converter(engine, settings).run([pdf])

Its preparer (run in the rasterizer processes) turns a page image into a short digest of its
pixels; the answer for a page is `scripted_stream(digest)`, a valid HPD stream that names it (and
has a figure), so a test can tell which page's text ended where (`expected_stream(pdf, number,
dpi)`).

Requests are numbered 0, 1, ... in the order the engine pulls them. Each round the engine pulls
requests until `max_in_flight` are in, the source is exhausted or it yields None ("no request
now": the live-source contract of `Engine.run`; with nothing in flight the engine asks again at
once), then completes all of them in `order`: "pulled", "reverse", or a function from the round's
request numbers to the completion order. Script:
    fail        request numbers answered with FINISH_ERROR ("scripted failure of request N")
    crash_after raise EngineError after this many results (an engine-wide failure mid-run)
    on_start, on_result  called in start() and before each result is yielded (e.g. to move a
                fake clock)
Records: `calls` (open, preparer, start, close in call order), `pulled` (keys in pull order),
`nones` (None pulls), `max_in_flight_seen`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path

from PIL import Image

from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_STOP,
    Engine,
    EngineConfig,
    EngineInfo,
    PageRequest,
    PageResult,
)
from hpdparse.errors import EngineError
from hpdparse.sources.rasterize import rasterize_page

SCRIPTED_INFO = EngineInfo(
    engine="scripted",
    model="scripted-model",
    revision=None,
    prompt="document parsing with fork.",
    max_tokens=8000,
)

_END = object()


def page_digest(image: Image.Image) -> str:
    """The scripted engine's payload: a digest of the page's size and pixels."""
    digest = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()[:16]


def scripted_stream(digest: str) -> str:
    """The scripted engine's answer for the page with this digest: a title, a paragraph and a
    figure (so documents get images/page-NNNN-figure-01.png)."""
    return (
        f"<BLOCK>doc_title [100, 80, 900, 120]<CHILD>Page {digest}"
        f"<BLOCK>text [100, 150, 900, 200]<CHILD>The text of page {digest}."
        "<BLOCK>image [100, 250, 600, 500]"
    )


def expected_stream(pdf: Path, number: int, dpi: int) -> str:
    """What the scripted engine answers for page `number` of `pdf` rasterized at `dpi`."""
    return scripted_stream(page_digest(rasterize_page(str(pdf), number, dpi)[0]))


class ScriptedEngine(Engine):
    name = "scripted"

    def __init__(
        self,
        *,
        order: str | Callable[[list[int]], list[int]] = "pulled",
        fail: Collection[int] = (),
        crash_after: int | None = None,
        on_start: Callable[[], None] | None = None,
        on_result: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(EngineConfig(model=SCRIPTED_INFO.model))
        self.order = order
        self.fail = set(fail)
        self.crash_after = crash_after
        self.on_start = on_start
        self.on_result = on_result
        self.calls: list[str] = []
        self.pulled: list[object] = []
        self.nones = 0
        self.max_in_flight_seen = 0
        self._results = 0

    @property
    def info(self) -> EngineInfo:
        return SCRIPTED_INFO

    def open(self) -> None:
        self.calls.append("open")

    def start(self) -> None:
        self.calls.append("start")
        if self.on_start is not None:
            self.on_start()

    def close(self) -> None:
        self.calls.append("close")

    def preparer(self) -> Callable[[Image.Image], str]:
        self.calls.append("preparer")
        return page_digest

    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        pending = iter(requests)
        exhausted = False
        while not exhausted:
            batch: list[tuple[int, PageRequest]] = []
            while len(batch) < max(1, max_in_flight):
                request = next(pending, _END)
                if request is _END:
                    exhausted = True
                    break
                if request is None:
                    self.nones += 1
                    if batch:
                        break
                    continue  # nothing in flight: ask the source again at once
                batch.append((len(self.pulled), request))
                self.pulled.append(request.key)
            self.max_in_flight_seen = max(self.max_in_flight_seen, len(batch))
            yield from self._complete(batch)

    def _complete(self, batch: list[tuple[int, PageRequest]]) -> Iterator[PageResult]:
        numbers = [n for n, _ in batch]
        if self.order == "reverse":
            numbers.reverse()
        elif callable(self.order):
            numbers = list(self.order(numbers))
        by_number = dict(batch)
        for n in numbers:
            if self.crash_after is not None and self._results >= self.crash_after:
                raise EngineError("scripted engine: crashed mid-run")
            if self.on_result is not None:
                self.on_result()
            self._results += 1
            request = by_number[n]
            if n in self.fail:
                yield PageResult(request.key, "", FINISH_ERROR, f"scripted failure of request {n}")
                continue
            text = scripted_stream(request.payload)
            tokens = len(text) // 4
            stats = {"decoding_steps": tokens}
            yield PageResult(request.key, text, FINISH_STOP, None, 10, tokens, 0.01, stats)
