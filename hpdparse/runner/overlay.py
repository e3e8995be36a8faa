"""The --layout overlay of a finished document (`<stem>.layout.pdf`, drawn by
hpdparse.overlay.layout_pdf from the rendered pages and the source file). An `OverlayWriter` writes
it for one document in two steps, as the image cutter does: called, it starts the drawing and
returns a function that waits for it and returns one-line problems; there is one per place the
work can run."""

from __future__ import annotations

import copy
from collections.abc import Callable
from concurrent.futures import CancelledError, Future
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass

from hpdparse.hpd.stream import ParsedPage
from hpdparse.runner.workers import WorkerPool
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.state import DocumentState

OverlayWriter = Callable[[DocumentFolder, DocumentState, list[ParsedPage]], Callable[[], list[str]]]


@dataclass
class PoolOverlay:
    """Draw in a rasterizer process of `pool`: a conversion run opens sources in another thread,
    and PyMuPDF is not thread-safe."""

    pool: WorkerPool
    password: str | None

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, pages: list[ParsedPage]
    ) -> Callable[[], list[str]]:
        from hpdparse.overlay.layout_pdf import layout_job

        # A copy: the job is pickled later, on the pool's thread, while the finish goes on.
        job = self.pool.submit(layout_job, folder.location, copy.copy(state), pages, self.password)
        return lambda: _drawn(job)


def _drawn(job: Future) -> list[str]:
    try:
        return job.result()
    except (BrokenProcessPool, CancelledError):  # cancelled: the pool was rebuilt
        return ["layout overlay not written: the renderer crashed"]


@dataclass
class InProcessOverlay:
    """Draw in this process (`hpdparse render --layout`)."""

    password: str | None

    def __call__(
        self, folder: DocumentFolder, state: DocumentState, pages: list[ParsedPage]
    ) -> Callable[[], list[str]]:
        from hpdparse.overlay.layout_pdf import layout_job

        return lambda: layout_job(folder.location, state, pages, self.password)
