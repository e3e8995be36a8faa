"""A rendered document -> a DoclingDocument (docling-core), written as `<stem>.docling.json`.

Every Markdown unit becomes the matching item, in reading order, with provenance (page, box in
page coordinates with docling's bottom-left origin, character span); a paragraph or table merged
across pages is one item with one provenance entry per page. Page headers and footers go to the
furniture layer. `refs` maps every item to the blocks it was made from. `docling_json` writes
the document. Items are appended by `append_item`, as docling-core's `add_*` methods append them
but faster."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from itertools import takewhile
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from docling_core.types.doc import (
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
    NodeItem,
    PictureItem,
    RefItem,
    SectionHeaderItem,
    Size,
    TableCell,
    TableData,
    TableItem,
    TextItem,
    TitleItem,
)
from pydantic import TypeAdapter

from hpdparse.export.pages import Frame, page_frames
from hpdparse.hpd.labels import ROLE_CAPTION, ROLE_FOOTER, ROLE_HEADER, ROLE_PAGE_NUMBER
from hpdparse.hpd.stream import Block, BlockRef
from hpdparse.markdown.formulas import with_tag
from hpdparse.markdown.lists import item_parts
from hpdparse.markdown.render import RenderedDocument, blocks_by_ref
from hpdparse.markdown.tables import Table, occupancy
from hpdparse.markdown.text import MODE_PLAIN, render_inline
from hpdparse.markdown.units import Kind, Unit

_TEXT_LABELS = {  # of paragraphs, then of page furniture (other roles: text)
    ROLE_CAPTION: DocItemLabel.CAPTION,
    "footnote": DocItemLabel.FOOTNOTE,
    "reference": DocItemLabel.REFERENCE,
    ROLE_HEADER: DocItemLabel.PAGE_HEADER,
    ROLE_FOOTER: DocItemLabel.PAGE_FOOTER,
    ROLE_PAGE_NUMBER: DocItemLabel.PAGE_FOOTER,
}
_LANGUAGES = {label.value.lower(): label for label in CodeLanguageLabel}
_CELLS = TypeAdapter(list[TableCell])
# Enum members read once: on Python 3.11 each `DocItemLabel.X` is a Python-level lookup.
_TEXT, _BOTTOM_LEFT = DocItemLabel.TEXT, CoordOrigin.BOTTOMLEFT
_Item = TypeVar("_Item", bound=NodeItem)
_Refs = list[tuple[BlockRef, str]]  # an item's blocks, each with its own text


# --- items appended as docling-core's add_* methods append them ---------------------------

_REF = RefItem.__pydantic_validator__


class Provenance(TypedDict):
    """A ProvenanceItem's fields, validated with the item (`bbox`: a BoundingBox's fields)."""

    page_no: int
    bbox: dict[str, float | CoordOrigin]
    charspan: tuple[int, int]


@functools.cache
def _list_fields(cls: type[NodeItem]) -> tuple[str, ...]:
    """The fields of `cls` whose default is a list (each needs a list of its own)."""
    return tuple(name for name, f in cls.model_fields.items() if isinstance(f.default, list))


def append_item(
    doc: DoclingDocument,
    collection: str,
    cls: type[_Item],
    *,
    parent: NodeItem | None = None,
    prov: list[Provenance] | None = None,
    content_layer: ContentLayer | None = None,
    **fields: Any,
) -> _Item:
    """A new `cls` item at the end of `doc.<collection>`, a child of `parent` (the body by
    default), with `prov` (none: no provenance) and the other fields given: as docling-core's
    `add_*` methods append it, about three times faster.

    `add_text` and its peers build an item from a few arguments and leave its list fields
    (`children`, `prov`, `captions`, ...) to their defaults, which pydantic deep-copies at every
    item (`copy.deepcopy` of an empty list, several per item: more than half of each item's
    construction). Here every list field is given, so nothing is copied; each item is still
    built, and validated, by its own docling-core class, and gets the same `self_ref`, `parent`,
    place in its parent's `children` and field values as the `add_*` method would give it. Its
    parent reference and provenance may be given as the plain data of their models
    (`Provenance`), which the item's validation builds in the same call (a model built alone
    costs a Python call of its own). tests/export/test_docling_items.py checks both give the
    same document."""
    items: list[Any] = getattr(doc, collection)
    parent = parent or doc.body
    cref = f"#/{collection}/{len(items)}"
    values: dict[str, object] = {name: [] for name in _list_fields(cls)}
    if prov:
        values["prov"] = prov
    if content_layer:
        values["content_layer"] = content_layer
    values.update(fields)
    values["self_ref"] = cref
    values["parent"] = {"cref": parent.self_ref}  # the RefItem `add_*` gives, built with the item
    # (the validators themselves: model_validate and __init__ add a Python call each)
    item = cls.__pydantic_validator__.validate_python(values)
    items.append(item)
    parent.children.append(_REF.validate_python({"cref": cref}))
    return item


@dataclass
class DoclingExport:
    document: DoclingDocument
    refs: dict[str, list[BlockRef]] = field(default_factory=dict)  # item self_ref -> blocks
    # what the build looked up, kept for the chunks
    pages: dict[int, Frame] = field(default_factory=dict)
    blocks: dict[BlockRef, Block] = field(default_factory=dict)


def plain(text: str) -> str:
    """Our paragraph text as docling items hold it: lines joined, inline math as $...$."""
    return render_inline(text, dollar=True, mode=MODE_PLAIN)


def to_docling(rendered: RenderedDocument, *, provenance: bool = True) -> DoclingExport:
    """Build the DoclingDocument of a rendered document. Without `provenance`, its items have
    none (what the chunks need: they take pages and boxes from `refs` and the blocks)."""
    return _Builder(rendered, provenance).build()


def docling_json(doc: DoclingDocument) -> bytes:
    """The bytes of `<stem>.docling.json`: docling-core's own dump of the document
    (`export_to_dict`, what `DoclingDocument.save_as_json` writes), compact, in UTF-8."""
    # Compact: an indent would take json's pure-Python encoder, several times slower.
    return json.dumps(doc.export_to_dict(), ensure_ascii=False, separators=(",", ":")).encode()


class _Builder:
    def __init__(self, rendered: RenderedDocument, provenance: bool = True) -> None:
        self.provenance = provenance
        self.units = rendered.units
        self.pages = page_frames(rendered.pages)
        self.blocks = blocks_by_ref(rendered.pages)
        self.doc = DoclingDocument(name=rendered.doc.stem)
        self.export = DoclingExport(self.doc, pages=self.pages, blocks=self.blocks)
        self.table_captions = _table_captions(self.units)  # table unit index -> caption units

    def build(self) -> DoclingExport:
        for number, page in self.pages.items():
            self.doc.add_page(page_no=number, size=Size(width=page.width, height=page.height))
        captions = {i for owned in self.table_captions.values() for i in owned}
        for i, unit in enumerate(self.units):
            if not unit.removed and unit.block is not None and i not in captions:
                self._add(unit, i)
        return self.export

    def _add(self, unit: Unit, index: int) -> None:
        kind = unit.kind
        if kind == Kind.HEADING and unit.level == 0:
            self._item(unit, TitleItem, plain(unit.text))
        elif kind == Kind.HEADING:
            self._item(unit, SectionHeaderItem, plain(unit.text), level=min(unit.level, 100))
        elif kind in (Kind.PARAGRAPH, Kind.FURNITURE):
            label = _TEXT_LABELS.get(unit.role, _TEXT)
            layer = ContentLayer.FURNITURE if kind == Kind.FURNITURE else None
            self._item(unit, TextItem, plain(unit.text), label=label, content_layer=layer)
        elif kind == Kind.LIST:
            self._list(unit)
        elif kind == Kind.TABLE and unit.table is not None:
            data = _table_data(unit.table)
            table = self._item(unit, TableItem, collection="tables", data=data)
            for caption in self.table_captions.get(index, []):
                self._caption(self.units[caption], table)
        elif kind == Kind.FORMULA:
            last = len(unit.formulas) - 1
            for i, latex in enumerate(unit.formulas):
                self._item(unit, FormulaItem, with_tag(latex, unit.tag if i == last else None))
        elif kind == Kind.FIGURE:
            image = self._image(unit)
            picture = self._item(unit, PictureItem, collection="pictures", image=image)
            if unit.text:
                self._caption(unit, picture)
        elif kind == Kind.CODE:
            language = _LANGUAGES.get(unit.language.lower())
            fields = {"code_language": language} if language else {}
            self._item(unit, CodeItem, unit.text, **fields)

    # --- items ---------------------------------------------------------------------------------

    def _item(
        self,
        unit: Unit,
        cls: type[_Item],
        text: str | None = None,
        refs: _Refs | None = None,
        collection: str = "texts",
        **fields: Any,
    ) -> _Item:
        """An item of `unit` with its provenance, linked to its blocks (`refs`, by default the
        unit's); a text-like one when `text` is given (`orig` is its text, as `add_*` sets it)."""
        refs = refs or self._refs(unit)
        if text is not None:
            fields.update(text=text, orig=text)
        prov = self._provenance(refs, text or "")
        item = append_item(self.doc, collection, cls, prov=prov, **fields)
        self.export.refs[item.self_ref] = [ref for ref, _ in refs]
        return item

    def _caption(self, unit: Unit, owner: TableItem | PictureItem) -> None:
        label = DocItemLabel.CAPTION
        caption = self._item(unit, TextItem, plain(unit.text), label=label, parent=owner)
        owner.captions.append(RefItem(cref=caption.self_ref))

    def _list(self, unit: Unit) -> None:
        group = append_item(self.doc, "groups", ListGroup)
        item_blocks = unit.item_blocks or [unit.block] * len(unit.items)
        for text, block in zip(unit.items, item_blocks, strict=False):
            marker, body = item_parts(text, unit.ordered)
            refs = [(BlockRef(unit.page, block), "")]
            fields = {"enumerated": unit.ordered, "marker": marker, "parent": group}
            self._item(unit, ListItem, plain(body), refs, **fields)

    # --- provenance ----------------------------------------------------------------------------

    def _refs(self, unit: Unit) -> _Refs:
        """The blocks the unit was made from (several when merged across pages), each with its
        own text (that of the first is not needed)."""
        return [(BlockRef(unit.page, unit.block or 0), ""), *unit.continuations]

    def _provenance(self, refs: _Refs, text: str) -> list[Provenance]:
        """One entry per block; the character spans split `text` where each continuation's own
        text starts. Empty when the first block has no box."""
        if not self.provenance:
            return []
        spans = _spans(text, [len(plain(t)) for _, t in refs[1:]])
        entries = [
            self._block_provenance(ref, span) for (ref, _), span in zip(refs, spans, strict=True)
        ]
        return [e for e in entries if e is not None] if entries[0] is not None else []

    def _block_provenance(self, ref: BlockRef, span: tuple[int, int]) -> Provenance | None:
        """A ProvenanceItem's fields (the item's validation builds it), its BoundingBox's with
        docling's convention for PDF pages: y grows upwards."""
        page = self.pages.get(ref.page)
        block = self.blocks.get(ref)
        if page is None or block is None or not block.bbox:
            return None
        left, top, right, bottom = page.box(block.bbox)
        box = {"l": left, "t": page.height - top, "r": right, "b": page.height - bottom}
        box["coord_origin"] = _BOTTOM_LEFT
        return {"page_no": ref.page, "bbox": box, "charspan": span}

    def _image(self, unit: Unit) -> ImageRef | None:
        # a figure's block alone: figures are never merged
        ref = BlockRef(unit.page, unit.block or 0)
        block = self.blocks.get(ref)
        box = block.bbox_px if block is not None else None
        if not unit.image or not box:
            return None
        page = self.pages.get(ref.page)
        dpi = page.dpi if page is not None else 72
        size = Size(width=max(box[2] - box[0], 1), height=max(box[3] - box[1], 1))
        return ImageRef(mimetype="image/png", dpi=dpi, size=size, uri=Path(unit.image))


def _spans(text: str, later_lengths: list[int]) -> list[tuple[int, int]]:
    """Character spans of a text made of a first part and continuations of the given lengths
    (joined by at most one character)."""
    end = len(text)
    spans: list[tuple[int, int]] = []
    for length in reversed(later_lengths):
        start = max(end - length, 0)
        spans.append((start, end))
        end = max(start - 1, 0) if start > 0 and text[start - 1 : start] == " " else start
    spans.append((0, end))
    return spans[::-1]


def _table_captions(units: list[Unit]) -> dict[int, list[int]]:
    """table unit index -> the caption paragraphs that belong to it (`_captions_of`)."""
    owned: dict[int, list[int]] = {}
    taken: set[int] = set()
    for i, unit in enumerate(units):
        if unit.kind == Kind.TABLE and not unit.removed:
            owned[i] = _captions_of(units, i, taken)
            taken.update(owned[i])
    return owned


def _captions_of(units: list[Unit], i: int, taken: set[int]) -> list[int]:
    """The captions of table `i`: those right before it (not `taken` by an earlier table), else
    right after it, unless they open the next table (a table block's own text before and after
    `<table>` is its caption too)."""
    table = units[i]

    def is_caption(j: int) -> bool:
        unit = units[j]
        caption = unit.kind == Kind.PARAGRAPH and unit.role == ROLE_CAPTION
        return caption and not unit.removed and unit.page == table.page

    before = takewhile(lambda j: j not in taken and is_caption(j), range(i - 1, -1, -1))
    after = list(takewhile(is_caption, range(i + 1, len(units))))
    end = i + 1 + len(after)
    if end < len(units) and units[end].kind == Kind.TABLE:
        after = list(takewhile(lambda j: units[j].block == table.block, after))
    return [*reversed(list(before)), *after]


def _table_data(table: Table) -> TableData:
    grid = occupancy(table.rows)
    width = max((len(line) for line in grid), default=0)
    cells = []
    for r, line in enumerate(grid):
        for c, cell in enumerate(line):
            if cell is None:
                continue
            cells.append(
                {
                    "text": plain(cell.text),
                    "row_span": cell.rowspan,
                    "col_span": cell.colspan,
                    "start_row_offset_idx": r,
                    "end_row_offset_idx": min(r + cell.rowspan, len(grid)),
                    "start_col_offset_idx": c,
                    "end_col_offset_idx": min(c + cell.colspan, width),
                    "column_header": cell.header,
                }
            )
    # the cells validated in one call (a TableCell each, as TableCell(**cell) would build), then
    # given to the validated table: TableData's validation would check each one again (a Python
    # validator of docling's per cell, twice: its cell types are tried in turn)
    data = TableData(table_cells=[], num_rows=len(grid), num_cols=width)
    data.table_cells = _CELLS.validate_python(cells)
    return data
