"""Rasterize-ahead: pages come back in order, a bounded window ahead, and a crashed rasterizer
process costs one page, not the run (real worker processes; a hung one: test_scheduler)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pymupdf

from hpdparse.runner.read_ahead import ReadAhead
from hpdparse.runner.settings import ConvertSettings
from hpdparse.runner.workers import WorkerPool
from tests.helpers.preparers import CrashOnWidePages, page_size

PORTRAIT = (595, 842)
LANDSCAPE = (842, 595)


def make_pdf(path: Path, sizes: list[tuple[int, int]]) -> Path:
    doc = pymupdf.open()
    for n, (width, height) in enumerate(sizes, start=1):
        doc.new_page(width=width, height=height).insert_text((72, 90), f"page {n}", fontsize=20)
    doc.save(path)
    doc.close()
    return path


Page = tuple[str | None, str, int]  # (owner, source, number)


def _settings(out: Path, window: int = 4) -> ConvertSettings:
    return ConvertSettings(out, dpi=72, read_ahead=window, rasterize_timeout=60)


def counted(pages: list[Page], pulls: list[int]) -> Iterator[Page]:
    for page in pages:
        pulls.append(page[2])
        yield page


def test_pages_come_back_in_order_a_window_ahead(tmp_path: Path) -> None:
    pdf = str(make_pdf(tmp_path / "a.pdf", [PORTRAIT] * 7))
    pages: list[Page] = [("a", pdf, n) for n in range(1, 8)]
    pulls: list[int] = []
    pool = WorkerPool(2, page_size)
    try:
        read_ahead = ReadAhead(pool, _settings(tmp_path, window=3))
        seen = []
        for i, (owner, number, request) in enumerate(
            read_ahead.pages(counted(pages, pulls)), start=1
        ):
            # When page i comes out the window was filled: at most 3 pages asked beyond it.
            assert len(pulls) == min(7, i + 2)
            assert not isinstance(request, str), request
            assert owner == "a" and request.key == ("a", number)
            assert request.payload == (595, 842) and request.geometry is not None
            assert (request.geometry.width_px, request.geometry.dpi) == (595, 72)
            assert request.text_layer is None  # not asked for
            seen.append(number)
    finally:
        pool.shutdown()
    assert seen == list(range(1, 8))


def test_a_page_that_cannot_be_rasterized_fails_alone(tmp_path: Path) -> None:
    pdf = str(make_pdf(tmp_path / "a.pdf", [PORTRAIT] * 2))
    pages: list[Page] = [(None, pdf, 1), (None, pdf, 5), (None, pdf, 2)]
    pool = WorkerPool(1, page_size)
    try:
        out = list(ReadAhead(pool, _settings(tmp_path)).pages(pages))
    finally:
        pool.shutdown()
    assert [number for _, number, _ in out] == [1, 5, 2]
    error = out[1][2]
    assert (
        isinstance(error, str)
        and error == f"{pdf}: page 5 does not exist (the document has 2 pages)"
    )
    assert not isinstance(out[0][2], str) and not isinstance(out[2][2], str)


def test_a_crashing_page_is_retried_then_fails_and_the_others_survive(tmp_path: Path) -> None:
    pdf = str(make_pdf(tmp_path / "a.pdf", [PORTRAIT, LANDSCAPE, PORTRAIT, PORTRAIT]))
    pool = WorkerPool(1, CrashOnWidePages(700))
    try:
        pages: list[Page] = [(None, pdf, n) for n in range(1, 5)]
        out = list(ReadAhead(pool, _settings(tmp_path)).pages(pages))
    finally:
        pool.shutdown()
    assert [number for _, number, _ in out] == [1, 2, 3, 4]
    assert out[1][2] == f"{pdf}: page 2 cannot be rendered: the renderer crashed"
    assert [r.payload for _, _, r in out if not isinstance(r, str)] == [PORTRAIT] * 3


def test_runs_sharing_a_pool_survive_a_crash_in_one_of_them(tmp_path: Path) -> None:
    """Two runs on threads share one pool (the document service): a crashing page of one fails
    that page alone; every page of the other comes back, none counted as crashed."""
    import concurrent.futures

    crashing = str(make_pdf(tmp_path / "a.pdf", [PORTRAIT, LANDSCAPE, PORTRAIT, PORTRAIT]))
    healthy = str(make_pdf(tmp_path / "b.pdf", [PORTRAIT] * 12))
    pool = WorkerPool(2, CrashOnWidePages(700))
    pool.shared = True

    def run(pdf: str, count: int) -> list:
        pages: list[Page] = [(pdf, pdf, n) for n in range(1, count + 1)]
        return list(ReadAhead(pool, _settings(tmp_path)).pages(pages))

    try:
        with concurrent.futures.ThreadPoolExecutor(2) as threads:
            first, second = threads.submit(run, crashing, 4), threads.submit(run, healthy, 12)
            crashed, fine = first.result(timeout=120), second.result(timeout=120)
    finally:
        pool.shutdown()
    assert [number for _, number, _ in crashed] == [1, 2, 3, 4]
    assert crashed[1][2] == f"{crashing}: page 2 cannot be rendered: the renderer crashed"
    assert [r.payload for _, _, r in fine] == [PORTRAIT] * 12
