"""The engine loop and its page queue, between the HTTP side and the engine.

One engine thread owns the engine (vLLM is not thread-safe): it starts it, runs `Engine.run` over
the page queue, a live source, and hands each result to the page's Ticket. The HTTP side
submits prepared pages with a Ticket each; the Ticket hears, on the engine thread, when the engine
takes its page (`taken`: the page no longer holds a place in the queue), the newly settled tokens
of a streamed page or one whose answer has log-probabilities (`tokens`, after their
`token_logprobs`), and the result (`finish`) or an error answer (`fail`). A ticket
whose `cancel` is set is dropped from the queue, or by the engine between two steps.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from hpdparse.engines.base import CANCELLED, Engine, PageRequest, PageResult, cancelled_result
from hpdparse.sources.text_layer import PageText

log = logging.getLogger(__name__)

SHUTTING_DOWN = "the server is shutting down"


class Ticket:
    """One page's way back to its submitter; the engine thread calls `taken`, `tokens` (after
    their `token_logprobs`), then `finish` or `fail`. It holds a place in the queue from its
    creation until the engine takes the page (or the page ends first): `release` gives the
    place back, once. The defaults: a page that wants no tokens as they settle."""

    max_tokens: int | None = None
    streamed = False
    logprobs = False  # the answer needs the tokens' log-probabilities (and so their ids)

    def __init__(self, release: Callable[[], None]) -> None:
        self.cancel = threading.Event()
        self._release = release
        self._released = False

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._release()

    def taken(self) -> None:
        self.release()

    def tokens(self, token_ids: list[int]) -> None:
        """Tokens newly settled (a streamed page, or one answered with log-probabilities)."""

    def token_logprobs(self, values: list[float]) -> None:
        """The log-probabilities of the next `tokens`."""

    def finish(self, result: PageResult) -> None:
        raise NotImplementedError

    def fail(self, status: int, message: str) -> None:
        raise NotImplementedError


class QueueClosed(Exception):
    """The queue takes no more pages (the server is stopping or the engine failed)."""


class _ShuttingDown(Exception):
    """Raised by the live source to end the engine's run when the server stops."""


class EngineLoop:
    """The engine thread: start the engine, then run it over the page queue (its live request
    source) until the queue closes; each result goes to its page's ticket.

    `submit` runs on HTTP threads; `_requests` and `_finish` on the engine thread.
    """

    def __init__(self, engine: Engine, batch_size: int) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.preparer: Callable[[Any], Any] | None = None
        self.error: BaseException | None = None
        self.ready = threading.Event()  # set when the engine is up, or failed to start
        self._thread = threading.Thread(target=self._main, name="hpdparse-engine", daemon=True)
        self._queue: queue.Queue[tuple[int, Any, PageText | None] | None] = queue.Queue()
        self._tickets: dict[int, Ticket] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._taken = 0  # engine thread only
        self._completed = 0  # engine thread only
        self.closed = False

    @property
    def queued(self) -> int:
        """Pages waiting for the engine."""
        return self._queue.qsize()

    @property
    def in_engine(self) -> int:
        """Pages the engine has taken and not finished."""
        return self._taken - self._completed

    @property
    def open_tickets(self) -> int:
        """Pages submitted and not answered (queued or in the engine)."""
        with self._lock:
            return len(self._tickets)

    def submit(self, ticket: Ticket, payload: Any, text_layer: PageText | None = None) -> None:
        """Queue a prepared page (with its PDF text, --text-layer prefer); QueueClosed once the
        queue is closed."""
        with self._lock:
            if self.closed:
                raise QueueClosed(SHUTTING_DOWN)
            key = next(self._keys)
            self._tickets[key] = ticket
        self._queue.put((key, payload, text_layer))

    def _requests(self) -> Iterator[PageRequest | None]:
        """The source: a page when one is queued; None when none is but pages are decoding;
        blocks while nothing is decoding; raises _ShuttingDown once closed."""
        while True:
            if self.closed:
                raise _ShuttingDown
            busy = self._taken > self._completed
            try:
                item = self._queue.get_nowait() if busy else self._queue.get()
            except queue.Empty:
                yield None
                continue
            if item is None:  # stop()'s wake-up
                continue
            key, payload, text_layer = item
            del item
            with self._lock:
                ticket = self._tickets.get(key)
            if ticket is None:
                continue
            ticket.taken()
            if ticket.cancel.is_set():  # the client left while the page was queued
                self._finish(key, cancelled_result(key))
                continue
            self._taken += 1
            yield PageRequest(
                key,
                payload,
                on_tokens=ticket.tokens if ticket.streamed or ticket.logprobs else None,
                max_tokens=ticket.max_tokens,
                cancel=ticket.cancel,
                on_logprobs=ticket.token_logprobs if ticket.logprobs else None,
                text_layer=text_layer,
            )
            del payload

    def _finish(self, key: int, result: PageResult) -> None:
        with self._lock:
            ticket = self._tickets.pop(key, None)
        if ticket is None:
            return
        if result.error == CANCELLED and self.closed:  # cancelled by stop(), not its client
            ticket.fail(503, SHUTTING_DOWN)
        else:
            ticket.finish(result)

    def fail_all(self, status: int, message: str) -> None:
        """Answer every open ticket with an error (engine stopped or failed); drop queued pages."""
        with self._lock:
            self.closed = True
            tickets, self._tickets = list(self._tickets.values()), {}
            self._queue = queue.Queue()  # the queued pages dropped (nothing reads the queue now)
        for ticket in tickets:
            ticket.fail(status, message)

    @property
    def up(self) -> bool:
        return self.ready.is_set() and self.error is None and self._thread.is_alive()

    def detokenize(self, token_ids: list[int]) -> str:
        """Token ids -> text, special tokens kept (for streamed pages; any thread)."""
        return self.engine.detokenize(token_ids)

    def alive(self) -> bool:
        return self._thread.is_alive()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Close the queue and wait for the engine to drop its pages and close: the source
        raises at its next call; pages in the engine are cancelled so that an engine with no
        room calls it soon; the engine thread is woken if it waits."""
        with self._lock:
            self.closed = True
            tickets = list(self._tickets.values())
        for ticket in tickets:
            ticket.cancel.set()
        self._queue.put(None)
        if self._thread.is_alive():
            self._thread.join()

    def _main(self) -> None:
        try:
            self.engine.start()
            self.preparer = self.engine.preparer()
        except BaseException as exc:  # reported by the server's start
            self.error = exc
            self.ready.set()
            return
        self.ready.set()
        try:
            for result in self.engine.run(self._requests(), self.batch_size):
                self._completed += 1
                self._finish(result.key, result)  # type: ignore[arg-type]
        except _ShuttingDown:
            log.debug("engine run stopped for shutdown")
        except BaseException as exc:
            self.error = exc
            log.error("engine failed: %s", " ".join(str(exc).split()))
            self.fail_all(500, f"the engine failed: {' '.join(str(exc).split())[:300]}")
        finally:
            began = time.perf_counter()
            try:
                self.engine.close()
                log.debug("engine closed in %.2f s", time.perf_counter() - began)
            except Exception as exc:  # closing is best effort at exit
                log.debug("closing the engine: %s", exc)
