"""Deterministic synthetic documents and their exact HPD ground-truth streams.

Every block is laid out here with PyMuPDF (base-14 fonts, vector shapes), and its box is the
extent of what was actually drawn, measured with the same font metrics MuPDF uses when it
extracts text. Boxes go on the HPD 0-1000 grid (x by page width, y by page height), rounded
outwards so that the box always encloses the drawing.

Stream grammar (see docs/hpd-model.md): ``<BLOCK>label [x1, y1, x2, y2]<CHILD>content`` per
block, no whitespace between blocks, blocks in reading order. Conventions shared with the
Markdown converter:

- ``list`` is a container without ``<CHILD>``, followed by one ``text`` block per item; the
  bullet is a drawn dot outside the item box and not part of the item text.
- ``table`` content is HTML (``<table><tr><td>..</td></tr></table>``, quoted span attributes).
- ``equation`` content is ``\\[\\nLATEX\\n\\]``; inline math inside ``text`` is ``\\( LATEX \\)``.
- ``image`` is a drawn figure without ``<CHILD>``; its caption is a separate ``image_caption``.
- A paragraph cut at a page bottom ends with a hyphenated word fragment (``infor-``); the
  next page's first ``text`` block continues it in lowercase (``mation ...``).

Run ``python -m tests.tinymodel.synth`` from the repository root to regenerate ``samples/`` and
``tests/fixtures/streams/`` in place.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pymupdf

BLOCK = "<BLOCK>"
CHILD = "<CHILD>"

A4 = (595.0, 842.0)
LETTER = (612.0, 792.0)

REGULAR = "helv"
BOLD = "hebo"

SCAN_DPI = 100
SCAN_SOURCE = "memo"
SCAN_STEM = "scan"

# A small, repetitive vocabulary keeps the tiny model's tokenizer small.
# fmt: off
VOCAB = (
    "the", "a", "data", "model", "page", "table", "text", "value", "result", "system", "report",
    "group", "rate", "test", "score", "line", "method", "study", "of", "and", "for", "with", "in",
    "on", "to", "is", "are", "can", "show", "use", "each", "new", "small", "large", "simple",
    "clear", "first", "second", "more", "less", "high", "low", "time", "year", "size", "set",
    "part", "form", "level",
)
# fmt: on
# Long words with their syllable breaks, used to hyphenate a paragraph across a page break.
HYPHENATED = (
    ("in", "for", "ma", "tion"),
    ("pro", "cess", "ing"),
    ("eval", "u", "a", "tion"),
    ("doc", "u", "ment"),
    ("mea", "sure", "ment"),
)


@dataclass(frozen=True)
class Block:
    """One ground-truth block.

    ``content`` is what follows ``<CHILD>`` in the stream (None for blocks without a child:
    ``image``, ``list``). ``drawn`` holds the strings actually drawn inside the box (lines of
    text, table cells), so a check can find them on the page; empty for pure drawings.
    """

    label: str
    bbox: tuple[int, int, int, int]
    content: str | None
    drawn: tuple[str, ...] = ()


@dataclass(frozen=True)
class SamplePage:
    """The ground truth of one generated page (page numbers are 1-based)."""

    stem: str
    page: int
    stream: str
    blocks: tuple[Block, ...]
    size_pt: tuple[float, float]


def format_stream(blocks: Sequence[Block]) -> str:
    """Splice blocks into the final HPD text, exactly as a parent plus its children would."""
    parts = []
    for block in blocks:
        x1, y1, x2, y2 = block.bbox
        parts.append(f"{BLOCK}{block.label} [{x1}, {y1}, {x2}, {y2}]")
        if block.content is not None:
            parts.append(f"{CHILD}{block.content}")
    return "".join(parts)


# ---------------------------------------------------------------- text generation


class Words:
    """Seeded pseudo-English built from VOCAB."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def words(self, n: int) -> list[str]:
        return [self.rng.choice(VOCAB) for _ in range(n)]

    def sentence(self, low: int = 6, high: int = 10) -> str:
        words = self.words(self.rng.randint(low, high))
        return " ".join([words[0].capitalize(), *words[1:]]) + "."

    def sentences(self, n: int, low: int = 6, high: int = 10) -> str:
        return " ".join(self.sentence(low, high) for _ in range(n))


