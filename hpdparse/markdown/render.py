"""Placeholder renderer with the final signature; the converter issue replaces its body."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hpdparse.document import PAGE_FAILED, DocumentRecord


@dataclass
class RenderOptions:
    keep_headers: bool = False
    images: bool = True
    table_format: str = "auto"  # gfm | html | auto
    math: str = "dollar"  # dollar ($ $$) | latex (\( \) \[ \])
    page_markers: bool = False
    merge_paragraphs: bool = True
    merge_tables: bool = True


@dataclass
class ImageCrop:
    """A region to crop from a page image into the document folder."""

    filename: str  # relative to the document folder, e.g. images/page-0003-figure-01.png
    page_number: int  # 1-based
    bbox_px: tuple[int, int, int, int]  # in pixels of the page image the model saw


@dataclass
class RenderedDocument:
    markdown: str
    json: dict[str, Any]
    images: list[ImageCrop] = field(default_factory=list)


_TAG = re.compile(r"<BLOCK>[^<\[]*(\[[^\]]*\])?|<CHILD>|<FORK>")


def render_document(doc: DocumentRecord, options: RenderOptions | None = None) -> RenderedDocument:
    parts = []
    for page in doc.pages:
        if page.status == PAGE_FAILED:
            parts.append(f"<!-- page {page.number} failed: {page.error} -->")
            continue
        for chunk in _TAG.split(page.raw):
            if chunk and not chunk.startswith("["):
                parts.append(chunk.strip())
    markdown = "\n\n".join(p for p in parts if p) + "\n"
    return RenderedDocument(markdown=markdown, json={"source": doc.source, "pages": []})
