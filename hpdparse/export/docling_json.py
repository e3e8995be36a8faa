"""The bytes of `<stem>.docling.json`: docling-core's own dump of the document (`export_to_dict`,
what `DoclingDocument.save_as_json` writes), compact, in UTF-8."""

from __future__ import annotations

import json

from docling_core.types.doc import DoclingDocument


def docling_json(doc: DoclingDocument) -> bytes:
    data = doc.export_to_dict()
    # Compact: an indent would take json's pure-Python encoder, several times slower.
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()
