"""The renderer's intermediate form: Markdown units built from blocks, before merges and levels."""

from __future__ import annotations

from dataclasses import dataclass, field

from hpdparse.hpd.stream import BlockRef
from hpdparse.markdown.tables import Table


class Kind:
    """What a unit is (`Unit.kind`)."""

    HEADING = "heading"  # level 0 is the document title
    PARAGRAPH = "paragraph"
    LIST = "list"
    TABLE = "table"
    FORMULA = "formula"
    FIGURE = "figure"
    CODE = "code"
    FURNITURE = "furniture"  # header, footer, page number, side note (only with keep_headers)
    COMMENT = "comment"  # page markers, failed/truncated page notes
    BARRIER = "barrier"  # a failed page: nothing merges across it


@dataclass
class Unit:
    kind: str  # a Kind
    page: int  # 1-based page number
    block: int | None  # index of the (first) block it comes from; None for comments
    role: str = ""
    text: str = ""  # paragraph / heading / code text, comment body
    level: int = 1  # headings
    items: list[str] = field(default_factory=list)  # list items
    ordered: bool = False
    table: Table | None = None
    formulas: list[str] = field(default_factory=list)
    tag: str | None = None  # equation number
    image: str | None = None  # images/page-0003-figure-01.png
    removed: bool = False  # merged into an earlier unit
    # the blocks of later pages merged into it (merge.py), each with its own text
    continuations: list[tuple[BlockRef, str]] = field(default_factory=list)
    item_blocks: list[int] = field(default_factory=list)  # lists: the block of each item
    language: str = ""  # code


BODY_KINDS = frozenset(
    {Kind.HEADING, Kind.PARAGRAPH, Kind.LIST, Kind.TABLE, Kind.FORMULA, Kind.FIGURE, Kind.CODE}
)
