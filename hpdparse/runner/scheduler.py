"""The single-machine runner: documents -> pages -> engine -> raw pages -> documents -> files.

`Converter` is a short scheduler that wires the stages, each a module of its own:
- plan (`runner.plan`): a document is planned only when its pages are next in line: skipped when
  finished earlier, else its folder claimed and the saved pages that fit kept;
- rasterize ahead (`runner.read_ahead`): pages are rasterized and prepared (`engine.preparer()`)
  in the rasterizer processes at most `read_ahead` pages ahead of the engine and handed to
  `engine.run` through a lazy iterator, so the engine holds at most `batch_size` pages and the
  host at most `read_ahead` more, however long the documents are;
- store a raw page (`runner.save_page`): results come back in completion order and each page's
  raw text is saved at once; the scheduler keeps only counters and failed pages per document;
- finish (`runner.finish`): when a document's last page is in, it is rebuilt from its raw pages
  and written, its .md last.
Planning and rasterizing run inside the engine's pull of the next request, so they only record
events (`runner.events`); the main loop acts on them between results. Output folders are read and
written only through `hpdparse.store` (`OutputStore`, `DocumentFolder`).
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path

from hpdparse.engines.base import Engine, EngineInfo, PageRequest, PageResult
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.runner.document_run import DocumentRun, report_input_errors
from hpdparse.runner.events import (
    DocumentFailed,
    DocumentReady,
    DocumentSkipped,
    DocumentStarted,
    Event,
    PageFailed,
)
from hpdparse.runner.finish import finish_converted
from hpdparse.runner.images import PoolCutter
from hpdparse.runner.overlay import PoolOverlay
from hpdparse.runner.plan import plan_document
from hpdparse.runner.progress import Progress
from hpdparse.runner.read_ahead import PageJob, ReadAhead
from hpdparse.runner.save_page import save_page
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import PreparedPage, WorkerPool
from hpdparse.store.output_store import open_output_store
from hpdparse.store.report import DocumentReport, RunReport
from hpdparse.store.statuses import STATUS_FAILED, STATUS_INTERRUPTED, STATUS_SKIPPED

_EXTRAS = {
    "vllm": ("vLLM", "pip install 'hpdparse[vllm]'"),
    "torch": ("PyTorch", "pip install 'hpdparse[torch]'"),
}


def dependency_error(engine_name: str, exc: ImportError) -> EngineError:
    """The one-line error for an engine whose optional dependency cannot be imported."""
    module = exc.name or ""
    if module.startswith("hpdparse."):
        return EngineError(
            f"--engine {engine_name} is not available in this version of hpdparse "
            f"(use --engine openai with an HPD server)"
        )
    what, how = _EXTRAS.get(engine_name, (module or "a dependency", "pip install hpdparse"))
    missing = f" (cannot import {module})" if module else f" ({' '.join(str(exc).split())})"
    return EngineError(f"--engine {engine_name} needs {what}: {how}{missing}")


class Converter:
    """One `convert` run over a list of input files."""

    def __init__(
        self,
        engine: Engine,
        settings: ConvertSettings,
        progress: Progress | None = None,
        start_engine: bool = True,
    ) -> None:
        self.engine = engine
        self.settings = settings
        self.progress = progress or Progress()
        self._start_engine = start_engine
        self._engine_started = False
        self._store = open_output_store(settings.output_dir)
        self._info: EngineInfo | None = None  # set in run(), after engine.open()
        self._events: deque[Event] = deque()
        self._inflight: dict[tuple[int, int], PreparedPage] = {}
        self._pool: WorkerPool | None = None
        self._cut_images: PoolCutter | None = None
        self._overlay: PoolOverlay | None = None
        self._docs: list[DocumentRun] = []
        self._by_id: dict[int, DocumentRun] = {}
        self._first_sent: float | None = None
        self._last_result: float | None = None

    def run(self, sources: list[Path], input_errors: Sequence[HpdparseError] = ()) -> RunReport:
        """Convert `sources`; `input_errors` (inputs that could not be found) are reported as
        failed documents. Returns the run report."""
        started = time.monotonic()
        report = self._report = RunReport(
            command="convert", output_dir=str(self.settings.output_dir)
        )
        self._add_documents(sources, input_errors)
        self.progress.start(len(report.documents))
        try:
            # open() first: the engine resolves its checkpoint (and revision) there, and the reuse
            # key of saved pages must carry that revision.
            self.engine.open()
            self._pool = WorkerPool(self.settings.worker_count(), self.engine.preparer())
            self._cut_images = PoolCutter(self._pool, self.settings.password)
            if self.settings.layout:
                self._overlay = PoolOverlay(self._pool, self.settings.password)
            self._info = self.engine.info
            report.engine = self._info.engine
            report.model = self._info.model
            report.revision = self._info.revision
            self._run_pages()
        except KeyboardInterrupt:
            report.interrupted = True
        except EngineError as exc:
            report.engine_error = str(exc)
            self.progress.error(f"engine {self.engine.name}: {exc}")
        finally:
            if self._pool is not None:
                self._pool.shutdown(cancel=True)
            if self._engine_started and self._start_engine:
                with contextlib.suppress(Exception):
                    self.engine.close()
        self._drain_events()
        for doc in self._docs:
            if not doc.done:
                if report.interrupted:
                    self._close_doc(doc, STATUS_INTERRUPTED, "interrupted")
                else:
                    self._close_doc(doc, STATUS_FAILED, report.engine_error or "not converted")
        if self._first_sent is not None and self._last_result is not None:
            report.engine_seconds = self._last_result - self._first_sent
        report.seconds = time.monotonic() - started
        return report

    def _add_documents(self, sources: list[Path], input_errors: Sequence[HpdparseError]) -> None:
        report = self._report
        report_input_errors(report, self.progress, input_errors)
        folders = self._store.assign_folders(sources)
        for src in sources:
            doc_report = DocumentReport(source=str(src), output_dir=folders[src].location)
            doc = DocumentRun(src.absolute(), folders[src], doc_report)
            self._docs.append(doc)
            self._by_id[id(doc)] = doc
            report.documents.append(doc_report)

    def _run_pages(self) -> None:
        requests = self._requests()
        first = next(requests, None)
        self._drain_events()
        if first is None:
            return
        if self._start_engine:
            self._engine_started = True
            try:
                self.engine.start()
            except ImportError as exc:
                raise dependency_error(self.engine.name, exc) from None
        results = self.engine.run(
            self._taken_by_engine(first, requests), max_in_flight=self.settings.batch_size
        )
        try:
            for result in results:
                self._last_result = time.monotonic()
                self._on_result(result)
                self._drain_events()
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()

    # --- feeding the engine (runs wherever the engine pulls requests; reports through events) ---

    def _taken_by_engine(
        self, first: PageRequest, rest: Iterator[PageRequest]
    ) -> Iterator[PageRequest]:
        # Decoding time (the summary's and the live rates) counts from the engine's first pull.
        self._first_sent = time.monotonic()
        self.progress.decoding_started()
        yield first
        yield from rest

    def _requests(self) -> Iterator[PageRequest]:
        assert self._pool is not None
        s = self.settings
        read_ahead = ReadAhead(
            self._pool, s.dpi, s.password, s.read_ahead_count(), s.rasterize_timeout
        )
        for job, prepared in read_ahead.pages(self._page_jobs()):
            doc = job.owner
            if isinstance(prepared, str):
                self._events.append(PageFailed(doc, job.number, prepared))
                continue
            if doc.done:
                continue
            key = (id(doc), job.number)
            self._inflight[key] = prepared
            yield PageRequest(key=key, payload=prepared.payload)
            prepared.payload = None  # the engine holds it now; do not keep a second reference

    def _page_jobs(self) -> Iterator[PageJob[DocumentRun]]:
        """Every page to decode, planning documents lazily, one after the other."""
        for doc in self._docs:
            for number in self._plan(doc):
                if doc.done:
                    break
                yield PageJob(doc, str(doc.source), number)

    def _plan(self, doc: DocumentRun) -> list[int]:
        """Plan a document (`plan_document`) and return the pages to decode."""
        doc.started = time.monotonic()
        assert self._info is not None
        try:
            plan = plan_document(doc.folder, doc.source, self.settings, self._info)
        except HpdparseError as exc:
            self._events.append(DocumentFailed(doc, str(exc)))
            return []
        doc.state = plan.state
        if plan.skip:
            self._events.append(DocumentSkipped(doc))
            return []
        doc.report.pages = len(plan.state.selected)
        doc.report.pages_reused = plan.reused
        doc.pending = len(plan.to_decode)
        self._events.append(DocumentStarted(doc, len(plan.to_decode)))
        if not plan.to_decode:
            self._events.append(DocumentReady(doc))
        return plan.to_decode

    # --- results and events (main thread) ---

    def _on_result(self, result: PageResult) -> None:
        doc_id, number = result.key
        prepared = self._inflight.pop((doc_id, number))
        doc = self._by_id[doc_id]
        if not doc.done:
            if result.ok:
                self._store_page(doc, number, result, prepared)
            else:
                error = " ".join((result.error or "the engine gave no text").split())
                self._page_failed(doc, number, f"{doc.source}: page {number}: {error}")
        self.progress.pages_done(1, result.output_tokens if result.ok else 0)
        doc.pending -= 1
        if doc.pending == 0 and not doc.done:
            self._finish_doc(doc)

    def _store_page(
        self, doc: DocumentRun, number: int, result: PageResult, prepared: PreparedPage
    ) -> None:
        assert self._info is not None
        try:
            save_page(doc.folder, number, result, prepared, self._info, self.settings.dpi)
        except OSError as exc:
            location = doc.folder.location
            self._fail_doc(doc, f"{location}: cannot write the output folder: {exc.strerror}")
            return
        r = doc.report
        r.pages_decoded += 1
        r.prompt_tokens += result.prompt_tokens
        r.output_tokens += result.output_tokens
        self._report.add_stats(result.stats)

    def _page_failed(self, doc: DocumentRun, number: int, message: str) -> None:
        assert doc.state is not None
        doc.state.failed_pages[number] = message
        self.progress.error(message)

    def _drain_events(self) -> None:
        while self._events:
            self._handle(self._events.popleft())

    def _handle(self, event: Event) -> None:
        match event:
            case DocumentFailed(doc, message):
                self._fail_doc(doc, message)
            case DocumentSkipped(doc):
                assert doc.state is not None
                selected = len(doc.state.selected)
                doc.report.pages = doc.report.pages_done = doc.report.pages_reused = selected
                self._close_doc(doc, STATUS_SKIPPED, None)
            case DocumentStarted(doc, to_decode):
                assert doc.state is not None
                self.progress.document_started(str(doc.source), len(doc.state.selected), to_decode)
            case DocumentReady(doc):
                if not doc.done:
                    self._finish_doc(doc)
            case PageFailed(doc, number, message):
                if not doc.done:
                    self._page_failed(doc, number, message)
                    self.progress.pages_done(1, 0)
                    doc.pending -= 1
                    if doc.pending == 0:
                        self._finish_doc(doc)

    def _fail_doc(self, doc: DocumentRun, message: str) -> None:
        if doc.done:
            return
        self.progress.error(message)
        self._close_doc(doc, STATUS_FAILED, message)

    def _close_doc(self, doc: DocumentRun, status: str, error: str | None) -> None:
        doc.done = True
        r = doc.report
        r.status = status
        r.error = error
        if doc.started:
            r.seconds = time.monotonic() - doc.started
        if status == STATUS_FAILED and not doc.state:
            r.output_dir = None
        self.progress.document_finished(r)

    def _finish_doc(self, doc: DocumentRun) -> None:
        """All pages are in: rebuild the document from its folder and write it."""
        assert doc.state is not None and self._cut_images is not None
        finished = finish_converted(
            doc.folder,
            doc.state,
            self.settings.render_options,
            self._cut_images,
            doc.report,
            self._overlay,
        )
        for message in finished.warnings:
            self.progress.error(message)
        self._close_doc(doc, finished.status, finished.error)


__all__ = ["Converter", "dependency_error"]
