"""The streaming pipeline: documents -> pages -> engine -> raw pages on disk -> documents -> files.

- Documents are opened one at a time, only when their pages are next in line.
- Pages are rendered and prepared (`engine.preparer()`) in a process pool (forkserver or spawn,
  never fork) at most `read_ahead` pages ahead of the engine, and handed to `engine.run` through a
  lazy iterator, so the engine holds at most `batch_size` pages and the host at most `read_ahead`
  more, however long the documents are.
- Results come back in completion order. Each page's raw text is saved at once
  (`output.write_raw_page`); the pipeline keeps only counters and the errors of failed pages per
  document. When a document's last page is in, the document is rebuilt from its raw/ folder and
  rendered (`assemble_record` + `write_document`, shared with `hpdparse render`), its .md last.
- Resume: a finished document (its .md exists, its resume state says converted with the same
  settings, its source unchanged) is skipped; otherwise every page with a reusable raw output is
  reused and only the others are sent to the engine.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from PIL import Image

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from hpdparse.document import PAGE_FAILED, PAGE_OK, DocumentRecord, PageRecord
from hpdparse.engines.base import FINISH_ERROR, Engine, EngineInfo, PageRequest, PageResult
from hpdparse.errors import EngineError, HpdparseError, InputError, OutputError
from hpdparse.inputs import PageRanges, open_source, render_page
from hpdparse.markdown.render import ImageCrop, RenderedDocument, RenderOptions, render_document
from hpdparse.output import (
    IMAGES_DIR,
    STATUS_CONVERTED,
    STATUS_IN_PROGRESS,
    STATUS_PARTIAL,
    DocumentState,
    SourceIdentity,
    assign_output_dirs,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    clear_doc_dir,
    json_path,
    load_state,
    markdown_path,
    prepare_doc_dir,
    raw_meta_path,
    raw_page_reusable,
    read_raw_page,
    remove_if_empty,
    remove_images,
    remove_raw_page,
    remove_state,
    saved_page_numbers,
    write_raw_page,
)
from hpdparse.progress import Progress
from hpdparse.report import STATUS_CONVERTED as REPORT_CONVERTED
from hpdparse.report import (
    STATUS_FAILED,
    STATUS_INTERRUPTED,
    STATUS_SKIPPED,
    DocumentReport,
    RunReport,
)
from hpdparse.report import STATUS_PARTIAL as REPORT_PARTIAL

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
    render_timeout: float = 300.0  # seconds for one page to render + prepare before it fails
    render_options: RenderOptions = field(default_factory=RenderOptions)

    def worker_count(self) -> int:
        return self.workers if self.workers > 0 else max(1, min(os.cpu_count() or 1, 8))

    def read_ahead_count(self) -> int:
        return self.read_ahead if self.read_ahead > 0 else 4 * self.worker_count()


# --- work done in the rasterizer processes -------------------------------------------------------

_preparer: Callable[[Image.Image], Any] | None = None


def _init_worker(preparer: Callable[[Image.Image], Any], main_pid: int) -> None:
    global _preparer
    _preparer = preparer
    _keep_freed_memory()
    # Ctrl-C reaches the whole process group: the main process decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(main_pid,), daemon=True).start()


def _keep_freed_memory() -> None:
    """Let glibc keep freed page-sized buffers for the next page instead of returning them.

    Each page allocates several buffers of ~10 MB (pixmap, image, PNG rows or tiles); by default
    glibc gives them back to the kernel on free, and faulting them in again for the next page
    cost about 40% of a worker's time. With these limits a worker's heap stays at its peak (a
    few pages' worth), which is still bounded. A no-op where the C library has no mallopt.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import ctypes.util

    try:
        mallopt = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD: page buffers come from the heap (32 MB: the cap)
    mallopt(-1, 256 << 20)  # M_TRIM_THRESHOLD: keep up to 256 MB of free heap top


def _exit_when_orphaned(main_pid: int) -> None:
    # After a kill -9 of the main process a pool worker would wait for work forever (it holds the
    # write end of its own task queue, and the forkserver waits for its workers), so it watches
    # the main process itself.
    while True:
        time.sleep(1.0)
        try:
            os.kill(main_pid, 0)
        except OSError:
            os._exit(0)


@dataclass
class _PreparedPage:
    payload: Any
    width_px: int
    height_px: int
    dpi: int | None
    label: str | None
    width_pt: float | None
    height_pt: float | None


def _prepare_page(path: str, number: int, dpi: int, password: str | None) -> _PreparedPage | str:
    """Render + prepare one page; an error comes back as its one-line message."""
    try:
        page = render_page(path, number, dpi, password)
    except InputError as exc:
        return str(exc)
    except Exception as exc:  # a renderer bug must fail the page, not the run
        return f"{path}: page {number} cannot be rendered: {type(exc).__name__}: {exc}"
    try:
        assert _preparer is not None
        payload = _preparer(page.image)
    except Exception as exc:
        return f"{path}: page {number} cannot be prepared: {type(exc).__name__}: {exc}"
    info = page.info
    return _PreparedPage(
        payload,
        page.image.width,
        page.image.height,
        page.dpi,
        info.label,
        info.width_pt,
        info.height_pt,
    )


def _cut_crops(
    path: str,
    number: int,
    dpi: int,
    password: str | None,
    doc_dir: str,
    crops: list[tuple[str, tuple[int, int, int, int]]],
) -> str | None:
    """Re-render page `number` as the model saw it and save the crops; an error as one line."""
    try:
        page = render_page(path, number, dpi, password)
    except InputError as exc:
        return f"images of page {number} not written: {exc}"
    try:
        image = page.image
        for filename, bbox in crops:
            x1, y1, x2, y2 = bbox
            x1, x2 = sorted((max(0, min(x1, image.width)), max(0, min(x2, image.width))))
            y1, y2 = sorted((max(0, min(y1, image.height)), max(0, min(y2, image.height))))
            if x2 - x1 < 1 or y2 - y1 < 1:
                continue
            target = Path(doc_dir) / filename
            target.parent.mkdir(parents=True, exist_ok=True)
            buffer = _png_bytes(image.crop((x1, y1, x2, y2)))
            atomic_write_bytes(target, buffer)
    except OSError as exc:
        return f"images of page {number} not written: {exc.strerror or exc}"
    return None


def _png_bytes(image: Image.Image) -> bytes:
    import io

    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False, compress_level=6)
    return out.getvalue()


