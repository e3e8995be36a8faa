"""A fake HPD server for tests: a real HTTP server on 127.0.0.1 (a free port) that speaks the
OpenAI chat-completions protocol and answers raw HPD page streams, like the vendor's vLLM image.

It stands in for a network peer, so the only part of hpdparse it imports is the wire format
(`hpdparse.wire`: request, completion and error shapes), which the official `openai` client
checks independently in tests/serve.

    from tests.helpers.fakeserver import FakeHPDServer

    with FakeHPDServer() as server:            # serves until the block ends
        server.url                             # "http://127.0.0.1:PORT/v1"
        ... run hpdparse with --engine openai --server server.url ...
        server.chat_count                      # chat requests received (retries included)
        server.requests                        # [ChatRequest], in arrival order
        server.fingerprints()                  # image_fingerprint of each request's page
        server.page_ids()                      # ("report", 2) per recognised sample page, else None
        server.max_concurrent                  # most chat requests being answered at once
        server.in_flight, server.models_count  # being answered now; GET /v1/models received
        server.clear_log()                     # forget requests and counters (between runs)

A ChatRequest has: number (0-based arrival order), model, prompt, max_tokens, temperature, size
(w, h), fingerprint, page_id, fault, received, and `image` (the decoded page, only while the
request is being answered: inside responder/delay/fault callbacks). To check which pages were
sent, compare `server.fingerprints()` with `image_fingerprint(img)` of the pages you rendered.

Answers. For each `POST /v1/chat/completions` the server decodes the page image (a base64 data
URL in the user message), recognises sample pages and calls the responder. The default responder
answers a sample page's ground-truth stream (`tests/fixtures/streams/<stem>/page-NNNN.txt`) and
any other image a generic but realistic stream (header, title, paragraphs, inline and display
math, a table with spans, a figure with caption, page number) that depends only on the image, so
a rerun gets the same text. Sample pages (`samples/*.pdf`, `*.png`, ...) are recognised at any DPI
by a 32x32 grayscale thumbnail. Usage counts are plausible (256 tokens per tile; 4 characters per
output token). An answer longer than the request's `max_tokens` is cut and ends with
finish_reason "length".

Options (all keyword-only):
    responder   Callable[[ChatRequest], str | Answer]; replaces the default answers
                (`Answer(text, finish_reason="length")` to choose the finish reason).
    models      model ids listed by GET /v1/models (default: the hub id); a chat request for
                another model gets HTTP 404, as vLLM does.
    delay       seconds before answering: a float, or Callable[[ChatRequest], float]
                (e.g. `lambda r: 30 if r.page_id == ("report", 3) else 0` to kill a run
                while that page is in flight). Stopping the server drops waiting requests.
    faults      fault names applied to the first chat requests, one each, in arrival order
                (`server.add_faults(...)` queues more while running).
    fault       Callable[[ChatRequest], str | None]: a fault for requests the queue leaves alone
                (e.g. `lambda r: "400" if r.page_id == ("paper", 2) else None`).
    models_fault  a fault for GET /v1/models: an HTTP status ("503") or "garbage".
    logprob     Callable[[ChatRequest], float]: when set, a request asking for logprobs gets
                them, every token (special tokens, then pieces of up to 4 characters) with
                that log-probability (so every block's confidence is exp of it)
    samples, streams  folders of sample documents and their ground truth (default: the repo's).

Fault names:
    "500", "503", "400", "404", ... answer that HTTP status with an OpenAI-style error body
    "drop"         close the connection without answering
    "garbage"      HTTP 200 whose body is not JSON
    "no-choices"   HTTP 200 JSON without choices
    "bad-content"  HTTP 200 whose message content is not a string
    "length"       the page's stream cut in half, finish_reason "length"
    "hang"         answer nothing until the server stops (for client timeouts)
    "no-logprobs"  HTTP 400 refusing the logprobs parameter, as a server without them may
    "ok" or None   answer normally

Helpers: `image_fingerprint(image)`, `generic_stream(image, fingerprint)`, `load_streams(dir)`,
`sample_index(samples, streams).identify(image)`.

It answers about 20 pages/s of 200-DPI A4 pages (decoding dominates); for memory or throughput
figures run it in its own process: `python -m tests.helpers.fakeserver --port 8118 [--delay S]`
(Ctrl-C stops it).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import hashlib
import io
import json
import math
import random
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pymupdf
from PIL import Image, ImageSequence

from hpdparse import wire

REPO = Path(__file__).resolve().parents[2]
SAMPLES_DIR = REPO / "samples"
STREAMS_DIR = REPO / "tests" / "fixtures" / "streams"
DEFAULT_MODELS = ("PaddlePaddle/HPD-Parsing",)
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".tif", ".tiff"}

THUMB_SIZE = (32, 32)
INDEX_DPI = 50
# Mean absolute difference on 0-255 gray levels: the same sample page rendered at 72-300 DPI
# measured <= 0.5, two different sample pages >= 3.5.
MAX_THUMB_DISTANCE = 1.5
MAX_ASPECT_DIFFERENCE = 0.03
CHARS_PER_TOKEN = 4

PageId = tuple[str, int]
_TOKENS = re.compile(r"<[A-Z_|a-z]+>|[^<]{1,4}|<")


@dataclass
class Answer:
    """What a responder may return instead of a plain stream."""

    text: str
    finish_reason: str = "stop"


@dataclass
class ChatRequest:
    """One chat-completions request as the server saw it.

    `image` is the decoded page while the request is being answered and None afterwards (the
    log must not hold every page image); `fingerprint` identifies its pixels exactly.
    """

    number: int  # 0-based arrival order among chat requests
    model: str
    prompt: str
    max_tokens: int | None
    temperature: float | None
    size: tuple[int, int]
    fingerprint: str
    page_id: PageId | None
    image: Image.Image | None = field(default=None, repr=False)
    fault: str | None = None
    received: float = 0.0  # time.monotonic()
    options: dict = field(default_factory=dict)  # the body's other fields (sampling options)


Responder = Callable[[ChatRequest], "str | Answer"]


def image_fingerprint(image: Image.Image) -> str:
    """An exact fingerprint of an image's pixels (mode, size and bytes)."""
    digest = hashlib.sha256(f"{image.mode}:{image.width}x{image.height}:".encode())
    digest.update(image.tobytes())
    return digest.hexdigest()[:16]


