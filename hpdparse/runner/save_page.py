"""Store a decoded page: the engine's result, with what produced it and the rasterized page's
geometry, becomes the page's raw record in its document folder. A stage on its own: whoever holds
the engine's result and the prepared page (the scheduler, a Ray actor) calls `save_page`."""

from __future__ import annotations

from hpdparse.engines.base import EngineInfo, PageResult
from hpdparse.runner.workers import PreparedPage
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.raw_pages import RawPage, RawPageMeta


def raw_page_of(
    number: int,
    result: PageResult,
    prepared: PreparedPage,
    info: EngineInfo,
    requested_dpi: int,
) -> RawPage:
    """The raw page record of a successful result for page `number`."""
    meta = RawPageMeta(
        page=number,
        engine=info.engine,
        model=info.model,
        revision=info.revision,
        prompt=info.prompt,
        max_tokens=info.max_tokens,
        reuse_key=info.reuse_key(),
        requested_dpi=requested_dpi,
        dpi=prepared.dpi,
        width_px=prepared.width_px,
        height_px=prepared.height_px,
        width_pt=prepared.width_pt,
        height_pt=prepared.height_pt,
        label=prepared.label,
        finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens,
        output_tokens=result.output_tokens,
        seconds=round(result.seconds, 3),
        stats=result.stats,
        logprobs=result.logprobs,
    )
    return RawPage(number, result.text, meta)


def save_page(
    folder: DocumentFolder,
    number: int,
    result: PageResult,
    prepared: PreparedPage,
    info: EngineInfo,
    requested_dpi: int,
) -> None:
    """Write page `number`'s raw text and record (OSError when the folder cannot be written)."""
    folder.write_raw_page(raw_page_of(number, result, prepared, info, requested_dpi))
