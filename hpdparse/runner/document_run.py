"""What a run tracks about one document while it converts it (`DocumentBook` keeps them):
counters, not pages."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hpdparse.sources.location import UrlSource
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.report import DocumentReport
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
