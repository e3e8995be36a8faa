"""The openai engine asks for `logprobs: true` (`--engine-option logprobs=true`) and turns the
answer's `choices[0].logprobs.content` (the OpenAI shape, which stock `vllm serve` gives) into
the page's block log-probabilities; an answer without them gives none."""

from __future__ import annotations

from hpdparse import wire
from hpdparse.engines.openai.engine import _page_logprobs
from hpdparse.engines.openai.options import OpenAIOptions


def test_the_request_asks_for_logprobs_when_told_to() -> None:
    body = wire.chat_request("m", "data:image/png;base64,AA==", None, logprobs=True)
    assert body["logprobs"] is True
    assert "logprobs" not in wire.chat_request("m", "data:image/png;base64,AA==", None)
    # Off by default: hpdparse serve refuses logprobs (it does not answer them yet).
    assert OpenAIOptions().logprobs is False
    assert OpenAIOptions.coerce({"logprobs": True}).logprobs is True


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
