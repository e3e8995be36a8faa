"""Confidence on the review pages: the index lists documents least confident first, with links
to their lowest pages coloured by band; blocks get their band's class."""

from __future__ import annotations

from hpdparse.review.command import MAX_PAGE_ROWS, IndexRow, by_confidence, page_rows
from hpdparse.review.document_page import confidence_class, confidence_text
from hpdparse.review.templates import render


def row(name: str, lowest: list[tuple[int, float]]) -> IndexRow:
    pages: dict[int, float | None] = {1: None, 2: None, 3: None} | dict(lowest)
    return IndexRow(
        name,
        "converted",
        f"/in/{name}.pdf",
        "torch",
        3,
        0,
        0,
        0,
        f"{name}/{name}.review.html",
        [],
        lowest=lowest,
        page_confidences=sorted(pages.items()),
    )


def test_the_index_puts_the_least_confident_document_first() -> None:
    rows = [row("none", []), row("sure", [(1, 0.97)]), row("doubt", [(3, 0.31), (1, 0.8)])]
    ordered = by_confidence(rows)
    assert [r.name for r in ordered] == ["doubt", "sure", "none"]
    totals = {"documents": 3, "pages": 9, "failed": 0, "truncated": 0, "unfinished": 0}
    html = render(
        "index.html",
        script=None,
        out="/out",
        rows=ordered,
        totals=totals,
        flag_below=0.5,
        pages=page_rows(rows),
        max_pages=MAX_PAGE_ROWS,
    )
    assert html.index("doubt.review.html") < html.index("sure.review.html")
    assert '<a class="conf conf-low" href="doubt/doubt.review.html#page-3">p3 0.31</a>' in html
    assert '<a class="conf conf-mid" href="doubt/doubt.review.html#page-1">p1 0.80</a>' in html


def test_blocks_get_their_confidence_band() -> None:
    assert [confidence_class(v) for v in (0.2, 0.6, 0.95, None)] == [
        "conf-low",
        "conf-mid",
        "conf-high",
        "conf-none",
    ]
    assert confidence_text(0.456) == "confidence 0.46" and confidence_text(None) == ""


def test_the_pages_table_lists_every_page_least_confident_first() -> None:
    rows = [row("none", []), row("sure", [(1, 0.97)]), row("doubt", [(3, 0.31), (1, 0.8)])]
    pages = page_rows(rows)
    assert [(p.document, p.number, p.confidence) for p in pages[:3]] == [
        ("doubt", 3, 0.31),
        ("doubt", 1, 0.8),
        ("sure", 1, 0.97),
    ]
    assert len(pages) == 9 and all(p.confidence is None for p in pages[3:])
    # `order` is document name, then page number: the other sort the index offers.
    by_order = sorted(pages, key=lambda p: p.order)
    assert [(p.document, p.number) for p in by_order][:4] == [
        ("doubt", 1),
        ("doubt", 2),
        ("doubt", 3),
        ("none", 1),
    ]
    assert pages[0].review == "doubt/doubt.review.html#page-3"
