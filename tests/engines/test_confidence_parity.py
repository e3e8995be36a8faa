"""The same page through fork and plain mode, with and without P-MTP, on the torch and vllm
engines: the same text, and the same block confidences within stated tolerances.

Tolerances (measured on the tiny checkpoint, one sample page at 72 dpi):
- one engine and mode, P-MTP on or off (and the torch engine's schedules): 1e-3 in confidence
  (float32 on CPU; the verify pass batches the drafts, so the sums run in another order);
- vllm against torch, same mode: 0.02 (different kernels);
- fork against plain: 0.15. The prompts differ ("with fork" or not), and so the model's
  probabilities: the tokens are the same, their log-probabilities are not.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from hpdparse.engines import create_engine
from hpdparse.engines.base import Engine, EngineConfig, PageRequest
from hpdparse.hpd.confidence import score_segment
from tests.helpers.vllm import MAX_MODEL_LEN, TINY, sample_pages

SAME_MODE = 1e-3
ACROSS_ENGINES = 0.02
ACROSS_MODES = 0.15
PAGE = ("report", 1)


def _config(fork: bool, mtp: bool) -> EngineConfig:
    return EngineConfig(
        model=str(TINY),
        fork=fork,
        mtp=mtp,
        device="cpu",
        max_tokens=400,
        max_model_len=MAX_MODEL_LEN,
    )


def decode(engine: Engine, image) -> tuple[str, list[float]]:
    (result,) = engine.run([PageRequest(PAGE, engine.preparer()(image))], 1)
    assert result.ok, result.error
    assert result.logprobs is not None
    scores = [score_segment(s) for s in result.logprobs.segments]
    return result.text, [s.confidence for s in scores if s is not None]


@pytest.fixture(scope="module")
def image():
    return dict(sample_pages())[PAGE]


def close(a: list[float], b: list[float], tolerance: float) -> float:
    assert len(a) == len(b)
    return max(abs(x - y) for x, y in zip(a, b, strict=True)) <= tolerance


@pytest.fixture(scope="module")
def torch_runs(image) -> dict:
    runs = {}
    for fork in (True, False):
        for mtp in (False, True):
            with create_engine("torch", _config(fork, mtp)) as engine:
                runs[fork, mtp] = decode(engine, image)
    return runs


def test_torch_fork_plain_and_pmtp_agree(torch_runs: dict) -> None:
    texts = {text for text, _ in torch_runs.values()}
    assert len(texts) == 1
    for fork in (True, False):
        assert close(torch_runs[fork, False][1], torch_runs[fork, True][1], SAME_MODE)
    assert close(torch_runs[True, False][1], torch_runs[False, False][1], ACROSS_MODES)


@pytest.mark.vllm
@pytest.mark.parametrize(("fork", "mtp"), [(True, True), (False, False)], ids=["fork+mtp", "plain"])
def test_vllm_gives_the_torch_text_and_confidences(
    fork: bool, mtp: bool, torch_runs: dict, image, vllm_engines
) -> None:
    pytest.importorskip("vllm")
    # Started once for the vLLM tests (tests/engines/conftest.py); the 400-token limit is set
    # on the shared engine for this run.
    text, confidences = decode(vllm_engines.get(_config(fork, mtp)), image)
    assert text == torch_runs[fork, mtp][0]
    assert close(confidences, torch_runs[fork, mtp][1], ACROSS_ENGINES)
