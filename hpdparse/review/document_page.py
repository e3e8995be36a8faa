"""A document's review page, as data for the template: per page the page image with its boxes,
the blocks in reading order with their rendered Markdown, the page's facts and raw output."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup

from hpdparse.errors import HpdparseError
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.labels import PAGE_FURNITURE
from hpdparse.markdown.assemble import assemble_record
from hpdparse.markdown.render import RenderOptions, render_document
from hpdparse.overlay.layout_pdf import page_status
from hpdparse.overlay.roles import css_class, is_container, role_name
from hpdparse.review.blocks import block_html, make_markdown
from hpdparse.review.page_images import DEFAULT_MAX_SIDE, page_image
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.outputs import DocumentOutput, checked_source

MAX_RAW_CHARS = 200_000
CONFIDENT = 0.9  # blocks above it are drawn as confident
PLACEHOLDER_SIZE = (1000, 1414)  # a page whose size is unknown (failed, no source)


@dataclass
class BoxView:
    ref: str
    role: str  # css class
    x: int
    y: int
    width: int
    height: int
    index: int
    container: bool
    confidence: str = "conf-none"  # css class: conf-low, conf-mid, conf-high, conf-none
    confidence_text: str = ""


@dataclass
class BlockView:
    ref: str
    role: str  # css class
    role_name: str
    label: str
    index: int
    html: Markup
    notes: list[Markup]
    flags: list[str]
    furniture: bool
    boxed: bool
    confidence: str = "conf-none"
    confidence_text: str = ""


@dataclass
class PageView:
    number: int
    label: str | None
    status: str  # ok | truncated | failed
    error: str | None
    facts: str
    flags: list[str]
    width: int
    height: int
    image: str | None
    boxes: list[BoxView] = field(default_factory=list)
    blocks: list[BlockView] = field(default_factory=list)
    raw: str | None = None


def document_json(doc: DocumentOutput) -> tuple[dict[str, Any], bool]:
    """The document's JSON; for an unfinished document (no JSON yet) it is rendered from raw/
    in memory, as `render` would. Returns (json, built_from_raw)."""
    if doc.data is not None:
        return doc.data, False
    known = {f.name for f in dataclasses.fields(RenderOptions)}
    options = RenderOptions(**{k: v for k, v in doc.state.render_options.items() if k in known})
    data = render_document(assemble_record(doc.folder, doc.state), options).json
    for page in data["pages"]:
        if page["status"] == "failed" and page["number"] not in doc.state.failed_pages:
            page["error"] = "not decoded yet"
    return data, True


def _notes(block: dict[str, Any], keep_headers: bool) -> list[Markup]:
    notes = []
    for link in block.get("continued_by") or []:
        ref = f"p{int(link['page'])}-{int(link['block'])}"
        notes.append(
            Markup('continues on page {} (<a href="#b-{}">block {}</a>)').format(
                link["page"], ref, link["block"]
            )
        )
    if block.get("continues"):
        link = block["continues"]
        ref = f"p{int(link['page'])}-{int(link['block'])}"
        notes.append(
            Markup(
                'continues page {} (<a href="#b-{}">block {}</a>), merged in the Markdown'
            ).format(link["page"], ref, link["block"])
        )
    for key, text in (
        ("caption_of", "caption of block {}"),
        ("caption", "its caption: block {}"),
        ("list", "item of the list in block {}"),
    ):
        if key in block:
            notes.append(Markup(text).format(block[key]))
    if block.get("role") in PAGE_FURNITURE and not keep_headers:
        notes.append(Markup("not in the Markdown (page furniture; --keep-headers keeps it)"))
    if is_container(block):
        notes.append(Markup("no child branch: a container the layout branch wrote"))
    return notes


def _block_views(doc_dir: Path, page: dict[str, Any], keep_headers: bool) -> list[BlockView]:
    md = make_markdown()
    views = []
    for block in page.get("blocks") or []:
        role = str(block.get("role") or "text")
        views.append(
            BlockView(
                ref=f"p{page['number']}-{int(block['index'])}",
                role=css_class(role),
                role_name=role_name(role),
                label=str(block.get("label") or ""),
                index=int(block["index"]),
                html=Markup(block_html(md, doc_dir, block)),
                notes=_notes(block, keep_headers),
                flags=[str(f) for f in block.get("flags") or []],
                furniture=role in PAGE_FURNITURE,
                boxed=bool(block.get("bbox_px")),
                confidence=confidence_class(block.get("confidence")),
                confidence_text=confidence_text(block.get("confidence")),
            )
        )
    return views


def _box_views(page: dict[str, Any]) -> list[BoxView]:
    boxes = []
    for block in page.get("blocks") or []:
        box = block.get("bbox_px")
        if not box or len(box) != 4:
            continue
        x1, y1, x2, y2 = (int(v) for v in box)
        boxes.append(
            BoxView(
                f"p{page['number']}-{int(block['index'])}",
                css_class(str(block.get("role"))),
                x1,
                y1,
                max(x2 - x1, 1),
                max(y2 - y1, 1),
                int(block["index"]),
                is_container(block),
                confidence_class(block.get("confidence")),
                confidence_text(block.get("confidence")),
            )
        )
    return boxes


def _facts(page: dict[str, Any]) -> str:
    parts = []
    if page.get("width_px"):
        dpi = f" at {page['dpi']} dpi" if page.get("dpi") else ""
        parts.append(f"{page['width_px']}×{page['height_px']} px{dpi}")
    if page.get("finish_reason"):
        parts.append(f"finish: {page['finish_reason']}")
    if page.get("output_tokens"):
        parts.append(f"{page.get('prompt_tokens', 0)} + {page['output_tokens']} tokens")
    if page.get("seconds"):
        parts.append(f"{float(page['seconds']):.1f} s")
    parts.append(f"{len(page.get('blocks') or [])} blocks")
    return " · ".join(parts)


def _raw_text(folder: DocumentFolder, number: int) -> str | None:
    raw = folder.read_raw_page(number)
    if raw is None:
        return None
    text = raw.text
    return text if len(text) <= MAX_RAW_CHARS else text[:MAX_RAW_CHARS] + "\n[... cut]"


def page_views(
    doc: DocumentOutput,
    data: dict[str, Any],
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
    keep_headers = bool((data.get("render_options") or {}).get("keep_headers"))
    views = []
    for page in data.get("pages") or []:
        number = int(page["number"])
        image = None
        if source is not None:
            try:
                image = page_image(source, number, doc.state.dpi, password, max_side)
            except HpdparseError as exc:
                problems.append(f"{exc}; page shown without its image")
        width = int(page.get("width_px") or (image.width if image else PLACEHOLDER_SIZE[0]))
        height = int(page.get("height_px") or (image.height if image else PLACEHOLDER_SIZE[1]))
        views.append(
            PageView(
                number,
                page.get("label"),
                page_status(page),
                page.get("error"),
                _facts(page),
                [str(f) for f in page.get("flags") or []],
                width,
                height,
                image.data_url if image else None,
                _box_views(page),
                _block_views(doc.doc_dir, page, keep_headers),
                _raw_text(doc.folder, number),
            )
        )
    return views, problems


def confidence_class(value: Any) -> str:
    """The colour band of a confidence: below the default --flag-below, below 0.9, above."""
    if not isinstance(value, (int, float)):
        return "conf-none"
    if value < DEFAULT_FLAG_BELOW:
        return "conf-low"
    return "conf-mid" if value < CONFIDENT else "conf-high"


def confidence_text(value: Any) -> str:
    return f"confidence {value:.2f}" if isinstance(value, (int, float)) else ""
