"""What `hpdparse serve` decodes for a chat request: its own model and instruction, greedily, up
to its token limit; and the page image out of the request, with one-line messages."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass

from PIL import Image

from hpdparse.hpd.protocol import instruction
from hpdparse.wire import ChatRequest, WireError, data_url_bytes

_OBJECT_REPR = re.compile(r"\s*<[\w.]+ object at 0x[0-9a-fA-F]+>")


@dataclass(frozen=True)
class PagePolicy:
    """What this server serves: the model name clients send, the HPD mode, the token limit."""

    model_name: str
    fork: bool
    max_tokens: int

    @property
    def prompt(self) -> str:
        return instruction(self.fork)


@dataclass(frozen=True)
class PageAsk:
    """One page to decode, as a request asked for it within the server's limits."""

    image_url: str
    stream: bool
    include_usage: bool
    max_tokens: int  # the limit applied: the request's, at most the server's
    logprobs: bool = False  # answer each chosen token's log-probability


def check_request(request: ChatRequest, policy: PagePolicy) -> PageAsk:
    """The page a request asks for; WireError (400, 404) for what this server does not do."""
    if request.model is not None and request.model != policy.model_name:
        raise WireError(
            404,
            f"the model {request.model!r} does not exist; this server serves {policy.model_name!r}",
            "model",
        )
    if len(request.image_urls) != 1:
        raise WireError(
            400,
            f"expected exactly one image (an image_url part), got {len(request.image_urls)}",
            "messages",
        )
    text = request.text
    if text and text != policy.prompt:
        if text == instruction(not policy.fork):
            mode = "with" if policy.fork else "without"
            raise WireError(
                400,
                f"this server decodes {mode} hierarchical forks; the request asks otherwise",
                "messages",
            )
        raise WireError(
            400,
            "this server only parses pages with HPD: leave the text out or send its instruction",
            "messages",
        )
    if request.temperature not in (None, 0.0):
        raise WireError(
            400,
            f"temperature must be 0 (or left out): HPD decoding is greedy, "
            f"got {request.temperature:g}",
            "temperature",
        )
    if request.n not in (None, 1):
        raise WireError(400, f"n must be 1: one answer per page, got {request.n}", "n")
    if request.echo:
        raise WireError(400, "echo is not supported by this server", "echo")
    limit = policy.max_tokens
    return PageAsk(
        image_url=request.image_urls[0],
        stream=request.stream,
        include_usage=request.include_usage,
        max_tokens=min(request.max_tokens, limit) if request.max_tokens else limit,
        logprobs=_wants_logprobs(request),
    )


def _wants_logprobs(request: ChatRequest) -> bool:
    """The request's ``logprobs`` (true or false); ``top_logprobs`` may only be 0: the engines
    report the chosen token's log-probability, not its rivals'."""
    logprobs = request.logprobs
    if logprobs is not None and not isinstance(logprobs, bool):
        raise WireError(400, "logprobs must be true or false", "logprobs")
    top = request.top_logprobs
    if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
        raise WireError(400, "top_logprobs must be a non-negative integer", "top_logprobs")
    if top:
        raise WireError(
            400,
            f"top_logprobs must be 0: this server gives the chosen tokens' log-probabilities "
            f"only, got {top}",
            "top_logprobs",
        )
    return bool(logprobs)


def decode_image(url: str) -> Image.Image:
    """A base64 PNG or JPEG data URL -> the decoded image, RGB or L; WireError 400 otherwise."""
    encoded = data_url_bytes(url)
    try:
        image = Image.open(io.BytesIO(encoded))
    except Image.UnidentifiedImageError:
        raise WireError(400, "cannot decode the image: it is not a PNG or JPEG image") from None
    except Exception as exc:
        raise WireError(400, f"cannot decode the image: {describe(exc)}") from None
    if image.format not in ("PNG", "JPEG"):
        raise WireError(400, f"the image is {image.format}, not PNG or JPEG")
    try:
        image.load()
    except Exception as exc:  # PIL raises many kinds for corrupt data
        raise WireError(400, f"cannot decode the image: {describe(exc)}") from None
    return image if image.mode in ("RGB", "L") else image.convert("RGB")


def describe(exc: BaseException, limit: int = 200) -> str:
    """An exception as one line without object reprs (``<_io.BytesIO object at 0x...>``)."""
    text = _OBJECT_REPR.sub("", " ".join(str(exc).split())).strip()
    if not text:
        text = type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."
