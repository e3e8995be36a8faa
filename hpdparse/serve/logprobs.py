"""The ``logprobs`` of an answer in the OpenAI shape: ``{"content": [{"token", "logprob",
"bytes", "top_logprobs"}, ...]}``, one entry per chosen token, as vLLM's OpenAI server gives
them: `token` is the token decoded alone (special tokens kept, so ``<BLOCK>``, ``<CHILD>`` and
``<FORK>`` read as themselves; a token holding part of a UTF-8 character decodes to U+FFFD),
`bytes` the UTF-8 bytes of that text, `logprob` the chosen token's natural-log probability under
greedy decoding (a child's ``<CHILD>`` carries its ``<FORK>``'s), `top_logprobs` empty: the
engines report the chosen token only, so a request may ask for ``top_logprobs`` 0 at most.
The page's stop token is not among them, as it is not in the text.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence

from hpdparse.wire.bodies import ChatCompletion, ChatCompletionChunk, TokenLogprob

_FLOOR = -9999.0  # what vLLM answers for a log-probability of -inf (JSON has no infinity)


TokenTexts = Callable[[int], str]  # token id -> its text decoded alone (`token_texts`)


def token_texts(detokenize: Callable[[list[int]], str]) -> TokenTexts:
    """Token id -> its text decoded alone, remembered (a page has thousands of tokens, a
    vocabulary far fewer)."""
    return functools.cache(lambda token_id: detokenize([token_id]))


def token_entries(
    token_ids: Sequence[int], values: Sequence[float], texts: TokenTexts
) -> list[TokenLogprob]:
    """The ``logprobs.content`` entries of these tokens."""
    entries = []
    for token_id, value in zip(token_ids, values, strict=True):
        token = texts(token_id)
        entries.append(
            {
                "token": token,
                "logprob": value if math.isfinite(value) else _FLOOR,
                "bytes": list(token.encode("utf-8")),
                "top_logprobs": [],
            }
        )
    return entries


def with_logprobs(
    answer: ChatCompletion | ChatCompletionChunk, entries: list[TokenLogprob] | None
) -> None:
    """A completion or stream chunk with its choice's ``logprobs`` set (null for None)."""
    answer["choices"][0]["logprobs"] = None if entries is None else {"content": entries}
