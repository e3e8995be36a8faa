"""Golden tests: raw page streams -> the exact Markdown, JSON and crop list we expect.

Regenerate after an intended change with HPDPARSE_UPDATE_GOLDEN=1, then read every changed file.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hpdparse.markdown.render import render_document
from tests.helpers.golden_cases import GOLDEN, load_own, load_synth, own_cases, synth_cases

UPDATE = os.environ.get("HPDPARSE_UPDATE_GOLDEN") == "1"


def _check(rendered, expected_dir: Path) -> None:
    actual = {
        "expected.md": rendered.markdown,
        "expected.json": json.dumps(rendered.json, indent=1, ensure_ascii=False) + "\n",
        "expected-images.txt": "".join(
            f"{c.filename} page={c.page_number} bbox_px={list(c.bbox_px)}\n"
            for c in rendered.images
        ),
    }
    if UPDATE:
        expected_dir.mkdir(parents=True, exist_ok=True)
        for name, text in actual.items():
            (expected_dir / name).write_text(text, encoding="utf-8")
    for name, text in actual.items():
        path = expected_dir / name
        assert path.is_file(), f"missing golden file {path} (run with HPDPARSE_UPDATE_GOLDEN=1)"
        assert text == path.read_text(encoding="utf-8"), f"{path} differs"


@pytest.mark.parametrize("case", own_cases(), ids=lambda p: p.name)
def test_golden_case(case: Path) -> None:
    doc, options = load_own(case)
    _check(render_document(doc, options), case)


@pytest.mark.parametrize("case", synth_cases(), ids=lambda p: p.name)
def test_golden_synthetic_sample(case: Path) -> None:
    doc, options = load_synth(case)
    _check(render_document(doc, options), GOLDEN / "synth" / case.name)
