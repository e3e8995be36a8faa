"""Find input files, open PDFs and images, check passwords, select pages and rasterize them.

PDFs go through PyMuPDF, images (PNG, JPEG, TIFF) through Pillow. Whatever goes wrong with an
input becomes an `InputError` whose message is one line naming the file (and the page).

Render size limits (the same for PDF pages and images):
- a rendered page is at most `MAX_RENDER_SIDE_PX` pixels on its longest side and at most
  `MAX_RENDER_PIXELS` pixels in all; a PDF page that would exceed either is rendered at a lower
  dpi (the effective dpi is reported), an image is scaled down;
- a PDF page is rendered at least `MIN_RENDER_SIDE_PX` pixels on its longest side, so tiny pages
  (a 3.8 x 3.8 pt page is 11 px at 200 dpi) are rendered at a higher dpi. Images are never scaled
  up: that adds no detail.

PyMuPDF objects are not thread-safe: use one `SourceDocument` from one thread at a time.
"""

from __future__ import annotations

import glob
import logging
import math
import os
import re
import threading
import unicodedata
import warnings
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pymupdf
from PIL import Image, ImageOps, UnidentifiedImageError

from hpdparse.errors import InputError

log = logging.getLogger(__name__)

PDF_SUFFIXES = frozenset({".pdf"})
IMAGE_SUFFIXES = frozenset({".png", ".jpg", ".jpeg", ".tif", ".tiff"})
SUPPORTED_SUFFIXES = PDF_SUFFIXES | IMAGE_SUFFIXES

MAX_RENDER_SIDE_PX = 5000
"""Longest side of a rendered page, in pixels (A0 at 200 dpi would be 9,362)."""
MAX_RENDER_PIXELS = 16_000_000
"""Pixels of a rendered page (48 MB as RGB); A4 fits up to about 400 dpi."""
MIN_RENDER_SIDE_PX = 448
"""Smallest longest side of a rendered PDF page: one HPD tile (448 px)."""

_IMAGE_FORMATS = frozenset({"PNG", "JPEG", "TIFF", "MPO"})
_MUPDF_CODE = re.compile(r"^code=\d+:\s*")


# --------------------------------------------------------------------------------------------
# Discovery


def discover_inputs(
    specs: Sequence[str], recursive: bool = False
) -> tuple[list[Path], list[InputError]]:
    """Expand files, folders and glob patterns into a list of input files.

    - A file named explicitly is taken whatever its suffix (opening it gives the error, if any).
    - A folder gives its PDF and image files (by suffix, any case), only its top level unless
      `recursive`; hidden files and folders (name starting with ".") are skipped.
    - A pattern (`*`, `?`, `[`) is expanded with `glob`; `**` spans folders when `recursive`.
      Matching files count only with a supported suffix; matching folders are expanded as above.
    Files are resolved and de-duplicated, kept in the order of `specs`, sorted within a folder or
    pattern. A spec that does not exist or matches nothing gives an `InputError` naming it.
    """
    found: dict[Path, None] = {}
    errors: list[InputError] = []
    for spec in specs:
        path = Path(spec).expanduser()
        if path.is_file():
            found.setdefault(path.resolve(), None)
        elif path.is_dir():
            members = list(_folder_members(path, recursive))
            if not members:
                errors.append(InputError(f"{spec}: {_empty_folder_reason(path, recursive)}"))
            for member in members:
                found.setdefault(member, None)
        elif glob.has_magic(spec):
            members = list(_glob_members(spec, recursive))
            if not members:
                errors.append(InputError(f"{spec}: no PDF or image file matches this pattern"))
            for member in members:
                found.setdefault(member, None)
        elif path.exists() or path.is_symlink():
            errors.append(InputError(f"{spec}: not a regular file or folder"))
        else:
            errors.append(InputError(f"{spec}: no such file or folder"))
    return list(found), errors


