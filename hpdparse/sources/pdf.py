"""PDF files, and the other documents MuPDF opens (EPUB, XPS, MOBI, FB2, CBZ, SVG), through
PyMuPDF: opening (MuPDF repairs damaged PDFs), passwords, rasterizing."""

from __future__ import annotations

import logging
import unicodedata
from pathlib import Path

from PIL import Image

from hpdparse.errors import InputError
from hpdparse.sources.document import (
    Content,
    PageGeometry,
    SourceDocument,
    capped_scale,
    effective_dpi,
    image_format,
    looks_like_pdf,
    one_line_error,
    plural,
    read_head,
)
from hpdparse.sources.labels import label_rules, page_label
from hpdparse.sources.mupdf import pymupdf

log = logging.getLogger(__name__)


def _drain_mupdf_warnings() -> tuple[int, str]:
    """Empty PyMuPDF's warning store (it grows without bound otherwise); return how many
    warnings there were and the first one."""
    text = pymupdf.TOOLS.mupdf_warnings(reset=True)
    if not text:
        return 0, ""
    return text.count("\n") + 1, text.split("\n", 1)[0]


class PdfDocument(SourceDocument):
    kind = "pdf"

    def __init__(
        self, path: Path, password: str | None, content: Content = None, filetype: str = "pdf"
    ) -> None:
        """`content`: what to open instead of the file at `path` (`document.Content`);
        `filetype`: PyMuPDF's name of the format (`document.MUPDF_FILETYPES`), "pdf" by default,
        which must then be what the content is."""
        self.path = path
        self._content = content
        self._filetype = filetype
        self._what = "PDF" if filetype == "pdf" else filetype.upper()
        self._as_pdf: pymupdf.Document | None = None
        self.warning_count = 0
        # MuPDF prints every warning and error; damaged files emit tens of thousands. Errors that
        # matter still reach us as exceptions, warnings are counted (see _drain_mupdf_warnings).
        pymupdf.TOOLS.mupdf_display_errors(False)
        pymupdf.TOOLS.mupdf_display_warnings(False)
        _drain_mupdf_warnings()
        self._doc = self._open(password)
        try:
            self.page_count = self._doc.page_count
            if self.page_count == 0 and self._encrypted:
                # Some encrypted files report 0 pages unless opened afresh (pdf.js issue3371).
                self._doc.close()
                self._doc = self._open(password)
                self.page_count = self._doc.page_count
            if self.page_count == 0 and self._doc.is_repaired:
                raise self._error(f"damaged {self._what}, no pages could be read")
            if self.page_count == 0:
                raise self._error(f"the {self._what} has no pages")
            self.label_rules = label_rules(self._doc)
        except InputError:
            self.close()
            raise
        except Exception as error:
            self.close()
            raise self._error(
                f"damaged {self._what}, cannot be read: {one_line_error(error)}"
            ) from None
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
            content, filetype = self._content, self._filetype
            if isinstance(content, bytes):
                doc = pymupdf.open(stream=content, filetype=filetype)
            else:
                doc = pymupdf.open(content or path, filetype=filetype)
        except pymupdf.FileDataError:
            verb = "repair" if filetype == "pdf" else "read"
            failure = f"damaged {self._what}, MuPDF could not {verb} it"
        except Exception as error:
            failure = f"cannot be opened: {one_line_error(error)}"
        if failure is not None:
            _drain_mupdf_warnings()
            if (
                failure.startswith("damaged")
                and filetype == "pdf"
                and not looks_like_pdf(read_head(path, self._content))
            ):
                failure = "not a PDF or supported image"
            raise self._error(failure)
        try:
            if filetype == "pdf" and not doc.is_pdf:
                raise self._error(self._not_pdf_reason(doc))
            self._encrypted = bool(doc.needs_pass)
            if doc.needs_pass:
                if password is None:
                    raise self._error("encrypted, a password is needed (--password)")
                if not _authenticate(doc, password):
                    raise self._error("wrong password")
        except BaseException:
            doc.close()
            raise
        return doc

    @property
    def pymupdf_document(self) -> pymupdf.Document:
        """The open (and authenticated) PyMuPDF document as a PDF, to copy pages from (another
        format is converted once, by MuPDF); it is closed with this object."""
        if self._doc.is_pdf:
            return self._doc
        if self._as_pdf is None:
            self._as_pdf = pymupdf.open("pdf", self._doc.convert_to_pdf())
        return self._as_pdf

    def _note_warnings(self, what: str) -> None:
        count, first = _drain_mupdf_warnings()
        if count:
            self.warning_count += count
            warnings = plural(count, "MuPDF warning")
            log.debug("%s: %s while %s (first: %s)", self.path, warnings, what, first)

    def rasterize(self, number: int, dpi: int) -> tuple[Image.Image, PageGeometry]:
        """Render page `number` (1-based) at `dpi`, within the size limits, honouring /Rotate and
        the CropBox; annotations and form fields are drawn."""
        if dpi <= 0:
            raise ValueError(f"dpi must be positive, not {dpi}")
        self._check_number(number)
        try:
            page = self._doc.load_page(number - 1)
            width, height = page.rect.width, page.rect.height
            if width < 0.01 or height < 0.01:
                raise self._page_error(number, "empty page box")
            used_dpi = effective_dpi(width, height, dpi)
            zoom = used_dpi / 72
            if used_dpi == 1:  # a gigantic page: even 1 dpi is over the limits
                zoom = capped_scale(width, height, zoom, upscale=False)
            pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
            image = Image.frombytes("RGB", (pix.width, pix.height), pix.samples_mv)
        except InputError:
            raise
        except Exception as error:  # MuPDF's, on this page: the page fails, not the document
            raise self._page_error(number, one_line_error(error)) from None
        finally:
            self._note_warnings(f"rasterizing page {number}")
        label = page_label(self.label_rules, number - 1) if self.label_rules else None
        return image, PageGeometry(image.width, image.height, used_dpi, label, width, height)

    def _not_pdf_reason(self, doc: pymupdf.Document) -> str:
        kind = (doc.metadata or {}).get("format") or "another format"
        fmt = image_format(self.path, self._content) if kind == "Image" else None
        if fmt is not None:
            return (
                f"not a PDF (the content is a {fmt} image; give the file an image suffix"
                " such as .png, .jpg or .tif to convert it)"
            )
        return f"not a PDF or supported image (opened as {kind})"

    def close(self) -> None:
        for doc in (getattr(self, "_doc", None), getattr(self, "_as_pdf", None)):
            if doc is not None and not doc.is_closed:
                doc.close()


def _authenticate(doc: pymupdf.Document, password: str) -> bool:
    # The same characters can come as composed or decomposed Unicode (macOS keyboards).
    forms = (unicodedata.normalize(form, password) for form in ("NFC", "NFD"))
    return any(doc.authenticate(candidate) for candidate in dict.fromkeys((password, *forms)))
