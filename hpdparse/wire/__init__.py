"""The OpenAI chat-completions wire format as HPD speaks it: one package for the server
(`hpdparse serve`), the client (`--engine openai`) and the test server (tests/helpers).

A page request is one user message whose content holds the page as an image data URL and,
optionally, the HPD instruction as text. The answer's content is the page's raw HPD text. This
package builds and reads those JSON shapes (requests, completions, stream chunks, model lists,
errors) and nothing else: no HTTP, no engine, no image decoding, standard library only, so that
importing it is cheap. Shapes follow vLLM's OpenAI server: errors are
``{"error": {"message", "type", "param", "code"}}``; a stream is server-sent events, one
``data: {chunk}`` per delta, the first carrying the assistant role, the last the finish reason,
then (with ``stream_options.include_usage``) a chunk with no choices and the usage, then
``data: [DONE]``. The bodies are typed in `hpdparse.wire.bodies`.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from hpdparse.wire import bodies
from hpdparse.wire.bodies import ChatRequest, Completion

CHAT_COMPLETIONS_PATH = "/chat/completions"
MODELS_PATH = "/models"
SSE_DONE = b"data: [DONE]\n\n"

# The names vLLM's server (and the official client's exception classes) use; other statuses get
# their HTTP phrase, as vLLM's handler for framework errors does.
_ERROR_TYPES = {
    400: "BadRequestError",
    401: "AuthenticationError",
    403: "PermissionDeniedError",
    404: "NotFoundError",
    422: "UnprocessableEntityError",
    429: "RateLimitError",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


class WireError(Exception):
    """A request that cannot be answered: HTTP status, one-line message, the field at fault."""

    def __init__(self, status: int, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param

    def body(self) -> bodies.ErrorBody:
        return error_body(self.status, self.message, self.param)


class NotACompletion(ValueError):
    """A 2xx answer that is not a usable chat completion (or model list)."""


# --------------------------------------------------------------------------------- errors
def error_type(status: int) -> str:
    if status in _ERROR_TYPES:
        return _ERROR_TYPES[status]
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "InternalServerError" if status >= 500 else "BadRequestError"


def error_body(status: int, message: str, param: str | None = None) -> bodies.ErrorBody:
    """The OpenAI error object for an error answer (or an error event in a stream)."""
    return {
        "error": {"message": message, "type": error_type(status), "param": param, "code": status}
    }


def error_message(data: Any) -> str | None:
    """The message of an error body: OpenAI's ``{"error": {"message"}}``, vLLM's 401
    ``{"error": "Unauthorized"}``, ``{"message"}`` or FastAPI's ``{"detail"}``; None if none."""
    if not isinstance(data, dict):
        return None
    error = data.get("error")
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    for key in ("error", "message", "detail"):
        if isinstance(data.get(key), str) and data[key]:
            return data[key]
    return None


# ------------------------------------------------------------------------------- data URLs
def image_data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")


def data_url_bytes(url: str) -> bytes:
    """The bytes of a base64 image data URL; WireError 400 when it is not one."""
    header, comma, data = url.partition(",")
    if not comma or not header.startswith("data:image/") or not header.endswith(";base64"):
        raise WireError(400, "the image must be a base64 data URL (data:image/png;base64,...)")
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise WireError(400, "the image data URL is not valid base64") from None


# -------------------------------------------------------------------------------- requests
def chat_request(
    model: str,
    image_url: str,
    prompt: str | None,
    *,
    max_tokens: int | None = None,
    temperature: float = 0.0,
    stream: bool = False,
    logprobs: bool = False,
    extra: Mapping[str, object] | None = None,
) -> dict[str, object]:
    """The request body for one page: the image, then the instruction (if any); `logprobs`
    asks for each chosen token's log-probability; `extra` (a server's own fields) comes last."""
    content: list[object] = [{"type": "image_url", "image_url": {"url": image_url}}]
    if prompt:
        content.append({"type": "text", "text": prompt})
    body: dict[str, object] = {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "temperature": temperature,
    }
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if logprobs:
        body["logprobs"] = True
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    body.update(extra or {})
    return body


