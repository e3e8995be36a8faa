"""From a queued page to its HTTP answer: the ticket that brings the engine's news onto the event
loop, the non-streamed JSON answer, and the server-sent event stream.

A client that goes away (the connection closes) before its answer sets the ticket's `cancel`:
the queue drops the page, or the engine drops it between two steps.

The ``logprobs`` of an answer in the OpenAI shape: ``{"content": [{"token", "logprob",
"bytes", "top_logprobs"}, ...]}``, one entry per chosen token, as vLLM's OpenAI server gives
them: `token` is the token decoded alone (special tokens kept, so ``<BLOCK>``, ``<CHILD>`` and
``<FORK>`` read as themselves; a token holding part of a UTF-8 character decodes to U+FFFD),
`bytes` the UTF-8 bytes of that text, `logprob` the chosen token's natural-log probability under
greedy decoding (a child's ``<CHILD>`` carries its ``<FORK>``'s), `top_logprobs` empty: the
engines report the chosen token only, so a request may ask for ``top_logprobs`` 0 at most.
The page's stop token is not among them, as it is not in the text.

A streamed page's text is detokenized incrementally (`IncrementalText`), as vLLM's own
incremental detokenizer does it: each new batch of settled tokens is decoded together with the
previous batch (so that a character split across the two decodes whole) and the new text is the
difference. While the text ends in U+FFFD (an incomplete UTF-8 sequence) it is held back until
the next tokens complete it; what is still held at the end comes from the page's final text.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from starlette.types import Receive, Scope, Send

from hpdparse import wire
from hpdparse.engines.base import CANCELLED, FINISH_ERROR, PageResult
from hpdparse.serve.metrics import CLIENT_CLOSED, ServeMetrics
from hpdparse.serve.pages import PageAsk
from hpdparse.serve.queue import Ticket
from hpdparse.wire import WireError
from hpdparse.wire.bodies import ChatCompletion, ChatCompletionChunk, TokenLogprob, Usage

log = logging.getLogger(__name__)

_FLOOR = -9999.0  # what vLLM answers for a log-probability of -inf (JSON has no infinity)


TokenTexts = Callable[[int], str]  # token id -> its text decoded alone (`token_texts`)


def token_texts(detokenize: Callable[[list[int]], str]) -> TokenTexts:
    """Token id -> its text decoded alone, remembered (a page has thousands of tokens, a
    vocabulary far fewer)."""
    return functools.cache(lambda token_id: detokenize([token_id]))


def token_entries(
    token_ids: Sequence[int], values: Sequence[float], texts: TokenTexts
) -> list[TokenLogprob]:
    """The ``logprobs.content`` entries of these tokens."""
    entries = []
    for token_id, value in zip(token_ids, values, strict=True):
        token = texts(token_id)
        entries.append(
            {
                "token": token,
                "logprob": value if math.isfinite(value) else _FLOOR,
                "bytes": list(token.encode("utf-8")),
                "top_logprobs": [],
            }
        )
    return entries


def with_logprobs(
    answer: ChatCompletion | ChatCompletionChunk, entries: list[TokenLogprob] | None
) -> None:
    """A completion or stream chunk with its choice's ``logprobs`` set (null for None)."""
    answer["choices"][0]["logprobs"] = None if entries is None else {"content": entries}


_INCOMPLETE = "\ufffd"


