"""`hpdparse serve` on the default engine (vLLM, tiny checkpoint) as a real subprocess: our own
client (`convert --engine openai`), whole documents through the document routes, the official
`openai` client streaming, a client leaving mid-stream, a load of concurrent clients (some
leaving mid-page) against a small queue, and SIGTERM with pages in the engine.

One server for the whole module (one vLLM start-up); the SIGTERM test stops it and runs last.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import os
import signal
import socket
import threading
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

import httpx
import openai

from hpdparse.commands.main import main
from tests.helpers.documents_client import DocumentsClient
from tests.helpers.paths import FIXTURES, SAMPLES, TINY
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.serving import (
    INPUTS,
    Served,
    page_body,
    page_messages,
    sample_pngs,
    serve_process,
)
from tests.tinymodel.synth import load_ground_truth

pytestmark = pytest.mark.vllm

MAX_QUEUED, MAX_WAITING = 3, 6
# The load: CLIENTS at once, each sending PAGES_EACH pages one after the other.
CLIENTS, PAGES_EACH = 8, 3
# What the server may grow by under that load: the pages held outside the engine (MAX_QUEUED x
# a decoded 200 dpi page and its tiles, ~40 MB) plus those inside it (admission control: the
# KV cache's pages plus 8 waiting, ~15 MB of tiles each), with room for the allocator.
RSS_GROWTH_LIMIT = 1024 * 2**20


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    stderr = tmp_path_factory.mktemp("serve") / "stderr.txt"
    # HPDPARSE_TEST_DEVICE=cuda: the engine's GPU defaults, as in tests/engines/vllm.
    device = os.environ.get("HPDPARSE_TEST_DEVICE", "cpu")
    args = ["--port", "0", "--device", device, "--engine-option", "kv_cache_gib=0.25"]
    args += ["--max-queued", str(MAX_QUEUED), "--max-waiting", str(MAX_WAITING)]
    with serve_process(args, stderr) as served:
        assert served.url.startswith("http://127.0.0.1:")
        yield served


@pytest.fixture(scope="module")
def truth() -> dict[tuple[str, int], str]:
    return load_ground_truth(FIXTURES / "streams")


@pytest.fixture(scope="module")
def pngs(truth) -> dict[tuple[str, int], bytes]:
    return sample_pngs(sorted(truth))


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url, api_key="-", max_retries=0, timeout=600)


def _ask(client: openai.OpenAI, png: bytes, **options: object):
    return client.chat.completions.create(model=str(TINY), messages=page_messages(png), **options)


def _grew(before: dict, after: dict, name: str, **labels: str) -> float:
    key = (name, tuple(sorted(labels.items())))
    return after.get(key, 0.0) - before.get(key, 0.0)


def _wait_for(condition, timeout: float = PATIENCE_SECONDS) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


def test_convert_through_the_server_gives_the_in_process_engines_text(
    served: Served, truth, tmp_path: Path
) -> None:
    """The ground truth streams are the torch engine's text, which the vllm engine gives too
    (tests/engines/vllm)."""
    out = tmp_path / "out"
    args = ["convert", *(str(SAMPLES / name) for name in INPUTS), "-o", str(out)]
    args += ["--engine", "openai", "--server", served.url, "--quiet"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    for (stem, page), stream in truth.items():
        raw = out / stem / "raw" / f"page-{page:04d}.txt"
        assert raw.read_text(encoding="utf-8") == stream, f"{raw} differs from the ground truth"
    for stem in {stem for stem, _ in truth}:  # the engine asked for logprobs, the server gave them
        pages = json.loads((out / stem / f"{stem}.json").read_text(encoding="utf-8"))["pages"]
        assert all(0 < page["confidence"] <= 1 for page in pages), stem


def test_documents_through_the_document_routes_give_the_engines_text(served: Served, truth) -> None:
    """Whole documents uploaded to the same server decode on its vLLM engine: each ends done with
    the ground truth's raw pages in its zip."""
    docs = DocumentsClient(served)
    try:
        ids = docs.upload_ids([SAMPLES / name for name in INPUTS])
        for doc_id, name in zip(ids, INPUTS, strict=True):
            body = docs.wait(doc_id)
            assert body["status"] == "done", body
            stem = Path(name).stem
            with zipfile.ZipFile(io.BytesIO(docs.result(doc_id, "zip"))) as archive:
                for (truth_stem, page), stream in truth.items():
                    if truth_stem == stem:
                        raw = archive.read(f"{stem}/raw/page-{page:04d}.txt").decode("utf-8")
                        assert raw == stream, f"{stem} page {page} differs from the ground truth"
            assert body["pages"]["done"] == body["pages"]["total"] > 0
    finally:
        docs.close()


