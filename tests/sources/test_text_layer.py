"""The PDF's own text layer (hpdparse/sources/text_layer.py) on PDFs generated here with known
text, an invisible OCR layer, symbol fonts and scans, and on shared-corpus files (skipped when
the corpus is absent): a broken font encoding and a real OCR layer."""

from __future__ import annotations

from pathlib import Path

import pymupdf
import pytest

from hpdparse.sources.text_layer import (
    PageText,
    box_text,
    join_words,
    normalized,
    page_text,
    read_page_texts,
    similarity,
)
from tests.helpers.paths import CORPUS

WIDTH, HEIGHT = 595.0, 842.0
PARAGRAPH = "The quick brown fox jumps over the lazy dog near the river bank."


def grid(rect: tuple[float, float, float, float]) -> tuple[int, int, int, int]:
    """A box in points -> the 0-1000 grid, as the model writes it."""
    x0, y0, x1, y1 = rect
    return (
        round(x0 / WIDTH * 1000),
        round(y0 / HEIGHT * 1000),
        round(x1 / WIDTH * 1000),
        round(y1 / HEIGHT * 1000),
    )


def known_page(tmp_path: Path) -> tuple[Path, PageText]:
    doc = pymupdf.open()
    page = doc.new_page(width=WIDTH, height=HEIGHT)
    page.insert_textbox((72, 72, 300, 160), PARAGRAPH, fontsize=11)
    page.insert_text((72, 300), "Hidden OCR words", fontsize=12, render_mode=3)
    page.insert_text((72, 400), "Symbol text", fontsize=12, fontname="Symbol")
    page.insert_text((72, 500), "exam-", fontsize=12)
    page.insert_text((72, 514), "ple words", fontsize=12)
    path = tmp_path / "known.pdf"
    doc.save(path)
    return path, read_page_texts(path, [1])[1]


def test_text_in_a_box_is_the_known_text_and_trusted(tmp_path: Path) -> None:
    _, text = known_page(tmp_path)
    found = box_text(text, grid((70, 70, 302, 162)))
    assert found.text == PARAGRAPH
    assert found.trusted and found.reason is None
    assert similarity(found.text, PARAGRAPH) == 1.0


def test_a_box_a_little_tighter_than_the_text_still_holds_it(tmp_path: Path) -> None:
    _, text = known_page(tmp_path)
    words = [w for w in text.words if w.bbox[1] < 200]
    x0 = min(w.bbox[0] for w in words)
    y0 = min(w.bbox[1] for w in words)
    x1 = max(w.bbox[2] for w in words)
    y1 = max(w.bbox[3] for w in words)
    found = box_text(text, grid((x0 + 2, y0 + 3, x1 - 2, y1 - 3)))
    assert found.text == PARAGRAPH and found.trusted


def test_line_end_hyphens_are_removed() -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=WIDTH, height=HEIGHT)
    page.insert_text((72, 500), "an exam-", fontsize=12)
    page.insert_text((72, 514), "ple and a well-", fontsize=12)
    page.insert_text((72, 528), "Known word", fontsize=12)
    text = page_text(page)
    assert join_words(list(text.words)) == "an example and a well- Known word"


def test_ligatures_quotes_and_dashes_compare_as_plain_text() -> None:
    assert normalized("ﬁne “quoted” – text\u00ad") == 'fine "quoted" - text'
    assert similarity("A  ﬁne\ttext", "A fine text") == 1.0
    assert similarity("one two three", "one two thrice") < 0.9


@pytest.mark.parametrize(
    ("rect", "reason"),
    [
        ((70, 285, 300, 305), "invisible text (an OCR layer)"),
        ((70, 385, 300, 405), "math or symbol font"),
        ((70, 600, 300, 700), "no text"),
        ((70, 70, 150, 162), "text crosses the box edge"),
        ((70, 470, 300, 490), "text crosses the box edge"),  # a third of the "exam-" line
        ((60, 60, 560, 175), "too little text for the box"),
    ],
    ids=["invisible", "symbol-font", "empty", "cut-lines", "cut-words", "sparse"],
)
def test_untrusted_text_says_why(tmp_path: Path, rect: tuple, reason: str) -> None:
    _, text = known_page(tmp_path)
    found = box_text(text, grid(rect))
    assert not found.trusted
    assert found.reason == reason


