"""The PDF's own text layer: a page's words (PyMuPDF), the text inside a block's box, and whether
that text can be trusted.

Born-digital PDFs carry their text; comparing it with the model's text of a block tells whether
the model read the block right (`--text-layer verify`). The text inside a box is the page's words
whose centre lies in the box (grown by `TOLERANCE` of the page size, as the model's boxes are a
little loose), in MuPDF's reading order, ligatures expanded (MuPDF does it when asked not to keep
them) and line-end hyphens removed. The text is *trusted* only when nothing says it differs from
what the page shows: no words, invisible words (render mode 3: an OCR layer under a scan), glyphs
with no Unicode (U+FFFD, private-use), math or symbol fonts and math characters, words cut by
the box's edge, or too little text for the box's size all make it untrusted, with the reason.
"""

from __future__ import annotations

import contextlib
import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from rapidfuzz.distance import Indel

from hpdparse.hpd.labels import (
    ROLE_CAPTION,
    ROLE_FOOTER,
    ROLE_FOOTNOTE,
    ROLE_HEADER,
    ROLE_HEADING,
    ROLE_TEXT,
    ROLE_TITLE,
)
from hpdparse.sources.location import source_location
from hpdparse.sources.mupdf import pymupdf
from hpdparse.sources.open import open_source
from hpdparse.sources.pdf import PdfDocument

log = logging.getLogger(__name__)

# The blocks whose content is plain text, checked against the text layer (list items are text).
TEXT_ROLES = frozenset(
    {ROLE_TEXT, ROLE_TITLE, ROLE_HEADING, ROLE_CAPTION, ROLE_FOOTNOTE, ROLE_HEADER, ROLE_FOOTER}
)
GRID = 1000  # HPD boxes are on a 0-1000 grid of the page image
TOLERANCE = 0.003  # a box grows by this share of the page's size (a line is ~0.012 of a page)
MIN_DENSITY = 0.08  # the words' area over the box's below it: the box holds more than this text

INVISIBLE, BAD_GLYPH, MATH = 1, 2, 4  # Word.flags
# Characters with no usable Unicode: U+FFFD, private use, control characters.
_BAD_GLYPHS = re.compile("[\ufffd\ue000-\uf8ff\U000f0000-\U0010ffff\x00-\x1f]")
# Inline math the model writes as LaTeX (x², ±, ÷): the file's characters would differ from it.
_MATH_CHARS = re.compile(
    "[²³¹±×÷√∞≤≥≠≈\u2070-\u209f\u2200-\u22ff\u27c0-\u27ef\U0001d400-\U0001d7ff]"
)
_MATH_FONT = re.compile(r"math|symbol|^cm(mi|sy|ex|bsy)|^msam|^msbm|^eufm|^rsfs|^stix", re.I)
_FLAGS = pymupdf.TEXTFLAGS_DICT & ~pymupdf.TEXT_PRESERVE_LIGATURES & ~pymupdf.TEXT_PRESERVE_IMAGES


@dataclass(frozen=True)
class Word:
    """A word of the page: its text, its box in points of the page as displayed (rotation and
    CropBox applied, origin at the top left), its line in reading order, and `flags`."""

    text: str
    bbox: tuple[float, float, float, float]
    line: int
    flags: int = 0


@dataclass(frozen=True)
class PageText:
    """The words of one page and the page's size in points (as displayed)."""

    width: float
    height: float
    words: tuple[Word, ...]

    @cached_property
    def line_lengths(self) -> Counter[int]:
        """The number of words on each line."""
        return Counter(word.line for word in self.words)


@dataclass(frozen=True)
class BoxText:
    """The text layer inside one block's box: `text` ("" when there is none), whether it can
    stand for the block's content (`trusted`) and, when not, why (`reason`)."""

    text: str
    trusted: bool
    reason: str | None
    words: int


def page_text(page: pymupdf.Page) -> PageText:
    """The words of a PyMuPDF page (one text extraction: ~15 ms for a dense page)."""
    matrix = page.rotation_matrix
    words: list[Word] = []
    line_no = 0
    for block in page.get_text("dict", flags=_FLAGS)["blocks"]:
        for line in block.get("lines", ()):
            for span in line["spans"]:
                words.extend(_span_words(span, line_no, matrix))
            line_no += 1
    return PageText(float(page.rect.width), float(page.rect.height), tuple(words))


def _span_words(span: dict, line: int, matrix: pymupdf.Matrix) -> Iterable[Word]:
    """A span's words, each given its share of the span's box by its characters' positions."""
    text = span["text"]
    if not text.strip():
        return
    x0, y0, x1, y1 = pymupdf.Rect(span["bbox"]) * matrix
    flags = INVISIBLE if span.get("alpha", 255) == 0 else 0
    font = span.get("font", "").split("+", 1)[-1]  # without a subset prefix: ABCDEF+CMMI10
    if _MATH_FONT.search(font):
        flags |= MATH
    wide = (x1 - x0) >= (y1 - y0) or len(text) == 1  # horizontal text (rotated pages: vertical)
    for match in re.finditer(r"\S+", text):
        a, b = match.start() / len(text), match.end() / len(text)
        if wide:
            box = (x0 + a * (x1 - x0), y0, x0 + b * (x1 - x0), y1)
        else:
            box = (x0, y0 + a * (y1 - y0), x1, y0 + b * (y1 - y0))
        yield Word(match.group(), box, line, flags | _char_flags(match.group()))


