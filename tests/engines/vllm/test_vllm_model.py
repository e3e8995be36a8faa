"""The vLLM model plugin with grey (1-channel) and colour (3-channel) tiles, on the tiny checkpoint.

A grey page travels as (N, t, t, 1) uint8 tiles and is expanded on the model's device. vLLM merges
the image items of one encoder step; a grey and a colour page in the same step must both be
encoded from their own pixels (a flat field would zero-pad the grey page to 3 channels). The torch
engine is the oracle for the text.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from PIL import Image, ImageDraw

from tests.helpers.paths import FIXTURES, SAMPLES

try:  # only an absent vllm skips; a vllm that is installed but broken fails the tests
    import vllm  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the environment
    pytest.skip(f"vllm is not installed ({exc})", allow_module_level=True)

from hpdparse.engines import create_engine
from hpdparse.engines.base import EngineConfig, PageRequest
from hpdparse.engines.vllm.engine import VllmEngine
from hpdparse.hpd.tiling import TilingConfig, expand_grey, tile_image
from tests.helpers.vllm import vllm_config as _engine_test_config

pytestmark = pytest.mark.vllm

TINY = FIXTURES / "tiny-hpd"
DPI = 72


def _config() -> EngineConfig:
    return _engine_test_config(TINY, fork=True)


def _page(stem: str, number: int) -> Image.Image:
    import pymupdf

    with pymupdf.open(SAMPLES / f"{stem}.pdf") as doc:
        pix = doc[number - 1].get_pixmap(dpi=DPI)
        return Image.frombytes("RGB", (pix.width, pix.height), pix.samples)


@pytest.fixture(scope="module")
def payloads() -> dict[str, np.ndarray]:
    """Tiles of grey pages (1 channel), of one expanded to 3, and of a colour page."""
    if not (SAMPLES / "report.pdf").is_file():
        pytest.skip("samples/ not generated")
    tiling = TilingConfig.from_model_config(json.loads((TINY / "config.json").read_text()))
    grey = tile_image(_page("report", 1), tiling)
    grey2 = tile_image(_page("report", 2), tiling)
    grey3 = tile_image(_page("report", 3), tiling)
    colour_page = _page("paper", 1)
    draw = ImageDraw.Draw(colour_page)
    width, height = colour_page.size
    draw.rectangle((width // 8, height // 6, width * 7 // 8, height // 2), fill=(200, 30, 60))
    draw.rectangle((0, height * 2 // 3, width // 2, height), fill=(20, 160, 220))
    colour = tile_image(colour_page, tiling)
    assert grey.shape == grey2.shape == grey3.shape and grey.shape[-1] == 1
    assert colour.shape[-1] == 3
    return {
        "grey": grey,
        "grey-rgb": expand_grey(grey),
        "grey2": grey2,
        "grey3": grey3,
        "colour": colour,
    }


@pytest.fixture(scope="module")
def engine(vllm_engines) -> VllmEngine:
    return vllm_engines.get(_config())  # test_vllm_engine's tiny-hpd fork engine


def _texts(engine, payloads: dict[str, np.ndarray], keys: list[str]) -> dict[str, str]:
    requests = [PageRequest(key, payloads[key]) for key in keys]
    out = {r.key: r for r in engine.run(requests, max_in_flight=len(keys))}
    assert all(r.ok for r in out.values()), [r.error for r in out.values()]
    return {key: r.text for key, r in out.items()}


@pytest.fixture(scope="module")
def torch_texts(payloads) -> dict[str, str]:
    with create_engine("torch", _config()) as eng:
        return _texts(eng, payloads, list(payloads))


def _encoder_calls(engine: VllmEngine) -> list[tuple[int, ...]]:
    return list(engine.llm_engine.apply_model(lambda m: m.encoder_calls)[0])


def test_grey_and_colour_page_in_one_encoder_step(engine, payloads, torch_texts) -> None:
    before = len(_encoder_calls(engine))
    texts = _texts(engine, payloads, ["grey", "colour"])
    calls = _encoder_calls(engine)[before:]
    # Both pages went through the vision encoder together, each with its own channel count.
    assert sorted(calls[0]) == [1, 3], calls
    assert texts == {key: torch_texts[key] for key in texts}
    assert texts["grey"] != texts["colour"]


def test_grey_page_gives_the_same_text_as_one_or_three_channels(
    engine,
    payloads,
    torch_texts,
) -> None:
    one = _texts(engine, payloads, ["grey"])["grey"]
    three = _texts(engine, payloads, ["grey-rgb"])["grey-rgb"]
    assert one == three == torch_texts["grey"] == torch_texts["grey-rgb"]


def test_pages_of_one_shape_are_encoded_together(engine, payloads, torch_texts) -> None:
    # Same shape: vLLM hands the model one stacked (pages, N, t, t, 1) tensor. (Pages not seen
    # before: vLLM's caches would reuse an earlier page's encoder output.)
    before = len(_encoder_calls(engine))
    texts = _texts(engine, payloads, ["grey2", "grey3"])
    assert _encoder_calls(engine)[before:][0] == (1, 1)
    assert texts == {key: torch_texts[key] for key in texts}


def test_tiles_of_a_bad_shape_are_refused_in_one_line(engine, payloads) -> None:
    two = np.repeat(payloads["grey"], 2, axis=3)
    (result,) = engine.run([PageRequest("two", two)], max_in_flight=1)
    assert result.finish_reason == "error"
    assert "expected HPD tiles uint8 (N, 112, 112, 1 or 3)" in result.error, result.error
    assert "\n" not in result.error