def read_chat_request(raw: bytes | str) -> ChatRequest:
    """Parse a chat-completions body; WireError 400 naming the field when its shape is wrong."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise WireError(400, "the request body is not JSON") from None
    if not isinstance(body, dict):
        raise WireError(400, "the request body must be a JSON object")
    model = _optional(body, "model", str, "a string")
    urls, texts = _read_messages(body.get("messages"))
    stream = _optional(body, "stream", bool, "true or false")
    options = _optional(body, "stream_options", dict, "an object") or {}
    max_tokens = _optional(body, "max_completion_tokens", int, _AT_LEAST_1)
    if max_tokens is None:
        max_tokens = _optional(body, "max_tokens", int, _AT_LEAST_1)
    temperature = _optional(body, "temperature", (int, float), "a number")
    return ChatRequest(
        model=model,
        image_urls=urls,
        texts=texts,
        stream=bool(stream),
        include_usage=bool(options.get("include_usage")),
        max_tokens=max_tokens,
        temperature=None if temperature is None else float(temperature),
        n=_optional(body, "n", int, _AT_LEAST_1),
        logprobs=body.get("logprobs"),
        top_logprobs=body.get("top_logprobs"),
        echo=body.get("echo"),
    )


def _read_messages(messages: Any) -> tuple[list[str], list[str]]:
    if not isinstance(messages, list) or not messages:
        raise WireError(400, "messages must be a non-empty list", "messages")
    urls: list[str] = []
    texts: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            raise WireError(400, "each message must be an object", "messages")
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
            continue
        if not isinstance(content, list):
            raise WireError(400, "a user message's content must be text or a list of parts")
        for part in content:
            if not isinstance(part, dict):
                raise WireError(400, "a content part must be an object", "messages")
            if part.get("type") == "image_url":
                image_url = part.get("image_url")
                url = image_url.get("url") if isinstance(image_url, dict) else image_url
                if not isinstance(url, str):
                    raise WireError(400, "an image_url part must hold {'url': 'data:...'}")
                urls.append(url)
            elif part.get("type") == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return urls, texts


_AT_LEAST_1 = "an integer of at least 1"  # what the integer fields (token counts, n) take


def _optional(
    body: Mapping[str, object], name: str, kind: type | tuple[type, ...], what: str
) -> Any:
    """The field `name` when it is absent (None) or a `kind` (true and false are no numbers, an
    int is at least 1); WireError 400 saying it must be `what` otherwise."""
    value = body.get(name)
    if value is not None and (
        not isinstance(value, kind)
        or (isinstance(value, bool) and kind is not bool)
        or (kind is int and value < 1)
    ):
        raise WireError(400, f"{name} must be {what}", name)
    return value


# ------------------------------------------------------------------------------- responses
def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def usage(
    prompt_tokens: int, completion_tokens: int, max_tokens: int | None = None
) -> bodies.Usage:
    counts: bodies.Usage = {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    if max_tokens is not None:
        counts["max_tokens"] = max_tokens
    return counts


def completion(
    id: str,
    model: str,
    content: str,
    finish_reason: str,
    usage: bodies.Usage,
) -> bodies.ChatCompletion:
    """A non-streamed answer."""
    return {
        "id": id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def chunk(
    id: str,
    model: str,
    created: int,
    *,
    content: str | None = None,
    role: str | None = None,
    finish_reason: str | None = None,
    usage: bodies.Usage | None = None,
) -> bodies.ChatCompletionChunk:
    """One stream chunk: a content delta, the opening role, or the closing finish reason; with
    `usage`, the last chunk of a stream with ``stream_options.include_usage`` (no choices)."""
    delta: bodies.Delta = {}
    if role is not None:
        delta["role"] = role
    if content is not None:
        delta["content"] = content
    data: bodies.ChatCompletionChunk = {
        "id": id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        data["choices"] = []
        data["usage"] = usage
    return data


def sse_event(data: bodies.ChatCompletionChunk | bodies.ErrorBody) -> bytes:
    return b"data: " + json.dumps(data, ensure_ascii=False).encode() + b"\n\n"


def read_completion(data: Any) -> Completion:
    """The content, finish reason and usage of a chat completion; NotACompletion otherwise."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise NotACompletion(f"answer has no choices: {_clip(data)}")
    message = choices[0].get("message")
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str):
        raise NotACompletion(f"answer has no text content: {_clip(message)}")
    counts = data.get("usage")
    prompt_tokens, completion_tokens = (
        _count(counts.get(name)) if isinstance(counts, dict) else 0
        for name in ("prompt_tokens", "completion_tokens")
    )
    return Completion(
        content,
        choices[0].get("finish_reason"),
        usage(prompt_tokens, completion_tokens),
        read_logprobs(choices[0].get("logprobs")),
    )


def _count(value: object) -> int:
    return value if isinstance(value, int) and value >= 0 else 0


def read_logprobs(data: Any) -> list[tuple[str, float]] | None:
    """The ``logprobs.content`` of a choice as (token, log-probability) pairs; None when absent
    or not of that shape."""
    content = data.get("content") if isinstance(data, dict) else None
    if not isinstance(content, list):
        return None
    pairs = []
    for item in content:
        if not isinstance(item, dict) or not isinstance(item.get("token"), str):
            return None
        value = item.get("logprob")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        pairs.append((item["token"], float(value)))
    return pairs


# ---------------------------------------------------------------------------------- models
def model_list(cards: list[bodies.ModelCard]) -> bodies.ModelList:
    """``GET /models``."""
    return {"object": "list", "data": cards}


def read_model_ids(data: Any) -> list[str]:
    """The ids of a model list; NotACompletion when it is not one."""
    try:
        return [str(entry["id"]) for entry in data["data"]]
    except (KeyError, TypeError):
        raise NotACompletion(f"not an OpenAI model list: {_clip(data)}") from None


def _clip(value: Any, limit: int = 80) -> str:
    text = " ".join(json.dumps(value, default=str).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
