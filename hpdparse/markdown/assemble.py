"""A document's record as its output folder holds it: its raw pages read back (`assemble_record`),
for `convert`/`render` to render and for `review` to show."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hpdparse.engines.base import FINISH_ERROR, DecodeRecord
from hpdparse.markdown.records import PAGE_FAILED, PAGE_OK, DocumentRecord, PageRecord
from hpdparse.sources.document import PageGeometry
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

NO_GEOMETRY = PageGeometry(0, 0)  # a page with no raw output
FAILED_DECODE = DecodeRecord(FINISH_ERROR)


def assemble_record(
    folder: DocumentFolder, state: DocumentState, written: Mapping[str, bytes] | None = None
) -> DocumentRecord:
    """The document as its raw pages hold it: a page with a valid raw output is OK, any other
    selected page is failed (with the error recorded in the state, if any). `written`: raw files
    this process wrote, taken as they are instead of read back (`DocumentFolder.read_raw_pages`)."""
    pages: list[PageRecord] = []
    saved = folder.read_raw_pages(state.selected, written)
    for number in state.selected:
        raw = saved[number]
        if raw is None:
            error = state.failed_pages.get(number) or "no raw output for this page"
            failed = PageRecord(number, NO_GEOMETRY, FAILED_DECODE, PAGE_FAILED, error=error)
            pages.append(failed)
        else:
            pages.append(PageRecord(number, raw.meta.geometry, raw.meta.decode, PAGE_OK, raw.text))
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
