"""`hpdparse review OUT`: a self-contained HTML review page per document folder
(OUT/<stem>/<stem>.review.html) and an index over the run (OUT/review.html)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from hpdparse.errors import HpdparseError, OutputError
from hpdparse.hpd.confidence import DEFAULT_FLAG_BELOW
from hpdparse.hpd.stream import ParsedPage
from hpdparse.review.document_page import DocumentOutput, load_document, page_views
from hpdparse.review.index import (
    MAX_PAGE_ROWS,
    IndexRow,
    by_confidence,
    index_row,
    page_rows,
    totals,
)
from hpdparse.review.page_images import DEFAULT_MAX_SIDE
from hpdparse.review.templates import render
from hpdparse.sources.rasterize import close_cached_documents
from hpdparse.store.atomic import atomic_write_text
from hpdparse.store.layout import review_html_name
from hpdparse.store.outputs import (
    INDEX_NAME,
    find_document_folders,
    is_document_folder,
)


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
) -> tuple[Path | None, list[ParsedPage], list[str]]:
    """Write one document's review page; (its path, the pages shown, problems)."""
    if doc.problem is not None:
        return None, [], [doc.problem]
    shown = doc.shown
    assert shown is not None  # read without a problem
    if not shown.pages:
        return None, [], []
    pages, problems = page_views(doc, shown, password, max_side)
    index = Path("..") / INDEX_NAME if out != doc.doc_dir else None
    html = render(
        "document.html",
        doc=shown.doc,
        pages=pages,
        from_raw=doc.from_raw,
        index=index.as_posix() if index else None,
    )
    target = doc.doc_dir / review_html_name(doc.stem)
    doc.folder.write_review_html(doc.stem, html)
    return target, shown.pages, problems


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
                page, shown, problems = write_document_page(out, doc, password, max_side)
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
                rows.append(index_row(out, doc, shown, page))
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
