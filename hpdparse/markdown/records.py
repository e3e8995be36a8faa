"""Records of a converted document: what the pipeline collects and the renderer turns into files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpdparse.engines.base import DecodeRecord
from hpdparse.sources.document import PageGeometry

PAGE_OK = "ok"
PAGE_FAILED = "failed"


@dataclass
class PageRecord:
    """One page of a document after the engine (or after reading raw/ back from disk): its
    geometry and how its decoding ended are the records made where the page was rasterized and
    decoded (held by reference)."""

    number: int  # 1-based page number in the source document
    geometry: PageGeometry  # the image the model saw (0 x 0 for a page that failed)
    decode: DecodeRecord  # finish reason ("stop", "length", "error"), tokens, seconds, stats
    status: str = PAGE_OK  # PAGE_OK or PAGE_FAILED
    raw: str = ""  # raw HPD stream; "" when failed
    error: str | None = None


@dataclass
class DocumentRecord:
    """A whole document: where it came from, what converted it, and its selected pages."""

    source: str  # absolute path of the input file
    stem: str  # output name: OUT/<stem>/<stem>.md
    page_count: int  # pages in the source (selected or not)
    pages: list[PageRecord]  # the selected pages, ascending by number
    engine: str = ""
    model: str = ""
    revision: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # dpi, prompt, max_tokens, pages...
