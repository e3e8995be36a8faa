"""Figure crops of a finished document: the renderer names the figure regions of each page; they
are cut from the page rasterized again exactly as the model saw it (same dpi) and written into the
document folder. An `ImageCutter` does that for one document and returns one-line errors for the
pages whose images could not be written; there is one per place the work can run."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool

from hpdparse.errors import InputError
from hpdparse.markdown.render import ImageCrop
from hpdparse.runner.workers import WorkerPool, cut_crops
from hpdparse.sources.location import source_location
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

PageCrops = dict[int, list[tuple[str, tuple[int, int, int, int]]]]
"""Page number -> (file name in the folder, pixel box) of each crop on that page."""

ImageCutter = Callable[[DocumentFolder, DocumentState, PageCrops], list[str]]


def group_crops(crops: list[ImageCrop]) -> PageCrops:
    by_page: PageCrops = {}
    for crop in crops:
        by_page.setdefault(crop.page_number, []).append((crop.filename, tuple(crop.bbox_px)))
    return by_page


class PoolCutter:
    """Cut in the rasterizer processes of `pool` (a run's own, already started), pages in
    parallel; a crashed process costs that page's images, not the document."""

    def __init__(self, pool: WorkerPool, password: str | None) -> None:
        self.pool = pool
        self.password = password

    def __call__(self, folder: DocumentFolder, state: DocumentState, crops: PageCrops) -> list[str]:
        futures = [
            self.pool.submit(
                cut_crops, state.source.path, number, state.dpi, self.password, folder, page_crops
            )
            for number, page_crops in sorted(crops.items())
        ]
        errors = []
        for future in futures:
            try:
                error = future.result()
            except BrokenProcessPool:
                self.pool.rebuild()
                error = "images not written: the renderer crashed"
            if error:
                errors.append(error)
        return errors


class InProcessCutter:
    """Cut in this process, one page after the other (`hpdparse render`, which has no pool).
    The source must still be the file that was converted: InputError otherwise."""

    def __init__(self, password: str | None) -> None:
        self.password = password

    def __call__(self, folder: DocumentFolder, state: DocumentState, crops: PageCrops) -> list[str]:
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
        errors = []
        for number, page_crops in sorted(crops.items()):
            error = cut_crops(str(source), number, state.dpi, self.password, folder, page_crops)
            if error:
                errors.append(error)
        return errors
