"""Truth blocks <-> predicted elements of one page, as OmniDocBench's `quick_match` pairs them
(utils/match_quick.py and utils/match.py there), and its simple one-to-one match for tables.

Each pair is a dict with OmniDocBench's fields (gt, pred, norm_gt, norm_pred, gt_idx, pred_idx,
gt_position, pred_position, gt_category_type, pred_category_type, gt_attribute, edit). One quirk
is kept on purpose: the truth and predicted lines that normalize to nothing are dropped, but the
positions, categories and attributes are then read by index from the unfiltered lists, as
OmniDocBench does (this shifts reading-order figures on pages with such lines)."""

from __future__ import annotations

import copy
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.optimize import linear_sum_assignment

from hpdparse.eval import merging
from hpdparse.eval.normalize import normal_formula, normal_text, table_cell_texts

Pair = dict[str, Any]
TEXT_CATEGORIES = [
    "text_block",
    "title",
    "code_txt",
    "code_txt_caption",
    "reference",
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
# Truth categories OmniDocBench leaves out of the text and reading-order scores.
IGNORED_CATEGORIES = [
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
    "equation_caption",
]
_ARRAY = re.compile(r"\\begin\{array\}\{(?P<spec>[^}]*)\}(?P<body>.*?)\\end\{array\}", re.S)


def _one_column(spec: str) -> bool:
    spec = re.sub(r"\s+|\|", "", spec)
    spec = re.sub(r"@{[^}]*}", "", spec)
    spec = re.sub(r"!{[^}]*}", "", spec)
    return spec in {"l", "c", "r"}


def _array_rows(latex: str) -> tuple[re.Match[str], list[str]] | None:
    match = _ARRAY.search(latex)
    if not match or not _one_column(match.group("spec")):
        return None
    return match, [row.strip() for row in re.split(r"\\\\", match.group("body")) if row.strip()]


def split_truth_arrays(items: list[dict]) -> list[dict]:
    """A one-column `array` display formula of the truth -> one formula per row."""
    out = []
    for item in items:
        found = None
        if item.get("category_type") == "equation_isolated" and "\\begin{array" in item.get(
            "latex", ""
        ):
            found = _array_rows(item["latex"])
        if found is None:
            out.append(item)
            continue
        base = float(item["order"])
        for n, row in enumerate(found[1], start=1):
            out.append(
                {**copy.deepcopy(item), "latex": f"\\[{row}\\]", "order": round(base + n / 10, 1)}
            )
    return out


def split_pred_arrays(items: list[dict]) -> list[dict]:
    """The same for predicted display formulas (with their positions)."""
    out = []
    for item in items:
        found = None
        if item.get("category_type") == "equation_isolated" and "\\begin{array" in item.get(
            "content", ""
        ):
            found = _array_rows(item["content"])
        if found is None:
            out.append(item)
            continue
        match, rows = found
        body, search_from = match.group("body"), 0
        for row in rows:
            at = body.find(row, search_from)
            at = search_from if at == -1 else at
            search_from = at + len(row)
            start = item["position"][0] + match.start("body") + at
            out.append(
                {
                    **copy.deepcopy(item),
                    "content": f"\\[{row.strip()}\\]",
                    "position": [start, start + len(row) - 1],
                }
            )
    return out


def category_of(item: dict) -> str:
    return item.get("fine_category_type") or item["category_type"]


def position_of(item: dict) -> Any:
    return item.get("order") if item.get("order") else item.get("position", [""])[0]


@dataclass
class Lines:
    """The non-empty lines of both sides, raw and normalized, and the unfiltered items."""

    gt_raw: list[str]
    gt: list[str]
    gt_cat: list[str]
    pred_raw: list[str]
    pred: list[str]
    gt_items: list[dict]
    pred_items: list[dict]


def page_lines(gt_items: list[dict], pred_items: list[dict]) -> Lines:
    gt_rows = []
    for item in gt_items:
        if item["category_type"] in TEXT_CATEGORIES:
            raw = str(item.get("text", ""))
            gt_rows.append((raw, normal_text(raw), category_of(item)))
        elif item["category_type"] == "equation_isolated":
            raw = str(item.get("latex", ""))
            gt_rows.append((raw, normal_formula(raw), category_of(item)))
    pred_rows = []
    for item in pred_items:
        raw = str(item["content"])
        if item["category_type"] == "text_all":
            pred_rows.append((raw, normal_text(raw)))
        elif item["category_type"] == "equation_isolated":
            pred_rows.append((raw, normal_formula(raw)))
        else:
            pred_rows.append((raw, raw))
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


def _unmatched_truth(lines: Lines, t: int) -> Pair:
    item = lines.gt_items[t]
    return {
        "gt_idx": [t],
        "gt": lines.gt_raw[t],
        "pred_idx": [""],
        "pred": "",
        "gt_position": [position_of(item)],
        "pred_position": "",
        "norm_gt": lines.gt[t],
        "norm_pred": "",
        "gt_category_type": lines.gt_cat[t],
        "pred_category_type": "",
        "gt_attribute": [item.get("attribute", {})],
        "edit": 1,
    }


def _array_of(parts: list[str]) -> str:
    rows = " \\\\ ".join("{" + part.strip("$").strip("\n") + "}" for part in parts)
    return "\\begin{array}{l} " + rows + " \\end{array}"


def _finish(entry: Pair, lines: Lines, truth: list[int], pred: list[int]) -> Pair:
    """A grouped entry of the main match -> a pair (indices into the kept lines)."""
    cats = [lines.gt_cat[truth[t]] for t in entry["gt_idx"]]
    kept = [c for c in cats if c not in IGNORED_CATEGORIES]
    entry["gt_category_type"] = Counter(kept or cats).most_common(1)[0][0]
    has_pred = entry["pred_idx"] != [""]
    first_pred = lines.pred_items[pred[entry["pred_idx"][0]]] if has_pred else None
    entry["gt_position"] = [position_of(lines.gt_items[truth[t]]) for t in entry["gt_idx"]]
    entry["pred_position"] = first_pred["position"][0] if first_pred else ""
    gt_raw = [lines.gt_raw[truth[t]] for t in entry["gt_idx"]]
    multi_formula = entry["gt_category_type"] == "equation_isolated" and len(gt_raw) > 1
    entry["gt"] = _array_of(gt_raw) if multi_formula else "".join(gt_raw)
    entry["pred_category_type"] = category_of(first_pred) if first_pred else ""
    entry["gt_attribute"] = [lines.gt_items[truth[t]].get("attribute", {}) for t in entry["gt_idx"]]
    pred_raw = [lines.pred_raw[pred[p]] for p in entry["pred_idx"]] if has_pred else []
    multi_pred = "equation" in entry["pred_category_type"] and len(pred_raw) > 1
    entry["pred"] = _array_of(pred_raw) if multi_pred else "".join(pred_raw)
    entry["norm_gt"] = "".join(lines.gt[truth[t]] for t in entry["gt_idx"])
    entry["norm_pred"] = "".join(lines.pred[pred[p]] for p in entry["pred_idx"]) if has_pred else ""
    entry["gt_idx"] = [truth[t] for t in entry["gt_idx"]]
    entry["pred_idx"] = [pred[p] for p in entry["pred_idx"]] if has_pred else [""]
    return entry


def _ignored_pred(lines: Lines) -> set[int]:
    """Predicted lines that match a left-out truth block (header, caption...) closely: they are
    taken out before the main match (the left-out blocks' own pairs are never scored)."""
    ignored = [lines.gt[t] for t, cat in enumerate(lines.gt_cat) if cat in IGNORED_CATEGORIES]
    if not ignored:
        return set()
    matrix = merging.distance_matrix(ignored, lines.pred)
    return {int(j) for j in np.argwhere(matrix < 0.25)[:, 1]}


def quick_match(gt_items: list[dict], pred_items: list[dict]) -> list[Pair]:
    """The page's pairs, those without truth (gt_idx [""]) and the left-out categories' included
    only where OmniDocBench keeps them."""
    gt_items = split_truth_arrays(gt_items)
    order = sorted(
        enumerate(pred_items),
        key=lambda p: (
            p[1].get("fine_category_type") == "equation_inline",
            p[1]["position"][0],
            p[0],
        ),
    )
    lines = page_lines(gt_items, split_pred_arrays([p[1] for p in order]))
    if not lines.gt:
        return []
    if not lines.pred:
        return [_unmatched_truth(lines, t) for t in range(len(lines.gt))]
    if len(lines.gt) == 1 and len(lines.pred) == 1:
        pair = _finish({"gt_idx": [0], "pred_idx": [0]}, lines, [0], [0])
        pair["edit"] = merging.normalized_distance(lines.gt[0], lines.pred[0])
        return [pair]
    ignored = _ignored_pred(lines)
    truth = [t for t, cat in enumerate(lines.gt_cat) if cat not in IGNORED_CATEGORIES]
    pred = [p for p in range(len(lines.pred)) if p not in ignored]
    truth_norm = [lines.gt[t] for t in truth]
    pred_norm = [lines.pred[p] for p in pred]
    matrix = merging.distance_matrix(truth_norm, pred_norm)
    matches, unmatched = merging.assign(matrix, truth_norm, pred_norm)
    final = merging.combine(matches, merging.contained_truth(unmatched, truth_norm, pred_norm))
    merging.rescore(final, truth_norm, pred_norm)
    pairs = merging.pairs_of(final, truth_norm, pred_norm)
    grouped = merging.group_by_prediction(pairs, len(truth), [lines.gt_raw[t] for t in truth])
    out, skip_next = [], False
    for entry in grouped:
        if skip_next:  # OmniDocBench removes from the list it walks: the next entry is lost
            skip_next = False
            continue
        if entry["gt_idx"] == [""]:
            first = lines.pred_items[pred[entry["pred_idx"][0]]]
            skip_next = category_of(first) == "equation_inline"
            continue  # predictions without truth are never scored
        out.append(_finish(entry, lines, truth, pred))
    return out


def table_match(gt_tables: list[dict], pred_tables: list[dict]) -> tuple[list[Pair], list[dict]]:
    """Truth tables <-> predicted tables one to one (Hungarian on the raw strings); the cells of
    predicted tables left over come back as text elements."""
    gt_raw = [str(item.get("html", "")) for item in gt_tables]
    kept = [t for t, raw in enumerate(gt_raw) if raw]
    pred_raw = [str(item["content"]) for item in pred_tables if item["content"]]
    pairs: list[Pair] = []
    matrix = merging.distance_matrix([gt_raw[t] for t in kept], pred_raw)
    rows, cols = linear_sum_assignment(matrix) if kept and pred_raw else ([], [])
    assigned = {int(r): int(c) for r, c in zip(rows, cols, strict=True)}
    for i, t in enumerate(kept):
        c = assigned.get(i)
        pairs.append(
            {
                "gt_idx": [i],
                "gt": gt_raw[t],
                "norm_gt": gt_raw[t],
                "gt_category_type": category_of(gt_tables[i]),
                "gt_position": [position_of(gt_tables[i])],
                "gt_attribute": [gt_tables[i].get("attribute", {})],
                "pred_idx": [c if c is not None else ""],
                "pred": pred_raw[c] if c is not None else "",
                "norm_pred": pred_raw[c] if c is not None else "",
                "edit": matrix[i][c] if c is not None else 1,
            }
        )
    leftover = []
    if kept:
        for c in range(len(pred_raw)):
            if c not in assigned.values():
                for text in table_cell_texts(pred_tables[c]["content"]):
                    leftover.append(
                        {
                            **copy.deepcopy(pred_tables[c]),
                            "content": text,
                            "category_type": "text_all",
                        }
                    )
    return pairs, leftover