def _is_supported(path: Path) -> bool:
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def _folder_members(folder: Path, recursive: bool) -> Iterator[Path]:
    members: list[Path] = []
    if recursive:
        for root, dirs, files in os.walk(folder):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            members.extend(Path(root, f) for f in files if not f.startswith("."))
    else:
        try:
            members = [p for p in folder.iterdir() if not p.name.startswith(".")]
        except OSError:
            members = []
    for member in sorted(members, key=lambda p: p.relative_to(folder).parts):
        if _is_supported(member) and member.is_file():
            yield member.resolve()


def _empty_folder_reason(folder: Path, recursive: bool) -> str:
    if not os.access(folder, os.R_OK | os.X_OK):
        return "folder cannot be read (permission denied)"
    if not recursive and any(_folder_members(folder, True)):
        return "no PDF or image file in this folder (use -r to include subfolders)"
    return "no PDF or image file in this folder"


def _glob_members(pattern: str, recursive: bool) -> Iterator[Path]:
    for match in sorted(glob.glob(os.path.expanduser(pattern), recursive=recursive)):
        path = Path(match)
        if path.is_dir():
            yield from _folder_members(path, recursive)
        elif path.is_file() and _is_supported(path):
            yield path.resolve()


# --------------------------------------------------------------------------------------------
# Page ranges


class PageRanges:
    """A set of 1-based page numbers such as "1-3,7,10-" (open ends allowed: "10-", "-5")."""

    def __init__(self, ranges: Sequence[tuple[int, int | None]] = ()) -> None:
        self.ranges: tuple[tuple[int, int | None], ...] = tuple(ranges)

    @property
    def is_all(self) -> bool:
        return not self.ranges

    def select(self, page_count: int) -> list[int]:
        """The ascending, unique 1-based page numbers of a document with `page_count` pages that
        these ranges name (pages past the end are left out; may be empty)."""
        if self.is_all:
            return list(range(1, page_count + 1))
        chosen: set[int] = set()
        for start, end in self.ranges:
            last = page_count if end is None else min(end, page_count)
            chosen.update(range(start, last + 1))
        return sorted(chosen)

    def __str__(self) -> str:
        if self.is_all:
            return "all"
        parts = []
        for start, end in self.ranges:
            if end is None:
                parts.append(f"{start}-")
            elif start == end:
                parts.append(str(start))
            else:
                parts.append(f"{start}-{end}")
        return ",".join(parts)

    def __repr__(self) -> str:
        return f"PageRanges({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PageRanges) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)


_RANGE_ITEM = re.compile(r"^(\d+)?\s*(-)?\s*(\d+)?$")


def parse_page_ranges(spec: str | None) -> PageRanges:
    """Parse a 1-based page selection: "1-3,7,10-" (10 to the end), "-5" (1 to 5).

    None means every page. Raises ValueError with a one-line message on a bad spec.
    """
    if spec is None:
        return PageRanges()
    if not spec.strip():
        raise ValueError("empty page range (expected e.g. 1-3,7,10-)")
    ranges: list[tuple[int, int | None]] = []
    for raw in spec.split(","):
        item = raw.strip()
        match = _RANGE_ITEM.match(item)
        if not item or not match or not (match.group(1) or match.group(3)):
            raise ValueError(f"invalid page range {item!r} in {spec!r} (expected e.g. 1-3,7,10-)")
        first, dash, last = match.groups()
        start = int(first) if first else 1
        end: int | None = int(last) if last else (None if dash else start)
        if start < 1 or (end is not None and end < 1):
            raise ValueError(f"invalid page range {item!r} in {spec!r}: pages are numbered from 1")
        if end is not None and end < start:
            raise ValueError(f"invalid page range {item!r} in {spec!r}: {start} is after {end}")
        ranges.append((start, end))
    return PageRanges(ranges)


# --------------------------------------------------------------------------------------------
# Documents


@dataclass
class PageInfo:
    """A page as the user sees it: 1-based number, its label (/PageLabels) if any, and its size in
    points after /Rotate and the CropBox (None for images)."""

    number: int
    label: str | None
    width_pt: float | None
    height_pt: float | None


@dataclass
class RenderedPage:
    """A page as an RGB image. `dpi` is the effective dpi after the size limits (None for
    images)."""

    number: int
    image: Image.Image
    dpi: int | None
    info: PageInfo


