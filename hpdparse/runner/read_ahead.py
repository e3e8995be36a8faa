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

from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Generic, TypeVar

from hpdparse.engines.base import PageRequest
from hpdparse.runner.workers import WorkerPool, prepare_page

RASTERIZE_ATTEMPTS = 2  # a page whose rasterizer process dies twice is given up as failed

Owner = TypeVar("Owner")


@dataclass
class _Slot(Generic[Owner]):
    owner: Owner
    source: str
    number: int
    future: Future
    generation: int  # the pool's when the future was submitted
    attempts: int = 1
    alone: bool = False  # running in a pool of its own (a shared pool crashed under it)


class ReadAhead:
    """Rasterize and prepare pages in `pool` (whose workers run the engine's preparer), at most
    `window` pages ahead of the consumer, each within `timeout` seconds."""

    def __init__(
        self,
        pool: WorkerPool,
        dpi: int,
        password: str | None,
        window: int,
        timeout: float,
        attempts: int = RASTERIZE_ATTEMPTS,
        read_text_layer: bool = False,
    ) -> None:
        self.pool = pool
        self.read_text_layer = read_text_layer  # each page's words too (--text-layer prefer)
        self.dpi = dpi
        self.password = password
        self.window = max(1, window)
        self.timeout = timeout
        self.attempts = attempts
        self._alone: WorkerPool | None = None  # where a suspect page of a shared pool runs

    def pages(
        self, pages: Iterable[tuple[Owner, str, int]]
    ) -> Iterator[tuple[Owner, int, PageRequest | str]]:
        """For each (owner, source, number) of `pages`, page `number` (1-based) of file `source`,
        `owner` the caller's handle for the page's document: (owner, number, its request keyed
        (owner, number)), in order; a page that cannot be rasterized or prepared comes with its
        one-line error instead. `pages` is pulled lazily, only to keep the window full, so it may
        plan documents as it goes."""
        window: deque[_Slot[Owner]] = deque()
        pending = iter(pages)
        try:
            yield from self._pages(window, pending)
        finally:
            if self._alone is not None:
                self._alone.shutdown(cancel=True)
                self._alone = None

    def _pages(
        self, window: deque[_Slot[Owner]], pending: Iterator[tuple[Owner, str, int]]
    ) -> Iterator[tuple[Owner, int, PageRequest | str]]:
        exhausted = False
        while True:
            while not exhausted and len(window) < self.window:
                page = next(pending, None)
                if page is None:
                    exhausted = True
                    break
                owner, source, number = page
                future, generation = self._submit(source, number)
                window.append(_Slot(owner, source, number, future, generation))
            if not window:
                return
            head = window[0]
            try:
                request = head.future.result(timeout=self.timeout)
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

    def _submit(self, source: str, number: int) -> tuple[Future, int]:
        return self.pool.submit_tracked(
            prepare_page, source, number, self.dpi, self.password, self.read_text_layer
        )

    def _recover(
        self, window: deque[_Slot[Owner]], timed_out: bool
    ) -> tuple[Owner, int, str] | None:
        """A rasterizer process died or hangs. Which page killed it is unknown, so the pages in
        the window are asked again in a new pool; the head page fails after a timeout or its last
        attempt (returned with its error)."""
        head = window[0]
        if not timed_out and head.generation != self.pool.generation:
            # another run sharing the pool found this crash first and rebuilt it: ask again
            for slot in window:
                slot.future, slot.generation = self._submit(slot.source, slot.number)
            return None
        self.pool.rebuild(kill=timed_out, generation=head.generation)
        failure = None
        if timed_out or head.attempts >= self.attempts:
            window.popleft()
            reason = (
                f"rendering took more than {self.timeout:g} s"
                if timed_out
                else "the renderer crashed"
            )
            error = f"{head.source}: page {head.number} cannot be rendered: {reason}"
            failure = (head.owner, head.number, error)
        else:
            head.attempts += 1
        for slot in window:
            slot.future, slot.generation = self._submit(slot.source, slot.number)
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
            window.popleft()
            error = f"{head.source}: page {head.number} cannot be rendered: the renderer crashed"
            return head.owner, head.number, error
        self.pool.rebuild(generation=head.generation)
        self._alone = self._alone or self.pool.alone()
        head.future, head.generation = self._alone.submit_tracked(
            prepare_page, head.source, head.number, self.dpi, self.password, self.read_text_layer
        )
        head.alone = True
        for slot in list(window)[1:]:
            if slot.future.done() and not slot.alone and _broken(slot.future):
                slot.future, slot.generation = self._submit(slot.source, slot.number)
        return None


def _broken(future: Future) -> bool:
    return future.cancelled() or isinstance(future.exception(), BrokenProcessPool)
