"""Office and HTML inputs are converted ahead of their turn, in the rasterizer processes, into the
run's conversion folder (hpdparse.runner.conversions), with the real LibreOffice."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hpdparse.runner.conversions import conversion_folder, converted_ahead, remove_conversion_folder
from hpdparse.runner.document_book import DocumentRun
from hpdparse.runner.workers import WorkerPool
from hpdparse.sources.office import soffice_command
from hpdparse.store.output_store import open_document_folder
from hpdparse.store.report import DocumentReport
from tests.helpers.documents import libreoffice_convert
from tests.helpers.pdfs import make_pdf
from tests.helpers.preparers import page_size

pytestmark = pytest.mark.skipif(soffice_command() is None, reason="LibreOffice is not installed")


def _doc(path: Path, out: Path) -> DocumentRun:
    folder = open_document_folder(str(out / path.stem))
    return DocumentRun(path, folder, DocumentReport(source=str(path)))


def test_documents_are_converted_ahead_in_the_workers(tmp_path: Path) -> None:
    sources = []
    for name in ("first", "second", "third"):
        html = tmp_path / f"{name}.html"
        html.write_text(f"<html><body><p>The {name} document.</p></body></html>")
        sources.append(html)
    first, second, third = libreoffice_convert(sources, "odt:writer8", tmp_path / "in", tmp_path)
    broken = tmp_path / "in" / "broken.docx"
    broken.write_bytes(b"PK\x03\x04" + bytes(64))
    pdf = make_pdf(tmp_path / "in" / "plain.pdf")
    out = tmp_path / "out"
    docs = [_doc(p, out) for p in (first, pdf, second, third, broken)]
    assert conversion_folder(docs[1:2]) is None  # a run without Office inputs makes none
    folder = conversion_folder(docs)
    assert folder is not None
    pool = WorkerPool(1, page_size, folder)
    try:
        ahead = converted_ahead(pool, docs, 3, skip=lambda doc: doc.source == third)
        assert next(ahead) == (docs[0], None)
        assert next(ahead) == (docs[1], None)  # the PDF: nothing to convert
        assert next(ahead) == (docs[2], None)
        # first and second converted, by the worker (whose LibreOffice profile it is), not here;
        # third is to be skipped (finished earlier): not converted
        assert len(list(folder.glob("*.pdf"))) == 2
        profiles = [p.name for p in folder.glob("profile-*")]
        assert len(profiles) == 1 and profiles != [f"profile-{os.getpid()}"]
        assert next(ahead) == (docs[3], None)
        assert next(ahead) == (
            docs[4],
            f"{broken}: not a valid DOCX file (damaged, or another format)",
        )
        assert len(list(folder.glob("*.pdf"))) == 2
    finally:
        pool.shutdown()
        remove_conversion_folder(folder)
    assert not folder.exists()
