"""A document's record as its output folder holds it: its raw pages read back (`assemble_record`),
for `convert`/`render` to render and for `review` to show."""

from __future__ import annotations

from typing import Any

from hpdparse.engines.base import FINISH_ERROR
from hpdparse.markdown.records import PAGE_FAILED, PAGE_OK, DocumentRecord, PageRecord
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState


def assemble_record(folder: DocumentFolder, state: DocumentState) -> DocumentRecord:
    """The document as its raw pages hold it: a page with a valid raw output is OK, any other
    selected page is failed (with the error recorded in the state, if any)."""
    pages: list[PageRecord] = []
    for number in state.selected:
        raw = folder.read_raw_page(number)
        if raw is None:
            error = state.failed_pages.get(number) or "no raw output for this page"
            pages.append(
                PageRecord(
                    number=number,
                    width_px=0,
                    height_px=0,
                    status=PAGE_FAILED,
                    finish_reason=FINISH_ERROR,
                    error=error,
                )
            )
            continue
        meta = raw.meta
        pages.append(
            PageRecord(
                number=number,
                width_px=meta.width_px,
                height_px=meta.height_px,
                status=PAGE_OK,
                raw=raw.text,
                finish_reason=meta.finish_reason,
                label=meta.label,
                width_pt=meta.width_pt,
                height_pt=meta.height_pt,
                dpi=meta.dpi,
                prompt_tokens=meta.prompt_tokens,
                output_tokens=meta.output_tokens,
                seconds=meta.seconds,
                stats=dict(meta.stats),
                logprobs=meta.logprobs,
            )
        )
    return DocumentRecord(
        source=state.source.path,
        stem=state.stem,
        page_count=state.page_count,
        pages=pages,
        engine=state.engine,
        model=state.model,
        revision=state.revision,
        settings=settings_of(state),
    )


def settings_of(state: DocumentState) -> dict[str, Any]:
    """The run settings a document's JSON records."""
    return {
        "dpi": state.dpi,
        "pages": state.pages_spec,
        "selected_pages": len(state.selected),
        "prompt": state.reuse_key.get("prompt"),
        "max_tokens": state.reuse_key.get("max_tokens"),
    }


def failed_numbers(record: DocumentRecord) -> dict[int, str]:
    return {p.number: p.error or "failed" for p in record.pages if p.status == PAGE_FAILED}
