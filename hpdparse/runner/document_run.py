"""What a runner tracks about one document while it converts it: counters, not pages."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hpdparse.errors import HpdparseError
from hpdparse.runner.progress import Progress
from hpdparse.sources.location import UrlSource
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.report import STATUS_FAILED, DocumentReport, RunReport
from hpdparse.store.state import DocumentState


@dataclass(eq=False)
class DocumentRun:
    """One input document in a run: where it goes, its report, its resume state once planned, and
    how many of its pages are still out (sent to the engine, or about to be)."""

    source: Path | UrlSource  # absolute
    folder: DocumentFolder
    report: DocumentReport
    state: DocumentState | None = None  # set by planning
    pending: int = 0  # pages to decode whose result (or failure) has not come back
    done: bool = False  # closed: finished, skipped or failed
    started: float = 0.0  # time.monotonic() when planning began


def report_input_errors(
    report: RunReport, progress: Progress, input_errors: Sequence[HpdparseError]
) -> None:
    """Inputs that could not even be found or opened: a failed document each, reported."""
    for error in input_errors:
        source = error.path if error.path is not None else str(error)
        doc = DocumentReport(source=source, status=STATUS_FAILED, error=str(error))
        report.documents.append(doc)
        progress.error(str(error))
        progress.document_finished(doc)
