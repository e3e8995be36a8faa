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
from collections.abc import Callable, Sequence
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
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


@dataclass
class ConvertAhead:
    """Convert the Office and HTML documents of `docs` in `pool`, up to `ahead` documents ahead
    of the one being planned; `skip(doc)`: True for a document that will not be converted."""

    pool: WorkerPool
    docs: Sequence[DocumentRun]
    ahead: int
    skip: Callable[[DocumentRun], bool]
    # document index -> its conversion (None: none)
    _started: dict[int, Future | None] = field(default_factory=dict, init=False)

    def before_planning(self, index: int) -> str | None:
        """Start the conversions of documents `index`.. up to `ahead` ones, then wait for that of
        document `index`: its one-line error, or None (converted, or nothing to convert)."""
        for i in range(index, min(index + max(1, self.ahead), len(self.docs))):
            if i not in self._started:
                doc = self.docs[i]
                wanted = needs_conversion(doc) and not self.skip(doc)
                self._started[i] = (
                    self.pool.submit(convert_document, str(doc.source)) if wanted else None
                )
        future = self._started.pop(index)
        if future is None:
            return None
        try:
            return future.result()
        except (BrokenProcessPool, CancelledError):  # a worker crashed (MuPDF): convert here
            return convert_document(str(self.docs[index].source))
