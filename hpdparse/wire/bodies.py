"""The JSON bodies of `hpdparse.wire`, typed: those it writes as TypedDicts (keys in the order
they are written), those it reads as the dataclasses it parses them into."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NotRequired, TypedDict


class ErrorDetail(TypedDict):
    message: str
    type: str
    param: str | None
    code: int


class ErrorBody(TypedDict):
    error: ErrorDetail


class Usage(TypedDict):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    max_tokens: NotRequired[int]  # hpdparse serve: the limit the page was decoded with


class TokenLogprob(TypedDict):
    token: str
    logprob: float
    bytes: list[int]
    top_logprobs: list[object]  # always empty: the engines report the chosen token only


class Logprobs(TypedDict):
    content: list[TokenLogprob]


class Message(TypedDict):
    role: str
    content: str


class Choice(TypedDict):
    index: int
    message: Message
    finish_reason: str
    logprobs: NotRequired[Logprobs | None]


class _Answer(TypedDict):
    id: str
    object: str
    created: int
    model: str


class ChatCompletion(_Answer):
    choices: list[Choice]
    usage: Usage


class Delta(TypedDict, total=False):
    role: str
    content: str


class ChunkChoice(TypedDict):
    index: int
    delta: Delta
    finish_reason: str | None
    logprobs: NotRequired[Logprobs | None]


class ChatCompletionChunk(_Answer):
    choices: list[ChunkChoice]
    usage: NotRequired[Usage]


class ModelCard(TypedDict):
    object: str
    id: str
    owned_by: str
    created: NotRequired[int]
    root: NotRequired[str]


class ModelList(TypedDict):
    object: str
    data: list[ModelCard]


@dataclass(frozen=True)
class ChatRequest:
    """A chat-completions request, checked for shape only (what is served is the server's call).

    `image_urls` and `texts` come from every user message, in order; `max_tokens` is
    ``max_completion_tokens`` when given, else ``max_tokens``; `logprobs`, `top_logprobs` and
    `echo` are as sent, unchecked (a server checks them against what it offers).
    """

    model: str | None
    image_urls: list[str]
    texts: list[str]
    stream: bool = False
    include_usage: bool = False
    max_tokens: int | None = None
    temperature: float | None = None
    n: int | None = None
    logprobs: object = None
    top_logprobs: object = None
    echo: object = None

    @property
    def text(self) -> str:
        """The user's text parts, stripped and joined by spaces."""
        return " ".join(t.strip() for t in self.texts if t.strip())


@dataclass(frozen=True)
class Completion:
    """What a client reads from a non-streamed answer."""

    content: str
    finish_reason: str | None
    usage: Usage  # counts that are missing or not non-negative integers read as 0
    # (token, log-probability) of each chosen token, when the answer has them
    logprobs: list[tuple[str, float]] | None = None
