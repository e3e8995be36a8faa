"""Model table HTML (untrusted) -> a small table model -> GFM pipe table or clean HTML.

Only table structure survives: rows, header/data cells, `rowspan`/`colspan` (positive integers),
in-cell line breaks. Every other tag is dropped (its text kept, escaped), and so is every other
attribute. A table cut off without `</table>` is closed.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from hpdparse.markdown.text import MODE_GFM, MODE_HTML, render_inline

MAX_SPAN = 100
MAX_GRID_CELLS = 20000  # beyond this a table is not expanded into a GFM grid


@dataclass
class Cell:
    text: str = ""
    header: bool = False
    rowspan: int = 1
    colspan: int = 1


@dataclass
class Table:
    rows: list[list[Cell]] = field(default_factory=list)
    caption: str = ""  # text of a <caption> element
    before: str = ""  # text in the block before <table>
    after: str = ""  # text in the block after </table>
    closed_by_us: bool = False  # the model's HTML ended before </table>

    @property
    def has_spans(self) -> bool:
        return any(c.rowspan > 1 or c.colspan > 1 for row in self.rows for c in row)

    @property
    def width(self) -> int:
        """Number of grid columns, counting colspans and cells pushed right by rowspans."""
        return max((len(r) for r in occupancy(self.rows)), default=0)


_WS = re.compile(r"\s+")
_INT = re.compile(r"\d+")
_CELL_TAGS = ("td", "th")
_SKIPPED = ("script", "style")


class _TableParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.table = Table()
        self.depth = 0  # nesting of <table>; nested tables are flattened into the outer cell
        self.seen_table = False
        self.done = False
        self.cell: Cell | None = None
        self.cell_parts: list[str] = []
        self.in_caption = False
        self.skipping = 0  # inside <script>/<style>: text dropped
        self.caption_parts: list[str] = []
        self.before: list[str] = []
        self.after: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.done:
            return
        if tag in _SKIPPED:
            self.skipping += 1
            return
        if tag == "table":
            self.depth += 1
            self.seen_table = True
            return
        if not self.seen_table:
            return
        if self.depth > 1:
            if tag == "br" or tag in _CELL_TAGS:
                self._data(" ")
            return
        if tag == "tr":
            self._close_cell()
            self.table.rows.append([])
        elif tag in _CELL_TAGS:
            self._close_cell()
            if not self.table.rows:
                self.table.rows.append([])
            self.cell = Cell(header=tag == "th")
            for name, value in attrs:
                if name in ("rowspan", "colspan") and value:
                    number = _INT.search(value)
                    if number:
                        span = min(max(int(number.group(0)), 1), MAX_SPAN)
                        setattr(self.cell, name, span)
        elif tag == "br":
            self._data("\n")
        elif tag == "caption":
            self.in_caption = True

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "br":
            self._data("\n")
        elif tag in ("td", "th", "tr"):
            self.handle_starttag(tag, attrs)
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self.skipping = max(self.skipping - 1, 0)
            return
        if self.done or not self.seen_table:
            return
        if tag == "table":
            self.depth -= 1
            if self.depth <= 0:
                self._close_cell()
                self.done = True
        elif self.depth > 1:
            return
        elif tag in _CELL_TAGS or tag == "tr":
            self._close_cell()
        elif tag == "caption":
            self.in_caption = False

    def handle_data(self, data: str) -> None:
        if self.skipping:
            return
        if self.done:
            self.after.append(data)
        elif not self.seen_table:
            self.before.append(data)
        else:
            self._data(data)

    def _data(self, data: str) -> None:
        if data == "\n":
            target = self.caption_parts if self.in_caption else self.cell_parts
            target.append("\n")
            return
        data = _WS.sub(" ", data)
        if self.in_caption:
            self.caption_parts.append(data)
        elif self.cell is not None:
            self.cell_parts.append(data)
        elif data.strip():
            # Text between rows (no cell open): give it a cell of its own rather than lose it.
            if not self.table.rows:
                self.table.rows.append([])
            self.cell = Cell()
            self.cell_parts.append(data)

    def _close_cell(self) -> None:
        if self.cell is None:
            return
        text = "".join(self.cell_parts)
        self.cell.text = "\n".join(line.strip() for line in text.split("\n")).strip()
        self.table.rows[-1].append(self.cell)
        self.cell = None
        self.cell_parts = []


# The common case, plain table markup: tokenised by one regex instead of html.parser (4x faster),
# feeding the same handlers. Anything else (entities, comments, other tags) takes html.parser.
_PLAIN_TAG = re.compile(
    r"<(/?)(table|thead|tbody|tfoot|tr|td|th|br)"
    r"((?:\s+(?:rowspan|colspan)\s*=\s*(?:\"\d+\"|'\d+'|\d+))*)\s*(/?)>",
    re.I,
)
_PLAIN_ATTR = re.compile(r"(rowspan|colspan)\s*=\s*[\"']?(\d+)", re.I)


def _feed_plain(parser: _TableParser, content: str) -> bool:
    """Feed `content` through the fast path; False (nothing fed) when it is not plain markup."""
    if "&" in content:
        return False
    tags = list(_PLAIN_TAG.finditer(content))
    if len(tags) != content.count("<"):
        return False
    pos = 0
    for tag in tags:
        if tag.start() > pos:
            parser.handle_data(content[pos : tag.start()])
        name = tag.group(2).lower()
        if tag.group(1):
            parser.handle_endtag(name)
        else:
            raw_attrs = tag.group(3)
            attrs: list[tuple[str, str | None]] = (
                [(a.lower(), v) for a, v in _PLAIN_ATTR.findall(raw_attrs)] if raw_attrs else []
            )
            if tag.group(4):
                parser.handle_startendtag(name, attrs)
            else:
                parser.handle_starttag(name, attrs)
        pos = tag.end()
    if pos < len(content):
        parser.handle_data(content[pos:])
    return True


def parse_table(content: str, fast: bool = True) -> Table:
    """Parse the model's table HTML. Never raises; text without any <table> becomes one cell."""
    parser = _TableParser()
    if not (fast and _feed_plain(parser, content)):
        try:
            parser.feed(content)
            parser.close()
        except Exception:
            pass
    if parser.cell is not None:
        parser._close_cell()
    table = parser.table
    table.rows = [row for row in table.rows if row]
    table.caption = " ".join("".join(parser.caption_parts).split())
    table.before = "".join(parser.before).strip()
    table.after = "".join(parser.after).strip()
    table.closed_by_us = parser.seen_table and not parser.done
    if not parser.seen_table:
        table.before = content.strip()
    return table


