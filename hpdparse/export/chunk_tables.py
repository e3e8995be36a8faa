"""The pipe table docling-core's MarkdownTableSerializer writes for a table item, as our chunker
(`chunker.py`) needs it for chunk text: tabulate's `github` format, as docling writes it, from a
grid of the table's cells built once (docling's `TableData.grid` builds it at every call)."""

from __future__ import annotations

from dataclasses import dataclass

from docling_core.types.doc import TableItem
from tabulate import _column_type, tabulate


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
    rows_n, cols_n = data.num_rows, data.num_cols
    grid: list[list] = [[_Empty(i, j) for j in range(cols_n)] for i in range(rows_n)]
    for cell in data.table_cells:
        # the slots docling's grid gives the cell: its offsets cut at the counts
        rows = range(min(cell.start_row_offset_idx, rows_n), min(cell.end_row_offset_idx, rows_n))
        cols = range(min(cell.start_col_offset_idx, cols_n), min(cell.end_col_offset_idx, cols_n))
        for i in rows:
            for j in cols:
                grid[i][j] = cell
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
        align.append("right" if _column_type(values) in (int, float) else "left")
    return tabulate(
        body,
        headers=header_row,
        tablefmt="github",
        disable_numparse=True,
        colalign=tuple(align) if align else None,
    )


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
