"""One parsed page -> Markdown units; its blocks get their crops' names and the ties between them
(captions, list items, formula numbers...)."""

from __future__ import annotations

import re
from itertools import groupby
from typing import Any

from hpdparse.hpd.labels import (
    FIGURE_CAPTION_LABELS,
    PAGE_FURNITURE,
    ROLE_CAPTION,
    ROLE_CODE,
    ROLE_FIGURE,
    ROLE_FORMULA,
    ROLE_FORMULA_NUMBER,
    ROLE_HEADING,
    ROLE_LIST,
    ROLE_TABLE,
    ROLE_TEXT,
    ROLE_TITLE,
    figure_kind,
)
from hpdparse.hpd.stream import FLAG_REPETITION, FLAG_TRUNCATED, Block, ParsedPage
from hpdparse.markdown.formulas import clean_latex, split_display, wrap_arithmetic
from hpdparse.markdown.lists import BULLETED_ITEM, inside, is_ordered, split_items
from hpdparse.markdown.tables import parse_table, to_html
from hpdparse.markdown.text import is_sentinel, join_lines
from hpdparse.markdown.units import Kind, Unit
from hpdparse.store.raw_pages import RawPage

FLAG_SENTINEL = "sentinel"  # a "no text here" sentence: dropped
FLAG_TABLE_CLOSED = "table_closed"  # </table> was missing
FLAG_FORMULA_CLOSED = "formula_closed"  # the closing \] was missing
FLAG_ARITHMETIC = "arithmetic"  # pure arithmetic text rendered as math

_TAG_NUMBER = re.compile(r"^[(（\[]?\s*([^()（）\[\]]{1,20}?)\s*[)）\]]?$")
_FENCE = re.compile(r"^```([A-Za-z0-9_+#.-]{0,30})[^\n]*\n(.*?)\n?```\s*$", re.S)


