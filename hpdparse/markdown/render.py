"""A document's pages (raw HPD streams) -> one Markdown file, one JSON record and image crops."""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from hpdparse.hpd.confidence import BlockScore, page_confidence
from hpdparse.hpd.labels import ROLE_TITLE
from hpdparse.hpd.stream import parse_page, valid_text
from hpdparse.markdown.build import PageBuilder
from hpdparse.markdown.confidence import add_to_blocks, scored_page
from hpdparse.markdown.formulas import display_math, with_tag
from hpdparse.markdown.headings import assign_levels, heading_markdown, numbering
from hpdparse.markdown.json_export import document_json, page_json
from hpdparse.markdown.lists import render_list
from hpdparse.markdown.merge import merge_across_pages
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.tables import render_table
from hpdparse.markdown.text import escape_block_start, render_inline
from hpdparse.markdown.text_layer import DEFAULT_TEXT_LAYER, disagree_share, verify_page
from hpdparse.markdown.units import (
    BARRIER,
    CODE,
    COMMENT,
    FIGURE,
    FORMULA,
    FURNITURE,
    HEADING,
    LIST,
    PARAGRAPH,
    TABLE,
    Unit,
)
from hpdparse.sources.text_layer import PageText
from hpdparse.store.raw_pages import PAGE_FAILED, RawPage

FLAG_RENDER_ERROR = "render_error"  # a bug in the renderer: the page is only in the JSON


@dataclass
class RenderOptions:
    keep_headers: bool = False  # headers, footers, page numbers, side notes in the Markdown
    images: bool = True  # crop figures/charts/seals and link them
    table_format: str = "auto"  # gfm | html | auto (GFM unless the table has spans)
    math: str = "dollar"  # dollar ($ $$) | latex (\( \) \[ \])
    page_markers: bool = False  # <!-- page 3 --> before each page
    merge_paragraphs: bool = True  # join a paragraph cut by a page break
    merge_tables: bool = True  # join a table continued on the next page
    docling: bool = False  # also write <stem>.docling.json (hpdparse.export.docling)
    chunks: bool = False  # also write <stem>.chunks.jsonl (hpdparse.export.chunks)
    chunk_tokens: int = 512  # the most tokens in a chunk (one larger block stays whole)
    chunk_tokenizer: str | None = None  # Hugging Face id or folder; None: the offline default
    text_layer: str = DEFAULT_TEXT_LAYER  # off | verify | prefer (markdown/text_layer.py)


@dataclass
class ImageCrop:
    """A region to crop from a page image into the document folder."""

    filename: str  # relative to the document folder, e.g. images/page-0003-figure-01.png
    page_number: int  # 1-based
    bbox_px: tuple[int, int, int, int]  # in pixels of the page image the model saw


@dataclass
class RenderedDocument:
    markdown: str
    json: dict[str, Any]
    images: list[ImageCrop] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)  # what the Markdown was built from (export/)


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
    crops: list[ImageCrop] = []
    pages_json: list[dict[str, Any]] = []
    blocks_by_ref: dict[tuple[int, int], dict[str, Any]] = {}

    for page in doc.pages:
        parsed = parse_page(page.text, page.result.finish_reason)
        scores, confidence = scored_page(page, parsed)
        if options.page_markers:
            units.append(Unit(COMMENT, page.number, None, text=_marker(page, confidence)))
        if page.status == PAGE_FAILED:
            reason = page.error or page.result.finish_reason or "unknown error"
            units.append(
                Unit(BARRIER, page.number, None, text=f"page {page.number} failed: {reason}")
            )
            pages_json.append(page_json(page, [], []))
            continue
        builder = PageBuilder(page, parsed, options.images, dollar)
        try:
            builder.build()
        except Exception as error:
            builder = PageBuilder(page, parsed, False, dollar)
            builder.blocks_json = [builder.block_json(block) for block in parsed.blocks]
            builder.units = [
                Unit(
                    COMMENT, page.number, None, text=f"page {page.number}: not rendered ({error!r})"
                )
            ]
            parsed.flags.append(FLAG_RENDER_ERROR)
        units.extend(builder.units)
        for note in builder.notes():
            units.append(Unit(COMMENT, page.number, None, text=note))
        crops.extend(ImageCrop(name, page.number, box) for name, box in builder.crops)
        checked = None
        if options.text_layer != "off" and page.number in text_layers:
            checked = _verify(builder.blocks_json, text_layers[page.number], scores)
            confidence = page_confidence(scores)
        add_to_blocks(builder.blocks_json, scores)
        pages_json.append(page_json(page, parsed.flags, builder.blocks_json, confidence, checked))
        for block in builder.blocks_json:
            blocks_by_ref[(page.number, block["index"])] = block

    merges: list[dict[str, Any]] = []

    def record(kind: str, first: Unit, second: Unit) -> None:
        a = {"page": first.page, "block": first.block}
        b = {"page": second.page, "block": second.block}
        merges.append({"kind": kind, "first": a, "second": b})
        blocks_by_ref[(first.page, first.block)].setdefault("continued_by", []).append(b)
        blocks_by_ref[(second.page, second.block)]["continues"] = a

    merge_across_pages(units, options.merge_paragraphs, options.merge_tables, record)
    _assign_heading_levels(units, blocks_by_ref)

    parts = [_unit_markdown(unit, options, dollar) for unit in units if not unit.removed]
    markdown = "\n\n".join(p for p in parts if p)
    markdown = markdown + "\n" if markdown else ""
    data = document_json(doc, options_dict(options), pages_json, merges)
    images = crops if options.images else []
    return RenderedDocument(markdown=markdown, json=data, images=images, units=units)


