"""The streaming pipeline: documents -> pages -> engine -> raw pages on disk -> documents -> files.

- Documents are opened one at a time, only when their pages are next in line.
- Pages are rasterized and prepared (`engine.preparer()`) in the rasterizer processes of
  `hpdparse.runner.workers` at most `read_ahead` pages ahead of the engine, and handed to
  `engine.run` through a lazy iterator, so the engine holds at most `batch_size` pages and the
  host at most `read_ahead` more, however long the documents are.
- Results come back in completion order. Each page's raw text is saved at once
  (`output.write_raw_page`); the pipeline keeps only counters and the errors of failed pages per
  document. When a document's last page is in, the document is rebuilt from its raw/ folder and
  rendered (`hpdparse.runner.finish`, shared with `hpdparse render`), its .md last.
- Resume: a finished document (its .md exists, its resume state says converted with the same
  settings, its source unchanged) is skipped; otherwise every page with a reusable raw output is
  reused and only the others are sent to the engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections import deque
from collections.abc import Iterator
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hpdparse.engines.base import Engine, EngineInfo, PageRequest, PageResult
from hpdparse.engines.registry import dependency_error
from hpdparse.errors import EngineError, HpdparseError, InputError, OutputError
from hpdparse.markdown.render import RenderedDocument, RenderOptions, render_document
from hpdparse.review.outputs import layout_path
from hpdparse.runner.finish import (
    assemble_record,
    failed_numbers,
    group_crops,
    without_source_prefix,
    write_document,
    write_layout_overlay,
)
from hpdparse.runner.progress import Progress
from hpdparse.runner.workers import PreparedPage, WorkerPool, cut_crops, prepare_page
from hpdparse.sources.open import open_source
from hpdparse.sources.page_ranges import PageRanges
from hpdparse.store.folders import (
    clear_doc_dir,
    markdown_path,
    prepare_doc_dir,
    raw_meta_path,
    remove_if_empty,
    remove_images,
)
from hpdparse.store.naming import assign_output_dirs
from hpdparse.store.raw_pages import (
    raw_page_reusable,
    read_raw_page,
    remove_raw_page,
    saved_page_numbers,
    write_raw_page,
)
from hpdparse.store.report import STATUS_CONVERTED as REPORT_CONVERTED
from hpdparse.store.report import (
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_SKIPPED,
    DocumentReport,
    RunReport,
)
from hpdparse.store.report import STATUS_PARTIAL as REPORT_PARTIAL
from hpdparse.store.state import (
    STATUS_CONVERTED,
    STATUS_IN_PROGRESS,
    DocumentState,
    SourceIdentity,
    load_state,
    remove_state,
)

RENDER_ATTEMPTS = 2  # a page whose renderer process dies twice is given up as failed


@dataclass
class ConvertSettings:
    """Everything about a conversion run except the engine."""

    output_dir: Path
    pages: PageRanges = field(default_factory=PageRanges)
    dpi: int = 200
    password: str | None = None
    batch_size: int = 512
    workers: int = 0  # rasterizer processes; 0 = one per CPU core (at most 8)
    read_ahead: int = 0  # pages rendered ahead of the engine; 0 = 4 per worker
    overwrite: bool = False
    rasterize_timeout: float = 300.0  # seconds for one page to render + prepare before it fails
    render_options: RenderOptions = field(default_factory=RenderOptions)
    layout: bool = False  # also write <stem>.layout.pdf (hpdparse.review.overlay)

    def worker_count(self) -> int:
        return self.workers if self.workers > 0 else max(1, min(os.cpu_count() or 1, 8))

    def read_ahead_count(self) -> int:
        return self.read_ahead if self.read_ahead > 0 else 4 * self.worker_count()


# --- the conversion run ---------------------------------------------------------------------------


@dataclass
class _Doc:
    """The pipeline's state for one document: counters, not pages."""

    source: Path
    doc_dir: Path
    report: DocumentReport
    state: DocumentState | None = None
    pending: int = 0  # pages sent (or about to be) whose result has not come back
    done: bool = False
    started: float = 0.0


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
        self._info: EngineInfo | None = None  # set in run(), after engine.preparer()
        self._events: deque[tuple[str, _Doc, Any]] = deque()
        self._inflight: dict[tuple[int, int], PreparedPage] = {}
        self._pool: WorkerPool | None = None
        self._docs: list[_Doc] = []
        self._first_sent: float | None = None
        self._last_result: float | None = None

    # The public entry point.
    def run(self, sources: list[Path], input_errors: list[HpdparseError] = ()) -> RunReport:
        started = time.monotonic()
        report = self._report = RunReport(
            command="convert", output_dir=str(self.settings.output_dir)
        )
        for error in input_errors:
            spec = str(error).split(":", 1)[0]
            doc = DocumentReport(source=spec, status=STATUS_FAILED, error=str(error))
            report.documents.append(doc)
            self.progress.error(str(error))
            self.progress.document_finished(doc)
        dirs = assign_output_dirs(sources, self.settings.output_dir)
        for src in sources:
            doc_report = DocumentReport(source=str(src), output_dir=str(dirs[src]))
            self._docs.append(_Doc(Path(src).absolute(), dirs[src], doc_report))
            report.documents.append(doc_report)
        self.progress.start(len(report.documents))
        try:
            # open() first: the engine resolves its checkpoint (and revision) there, and the reuse
            # key of saved pages must carry that revision.
            self.engine.open()
            self._pool = WorkerPool(self.settings.worker_count(), self.engine.preparer())
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
        self._first_sent = time.monotonic()
        results = self.engine.run(_chain(first, requests), max_in_flight=self.settings.batch_size)
        try:
            for result in results:
                self._last_result = time.monotonic()
                self._on_result(result)
                self._drain_events()
        finally:
            close = getattr(results, "close", None)
            if close is not None:
                close()

    # --- feeding the engine (runs wherever the engine pulls requests) ---

    def _pages(self) -> Iterator[tuple[_Doc, int]]:
        """(document, page number) for every page to decode, planning documents lazily."""
        for doc in self._docs:
            to_send = self._plan(doc)
            for number in to_send:
                if doc.done:
                    break
                yield doc, number

    def _requests(self) -> Iterator[PageRequest]:
        assert self._pool is not None
        s = self.settings
        window: deque[list[Any]] = deque()  # [doc, number, future, attempts]
        pages = self._pages()
        exhausted = False
        while True:
            while not exhausted and len(window) < s.read_ahead_count():
                item = next(pages, None)
                if item is None:
                    exhausted = True
                    break
                doc, number = item
                future = self._pool.submit(prepare_page, str(doc.source), number, s.dpi, s.password)
                window.append([doc, number, future, 1])
            if not window:
                return
            doc, number, future, attempts = window[0]
            try:
                prepared = future.result(timeout=s.rasterize_timeout)
            except (BrokenProcessPool, FuturesTimeout) as exc:
                # A renderer process died (MuPDF can crash on a damaged file) or hangs. Which page
                # killed it is unknown, so the pages in the window are tried again in a new pool;
                # the page waited on gives up after RENDER_ATTEMPTS crashes or one timeout.
                timed_out = isinstance(exc, FuturesTimeout)
                self._pool.rebuild(kill=timed_out)
                if timed_out or attempts >= RENDER_ATTEMPTS:
                    window.popleft()
                    reason = (
                        f"rendering took more than {s.rasterize_timeout:g} s"
                        if timed_out
                        else "the renderer crashed"
                    )
                    msg = f"{doc.source}: page {number} cannot be rendered: {reason}"
                    self._events.append(("page_failed", doc, (number, msg)))
                else:
                    window[0][3] = attempts + 1
                for entry in window:
                    entry[2] = self._pool.submit(
                        prepare_page, str(entry[0].source), entry[1], s.dpi, s.password
                    )
                continue
            window.popleft()
            if isinstance(prepared, str):
                self._events.append(("page_failed", doc, (number, prepared)))
                continue
            if doc.done:
                continue
            self._inflight[(id(doc), number)] = prepared
            yield PageRequest(key=(id(doc), number), payload=prepared.payload)
            prepared.payload = None  # the engine holds it now; do not keep a second reference

    def _plan(self, doc: _Doc) -> list[int]:
        """Decide what to do with a document: skip it, or reuse what is saved and return the
        pages to decode. Runs in the feeding thread; reports back through events."""
        doc.started = time.monotonic()
        try:
            to_send = self._plan_or_raise(doc)
        except HpdparseError as exc:
            self._events.append(("doc_failed", doc, str(exc)))
            return []
        except OSError as exc:
            msg = f"{doc.source}: {exc.strerror or exc}"
            self._events.append(("doc_failed", doc, msg))
            return []
        if to_send is None:
            self._events.append(("doc_skipped", doc, None))
            return []
        doc.pending = len(to_send)
        self._events.append(("doc_started", doc, len(to_send)))
        if not to_send:
            self._events.append(("doc_complete", doc, None))
        return to_send

    def _plan_or_raise(self, doc: _Doc) -> list[int] | None:
        s = self.settings
        info = self._info
        assert info is not None
        src = doc.source
        doc_dir = doc.doc_dir
        options = dataclasses.asdict(s.render_options)
        old = load_state(doc_dir)
        same_source = (
            old is not None and old.source.path == str(src) and old.source.matches_file(src)
        )
        if not src.is_file():
            raise InputError(f"{src}: no such file")
        if same_source and not s.overwrite and old is not None:
            finished = (
                markdown_path(doc_dir, old.stem).is_file()
                and old.status == STATUS_CONVERTED
                and old.dpi == s.dpi
                and old.reuse_key == info.reuse_key()
                and old.render_options == options
                and old.selected == s.pages.select(old.page_count)
                and (not s.layout or layout_path(doc_dir, old.stem).is_file())
            )
            if finished:
                doc.state = old
                return None
        try:
            identity = old.source if same_source and old else SourceIdentity.of(src)
        except OSError as exc:
            raise InputError(f"{src}: cannot be read ({exc.strerror or exc})") from None
        with open_source(src, s.password) as opened:
            page_count = opened.page_count
        selected = s.pages.select(page_count)
        if not selected:
            raise InputError(
                f"{src}: no page in --pages {s.pages} (the document has {page_count} "
                f"page{'s' if page_count != 1 else ''})"
            )
        if doc_dir.exists() and (s.overwrite or (old is not None and not same_source)):
            clear_doc_dir(doc_dir, old.stem if old else _stem(doc_dir))
        prepare_doc_dir(doc_dir)
        stem = doc_dir.name
        with contextlib.suppress(FileNotFoundError):
            markdown_path(doc_dir, stem).unlink()  # unfinished from here on
        key = info.reuse_key()
        to_send = []
        reused = 0
        for number in selected:
            if raw_page_reusable(read_raw_page(doc_dir, number), key, s.dpi):
                reused += 1
            else:
                if raw_meta_path(doc_dir, number).exists():
                    remove_raw_page(doc_dir, number)
                to_send.append(number)
        state = DocumentState(
            source=identity,
            stem=stem,
            page_count=page_count,
            pages_spec=None if s.pages.is_all else str(s.pages),
            selected=selected,
            dpi=s.dpi,
            engine=info.engine,
            model=info.model,
            revision=info.revision,
            reuse_key=key,
            render_options=options,
            status=STATUS_IN_PROGRESS,
        )
        try:
            state.save(doc_dir)
        except OSError as exc:
            raise OutputError(
                f"{doc_dir}: cannot write the output folder: {exc.strerror}"
            ) from None
        doc.state = state
        doc.report.pages = len(selected)
        doc.report.pages_reused = reused
        return to_send

    # --- results and events (main thread) ---

    def _on_result(self, result: PageResult) -> None:
        doc_id, number = result.key
        prepared = self._inflight.pop((doc_id, number))
        doc = self._doc_by_id(doc_id)
        r = doc.report
        if not doc.done:
            if result.ok:
                try:
                    self._save_page(doc, number, result, prepared)
                    r.pages_decoded += 1
                    r.prompt_tokens += result.prompt_tokens
                    r.output_tokens += result.output_tokens
                    self._report.add_stats(result.stats)
                except OSError as exc:
                    self._fail_doc(
                        doc, f"{doc.doc_dir}: cannot write the output folder: {exc.strerror}"
                    )
            else:
                error = " ".join((result.error or "the engine gave no text").split())
                self._page_failed(doc, number, f"{doc.source}: page {number}: {error}")
        self.progress.pages_done(1, result.output_tokens if result.ok else 0)
        doc.pending -= 1
        if doc.pending == 0 and not doc.done:
            self._finish_doc(doc)

    def _doc_by_id(self, doc_id: int) -> _Doc:
        by_id = getattr(self, "_by_id", None)
        if by_id is None:
            by_id = self._by_id = {id(d): d for d in self._docs}
        return by_id[doc_id]

    def _save_page(
        self, doc: _Doc, number: int, result: PageResult, prepared: PreparedPage
    ) -> None:
        info = self._info
        assert info is not None
        meta = {
            "page": number,
            "engine": info.engine,
            "model": info.model,
            "revision": info.revision,
            "prompt": info.prompt,
            "max_tokens": info.max_tokens,
            "reuse_key": info.reuse_key(),
            "requested_dpi": self.settings.dpi,
            "dpi": prepared.dpi,
            "width_px": prepared.width_px,
            "height_px": prepared.height_px,
            "width_pt": prepared.width_pt,
            "height_pt": prepared.height_pt,
            "label": prepared.label,
            "finish_reason": result.finish_reason,
            "prompt_tokens": result.prompt_tokens,
            "output_tokens": result.output_tokens,
            "seconds": round(result.seconds, 3),
            "stats": result.stats,
        }
        write_raw_page(doc.doc_dir, number, result.text, meta)

    def _page_failed(self, doc: _Doc, number: int, message: str) -> None:
        assert doc.state is not None
        doc.state.failed_pages[number] = message
        self.progress.error(message)

    def _drain_events(self) -> None:
        while self._events:
            kind, doc, value = self._events.popleft()
            if kind == "doc_failed":
                self._fail_doc(doc, value)
            elif kind == "doc_skipped":
                state = doc.state
                if state is not None:
                    doc.report.pages = len(state.selected)
                    doc.report.pages_done = len(state.selected)
                    doc.report.pages_reused = len(state.selected)
                self._close_doc(doc, STATUS_SKIPPED, None)
            elif kind == "doc_started":
                assert doc.state is not None
                name = str(doc.source)
                self.progress.document_started(name, len(doc.state.selected), value)
            elif kind == "doc_complete":
                if not doc.done:
                    self._finish_doc(doc)
            elif kind == "page_failed":
                number, message = value
                if not doc.done:
                    self._page_failed(doc, number, message)
                    self.progress.pages_done(1, 0)
                    doc.pending -= 1
                    if doc.pending == 0:
                        self._finish_doc(doc)

    def _fail_doc(self, doc: _Doc, message: str) -> None:
        if doc.done:
            return
        self.progress.error(message)
        self._close_doc(doc, STATUS_FAILED, message)

    def _close_doc(self, doc: _Doc, status: str, error: str | None) -> None:
        doc.done = True
        r = doc.report
        r.status = status
        r.error = error
        if doc.started:
            r.seconds = time.monotonic() - doc.started
        if status == STATUS_FAILED and not doc.state:
            r.output_dir = None
        self.progress.document_finished(r)

    def _finish_doc(self, doc: _Doc) -> None:
        """All pages are in: rebuild the document from its folder and write it."""
        state = doc.state
        assert state is not None
        r = doc.report
        try:
            record = assemble_record(doc.doc_dir, state)
            failed = failed_numbers(record)
            r.pages_failed = len(failed)
            r.pages_done = len(record.pages) - len(failed)
            r.failed_pages = failed
            if r.pages_done == 0:
                # Nothing converted: leave no output behind, only reusable raw pages if any.
                if not saved_page_numbers(doc.doc_dir):
                    remove_state(doc.doc_dir)
                    remove_if_empty(doc.doc_dir)
                    if not doc.doc_dir.exists():
                        r.output_dir = None
                first = failed[min(failed)] if failed else f"{doc.source}: no page converted"
                self._close_doc(doc, STATUS_FAILED, first)
                return
            rendered_doc = render_document(record, self.settings.render_options)
            crop_errors = self._write_images(doc.doc_dir, state, rendered_doc)
            if self.settings.layout:
                crop_errors += write_layout_overlay(
                    doc.doc_dir, state, rendered_doc, self.settings.password, self._pool
                )
            state.failed_pages = failed
            write_document(doc.doc_dir, state, rendered_doc, crop_errors)
        except OSError as exc:
            self._fail_doc(doc, f"{doc.doc_dir}: cannot write the output folder: {exc.strerror}")
            return
        except Exception as exc:  # a renderer bug must fail this document, not the run
            self._fail_doc(doc, f"{doc.source}: rendering failed: {type(exc).__name__}: {exc}")
            return
        for message in crop_errors:
            self.progress.error(f"{doc.source}: {message}")
        if state.status == STATUS_CONVERTED:
            self._close_doc(doc, REPORT_CONVERTED, None)
        else:
            problems = [without_source_prefix(m, doc.source) for m in failed.values()] + crop_errors
            self._close_doc(doc, REPORT_PARTIAL, "; ".join(problems[:3]))

    def _write_images(
        self, doc_dir: Path, state: DocumentState, rendered: RenderedDocument
    ) -> list[str]:
        remove_images(doc_dir)
        if not rendered.images or not self.settings.render_options.images:
            return []
        assert self._pool is not None
        futures = [
            self._pool.submit(
                cut_crops,
                state.source.path,
                number,
                state.dpi,
                self.settings.password,
                str(doc_dir),
                crops,
            )
            for number, crops in sorted(group_crops(rendered.images).items())
        ]
        errors = []
        for future in futures:
            try:
                error = future.result()
            except BrokenProcessPool:
                self._pool.rebuild()
                error = "images not written: the renderer crashed"
            if error:
                errors.append(error)
        return errors


def _stem(doc_dir: Path) -> str:
    return doc_dir.name


def _chain(first: PageRequest, rest: Iterator[PageRequest]) -> Iterator[PageRequest]:
    yield first
    yield from rest


__all__ = ["ConvertSettings", "Converter"]