def _thumbnail(image: Image.Image) -> bytes:
    return image.convert("L").resize(THUMB_SIZE, Image.Resampling.BOX).tobytes()


def _thumb_distance(a: bytes, b: bytes) -> float:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def _sample_images(path: Path) -> Iterable[Image.Image]:
    if path.suffix.lower() == ".pdf":
        with pymupdf.open(path) as doc:
            for page in doc:
                pix = page.get_pixmap(dpi=INDEX_DPI, alpha=False)
                yield Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    else:
        with Image.open(path) as image:
            for frame in ImageSequence.Iterator(image):
                yield frame.convert("RGB")


def load_streams(streams_dir: Path) -> dict[PageId, str]:
    """Every `<stem>/page-NNNN.txt` under streams_dir: (stem, page) -> stream."""
    out: dict[PageId, str] = {}
    for path in sorted(Path(streams_dir).glob("*/page-*.txt")):
        out[(path.parent.name, int(path.stem.split("-", 1)[1]))] = path.read_text(encoding="utf-8")
    return out


class SampleIndex:
    """Recognises sample pages in page images of any resolution and knows their streams."""

    def __init__(self, samples_dir: Path = SAMPLES_DIR, streams_dir: Path = STREAMS_DIR) -> None:
        self.streams = load_streams(streams_dir)
        # (page, aspect ratio, thumbnail, native size of an image sample or None for a PDF)
        self._pages: list[tuple[PageId, float, bytes, tuple[int, int] | None]] = []
        stems = {stem for stem, _ in self.streams}
        paths = sorted(Path(samples_dir).glob("*")) if Path(samples_dir).is_dir() else []
        for path in paths:
            is_sample = path.suffix.lower() == ".pdf" or path.suffix.lower() in IMAGE_SUFFIXES
            if not is_sample or path.stem not in stems:
                continue
            native = path.suffix.lower() != ".pdf"
            for number, image in enumerate(_sample_images(path), start=1):
                if (path.stem, number) in self.streams:
                    self._pages.append(
                        (
                            (path.stem, number),
                            image.width / image.height,
                            _thumbnail(image),
                            image.size if native else None,
                        )
                    )

    def __len__(self) -> int:
        return len(self._pages)

    def identify(self, image: Image.Image) -> PageId | None:
        """The sample page this image shows, or None.

        Samples that look alike (`scan.png` is a render of `memo.pdf` page 1) are told apart by
        size: an image sample matches when the image has its native size, else a PDF page wins.
        """
        aspect = image.width / image.height
        thumb = _thumbnail(image)
        matches = []
        for page_id, page_aspect, page_thumb, native in self._pages:
            if abs(aspect - page_aspect) > MAX_ASPECT_DIFFERENCE * page_aspect:
                continue
            distance = _thumb_distance(thumb, page_thumb)
            if distance <= MAX_THUMB_DISTANCE:
                rank = 0 if native == image.size else 1 if native is None else 2
                matches.append((rank, distance, page_id))
        return min(matches)[2] if matches else None

    def stream(self, page_id: PageId) -> str:
        return self.streams[page_id]


