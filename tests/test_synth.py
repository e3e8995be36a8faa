"""The synthetic samples: determinism, box sanity, boxes that really enclose the drawn text,
and committed files that equal what the generator produces now."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pymupdf
import pytest

from tests.tinymodel import synth

REPO = Path(__file__).resolve().parents[1]
SAMPLES = REPO / "samples"
STREAMS = REPO / "tests" / "fixtures" / "streams"
MARGIN = 8  # grid units (0.8 % of the page) added around a box before looking inside it

BLOCK_RE = re.compile(r"<BLOCK>([a-z_]+) \[(\d+), (\d+), (\d+), (\d+)\](?:<CHILD>)?")


def _norm(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list]:
    root = tmp_path_factory.mktemp("synth")
    pages = synth.build_samples(root / "samples", root / "streams", seed=0)
    return root / "samples", root / "streams", pages


def test_generation_is_deterministic(generated, tmp_path: Path) -> None:
    _, streams, pages = generated
    again = synth.build_samples(tmp_path / "samples", tmp_path / "streams", seed=0)
    assert [(p.stem, p.page, p.stream) for p in again] == [
        (p.stem, p.page, p.stream) for p in pages
    ]
    assert synth.load_ground_truth(tmp_path / "streams") == synth.load_ground_truth(streams)


def test_seed_changes_text_but_not_structure(generated, tmp_path: Path) -> None:
    _, _, pages = generated
    other = synth.build_samples(tmp_path / "samples", tmp_path / "streams", seed=1)
    assert [p.stream for p in other] != [p.stream for p in pages]
    assert [[b.label for b in p.blocks] for p in other] == [
        [b.label for b in p.blocks] for p in pages
    ]


def test_expected_pages_and_sizes(generated) -> None:
    _, _, pages = generated
    counts: dict[str, int] = {}
    for p in pages:
        counts[p.stem] = counts.get(p.stem, 0) + 1
    assert counts == {"report": 3, "paper": 2, "memo": 1, "scan": 1}
    sizes = {p.stem: p.size_pt for p in pages}
    assert sizes["report"] == synth.A4
    assert sizes["paper"] == synth.LETTER


def test_boxes_are_on_the_grid_and_stream_matches_blocks(generated) -> None:
    _, _, pages = generated
    for p in pages:
        assert p.stream == synth.format_stream(p.blocks)
        assert 300 <= len(p.stream) <= 1300, (p.stem, p.page, len(p.stream))
        assert not re.search(r"\]\s+<|>\s+<BLOCK>", p.stream)
        headers = BLOCK_RE.findall(p.stream)
        assert len(headers) == len(p.blocks)
        for block, (label, *coords) in zip(p.blocks, headers, strict=True):
            x1, y1, x2, y2 = block.bbox
            assert label == block.label
            assert [int(v) for v in coords] == [x1, y1, x2, y2]
            assert all(isinstance(v, int) for v in block.bbox)
            assert 0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 1000, (p.stem, p.page, block)
            has_child = block.label not in ("image", "list")
            assert (block.content is not None) == has_child


def _clip(page: pymupdf.Page, bbox: tuple[int, int, int, int], margin: int) -> pymupdf.Rect:
    w, h = page.rect.width, page.rect.height
    x1, y1, x2, y2 = bbox
    return pymupdf.Rect(
        (x1 - margin) * w / 1000, (y1 - margin) * h / 1000,
        (x2 + margin) * w / 1000, (y2 + margin) * h / 1000,
    )  # fmt: skip


TEXT_LABELS = {
    "doc_title",
    "paragraph_title",
    "text",
    "header",
    "page_number",
    "page_footnote",
    "table_caption",
    "image_caption",
}


def test_drawn_text_lies_inside_its_box(generated) -> None:
    samples, _, pages = generated
    checked = 0
    for p in pages:
        if p.stem == "scan":
            continue
        with pymupdf.open(samples / f"{p.stem}.pdf") as doc:
            page = doc[p.page - 1]
            assert (page.rect.width, page.rect.height) == p.size_pt
            for block in p.blocks:
                inside = _norm(page.get_text("text", clip=_clip(page, block.bbox, MARGIN)))
                if block.label in TEXT_LABELS:
                    assert block.drawn, block
                    assert _norm(" ".join(block.drawn)) in inside, (p.stem, p.page, block)
                    # The box is tight: it matches the extent MuPDF reports for those words.
                    box = _clip(page, block.bbox, 0)
                    words = [
                        w
                        for w in page.get_text("words", clip=_clip(page, block.bbox, MARGIN))
                        if box.contains(pymupdf.Point((w[0] + w[2]) / 2, (w[1] + w[3]) / 2))
                    ]
                    assert " ".join(w[4] for w in words) == _norm(" ".join(block.drawn))
                    extent = pymupdf.Rect(words[0][:4])
                    for word in words[1:]:
                        extent |= pymupdf.Rect(word[:4])
                    measured = (
                        extent.x0 / page.rect.width * 1000, extent.y0 / page.rect.height * 1000,
                        extent.x1 / page.rect.width * 1000, extent.y1 / page.rect.height * 1000,
                    )  # fmt: skip
                    for edge, want in zip(block.bbox, measured, strict=True):
                        assert abs(edge - want) <= 1.5, (p.stem, p.page, block, measured)
                    checked += 1
                elif block.label == "table":
                    for cell in block.drawn:
                        assert cell in inside, (p.stem, p.page, cell)
                    checked += 1
    assert checked > 40


def test_prose_content_is_the_drawn_text(generated) -> None:
    _, _, pages = generated
    for p in pages:
        for block in p.blocks:
            if block.label in TEXT_LABELS and "\\(" not in block.content:
                assert block.content == _norm(" ".join(block.drawn)), block


def test_report_structure(generated) -> None:
    _, _, pages = generated
    report = {p.page: p for p in pages if p.stem == "report"}
    labels = {n: [b.label for b in report[n].blocks] for n in report}
    assert labels[1][:2] == ["header", "doc_title"] and labels[1][-1] == "page_number"
    list_at = labels[1].index("list")
    assert labels[1][list_at + 1 : list_at + 4] == ["text"] * 3
    list_box = report[1].blocks[list_at].bbox
    for item in report[1].blocks[list_at + 1 : list_at + 4]:
        x1, y1, x2, y2 = item.bbox
        assert list_box[0] <= x1 and list_box[1] <= y1 and x2 <= list_box[2] and y2 <= list_box[3]
    # The last paragraph of page 1 is cut mid-word; page 2 continues it in lowercase.
    cut = report[1].blocks[-2]
    assert cut.label == "text" and re.search(r"[a-z]+-$", cut.content)
    cont = report[2].blocks[1]
    assert cont.label == "text" and cont.content[0].islower()
    assert cut.bbox[3] > 900
    # Tables: page 2 has two, the second continues on page 3 with the same header row.
    tables2 = [b for b in report[2].blocks if b.label == "table"]
    tables3 = [b for b in report[3].blocks if b.label == "table"]
    assert len(tables2) == 2 and len(tables3) == 1
    header_row = re.match(r"<table><tr>.*?</tr>", tables2[1].content).group(0)
    assert tables3[0].content.startswith(header_row)
    assert tables2[1].bbox[3] > 900 and tables3[0].bbox[1] < 150
    assert "equation" in labels[2] and "\\(" in "".join(b.content or "" for b in report[2].blocks)
    assert labels[3][labels[3].index("image") + 1] == "image_caption"


def test_paper_reading_order_and_spans(generated) -> None:
    _, _, pages = generated
    paper = [p for p in pages if p.stem == "paper"]
    for p in paper:
        body = [b for b in p.blocks if b.label not in ("header", "page_number", "page_footnote")]
        if p.page == 1:
            body = body[2:]  # full-width title and author line
        xs = [b.bbox[0] for b in body]
        switch = next(i for i, x in enumerate(xs) if x >= 500)
        assert all(x < 500 for x in xs[:switch]) and all(x >= 500 for x in xs[switch:])
    html = "".join(b.content or "" for p in paper for b in p.blocks if b.label == "table")
    assert 'rowspan="2"' in html and 'colspan="2"' in html
    report_html = "".join(b.content or "" for p in pages if p.stem == "report" for b in p.blocks)
    assert "rowspan" not in report_html and "colspan" not in report_html


def test_committed_samples_match_the_generator(generated) -> None:
    samples, streams, _ = generated
    assert synth.load_ground_truth(STREAMS) == synth.load_ground_truth(streams)
    for stem in ("report", "paper", "memo", "scan"):
        committed = json.loads((STREAMS / stem / "pages.json").read_text(encoding="utf-8"))
        fresh = json.loads((streams / stem / "pages.json").read_text(encoding="utf-8"))
        assert committed == fresh, stem
    for stem in ("report", "paper", "memo"):
        path = SAMPLES / f"{stem}.pdf"
        assert path.stat().st_size < 100_000
        with pymupdf.open(path) as old, pymupdf.open(samples / f"{stem}.pdf") as new:
            assert len(old) == len(new)
            for a, b in zip(old, new, strict=True):
                assert a.rect == b.rect
                assert a.get_text("words") == b.get_text("words")
                assert len(a.get_drawings()) == len(b.get_drawings())
    old_png = pymupdf.Pixmap(str(SAMPLES / "scan.png"))
    new_png = pymupdf.Pixmap(str(samples / "scan.png"))
    assert (old_png.width, old_png.height) == (new_png.width, new_png.height)
    diff = sum(abs(x - y) for x, y in zip(old_png.samples, new_png.samples, strict=True))
    assert diff / len(new_png.samples) < 1.0
