"""One page scored: its truth blocks and its prediction's elements matched, then each pair's
edit distance (and each table's TEDS) computed. Runs in a worker process: it takes and gives
records (hpdparse.eval.records). OmniDocBench's dataset/end2end_dataset.py, page by page."""

from __future__ import annotations

from dataclasses import replace

from rapidfuzz.distance import Levenshtein

from hpdparse.eval.extract import page_elements
from hpdparse.eval.matching import SCORED_TEXT_CATEGORIES, TEXT_CATEGORIES, quick_match, table_match
from hpdparse.eval.normalize import clean_string, latex_to_text, normal_table
from hpdparse.eval.records import Element, Pair, Scored, ScoredPage, TruthBlock, TruthPage
from hpdparse.eval.teds import teds

MIX_CATEGORIES = [*TEXT_CATEGORIES, "equation_isolated"]


def truth_blocks(page: TruthPage) -> dict[str, list[TruthBlock]]:
    """The page's blocks by category, blocks linked as `truncated` joined into one (their
    texts in reading order)."""
    chains: list[list[int | str]] = []
    linked: dict[int | str, TruthBlock | None] = {}
    for source, target in page.truncated:
        linked[source] = linked[target] = None
        touched = [chain for chain in chains if source in chain or target in chain]
        for chain in touched:  # every chain that holds either joins the pair
            chain += [source, target]
        if not touched:
            chains.append([source, target])
    blocks: dict[str, list[TruthBlock]] = {}
    for block in page.blocks:
        if block.anno_id in linked:
            linked[block.anno_id] = block
        else:
            blocks.setdefault(block.category, []).append(block)
    for chain in chains:
        parts = [linked[key] for key in chain]
        if None in parts:  # OmniDocBench stops on such a page
            absent = chain[parts.index(None)]
            raise ValueError(f"a truncated relation names block {absent}, not on the page")
        parts.sort(key=lambda block: block.order)
        first = parts[0]
        text = "".join(p.text for p in parts)
        merged = TruthBlock(first.anno_id, first.category, first.order, text)
        blocks.setdefault(first.category, []).append(merged)
    return blocks


def _by_order(items: list[TruthBlock]) -> list[TruthBlock]:
    return sorted(items, key=lambda item: item.order or 0)


def reading_order(pairs: list[Pair]) -> Scored | None:
    """Truth order positions as the prediction lists them vs. in truth order."""
    placed = [p for p in pairs if p.gt_position != [""]]
    truth = sorted(x for p in placed for x in p.gt_position if x)
    found = sorted((p for p in placed if p.pred_position != ""), key=lambda p: p.pred_position)
    pred = [x for p in found for x in p.gt_position if x]
    if not pred and not truth:
        return None
    edits, length = Levenshtein.distance(pred, truth), max(len(pred), len(truth))
    return Scored(upper_len=length, edit_num=edits, metric={"Edit_dist": edits / length})


def _tables(
    blocks: dict[str, list[TruthBlock]], elements: dict[str, list[Element]]
) -> tuple[list[Pair], list[Element]]:
    truth = _by_order(blocks.get("table", []))
    latex, html = elements.get("latex_table", []), elements.get("html_table", [])
    if len(latex) > len(html):  # scored as missed, as OmniDocBench end to end scores LaTeX tables
        kept = [t for t in truth if t.html and t.latex]
        # by the index among the kept tables, as OmniDocBench reads it
        return [
            Pair(gt_idx=[i], gt=t.html, gt_attribute=[truth[i].attribute])
            for i, t in enumerate(kept)
        ], []
    return table_match(truth, html)


def _formula_as_text(pair: Pair) -> Pair:
    """A truth formula matched to a predicted paragraph is scored as text."""
    gt = latex_to_text(pair.gt)
    return replace(pair, gt=gt, norm_gt=clean_string(gt))


def add_edit(pair: Pair) -> None:
    truth, pred = pair.norm_gt or pair.gt, pair.norm_pred or pair.pred
    pair.upper_len = max(len(truth), len(pred))
    if pair.upper_len:
        pair.edit_num = Levenshtein.distance(pred, truth)
        pair.metric["Edit_dist"] = pair.edit_num / pair.upper_len


def _score_table(pair: Pair, notes: list[str]) -> None:
    pair.norm_gt, pair.norm_pred = normal_table(pair.gt), normal_table(pair.pred)
    truth, pred = pair.norm_gt or pair.gt, pair.norm_pred or pair.pred
    for name, structure_only in (("TEDS", False), ("TEDS_structure_only", True)):
        try:
            pair.metric[name] = teds(pred, truth, structure_only)
        except Exception as exc:  # what OmniDocBench does: the table scores 0
            pair.metric[name] = 0.0
            notes.append(f"table {pair.gt_idx}: {name} set to 0 ({type(exc).__name__}: {exc})")
    add_edit(pair)


def score_page(truth: TruthPage, markdown: str) -> ScoredPage:
    elements = page_elements(markdown)
    blocks = truth_blocks(truth)
    mix = [e for cat, items in elements.items() if not cat.endswith("_table") for e in items]
    table_pairs, leftover_cells = _tables(blocks, elements)
    mix += leftover_cells
    truth_mix = _by_order([b for cat in MIX_CATEGORIES for b in blocks.get(cat, [])])
    pairs = quick_match(truth_mix, mix)
    text = [p for p in pairs if p.gt_category_type in SCORED_TEXT_CATEGORIES]
    formulas, as_text = [], []
    for p in pairs:
        if p.gt_category_type == "equation_isolated":
            if p.pred_category_type in ("equation_inline", "equation_isolated", ""):
                formulas.append(p)
            else:
                as_text.append(_formula_as_text(p))
    notes: list[str] = []
    for pair in table_pairs:
        _score_table(pair, notes)
    for pair in (*text, *formulas, *as_text):
        add_edit(pair)
    order = reading_order(text) if text else None
    for sample in (*text, *formulas, *as_text, *table_pairs, *([order] if order else [])):
        sample.page = truth.name
    return ScoredPage(truth.name, text, formulas, as_text, table_pairs, order, notes)
