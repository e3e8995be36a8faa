"""The bytes of `<stem>.docling.json`: docling-core's own dump of the document (`export_to_dict`,
what `DoclingDocument.save_as_json` writes), compact, in UTF-8.

pydantic writes the same JSON itself (`model_dump_json`, the same serializers without the
Python dict and `json.dumps` in between) in less than half the time. The two differ only in how
they spell a float between 1e-10 and 1e-4 (`5e-05` against `0.00005`, `2.5e-07` against
`2.5e-7`; both write `null` for one that is not finite): a document whose pydantic JSON holds
such a spelling takes the dict path, so the file is the same byte for byte either way
(tests/export compare the two on every test document).

Each item is written by its own class's pydantic serializer, in two places without docling-core's
Python code in the way, for the same bytes (`docling_item_json`)."""

from __future__ import annotations

import json
import re

from docling_core.types.doc import DoclingDocument

from hpdparse.export.docling_item_json import docling_item_json

_ITEM_LISTS = ("groups", "texts", "pictures", "tables")

# A JSON value (after `:`, `,` or `[`) that pydantic may spell otherwise than json.dumps: a float
# below 1e-4 (`0.0000...` or a one-digit negative exponent). A string that looks like one only
# takes the slower path. Looked for in the UTF-8 bytes (faster than in a str that is not ASCII).
_OTHER_SPELLING = re.compile(rb"[:,\[]-?(?:0\.0000|\d+(?:\.\d+)?e-\d\b)")
# What any such value holds, found ten times faster (a literal first): most documents have none.
_SMALL_EXPONENT = re.compile(rb"e-\d\b")


def docling_json(doc: DoclingDocument) -> bytes:
    data = _fast_json(doc).encode()
    if _may_be_spelled_otherwise(data):
        return dict_json(doc)
    return data


def _may_be_spelled_otherwise(data: bytes) -> bool:
    if b"0.0000" not in data and not _SMALL_EXPONENT.search(data):
        return False
    return _OTHER_SPELLING.search(data) is not None


def _fast_json(doc: DoclingDocument) -> str:
    # The document's item lists are unions of item types: pydantic tries the serializer of each
    # type in turn for every item (docling-core's wrap serializers run several times an item, a
    # third of the time). Each item dumped by its own type, then put in its list's place.
    shell = doc.model_copy(update={name: [] for name in _ITEM_LISTS})
    text = shell.model_dump_json(by_alias=True, exclude_none=True)
    for name in _ITEM_LISTS:
        empty = f'"{name}":[]'  # a key: inside a JSON string its quotes would be escaped
        if text.count(empty) != 1:
            return doc.model_dump_json(by_alias=True, exclude_none=True)
        items = ",".join(docling_item_json(item) for item in getattr(doc, name))
        text = text.replace(empty, f'"{name}":[{items}]')
    return text


def dict_json(doc: DoclingDocument) -> bytes:
    """The same bytes, always the dict way."""
    data = doc.export_to_dict()
    # Compact: an indent would take json's pure-Python encoder, several times slower.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
