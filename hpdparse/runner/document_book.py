"""`DocumentBook`: the documents of one conversion run (each a `DocumentRun`: its counters, and
the raw files and text layers of its pages got in this run until it is finished), whatever
carries their pages to an engine (this machine's scheduler, a Ray driver). It owns the
documents, their reports and what the progress display is told, from the moment a document is
added to the moment it is closed:

    DocumentBook(..., sources, input_errors)   every input gets its report (inputs not found:
                                 failed at once)
    plan(doc, info)              plan_document; returns the pages to decode and what to do
                                 next on the main thread (show the document started, or close
                                 it: failed, skipped, finished), called there by the runner
    page_decoded, page_failed    a page came back; the document is finished once none is out
    finish(doc)                  every page is in: write the document (DocumentFinish), at
                                 once or, with `finish_later`, in the background
    finished(doc, outcome)       the document is written (or failed): close it
    fail(doc, message)           the document cannot go on
    end(...)                     close what is still open (interrupted, or failed) and time the run
"""

from __future__ import annotations

import errno
import functools
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.engines.base import EngineInfo
from hpdparse.errors import HpdparseError
from hpdparse.runner.finish import DocumentFinish, FinishedDocument
from hpdparse.runner.images import ImageWork
from hpdparse.runner.plan import plan_document
from hpdparse.runner.progress import Progress
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from hpdparse.sources.location import UrlSource
from hpdparse.sources.text_layer import PageText
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_store import OutputStore
from hpdparse.store.report import DocumentReport, RunReport
from hpdparse.store.state import DocumentState
from hpdparse.store.statuses import STATUS_FAILED, STATUS_INTERRUPTED, STATUS_SKIPPED


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


