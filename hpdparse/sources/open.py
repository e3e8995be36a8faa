"""Open an input file as a PDF or an image document, by suffix and content."""

from __future__ import annotations

from pathlib import Path

from hpdparse.sources.document import (
    IMAGE_SUFFIXES,
    PDF_SUFFIXES,
    SourceDocument,
    looks_like_pdf,
    read_head,
)
from hpdparse.sources.images import ImageDocument, is_image_content
from hpdparse.sources.pdf import PdfDocument


def open_source(path: Path, password: str | None = None) -> SourceDocument:
    """Open a PDF or image file. Raises InputError (one line, naming the file).

    A file with an image suffix goes to Pillow, anything else to PyMuPDF, which must find a real
    PDF in it (PyMuPDF also opens JPEG or DOCX files named .pdf: those are refused). A file
    without a known suffix is taken as a PDF or an image according to its content.
    `password` is ignored for documents that need none.
    """
    path = Path(path)
    head = read_head(path)
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES and not looks_like_pdf(head):
        return ImageDocument(path)
    if suffix not in PDF_SUFFIXES and not looks_like_pdf(head) and is_image_content(path):
        return ImageDocument(path)
    return PdfDocument(path, password)
