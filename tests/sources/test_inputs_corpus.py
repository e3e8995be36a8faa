"""Every file of the shared real-world corpus opens and renders page 1 as MANIFEST.tsv expects.

Skips when the corpus is absent. Page 1 only, at 72 dpi, to stay fast.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

import pymupdf
import pytest

from hpdparse.errors import InputError
from hpdparse.sources.document import MIN_RASTER_SIDE_PX
from hpdparse.sources.open import open_source
from hpdparse.sources.rasterize import rasterize_page

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"  # as in tests/helpers


def manifest_rows() -> list[dict[str, str]]:
    if not (CORPUS / "MANIFEST.tsv").is_file():
        return []
    with open(CORPUS / "MANIFEST.tsv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


ROWS = manifest_rows()


def manifest_field(row: dict[str, str], name: str) -> str | None:
    match = re.search(rf"(?:^|; ){re.escape(name)}=([^;]*)", row["pages_or_error"])
    return match.group(1) if match else None


def convert_page_one(path: Path, password: str | None) -> tuple[int, tuple[int, int], int | None]:
    with open_source(path, password) as doc:
        image, geometry = doc.rasterize(1, 72)
        assert image.mode == "RGB"
        return doc.page_count, image.size, geometry.dpi


def assert_clean(error: InputError, path: Path) -> None:
    message = str(error)
    assert message.startswith(f"{path}: "), message
    assert "\n" not in message and len(message) < 300, message


@pytest.mark.parametrize("row", ROWS, ids=[row["file"] for row in ROWS])
def test_corpus_file_ends_as_manifest_expects(row, corpus_dir):
    path = corpus_dir / row["file"]
    expected = row["expected"]
    if expected == "clean-error":
        with pytest.raises(InputError) as raised:
            convert_page_one(path, None)
        assert_clean(raised.value, path)
        return

    password = expected.split(":", 1)[1] if expected.startswith("convert-with-password:") else None
    page_count, size, dpi = convert_page_one(path, password)

    pages = manifest_field(row, "pages") or manifest_field(row, "pages_after_auth")
    assert page_count == int(pages)
    # The MANIFEST's size of page 1 at 72 dpi: /Rotate and the CropBox applied.
    manifest_size = tuple(
        int(v) for v in re.search(r"ok (\d+)x(\d+)", row["pages_or_error"]).groups()
    )
    if max(manifest_size) >= MIN_RASTER_SIDE_PX:
        assert (size, dpi) == (manifest_size, 72)
    else:  # tiny pages are rendered at a higher dpi
        assert MIN_RASTER_SIDE_PX <= max(size) <= MIN_RASTER_SIDE_PX + 2 and dpi > 72

    if password is not None:
        with pytest.raises(InputError, match="a password is needed") as missing:
            convert_page_one(path, None)
        assert_clean(missing.value, path)
        with pytest.raises(InputError, match="wrong password") as wrong:
            convert_page_one(path, password + "-wrong")
        assert_clean(wrong.value, path)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("plumber__empty.pdf", "empty file (0 bytes)"),
        ("qpdf__empty.pdf", "the PDF has no pages"),
        ("pdfjs__issue9418.pdf", "damaged PDF, no pages could be read"),
        ("pdfjs__poppler-742-0-fuzzed.pdf", "damaged PDF, MuPDF could not repair it"),
        ("qpdf__deep-pages.pdf", "page 1 cannot be rendered: cycle in page tree"),
        ("qpdf__bookmarks-3-not-pdf.pdf", "not a PDF or supported image"),
        ("pymupdf__nur-ruhig-jpeg-as.pdf", "not a PDF (the content is a JPEG image"),
        ("pymupdf__test_3654-docx-as.pdf", "not a PDF or supported image (opened as Office"),
    ],
)
def test_corpus_error_messages(name, message, corpus_dir):
    with pytest.raises(InputError) as raised:
        convert_page_one(corpus_dir / name, None)
    assert str(raised.value).startswith(f"{corpus_dir / name}: {message}")


def test_rotate_is_honoured(corpus_dir):
    path = corpus_dir / "plumber__nics-background-checks-2015-11-rotated.pdf"
    with pymupdf.open(path) as raw:
        assert raw[0].rotation == 90 and raw[0].mediabox.width > raw[0].mediabox.height
    with open_source(path) as doc:
        assert doc.rasterize(1, 72)[0].size == (612, 1008)  # the landscape MediaBox, turned
    with open_source(corpus_dir / "pymupdf__test-2812.pdf") as doc:  # pages at 0, 90, 180, 270
        sizes = [doc.rasterize(n, 72)[0].size for n in range(1, 5)]
    assert sizes == [(842, 595)] * 4


def test_cropbox_is_honoured(corpus_dir):
    path = corpus_dir / "plumber__issue-1054-example.pdf"  # 2920x2225 MediaBox, A4 CropBox
    with pymupdf.open(path) as raw:
        assert raw[0].mediabox.width > 2900
    with open_source(path) as doc:
        image, geometry = doc.rasterize(1, 72)
    assert image.size == (596, 842)
    assert (round(geometry.width_pt), round(geometry.height_pt)) == (595, 842)


def test_huge_and_tiny_corpus_pages(corpus_dir):
    with open_source(corpus_dir / "pdfjs__issue14497.pdf") as doc:  # A0
        image, geometry = doc.rasterize(1, 200)
    assert geometry.dpi == 101 and image.size == (4728, 3345)
    with open_source(corpus_dir / "pypdf__imagemagick-images.pdf") as doc:  # 3.84 pt square
        image, geometry = doc.rasterize(1, 200)
    assert image.size == (449, 449) and geometry.dpi > 8000


def test_password_quirks(corpus_dir):
    # issue3371 reports 0 pages if page_count is read before authenticating.
    with open_source(corpus_dir / "pdfjs__issue3371.pdf", "ELXRTQWS") as doc:
        assert doc.page_count == 1
    with open_source(corpus_dir / "pdfjs__issue21579.pdf", "pässwört") as doc:
        assert doc.rasterize(1, 72)[0].size == (460, 200)


def test_warning_flood_is_not_echoed(corpus_dir, capfd):
    capfd.readouterr()
    with open_source(corpus_dir / "qpdf__issue-202.pdf") as doc:
        for number in range(1, doc.page_count + 1):
            doc.rasterize(number, 36)
        warning_count = doc.warning_count
    assert warning_count > 10_000
    assert capfd.readouterr() == ("", "")
    assert pymupdf.TOOLS.mupdf_warnings(reset=False) == ""


def test_render_page_on_corpus_files(corpus_dir):
    image, _ = rasterize_page(str(corpus_dir / "pypdf__r6-user-password.pdf"), 1, 72, "asdfzxcv")
    assert image.size == (596, 842)
    with pytest.raises(InputError, match="a password is needed"):
        rasterize_page(str(corpus_dir / "pypdf__r6-user-password.pdf"), 1, 72)
