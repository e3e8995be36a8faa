"""docling_item_json writes each DoclingDocument item as docling-core's own
`model_dump_json(by_alias=True, exclude_none=True)` does, byte for byte: its shortcut on every item
of the test documents, and on items made to trip it (table text that looks like the JSON around
it, slots no cell covers, spans, boxes in cells, rich cells, items with comments); a class whose
first item the shortcut writes otherwise is written by docling-core."""

from __future__ import annotations

import itertools
from enum import Enum

import pytest

pytest.importorskip("docling_core")

from docling_core.types.doc import (
    BoundingBox,
    ContentLayer,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    FineRef,
    NodeItem,
    ProvenanceItem,
    RichTableCell,
    TableCell,
    TableData,
    TableItem,
)

from hpdparse.export import docling_item_json as module
from hpdparse.export.docling_item_json import (
    _serializer,
    docling_cores_json,
    docling_item_json,
    shortcut_json,
)
from tests.export.export_cases import CASES, exported

_ITEM_LISTS = ("groups", "texts", "pictures", "tables")


def items_of(doc: DoclingDocument) -> list[NodeItem]:
    return [item for name in _ITEM_LISTS for item in getattr(doc, name)]


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_item_of_the_test_documents(name: str) -> None:
    items = items_of(exported(name).document)
    assert items
    for item in items:
        reference = item.model_dump_json(by_alias=True, exclude_none=True)
        written = shortcut_json(item)
        assert written is not None or type(item).__name__ == "ListGroup", item.self_ref
        assert (written or reference) == reference, item.self_ref
        assert docling_item_json(item) == reference


def test_the_shortcut_applies_to_every_class_the_export_writes() -> None:
    """A docling-core whose schemas are laid out otherwise would silently take the slow path."""
    classes = {type(item) for name in CASES for item in items_of(exported(name).document)}
    written = {cls.__name__ for cls in classes if _serializer(cls) is not None}
    assert {"TextItem", "TitleItem", "SectionHeaderItem", "ListItem", "FormulaItem"} <= written
    assert {"TableItem", "PictureItem", "CodeItem"} <= written


def cell(text: str, row: int, col: int, rows: int = 1, cols: int = 1, **fields) -> TableCell:
    return TableCell(
        text=text,
        row_span=rows,
        col_span=cols,
        start_row_offset_idx=row,
        end_row_offset_idx=row + rows,
        start_col_offset_idx=col,
        end_col_offset_idx=col + cols,
        **fields,
    )


def table(cells: list[TableCell], rows: int, cols: int) -> TableItem:
    doc = DoclingDocument(name="t")
    prov = ProvenanceItem(
        page_no=1,
        bbox=BoundingBox(l=1.5, t=700.25, r=300.0, b=600.0, coord_origin=CoordOrigin.BOTTOMLEFT),
        charspan=(0, 0),
    )
    data = TableData(table_cells=cells, num_rows=rows, num_cols=cols)
    item = doc.add_table(data=data, prov=prov)
    doc.add_text(DocItemLabel.CAPTION, 'Table 1: "grid"', parent=item)
    return item


TABLES = {
    "text like the JSON around it": (
        [
            cell('},"annotations":[', 0, 0, column_header=True),
            cell('"grid":[[', 0, 1, column_header=True),
            cell("\\u0022 \n ünï ✓", 1, 0),
            cell("],[", 1, 1),
        ],
        2,
        2,
    ),
    "spans": ([cell("a", 0, 0, cols=2), cell("b", 1, 0, rows=2), cell("c", 1, 1)], 3, 2),
    "slots no cell covers": ([cell("only", 1, 1)], 3, 3),
    "cells beyond the counts": ([cell("x", 0, 0, rows=3, cols=4)], 2, 2),
    "no rows": ([], 0, 0),
    "rows without columns": ([], 2, 0),
    "a cell with a box": (
        [cell("boxed", 0, 0, bbox=BoundingBox(l=1.0, t=2.0, r=3.0, b=4.0))],
        1,
        1,
    ),
}


@pytest.mark.parametrize("case", sorted(TABLES))
def test_tables(case: str) -> None:
    cells, rows, cols = TABLES[case]
    item = table(cells, rows, cols)
    assert shortcut_json(item) == docling_cores_json(item)