class SourceDocument:
    """An open input document (PDF or image). Use as a context manager or call close()."""

    path: Path
    kind: str
    page_count: int

    def page_info(self, number: int) -> PageInfo:
        raise NotImplementedError

    def render(self, number: int, dpi: int) -> RenderedPage:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> SourceDocument:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _check_number(self, number: int) -> None:
        if not 1 <= number <= self.page_count:
            raise InputError(
                f"{self.path}: page {number} does not exist (the document has "
                f"{self.page_count} page{'s' if self.page_count != 1 else ''})"
            )


def open_source(path: Path, password: str | None = None) -> SourceDocument:
    """Open a PDF or image file. Raises InputError (one line, naming the file).

    A file with an image suffix goes to Pillow, anything else to PyMuPDF, which must find a real
    PDF in it (PyMuPDF also opens JPEG or DOCX files named .pdf: those are refused). A file
    without a known suffix is taken as a PDF or an image according to its content.
    `password` is ignored for documents that need none.
    """
    path = Path(path)
    head = _read_head(path)
    suffix = path.suffix.lower()
    if suffix in IMAGE_SUFFIXES and not _looks_like_pdf(head):
        return _ImageDocument(path)
    if suffix not in PDF_SUFFIXES and not _looks_like_pdf(head) and _is_image_content(path):
        return _ImageDocument(path)
    return _PdfDocument(path, password)


def _read_head(path: Path) -> bytes:
    try:
        with open(path, "rb") as f:
            head = f.read(1024)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a folder, not a file") from None
    except PermissionError:
        raise InputError(f"{path}: cannot be read (permission denied)") from None
    except OSError as error:
        raise InputError(f"{path}: cannot be read ({error.strerror or error})") from None
    if not head:
        raise InputError(f"{path}: empty file (0 bytes)")
    return head


def _looks_like_pdf(head: bytes) -> bool:
    return b"%PDF-" in head


def _is_image_content(path: Path) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Image.open(path) as image:
                return image.format in _IMAGE_FORMATS
    except Exception:
        return False


def _one_line(error: BaseException) -> str:
    text = " ".join(str(error).split())
    return _MUPDF_CODE.sub("", text) or type(error).__name__


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _quiet_mupdf() -> None:
    # MuPDF prints every warning and error; damaged files emit tens of thousands. Errors that
    # matter still reach us as exceptions, warnings are counted (see _drain_mupdf_warnings).
    pymupdf.TOOLS.mupdf_display_errors(False)
    pymupdf.TOOLS.mupdf_display_warnings(False)


def _drain_mupdf_warnings() -> tuple[int, str]:
    """Empty PyMuPDF's warning store (it grows without bound otherwise); return how many
    warnings there were and the first one."""
    text = pymupdf.TOOLS.mupdf_warnings(reset=True)
    if not text:
        return 0, ""
    return text.count("\n") + 1, text.split("\n", 1)[0]


def _capped_scale(width: float, height: float, scale: float, upscale: bool) -> float:
    """The scale (pixels per unit) closest to `scale` within the render size limits."""
    longest = max(width, height)
    if upscale and longest * scale < MIN_RENDER_SIDE_PX:
        scale = MIN_RENDER_SIDE_PX / longest
    if longest * scale > MAX_RENDER_SIDE_PX:
        scale = MAX_RENDER_SIDE_PX / longest
    if width * height * scale * scale > MAX_RENDER_PIXELS:
        scale = math.sqrt(MAX_RENDER_PIXELS / (width * height))
    return scale


def effective_dpi(width_pt: float, height_pt: float, dpi: int) -> int:
    """The dpi a page of this size (in points) is rendered at when `dpi` is asked for."""
    scale = _capped_scale(width_pt, height_pt, dpi / 72, upscale=True)
    if scale * 72 > dpi:  # raised for a tiny page: round up so it reaches the minimum
        return math.ceil(scale * 72 - 1e-9)
    return max(1, math.floor(scale * 72 + 1e-9))


