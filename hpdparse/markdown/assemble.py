"""A document's record as its output folder holds it: its raw pages read back (`assemble_record`),
for `convert`/`render` to render and for `review` to show."""

from __future__ import annotations

from collections.abc import Mapping

from hpdparse.markdown.records import ConvertedWith, DocumentRecord
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.raw_pages import RawPage
from hpdparse.store.state import DocumentState


def assemble_record(
    folder: DocumentFolder, state: DocumentState, written: Mapping[str, bytes] | None = None
) -> DocumentRecord:
    """The document as its raw pages hold it: a page with a valid raw output is OK, any other
    selected page is failed (with the error recorded in the state, if any). `written`: raw files
    this process wrote, taken as they are instead of read back (`DocumentFolder.read_raw_pages`)."""
    pages: list[RawPage] = []
    saved = folder.read_raw_pages(state.selected, written)
    for number in state.selected:
        page = saved[number]
        if page is None:
            error = state.failed_pages.get(number) or "no raw output for this page"
            page = RawPage.failed(number, error)
        pages.append(page)
    key = state.reuse_key  # the JSON's "settings" take its prompt and max tokens
    return DocumentRecord(
        source=state.source.path,
        stem=state.stem,
        page_count=state.page_count,
        pages=pages,
        engine=state.engine,
        model=state.model,
        revision=state.revision,
        settings=ConvertedWith(
            state.dpi,
            state.pages_spec,
            len(state.selected),
            key and key.prompt,
            key and key.max_tokens,
        ),
    )


def failed_numbers(record: DocumentRecord) -> dict[int, str]:
    return {p.number: p.error or "failed" for p in record.pages if not p.result.ok}
