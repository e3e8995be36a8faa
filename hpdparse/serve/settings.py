"""The settings of `hpdparse serve` and their defaults, declared once (hpdparse.settings): the
command line's options are made from them (cheap to import: the CLI reads them)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.runner.settings import DEFAULT_BATCH_SIZE
from hpdparse.settings import setting

API_KEY_ENV = "HPDPARSE_API_KEY"
DEFAULT_KEEP_RESULTS = "7d"
MB = 2**20
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def default_store() -> str:
    """$HPDPARSE_CACHE/serve, else $XDG_CACHE_HOME/hpdparse/serve, else ~/.cache/hpdparse/serve."""
    if os.environ.get("HPDPARSE_CACHE"):
        return str(Path(os.environ["HPDPARSE_CACHE"]) / "serve")
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return str(Path(base) / "hpdparse" / "serve")


def parse_duration(text: str | None) -> float:
    """Seconds in '7d', '12h', '30m', '45s', '2w' or a plain number of seconds; None: the
    default of --keep-results."""
    match = _DURATION.match(text or DEFAULT_KEEP_RESULTS)
    if match is None:
        raise ValueError(f"{text!r} is not a duration such as 7d, 12h, 30m or 3600")
    return float(match.group(1)) * _UNITS[match.group(2)]


@dataclass
class ServeSettings:
    """Everything `hpdparse serve` takes besides the engine's own options."""

    host: str = setting(
        "127.0.0.1",
        "Address to listen on: an IPv4 or IPv6 address (:: for every interface) or a name.",
        flag="--host",
    )
    port: int = setting(
        8118, "Port to listen on; 0 picks a free one.", flag="--port", low=0, high=65535
    )
    uds: str | None = setting(
        None, "Listen on this Unix socket instead of --host/--port.", flag="--uds", metavar="PATH"
    )
    served_model_name: str | None = setting(
        None,
        "Model name clients send and GET /v1/models lists. Default: --model as given.",
        flag="--served-model-name",
    )
    api_keys: list[str] = field(default_factory=list)  # --api-key, repeatable (commands/serve)
    batch_size: int = DEFAULT_BATCH_SIZE
    # Pages decoded, prepared or queued but not yet taken by the engine. A prepared page holds its
    # tiles (~15 MB at 200 dpi A4); the engine takes only what it can start (see the vllm engine's
    # admission control), so without this bound many clients would pile pages up in host memory.
    max_queued: int = setting(
        32,
        "Pages held in memory (read, decoded, tiled, queued) before the engine takes them; "
        "further requests wait.",
        flag="--max-queued",
        low=1,
    )
    # Requests waiting for one of those places (their bodies unread, ~64 KB each in the socket
    # buffers); one more is answered 503 at once.
    max_waiting: int = setting(
        1024,
        "Requests that may wait for room (see --max-queued); one more gets HTTP 503 at once.",
        flag="--max-waiting",
        low=1,
    )
    # A 200 dpi page is a few MB as PNG; a 16-megapixel colour scan at most ~64 MB as base64.
    max_request_mb: float = setting(
        64,
        "Largest chat request body in MB; a larger one gets HTTP 413 before it is read.",
        flag="--max-request-mb",
        low=0.01,
    )
    shutdown_timeout: float = setting(
        0.0,
        "Seconds a stop (SIGTERM, Ctrl-C) lets accepted pages finish; the rest get HTTP 503 "
        "(chat) or are decoded again by the next server on the same --store (documents).",
        flag="--shutdown-timeout",
        low=0,
    )
    # ---- documents (POST /v1/documents; docs/service.md)
    store: str = setting(
        default_store(),
        "Folder that keeps uploaded documents and their results; a server started again on it "
        "finishes what was accepted.",
        flag="--store",
        metavar="DIR",
    )
    keep_results: float = setting(
        parse_duration(None),
        f"How long finished documents are kept: 7d, 12h, 30m or seconds. [default: "
        f"{DEFAULT_KEEP_RESULTS}]",
        flag="--keep-results",
        metavar="DURATION",
        parse=parse_duration,
        show_default=False,
    )
    max_store_mb: float | None = setting(
        None,
        "Most MB the store may hold; an upload beyond gets HTTP 507. Default: no limit.",
        flag="--max-store-mb",
        low=1,
        show_default=False,
    )
    max_upload_mb: float = setting(
        256, "Largest upload in MB; a larger one gets HTTP 413.", flag="--max-upload-mb", low=0.01
    )
    max_pages: int = setting(
        5000,
        "Most pages converted of one document; a document with more gets HTTP 413.",
        flag="--max-pages",
        low=1,
    )
    max_queued_documents: int = setting(
        1000,
        "Documents that may wait for their turn; one more gets HTTP 429 with Retry-After.",
        flag="--max-queued-documents",
        low=1,
    )
    running_documents: int = setting(
        64,
        "Documents converted at once (their pages share the engine's batch).",
        flag="--running-documents",
        low=1,
    )
    workers: int = 0  # rasterizer processes shared by the documents (--workers of convert)
    allow_urls: bool = setting(
        False,
        'Also take {"url": ...} documents (http(s) and the object-storage URLs convert reads).',
        flag="--allow-urls",
    )
    sync_timeout: float = setting(
        60.0,
        "Seconds POST /v1/convert waits for a document before answering 202 with its id.",
        flag="--sync-timeout",
        low=0,
    )


def api_keys_from(options: tuple[str, ...] | list[str]) -> list[str]:
    """The keys given with --api-key, else HPDPARSE_API_KEY (the key `--engine openai` sends),
    else none (no key needed)."""
    keys = [key for key in options if key]
    if not keys and os.environ.get(API_KEY_ENV):
        keys = [os.environ[API_KEY_ENV]]
    return keys
