"""`hpdparse render`: rebuild the .md, .json and images/ of converted document folders from their
raw pages and source file, without a model (`finish.DocumentFinish`, as `convert` does)."""

from __future__ import annotations

import time
from pathlib import Path

from hpdparse.errors import HpdparseError, OutputError
from hpdparse.markdown.render import RenderOptions
from hpdparse.runner.finish import DocumentFinish
from hpdparse.runner.images import ImageWork
from hpdparse.runner.progress import Progress
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.report import DocumentReport, RunReport
from hpdparse.store.statuses import STATUS_FAILED


def render_folders(
    doc_dirs: list[Path | str],
    options: RenderOptions,
    password: str | None = None,
    progress: Progress | None = None,
    layout: bool = False,
) -> RunReport:
    """Rebuild .md, .json and images/ of document folders from their raw/ pages and source
    (and the layout overlay with `layout`); problems with images or the overlay are one-line
    errors on the progress display."""
    progress = progress or Progress()
    started = time.monotonic()
    report = RunReport(command="render")
    progress.start(len(doc_dirs))
    images = ImageWork(password, layout=layout)
    for doc_dir in doc_dirs:
        t0 = time.monotonic()
        folder = open_document_folder(doc_dir)
        r = DocumentReport(source=folder.location, output_dir=folder.location)
        report.documents.append(r)
        try:
            for warning in _render_one(folder, options, images, r):
                progress.error(warning)
        except (HpdparseError, OSError) as exc:
            r.status, r.error = STATUS_FAILED, str(exc)
            if isinstance(exc, OSError):
                r.error = f"{folder.location}: {exc.strerror or exc}"
            progress.error(r.error)
        r.seconds = time.monotonic() - t0
        progress.document_finished(r)
    report.seconds = time.monotonic() - started
    return report


def _render_one(
    folder: DocumentFolder,
    options: RenderOptions,
    images: ImageWork,
    r: DocumentReport,
) -> list[str]:
    """Render one folder; returns the one-line problems with its images and overlay."""
    state = folder.load_state()
    if state is None:
        raise OutputError(
            f"{folder.location}: not an hpdparse output folder (no raw/document.json)",
            path=folder.location,
        )
    r.source = state.source.path
    try:
        finished = DocumentFinish(folder, state, options, images, r).start()()
    finally:
        r.pages_reused = r.pages_done  # render decodes nothing: every page done is reused
    if not finished.written:
        raise OutputError(
            f"{folder.location}: no page has a raw output to render", path=folder.location
        )
    r.status = finished.status
    r.error = finished.error
    return finished.warnings
