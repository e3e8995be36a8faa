"""What an input document is: an open PDF, image, or other document MuPDF opens (EPUB, XPS...),
whose pages can be rasterized; Office and HTML files are converted to PDF first (`office`).

Raster size limits (the same for PDF pages and images):
- a rasterized page is at most `MAX_RASTER_SIDE_PX` pixels on its longest side and at most
  `MAX_RASTER_PIXELS` pixels in all; a PDF page that would exceed either is rasterized at a lower
  dpi (the effective dpi is reported), an image is scaled down;
- a PDF page is rasterized at least `MIN_RASTER_SIDE_PX` pixels on its longest side, so tiny pages
  (a 3.8 x 3.8 pt page is 11 px at 200 dpi) are rasterized at a higher dpi. Images are never scaled
  up: that adds no detail.

Whatever goes wrong with an input becomes an `InputError` whose message is one line naming the
file (and the page). PyMuPDF objects are not thread-safe: use one `SourceDocument` from one thread
at a time.
"""

from __future__ import annotations

import io
import math
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

from PIL import Image

from hpdparse.errors import InputError

PDF_SUFFIXES = frozenset({".pdf"})

IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff"})

MUPDF_FILETYPES = {
    ".epub": "epub",
    ".xps": "xps",
    ".oxps": "xps",
    ".mobi": "mobi",
    ".fb2": "fb2",
    ".cbz": "cbz",
    ".svg": "svg",
}
"""Other documents PyMuPDF opens itself (suffix -> its filetype); reflowable ones (EPUB, MOBI, FB2)
are laid out on PyMuPDF's default page size."""

OFFICE_SUFFIXES = frozenset(
    {".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx", ".odt", ".odp", ".ods", ".rtf"}
    | {".html", ".htm"}
)
"""Office and HTML files, converted to PDF by LibreOffice (`hpdparse.sources.office`)."""

SUPPORTED_SUFFIXES = PDF_SUFFIXES | IMAGE_SUFFIXES | frozenset(MUPDF_FILETYPES) | OFFICE_SUFFIXES

MAX_RASTER_SIDE_PX = 5000
"""Longest side of a rasterized page, in pixels (A0 at 200 dpi would be 9,362)."""

MAX_RASTER_PIXELS = 16_000_000
"""Pixels of a rasterized page (48 MB as RGB); A4 fits up to about 400 dpi."""

MIN_RASTER_SIDE_PX = 448
"""Smallest longest side of a rasterized PDF page: one HPD tile (448 px)."""

IMAGE_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "MPO"})

Content = bytes | Path | None
"""What a document is opened from instead of its own path: the bytes of an object read from a
URL, a temporary copy of a large one, or None (the file at the path itself)."""

_MUPDF_CODE = re.compile(r"^code=\d+:\s*")
_READ_ERRORS = {
    FileNotFoundError: "no such file",
    IsADirectoryError: "is a folder, not a file",
    PermissionError: "cannot be read (permission denied)",
}


@dataclass(frozen=True)
class PageGeometry:
    """The page as the model saw it, recorded once where it is rasterized and carried by
    reference into its raw record and the document's JSON: the image's size in pixels, the dpi it
    was rendered at (lower than asked for huge pages; None for image inputs), the page label
    (/PageLabels) and its size in points (None for image inputs)."""

    width_px: int
    height_px: int
    dpi: int | None = None
    label: str | None = None
    width_pt: float | None = None
    height_pt: float | None = None


class SourceDocument:
    """An open input document (PDF or image). Use as a context manager or call close()."""

    path: Path
    kind: str
    page_count: int

    def rasterize(self, number: int, dpi: int) -> tuple[Image.Image, PageGeometry]:
        """Page `number` (1-based) as an RGB image, and its geometry: `dpi` is the one asked
        for, the geometry's the effective one after the size limits (None for images)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SourceDocument:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _error(self, reason: str) -> InputError:
        """The one-line error `PATH: reason`."""
        return InputError(f"{self.path}: {reason}", path=self.path)

    def _page_error(self, number: int, reason: str) -> InputError:
        return self._error(f"page {number} cannot be rendered: {reason}")

    def _check_number(self, number: int) -> None:
        if not 1 <= number <= self.page_count:
            pages = plural(self.page_count, "page")
            raise self._error(f"page {number} does not exist (the document has {pages})")


def image_format(path: Path, content: Content = None) -> str | None:
    """The format of the document at `path` (opened from `content`) when Pillow opens it as an
    image of `IMAGE_FORMATS`, else None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            file = io.BytesIO(content) if isinstance(content, bytes) else content or path
            with Image.open(file) as image:
                return image.format if image.format in IMAGE_FORMATS else None
    except Exception:
        return None


def read_head(path: Path, content: Content = None) -> bytes:
    """The first KiB of the document (of `content` when given); InputError naming `path`."""
    if isinstance(content, bytes):
        head = content[:1024]
    else:
        try:
            with open(content or path, "rb") as f:
                head = f.read(1024)
        except OSError as error:
            reason = _READ_ERRORS.get(type(error)) or f"cannot be read ({error.strerror or error})"
            raise InputError(f"{path}: {reason}", path=path) from None
    if not head:
        raise InputError(f"{path}: empty file (0 bytes)", path=path)
    return head


def looks_like_pdf(head: bytes) -> bool:
    return b"%PDF-" in head


def one_line_error(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return _MUPDF_CODE.sub("", text) or type(error).__name__


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def capped_scale(width: float, height: float, scale: float, upscale: bool) -> float:
    """The scale (pixels per unit) closest to `scale` within the raster size limits."""
    longest = max(width, height)
    if upscale and longest * scale < MIN_RASTER_SIDE_PX:
        scale = MIN_RASTER_SIDE_PX / longest
    if longest * scale > MAX_RASTER_SIDE_PX:
        scale = MAX_RASTER_SIDE_PX / longest
    if width * height * scale * scale > MAX_RASTER_PIXELS:
        scale = math.sqrt(MAX_RASTER_PIXELS / (width * height))
    return scale


def effective_dpi(width_pt: float, height_pt: float, dpi: int) -> int:
    """The dpi a page of this size (in points) is rasterized at when `dpi` is asked for."""
    scale = capped_scale(width_pt, height_pt, dpi / 72, upscale=True)
    if scale * 72 > dpi:  # raised for a tiny page: round up so it reaches the minimum
        return math.ceil(scale * 72 - 1e-9)
    return max(1, math.floor(scale * 72 + 1e-9))
