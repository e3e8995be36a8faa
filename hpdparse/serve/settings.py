"""The settings of `hpdparse serve` and their defaults (cheap to import: the CLI reads them)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from hpdparse.runner.settings import DEFAULT_BATCH_SIZE

API_KEY_ENV = "HPDPARSE_API_KEY"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8118
# Pages decoded, prepared or queued but not yet taken by the engine. A prepared page holds its
# tiles (~15 MB at 200 dpi A4); the engine takes only what it can start (see the vllm engine's
# admission control), so without this bound many clients would pile pages up in host memory.
DEFAULT_MAX_QUEUED = 32
# Requests waiting for one of those places (their bodies unread, ~64 KB each in the socket
# buffers); one more is answered 503 at once.
DEFAULT_MAX_WAITING = 1024
# A 200 dpi page is a few MB as PNG; a 16-megapixel colour scan at most ~64 MB as base64.
DEFAULT_MAX_REQUEST_MB = 64
DEFAULT_SHUTDOWN_TIMEOUT = 0.0


@dataclass
class ServeSettings:
    """Everything `hpdparse serve` takes besides the engine's own options."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    uds: str | None = None  # a Unix socket path; host and port are then not used
    served_model_name: str | None = None
    api_keys: list[str] = field(default_factory=list)
    batch_size: int = DEFAULT_BATCH_SIZE
    max_queued: int = DEFAULT_MAX_QUEUED
    max_waiting: int = DEFAULT_MAX_WAITING
    max_request_bytes: int = DEFAULT_MAX_REQUEST_MB * 2**20
    # Seconds a stop waits for accepted pages to finish (0: answer them 503 at once, as vLLM).
    shutdown_timeout: float = DEFAULT_SHUTDOWN_TIMEOUT
    prepare_threads: int | None = None


def api_keys_from(options: tuple[str, ...] | list[str]) -> list[str]:
    """The keys given with --api-key, else HPDPARSE_API_KEY (the key `--engine openai` sends),
    else none (no key needed)."""
    keys = [key for key in options if key]
    if not keys and os.environ.get(API_KEY_ENV):
        keys = [os.environ[API_KEY_ENV]]
    return keys
