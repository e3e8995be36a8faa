"""Inputs beyond PDF and images (hpdparse.sources.open, .pdf, .office): EPUB, FB2, SVG, CBZ and XPS
files opened by PyMuPDF, and Office and HTML files converted by the real LibreOffice, all made
here (tests/helpers/documents.py)."""

from __future__ import annotations

import os
import re
import time
import zipfile
from pathlib import Path

import pytest

from hpdparse.errors import InputError
from hpdparse.sources import office
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.office import soffice_command, use_conversion_folder
from hpdparse.sources.open import open_source
from hpdparse.sources.rasterize import close_cached_documents, rasterize_page
from tests.helpers.documents import (
    libreoffice_convert,
    make_cbz,
    make_epub,
    make_fb2,
    make_svg,
    make_xps,
)

RED, BLUE = (255, 0, 0), (0, 0, 255)

needs_libreoffice = pytest.mark.skipif(
    soffice_command() is None,
    reason="LibreOffice is not installed (.ci/install-test-tools.sh installs it)",
)

HTML = (
    "<html><body><h1>Quarterly report</h1><p>The first page.</p>"
    '<h2 style="page-break-before: always">Second part</h2><p>The second page.</p></body></html>'
)


@pytest.fixture(autouse=True)
def _no_conversion_folder():
    """Each test starts and ends without a conversion folder (the process default)."""
    use_conversion_folder(None)
    yield
    use_conversion_folder(None)
    close_cached_documents()


@pytest.fixture(scope="module")
def office_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """DOCX, ODT, RTF, XLSX and PPTX files LibreOffice made from HTML, CSV and a flat ODP; the
    HTML itself. The text documents have two pages, the sheet and the deck one and two."""
    folder = tmp_path_factory.mktemp("office")
    profile = folder / "profile"
    html = folder / "report.html"
    html.write_text(HTML, encoding="utf-8")
    csv = folder / "sheet.csv"
    csv.write_text("region,sales\nnorth,10\nsouth,20\n", encoding="utf-8")
    deck = folder / "deck.fodp"
    deck.write_text(_FLAT_ODP, encoding="utf-8")
    made = folder / "made"
    files = {".html": html}
    for to, source in (
        ("docx:MS Word 2007 XML", html),
        ("odt:writer8", html),
        ("rtf:Rich Text Format", html),
        ("xlsx:Calc MS Excel 2007 XML", csv),
        ("pptx:Impress MS PowerPoint 2007 XML", deck),
    ):
        (path,) = libreoffice_convert([source], to, made, profile)
        files[path.suffix] = path
    return files


# --------------------------------------------------------------------------------------------
# Formats PyMuPDF opens


