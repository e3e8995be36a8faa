"""Inputs beyond PDF in a bucket (the S3 server of tests/storage/conftest.py): found in a folder
URL, an EPUB opened by PyMuPDF and a DOCX converted by LibreOffice from the object's bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from hpdparse.sources.discover import discover_url
from hpdparse.sources.office import soffice_command
from hpdparse.sources.open import open_source
from tests.helpers.documents import libreoffice_convert, make_epub
from tests.storage.conftest import upload


@pytest.mark.skipif(soffice_command() is None, reason="LibreOffice is not installed")
def test_epub_and_docx_objects_are_found_and_opened(bucket: str, tmp_path: Path) -> None:
    html = tmp_path / "letter.html"
    html.write_text("<html><body><p>Dear reader,</p></body></html>")
    (docx,) = libreoffice_convert([html], "docx:MS Word 2007 XML", tmp_path / "in", tmp_path)
    epub = make_epub(tmp_path / "in" / "book.epub", ["One", "Two"])
    notes = tmp_path / "in" / "notes.txt"
    notes.write_text("not an input")
    upload(bucket, "in/", [docx, epub, notes])
    found, error = discover_url(f"s3://{bucket}/in/", recursive=False)
    assert error is None
    assert sorted(str(s) for s in found) == [
        f"s3://{bucket}/in/book.epub",
        f"s3://{bucket}/in/letter.docx",
    ]
    pages = {}
    for source in found:
        with open_source(source) as doc:
            pages[source.name] = doc.page_count
            text = doc.pymupdf_document[0].get_text()
            assert ("Dear reader" if source.suffix == ".docx" else "Chapter 1") in text
    assert pages == {"book.epub": 2, "letter.docx": 1}
