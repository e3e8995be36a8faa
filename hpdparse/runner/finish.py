"""Finish a document: once every selected page is in (decoded, reused or failed), the document is
rebuilt from its raw pages (`markdown.assemble.assemble_record`), rendered to Markdown and JSON,
its figure images cut, and written with its .md last (`DocumentFinish`).

`DocumentFinish` is the one way a document gets written: `convert` (on this machine or on Ray)
calls `start_converted` (which turns any failure into the document's outcome and leaves no empty
folder behind), `hpdparse render` calls `start` (`render_folders`): it needs only the document's
folder, its resume state, the render options and an `ImageWork`. It runs in two steps:
rendering and starting the crops, on the thread that owns the rasterizer pool, then writing, on
any thread, which is how `convert` writes documents in the background
(`runner.background_finish`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from hpdparse.export.files import build_exports
from hpdparse.markdown.assemble import assemble_record, failed_numbers
from hpdparse.markdown.render import RenderOptions, render_document
from hpdparse.runner.images import ImageWork, group_crops
from hpdparse.settings import TextLayerMode
from hpdparse.sources.text_layer import PageText, read_page_texts
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.raw_pages import RawPage
from hpdparse.store.report import TEXT_LAYER_KEYS, DocumentReport
from hpdparse.store.state import DocumentState
from hpdparse.store.statuses import STATUS_CONVERTED, STATUS_FAILED, STATUS_PARTIAL


@dataclass
class FinishedDocument:
    """The outcome of finishing one document: its report status and error, whether anything was
    written, and one-line messages for the user (images that could not be cut, a failure)."""

    written: bool
    status: str  # STATUS_CONVERTED, STATUS_PARTIAL, or STATUS_FAILED (then nothing was written)
    error: str | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass
class DocumentFinish:
    """Finishing the document in `folder` from its raw pages: rebuilt, rendered with `options`,
    its images cut (and with --layout its overlay drawn) by `images` and written;
    `state` is updated (failed pages, render options, final status) and saved. The page counts
    go into `report` as soon as they are known, so that a later failure still reports them.
    When no page has a raw output nothing is written (STATUS_FAILED, with the first page's
    error). `written`: the raw files this process wrote there, not read back. `before_writing`
    runs just before the .json, state and .md are written, and raises OSError when the document
    must not be written (a raw page of it could not be saved). `unfinished`: the folder is known
    to hold no .md (convert's plan removed it). `text_layers`: pages' text layers already read
    (--text-layer prefer), not read again."""

    folder: DocumentFolder
    state: DocumentState
    options: RenderOptions
    images: ImageWork
    report: DocumentReport
    written: Mapping[str, bytes] | None = None
    before_writing: Callable[[], None] | None = None
    unfinished: bool = False
    text_layers: Mapping[int, PageText | None] | None = None

    def start(self) -> Callable[[], FinishedDocument]:
        """The first of two steps, on the thread that owns the rasterizer pool: rebuild and
        render the document and start cutting its images (and drawing the overlay). The step it
        returns writes the document, its .md last, and may run on another thread: old files
        out, images in, then `before_writing`, then .json, state, .md. Both raise OSError when
        the folder cannot be written, InputError from `images`, anything the renderer
        raises."""
        folder, state, options, report = self.folder, self.state, self.options, self.report
        record = assemble_record(folder, state, self.written)
        failed = failed_numbers(record)
        report.pages = len(record.pages)
        report.pages_failed = len(failed)
        report.pages_done = len(record.pages) - len(failed)
        report.failed_pages = failed
        if report.pages_done == 0:
            first = failed[min(failed)] if failed else f"{state.source.path}: no page converted"
            return lambda: FinishedDocument(written=False, status=STATUS_FAILED, error=first)
        texts = None
        if options.text_layer != TextLayerMode.OFF:  # verify and prefer compare with the PDF's
            texts = _text_layers(record.source, record.pages, self.text_layers or {})
        rendered = render_document(record, options, texts)
        exports = build_exports(rendered, options)
        pages = rendered.pages
        report.page_confidence = {p.number: p.confidence for p in pages if p.confidence is not None}
        checked = [p.text_layer for p in pages if p.text_layer is not None]
        report.text_layer = {k: sum(getattr(c, k) for c in checked) for k in TEXT_LAYER_KEYS}
        crops = None
        images = rendered.images  # a walk over every block: once
        if images and options.images:
            crops = self.images.crops(folder, state, group_crops(images))
        drawing = self.images.overlay(folder, state, pages) if self.images.layout else None
        state.failed_pages = failed
        state.render_options = dataclasses.asdict(options)

        keep = {crop.filename for crop in images} if crops is not None else set()

        def write() -> FinishedDocument:
            if not self.unfinished:
                folder.remove_markdown(state.stem)
            with ThreadPoolExecutor(1) as side:  # old files go while the new crops are written
                removed = side.submit(folder.remove_stale_outputs, state.stem, keep)
                problems = crops() if crops is not None else []
                removed.result()
            if drawing is not None:
                problems += drawing()
            if self.before_writing is not None:
                self.before_writing()
            # .json, the final state and the exports together and, last, the .md
            converted = not state.failed_pages and not problems
            state.status = STATUS_CONVERTED if converted else STATUS_PARTIAL
            folder.write_finished(
                state, rendered.json, rendered.markdown, exports.docling, exports.chunks
            )
            return _outcome(state, problems)

        return write

    def start_converted(self) -> Callable[[], FinishedDocument]:
        """`start` as a conversion run does it: neither step raises (a folder that cannot be
        written, or a renderer bug, fails this document, not the run), and a document with no
        page converted leaves nothing behind but reusable raw pages (`report.output_dir` is
        cleared when the folder is gone)."""
        folder, state = self.folder, self.state
        try:
            write = self.start()
        except Exception as exc:
            failure = _failure(folder, state, exc)
            write = lambda: failure  # noqa: E731

        def finish() -> FinishedDocument:
            try:
                finished = write()
            except Exception as exc:
                finished = _failure(folder, state, exc)
            if not finished.written and not folder.saved_page_numbers():
                folder.remove_state()
                folder.remove_if_empty()
                if not folder.exists():
                    self.report.output_dir = None
            return finished

        return finish


def _text_layers(
    source: str, pages: list[RawPage], known: Mapping[int, PageText | None]
) -> dict[int, PageText]:
    """The text layers of the pages with a raw output: those in `known`, the others read now."""
    numbers = [p.number for p in pages if p.result.ok]
    missing = [n for n in numbers if n not in known]
    texts = read_page_texts(source, missing) if missing else {}
    texts.update({n: text for n in numbers if (text := known.get(n)) is not None})
    return texts


def _outcome(state: DocumentState, crop_errors: list[str]) -> FinishedDocument:
    source = state.source.path
    error = None  # converted; partial: the first few problems
    if state.status == STATUS_PARTIAL:
        problems = [m.removeprefix(f"{source}: ") for m in state.failed_pages.values()]
        error = "; ".join([*problems, *crop_errors][:3])
    warnings = [f"{source}: {message}" for message in crop_errors]
    return FinishedDocument(True, state.status, error, warnings)


def _failure(folder: DocumentFolder, state: DocumentState, exc: Exception) -> FinishedDocument:
    if isinstance(exc, OSError):
        message = f"{folder.location}: cannot write the output folder: {exc.strerror}"
    else:  # a renderer bug must fail this document, not the run
        message = f"{state.source.path}: rendering failed: {type(exc).__name__}: {exc}"
    return FinishedDocument(False, STATUS_FAILED, message, [message])
