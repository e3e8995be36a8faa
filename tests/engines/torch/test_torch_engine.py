"""The torch engine through the Engine interface and the full CLI, on the tiny checkpoint."""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from hpdparse.engines import EngineConfig, PageRequest, create_engine
from hpdparse.engines.base import CANCELLED, FINISH_ERROR, FINISH_LENGTH
from hpdparse.errors import EngineError
from hpdparse.hpd.prompt import load_tokenizer
from hpdparse.hpd.protocol import CHILD
from hpdparse.hpd.tiling import expand_grey
from hpdparse.sources.open import open_source
from tests.helpers.streaming import joined, run_streaming
from tests.tinymodel.synth import load_ground_truth

REPO = Path(__file__).resolve().parents[3]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
STREAMS = REPO / "tests" / "fixtures" / "streams"
SAMPLES = REPO / "samples"


def _image(stem: str, page: int):
    path = SAMPLES / f"{stem}.pdf"
    if not path.is_file():
        path = SAMPLES / f"{stem}.png"
    with open_source(path) as doc:
        return doc.rasterize(page, 200)[0]


@pytest.fixture(scope="module")
def truth() -> dict:
    if not (SAMPLES / "report.pdf").is_file():
        pytest.skip("samples/ not generated")
    return load_ground_truth(STREAMS)


@pytest.fixture(scope="module")
def engine():
    eng = create_engine("torch", EngineConfig(model=str(TINY), device="cpu"))
    eng.start()
    yield eng
    eng.close()


def test_engine_decodes_pages_together(engine, truth: dict) -> None:
    prepare = pickle.loads(pickle.dumps(engine.preparer()))  # runs in worker processes
    requests = [PageRequest(key, prepare(_image(*key))) for key in sorted(truth)]
    pulled = []

    def lazily():
        for r in requests:
            pulled.append(r.key)
            yield r

    results = {}
    for result in engine.run(lazily(), max_in_flight=3):
        # The engine pulls requests only as it has room.
        assert len(pulled) - len(results) <= 4
        results[result.key] = result
    assert set(results) == set(truth)
    for key, result in results.items():
        assert result.ok and result.finish_reason == "stop", result.error
        assert result.text == truth[key], key
        assert result.stats["forks"] == truth[key].count("<CHILD>")
        assert result.stats["accepted_tokens"] > 0  # P-MTP is on by default
        assert result.prompt_tokens > 80
        assert result.output_tokens == result.stats["parent_tokens"] + result.stats["child_tokens"]
    assert engine.info.engine == "torch"
    assert engine.info.prompt == "document parsing with fork."


@pytest.fixture(scope="module")
def plain_engine():
    with create_engine("torch", EngineConfig(model=str(TINY), device="cpu", fork=False)) as eng:
        yield eng


@pytest.mark.parametrize("fork", [True, False], ids=["fork", "plain"])
def test_on_tokens_streams_the_ids_the_text_is_decoded_from(
    fork: bool,
    engine,
    plain_engine,
    truth: dict,
) -> None:
    eng = engine if fork else plain_engine
    keys = sorted(truth) if fork else sorted(truth)[:2]
    results, calls = run_streaming(eng, [(key, _image(*key)) for key in keys], max_in_flight=3)
    child = load_tokenizer(TINY, str(TINY)).token_to_id(CHILD)
    assert set(results) == set(keys)
    for key, result in results.items():
        assert result.ok, result.error
        streamed = joined(calls[key])
        assert eng.detokenize(streamed) == result.text, key
        assert len(streamed) == result.output_tokens, key
        # As the page decodes: at most one call per decoding step it took part in.
        assert 1 < len(calls[key]) <= result.stats["decoding_steps"], key
        if fork:
            assert streamed.count(child) == result.stats["forks"] > 0, key
            assert result.text == truth[key], key
    assert eng.detokenize([child]) == CHILD


def test_bad_payload_fails_that_page_only(engine, truth: dict) -> None:
    key = sorted(truth)[0]
    good = PageRequest(key, engine.preparer()(_image(*key)))
    bad = PageRequest("bad", "not tiles")
    results = {r.key: r for r in engine.run([bad, good], max_in_flight=2)}
    assert results["bad"].finish_reason == "error"
    assert "\n" not in results["bad"].error
    assert results[key].text == truth[key]


def test_grey_pages_give_the_same_text_as_one_or_three_channels(engine, truth: dict) -> None:
    prepare = engine.preparer()
    grey = {key: prepare(_image(*key)) for key in sorted(truth)}
    assert all(tiles.shape[-1] == 1 for tiles in grey.values())  # the samples are grey pages
    texts = {}
    for channels in (1, 3):
        requests = [
            PageRequest(key, tiles if channels == 1 else expand_grey(tiles))
            for key, tiles in grey.items()
        ]
        texts[channels] = {r.key: r.text for r in engine.run(requests, max_in_flight=3)}
    assert texts[1] == texts[3] == truth


