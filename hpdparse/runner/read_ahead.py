"""Rasterize ahead: pages are rasterized and prepared for the engine in a `WorkerPool` a bounded
number of pages ahead of whoever consumes them, and come back, as their `PageRequest`s, in the
order they were asked for.

A rasterizer process that dies (MuPDF can crash on a damaged file) or hangs does not stop the
run: the pool is rebuilt and the pages of the window are asked again; the page at the head of the
window gives up after RASTERIZE_ATTEMPTS crashes, or after one timeout, and comes back as a
failure. `ReadAhead` keeps nothing between calls but its pool, so a runner can use one per
machine, per process or per actor: the scheduler feeds its engine from it, and a Ray actor could
rasterize its work unit's pages with one around its own pool.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from hpdparse.engines.base import PageRequest
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool, prepare_page

RASTERIZE_ATTEMPTS = 2  # a page whose rasterizer process dies twice is given up as failed

Owner = TypeVar("Owner")


@dataclass
class _Slot(Generic[Owner]):
    owner: Owner
    source: str
    number: int
    future: Future = field(init=False)
    generation: int = field(init=False)  # the pool's when the future was submitted
    attempts: int = 1
    alone: bool = False  # running in a pool of its own (a shared pool crashed under it)


@dataclass
class ReadAhead:
    """Rasterize and prepare pages in `pool` (whose workers run the engine's preparer) with the
    dpi and password of `settings`, at most its `read_ahead_count()` pages ahead of the
    consumer, each within its `rasterize_timeout` seconds."""

    pool: WorkerPool
    settings: ConvertSettings
    read_text_layer: bool = False  # each page's words too (--text-layer prefer)
    window: int = field(init=False)
    # where a suspect page of a shared pool runs
    _alone: WorkerPool | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.window = self.settings.read_ahead_count()

    def pages(
        self, pages: Iterable[tuple[Owner, str, int]]
    ) -> Iterator[tuple[Owner, int, PageRequest | str]]:
        """For each (owner, source, number) of `pages`, page `number` (1-based) of file `source`,
        `owner` the caller's handle for the page's document: (owner, number, its request keyed
        (owner, number)), in order; a page that cannot be rasterized or prepared comes with its
        one-line error instead. `pages` is pulled lazily, only to keep the window full, so it may
        plan documents as it goes."""
        try:
            yield from self._pages(deque(), iter(pages))
        finally:
            if self._alone is not None:
                self._alone.shutdown(cancel=True)
                self._alone = None

    def _pages(
        self, window: deque[_Slot[Owner]], pending: Iterator[tuple[Owner, str, int]]
    ) -> Iterator[tuple[Owner, int, PageRequest | str]]:
        while True:
            for page in itertools.islice(pending, self.window - len(window)):
                window.append(self._submit(_Slot(*page)))
            if not window:
                return
            head = window[0]
            try:
                request = head.future.result(timeout=self.settings.rasterize_timeout)
            except (BrokenProcessPool, CancelledError, FuturesTimeout) as exc:
                # CancelledError: another run sharing the pool rebuilt it
                timed_out = isinstance(exc, FuturesTimeout)
                if self.pool.shared and not timed_out:
                    failure = self._recover_shared(window)
                else:
                    failure = self._recover(window, timed_out)
                if failure is not None:
                    yield failure
                continue
            window.popleft()
            if isinstance(request, PageRequest):
                request.key = (head.owner, head.number)
            yield head.owner, head.number, request

    def _submit(self, slot: _Slot[Owner], pool: WorkerPool | None = None) -> _Slot[Owner]:
        """(Re)submit `slot`'s page to `pool` (by default the run's)."""
        s = self.settings
        slot.future, slot.generation = (pool or self.pool).submit_tracked(
            prepare_page, slot.source, slot.number, s.dpi, s.password, self.read_text_layer
        )
        return slot

    def _recover(
        self, window: deque[_Slot[Owner]], timed_out: bool
    ) -> tuple[Owner, int, str] | None:
        """A rasterizer process died or hangs. Which page killed it is unknown, so the pages in
        the window are asked again in a new pool; the head page fails after a timeout or its last
        attempt (returned with its error)."""
        head = window[0]
        failure = None
        # Unless another run sharing the pool found this crash first and rebuilt it: then the
        # pages are only asked again.
        if timed_out or head.generation == self.pool.generation:
            self.pool.rebuild(kill=timed_out, generation=head.generation)
            if timed_out:
                failure = _given_up(
                    window, f"rendering took more than {self.settings.rasterize_timeout:g} s"
                )
            elif head.attempts >= RASTERIZE_ATTEMPTS:
                failure = _given_up(window, "the renderer crashed")
            else:
                head.attempts += 1
        for slot in window:
            self._submit(slot)
        return failure

    def _recover_shared(self, window: deque[_Slot[Owner]]) -> tuple[Owner, int, str] | None:
        """A rasterizer process of a pool other runs share died. Any run's page may have killed
        it, so the head page runs again in a pool of its own, where a crash is its own: it fails
        then. The first run to see the crash rebuilds the shared pool; every run asks its broken
        pages again."""
        head = window[0]
        if head.alone:
            assert self._alone is not None
            self._alone.shutdown(cancel=True)
            self._alone = None
            return _given_up(window, "the renderer crashed")
        self.pool.rebuild(generation=head.generation)
        self._alone = self._alone or self.pool.alone()
        self._submit(head, self._alone)
        head.alone = True
        for slot in list(window)[1:]:
            if slot.future.done() and not slot.alone and _broken(slot.future):
                self._submit(slot)
        return None


def _given_up(window: deque[_Slot[Owner]], reason: str) -> tuple[Owner, int, str]:
    """The head page of `window`, out of it, with its one-line error."""
    head = window.popleft()
    return (
        head.owner,
        head.number,
        f"{head.source}: page {head.number} cannot be rendered: {reason}",
    )


def _broken(future: Future) -> bool:
    return future.cancelled() or isinstance(future.exception(), BrokenProcessPool)
