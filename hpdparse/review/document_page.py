"""A document's review page, as data for the template: per page the page image with its boxes,
the blocks in reading order with their rendered Markdown, the page's facts and raw output."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from hpdparse.errors import HpdparseError, OutputError
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.labels import PAGE_FURNITURE
from hpdparse.hpd.stream import Block, BlockRef, ParsedPage
from hpdparse.markdown.assemble import assemble_record
from hpdparse.markdown.json_export import page_from_json
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.render import RenderedDocument, RenderOptions, render_document
from hpdparse.overlay.layout_pdf import page_status
from hpdparse.overlay.roles import css_class, is_container, role_name
from hpdparse.review.blocks import block_html, make_markdown
from hpdparse.review.page_images import DEFAULT_MAX_SIDE, page_image
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.layout import json_name
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.outputs import checked_source
from hpdparse.store.state import DocumentState

MAX_RAW_CHARS = 200_000
CONFIDENT = 0.9  # blocks above it are drawn as confident
PLACEHOLDER_SIZE = (1000, 1414)  # a page whose size is unknown (failed, no source)


@dataclass
class BlockView:
    """A block as the review page shows it: its record, then what the page adds."""

    block: Block
    ref: str
    role: str  # css class
    role_name: str
    html: Markup
    notes: list[Markup]
    furniture: bool
    container: bool
    confidence: str = "conf-none"  # css class: conf-low, conf-mid, conf-high, conf-none
    confidence_text: str = ""
    box: tuple[int, int, int, int] | None = None  # x, y, width, height on the page image


@dataclass
class PageView:
    """A page as the review page shows it: its record, then what the page adds."""

    page: ParsedPage
    status: str  # ok | truncated | failed
    facts: str
    width: int
    height: int
    image: str | None
    blocks: list[BlockView] = field(default_factory=list)
    raw: str | None = None


@dataclass
class DocumentOutput:
    """One document folder: its resume state and what its review page shows: its <stem>.json
    read back (records only: no Markdown) or, for an unfinished document, its raw pages rendered
    in memory (`from_raw`)."""

    doc_dir: Path
    folder: DocumentFolder
    state: DocumentState
    shown: RenderedDocument | None  # None when its <stem>.json cannot be read: `problem` says why
    problem: str | None = None
    from_raw: bool = False

    @property
    def stem(self) -> str:
        return self.state.stem


def load_document(doc_dir: Path) -> DocumentOutput:
    """Read a document folder; OutputError when it is not one (or its state is damaged). Its
    <stem>.json read back or, while the document is unfinished (no JSON yet), its pages rendered
    from raw/ in memory, as `render` would."""
    folder = open_document_folder(doc_dir)
    state = folder.load_state()
    if state is None:
        raise OutputError(
            f"{doc_dir}: not an hpdparse output folder (no readable raw/document.json)"
        )
    path = doc_dir / json_name(state.stem)
    try:
        data = folder.read_json(state.stem)
    except FileNotFoundError:
        return DocumentOutput(doc_dir, folder, state, _from_raw(folder, state), from_raw=True)
    except (OSError, ValueError) as exc:
        return DocumentOutput(doc_dir, folder, state, None, f"{path}: cannot be read ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("pages"), list):
        problem = f"{path}: not an hpdparse document JSON"
        return DocumentOutput(doc_dir, folder, state, None, problem)
    return DocumentOutput(doc_dir, folder, state, _from_json(data))


def _from_json(data: Mapping[str, Any]) -> RenderedDocument:
    source, stem, engine, model = (
        str(data.get(k) or "") for k in ("source", "stem", "engine", "model")
    )
    record = DocumentRecord(source, stem, int(data.get("page_count") or 0), [], engine, model)
    keep_headers = bool((data.get("render_options") or {}).get("keep_headers"))
    pages = [page_from_json(page) for page in data["pages"]]
    return RenderedDocument("", record, RenderOptions(keep_headers=keep_headers), pages)


def _from_raw(folder: DocumentFolder, state: DocumentState) -> RenderedDocument:
    known = {f.name for f in dataclasses.fields(RenderOptions)}
    options = RenderOptions(**{k: v for k, v in state.render_options.items() if k in known})
    rendered = render_document(assemble_record(folder, state), options)
    for page in rendered.pages:
        if page.status == "failed" and page.number not in state.failed_pages:
            page.error = "not decoded yet"
    return rendered


def _link_note(text: str, link: BlockRef) -> Markup:
    ref = f"p{link.page}-{link.block}"
    return Markup(text).format(link.page, ref, link.block)


def _notes(block: Block, keep_headers: bool) -> list[Markup]:
    notes = [
        _link_note('continues on page {} (<a href="#b-{}">block {}</a>)', link)
        for link in block.continued_by
    ]
    if block.continues is not None:
        text = 'continues page {} (<a href="#b-{}">block {}</a>), merged in the Markdown'
        notes.append(_link_note(text, block.continues))
    for tie, text in (
        (block.caption_of, "caption of block {}"),
        (block.caption, "its caption: block {}"),
        (block.in_list, "item of the list in block {}"),
    ):
        if tie is not None:
            notes.append(Markup(text).format(tie))
    if block.role in PAGE_FURNITURE and not keep_headers:
        notes.append(Markup("not in the Markdown (page furniture; --keep-headers keeps it)"))
    if is_container(block):
        notes.append(Markup("no child branch: a container the layout branch wrote"))
    return notes


def _block_views(doc_dir: Path, page: ParsedPage, keep_headers: bool) -> list[BlockView]:
    md = make_markdown()
    return [
        BlockView(
            block,
            ref=f"p{page.number}-{block.index}",
            role=css_class(block.role),  # an unknown role (or none) is drawn as text
            role_name=role_name(block.role),
            html=Markup(block_html(md, doc_dir, block)),
            notes=_notes(block, keep_headers),
            furniture=block.role in PAGE_FURNITURE,
            container=is_container(block),
            confidence=confidence_class(block.confidence),
            confidence_text=confidence_text(block.confidence),
            box=_box(block.bbox_px),
        )
        for block in page.blocks
    ]


def _box(bbox_px: tuple[int, int, int, int] | None) -> tuple[int, int, int, int] | None:
    if bbox_px is None:
        return None
    x1, y1, x2, y2 = bbox_px
    return x1, y1, max(x2 - x1, 1), max(y2 - y1, 1)


def _facts(page: ParsedPage) -> str:
    parts = []
    if page.width_px:
        dpi = f" at {page.dpi} dpi" if page.dpi else ""
        parts.append(f"{page.width_px}×{page.height_px} px{dpi}")
    if page.finish_reason:
        parts.append(f"finish: {page.finish_reason}")
    if page.output_tokens:
        parts.append(f"{page.prompt_tokens} + {page.output_tokens} tokens")
    if page.seconds:
        parts.append(f"{float(page.seconds):.1f} s")
    parts.append(f"{len(page.blocks)} blocks")
    return " · ".join(parts)


def _raw_text(folder: DocumentFolder, number: int) -> str | None:
    raw = folder.read_raw_page(number)
    if raw is None:
        return None
    text = raw.text
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS] + "\n[... cut]"


def page_views(
    doc: DocumentOutput,
    shown: RenderedDocument,
    password: str | None,
    max_side: int = DEFAULT_MAX_SIDE,
) -> tuple[list[PageView], list[str]]:
    """Every page of the document, and the problems met (images that could not be made)."""
    problems: list[str] = []
    try:
        source: str | None = str(checked_source(doc.state, doc.doc_dir))
    except HpdparseError as exc:
        source = None
        problems.append(f"{exc}; pages shown without images")
    views = []
    for page in shown.pages:
        image, width, height = None, *PLACEHOLDER_SIZE
        if source is not None:
            try:
                image, width, height = page_image(
                    source, page.number, doc.state.dpi, password, max_side
                )
            except HpdparseError as exc:
                problems.append(f"{exc}; page shown without its image")
        views.append(
            PageView(
                page,
                page_status(page),
                _facts(page),
                int(page.width_px or width),
                int(page.height_px or height),
                image,
                _block_views(doc.doc_dir, page, shown.options.keep_headers),
                _raw_text(doc.folder, page.number),
            )
        )
    return views, problems


def confidence_class(value: float | None) -> str:
    """The colour band of a confidence: below the default --flag-below, below 0.9, above."""
    if value is None:
        return "conf-none"
    if value < DEFAULT_FLAG_BELOW:
        return "conf-low"
    return "conf-mid" if value < CONFIDENT else "conf-high"


def confidence_text(value: float | None) -> str:
    return f"confidence {value:.2f}" if value is not None else ""
