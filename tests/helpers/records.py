"""`page_record`: a `PageRecord` from the flat fields a document's JSON shows for a page
(number, width_px, height_px, dpi, label, width_pt, height_pt, finish_reason, prompt_tokens,
output_tokens, seconds, stats, status, error), as the golden cases' pages.json list them."""

from __future__ import annotations

from typing import Any

from hpdparse.engines.base import DecodeRecord
from hpdparse.markdown.records import PAGE_OK, PageRecord
from hpdparse.sources.document import PageGeometry

GEOMETRY = ("width_px", "height_px", "dpi", "label", "width_pt", "height_pt")
DECODE = ("finish_reason", "prompt_tokens", "output_tokens", "seconds", "stats")


def page_record(
    number: int, raw: str = "", status: str = PAGE_OK, error: str | None = None, **flat: Any
) -> PageRecord:
    unknown = set(flat) - set(GEOMETRY) - set(DECODE)
    assert not unknown, f"not a page field: {sorted(unknown)}"
    geometry = PageGeometry(**{k: v for k, v in flat.items() if k in GEOMETRY})
    decode = DecodeRecord(**{k: v for k, v in flat.items() if k in DECODE})
    return PageRecord(number, geometry, decode, status, raw, error)
