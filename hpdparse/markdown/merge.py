"""Cross-page merges: a paragraph cut by a page break, a table continued on the next page."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

from hpdparse.hpd.labels import ROLE_FOOTNOTE, ROLE_TEXT
from hpdparse.hpd.stream import BlockRef
from hpdparse.markdown.tables import merge_tables
from hpdparse.markdown.text import CJK
from hpdparse.markdown.units import BODY_KINDS, Kind, Unit

# A paragraph that ends in one of these ended its sentence.
_TERMINAL = set(".!?。！？:：;；…\"'”’)]）】」』")
_HYPHENATED = re.compile(r"[A-Za-zÀ-ÿ]-$")
_LIST_START = re.compile(r"^(?:[-*•●▪◦]\s|\d{1,3}[.)]\s|\([0-9a-z]{1,3}\)\s)")


class Merge(NamedTuple):
    """A block merged in the Markdown into a block of an earlier page."""

    kind: str  # Kind.PARAGRAPH ("paragraph") or Kind.TABLE ("table")
    first: BlockRef
    second: BlockRef


def continues_paragraph(first: str, second: str) -> bool:
    """`second` (top of the next page) carries on the sentence `first` (bottom of a page) left
    open: `first` ends mid-sentence, and `second` does not look like the start of a new block."""
    a, b = first.rstrip(), second.lstrip()
    if not a or not b or a[-1] in _TERMINAL or _LIST_START.match(b):
        return False
    last, head = a[-1], b[0]
    if head.islower() or last in ",，、-–" or (CJK.match(last) and CJK.match(head)):
        return True
    # "... described by" / "Smith et al.": a lower-case word left hanging.
    return last.isalpha() and last.islower() and not head.isdigit()


def join_paragraphs(first: str, second: str) -> str:
    """Join two halves of a paragraph; a word hyphenated across the break is rejoined."""
    a, b = first.rstrip(), second.lstrip()
    if _HYPHENATED.search(a) and b[:1].islower():
        return a[:-1] + b
    if CJK.match(a[-1:]) and CJK.match(b[:1]):
        return a + b
    return a + " " + b


def merge_across_pages(units: list[Unit], paragraphs: bool, tables: bool) -> list[Merge]:
    """Merge in place (the later unit gets `removed`); returns the merges, in order, so that the
    blocks can be linked."""
    merges: list[Merge] = []
    starts = [i for i in range(1, len(units)) if units[i].page != units[i - 1].page]
    for boundary, end in zip(starts, [*starts[1:], len(units)], strict=False):
        first = _body(units[i] for i in range(boundary - 1, -1, -1))
        second = _body(units[boundary:end])  # the first unit of the page that starts here
        if first is None or second is None or first.page >= second.page:
            continue
        if (
            paragraphs
            and first.kind == Kind.PARAGRAPH == second.kind
            and first.role == ROLE_TEXT == second.role
            and continues_paragraph(first.text, second.text)
        ):
            first.text = join_paragraphs(first.text, second.text)
            merges.append(_merge(first, second))
        elif (
            tables
            and first.kind == Kind.TABLE == second.kind
            and first.table is not None
            and second.table is not None
            and first.table.width > 0
            and first.table.width == second.table.width
            and not second.table.before
        ):
            merge_tables(first.table, second.table)
            merges.append(_merge(first, second))
    return merges


def _merge(first: Unit, second: Unit) -> Merge:
    """`second` merged into `first`: removed, and recorded on `first` with its own text."""
    second.removed = True
    ref = BlockRef(second.page, second.block or 0)
    first.continuations.append((ref, second.text))
    return Merge(first.kind, BlockRef(first.page, first.block or 0), ref)


def _body(units: Iterable[Unit]) -> Unit | None:
    """The first of `units` that is body text, unless a barrier (a failed page) comes first."""
    for unit in units:
        if unit.kind == Kind.BARRIER:
            return None
        if not unit.removed and unit.kind in BODY_KINDS and unit.role != ROLE_FOOTNOTE:
            return unit
    return None
