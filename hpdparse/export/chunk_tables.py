"""The pipe table docling-core's MarkdownTableSerializer writes for a table item, as our chunker
(`chunker.py`) needs it for chunk text, made without docling's per-call grid of validated cells
and without tabulate's type parsing of every value where one look settles it; a table of
printable ASCII is written in tabulate's `github` format directly (`github_table`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from docling_core.types.doc import RichTableCell, TableCell, TableItem
from tabulate import _type, tabulate


class Unsupported(Exception):
    """The document uses a part of the DoclingDocument model our chunker does not write."""


@dataclass
class _Empty:
    """An empty slot of a table grid (docling fills them with empty cells)."""

    start_row_offset_idx: int
    start_col_offset_idx: int
    text: str = ""
    column_header: bool = False


def table_markdown(item: TableItem) -> str:
    """MarkdownTableSerializer's pipe table, from a grid built once (docling's `TableData.grid`
    builds a validated cell per slot at every call)."""
    data = item.data
    # types compared first: isinstance of docling's models is slow when it is False
    cells = data.table_cells
    plain = all(type(cell) is TableCell for cell in cells)
    if not plain and any(isinstance(cell, RichTableCell) for cell in cells):
        raise Unsupported(f"{item.self_ref}: rich table cells")
    rows_n, cols_n = data.num_rows, data.num_cols
    grid: list[list] = [[None] * cols_n for _ in range(rows_n)]
    for cell in cells:
        for i, j in covered_slots(cell, rows_n, cols_n):
            grid[i][j] = cell
    for i, row in enumerate(grid):
        if any(c is None for c in row):  # (`None in row` would call each cell's __eq__)
            row[:] = [_Empty(i, j) if c is None else c for j, c in enumerate(row)]
    # newlines and pipes escaped so that the pipe table stays valid
    texts = [[(c.text or "").replace("\n", " ").replace("|", "&#124;") for c in r] for r in grid]
    if not texts:
        return ""
    headers = data._count_column_header_rows(grid=grid)
    if headers == 0 and grid and not any(c.column_header for row in grid[1:] for c in row):
        headers = 1
    header_row = _flatten_header_rows(texts[:headers], len(texts[0]))
    body = texts[headers:]
    align = []
    for col in range(len(texts[0]) if body else 0):
        values = [row[col] if col < len(row) else "" for row in body]
        align.append("right" if numeric_column(values) else "left")
    if body and header_row and _plain_ascii(header_row, body):
        return github_table(body, header_row, align)
    return tabulate(
        body,
        headers=header_row,
        tablefmt="github",
        disable_numparse=True,
        colalign=tuple(align) if align else None,
    )


def covered_slots(cell: TableCell, rows_n: int, cols_n: int) -> list[tuple[int, int]]:
    """The slots `(row, column)` docling's `TableData.grid` gives `cell` in a table of `rows_n`
    rows and `cols_n` columns (its offsets cut at the counts, as Python ranges: an offset below
    zero counts from the end), the common one-slot cell found without building ranges."""
    i, j = cell.start_row_offset_idx, cell.start_col_offset_idx
    one_slot = cell.end_row_offset_idx == i + 1 and cell.end_col_offset_idx == j + 1
    if one_slot and 0 <= i < rows_n and 0 <= j < cols_n:
        return [(i, j)]
    rows = range(min(i, rows_n), min(cell.end_row_offset_idx, rows_n))
    cols = range(min(j, cols_n), min(cell.end_col_offset_idx, cols_n))
    return [(r, c) for r in rows for c in cols]


def _plain_ascii(header_row: list[str], body: list[list[str]]) -> bool:
    if any(len(row) != len(header_row) for row in body):
        return False
    text = "".join(header_row) + "".join("".join(row) for row in body)
    return text.isascii() and text.isprintable()


def github_table(body: list[list[str]], headers: list[str], align: list[str]) -> str:
    """`tabulate(body, headers, tablefmt="github", disable_numparse=True, colalign=align)` for a
    table tabulate writes without its width, escape-code and multi-line handling: cells and
    headers of printable ASCII (each character one column wide), at least one row, every row as
    long as the headers. With number parsing off tabulate writes every such cell as it is, so
    what remains of its work is this: cells stripped, each column as wide as its widest cell
    and at least its header and two, padded to the side of its alignment (the header too,
    unstripped). tests/export/test_chunker.py compares the two on many tables."""
    columns = [[cell.strip() for cell in column] for column in zip(*body, strict=True)]
    widths = [max(len(h) + 2, *map(len, c)) for h, c in zip(headers, columns, strict=True)]
    # each line one str.format: `{:<N}` pads a str as ljust(N) does, `{:>N}` as rjust(N)
    slots = (f"{{:{'>' if a == 'right' else '<'}{w}}}" for a, w in zip(align, widths, strict=True))
    line = "| " + " | ".join(slots) + " |"
    rule = "|" + "|".join("-" * (width + 2) for width in widths) + "|"
    rows = (line.format(*row) for row in zip(*columns, strict=True))
    return "\n".join([line.format(*headers), rule, *rows])


# What a value tabulate may type as a number (or bool) holds; one without is text (str).
_MAYBE_NUMBER = re.compile(r"\d|inf|nan|true|false", re.IGNORECASE)
# A value tabulate types as int or float, for sure.
_PLAIN_NUMBER = re.compile(r"[+-]?[0-9]+(?:\.[0-9]+)?")
# An ASCII character no number or bool tabulate reads can hold (it reads what int() and float()
# read, "1,234", True and False, once ANSI codes are stripped): an ASCII value with one is text.
_TEXT_CHARACTER = re.compile(r"[^0-9+\-.,_ \t\n\r\f\v\x1c-\x1fAaEeFfIiLlNnRrSsTtUuYy]")


def numeric_column(values: list[str]) -> bool:
    """tabulate's `_column_type(values) in (int, float)`: the most generic of the values' types
    (and bool) is int or float. A value settled at a look (no digit, nor inf, nan, True, False,
    or an ASCII character none of them holds: text; a plain decimal number) is not parsed; any
    other is typed by tabulate's `_type`, one at a time, and the first typed as text ends the
    look (tabulate types all of them)."""
    numbers = 0
    for value in values:
        if not value:
            continue  # tabulate's None type: no effect
        if _PLAIN_NUMBER.fullmatch(value):
            numbers += 1
            continue
        if not _MAYBE_NUMBER.search(value):
            return False
        if value.isascii() and "\x1b" not in value and _TEXT_CHARACTER.search(value):
            return False
        kind = _type(value)
        if kind in (int, float):
            numbers += 1
        elif kind not in (bool, type(None)):
            return False
    return numbers > 0


def _flatten_header_rows(header_rows: list[list[str]], num_cols: int) -> list[str]:
    if not header_rows:
        return [""] * num_cols
    flattened = []
    for col in range(num_cols):
        parts: list[str] = []
        for row in header_rows:
            text = row[col] if col < len(row) else ""
            if text and (not parts or parts[-1] != text):
                parts.append(text)
        flattened.append(" - ".join(parts))
    return flattened