def test_rotated_page_words_are_where_the_page_image_shows_them(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=WIDTH, height=HEIGHT)
    page.insert_text((72, 100), "Turned words", fontsize=14)
    page.set_rotation(90)
    path = tmp_path / "rotated.pdf"
    doc.save(path)
    text = read_page_texts(path, [1])[1]
    assert (text.width, text.height) == (HEIGHT, WIDTH)
    # Rotated 90 degrees clockwise: the text's top-left corner near (72, 86) lands near the
    # right edge, at x = 842 - 86 and y = 72.
    xs = [c for w in text.words for c in (w.bbox[0], w.bbox[2])]
    ys = [c for w in text.words for c in (w.bbox[1], w.bbox[3])]
    assert min(xs) > HEIGHT - 110 and max(xs) < HEIGHT - 80
    assert min(ys) > 70 and max(ys) < 180
    box = (
        int(min(xs) / HEIGHT * 1000),
        int(min(ys) / WIDTH * 1000),
        int(max(xs) / HEIGHT * 1000) + 1,
        int(max(ys) / WIDTH * 1000) + 1,
    )
    assert box_text(text, box).text == "Turned words"


def test_images_and_files_that_are_not_pdfs_have_no_text_layer(tmp_path: Path) -> None:
    png = tmp_path / "scan.png"
    pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 20, 20), False).save(png)
    assert read_page_texts(png, [1]) == {}
    assert read_page_texts(tmp_path / "missing.pdf", [1]) == {}
    not_pdf = tmp_path / "text.pdf"
    not_pdf.write_text("potato salad", encoding="utf-8")
    assert read_page_texts(not_pdf, [1]) == {}


def test_a_scanned_pdf_has_no_words(tmp_path: Path) -> None:
    doc = pymupdf.open()
    page = doc.new_page(width=WIDTH, height=HEIGHT)
    page.insert_image((0, 0, WIDTH, HEIGHT), pixmap=pymupdf.Pixmap(pymupdf.csGRAY, (0, 0, 8, 8)))
    path = tmp_path / "scan.pdf"
    doc.save(path)
    text = read_page_texts(path, [1])[1]
    assert text.words == ()
    assert box_text(text, (0, 0, 1000, 1000)).reason == "no text"


def corpus_file(name: str) -> Path:
    path = CORPUS / name
    if not path.is_file():
        pytest.skip(f"the shared corpus is absent ({path})")
    return path


@pytest.mark.parametrize(
    ("name", "page", "reason"),
    [
        # TAMReview's body font has no ToUnicode: its words come out as control characters.
        ("pdfjs__TAMReview.pdf", 2, "glyphs without Unicode"),
        ("pypdf__Seige_of_Vicksburg_Sample_OCR.pdf", 1, "invisible text (an OCR layer)"),
    ],
    ids=["broken_font_encoding", "real_ocr_layer"],
)
def test_a_text_layer_that_is_not_the_page_is_not_trusted(
    name: str, page: int, reason: str
) -> None:
    text = read_page_texts(corpus_file(name), [page])[page]
    assert len(text.words) > 100
    found = box_text(text, (0, 0, 1000, 1000))
    assert found.text and not found.trusted
    assert found.reason == reason


def test_born_digital_blocks_are_found_where_pymupdf_puts_them() -> None:
    path = corpus_file("plumber__issue-316-example.pdf")
    page = pymupdf.open(path)[1]
    text = page_text(page)
    width, height = page.rect.width, page.rect.height
    blocks = [b for b in page.get_text("blocks") if b[6] == 0 and len(b[4].split()) > 20]
    assert len(blocks) >= 3
    for x0, y0, x1, y1, block_text, *_ in blocks:
        box = (
            int(x0 / width * 1000),
            int(y0 / height * 1000),
            int(x1 / width * 1000) + 1,
            int(y1 / height * 1000) + 1,
        )
        found = box_text(text, box)
        assert found.trusted, found.reason
        assert similarity(found.text, " ".join(block_text.split())) > 0.95