def _mp_context() -> multiprocessing.context.BaseContext:
    # Never fork: vLLM/torch may already run threads in this process.
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")


@contextlib.contextmanager
def _pseudo_main_file_hidden() -> Iterator[None]:
    """spawn/forkserver workers re-import the parent's main module from its __file__; when that
    is no file (a script read from stdin: "<stdin>") they would die on start, so hide it."""
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    if not path or os.path.isfile(path):
        yield
        return
    del main.__file__
    try:
        yield
    finally:
        main.__file__ = path


def _widen_result_pipe(pool: ProcessPoolExecutor) -> None:
    """Give the pipe results come back through 1 MiB instead of 64 KiB (Linux).

    A page's tiles are ~12 MB: through a 64 KiB pipe the worker and the main process hand them
    over in ~200 lock-step rounds, which cost the worker ~6 ms a page. Best effort: the pool's
    queue is a private attribute, and the system may cap pipe sizes lower.
    """
    set_size = getattr(fcntl, "F_SETPIPE_SZ", None) if fcntl is not None else None
    reader = getattr(getattr(pool, "_result_queue", None), "_reader", None)
    if set_size is None or reader is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fcntl.fcntl(reader.fileno(), set_size, 1 << 20)


class _WorkerPool:
    """A process pool that can be rebuilt when a renderer process dies (MuPDF can crash on a
    damaged file)."""

    def __init__(self, workers: int, preparer: Callable[[Image.Image], Any]) -> None:
        self._workers = workers
        self._preparer = preparer
        self._pool: ProcessPoolExecutor | None = None

    @property
    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=_mp_context(),
                initializer=_init_worker,
                initargs=(self._preparer, os.getpid()),
            )
            _widen_result_pipe(self._pool)
        return self._pool

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        # Worker processes start inside submit(), so that is where the main module matters.
        with _pseudo_main_file_hidden():
            return self.pool.submit(fn, *args)

    def rebuild(self, kill: bool = False) -> None:
        """Drop the pool (a new one starts on the next submit); `kill` ends hung processes."""
        if kill and self._pool is not None:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                with contextlib.suppress(Exception):
                    process.kill()
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.shutdown(cancel=True)

    def shutdown(self, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=cancel)
            self._pool = None