def _verify(
    blocks_json: list[dict[str, Any]], text: PageText, scores: list[BlockScore | None]
) -> dict[str, Any]:
    """A page's text layer check (blocks' records and lowered scores) and its JSON counts."""
    counts: dict[str, Any] = verify_page(blocks_json, text, scores)
    counts["disagree_share"] = disagree_share(counts)
    return counts


def options_dict(options: RenderOptions) -> dict[str, Any]:
    return {
        "keep_headers": options.keep_headers,
        "images": options.images,
        "table_format": options.table_format,
        "math": options.math,
        "page_markers": options.page_markers,
        "merge_paragraphs": options.merge_paragraphs,
        "merge_tables": options.merge_tables,
        "text_layer": options.text_layer,
    }


def _assign_heading_levels(
    units: list[Unit], blocks_by_ref: dict[tuple[int, int], dict[str, Any]]
) -> None:
    headings = [u for u in units if u.kind == HEADING and not u.removed]
    sections = [u for u in headings if u.role != ROLE_TITLE]
    if not any(u.role == ROLE_TITLE for u in headings) and sections:
        # No doc_title: an unnumbered heading that opens the first page is the document title.
        first = next((u for u in units if u.kind not in (COMMENT, FURNITURE)), None)
        if first is sections[0] and first.page == units[0].page and numbering(first.text) is None:
            first.level = 0
            sections = sections[1:]
    for unit, level in zip(sections, assign_levels([u.text for u in sections]), strict=True):
        unit.level = level
    for unit in headings:
        if unit.block is not None:
            blocks_by_ref[(unit.page, unit.block)]["level"] = unit.level


def _unit_markdown(unit: Unit, options: RenderOptions, dollar: bool) -> str:
    kind = unit.kind
    if kind == PARAGRAPH:
        return escape_block_start(render_inline(unit.text, dollar))
    if kind == HEADING:
        return heading_markdown(render_inline(unit.text, dollar), unit.level)
    if kind == LIST:
        return render_list(unit.items, unit.ordered, dollar)
    if kind == TABLE:
        return render_table(unit.table, options.table_format, dollar) if unit.table else ""
    if kind == FORMULA:
        last = len(unit.formulas) - 1
        return "\n\n".join(
            display_math(with_tag(f, unit.tag if i == last else None), dollar)
            for i, f in enumerate(unit.formulas)
        )
    if kind == FIGURE:
        caption = escape_block_start(render_inline(unit.text, dollar)) if unit.text else ""
        if not unit.image:
            return caption
        # The caption is written once, as the paragraph under the image (as MinerU and marker
        # do): visible text that search indexes and chunkers keep; the alt text stays empty so
        # it is not said twice.
        link = f"![]({unit.image})"
        return f"{link}\n\n{caption}" if caption else link
    if kind == CODE:
        return _code_fence(unit.text, unit.extra.get("language", ""))
    if kind == FURNITURE:
        return escape_block_start(render_inline(unit.text, dollar)) if options.keep_headers else ""
    if kind in (COMMENT, BARRIER):
        return comment(unit.text)
    return ""


_BACKTICKS = re.compile(r"`{3,}")


def _code_fence(text: str, language: str = "") -> str:
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


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
