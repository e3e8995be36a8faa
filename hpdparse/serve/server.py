"""`hpdparse serve`: an OpenAI-compatible HPD server on an in-process engine (vllm or torch).

Endpoints: ``GET /v1/models`` and ``POST /v1/chat/completions`` (non-streaming), the protocol of
``--engine openai`` (hpdparse/engines/openai_engine.py): one user message holding the page as an
image data URL (PNG or JPEG, base64) and, optionally, the HPD instruction; the answer's content is
the page's raw HPD text with its special tokens. Sampling is always greedy and the server's own
``--max-tokens`` applies to every page (the engines take one limit for all pages), so a request's
``temperature`` and ``max_tokens`` are not used. Errors are OpenAI-style JSON,
``{"error": {"message", "type", "code"}}``: 400 bad request, 404 unknown model or route, 500 page
failed in the engine, 503 shutting down.

Threads: HTTP handler threads (one per connection) parse the request and decode the image; the page
is tiled by ``engine.preparer()`` in a small thread pool; the prepared page goes into a queue with a
Future keyed by a request number. At most ``max_queued`` pages are being decoded, prepared or queued
outside the engine at once (a bound on host memory); other requests wait their turn. One engine
thread owns the engine (vLLM is not thread-safe): it starts it, runs ``engine.run`` over a live
source reading that queue (the source yields None when the queue is empty and pages are decoding,
and blocks when nothing is), and sets each result on its Future, which the waiting handler turns
into the answer. On SIGINT/SIGTERM the server stops taking requests (503), the source raises so the
engine drops the pages it has, their handlers answer 503, and the engine is closed.
"""

from __future__ import annotations

import base64
import binascii
import concurrent.futures
import io
import itertools
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from PIL import Image

