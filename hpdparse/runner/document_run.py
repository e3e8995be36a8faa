"""What a run tracks about one document while it converts it (`DocumentBook` keeps them):
counters, and the raw files and text layers of its pages got in this run until it is finished."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.sources.location import UrlSource
from hpdparse.sources.text_layer import PageText
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
    finishing: bool = False  # every page in, being written (in the background)
    started: float = 0.0  # time.monotonic() when planning began
    # The raw page files written in this run (name -> bytes), so that finishing the document
    # does not read them back; emptied once the document is closed.
    written: dict[str, bytes] = field(default_factory=dict)
    # The text layers its decoded pages were rasterized with (--text-layer prefer; None: the page
    # has none), so that finishing the document does not read them from the file again.
    text_layers: dict[int, PageText | None] = field(default_factory=dict)
