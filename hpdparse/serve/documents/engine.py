"""The server's engine as one document's conversion run sees it (`QueueEngine`): the run's pages
join the server's page queue, where the engine thread decodes them in one batch with every other
document's and the chat requests' pages; their results come back to the run's own thread.

Pages waiting outside the engine hold their prepared tiles, so documents share `places` (at most
that many of their pages queued and not yet taken by the engine); the engine's batch bounds the
rest. A run stops early when its `RunControl` says so: cancelled (its pages are dropped at once)
or the server stopping (no new page; those in the engine get until the deadline, then are
dropped), and what was decoded before is saved, so the document resumes from there.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import Any

from PIL import Image

from hpdparse.engines.base import FINISH_ERROR, Engine, EngineInfo, PageRequest, PageResult
from hpdparse.serve.queue import EngineLoop, QueueClosed, Ticket

_WAKE = 0.2  # seconds between looks at the run's control while it waits


@dataclasses.dataclass
class RunControl:
    """Whether a document's run goes on: `cancelled` drops its pages now; `stopping` (the
    server's) lets the pages in the engine finish until `deadline` (time.monotonic())."""

    cancelled: threading.Event = dataclasses.field(default_factory=threading.Event)
    stopping: threading.Event = dataclasses.field(default_factory=threading.Event)
    deadline: float | None = None

    @property
    def ends(self) -> bool:
        return self.cancelled.is_set() or self.stopping.is_set()

    def past_deadline(self) -> bool:
        if self.cancelled.is_set():
            return True
        return self.deadline is not None and time.monotonic() >= self.deadline


class _DocumentPage(Ticket):
    """One page's way back from the engine thread to its run."""

    def __init__(self, key: Hashable, results: queue.Queue[PageResult], place: Callable[[], None]):
        super().__init__(place)
        self.key = key
        self._results = results

    def finish(self, result: PageResult) -> None:
        self.release()
        self._results.put(dataclasses.replace(result, key=self.key))

    def fail(self, status: int, message: str) -> None:
        self.release()
        self._results.put(PageResult(self.key, "", FINISH_ERROR, error=message))


class QueueEngine(Engine):
    """An `Engine` whose pages go to the server's engine thread through its page queue."""

    def __init__(self, loop: EngineLoop, places: threading.Semaphore, control: RunControl) -> None:
        engine = loop.engine
        self.config, self.options, self.name = engine.config, engine.options, engine.name
        self.answers_from_text_layer = engine.answers_from_text_layer  # type: ignore[misc]
        self._engine, self._loop = engine, loop
        self._places, self._control = places, control

    @property
    def info(self) -> EngineInfo:
        return self._engine.info

    def preparer(self) -> Callable[[Image.Image], Any]:
        assert self._loop.preparer is not None, "the server's engine has not started"
        return self._loop.preparer

    def detokenize(self, token_ids: list[int]) -> str:
        return self._engine.detokenize(token_ids)

    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        results: queue.Queue[PageResult] = queue.Queue()
        out: list[_DocumentPage] = []
        pending = iter(requests)
        exhausted = False
        in_flight = 0
        try:
            while True:
                while not exhausted and in_flight < max_in_flight and not self._control.ends:
                    request = next(pending, None)
                    if request is None:
                        exhausted = True
                    elif self._submit(request, results, out):
                        in_flight += 1
                if in_flight == 0 or self._control.past_deadline():
                    return
                try:
                    result = results.get(timeout=_WAKE)
                except queue.Empty:
                    continue
                in_flight -= 1
                yield result
        finally:
            for page in out:
                page.cancel.set()

    def _submit(
        self, request: PageRequest, results: queue.Queue[PageResult], out: list[_DocumentPage]
    ) -> bool:
        """Queue one page once there is a place for it; False when the run ends first."""
        while not self._places.acquire(timeout=_WAKE):
            if self._control.ends:
                return False
        page = _DocumentPage(request.key, results, self._places.release)
        try:
            self._loop.submit(page, request.payload, request.text_layer)
        except QueueClosed:
            page.taken()
            return False
        out.append(page)
        return True
