"""Tests for hpdparse.sources on files the tests make themselves (PyMuPDF, Pillow)."""

from __future__ import annotations

import os
import pickle
import unicodedata
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pymupdf
import pytest
from PIL import Image

from hpdparse.errors import InputError
from hpdparse.sources import rasterize as rasterizing
from hpdparse.sources.discover import discover_inputs
from hpdparse.sources.document import (
    IMAGE_SUFFIXES,
    MAX_RASTER_PIXELS,
    MAX_RASTER_SIDE_PX,
    MIN_RASTER_SIDE_PX,
    PDF_SUFFIXES,
    PageGeometry,
    SourceDocument,
    effective_dpi,
)
from hpdparse.sources.open import open_source
from hpdparse.sources.page_ranges import PageRanges, parse_page_ranges
from hpdparse.sources.rasterize import rasterize_page

A4 = (595, 842)
RED = (255, 0, 0)
BLUE = (0, 0, 255)
WHITE = (255, 255, 255)
RED_F = (1, 0, 0)  # PyMuPDF colours are 0..1
BLUE_F = (0, 0, 1)


def make_pdf(path: Path, sizes=(A4,), **save_options) -> Path:
    """A PDF with one page per size, each with its number written on it."""
    doc = pymupdf.open()
    for number, (width, height) in enumerate(sizes, start=1):
        page = doc.new_page(width=width, height=height)
        if width > 60 and height > 60:
            page.insert_text((20, 40), f"Page {number}", fontsize=12)
    doc.save(path, **save_options)
    doc.close()
    return path


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


# --------------------------------------------------------------------------------------------
# Page ranges


@pytest.mark.parametrize(
    ("spec", "count", "expected"),
    [
        (None, 4, [1, 2, 3, 4]),
        ("1-3,7,10-", 12, [1, 2, 3, 7, 10, 11, 12]),
        ("2", 5, [2]),
        (" 3 - 4 , 1 ", 5, [1, 3, 4]),
        ("5-,1-2,2-3", 6, [1, 2, 3, 5, 6]),  # overlaps merge, output ascending
        ("-2", 5, [1, 2]),
        ("7,3", 10, [3, 7]),
        ("4-", 3, []),  # open range starting past the end
        ("2-9", 4, [2, 3, 4]),  # clipped to the document
        ("9", 4, []),
    ],
)
def test_page_ranges_select(spec, count, expected):
    assert parse_page_ranges(spec).select(count) == expected


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty page range"),
        ("   ", "empty page range"),
        ("0", "numbered from 1"),
        ("0-3", "numbered from 1"),
        ("3-1", "3 is after 1"),
        ("a", "invalid page range 'a'"),
        ("1,,2", "invalid page range ''"),
        ("1-2-3", "invalid page range '1-2-3'"),
        ("-", "invalid page range '-'"),
        ("1.5", "invalid page range '1.5'"),
        ("1;2", "invalid page range '1;2'"),
    ],
)
def test_page_ranges_invalid(spec, message):
    with pytest.raises(ValueError, match=message) as raised:
        parse_page_ranges(spec)
    assert "\n" not in str(raised.value)


def test_page_ranges_text_and_equality():
    ranges = parse_page_ranges("1-3, 7,10-")
    assert str(ranges) == "1-3,7,10-"
    assert ranges == parse_page_ranges("1-3,7,10-")
    assert parse_page_ranges(None).is_all and str(parse_page_ranges(None)) == "all"
    assert isinstance(ranges, PageRanges) and not ranges.is_all


# --------------------------------------------------------------------------------------------
# Discovery


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """root/{b.pdf, a.PDF, c.png, notes.txt, .hidden.pdf, sub/{d.pdf, e.tiff, deep/f.jpg}}"""
    root = tmp_path / "root"
    (root / "sub" / "deep").mkdir(parents=True)
    for name in ["b.pdf", "a.PDF", "c.png", "notes.txt", ".hidden.pdf", "sub/d.pdf", "sub/e.tiff"]:
        (root / name).write_bytes(b"x")
    (root / "sub" / "deep" / "f.jpg").write_bytes(b"x")
    return root


def names(paths: list[Path], root: Path) -> list[str]:
    return [p.relative_to(root.resolve()).as_posix() for p in paths]


def test_discover_folder_top_level_only(tree):
    files, errors = discover_inputs([str(tree)])
    assert errors == []
    assert names(files, tree) == ["a.PDF", "b.pdf", "c.png"]
    assert all(p.is_absolute() for p in files)