class PageBuilder:
    """Builds the units of one page. `image_numbers` counts crops per kind on this page."""

    def __init__(self, page: RawPage, parsed: ParsedPage, images: bool, dollar: bool) -> None:
        self.page = page
        self.parsed = parsed
        self.images = images
        self.dollar = dollar
        self.units: list[Unit] = []
        self._image_numbers: dict[str, int] = {}

    def build(self) -> None:
        blocks = self.parsed.blocks
        for block in blocks:
            if block.content is not None and is_sentinel(block.content):
                self._flag(block, FLAG_SENTINEL)
                block.content = None
        captions = self._pair_captions(blocks)
        list_items = self._claim_list_items(blocks)
        claimed = set(captions.values()) | {i for items in list_items.values() for i in items}
        tags = self._pair_formula_numbers(blocks)
        claimed |= set(tags.values())
        claimed |= self._figure_containers(blocks)
        bullet_runs = self._bulleted_runs(blocks, claimed | set(list_items))
        claimed |= {i for run in bullet_runs.values() for i in run[1:]}

        for block in blocks:
            i = block.index
            if i in claimed:
                continue
            if i in bullet_runs:
                texts = [join_lines(blocks[j].content or "") for j in bullet_runs[i]]
                self._add(Kind.LIST, block, items=texts, role=ROLE_LIST, item_blocks=bullet_runs[i])
            elif block.role == ROLE_LIST:
                self._list(block, [blocks[j] for j in list_items.get(i, [])])
            elif block.role == ROLE_FIGURE:
                caption = blocks[captions[i]] if i in captions else None
                self._figure(block, caption)
            elif block.role == ROLE_TABLE:
                self._table(block)
            elif block.role == ROLE_FORMULA:
                tag = blocks[tags[i]] if i in tags else None
                self._formula(block, tag)
            elif block.content is None:
                continue
            elif block.role in PAGE_FURNITURE:
                self._add(Kind.FURNITURE, block, text=join_lines(block.content))
            elif block.role in (ROLE_TITLE, ROLE_HEADING):
                text = join_lines(block.content)
                if text:
                    self._add(
                        Kind.HEADING, block, text=text, level=0 if block.role == ROLE_TITLE else 1
                    )
            elif block.role == ROLE_CODE:
                language, code = _unfence(block.content)
                self._add(Kind.CODE, block, text=code, language=language)
            else:
                self._paragraph(block)

    # --- pairing -------------------------------------------------------------------------------

    def _pair_captions(self, blocks: list[Block]) -> dict[int, int]:
        """figure index -> caption index: the caption right after the figure, else right before."""
        pairs: dict[int, int] = {}
        used: set[int] = set()
        for block in blocks:
            if block.role != ROLE_FIGURE:
                continue
            for j in (block.index + 1, block.index - 1):
                if 0 <= j < len(blocks) and j not in used and _is_figure_caption(blocks[j]):
                    pairs[block.index] = j
                    used.add(j)
                    break
        return pairs

    def _claim_list_items(self, blocks: list[Block]) -> dict[int, list[int]]:
        """list container index -> the text blocks right after it whose boxes lie inside it."""
        claims: dict[int, list[int]] = {}
        for block in blocks:
            if block.role != ROLE_LIST or block.content:
                continue
            items = []
            for follower in blocks[block.index + 1 :]:
                if follower.role not in (ROLE_TEXT, "reference") or not follower.content:
                    break
                if not inside(follower.bbox, block.bbox):
                    break
                items.append(follower.index)
            claims[block.index] = items
        return claims

    def _bulleted_runs(self, blocks: list[Block], taken: set[int]) -> dict[int, list[int]]:
        """Consecutive text blocks that each start with a bullet outside any list container:
        first index -> the run's indices; they render as one Markdown list."""

        def bulleted(block: Block) -> bool:
            return (
                block.role == ROLE_TEXT
                and block.index not in taken
                and BULLETED_ITEM.match(block.content or "") is not None
            )

        runs = [[b.index for b in run] for is_run, run in groupby(blocks, bulleted) if is_run]
        return {run[0]: run for run in runs}

    def _figure_containers(self, blocks: list[Block]) -> set[int]:
        """Figure blocks that wrap the figure right after them (`image_block` around `image`):
        only the inner one is cropped."""
        containers = set()
        for block in blocks[:-1]:
            inner = blocks[block.index + 1]
            if (
                block.role == ROLE_FIGURE == inner.role
                and not block.content
                and inner.bbox != block.bbox
                and inside(inner.bbox, block.bbox)
            ):
                containers.add(block.index)
                block.container_of = inner.index
        return containers

    def _pair_formula_numbers(self, blocks: list[Block]) -> dict[int, int]:
        pairs: dict[int, int] = {}
        for block in blocks:
            if block.role != ROLE_FORMULA or block.index + 1 >= len(blocks):
                continue
            nxt = blocks[block.index + 1]
            if nxt.role == ROLE_FORMULA_NUMBER and nxt.content and _TAG_NUMBER.match(nxt.content):
                pairs[block.index] = nxt.index
        return pairs

    # --- one builder per role ------------------------------------------------------------------

    def _paragraph(self, block: Block) -> None:
        content = block.content or ""
        if block.role == ROLE_TEXT:
            wrapped = wrap_arithmetic(content)
            if wrapped is not None:
                self._flag(block, FLAG_ARITHMETIC)
                content = wrapped
        text = join_lines(content)
        if text:
            self._add(Kind.PARAGRAPH, block, text=text)

    def _list(self, block: Block, items: list[Block]) -> None:
        if block.content:
            pairs = [(text, block.index) for text in split_items(block.content)]
        else:
            pairs = [(join_lines(item.content or ""), item.index) for item in items]
            for item in items:
                item.in_list = block.index
            block.items = [item.index for item in items]
        pairs = [(t, i) for t, i in pairs if t and not is_sentinel(t)]
        if pairs:
            texts = [t for t, _ in pairs]
            item_blocks = [i for _, i in pairs]
            self._add(
                Kind.LIST, block, items=texts, ordered=is_ordered(texts), item_blocks=item_blocks
            )

    def _figure(self, block: Block, caption: Block | None) -> None:
        caption_text = join_lines(caption.content or "") if caption is not None else ""
        image = None
        if self.images and block.bbox_px is not None:
            kind = figure_kind(block.label)
            number = self._image_numbers.get(kind, 0) + 1
            self._image_numbers[kind] = number
            image = f"images/page-{self.page.number:04d}-{kind}-{number:02d}.png"
            block.image = image
        if caption is not None:
            block.caption = caption.index
            caption.caption_of = block.index
        if image is not None or caption_text:
            self._add(Kind.FIGURE, block, text=caption_text, image=image)

    def _table(self, block: Block) -> None:
        if not block.content:
            return
        table = parse_table(block.content)
        if not table.rows:
            self._paragraph(block)
            return
        if table.closed_by_us:
            self._flag(block, FLAG_TABLE_CLOSED)
        # The model's HTML is untrusted: the block's text is only the sanitised table.
        block.html = to_html(table, self.dollar)
        for text in (table.before, table.caption):
            if text:
                self._add(Kind.PARAGRAPH, block, text=join_lines(text), role=ROLE_CAPTION)
        self._add(Kind.TABLE, block, table=table)
        if table.after:
            self._add(Kind.PARAGRAPH, block, text=join_lines(table.after), role=ROLE_CAPTION)

    def _formula(self, block: Block, number: Block | None) -> None:
        if not block.content:
            return
        formulas, closed = split_display(block.content)
        if closed:
            self._flag(block, FLAG_FORMULA_CLOSED)
        cleaned = []
        tag = None
        for latex in formulas:
            text, found = clean_latex(latex, display=True)
            if text:
                cleaned.append(text)
                tag = found or tag
        if number is not None and number.content:
            match = _TAG_NUMBER.match(number.content.strip())
            tag = match.group(1).strip() if match else tag
            block.number = number.index
        if not cleaned:
            return
        block.latex = "\n\n".join(cleaned)
        block.tag = tag or None
        self._add(Kind.FORMULA, block, formulas=cleaned, tag=tag)

    # --- helpers -------------------------------------------------------------------------------

    def _add(self, kind: str, block: Block, **fields: Any) -> None:
        role = fields.pop("role", block.role)
        self.units.append(Unit(kind, self.page.number, block.index, role=role, **fields))

    def _flag(self, block: Block, flag: str) -> None:
        if flag not in block.flags:
            block.flags.append(flag)

    def notes(self) -> list[str]:
        """Comments for the end of the page: truncated output, repetition loops cut."""
        notes = []
        if FLAG_TRUNCATED in self.parsed.flags:
            notes.append(f"page {self.page.number}: output truncated at the token limit")
        if any(FLAG_REPETITION in b.flags for b in self.parsed.blocks):
            notes.append(f"page {self.page.number}: a repetition loop was cut")
        return notes


def _is_figure_caption(block: Block) -> bool:
    return (
        block.label in FIGURE_CAPTION_LABELS
        and block.role == ROLE_CAPTION
        and bool(block.content)
        and not is_sentinel(block.content or "")
    )


def _unfence(content: str) -> tuple[str, str]:
    """Code the model fenced itself: (language, code); else ("", content)."""
    match = _FENCE.match(content.strip())
    if match:
        return match.group(1), match.group(2)
    return "", content.strip("\n")
