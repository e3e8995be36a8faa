"""Rasterize one page of a file in a worker process, keeping recent documents open."""

from __future__ import annotations

import contextlib
import os
import threading
from collections import OrderedDict
from pathlib import Path

from PIL import Image

from hpdparse.sources.document import PageGeometry, SourceDocument
from hpdparse.sources.location import source_location
from hpdparse.sources.open import open_source
from hpdparse.sources.pdf import PdfDocument
from hpdparse.sources.text_layer import PageText, page_text

_CACHE_SIZE = 4

_cache: OrderedDict[tuple[str, str | None, int, int], SourceDocument] = OrderedDict()

_cache_lock = threading.Lock()


def rasterize_page(
    path: str, number: int, dpi: int, password: str | None = None
) -> tuple[Image.Image, PageGeometry]:
    """Rasterize one page of a file (its image and geometry: `SourceDocument.rasterize`); a
    picklable function for worker processes (or threads).

    Keeps the last few documents open per process, so rasterizing the pages of a document one call
    at a time does not reopen it each time (a file changed on disk since is opened afresh; an
    object at a URL is read once per process and not checked again: no request per page).
    Threads of one process rasterize one at a time: PyMuPDF is not thread-safe, use processes for
    parallel rasterizing. Raises InputError like `open_source` and `rasterize`.
    """
    with _cache_lock:
        return _cached_document(path, password).rasterize(number, dpi)


def page_text_of(path: str, number: int, password: str | None = None) -> PageText | None:
    """The text layer of page `number` of a file, from the documents `rasterize_page` keeps
    open (read where the page is rasterized: --text-layer prefer); None for an image."""
    with _cache_lock:
        document = _cached_document(path, password)
        if not isinstance(document, PdfDocument):
            return None
        return page_text(document.pymupdf_document.load_page(number - 1))


def _cached_document(path: str, password: str | None) -> SourceDocument:
    """The open document at `path` (opened now when not among the last few); under the lock."""
    source = source_location(path)
    key = (str(path), password, -1, -1)
    if isinstance(source, Path):
        with contextlib.suppress(OSError):
            stat = os.stat(path)
            key = (str(path), password, stat.st_mtime_ns, stat.st_size)
    document = _cache.get(key)
    if document is None:
        document = open_source(source, password)
        _cache[key] = document
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)[1].close()
    else:
        _cache.move_to_end(key)
    return document


def close_cached_documents() -> None:
    """Close the documents `rasterize_page` keeps open in this process."""
    with _cache_lock:
        while _cache:
            _cache.popitem()[1].close()
