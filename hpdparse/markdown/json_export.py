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

# Block keys written only when set: (JSON key, Block attribute), in the order of the JSON
_TIES = (
    ("container_of", "container_of"),
    ("list", "in_list"),
    ("items", "items"),
    ("image", "image"),
    ("caption", "caption"),
    ("caption_of", "caption_of"),
    ("html", "html"),
    ("number", "number"),
    ("latex", "latex"),
    ("tag", "tag"),
)


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
        "settings": doc.settings,
        "render_options": render_options,
        "pages": [page_json(page) for page in pages],
        "merges": [
            {"kind": m.kind, "first": _ref(m.first), "second": _ref(m.second)} for m in merges
        ],
    }


def page_json(page: ParsedPage) -> dict[str, Any]:
    text_layer = page.text_layer
    return {
        "number": page.number,
        "label": page.label,
        "status": page.status,
        "error": page.error,
        "finish_reason": page.finish_reason,
        "width_px": page.width_px,
        "height_px": page.height_px,
        "width_pt": page.width_pt,
        "height_pt": page.height_pt,
        "dpi": page.dpi,
        "prompt_tokens": page.prompt_tokens,
        "output_tokens": page.output_tokens,
        "seconds": page.seconds,
        "stats": dict(page.stats),
        "flags": list(page.flags),
        "confidence": page.confidence,
        "text_layer": dataclasses.asdict(text_layer) if text_layer is not None else None,
        "blocks": [block_json(block) for block in page.blocks],
    }


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
    for key, name in _TIES:
        value = getattr(block, name)
        if value is not None:
            data[key] = value
    if block.text_check is not None:
        data["text_layer"] = dataclasses.asdict(block.text_check)
    figures = block.score.to_json() if block.score is not None else None
    data["confidence"] = figures.pop("confidence") if figures else None
    data["confidence_figures"] = figures
    if block.continues is not None:
        data["continues"] = _ref(block.continues)
    if block.continued_by:
        data["continued_by"] = [_ref(ref) for ref in block.continued_by]
    if block.level is not None:
        data["level"] = block.level
    return data


def _ref(ref: BlockRef) -> dict[str, int]:
    return {"page": ref.page, "block": ref.block}


def page_from_json(data: Mapping[str, Any]) -> ParsedPage:
    """A page of a <stem>.json read back (what `page_json` wrote; keys missing from an older file
    take their defaults)."""
    text_layer = data.get("text_layer")
    return ParsedPage(
        blocks=[_block_from_json(block) for block in data.get("blocks") or []],
        flags=[str(flag) for flag in data.get("flags") or []],
        number=int(data["number"]),
        label=data.get("label"),
        status=data.get("status") or "ok",
        error=data.get("error"),
        finish_reason=data.get("finish_reason"),
        width_px=data.get("width_px") or 0,
        height_px=data.get("height_px") or 0,
        width_pt=data.get("width_pt"),
        height_pt=data.get("height_pt"),
        dpi=data.get("dpi"),
        prompt_tokens=data.get("prompt_tokens") or 0,
        output_tokens=data.get("output_tokens") or 0,
        seconds=data.get("seconds") or 0.0,
        stats=dict(data.get("stats") or {}),
        confidence=data.get("confidence"),
        text_layer=TextLayerCounts(**text_layer) if text_layer else None,
    )


def _block_from_json(data: Mapping[str, Any]) -> Block:
    bbox, bbox_px = data.get("bbox"), data.get("bbox_px")
    # a table's text is its `html`: the model's own is not written
    block = Block(
        index=int(data["index"]),
        label=str(data.get("label") or ""),
        role=str(data.get("role") or "text"),
        bbox=tuple(bbox) if bbox and len(bbox) == 4 else None,  # type: ignore[arg-type]
        content=data.get("text"),
        flags=[str(flag) for flag in data.get("flags") or []],
        bbox_px=tuple(bbox_px) if bbox_px and len(bbox_px) == 4 else None,  # type: ignore[arg-type]
    )
    for key, name in _TIES:
        setattr(block, name, data.get(key))
    if data.get("text_layer"):
        block.text_check = TextCheck(**data["text_layer"])
    if data.get("confidence") is not None and data.get("confidence_figures"):
        block.score = BlockScore(confidence=data["confidence"], **data["confidence_figures"])
    if data.get("continues"):
        block.continues = BlockRef(**data["continues"])
    block.continued_by = [BlockRef(**ref) for ref in data.get("continued_by") or []]
    block.level = data.get("level")
    return block
