"""The layout overlay, OUT/<stem>/<stem>.layout.pdf: every converted page with each block's box
drawn in its role's colour, its reading-order number and label; failed and truncated pages
marked; a status line under every page and a legend under the first.

PDF pages are copied as vector content (annotations and form fields baked in, /Rotate and the
CropBox honoured, as the model saw them); image inputs are drawn onto the image the model saw.
Made from the document's page records (hpd/stream.py's ParsedPage) and its source file only.
"""

from __future__ import annotations

import io
from pathlib import Path

from hpdparse.errors import HpdparseError, OutputError
from hpdparse.hpd.stream import FLAG_TRUNCATED, ParsedPage
from hpdparse.overlay.draw import (
    Metrics,
    draw_band,
    draw_blocks,
    draw_legend,
    legend_layout,
    mark_page,
)
from hpdparse.overlay.roles import roles_in
from hpdparse.remote import output_location
from hpdparse.sources.document import SourceDocument
from hpdparse.sources.location import UrlSource
from hpdparse.sources.mupdf import pymupdf
from hpdparse.sources.open import open_source
from hpdparse.sources.pdf import PdfDocument
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.outputs import checked_source
from hpdparse.store.state import DocumentState

IMAGE_POINTS_PER_PIXEL = 72 / 150  # an image input's page is sized as if scanned at 150 dpi
IMAGE_JPEG_QUALITY = 85


class _PdfPages:
    """The selected pages of a PDF, copied into a scratch PDF, annotations baked into their
    content and /Rotate taken out (it is put back when a page is shown)."""

    def __init__(self, pdf: pymupdf.Document, numbers: list[int]) -> None:
        self.scratch = pymupdf.open()
        for number in numbers:
            self.scratch.insert_pdf(pdf, from_page=number - 1, to_page=number - 1)
        self.scratch.bake()
        self.sizes = [(p.rect.width, p.rect.height) for p in self.scratch]
        self.rotations = [p.rotation for p in self.scratch]
        for page in self.scratch:
            page.set_rotation(0)

    def show(self, target: pymupdf.Page, rect: pymupdf.Rect, i: int) -> None:
        target.show_pdf_page(rect, self.scratch, i, rotate=(-self.rotations[i]) % 360)

    def close(self) -> None:
        self.scratch.close()


class _ImagePages:
    """The pages of an image input, as the model saw them (upright, RGB, size-capped)."""

    def __init__(self, source: SourceDocument, numbers: list[int]) -> None:
        self.images: list[bytes] = []
        self.sizes: list[tuple[float, float]] = []
        for number in numbers:
            image = source.rasterize(number, 72)[0]
            buffer = io.BytesIO()
            image.save(buffer, format="JPEG", quality=IMAGE_JPEG_QUALITY)
            self.images.append(buffer.getvalue())
            k = IMAGE_POINTS_PER_PIXEL
            self.sizes.append((image.width * k, image.height * k))

    def show(self, target: pymupdf.Page, rect: pymupdf.Rect, i: int) -> None:
        target.insert_image(rect, stream=self.images[i])

    def close(self) -> None:
        self.images = []


def page_status(page: ParsedPage) -> str:
    """`failed`, `truncated` (the token limit cut the page) or `ok`."""
    if page.status == "failed":
        return "failed"
    if page.finish_reason == "length" or FLAG_TRUNCATED in page.flags:
        return "truncated"
    return "ok"


def band_text(stem: str, page: ParsedPage) -> str:
    """The status line of a page: where it is, how many blocks, what went wrong."""
    parts = [f"{stem}  page {page.number}"]
    if page.label and page.label != str(page.number):
        parts[0] += f" (label {page.label})"
    blocks = page.blocks
    unboxed = sum(1 for b in blocks if not b.bbox_px)
    parts.append(f"{len(blocks)} blocks" + (f", {unboxed} without a box" if unboxed else ""))
    status = page_status(page)
    if status == "failed":
        parts.append(f"FAILED: {page.error or 'no output'}")
    elif status == "truncated":
        parts.append("TRUNCATED at the token limit: the end of the page is missing")
    flags = [f for f in page.flags if f != FLAG_TRUNCATED]
    if flags:
        parts.append("flags: " + ", ".join(flags))
    return "   |   ".join(parts)


def _overlay_page(
    out: pymupdf.Document,
    pages: _PdfPages | _ImagePages,
    i: int,
    page: ParsedPage,
    stem: str,
    legend: list[str] | None,
) -> None:
    width, height = pages.sizes[i]
    m = Metrics(width)
    extra = m.band_height + (legend_layout(legend, width)[1] if legend is not None else 0)
    target = out.new_page(width=width, height=height + extra)
    content = pymupdf.Rect(0, 0, width, height)
    pages.show(target, content, i)
    width_px, height_px = page.width_px, page.height_px
    if width_px > 0 and height_px > 0:
        draw_blocks(target, page.blocks, width / width_px, height / height_px)
    status = page_status(page)
    if status != "ok":
        mark_page(target, content, status)
    draw_band(target, height, band_text(stem, page), status)
    if legend is not None:
        draw_legend(target, height + m.band_height, legend)


def layout_pdf(
    pages: list[ParsedPage], stem: str, source: Path | UrlSource, password: str | None = None
) -> bytes:
    """The overlay PDF of a document's rendered pages over its source file."""
    if not pages:
        raise OutputError(f"{source}: the document has no pages")
    numbers = [p.number for p in pages]
    out = pymupdf.open()
    with open_source(source, password) as opened:
        if isinstance(opened, PdfDocument):
            shown: _PdfPages | _ImagePages = _PdfPages(opened.pymupdf_document, numbers)
        else:
            shown = _ImagePages(opened, numbers)
        try:
            for i, page in enumerate(pages):
                legend = roles_in(pages) if i == 0 else None
                _overlay_page(out, shown, i, page, stem, legend)
        finally:
            shown.close()
    try:
        return out.tobytes(garbage=3, deflate=True)
    finally:
        out.close()


def layout_job(
    doc_dir: str, state: DocumentState, pages: list[ParsedPage], password: str | None
) -> list[str]:
    """Write OUT/<stem>/<stem>.layout.pdf (atomically) into the document folder `doc_dir` (a
    path or a URL); problems (the source gone, a bug) come back as one-line messages."""
    try:
        location = output_location(doc_dir)
        source = checked_source(state, location)
        pdf = layout_pdf(pages, state.stem, source, password)
        open_document_folder(location).write_layout_pdf(state.stem, pdf)
    except HpdparseError as exc:
        return [f"layout overlay not written: {exc}"]
    except OSError as exc:
        return [f"layout overlay not written: {exc.strerror or exc}"]
    except Exception as exc:  # a bug here must not fail the document
        return [f"layout overlay not written: {type(exc).__name__}: {exc}"]
    return []
