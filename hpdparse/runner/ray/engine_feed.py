"""One actor's engine, shared by every work unit the actor holds at once.

Ray Data calls the actor for several units concurrently (one thread each). They all hand their
pages to one `EngineFeed`: a single feeder thread rasterizes them in the actor's own rasterizer
processes (`ReadAhead`, so a crashed or hung rasterizer fails its page, not the actor), and
- a live engine (vllm, torch: `Engine.run` takes a source that yields None) runs once, in its
  own thread, fed from a queue across units, so it keeps --batch-size pages in flight;
- the openai engine (no live source) gets one `run` per unit, in the unit's thread, each with
  the unit's pages.
Each unit gets its pages back, in completion order, through its own queue (`UnitPages`), as
`RawPage`s to save: the engine's result with the rasterized page's geometry, or a failed page
(not rasterized, or the engine's error) with its one-line error.

A dead engine (an exception out of `Engine.run`, or no result for `hang_seconds` while pages
are in flight) cannot be trusted with the next page: the process exits (`die`), Ray restarts
the actor and retries its units on the new one. No Ray import here.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import NoReturn

from hpdparse.engines.base import Engine, PageRequest, PageResult
from hpdparse.runner.read_ahead import ReadAhead
from hpdparse.sources.document import PageGeometry
from hpdparse.store.raw_pages import RawPage

EXIT_ENGINE_DEAD = 70
"""Exit status of an actor process whose engine died or hung."""


def die(message: str) -> NoReturn:
    """End this actor process at once (no cleanup that could hang on a broken engine)."""
    print(f"hpdparse: {message}; ending this actor so that Ray restarts it", file=sys.stderr)
    sys.stderr.flush()
    os._exit(EXIT_ENGINE_DEAD)


class UnitPages:
    """The pages of one unit on their way through the feed. `items` gets, for a live engine,
    each page's outcome as it comes; without a live source, the unit's requests in order, for
    its own run. A page that could not be rasterized is its failed `RawPage` in either."""

    def __init__(self, source: str, pages: list[int]) -> None:
        self.source = source
        self.pages = pages
        self.items: queue.Queue[PageRequest | RawPage] = queue.Queue()


class EngineFeed:
    """Rasterize the pages of the units submitted (with `read_ahead`, around the actor's own
    pool) and decode them with `engine` (started)."""

    def __init__(
        self,
        engine: Engine,
        read_ahead: ReadAhead,
        *,
        live: bool,
        batch_size: int,
        hang_seconds: float,
        on_death: Callable[[str], NoReturn] = die,
    ) -> None:
        self.engine = engine
        self.live = live
        self.batch_size = batch_size
        self.hang_seconds = hang_seconds
        self._die = on_death
        self._read_ahead = read_ahead
        self._units: queue.Queue[UnitPages] = queue.Queue()
        # Prepared pages waiting for the live engine; bounded, so rasterizing stays ahead of
        # the engine by at most the read-ahead window.
        self._requests: queue.Queue[PageRequest] = queue.Queue(maxsize=read_ahead.window)
        # The geometry of each page in the engine, by request key (unit, page number).
        self._geometry: dict[tuple[UnitPages, int], PageGeometry] = {}
        self._lock = threading.Lock()
        self._in_flight = 0
        self._last_progress = time.monotonic()
        threading.Thread(target=self._feed, name="hpdparse-feed", daemon=True).start()
        if live:
            threading.Thread(target=self._run_live, name="hpdparse-engine", daemon=True).start()
        threading.Thread(target=self._watch, name="hpdparse-watchdog", daemon=True).start()

    def decode(self, source: str, pages: list[int]) -> Iterator[RawPage]:
        """Queue `pages` of `source` and yield their outcomes (all of them), as they come.
        Without a live engine the unit's own engine run happens here, in the caller's thread."""
        if not pages:
            return
        handle = UnitPages(source, pages)
        self._units.put(handle)
        if not self.live:
            yield from self._run_unit(handle)
            return
        for _ in pages:
            outcome = handle.items.get()
            assert isinstance(outcome, RawPage)
            yield outcome

    # --- rasterizing (the feeder thread) ---

    def _feed(self) -> None:
        while True:
            first = self._units.get()
            for handle, number, request in self._read_ahead.pages(self._pages(first)):
                if isinstance(request, str):
                    handle.items.put(RawPage.failed(number, request))
                    continue
                assert request.geometry is not None
                with self._lock:
                    self._geometry[handle, number] = request.geometry
                (self._requests if self.live else handle.items).put(request)

    def _pages(self, first: UnitPages) -> Iterator[tuple[UnitPages, str, int]]:
        """The pages of `first`, then of the units queued meanwhile; ends when none is queued
        (so the last pages are never held back waiting for more work)."""
        handle: UnitPages | None = first
        while handle is not None:
            for number in handle.pages:
                yield handle, handle.source, number
            try:
                handle = self._units.get_nowait()
            except queue.Empty:
                handle = None

    # --- a live engine (its own thread, one run for the actor's life) ---

    def _live_source(self) -> Iterator[PageRequest | None]:
        # next() runs in the engine's thread between steps: never block while pages decode.
        while True:
            try:
                request = self._requests.get_nowait()
            except queue.Empty:
                if self._in_flight:
                    yield None
                    continue
                request = self._requests.get()
            self._in_flight += 1
            self._last_progress = time.monotonic()
            yield request

    def _run_live(self) -> None:
        try:
            for result in self.engine.run(self._live_source(), max_in_flight=self.batch_size):
                self._in_flight -= 1
                handle, _number = result.key
                handle.items.put(self._outcome(result))
        except BaseException as exc:  # the engine is gone: no page can be trusted to it
            self._die(f"engine {self.engine.name} failed: {' '.join(str(exc).split()) or exc!r}")
        self._die(f"engine {self.engine.name} stopped taking pages")

    # --- an engine without a live source (one run per unit, in the unit's thread) ---

    def _run_unit(self, handle: UnitPages) -> Iterator[RawPage]:
        """The feeder puts each page of the unit, in order, into the unit's own queue: a request,
        or the failed page of one that could not be rasterized (passed on as is)."""
        not_rasterized: list[RawPage] = []

        def requests() -> Iterator[PageRequest]:
            for _ in handle.pages:
                item = handle.items.get()
                if isinstance(item, RawPage):
                    not_rasterized.append(item)
                    continue
                with self._lock:
                    self._in_flight += 1
                self._last_progress = time.monotonic()
                yield item

        try:
            for result in self.engine.run(requests(), max_in_flight=len(handle.pages)):
                with self._lock:
                    self._in_flight -= 1
                yield self._outcome(result)
                while not_rasterized:
                    yield not_rasterized.pop()
        except Exception as exc:
            self._die(f"engine {self.engine.name} failed: {' '.join(str(exc).split()) or exc!r}")
        yield from not_rasterized

    # --- results ---

    def _outcome(self, result: PageResult) -> RawPage:
        self._last_progress = time.monotonic()
        handle, number = result.key
        with self._lock:
            geometry = self._geometry.pop(result.key)
        if not result.ok:
            error = " ".join((result.error or "the engine gave no text").split())
            return RawPage.failed(number, f"{handle.source}: page {number}: {error}")
        return RawPage(number, result, geometry)

    def _watch(self) -> None:
        while True:
            time.sleep(min(5.0, self.hang_seconds / 4))
            idle = time.monotonic() - self._last_progress
            if self._in_flight > 0 and idle > self.hang_seconds:
                self._die(f"engine {self.engine.name} returned no page for {idle:.0f} s")
