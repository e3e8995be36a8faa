"""Figure crops of a finished document: the renderer names the figure regions of each page; they
are cut from the page rasterized again exactly as the model saw it (same dpi) and written into the
document folder. An `ImageCutter` does that for one document in two steps: called, it starts the
cutting (on the thread that owns the rasterizer pool) and returns `WriteCrops`, which waits for
the crops, writes them (on any thread) and returns one-line errors for the pages whose images
could not be written. There is one cutter per place the work can run."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool

from hpdparse.errors import InputError
from hpdparse.markdown.render import ImageCrop
from hpdparse.runner.workers import WorkerPool, cut_crops
from hpdparse.sources.location import source_location
from hpdparse.store.concurrent_writes import ConcurrentWrites
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

PageCrops = dict[int, list[tuple[str, tuple[int, int, int, int]]]]
"""Page number -> (file name in the folder, pixel box) of each crop on that page."""

WriteCrops = Callable[[], list[str]]
"""Wait for a document's crops, write them and return the one-line errors (pages in order)."""

ImageCutter = Callable[[DocumentFolder, DocumentState, PageCrops], WriteCrops]


def group_crops(crops: list[ImageCrop]) -> PageCrops:
    by_page: PageCrops = {}
    for crop in crops:
        by_page.setdefault(crop.page_number, []).append((crop.filename, tuple(crop.bbox_px)))
    return by_page


class PoolCutter:
    """Cut in the rasterizer processes of `pool` (a run's own, already started), pages in
    parallel; a crashed process costs that page's images, not the document (the pool is rebuilt
    by its next submit, on the thread that owns it). The crops are written from this process as
    they come, concurrently (`ConcurrentWrites`)."""

    def __init__(self, pool: WorkerPool, password: str | None) -> None:
        self.pool = pool
        self.password = password

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, crops: PageCrops
    ) -> WriteCrops:
        futures = {
            number: self.pool.submit(
                cut_crops, state.source.path, number, state.dpi, self.password, page_crops
            )
            for number, page_crops in sorted(crops.items())
        }
        return lambda: _write_cut(folder, futures)


def _write_cut(folder: DocumentFolder, futures: dict[int, Future]) -> list[str]:
    with _CropWriter(folder) as writer:
        for number, future in futures.items():
            try:
                cut = future.result()
            except (BrokenProcessPool, CancelledError):  # cancelled: the pool was rebuilt
                cut = "images not written: the renderer crashed"
            writer.write(number, cut)
        return writer.errors()


class InProcessCutter:
    """Cut in this process, one page after the other (`hpdparse render`, which has no pool).
    The source must still be the file that was converted: InputError otherwise."""

    def __init__(self, password: str | None) -> None:
        self.password = password

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
        with _CropWriter(folder) as writer:
            for number, page_crops in sorted(crops.items()):
                writer.write(
                    number, cut_crops(str(source), number, state.dpi, self.password, page_crops)
                )
            return writer.errors()


class _CropWriter:
    """Writes the crops of a document's pages into its folder concurrently and keeps one error
    per page whose crops could not be cut or written."""

    def __init__(self, folder: DocumentFolder) -> None:
        self.folder = folder
        self._writes = ConcurrentWrites()
        self._pages: dict[int, str | None] = {}  # page number -> error cutting it

    def __enter__(self) -> _CropWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._writes.close()

    def write(self, number: int, cut: list[tuple[str, bytes]] | str) -> None:
        """Write page `number`'s crops (or keep its error)."""
        if isinstance(cut, str):
            self._pages[number] = cut
            return
        self._pages[number] = None
        write = self.folder.write_image
        for name, png in cut:
            self._writes.submit(number, lambda name=name, png=png: write(name, png))

    def errors(self) -> list[str]:
        """Once every write is done: one line per page whose images are missing, in page order."""
        errors = []
        for number, error in sorted(self._pages.items()):
            reason = self._writes.settle(number)
            if error is None and reason is not None:
                error = f"images of page {number} not written: {reason}"
            if error:
                errors.append(error)
        return errors
