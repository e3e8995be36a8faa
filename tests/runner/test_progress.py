"""Live progress: rates count from the engine's first page, not from the start of the process
(loading a model or skipping finished documents is not decoding)."""

from __future__ import annotations

import io

from hpdparse.runner.progress import PlainProgress, RichProgress
from hpdparse.store.report import DocumentReport


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_rates_count_from_the_first_page_the_engine_takes() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    progress = PlainProgress(stream, verbose=True, clock=clock)
    progress.start(2)
    clock.now = 50.0  # opening the model, skipping a finished document
    progress.document_finished(DocumentReport(source="old.pdf", status="skipped"))
    progress.decoding_started()
    clock.now = 54.0
    progress.pages_done(3, 300)
    progress.decoding_started()  # only the first call counts
    clock.now = 56.0
    progress.pages_done(3, 300)
    progress.document_finished(DocumentReport(source="new.pdf", status="converted", pages=6))
    first, second = stream.getvalue().splitlines()
    assert first == "[    50.0s] skipped old.pdf (1/2 documents, 0.00 pages/s, 0 tokens/s)"
    assert second == (
        "[    56.0s] converted new.pdf, 0/6 pages (2/2 documents, 1.00 pages/s, 100 tokens/s)"
    )


def test_rich_rates_count_from_the_first_page_the_engine_takes() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    progress = RichProgress(stream, clock=clock)
    progress.start(1)
    progress.document_started("doc.pdf", 4, 4)
    clock.now = 100.0
    progress.decoding_started()
    clock.now = 102.0
    progress.pages_done(4, 80)
    progress.close()
    assert "2.00 pages/s 40 tok/s" in stream.getvalue()
