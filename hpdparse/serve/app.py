"""The HTTP app of `hpdparse serve` (Starlette, run by uvicorn): routes, limits, errors.

``POST /v1/chat/completions`` goes: request size check (413 before the body is read) -> a place
in the queue (requests wait for one, in arrival order; beyond `max_waiting` waiting, 503 at
once) -> body read and checked (400/404) -> image decoded and prepared for the engine in a thread
pool -> queued with a ticket -> answered as JSON or as a stream. ``GET /v1/models``,
``GET /health`` (200 only while the engine is up) and ``GET /metrics``. Errors are OpenAI error
bodies, also for unknown routes and methods.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from hpdparse import wire
from hpdparse.serve.answers import (
    PageStream,
    PageTicket,
    disconnected,
    error_of,
    first_of,
    token_texts,
    with_logprobs,
)
from hpdparse.serve.auth import ApiKeys
from hpdparse.serve.documents.runner import DocumentRunner
from hpdparse.serve.metrics import CLIENT_CLOSED, CONTENT_TYPE, ServeMetrics
from hpdparse.serve.pages import PageAsk, PagePolicy, check_request, decode_image, describe
from hpdparse.serve.queue import SHUTTING_DOWN, EngineLoop, QueueClosed
from hpdparse.serve.settings import MB, ServeSettings
from hpdparse.wire import WireError
from hpdparse.wire.bodies import ModelCard

log = logging.getLogger(__name__)

CHAT_ROUTE = "/v1" + wire.CHAT_COMPLETIONS_PATH
MODELS_ROUTE = "/v1" + wire.MODELS_PATH
ROUTES = (CHAT_ROUTE, MODELS_ROUTE, "/health", "/metrics", "/v1/convert", "/", "/openapi.json")


class State(enum.Enum):
    STARTING = "starting"
    READY = "ready"
    DRAINING = "draining"


@dataclass
class Service:
    """What the app serves with; `state` is set by the server."""

    settings: ServeSettings
    policy: PagePolicy
    engine: EngineLoop
    documents: DocumentRunner
    prepare_pool: concurrent.futures.ThreadPoolExecutor
    root_model: str
    state: State = State.STARTING
    created: int = field(default_factory=lambda: int(time.time()))

    def __post_init__(self) -> None:
        # Places in the queue: at most --max-queued pages held outside the engine (being read,
        # decoded, prepared or queued); at most --max-waiting requests wait for one.
        self._places = asyncio.Semaphore(self.settings.max_queued)
        self.waiting = 0
        self.metrics = ServeMetrics(
            in_engine=lambda: self.engine.in_engine,
            queued=lambda: self.engine.queued,
            waiting=lambda: self.waiting,
            up=lambda: self.up,
            documents=self.documents.store.counts,
        )
        self.token_texts = token_texts(self.engine.detokenize)

    @property
    def up(self) -> bool:
        return self.state is State.READY and self.engine.up

    async def enter_queue(self) -> None:
        if self.waiting >= self.settings.max_waiting:
            raise WireError(503, f"the server is busy ({self.waiting} requests waiting); retry")
        self.waiting += 1
        try:
            await self._places.acquire()
        finally:
            self.waiting -= 1

    def leave_queue(self) -> None:
        self._places.release()


def build_app(service: Service, document_routes: Sequence[BaseRoute] = ()) -> ASGIApp:
    """The ASGI app: routes (the chat ones and `document_routes`), OpenAI-style errors, request
    counting, API keys."""

    async def not_found(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, HTTPException) else 500
        message = f"no route {request.method} {request.url.path}"
        if status == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        return error_response(WireError(status, message))

    routes = [
        route(service, CHAT_ROUTE, chat, "POST"),
        route(service, MODELS_ROUTE, models, "GET"),
        route(service, "/health", health, "GET"),
        route(service, "/metrics", metrics, "GET"),
        *document_routes,
    ]
    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})
    keys = ApiKeys(service.settings.api_keys)

    async def guarded_and_counted(scope: Scope, receive: Receive, send: Send) -> None:
        """The app behind API keys (a 401 before the app sees the request), each answered
        request counted by route and status (a route handler may override the status it
        counts as in ``scope["hpdparse.status"]``)."""
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        sent: list[int] = []

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent.append(message["status"])
            await send(message)

        try:
            await (keys.refusal(scope) or app)(scope, receive, counting_send)
        finally:
            status = scope.get("hpdparse.status") or (sent[0] if sent else CLIENT_CLOSED)
            service.metrics.count_request(_route_label(scope["path"]), status)

    return guarded_and_counted


def _route_label(path: str) -> str:
    path = path.rstrip("/") or "/"
    if path.startswith("/v1/documents"):
        return "/v1/documents"
    return path if path in ROUTES else "other"


RETRY_AFTER_SECONDS = 10  # what a 429 (queue full) tells the caller to wait


def error_response(error: WireError) -> Response:
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if error.status == 429 else {}
    if error.status == 413:
        headers["Connection"] = "close"  # the rest of the body is not read
    return JSONResponse(error.body(), status_code=error.status, headers=headers or None)


def route(service: Service, path: str, handler: Callable[..., Any], method: str) -> Route:
    """The route answering `method` on `path` with ``handler(service, request)``'s answer, a
    WireError as its error body, a client that left while its body was read as status 499
    (nothing to answer, nothing broke)."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(service, request)
        except WireError as error:
            return error_response(error)
        except ClientDisconnect:
            log.debug("a client closed its connection before its request was read")
            request.scope["hpdparse.status"] = CLIENT_CLOSED
            return Response(status_code=CLIENT_CLOSED)

    return Route(path, endpoint, methods=[method])