def test_streamed_and_plain_answers_are_the_same_text(client, truth, pngs) -> None:
    for key in sorted(truth)[:3]:
        plain = _ask(client, pngs[key], logprobs=True)
        usage = {"include_usage": True}
        chunks = list(_ask(client, pngs[key], stream=True, stream_options=usage, logprobs=True))
        streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert plain.choices[0].message.content == streamed == truth[key], key
        assert chunks[-1].usage.completion_tokens == plain.usage.completion_tokens
        # logprobs (tests/serve/test_serve_logprobs.py on the torch engine): the same tokens
        entries = plain.choices[0].logprobs.content
        assert "".join(e.token for e in entries) == truth[key]
        pieces = [c.choices[0] for c in chunks if c.choices and c.choices[0].delta.content]
        tokens = [e.token for p in pieces for e in p.logprobs.content]
        assert tokens == [e.token for e in entries], key


def test_a_client_leaving_mid_stream_frees_its_page(served: Served, client, truth, pngs) -> None:
    key = max(truth, key=lambda k: len(truth[k]))
    before = served.metrics()
    stream = _ask(client, pngs[key], stream=True)
    next(stream)  # the opening chunk: the engine has taken the page
    stream.close()
    _wait_for(lambda: served.metrics()[("hpdparse_pages_in_flight", ())] == 0)
    after = served.metrics()
    route = "/v1/chat/completions"
    assert _grew(before, after, "hpdparse_requests_total", route=route, status="499") == 1
    assert _grew(before, after, "hpdparse_pages_total", finish_reason="stop") == 0
    assert _ask(client, pngs[key]).choices[0].message.content == truth[key]


class _Load:
    """Clients sending pages, streamed and not, some leaving mid-page; what came back."""

    def __init__(self, served: Served, truth: dict, pngs: dict) -> None:
        self.served, self.truth, self.pngs = served, truth, pngs
        self.answers: list[tuple[tuple[str, int], str, str]] = []  # key, id, text
        self.left = 0
        self.lock = threading.Lock()

    def client(self, number: int) -> None:
        keys = sorted(self.truth)
        with self.served.client(timeout=600) as http:
            api = openai.OpenAI(base_url=self.served.url, api_key="-", http_client=http)
            api = api.with_options(max_retries=0)
            for page in range(PAGES_EACH):
                key = keys[(number + page) % len(keys)]
                leaves = number % 4 == 0 and page == 1
                if (number + page) % 2:
                    self._streamed(api, key, leaves)
                elif leaves:
                    self._plain_then_leave(key)
                else:
                    answer = _ask(api, self.pngs[key])
                    self._record(key, answer.id, answer.choices[0].message.content)

    def _streamed(self, api: openai.OpenAI, key: tuple[str, int], leaves: bool) -> None:
        stream = _ask(api, self.pngs[key], stream=True)
        if leaves:
            next(stream)
            stream.close()
            with self.lock:
                self.left += 1
            return
        chunks = list(stream)
        text = "".join(c.choices[0].delta.content or "" for c in chunks)
        self._record(key, chunks[0].id, text)

    def _plain_then_leave(self, key: tuple[str, int]) -> None:
        """A client that sends a plain request and closes the connection without its answer."""
        body = json.dumps(page_body(self.pngs[key])).encode()
        host, port = self.served.base.removeprefix("http://").rsplit(":", 1)
        head = (
            f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        )
        with socket.create_connection((host, int(port)), timeout=60) as sock:
            sock.sendall(head.encode("ascii") + body)
        with self.lock:
            self.left += 1

    def _record(self, key: tuple[str, int], answer_id: str, text: str) -> None:
        with self.lock:
            self.answers.append((key, answer_id, text))


def _sample(served: Served, stop: threading.Event, samples: list) -> None:
    while not stop.wait(0.2):
        metrics = served.metrics()
        samples.append(
            (
                metrics[("hpdparse_pages_queued", ())],
                metrics[("hpdparse_requests_waiting", ())],
                served.rss(),
            )
        )


