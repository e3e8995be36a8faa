"""Figure crops of a finished document: the renderer names the figure regions of each page; they
are cut from the page rasterized again exactly as the model saw it (same dpi) and written into the
document folder. An `ImageCutter` does that for one document in two steps: called, it starts the
cutting (on the thread that owns the rasterizer pool) and returns `WriteCrops`, which waits for
the crops, writes them (on any thread) and returns one-line errors for the pages whose images
could not be written. There is one cutter per place the work can run."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from hpdparse.errors import InputError
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

WriteCrops = Callable[[], list[str]]
"""Wait for a document's crops, write them and return the one-line errors (pages in order)."""

ImageCutter = Callable[[DocumentFolder, DocumentState, PageCrops], WriteCrops]


def group_crops(crops: list[ImageCrop]) -> PageCrops:
    by_page: PageCrops = {}
    for crop in crops:
        by_page.setdefault(crop.page_number, []).append((crop.filename, tuple(crop.bbox_px)))
    return by_page


@dataclass
class PoolCutter:
    """Cut in the rasterizer processes of `pool` (a run's own, already started), pages in
    parallel; a crashed process costs that page's images, not the document (the pool is rebuilt
    by its next submit, on the thread that owns it). The crops are written from this process as
    they come, concurrently."""

    pool: WorkerPool
    password: str | None

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, crops: PageCrops
    ) -> WriteCrops:
        futures = {
            number: self.pool.submit(
                cut_crops, state.source.path, number, state.dpi, self.password, page_crops
            )
            for number, page_crops in sorted(crops.items())
        }
        return lambda: _write_crops(folder, _results(futures))


def _results(futures: dict[int, Future]) -> Iterator[tuple[int, Cut]]:
    for number, future in futures.items():
        try:
            yield number, future.result()
        except (BrokenProcessPool, CancelledError):  # cancelled: the pool was rebuilt
            yield number, "images not written: the renderer crashed"


@dataclass
class InProcessCutter:
    """Cut in this process, one page after the other (`hpdparse render`, which has no pool).
    The source must still be the file that was converted: InputError otherwise."""

    password: str | None

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, crops: PageCrops
    ) -> WriteCrops:
        return lambda: self._cut(folder, state, crops)

    def _cut(self, folder: DocumentFolder, state: DocumentState, crops: PageCrops) -> list[str]:
        source = source_location(state.source.path)
        if not source.is_file():
            raise InputError(
                f"{source}: source not found, images of {folder.location} cannot be cut",
                path=source,
            )
        if not state.source.matches_file(source):
            raise InputError(
                f"{source}: the source changed since {folder.location} was converted", path=source
            )
        cuts = (
            (number, cut_crops(str(source), number, state.dpi, self.password, page_crops))
            for number, page_crops in sorted(crops.items())
        )
        return _write_crops(folder, cuts)


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