class DocumentBook:
    """The documents of a run and its report (`report`), shown on `progress`."""

    def __init__(
        self,
        settings: ConvertSettings,
        progress: Progress,
        sources: Sequence[Path | UrlSource],
        input_errors: Sequence[HpdparseError],
    ) -> None:
        """Every source gets its folder in the output store and its report; inputs that could
        not even be found or opened are failed documents at once. Then the display starts."""
        self.started = time.monotonic()
        self.settings = settings
        self.progress = progress
        self.report = RunReport(command="convert", output_dir=str(settings.output_dir))
        self.docs: list[DocumentRun] = []
        self._images: ImageWork | None = None
        # Set by a runner that saves pages in the background: waits for a document's saves and
        # says why one failed (then the document fails instead of being finished).
        self.settle_pages: Callable[[DocumentRun], str | None] | None = None
        # Set by a runner that writes finished documents in the background: takes the document
        # and its writing step, and calls `finished` on this thread once it is done.
        self.finish_later: Callable[[DocumentRun, Callable[[], FinishedDocument]], None] | None
        self.finish_later = None
        for error in input_errors:
            source = error.path if error.path is not None else str(error)
            doc = DocumentReport(source=source, status=STATUS_FAILED, error=str(error))
            self.report.documents.append(doc)
            self.progress.error(str(error))
            self.progress.document_finished(doc)
        folders = OutputStore(settings.output_dir).assign_folders(sources)
        for src in sources:
            doc_report = DocumentReport(source=str(src), output_dir=folders[src].location)
            self.docs.append(DocumentRun(src.absolute(), folders[src], doc_report))
            self.report.documents.append(doc_report)
        self.progress.start(len(self.report.documents))

    def engine_opened(self, info: EngineInfo, pool: WorkerPool) -> None:
        """The engine is open (its identity goes into the report) and documents can be written:
        figure images cut and the --layout overlay drawn in `pool`'s rasterizer processes."""
        self.report.engine, self.report.model = info.engine, info.model
        self.report.revision = info.revision
        self._images = ImageWork(self.settings.password, pool, self.settings.layout)

    # --- planning ---

    def plan(self, doc: DocumentRun, info: EngineInfo) -> tuple[list[int], Callable[[], None]]:
        """Plan `doc`: the pages to decode, and what to do next on the run's main thread (show
        the document started, or close it: failed, skipped, finished at once when it has no page
        to decode). Shows nothing itself."""
        doc.started = time.monotonic()
        try:
            plan = plan_document(doc.folder, doc.source, self.settings, info)
        except HpdparseError as exc:
            return [], functools.partial(self.fail, doc, str(exc))
        doc.state, r = plan.state, doc.report
        r.pages, r.pages_reused = len(plan.state.selected), plan.reused
        if plan.skip:
            r.pages_done = r.pages
            return [], functools.partial(self.close, doc, STATUS_SKIPPED, None)
        doc.pending = len(plan.to_decode)
        return plan.to_decode, functools.partial(self._started, doc, len(plan.to_decode))

    def _started(self, doc: DocumentRun, to_decode: int) -> None:
        self.progress.document_started(str(doc.source), doc.report.pages, to_decode)
        if not to_decode:  # every selected page has a reusable raw output
            self.finish(doc)

    # --- pages ---

    def page_decoded(
        self,
        doc: DocumentRun,
        prompt_tokens: int,
        output_tokens: int,
        stats: dict[str, int | float],
    ) -> None:
        """A page of `doc` was decoded and saved."""
        if not doc.done:
            r = doc.report
            r.pages_decoded += 1
            r.prompt_tokens += prompt_tokens
            r.output_tokens += output_tokens
            self.report.add_stats(stats)
        self.progress.pages_done(1, output_tokens)
        self._page_in(doc)

    def page_failed(self, doc: DocumentRun, number: int, message: str) -> None:
        """A page of `doc` failed (`message`: its one-line error)."""
        if not doc.done:
            assert doc.state is not None
            doc.state.failed_pages[number] = message
            self.progress.error(message)
        self.progress.pages_done(1, 0)
        self._page_in(doc)

    def _page_in(self, doc: DocumentRun) -> None:
        """Finish `doc` once none of its pages is still out."""
        doc.pending -= 1
        if doc.pending == 0:
            self.finish(doc)

    # --- documents ---

    def finish(self, doc: DocumentRun) -> None:
        """All pages of `doc` are in: rebuild it from its folder and write it (in the background
        when `finish_later` is set; then `finished` closes it once written)."""
        if doc.done or doc.finishing:
            return
        assert doc.state is not None and self._images is not None
        settle = self.settle_pages

        def pages_saved() -> None:  # the .md only once every page is written
            if settle is not None and (reason := settle(doc)) is not None:
                raise OSError(errno.EIO, reason)

        write = DocumentFinish(
            doc.folder,
            doc.state,
            self.settings.render_options,
            self._images,
            doc.report,
            doc.written,
            pages_saved,
            text_layers=doc.text_layers,
            unfinished=True,  # planning removed its .md
        ).start_converted()
        if self.finish_later is None:
            self.finished(doc, write())
        else:
            doc.finishing = True
            self.finish_later(doc, write)

    def finished(self, doc: DocumentRun, finished: FinishedDocument) -> None:
        """`doc` was written (or failed to be): close it."""
        for message in finished.warnings:
            self.progress.error(message)
        self.close(doc, finished.status, finished.error)

    def fail(self, doc: DocumentRun, message: str) -> None:
        if doc.done or doc.finishing:
            return
        self.progress.error(message)
        self.close(doc, STATUS_FAILED, message)

    def close(self, doc: DocumentRun, status: str, error: str | None) -> None:
        doc.done = True
        doc.written, doc.text_layers = {}, {}
        r = doc.report
        r.status = status
        r.error = error
        if doc.started:
            r.seconds = time.monotonic() - doc.started
        if status == STATUS_FAILED and not doc.state:
            r.output_dir = None
        self.progress.document_finished(r)

    def end(self, first_page: float | None, last_page: float | None) -> RunReport:
        """Close the documents still open (interrupted, or failed with the engine's error) and
        time the run: from the book's making, decoding from the first page sent to the last
        result (on any one clock)."""
        report = self.report
        for doc in self.docs:
            if not doc.done:
                if report.interrupted:
                    self.close(doc, STATUS_INTERRUPTED, "interrupted")
                else:
                    self.close(doc, STATUS_FAILED, report.engine_error or "not converted")
        if first_page is not None and last_page is not None:
            report.engine_seconds = last_page - first_page
        report.seconds = time.monotonic() - self.started
        return report