def test_a_table_with_a_rich_cell_takes_docling_cores_path() -> None:
    item = table([cell("a", 0, 0)], 1, 2)
    rich = RichTableCell(
        text="rich",
        start_row_offset_idx=0,
        end_row_offset_idx=1,
        start_col_offset_idx=1,
        end_col_offset_idx=2,
        ref={"$ref": "#/texts/0"},
    )
    item.data.table_cells.append(rich)
    assert shortcut_json(item) is None
    assert docling_item_json(item) == docling_cores_json(item)


def test_items_whose_dropped_lists_are_not_empty() -> None:
    doc = exported("synth/report").document.model_copy(deep=True)
    text = next(item for item in doc.texts if item.prov)
    text.comments = [FineRef(cref="#/texts/0")]
    assert shortcut_json(text) is None
    assert '"comments":' in docling_item_json(text)
    assert docling_item_json(text) == docling_cores_json(text)
    table_item = doc.tables[0]
    table_item.comments = [FineRef(cref="#/texts/0")]
    assert shortcut_json(table_item) is None
    assert docling_item_json(table_item) == docling_cores_json(table_item)


def test_a_class_whose_first_item_differs_is_written_by_docling_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What a pydantic or docling-core laying its schemas out otherwise would do: every item of
    that class is written by docling-core, the first one included."""
    monkeypatch.setattr(module, "_checked", {})
    monkeypatch.setattr(module, "shortcut_json", lambda item: '{"not":"the same"}')
    items = [item for item in exported("synth/report").document.texts if item.prov][:3]
    assert [docling_item_json(item) for item in items] == [docling_cores_json(i) for i in items]
    assert module._checked == dict.fromkeys({type(item) for item in items}, False)


def test_covered_slots_are_those_of_doclings_grid() -> None:
    """Every cell shape, offsets below zero and beyond the counts included (where docling's grid
    can be built at all: an offset far below zero fails there, and here alike)."""
    from hpdparse.export.chunk_tables import covered_slots

    compared = 0
    for rows_n, cols_n in [(3, 4), (1, 1), (0, 2), (2, 0)]:
        for start_row, start_col, rows, cols in itertools.product(
            range(-2, 5), range(-2, 5), range(3), range(3)
        ):
            spec = cell("x", start_row, start_col)
            spec.end_row_offset_idx = start_row + rows
            spec.end_col_offset_idx = start_col + cols
            data = TableData(table_cells=[spec], num_rows=rows_n, num_cols=cols_n)
            try:
                grid = data.grid
            except IndexError:
                continue
            expected = {
                (i, j) for i, row in enumerate(grid) for j, s in enumerate(row) if s is spec
            }
            found = {(i % rows_n, j % cols_n) for i, j in covered_slots(spec, rows_n, cols_n)}
            assert found == expected, (rows_n, cols_n, start_row, start_col, rows, cols)
            compared += 1
    assert compared > 500


def test_every_label_layer_and_origin_is_written_as_docling_core_writes_it() -> None:
    """The shortcut writes str enums as strings: each member, in each place, as pydantic would."""
    doc = DoclingDocument(name="labels")
    labels = [label for label in DocItemLabel if label != DocItemLabel.LIST_ITEM]  # in a list
    for label, layer, origin in itertools.product(labels, ContentLayer, CoordOrigin):
        box = BoundingBox(l=1, t=2, r=3, b=4, coord_origin=origin)
        prov = ProvenanceItem(page_no=1, bbox=box, charspan=(0, 1))
        try:
            doc.add_text(label=label, text="x", prov=prov, content_layer=layer)
        except (TypeError, ValueError):  # a label add_text does not make (table, picture...)
            continue
    assert len(doc.texts) >= 20 * len(ContentLayer) * len(CoordOrigin)
    for item in doc.texts:
        reference = item.model_dump_json(by_alias=True, exclude_none=True)
        assert shortcut_json(item) == reference, (item.label, item.content_layer)


def test_an_enum_whose_characters_are_not_its_value_keeps_its_schema() -> None:
    class Shouting(str, Enum):
        QUIET = "quiet"

        def __new__(cls, value: str) -> Shouting:
            member = str.__new__(cls, value.upper())
            member._value_ = value
            return member

    def enum_schema(cls: type[Enum]) -> dict:
        return {"type": "enum", "cls": cls, "members": list(cls), "sub_type": "str"}

    assert module._written_as_str(enum_schema(CoordOrigin))
    assert not module._written_as_str(enum_schema(Shouting))
    assert not module._written_as_str({"type": "literal", "expected": [Shouting.QUIET, "a"]})
    assert module._written_as_str({"type": "literal", "expected": [DocItemLabel.TEXT, "a"]})
