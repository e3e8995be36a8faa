"""Truth blocks <-> predicted elements of one page, as OmniDocBench's `quick_match` pairs them
(utils/match_quick.py and utils/match.py there), and its simple one-to-one match for tables.

Each pair (records.Pair) has OmniDocBench's fields (gt, pred, norm_gt, norm_pred, gt_idx,
gt_position, pred_position, gt_category_type, pred_category_type, gt_attribute). One quirk
is kept on purpose: the truth and predicted lines that normalize to nothing are dropped, but the
positions, categories and attributes are then read by index from the unfiltered lists, as
OmniDocBench does (this shifts reading-order figures on pages with such lines)."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import linear_sum_assignment

from hpdparse.eval import merging
from hpdparse.eval.normalize import normal_formula, normal_text, table_cell_texts
from hpdparse.eval.records import Element, Pair, TruthBlock

# Truth categories OmniDocBench leaves out of the text and reading-order scores.
IGNORED_CATEGORIES = [
    "equation_caption",
    "figure_caption",
    "figure_footnote",
    "table_caption",
    "table_footnote",
    "code_algorithm",
    "code_algorithm_caption",
    "header",
    "footer",
    "page_footnote",
    "page_number",
]
SCORED_TEXT_CATEGORIES = ["text_block", "title", "code_txt", "code_txt_caption", "reference"]
TEXT_CATEGORIES = SCORED_TEXT_CATEGORIES + IGNORED_CATEGORIES  # in OmniDocBench's order
_ARRAY = re.compile(r"\\begin\{array\}\{(?P<spec>[^}]*)\}(?P<body>.*?)\\end\{array\}", re.S)


def _one_column(spec: str) -> bool:
    spec = re.sub(r"\s+|\|", "", spec)
    spec = re.sub(r"@{[^}]*}", "", spec)
    spec = re.sub(r"!{[^}]*}", "", spec)
    return spec in {"l", "c", "r"}


def _array_rows(category: str, latex: str) -> tuple[re.Match[str], list[str]] | None:
    """A one-column `array` display formula: the match and its rows; None for anything else."""
    match = _ARRAY.search(latex) if category == "equation_isolated" else None
    if not match or not _one_column(match.group("spec")):
        return None
    return match, [row.strip() for row in re.split(r"\\\\", match.group("body")) if row.strip()]


def split_truth_arrays(items: list[TruthBlock]) -> list[TruthBlock]:
    """A one-column `array` display formula of the truth -> one formula per row."""
    out = []
    for item in items:
        found = _array_rows(item.category, item.latex)
        if found is None:
            out.append(item)
            continue
        base = float(item.order)  # type: ignore[arg-type]  # None: a TypeError, as in OmniDocBench
        for n, row in enumerate(found[1], start=1):
            out.append(replace(item, latex=f"\\[{row}\\]", order=round(base + n / 10, 1)))
    return out


def split_pred_arrays(items: list[Element]) -> list[Element]:
    """The same for predicted display formulas (with their positions)."""
    out = []
    for item in items:
        found = _array_rows(item.category, item.content)
        if found is None:
            out.append(item)
            continue
        match, rows = found
        body, search_from = match.group("body"), 0
        for row in rows:
            at = body.find(row, search_from)
            at = search_from if at == -1 else at
            search_from = at + len(row)
            start = item.start + match.start("body") + at
            out.append(replace(item, content=f"\\[{row.strip()}\\]", start=start))
    return out


@dataclass
class Lines:
    """The non-empty lines of both sides, raw and normalized, and the unfiltered items."""

    gt_raw: list[str]
    gt: list[str]
    gt_cat: list[str]
    pred_raw: list[str]
    pred: list[str]
    gt_items: list[TruthBlock]
    pred_items: list[Element]


def _line(raw: str, category: str) -> tuple[str, str]:
    """A line raw and normalized: the page's mix holds only text and display formulas."""
    return raw, normal_formula(raw) if category == "equation_isolated" else normal_text(raw)


def page_lines(gt_items: list[TruthBlock], pred_items: list[Element]) -> Lines:
    gt_rows = []
    for block in gt_items:
        raw = block.latex if block.category == "equation_isolated" else block.text
        gt_rows.append((*_line(raw, block.category), block.category))
    pred_rows = [_line(item.content, item.category) for item in pred_items]
    gt_rows = [row for row in gt_rows if row[0] and row[1]]
    pred_rows = [row for row in pred_rows if row[0] and row[1]]
    return Lines(
        [r[0] for r in gt_rows],
        [r[1] for r in gt_rows],
        [r[2] for r in gt_rows],
        [r[0] for r in pred_rows],
        [r[1] for r in pred_rows],
        gt_items,
        pred_items,
    )


def _array_of(parts: list[str]) -> str:
    rows = " \\\\ ".join("{" + part.strip("$").strip("\n") + "}" for part in parts)
    return "\\begin{array}{l} " + rows + " \\end{array}"


