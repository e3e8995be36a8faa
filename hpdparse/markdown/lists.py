"""List items -> a Markdown list (`- ` bullets, or `1. ` when the items carry their own numbers)."""

from __future__ import annotations

import re

from hpdparse.hpd.stream import Box
from hpdparse.markdown.text import escape_block_start, render_inline

BULLET = re.compile(r"^[•·▪▫◦●○■□◆◇➢➤►▶▸‣⁃✓✔✗✘\-*–—]\s*")
# A text block that is a bulleted item on its own (PaddleOCR-style output has no list container).
BULLETED_ITEM = re.compile(r"^(?:[•·▪▫◦●○■□◆◇➢➤►▶▸‣⁃✓✔✗✘]\s*|[-*–]\s+)\S")
_NUMBERED = re.compile(r"^(\d{1,4})[.)．]\s*")
_ORDERED_LOOKALIKE = re.compile(r"^(\d{1,9})([.)])(\s|$)")
CONTAINED_SLACK = 8  # grid units an item may stick out of its list box


def inside(inner: Box | None, outer: Box | None) -> bool:
    """`inner` lies in `outer`, give or take CONTAINED_SLACK."""
    if inner is None or outer is None:
        return False
    s = CONTAINED_SLACK
    return all(i >= o - s for i, o in zip(inner[:2], outer[:2], strict=True)) and all(
        i <= o + s for i, o in zip(inner[2:], outer[2:], strict=True)
    )


def split_items(content: str) -> list[str]:
    """A list block that carries its own text: one item per line."""
    return [line.strip() for line in content.splitlines() if line.strip()]


def is_ordered(items: list[str]) -> bool:
    return bool(items) and all(_NUMBERED.match(item) for item in items)


def item_parts(item: str, ordered: bool) -> tuple[str, str]:
    """(marker, text) of a list item as the Markdown writes it: "3." and the text after its number
    in an ordered list, "-" and the text without its bullet otherwise."""
    if ordered:
        match = _NUMBERED.match(item)
        if match is None:
            return "1.", item
        return f"{int(match.group(1))}.", item[match.end() :]
    return "-", BULLET.sub("", item, count=1)


def render_list(items: list[str], ordered: bool, dollar: bool) -> str:
    lines = []
    for item in items:
        marker, text = item_parts(item, ordered)
        if ordered:
            lines.append(f"{marker} {escape_block_start(render_inline(text, dollar))}")
        else:
            body = render_inline(text, dollar)
            # "- 1. x" would open a nested ordered list: escape the number's dot.
            body = _ORDERED_LOOKALIKE.sub(r"\1\\\2\3", body, count=1)
            body = "\\" + body if body.startswith("- ") else escape_block_start(body)
            lines.append(f"{marker} {body}")
    return "\n".join(lines)
