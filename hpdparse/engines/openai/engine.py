"""The `openai` engine: pages decoded by an OpenAI-compatible server that does HPD server-side
(the vendor's vLLM image, or later `hpdparse serve`).

Each page is one `POST {server}/chat/completions` with a single user message: the page as a PNG
data URL, then the HPD instruction; `temperature 0` and `max_tokens`. At most `max_in_flight`
requests are open at once. Connection errors, timeouts (`request_timeout` per attempt) and HTTP 5xx
are retried `retries` times with exponential backoff and jitter; HTTP 4xx and answers that are not
a chat completion fail that page at once. A failed page becomes a PageResult with finish_reason
"error" and a one-line error; `run` never raises for a single page. The server, timeout, retries
and the options below are `OpenAIOptions` (options.py).

finish_reason from the server: "stop" and "length" are kept; a missing one counts as "stop";
"abort" and "content_filter" mean the text is incomplete or withheld, so the page is an error;
any other value (a server's own name for end of sequence) counts as "stop".

``--engine-option``s: `api_key` (else the environment variable HPDPARSE_API_KEY) sent as a
bearer token; `retry_backoff` (first backoff in seconds, default 0.5) and `retry_backoff_max`
(default 20); `extra_body`, a dict merged into every request body (e.g. vLLM's
`{"skip_special_tokens": false}` or `{"repetition_penalty": 1.05}`); `logprobs` (default true:
ask for the tokens' log-probabilities, see logprobs.py).

open() and info: there is no local checkpoint, so open() resolves nothing and contacts no one
(a run whose pages are all saved never needs the server). `info` is fixed from the start: the
model name asked for (``--model``) and revision None, since a server does not say which commit
it runs; so pages are reused only by runs asking for the same model name with no known
revision. start() checks the server and settles the name sent in requests (`self.model`): when
``--model`` is left at its default and the server serves one model under another name, that
name; the name recorded with the pages stays the one asked for.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import os
import queue
import random
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from typing import Any

import httpx
from PIL import Image

from hpdparse import wire
from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_LENGTH,
    FINISH_STOP,
    Engine,
    EngineConfig,
    PageRequest,
    PageResult,
)
from hpdparse.engines.openai.logprobs import STOP_TOKENS, LogprobsAsk, without_logprobs
from hpdparse.engines.openai.options import API_KEY_VARIABLE, OpenAIOptions
from hpdparse.engines.openai.page_png import encode_page_png
from hpdparse.engines.options import EngineOptions
from hpdparse.errors import EngineError
from hpdparse.hpd.protocol import DEFAULT_MODEL, instruction

log = logging.getLogger(__name__)

_ERROR_FINISH_REASONS = {"abort", "content_filter"}
_MAX_MESSAGE_CHARS = 300
_CHECK_TIMEOUT = 30.0
_END = object()  # the end of the requests


def _one_line(text: object, limit: int = _MAX_MESSAGE_CHARS) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _server_message(response: httpx.Response) -> str:
    """The error text of an error response (see wire.error_message), or the body itself."""
    try:
        data = response.json()
    except ValueError:
        return _one_line(response.text) or "(empty body)"
    message = wire.error_message(data)
    return _one_line(message if message is not None else json.dumps(data))


def _describe_transport_error(error: Exception, timeout: float) -> str:
    if isinstance(error, (TimeoutError, asyncio.TimeoutError, httpx.TimeoutException)):
        if isinstance(error, httpx.ConnectTimeout):
            return "connection timed out"
        return f"no answer within {timeout:g} s"
    text = str(error)
    if isinstance(error, httpx.ConnectError):
        if "refused" in text.lower() or "connection attempts failed" in text.lower():
            return "connection refused"
        return _one_line(f"cannot connect ({text})")
    if isinstance(error, (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)):
        return _one_line(f"connection dropped ({text})" if text else "connection dropped")
    return _one_line(f"{type(error).__name__}: {text}" if text else type(error).__name__)


def _after(retries: int) -> str:
    return f" after {retries} retr{'y' if retries == 1 else 'ies'}" if retries else ""


class OpenAIEngine(Engine):
    """HPD pages through an OpenAI-compatible chat-completions server (see the module doc)."""

    name = "openai"
    options_class = OpenAIOptions
    options: OpenAIOptions

    def __init__(
        self, config: EngineConfig, options: EngineOptions | Mapping[str, Any] | None = None
    ) -> None:
        super().__init__(config, options)
        self.server = self.options.server.rstrip("/")
        self.model = config.model  # the name sent in requests: settled by start()
        self.prompt = instruction(config.fork)
        self._api_key: str | None = self.options.api_key or os.environ.get(API_KEY_VARIABLE)
        self._logprobs = LogprobsAsk(self.options.logprobs, self.server)
        self._started = False

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        return headers

    def start(self) -> None:
        """Check the server with GET /models and settle the model name to send."""
        if not self.server.startswith(("http://", "https://")):
            raise EngineError(f"invalid HPD server URL {self.server!r}: it must start with http://")
        timeout = min(self.options.request_timeout, _CHECK_TIMEOUT)
        try:
            with httpx.Client(timeout=timeout) as client:
                response = client.get(f"{self.server}/models", headers=self._headers())
        except httpx.HTTPError as error:
            reason = _describe_transport_error(error, timeout)
            raise EngineError(
                f"cannot reach HPD server at {self.server}: {reason}; start it or pass --server"
            ) from None
        status = response.status_code
        if status != 200:
            hint = "; is the URL right (it usually ends in /v1)?" if status == 404 else ""
            raise EngineError(
                f"HPD server at {self.server} answered GET /models with HTTP "
                f"{status}: {_server_message(response)}{hint}"
            )
        self.model = self._choose_model(self._served_models(response))
        self._started = True

    def _served_models(self, response: httpx.Response) -> list[str]:
        try:
            return wire.read_model_ids(response.json())
        except ValueError:  # not JSON, or wire.NotACompletion
            raise EngineError(
                f"HPD server at {self.server} answered GET /models with something that is not "
                f"an OpenAI model list: {_one_line(response.text, 80)}"
            ) from None

    def _choose_model(self, served: list[str]) -> str:
        wanted = self.config.model
        if not served or wanted in served:
            return wanted
        if wanted == DEFAULT_MODEL and len(served) == 1:
            log.debug("server serves %s; using that name for %s", served[0], wanted)
            return served[0]
        raise EngineError(
            f"HPD server at {self.server} does not serve model {wanted!r} "
            f"(it serves {', '.join(served)}); pass --model"
        )

    def close(self) -> None:
        self._started = False

    def preparer(self) -> Callable[[Image.Image], Any]:
        return encode_page_png

    def _request_body(self, payload: Any) -> bytes:
        """The JSON request body for one page; payload is PNG bytes, a data URL or an image."""
        if isinstance(payload, Image.Image):
            payload = encode_page_png(payload)
        if isinstance(payload, (bytes, bytearray, memoryview)):
            url = wire.image_data_url(bytes(payload))
        elif isinstance(payload, str) and payload.startswith("data:"):
            url = payload
        else:
            raise TypeError(f"page payload is {type(payload).__name__}, not PNG bytes")
        body = wire.chat_request(
            self.model,
            url,
            self.prompt,
            max_tokens=self.config.max_tokens,
            temperature=0,
            logprobs=self._logprobs.asking,
            extra=self.options.extra_body,
        )
        return json.dumps(body).encode("ascii")

    def run(self, requests: Iterable[PageRequest], max_in_flight: int) -> Iterator[PageResult]:
        """Send pages as room frees up, yield results as they finish (see Engine.run).

        The HTTP requests run on an asyncio loop in a background thread; this generator pulls
        `requests` itself, only while fewer than `max_in_flight` pages are pulled and not yet
        yielded, and prefers yielding finished pages to pulling new ones. The iterator must
        not wait for results of this same run. Closing the generator cancels open requests.
        The source must not yield None (Engine.run's "no request now"): this engine does not
        support live sources.
        """
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        if not self._started:
            self.start()
        finished: queue.Queue[concurrent.futures.Future[PageResult]] = queue.Queue()
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, name="hpdparse-openai", daemon=True)
        thread.start()
        submit = functools.partial(asyncio.run_coroutine_threadsafe, loop=loop)
        client: httpx.AsyncClient | None = None
        try:
            client = submit(self._open_client(max_in_flight)).result()
            pending = iter(requests)
            in_flight = 0
            while True:
                # Finished pages first; a new page only with room for it.
                while in_flight >= max_in_flight or not finished.empty():
                    in_flight -= 1
                    yield finished.get().result()
                request = next(pending, _END)
                if request is _END:
                    break
                try:
                    body = self._request_body(request.payload)
                except Exception as error:  # a bad payload fails its page only
                    yield _error(request.key, f"cannot send page: {_one_line(error)}", 0)
                    continue
                future = submit(self._decode_page(client, request.key, body))
                future.add_done_callback(finished.put)
                in_flight += 1
            for _ in range(in_flight):
                yield finished.get().result()
        finally:  # cancel the requests left, close the client, stop the loop and its thread
            try:
                submit(_shutdown(client)).result(timeout=30)
            finally:
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()

    async def _open_client(self, max_in_flight: int) -> httpx.AsyncClient:
        timeout = self.options.request_timeout
        return httpx.AsyncClient(
            headers=self._headers(),
            timeout=httpx.Timeout(timeout, connect=min(timeout, _CHECK_TIMEOUT)),
            limits=httpx.Limits(
                max_connections=max_in_flight, max_keepalive_connections=max_in_flight
            ),
        )

    async def _decode_page(
        self, client: httpx.AsyncClient, key: Hashable, body: bytes
    ) -> PageResult:
        started = time.perf_counter()
        url = f"{self.server}/chat/completions"
        opts = self.options
        timeout = opts.request_timeout
        retries = 0

        def failed(problem: str) -> PageResult:
            message = f"server {self.server}: {problem}"
            return _error(key, message, retries, time.perf_counter() - started)

        while True:
            retryable = True
            try:
                response = await asyncio.wait_for(client.post(url, content=body), timeout)
            except asyncio.CancelledError:
                raise
            except (httpx.TransportError, asyncio.TimeoutError) as error:
                problem = _describe_transport_error(error, timeout)
            except Exception as error:  # anything else is not worth a retry
                return failed(f"{type(error).__name__}: {error}")
            else:
                status = response.status_code
                if 200 <= status < 300:
                    try:
                        return self._parse_answer(key, response, retries, started)
                    except wire.NotACompletion as error:  # an answer that gives no page
                        return failed(str(error))
                problem = f"HTTP {status} {response.reason_phrase}: {_server_message(response)}"
                if self._logprobs.refused(status, response.text, body):
                    body = without_logprobs(body)
                    continue
                retryable = status >= 500
            if not retryable or retries >= opts.retries:
                return failed(f"{problem}{_after(retries)}")
            retries += 1
            pause = min(opts.retry_backoff_max, opts.retry_backoff * 2 ** (retries - 1))
            pause *= random.uniform(0.5, 1.0)
            log.info(
                "page %s: %s; retry %d of %d in %.1f s", key, problem, retries, opts.retries, pause
            )
            await asyncio.sleep(pause)

    def _parse_answer(
        self, key: Hashable, response: httpx.Response, retries: int, started: float
    ) -> PageResult:
        """The page a 2xx answer gives; wire.NotACompletion when it gives none (not JSON, not a
        chat completion, or one whose text is incomplete or withheld)."""
        try:
            data = response.json()
        except ValueError:
            body = _one_line(response.text, 80) or "(empty body)"
            raise wire.NotACompletion(f"answer is not JSON: {body}") from None
        answer = wire.read_completion(data)
        text, finish_reason = answer.content, answer.finish_reason
        if finish_reason in _ERROR_FINISH_REASONS:
            raise wire.NotACompletion(f"answer ended with finish_reason {finish_reason!r}")
        if finish_reason != FINISH_LENGTH:
            if finish_reason not in (None, FINISH_STOP):
                log.debug("finish_reason %r taken as stop", finish_reason)
            finish_reason = FINISH_STOP
        for token in STOP_TOKENS:
            text = text.removesuffix(token)
        return PageResult(
            key=key,
            text=text,
            finish_reason=finish_reason,
            prompt_tokens=answer.usage["prompt_tokens"],
            output_tokens=answer.usage["completion_tokens"],
            seconds=time.perf_counter() - started,
            stats={"retries": retries},
            logprobs=self._logprobs.read(answer.logprobs),
        )


async def _shutdown(client: httpx.AsyncClient | None) -> None:
    """Cancel every task of the running loop but this one, then close `client`."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    if client is not None:
        await client.aclose()


def _error(key: Hashable, message: str, retries: int, seconds: float = 0.0) -> PageResult:
    return PageResult(
        key, "", FINISH_ERROR, error=_one_line(message), seconds=seconds, stats={"retries": retries}
    )