def _pair(truth: list[int], pred: list[int], lines: Lines) -> Pair:
    """Truth lines and the predicted lines matched to them (indices into the kept lines; the
    items are read at the same indices of the unfiltered lists) -> a pair."""
    cats = [lines.gt_cat[t] for t in truth]
    category = Counter([c for c in cats if c not in IGNORED_CATEGORIES] or cats).most_common(1)
    first_pred = lines.pred_items[pred[0]] if pred else None
    pred_category = first_pred.kind if first_pred else ""
    gt_raw = [lines.gt_raw[t] for t in truth]
    pred_raw = [lines.pred_raw[p] for p in pred]
    multi_formula = category[0][0] == "equation_isolated" and len(gt_raw) > 1
    multi_pred = "equation" in pred_category and len(pred_raw) > 1
    return Pair(
        gt_idx=truth,
        gt=_array_of(gt_raw) if multi_formula else "".join(gt_raw),
        pred=_array_of(pred_raw) if multi_pred else "".join(pred_raw),
        norm_gt="".join(lines.gt[t] for t in truth),
        norm_pred="".join(lines.pred[p] for p in pred),
        gt_position=[lines.gt_items[t].position for t in truth],
        pred_position=first_pred.start if first_pred else "",
        gt_category_type=category[0][0],
        pred_category_type=pred_category,
        gt_attribute=[lines.gt_items[t].attribute for t in truth],
    )


def _ignored_pred(lines: Lines) -> set[int]:
    """Predicted lines that match a left-out truth block (header, caption...) closely: they are
    taken out before the main match (the left-out blocks' own pairs are never scored)."""
    ignored = [lines.gt[t] for t, cat in enumerate(lines.gt_cat) if cat in IGNORED_CATEGORIES]
    matrix = merging.distance_matrix(ignored, lines.pred)
    return {int(j) for j in np.argwhere(matrix < 0.25)[:, 1]}


def quick_match(gt_items: list[TruthBlock], pred_items: list[Element]) -> list[Pair]:
    """The page's pairs, those without truth and the left-out categories' included only where
    OmniDocBench keeps them."""
    gt_items = split_truth_arrays(gt_items)
    order = sorted(pred_items, key=lambda e: (e.fine == "equation_inline", e.start))  # stable
    lines = page_lines(gt_items, split_pred_arrays(order))
    if not lines.gt:
        return []
    if not lines.pred:
        return [_pair([t], [], lines) for t in range(len(lines.gt))]
    if len(lines.gt) == 1 and len(lines.pred) == 1:
        return [_pair([0], [0], lines)]
    ignored = _ignored_pred(lines)
    truth = [t for t, cat in enumerate(lines.gt_cat) if cat not in IGNORED_CATEGORIES]
    pred = [p for p in range(len(lines.pred)) if p not in ignored]
    truth_norm = [lines.gt[t] for t in truth]
    pred_norm = [lines.pred[p] for p in pred]
    matches, unmatched = merging.assign(truth_norm, pred_norm)
    final = merging.combine(matches, merging.contained_truth(unmatched, truth_norm, pred_norm))
    grouped = merging.group_by_prediction(merging.pairs_of(final, truth_norm, pred_norm), truth)
    out, skip_next = [], False
    for gt_idx, pred_idx in grouped:
        if skip_next:  # OmniDocBench removes from the list it walks: the next entry is lost
            skip_next = False
            continue
        if gt_idx == [None]:  # predictions without truth are never scored
            skip_next = lines.pred_items[pred[pred_idx[0]]].kind == "equation_inline"
            continue
        out.append(_pair([truth[t] for t in gt_idx], [pred[p] for p in pred_idx], lines))
    return out


def table_match(
    gt_tables: list[TruthBlock], pred_tables: list[Element]
) -> tuple[list[Pair], list[Element]]:
    """Truth tables <-> predicted tables one to one (Hungarian on the raw strings); the cells of
    predicted tables left over come back as text elements."""
    gt_raw = [item.html for item in gt_tables]
    kept = [t for t, raw in enumerate(gt_raw) if raw]
    pred_raw = [item.content for item in pred_tables if item.content]
    matrix = merging.distance_matrix([gt_raw[t] for t in kept], pred_raw)
    rows, cols = linear_sum_assignment(matrix) if kept and pred_raw else ([], [])
    assigned = {int(r): int(c) for r, c in zip(rows, cols, strict=True)}
    pairs = []
    for i, t in enumerate(kept):
        c = assigned.get(i)
        pred = pred_raw[c] if c is not None else ""
        pairs.append(
            Pair(
                gt_idx=[i],
                gt=gt_raw[t],
                norm_gt=gt_raw[t],
                gt_category_type=gt_tables[i].category,
                gt_position=[gt_tables[i].position],
                gt_attribute=[gt_tables[i].attribute],
                pred=pred,
                norm_pred=pred,
            )
        )
    unmatched = [c for c in range(len(pred_raw)) if c not in assigned.values()] if kept else []
    leftover = [
        replace(pred_tables[c], content=text, category="text_all")
        for c in unmatched
        for text in table_cell_texts(pred_tables[c].content)
    ]
    return pairs, leftover
