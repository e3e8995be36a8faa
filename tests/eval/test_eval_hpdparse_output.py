"""`hpdparse eval` with a real `hpdparse convert` output folder as PRED (the tiny checkpoint on
samples/report.pdf): the document folder found for a Markdown truth of the same name, and its
pages (by their page markers) for an OmniDocBench JSON truth named after page images."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

pytest.importorskip("apted")
pytest.importorskip("torch")

from hpdparse.eval.inputs import _PAGE_MARKER, _split_pages, markdown_truth_page
from hpdparse.eval.run import evaluate

REPO = Path(__file__).resolve().parents[2]


def _truth_entry(image: str, markdown: str) -> dict:
    """An OmniDocBench truth entry holding the blocks of reference Markdown."""
    blocks = markdown_truth_page(image, markdown).blocks
    layout = [{"category_type": block.category, **asdict(block)} for block in blocks]
    return {"layout_dets": layout, "page_info": {"image_path": image}}


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("converted")
    command = [
        sys.executable, "-m", "hpdparse", "convert", str(REPO / "samples" / "report.pdf"),
        "--engine", "torch", "--model", str(REPO / "tests" / "fixtures" / "tiny-hpd"),
        "--pages", "1-2", "--page-markers", "-q", "-o", str(out),
    ]  # fmt: skip
    subprocess.run(command, check=True, cwd=REPO, timeout=600)
    assert (out / "report" / "report.md").is_file()
    return out


def test_document_folder_against_markdown_truth(converted: Path, tmp_path: Path) -> None:
    markdown = (converted / "report" / "report.md").read_text("utf-8")
    reference = _PAGE_MARKER.sub("", markdown).replace("Annual Report", "Yearly Report")
    truth = tmp_path / "truth"
    truth.mkdir()
    (truth / "report.md").write_text(reference, encoding="utf-8")
    report = evaluate(converted, truth, workers=1)
    assert report.pages == {"truth": 1, "scored": 1}
    assert report.problems["missing"] == []
    text = report.metrics["text_block"]["all"]["Edit_dist"]["ALL_page_avg"]
    assert 0 < text < 0.05  # "Annual" -> "Yearly" only
    assert report.metrics["reading_order"]["all"]["Edit_dist"]["ALL_page_avg"] == 0.0


def test_pages_need_markers(converted: Path, tmp_path: Path) -> None:
    pred = tmp_path / "pred"
    shutil.copytree(converted, pred)
    markdown = pred / "report" / "report.md"
    markdown.write_text(_PAGE_MARKER.sub("", markdown.read_text("utf-8")), encoding="utf-8")
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps([_truth_entry("report.pdf_0.jpg", "Text.")]))
    report = evaluate(pred, truth, workers=1)
    (missing,) = report.problems["missing"]
    assert missing["reason"].endswith(
        "has no page markers: `hpdparse render " + str(pred / "report") + " --page-markers` adds "
        "them (no model needed)"
    )


def test_pages_against_json_truth(converted: Path, tmp_path: Path) -> None:
    pages = _split_pages((converted / "report" / "report.md").read_text("utf-8"))
    assert sorted(pages) == [1, 2]
    entries = []
    for index, number in enumerate(sorted(pages)):  # OmniDocBench names pages <doc>.pdf_<index>
        entries.append(_truth_entry(f"report.pdf_{index}.jpg", pages[number]))
    entries.append(_truth_entry("report.pdf_5.jpg", "A page not converted."))
    truth = tmp_path / "truth.json"
    truth.write_text(json.dumps(entries), encoding="utf-8")
    report = evaluate(converted, truth, workers=2)
    assert report.pages == {"truth": 3, "scored": 2}
    assert set(report.per_page) == {"report.pdf_0", "report.pdf_1"}
    assert report.metrics["text_block"]["all"]["Edit_dist"]["ALL_page_avg"] == 0.0
    (missing,) = report.problems["missing"]
    assert missing["page"] == "report.pdf_5"
    assert missing["reason"].endswith("report.md has no page 6 (its pages: 1, 2)")