def test_a_load_of_clients_gets_every_answer_once_within_bounds(
    served: Served, truth, pngs
) -> None:
    load = _Load(served, truth, pngs)
    baseline = served.rss()
    samples: list[tuple[float, float, int]] = []
    stop = threading.Event()
    sampler = threading.Thread(target=_sample, args=(served, stop, samples), daemon=True)
    sampler.start()
    try:
        with concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool:
            for done in [pool.submit(load.client, number) for number in range(CLIENTS)]:
                done.result()
    finally:
        stop.set()
        sampler.join()
    assert load.left == len(range(0, CLIENTS, 4))
    assert len(load.answers) == CLIENTS * PAGES_EACH - load.left, "answers lost"
    assert len({answer_id for _, answer_id, _ in load.answers}) == len(load.answers)
    for key, _, text in load.answers:
        assert text == truth[key], key
    assert samples, "no metrics sampled during the load"
    assert max(s[0] for s in samples) <= MAX_QUEUED
    assert max(s[1] for s in samples) <= MAX_WAITING
    growth = max(s[2] for s in samples) - baseline
    print(f"server RSS {baseline / 2**20:.0f} MiB, +{growth / 2**20:.0f} MiB under load")
    assert growth < RSS_GROWTH_LIMIT
    _wait_for(lambda: served.metrics()[("hpdparse_pages_in_flight", ())] == 0)


def test_beyond_the_waiting_bound_requests_get_503_at_once(served: Served, truth, pngs) -> None:
    keys = sorted(truth)
    count = 4 * (MAX_QUEUED + MAX_WAITING)
    bodies = [json.dumps(page_body(pngs[keys[i % len(keys)]])).encode() for i in range(count)]
    start = threading.Barrier(count)

    def send(number: int) -> httpx.Response:
        with served.client(timeout=600) as http:
            start.wait()
            return http.post(f"{served.url}/chat/completions", content=bodies[number])

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        answers = list(pool.map(send, range(count)))
    busy = 0
    for number, answer in enumerate(answers):
        if answer.status_code == 503:
            assert "the server is busy" in answer.json()["error"]["message"]
            busy += 1
        else:
            assert answer.status_code == 200, answer.text
            content = answer.json()["choices"][0]["message"]["content"]
            assert content == truth[keys[number % len(keys)]]
    assert 0 < busy < count


def test_a_model_that_cannot_load_is_a_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["serve", "--model", str(tmp_path / "absent"), "--port", "0", "--device", "cpu"]
    )
    assert result.exit_code == 1
    assert result.output.strip().count("\n") == 0
    assert result.output.startswith("error: ") and "absent" in result.output


def test_a_port_in_use_is_a_one_line_error_before_the_model_loads() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            main, ["serve", "--model", str(TINY), "--port", str(port), "--device", "cpu"]
        )
    assert result.exit_code == 1
    assert (
        result.output.strip() == f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_sigterm_answers_every_request_and_exits_cleanly(served: Served, truth, pngs) -> None:
    """Runs last: stops the module's server. With --shutdown-timeout 0 (the default) the pages
    in the engine at the signal are dropped and answered 503; every request gets an answer."""
    keys = sorted(truth)[: MAX_QUEUED + MAX_WAITING - 1]

    def send(key: tuple[str, int]) -> httpx.Response:
        with served.client(timeout=600) as http:
            return http.post(f"{served.url}/chat/completions", json=page_body(pngs[key]))

    with concurrent.futures.ThreadPoolExecutor(len(keys)) as pool:
        pending = [pool.submit(send, key) for key in keys]
        _wait_for(lambda: served.metrics()[("hpdparse_pages_in_flight", ())] >= 1)
        served.proc.send_signal(signal.SIGTERM)
        code = served.proc.wait(120)
        answers = [future.result() for future in pending]  # none lost: no transport error
    stopped = 0
    for key, answer in zip(keys, answers, strict=True):
        if answer.status_code == 200:
            assert answer.json()["choices"][0]["message"]["content"] == truth[key]
        else:
            assert answer.status_code == 503, answer.text
            assert "shutting down" in answer.json()["error"]["message"]
            stopped += 1
    assert stopped >= 1, "no page was in the engine at the signal"
    assert code == 0, served.stderr.read_text()
    assert "Traceback" not in served.stderr.read_text()
