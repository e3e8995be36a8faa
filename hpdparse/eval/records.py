"""The records that pass between hpdparse.eval's modules: a truth page and its blocks (read once
from the truth), a predicted element (read from a page's Markdown), a matched pair with its
scores, and a scored page. Plain dataclasses: they travel between worker processes."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class TruthBlock:
    """A layout block of an OmniDocBench truth page (its `layout_dets` entry)."""

    anno_id: int | str
    category: str  # category_type
    order: float | None = None  # the reading order; None for blocks outside it
    text: str = ""
    latex: str = ""
    html: str = ""
    attribute: dict[str, str] = field(default_factory=dict)

    @property
    def position(self) -> float | str:
        """Where OmniDocBench places the block in the reading order ('' where it has none)."""
        return self.order or ""


@dataclass
class TruthPage:
    name: str  # the page image's name without its extension (or the Markdown file's stem)
    blocks: list[TruthBlock]
    truncated: list[tuple[int | str, int | str]] = field(default_factory=list)  # joined blocks
    attributes: dict[str, str | list[str]] = field(default_factory=dict)  # page_attribute


@dataclass
class Element:
    """A predicted element of a page's Markdown: its category (text_all, equation_isolated,
    html_table, latex_table), where it starts, its text, and a finer category if any."""

    category: str
    start: int
    content: str
    fine: str = ""  # equation_inline, md2html_table, code, text_block

    @property
    def kind(self) -> str:
        return self.fine or self.category


@dataclass(kw_only=True)
class Scored:
    """What the figures read of a scored sample (a pair, or a page's reading order)."""

    page: str = ""
    upper_len: int = 0  # the longer side's length
    edit_num: int | None = None  # the edit distance (None where both sides are empty)
    metric: dict[str, float] = field(default_factory=dict)  # Edit_dist, TEDS...
    gt_attribute: list[dict[str, str]] = field(default_factory=list)


@dataclass(kw_only=True)
class Pair(Scored):
    """Truth block(s) and the prediction matched to them, with OmniDocBench's fields."""

    gt_idx: list[int]
    gt: str
    pred: str = ""
    norm_gt: str = ""
    norm_pred: str = ""
    gt_position: list[float | str] = field(default_factory=list)
    pred_position: int | str = ""
    gt_category_type: str = ""
    pred_category_type: str = ""


@dataclass
class ScoredPage:
    name: str
    text: list[Pair]
    formula: list[Pair]
    formula_as_text: list[Pair]  # truth formulas matched to predicted text
    table: list[Pair]
    order: Scored | None
    notes: list[str]
