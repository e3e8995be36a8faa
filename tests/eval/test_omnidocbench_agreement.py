"""hpdparse eval agrees with OmniDocBench's own evaluation code on OmniDocBench's demo set.

The golden figures (omnidocbench_demo_golden.json, under "figures") are the file
result/predictions_quick_match_metric_result.json written by one run of the official code,
copied unchanged. How it was produced (also in the file, under "produced_by"):

    OmniDocBench at commit 7bd6c2e (the public copy pichiu/OmniDocBench), CPython 3.10.13,
    pip install -r requirements.txt scikit-image   (its pins: apted 1.0.3, beautifulsoup4
    4.11.1, Levenshtein 0.25.1, rapidfuzz 3.9.7, lxml 4.9.1, numpy 1.24.4, pandas 2.0.3,
    pylatexenc 3.0a30, scipy 1.10.1; scikit-image 0.24.0)
    configs/end2end_demo.yaml = configs/end2end.yaml with ground_truth.data_path
        .../omnidocbench-demo/OmniDocBench_demo.json, prediction.data_path
        .../omnidocbench-demo/predictions, match_method quick_match, and CDM_plain left out
        (it computes nothing: it writes the formulas out for a separate CDM run)
    mkdir -p result && python pdf_validation.py --config configs/end2end_demo.yaml

Every figure there (per element: all, group by block attribute, page by page attribute) must
agree within 0.005. The demo data are read in place from ../shared/omnidocbench-demo.

omnidocbench_perturbed_golden.json: the same, run on the demo predictions perturbed by
perturbed_predictions() below (written to a folder named pred, config end2end_perturbed.yaml
with that folder as prediction.data_path), so that the matcher meets dropped, cut and
reordered paragraphs the official predictions do not have.
"""

from __future__ import annotations

import json
import math
import random
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("apted")

from hpdparse.eval.run import Report, evaluate

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / ".." / "shared" / "omnidocbench-demo"
HERE = Path(__file__).parent
GOLDEN = json.loads((HERE / "omnidocbench_demo_golden.json").read_text("utf-8"))
PERTURBED_GOLDEN = json.loads((HERE / "omnidocbench_perturbed_golden.json").read_text("utf-8"))
TOLERANCE = 0.005

pytestmark = pytest.mark.skipif(
    not (DEMO / "OmniDocBench_demo.json").is_file(), reason="../shared/omnidocbench-demo absent"
)


def _leaves(tree: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(tree, dict):
        return [leaf for key, value in tree.items() for leaf in _leaves(value, (*path, key))]
    return [(path, tree)]


def _at(tree: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        tree = tree[key]
    return tree


def perturbed_predictions(folder: Path) -> Path:
    """The demo predictions with paragraphs dropped, cut short and swapped, and on some pages
    $$...$$ written as \\[...\\] (a fixed draw: the official figures were measured on it)."""
    draw = random.Random(7)
    folder.mkdir()
    for path in sorted((DEMO / "predictions").glob("*.md")):
        kept = []
        for part in path.read_text().split("\n\n"):
            chance = draw.random()
            if chance < 0.15:
                continue
            if chance < 0.3 and len(part) > 10:
                part = part[: len(part) // 2] + part[len(part) // 2 + 3 :]
            kept.append(part)
        for _ in range(2):
            if len(kept) > 3:
                a, b = draw.sample(range(len(kept)), 2)
                kept[a], kept[b] = kept[b], kept[a]
        text = "\n\n".join(kept)
        if draw.random() < 0.5:
            text = re.sub(r"\$\$(.*?)\$\$", lambda m: "\\[" + m.group(1) + "\\]", text, flags=re.S)
        (folder / path.name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def report() -> Report:
    return evaluate(DEMO / "predictions", DEMO / "OmniDocBench_demo.json", workers=2)


def _off(figures: dict[str, Any], report: Report) -> list[str]:
    leaves = _leaves(figures)
    assert len(leaves) > 150  # all, group and page figures of the four elements
    off = []
    for path, expected in leaves:
        got = _at(report.metrics, path)
        if isinstance(expected, str):
            agrees = got == expected
        else:
            agrees = math.isclose(got, expected, abs_tol=TOLERANCE)
        if not agrees:
            off.append(f"{'/'.join(path)}: official {expected}, hpdparse {got}")
    return off


def test_every_official_figure_agrees(report: Report) -> None:
    off = _off(GOLDEN["figures"], report)
    assert not off, "\n".join(off)


def test_every_official_figure_agrees_on_perturbed_predictions(tmp_path: Path) -> None:
    pred = perturbed_predictions(tmp_path / "pred")
    report = evaluate(pred, DEMO / "OmniDocBench_demo.json", workers=1)
    off = _off(PERTURBED_GOLDEN["figures"], report)
    assert not off, "\n".join(off)


def test_headline_figures(report: Report) -> None:
    figures = GOLDEN["figures"]
    metrics = report.metrics
    for element in ("text_block", "display_formula", "table", "reading_order"):
        expected = figures[element]["all"]["Edit_dist"]["ALL_page_avg"]
        got = metrics[element]["all"]["Edit_dist"]["ALL_page_avg"]
        assert got == pytest.approx(expected, abs=TOLERANCE), element
    assert metrics["table"]["all"]["TEDS"]["all"] == pytest.approx(0.7838, abs=TOLERANCE)
    assert report.pages == {"truth": 18, "scored": 18}
    # Overall = ((1 - text edit) * 100 + TEDS * 100 + (1 - formula edit) * 100) / 3
    expected_overall = (
        (1 - figures["text_block"]["all"]["Edit_dist"]["ALL_page_avg"]) * 100
        + figures["table"]["all"]["TEDS"]["all"] * 100
        + (1 - figures["display_formula"]["all"]["Edit_dist"]["ALL_page_avg"]) * 100
    ) / 3
    assert report.overall["value"] == pytest.approx(expected_overall, abs=0.5)
    assert "CDM" in report.overall["substitution"]
