"""`convert` end to end through the Python API: the real OpenAI engine against the fake HPD
server (a real local HTTP peer). Scheduler details with a scripted engine: test_scheduler."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest

from hpdparse import api
from hpdparse.runner.progress import Progress
from hpdparse.sources.rasterize import rasterize_page
from tests.helpers.fakeserver import FakeHPDServer
from tests.helpers.paths import FIXTURES, SAMPLES
from tests.helpers.patience import PATIENCE_SECONDS
from tests.helpers.pdfs import make_pdf

STREAMS = FIXTURES / "streams"


def convert(srv: FakeHPDServer, inputs, out: Path, **kw):
    kw.setdefault("dpi", 72)
    kw.setdefault("workers", 2)
    return api.convert(inputs, out, engine="openai", server=srv.url, progress=Progress(), **kw)


def test_samples_convert_to_the_documented_layout(srv: FakeHPDServer, tmp_path: Path) -> None:
    out = tmp_path / "out"
    report = convert(srv, [SAMPLES], out, dpi=100, report_path=tmp_path / "r.json")
    assert report.exit_code == 0
    assert {d.status for d in report.documents} == {"converted"}
    for pdf in ("memo", "paper", "report"):
        doc = out / pdf
        with pymupdf.open(SAMPLES / f"{pdf}.pdf") as source:
            page_count = source.page_count
            width_pt = source[0].rect.width
        assert (doc / f"{pdf}.md").read_text(encoding="utf-8").strip()
        assert json.loads((doc / f"{pdf}.json").read_text(encoding="utf-8"))
        for n in range(1, page_count + 1):
            # The raw page is exactly what the server answered (the ground-truth stream).
            expected = (STREAMS / pdf / f"page-{n:04d}.txt").read_text(encoding="utf-8")
            raw = doc / "raw" / f"page-{n:04d}.txt"
            assert raw.read_text(encoding="utf-8") == expected
            meta = json.loads((doc / "raw" / f"page-{n:04d}.json").read_text())
            assert meta["engine"] == "openai" and meta["requested_dpi"] == 100
            assert meta["prompt"] == "document parsing with fork." and meta["max_tokens"] == 8000
            assert meta["finish_reason"] == "stop" and meta["output_tokens"] > 0
            assert meta["width_px"] > 0 and meta["width_pt"] == pytest.approx(width_pt)
        # Every image linked from the Markdown exists.
        md = (doc / f"{pdf}.md").read_text(encoding="utf-8")
        for link in re.findall(r"\]\((images/[^)]+)\)", md):
            assert (doc / link).is_file(), link
    assert (out / "scan" / "scan.md").is_file()  # a PNG input
    assert srv.chat_count == 7
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["totals"]["converted"] == 4 and saved["totals"]["pages_decoded"] == 7


def test_many_pages_stay_within_batch_size(srv: FakeHPDServer, tmp_path: Path) -> None:
    pdfs = [make_pdf(tmp_path / "in" / f"d{i}.pdf", 12, f"d{i}") for i in range(3)]
    srv.delay = 0.02
    report = convert(srv, pdfs, tmp_path / "out", batch_size=5)
    assert report.exit_code == 0
    assert srv.chat_count == 36
    assert srv.max_concurrent <= 5
    assert len(set(srv.fingerprints())) == 36  # every page sent once
    for i in range(3):
        raws = sorted((tmp_path / "out" / f"d{i}" / "raw").glob("page-*.txt"))
        assert [p.name for p in raws] == [f"page-{n:04d}.txt" for n in range(1, 13)]


def test_failed_page_makes_document_partial_and_is_retried(
    srv: FakeHPDServer, tmp_path: Path
) -> None:
    pdf = make_pdf(tmp_path / "in" / "doc.pdf", 4)
    target = rasterize_page(str(pdf), 3, 72)[0]
    from tests.helpers.fakeserver import image_fingerprint

    bad = image_fingerprint(target)
    srv.fault = lambda request: "400" if request.fingerprint == bad else None
    out = tmp_path / "out"
    report = convert(srv, [pdf], out)
    doc = report.documents[0]
    assert report.exit_code == 1
    assert doc.status == "partial" and doc.pages_failed == 1 and doc.pages_done == 3
    assert 3 in doc.failed_pages and "HTTP 400" in doc.failed_pages[3]
    assert not (out / "doc" / "raw" / "page-0003.txt").exists()
    md = (out / "doc" / "doc.md").read_text()
    assert "page 3" in md  # marked visibly
    # Next run: only the failed page goes to the engine, and the document is complete.
    srv.fault = None
    srv.clear_log()
    report = convert(srv, [pdf], out)
    assert report.exit_code == 0 and report.documents[0].status == "converted"
    assert srv.fingerprints() == [bad]
    assert report.documents[0].pages_reused == 3


def test_bad_file_fails_alone(srv: FakeHPDServer, tmp_path: Path) -> None:
    good = make_pdf(tmp_path / "in" / "good.pdf", 2)
    bad = tmp_path / "in" / "bad.pdf"
    bad.write_text("this is not a PDF")
    empty = tmp_path / "in" / "empty.pdf"
    empty.write_bytes(b"")
    report = convert(srv, [bad, good, empty, tmp_path / "missing.pdf"], tmp_path / "out")
    by_name = {Path(d.source).name: d for d in report.documents}
    assert by_name["good.pdf"].status == "converted"
    for name in ("bad.pdf", "empty.pdf", "missing.pdf"):
        assert by_name[name].status == "failed", name
        assert name in by_name[name].error and "\n" not in by_name[name].error
    assert report.exit_code == 1
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good"]


def test_server_down_fails_every_document(tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 2)
    with FakeHPDServer() as dead:
        url = dead.url
    report = api.convert(
        [pdf], tmp_path / "out", engine="openai", server=url, dpi=72, progress=Progress()
    )
    assert report.exit_code == 1
    assert report.documents[0].status == "failed"
    assert "cannot reach HPD server" in report.documents[0].error
    assert not (tmp_path / "out" / "doc" / "doc.md").exists()


def test_garbage_answers_fail_pages_not_the_run(srv: FakeHPDServer, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 3)
    srv.fault = lambda request: "garbage"
    report = convert(srv, [pdf], tmp_path / "out")
    doc = report.documents[0]
    assert doc.status == "failed" and doc.pages_failed == 3
    assert report.exit_code == 1
    assert not (tmp_path / "out" / "doc").exists()  # nothing converted, nothing left behind


def test_page_ranges_select_one_based_pages(srv: FakeHPDServer, tmp_path: Path) -> None:
    pdf = make_pdf(tmp_path / "doc.pdf", 12)
    out = tmp_path / "out"
    report = convert(srv, [pdf], out, pages="1-2,5,11-")
    assert report.exit_code == 0 and report.documents[0].pages == 5
    raws = sorted(p.name for p in (out / "doc" / "raw").glob("page-*.txt"))
    assert raws == ["page-0001.txt", "page-0002.txt", "page-0005.txt", "page-0011.txt",
                    "page-0012.txt"]  # fmt: skip
    report = convert(srv, [pdf], out, pages="20-")
    assert report.documents[0].status == "failed"
    assert "no page in --pages 20-" in report.documents[0].error
    with pytest.raises(ValueError):
        convert(srv, [pdf], out, pages="3-1")


def test_api_works_from_a_script_read_on_stdin(srv: FakeHPDServer, tmp_path: Path) -> None:
    import subprocess
    import sys

    script = (
        "from hpdparse import api\n"
        f"r = api.convert([{str(SAMPLES / 'memo.pdf')!r}], {str(tmp_path)!r}, engine='openai',"
        f" server={srv.url!r}, dpi=72, workers=1)\n"
        "raise SystemExit(r.exit_code)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=PATIENCE_SECONDS,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "memo" / "memo.md").is_file()
