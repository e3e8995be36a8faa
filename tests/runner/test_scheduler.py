"""The scheduler with a scripted engine (no model, no server): results in any order, failures of
pages and of the engine mid-run, resume, batch bounds, rasterize timeouts, live progress rates."""

from __future__ import annotations

import io
from pathlib import Path

from hpdparse.runner.progress import PlainProgress
from hpdparse.runner.scheduler import Converter
from hpdparse.runner.settings import ConvertSettings
from hpdparse.store.report import RunReport
from tests.helpers.clock import FakeClock
from tests.helpers.pdfs import make_pdf
from tests.helpers.scripted_engine import ScriptedEngine, expected_stream

DPI = 72


def convert(engine: ScriptedEngine, sources: list[Path], out: Path, **kw) -> RunReport:
    settings = ConvertSettings(output_dir=out, dpi=DPI, workers=1, **kw)
    return Converter(engine, settings).run(sources)


def pulled_pages(engine: ScriptedEngine) -> list[int]:
    return [number for _, number in engine.pulled]


def test_results_in_any_order_land_on_their_own_pages(tmp_path: Path) -> None:
    a = make_pdf(tmp_path / "in" / "a.pdf", 3, "a")
    b = make_pdf(tmp_path / "in" / "b.pdf", 2, "b")
    engine = ScriptedEngine(order="reverse")
    report = convert(engine, [a, b], tmp_path / "out", batch_size=8)
    assert report.exit_code == 0 and [d.status for d in report.documents] == ["converted"] * 2
    assert engine.calls == ["open", "preparer", "start", "close"]  # open() before preparer()
    assert pulled_pages(engine) == [1, 2, 3, 1, 2] and engine.max_in_flight_seen == 5
    for pdf, pages in ((a, 3), (b, 2)):
        for n in range(1, pages + 1):
            raw = tmp_path / "out" / pdf.stem / "raw" / f"page-{n:04d}.txt"
            assert raw.read_text(encoding="utf-8") == expected_stream(pdf, n, DPI)
            # The figure was cut in the rasterizer processes and written into the folder.
            assert (raw.parent.parent / "images" / f"page-{n:04d}-figure-01.png").is_file()
    # The same documents decoded in order give the same files.
    convert(ScriptedEngine(), [a, b], tmp_path / "in-order", batch_size=8)
    for stem in ("a", "b"):
        for name in (f"{stem}.md", f"{stem}.json", "images/page-0001-figure-01.png"):
            assert (tmp_path / "out" / stem / name).read_bytes() == (
                tmp_path / "in-order" / stem / name
            ).read_bytes(), name


def test_a_failed_page_makes_the_document_partial_and_only_it_is_decoded_again(
    tmp_path: Path,
) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 4)
    out = tmp_path / "out"
    report = convert(ScriptedEngine(fail={1}), [pdf], out)  # the second page pulled: page 2
    doc = report.documents[0]
    assert report.exit_code == 1
    assert doc.status == "partial" and (doc.pages_done, doc.pages_failed) == (3, 1)
    assert doc.failed_pages == {2: f"{pdf}: page 2: scripted failure of request 1"}
    assert doc.error == "page 2: scripted failure of request 1"
    assert not (out / "doc" / "raw" / "page-0002.txt").exists()
    assert "page 2" in (out / "doc" / "doc.md").read_text(encoding="utf-8")
    engine = ScriptedEngine()
    report = convert(engine, [pdf], out)
    assert report.documents[0].status == "converted" and report.documents[0].pages_reused == 3
    assert pulled_pages(engine) == [2]


def test_an_engine_failure_mid_run_fails_what_is_unfinished_and_keeps_its_pages(
    tmp_path: Path,
) -> None:
    a = make_pdf(tmp_path / "in" / "a.pdf", 3, "a")
    b = make_pdf(tmp_path / "in" / "b.pdf", 3, "b")
    out = tmp_path / "out"
    engine = ScriptedEngine(crash_after=4)  # rounds of 2: a1 a2 | a3 b1 | crash
    report = convert(engine, [a, b], out, batch_size=2)
    assert report.exit_code == 1 and report.engine_error == "scripted engine: crashed mid-run"
    first, second = report.documents
    assert first.status == "converted"
    assert second.status == "failed" and second.error == report.engine_error
    assert engine.calls[-1] == "close"
    assert (out / "b" / "raw" / "page-0001.json").is_file() and not (out / "b" / "b.md").exists()
    engine = ScriptedEngine()
    report = convert(engine, [a, b], out, batch_size=2)
    assert [d.status for d in report.documents] == ["skipped", "converted"]
    assert pulled_pages(engine) == [2, 3] and report.documents[1].pages_reused == 1


def test_pages_in_the_engine_stay_within_batch_size(tmp_path: Path) -> None:
    pdfs = [make_pdf(tmp_path / "in" / f"d{i}.pdf", 5, f"d{i}") for i in range(3)]
    engine = ScriptedEngine(order="reverse")
    report = convert(engine, pdfs, tmp_path / "out", batch_size=4)
    assert report.exit_code == 0
    assert engine.max_in_flight_seen == 4
    assert len(set(engine.pulled)) == len(engine.pulled) == 15  # each page pulled once


def test_a_document_with_nothing_to_decode_does_not_start_the_engine(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    out = tmp_path / "out"
    convert(ScriptedEngine(), [pdf], out)
    md = out / "doc" / "doc.md"
    before = md.read_bytes()
    md.unlink()  # killed before the last write: rebuilt from raw/
    engine = ScriptedEngine()
    report = convert(engine, [pdf], out)
    doc = report.documents[0]
    assert doc.status == "converted" and (doc.pages_reused, doc.pages_decoded) == (3, 0)
    assert engine.calls == ["open", "preparer"] and md.read_bytes() == before
    report = convert(engine, [pdf], out)
    doc = report.documents[0]
    assert doc.status == "skipped" and (doc.pages, doc.pages_done, doc.pages_reused) == (3, 3, 3)


def test_a_rasterize_timeout_fails_the_pages_and_does_not_hang(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    engine = ScriptedEngine()
    report = convert(engine, [pdf], tmp_path / "out", rasterize_timeout=1e-4)
    doc = report.documents[0]
    assert doc.status == "failed" and doc.pages_failed == 3
    assert all("rendering took more than" in e for e in doc.failed_pages.values())
    assert engine.pulled == [] and "start" not in engine.calls
    assert not (tmp_path / "out" / "doc").exists()  # nothing converted, nothing left behind


def test_the_live_rate_counts_from_the_engines_first_page(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    clock = FakeClock()
    stream = io.StringIO()
    # Loading the model takes 100 s, each page then 1 s: 1 page/s, not 3 pages in 103 s.
    engine = ScriptedEngine(on_start=lambda: clock.advance(100), on_result=lambda: clock.advance(1))
    settings = ConvertSettings(output_dir=tmp_path / "out", dpi=DPI, workers=1)
    Converter(engine, settings, PlainProgress(stream, clock=clock)).run([pdf])
    [line] = stream.getvalue().splitlines()
    assert line.startswith("[   103.0s] converted ") and "3/3 pages" in line
    assert "1.00 pages/s" in line, line
