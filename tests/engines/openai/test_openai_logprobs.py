"""The openai engine asks for `logprobs: true` (unless `--engine-option logprobs=false`) and
turns the answer's `choices[0].logprobs.content` (the OpenAI shape, which `hpdparse serve` and
stock `vllm serve` give) into the page's block log-probabilities; an answer without them gives
none. Against a real local server that gives none (the fake HPD server), or refuses the
parameter, pages still convert, with confidence null and one warning for the run."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from hpdparse import api, wire
from hpdparse.engines.openai.logprobs import page_logprobs as _page_logprobs
from hpdparse.engines.openai.options import OpenAIOptions
from hpdparse.runner.progress import Progress
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import SAMPLES

WARNING = "its pages get confidence null"


def test_the_request_asks_for_logprobs_unless_told_not_to() -> None:
    body = wire.chat_request("m", "data:image/png;base64,AA==", None, logprobs=True)
    assert body["logprobs"] is True
    assert "logprobs" not in wire.chat_request("m", "data:image/png;base64,AA==", None)
    assert OpenAIOptions().logprobs is True
    assert OpenAIOptions.coerce({"logprobs": False}).logprobs is False


def _convert(srv: FakeHPDServer, out: Path, **options: object):
    return api.convert(
        [SAMPLES / "report.pdf"],
        out,
        engine="openai",
        server=srv.url,
        dpi=72,
        progress=Progress(),
        **options,
    )


def _page_confidences(out: Path) -> list[object]:
    document = json.loads((out / "report" / "report.json").read_text(encoding="utf-8"))
    return [page["confidence"] for page in document["pages"]]


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if WARNING in r.getMessage()]


def test_a_server_without_logprobs_leaves_confidence_null_with_one_warning(
    srv: FakeHPDServer, tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.WARNING)
    report = _convert(srv, tmp_path / "out")
    assert report.exit_code == 0
    assert _page_confidences(tmp_path / "out") == [None, None, None]
    assert all(r.options.get("logprobs") is True for r in srv.requests)
    assert len(_warnings(caplog)) == 1
    srv.clear_log()
    caplog.clear()
    report = _convert(srv, tmp_path / "off", engine_options={"logprobs": False})
    assert report.exit_code == 0 and _warnings(caplog) == []
    assert all("logprobs" not in r.options for r in srv.requests)


def test_a_server_refusing_logprobs_gets_pages_sent_again_without(
    srv: FakeHPDServer, tmp_path: Path, caplog
) -> None:
    caplog.set_level(logging.WARNING)
    srv.fault = lambda request: "no-logprobs" if "logprobs" in request.options else None
    report = _convert(srv, tmp_path / "out")
    assert report.exit_code == 0
    assert _page_confidences(tmp_path / "out") == [None, None, None]
    (warning,) = _warnings(caplog)
    assert "refused logprobs (HTTP 400)" in warning and "\n" not in warning
    answered = [r for r in srv.requests if "logprobs" not in r.options]
    assert sorted(r.page_id for r in answered) == [("report", n) for n in (1, 2, 3)]
    # Another 4xx fails its page as before.
    srv.clear_log()
    srv.fault = lambda request: "400"
    assert _convert(srv, tmp_path / "failed").exit_code == 1


def test_an_answer_with_logprobs_is_cut_into_blocks() -> None:
    pairs = [("<BLOCK>", -0.01), ("text", -0.02), (" [1, 2, 3, 4]", -0.03), ("<CHILD>", -0.04)]
    pairs += [
        ("Hel", -0.5),
        ("lo", -0.25),
        ("<BLOCK>", -0.06),
        ("image", -0.07),
        ("<|im_end|>", -0.08),
    ]
    answer = {
        "choices": [
            {
                "message": {"role": "assistant", "content": "".join(t for t, _ in pairs)},
                "finish_reason": "stop",
                "logprobs": {
                    "content": [{"token": t, "logprob": v, "top_logprobs": []} for t, v in pairs]
                },
            }
        ]
    }
    completion = wire.read_completion(answer)
    assert completion.logprobs == pairs
    page = _page_logprobs(completion.logprobs)
    assert [(len(s.header), len(s.content)) for s in page.segments] == [(0, 0), (4, 2), (2, 0)]
    assert page.segments[1].content == (-0.5, -0.25)


def test_an_answer_without_logprobs_has_none() -> None:
    answer = {"choices": [{"message": {"content": "x"}, "finish_reason": "stop"}]}
    assert wire.read_completion(answer).logprobs is None
    answer["choices"][0]["logprobs"] = {"content": [{"token": "x", "logprob": "high"}]}
    assert wire.read_completion(answer).logprobs is None
    assert _page_logprobs(None) is None