# ---------------------------------------------------------------- page composition


@dataclass
class Style:
    font: str = REGULAR
    size: float = 10.0
    leading: float = 1.35  # line pitch as a multiple of the font size

    @property
    def pitch(self) -> float:
        return self.size * self.leading

    @property
    def ascent(self) -> float:
        return self.size * _ascender(self.font)

    @property
    def descent(self) -> float:
        return -self.size * _descender(self.font)


_FONT_CACHE: dict[str, pymupdf.Font] = {}


def _font(name: str) -> pymupdf.Font:
    if name not in _FONT_CACHE:
        _FONT_CACHE[name] = pymupdf.Font(name)
    return _FONT_CACHE[name]


def _ascender(font: str) -> float:
    return _font(font).ascender


def _descender(font: str) -> float:
    return _font(font).descender


def text_width(text: str, style: Style) -> float:
    # Summed per character: pymupdf.get_text_length under-measures some strings with
    # non-ASCII glyphs (e.g. it drops a space's width in "ab x\u00b2 cd"), and insert_text
    # applies no kerning, so the sum is the drawn width.
    return sum(_char_width(ch, style.font) for ch in text) * style.size


_WIDTH_CACHE: dict[tuple[str, str], float] = {}


def _char_width(ch: str, font: str) -> float:
    key = (ch, font)
    if key not in _WIDTH_CACHE:
        _WIDTH_CACHE[key] = pymupdf.get_text_length(ch, fontname=font, fontsize=1)
    return _WIDTH_CACHE[key]


def wrap(words: Sequence[str], width: float, style: Style) -> list[str]:
    """Greedy line breaking of words into lines no wider than width."""
    lines: list[str] = []
    line = ""
    for word in words:
        candidate = f"{line} {word}" if line else word
        if line and text_width(candidate, style) > width:
            lines.append(line)
            line = word
        else:
            line = candidate
    if line:
        lines.append(line)
    return lines


def _union(rects: Sequence[pymupdf.Rect]) -> pymupdf.Rect:
    out = pymupdf.Rect(rects[0])
    for r in rects[1:]:
        out |= r
    return out


@dataclass
class Column:
    x0: float
    x1: float

    @property
    def width(self) -> float:
        return self.x1 - self.x0


@dataclass
class Spacing:
    """Scales of the vertical gaps, per (page number, flow name).

    A first layout pass with no scales records, for each flow (a column of blocks that should
    reach a limit, e.g. the top of a block pinned to the page bottom), the sum of its gaps and
    the room left; fitted() turns that into scales so the second pass fills the room.
    """

    scales: dict[tuple[int, str], float] = field(default_factory=dict)
    composers: list[Composer] = field(default_factory=list)

    def new_page(
        self, doc: pymupdf.Document, stem: str, number: int, size: tuple[float, float]
    ) -> Composer:
        composer = Composer(doc.new_page(width=size[0], height=size[1]), stem, number, self)
        self.composers.append(composer)
        return composer

    def fitted(self, max_scale: float = 3.0) -> Spacing:
        scales = {}
        for c in self.composers:
            for flow, room in c.room.items():
                gaps = c.gap_total.get(flow, 0.0)
                if gaps > 0 and room > 0:
                    scales[(c.number, flow)] = min(max_scale, 1 + room / gaps)
        return Spacing(scales)