def limited(request: Request, limit_mb: float, what: str, flag: str) -> Request:
    """The request, refused with 413 when its Content-Length is over `limit_mb`, its body cut
    off with 413 as soon as it passes the limit (a body without a length)."""
    limit = int(limit_mb * MB)

    def too_large(size: int, more: str = "") -> WireError:
        at_most = f"this server takes at most {limit / MB:.0f} MB ({flag})"
        return WireError(413, f"{what} is {more}{size / MB:.1f} MB; {at_most}")

    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared))
    received = 0

    async def receive() -> Message:
        nonlocal received
        message = await request.receive()
        received += len(message.get("body", b""))
        if received > limit:
            raise too_large(received, "more than ")
        return message

    return Request(request.scope, receive)


async def models(service: Service, request: Request) -> Response:
    card: ModelCard = {
        "object": "model",
        "id": service.policy.model_name,
        "created": service.created,
        "owned_by": "hpdparse",
        "root": service.root_model,
    }
    return JSONResponse(wire.model_list([card]))


async def health(service: Service, request: Request) -> Response:
    return Response(status_code=200 if service.up else 503)


async def metrics(service: Service, request: Request) -> Response:
    return Response(service.metrics.render(), headers={"Content-Type": CONTENT_TYPE})


def check_open(service: Service) -> None:
    """WireError 503 when the server takes no page now (shutting down, engine failed)."""
    if service.state is State.DRAINING or service.engine.closed:
        raise WireError(503, SHUTTING_DOWN)
    if service.engine.error is not None:
        raise WireError(503, f"the engine failed: {describe(service.engine.error, 300)}")


async def chat(service: Service, request: Request) -> Response:
    try:
        return await _chat(service, request)
    except (WireError, ClientDisconnect):
        raise
    except Exception as exc:  # a bug must still answer, in one line
        log.exception("chat completion failed")
        raise WireError(500, f"internal error: {type(exc).__name__}: {exc}") from None


async def _chat(service: Service, request: Request) -> Response:
    limit = service.settings.max_request_mb
    reading = limited(request, limit, "the request body", "--max-request-mb")
    check_open(service)
    await service.enter_queue()
    ticket: PageTicket | None = None
    try:
        raw = await reading.body()
        ask = check_request(wire.read_chat_request(raw), service.policy)
        del raw
        while not service.engine.ready.is_set():  # early requests wait for the engine to start
            await asyncio.sleep(0.1)
        check_open(service)
        payload = await _prepare(service, ask)
        ticket = PageTicket(ask, service.leave_queue, service.metrics, service.token_texts)
        try:
            service.engine.submit(ticket, payload)
        except QueueClosed:
            ticket.release()
            raise WireError(503, SHUTTING_DOWN) from None
        del payload
    finally:
        if ticket is None:
            service.leave_queue()
    client_gone = asyncio.ensure_future(disconnected(request.receive))
    if await first_of(ticket.taken_or_done.wait(), client_gone):
        return _client_left(request, ticket)
    if not ask.stream:
        return await _answer(service, request, ticket, client_gone)
    error = error_of(ticket.outcome.result()) if ticket.outcome.done() else None
    if error is not None:  # failed before the engine took it: a plain error answer
        client_gone.cancel()
        return error_response(error)
    return PageStream(ticket, service.policy.model_name, service.engine.detokenize, client_gone)


async def _answer(
    service: Service, request: Request, ticket: PageTicket, client_gone: asyncio.Task[None]
) -> Response:
    try:
        if await first_of(asyncio.shield(ticket.outcome), client_gone):
            return _client_left(request, ticket)
    finally:
        client_gone.cancel()
    outcome = ticket.outcome.result()
    error = error_of(outcome)
    if error is not None:
        return error_response(error)
    body = wire.completion(
        wire.completion_id(),
        service.policy.model_name,
        outcome.text,
        outcome.finish_reason,
        ticket.usage(outcome),
    )
    if ticket.logprobs:
        with_logprobs(body, ticket.take_tokens()[1])
    return JSONResponse(body)


def _client_left(request: Request, ticket: PageTicket) -> Response:
    ticket.cancel.set()
    request.scope["hpdparse.status"] = CLIENT_CLOSED
    return Response(status_code=CLIENT_CLOSED)  # nobody reads it


async def _prepare(service: Service, ask: PageAsk) -> Any:
    """Decode the image and prepare it for the engine, in the preparation thread pool."""
    preparer = service.engine.preparer
    assert preparer is not None

    def work() -> Any:
        image = decode_image(ask.image_url)
        try:
            return preparer(image)
        except Exception as exc:
            raise WireError(400, f"cannot prepare the image: {describe(exc)}") from None

    try:
        return await asyncio.get_running_loop().run_in_executor(service.prepare_pool, work)
    except RuntimeError:  # the pool is shut down
        raise WireError(503, SHUTTING_DOWN) from None
