"""The openai engine against a real local HTTP server (tests/helpers/fakeserver.py)."""

from __future__ import annotations

import dataclasses
import io
import pickle
import socket
import threading
import time
from collections.abc import Iterator

import pymupdf
import pytest
from PIL import Image

from hpdparse.engines import create_engine
from hpdparse.engines.base import (
    FINISH_ERROR,
    FINISH_LENGTH,
    FINISH_STOP,
    EngineConfig,
    PageRequest,
)
from hpdparse.engines.openai.engine import OpenAIEngine, encode_page_png
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.errors import EngineError
from hpdparse.hpd.protocol import DEFAULT_MODEL, PROMPT_FORK, PROMPT_PLAIN
from tests.helpers.fakeserver import (
    SAMPLES_DIR,
    STREAMS_DIR,
    FakeHPDServer,
    generic_stream,
    image_fingerprint,
    load_streams,
)

FAST_RETRIES = {"retry_backoff": 0.01, "retry_backoff_max": 0.05}


def page_image(index: int, size: tuple[int, int] = (120, 170)) -> Image.Image:
    """A small page whose top-left pixel carries its index (read back by the server)."""
    image = Image.new("RGB", size, (255, 255, 255))
    image.putpixel((0, 0), (index, 0, 0))
    image.paste((index * 37 % 256, 80, 160), (20, 30, 100, 60))
    return image


def index_of(request) -> int:
    return request.image.getpixel((0, 0))[0]


def echo(request) -> str:
    return f"<BLOCK>text [0, 0, 1000, 1000]<CHILD>page {index_of(request)}"


def make_engine(server: FakeHPDServer, **settings) -> OpenAIEngine:
    """A started engine for `server`; `settings` are EngineConfig or OpenAIOptions fields."""
    shared = {f.name for f in dataclasses.fields(EngineConfig)}
    config = EngineConfig(**{k: v for k, v in settings.items() if k in shared})
    own = {k: v for k, v in settings.items() if k not in shared}
    engine = OpenAIEngine(config, OpenAIOptions(server=server.url, **{**FAST_RETRIES, **own}))
    engine.start()
    return engine


def requests_for(count: int, pulled: list[int] | None = None) -> Iterator[PageRequest]:
    for index in range(count):
        if pulled is not None:
            pulled.append(index)
        yield PageRequest(key=index, payload=encode_page_png(page_image(index)))


def engine_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "hpdparse-openai"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- preparing pages


@pytest.mark.parametrize("mode", ["RGB", "L"])
@pytest.mark.parametrize("size", [(1, 1), (7, 3), (333, 257)])
def test_encode_page_png_decodes_to_the_same_pixels(mode: str, size: tuple[int, int]) -> None:
    image = Image.effect_noise(size, 60).convert(mode)
    decoded = Image.open(io.BytesIO(encode_page_png(image)))
    assert decoded.mode == mode
    assert decoded.size == size
    assert decoded.tobytes() == image.tobytes()


def test_encode_page_png_flattens_transparency_onto_white() -> None:
    image = Image.new("RGBA", (4, 2), (0, 0, 0, 0))
    image.putpixel((1, 1), (10, 20, 30, 255))
    decoded = Image.open(io.BytesIO(encode_page_png(image)))
    assert decoded.mode == "RGB"
    assert decoded.getpixel((0, 0)) == (255, 255, 255)
    assert decoded.getpixel((1, 1)) == (10, 20, 30)
    palette = Image.new("P", (3, 3), 5)
    assert Image.open(io.BytesIO(encode_page_png(palette))).mode == "RGB"


def test_preparer_is_picklable_and_encodes_png() -> None:
    engine = create_engine("openai", EngineConfig())
    prepare = pickle.loads(pickle.dumps(engine.preparer()))
    assert prepare(page_image(3)).startswith(b"\x89PNG\r\n\x1a\n")


# ---------------------------------------------------------------- the happy path