def test_native_formats_open_with_their_pages(tmp_path: Path) -> None:
    files = {
        make_epub(tmp_path / "book.epub", ["One " * 200, "Two"]): 2,
        make_fb2(tmp_path / "story.fb2", "Once upon a time."): 1,
        make_svg(tmp_path / "chart.svg", "Sales"): 1,
        make_cbz(tmp_path / "comic.cbz", [RED, BLUE, RED]): 3,
        make_xps(tmp_path / "form.xps", 2): 2,
        make_xps(tmp_path / "form2.oxps", 1): 1,
    }
    for path, pages in files.items():
        with open_source(path) as doc:
            assert doc.page_count == pages, path
            image, geometry = doc.rasterize(pages, 72)
            assert image.width > 0 and geometry.width_pt, path
    with open_source(tmp_path / "comic.cbz") as comic:
        first, second = comic.rasterize(1, 72)[0], comic.rasterize(2, 72)[0]
        assert first.getpixel((first.width // 2, first.height // 2)) == RED
        assert second.getpixel((second.width // 2, second.height // 2)) == BLUE
    with open_source(tmp_path / "chart.svg") as chart:  # the red rectangle, 600 x 400 pt page
        image, geometry = chart.rasterize(1, 72)
        assert (geometry.width_pt, geometry.height_pt) == (600, 400)
        scale = image.width / 600
        assert image.getpixel((int(140 * scale), int(170 * scale))) == RED


def test_native_formats_are_found_in_folders_and_rasterized_by_workers(tmp_path: Path) -> None:
    make_epub(tmp_path / "book.epub", ["Text"])
    (tmp_path / "sub").mkdir()
    make_cbz(tmp_path / "sub" / "comic.cbz", [BLUE])
    (tmp_path / "notes.txt").write_text("not an input")
    found, errors = discover_inputs([str(tmp_path)], recursive=True)
    assert not errors
    assert sorted(p.name for p in found) == ["book.epub", "comic.cbz"]
    image, _ = rasterize_page(str(tmp_path / "sub" / "comic.cbz"), 1, 72)
    assert image.getpixel((5, 5)) == BLUE


def test_damaged_native_files_are_one_line_errors(tmp_path: Path) -> None:
    (tmp_path / "broken.epub").write_bytes(b"PK\x03\x04 not really a zip" * 20)
    (tmp_path / "broken.xps").write_bytes(b"<xml>" * 50)
    for name, kind in (("broken.epub", "EPUB"), ("broken.xps", "XPS")):
        with pytest.raises(InputError) as caught:
            open_source(tmp_path / name)
        message = str(caught.value)
        assert message.startswith(f"{tmp_path / name}: damaged {kind}"), message
        assert "\n" not in message


def test_a_pdf_suffix_still_needs_pdf_content(tmp_path: Path) -> None:
    epub = make_epub(tmp_path / "book.epub", ["Text"])
    renamed = tmp_path / "book.pdf"
    renamed.write_bytes(epub.read_bytes())
    with pytest.raises(InputError, match=r"book\.pdf: not a PDF or supported image"):
        open_source(renamed)


def test_layout_overlay_pages_of_a_native_format_are_a_pdf(tmp_path: Path) -> None:
    with open_source(make_cbz(tmp_path / "comic.cbz", [RED, BLUE])) as doc:
        pdf = doc.pymupdf_document  # what the --layout overlay copies pages from
        assert pdf.is_pdf and pdf.page_count == 2


# --------------------------------------------------------------------------------------------
# Office and HTML files through LibreOffice


@needs_libreoffice
def test_office_and_html_files_are_converted(office_files: dict[str, Path]) -> None:
    pages = {".html": 2, ".docx": 2, ".odt": 2, ".rtf": 2, ".xlsx": 1, ".pptx": 2}
    for suffix, path in office_files.items():
        with open_source(path) as doc:
            assert doc.page_count == pages[suffix], path
            text = doc.pymupdf_document[0].get_text()
            assert {
                ".xlsx": "north",
                ".pptx": "Slide one",
            }.get(suffix, "Quarterly report") in text, (path, text)
            assert doc.rasterize(1, 72)[0].width > 0


@needs_libreoffice
def test_a_conversion_folder_converts_each_file_once(
    office_files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "converted"
    folder.mkdir()
    use_conversion_folder(folder)
    docx = office_files[".docx"]
    with open_source(docx) as doc:
        assert doc.page_count == 2
    pdfs = list(folder.glob("*.pdf"))
    assert len(pdfs) == 1
    # Without LibreOffice the same bytes still open: from the folder, not converted again.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    copy = tmp_path / "copy.docx"
    copy.write_bytes(docx.read_bytes())
    with open_source(copy) as doc:
        assert doc.page_count == 2
    assert list(folder.glob("*.pdf")) == pdfs
    assert not any(folder.glob("profile-*/**/*.lock"))


def test_missing_libreoffice_names_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(office.os.path, "isfile", lambda _: False)  # nor the macOS app
    html = tmp_path / "page.html"
    html.write_text(HTML)
    sheet = tmp_path / "sheet.xlsx"
    with zipfile.ZipFile(sheet, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
    for path, package in ((html, "libreoffice-writer-nogui"), (sheet, "libreoffice-calc-nogui")):
        with pytest.raises(InputError) as caught:
            open_source(path)
        assert str(caught.value) == (
            f"{path}: LibreOffice is needed for {path.suffix} files: install it (Debian/Ubuntu: "
            f"apt-get install {package}; elsewhere: https://www.libreoffice.org/download)"
        )


def _encrypted_odt(path: Path) -> Path:
    """An ODT as LibreOffice saves one with a password: its parts listed as encrypted in the
    manifest (the content itself is not needed to tell)."""
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("mimetype", "application/vnd.oasis.opendocument.text")
        archive.writestr("content.xml", os.urandom(256))
        archive.writestr(
            "META-INF/manifest.xml",
            '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:'
            '1.0">'
            '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml">'
            '<manifest:encryption-data manifest:checksum-type="SHA1/1K" manifest:checksum="x"/>'
            "</manifest:file-entry></manifest:manifest>",
        )
    return path


def _encrypted_docx(path: Path) -> Path:
    """The shape of a password-protected DOCX: an OLE compound file (not a ZIP) whose directory
    names an EncryptionInfo stream (MS-OFFCRYPTO)."""
    header = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(504)
    directory = "EncryptionInfo".encode("utf-16-le").ljust(128, b"\0")
    path.write_bytes(header + directory + os.urandom(1024))
    return path


@pytest.mark.parametrize(
    ("name", "make", "words"),
    [
        (
            "random.docx",
            lambda p: p.write_bytes(os.urandom(3000)),
            r"not a valid DOCX file \(damaged, or another format\)",
        ),
        ("cut.pptx", lambda p: p.write_bytes(b"PK\x03\x04" + bytes(40)), "not a valid PPTX file"),
        ("text.odt", lambda p: p.write_text("plain words"), "not a valid ODT file"),
        ("random.doc", lambda p: p.write_bytes(os.urandom(3000)), "not a valid DOC file"),
        ("words.rtf", lambda p: p.write_text("no rtf here"), r"not an RTF file"),
        ("empty.docx", lambda p: p.write_bytes(b""), r"empty file \(0 bytes\)"),
        ("locked.docx", _encrypted_docx, "the Office file is protected by a password"),
        ("locked.odt", _encrypted_odt, "the Office file is protected by a password"),
    ],
)
def test_bad_office_files_are_refused_before_libreoffice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, make, words: str
) -> None:
    # LibreOffice takes what it cannot read as plain text: these never reach it (none here).
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    path = tmp_path / name
    make(path)
    with pytest.raises(InputError) as caught:
        open_source(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    assert re.search(words, message), message


@needs_libreoffice
def test_a_file_libreoffice_cannot_open_is_one_line(tmp_path: Path) -> None:
    hollow = tmp_path / "hollow.docx"
    with zipfile.ZipFile(hollow, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<<garbage")
    with pytest.raises(InputError) as caught:
        open_source(hollow)
    assert str(caught.value) == (
        f"{hollow}: cannot be converted to PDF: LibreOffice could not open it (damaged, or "
        "protected by a password)"
    )


@needs_libreoffice
def test_a_conversion_past_the_timeout_is_killed(
    office_files: dict[str, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "converted"
    folder.mkdir()
    use_conversion_folder(folder, timeout=0.2)
    with pytest.raises(InputError) as caught:
        open_source(office_files[".docx"])
    assert str(caught.value) == (
        f"{office_files['.docx']}: cannot be converted to PDF: LibreOffice took more than 0.2 s "
        "(--convert-timeout)"
    )
    # Its whole process group is gone (killed and reaped), and no PDF or job is left behind.
    assert _processes_mentioning(str(folder)) == []
    assert sorted(p.name for p in folder.iterdir()) == [f"profile-{os.getpid()}"]


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if text.encode() in cmdline:
                found.append(int(entry.name))
    deadline = time.monotonic() + 10  # a killed process may take a moment to be gone from /proc
    while found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = [pid for pid in found if Path(f"/proc/{pid}").exists()]
    return found


_FLAT_ODP = """<?xml version="1.0" encoding="UTF-8"?>
<office:document xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"
 xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
 xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"
 xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0"
 office:version="1.2" office:mimetype="application/vnd.oasis.opendocument.presentation">
<office:body><office:presentation>
<draw:page draw:name="one"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm">
<draw:text-box><text:p>Slide one</text:p></draw:text-box></draw:frame></draw:page>
<draw:page draw:name="two"><draw:frame svg:x="2cm" svg:y="2cm" svg:width="20cm" svg:height="3cm">
<draw:text-box><text:p>Slide two</text:p></draw:text-box></draw:frame></draw:page>
</office:presentation></office:body></office:document>
"""