def test_discover_folder_recursive(tree):
    files, errors = discover_inputs([str(tree)], recursive=True)
    assert errors == []
    assert names(files, tree) == [
        "a.PDF",
        "b.pdf",
        "c.png",
        "sub/d.pdf",
        "sub/deep/f.jpg",  # sorted by path components
        "sub/e.tiff",
    ]


def test_discover_explicit_file_any_suffix(tree):
    files, errors = discover_inputs([str(tree / "notes.txt"), str(tree / ".hidden.pdf")])
    assert errors == []
    assert names(files, tree) == ["notes.txt", ".hidden.pdf"]


def test_discover_globs(tree):
    files, errors = discover_inputs([str(tree / "*.pdf")])
    assert errors == [] and names(files, tree) == ["b.pdf"]  # glob is case-sensitive, like a shell
    files, _ = discover_inputs([str(tree / "*")])
    assert names(files, tree) == ["a.PDF", "b.pdf", "c.png", "sub/d.pdf", "sub/e.tiff"]
    files, _ = discover_inputs([str(tree / "**" / "*.pdf")], recursive=True)
    assert names(files, tree) == ["b.pdf", "sub/d.pdf"]
    files, _ = discover_inputs([str(tree / "**" / "*.jpg")], recursive=False)
    assert files == []  # without -r, ** is a single folder level: root/sub/*.jpg


def test_discover_duplicates_keep_first_position(tree, monkeypatch):
    monkeypatch.chdir(tree)
    files, errors = discover_inputs(
        ["c.png", str(tree), "./b.pdf", str(tree / "*.png"), "sub/../b.pdf"]
    )
    assert errors == []
    assert names(files, tree) == ["c.png", "a.PDF", "b.pdf"]


def test_discover_symlink_is_deduplicated(tree):
    (tree / "sub" / "link.pdf").symlink_to(tree / "b.pdf")
    files, _ = discover_inputs([str(tree / "b.pdf"), str(tree / "sub" / "link.pdf")])
    assert names(files, tree) == ["b.pdf"]