@dataclass
class Composer:
    """Draws blocks on one page, in reading order, and records their exact extents."""

    page: pymupdf.Page
    stem: str
    number: int
    spacing: Spacing | None = None
    blocks: list[Block] = field(default_factory=list)
    gap_total: dict[str, float] = field(default_factory=dict)
    room: dict[str, float] = field(default_factory=dict)

    def gap(self, points: float, flow: str = "main") -> float:
        """A vertical gap of a flow, stretched by the fitted spacing."""
        self.gap_total[flow] = self.gap_total.get(flow, 0.0) + points
        scale = self.spacing.scales.get((self.number, flow), 1.0) if self.spacing else 1.0
        return points * scale

    def end_flow(self, y: float, limit: float, flow: str = "main") -> None:
        """The flow ended at y and may grow down to limit."""
        self.room[flow] = limit - y

    @property
    def width(self) -> float:
        return self.page.rect.width

    @property
    def height(self) -> float:
        return self.page.rect.height

    def record(
        self, label: str, rect: pymupdf.Rect, content: str | None, drawn: Sequence[str] = ()
    ) -> None:
        self.blocks.append(Block(label, self.grid_box(rect), content, tuple(drawn)))

    def grid_box(self, rect: pymupdf.Rect) -> tuple[int, int, int, int]:
        """Points -> 0-1000 grid, rounded outwards, clamped to the page."""

        def clamp(v: int) -> int:
            return max(0, min(1000, v))

        x1 = clamp(math.floor(rect.x0 / self.width * 1000))
        y1 = clamp(math.floor(rect.y0 / self.height * 1000))
        x2 = clamp(math.ceil(rect.x1 / self.width * 1000))
        y2 = clamp(math.ceil(rect.y1 / self.height * 1000))
        return x1, y1, x2, y2

    def result(self) -> SamplePage:
        blocks = tuple(self.blocks)
        return SamplePage(
            self.stem, self.number, format_stream(blocks), blocks, (self.width, self.height)
        )

    # -- drawing primitives; y arguments are the top of the drawn extent

    def draw_lines(
        self,
        lines: Sequence[str],
        x: float,
        top: float,
        style: Style,
        align: str = "left",
        width: float = 0.0,
    ) -> pymupdf.Rect:
        rects = []
        baseline = top + style.ascent
        for line in lines:
            w = text_width(line, style)
            if align == "center":
                lx = x + (width - w) / 2
            elif align == "right":
                lx = x + width - w
            else:
                lx = x
            self.page.insert_text((lx, baseline), line, fontname=style.font, fontsize=style.size)
            rects.append(
                pymupdf.Rect(lx, baseline - style.ascent, lx + w, baseline + style.descent)
            )
            baseline += style.pitch
        return _union(rects)

    def text_block(
        self,
        label: str,
        lines: Sequence[str],
        col: Column,
        top: float,
        style: Style,
        align: str = "left",
        content: str | None = None,
    ) -> pymupdf.Rect:
        rect = self.draw_lines(lines, col.x0, top, style, align, col.width)
        self.record(label, rect, " ".join(lines) if content is None else content, lines)
        return rect

    def paragraph(
        self,
        text: str,
        col: Column,
        top: float,
        style: Style,
        label: str = "text",
        align: str = "left",
    ) -> pymupdf.Rect:
        lines = wrap(text.split(), col.width, style) if align == "left" else [text]
        return self.text_block(label, lines, col, top, style, align, content=text)

    def math_paragraph(
        self, pieces: Sequence[tuple[str, str | None]], col: Column, top: float, style: Style
    ) -> pymupdf.Rect:
        """A paragraph with inline math: pieces are (drawn text, LaTeX or None for prose).

        Each math piece is drawn as its plain-glyph rendering and written as ``\\( LATEX \\)``.
        A math piece is kept as one unbreakable word.
        """
        words: list[str] = []
        content: list[str] = []
        for drawn, latex in pieces:
            if latex is None:
                words.extend(drawn.split())
                content.append(drawn)
            else:
                words.append(drawn.replace(" ", "\u00a0"))
                content.append(f"\\( {latex} \\)")
        lines = [line.replace("\u00a0", " ") for line in wrap(words, col.width, style)]
        rect = self.draw_lines(lines, col.x0, top, style)
        self.record("text", rect, " ".join(content), lines)
        return rect

    def bullet_list(
        self, items: Sequence[str], col: Column, top: float, style: Style, gap: float
    ) -> pymupdf.Rect:
        """A bulleted list: a ``list`` container, then one ``text`` block per item."""
        indent = style.size * 1.4
        radius = style.size * 0.18
        item_col = Column(col.x0 + indent, col.x1)
        item_blocks: list[Block] = []
        rects = []
        y = top
        for item in items:
            lines = wrap(item.split(), item_col.width, style)
            rect = self.draw_lines(lines, item_col.x0, y, style)
            center = pymupdf.Point(col.x0 + radius + 1, y + style.ascent - style.size * 0.33)
            self.page.draw_circle(center, radius, color=(0, 0, 0), fill=(0, 0, 0))
            dot = pymupdf.Rect(
                center.x - radius, center.y - radius, center.x + radius, center.y + radius
            )
            rects.extend([rect, dot])
            item_blocks.append(Block("text", self.grid_box(rect), item, tuple(lines)))
            y = rect.y1 + gap
        outer = _union(rects)
        self.record("list", outer, None)
        self.blocks.extend(item_blocks)
        return outer

    def equation(
        self,
        segments: Sequence[tuple[str, str]],
        latex: str,
        col: Column,
        top: float,
        style: Style,
    ) -> pymupdf.Rect:
        """Display math drawn with plain glyphs, centred in the column.

        segments: (text, kind) with kind "base", "sup" or "sub".
        """
        small = Style(style.font, style.size * 0.7)
        parts = []
        for text, kind in segments:
            st = style if kind == "base" else small
            parts.append((text, kind, st, text_width(text, st)))
        total = sum(w for *_, w in parts)
        x = col.x0 + (col.width - total) / 2
        baseline = top + style.ascent + style.size * 0.3  # room for superscripts
        rects = []
        for text, kind, st, w in parts:
            shift = {"base": 0.0, "sup": -style.size * 0.38, "sub": style.size * 0.22}[kind]
            b = baseline + shift
            self.page.insert_text((x, b), text, fontname=st.font, fontsize=st.size)
            rects.append(pymupdf.Rect(x, b - st.ascent, x + w, b + st.descent))
            x += w
        rect = _union(rects)
        self.record("equation", rect, f"\\[\n{latex}\n\\]")
        return rect

    def fraction_equation(
        self,
        left: str,
        numerator: str,
        denominator: str,
        latex: str,
        col: Column,
        top: float,
        style: Style,
    ) -> pymupdf.Rect:
        """Display math ``left numerator/denominator`` with a drawn fraction bar."""
        lw = text_width(left + " ", style)
        fw = max(text_width(numerator, style), text_width(denominator, style)) + 4
        x = col.x0 + (col.width - lw - fw) / 2
        num_top = top
        bar_y = num_top + style.ascent + style.descent + 2
        den_top = bar_y + 2
        mid_baseline = bar_y + style.size * 0.33
        rects = [
            self.draw_lines([left], x, mid_baseline - style.ascent, style),
            self.draw_lines(
                [numerator], x + lw + (fw - text_width(numerator, style)) / 2, num_top, style
            ),
            self.draw_lines(
                [denominator],
                x + lw + (fw - text_width(denominator, style)) / 2,
                den_top,
                style,
            ),
        ]
        self.page.draw_line((x + lw, bar_y), (x + lw + fw, bar_y), color=(0, 0, 0), width=0.8)
        rect = _union(rects)
        self.record("equation", rect, f"\\[\n{latex}\n\\]")
        return rect

    @staticmethod
    def row_height(style: Style) -> float:
        return style.size * 1.9

    def table(
        self,
        rows: Sequence[Sequence[Cell]],
        col_widths: Sequence[float],
        x: float,
        top: float,
        style: Style,
    ) -> pymupdf.Rect:
        """A ruled table; content is HTML with rowspan/colspan where cells span."""
        row_h = self.row_height(style)
        occupied: set[tuple[int, int]] = set()
        cells: list[tuple[Cell, int, int]] = []
        for r, row in enumerate(rows):
            c = 0
            for cell in row:
                while (r, c) in occupied:
                    c += 1
                for dr in range(cell.rowspan):
                    for dc in range(cell.colspan):
                        occupied.add((r + dr, c + dc))
                cells.append((cell, r, c))
                c += cell.colspan
        edges = [x]
        for w in col_widths:
            edges.append(edges[-1] + w)
        drawn = []
        for cell, r, c in cells:
            rect = pymupdf.Rect(
                edges[c],
                top + r * row_h,
                edges[c + cell.colspan],
                top + (r + cell.rowspan) * row_h,
            )
            self.page.draw_rect(rect, color=(0, 0, 0), width=0.6)
            text_top = (rect.y0 + rect.y1) / 2 - (style.ascent + style.descent) / 2
            self.draw_lines([cell.text], rect.x0 + 4, text_top, style)
            drawn.append(cell.text)
        outer = pymupdf.Rect(edges[0], top, edges[-1], top + len(rows) * row_h)
        self.record("table", outer, table_html(rows), drawn)
        return outer

    def bar_chart(self, rect: pymupdf.Rect, values: Sequence[float]) -> pymupdf.Rect:
        """A small drawn figure: frame, axes and filled bars. Recorded as ``image``."""
        self.page.draw_rect(rect, color=(0.4, 0.4, 0.4), width=0.8)
        pad = 12
        origin = pymupdf.Point(rect.x0 + pad, rect.y1 - pad)
        self.page.draw_line(origin, (rect.x1 - pad, origin.y), color=(0, 0, 0), width=1)
        self.page.draw_line(origin, (origin.x, rect.y0 + pad), color=(0, 0, 0), width=1)
        span = rect.width - 2 * pad
        slot = span / len(values)
        top_h = rect.height - 2 * pad - 4
        for i, v in enumerate(values):
            bx = origin.x + i * slot + slot * 0.2
            bar = pymupdf.Rect(bx, origin.y - top_h * v, bx + slot * 0.6, origin.y)
            shade = 0.25 + 0.5 * (i % 2)
            self.page.draw_rect(bar, color=(0, 0, 0), fill=(shade, shade, shade), width=0.5)
        for k in range(1, 4):  # light grid lines
            gy = origin.y - top_h * k / 4
            self.page.draw_line(
                (origin.x, gy), (rect.x1 - pad, gy), color=(0.8, 0.8, 0.8), width=0.4
            )
        self.record("image", rect, None)
        return rect


