"""A document's pages (raw HPD streams) -> one Markdown file, one JSON record and image crops."""

from __future__ import annotations

import dataclasses
import gc
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from hpdparse.hpd.confidence import page_confidence
from hpdparse.hpd.labels import ROLE_TITLE
from hpdparse.hpd.stream import Block, BlockRef, ParsedPage, bbox_to_pixels, parse_page, valid_text
from hpdparse.markdown.build import PageBuilder
from hpdparse.markdown.confidence import block_scores
from hpdparse.markdown.formulas import display_math, with_tag
from hpdparse.markdown.headings import assign_levels, heading_markdown, numbering
from hpdparse.markdown.json_export import document_json
from hpdparse.markdown.lists import render_list
from hpdparse.markdown.merge import Merge, merge_across_pages
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.tables import render_table
from hpdparse.markdown.text import code_fence, escape_block_start, render_inline
from hpdparse.markdown.text_layer import verify_page
from hpdparse.markdown.units import Kind, Unit
from hpdparse.settings import TextLayerMode, setting
from hpdparse.sources.text_layer import PageText
from hpdparse.store.raw_pages import PAGE_FAILED, RawPage

FLAG_RENDER_ERROR = "render_error"  # a bug in the renderer: the page is only in the JSON
_EXPORTS = ("docling", "chunks", "chunk_tokens", "chunk_tokenizer")  # RenderOptions' exports


@dataclass
class RenderOptions:
    """How a document is written: the Markdown options, the exports and the text layer check
    (``convert`` and ``render`` take them). The fields' order is that of the saved state."""

    keep_headers: bool = setting(
        False,
        "Keep page headers, footers, page numbers and side notes in the Markdown (they are "
        "always in the JSON).",
        flag="--keep-headers",
    )
    images: bool = setting(
        True, "Do not crop figures into images/ nor link them.", flag="--no-images", negate=True
    )
    table_format: Literal["auto", "gfm", "html"] = setting(
        "auto",
        "Tables as GFM pipe tables, HTML, or auto (GFM unless cells span).",
        flag="--table-format",
    )
    math: Literal["dollar", "latex"] = setting(
        "dollar",
        "Math delimiters: $...$ and $$...$$, or \\(...\\) and \\[...\\].",
        flag="--math",
    )
    page_markers: bool = setting(
        False, "Mark page starts with an HTML comment.", flag="--page-markers"
    )
    merge_paragraphs: bool = setting(
        True,
        "Do not join paragraphs split across pages.",
        flag="--no-merge-paragraphs",
        negate=True,
    )
    merge_tables: bool = setting(
        True, "Do not join tables split across pages.", flag="--no-merge-tables", negate=True
    )
    docling: bool = setting(
        False,
        "Also write <stem>.docling.json: the document as a DoclingDocument (LangChain, "
        "LlamaIndex, Haystack read it). Needs hpdparse[docling].",
        flag="--docling",
    )
    chunks: bool = setting(
        False,
        "Also write <stem>.chunks.jsonl: chunks for retrieval with their headings, pages and "
        "boxes. Needs hpdparse[docling].",
        flag="--chunks",
    )
    chunk_tokens: int = setting(
        512,
        "Most tokens in a chunk (a single larger block is a chunk of its own).",
        flag="--chunk-tokens",
        low=1,
    )
    chunk_tokenizer: str | None = setting(
        None,
        "Count chunk tokens with this Hugging Face tokenizer (id or local folder); default: the "
        "Tekken tokenizer mistral-common ships (works offline).",
        flag="--chunk-tokenizer",
        metavar="ID|DIR",
    )
    text_layer: TextLayerMode = setting(
        TextLayerMode.VERIFY,
        "Use the PDF's own text. verify: check each text block against the PDF's text in its "
        "box and record the agreement in <stem>.json (disagreeing blocks get a lower "
        "confidence; the Markdown is unchanged); prefer: also take text blocks whose PDF text "
        "is trustworthy from the file instead of decoding them (vllm and torch in fork mode; "
        "convert only); off: neither.",
        flag="--text-layer",
    )

    def __post_init__(self) -> None:
        self.text_layer = TextLayerMode(self.text_layer)  # ValueError: not a mode


@dataclass
class ImageCrop:
    """A region to crop from a page image into the document folder."""

    filename: str  # relative to the document folder, e.g. images/page-0003-figure-01.png
    page_number: int  # 1-based
    bbox_px: tuple[int, int, int, int]  # in pixels of the page image the model saw