def test_two_channel_tiles_fail_that_page_only(engine, truth: dict) -> None:
    key = sorted(truth)[0]
    tiles = engine.preparer()(_image(*key))
    two = np.repeat(tiles, 2, axis=3)
    results = {r.key: r for r in engine.run([PageRequest("two", two)], max_in_flight=1)}
    assert results["two"].finish_reason == "error"
    assert "(N, t, t, 1) or (N, t, t, 3)" in results["two"].error
    assert "\n" not in results["two"].error


def test_plain_and_serial_configurations(truth: dict) -> None:
    key = ("report", 1)
    for config, options in (
        (EngineConfig(model=str(TINY), fork=False, mtp=False), {}),
        (EngineConfig(model=str(TINY), mtp=False), {"schedule": "serial"}),
    ):
        eng = create_engine("torch", config, options)
        with eng:
            payload = eng.preparer()(_image(*key))
            (result,) = list(eng.run([PageRequest(key, payload)], max_in_flight=1))
        assert result.text == truth[key]
        assert result.stats["drafted_tokens"] == 0


def test_unknown_device_is_one_line() -> None:
    eng = create_engine("torch", EngineConfig(model=str(TINY), device="tpu"))
    with pytest.raises(EngineError, match="unknown device"):
        eng.start()


def test_cli_with_a_wrong_model_folder_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "not-a-model"
    bad.mkdir()
    (bad / "config.json").write_text('{"architectures": ["InternVLChatModel"]}')
    proc = subprocess.run(
        [sys.executable, "-m", "hpdparse", "convert", str(SAMPLES / "report.pdf")]
        + ["-o", str(tmp_path / "out"), "--engine", "torch", "--model", str(bad), "--quiet"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "stock InternVL" in lines[0] and str(bad) in lines[0]


def test_unknown_engine_option_is_one_line() -> None:
    with pytest.raises(EngineError) as caught:
        create_engine("torch", EngineConfig(model=str(TINY)), {"schedul": "serial"})
    assert str(caught.value) == "torch engine: unknown engine option schedul; it takes schedule"


def test_a_live_source_yielding_none_gives_the_same_texts(engine, truth: dict) -> None:
    """None from the source means "no request now": the engine keeps decoding what it has and
    asks again; with nothing in flight it asks again at once."""
    prepare = engine.preparer()
    seen: list = []

    def live():
        yield None
        for number, key in enumerate(sorted(truth)):
            nones = 0
            while len(seen) < number - 1:  # keep one page ahead
                nones += 1
                assert nones < 100_000, "the engine stopped decoding while the source said None"
                yield None
            yield PageRequest(key, prepare(_image(*key)))
            yield None

    results = {}
    for result in engine.run(live(), max_in_flight=3):
        seen.append(result.key)
        results[result.key] = result
    assert set(results) == set(truth)
    for key, result in results.items():
        assert result.text == truth[key], key


def test_a_cancelled_page_is_dropped_between_steps(engine, truth: dict) -> None:
    """PageRequest.cancel set while the page decodes: the engine drops it at its next step and
    yields it as cancelled; the other pages are not touched."""
    prepare = engine.preparer()
    longest = max(sorted(truth), key=lambda key: len(truth[key]))
    other = next(key for key in sorted(truth) if key != longest)
    cancel = threading.Event()
    rounds = 0

    def live():
        nonlocal rounds
        yield PageRequest(longest, prepare(_image(*longest)), cancel=cancel)
        while rounds < 5:  # one engine step per None: the page is decoding
            rounds += 1
            yield None
        cancel.set()
        yield PageRequest(other, prepare(_image(*other)))

    results = list(engine.run(live(), max_in_flight=4))
    assert [r.key for r in results] == [longest, other]
    assert results[0].finish_reason == FINISH_ERROR and results[0].error == CANCELLED
    assert results[1].text == truth[other]


def test_a_request_may_lower_the_token_limit_but_not_raise_it(engine, truth: dict) -> None:
    key = sorted(truth)[0]
    tiles = engine.preparer()(_image(*key))
    requests = [
        PageRequest("five", tiles, max_tokens=5),
        PageRequest("more", tiles, max_tokens=10**6),
    ]
    results = {r.key: r for r in engine.run(requests, max_in_flight=2)}
    five = results["five"]
    assert five.finish_reason == FINISH_LENGTH and five.stats["parent_tokens"] == 5
    assert five.stats["child_tokens"] <= 5 * five.stats["forks"]
    assert (results["more"].text, results["more"].finish_reason) == (truth[key], "stop")