@dataclass(frozen=True)
class Cell:
    text: str
    rowspan: int = 1
    colspan: int = 1


def table_html(rows: Sequence[Sequence[Cell]]) -> str:
    out = ["<table>"]
    for row in rows:
        out.append("<tr>")
        for cell in row:
            attrs = ""
            if cell.rowspan > 1:
                attrs += f' rowspan="{cell.rowspan}"'
            if cell.colspan > 1:
                attrs += f' colspan="{cell.colspan}"'
            out.append(f"<td{attrs}>{cell.text}</td>")
        out.append("</tr>")
    out.append("</table>")
    return "".join(out)


def hyphenated_break(
    words: Words, width: float, style: Style, lines_on_page: int
) -> tuple[list[str], str]:
    """A paragraph filling lines_on_page lines that breaks inside a hyphenated word.

    Returns the lines drawn on this page (the last ends with ``prefix-``) and the first words
    of the continuation (the word's suffix, lowercase, then the rest of the sentence).
    """
    rng = words.rng
    open_sentence = words.words(60)  # never ended on this page
    stream = [*words.sentence(5, 8).split(), open_sentence[0].capitalize(), *open_sentence[1:]]
    lines = wrap(stream, width, style)[:lines_on_page]
    syllables = rng.choice(HYPHENATED)
    last = lines[-1].split()
    while True:
        for cut in range(len(syllables) - 1, 0, -1):
            prefix = "".join(syllables[:cut]) + "-"
            if text_width(" ".join([*last, prefix]), style) <= width:
                lines[-1] = " ".join([*last, prefix])
                suffix = "".join(syllables[cut:])
                rest = [suffix, *words.words(rng.randint(5, 8))]
                return lines, " ".join(rest) + "."
        last.pop()  # no syllable fits: drop a random filler word and retry


