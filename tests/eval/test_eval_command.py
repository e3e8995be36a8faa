"""`hpdparse eval` on small hand-made sets: a folder of reference Markdown as the truth, the
report files, each kind of bad input, and the message when the eval extra is missing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

pytest.importorskip("apted")

from hpdparse.commands.main import main
from hpdparse.eval.run import Report, evaluate

REFERENCE = """# Results

Hello world paragraph.

$$x^{2}+y$$

| a | b |
|---|---|
| 1 | 2 |
"""


def _write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def _edit(report: Report, element: str) -> float | str:
    return report.metrics[element]["all"]["Edit_dist"]["ALL_page_avg"]


def test_markdown_truth_identical_prediction_scores_perfectly(tmp_path: Path) -> None:
    truth = _write(tmp_path / "truth", {"a.md": REFERENCE})
    pred = _write(tmp_path / "pred", {"a.md": REFERENCE})
    report = evaluate(pred, truth, workers=1)
    assert report.pages == {"truth": 1, "scored": 1}
    assert _edit(report, "text_block") == 0.0
    assert _edit(report, "display_formula") == 0.0
    assert _edit(report, "reading_order") == 0.0
    assert report.metrics["table"]["all"]["TEDS"]["all"] == 1.0
    assert report.overall["value"] == pytest.approx(100.0)


def test_page_markers_are_not_text_in_truth_or_prediction(tmp_path: Path) -> None:
    # A reference made from hpdparse's own Markdown written with --page-markers: the marker is
    # no text on either side (the prediction reader already dropped it; the truth kept it).
    marked = "<!-- page 1 (confidence 0.93) -->\n\n" + REFERENCE
    truth = _write(tmp_path / "truth", {"a.md": marked})
    pred = _write(tmp_path / "pred", {"a.md": marked})
    report = evaluate(pred, truth, workers=1)
    assert _edit(report, "text_block") == 0.0
    assert _edit(report, "reading_order") == 0.0


def test_markdown_truth_scores_the_differences(tmp_path: Path) -> None:
    truth = _write(tmp_path / "truth", {"a.md": REFERENCE})
    changed = REFERENCE.replace("world", "word").replace("| 1 | 2 |", "| 1 | 3 |")
    pred = _write(tmp_path / "pred", {"a.md": changed.replace("$$x^{2}+y$$", "$$x^{3}+y$$")})
    report = evaluate(pred, truth, workers=1)
    # text: "Results" (7) and "Helloworldparagraph" (19) vs "Hellowordparagraph": 1 edit
    assert _edit(report, "text_block") == pytest.approx(1 / 26)
    # formula normal form "x^{2}+y" vs "x^{3}+y": 1 edit in 7
    assert _edit(report, "display_formula") == pytest.approx(1 / 7)
    teds = report.metrics["table"]["all"]["TEDS"]["all"]
    assert 0.8 < teds < 1.0
    assert report.metrics["table"]["all"]["TEDS_structure_only"]["all"] == 1.0


def test_cli_writes_report_json_and_html(tmp_path: Path) -> None:
    truth = _write(
        tmp_path / "truth", {"a.md": REFERENCE, "b.md": "One <script>x()</script> line."}
    )
    pred = _write(tmp_path / "pred", {"a.md": REFERENCE.replace("world", "word"), "b.md": ""})
    out = tmp_path / "report"
    result = CliRunner().invoke(main, ["eval", str(pred), "--truth", str(truth), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "overall" in result.output and "text" in result.output
    report = json.loads((out / "report.json").read_text("utf-8"), parse_constant=_no_nan)
    assert report["pages"] == {"truth": 2, "scored": 2}
    assert set(report["per_page"]) == {"a", "b"}
    assert report["per_page"]["b"]["text_block_edit"] == 1.0
    page = (out / "report.html").read_text("utf-8")
    assert "http" not in page and "<script" not in page  # no network, nothing to run
    assert "&lt;script&gt;x()&lt;/script&gt;" in page  # the inputs' text escaped
    assert "<del>l</del>" in page  # "world" -> "word": the differing span is marked
    assert "<table><tr><td>a</td><td>b</td></tr>" in page  # the tables rendered
    assert page.index(">b</h2>") < page.index(">a</h2>")  # the worst page first


def _no_nan(name: str) -> None:
    raise AssertionError(f"report.json holds {name}")


def _json_truth(tmp_path: Path, pages: list[Any]) -> Path:
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(pages), encoding="utf-8")
    return path


def _page(name: str, blocks: list[dict[str, Any]], relations: list | None = None) -> dict:
    for n, block in enumerate(blocks):
        block.setdefault("anno_id", n)
        block.setdefault("order", n + 1)
    return {
        "layout_dets": blocks,
        "extra": {"relation": relations or []},
        "page_info": {"image_path": f"{name}.jpg", "page_attribute": {"language": "english"}},
    }


TEXT = {"category_type": "text_block", "text": "A paragraph of plain text."}


def test_missing_page_is_reported_and_the_run_goes_on(tmp_path: Path) -> None:
    truth = _json_truth(tmp_path, [_page("p1", [dict(TEXT)]), _page("p2", [dict(TEXT)])])
    pred = _write(tmp_path / "pred", {"p1.md": "A paragraph of plain text."})
    report = evaluate(pred, truth, workers=1)
    assert report.pages == {"truth": 2, "scored": 1}
    assert report.problems["missing"] == [{"page": "p2", "reason": "no prediction file"}]
    assert _edit(report, "text_block") == 0.0


def test_empty_prediction_scores_every_block_as_missed(tmp_path: Path) -> None:
    blocks = [dict(TEXT), {"category_type": "title", "text": "Title"}]
    truth = _json_truth(tmp_path, [_page("p1", blocks)])
    pred = _write(tmp_path / "pred", {"p1.md": ""})
    report = evaluate(pred, truth, workers=1)
    assert report.pages["scored"] == 1
    assert _edit(report, "text_block") == 1.0
    assert _edit(report, "reading_order") == 1.0


def test_malformed_json_truth_is_a_one_line_error(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    truth.write_text('[{"layout_dets": [', encoding="utf-8")
    pred = _write(tmp_path / "pred", {"p1.md": "text"})
    result = CliRunner().invoke(main, ["eval", str(pred), "--truth", str(truth)])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "not valid JSON" in lines[0]


def test_malformed_entries_are_left_out_with_a_reason(tmp_path: Path) -> None:
    pages = [_page("p1", [dict(TEXT)]), {"layout_dets": []}, "page"]
    bad_relation = _page(
        "p3",
        [dict(TEXT)],
        [{"relation_type": "truncated", "source_anno_id": 0, "target_anno_id": 9}],
    )
    truth = _json_truth(tmp_path, [*pages, bad_relation])
    pred = _write(tmp_path / "pred", {"p1.md": "A paragraph of plain text.", "p3.md": "x"})
    report = evaluate(pred, truth, workers=1)
    assert report.problems["truth"] == [
        "truth entry 1: no page_info.image_path: left out",
        "truth entry 2: not an object: left out",
    ]
    # A truncation link to a block that is not there: OmniDocBench stops; here the page is
    # reported and the others are scored.
    assert [p["page"] for p in report.problems["failed"]] == ["p3"]
    assert report.problems["failed"][0]["reason"] == (
        "ValueError: a truncated relation names block 9, not on the page"
    )
    assert report.pages == {"truth": 2, "scored": 1}


TABLE = "<table><tr><td>1</td><td>2</td></tr></table>"


def test_tables_that_do_not_parse(tmp_path: Path) -> None:
    pages = [
        _page("open", [{"category_type": "table", "html": TABLE}]),
        _page("empty", [{"category_type": "table", "html": "<table></table>"}]),
    ]
    truth = _json_truth(tmp_path, pages)
    files = {"open.md": "<table><tr><td>1</td><td>2</td></tr>", "empty.md": "<table></table>"}
    report = evaluate(_write(tmp_path / "pred", files), truth, workers=1)
    assert report.pages["scored"] == 2
    teds = {p.page: p.metric["TEDS"] for page in report.scored for p in page.table}
    # An unclosed predicted table is not a table (OmniDocBench's reader): the truth's is missed.
    assert teds == {"open": 0.0, "empty": 0.0}
    # A table TEDS cannot score (no cells): 0, as OmniDocBench sets it, with a one-line note.
    notes = report.problems["notes"]
    assert [note.split(" (")[0] for note in notes] == [
        "empty: table [0]: TEDS set to 0",
        "empty: table [0]: TEDS_structure_only set to 0",
    ]
    assert all("ZeroDivisionError" in note and "\n" not in note for note in notes)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in [m for m in sys.modules if m.startswith("hpdparse.eval")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "apted", None)  # import apted -> ImportError
    pred = _write(tmp_path / "pred", {"a.md": "text"})
    result = CliRunner().invoke(main, ["eval", str(pred), "--truth", str(pred)])
    assert result.exit_code == 1
    assert result.output == (
        "error: hpdparse eval needs the eval extra (missing module: apted); install it with: "
        "pip install 'hpdparse[eval]'\n"
    )
