"""Names of the files inside a document folder, relative to it ("raw/page-0003.txt"): the layout
every storage keeps (see `hpdparse.store`)."""

from __future__ import annotations

import re

RAW_DIR = "raw"

IMAGES_DIR = "images"

STATE_NAME = f"{RAW_DIR}/document.json"

_RAW_PAGE_NAME = re.compile(r"^page-(\d{4,})\.(txt|json)$")


def raw_text_name(number: int) -> str:
    """The raw model text of page `number`, exactly as decoded."""
    return f"{RAW_DIR}/page-{number:04d}.txt"


def raw_meta_name(number: int) -> str:
    """The metadata of page `number` (its commit point: see `hpdparse.store.raw_pages`)."""
    return f"{RAW_DIR}/page-{number:04d}.json"


def markdown_name(stem: str) -> str:
    return f"{stem}.md"


def layout_pdf_name(stem: str) -> str:
    return f"{stem}.layout.pdf"


def converted_pdf_name(stem: str) -> str:
    """The PDF LibreOffice made of an Office or HTML input (--keep-converted-pdf)."""
    return f"{stem}.converted.pdf"


def review_html_name(stem: str) -> str:
    return f"{stem}.review.html"


def json_name(stem: str) -> str:
    return f"{stem}.json"


def docling_name(stem: str) -> str:
    """--docling: the DoclingDocument (hpdparse.export.docling)."""
    return f"{stem}.docling.json"


def chunks_name(stem: str) -> str:
    """--chunks: one chunk a line (hpdparse.export.chunks)."""
    return f"{stem}.chunks.jsonl"


def raw_meta_number(filename: str) -> int | None:
    """The page number of a raw metadata file name ("page-0003.json" -> 3), else None."""
    match = _RAW_PAGE_NAME.match(filename)
    return int(match.group(1)) if match and match.group(2) == "json" else None
