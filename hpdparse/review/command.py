"""`hpdparse review OUT`: a self-contained HTML review page per document folder
(OUT/<stem>/<stem>.review.html) and an index over the run (OUT/review.html): one row per document
folder with its status, pages, failures and links to its review page and files; and one row per
page with its confidence. Both tables come least confident first and sort by a click on a column
header (review-index.js)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

from hpdparse.errors import HpdparseError, OutputError
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.stream import ParsedPage
from hpdparse.overlay.layout_pdf import page_status
from hpdparse.review.document_page import DocumentOutput, load_document, page_views
from hpdparse.review.page_images import DEFAULT_MAX_SIDE
from hpdparse.review.templates import render
from hpdparse.sources.rasterize import close_cached_documents
from hpdparse.store.atomic import atomic_write_text
from hpdparse.store.layout import json_name, layout_pdf_name, markdown_name, review_html_name
from hpdparse.store.outputs import INDEX_NAME, find_document_folders, is_document_folder


@dataclass
class IndexRow:
    name: str
    status: str
    source: str
    engine: str
    pages: int
    failed: int
    truncated: int
    flagged: int
    review: str | None  # link, relative to the index
    files: list[tuple[str, str]]  # (name, link)
    failures: list[str] = field(default_factory=list)  # "page 3: reason"
    note: str | None = None
    # the least confident pages (number, confidence), lowest first; empty without confidence
    lowest: list[tuple[int, float]] = field(default_factory=list)
    # every page (number, confidence or None), in page order
    page_confidences: list[tuple[int, float | None]] = field(default_factory=list)

    @property
    def confidence(self) -> float | None:
        """The document's lowest page confidence (None: no page has one)."""
        return self.lowest[0][1] if self.lowest else None


_FILE_NAMES = (markdown_name, json_name, layout_pdf_name)  # the files the index links to


def _link(out: Path, path: Path) -> str:
    return quote(path.relative_to(out).as_posix())


def index_row(out: Path, doc: DocumentOutput, review: Path | None) -> IndexRow:
    """The row of one document: `review` is its review page (None: none written)."""
    state = doc.state
    pages = doc.shown.pages if doc.shown is not None and review is not None else []
    statuses = [page_status(p) for p in pages]
    files = [
        (path.name, _link(out, path))
        for path in (doc.doc_dir / name(doc.stem) for name in _FILE_NAMES)
        if path.is_file()
    ]
    failures = [f"page {n}: {reason}" for n, reason in sorted(state.failed_pages.items())]
    return IndexRow(
        name=doc.stem,
        status=state.status
        if doc.folder.has_markdown(doc.stem)
        else f"{state.status} (unfinished)",
        source=state.source.path,
        engine=f"{state.engine} · {state.model}",
        pages=len(state.selected),
        failed=len(state.failed_pages),
        truncated=statuses.count("truncated"),
        flagged=sum(1 for p in pages if p.flags),
        review=_link(out, review) if review is not None else None,
        files=files,
        failures=failures,
        note=doc.problem,
        lowest=_lowest_pages(pages),
        page_confidences=[(p.number, p.confidence) for p in pages],
    )


def _lowest_pages(pages: list[ParsedPage], count: int = 3) -> list[tuple[int, float]]:
    scored = [(p.number, p.confidence) for p in pages if p.confidence is not None]
    return sorted(scored, key=lambda item: (item[1], item[0]))[:count]


def by_confidence(rows: list[IndexRow]) -> list[IndexRow]:
    """The rows, least confident document first (documents without confidence last, in their
    order)."""
    return sorted(rows, key=lambda r: (r.confidence is None, r.confidence or 0.0))


@dataclass(frozen=True)
class ConfidenceRow:
    document: str
    review: str | None  # link to the page on its document's review page
    number: int
    confidence: float | None
    order: int  # place in document order, then page number


MAX_PAGE_ROWS = 5000  # the index of a huge run lists its least confident pages only


def page_rows(rows: list[IndexRow]) -> list[ConfidenceRow]:
    """Every page of the run, least confident first (pages without confidence last), at most
    MAX_PAGE_ROWS of them."""
    pages = []
    for row in sorted(rows, key=lambda r: r.name):
        for number, confidence in row.page_confidences:
            link = f"{row.review}#page-{number}" if row.review else None
            pages.append(ConfidenceRow(row.name, link, number, confidence, len(pages)))
    pages.sort(key=lambda p: (p.confidence is None, p.confidence or 0.0, p.order))
    return pages[:MAX_PAGE_ROWS]


def totals(rows: list[IndexRow]) -> dict[str, int]:
    return {
        "documents": len(rows),
        "pages": sum(r.pages for r in rows),
        "failed": sum(r.failed for r in rows),
        "truncated": sum(r.truncated for r in rows),
        "unfinished": sum(1 for r in rows if r.status.endswith("(unfinished)")),
    }


@dataclass
class ReviewResult:
    index: Path | None  # None when OUT is a single document folder
    pages: list[Path] = field(default_factory=list)  # the review pages written
    problems: list[str] = field(default_factory=list)  # one line each
    seconds: float = 0.0

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 0


def write_document_page(
    out: Path, doc: DocumentOutput, password: str | None, max_side: int
) -> tuple[Path | None, list[str]]:
    """Write one document's review page; (its path, problems)."""
    if doc.problem is not None:
        return None, [doc.problem]
    shown = doc.shown
    assert shown is not None  # read without a problem
    if not shown.pages:
        return None, []
    pages, problems = page_views(doc, shown, password, max_side)
    html = render(
        "document.html",
        doc=shown.doc,
        pages=pages,
        from_raw=doc.from_raw,
        index=f"../{INDEX_NAME}" if out != doc.doc_dir else None,
    )
    doc.folder.write_review_html(doc.stem, html)
    return doc.doc_dir / review_html_name(doc.stem), problems


def review(
    out: Path,
    password: str | None = None,
    max_side: int = DEFAULT_MAX_SIDE,
    on_written: Callable[[Path], None] | None = None,
) -> ReviewResult:
    """Write the review pages of the run in `out` (or of the one document folder `out`)."""
    started = time.monotonic()
    out = Path(out)
    folders = find_document_folders(out)
    if not folders:
        raise OutputError(f"{out}: no hpdparse output folders in it (nothing to review)")
    single = is_document_folder(out)
    result = ReviewResult(index=None if single else out / INDEX_NAME)
    rows: list[IndexRow] = []
    try:
        for folder in folders:
            try:
                doc = load_document(folder)
                page, problems = write_document_page(out, doc, password, max_side)
            except HpdparseError as exc:
                result.problems.append(str(exc))
                continue
            except OSError as exc:
                result.problems.append(f"{folder}: {exc.strerror or exc}")
                continue
            result.problems.extend(problems)
            if page is not None:
                result.pages.append(page)
                if on_written:
                    on_written(page)
            if not single:
                rows.append(index_row(out, doc, page))
    finally:
        close_cached_documents()
    if result.index is not None:
        html = render(
            "index.html",
            script="review-index.js",
            out=str(out.absolute()),
            rows=by_confidence(rows),
            pages=page_rows(rows),
            max_pages=MAX_PAGE_ROWS,
            totals=totals(rows),
            flag_below=DEFAULT_FLAG_BELOW,
        )
        atomic_write_text(result.index, html)
    result.seconds = time.monotonic() - started
    return result