@lru_cache(maxsize=8)
def _cached_index(samples_dir: Path, streams_dir: Path, stamp: tuple[float, ...]) -> SampleIndex:
    return SampleIndex(samples_dir, streams_dir)


def sample_index(samples_dir: Path = SAMPLES_DIR, streams_dir: Path = STREAMS_DIR) -> SampleIndex:
    """A SampleIndex, cached until a file in either folder changes."""
    files = [p for d in (samples_dir, streams_dir) if Path(d).is_dir() for p in Path(d).rglob("*")]
    stamp = tuple(sorted(p.stat().st_mtime for p in files if p.is_file()))
    return _cached_index(Path(samples_dir), Path(streams_dir), stamp)


# ---------------------------------------------------------------- generic page streams

WORD_TEXT = (
    "analysis data model results method sample value system measure report section table "
    "figure error rate process design study test level group effect change range total "
    "average standard observed expected initial final source target input output"
)
WORDS = WORD_TEXT.split()
TITLES = ("Introduction", "Method", "Results", "Discussion", "Related Work", "Evaluation")


def _sentence(rng: random.Random, low: int = 6, high: int = 14) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(words).capitalize() + "."


def _paragraph(rng: random.Random, sentences: int) -> str:
    return " ".join(_sentence(rng) for _ in range(sentences))


def _block(label: str, box: tuple[int, int, int, int], content: str | None = None) -> str:
    head = f"<BLOCK>{label} [{box[0]}, {box[1]}, {box[2]}, {box[3]}]"
    return head if content is None else f"{head}<CHILD>{content}"