def test_results_come_in_completion_order_with_the_request_the_server_expects() -> None:
    count = 5
    first_arrival: dict[str, float] = {}

    def later_for_lower_index(request) -> float:
        # Deadlines counted from the first arrival, so that arrival jitter cannot reorder pages.
        start = first_arrival.setdefault("t", request.received) + 0.6
        return start + (count - index_of(request)) * 0.15 - time.monotonic()

    with FakeHPDServer(echo, delay=later_for_lower_index) as server:
        engine = make_engine(server, max_tokens=1234)
        results = list(engine.run(requests_for(count), max_in_flight=count))
        sent = server.requests
    assert [r.key for r in results] == [4, 3, 2, 1, 0]
    for result in results:
        assert result.ok and result.finish_reason == FINISH_STOP
        assert result.text == f"<BLOCK>text [0, 0, 1000, 1000]<CHILD>page {result.key}"
        assert result.prompt_tokens > 0 and result.output_tokens > 0
        assert result.seconds >= 0.1 and result.stats == {"retries": 0}
    assert {(r.prompt, r.temperature, r.max_tokens, r.model) for r in sent} == {
        (PROMPT_FORK, 0, 1234, DEFAULT_MODEL)
    }
    assert sorted(r.fingerprint for r in sent) == sorted(
        image_fingerprint(page_image(i)) for i in range(count)
    )
    assert engine.info.prompt == PROMPT_FORK and engine.info.engine == "openai"
    assert not engine_threads()


def test_no_fork_sends_the_plain_prompt() -> None:
    with FakeHPDServer(echo) as server:
        engine = make_engine(server, fork=False)
        [result] = engine.run(requests_for(1), max_in_flight=2)
        assert result.ok
        assert server.requests[0].prompt == PROMPT_PLAIN == engine.info.prompt


def test_concurrency_is_bounded_and_requests_are_pulled_lazily() -> None:
    pulled: list[int] = []
    yielded = 0
    with FakeHPDServer(echo, delay=0.2) as server:
        engine = make_engine(server)
        for _ in engine.run(requests_for(12, pulled), max_in_flight=3):
            assert len(pulled) - yielded <= 3
            yielded += 1
        assert server.max_concurrent == 3  # reached, and never more
    assert yielded == 12


def test_slow_request_iterator_still_gets_every_page() -> None:
    def slow() -> Iterator[PageRequest]:
        for request in requests_for(4):
            time.sleep(0.05)
            yield request

    with FakeHPDServer(echo) as server:
        results = list(make_engine(server).run(slow(), max_in_flight=2))
    assert sorted(r.key for r in results) == [0, 1, 2, 3] and all(r.ok for r in results)


# ---------------------------------------------------------------- retries and failures


@pytest.mark.parametrize("fault", ["503", "500", "drop"])
def test_transient_failures_are_retried(fault: str) -> None:
    with FakeHPDServer(echo, faults=[fault, fault]) as server:
        [result] = make_engine(server, retries=3).run(requests_for(1), max_in_flight=1)
        assert server.chat_count == 3
    assert result.ok and result.text.endswith("page 0")
    assert result.stats["retries"] == 2


def test_4xx_is_not_retried_and_names_the_server_message() -> None:
    with FakeHPDServer(echo, faults=["400"]) as server:
        results = list(make_engine(server, retries=3).run(requests_for(2), max_in_flight=1))
        assert server.chat_count == 2
    failed, ok = results
    assert failed.finish_reason == FINISH_ERROR and not failed.ok and failed.text == ""
    assert "HTTP 400" in failed.error and "fake fault 400" in failed.error
    assert "\n" not in failed.error and failed.stats["retries"] == 0
    assert ok.ok


def test_retries_are_exhausted_into_a_page_error() -> None:
    with FakeHPDServer(echo, faults=["503"] * 10) as server:
        [result] = make_engine(server, retries=2).run(requests_for(1), max_in_flight=1)
        assert server.chat_count == 3
    assert result.finish_reason == FINISH_ERROR
    assert result.error.startswith(f"server {server.url}: HTTP 503")
    assert result.error.endswith("after 2 retries") and result.stats["retries"] == 2


@pytest.mark.parametrize(
    ("fault", "words"),
    [("garbage", "not JSON"), ("no-choices", "no choices"), ("bad-content", "no text content")],
)
def test_garbage_answers_fail_only_their_page(fault: str, words: str) -> None:
    with FakeHPDServer(echo, faults=[fault]) as server:
        results = list(make_engine(server, retries=3).run(requests_for(3), max_in_flight=1))
        assert server.chat_count == 3  # garbage is not retried
    assert [r.ok for r in results] == [False, True, True]
    assert words in results[0].error and "\n" not in results[0].error