# --- rebuilding a document from its folder (convert and render) ---------------------------------


def settings_of(state: DocumentState) -> dict[str, Any]:
    return {
        "dpi": state.dpi,
        "pages": state.pages_spec,
        "selected_pages": len(state.selected),
        "prompt": state.reuse_key.get("prompt"),
        "max_tokens": state.reuse_key.get("max_tokens"),
    }


def assemble_record(doc_dir: Path, state: DocumentState) -> DocumentRecord:
    """The document as its raw/ folder holds it: a page with a valid raw output is OK, any other
    selected page is failed (with the error recorded in the state, if any)."""
    pages: list[PageRecord] = []
    for number in state.selected:
        raw = read_raw_page(doc_dir, number)
        if raw is not None:
            meta = raw.meta
            pages.append(
                PageRecord(
                    number=number,
                    width_px=int(meta.get("width_px") or 0),
                    height_px=int(meta.get("height_px") or 0),
                    status=PAGE_OK,
                    raw=raw.text,
                    finish_reason=meta.get("finish_reason"),
                    label=meta.get("label"),
                    width_pt=meta.get("width_pt"),
                    height_pt=meta.get("height_pt"),
                    dpi=meta.get("dpi"),
                    prompt_tokens=int(meta.get("prompt_tokens") or 0),
                    output_tokens=int(meta.get("output_tokens") or 0),
                    seconds=float(meta.get("seconds") or 0.0),
                    stats=dict(meta.get("stats") or {}),
                )
            )
        else:
            error = state.failed_pages.get(number) or "no raw output for this page"
            pages.append(
                PageRecord(
                    number=number,
                    width_px=0,
                    height_px=0,
                    status=PAGE_FAILED,
                    finish_reason=FINISH_ERROR,
                    error=error,
                )
            )
    return DocumentRecord(
        source=state.source.path,
        stem=state.stem,
        page_count=state.page_count,
        pages=pages,
        engine=state.engine,
        model=state.model,
        revision=state.revision,
        settings=settings_of(state),
    )


def _group_crops(
    crops: list[ImageCrop],
) -> dict[int, list[tuple[str, tuple[int, int, int, int]]]]:
    by_page: dict[int, list[tuple[str, tuple[int, int, int, int]]]] = {}
    for crop in crops:
        by_page.setdefault(crop.page_number, []).append((crop.filename, tuple(crop.bbox_px)))
    return by_page


def write_document(
    doc_dir: Path,
    state: DocumentState,
    rendered: RenderedDocument,
    crop_errors: list[str],
) -> None:
    """Write .json, the final state and, last, the .md (images are already written)."""
    state.status = (
        STATUS_CONVERTED if not state.failed_pages and not crop_errors else STATUS_PARTIAL
    )
    atomic_write_json(json_path(doc_dir, state.stem), rendered.json)
    state.save(doc_dir)
    atomic_write_text(markdown_path(doc_dir, state.stem), rendered.markdown)


def _failed_numbers(record: DocumentRecord) -> dict[int, str]:
    return {p.number: p.error or "failed" for p in record.pages if p.status == PAGE_FAILED}


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
        self._inflight: dict[tuple[int, int], _PreparedPage] = {}
        self._pool: _WorkerPool | None = None
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
            # preparer() first: an engine may resolve its checkpoint (and revision) there, and the
            # reuse key of saved pages must carry that revision.
            self._pool = _WorkerPool(self.settings.worker_count(), self.engine.preparer())
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
                future = self._pool.submit(
                    _prepare_page, str(doc.source), number, s.dpi, s.password
                )
                window.append([doc, number, future, 1])
            if not window:
                return
            doc, number, future, attempts = window[0]
            try:
                prepared = future.result(timeout=s.render_timeout)
            except (BrokenProcessPool, FuturesTimeout) as exc:
                # A renderer process died (MuPDF can crash on a damaged file) or hangs. Which page
                # killed it is unknown, so the pages in the window are tried again in a new pool;
                # the page waited on gives up after RENDER_ATTEMPTS crashes or one timeout.
                timed_out = isinstance(exc, FuturesTimeout)
                self._pool.rebuild(kill=timed_out)
                if timed_out or attempts >= RENDER_ATTEMPTS:
                    window.popleft()
                    reason = (
                        f"rendering took more than {s.render_timeout:g} s"
                        if timed_out
                        else "the renderer crashed"
                    )
                    msg = f"{doc.source}: page {number} cannot be rendered: {reason}"
                    self._events.append(("page_failed", doc, (number, msg)))
                else:
                    window[0][3] = attempts + 1
                for entry in window:
                    entry[2] = self._pool.submit(
                        _prepare_page, str(entry[0].source), entry[1], s.dpi, s.password
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
        self, doc: _Doc, number: int, result: PageResult, prepared: _PreparedPage
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
            failed = _failed_numbers(record)
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
            problems = [_without_prefix(m, doc.source) for m in failed.values()] + crop_errors
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
                _cut_crops,
                state.source.path,
                number,
                state.dpi,
                self.settings.password,
                str(doc_dir),
                crops,
            )
            for number, crops in sorted(_group_crops(rendered.images).items())
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


