"""Confidence end to end on the tiny checkpoint (torch engine): `convert` saves the token
log-probabilities compactly in raw/, the JSON scores every block and page, the report lists the
least confident pages, `--fail-below` fails them; `render` recomputes the same scores without the
model, and a raw folder saved before confidence existed renders with `confidence: null` and is
still reused by a rerun."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[1]
TINY = REPO / "tests" / "fixtures" / "tiny-hpd"
SAMPLE = REPO / "samples" / "memo.pdf"
REPORT = REPO / "samples" / "report.pdf"


def hpdparse(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "hpdparse", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=REPO)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not SAMPLE.is_file():
        pytest.skip("samples/ not generated")
    out = tmp_path_factory.mktemp("conf") / "out"
    proc = hpdparse(
        "convert",
        str(SAMPLE),
        "-o",
        str(out),
        "--engine",
        "torch",
        "--model",
        str(TINY),
        "--quiet",
        "--page-markers",
        "--report",
        str(out / "report.json"),
    )
    assert proc.returncode == 0, proc.stderr
    return out


def pages_of(out: Path) -> list[dict]:
    return json.loads((out / "memo" / "memo.json").read_text(encoding="utf-8"))["pages"]


def test_every_block_and_page_has_a_confidence(converted: Path) -> None:
    raw = json.loads((converted / "memo" / "raw" / "page-0001.json").read_text(encoding="utf-8"))
    assert raw["logprobs"]["encoding"] == "u16-millinats-b64"
    tokens = sum(h + c for h, c in raw["logprobs"]["segments"])
    assert tokens == raw["output_tokens"]
    for page in pages_of(converted):
        assert 0 < page["confidence"] <= 1
        for block in page["blocks"]:
            assert 0 < block["confidence"] <= 1
            figures = block["confidence_figures"]
            assert figures["scored"] == ("content" if block["text"] is not None else "header")
            assert (
                figures["min_logprob"] <= figures["weakest_logprob"] <= figures["mean_logprob"] <= 0
            )
        content = [
            b["confidence"]
            for b in page["blocks"]
            if b["confidence_figures"]["scored"] == "content"
        ]
        assert page["confidence"] == min(content)
    markdown = (converted / "memo" / "memo.md").read_text(encoding="utf-8")
    assert f"<!-- page 1 (confidence {pages_of(converted)[0]['confidence']:.2f}) -->" in markdown
    report = json.loads((converted / "report.json").read_text(encoding="utf-8"))
    lowest = report["documents"][0]["lowest_confidence_pages"]
    assert [row["confidence"] for row in lowest] == sorted(
        p["confidence"] for p in pages_of(converted)
    )[:3]


def test_render_recomputes_them_and_thresholds_route_pages(converted: Path, tmp_path: Path) -> None:
    before = pages_of(converted)
    report = tmp_path / "report.json"
    proc = hpdparse(
        "render",
        str(converted / "memo"),
        "--quiet",
        "--page-markers",
        "--flag-below",
        "1",
        "--report",
        str(report),
    )
    assert proc.returncode == 0, proc.stderr
    assert pages_of(converted) == before
    flagged = json.loads(report.read_text(encoding="utf-8"))["flagged_pages"]
    assert [(r["page"], r["confidence"]) for r in flagged] == sorted(
        ((p["number"], p["confidence"]) for p in before), key=lambda x: (x[1], x[0])
    )
    proc = hpdparse("render", str(converted / "memo"), "--fail-below", "1", "--report", str(report))
    assert proc.returncode == 1
    doc = json.loads(report.read_text(encoding="utf-8"))["documents"][0]
    assert doc["status"] == "partial" and doc["pages_failed"] == len(before)
    assert "below --fail-below 1" in doc["failed_pages"]["1"]


def test_pages_saved_before_confidence_render_as_null_and_are_reused(
    converted: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old"
    proc = hpdparse(
        "convert",
        str(REPORT),
        "-o",
        str(old),
        "--engine",
        "torch",
        "--model",
        str(TINY),
        "--quiet",
        "--pages",
        "1",
    )
    assert proc.returncode == 0, proc.stderr
    meta_path = old / "report" / "raw" / "page-0001.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    del meta["logprobs"]  # as written before this change
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    proc = hpdparse("render", str(old / "report"), "--quiet", "--fail-below", "1")
    assert proc.returncode == 0, proc.stderr  # no confidence: never failed for it
    (page,) = json.loads((old / "report" / "report.json").read_text(encoding="utf-8"))["pages"]
    assert page["confidence"] is None
    assert all(b["confidence"] is None and b["confidence_figures"] is None for b in page["blocks"])
    report = old / "run.json"
    proc = hpdparse(
        "convert",
        str(REPORT),
        "-o",
        str(old),
        "--engine",
        "torch",
        "--model",
        str(TINY),
        "--quiet",
        "--pages",
        "1-2",
        "--report",
        str(report),
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(report.read_text(encoding="utf-8"))["documents"][0]
    assert (doc["pages_reused"], doc["pages_decoded"]) == (1, 1)
    first, second = json.loads((old / "report" / "report.json").read_text(encoding="utf-8"))[
        "pages"
    ]
    assert first["confidence"] is None and second["confidence"] is not None
