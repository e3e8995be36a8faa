"""Load golden cases: raw page streams + page metadata -> DocumentRecord and RenderOptions."""

from __future__ import annotations

import json
from pathlib import Path

from hpdparse.markdown.records import ConvertedWith, DocumentRecord
from hpdparse.markdown.render import RenderOptions
from tests.helpers.records import page_record

GOLDEN = Path(__file__).resolve().parents[1] / "markdown" / "golden"
SYNTH_STREAMS = Path(__file__).resolve().parents[1] / "fixtures" / "streams"
SYNTH_DPI = 144


def own_cases() -> list[Path]:
    return sorted(p.parent for p in GOLDEN.glob("*/pages.json"))


def synth_cases() -> list[Path]:
    return sorted(p.parent for p in SYNTH_STREAMS.glob("*/pages.json"))


def load_own(case: Path) -> tuple[DocumentRecord, RenderOptions]:
    meta = json.loads((case / "pages.json").read_text(encoding="utf-8"))
    pages = []
    for entry in meta["pages"]:
        raw_path = case / f"page-{entry['number']:04d}.txt"
        raw = raw_path.read_text(encoding="utf-8") if raw_path.is_file() else ""
        pages.append(page_record(raw=raw, **entry))
    doc = DocumentRecord(
        source=f"/in/{meta['stem']}.pdf",
        stem=meta["stem"],
        page_count=max(p.number for p in pages),
        pages=pages,
        engine="torch",
        model="PaddlePaddle/HPD-Parsing",
        revision="abc123",
        settings=ConvertedWith(144, None, len(pages), "document parsing with fork.", 8000),
    )
    return doc, RenderOptions(**meta.get("options", {}))


def load_synth(case: Path) -> tuple[DocumentRecord, RenderOptions]:
    """A sample from the synthetic generator (tests/fixtures/streams/<name>/)."""
    meta = json.loads((case / "pages.json").read_text(encoding="utf-8"))
    pages = []
    for entry in meta["pages"]:
        raw_path = case / f"page-{entry['page']:04d}.txt"
        raw = raw_path.read_text(encoding="utf-8") if raw_path.is_file() else entry["stream"]
        pages.append(
            page_record(
                number=entry["page"],
                width_px=round(entry["width_pt"] * SYNTH_DPI / 72),
                height_px=round(entry["height_pt"] * SYNTH_DPI / 72),
                raw=raw,
                finish_reason="stop",
                width_pt=entry["width_pt"],
                height_pt=entry["height_pt"],
                dpi=SYNTH_DPI,
            )
        )
    doc = DocumentRecord(
        source=f"/in/{meta['stem']}.pdf",
        stem=meta["stem"],
        page_count=len(pages),
        pages=pages,
        engine="torch",
        model="tiny-hpd",
    )
    return doc, RenderOptions()
