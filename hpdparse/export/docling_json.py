"""The bytes of `<stem>.docling.json`: docling-core's own dump of the document (`export_to_dict`,
what `DoclingDocument.save_as_json` writes), compact, in UTF-8.

pydantic writes the same JSON itself (`model_dump_json`, the same serializers without the
Python dict and `json.dumps` in between) in less than half the time. The two differ only in how
a float between 1e-10 and 1e-4 is spelled (`1e-05` against `0.00001`): a document holding one
takes the dict path, so the file is the same byte for byte either way."""

from __future__ import annotations

import json
import math

import pydantic_core
from docling_core.types.doc import DocItem, DoclingDocument


def docling_json(doc: DoclingDocument) -> bytes:
    if all(_same_spelling(value) for value in _floats(doc)):
        return doc.model_dump_json(by_alias=True, exclude_none=True).encode()
    return dict_json(doc)


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