def test_discover_missing_and_empty(tree, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    only_sub = tmp_path / "only_sub"
    (only_sub / "inner").mkdir(parents=True)
    (only_sub / "inner" / "x.pdf").write_bytes(b"x")
    specs = [
        str(tree / "nope.pdf"),
        str(tree / "*.docx"),
        str(empty),
        str(only_sub),
        str(tree / "b.pdf"),
    ]
    files, errors = discover_inputs(specs)
    assert names(files, tree) == ["b.pdf"]
    messages = [str(e) for e in errors]
    assert messages == [
        f"{tree / 'nope.pdf'}: no such file or folder",
        f"{tree / '*.docx'}: no PDF or image file matches this pattern",
        f"{empty}: no PDF or image file in this folder",
        f"{only_sub}: no PDF or image file in this folder (use -r to include subfolders)",
    ]
    assert all(isinstance(e, InputError) for e in errors)
    files, errors = discover_inputs([str(only_sub)], recursive=True)
    assert len(files) == 1 and errors == []


def test_suffix_sets():
    assert ".pdf" in PDF_SUFFIXES
    assert {".png", ".jpg", ".jpeg", ".tif", ".tiff"} == IMAGE_SUFFIXES


# --------------------------------------------------------------------------------------------
# Opening PDFs and their errors


def test_open_pdf_basics(tmp_path):
    path = make_pdf(tmp_path / "three.pdf", sizes=[A4, A4, (612, 792)])
    with open_source(path) as doc:
        assert isinstance(doc, SourceDocument)
        assert (doc.kind, doc.page_count, doc.path) == ("pdf", 3, path)
        assert doc.rasterize(3, 72)[1] == PageGeometry(612, 792, 72, None, 612, 792)
        image, geometry = doc.rasterize(2, 72)
        assert (geometry.dpi, image.mode, image.size) == (72, "RGB", A4)
        assert (geometry.width_px, geometry.height_px) == image.size
        with pytest.raises(
            InputError, match=r"three\.pdf: page 4 does not exist \(the document has 3 pages\)"
        ):
            doc.rasterize(4, 72)


def test_render_at_200_dpi_has_expected_size_and_ink(tmp_path):
    path = make_pdf(tmp_path / "a.pdf")
    with open_source(path) as doc:
        image, geometry = doc.rasterize(1, 200)
    assert geometry.dpi == 200
    assert image.size == (round(595 * 200 / 72), round(842 * 200 / 72))
    assert image.getextrema()[0][0] < 100  # the text was drawn in black


def test_page_labels(tmp_path):
    doc = pymupdf.open()
    for _ in range(5):
        doc.new_page()
    doc.set_page_labels(
        [
            {"startpage": 0, "prefix": "", "style": "r", "firstpagenum": 1},
            {"startpage": 2, "prefix": "A-", "style": "D", "firstpagenum": 1},
            {"startpage": 4, "prefix": "", "style": "A", "firstpagenum": 27},
        ]
    )
    doc.save(tmp_path / "labels.pdf")
    with open_source(tmp_path / "labels.pdf") as source:
        labels = [source.rasterize(n, 36)[1].label for n in range(1, 6)]
    assert labels == ["i", "ii", "A-1", "A-2", "AA"]


def test_errors_name_the_file_and_close_it(tmp_path):
    cases = {
        "empty.pdf": (b"", "empty file (0 bytes)"),
        "text.pdf": (b"just some words\n" * 10, "not a PDF or supported image"),
        "garbage.pdf": (b"%PDF-1.7\n" + bytes(range(256)) * 40, "damaged PDF"),
    }
    jpeg = tmp_path / "photo.pdf"
    Image.new("RGB", (30, 20), RED).save(jpeg, format="JPEG")
    docx_like = tmp_path / "zero.pdf"
    docx_like.write_bytes(
        b"%PDF-1.4\n1 0 obj<</Type/Catalog/Pages 2 0 R>>endobj\n"
        b"2 0 obj<</Type/Pages/Kids[]/Count 0>>endobj\n"
        b"trailer<</Root 1 0 R>>\n%%EOF\n"
    )
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    for _attempt in range(2):  # the first round may open process-wide things (fonts, ...)
        before = open_fds()
        check_open_errors(tmp_path, cases, jpeg, docx_like)
    assert open_fds() == before


def check_open_errors(tmp_path, cases, jpeg, docx_like):
    for name, (_, message) in cases.items():
        with pytest.raises(InputError) as raised:
            open_source(tmp_path / name)
        assert str(raised.value).startswith(f"{tmp_path / name}: {message}")
        assert "\n" not in str(raised.value)
    with pytest.raises(InputError, match=r"photo\.pdf: not a PDF \(the content is a JPEG image"):
        open_source(jpeg)
    with pytest.raises(InputError, match=r"zero\.pdf: .*(no pages|no pages could be read)"):
        open_source(docx_like)
    with pytest.raises(InputError, match=r"missing\.pdf: no such file$"):
        open_source(tmp_path / "missing.pdf")
    with pytest.raises(InputError, match=r": is a folder, not a file$"):
        open_source(tmp_path)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file(tmp_path):
    path = make_pdf(tmp_path / "secret.pdf")
    path.chmod(0)
    with pytest.raises(InputError, match=r"secret\.pdf: cannot be read \(permission denied\)"):
        open_source(path)


def test_truncated_pdf_converts_or_fails_cleanly(tmp_path):
    whole = make_pdf(tmp_path / "whole.pdf", sizes=[A4] * 4).read_bytes()
    for cut in (len(whole) // 4, len(whole) // 2, len(whole) - 40):
        path = tmp_path / f"cut{cut}.pdf"
        path.write_bytes(whole[:cut])
        try:
            with open_source(path) as doc:
                for number in range(1, doc.page_count + 1):
                    try:
                        assert doc.rasterize(number, 36)[0].mode == "RGB"
                    except InputError as error:
                        assert f"page {number} cannot be rendered" in str(error)
        except InputError as error:
            assert str(error).startswith(str(path)) and "\n" not in str(error)


# --------------------------------------------------------------------------------------------
# Passwords


@pytest.mark.parametrize(
    "method", ["PDF_ENCRYPT_RC4_128", "PDF_ENCRYPT_AES_128", "PDF_ENCRYPT_AES_256"]
)
@pytest.mark.parametrize("password", ["secret", "pässwört"])
def test_passwords(tmp_path, method, password):
    path = make_pdf(
        tmp_path / "locked.pdf",
        sizes=[A4, A4],
        encryption=getattr(pymupdf, method),
        user_pw=password,
        owner_pw="owner-" + password,
    )
    before = open_fds()
    with open_source(path, password) as doc:
        assert doc.page_count == 2
        assert doc.rasterize(2, 72)[0].size == A4
    with open_source(path, "owner-" + password) as doc:
        assert doc.page_count == 2
    with pytest.raises(InputError) as missing:
        open_source(path)
    assert str(missing.value) == f"{path}: encrypted, a password is needed (--password)"
    with pytest.raises(InputError) as wrong:
        open_source(path, "not-it")
    assert str(wrong.value) == f"{path}: wrong password"
    with pytest.raises(InputError, match="wrong password"):
        rasterize_page(str(path), 1, 36, "also-not-it")
    assert open_fds() == before


def test_password_in_decomposed_unicode_is_accepted(tmp_path):
    path = make_pdf(
        tmp_path / "nfc.pdf", encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="pässwört"
    )
    decomposed = unicodedata.normalize("NFD", "pässwört")
    assert decomposed != "pässwört"
    with open_source(path, decomposed) as doc:
        assert doc.page_count == 1


def test_password_ignored_when_not_needed(tmp_path):
    with open_source(make_pdf(tmp_path / "plain.pdf"), "whatever") as doc:
        assert doc.page_count == 1


# --------------------------------------------------------------------------------------------
# Rotation, CropBox and the size limits


def test_rotate_90_renders_landscape_turned_clockwise(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page(width=500, height=1000)
    page.draw_rect(pymupdf.Rect(0, 0, 50, 50), color=RED_F, fill=RED_F)  # top-left corner
    page.set_rotation(90)
    doc.save(tmp_path / "rot.pdf")
    with open_source(tmp_path / "rot.pdf") as source:
        image, geometry = source.rasterize(1, 72)
    assert image.size == (1000, 500)
    assert (geometry.width_pt, geometry.height_pt) == (1000, 500)
    # /Rotate 90 turns the page clockwise: the top-left corner goes to the top right.
    assert image.getpixel((1000 - 10, 10)) == RED
    assert image.getpixel((10, 10)) == WHITE


def test_cropbox_limits_the_render(tmp_path):
    doc = pymupdf.open()
    page = doc.new_page(width=600, height=800)
    page.draw_rect(pymupdf.Rect(0, 0, 90, 90), color=BLUE_F, fill=BLUE_F)  # outside the crop
    page.draw_rect(pymupdf.Rect(100, 100, 150, 150), color=RED_F, fill=RED_F)  # crop's corner
    page.set_cropbox(pymupdf.Rect(100, 100, 300, 400))
    doc.save(tmp_path / "crop.pdf")
    with open_source(tmp_path / "crop.pdf") as source:
        image, geometry = source.rasterize(1, 144)
    assert image.size == (400, 600)
    assert (geometry.width_pt, geometry.height_pt) == (200, 300)
    assert image.getpixel((20, 20)) == RED
    assert BLUE not in [color for _, color in image.getcolors(1 << 20)]


def test_huge_page_is_capped(tmp_path):
    path = make_pdf(tmp_path / "huge.pdf", sizes=[(14400, 14400), (2384, 3370), (14400, 300)])
    with open_source(path) as doc:
        for number in (1, 2, 3):
            image, geometry = doc.rasterize(number, 200)
            width, height = image.size
            assert max(width, height) <= MAX_RASTER_SIDE_PX + 1
            assert width * height <= MAX_RASTER_PIXELS * 1.001
            assert geometry.dpi < 200
            assert abs(width - geometry.width_pt * geometry.dpi / 72) <= 1
            assert abs(height - geometry.height_pt * geometry.dpi / 72) <= 1
    assert effective_dpi(2384, 3370, 200) == 101  # A0: the pixel limit is the tighter one
    assert effective_dpi(14400, 300, 200) == 25  # a banner: the side limit


def test_tiny_page_gets_a_minimum_size(tmp_path):
    path = make_pdf(tmp_path / "tiny.pdf", sizes=[(3.84, 3.84), (48, 71)])
    with open_source(path) as doc:
        for number in (1, 2):
            image, geometry = doc.rasterize(number, 200)
            assert max(image.size) >= MIN_RASTER_SIDE_PX
            assert max(image.size) <= MIN_RASTER_SIDE_PX + 2
            assert geometry.dpi > 200
    assert effective_dpi(612, 792, 200) == 200  # ordinary pages keep the dpi asked for
    assert effective_dpi(612, 792, 30) == 41  # 330 px at 30 dpi: raised to 448 px
    assert effective_dpi(200, 300, 72) == 108  # 300 pt at 72 dpi is 300 px: raised to 448 px


def test_warning_flood_is_silenced_and_counted(tmp_path, capfd):
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_text((50, 50), "x")
    xref = page.get_contents()[0]
    doc.update_stream(xref, b"0 0 m 10 10 l S\n" + b"foo\n" * 3000)  # unknown operators
    doc.save(tmp_path / "noisy.pdf")
    capfd.readouterr()
    with open_source(tmp_path / "noisy.pdf") as source:
        source.rasterize(1, 36)
        assert source.warning_count >= 100  # MuPDF gives up on a stream after ~100
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")
    assert pymupdf.TOOLS.mupdf_warnings(reset=False) == ""  # the store does not grow


# --------------------------------------------------------------------------------------------
# Images


def test_png_rgba_is_flattened_on_white(tmp_path):
    image = Image.new("RGBA", (40, 30), (0, 0, 0, 0))
    image.paste((255, 0, 0, 255), (0, 0, 20, 30))
    image.save(tmp_path / "rgba.png")
    with open_source(tmp_path / "rgba.png") as doc:
        assert (doc.kind, doc.page_count) == ("image", 1)
        image, geometry = doc.rasterize(1, 200)
    assert geometry == PageGeometry(40, 30, dpi=None, label=None, width_pt=None, height_pt=None)
    assert image.mode == "RGB" and image.size == (40, 30)
    assert image.getpixel((5, 5)) == RED
    assert image.getpixel((35, 5)) == WHITE


def test_multi_frame_tiff_pages(tmp_path):
    frames = [Image.new("RGB", (50, 40), color) for color in (RED, (0, 255, 0), BLUE)]
    frames[0].save(tmp_path / "scan.tiff", save_all=True, append_images=frames[1:])
    with open_source(tmp_path / "scan.tiff") as doc:
        assert doc.page_count == 3
        colours = [doc.rasterize(n, 200)[0].getpixel((10, 10)) for n in (3, 1, 2)]
    assert colours == [BLUE, RED, (0, 255, 0)]


@pytest.mark.parametrize(
    ("mode", "value", "suffix", "expected"),
    [
        ("P", None, ".png", RED),
        ("L", 128, ".png", (128, 128, 128)),
        ("1", 1, ".tif", WHITE),
        ("CMYK", (0, 255, 255, 0), ".jpg", RED),
        ("I;16", 32896, ".png", (128, 128, 128)),
        ("LA", (0, 0), ".png", WHITE),
    ],
)
def test_image_modes_become_rgb(tmp_path, mode, value, suffix, expected):
    if mode == "P":
        image = Image.new("RGB", (16, 16), RED).convert("P")
    else:
        image = Image.new(mode, (16, 16), value)
    path = tmp_path / f"img{suffix}"
    image.save(path)
    with open_source(path) as doc:
        pixel = doc.rasterize(1, 200)[0].getpixel((8, 8))
    assert all(abs(a - b) <= 3 for a, b in zip(pixel, expected, strict=True)), pixel


def test_palette_png_with_transparency(tmp_path):
    image = Image.new("P", (10, 10), 0)
    image.putpalette([0, 0, 0, 255, 0, 0] + [0] * 762)
    image.paste(1, (0, 0, 5, 10))
    image.save(tmp_path / "pal.png", transparency=0)
    with open_source(tmp_path / "pal.png") as doc:
        rendered = doc.rasterize(1, 200)[0]
    assert rendered.getpixel((2, 2)) == RED and rendered.getpixel((8, 2)) == WHITE


def test_exif_orientation_is_applied(tmp_path):
    image = Image.new("RGB", (40, 20), WHITE)
    image.paste(RED, (0, 0, 10, 10))  # top-left of the stored image
    exif = Image.Exif()
    exif[0x0112] = 6  # stored image must be turned 90 degrees clockwise to be upright
    image.save(tmp_path / "phone.jpg", exif=exif.tobytes(), quality=95)
    with open_source(tmp_path / "phone.jpg") as doc:
        rendered = doc.rasterize(1, 200)[0]
    assert rendered.size == (20, 40)
    assert all(abs(a - b) <= 30 for a, b in zip(rendered.getpixel((15, 4)), RED, strict=True))


def test_big_image_is_scaled_down(tmp_path):
    Image.new("L", (6000, 200), 255).save(tmp_path / "wide.png")
    Image.new("L", (4800, 4000), 200).save(tmp_path / "big.png")
    with open_source(tmp_path / "wide.png") as doc:
        assert doc.rasterize(1, 200)[0].size == (MAX_RASTER_SIDE_PX, 166)
    with open_source(tmp_path / "big.png") as doc:
        width, height = doc.rasterize(1, 200)[0].size
    assert width * height <= MAX_RASTER_PIXELS and width > 4000
    Image.new("RGB", (4, 4), RED).save(tmp_path / "small.png")
    with open_source(tmp_path / "small.png") as doc:
        assert doc.rasterize(1, 200)[0].size == (4, 4)  # images are never scaled up


def test_content_decides_for_unknown_or_wrong_suffixes(tmp_path):
    pdf_as_png = tmp_path / "really-a-pdf.png"
    pdf_as_png.write_bytes(make_pdf(tmp_path / "x.pdf").read_bytes())
    png_as_dat = tmp_path / "scan.dat"
    Image.new("RGB", (8, 8), RED).save(png_as_dat, format="PNG")
    pdf_no_suffix = tmp_path / "report"
    pdf_no_suffix.write_bytes(pdf_as_png.read_bytes())
    text = tmp_path / "notes.txt"
    text.write_text("hello")
    broken_png = tmp_path / "broken.png"
    broken_png.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 50)
    gif = tmp_path / "anim.gif"
    Image.new("RGB", (8, 8), RED).save(gif)
    gif_as_png = tmp_path / "gif.png"
    gif_as_png.write_bytes(gif.read_bytes())
    before = open_fds()
    with open_source(pdf_as_png) as doc:
        assert doc.kind == "pdf"
    with open_source(png_as_dat) as doc:
        assert doc.kind == "image"
    with open_source(pdf_no_suffix) as doc:
        assert doc.kind == "pdf"
    with pytest.raises(InputError, match=r"notes\.txt: not a PDF or supported image"):
        open_source(text)
    with pytest.raises(InputError, match=r"broken\.png: not a PDF or supported image"):
        open_source(broken_png)
    with pytest.raises(InputError, match=r"gif\.png: GIF images are not supported"):
        open_source(gif_as_png)
    assert open_fds() == before


def test_truncated_jpeg_fails_at_render_with_page_number(tmp_path):
    path = tmp_path / "cut.jpg"
    Image.effect_noise((300, 300), 60).convert("RGB").save(path, quality=90)
    path.write_bytes(path.read_bytes()[:2000])
    with (
        open_source(path) as doc,
        pytest.raises(InputError, match=r"cut\.jpg: page 1 cannot be rendered"),
    ):
        doc.rasterize(1, 200)


# --------------------------------------------------------------------------------------------
# rasterize_page for worker processes


def test_render_page_in_a_worker_process(tmp_path):
    path = make_pdf(tmp_path / "pages.pdf", sizes=[A4, (612, 792), A4])
    assert pickle.loads(pickle.dumps(rasterize_page)) is rasterize_page
    with ProcessPoolExecutor(max_workers=1) as pool:
        pages = list(pool.map(rasterize_page, [str(path)] * 3, [1, 2, 3], [72, 72, 144]))
    assert [(image.size, geometry.dpi) for image, geometry in pages] == [
        (A4, 72),
        ((612, 792), 72),
        ((1190, 1684), 144),
    ]


def test_render_page_cache_is_bounded_and_errors_are_clean(tmp_path):
    rasterizing.close_cached_documents()
    paths = [make_pdf(tmp_path / f"d{i}.pdf") for i in range(rasterizing._CACHE_SIZE + 3)]
    for path in paths:
        assert rasterize_page(str(path), 1, 72)[0].size == A4
    assert len(rasterizing._cache) == rasterizing._CACHE_SIZE
    with pytest.raises(InputError, match=r"d0\.pdf: page 2 does not exist"):
        rasterize_page(str(paths[0]), 2, 36)
    with pytest.raises(InputError, match=r"nothing\.pdf: no such file"):
        rasterize_page(str(tmp_path / "nothing.pdf"), 1, 36)
    rasterizing.close_cached_documents()
    assert not rasterizing._cache


def test_render_page_reopens_a_file_changed_on_disk(tmp_path):
    path = make_pdf(tmp_path / "changing.pdf")
    assert rasterize_page(str(path), 1, 72)[0].size == A4
    make_pdf(tmp_path / "changing.pdf", sizes=[(612, 792), (612, 792)])
    os.utime(path, ns=(1, 1))  # a different mtime even on coarse clocks
    assert rasterize_page(str(path), 2, 72)[0].size == (612, 792)
    rasterizing.close_cached_documents()
