"""Live progress: rates count from the engine's first page, not from the start of the process
(loading a model or skipping finished documents is not decoding)."""

from __future__ import annotations

import io
import logging

from hpdparse.runner.progress import PlainProgress, Progress, RichProgress, logged_warnings_shown
from hpdparse.store.report import DocumentReport
from tests.helpers.clock import FakeClock


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


def test_plain_progress_shows_ray_actors_alive_when_they_change_and_per_document() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    progress = PlainProgress(stream, clock=clock)
    progress.start(1)
    clock.now = 3.0
    progress.actors_alive(1, 2, 0)
    clock.now = 4.0
    progress.actors_alive(2, 2, 1)
    progress.document_finished(DocumentReport(source="doc.pdf", status="converted", pages=2))
    progress.actors_alive(1, 2, 1, done=1)
    assert stream.getvalue().splitlines() == [
        "[     3.0s] ray: 1/2 actors alive",
        "[     4.0s] ray: 2/2 actors alive, 1 restarted",
        "[     4.0s] converted doc.pdf, 0/2 pages (1/1 documents, 0.00 pages/s, 0 tokens/s, "
        "2/2 actors alive, 1 restarted)",
        "[     4.0s] ray: 1/2 actors alive, 1 restarted, 1 done",
    ]


def test_rich_progress_shows_ray_actors_alive_beside_the_rates() -> None:
    clock = FakeClock()
    stream = io.StringIO()
    progress = RichProgress(stream, clock=clock)
    progress.start(1)
    progress.document_started("doc.pdf", 4, 4)
    progress.actors_alive(3, 4, 0)
    progress.close()
    assert "3/4 actors alive" in stream.getvalue()


def test_warnings_logged_below_are_the_runs_own_lines_while_it_lasts() -> None:
    stream = io.StringIO()
    engine_log = logging.getLogger("hpdparse.engines.example")
    with logged_warnings_shown(Progress(stream)):
        engine_log.warning("server %s answered without log-probabilities", "http://host/v1")
        engine_log.info("not shown")
    engine_log.warning("after the run")
    assert (
        stream.getvalue() == "warning: server http://host/v1 answered without log-probabilities\n"
    )


def test_logged_warnings_are_not_shown_when_quiet() -> None:
    stream = io.StringIO()
    with logged_warnings_shown(Progress(stream), quiet=True):
        logging.getLogger("hpdparse.engines.example").warning("a server without logprobs")
    assert stream.getvalue() == ""