class _PdfDocument(SourceDocument):
    kind = "pdf"

    def __init__(self, path: Path, password: str | None) -> None:
        self.path = path
        self.warning_count = 0
        _quiet_mupdf()
        _drain_mupdf_warnings()
        self._doc = self._open(password)
        try:
            self.page_count = self._doc.page_count
            if self.page_count == 0 and self._encrypted:
                # Some encrypted files report 0 pages unless opened afresh (pdf.js issue3371).
                self._doc.close()
                self._doc = self._open(password)
                self.page_count = self._doc.page_count
            if self.page_count == 0:
                if self._doc.is_repaired:
                    raise InputError(f"{path}: damaged PDF, no pages could be read")
                raise InputError(f"{path}: the PDF has no pages")
            self._label_rules = _label_rules(self._doc)
        except InputError:
            self.close()
            raise
        except Exception as error:
            self.close()
            raise InputError(f"{path}: damaged PDF, cannot be read: {_one_line(error)}") from None
        finally:
            self._note_warnings("opening")
        if self._doc.is_repaired:
            log.info("%s: damaged PDF, repaired by MuPDF", path)

    def _open(self, password: str | None) -> pymupdf.Document:
        path = self.path
        # The error is turned into a message outside the except block: a kept exception would
        # keep the half-opened document, and its file descriptor, alive through __context__.
        failure: str | None = None
        try:
            doc = pymupdf.open(path, filetype="pdf")
        except pymupdf.FileDataError:
            failure = "damaged PDF, MuPDF could not repair it"
        except Exception as error:
            failure = f"cannot be opened: {_one_line(error)}"
        if failure is not None:
            _drain_mupdf_warnings()
            if failure.startswith("damaged") and not _looks_like_pdf(_read_head(path)):
                failure = "not a PDF or supported image"
            raise InputError(f"{path}: {failure}")
        try:
            if not doc.is_pdf:
                raise InputError(f"{path}: {_not_pdf_reason(path, doc)}")
            self._encrypted = bool(doc.needs_pass)
            if doc.needs_pass:
                if password is None:
                    raise InputError(f"{path}: encrypted, a password is needed (--password)")
                if not _authenticate(doc, password):
                    raise InputError(f"{path}: wrong password")
        except BaseException:
            doc.close()
            raise
        return doc

    def _note_warnings(self, what: str) -> None:
        count, first = _drain_mupdf_warnings()
        if count:
            self.warning_count += count
            log.debug(
                "%s: %s while %s (first: %s)",
                self.path,
                _plural(count, "MuPDF warning"),
                what,
                first,
            )

    def _load_page(self, number: int) -> pymupdf.Page:
        self._check_number(number)
        try:
            return self._doc.load_page(number - 1)
        except Exception as error:
            raise InputError(
                f"{self.path}: page {number} cannot be rendered: {_one_line(error)}"
            ) from None

    def _info(self, page: pymupdf.Page, number: int) -> PageInfo:
        rect = page.rect
        label = _page_label(self._label_rules, number - 1) if self._label_rules else None
        return PageInfo(number=number, label=label, width_pt=rect.width, height_pt=rect.height)

    def page_info(self, number: int) -> PageInfo:
        try:
            return self._info(self._load_page(number), number)
        finally:
            self._note_warnings(f"reading page {number}")

    def render(self, number: int, dpi: int) -> RenderedPage:
        """Render page `number` (1-based) at `dpi`, within the size limits, honouring /Rotate and
        the CropBox; annotations and form fields are drawn."""
        if dpi <= 0:
            raise ValueError(f"dpi must be positive, not {dpi}")
        try:
            page = self._load_page(number)
            info = self._info(page, number)
            width, height = info.width_pt or 0.0, info.height_pt or 0.0
            if width < 0.01 or height < 0.01:
                raise InputError(f"{self.path}: page {number} cannot be rendered: empty page box")
            used_dpi = effective_dpi(width, height, dpi)
            zoom = used_dpi / 72
            if used_dpi == 1:  # a gigantic page: even 1 dpi is over the limits
                zoom = _capped_scale(width, height, zoom, upscale=False)
            try:
                pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
                image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples_mv)
            except Exception as error:
                raise InputError(
                    f"{self.path}: page {number} cannot be rendered: {_one_line(error)}"
                ) from None
            return RenderedPage(number=number, image=image, dpi=used_dpi, info=info)
        finally:
            self._note_warnings(f"rendering page {number}")

    def close(self) -> None:
        doc = getattr(self, "_doc", None)
        if doc is not None and not doc.is_closed:
            doc.close()