@dataclass
class RenderedDocument:
    """A rendered document: its Markdown, the records of its pages and blocks (read by the
    exports, the overlay and the review pages), its merges and the crops to cut."""

    markdown: str
    doc: DocumentRecord
    options: RenderOptions
    pages: list[ParsedPage] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)  # what the Markdown was built from (export/)

    @property
    def images(self) -> list[ImageCrop]:
        """The figure crops its blocks name (none without `options.images`)."""
        blocks = ((page, block) for page in self.pages for block in page.blocks)
        return [ImageCrop(b.image, p.number, b.bbox_px) for p, b in blocks if b.image and b.bbox_px]

    @property
    def json(self) -> dict[str, Any]:
        """<stem>.json's content, made anew at each call (markdown/json_export.py)."""
        options = dataclasses.asdict(self.options)
        # the options the document JSON records (its "render_options"): the exports' are not there
        recorded = {k: v for k, v in options.items() if k not in _EXPORTS}
        return document_json(self.doc, recorded, self.pages, self.merges)


def render_document(
    doc: DocumentRecord,
    options: RenderOptions | None = None,
    text_layers: Mapping[int, PageText] | None = None,
) -> RenderedDocument:
    """Render every page of `doc`. Never raises on model output, however malformed.

    `text_layers`: the PDF's text of pages by number (sources/text_layer.py); unless
    `options.text_layer` is "off", those pages' text-like blocks are checked against it
    (markdown/text_layer.py: JSON and confidence only, the Markdown is the same)."""
    with gc_paused():
        return _render(doc, options or RenderOptions(), text_layers or {})


@contextmanager
def gc_paused() -> Iterator[None]:
    # Rendering allocates many small acyclic objects; the cyclic collector's passes over them made
    # long documents render superlinearly (2,000 pages: 1.5-2x slower). Nothing here forms cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _render(
    doc: DocumentRecord, options: RenderOptions, text_layers: Mapping[int, PageText]
) -> RenderedDocument:
    dollar = options.math != "latex"
    units: list[Unit] = []
    pages: list[ParsedPage] = []

    for page in doc.pages:
        parsed = parse_page(page.text, page.result.finish_reason)
        scores = block_scores(page, parsed)
        confidence = page_confidence(scores)
        if options.page_markers:
            units.append(Unit(Kind.COMMENT, page.number, None, text=_marker(page, confidence)))
        if page.status == PAGE_FAILED:
            reason = page.error or page.result.finish_reason or "unknown error"
            units.append(
                Unit(Kind.BARRIER, page.number, None, text=f"page {page.number} failed: {reason}")
            )
            pages.append(_with_facts(ParsedPage(), page))
            continue
        geometry = page.geometry
        for block in parsed.blocks:
            block.bbox_px = bbox_to_pixels(block.bbox, geometry.width_px, geometry.height_px)
        builder = PageBuilder(page, parsed, options.images, dollar)
        try:
            builder.build()
            units.extend(builder.units)
        except Exception as error:
            parsed.blocks = [_as_parsed(block) for block in parsed.blocks]
            note = f"page {page.number}: not rendered ({error!r})"
            units.append(Unit(Kind.COMMENT, page.number, None, text=note))
            parsed.flags.append(FLAG_RENDER_ERROR)
        units.extend(Unit(Kind.COMMENT, page.number, None, text=note) for note in builder.notes())
        if options.text_layer != TextLayerMode.OFF and page.number in text_layers:
            parsed.text_layer = verify_page(parsed.blocks, text_layers[page.number], scores)
            confidence = page_confidence(scores)
        for block, score in zip(parsed.blocks, scores, strict=True):
            block.score = score
        parsed.confidence = round(confidence, 4) if confidence is not None else None
        pages.append(_with_facts(parsed, page))

    merges = merge_across_pages(units, options.merge_paragraphs, options.merge_tables)
    blocks = blocks_by_ref(pages)
    for merge in merges:
        blocks[merge.first].continued_by.append(merge.second)
        blocks[merge.second].continues = merge.first
    _assign_heading_levels(units, blocks)

    parts = [_unit_markdown(unit, options, dollar) for unit in units if not unit.removed]
    markdown = "\n\n".join(p for p in parts if p)
    markdown = markdown + "\n" if markdown else ""
    return RenderedDocument(markdown, doc, options, pages, merges, units)


