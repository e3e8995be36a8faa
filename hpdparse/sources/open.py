"""Open an input file as a PDF, an image or another document MuPDF opens (EPUB, XPS...), by suffix
and content, or an Office or HTML file as the PDF LibreOffice makes of it: a local file, or an
object at a URL (read into memory; one larger than `LARGE_OBJECT_BYTES` through a temporary file,
deleted as soon as it is open)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hpdparse.sources.document import (
    IMAGE_SUFFIXES,
    MUPDF_FILETYPES,
    OFFICE_SUFFIXES,
    PDF_SUFFIXES,
    Content,
    SourceDocument,
    image_format,
    looks_like_pdf,
    read_head,
)
from hpdparse.sources.images import ImageDocument
from hpdparse.sources.location import LARGE_OBJECT_BYTES, UrlSource
from hpdparse.sources.office import converted_pdf
from hpdparse.sources.pdf import PdfDocument

__all__ = ["LARGE_OBJECT_BYTES", "open_source"]


def open_source(path: Path | UrlSource, password: str | None = None) -> SourceDocument:
    """Open an input file. Raises InputError (one line, naming the file).

    A file with an image suffix goes to Pillow; one with a suffix of `MUPDF_FILETYPES` (EPUB,
    XPS...) to PyMuPDF as that format; an Office or HTML file is converted to PDF by LibreOffice
    (`office.converted_pdf`); anything else goes to PyMuPDF, which must find a real PDF in it
    (PyMuPDF also opens JPEG or DOCX files named .pdf: those are refused). A file without a known
    suffix is taken as a PDF or an image according to its content. `password` is ignored for
    documents that need none.
    """
    if isinstance(path, UrlSource):
        return _open_url(path, password)
    return _open(Path(path), password, None)


def _open(path: Path | UrlSource, password: str | None, content: Content) -> SourceDocument:
    head = read_head(path, content)  # type: ignore[arg-type]
    suffix = path.suffix.lower()
    if suffix in OFFICE_SUFFIXES:
        # The PDF stays open after its file is gone (POSIX), as a large object's copy does.
        with converted_pdf(path, content) as pdf:
            return PdfDocument(path, None, pdf)  # type: ignore[arg-type]
    if suffix in MUPDF_FILETYPES:
        return PdfDocument(path, password, content, MUPDF_FILETYPES[suffix])  # type: ignore[arg-type]
    if not looks_like_pdf(head) and (
        suffix in IMAGE_SUFFIXES or (suffix not in PDF_SUFFIXES and image_format(path, content))  # type: ignore[arg-type]
    ):
        return ImageDocument(path, content)  # type: ignore[arg-type]
    return PdfDocument(path, password, content)  # type: ignore[arg-type]


def _open_url(source: UrlSource, password: str | None) -> SourceDocument:
    size, _ = source.stat()
    if size <= LARGE_OBJECT_BYTES:
        return _open(source, password, source.read_bytes())
    # The open document keeps its file open: the copy can go at once (POSIX), and must go in
    # any case.
    with tempfile.TemporaryDirectory(prefix="hpdparse-", ignore_cleanup_errors=True) as scratch:
        copy = Path(scratch) / f"object{source.suffix or '.bin'}"
        source.download(copy)
        return _open(source, password, copy)