def _char_flags(text: str) -> int:
    flags = BAD_GLYPH if _BAD_GLYPHS.search(text) else 0
    return flags | MATH if _MATH_CHARS.search(text) else flags


def read_page_texts(path: str | Path, numbers: Iterable[int]) -> dict[int, PageText]:
    """The text layer of pages `numbers` (1-based) of the PDF at `path` (a file or URL). Best
    effort: a file that is not a PDF, cannot be opened (or needs a password) or a page that
    cannot be read gives no entry, so its blocks are recorded as not checked."""
    out: dict[int, PageText] = {}
    try:
        with open_source(source_location(str(path))) as document:
            if not isinstance(document, PdfDocument):
                return out
            doc = document.pymupdf_document
            for number in numbers:
                with contextlib.suppress(Exception):
                    out[number] = page_text(doc.load_page(number - 1))
    except Exception as exc:  # no text layer is not an error: the blocks stay unchecked
        log.debug("%s: no text layer read: %s", path, exc)
    return out


def box_text(page: PageText, bbox: tuple[int, int, int, int]) -> BoxText:
    """The text layer inside `bbox` (0-1000 grid of the page image) and whether it is trusted."""
    sx, sy = page.width / GRID, page.height / GRID
    box = (bbox[0] * sx, bbox[1] * sy, bbox[2] * sx, bbox[3] * sy)
    dx, dy = TOLERANCE * page.width, TOLERANCE * page.height
    grown = (box[0] - dx, box[1] - dy, box[2] + dx, box[3] + dy)
    gx0, gy0, gx1, gy1 = grown
    inside, near = [], []
    for word in page.words:
        x0, y0, x1, y1 = word.bbox
        if gx0 <= (x0 + x1) / 2 <= gx1 and gy0 <= (y0 + y1) / 2 <= gy1:
            inside.append(word)
        elif x1 > gx0 and x0 < gx1 and y1 > gy0 and y0 < gy1:
            near.append(word)  # outside, but touching the box
    # Cut: a word outside on a line the box holds, or with a quarter of it in the box.
    in_box = Counter(word.line for word in inside)
    cut = any(page.line_lengths[line] > count for line, count in in_box.items()) or any(
        _overlap(w.bbox, grown) > 0.25 for w in near
    )
    return BoxText(join_words(inside), *_trust(inside, cut, box), len(inside))


def _trust(words: list[Word], cut: bool, box: tuple[float, ...]) -> tuple[bool, str | None]:
    if not words:
        return False, "text crosses the box edge" if cut else "no text"
    flags = 0
    for word in words:
        flags |= word.flags
    if flags & INVISIBLE:
        return False, "invisible text (an OCR layer)"
    if flags & BAD_GLYPH:
        return False, "glyphs without Unicode"
    if flags & MATH:
        return False, "math or symbol font"
    if cut:
        return False, "text crosses the box edge"
    area = max((box[2] - box[0]) * (box[3] - box[1]), 1e-6)
    covered = sum((w.bbox[2] - w.bbox[0]) * (w.bbox[3] - w.bbox[1]) for w in words)
    if covered / area < MIN_DENSITY:
        return False, "too little text for the box"
    return True, None


def _overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    """The share of box `a`'s area that lies in box `b`."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    area = (a[2] - a[0]) * (a[3] - a[1])
    return w * h / area if w > 0 and h > 0 and area > 0 else 0.0


def join_words(words: list[Word]) -> str:
    """Words in reading order joined by spaces; a word that ends its line with a hyphen joins
    the next line's first word when that one starts in lower case ("exam-" "ple": "example")."""
    parts: list[str] = []
    for word, after in zip(words, [*words[1:], None], strict=False):
        text = word.text
        line_end = after is not None and after.line != word.line
        if line_end and text[-1:] in "-\u00ad" and len(text) > 1 and after.text[:1].islower():
            parts.append(text[:-1])
        else:
            parts.append(text + (" " if after is not None else ""))
    return "".join(parts)


_SAME = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-", "\u00ad": ""})


def normalized(text: str) -> str:
    """Text as compared: NFKC (ligatures, full-width forms), quotes and dashes plain, soft
    hyphens gone, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).translate(_SAME).split())


def similarity(a: str, b: str) -> float:
    """How alike two texts are, 0-1 after `normalized`: the normalized Indel similarity (2 x
    the longest common subsequence over both lengths)."""
    return Indel.normalized_similarity(normalized(a), normalized(b))