def test_timeout_becomes_an_error_after_retries() -> None:
    with FakeHPDServer(echo, faults=["hang", "hang"]) as server:
        engine = make_engine(server, request_timeout=0.3, retries=1)
        started = time.monotonic()
        [result] = engine.run(requests_for(1), max_in_flight=1)
        elapsed = time.monotonic() - started
        assert server.chat_count == 2
    assert result.finish_reason == FINISH_ERROR
    assert result.error == f"server {server.url}: no answer within 0.3 s after 1 retry"
    assert 0.6 <= elapsed < 3


def test_server_gone_during_a_run_gives_page_errors_not_exceptions() -> None:
    server = FakeHPDServer(echo).start()
    engine = make_engine(server, retries=1)
    server.stop()
    results = list(engine.run(requests_for(2), max_in_flight=2))
    assert [r.finish_reason for r in results] == [FINISH_ERROR, FINISH_ERROR]
    assert results[0].error == f"server {server.url}: connection refused after 1 retry"


def test_bad_payload_fails_its_page_only() -> None:
    with FakeHPDServer(echo) as server:
        requests = [PageRequest("bad", 12345), *requests_for(1)]
        results = list(make_engine(server).run(iter(requests), max_in_flight=2))
    assert {r.key: r.ok for r in results} == {"bad": False, 0: True}
    assert "int" in results[0].error


def test_an_exception_from_the_request_iterator_propagates_and_stops_the_thread() -> None:
    def broken() -> Iterator[PageRequest]:
        yield from requests_for(1)
        raise RuntimeError("renderer died")

    with FakeHPDServer(echo) as server, pytest.raises(RuntimeError, match="renderer died"):
        list(make_engine(server).run(broken(), max_in_flight=2))
    assert not engine_threads()


# ---------------------------------------------------------------- usage and finish reasons


