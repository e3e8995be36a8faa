"""The record of a converted document: its raw pages (`store.raw_pages.RawPage`, failed ones
included) and what made them, which the renderer turns into files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hpdparse.store.raw_pages import RawPage


@dataclass
class DocumentRecord:
    """A whole document: where it came from, what converted it, and its selected pages."""

    source: str  # absolute path of the input file
    stem: str  # output name: OUT/<stem>/<stem>.md
    page_count: int  # pages in the source (selected or not)
    pages: list[RawPage]  # the selected pages, ascending by number
    engine: str = ""
    model: str = ""
    revision: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)  # dpi, prompt, max_tokens, pages...
