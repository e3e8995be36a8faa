"""Section heading levels from their numbering, consistent across the whole document.

Each numbering style has a place in a canonical nesting order: 第一章 > 第一节 > Roman `II.` >
`一、` > `（一）` > `1` > `1.2` > `1.2.3` > `(1)` > `a)`. A document's levels are the ranks of the
styles it actually uses, so `一、` / `（一）` get `##` / `###` just like `1` / `1.1`. Letters: `A.`
sits under Roman numerals (IEEE style) and otherwise beside `1` (appendices); `A.1` is one level
deeper. Unnumbered headings get the top section level.
"""

from __future__ import annotations

import re

_CN_NUM = "一二三四五六七八九十百零〇"
_ROMAN = r"(?=[IVXLC])C{0,3}(?:XC|XL|L?X{0,3})(?:IX|IV|V?I{0,3})"

# Each style with its place in the nesting order (arabic numbering: 5 + its depth).
_STYLES: list[tuple[re.Pattern[str], str, float]] = [
    (re.compile(rf"^第[{_CN_NUM}\d]+[章篇部]"), "cn_chapter", 0.0),
    (re.compile(rf"^第[{_CN_NUM}\d]+节"), "cn_section", 1.0),
    (re.compile(rf"^{_ROMAN}\.\s*\S"), "roman", 2.0),
    (re.compile(rf"^[{_CN_NUM}]+[、.．]"), "cn_num", 3.0),
    (re.compile(rf"^[（(][{_CN_NUM}]+[）)]"), "cn_paren", 4.0),
    (re.compile(r"^[A-Z](?:\.\d{1,2})+\.?(?:\s|$)"), "letter_dotted", 5.0),
    (re.compile(r"^[A-Z][.．]\s*\S"), "letter", 6.0),  # 2.5 under Roman numerals
    (re.compile(r"^\d{1,2}(?:\.\d{1,2})*[.．、]?(?:\s|(?=[^\d\s.．、]))"), "arabic", 5.0),
    (re.compile(r"^[（(]\d{1,2}[）)]|^\d{1,2}[）)]"), "paren_arabic", 20.0),
    (re.compile(r"^[（(]?[a-z][）)]"), "lower_letter", 21.0),
]
_ORDER = {style: order for _, style, order in _STYLES}

MAX_LEVEL = 5  # level 1 is "##", level 5 is "######"


def numbering(text: str) -> tuple[str, int] | None:
    """The numbering style of a heading and its depth (`1.2.3` -> ("arabic", 3)), or None."""
    stripped = text.lstrip()
    for pattern, style, _ in _STYLES:
        match = pattern.match(stripped)
        if match:
            if style in ("arabic", "letter_dotted"):
                number = re.match(r"[A-Z\d]+(?:\.\d+)*", stripped)
                depth = number.group(0).count(".") + 1 if number else 1
                return style, depth
            return style, 1
    return None


def _order(style: str, depth: int, has_roman: bool) -> float:
    if style in ("arabic", "letter_dotted"):
        return _ORDER[style] + depth
    return 2.5 if style == "letter" and has_roman else _ORDER[style]


def assign_levels(headings: list[str]) -> list[int]:
    """Section levels (1 = "##") for the document's headings, in document order."""
    styles = [numbering(h) for h in headings]
    heads = [h.lstrip() for h in headings]
    letters = {h[0] for h, s in zip(heads, styles, strict=True) if s and s[0] == "letter"}
    if letters:
        # `C.` after `A.`/`B.` is a letter, not 100; `I.` is a letter only after `H.`.
        for i, (head, style) in enumerate(zip(heads, styles, strict=True)):
            single = style and style[0] == "roman" and len(head) > 1 and head[1] in ".．"
            if single and (head[0] != "I" or "H" in letters):
                styles[i] = ("letter", 1)
    has_roman = any(s is not None and s[0] == "roman" for s in styles)
    orders = [_order(s[0], s[1], has_roman) if s else None for s in styles]
    ranks = {order: rank for rank, order in enumerate(sorted({o for o in orders if o is not None}))}
    return [1 if o is None else min(ranks[o] + 1, MAX_LEVEL) for o in orders]


def heading_markdown(text: str, level: int) -> str:
    """`## text` for a section level (1 -> "##"); level 0 is the document title "#"."""
    return "#" * (min(max(level, 0), MAX_LEVEL) + 1) + " " + text