# ---------------------------------------------------------------- the samples


def _report(doc: pymupdf.Document, rng: random.Random, spacing: Spacing) -> list[SamplePage]:
    words = Words(rng)
    width, height = A4
    margin = 64 + rng.randint(0, 8)
    col = Column(margin, width - margin)
    body = Style(REGULAR, 13, 1.45)
    small = Style(REGULAR, 9)
    title = Style(BOLD, 24)
    section = Style(BOLD, 16)
    caption = Style(REGULAR, 11)
    bottom = height - 70
    header_text = "Data Systems Group - Annual Report"
    pages = []

    def frame(number: int) -> Composer:
        c = spacing.new_page(doc, "report", number, A4)
        c.text_block("header", [header_text], col, 34, small)
        return c

    def page_number(c: Composer) -> None:
        c.text_block("page_number", [str(c.number)], col, height - 48, Style(REGULAR, 10), "center")

    # Page 1
    c = frame(1)
    r = c.text_block("doc_title", ["Annual Report on Data Quality"], col, 80, title)
    r = c.paragraph(words.sentences(2), col, r.y1 + c.gap(18), body)
    r = c.text_block("paragraph_title", ["1 Introduction"], col, r.y1 + c.gap(24), section)
    items = [words.sentence(4, 7) for _ in range(3)]
    r = c.bullet_list(items, col, r.y1 + c.gap(14), body, gap=6)
    # The last paragraph fills the page bottom and is cut inside a hyphenated word.
    cut_lines = 3
    lines, continuation = hyphenated_break(words, col.width, body, cut_lines)
    top = bottom - cut_lines * body.pitch
    c.end_flow(r.y1, top - 24)
    c.text_block("text", lines, col, top, body)
    page_number(c)
    pages.append(c.result())

    # Page 2
    c = frame(2)
    cont_words = [*continuation.split(), *words.sentence(6, 9).split()]
    r = c.paragraph(" ".join(cont_words), col, 80, body)
    r = c.text_block("paragraph_title", ["2 Results"], col, r.y1 + c.gap(24), section)
    r = c.text_block("table_caption", ["Table 1: Counts by group"], col, r.y1 + c.gap(14), caption)
    counts = [[Cell("Group"), Cell("Pages"), Cell("Rate")]]
    for name in ("North", "South"):
        counts.append([Cell(name), Cell(str(rng.randint(10, 99))), Cell(str(rng.randint(1, 9)))])
    r = c.table(counts, [160, 110, 110], col.x0, r.y1 + 6, body)
    eq_top = r.y1 + c.gap(22)
    r = c.equation([("E = mc", "base"), ("2", "sup")], "E = mc^{2}", col, eq_top, body)
    pieces = [
        (words.sentence(5, 7)[:-1] + " when", None),
        ("x\u00b2", "x^{2}"),
        ("is " + " ".join(words.words(4)) + " and", None),
        ("n = 3", "n = 3"),
        ("in " + " ".join(words.words(3)) + ".", None),
    ]
    r = c.math_paragraph(pieces, col, r.y1 + c.gap(22), body)
    # Table 2 sits at the page bottom and continues on page 3.
    table_top = bottom - 4 * Composer.row_height(body)
    cap_top = table_top - 6 - (caption.ascent + caption.descent)
    c.end_flow(r.y1, cap_top - 24)
    c.text_block("table_caption", ["Table 2: Scores by year"], col, cap_top, caption)
    header_row = [Cell("Year"), Cell("Score"), Cell("Size")]
    years = [
        [Cell(str(2016 + i)), Cell(str(rng.randint(50, 99))), Cell(str(rng.randint(1, 9)))]
        for i in range(6)
    ]
    c.table([header_row, *years[:3]], [160, 110, 110], col.x0, table_top, body)
    page_number(c)
    pages.append(c.result())

    # Page 3 (the last page: its flow keeps natural gaps)
    c = frame(3)
    r = c.table([header_row, *years[3:]], [160, 110, 110], col.x0, 80, body)
    fig_top = r.y1 + c.gap(30)
    fig = pymupdf.Rect(col.x0 + 60, fig_top, col.x1 - 60, fig_top + 170)
    r = c.bar_chart(fig, [rng.uniform(0.3, 1.0) for _ in range(4)])
    r = c.text_block("image_caption", ["Figure 1: Rate by group"], col, r.y1 + 8, caption, "center")
    r = c.paragraph(words.sentences(2), col, r.y1 + c.gap(24), body)
    page_number(c)
    pages.append(c.result())
    return pages


