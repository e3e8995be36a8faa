"""Store a decoded page: the engine's result, with what produced it and the rasterized page's
geometry, becomes the page's raw record in its document folder. A stage on its own: whoever holds
the engine's result and the page's geometry (the scheduler, a Ray actor) calls `save_page`, or
writes `raw_page_of` itself (the scheduler does, on `store.concurrent_writes` threads)."""

from __future__ import annotations

from hpdparse.engines.base import EngineInfo, PageResult
from hpdparse.sources.document import PageGeometry
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.raw_pages import RawPage


def raw_page_of(
    number: int,
    result: PageResult,
    geometry: PageGeometry,
    info: EngineInfo,
    requested_dpi: int,
) -> RawPage:
    """The raw page record of a successful result for page `number`."""
    return RawPage(number, result, geometry, info, info.reuse_key_at(requested_dpi))


def save_page(
    folder: DocumentFolder,
    number: int,
    result: PageResult,
    geometry: PageGeometry,
    info: EngineInfo,
    requested_dpi: int,
) -> None:
    """Write page `number`'s raw text and record (OSError when the folder cannot be written)."""
    folder.write_raw_page(raw_page_of(number, result, geometry, info, requested_dpi))
