"""The bytes of `<stem>.docling.json`: docling-core's own dump of the document (`export_to_dict`,
what `DoclingDocument.save_as_json` writes), compact, in UTF-8.

pydantic writes the same JSON itself (`model_dump_json`, the same serializers without the
Python dict and `json.dumps` in between) in less than half the time. The two differ only in how
a float between 1e-10 and 1e-4 is spelled (`1e-05` against `0.00001`): a document holding one
takes the dict path, so the file is the same byte for byte either way (tests/export compare the
two on every test document)."""

from __future__ import annotations

import json
import math

import pydantic_core
from docling_core.types.doc import DocItem, DoclingDocument

_ITEM_LISTS = ("groups", "texts", "pictures", "tables")


def docling_json(doc: DoclingDocument) -> bytes:
    if not all(_same_spelling(value) for value in _floats(doc)):
        return dict_json(doc)
    # The document's item lists are unions of item types: pydantic tries the serializer of each
    # type in turn for every item (docling-core's wrap serializers run several times an item, a
    # third of the time). Each item dumped by its own type, then put in its list's place.
    shell = doc.model_copy(update={name: [] for name in _ITEM_LISTS})
    text = shell.model_dump_json(by_alias=True, exclude_none=True)
    for name in _ITEM_LISTS:
        empty = f'"{name}":[]'  # a key: inside a JSON string its quotes would be escaped
        if text.count(empty) != 1:
            return doc.model_dump_json(by_alias=True, exclude_none=True).encode()
        items = ",".join(
            item.model_dump_json(by_alias=True, exclude_none=True) for item in getattr(doc, name)
        )
        text = text.replace(empty, f'"{name}":[{items}]')
    return text.encode()


def dict_json(doc: DoclingDocument) -> bytes:
    """The same bytes, always the dict way."""
    data = doc.export_to_dict()
    # Compact: an indent would take json's pure-Python encoder, several times slower.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def _floats(doc: DoclingDocument):
    """Every float the export puts in a document: page sizes, provenance boxes, image sizes."""
    for page in doc.pages.values():
        yield page.size.width
        yield page.size.height
    for items in (doc.texts, doc.tables, doc.pictures):
        for item in items:
            if isinstance(item, DocItem):
                for prov in item.prov:
                    box = prov.bbox
                    yield from (box.l, box.t, box.r, box.b)
    for picture in doc.pictures:
        if picture.image is not None:
            yield picture.image.size.width
            yield picture.image.size.height


def _same_spelling(value: float) -> bool:
    if not math.isfinite(value):
        return False  # json writes NaN, pydantic null
    if value == 0 or not 1e-10 <= abs(value) < 1e-4:
        return True
    return json.dumps(value) == pydantic_core.to_json(value).decode()
