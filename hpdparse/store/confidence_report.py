"""Page confidence in the run report: per document its lowest pages, the run's pages below
`--flag-below`, and `--fail-below` (pages below it count as failed, so the exit code is 1).

The documents' page confidences come from their rendered JSON (`DocumentReport.page_confidence`,
set when a document is finished); pages saved before confidence was recorded have none and are
never flagged. The reports are store/report.py's DocumentReport and RunReport (typed Any here:
report.py imports this module).
"""

from __future__ import annotations

from typing import Any, TypedDict

from hpdparse.store.statuses import STATUS_CONVERTED, STATUS_PARTIAL

LOWEST = 3  # pages listed per document


class RankedPage(TypedDict):
    page: int
    confidence: float


class FlaggedPage(TypedDict):
    source: str
    page: int
    confidence: float


def lowest_pages(doc: Any, count: int = LOWEST) -> list[RankedPage]:
    """The document's `count` least confident pages, lowest first."""
    ranked = sorted(doc.page_confidence.items(), key=lambda item: (item[1], item[0]))
    return [{"page": page, "confidence": value} for page, value in ranked[:count]]


def flagged_pages(report: Any) -> list[FlaggedPage]:
    """Every page of the run below the report's `flag_below`, lowest first."""
    if report.flag_below is None:
        return []
    out: list[FlaggedPage] = [
        {"source": doc.source, "page": page, "confidence": value}
        for doc in report.documents
        for page, value in doc.page_confidence.items()
        if value < report.flag_below
    ]
    return sorted(out, key=lambda row: (row["confidence"], row["source"], row["page"]))


def apply_thresholds(report: Any, flag_below: float | None, fail_below: float | None) -> None:
    """Record the thresholds on `report`; with `fail_below`, a page below it becomes a failed
    page of its document (which is then partial, and the exit code 1)."""
    report.flag_below = flag_below
    report.fail_below = fail_below
    if fail_below is None:
        return
    for doc in report.documents:
        for page, value in sorted(doc.page_confidence.items()):
            if value >= fail_below or page in doc.failed_pages:
                continue
            doc.failed_pages[page] = f"confidence {value:.3f} below --fail-below {fail_below}"
            doc.pages_failed += 1
            doc.pages_done -= 1
            if doc.status == STATUS_CONVERTED:
                doc.status = STATUS_PARTIAL
                doc.error = doc.failed_pages[page]


def summary_line(report: Any) -> str | None:
    """'N pages below confidence X: a.pdf p3 (0.21), ...' (the first five); None when none."""
    rows = flagged_pages(report)
    if not rows:
        return None
    shown = ", ".join(
        f"{_name(r['source'])} p{r['page']} ({r['confidence']:.2f})" for r in rows[:5]
    )
    more = f", and {len(rows) - 5} more" if len(rows) > 5 else ""
    return f"{len(rows)} page(s) below confidence {report.flag_below}: {shown}{more}"


def _name(source: str) -> str:
    return source.replace("\\", "/").rsplit("/", 1)[-1]