def generic_stream(image: Image.Image, fingerprint: str) -> str:
    """A realistic HPD stream for a page nobody wrote ground truth for; it depends only on
    the fingerprint (same page, same text) and keeps every box on the 0-1000 grid."""
    rng = random.Random(fingerprint)
    if image.width > 3 * image.height:  # a strip, not a page: one line of text
        return _block("text", (20, 150, 980, 850), _sentence(rng))
    n = rng.randint(1, 99)
    a, b = rng.randint(2, 9), rng.randint(2, 9)
    cells = [[rng.randint(10, 99) for _ in range(3)] for _ in range(3)]
    table = (
        "<table><tr><td rowspan=2>Group</td><td colspan=2>Score</td></tr>"
        "<tr><td>mean</td><td>sd</td></tr>"
        + "".join(
            f"<tr><td>{rng.choice(WORDS)}</td><td>{c[0]}.{c[1]}</td><td>{c[2] / 10:.1f}</td></tr>"
            for c in cells
        )
        + "</table>"
    )
    blocks = [
        _block("header", (80, 28, 620, 46), f"Proceedings of the {rng.choice(WORDS)} workshop"),
        _block("doc_title", (120, 68, 880, 104), _sentence(rng, 3, 6).rstrip(".").title()),
        _block("text", (80, 118, 920, 208), _paragraph(rng, 3)),
        _block("paragraph_title", (80, 222, 420, 242), f"{n % 9 + 1} {rng.choice(TITLES)}"),
        _block(
            "text",
            (80, 252, 920, 330),
            f"{_sentence(rng)} With \\( x_{{i}}^{{{a}}} \\) and \\( \\alpha = {b} \\), "
            f"{_sentence(rng).lower()}",
        ),
        _block(
            "equation",
            (280, 344, 720, 386),
            f"\\[\nE = \\sum_{{i=1}}^{{n}} \\frac{{x_i^{a}}}{{{b}}} \\tag{{{n}}}\n\\]",
        ),
        _block("table_caption", (80, 400, 620, 418), f"Table {n}: {_sentence(rng, 4, 7)}"),
        _block("table", (80, 424, 920, 580), table),
        _block("image", (200, 598, 800, 818)),
        _block("image_caption", (200, 826, 800, 846), f"Figure {n}: {_sentence(rng, 4, 8)}"),
        _block("text", (80, 860, 920, 924), _paragraph(rng, 2)),
        _block("page_number", (480, 950, 520, 968), str(n)),
    ]
    return "".join(blocks)


class SampleResponder:
    """The default answers: ground truth for sample pages, generic_stream for the rest."""

    def __init__(self, index: SampleIndex | None) -> None:
        self.index = index

    def __call__(self, request: ChatRequest) -> str:
        if request.page_id is not None and self.index is not None:
            return self.index.stream(request.page_id)
        assert request.image is not None
        return generic_stream(request.image, request.fingerprint)


def _prompt_tokens(size: tuple[int, int], prompt: str) -> int:
    tiles = max(1, min(25, round(size[0] * size[1] / 448**2)))
    return 256 * (tiles + (tiles > 1)) + 20 + len(prompt) // CHARS_PER_TOKEN


# ---------------------------------------------------------------- HTTP


def _error_body(status: int, message: str) -> bytes:
    return json.dumps(wire.error_body(status, message)).encode()


