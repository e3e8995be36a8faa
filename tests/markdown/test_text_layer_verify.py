"""`--text-layer verify` at render time (hpdparse/markdown/text_layer.py): the samples' ground-truth
pages agree with the samples' own text layer, a block the "model" got wrong disagrees and has its
confidence lowered, and the Markdown is the same as with the check off."""

from __future__ import annotations

import json
from pathlib import Path

from hpdparse.hpd.logprobs import PageLogprobs, Segment
from hpdparse.hpd.protocol import BLOCK
from hpdparse.markdown.records import DocumentRecord
from hpdparse.markdown.render import RenderOptions, render_document
from hpdparse.markdown.text_layer import AGREE
from hpdparse.sources.text_layer import read_page_texts
from hpdparse.store.raw_pages import RawPage
from tests.helpers.records import page_record

REPO = Path(__file__).resolve().parents[2]
STREAMS = REPO / "tests" / "fixtures" / "streams"
SURE = -0.01  # a token log-probability: confidence 0.99


def sample(stem: str, wrong: tuple[str, str] | None = None) -> DocumentRecord:
    """A sample's ground-truth pages (what the tiny model writes for them), every token sure;
    `wrong` replaces a text in the streams, as a model that misread it."""
    meta = json.loads((STREAMS / stem / "pages.json").read_text(encoding="utf-8"))
    pages = []
    for entry in meta["pages"]:
        raw = entry["stream"]
        if wrong is not None:
            raw = raw.replace(*wrong)
        page = page_record(entry["page"], raw, width_px=1000, height_px=1294, finish_reason="stop")
        segments = (Segment((SURE,), (SURE,) * 3),) * (raw.count(BLOCK) + 1)
        page.result.logprobs = PageLogprobs(segments)
        pages.append(page)
    return DocumentRecord(str(REPO / "samples" / f"{stem}.pdf"), stem, len(pages), pages)


def rendered(doc: DocumentRecord, mode: str = "verify") -> dict:
    texts = read_page_texts(doc.source, [p.number for p in doc.pages])
    return render_document(doc, RenderOptions(text_layer=mode), texts)


def test_the_samples_ground_truth_agrees_with_their_text_layer() -> None:
    for stem in ("paper", "report", "memo"):
        data = rendered(sample(stem)).json
        for page in data["pages"]:
            counts = page["text_layer"]
            assert counts["checked"] > 0 and counts["disagree"] == 0, stem
            assert counts["disagree_share"] == 0.0
            for block in page["blocks"]:
                if block["role"] in ("table", "formula"):
                    assert "text_layer" not in block
                elif "text_layer" in block and not block["text_layer"]["trusted"]:
                    # inline math (x²): the model writes LaTeX, so the file is not trusted
                    assert block["text_layer"]["reason"] == "math or symbol font", block
                    assert "\\(" in block["text"]
                elif "text_layer" in block:
                    assert block["text_layer"]["agrees"], (stem, block)
                    assert block["text_layer"]["similarity"] >= AGREE


def test_a_misread_block_disagrees_and_loses_confidence() -> None:
    misread = ("Level page method value new level", "Lowest pane metal valve now lovely")
    right, wrong = rendered(sample("paper")), rendered(sample("paper", misread))
    page = wrong.json["pages"][0]
    assert page["text_layer"]["disagree"] == 1
    (block,) = [b for b in page["blocks"] if b.get("text_layer", {}).get("agrees") is False]
    assert block["text"].startswith("Lowest pane")
    assert block["text_layer"]["similarity"] < 0.9
    assert block["confidence"] == block["text_layer"]["similarity"]
    assert page["confidence"] == block["confidence"]
    assert right.json["pages"][0]["confidence"] == 0.99
    # The Markdown is the model's, checked or not.
    assert wrong.markdown == rendered(sample("paper", misread), "off").markdown
    assert wrong.markdown != right.markdown


def test_off_and_documents_without_a_text_layer_record_no_check() -> None:
    off = rendered(sample("memo"), "off").json
    assert all(p["text_layer"] is None for p in off["pages"])
    assert off["render_options"]["text_layer"] == "off"
    doc = sample("memo")
    no_layer = render_document(doc, RenderOptions(), {})  # an image, a scan: nothing read
    assert all(p["text_layer"] is None for p in no_layer.json["pages"])
    assert no_layer.markdown == rendered(doc).markdown
    assert not any("text_layer" in b for p in no_layer.json["pages"] for b in p["blocks"])


def test_failed_pages_are_not_checked() -> None:
    doc = sample("memo")
    doc.pages[0] = RawPage.failed(1, "boom")
    assert rendered(doc).json["pages"][0]["text_layer"] is None
