"""The document JSON (structure documented in docs/schema.md; bump SCHEMA_VERSION on any change that
breaks a reader): the page and block records (hpd/stream.py) written as <stem>.json, and read
back from it (`page_from_json`, for the review pages). The only place they become JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from hpdparse.hpd.confidence import BlockScore
from hpdparse.hpd.stream import Block, BlockRef, ParsedPage, TextCheck, TextLayerCounts
from hpdparse.markdown.merge import Merge
from hpdparse.markdown.records import DocumentRecord

SCHEMA_VERSION = 1

# Block's ties to other blocks, written only when set, in the record's order (the JSON's); each
# under its own name but one
_NAMES = [f.name for f in dataclasses.fields(Block)]
_TIES = _NAMES[_NAMES.index("container_of") : _NAMES.index("tag") + 1]
_KEYS = {"in_list": "list"}
_FIGURES = [f.name for f in dataclasses.fields(BlockScore) if f.name != "confidence"]


def document_json(
    doc: DocumentRecord,
    render_options: dict[str, Any],
    pages: list[ParsedPage],
    merges: list[Merge],
) -> dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "source": doc.source,
        "stem": doc.stem,
        "page_count": doc.page_count,
        "engine": doc.engine,
        "model": doc.model,
        "revision": doc.revision,
        "settings": dataclasses.asdict(doc.settings) if doc.settings else {},
        "render_options": render_options,
        "pages": [page_json(page) for page in pages],
        "merges": [
            {"kind": m.kind, "first": m.first._asdict(), "second": m.second._asdict()}
            for m in merges
        ],
    }


def page_json(page: ParsedPage) -> dict[str, Any]:
    data = {f.name: getattr(page, f.name) for f in dataclasses.fields(page)}
    data["text_layer"] = dataclasses.asdict(page.text_layer) if page.text_layer else None
    data["blocks"] = [block_json(block) for block in page.blocks]
    return data


def block_json(block: Block) -> dict[str, Any]:
    data: dict[str, Any] = {
        "index": block.index,
        "label": block.label,
        "role": block.role,
        "bbox": list(block.bbox) if block.bbox else None,
        "bbox_px": list(block.bbox_px) if block.bbox_px else None,
        "text": block.text,
        "flags": block.flags,
    }
    data.update(
        (_KEYS.get(name, name), v) for name in _TIES if (v := getattr(block, name)) is not None
    )
    if block.text_check is not None:
        data["text_layer"] = dataclasses.asdict(block.text_check)
    data["confidence"] = block.confidence
    data["confidence_figures"] = _figures(block.score) if block.score is not None else None
    if block.continues is not None:
        data["continues"] = block.continues._asdict()
    if block.continued_by:
        data["continued_by"] = [ref._asdict() for ref in block.continued_by]
    if block.level is not None:
        data["level"] = block.level
    return data


def _figures(score: BlockScore) -> dict[str, Any]:
    """What the block's confidence comes from, 4 places."""
    values = ((name, getattr(score, name)) for name in _FIGURES)
    return {name: round(v, 4) if isinstance(v, float) else v for name, v in values}


def page_from_json(data: Mapping[str, Any]) -> ParsedPage:
    """A page of a <stem>.json read back (what `page_json` wrote; what an older file lacks takes
    its default)."""
    names = {f.name for f in dataclasses.fields(ParsedPage)} - {"text_layer", "blocks"}
    text_layer = data.get("text_layer")
    return ParsedPage(
        **{key: value for key, value in data.items() if key in names},
        text_layer=TextLayerCounts(**text_layer) if text_layer else None,
        blocks=[_block_from_json(block) for block in data.get("blocks") or []],
    )


def _block_from_json(data: Mapping[str, Any]) -> Block:
    bbox, bbox_px, check = data.get("bbox"), data.get("bbox_px"), data.get("text_layer")
    figures, continues = data.get("confidence_figures"), data.get("continues")
    return Block(
        index=data["index"],
        label=data.get("label") or "",
        role=data.get("role") or "text",
        bbox=tuple(bbox) if bbox else None,  # type: ignore[arg-type]
        content=data.get("text"),  # a table's is in `html`
        flags=data.get("flags") or [],
        bbox_px=tuple(bbox_px) if bbox_px else None,  # type: ignore[arg-type]
        **{name: data.get(_KEYS.get(name, name)) for name in _TIES},
        text_check=TextCheck(**check) if check else None,
        score=BlockScore(confidence=data["confidence"], **figures) if figures else None,
        continues=BlockRef(**continues) if continues else None,
        continued_by=[BlockRef(**ref) for ref in data.get("continued_by") or []],
        level=data.get("level"),
    )
