"""The single-machine runner: documents -> pages -> engine -> raw pages -> documents -> files.

`Converter` is a short scheduler that wires the stages, each a module of its own:
- plan (`runner.plan`): a document is planned only when its pages are next in line: skipped when
  finished earlier, else its folder claimed and the saved pages that fit kept; Office and HTML
  documents are converted to PDF a few documents ahead, in the rasterizer processes
  (`runner.conversions`);
- rasterize ahead (`runner.read_ahead`): pages are rasterized and prepared (`engine.preparer()`)
  into their `PageRequest`s (with --text-layer prefer, their text layer read there, once, and
  kept for the finish) in the rasterizer processes at most `read_ahead` pages ahead of the engine
  and handed to `engine.run` through a lazy iterator, so the engine holds at most `batch_size`
  pages and the host at most `read_ahead` more, however long the documents are;
- store a raw page (`store.raw_pages.RawPage`): results come back in completion order and each
  page's raw record is handed at once to `store.concurrent_writes`, which writes pages on a few
  threads (a document is finished only once all of its pages are written); the run's
  `DocumentBook` keeps counters and failed pages per document, and closes each document as it
  ends;
- finish (`runner.finish`): when a document's last page is in, it is rebuilt from its raw pages
  and its crops started on the main thread, then written, its .md last, in the background
  (`runner.background_finish`) while the engine goes on; it counts as finished once written.
Planning and rasterizing run inside the engine's pull of the next request, so they only queue
what the main loop does between results (`Converter._later`). Output folders are read and
written only through `hpdparse.store` (`OutputStore`, `DocumentFolder`).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from hpdparse.engines.base import Engine, EngineInfo, PageRequest, PageResult
from hpdparse.engines.registry import dependency_error
from hpdparse.errors import EngineError, HpdparseError
from hpdparse.runner.background_finish import BackgroundFinishes
from hpdparse.runner.conversions import (
    conversion_folder,
    converted_ahead,
    remove_conversion_folder,
)
from hpdparse.runner.document_book import DocumentBook, DocumentRun
from hpdparse.runner.plan import finished_earlier
from hpdparse.runner.progress import Progress
from hpdparse.runner.read_ahead import ReadAhead
from hpdparse.runner.settings import ConvertSettings, text_layer_info
from hpdparse.runner.workers import SharedPool, WorkerPool
from hpdparse.settings import TextLayerMode
from hpdparse.sources.document import PageGeometry
from hpdparse.sources.office import use_conversion_folder
from hpdparse.sources.text_layer import PageText
from hpdparse.store.concurrent_writes import ConcurrentWrites
from hpdparse.store.raw_pages import RawPage, raw_page_files
from hpdparse.store.report import RunReport


class Converter:
    """One `convert` run over a list of input files."""

    def __init__(
        self,
        engine: Engine,
        settings: ConvertSettings,
        progress: Progress | None = None,
        start_engine: bool = True,
        shared_pool: SharedPool | None = None,
    ) -> None:
        """`shared_pool`: rasterizer processes (and their Office conversion folder) that outlive
        the run, as several runs share them in the document service; else the run makes its
        own."""
        self.engine = engine
        self._shared_pool = shared_pool
        self.settings = settings
        self.progress = progress or Progress()
        self._start_engine = start_engine
        self._engine_started = False
        self._info: EngineInfo | None = None  # set in run(), after engine.open()
        # What the main loop does between results (planning and rasterizing run inside the
        # engine's pull of the next request: they only append here).
        self._later: deque[Callable[[], None]] = deque()
        # What the engine's result does not carry back, by request key (document, page number).
        self._inflight: dict[tuple[DocumentRun, int], tuple[PageGeometry, PageText | None]] = {}
        self._pool: WorkerPool | None = None
        self._first_sent: float | None = None
        self._last_result: float | None = None

    def run(self, sources: list[Path], input_errors: Sequence[HpdparseError] = ()) -> RunReport:
        """Convert `sources`; `input_errors` (inputs that could not be found) are reported as
        failed documents. Returns the run report."""
        book = self._book = DocumentBook(self.settings, self.progress, sources, input_errors)
        self._saver = ConcurrentWrites()  # saves decoded pages
        book.settle_pages = self._saver.settle
        self._finishes = BackgroundFinishes(book.finished)
        book.finish_later = self._finishes.submit
        shared = self._shared_pool
        converted = None
        if shared is None:
            converted = conversion_folder(book.docs)  # the PDFs of Office and HTML inputs
            use_conversion_folder(converted, self.settings.convert_timeout)
        try:
            # open() first: the engine resolves its checkpoint (and revision) there, and the reuse
            # key of saved pages must carry that revision.
            self.engine.open()
            self._pool = shared.pool if shared is not None else None
            self._pool = self._pool or WorkerPool(
                self.settings.worker_count(),
                self.engine.preparer(),
                converted,
                self.settings.convert_timeout,
            )
            self._info = text_layer_info(self.engine, self.settings, self.progress.warning)
            book.engine_opened(self._info, self._pool)
            self._run_pages()
        except KeyboardInterrupt:
            book.report.interrupted = True
        except EngineError as exc:
            book.report.engine_error = str(exc)
            self.progress.error(f"engine {self.engine.name}: {exc}")
        finally:
            self._wait_for_finishes()
            self._saver.close()
            if self._pool is not None and shared is None:
                self._pool.shutdown(cancel=True)
            if self._engine_started and self._start_engine:
                with contextlib.suppress(Exception):
                    self.engine.close()
            if shared is None:
                use_conversion_folder(None)
                remove_conversion_folder(converted)
        self._run_later()
        return book.end(self._first_sent, self._last_result)

    def _run_pages(self) -> None:
        requests = self._requests()
        first = next(requests, None)
        self._run_later()
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
                self._run_later()
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()

    # --- feeding the engine (runs wherever the engine pulls requests; appends to _later) ---

    def _taken_by_engine(
        self, first: PageRequest, rest: Iterator[PageRequest]
    ) -> Iterator[PageRequest]:
        # Decoding time (the summary's and the live rates) counts from the engine's first pull.
        self._first_sent = time.monotonic()
        self.progress.decoding_started()
        yield first
        yield from rest

    def _requests(self) -> Iterator[PageRequest]:
        assert self._pool is not None and self._info is not None
        prefer = self._info.text_layer == TextLayerMode.PREFER
        read_ahead = ReadAhead(self._pool, self.settings, read_text_layer=prefer)
        for doc, number, request in read_ahead.pages(self._pages()):
            if isinstance(request, str):
                self._later.append(functools.partial(self._book.page_failed, doc, number, request))
                continue
            if doc.done:
                continue
            assert request.geometry is not None
            self._inflight[doc, number] = (request.geometry, request.text_layer)
            yield request

    def _pages(self) -> Iterator[tuple[DocumentRun, str, int]]:
        """Every page to decode, planning documents lazily, one after the other (Office and HTML
        ones converted ahead)."""
        assert self._info is not None and self._pool is not None
        info, s = self._info, self.settings

        def skip(doc: DocumentRun) -> bool:  # finished earlier: not converted
            return finished_earlier(doc.folder, doc.source, s, info)

        for doc, failure in converted_ahead(self._pool, self._book.docs, s.worker_count(), skip):
            if failure is not None:
                self._later.append(functools.partial(self._book.fail, doc, failure))
                continue
            to_decode, then = self._book.plan(doc, info)
            self._later.append(then)
            for number in to_decode:
                if doc.done:
                    break
                yield doc, str(doc.source), number

    # --- results (main thread) ---

    def _on_result(self, result: PageResult) -> None:
        doc, number = result.key
        geometry, text_layer = self._inflight.pop(result.key)
        if not result.ok:
            error = " ".join((result.error or "the engine gave no text").split())
            self._book.page_failed(doc, number, f"{doc.source}: page {number}: {error}")
            return
        if not doc.done:
            if self._info is not None and self._info.text_layer == TextLayerMode.PREFER:
                doc.text_layers[number] = text_layer  # read once, by the rasterizer
            self._save(doc, number, result, geometry)
        self._book.page_decoded(doc, result.prompt_tokens, result.output_tokens, result.stats)

    def _save(
        self, doc: DocumentRun, number: int, result: PageResult, geometry: PageGeometry
    ) -> None:
        info = self._info
        assert info is not None
        raw = RawPage(number, result, geometry, info, info.reuse_key_at(self.settings.dpi))
        files, folder = raw_page_files(raw), doc.folder
        doc.written.update(files)  # kept for finishing (a failed write fails the document)
        self._saver.submit(doc, lambda: folder.write_raw_files(files))
        reason = self._saver.failure(doc)  # an earlier page of doc that could not be written
        if reason is not None:
            self._book.fail(doc, f"{doc.folder.location}: cannot write the output folder: {reason}")

    def _run_later(self) -> None:
        while self._later:
            self._later.popleft()()
        self._finishes.collect()

    def _wait_for_finishes(self) -> None:
        """Every document handed to the background is written before the run ends (its crops
        need the pool, its pages the saver); a second Ctrl-C stops waiting."""
        try:
            self._run_later()
            self._finishes.close()
        except KeyboardInterrupt:
            self._book.report.interrupted = True
            self._finishes.abandon()


__all__ = ["Converter"]
