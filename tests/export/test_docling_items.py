"""export/docling's append_item appends the items docling-core's own `add_*` methods append: the
same document, field for field and byte for byte, for every kind the export writes."""

from __future__ import annotations

from pathlib import Path

import pytest
from docling_core.types.doc import (
    BoundingBox,
    CodeItem,
    CodeLanguageLabel,
    ContentLayer,
    CoordOrigin,
    DocItemLabel,
    DoclingDocument,
    FormulaItem,
    ImageRef,
    ListGroup,
    ListItem,
    PictureItem,
    ProvenanceItem,
    RefItem,
    SectionHeaderItem,
    Size,
    TableCell,
    TableData,
    TableItem,
    TextItem,
    TitleItem,
)

from hpdparse.export.docling import append_item


def append_text(doc, cls, text, prov=None, **fields):
    """A text-like item as the export appends it: `orig` is its text, as `add_*` sets it."""
    return append_item(doc, "texts", cls, prov=prov, text=text, orig=text, **fields)


def _prov(page: int, left: float) -> ProvenanceItem:
    box = BoundingBox(l=left, t=700.5, r=300.25, b=650.0, coord_origin=CoordOrigin.BOTTOMLEFT)
    return ProvenanceItem(page_no=page, bbox=box, charspan=(0, 5))


def _table() -> TableData:
    cell = TableCell(
        text="a",
        start_row_offset_idx=0,
        end_row_offset_idx=1,
        start_col_offset_idx=0,
        end_col_offset_idx=1,
        column_header=True,
    )
    return TableData(table_cells=[cell], num_rows=1, num_cols=1)


def _image() -> ImageRef:
    size = Size(width=40.0, height=20.0)
    return ImageRef(mimetype="image/png", dpi=200, size=size, uri=Path("images/p1-3.png"))


def _with_add_methods() -> DoclingDocument:
    doc = DoclingDocument(name="d")
    doc.add_title(text="Title", prov=_prov(1, 10.0))
    doc.add_heading(text="Head", level=2, prov=_prov(1, 11.0))
    text = doc.add_text(label=DocItemLabel.TEXT, text="para", prov=_prov(1, 12.0))
    text.prov.append(_prov(2, 13.0))
    doc.add_text(label=DocItemLabel.FOOTNOTE, text="note")
    doc.add_text(
        label=DocItemLabel.PAGE_FOOTER,
        text="3",
        prov=_prov(1, 14.0),
        content_layer=ContentLayer.FURNITURE,
    )
    group = doc.add_list_group()
    doc.add_list_item(text="one", enumerated=True, marker="1.", parent=group, prov=_prov(1, 1))
    doc.add_list_item(text="two", enumerated=False, marker="", parent=group)
    doc.add_formula(text="x^2", prov=_prov(1, 15.0))
    doc.add_code(text="print()", code_language=CodeLanguageLabel.PYTHON, prov=_prov(1, 16.0))
    doc.add_code(text="raw")
    table = doc.add_table(data=_table(), prov=_prov(1, 17.0))
    caption = doc.add_text(label=DocItemLabel.CAPTION, text="Table 1", parent=table)
    table.captions.append(caption.get_ref())
    picture = doc.add_picture(image=_image(), prov=_prov(1, 18.0))
    doc.add_text(label=DocItemLabel.CAPTION, text="Figure 1", parent=picture)
    doc.add_picture(image=None)
    return doc