def blocks_by_ref(pages: list[ParsedPage]) -> dict[BlockRef, Block]:
    return {BlockRef(page.number, block.index): block for page in pages for block in page.blocks}


def _as_parsed(block: Block) -> Block:
    """The block without what the renderer tied to it (a page it failed to render)."""
    return Block(
        block.index, block.label, block.role, block.bbox, block.content, block.flags, block.bbox_px
    )


def _with_facts(parsed: ParsedPage, page: RawPage) -> ParsedPage:
    """`parsed` given the facts of its page's record: number, status, geometry, decoding."""
    geometry, decode = page.geometry, page.result
    parsed.number, parsed.status, parsed.error = page.number, page.status, page.error
    parsed.label, parsed.dpi = geometry.label, geometry.dpi
    parsed.width_px, parsed.height_px = geometry.width_px, geometry.height_px
    parsed.width_pt, parsed.height_pt = geometry.width_pt, geometry.height_pt
    parsed.finish_reason, parsed.seconds = decode.finish_reason, decode.seconds
    parsed.prompt_tokens, parsed.output_tokens = decode.prompt_tokens, decode.output_tokens
    parsed.stats = decode.stats
    return parsed


def _assign_heading_levels(units: list[Unit], blocks: dict[BlockRef, Block]) -> None:
    headings = [u for u in units if u.kind == Kind.HEADING and not u.removed]
    sections = [u for u in headings if u.role != ROLE_TITLE]
    if not any(u.role == ROLE_TITLE for u in headings) and sections:
        # No doc_title: an unnumbered heading that opens the first page is the document title.
        first = next((u for u in units if u.kind not in (Kind.COMMENT, Kind.FURNITURE)), None)
        if first is sections[0] and first.page == units[0].page and numbering(first.text) is None:
            first.level = 0
            sections = sections[1:]
    for unit, level in zip(sections, assign_levels([u.text for u in sections]), strict=True):
        unit.level = level
    for unit in headings:
        if unit.block is not None:
            blocks[BlockRef(unit.page, unit.block)].level = unit.level


def _unit_markdown(unit: Unit, options: RenderOptions, dollar: bool) -> str:
    kind = unit.kind
    if kind == Kind.PARAGRAPH:
        return escape_block_start(render_inline(unit.text, dollar))
    if kind == Kind.HEADING:
        return heading_markdown(render_inline(unit.text, dollar), unit.level)
    if kind == Kind.LIST:
        return render_list(unit.items, unit.ordered, dollar)
    if kind == Kind.TABLE:
        return render_table(unit.table, options.table_format, dollar) if unit.table else ""
    if kind == Kind.FORMULA:
        last = len(unit.formulas) - 1
        return "\n\n".join(
            display_math(with_tag(f, unit.tag if i == last else None), dollar)
            for i, f in enumerate(unit.formulas)
        )
    if kind == Kind.FIGURE:
        caption = escape_block_start(render_inline(unit.text, dollar)) if unit.text else ""
        if not unit.image:
            return caption
        # The caption is written once, as the paragraph under the image (as MinerU and marker
        # do): visible text that search indexes and chunkers keep; the alt text stays empty so
        # it is not said twice.
        link = f"![]({unit.image})"
        return f"{link}\n\n{caption}" if caption else link
    if kind == Kind.CODE:
        return code_fence(unit.text, unit.language)
    if kind == Kind.FURNITURE:
        return escape_block_start(render_inline(unit.text, dollar)) if options.keep_headers else ""
    if kind in (Kind.COMMENT, Kind.BARRIER):
        return comment(unit.text)
    return ""


_COMMENT_UNSAFE = re.compile(r"-{2,}|[<>]")
_COMMENT_SAFE = {"<": "‹", ">": "›"}


def comment(text: str) -> str:
    """An HTML comment that nothing in `text` can close or nest: runs of `-` become one, `<` and
    `>` become `‹` `›`, whitespace is collapsed to one line."""
    body = " ".join(valid_text(str(text)).split())[:500]
    body = _COMMENT_UNSAFE.sub(lambda m: _COMMENT_SAFE.get(m.group(0), "-"), body)
    return f"<!-- {body} -->"


def _marker(page: RawPage, confidence: float | None) -> str:
    marker = f"page {page.number}"
    label = page.geometry.label
    if label and label != str(page.number):
        marker += f" (label {label})"
    if confidence is not None:
        marker += f" (confidence {confidence:.2f})"
    return marker