def _decode_image(request: wire.ChatRequest) -> Image.Image:
    """The page image of a chat request (wire.WireError 400 when there is not one)."""
    if len(request.image_urls) != 1:
        raise wire.WireError(400, f"expected one image_url part, got {len(request.image_urls)}")
    try:
        image = Image.open(io.BytesIO(wire.data_url_bytes(request.image_urls[0])))
        image.load()
    except (OSError, ValueError) as error:
        raise wire.WireError(400, f"cannot decode the image: {error}") from None
    return image


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _drop(self) -> None:
        self.close_connection = True

    def do_GET(self) -> None:
        fake = self.server.fake
        if self.path.rstrip("/") == "/v1" + wire.MODELS_PATH:
            with fake._lock:
                fake.models_count += 1
            if fake.models_fault == "garbage":
                self._send(200, b"<html>not a model list</html>", "text/html")
            elif fake.models_fault:
                self._send(int(fake.models_fault), _error_body(int(fake.models_fault), "fault"))
            else:
                models = [
                    {"object": "model", "id": m, "owned_by": "fakeserver"} for m in fake.models
                ]
                self._send(200, json.dumps(wire.model_list(models)).encode())
        elif self.path == "/health":
            self._send(200, b"", "text/plain")
        else:
            self._send(404, _error_body(404, f"no route {self.path}"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1" + wire.CHAT_COMPLETIONS_PATH:
            self._send(404, _error_body(404, f"no route {self.path}"))
            return
        self.server.fake._answer_chat(self, raw)


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # hundreds of clients connect at once
    fake: FakeHPDServer

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that gives up (a test killing its run, a timeout) is not a server bug.
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class AnswerGate:
    """A fake server's delay: the first `free` requests are answered at once, the others wait
    until the gate opens (at most `limit` seconds), so the test acts mid-run however fast or
    loaded the machine is."""

    def __init__(self, free: int, limit: float) -> None:
        self._free, self._limit = free, limit
        self._count = 0
        self._lock = threading.Lock()
        self._open = threading.Event()

    def __call__(self, request: object) -> float:
        with self._lock:
            self._count += 1
            held = self._count > self._free
        if held:
            self._open.wait(self._limit)
        return 0.0

    def open(self) -> None:
        self._open.set()


class FakeHPDServer:
    """A local OpenAI-compatible HPD server; see the module docstring for the whole API."""

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        models: Iterable[str] = DEFAULT_MODELS,
        delay: float | Callable[[ChatRequest], float] = 0.0,
        faults: Iterable[str | None] = (),
        fault: Callable[[ChatRequest], str | None] | None = None,
        models_fault: str | None = None,
        logprob: Callable[[ChatRequest], float] | None = None,
        samples: Path = SAMPLES_DIR,
        streams: Path = STREAMS_DIR,
        port: int = 0,
    ) -> None:
        self.index = sample_index(samples, streams)
        self.responder: Responder = responder or SampleResponder(self.index)
        self.models = list(models)
        self.delay = delay
        self.fault = fault
        self.models_fault = models_fault
        self.logprob = logprob
        self.models_count = 0
        self.max_concurrent = 0
        self.in_flight = 0
        self._faults: collections.deque[str | None] = collections.deque(faults)
        self._requests: list[ChatRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", port), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def chat_count(self) -> int:
        with self._lock:
            return len(self._requests)

    @property
    def requests(self) -> list[ChatRequest]:
        with self._lock:
            return list(self._requests)

    def fingerprints(self) -> list[str]:
        return [r.fingerprint for r in self.requests]

    def page_ids(self) -> list[PageId | None]:
        return [r.page_id for r in self.requests]

    def add_faults(self, *names: str | None) -> None:
        with self._lock:
            self._faults.extend(names)

    def clear_log(self) -> None:
        with self._lock:
            self._requests.clear()
            self.max_concurrent = 0
            self.models_count = 0

    def start(self) -> FakeHPDServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> FakeHPDServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _answer_chat(self, handler: _Handler, raw: bytes) -> None:
        try:
            request = self._read_chat(raw)
        except wire.WireError as error:
            handler._send(error.status, json.dumps(error.body()).encode())
            return
        try:
            self._respond(handler, request)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _read_chat(self, raw: bytes) -> ChatRequest:
        """Parse, log and count one chat request; take its fault from the queue ("ok": none)."""
        chat = wire.read_chat_request(raw)
        body = json.loads(raw)
        model = str(chat.model)
        if model not in self.models:
            raise wire.WireError(404, f"The model `{model}` does not exist.")
        image = _decode_image(chat)
        fingerprint = image_fingerprint(image)
        page_id = self.index.identify(image) if len(self.index) else None
        with self._lock:
            request = ChatRequest(
                number=len(self._requests),
                model=model,
                prompt=chat.text,
                max_tokens=chat.max_tokens,
                temperature=chat.temperature,
                size=image.size,
                fingerprint=fingerprint,
                page_id=page_id,
                image=image,
                received=time.monotonic(),
                options={
                    k: v
                    for k, v in body.items()
                    if k not in ("model", "messages", "max_tokens", "temperature")
                },
            )
            self._requests.append(request)
            queued = self._faults.popleft() if self._faults else "ok"
            self.in_flight += 1
            self.max_concurrent = max(self.max_concurrent, self.in_flight)
        request.fault = queued
        return request

    def _respond(self, handler: _Handler, request: ChatRequest) -> None:
        # The answer is made first so that the page image is not held while waiting.
        try:
            if request.fault == "ok":  # the queue said nothing: ask the rule
                request.fault = self.fault(request) if self.fault else None
            delay = self.delay(request) if callable(self.delay) else self.delay
            status, body, content_type = self._make_answer(request)
        except Exception as error:  # a broken responder or callback must show up in the test
            status, body, content_type = 500, _error_body(500, f"fake server: {error!r}"), ""
            delay = 0.0
            request.fault = None
        finally:
            request.image = None
        fault = request.fault
        if (delay > 0 and self._stopping.wait(delay)) or fault == "drop":
            handler._drop()
        elif fault == "hang":
            self._stopping.wait()
            handler._drop()
        else:
            handler._send(status, body, content_type or "application/json")

    def _make_answer(self, request: ChatRequest) -> tuple[int, bytes, str]:
        fault = request.fault
        if fault in (None, "ok", "length"):
            answer = self.responder(request)
            if isinstance(answer, str):
                answer = Answer(answer)
            if fault == "length":
                answer = Answer(answer.text[: len(answer.text) // 2], "length")
            return 200, self._completion(request, answer), ""
        if fault in ("drop", "hang"):
            return 0, b"", ""
        if fault == "garbage":
            return 200, b"<html><body>502 Bad Gateway</body></html>", "text/html"
        if fault == "no-choices":
            return 200, json.dumps({"id": "x", "object": "chat.completion"}).encode(), ""
        if fault == "bad-content":
            message = {"role": "assistant", "content": [1, 2]}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return 200, json.dumps({"choices": [choice]}).encode(), ""
        if fault == "no-logprobs":
            error = wire.error_body(400, "logprobs is not supported by this server", "logprobs")
            return 400, json.dumps(error).encode(), ""
        if fault.isdigit():
            return int(fault), _error_body(int(fault), f"fake fault {fault}"), ""
        raise ValueError(f"unknown fault {fault!r}")

    def _completion(self, request: ChatRequest, answer: Answer) -> bytes:
        text, finish_reason = answer.text, answer.finish_reason
        limit = request.max_tokens
        if isinstance(limit, int) and len(text) > limit * CHARS_PER_TOKEN:
            text, finish_reason = text[: limit * CHARS_PER_TOKEN], "length"
        prompt_tokens = _prompt_tokens(request.size, request.prompt)
        output_tokens = math.ceil(len(text) / CHARS_PER_TOKEN)
        if finish_reason == "length" and isinstance(limit, int):
            output_tokens = limit
        completion = wire.completion(
            f"chatcmpl-fake-{request.number}",
            request.model,
            text,
            finish_reason,
            wire.usage(prompt_tokens, output_tokens),
        )
        if self.logprob is not None and request.options.get("logprobs"):
            value = self.logprob(request)
            pieces = [t for t in _TOKENS.findall(text) if t]
            content = [{"token": t, "logprob": value, "top_logprobs": []} for t in pieces]
            completion["choices"][0]["logprobs"] = {"content": content}
        return json.dumps(completion).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description="Serve fake HPD answers until Ctrl-C.")
    parser.add_argument("--port", type=int, default=8118)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--model", action="append", help="served model id (repeatable)")
    parser.add_argument("--samples", type=Path, default=SAMPLES_DIR)
    parser.add_argument("--streams", type=Path, default=STREAMS_DIR)
    args = parser.parse_args()
    server = FakeHPDServer(
        models=args.model or DEFAULT_MODELS,
        delay=args.delay,
        samples=args.samples,
        streams=args.streams,
        port=args.port,
    )
    with server:
        print(f"fake HPD server at {server.url} ({len(server.index)} sample pages)", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
