"""The --layout overlay of a finished document (`<stem>.layout.pdf`, drawn by
hpdparse.overlay.layout_pdf from the rendered JSON and the source file). An `OverlayWriter` writes
it for one document and returns one-line problems; as for image crops, there is one per place the
work can run."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from hpdparse.runner.workers import WorkerPool
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

OverlayWriter = Callable[[DocumentFolder, DocumentState, dict[str, Any]], list[str]]


class PoolOverlay:
    """Draw in a rasterizer process of `pool`: a conversion run opens sources in another thread,
    and PyMuPDF is not thread-safe."""

    def __init__(self, pool: WorkerPool, password: str | None) -> None:
        self.pool = pool
        self.password = password

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, document: dict[str, Any]
    ) -> list[str]:
        from hpdparse.overlay.layout_pdf import layout_job

        try:
            return self.pool.submit(
                layout_job, folder.location, state, document, self.password
            ).result()
        except BrokenProcessPool:
            self.pool.rebuild()
            return ["layout overlay not written: the renderer crashed"]


class InProcessOverlay:
    """Draw in this process (`hpdparse render --layout`)."""

    def __init__(self, password: str | None) -> None:
        self.password = password

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, document: dict[str, Any]
    ) -> list[str]:
        from hpdparse.overlay.layout_pdf import layout_job

        return layout_job(folder.location, state, document, self.password)
