"""One DoclingDocument item as `item.model_dump_json(by_alias=True, exclude_none=True)` writes
it, the same bytes, faster: written by the item class's own pydantic schema with three pieces of
docling-core's Python code out of pydantic's way, each of which leaves our items as they are.

- Content items (DocItem) have a wrap serializer that only drops `comments` and `source` when
  they are empty lists. Around it pydantic builds each item as a Python dict and then writes the
  dict as JSON. An item whose two lists are empty is written without the wrapper, the two fields
  excluded.
- Boxes and sizes (BoundingBox, Size) have a field serializer per coordinate that rounds it to a
  precision given in the serialization context, and returns it as it is without one (a Python
  call per number). No context is given here: the numbers are written as they are. pydantic
  reuses a nested model's own serializer whenever the schema names its class (which would bring
  the calls back); the schemas changed here, and those of the models around them, name pydantic's
  BaseModel instead, which only serves to check a value's type (none is checked here: no union
  lies on the way).
- Labels, layers and box origins are str enums (`label` a Literal of them). pydantic writes an
  enum member by reading its `value`, a Python-level property on Python 3.11, and checks a
  Literal's value against each allowed one: over a third of an item's time. A member of a str
  enum is a str whose characters are its value, so these schemas are written as plain strings
  (only where every member's characters are its value).
- A table's `data.grid` (every slot of the table, a cell each) is a computed property that
  builds a validated empty cell for every slot before filling in the table's own cells, at every
  dump. Here the table is dumped without its cells and grid, and each cell's JSON, written once,
  put in both (a cell covering several slots repeated in the grid), an empty cell built and
  dumped as docling builds it only for a slot no cell covers.

Anything else (a class with another wrapper, rich table cells, lists not empty) takes
`model_dump_json`, and so does every class whose first item in the process was not written the
same both ways (a pydantic or docling-core that lays its schemas out otherwise).
tests/export/test_docling_item_json.py compares the two on every item of the test documents and
on tables and texts made to trip the shortcut."""

from __future__ import annotations

import functools
from enum import Enum
from typing import Any

from docling_core.types.doc import (
    BoundingBox,
    DocItem,
    NodeItem,
    Size,
    TableCell,
    TableData,
    TableItem,
)
from pydantic import BaseModel
from pydantic_core import SchemaSerializer

from hpdparse.export.chunk_tables import covered_slots

_DOCITEM_WRAPPER = DocItem._custom_pydantic_serialize
_DROPPED_WHEN_EMPTY = ("comments", "source")
_DROPPED = set(_DROPPED_WHEN_EMPTY)
_CONTEXT_ROUNDING = {BoundingBox._serialize, Size._serialize}  # as they are without a context
_TABLE_START = '"data":{'  # TableItem's table
_TABLE_END = '},"annotations":'  # the end of a table's `data`: TableItem's next field
_CELL = TableCell.__pydantic_serializer__
_checked: dict[type[NodeItem], bool] = {}  # class -> its first item was written alike


def docling_item_json(item: NodeItem) -> str:
    written = shortcut_json(item)
    cls = type(item)
    if written is None or _checked.get(cls) is False:
        return docling_cores_json(item)
    if cls not in _checked:
        reference = docling_cores_json(item)
        _checked[cls] = written == reference
        return reference
    return written


def docling_cores_json(item: NodeItem) -> str:
    return item.model_dump_json(by_alias=True, exclude_none=True)


def shortcut_json(item: NodeItem) -> str | None:
    """The item's JSON by the shortcut (None: not for this item)."""
    serializer = _serializer(type(item))
    fields = item.__dict__
    if serializer is None or fields.get("comments") or fields.get("source"):
        return None
    if type(item) is TableItem:
        return _table_json(item, serializer)
    return serializer.to_json(item, by_alias=True, exclude_none=True, exclude=_DROPPED).decode()


