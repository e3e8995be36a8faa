"""One page scored: its truth blocks and its prediction's elements matched, then each pair's
edit distance (and each table's TEDS) computed. Runs in a worker process: everything it takes
and gives is plain data (OmniDocBench's dataset/end2end_dataset.py, page by page)."""

from __future__ import annotations

import copy
from typing import Any

from rapidfuzz.distance import Levenshtein

from hpdparse.eval.extract import page_elements
from hpdparse.eval.matching import IGNORED_CATEGORIES, TEXT_CATEGORIES, quick_match, table_match
from hpdparse.eval.normalize import clean_string, latex_to_text, normal_table
from hpdparse.eval.teds import teds

Pair = dict[str, Any]
MIX_CATEGORIES = [*TEXT_CATEGORIES, "equation_isolated"]


def truth_blocks(page: dict[str, Any]) -> dict[str, list[dict]]:
    """The page's blocks by category, blocks linked as `truncated` joined into one (their
    texts in reading order)."""
    chains: list[list[Any]] = []
    linked: dict[Any, Any] = {}
    for relation in page.get("extra", {}).get("relation", []):
        if relation.get("relation_type") != "truncated":
            continue
        source, target = relation["source_anno_id"], relation["target_anno_id"]
        linked[source] = linked[target] = None
        joined = False
        for chain in chains:
            if source in chain or target in chain:
                chain += [source, target]
                joined = True
        if not joined:
            chains.append([source, target])
    blocks: dict[str, list[dict]] = {}
    for item in page["layout_dets"]:
        if item["anno_id"] in linked:
            linked[item["anno_id"]] = item
        else:
            blocks.setdefault(item["category_type"], []).append(item)
    for chain in chains:
        absent = [key for key in chain if linked[key] is None]
        if absent:  # OmniDocBench stops on such a page
            raise ValueError(f"a truncated relation names block {absent[0]}, not on the page")
        parts = sorted((linked[key] for key in chain), key=lambda block: block["order"])
        first = parts[0]
        merged = {
            "category_type": first["category_type"],
            "order": first["order"],
            "anno_id": first["anno_id"],
            "text": "".join(p["text"] for p in parts),
        }
        blocks.setdefault(first["category_type"], []).append(merged)
    return blocks


def _by_order(items: list[dict]) -> list[dict]:
    return sorted(items, key=lambda item: item.get("order") or 0)


def reading_order(pairs: list[Pair]) -> dict[str, Any] | None:
    """Truth order positions as the prediction lists them vs. in truth order."""
    matched = [
        (p["gt_position"], p["pred_position"])
        for p in pairs
        if p["gt_position"] != [""] and p["pred_position"] != ""
    ]
    truth = sorted(x for p in pairs if p["gt_position"] != [""] for x in p["gt_position"] if x)
    pred = [x for positions, _ in sorted(matched, key=lambda m: m[1]) for x in positions if x]
    if not pred and not truth:
        return None
    return {
        "gt": truth,
        "pred": pred,
        "edit": Levenshtein.distance(truth, pred) / max(len(pred), len(truth)),
    }


def _tables(
    blocks: dict[str, list[dict]], elements: dict[str, list[dict]]
) -> tuple[list[Pair], list[dict]]:
    truth = _by_order(blocks.get("table", []))
    if not truth:
        return [], []
    latex, html = elements.get("latex_table", []), elements.get("html_table", [])
    if len(latex) > len(html):  # scored as missed, as OmniDocBench end to end scores LaTeX tables
        kept = [t for t in truth if t.get("html") and t.get("latex")]
        return [
            {
                "gt_idx": [i],
                "gt": t["html"],
                "pred": "",
                # by the index among the kept tables, as OmniDocBench reads it
                "gt_attribute": [truth[i].get("attribute", {})],
                "latex_prediction": True,
            }
            for i, t in enumerate(kept)
        ], []
    return table_match(truth, html)


def _formula_as_text(pair: Pair) -> Pair:
    """A truth formula matched to a predicted paragraph is scored as text."""
    pair = copy.copy(pair)
    pair["gt"] = latex_to_text(pair["gt"])
    pair["norm_gt"] = clean_string(pair["gt"])
    return pair


def add_edit(pair: Pair) -> None:
    truth = pair.get("norm_gt") or pair["gt"]
    pred = pair.get("norm_pred") or pair["pred"]
    pair["upper_len"] = max(len(truth), len(pred))
    if pair["upper_len"]:
        pair["edit_num"] = Levenshtein.distance(pred, truth)
        pair.setdefault("metric", {})["Edit_dist"] = pair["edit_num"] / pair["upper_len"]


def _score_table(pair: Pair, notes: list[str]) -> None:
    pair["norm_gt"], pair["norm_pred"] = normal_table(pair["gt"]), normal_table(pair["pred"])
    truth, pred = pair["norm_gt"] or pair["gt"], pair["norm_pred"] or pair["pred"]
    metric = pair.setdefault("metric", {})
    for name, structure_only in (("TEDS", False), ("TEDS_structure_only", True)):
        try:
            metric[name] = teds(pred, truth, structure_only)
        except Exception as exc:  # what OmniDocBench does: the table scores 0
            metric[name] = 0.0
            notes.append(f"table {pair['gt_idx']}: {name} set to 0 ({type(exc).__name__}: {exc})")
    add_edit(pair)


def score_page(name: str, truth: dict[str, Any], markdown: str) -> dict[str, Any]:
    """{name, text, formula, formula_as_text, table, order, notes} for one page."""
    elements = page_elements(markdown)
    blocks = truth_blocks(truth)
    mix = [
        e
        for cat, items in elements.items()
        if cat not in ("html_table", "latex_table")
        for e in items
    ]
    table_pairs, leftover_cells = _tables(blocks, elements)
    mix += leftover_cells
    truth_mix = _by_order([b for cat in MIX_CATEGORIES for b in blocks.get(cat, [])])
    pairs = quick_match(truth_mix, mix)
    text = [
        p
        for p in pairs
        if p["gt_category_type"] in TEXT_CATEGORIES
        and p["gt_category_type"] not in IGNORED_CATEGORIES
    ]
    formulas = [
        p for p in pairs if p["gt_category_type"] == "equation_isolated" and p["gt_idx"] != [""]
    ]
    as_text = [
        _formula_as_text(p)
        for p in formulas
        if p["pred_category_type"] not in ("equation_inline", "equation_isolated", "")
    ]
    formulas = [
        p
        for p in formulas
        if p["pred_category_type"] in ("equation_inline", "equation_isolated", "")
    ]
    notes: list[str] = []
    for pair in table_pairs:
        _score_table(pair, notes)
    for pair in (*text, *formulas, *as_text):
        add_edit(pair)
    order = reading_order(text) if text else None
    if order:
        order["upper_len"] = max(len(order["gt"]), len(order["pred"]))
        order["edit_num"] = Levenshtein.distance(order["pred"], order["gt"])
        order["metric"] = {"Edit_dist": order["edit_num"] / order["upper_len"]}
    for pair in (*text, *formulas, *as_text, *table_pairs):
        pair["page"] = name
    return {
        "name": name,
        "text": text,
        "formula": formulas,
        "formula_as_text": as_text,
        "table": table_pairs,
        "order": order,
        "notes": notes,
    }