def _paper(doc: pymupdf.Document, rng: random.Random, spacing: Spacing) -> list[SamplePage]:
    words = Words(rng)
    width, height = LETTER
    margin = 54 + rng.randint(0, 6)
    gutter = 20
    full = Column(margin, width - margin)
    mid = width / 2
    left = Column(margin, mid - gutter / 2)
    right = Column(mid + gutter / 2, width - margin)
    body = Style(REGULAR, 9)
    section = Style(BOLD, 11)
    caption = Style(REGULAR, 8)
    pages = []

    def page_number(c: Composer) -> None:
        c.text_block("page_number", [str(c.number)], full, height - 40, Style(REGULAR, 9), "center")

    # Page 1: full-width title, then two columns; the left column's footnote at the bottom.
    c = spacing.new_page(doc, "paper", 1, LETTER)
    r = c.text_block(
        "doc_title", ["A Small Study of Layout Models"], full, 60, Style(BOLD, 18), "center"
    )
    r = c.text_block(
        "text", ["Ann Lee and Tom Park"], full, r.y1 + 10, Style(REGULAR, 10), "center"
    )
    body_top = r.y1 + 28
    footnote_top = height - 80
    r = c.text_block("paragraph_title", ["1 Introduction"], left, body_top, section)
    r = c.paragraph(words.sentences(2), left, r.y1 + 8, body)
    r = c.equation(
        [("a", "base"), ("2", "sup"), (" + b", "base"), ("2", "sup"), (" = c", "base"),
         ("2", "sup")],
        "a^{2} + b^{2} = c^{2}", left, r.y1 + 14, body,
    )  # fmt: skip
    r = c.paragraph(words.sentences(1), left, r.y1 + 14, body)
    r = c.text_block("paragraph_title", ["2 Method"], right, body_top, section)
    r = c.paragraph(words.sentences(1), right, r.y1 + 8, body)
    cap_top = r.y1 + 16
    r = c.text_block("table_caption", ["Table 1: Scores by model"], right, cap_top, caption)
    spans = [
        [Cell("Model", rowspan=2), Cell("Score", colspan=2)],
        [Cell("Dev"), Cell("Test")],
        [Cell("Base"), Cell(str(rng.randint(60, 79))), Cell(str(rng.randint(60, 79)))],
        [Cell("Large"), Cell(str(rng.randint(80, 95))), Cell(str(rng.randint(80, 95)))],
    ]
    r = c.table(spans, [90, 70, 70], right.x0, r.y1 + 6, body)
    c.text_block("page_footnote", ["1 Code is available on request."], left, footnote_top, caption)
    page_number(c)
    pages.append(c.result())

    # Page 2 (the last page): header, two columns with a figure and a fraction.
    c = spacing.new_page(doc, "paper", 2, LETTER)
    r = c.text_block(
        "header", ["A Small Study of Layout Models"], full, 30, Style(REGULAR, 8), "right"
    )
    body_top = r.y1 + 30
    r = c.text_block("paragraph_title", ["3 Results"], left, body_top, section)
    r = c.paragraph(words.sentences(1), left, r.y1 + 8, body)
    fig = pymupdf.Rect(left.x0 + 10, r.y1 + 16, left.x1 - 10, r.y1 + 16 + 130)
    r = c.bar_chart(fig, [rng.uniform(0.3, 1.0) for _ in range(5)])
    c.text_block("image_caption", ["Figure 1: Score by size"], left, r.y1 + 6, caption, "center")
    r = c.text_block("paragraph_title", ["4 Conclusion"], right, body_top, section)
    r = c.paragraph(words.sentences(1), right, r.y1 + 8, body)
    r = c.fraction_equation("y =", "a + b", "2", "y = \\frac{a + b}{2}", right, r.y1 + 12, body)
    c.paragraph(words.sentences(1), right, r.y1 + 12, body)
    page_number(c)
    pages.append(c.result())
    return pages


