"""Office and HTML inputs converted to PDF ahead of their turn, in the rasterizer processes.

LibreOffice takes a second or more per file. The scheduler plans a document (which opens it) only
when its pages are next in line, inside the engine's pull of the next request; converting there
would keep the engine waiting. So, when a document is planned, the conversions of the next few
Office and HTML documents are handed to the rasterizer pool (`workers.convert_document`, into the
run's conversion folder), and planning a converted document finds its PDF there. A document a
previous run finished is not converted (it is skipped as usual).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from hpdparse.runner.document_book import DocumentRun
from hpdparse.runner.workers import WorkerPool, convert_document
from hpdparse.sources.document import OFFICE_SUFFIXES


def needs_conversion(doc: DocumentRun) -> bool:
    return doc.source.suffix.lower() in OFFICE_SUFFIXES


def conversion_folder(docs: Sequence[DocumentRun]) -> Path | None:
    """A new private folder for the PDFs of the run's Office and HTML inputs (None when it has
    none); the run removes it (`remove_conversion_folder`) when it ends."""
    if not any(needs_conversion(doc) for doc in docs):
        return None
    return Path(tempfile.mkdtemp(prefix="hpdparse-converted-"))


def remove_conversion_folder(folder: Path | None) -> None:
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


def converted_ahead(
    pool: WorkerPool, docs: Sequence[DocumentRun], ahead: int, skip: Callable[[DocumentRun], bool]
) -> Iterator[tuple[DocumentRun, str | None]]:
    """Each of `docs` in turn, once converted, with its conversion's one-line error (None:
    converted, or nothing to convert); the Office and HTML documents are converted in `pool`,
    up to `ahead` documents ahead of the one asked for. `skip(doc)`: True for a document that
    will not be converted."""
    started: dict[int, Future | None] = {}  # document index -> its conversion (None: none)
    for index, doc in enumerate(docs):
        for i in range(index, min(index + max(1, ahead), len(docs))):
            if i not in started:
                wanted = needs_conversion(docs[i]) and not skip(docs[i])
                started[i] = pool.submit(convert_document, str(docs[i].source)) if wanted else None
        future, failure = started.pop(index), None
        if future is not None:
            try:
                failure = future.result()
            except (BrokenProcessPool, CancelledError):  # a worker crashed (MuPDF): convert here
                failure = convert_document(str(doc.source))
        yield doc, failure
