"""The document JSON (structure documented in SCHEMA.md; bump SCHEMA_VERSION on any change that
breaks a reader)."""

from __future__ import annotations

from typing import Any

from hpdparse.markdown.records import DocumentRecord, PageRecord

SCHEMA_VERSION = 1


def page_json(
    page: PageRecord,
    flags: list[str],
    blocks: list[dict[str, Any]],
    confidence: float | None = None,
) -> dict[str, Any]:
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
        "flags": list(flags),
        "confidence": round(confidence, 4) if confidence is not None else None,
        "blocks": blocks,
    }


def document_json(
    doc: DocumentRecord,
    render_options: dict[str, Any],
    pages: list[dict[str, Any]],
    merges: list[dict[str, Any]],
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
        "pages": pages,
        "merges": merges,
    }