def _without_prefix(message: str, source: Path) -> str:
    prefix = f"{source}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def _stem(doc_dir: Path) -> str:
    return doc_dir.name


def _chain(first: PageRequest, rest: Iterator[PageRequest]) -> Iterator[PageRequest]:
    yield first
    yield from rest


# --- render: rebuild documents from raw/ without a model ----------------------------------------


def render_folders(
    doc_dirs: list[Path],
    options: RenderOptions,
    password: str | None = None,
    progress: Progress | None = None,
) -> RunReport:
    """Rebuild .md, .json and images/ of document folders from their raw/ pages and source."""
    progress = progress or Progress()
    started = time.monotonic()
    report = RunReport(command="render")
    progress.start(len(doc_dirs))
    for doc_dir in doc_dirs:
        t0 = time.monotonic()
        r = DocumentReport(source=str(doc_dir), output_dir=str(doc_dir))
        report.documents.append(r)
        try:
            _render_one(Path(doc_dir), options, password, r)
        except HpdparseError as exc:
            r.status = STATUS_FAILED
            r.error = str(exc)
            progress.error(str(exc))
        except OSError as exc:
            r.status = STATUS_FAILED
            r.error = f"{doc_dir}: {exc.strerror or exc}"
            progress.error(r.error)
        r.seconds = time.monotonic() - t0
        progress.document_finished(r)
    report.seconds = time.monotonic() - started
    return report


def _render_one(doc_dir: Path, options: RenderOptions, password: str | None, r: Any) -> None:
    state = load_state(doc_dir)
    if state is None:
        raise OutputError(f"{doc_dir}: not an hpdparse output folder (no raw/document.json)")
    r.source = state.source.path
    record = assemble_record(doc_dir, state)
    failed = _failed_numbers(record)
    r.pages = len(record.pages)
    r.pages_failed = len(failed)
    r.pages_done = r.pages - r.pages_failed
    r.pages_reused = r.pages_done
    r.failed_pages = failed
    if r.pages_done == 0:
        raise OutputError(f"{doc_dir}: no page has a raw output to render")
    rendered = render_document(record, options)
    with contextlib.suppress(FileNotFoundError):
        markdown_path(doc_dir, state.stem).unlink()
    remove_images(doc_dir)
    crop_errors: list[str] = []
    if rendered.images and options.images:
        source = Path(state.source.path)
        if not source.is_file():
            raise InputError(f"{source}: source not found, images of {doc_dir} cannot be cut")
        if not state.source.matches_file(source):
            raise InputError(f"{source}: the source changed since {doc_dir} was converted")
        for number, crops in sorted(_group_crops(rendered.images).items()):
            error = _cut_crops(str(source), number, state.dpi, password, str(doc_dir), crops)
            if error:
                crop_errors.append(error)
    state.failed_pages = failed
    state.render_options = dataclasses.asdict(options)
    write_document(doc_dir, state, rendered, crop_errors)
    if state.status == STATUS_CONVERTED:
        r.status = REPORT_CONVERTED
    else:
        r.status = REPORT_PARTIAL
        problems = [_without_prefix(m, Path(state.source.path)) for m in failed.values()]
        r.error = "; ".join((problems + crop_errors)[:3])


__all__ = [
    "IMAGES_DIR",
    "ConvertSettings",
    "Converter",
    "assemble_record",
    "render_folders",
    "write_document",
]
