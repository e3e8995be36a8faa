"""The rasterizer processes: pages are rasterized with PyMuPDF and prepared for the engine
(`engine.preparer()`: PNG bytes or HPD tiles, into the page's `PageRequest`) in a pool of worker
processes ahead of the engine;
figure crops are cut there too (the main process writes them: `runner.images`). The pool is
forkserver (or spawn, never fork: vLLM and torch run threads in the main process) and is rebuilt
when MuPDF crashes a worker on a damaged file. Office and HTML inputs are converted to PDF there
too (`convert_document`), into the run's conversion folder (`hpdparse.sources.office`).
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from PIL import Image

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

from hpdparse.engines.base import PageRequest
from hpdparse.errors import InputError
from hpdparse.malloc import M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, mallopt
from hpdparse.sources.location import input_filesystem_modules, source_location
from hpdparse.sources.office import DEFAULT_CONVERT_TIMEOUT, use_conversion_folder
from hpdparse.sources.open import open_source
from hpdparse.sources.rasterize import page_text_of, rasterize_page

_preparer: Callable[[Image.Image], Any] | None = None


def _init_worker(
    preparer: Callable[[Image.Image], Any], main_pid: int, conversions: tuple[Path | None, float]
) -> None:
    global _preparer
    _preparer = preparer
    use_conversion_folder(*conversions)
    # glibc keeps freed page-sized buffers for the next page instead of returning them. Each
    # page allocates several buffers of ~10 MB (pixmap, image, PNG rows or tiles); by default
    # glibc gives them back to the kernel on free, and faulting them in again for the next page
    # cost about 40% of a worker's time. With these limits a worker's heap stays at its peak (a
    # few pages' worth), which is still bounded. A no-op where the C library is not glibc.
    # Page buffers come from the heap (32 MB: the cap); up to 256 MB of free heap top kept.
    mallopt((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 256 << 20))
    # Ctrl-C reaches the whole process group: the main process decides what to do.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    threading.Thread(target=_exit_when_orphaned, args=(main_pid,), daemon=True).start()


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


def prepare_page(
    path: str, number: int, dpi: int, password: str | None, read_text_layer: bool = False
) -> PageRequest | str:
    """Rasterize + prepare one page into its request (keyed by the page number: the caller keys
    it its own way) with its geometry and, with `read_text_layer` (--text-layer prefer), its
    text layer; an error comes back as its one-line message (a text layer that cannot be read is
    none)."""
    text = None
    if read_text_layer:
        with contextlib.suppress(Exception):
            text = page_text_of(path, number, password)
    try:
        image, geometry = rasterize_page(path, number, dpi, password)
    except InputError as exc:
        return str(exc)
    except Exception as exc:  # a renderer bug must fail the page, not the run
        return f"{path}: page {number} cannot be rendered: {type(exc).__name__}: {exc}"
    try:
        assert _preparer is not None
        payload = _preparer(image)
    except Exception as exc:
        return f"{path}: page {number} cannot be prepared: {type(exc).__name__}: {exc}"
    return PageRequest(number, payload, geometry, text_layer=text)


def convert_document(path: str) -> str | None:
    """Convert an Office or HTML file to PDF into the conversion folder (opening it does); its
    one-line error, or None."""
    try:
        open_source(source_location(path)).close()
    except InputError as exc:
        return str(exc)
    except Exception as exc:  # a bug must fail the document, not the run
        return f"{path}: cannot be converted to PDF: {type(exc).__name__}: {exc}"
    return None


def cut_crops(
    path: str,
    number: int,
    dpi: int,
    password: str | None,
    crops: list[tuple[str, tuple[int, int, int, int]]],
) -> list[tuple[str, bytes]] | str:
    """Rasterize page `number` again as the model saw it and cut the crops (file name, pixel
    box): each one's file name and PNG bytes, for the caller to write; an error as one line."""
    try:
        image, _ = rasterize_page(path, number, dpi, password)
    except InputError as exc:
        return f"images of page {number} not written: {exc}"
    pngs = []
    for filename, bbox in crops:
        x1, y1, x2, y2 = bbox
        x1, x2 = sorted((max(0, min(x1, image.width)), max(0, min(x2, image.width))))
        y1, y2 = sorted((max(0, min(y1, image.height)), max(0, min(y2, image.height))))
        if x2 - x1 < 1 or y2 - y1 < 1:
            continue
        png = io.BytesIO()
        image.crop((x1, y1, x2, y2)).save(png, format="PNG", optimize=False, compress_level=6)
        pngs.append((filename, png.getvalue()))
    return pngs


