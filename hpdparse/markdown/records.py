"""The record of a converted document: its raw pages (`store.raw_pages.RawPage`, failed ones
included) and what made them, which the renderer turns into files."""

from __future__ import annotations

from dataclasses import dataclass

from hpdparse.store.raw_pages import RawPage


@dataclass(frozen=True)
class ConvertedWith:
    """What the run that converted a document asked for: the document JSON's "settings"."""

    dpi: int
    pages: str | None  # --pages as given; None for every page
    selected_pages: int  # how many pages it selected
    prompt: str | None  # None when the resume state holds no reuse key
    max_tokens: int | None


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
    settings: ConvertedWith | None = None  # None: "settings" is {} (a record made in memory)