def _not_pdf_reason(path: Path, doc: pymupdf.Document) -> str:
    kind = (doc.metadata or {}).get("format") or "another format"
    if kind == "Image":
        try:
            with Image.open(path) as image:
                fmt = image.format
        except Exception:
            fmt = None
        if fmt in _IMAGE_FORMATS:
            return (
                f"not a PDF (the content is a {fmt} image; give the file an image suffix"
                " such as .png, .jpg or .tif to convert it)"
            )
    return f"not a PDF or supported image (opened as {kind})"


def _label_rules(doc: pymupdf.Document) -> list[tuple[int, str, str, int]]:
    """The document's /PageLabels as (first page index, style, prefix, first number), sorted."""
    try:
        raw = doc.get_page_labels()
    except Exception:
        return []
    rules = []
    for rule in raw:
        prefix = _decode_pdf_string(rule.get("prefix") or "")
        first = rule.get("firstpagenum") or 1
        rules.append((int(rule.get("startpage", 0)), rule.get("style") or "", prefix, int(first)))
    return sorted(rules)


def _decode_pdf_string(text: str) -> str:
    # PyMuPDF hands hex strings such as <FEFF0043> (UTF-16BE "C") over undecoded.
    match = re.fullmatch(r"<([0-9A-Fa-f\s]*)>", text)
    if not match:
        return text
    data = bytes.fromhex("".join(match.group(1).split()))
    if data.startswith(b"\xfe\xff"):
        return data[2:].decode("utf-16-be", errors="replace")
    return data.decode("latin-1")