def _with_append() -> DoclingDocument:
    doc = DoclingDocument(name="d")
    append_text(doc, TitleItem, "Title", [_prov(1, 10.0)])
    append_text(doc, SectionHeaderItem, "Head", [_prov(1, 11.0)], level=2)
    append_text(doc, TextItem, "para", [_prov(1, 12.0), _prov(2, 13.0)], label=DocItemLabel.TEXT)
    append_text(doc, TextItem, "note", label=DocItemLabel.FOOTNOTE)
    append_text(
        doc,
        TextItem,
        "3",
        [_prov(1, 14.0)],
        content_layer=ContentLayer.FURNITURE,
        label=DocItemLabel.PAGE_FOOTER,
    )
    group = append_item(doc, "groups", ListGroup)
    prov = [_prov(1, 1)]
    append_text(doc, ListItem, "one", prov, enumerated=True, marker="1.", parent=group)
    append_text(doc, ListItem, "two", None, enumerated=False, marker="", parent=group)
    append_text(doc, FormulaItem, "x^2", [_prov(1, 15.0)])
    python = CodeLanguageLabel.PYTHON
    append_text(doc, CodeItem, "print()", [_prov(1, 16.0)], code_language=python)
    append_text(doc, CodeItem, "raw")
    table = append_item(doc, "tables", TableItem, data=_table(), prov=[_prov(1, 17.0)])
    caption = append_text(doc, TextItem, "Table 1", parent=table, label=DocItemLabel.CAPTION)
    table.captions.append(RefItem(cref=caption.self_ref))
    picture = append_item(doc, "pictures", PictureItem, image=_image(), prov=[_prov(1, 18.0)])
    append_text(doc, TextItem, "Figure 1", parent=picture, label=DocItemLabel.CAPTION)
    append_item(doc, "pictures", PictureItem, image=None)
    return doc


def test_appended_items_equal_docling_cores_add_methods() -> None:
    theirs, ours = _with_add_methods(), _with_append()
    assert ours.export_to_dict() == theirs.export_to_dict()
    assert ours.model_dump_json() == theirs.model_dump_json()
    for mine, reference in zip(ours.texts, theirs.texts, strict=True):
        assert type(mine) is type(reference)
    # each item has lists of its own (a shared default would leak between items)
    assert ours.texts[0].prov is not ours.texts[1].prov
    assert ours.texts[3].children is not ours.texts[4].children
    reloaded = DoclingDocument.model_validate_json(ours.model_dump_json())
    assert reloaded.export_to_dict() == theirs.export_to_dict()


def test_items_are_validated() -> None:
    doc = DoclingDocument(name="d")
    with pytest.raises(ValueError, match="level"):
        append_text(doc, SectionHeaderItem, "Head", level=0)


def test_provenance_given_as_data_builds_the_same_items() -> None:
    """The export passes each ProvenanceItem's fields, validated with the item in one call."""
    as_models, as_data = DoclingDocument(name="d"), DoclingDocument(name="d")
    models = [_prov(1, 10.0), _prov(2, 11.5)]
    data = [p.model_dump() for p in models]
    data[1]["bbox"] = models[1].bbox  # a model inside the data is kept as it is
    append_text(as_models, TextItem, "para", models, label=DocItemLabel.TEXT)
    append_text(as_data, TextItem, "para", data, label=DocItemLabel.TEXT)
    append_item(as_models, "tables", TableItem, data=_table(), prov=[_prov(1, 17.0)])
    append_item(as_data, "tables", TableItem, data=_table(), prov=[_prov(1, 17.0).model_dump()])
    assert as_data.model_dump_json() == as_models.model_dump_json()
    assert isinstance(as_data.texts[0].prov[0], ProvenanceItem)
    assert isinstance(as_data.texts[0].parent, RefItem)
    with pytest.raises(ValueError, match="bbox"):
        append_text(
            as_data, TextItem, "bad", [{"page_no": 1, "charspan": (0, 1)}], label=DocItemLabel.TEXT
        )


def test_the_exports_tables_equal_tables_docling_core_validates_whole() -> None:
    """The export validates a table's cells, then gives them to its validated TableData."""
    from tests.export.export_cases import CASES, exported

    tables = [table for name in CASES for table in exported(name).document.tables]
    assert tables
    for table in tables:
        whole = TableData(
            table_cells=[cell.model_dump() for cell in table.data.table_cells],
            num_rows=table.data.num_rows,
            num_cols=table.data.num_cols,
        )
        assert table.data == whole
        assert table.data.model_fields_set == whole.model_fields_set
        assert all(type(cell) is TableCell for cell in table.data.table_cells)
