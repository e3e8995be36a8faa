"""A finished document's images: its figure crops and its --layout overlay (`<stem>.layout.pdf`,
drawn by hpdparse.overlay.layout_pdf from the rendered pages and the source file). The renderer
names the figure regions of each page; they are cut from the page rasterized again exactly as the
model saw it (same dpi) and written into the document folder. `ImageWork` does both for one
document in two steps: each call starts the work (on the thread that owns the rasterizer pool)
and returns a function that waits for it, writes what is left to write (on any thread) and
returns one-line problems (the pages whose images could not be written, an overlay not
written). The work runs in a conversion run's rasterizer processes, or in this process
(`hpdparse render`, which has no pool)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from concurrent.futures import CancelledError
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from hpdparse.errors import InputError
from hpdparse.hpd.stream import ParsedPage
from hpdparse.markdown.render import ImageCrop
from hpdparse.runner.workers import WorkerPool, cut_crops
from hpdparse.sources.location import source_location
from hpdparse.store.concurrent_writes import ConcurrentWrites
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

PageCrops = dict[int, list[tuple[str, tuple[int, int, int, int]]]]
"""Page number -> (file name in the folder, pixel box) of each crop on that page."""

Cut = list[tuple[str, bytes]] | str
"""A page's crops cut (file name, PNG bytes), or why they could not be: one line."""

Written = Callable[[], list[str]]
"""Wait for a document's crops (or overlay), write them and return the one-line problems."""


def group_crops(crops: list[ImageCrop]) -> PageCrops:
    by_page: PageCrops = {}
    for crop in crops:
        by_page.setdefault(crop.page_number, []).append((crop.filename, tuple(crop.bbox_px)))
    return by_page


@dataclass
class ImageWork:
    """Cut crops (and, with `layout`, draw the overlay) in the rasterizer processes of `pool` (a
    run's own, already started), pages in parallel, a crashed process costing that page's images
    (or the overlay), not the document (the pool is rebuilt by its next submit, on the thread
    that owns it); or, without a pool, in this process, one page after the other, from a source
    that must still be the file that was converted (InputError otherwise). The crops are written
    from this process as they come, concurrently."""

    password: str | None
    pool: WorkerPool | None = None
    layout: bool = False

    def _start(self, crashed: Any, fn: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """`fn(*args)` started in the pool (its result, or `crashed` when its process died), or
        run in this process when called."""
        if self.pool is None:
            return functools.partial(fn, *args)
        future = self.pool.submit(fn, *args)

        def result() -> Any:
            try:
                return future.result()
            except (BrokenProcessPool, CancelledError):  # cancelled: the pool was rebuilt
                return crashed

        return result

    def crops(self, folder: DocumentFolder, state: DocumentState, crops: PageCrops) -> Written:
        path = state.source.path
        source = path if self.pool is not None else str(source_location(path))
        cuts = [
            (number, self._start(_CRASHED, cut_crops, source, number, state.dpi, self.password, c))
            for number, c in sorted(crops.items())
        ]

        def write() -> list[str]:
            if self.pool is None:
                _check_source(folder, state)
            return _write_crops(folder, ((number, cut()) for number, cut in cuts))

        return write

    def overlay(
        self, folder: DocumentFolder, state: DocumentState, pages: list[ParsedPage]
    ) -> Written:
        """Drawn in a rasterizer process: a conversion run opens sources in another thread, and
        PyMuPDF is not thread-safe."""
        from hpdparse.overlay.layout_pdf import layout_job

        crashed = ["layout overlay not written: the renderer crashed"]
        # A copy: the job is pickled later, on the pool's thread, while the finish goes on.
        return self._start(
            crashed, layout_job, folder.location, copy.copy(state), pages, self.password
        )


_CRASHED = "images not written: the renderer crashed"


def _check_source(folder: DocumentFolder, state: DocumentState) -> None:
    source = source_location(state.source.path)
    if not source.is_file():
        raise InputError(
            f"{source}: source not found, images of {folder.location} cannot be cut", path=source
        )
    if not state.source.matches_file(source):
        raise InputError(
            f"{source}: the source changed since {folder.location} was converted", path=source
        )


def _write_crops(folder: DocumentFolder, cuts: Iterable[tuple[int, Cut]]) -> list[str]:
    """Write each page's crops into `folder` as they come, concurrently (or keep the page's
    error); once every write is done, one line per page whose images are missing, in page
    order."""
    errors: dict[int, str | None] = {}  # page number -> error cutting it
    with ConcurrentWrites() as writes:
        for number, cut in cuts:
            if isinstance(cut, str):
                errors[number] = cut
                continue
            errors[number] = None
            for name, png in cut:
                writes.submit(number, functools.partial(folder.write_image, name, png))
        lines = []
        for number, error in sorted(errors.items()):
            reason = writes.settle(number)
            if error is None and reason is not None:
                error = f"images of page {number} not written: {reason}"
            if error:
                lines.append(error)
        return lines
