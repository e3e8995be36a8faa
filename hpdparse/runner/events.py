"""What the feeding side of a run (planning documents, rasterizing ahead: code that runs inside
the engine's pull of the next request) tells the scheduler's main loop, which acts on it between
results. The feed only records events: it never writes documents or touches the report.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpdparse.runner.document_run import DocumentRun


@dataclass(frozen=True)
class DocumentStarted:
    """Planned: `to_decode` of the document's selected pages go to the engine."""

    doc: DocumentRun
    to_decode: int


@dataclass(frozen=True)
class DocumentSkipped:
    """Finished by an earlier run with the same settings: nothing to do."""

    doc: DocumentRun


@dataclass(frozen=True)
class DocumentFailed:
    """The document cannot be converted at all (unreadable, no page selected, folder not
    writable); `message` is the one-line error."""

    doc: DocumentRun
    message: str


@dataclass(frozen=True)
class DocumentReady:
    """Every selected page already has a reusable raw output: finish the document now."""

    doc: DocumentRun


@dataclass(frozen=True)
class PageFailed:
    """Page `number` could not be rasterized or prepared; `message` is the one-line error."""

    doc: DocumentRun
    number: int
    message: str


Event = DocumentStarted | DocumentSkipped | DocumentFailed | DocumentReady | PageFailed
