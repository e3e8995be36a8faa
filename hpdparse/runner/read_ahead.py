"""Rasterize ahead: pages are rasterized and prepared for the engine in a `WorkerPool` a bounded
number of pages ahead of whoever consumes them, and come back in the order they were asked for.

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
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Generic, TypeVar

from hpdparse.runner.workers import PreparedPage, WorkerPool, prepare_page

RASTERIZE_ATTEMPTS = 2  # a page whose rasterizer process dies twice is given up as failed

Owner = TypeVar("Owner")


@dataclass(frozen=True)
class PageJob(Generic[Owner]):
    """A page to rasterize: page `number` (1-based) of file `source`; `owner` is the caller's
    handle for the page's document, handed back with the page."""

    owner: Owner
    source: str
    number: int


@dataclass
class _Slot(Generic[Owner]):
    job: PageJob[Owner]
    future: Future
    attempts: int = 1


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
        text_layer: bool = False,
    ) -> None:
        self.pool = pool
        self.text_layer = text_layer  # read each page's words too (--text-layer prefer)
        self.dpi = dpi
        self.password = password
        self.window = max(1, window)
        self.timeout = timeout
        self.attempts = attempts

    def pages(
        self, jobs: Iterable[PageJob[Owner]]
    ) -> Iterator[tuple[PageJob[Owner], PreparedPage | str]]:
        """(job, prepared page) for every job, in order; a page that cannot be rasterized or
        prepared comes as (job, its one-line error). `jobs` is pulled lazily, only to keep the
        window full, so it may plan documents as it goes."""
        window: deque[_Slot[Owner]] = deque()
        pending = iter(jobs)
        exhausted = False
        while True:
            while not exhausted and len(window) < self.window:
                job = next(pending, None)
                if job is None:
                    exhausted = True
                    break
                window.append(_Slot(job, self._submit(job)))
            if not window:
                return
            head = window[0]
            try:
                prepared = head.future.result(timeout=self.timeout)
            except (BrokenProcessPool, FuturesTimeout) as exc:
                failure = self._recover(window, timed_out=isinstance(exc, FuturesTimeout))
                if failure is not None:
                    yield failure
                continue
            window.popleft()
            yield head.job, prepared

    def _submit(self, job: PageJob[Owner]) -> Future:
        return self.pool.submit(
            prepare_page, job.source, job.number, self.dpi, self.password, self.text_layer
        )

    def _recover(
        self, window: deque[_Slot[Owner]], timed_out: bool
    ) -> tuple[PageJob[Owner], str] | None:
        """A rasterizer process died or hangs. Which page killed it is unknown, so the pages in
        the window are asked again in a new pool; the head page fails after a timeout or its last
        attempt (returned with its error)."""
        self.pool.rebuild(kill=timed_out)
        head = window[0]
        failure = None
        if timed_out or head.attempts >= self.attempts:
            window.popleft()
            reason = (
                f"rendering took more than {self.timeout:g} s"
                if timed_out
                else "the renderer crashed"
            )
            job = head.job
            failure = (job, f"{job.source}: page {job.number} cannot be rendered: {reason}")
        else:
            head.attempts += 1
        for slot in window:
            slot.future = self._submit(slot.job)
        return failure
