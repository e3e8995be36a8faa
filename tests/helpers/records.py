"""`page_record`: a `RawPage` from the flat fields a document's JSON shows for a page
(number, width_px, height_px, dpi, label, width_pt, height_pt, finish_reason, prompt_tokens,
output_tokens, seconds, stats, status, error), as the golden cases' pages.json list them."""

from __future__ import annotations

from typing import Any

from hpdparse.engines.base import PageResult
from hpdparse.sources.document import PageGeometry
from hpdparse.store.raw_pages import PAGE_OK, RawPage

GEOMETRY = ("width_px", "height_px", "dpi", "label", "width_pt", "height_pt")
RESULT = ("finish_reason", "prompt_tokens", "output_tokens", "seconds", "stats")


def page_record(
    number: int, raw: str = "", status: str = PAGE_OK, error: str | None = None, **flat: Any
) -> RawPage:
    unknown = set(flat) - set(GEOMETRY) - set(RESULT)
    assert not unknown, f"not a page field: {sorted(unknown)}"
    geometry = PageGeometry(**{k: v for k, v in flat.items() if k in GEOMETRY})
    fields = {"finish_reason": None, **{k: v for k, v in flat.items() if k in RESULT}}
    page = RawPage(number, PageResult(number, raw, error=error, **fields), geometry)
    assert page.status == status, f"page {number}: status {status}, finish {page.result}"
    return page