@functools.cache
def _serializer(cls: type[NodeItem]) -> SchemaSerializer | None:
    """`cls`'s pydantic serializer without DocItem's wrapper and the coordinates' field
    serializers (None: `cls` has another wrapper, or none, or its schema is not laid out as
    expected)."""
    if not all(name in cls.model_fields for name in _DROPPED_WHEN_EMPTY):
        return None
    schema, _ = _without_rounding(cls.__pydantic_core_schema__, top=True)
    # the model's schema, under the definitions of its nested models and its validators (an
    # `after` validator's schema, with no serializer of its own, serializes as the one inside)
    node = schema
    while node.get("type") in ("definitions", "function-after") and "serialization" not in node:
        node = node["schema"]
    wrapper = node.get("serialization", {})
    if node.get("type") != "model" or wrapper.get("function") is not _DOCITEM_WRAPPER:
        return None
    del node["serialization"]
    return SchemaSerializer(schema)


def _without_rounding(node: Any, top: bool = False) -> tuple[Any, bool]:
    """A copy of a core schema without the coordinates' field serializers and with str enums
    as strings (see the module's doc), and whether it changed. A model schema that changed (in
    it or in a model inside) names BaseModel as its class, the top one excepted."""
    if isinstance(node, list):
        pairs = [_without_rounding(value) for value in node]
        return [value for value, _ in pairs], any(changed for _, changed in pairs)
    if not isinstance(node, dict):
        return node, False
    copy: dict[str, Any] = {}
    changed = False
    for key, value in node.items():
        copy[key], changed_here = _without_rounding(value)
        changed = changed or changed_here
    hook = node.get("serialization")
    if isinstance(hook, dict) and hook.get("function") in _CONTEXT_ROUNDING:
        del copy["serialization"]
        changed = True
    if hook is None and _written_as_str(node):
        copy = {"type": "str", **({"ref": node["ref"]} if "ref" in node else {})}
        changed = True
    if changed and node.get("type") == "model" and not top:
        copy["cls"] = BaseModel
    return copy, changed


def _written_as_str(node: dict[str, Any]) -> bool:
    """A str enum's schema, or a Literal's of strings and str enum members, where every value's
    characters are what pydantic writes for it."""
    if node.get("type") == "enum":
        values = node.get("members", []) if node.get("sub_type") == "str" else []
    elif node.get("type") == "literal":
        values = node.get("expected", [])
    else:
        return False
    return bool(values) and all(_str_is_value(value) for value in values)


def _str_is_value(value: Any) -> bool:
    if isinstance(value, Enum):
        return isinstance(value, str) and str.__str__(value) == value.value
    return type(value) is str


def _table_json(item: TableItem, serializer: SchemaSerializer) -> str | None:
    """The table without its cells and grid, then each cell written once and put in both."""
    cells = item.data.table_cells
    if any(type(cell) is not TableCell for cell in cells):
        return None
    exclude: dict[str, Any] = {name: True for name in _DROPPED_WHEN_EMPTY}
    exclude["data"] = {"table_cells", "grid"}
    text = serializer.to_json(item, by_alias=True, exclude_none=True, exclude=exclude).decode()
    # where the data object starts and ends, found by its key and the key after it: inside a
    # JSON string their quotes would be escaped
    if text.count(_TABLE_START) != 1 or text.count(_TABLE_END) != 1:
        return None
    start, end = text.index(_TABLE_START) + len(_TABLE_START), text.index(_TABLE_END)
    if text[start] == "}":  # TableData's other fields are always written
        return None
    written = [_CELL.to_json(cell, by_alias=True, exclude_none=True).decode() for cell in cells]
    grid = _grid_json(item.data, written)
    return (
        f'{text[:start]}"table_cells":[{",".join(written)}],{text[start:end]}'
        f',"grid":{grid}{text[end:]}'
    )


def _grid_json(data: TableData, written: list[str]) -> str:
    """The JSON of `data.grid`, as its computed property would build it, from each cell's JSON
    (`written`)."""
    rows_n, cols_n = data.num_rows, data.num_cols
    grid: list[list[str | None]] = [[None] * cols_n for _ in range(rows_n)]
    for cell, text in zip(data.table_cells, written, strict=True):
        for i, j in covered_slots(cell, rows_n, cols_n):
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
    return _CELL.to_json(cell, by_alias=True, exclude_none=True).decode()
