"""`hpdparse serve` answers `logprobs` in the OpenAI shape, streamed and not, checked with the
official `openai` client against a real server (a subprocess, torch engine, tiny checkpoint):
the tokens spell the answer, their log-probabilities are the torch engine's own; and
`convert --engine openai` through it (which asks for them by default) gives the blocks the
confidences `convert --engine torch` gives."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("starlette")

import openai
from PIL import Image

from hpdparse import api
from hpdparse.engines import create_engine
from hpdparse.engines.base import EngineConfig, PageRequest
from hpdparse.runner.progress import Progress
from tests.helpers.paths import FIXTURES, SAMPLES, TINY
from tests.helpers.serving import Served, page_messages, sample_pngs, serve_process
from tests.tinymodel.synth import load_ground_truth

MAX_TOKENS = 2000
SERVER = ["--engine", "torch", "--device", "cpu", "--port", "0", "--max-tokens", str(MAX_TOKENS)]
SAME_ENGINE = 1e-3  # float32 on CPU; the P-MTP verify pass sums the drafts in another order


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Served:
    stderr = tmp_path_factory.mktemp("serve-logprobs") / "stderr.txt"
    with serve_process(SERVER, stderr) as served:
        yield served


@pytest.fixture(scope="module")
def client(served: Served) -> openai.OpenAI:
    return openai.OpenAI(base_url=served.url, api_key="none", max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def page() -> tuple[str, bytes]:
    """The longest sample page: its raw text and its PNG."""
    truth = load_ground_truth(FIXTURES / "streams")
    key = max(truth, key=lambda k: len(truth[k]))
    return truth[key], sample_pngs([key])[key]


def _ask(client: openai.OpenAI, png: bytes, **options: object):
    return client.chat.completions.create(model=str(TINY), messages=page_messages(png), **options)


def _torch_logprobs(png: bytes) -> list[float]:
    """The page's token log-probabilities from the torch engine in this process."""
    config = EngineConfig(model=str(TINY), device="cpu", max_tokens=MAX_TOKENS)
    with create_engine("torch", config) as engine:
        image = Image.open(io.BytesIO(png))
        (result,) = engine.run([PageRequest("page", engine.preparer()(image))], 1)
    assert result.logprobs is not None
    return [v for s in result.logprobs.segments for v in (*s.header, *s.content)]


def test_an_answer_has_each_tokens_logprob_in_the_openai_shape(client, page) -> None:
    text, png = page
    answer = _ask(client, png, logprobs=True, top_logprobs=0)
    entries = answer.choices[0].logprobs.content
    assert "".join(e.token for e in entries) == text == answer.choices[0].message.content
    assert all(e.bytes == list(e.token.encode()) and e.top_logprobs == [] for e in entries)
    assert {"<BLOCK>", "<CHILD>"} <= {e.token for e in entries}  # special tokens as themselves
    local = _torch_logprobs(png)
    assert [e.logprob for e in entries] == pytest.approx(local, abs=SAME_ENGINE)
    assert min(local) < -0.01, "every token certain: the comparison would prove little"
    assert _ask(client, png).choices[0].logprobs is None  # not asked for: none, as before


def test_streamed_chunks_carry_the_logprobs_of_their_tokens(client, page) -> None:
    text, png = page
    whole = _ask(client, png, logprobs=True).choices[0].logprobs.content
    chunks = list(_ask(client, png, logprobs=True, stream=True))
    content = [c.choices[0] for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) > 1, "the page arrived in one piece"
    for choice in content:  # each piece carries the tokens it is made of
        assert "".join(e.token for e in choice.logprobs.content) == choice.delta.content
    streamed = [e for choice in content for e in choice.logprobs.content]
    assert "".join(e.token for e in streamed) == text
    assert [e.token for e in streamed] == [e.token for e in whole]
    assert [e.logprob for e in streamed] == pytest.approx([e.logprob for e in whole], abs=1e-3)
    plain = list(_ask(client, png, stream=True))
    assert all(c.choices[0].logprobs is None for c in plain if c.choices)


def test_rivals_are_refused_in_one_line(client, page) -> None:
    _, png = page
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(client, png, logprobs=True, top_logprobs=3)
    assert refused.value.body["param"] == "top_logprobs"
    assert "chosen tokens' log-probabilities only" in refused.value.body["message"]
    with pytest.raises(openai.BadRequestError, match="logprobs must be true or false"):
        _ask(client, png, extra_body={"logprobs": "yes"})


def _confidences(out: Path, stem: str) -> list[list[float | None]]:
    pages = json.loads((out / stem / f"{stem}.json").read_text(encoding="utf-8"))["pages"]
    return [[p["confidence"]] + [b["confidence"] for b in p["blocks"]] for p in pages]


def test_convert_through_it_gives_the_torch_engines_confidences(
    served: Served, tmp_path: Path
) -> None:
    source = SAMPLES / "memo.pdf"
    common = {"model": str(TINY), "progress": Progress(), "max_tokens": MAX_TOKENS}
    remote = api.convert(
        [source], tmp_path / "remote", engine="openai", server=served.url, **common
    )
    local = api.convert([source], tmp_path / "local", engine="torch", device="cpu", **common)
    assert remote.exit_code == 0 and local.exit_code == 0
    got, want = _confidences(tmp_path / "remote", "memo"), _confidences(tmp_path / "local", "memo")
    assert all(v is not None for page in got for v in page)
    assert [len(p) for p in got] == [len(p) for p in want]
    for page_got, page_want in zip(got, want, strict=True):
        assert page_got == pytest.approx(page_want, abs=SAME_ENGINE)
