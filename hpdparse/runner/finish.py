"""Documents -> files, shared by `convert` and `render`: a document is rebuilt from its raw/
folder (`assemble_record`), rendered, and written with its .md last (`write_document`);
`render_folders` does that for finished output folders without a model.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from hpdparse.engines.base import FINISH_ERROR
from hpdparse.errors import HpdparseError, InputError, OutputError
from hpdparse.markdown.records import PAGE_FAILED, PAGE_OK, DocumentRecord, PageRecord
from hpdparse.markdown.render import ImageCrop, RenderedDocument, RenderOptions, render_document
from hpdparse.runner.progress import Progress
from hpdparse.runner.workers import WorkerPool, cut_crops
from hpdparse.store.atomic import atomic_write_json, atomic_write_text
from hpdparse.store.folders import json_path, markdown_path, remove_images
from hpdparse.store.raw_pages import read_raw_page
from hpdparse.store.report import STATUS_CONVERTED as REPORT_CONVERTED
from hpdparse.store.report import STATUS_FAILED, DocumentReport, RunReport
from hpdparse.store.report import STATUS_PARTIAL as REPORT_PARTIAL
from hpdparse.store.state import STATUS_CONVERTED, STATUS_PARTIAL, DocumentState, load_state


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


def group_crops(
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


def write_layout_overlay(
    doc_dir: Path,
    state: DocumentState,
    rendered: RenderedDocument,
    password: str | None,
    pool: WorkerPool | None = None,
) -> list[str]:
    """--layout: write <stem>.layout.pdf from the rendered JSON; problems as one-line messages.
    With `pool` it is drawn in a rasterizer process (convert opens sources in another thread,
    and PyMuPDF is not thread-safe)."""
    from hpdparse.review.overlay import layout_job

    args = (str(doc_dir), state, rendered.json, password)
    if pool is None:
        return layout_job(*args)
    try:
        return pool.submit(layout_job, *args).result()
    except BrokenProcessPool:
        pool.rebuild()
        return ["layout overlay not written: the renderer crashed"]


def failed_numbers(record: DocumentRecord) -> dict[int, str]:
    return {p.number: p.error or "failed" for p in record.pages if p.status == PAGE_FAILED}


def without_source_prefix(message: str, source: Path) -> str:
    prefix = f"{source}: "
    return message[len(prefix) :] if message.startswith(prefix) else message


def render_folders(
    doc_dirs: list[Path],
    options: RenderOptions,
    password: str | None = None,
    progress: Progress | None = None,
    layout: bool = False,
) -> RunReport:
    """Rebuild .md, .json and images/ of document folders from their raw/ pages and source
    (and the layout overlay with `layout`)."""
    progress = progress or Progress()
    started = time.monotonic()
    report = RunReport(command="render")
    progress.start(len(doc_dirs))
    for doc_dir in doc_dirs:
        t0 = time.monotonic()
        r = DocumentReport(source=str(doc_dir), output_dir=str(doc_dir))
        report.documents.append(r)
        try:
            for problem in _render_one(Path(doc_dir), options, password, r, layout):
                progress.error(f"{doc_dir}: {problem}")
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


def _render_one(
    doc_dir: Path, options: RenderOptions, password: str | None, r: Any, layout: bool
) -> list[str]:
    """Render one folder; returns the problems with its images and layout overlay."""
    state = load_state(doc_dir)
    if state is None:
        raise OutputError(f"{doc_dir}: not an hpdparse output folder (no raw/document.json)")
    r.source = state.source.path
    record = assemble_record(doc_dir, state)
    failed = failed_numbers(record)
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
        for number, crops in sorted(group_crops(rendered.images).items()):
            error = cut_crops(str(source), number, state.dpi, password, str(doc_dir), crops)
            if error:
                crop_errors.append(error)
    if layout:
        crop_errors += write_layout_overlay(doc_dir, state, rendered, password)
    state.failed_pages = failed
    state.render_options = dataclasses.asdict(options)
    write_document(doc_dir, state, rendered, crop_errors)
    if state.status == STATUS_CONVERTED:
        r.status = REPORT_CONVERTED
    else:
        r.status = REPORT_PARTIAL
        problems = [without_source_prefix(m, Path(state.source.path)) for m in failed.values()]
        r.error = "; ".join((problems + crop_errors)[:3])
    return crop_errors