def occupancy(rows: list[list[Cell]]) -> list[list[Cell | None]]:
    """The table as a grid: each cell placed at its column, spans repeated as None placeholders."""
    grid: list[list[Cell | None]] = []
    pending: dict[tuple[int, int], bool] = {}
    cells = 0
    for r, row in enumerate(rows):
        line: list[Cell | None] = []
        col = 0
        for cell in row:
            while pending.pop((r, col), False):
                line.append(None)
                col += 1
            for dc in range(cell.colspan):
                line.append(cell if dc == 0 else None)
                for dr in range(1, cell.rowspan):
                    pending[(r + dr, col + dc)] = True
            col += cell.colspan
            cells += cell.colspan * cell.rowspan
            if cells > MAX_GRID_CELLS:
                break
        while pending.pop((r, col), False):
            line.append(None)
            col += 1
        grid.append(line)
    return grid


def to_gfm(table: Table, dollar: bool) -> str:
    """A GFM pipe table. Spanned cells are left empty; the first row is the header row."""
    grid = occupancy(table.rows)
    width = max((len(r) for r in grid), default=0)
    if width == 0:
        return ""
    lines = []
    for i, line in enumerate(grid):
        cells = [render_inline(c.text, dollar, MODE_GFM) if c else "" for c in line]
        cells += [""] * (width - len(cells))
        lines.append("| " + " | ".join(cells) + " |")
        if i == 0:
            lines.append("|" + "|".join(["---"] * width) + "|")
    return "\n".join(lines)


def to_html(table: Table, dollar: bool) -> str:
    """Clean HTML: one line per row, no blank lines (so it stays one Markdown HTML block)."""
    rows = html_rows(table, lambda text: render_inline(text, dollar, MODE_HTML))
    return "\n".join(["<table>", *rows, "</table>"])


def html_rows(table: Table, cell_html: Callable[[str], str]) -> list[str]:
    """Each row as one line of HTML: its cells, spans kept, each cell's text as `cell_html`
    writes it."""
    rows = []
    for row in table.rows:
        cells = []
        for cell in row:
            tag = "th" if cell.header else "td"
            spans = "".join(
                f' {name}="{value}"'
                for name, value in (("rowspan", cell.rowspan), ("colspan", cell.colspan))
                if value > 1
            )
            cells.append(f"<{tag}{spans}>{cell_html(cell.text)}</{tag}>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    return rows


def render_table(table: Table, table_format: str, dollar: bool) -> str:
    """`gfm`, `html`, or `auto` (GFM unless the table has spans)."""
    if not table.rows:
        return ""
    use_gfm = table_format == "gfm" or (table_format != "html" and not table.has_spans)
    return to_gfm(table, dollar) if use_gfm else to_html(table, dollar)


def row_key(row: list[Cell]) -> tuple[str, ...]:
    return tuple(" ".join(c.text.split()).lower() for c in row)


def merge_tables(first: Table, second: Table) -> Table:
    """`second` continues `first`: append its rows, dropping a repeated header row."""
    rows = second.rows
    if rows and first.rows and row_key(rows[0]) == row_key(first.rows[0]):
        rows = rows[1:]
    first.rows = first.rows + rows
    return first
