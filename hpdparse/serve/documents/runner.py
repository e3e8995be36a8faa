"""The document service's conversions: each accepted document is one `Converter` run (the runner
`hpdparse convert` uses, so its files are convert's), on a thread of its own, at most
`running_documents` at once, over the server's engine (`QueueEngine`) and one set of rasterizer
processes all runs share (`SharedPool`). A document's record in the store follows its run:
queued -> running -> done, failed or cancelled. A run the server stops is left queued, with the
pages it decoded saved: the next server on the same store resumes it from there.
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
from pathlib import Path

from hpdparse.errors import HpdparseError
from hpdparse.runner.progress import Progress
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import MAX_AUTO_WORKERS, READ_AHEAD_PER_WORKER, ReportSettings
from hpdparse.runner.workers import SharedPool
from hpdparse.serve.documents.engine import QueueEngine, RunControl
from hpdparse.serve.documents.options import DocumentOptions
from hpdparse.serve.documents.store import (
    CANCELLED,
    DONE,
    FAILED,
    QUEUED,
    RUNNING,
    DocumentJob,
    DocumentStore,
)
from hpdparse.serve.queue import EngineLoop
from hpdparse.serve.settings import ServeSettings
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.location import UrlSource
from hpdparse.sources.open import open_source
from hpdparse.store.report import DocumentReport
from hpdparse.store.statuses import STATUS_CONVERTED, STATUS_PARTIAL, STATUS_SKIPPED

log = logging.getLogger(__name__)

RESTARTED_WITHOUT_PASSWORD = (
    "the server restarted before this document was done, and it keeps no passwords: "
    "upload it again with its password"
)


class DocumentRunner:
    """Runs the store's accepted documents (see the module doc)."""

    def __init__(self, store: DocumentStore, loop: EngineLoop, settings: ServeSettings) -> None:
        self.store, self.settings = store, settings
        self._loop = loop
        self._places = threading.Semaphore(settings.max_queued)
        self._read_ahead = 2
        self._threads = concurrent.futures.ThreadPoolExecutor(
            settings.running_documents, thread_name_prefix="hpdparse-document"
        )
        self._controls: dict[str, RunControl] = {}
        self._lock = threading.Lock()
        self._shared: SharedPool | None = None

    def start(self) -> None:
        """Start the rasterizer processes (the engine is up) and take up the documents an
        earlier server on this store accepted and did not finish."""
        assert self._loop.preparer is not None
        settings = self.settings
        workers = settings.workers or max(1, min(os.cpu_count() or 1, MAX_AUTO_WORKERS))
        # the documents running at once read as far ahead, together, as one convert run does
        self._read_ahead = max(2, READ_AHEAD_PER_WORKER * workers // settings.running_documents)
        self._shared = SharedPool(workers, self._loop.preparer, self.store.converted)
        for job in self.store.unfinished():
            if job.options.has_password:
                self._end(job, FAILED, RESTARTED_WITHOUT_PASSWORD)
                continue
            job.status = QUEUED
            self.store.save(job)
            self.submit(job)

    def submit(self, job: DocumentJob) -> None:
        with self._lock:
            self._controls[job.id] = RunControl()
        self._threads.submit(self._run, job)

    def cancel(self, job: DocumentJob) -> None:
        """Stop a queued or running document; it ends cancelled (its saved pages stay until
        it is deleted)."""
        with self._lock:
            control = self._controls.get(job.id)
            queued = job.status == QUEUED
        if control is not None:
            control.cancelled.set()
        if queued or control is None:
            self._end(job, CANCELLED, None)

    def stop(self, grace: float) -> None:
        """The server stops: no run takes a new page; pages in the engine get `grace` seconds;
        every run saves what it decoded and ends (its document stays queued)."""
        deadline = time.monotonic() + grace
        with self._lock:
            controls = list(self._controls.values())
        for control in controls:
            control.deadline = deadline
            control.stopping.set()
        self._threads.shutdown(wait=True, cancel_futures=True)
        if self._shared is not None:
            self._shared.close()

    # ------------------------------------------------------------------ one document
    def _run(self, job: DocumentJob) -> None:
        with self._lock:
            control = self._controls[job.id]
        try:
            if control.ends:  # cancelled or the server stopping while it was queued
                return
            job.status, job.started = RUNNING, time.time()
            self.store.touch(job)  # on disk with the page count, once the run has planned
            report = self._convert(job, control)
            if control.cancelled.is_set():
                self._end(job, CANCELLED, None, report)
            elif control.stopping.is_set() and report.status not in _ENDED:
                job.status = QUEUED  # resumed by the next server on this store
                self.store.save(job)
            elif report.status in _ENDED:
                self._end(job, DONE, None, report)
            else:
                self._end(job, FAILED, report.error or report.status, report)
        except HpdparseError as exc:
            self._end(job, FAILED, self._named(job, str(exc)))
        except Exception as exc:  # a bug must end the document, not the service
            log.exception("document %s failed", job.id)
            self._end(job, FAILED, f"internal error: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._controls.pop(job.id, None)

    def _convert(self, job: DocumentJob, control: RunControl) -> DocumentReport:
        source = job.source if job.is_url else str(self.store.input_path(job))
        sources, errors = discover_inputs([source])
        if len(sources) > 1:
            raise HpdparseError(f"{job.name}: names {len(sources)} documents; give one")
        if sources:  # uploads are checked as they arrive; this is for URLs and Office files
            over = pages_over_limit(job.name, sources[0], job.options, self.settings.max_pages)
            if over is not None:
                raise HpdparseError(over)
        settings = job.options.settings(
            str(self.store.output_dir(job)),
            batch_size=self.settings.batch_size,
            read_ahead=self._read_ahead,
        )
        engine = QueueEngine(self._loop, self._places, control)
        progress = _JobProgress(job, self.store)
        run = Converter(engine, settings, progress, start_engine=False, shared_pool=self._shared)
        (report,) = ReportSettings().close(run.run(sources, errors)).documents
        if report.output_dir is not None:
            job.stem = Path(report.output_dir).name
        report.error = self._named(job, report.error) if report.error else None
        report.failed_pages = {n: self._named(job, e) for n, e in report.failed_pages.items()}
        return report

    def _named(self, job: DocumentJob, message: str) -> str:
        """A message with the upload's path in the store replaced by the caller's file name."""
        if job.is_url:
            return message
        return message.replace(str(self.store.input_path(job)), job.name)

    def _end(
        self,
        job: DocumentJob,
        status: str,
        error: str | None,
        report: DocumentReport | None = None,
    ) -> None:
        job.status, job.error, job.finished = status, error, time.time()
        if report is not None:
            job.pages_total = report.pages
            job.pages_done = report.pages_done
            job.pages_failed = report.pages_failed
            entry = report.to_json()
            entry["source"], entry["output_dir"] = job.name, job.stem
            job.report = entry
        self.store.save(job)


_ENDED = frozenset({STATUS_CONVERTED, STATUS_PARTIAL, STATUS_SKIPPED})


def pages_over_limit(
    name: str, source: Path | UrlSource, options: DocumentOptions, most: int
) -> str | None:
    """Why a document with more selected pages than the server takes (`most`) is refused; None
    when it has no more, or cannot be opened (its run fails it with convert's one-line error)."""
    try:
        with open_source(source, options.password) as document:
            selected = len(options.pages.select(document.page_count))
    except Exception:
        return None
    if selected <= most:
        return None
    return f"{name}: {selected} pages to convert; this server takes at most {most} (--max-pages)"


class _JobProgress(Progress):
    """A run's progress, into its document's record: pages in total and done."""

    _SAVE_EVERY = 1.0  # seconds: the record on disk is at most this far behind

    def __init__(self, job: DocumentJob, store: DocumentStore) -> None:
        super().__init__()
        self.job, self.store = job, store
        self._saved = 0.0

    def document_started(self, name: str, pages_total: int, pages_to_decode: int) -> None:
        self.job.pages_total = pages_total
        self.job.pages_done = pages_total - pages_to_decode  # kept from an earlier run
        self._changed(force=True)

    def pages_done(self, pages: int, output_tokens: int) -> None:
        self.job.pages_done += pages
        self._changed()

    def _changed(self, force: bool = False) -> None:
        if force or time.monotonic() - self._saved >= self._SAVE_EVERY:
            self._saved = time.monotonic()
            self.store.save(self.job)
        else:
            self.store.touch(self.job)
