"""Options of the openai engine: the server and how to talk to it.

``--engine-option`` takes ``api_key``, ``extra_body``, ``retry_backoff`` and
``retry_backoff_max``; the server URL comes from ``--server`` and the timeout and retries from
the Python API (``OpenAIOptions(request_timeout=..., retries=...)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from hpdparse.engines.options import EngineOptions
from hpdparse.settings import setting

DEFAULT_SERVER = "http://127.0.0.1:8118/v1"
API_KEY_VARIABLE = "HPDPARSE_API_KEY"


@dataclass
class OpenAIOptions(EngineOptions):
    """The openai engine's options."""

    engine: ClassVar[str] = "openai"

    server: str = setting(
        DEFAULT_SERVER,
        "Base URL of the HPD server for --engine openai.",
        flag="--server",
        settable=False,
    )
    request_timeout: float = setting(
        600.0, "seconds one attempt may take", low=0, low_open=True, settable=False
    )
    retries: int = setting(
        3,
        "retries after a connection error, a timeout or HTTP 5xx",
        low=0,
        settable=False,
    )
    extra_body: dict[str, Any] = setting(
        {},
        "merged into every request",
        example="extra_body='{\"skip_special_tokens\": false}'",
    )
    api_key: str | None = setting(None, f"else ${API_KEY_VARIABLE}", example="api_key=...")
    logprobs: bool = setting(
        True,
        "ask for the chosen tokens' log-probabilities, for the confidence scores (hpdparse "
        "serve and vllm serve answer them; a server without them leaves confidence null)",
        example="logprobs=false",
    )
    retry_backoff: float = setting(0.5, "first pause before a retry, seconds, doubling", low=0)
    retry_backoff_max: float = setting(20.0, "longest pause before a retry, seconds", low=0)

    def __post_init__(self) -> None:
        if not self.extra_body:  # null, "" or {}: nothing to merge, as with no option
            self.extra_body = {}
        super().__post_init__()
