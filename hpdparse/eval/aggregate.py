"""Scored pages -> the figures OmniDocBench's end-to-end evaluation reports, in the same layout
as its `*_metric_result.json` (per element: `all`, `group` by block attribute, `page` by page
attribute), plus per-page figures and the overall score (metrics/cal_metric.py and
metrics/show_result.py there)."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TypedDict

from hpdparse.eval.records import Pair, Scored, ScoredPage

ELEMENTS = ("text_block", "display_formula", "table", "reading_order")
NAN = "NaN"
Figures = dict[str, dict[str, float | str]]  # metric -> figure or label -> value


class ElementFigures(TypedDict):
    """One element's figures in report.json: overall, by block attribute, by page attribute."""

    all: Figures
    group: Figures
    page: Figures


class Overall(TypedDict):
    value: float | None
    definition: str
    substitution: str
    edit_distance: str


class PerPageFigures(TypedDict):
    text_block_edit: float | None
    display_formula_edit: float | None
    table_edit: float | None
    table_teds: float | None
    reading_order_edit: float | None


def _mean(values: list[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    return sum(kept) / len(kept) if kept else math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den else math.nan


def edit_figures(samples: list[Scored]) -> dict[str, float | str]:
    """ALL_page_avg (each page's summed edits over its summed lengths, averaged over pages),
    edit_whole (all edits over all lengths) and edit_sample_avg (mean of the samples' ratios)."""
    if not samples:
        return {"ALL_page_avg": NAN}
    pages: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s in samples:
        pages[s.page][0] += s.edit_num or 0
        pages[s.page][1] += s.upper_len
    edits = sum(s.edit_num or 0 for s in samples)
    lengths = sum(s.upper_len for s in samples)
    return {
        "ALL_page_avg": _mean([_ratio(e, n) for e, n in pages.values()]),
        "edit_whole": _ratio(edits, lengths),
        "edit_sample_avg": _mean(
            [s.edit_num / s.upper_len for s in samples if s.edit_num is not None]
        ),
    }


def by_block_attribute(samples: list[Scored]) -> Figures:
    """Each metric's mean over the samples whose truth blocks carry an attribute value."""
    if not samples:
        return {}
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for s in samples:
        labels = {f"{k}: {v}" for attrs in s.gt_attribute for k, v in attrs.items()}
        for label in sorted(labels):
            for metric, score in s.metric.items():
                scores[label][metric].append(score)
    result: Figures = {"sample_count": {}}
    for label, metrics in scores.items():
        for metric, values in metrics.items():
            result.setdefault(metric, {})[label] = sum(values) / len(values)
            result["sample_count"][label] = len(values)
    return {k: dict(sorted(v.items())) for k, v in sorted(result.items())}


def _page_labels(attributes: dict[str, str | list[str]]) -> list[str]:
    labels = ["ALL"]
    for key, value in attributes.items():
        if isinstance(value, list):  # special issues; the table ones are counted with tables
            labels += [issue for issue in value if "table" not in issue]
        else:
            labels.append(f"{key}: {value}")
    return labels


def by_page_attribute(
    samples: list[Scored], attributes: dict[str, dict[str, str | list[str]]]
) -> Figures:
    """Each metric per page attribute: within a page first (edit distances weighted by length),
    then averaged over the pages that carry the attribute."""
    if not attributes:
        return {}
    cells: dict[tuple[str, str, str], list[tuple[float, int]]] = defaultdict(list)
    for s in samples:
        for metric, score in s.metric.items():
            for label in _page_labels(attributes.get(s.page, {})):
                cells[metric, s.page, label].append((score, s.upper_len))
    per_label: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for (metric, _, label), values in cells.items():
        if metric == "Edit_dist":
            value = _ratio(sum(v * n for v, n in values), sum(n for _, n in values))
        else:
            value = sum(v for v, _ in values) / len(values)
        per_label[metric][label].append(value)
    return {
        metric: dict(sorted((label, _mean(v)) for label, v in labels.items()))
        for metric, labels in sorted(per_label.items())
    }


def element_samples(pages: list[ScoredPage]) -> dict[str, list[Scored]]:
    text: list[Scored] = [s for p in pages for s in p.text]
    return {
        "text_block": text + [s for p in pages for s in p.formula_as_text] if text else [],
        "display_formula": [s for p in pages for s in p.formula],
        "table": [s for p in pages for s in p.table],
        "reading_order": [p.order for p in pages if p.order],
    }


def element_figures(
    name: str, samples: list[Scored], attributes: dict[str, dict[str, str | list[str]]]
) -> ElementFigures:
    figures: Figures = {}
    if name == "table":
        for metric in ("TEDS", "TEDS_structure_only"):
            values = [s.metric[metric] for s in samples]
            figures[metric] = {"all": sum(values) / len(values)} if values else {}
    figures["Edit_dist"] = edit_figures(samples)
    return {
        "all": figures,
        "group": by_block_attribute(samples),
        "page": by_page_attribute(samples, attributes),
    }


def overall(metrics: dict[str, ElementFigures]) -> Overall:
    """OmniDocBench's Overall: ((1 - text edit) * 100 + table TEDS + formula CDM) / 3, with the
    formula's (1 - edit distance) * 100 in place of CDM (named in `substitution`)."""
    text = metrics["text_block"]["all"]["Edit_dist"]["ALL_page_avg"]
    formula = metrics["display_formula"]["all"]["Edit_dist"]["ALL_page_avg"]
    table = metrics["table"]["all"].get("TEDS", {}).get("all", NAN)
    value = None  # unless all three are figures (not NaN)
    if all(isinstance(f, float) and not math.isnan(f) for f in (text, table, formula)):
        value = ((1 - text) * 100 + table * 100 + (1 - formula) * 100) / 3
    return {
        "value": value,
        "definition": "((1 - text Edit_dist) * 100 + table TEDS * 100 + formula CDM) / 3",
        "substitution": "formula CDM replaced by (1 - display_formula Edit_dist) * 100 (CDM needs "
        "a LaTeX renderer: hpdparse eval does not compute it)",
        "edit_distance": "ALL_page_avg",
    }


def _edit(samples: list[Pair]) -> float | None:
    lengths = sum(s.upper_len for s in samples)
    return _ratio(sum(s.edit_num or 0 for s in samples), lengths) if lengths else None


def page_figures(page: ScoredPage) -> PerPageFigures:
    """One page's figures: the edit distance of each element (its edits over its lengths) and
    the mean TEDS of its tables."""
    tables = [s.metric["TEDS"] for s in page.table]
    return {
        "text_block_edit": _edit(page.text + page.formula_as_text),
        "display_formula_edit": _edit(page.formula),
        "table_edit": _edit(page.table),
        "table_teds": sum(tables) / len(tables) if tables else None,
        "reading_order_edit": page.order.metric["Edit_dist"] if page.order else None,
    }
