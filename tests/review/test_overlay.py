"""The layout overlay (`convert --layout`, `render --layout`): made through the real convert
against the fake HPD server, read back with PyMuPDF."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pymupdf
import pytest
from PIL import Image, ImageChops

from hpdparse import api
from hpdparse.hpd.stream import ParsedPage
from hpdparse.markdown.json_export import page_from_json
from hpdparse.overlay.layout_pdf import layout_pdf
from hpdparse.overlay.roles import is_container, rgb
from hpdparse.runner.progress import Progress
from hpdparse.sources.rasterize import rasterize_page
from tests.helpers.paths import REPO, SAMPLES

DPI = 72
PASSWORD = "pässwörd"


def convert(srv, inputs, out: Path, **kw):
    kw.setdefault("dpi", DPI)
    kw.setdefault("workers", 1)
    return api.convert(
        [str(i) for i in inputs], out, engine="openai", server=srv.url, progress=Progress(), **kw
    )


def document_json(doc_dir: Path) -> dict:
    return json.loads((doc_dir / f"{doc_dir.name}.json").read_text(encoding="utf-8"))


def overlay(doc_dir: Path) -> pymupdf.Document:
    return pymupdf.open(doc_dir / f"{doc_dir.name}.layout.pdf")


def stroked_rects(page: pymupdf.Page) -> list[dict]:
    """Every stroked rectangle drawn on the page: its rect, colour and dashes."""
    found = []
    for drawing in page.get_drawings():
        items = drawing.get("items") or []
        if len(items) == 1 and items[0][0] == "re" and drawing.get("color") is not None:
            found.append(
                {"rect": items[0][1], "color": drawing["color"], "dashes": drawing.get("dashes")}
            )
    return found


def assert_boxes_where_the_json_says(doc_dir: Path) -> int:
    data = document_json(doc_dir)
    pdf = overlay(doc_dir)
    assert pdf.page_count == len(data["pages"])
    checked = 0
    for page, drawn in zip(data["pages"], pdf, strict=True):
        if page["status"] == "failed":
            assert page["blocks"] == []
            continue
        if page["width_pt"]:  # a PDF page keeps its size in points
            assert drawn.rect.width == pytest.approx(page["width_pt"], abs=0.01)
            sx, sy = page["width_pt"] / page["width_px"], page["height_pt"] / page["height_px"]
        else:  # an image: drawn at one scale, whatever it is
            sx = sy = drawn.rect.width / page["width_px"]
        rects = stroked_rects(drawn)
        records = page_from_json(page).blocks
        for block in page["blocks"]:
            if not block.get("bbox_px"):
                continue
            x1, y1, x2, y2 = block["bbox_px"]
            want = pymupdf.Rect(x1 * sx, y1 * sy, x2 * sx, y2 * sy)
            match = [
                r
                for r in rects
                if all(abs(a - b) < 0.05 for a, b in zip(r["rect"], want, strict=True))
                and all(
                    abs(a - b) < 0.01 for a, b in zip(r["color"], rgb(block["role"]), strict=True)
                )
            ]
            assert match, f"{doc_dir.name} page {page['number']} block {block['index']}: no box"
            dashed = match[0]["dashes"] not in (None, "[] 0")
            assert dashed == is_container(records[block["index"]]), (block, match[0]["dashes"])
            checked += 1
    return checked


def test_convert_layout_draws_every_block_where_the_json_says(srv, tmp_path: Path) -> None:
    report = convert(srv, sorted(SAMPLES.iterdir()), tmp_path, layout=True)
    assert report.exit_code == 0
    checked = sum(assert_boxes_where_the_json_says(d) for d in sorted(tmp_path.iterdir()))
    assert checked > 40
    # The figure of paper page 2 is a container (an image, no child branch): dashed.
    paper = page_from_json(document_json(tmp_path / "paper")["pages"][1])
    assert any(b.role == "figure" and is_container(b) for b in paper.blocks)


def test_a_legend_on_the_first_page_only(srv, tmp_path: Path) -> None:
    convert(srv, [SAMPLES / "report.pdf"], tmp_path, layout=True)
    pdf = overlay(tmp_path / "report")
    first = pdf[0].get_text()
    for role in ("title", "heading", "table", "formula", "figure", "caption", "page number"):
        assert f"\n{role}\n" in first, role
    assert "solid box: a forked child branch" in first
    assert all("solid box" not in page.get_text() for page in pdf.pages(1))
    assert "report  page 2" in pdf[1].get_text()


def test_failed_and_truncated_pages_are_marked(srv, tmp_path: Path) -> None:
    faults = {("report", 2): "400", ("report", 3): "length"}
    srv.fault = lambda r: faults.get(r.page_id)
    report = convert(srv, [SAMPLES / "report.pdf"], tmp_path, layout=True)
    assert report.exit_code == 1  # a page failed
    doc_dir = tmp_path / "report"
    pdf = overlay(doc_dir)
    assert pdf.page_count == 3  # the failed page is there too
    texts = [page.get_text() for page in pdf]
    assert "FAILED" not in texts[0] and "TRUNCATED" not in texts[0]
    assert "FAILED: " in texts[1]
    assert "TRUNCATED at the token limit" in texts[2]
    with pymupdf.open(SAMPLES / "report.pdf") as source:
        whole = source[1].rect  # a failed page has no size in the JSON: the source's
    frame = [r for r in stroked_rects(pdf[1]) if r["rect"] == whole]
    assert frame and frame[0]["color"] == pytest.approx((0.8, 0.1, 0.1), abs=0.01)
    assert_boxes_where_the_json_says(doc_dir)


def _encrypted_copy(source: Path, target: Path) -> Path:
    with pymupdf.open(source) as doc:
        doc.save(target, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw=PASSWORD, owner_pw="owner")
    return target


def test_a_password_protected_source_with_password(srv, tmp_path: Path) -> None:
    source = _encrypted_copy(SAMPLES / "paper.pdf", tmp_path / "paper.pdf")
    out = tmp_path / "out"
    report = convert(srv, [source], out, layout=True, password=PASSWORD)
    assert report.exit_code == 0
    assert assert_boxes_where_the_json_says(out / "paper") > 10
    assert not overlay(out / "paper").needs_pass
    assert PASSWORD.encode() not in (out / "paper" / "paper.layout.pdf").read_bytes()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hpdparse", *args], capture_output=True, text=True, cwd=REPO
    )


def test_render_layout_on_an_earlier_output_folder(srv, tmp_path: Path) -> None:
    source = _encrypted_copy(SAMPLES / "paper.pdf", tmp_path / "paper.pdf")
    out = tmp_path / "out"
    assert convert(srv, [source], out, password=PASSWORD).exit_code == 0
    doc_dir = out / "paper"
    assert not (doc_dir / "paper.layout.pdf").exists()
    without = run_cli("render", str(doc_dir), "--layout", "-q")
    assert without.returncode == 1
    assert "layout overlay not written" in without.stderr and "--password" in without.stderr
    assert not (doc_dir / "paper.layout.pdf").exists()
    done = run_cli("render", str(doc_dir), "--layout", "--password", PASSWORD, "-q")
    assert done.returncode == 0, done.stderr
    assert_boxes_where_the_json_says(doc_dir)


def test_a_moved_source_is_a_one_line_error(srv, tmp_path: Path) -> None:
    source = tmp_path / "memo.pdf"
    shutil.copy(SAMPLES / "memo.pdf", source)
    out = tmp_path / "out"
    assert convert(srv, [source], out).exit_code == 0
    source.unlink()
    result = run_cli("render", str(out / "memo"), "--layout", "--no-images", "-q")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if line]
    assert len(lines) == 1 and "source not found" in lines[0], result.stderr


def _rotated_cropped_pdf(path: Path) -> Path:
    doc = pymupdf.open()
    page = doc.new_page(width=300, height=500)
    page.draw_rect(pymupdf.Rect(20, 30, 120, 80), color=(1, 0, 0), fill=(1, 0, 0))
    page.insert_text((30, 200), "Hello", fontsize=30)
    page.add_freetext_annot(pymupdf.Rect(150, 300, 280, 350), "note", fontsize=14)
    page.set_cropbox(pymupdf.Rect(10, 15, 290, 480))
    page.set_rotation(90)
    doc.save(path)
    return path


def test_the_page_under_the_boxes_is_the_page_the_model_saw(tmp_path: Path) -> None:
    source = _rotated_cropped_pdf(tmp_path / "rotated.pdf")
    seen = rasterize_page(str(source), 1, 144)[0]
    pages = [ParsedPage(number=1, width_px=seen.width, height_px=seen.height)]
    with pymupdf.open("pdf", layout_pdf(pages, "rotated", source)) as pdf:
        page = pdf[0]
        assert (page.rect.width, round(page.rect.height)) > (465 - 0.01, 280)
        content = pymupdf.Rect(0, 0, 465, 280)
        pix = page.get_pixmap(matrix=pymupdf.Matrix(2, 2), clip=content, alpha=False)
    drawn = Image.frombytes("RGB", (pix.width, pix.height), pix.samples)
    assert drawn.size == seen.size
    assert ImageChops.difference(drawn, seen).getbbox() is None