def test_token_usage_and_length_are_recorded() -> None:
    with FakeHPDServer(echo, faults=["length"]) as server:
        results = {r.key: r for r in make_engine(server).run(requests_for(2), max_in_flight=1)}
    cut, full = results[0], results[1]
    assert cut.finish_reason == FINISH_LENGTH and cut.ok and cut.output_tokens == 8000
    assert full.finish_reason == FINISH_STOP
    assert full.output_tokens == -(-len(full.text) // 4) and full.prompt_tokens > 256


def test_small_max_tokens_cuts_the_answer() -> None:
    with FakeHPDServer() as server:
        [result] = make_engine(server, max_tokens=10).run(requests_for(1), max_in_flight=1)
    assert result.finish_reason == FINISH_LENGTH
    assert len(result.text) == 40 and result.output_tokens == 10


# ---------------------------------------------------------------- closing early


def test_closing_the_generator_early_cancels_requests_without_hanging() -> None:
    pulled: list[int] = []

    def first_fast_rest_hang(request) -> str | None:
        return None if index_of(request) == 0 else "hang"

    with FakeHPDServer(echo, fault=first_fast_rest_hang) as server:
        results = make_engine(server).run(requests_for(10, pulled), max_in_flight=4)
        first = next(results)
        assert first.key == 0 and first.ok
        started = time.monotonic()
        results.close()
        assert time.monotonic() - started < 2
        assert not engine_threads()
        assert len(pulled) <= 5


# ---------------------------------------------------------------- starting


def test_start_fails_with_one_line_when_the_server_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    engine = OpenAIEngine(EngineConfig(), OpenAIOptions(server=url))
    with pytest.raises(EngineError) as caught:
        engine.start()
    message = str(caught.value)
    assert (
        message
        == f"cannot reach HPD server at {url}: connection refused; start it or pass --server"
    )


def test_run_before_start_checks_the_server_too() -> None:
    engine = OpenAIEngine(
        EngineConfig(), OpenAIOptions(server=f"http://127.0.0.1:{free_port()}/v1")
    )
    with pytest.raises(EngineError, match="cannot reach HPD server"):
        list(engine.run(requests_for(1), max_in_flight=1))


@pytest.mark.parametrize(
    ("served", "wanted", "expected"),
    [
        (["hpd-local"], DEFAULT_MODEL, "hpd-local"),
        ([DEFAULT_MODEL, "other"], DEFAULT_MODEL, DEFAULT_MODEL),
        (["a", "mine"], "mine", "mine"),
    ],
)
def test_model_name_is_settled_against_the_served_models(served, wanted, expected) -> None:
    with FakeHPDServer(echo, models=served) as server:
        engine = make_engine(server, model=wanted)
        [result] = engine.run(requests_for(1), max_in_flight=1)
        assert result.ok and server.requests[0].model == expected == engine.model
        assert engine.info.model == wanted  # what pages are recorded with, as before start()


@pytest.mark.parametrize(
    ("served", "wanted"), [(["a", "b"], DEFAULT_MODEL), (["hpd-local"], "mine")]
)
def test_model_the_server_does_not_serve_is_refused_at_start(served, wanted) -> None:
    with FakeHPDServer(echo, models=served) as server, pytest.raises(EngineError) as caught:
        make_engine(server, model=wanted)
    assert f"does not serve model {wanted!r}" in str(caught.value)
    assert "pass --model" in str(caught.value)


@pytest.mark.parametrize(
    ("fault", "words"), [("garbage", "not an OpenAI model list"), ("404", "/v1")]
)
def test_a_broken_models_endpoint_is_refused_at_start(fault: str, words: str) -> None:
    with FakeHPDServer(echo, models_fault=fault) as server, pytest.raises(EngineError) as caught:
        make_engine(server)
    assert words in str(caught.value) and "\n" not in str(caught.value)


def test_bad_server_url_is_refused() -> None:
    with pytest.raises(EngineError, match="must start with http"):
        OpenAIEngine(EngineConfig(), OpenAIOptions(server="127.0.0.1:8118/v1")).start()


# ---------------------------------------------------------------- the fake server's answers


def render(pdf, page_number: int, dpi: int) -> Image.Image:
    pix = pdf[page_number - 1].get_pixmap(dpi=dpi, alpha=False)
    return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


def test_sample_pages_get_their_ground_truth_at_any_dpi() -> None:
    streams = load_streams(STREAMS_DIR)
    pdf_pages = [key for key in streams if (SAMPLES_DIR / f"{key[0]}.pdf").is_file()]
    if not pdf_pages:
        pytest.skip("no sample PDFs with ground truth yet")
    requests = []
    for stem, page in pdf_pages:
        with pymupdf.open(SAMPLES_DIR / f"{stem}.pdf") as pdf:
            for dpi in (72, 200):
                requests.append(PageRequest((stem, page, dpi), render(pdf, page, dpi)))
    with FakeHPDServer() as server:
        results = list(make_engine(server).run(iter(requests), max_in_flight=4))
        assert sorted(server.page_ids()) == sorted(r.key[:2] for r in requests)
    for result in results:
        assert result.ok and result.text == streams[result.key[:2]]


def test_other_pages_get_a_generic_stream_that_depends_only_on_the_image() -> None:
    image = page_image(9, size=(300, 420))
    with FakeHPDServer() as server:
        engine = make_engine(server)
        results = list(engine.run(iter([PageRequest(i, image) for i in range(2)]), 2))
        assert server.page_ids() == [None, None]
    assert results[0].text == results[1].text == generic_stream(image, image_fingerprint(image))
    for label in ("header", "doc_title", "text", "equation", "table", "image", "page_number"):
        assert f"<BLOCK>{label} [" in results[0].text


def test_an_image_sample_is_told_apart_from_the_pdf_page_it_was_rendered_from() -> None:
    scan, memo = SAMPLES_DIR / "scan.png", SAMPLES_DIR / "memo.pdf"
    if not (scan.is_file() and memo.is_file()):
        pytest.skip("scan.png and memo.pdf samples not generated")
    with pymupdf.open(memo) as pdf:
        memo_page = render(pdf, 1, 200)
    requests = [PageRequest("scan", Image.open(scan)), PageRequest("memo", memo_page)]
    with FakeHPDServer() as server:
        results = list(make_engine(server).run(iter(requests), max_in_flight=1))
        assert server.page_ids() == [("scan", 1), ("memo", 1)]
    assert all(r.ok for r in results)
