"""`hpdparse serve` as a client sees it: a real server (a subprocess, torch engine, tiny
checkpoint) on IPv6 loopback with API keys, checked with the official `openai` client and raw
HTTP: answers (streamed and not) equal the torch engine's raw page text, max_tokens, temperature,
keys, errors, /health and /metrics. A second server on a Unix socket checks start-up, draining
at SIGTERM and the socket's removal.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

import httpx
import openai
from PIL import Image

from tests.helpers.paths import FIXTURES, TINY
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.serving import (
    Served,
    page_body,
    page_messages,
    sample_pngs,
    serve_process,
)
from tests.tinymodel.synth import load_ground_truth

KEYS = ("key-one", "key-two")
SERVER_MAX_TOKENS = 2000
SERVER = ["--engine", "torch", "--device", "cpu", "--host", "::1", "--port", "0"]
SERVER += ["--api-key", KEYS[0], "--api-key", KEYS[1], "--max-tokens", str(SERVER_MAX_TOKENS)]
SERVER += ["--max-queued", "4", "--max-request-mb", "8"]


@pytest.fixture(scope="module")
def truth() -> dict[tuple[str, int], str]:
    """The tiny checkpoint's raw page texts (the torch engine's, tests/engines/torch)."""
    return load_ground_truth(FIXTURES / "streams")


@pytest.fixture(scope="module")
def pngs(truth) -> dict[tuple[str, int], bytes]:
    return sample_pngs(sorted(truth))


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    stderr = tmp_path_factory.mktemp("serve-api") / "stderr.txt"
    with serve_process(SERVER, stderr) as served:
        yield served


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url, api_key=KEYS[1], max_retries=0, timeout=300)


def _ask(client: openai.OpenAI, png: bytes, **options: object):
    return client.chat.completions.create(model=str(TINY), messages=page_messages(png), **options)


def _stream(client: openai.OpenAI, png: bytes, **options: object) -> list:
    return list(_ask(client, png, stream=True, **options))


def test_it_listens_on_ipv6_and_lists_its_model(served: Served, client) -> None:
    assert served.url.startswith("http://[::1]:")
    assert [m.id for m in client.models.list()] == [str(TINY)]


def test_answers_equal_the_torch_engines_page_text(client, truth, pngs) -> None:
    keys = sorted(truth)
    with concurrent.futures.ThreadPoolExecutor(len(keys)) as pool:
        answers = dict(zip(keys, pool.map(lambda key: _ask(client, pngs[key]), keys), strict=True))
    for key, answer in answers.items():
        (choice,) = answer.choices
        assert choice.message.content == truth[key], key
        assert choice.finish_reason == "stop"
        assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
        assert answer.usage.model_extra["max_tokens"] == SERVER_MAX_TOKENS
    assert len({a.id for a in answers.values()}) == len(keys)


def test_streamed_answers_arrive_in_pieces_and_add_up_to_the_answer(client, truth, pngs) -> None:
    key = max(truth, key=lambda k: len(truth[k]))
    chunks = _stream(client, pngs[key], stream_options={"include_usage": True})
    first, *middle, closing, usage = chunks
    assert first.choices[0].delta.role == "assistant" and first.choices[0].delta.content == ""
    pieces = [c.choices[0].delta.content for c in middle]
    assert all(pieces), "empty content chunks"
    assert "".join(pieces) == truth[key]
    assert len(pieces) > 1, "the page arrived in one piece, not as it decoded"
    assert closing.choices[0].finish_reason == "stop" and not closing.choices[0].delta.content
    assert usage.choices == [] and usage.usage.completion_tokens > 0
    assert len({c.id for c in chunks}) == 1 and chunks[0].object == "chat.completion.chunk"
    without_usage = _stream(client, pngs[key])
    assert all(c.usage is None for c in without_usage)
    assert "".join(c.choices[0].delta.content or "" for c in without_usage) == truth[key]


def test_a_request_max_tokens_applies_up_to_the_servers(client, truth, pngs) -> None:
    key = sorted(truth)[0]
    short = _ask(client, pngs[key], max_tokens=5)
    assert short.choices[0].finish_reason == "length"
    assert short.usage.model_extra["max_tokens"] == 5
    assert len(short.choices[0].message.content) < len(truth[key])
    streamed = _stream(client, pngs[key], max_tokens=5)
    assert "".join(c.choices[0].delta.content or "" for c in streamed) == (
        short.choices[0].message.content
    )
    clamped = _ask(client, pngs[key], max_completion_tokens=10**6)
    assert clamped.usage.model_extra["max_tokens"] == SERVER_MAX_TOKENS
    assert clamped.choices[0].message.content == truth[key]


def test_sampling_is_greedy_and_says_so(client, truth, pngs) -> None:
    png = pngs[sorted(truth)[0]]
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(client, png, temperature=0.7)
    error = refused.value.body
    assert error["param"] == "temperature" and "HPD decoding is greedy" in error["message"]
    with pytest.raises(openai.BadRequestError, match="n must be 1"):
        _ask(client, png, n=2)


def test_keys_are_needed_except_for_health_and_metrics(served: Served, truth, pngs) -> None:
    png = pngs[sorted(truth)[0]]
    stranger = openai.OpenAI(base_url=served.url, api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as refused:
        _ask(stranger, png)
    assert refused.value.status_code == 401
    assert refused.value.body == {
        "message": "invalid API key",
        "type": "AuthenticationError",
        "param": None,
        "code": 401,
    }
    with pytest.raises(openai.AuthenticationError):
        stranger.models.list()
    first = openai.OpenAI(base_url=served.url, api_key=KEYS[0], max_retries=0, timeout=300)
    assert first.models.list().data[0].id == str(TINY)
    with served.client(timeout=60) as raw:
        assert raw.get(f"{served.base}/health").status_code == 200
        assert raw.get(f"{served.base}/metrics").status_code == 200
        keyless = raw.post(f"{served.url}/chat/completions", json=page_body(png))
        assert keyless.status_code == 401 and keyless.headers["WWW-Authenticate"] == "Bearer"
        assert "needs an API key" in keyless.json()["error"]["message"]
        basic = raw.get(f"{served.url}/models", headers={"Authorization": "Basic a2V5"})
        assert basic.status_code == 401 and "Bearer" in basic.json()["error"]["message"]


def _gif() -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8), "white").save(buffer, "GIF")
    return buffer.getvalue()


def _bad_requests(png: bytes) -> list[tuple[str, object, int, str]]:
    no_image = page_body(png)
    no_image["messages"][0]["content"] = no_image["messages"][0]["content"][1:]
    bad_base64 = page_body(png)
    bad_base64["messages"][0]["content"][0]["image_url"]["url"] = "data:image/png;base64,@@@"
    plain = page_body(png)
    plain["messages"][0]["content"][1]["text"] = "document parsing."
    return [
        ("not JSON", b"{not json", 400, "not JSON"),
        ("not an object", b"[1, 2]", 400, "JSON object"),
        ("no image", no_image, 400, "got 0"),
        ("not an image", page_body(b"plain text, no image"), 400, "not a PNG or JPEG image"),
        ("truncated", page_body(png[: len(png) // 2]), 400, "cannot decode the image"),
        ("not base64", bad_base64, 400, "base64"),
        ("a GIF", page_body(_gif()), 400, "not PNG or JPEG"),
        ("unknown model", page_body(png, model="other/model"), 404, "'other/model' does not"),
        ("plain instruction", plain, 400, "with hierarchical forks"),
        ("bad max_tokens", page_body(png, max_tokens=0), 400, "max_tokens must be"),
        ("bad stream", page_body(png, stream="yes"), 400, "stream must be"),
    ]


def test_bad_requests_get_one_clear_line_and_the_server_keeps_serving(
    served: Served, client, truth, pngs
) -> None:
    key = sorted(truth)[0]
    headers = {"Authorization": f"Bearer {KEYS[0]}"}
    with served.client(timeout=120, headers=headers) as raw:
        for name, body, status, words in _bad_requests(pngs[key]):
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            answer = raw.post(f"{served.url}/chat/completions", content=data)
            assert answer.status_code == status, (name, answer.text)
            error = answer.json()["error"]
            assert words in error["message"], (name, error)
            assert "\n" not in error["message"] and " object at 0x" not in error["message"]
            assert error["code"] == status and error["type"].endswith("Error"), name
        missing = raw.post(f"{served.url}/completions", content=b"{}")
        assert missing.status_code == 404 and "no route" in missing.json()["error"]["message"]
        wrong_method = raw.get(f"{served.url}/chat/completions")
        assert wrong_method.status_code == 405 and wrong_method.json()["error"]["code"] == 405
    assert _ask(client, pngs[key]).choices[0].message.content == truth[key]


def _raw_request(served: Served, head: str) -> socket.socket:
    host, port = served.base.removeprefix("http://[").split("]:")
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(head.encode("ascii"))
    return sock


def _read_answer(sock: socket.socket) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
        more = sock.recv(65536)
        if not more:
            break
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body)


def test_a_body_over_the_limit_is_refused_before_it_is_read(served: Served) -> None:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEYS[0]}\r\nContent-Length: {200 * 2**20}\r\n\r\n"
    )
    with _raw_request(served, head) as sock:  # 200 MB announced, not one byte sent
        status, body = _read_answer(sock)
    assert status == 413 and "at most 8 MB" in body["error"]["message"]

    chunked = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEYS[0]}\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    with _raw_request(served, chunked) as sock:
        piece = b"x" * 2**20
        sender = threading.Thread(target=_send_chunks, args=(sock, piece, 64), daemon=True)
        sender.start()  # 64 MB, no length announced: counted as it comes
        status, body = _read_answer(sock)
    assert status == 413 and "more than 8" in body["error"]["message"]


def test_a_client_gone_mid_body_leaves_no_traceback(served: Served, client, truth, pngs) -> None:
    head = (
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Authorization: Bearer {KEYS[0]}\r\nContent-Length: 100000\r\n\r\n"
    )
    for _ in range(3):  # a tenth of the announced body, then the connection closes
        with _raw_request(served, head) as sock:
            sock.sendall(b'{"model": "' + b"x" * 10000)
    key = sorted(truth)[0]
    assert _ask(client, pngs[key]).choices[0].message.content == truth[key]
    assert "Traceback" not in served.stderr.read_text()


def _send_chunks(sock: socket.socket, piece: bytes, count: int) -> None:
    try:
        for _ in range(count):
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
    except OSError:  # the server closed the connection after its 413
        pass


def test_metrics_count_what_happened(served: Served, client, truth, pngs) -> None:
    keys = sorted(truth)[:2]
    before = served.metrics()
    answers = [_ask(client, pngs[key]) for key in keys]
    with pytest.raises(openai.BadRequestError):
        _ask(client, pngs[keys[0]], temperature=1)
    after = served.metrics()

    def grew(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    chat = "/v1/chat/completions"
    assert grew("hpdparse_requests_total", route=chat, status="200") == len(keys)
    assert grew("hpdparse_requests_total", route=chat, status="400") == 1
    assert grew("hpdparse_pages_total", finish_reason="stop") == len(keys)
    assert grew("hpdparse_page_seconds_count") == len(keys)
    assert grew("hpdparse_output_tokens_total") == sum(a.usage.completion_tokens for a in answers)
    assert grew("hpdparse_prompt_tokens_total") == sum(a.usage.prompt_tokens for a in answers)
    assert grew("hpdparse_forks_total") == sum(truth[key].count("<CHILD>") for key in keys)
    drafted = grew("hpdparse_spec_decode_draft_tokens_total")
    assert 0 < grew("hpdparse_spec_decode_accepted_tokens_total") <= drafted
    assert after[("hpdparse_engine_up", ())] == 1
    assert after[("hpdparse_pages_in_flight", ())] == 0
    assert after[("hpdparse_pages_queued", ())] == 0


# ------------------------------------------------------------ Unix socket, start-up, drain


def test_unix_socket_health_while_starting_and_a_drain_at_sigterm(
    tmp_path: Path, truth, pngs
) -> None:
    """/health is 503 while the engine loads; at SIGTERM with --shutdown-timeout the page being
    streamed finishes whole while /health and new pages get 503; the socket file goes away."""
    path = str(tmp_path / "hpd.sock")
    transport = httpx.HTTPTransport(uds=path)
    health: list[int] = []
    seen = threading.Event()

    def watch_health() -> None:  # from the process start until the first 200
        with httpx.Client(transport=transport, timeout=5) as raw:
            while not seen.is_set():
                try:
                    health.append(raw.get("http://localhost/health").status_code)
                except httpx.TransportError:
                    time.sleep(0.01)  # not listening yet
                    continue
                if health[-1] == 200:
                    seen.set()
                time.sleep(0.02)

    watcher = threading.Thread(target=watch_health, daemon=True)
    watcher.start()
    args = ["--engine", "torch", "--device", "cpu", "--uds", path, "--shutdown-timeout", "120"]
    with serve_process(args, tmp_path / "stderr.txt", uds=path) as served:
        seen.wait(PATIENCE_SECONDS)
        assert health and health[0] == 503 and health[-1] == 200, health
        key = max(truth, key=lambda k: len(truth[k]))
        with httpx.Client(transport=transport, timeout=300) as http:
            client = openai.OpenAI(base_url=served.url, api_key="-", http_client=http)
            stream = _ask(client, pngs[key], stream=True)
            pieces = [next(stream).choices[0].delta.content]  # the page is in the engine
            served.proc.send_signal(signal.SIGTERM)
            _wait_for(lambda: _status(http, "GET", "http://localhost/health") == 503)
            late = http.post(f"{served.url}/chat/completions", json=page_body(pngs[key]))
            assert late.status_code == 503 and "shutting down" in late.json()["error"]["message"]
            pieces += [c.choices[0].delta.content or "" for c in stream]
        assert "".join(pieces) == truth[key]
        assert served.proc.wait(PATIENCE_SECONDS) == 0, served.stderr.read_text()
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text()
    assert not Path(path).exists()


def _status(http: httpx.Client, method: str, url: str) -> int:
    return http.request(method, url).status_code


def _wait_for(condition, timeout: float = PATIENCE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)
