"""The document JSON (structure documented in docs/schema.md; bump SCHEMA_VERSION on any change that
breaks a reader)."""

from __future__ import annotations

from typing import Any

from hpdparse.markdown.records import DocumentRecord
from hpdparse.store.raw_pages import RawPage

SCHEMA_VERSION = 1


def page_json(
    page: RawPage,
    flags: list[str],
    blocks: list[dict[str, Any]],
    confidence: float | None = None,
    text_layer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A page's JSON object; `text_layer`: the counts of its text layer check (None: not
    checked)."""
    geometry, decode = page.geometry, page.result
    return {
        "number": page.number,
        "label": geometry.label,
        "status": page.status,
        "error": page.error,
        "finish_reason": decode.finish_reason,
        "width_px": geometry.width_px,
        "height_px": geometry.height_px,
        "width_pt": geometry.width_pt,
        "height_pt": geometry.height_pt,
        "dpi": geometry.dpi,
        "prompt_tokens": decode.prompt_tokens,
        "output_tokens": decode.output_tokens,
        "seconds": decode.seconds,
        "stats": dict(decode.stats),
        "flags": list(flags),
        "confidence": round(confidence, 4) if confidence is not None else None,
        "text_layer": text_layer,
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