def _memo(doc: pymupdf.Document, rng: random.Random, spacing: Spacing) -> list[SamplePage]:
    words = Words(rng)
    margin = 72 + rng.randint(0, 8)
    col = Column(margin, A4[0] - margin)
    body = Style(REGULAR, 12)
    c = spacing.new_page(doc, "memo", 1, A4)
    r = c.text_block("doc_title", ["Memo: Weekly Team Update"], col, 90, Style(BOLD, 22))
    r = c.paragraph(words.sentences(2), col, r.y1 + 24, body)
    r = c.paragraph(words.sentences(2), col, r.y1 + 14, body)
    items = [words.sentence(3, 6) for _ in range(3)]
    r = c.bullet_list(items, col, r.y1 + 14, body, gap=6)
    c.paragraph(words.sentences(2), col, r.y1 + 14, body)
    return [c.result()]


DOCUMENTS = (("report", _report), ("paper", _paper), ("memo", _memo))


# ---------------------------------------------------------------- output


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _pdf_bytes(doc: pymupdf.Document, stem: str) -> bytes:
    doc.set_metadata(
        {
            "title": stem,
            "author": "hpdparse synthetic samples",
            "producer": "hpdparse tests.tinymodel.synth",
            "creator": "hpdparse tests.tinymodel.synth",
            "creationDate": "D:20260101000000Z",
            "modDate": "D:20260101000000Z",
        }
    )
    return doc.tobytes(garbage=4, deflate=True, no_new_id=True)


