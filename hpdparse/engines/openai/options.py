"""Options of the openai engine: the server and how to talk to it.

``--engine-option`` takes ``api_key``, ``extra_body``, ``retry_backoff`` and
``retry_backoff_max``; the server URL comes from ``--server`` and the timeout and retries from
the Python API (``OpenAIOptions(request_timeout=..., retries=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hpdparse.engines.options import EngineOptions, option

DEFAULT_SERVER = "http://127.0.0.1:8118/v1"
API_KEY_VARIABLE = "HPDPARSE_API_KEY"


@dataclass
class OpenAIOptions(EngineOptions):
    """The openai engine's options."""

    engine: ClassVar[str] = "openai"

    server: str = option(DEFAULT_SERVER, "base URL of the HPD server (--server)", settable=False)
    request_timeout: float = option(
        600.0, "seconds one attempt may take", bound="positive", settable=False
    )
    retries: int = option(
        3,
        "retries after a connection error, a timeout or HTTP 5xx",
        bound="non-negative",
        settable=False,
    )
    extra_body: dict[str, Any] = option(
        {},
        "merged into every request",
        example="extra_body='{\"skip_special_tokens\": false}'",
    )
    api_key: str | None = option(None, f"else ${API_KEY_VARIABLE}", example="api_key=...")
    logprobs: bool = option(
        True,
        "ask for the chosen tokens' log-probabilities, for the confidence scores (hpdparse "
        "serve and vllm serve answer them; a server without them leaves confidence null)",
        example="logprobs=false",
    )
    retry_backoff: float = option(
        0.5, "first pause before a retry, seconds, doubling", bound="non-negative"
    )
    retry_backoff_max: float = option(
        20.0, "longest pause before a retry, seconds", bound="non-negative"
    )

    def __post_init__(self) -> None:
        if not self.extra_body:  # null, "" or {}: nothing to merge, as with no option
            self.extra_body = {}
        super().__post_init__()