def _mp_context() -> multiprocessing.context.BaseContext:
    # Never fork: vLLM/torch may already run threads in this process.
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    # The rasterizers fork from a server that imported this module (PyMuPDF, Pillow) once,
    # instead of each importing it: a new pool's first pages come twice as fast. So do the file
    # systems of the inputs at URLs read so far (planning reads a document before its pages go
    # to the workers). The server starts with the process's first pool and keeps its preload.
    context.set_forkserver_preload(["__main__", __name__, *input_filesystem_modules()])
    return context


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


class WorkerPool:
    """A process pool that can be rebuilt when a renderer process dies (MuPDF can crash on a
    damaged file). Several runs may share one (the document service runs a conversion per
    document): submitting and rebuilding take a lock, and `generation` counts the rebuilds, so
    that of the runs that find the same crash only the first rebuilds the pool."""

    def __init__(
        self,
        workers: int,
        preparer: Callable[[Image.Image], Any],
        conversion_folder: Path | None = None,
        convert_timeout: float = DEFAULT_CONVERT_TIMEOUT,
    ) -> None:
        """`conversion_folder`, `convert_timeout`: where the workers keep the PDFs of Office and
        HTML inputs (None: nowhere) and how long LibreOffice may take on one."""
        self._workers = workers
        self._preparer = preparer
        self._conversions = (conversion_folder, convert_timeout)
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.RLock()
        self.generation = 0  # the pool futures submitted now run in; +1 at each rebuild
        self.shared = False  # other runs submit to it too (SharedPool)

    @property
    def pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self._workers,
                mp_context=_mp_context(),
                initializer=_init_worker,
                initargs=(self._preparer, os.getpid(), self._conversions),
            )
            _widen_result_pipe(self._pool)
        return self._pool

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future:
        """Run `fn(*args)` in a worker process. A pool broken by a process that died under
        another job (whose caller got BrokenProcessPool) is rebuilt first."""
        # Worker processes start inside submit(), so that is where the main module matters.
        with self._lock, _pseudo_main_file_hidden():
            try:
                return self.pool.submit(fn, *args)
            except BrokenProcessPool:
                self.shutdown(cancel=True)
                return self.pool.submit(fn, *args)

    def alone(self) -> WorkerPool:
        """A pool of one process like this one's, for a page that must run by itself."""
        return WorkerPool(1, self._preparer, *self._conversions)

    def submit_tracked(self, fn: Callable[..., Any], *args: Any) -> tuple[Future, int]:
        """`submit`, with the generation of the pool the future runs in."""
        with self._lock:
            future = self.submit(fn, *args)
            return future, self.generation

    def rebuild(self, kill: bool = False, generation: int | None = None) -> None:
        """Drop the pool (a new one starts on the next submit); `kill` ends hung processes.
        With `generation` (that of the failed futures), only when no one rebuilt it since."""
        with self._lock:
            if generation is not None and generation != self.generation:
                return
            if kill and self._pool is not None:
                for process in list(getattr(self._pool, "_processes", {}).values()):
                    with contextlib.suppress(Exception):
                        process.kill()
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
            self.shutdown(cancel=True)

    def shutdown(self, cancel: bool = False) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=cancel)
                self._pool = None
                self.generation += 1


class SharedPool:
    """Rasterizer processes that several conversion runs share (the document service): one
    `WorkerPool` and the conversion folder its Office and HTML PDFs go to, named by their bytes'
    digest (hpdparse.sources.office), so one folder serves every run. `close` ends both."""

    def __init__(
        self,
        workers: int,
        preparer: Callable[[Image.Image], Any],
        conversion_folder: Path,
        convert_timeout: float = DEFAULT_CONVERT_TIMEOUT,
    ) -> None:
        conversion_folder.mkdir(parents=True, exist_ok=True)
        self.conversion_folder = conversion_folder
        use_conversion_folder(conversion_folder, convert_timeout)
        self.pool = WorkerPool(workers, preparer, conversion_folder, convert_timeout)
        self.pool.shared = True

    def close(self) -> None:
        self.pool.shutdown(cancel=True)
        use_conversion_folder(None)