from hpdparse.engines.base import FINISH_ERROR, Engine, EngineConfig, PageRequest, PageResult
from hpdparse.engines.options import EngineOptions
from hpdparse.engines.registry import create_engine, get_entry
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.hpd.protocol import instruction

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 256 * 2**20  # a 200 dpi page is a few MB as PNG; this only stops nonsense
_ERROR_TYPES = {
    400: "BadRequestError",
    404: "NotFoundError",
    405: "BadRequestError",
    413: "BadRequestError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}
_SHUTTING_DOWN = "the server is shutting down"
_GRACE_SECONDS = 10.0  # how long a stop waits for handlers to send their answers
# Pages decoded, prepared or queued but not yet taken by the engine. A prepared page holds its
# tiles (~15 MB at 200 dpi A4); the engine takes only what it can start (see the vllm engine's
# admission control), so without this bound many clients would pile pages up in host memory.
DEFAULT_MAX_QUEUED = 32


class ApiError(Exception):
    """An error answer: HTTP status and a one-line message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _ShuttingDown(Exception):
    """Raised by the live source to end the engine's run when the server stops."""


def error_body(status: int, message: str) -> bytes:
    kind = _ERROR_TYPES.get(status, "InternalServerError")
    return json.dumps({"error": {"message": message, "type": kind, "code": status}}).encode()


def _one_line(text: object, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


@dataclass
class ChatPage:
    """What a chat request asks for: the page as an image data URL (model and instruction
    already checked; the image is decoded later, once there is room for it)."""

    image_url: str


def read_chat_request(raw: bytes, served_model: str, prompt: str, other_prompt: str) -> ChatPage:
    """Parse and check a chat-completions body; raise ApiError (400/404) when it is unusable."""
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the request body must be a JSON object")
    if body.get("stream"):
        raise ApiError(400, "streaming is not supported: send stream false (or leave it out)")
    model = body.get("model")
    if model is not None and model != served_model:
        raise ApiError(
            404, f"the model {model!r} does not exist; this server serves {served_model!r}"
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages must be a non-empty list")
    urls: list[str] = []
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        if not isinstance(content, list):
            raise ApiError(400, "a user message's content must be text or a list of parts")
        for part in content:
            if not isinstance(part, dict):
                raise ApiError(400, "a content part must be an object")
            if part.get("type") == "image_url":
                image_url = part.get("image_url")
                url = image_url.get("url") if isinstance(image_url, dict) else image_url
                if not isinstance(url, str):
                    raise ApiError(400, "an image_url part must hold {'url': 'data:...'}")
                urls.append(url)
            elif part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
    if len(urls) != 1:
        raise ApiError(400, f"expected exactly one image (an image_url part), got {len(urls)}")
    text = " ".join(t.strip() for t in texts if t.strip())
    if text and text != prompt:
        if text == other_prompt:
            mode = "with" if prompt == instruction(True) else "without"
            raise ApiError(
                400, f"this server decodes {mode} hierarchical forks; the request asks otherwise"
            )
        raise ApiError(
            400,
            "this server only parses pages with HPD: leave the text out or send its instruction",
        )
    return ChatPage(urls[0])


def decode_data_url(url: str) -> Image.Image:
    """A base64 image data URL -> the decoded RGB image; ApiError 400 when it is not one."""
    header, comma, data = url.partition(",")
    if not comma or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise ApiError(400, "the image must be a base64 data URL (data:image/png;base64,...)")
    try:
        encoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, "the image data URL is not valid base64") from None
    try:
        image = Image.open(io.BytesIO(encoded))
        if image.format not in ("PNG", "JPEG"):
            raise ApiError(400, f"the image is {image.format}, not PNG or JPEG")
        image.load()
    except ApiError:
        raise
    except Exception as exc:  # PIL raises many kinds for corrupt data
        raise ApiError(400, f"cannot decode the image: {_one_line(exc, 200)}") from None
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


class _PageQueue:
    """The live request source for Engine.run and the Futures its results complete.

    Runs on the engine thread (``requests``, ``complete``) and handler threads (``submit``).
    """

    def __init__(self, max_queued: int) -> None:
        self._queue: queue.Queue[PageRequest | None] = queue.Queue()
        self._slots = threading.BoundedSemaphore(max_queued)
        self._futures: dict[int, concurrent.futures.Future[PageResult]] = {}
        self._lock = threading.Lock()
        self._keys = itertools.count(1)
        self._handed_out = 0  # engine thread only
        self._completed = 0  # engine thread only
        self.closed = False

    def reserve(self) -> None:
        """Wait for room for one more page outside the engine; ApiError 503 once closed.
        The slot is given back by release(), or by the engine taking the submitted page."""
        while not self._slots.acquire(timeout=0.2):
            if self.closed:
                raise ApiError(503, _SHUTTING_DOWN)

    def release(self) -> None:
        self._slots.release()

    def submit(self, payload: Any) -> concurrent.futures.Future[PageResult]:
        """Queue a prepared page (its slot passes to the queue); raises ApiError 503 once
        closed, leaving the slot to the caller."""
        future: concurrent.futures.Future[PageResult] = concurrent.futures.Future()
        with self._lock:
            if self.closed:
                raise ApiError(503, _SHUTTING_DOWN)
            key = next(self._keys)
            self._futures[key] = future
        self._queue.put(PageRequest(key, payload))
        return future

    def close(self) -> None:
        """No more requests; wakes the engine thread if it waits for one."""
        with self._lock:
            self.closed = True
        self._queue.put(None)

    def requests(self) -> Iterator[PageRequest | None]:
        """The source: a request when one is queued; None when none is but pages are decoding;
        blocks while nothing is decoding; raises _ShuttingDown once closed."""
        while True:
            if self.closed:
                raise _ShuttingDown
            busy = self._handed_out > self._completed
            try:
                request = self._queue.get_nowait() if busy else self._queue.get()
            except queue.Empty:
                yield None
                continue
            if request is None:  # close()'s wake-up
                continue
            self._slots.release()
            self._handed_out += 1
            yield request

    def complete(self, result: PageResult) -> None:
        self._completed += 1
        with self._lock:
            future = self._futures.pop(result.key, None)  # type: ignore[call-overload]
        if future is not None:
            future.set_result(result)

    def fail_all(self, error: ApiError) -> None:
        """Answer every waiting request with `error` (engine stopped or failed)."""
        with self._lock:
            futures = list(self._futures.values())
            self._futures.clear()
            self.closed = True
        for future in futures:
            future.set_exception(error)
        while True:  # drop queued payloads
            try:
                dropped = self._queue.get_nowait()
            except queue.Empty:
                break
            if dropped is not None:
                self._slots.release()


class HpdServer:
    """The engine thread, the preparation pool and the HTTP server of `hpdparse serve`."""

    def __init__(
        self,
        engine_name: str,
        config: EngineConfig,
        *,
        options: EngineOptions | Mapping[str, Any] | None = None,
        host: str = "127.0.0.1",
        port: int = 8118,
        served_model_name: str | None = None,
        batch_size: int = 512,
        prepare_threads: int | None = None,
        max_queued: int = DEFAULT_MAX_QUEUED,
    ) -> None:
        self.engine_name = engine_name
        self.config = config
        self.options = options  # the engine's own (--engine-option), checked in start()
        self.host = host
        self.port = port
        self.model_name = served_model_name or config.model
        self.batch_size = batch_size
        self.prompt = instruction(config.fork)
        self.other_prompt = instruction(not config.fork)
        self.created = int(time.time())
        self._pages = _PageQueue(max_queued)
        self._prepare_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=prepare_threads or min(8, os.cpu_count() or 1),
            thread_name_prefix="hpdparse-prepare",
        )
        self._preparer: Callable[[Image.Image], Any] | None = None
        self._engine: Engine | None = None
        self._engine_thread: threading.Thread | None = None
        self._engine_ready = threading.Event()
        self.engine_error: BaseException | None = None
        self._httpd: _HTTPServer | None = None
        self._http_thread: threading.Thread | None = None
        self._active = 0
        self._active_lock = threading.Condition()
        self.stopping = False

    # ------------------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> None:
        """Bind the address, start the engine (on its own thread), then serve HTTP. Raise
        HpdparseError with a one-line message when the address is taken or the engine cannot
        start. Clients that connect while the engine loads wait until it is ready."""
        if not get_entry(self.engine_name).live_source:
            raise EngineError(
                f"--engine {self.engine_name} cannot serve: it does not take pages as they arrive"
            )
        self._engine = create_engine(self.engine_name, self.config, self.options)
        try:
            self._httpd = _HTTPServer((self.host, self.port), _Handler)
        except OSError as exc:
            raise HpdparseError(
                f"cannot listen on {self.host}:{self.port}: {exc.strerror or exc}"
            ) from None
        self._httpd.hpd = self
        self.port = self._httpd.server_address[1]
        self._engine_thread = threading.Thread(
            target=self._engine_main, name="hpdparse-engine", daemon=True
        )
        self._engine_thread.start()
        self._engine_ready.wait()
        if self.engine_error is not None:
            self._engine_thread.join()
            self._httpd.server_close()
            self._httpd = None
            error = self.engine_error
            if isinstance(error, HpdparseError):
                raise error
            raise HpdparseError(f"cannot start the {self.engine_name} engine: {_one_line(error)}")
        self._http_thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.2},
            name="hpdparse-http",
            daemon=True,
        )
        self._http_thread.start()

    def engine_alive(self) -> bool:
        return self._engine_thread is not None and self._engine_thread.is_alive()

    def stop(self) -> None:
        """Stop taking requests, drop the engine's pages (their requests get 503), close the
        engine and the HTTP server. Idempotent."""
        began = time.perf_counter()
        self.stopping = True
        self._pages.close()
        if self._engine_thread is not None:
            self._engine_thread.join()
        log.debug("stop: engine thread ended after %.2f s", time.perf_counter() - began)
        self._pages.fail_all(ApiError(503, _SHUTTING_DOWN))
        # Let handlers send the answers they have (503s included) before the listener goes.
        with self._active_lock:
            self._active_lock.wait_for(lambda: self._active == 0, timeout=_GRACE_SECONDS)
        log.debug("stop: handlers done after %.2f s", time.perf_counter() - began)
        if self._httpd is not None:
            if self._http_thread is not None:
                self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self._prepare_pool.shutdown(wait=False, cancel_futures=True)

    def _engine_main(self) -> None:
        engine = self._engine
        assert engine is not None
        try:
            engine.start()
            self._preparer = engine.preparer()
        except BaseException as exc:  # reported by start()
            self.engine_error = exc
            self._engine_ready.set()
            return
        self._engine_ready.set()
        try:
            for result in engine.run(self._pages.requests(), self.batch_size):
                self._pages.complete(result)
        except _ShuttingDown:
            log.debug("engine run stopped for shutdown")
        except BaseException as exc:
            self.engine_error = exc
            log.error("engine failed: %s", _one_line(exc))
            self._pages.fail_all(ApiError(500, f"the engine failed: {_one_line(exc)}"))
        finally:
            began = time.perf_counter()
            try:
                engine.close()
                log.debug("engine closed in %.2f s", time.perf_counter() - began)
            except Exception as exc:  # closing is best effort at exit
                log.debug("closing the engine: %s", exc)

    # --------------------------------------------------------------------------------- answers
    def enter(self) -> None:
        with self._active_lock:
            self._active += 1

    def leave(self) -> None:
        with self._active_lock:
            self._active -= 1
            self._active_lock.notify_all()

    def models(self) -> dict[str, Any]:
        entry = {
            "id": self.model_name,
            "object": "model",
            "created": self.created,
            "owned_by": "hpdparse",
            "root": self.config.model,
        }
        return {"object": "list", "data": [entry]}

    def complete_chat(self, raw: bytes) -> dict[str, Any]:
        """Answer one chat-completions body; raise ApiError for an error answer."""
        if self.stopping:
            raise ApiError(503, _SHUTTING_DOWN)
        if self.engine_error is not None:
            raise ApiError(503, f"the engine failed: {_one_line(self.engine_error)}")
        page = read_chat_request(raw, self.model_name, self.prompt, self.other_prompt)
        assert self._preparer is not None
        self._pages.reserve()
        try:
            image = decode_data_url(page.image_url)
            del page
            try:
                prepared = self._prepare_pool.submit(self._preparer, image)
            except RuntimeError:  # the pool is shut down
                raise ApiError(503, _SHUTTING_DOWN) from None
            try:
                payload = prepared.result()
            except Exception as exc:
                raise ApiError(400, f"cannot prepare the image: {_one_line(exc, 200)}") from None
            del image
            future = self._pages.submit(payload)
            del payload
        except BaseException:
            self._pages.release()
            raise
        result = future.result()
        if result.finish_reason == FINISH_ERROR:
            raise ApiError(500, result.error or "the page failed in the engine")
        return {
            "id": f"chatcmpl-hpd-{result.key}-{self.created}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": result.text},
                    "finish_reason": result.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": result.prompt_tokens,
                "completion_tokens": result.output_tokens,
                "total_tokens": result.prompt_tokens + result.output_tokens,
            },
        }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
        log.debug("%s %s", self.address_string(), format % args)

    def _send_json(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if self.server.hpd.stopping:
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(body)

    def _send_error(self, status: int, message: str) -> None:
        self._send_json(status, error_body(status, message))

    def _route(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        route = self._route()
        if route in ("/v1/models", "/models"):
            self._send_json(200, json.dumps(self.server.hpd.models()).encode())
        elif route in ("/health", "/v1/health"):
            status = 503 if self.server.hpd.stopping else 200
            self._send_json(status, b"{}")
        else:
            self._send_error(404, f"no route GET {self.path}")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        hpd = self.server.hpd
        hpd.enter()
        try:
            try:
                length = int(self.headers.get("Content-Length") or 0)
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._send_error(413 if length > 0 else 400, "bad or too large Content-Length")
                return
            raw = self.rfile.read(length)
            if self._route() not in ("/v1/chat/completions", "/chat/completions"):
                self._send_error(404, f"no route POST {self.path}")
                return
            try:
                answer = hpd.complete_chat(raw)
            except ApiError as error:
                self._send_error(error.status, str(error))
                return
            except Exception as exc:  # a bug here must not kill the connection silently
                log.exception("chat completion failed")
                self._send_error(500, f"internal error: {type(exc).__name__}: {_one_line(exc)}")
                return
            self._send_json(200, json.dumps(answer).encode())
        finally:
            hpd.leave()


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False  # keep-alive connections would hold server_close() otherwise
    request_queue_size = 1024
    hpd: HpdServer

    def handle_error(self, request: object, client_address: object) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return  # a client that went away
        super().handle_error(request, client_address)


def serve(server: HpdServer, announce: Callable[[str], None]) -> int:
    """Start `server`, announce ``serving MODEL on URL``, serve until SIGINT/SIGTERM or an engine
    failure, stop. Returns the exit code (0 after a signal, 1 after an engine failure)."""
    stop = threading.Event()

    def on_signal(signum: int, frame: object) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        server.start()
        announce(f"serving {server.model_name} on {server.url}")
        while not stop.wait(0.5):
            if not server.engine_alive():
                break
        server.stop()
        log.debug("stopped")
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if server.engine_error is not None:
        raise HpdparseError(f"the engine failed: {_one_line(server.engine_error)}")
    return 0
