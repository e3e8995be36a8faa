"""Records of a converted document: what the pipeline collects and the renderer turns into files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpdparse.hpd.logprobs import PageLogprobs

PAGE_OK = "ok"
PAGE_FAILED = "failed"


@dataclass
class PageRecord:
    """One page of a document after the engine (or after reading raw/ back from disk)."""

    number: int  # 1-based page number in the source document
    width_px: int  # size of the image the model saw
    height_px: int
    status: str = PAGE_OK  # PAGE_OK or PAGE_FAILED
    raw: str = ""  # raw HPD stream; "" when failed
    finish_reason: str | None = None  # "stop", "length", "error"
    error: str | None = None
    label: str | None = None  # PDF page label (/PageLabels), when the PDF has one
    width_pt: float | None = None  # page size in PDF points (None for image inputs)
    height_pt: float | None = None
    dpi: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    stats: dict[str, int | float] = field(default_factory=dict)
    logprobs: PageLogprobs | None = None  # None: saved without them (confidence null)


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