def _pages_json(pages: Sequence[SamplePage]) -> str:
    payload = {
        "stem": pages[0].stem,
        "pages": [
            {
                "page": p.page,
                "width_pt": p.size_pt[0],
                "height_pt": p.size_pt[1],
                "stream": p.stream,
                "blocks": [
                    {k: v for k, v in asdict(b).items() if k != "drawn"} | {"drawn": list(b.drawn)}
                    for b in p.blocks
                ],
            }
            for p in pages
        ],
    }
    return json.dumps(payload, indent=1, ensure_ascii=False) + "\n"


def _write_streams(out_streams: Path, stem: str, pages: Sequence[SamplePage]) -> None:
    folder = out_streams / stem
    for p in pages:
        _atomic_write_bytes(folder / f"page-{p.page:04d}.txt", p.stream.encode("utf-8"))
    _atomic_write_bytes(folder / "pages.json", _pages_json(pages).encode("utf-8"))


def render_scan(pdf_path: Path, dpi: int = SCAN_DPI) -> bytes:
    """The 'scan' sample: page 1 of a generated PDF rendered to a grayscale PNG."""
    with pymupdf.open(pdf_path) as doc:
        pix = doc[0].get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY, alpha=False)
        return pix.tobytes("png")


def generate(seed: int = 0) -> Iterator[tuple[str, bytes, list[SamplePage]]]:
    """Yield (stem, PDF bytes, page ground truth) for every synthetic document."""
    for index, (stem, build) in enumerate(DOCUMENTS):
        # Two passes with the same random draws: the first measures how much room each flow
        # leaves, the second spreads that room over the flow's gaps.
        trial = Spacing()
        with pymupdf.open() as doc:
            build(doc, random.Random(seed * 1000 + index), trial)
        spacing = trial.fitted()
        with pymupdf.open() as doc:
            pages = build(doc, random.Random(seed * 1000 + index), spacing)
            yield stem, _pdf_bytes(doc, stem), pages


def build_samples(out_samples: Path, out_streams: Path, seed: int = 0) -> list[SamplePage]:
    """Write samples/<stem>.pdf, samples/scan.png and their ground-truth streams.

    Streams go to out_streams/<stem>/page-NNNN.txt (UTF-8, no trailing newline) with
    out_streams/<stem>/pages.json. The scan is page 1 of the memo; its ground truth is the
    memo page's (boxes are relative to the page, so any rendering DPI keeps them).
    """
    out_samples = Path(out_samples)
    out_streams = Path(out_streams)
    result: list[SamplePage] = []
    for stem, pdf, pages in generate(seed):
        pdf_path = out_samples / f"{stem}.pdf"
        _atomic_write_bytes(pdf_path, pdf)
        _write_streams(out_streams, stem, pages)
        result.extend(pages)
        if stem == SCAN_SOURCE:
            _atomic_write_bytes(out_samples / f"{SCAN_STEM}.png", render_scan(pdf_path))
            scan_pages = [
                SamplePage(SCAN_STEM, p.page, p.stream, p.blocks, p.size_pt) for p in pages[:1]
            ]
            _write_streams(out_streams, SCAN_STEM, scan_pages)
            result.extend(scan_pages)
    return result


def load_ground_truth(streams_dir: Path) -> dict[tuple[str, int], str]:
    """Read every <stem>/page-NNNN.txt under streams_dir: (stem, page) -> stream."""
    out: dict[tuple[str, int], str] = {}
    for path in sorted(Path(streams_dir).glob("*/page-*.txt")):
        page = int(path.stem.split("-", 1)[1])
        out[(path.parent.name, page)] = path.read_text(encoding="utf-8")
    return out


def main(argv: Sequence[str] | None = None) -> None:
    repo = Path(__file__).resolve().parents[2]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=Path, default=repo / "samples")
    parser.add_argument("--streams", type=Path, default=repo / "tests" / "fixtures" / "streams")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    for p in build_samples(args.samples, args.streams, args.seed):
        print(f"{p.stem} page {p.page}: {len(p.blocks)} blocks, {len(p.stream)} chars")


if __name__ == "__main__":
    main()