def _page_label(rules: list[tuple[int, str, str, int]], index: int) -> str | None:
    """The label of the page at 0-based `index` (PDF 32000-1:2008, 12.4.2)."""
    current = None
    for rule in rules:
        if rule[0] > index:
            break
        current = rule
    if current is None:
        return None
    start, style, prefix, first = current
    number = first + index - start
    if style == "D":
        numeral = str(number)
    elif style in ("r", "R"):
        numeral = _roman(number)
        numeral = numeral.lower() if style == "r" else numeral
    elif style in ("a", "A") and number >= 1:
        letter = chr(ord("A") + (number - 1) % 26) * ((number - 1) // 26 + 1)
        numeral = letter.lower() if style == "a" else letter
    else:
        numeral = ""
    return (prefix + numeral) or None


def _roman(number: int) -> str:
    if number < 1:
        return str(number)
    parts = []
    for value, symbol in (
        (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
        (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
    ):  # fmt: skip
        count, number = divmod(number, value)
        parts.append(symbol * count)
    return "".join(parts)


def _authenticate(doc: pymupdf.Document, password: str) -> bool:
    # The same characters can come as composed or decomposed Unicode (macOS keyboards).
    tried: list[str] = []
    for candidate in (password, *(unicodedata.normalize(f, password) for f in ("NFC", "NFD"))):
        if candidate not in tried:
            tried.append(candidate)
            if doc.authenticate(candidate):
                return True
    return False


class _ImageDocument(SourceDocument):
    """A PNG, JPEG or TIFF file; every frame of a multi-frame TIFF is a page."""

    kind = "image"

    def __init__(self, path: Path) -> None:
        self.path = path
        self._image: Image.Image | None = None
        self._file = open(path, "rb")  # noqa: SIM115 - kept open for TIFF frames, see close()
        failure: str | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", Image.DecompressionBombWarning)
                self._image = Image.open(self._file)
        except UnidentifiedImageError:
            failure = "not a PDF or supported image"
        except Image.DecompressionBombError as error:
            failure = f"image too large ({_one_line(error)})"
        except Exception as error:
            failure = f"image cannot be read: {_one_line(error)}"
        if failure is None and self._image is not None and self._image.format not in _IMAGE_FORMATS:
            failure = f"{self._image.format} images are not supported (PNG, JPEG or TIFF)"
        if failure is not None or self._image is None:
            self.close()
            raise InputError(f"{path}: {failure}")
        self.page_count = getattr(self._image, "n_frames", 1) if self._image.format == "TIFF" else 1

    def page_info(self, number: int) -> PageInfo:
        self._check_number(number)
        return PageInfo(number=number, label=None, width_pt=None, height_pt=None)

    def render(self, number: int, dpi: int) -> RenderedPage:
        """The image (frame `number` of a TIFF) as RGB, upright per EXIF, scaled down to the size
        limits; `dpi` is not used (images are taken as they are)."""
        info = self.page_info(number)
        image = self._image
        assert image is not None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if self.page_count > 1:
                    image.seek(number - 1)
                target = _capped_size(image.size)
                if target != image.size and image.format == "JPEG":
                    image.draft("RGB", target)  # decode at 1/2, 1/4 or 1/8 scale when it can
                image.load()
                rgb = _to_rgb(ImageOps.exif_transpose(image))
                target = _capped_size(rgb.size)
                if target != rgb.size:
                    rgb = rgb.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        except Exception as error:
            raise InputError(
                f"{self.path}: page {number} cannot be rendered: {_one_line(error)}"
            ) from None
        return RenderedPage(number=number, image=rgb, dpi=None, info=info)

    def close(self) -> None:
        if self._image is not None:
            self._image.close()
            self._image = None
        if not self._file.closed:
            self._file.close()


def _capped_size(size: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    scale = _capped_scale(width, height, 1.0, upscale=False)
    if scale >= 1.0:
        return size
    return max(1, math.floor(width * scale)), max(1, math.floor(height * scale))


def _to_rgb(image: Image.Image) -> Image.Image:
    """Any Pillow mode to RGB: transparency on white, 16/32-bit and float grey scaled to 8 bits."""
    mode = image.mode
    if mode == "RGB":
        return image
    if mode == "P":
        image = image.convert("RGBA" if "transparency" in image.info else "RGB")
        mode = image.mode
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = image.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(background, rgba).convert("RGB")
    if mode.startswith("I") or mode == "F":
        grey = image.convert("F") if mode == "F" else image.convert("I")
        low, high = grey.getextrema()
        if high > 255:
            top = 65535 if high <= 65535 else high
            grey = grey.point(lambda v: v * (255 / top))
        elif mode == "F" and high <= 1.0:
            grey = grey.point(lambda v: v * 255)
        return grey.convert("L").convert("RGB")
    return image.convert("RGB")


# --------------------------------------------------------------------------------------------
# Rendering in worker processes

_CACHE_SIZE = 4
_cache: OrderedDict[tuple[str, str | None, int, int], SourceDocument] = OrderedDict()
_cache_lock = threading.Lock()


def render_page(path: str, number: int, dpi: int, password: str | None = None) -> RenderedPage:
    """Render one page of a file; a picklable function for worker processes (or threads).

    Keeps the last few documents open per process, so rendering the pages of a document one call
    at a time does not reopen it each time (a file changed on disk since is opened afresh).
    Threads of one process render one at a time: PyMuPDF is not thread-safe, use processes for
    parallel rendering. Raises InputError like `open_source` and `render`.
    """
    try:
        stat = os.stat(path)
        key = (str(path), password, stat.st_mtime_ns, stat.st_size)
    except OSError:
        key = (str(path), password, -1, -1)
    with _cache_lock:
        document = _cache.get(key)
        if document is None:
            document = open_source(Path(path), password)
            _cache[key] = document
            while len(_cache) > _CACHE_SIZE:
                _cache.popitem(last=False)[1].close()
        else:
            _cache.move_to_end(key)
        return document.render(number, dpi)


def close_cached_documents() -> None:
    """Close the documents `render_page` keeps open in this process."""
    with _cache_lock:
        while _cache:
            _cache.popitem()[1].close()