class IncrementalText:
    """The text of a growing token sequence, handed out in pieces."""

    def __init__(self, detokenize: Callable[[list[int]], str]) -> None:
        self._detokenize = detokenize
        self._ids: list[int] = []
        self._prefix = 0  # start of the window decoded for context
        self._read = 0  # tokens whose text has been handed out
        self._sent: list[str] = []

    def add(self, token_ids: list[int]) -> str:
        """The new text these tokens complete ("" while it ends in an incomplete character)."""
        if not token_ids:
            return ""
        self._ids.extend(token_ids)
        before = self._detokenize(self._ids[self._prefix : self._read])
        now = self._detokenize(self._ids[self._prefix :])
        if len(now) <= len(before) or now.endswith(_INCOMPLETE):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        delta = now[len(before) :]
        self._sent.append(delta)
        return delta

    def rest(self, final_text: str) -> str:
        """What is left to send once the page's final text is known. ValueError if the text
        handed out is not the start of it (the client could not be given the right answer)."""
        sent = "".join(self._sent)
        if not final_text.startswith(sent):
            raise ValueError(
                f"streamed text ({len(sent)} characters) is not the start of the page's text"
            )
        self._sent = [final_text]
        return final_text[len(sent) :]


Outcome = PageResult | WireError


class PageTicket(Ticket):
    """A page's way back to its HTTP request (made on the event loop). The engine-thread
    methods only hand over to the event loop; everything else, `release` included, runs there."""

    def __init__(
        self, ask: PageAsk, release: Callable[[], None], metrics: ServeMetrics, texts: TokenTexts
    ) -> None:
        super().__init__(release)
        self.ask = ask
        self.max_tokens = ask.max_tokens
        self.streamed = ask.stream
        self.logprobs = ask.logprobs
        self.accepted = time.perf_counter()
        self._loop = asyncio.get_running_loop()
        self.outcome: asyncio.Future[Outcome] = self._loop.create_future()
        self.taken_or_done = asyncio.Event()
        self.changed = asyncio.Event()  # new tokens or the outcome
        self._metrics = metrics
        self._texts = texts
        self._lock = threading.Lock()
        self._token_ids: list[int] = []
        self._values: list[float] | None = [] if ask.logprobs else None  # None: some came without
        self._next_values: list[float] | None = None
        self._wake_pending = False

    # ---------------------------------------------------------------- engine thread
    def taken(self) -> None:
        self._call(self._on_taken)

    def token_logprobs(self, values: list[float]) -> None:
        self._next_values = values

    def tokens(self, token_ids: list[int]) -> None:
        values, self._next_values = self._next_values, None
        with self._lock:
            self._token_ids.extend(token_ids)
            if self._values is not None:
                if values is not None and len(values) == len(token_ids):
                    self._values.extend(values)
                else:
                    self._values = None
            wake, self._wake_pending = not self._wake_pending, True
        if wake:
            self._call(self.changed.set)

    def finish(self, result: PageResult) -> None:
        self._call(self._resolve, result)

    def fail(self, status: int, message: str) -> None:
        self._call(self._resolve, WireError(status, message))

    def _call(self, function: Callable[..., None], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # a closed event loop: the server is gone
            self._loop.call_soon_threadsafe(function, *args)

    # ------------------------------------------------------------------- event loop
    def take_tokens(self) -> tuple[list[int], list[TokenLogprob] | None]:
        """The tokens settled since the last call and their ``logprobs.content`` entries (None
        when the answer asked for none, or the engine did not report some)."""
        with self._lock:
            token_ids, self._token_ids = self._token_ids, []
            values = self._values
            if values is not None:
                self._values = []
            self._wake_pending = False
        self.changed.clear()
        return token_ids, None if values is None else token_entries(token_ids, values, self._texts)

    def usage(self, result: PageResult) -> Usage:
        """OpenAI usage, and the token limit the page was decoded with (a request's own, or the
        server's --max-tokens when the request asked for more or nothing)."""
        return wire.usage(result.prompt_tokens, result.output_tokens, self.max_tokens)

    def _on_taken(self) -> None:
        self.release()
        self.taken_or_done.set()

    def _resolve(self, outcome: Outcome) -> None:
        self.release()
        if self.outcome.done():
            return
        if isinstance(outcome, PageResult) and outcome.error != CANCELLED:
            self._metrics.observe_page(outcome, time.perf_counter() - self.accepted)
        self.outcome.set_result(outcome)
        self.taken_or_done.set()
        self.changed.set()


async def disconnected(receive: Receive) -> None:
    """Returns when the client closes the connection (call once the body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def first_of(awaitable: Any, client_gone: asyncio.Task[None]) -> bool:
    """Wait for `awaitable` or the client leaving; True if the client left first."""
    waiting = asyncio.ensure_future(awaitable)
    try:
        await asyncio.wait({waiting, client_gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not waiting.done():
            waiting.cancel()
    return not waiting.done()


def error_of(outcome: Outcome) -> WireError | None:
    """The error answer for an outcome, None for a decoded page."""
    if isinstance(outcome, WireError):
        return outcome
    if outcome.finish_reason == FINISH_ERROR:
        return WireError(500, outcome.error or "the page failed in the engine")
    return None


class PageStream:
    """The ASGI response of a streamed page (started once the engine has taken the page).
    A client that leaves mid-stream cancels the page and counts as status 499."""

    def __init__(
        self,
        ticket: PageTicket,
        model: str,
        detokenize: Callable[[list[int]], str],
        client_gone: asyncio.Task[None],
    ) -> None:
        self.ticket = ticket
        self.model = model
        self.text = IncrementalText(detokenize)
        self.unsent: list[TokenLogprob] | None = []  # entries of tokens whose text is held
        self.client_gone = client_gone
        self.id = wire.completion_id()
        self.created = int(time.time())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache"),
            (b"x-accel-buffering", b"no"),  # nginx: pass events on as they come
        ]
        try:
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await self._events(send)
        except OSError:  # the client went away while we wrote
            pass
        finally:
            self.client_gone.cancel()
            if not self.ticket.outcome.done():
                self.ticket.cancel.set()
                scope["hpdparse.status"] = CLIENT_CLOSED

    async def _send(self, send: Send, data: bytes, more: bool = True) -> None:
        await send({"type": "http.response.body", "body": data, "more_body": more})

    def _chunk(self, **fields: Any) -> bytes:
        return wire.sse_event(wire.chunk(self.id, self.model, self.created, **fields))

    def _content_chunk(self, content: str) -> bytes:
        """A content delta; with logprobs, those of the tokens whose text it completes."""
        data = wire.chunk(self.id, self.model, self.created, content=content)
        if self.ticket.logprobs:
            with_logprobs(data, self.unsent)
            self.unsent = [] if self.unsent is not None else None
        return wire.sse_event(data)

    def _take(self) -> list[int]:
        token_ids, entries = self.ticket.take_tokens()
        if self.ticket.logprobs and self.unsent is not None:
            self.unsent = None if entries is None else self.unsent + entries
        return token_ids

    async def _events(self, send: Send) -> None:
        ticket = self.ticket
        await self._send(send, self._chunk(role="assistant", content=""))
        while not ticket.outcome.done():
            if await first_of(ticket.changed.wait(), self.client_gone):
                return
            delta = self.text.add(self._take())
            if delta:
                await self._send(send, self._content_chunk(delta))
        self._take()  # the last tokens' entries (their text comes from the final text)
        outcome = ticket.outcome.result()
        error = error_of(outcome)
        if error is None:
            assert isinstance(outcome, PageResult)
            try:
                rest = self.text.rest(outcome.text)
            except ValueError as exc:
                log.error("page %s: %s", outcome.key, exc)
                error = WireError(500, f"internal error: {exc}")
        if error is not None:
            await self._send(send, wire.sse_event(error.body()))
            await self._send(send, wire.SSE_DONE, more=False)
            return
        if rest or self.unsent:
            await self._send(send, self._content_chunk(rest))
        await self._send(send, self._chunk(finish_reason=outcome.finish_reason))
        if ticket.ask.include_usage:
            await self._send(send, self._chunk(usage=ticket.usage(outcome)))
        await self._send(send, wire.SSE_DONE, more=False)
