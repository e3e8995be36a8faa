"""One DoclingDocument item as `item.model_dump_json(by_alias=True, exclude_none=True)` writes
it, the same bytes, faster where docling-core's Python code made pydantic's work slow:

- Content items (DocItem) have a wrap serializer that only drops `comments` and `source` when
  they are empty lists. Around it pydantic builds each item as a Python dict and then writes the
  dict as JSON. An item whose two lists are empty is written here by its class's own schema
  without that wrapper, the two fields excluded.
- A table's `data.grid` (every slot of the table, a cell each) is a computed property that
  builds a validated empty cell for every slot before filling in the table's own cells, at every
  dump. Here the table is dumped without it and the grid's JSON put in its place, made of each
  cell's JSON (a cell covering several slots written once, repeated), an empty cell built and
  dumped as docling builds it only for a slot no cell covers.

Anything else (a class with another wrapper, rich table cells, lists not empty) takes
`model_dump_json`. tests/export/test_docling_item_json.py compares the two on every item of the
test documents and on tables and texts made to trip the shortcut."""

from __future__ import annotations

import functools
from typing import Any

from docling_core.types.doc import DocItem, NodeItem, TableCell, TableData, TableItem
from pydantic_core import SchemaSerializer

_DOCITEM_WRAPPER = DocItem._custom_pydantic_serialize  # the wrapper bypassed (see above)
_DROPPED_WHEN_EMPTY = ("comments", "source")
_TABLE_END = '},"annotations":'  # the end of a table's `data`: TableItem's next field


def docling_item_json(item: NodeItem) -> str:
    serializer = _serializer(type(item))
    if serializer is None or any(item.__dict__.get(f) for f in _DROPPED_WHEN_EMPTY):
        return item.model_dump_json(by_alias=True, exclude_none=True)
    if type(item) is TableItem:
        table = _table_json(item, serializer)
        if table is not None:
            return table
    return serializer.to_json(
        item, by_alias=True, exclude_none=True, exclude=set(_DROPPED_WHEN_EMPTY)
    ).decode()


@functools.cache
def _serializer(cls: type[NodeItem]) -> SchemaSerializer | None:
    """`cls`'s pydantic serializer without DocItem's wrapper (None: `cls` has another, or none,
    or its schema is not laid out as expected)."""
    if not all(name in cls.model_fields for name in _DROPPED_WHEN_EMPTY):
        return None
    schema: dict[str, Any] = dict(cls.__pydantic_core_schema__)
    # the model's schema, under the definitions of its nested models and its validators (an
    # `after` validator's schema, with no serializer of its own, serializes as the one inside)
    parent, key = None, ""
    node = schema
    while node.get("type") in ("definitions", "function-after") and "serialization" not in node:
        parent, key = node, "schema"
        node = dict(node["schema"])
        parent[key] = node
    wrapper = node.get("serialization", {})
    if node.get("type") != "model" or wrapper.get("function") is not _DOCITEM_WRAPPER:
        return None
    del node["serialization"]
    return SchemaSerializer(schema)


def _table_json(item: TableItem, serializer: SchemaSerializer) -> str | None:
    grid = _grid_json(item.data)
    if grid is None:
        return None
    exclude: dict[str, Any] = {name: True for name in _DROPPED_WHEN_EMPTY}
    exclude["data"] = {"grid"}
    text = serializer.to_json(item, by_alias=True, exclude_none=True, exclude=exclude).decode()
    # the data object's closing brace, found by the key after it: inside a JSON string its
    # quotes would be escaped
    if text.count(_TABLE_END) != 1:
        return None
    end = text.index(_TABLE_END)
    return f'{text[:end]},"grid":{grid}{text[end:]}'


def _grid_json(data: TableData) -> str | None:
    """The JSON of `data.grid`, as its computed property would build it (None: a cell that is
    not a plain TableCell, or a row or column count the cells do not fit)."""
    cells = data.table_cells
    if any(type(cell) is not TableCell for cell in cells):
        return None
    rows_n, cols_n = data.num_rows, data.num_cols
    written = [cell.model_dump_json(by_alias=True, exclude_none=True) for cell in cells]
    grid: list[list[str | None]] = [[None] * cols_n for _ in range(rows_n)]
    for cell, text in zip(cells, written, strict=True):
        rows = range(min(cell.start_row_offset_idx, rows_n), min(cell.end_row_offset_idx, rows_n))
        cols = range(min(cell.start_col_offset_idx, cols_n), min(cell.end_col_offset_idx, cols_n))
        for i in rows:
            for j in cols:
                grid[i][j] = text
    lines = []
    for i, row in enumerate(grid):
        slots = [_empty_cell(i, j) if text is None else text for j, text in enumerate(row)]
        lines.append(f"[{','.join(slots)}]")
    return f"[{','.join(lines)}]"


def _empty_cell(i: int, j: int) -> str:
    cell = TableCell(
        text="",
        start_row_offset_idx=i,
        end_row_offset_idx=i + 1,
        start_col_offset_idx=j,
        end_col_offset_idx=j + 1,
    )
    return cell.model_dump_json(by_alias=True, exclude_none=True)
