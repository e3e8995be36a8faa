"""Raw HPD page stream -> ordered blocks. Never raises, whatever the model wrote.

Grammar (hpd-model.md): `<BLOCK>label [x1, y1, x2, y2]<CHILD>content<BLOCK>...`, boxes on a 0-1000
grid. Blocks without content carry no `<CHILD>`. Everything malformed is repaired or dropped
with a flag on the block or the page, and the text is always kept.

`Block` and `ParsedPage` are the block and page records every later stage fills and reads (the
renderer, the exports, the overlay, the review pages); JSON only where <stem>.json is written and
read back (markdown/json_export.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from hpdparse.hpd.confidence import BlockScore
from hpdparse.hpd.labels import LABEL_ROLES, normalize_label, role_of
from hpdparse.hpd.protocol import BLOCK, CHILD, FINISH_LENGTH, FORK

GRID = 1000
Box = tuple[int, int, int, int]  # x1, y1, x2, y2

# Block flags
FLAG_NO_HEADER = "no_header"  # content before the first <BLOCK>
FLAG_NO_LABEL = "no_label"
FLAG_BAD_BOX = "bad_box"  # box unreadable or empty: dropped, text kept
FLAG_BOX_CLAMPED = "box_clamped"  # coordinates outside 0-1000 clamped
FLAG_BOX_SWAPPED = "box_swapped"  # x1 > x2 or y1 > y2: swapped
FLAG_NO_CHILD_MARKER = "no_child_marker"  # content after a header without <CHILD>
FLAG_LEAKED_TOKENS = "leaked_tokens"  # control tokens inside content: dropped, text kept
FLAG_REPETITION = "repetition"  # a repetition loop was cut
FLAG_TRUNCATED = "truncated"  # the page hit the token limit (on the page and its last block)
# Page-only flags
FLAG_EMPTY = "empty"  # no blocks at all
FLAG_REPEATED_BLOCKS = "repeated_blocks"  # identical blocks repeated to the end: cut
FLAG_PARSE_ERROR = "parse_error"  # a bug in this module; the page was kept as one text block

# Special tokens of the chat format (`<|im_end|>`, `<|endoftext|>`...) and the image token.
_SPECIAL = re.compile(r"<\|[A-Za-z_]{1,20}\|>|<IMG_CONTEXT>")
_HEADER = re.compile(r"[ \t]*([A-Za-z_][A-Za-z0-9_\-]{0,63})?[ \t]*(\[[-+0-9.,eE \t]*\]?)?")
_NUMBER = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
_SURROGATE = re.compile("[\ud800-\udfff]")
_PLAIN_BOX = re.compile(r"\[(\d{1,4}), ?(\d{1,4}), ?(\d{1,4}), ?(\d{1,4})\]")
_CONTROL = (CHILD, FORK)
# A header that leaked into content: `label [x1, y1, x2, y2]<CHILD>` (label optional).
_LEAKED_HEADER = re.compile(
    r"(?:\b([A-Za-z_][A-Za-z0-9_\-]{0,63})[ \t]*)?\[[-+0-9.,eE \t]*\][ \t]*<(?:CHILD|FORK)>"
)


class BlockRef(NamedTuple):
    """A block of a document: its page number and its index there (a tuple, hashed in C: it keys
    the exports' lookups)."""

    page: int
    block: int


@dataclass
class TextCheck:
    """A block checked against the PDF's own text inside its box (`--text-layer verify`)."""

    found: bool  # the PDF has text in the box
    trusted: bool  # that text stands for the block's content
    reason: str | None  # why it is not trusted
    similarity: float | None  # 0-1, 4 places; None when no text was found
    agrees: bool | None  # with a trusted text layer; None when not trusted


@dataclass
class TextLayerCounts:
    """A page's text layer check: blocks checked, with a trusted text layer, disagreeing."""

    checked: int = 0
    trusted: int = 0
    disagree: int = 0
    disagree_share: float | None = None  # of the trusted ones; None when none was


@dataclass
class Block:
    """One block of a page: what the parser read, then what the renderer (hpdparse.markdown)
    adds. <stem>.json writes it (markdown/json_export.py); every later stage reads this record."""

    index: int  # reading order on the page, 0-based
    label: str  # normalized label as the model wrote it ("" when missing)
    role: str  # see hpdparse.hpd.labels
    bbox: Box | None  # 0-1000 grid, x1 <= x2, y1 <= y2
    content: str | None  # None: no <CHILD> (image, list container...) or a "no text" sentence
    flags: list[str] = field(default_factory=list)
    bbox_px: Box | None = None  # the box in pixels of the page image
    # What the renderer tied to it (indices of blocks on the same page), in <stem>.json's order;
    # None: not tied
    container_of: int | None = None  # a figure around the figure block `container_of`
    in_list: int | None = None  # an item of this list container block
    items: list[int] | None = None  # a list container: its item blocks
    image: str | None = None  # a figure's crop: images/page-0003-figure-01.png
    caption: int | None = None  # a figure's caption block
    caption_of: int | None = None  # the figure this caption belongs to
    html: str | None = None  # a table: its sanitised HTML (the model's is not kept in `text`)
    number: int | None = None  # a formula: its equation-number block
    latex: str | None = None  # a formula: cleaned LaTeX, formulas apart by a blank line
    tag: str | None = None  # a formula: its equation number
    text_check: TextCheck | None = None  # None: not checked
    score: BlockScore | None = None  # None: not scored (no log-probabilities)
    continues: BlockRef | None = None  # merged in the Markdown into this earlier block
    continued_by: list[BlockRef] = field(default_factory=list)  # later blocks merged into it
    level: int | None = None  # a heading's level (0: the document title)

    @property
    def text(self) -> str | None:
        """The block's text as <stem>.json gives it: none for a table (see `html`)."""
        return None if self.html is not None else self.content

    @property
    def confidence(self) -> float | None:
        return round(self.score.confidence, 4) if self.score is not None else None


@dataclass
class ParsedPage:
    """A page's blocks and flags as `parse_page` reads them; the renderer adds the page's facts
    from its record, its confidence and text layer check: what <stem>.json says of the page, field
    by field in the JSON's order."""

    number: int = 0  # 1-based
    label: str | None = None  # the PDF's page label
    status: str = "ok"  # ok | failed
    error: str | None = None
    finish_reason: str | None = None
    width_px: int = 0  # the image the model saw (0 x 0 for a failed page)
    height_px: int = 0
    width_pt: float | None = None  # None for image inputs
    height_pt: float | None = None
    dpi: int | None = None
    prompt_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    stats: dict[str, int | float] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)
    confidence: float | None = None  # 4 places; None when not scored
    text_layer: TextLayerCounts | None = None  # None: not checked
    blocks: list[Block] = field(default_factory=list)


def parse_page(raw: str, finish_reason: str | None = None) -> ParsedPage:
    """Parse one page's raw stream. Never raises."""
    try:
        text = raw if isinstance(raw, str) else ("" if raw is None else str(raw))
        return _parse(text, finish_reason)
    except Exception:
        text = valid_text(str(raw)).strip()
        blocks = [Block(0, "", "text", None, text, [FLAG_NO_HEADER])] if text else []
        flags = [FLAG_PARSE_ERROR] + ([] if blocks else [FLAG_EMPTY])
        return ParsedPage(flags=flags, blocks=blocks)


def valid_text(text: str) -> str:
    """`text` as valid Unicode: lone surrogates (not encodable as UTF-8) become U+FFFD."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _parse(raw: str, finish_reason: str | None) -> ParsedPage:
    truncated = finish_reason == FINISH_LENGTH
    raw = valid_text(raw)
    if "\r" in raw:  # a lone CR ends a Markdown line: normalise line endings first
        raw = raw.replace("\r\n", "\n").replace("\r", "\n")
    text = _SPECIAL.sub("", raw) if "<" in raw else raw
    parts = text.split(BLOCK)
    blocks: list[Block] = []

    preamble = parts[0]
    if preamble.strip():
        flags = [FLAG_NO_HEADER]
        content = _clean_content(preamble, flags)
        if content:
            blocks.append(Block(0, "", role_of(""), None, content, flags))

    for part in parts[1:]:
        blocks.append(_parse_block(part, len(blocks)))

    page_flags: list[str] = []
    for block in blocks:
        if block.content:
            cut = cut_repetition(block.content, strict=not truncated)
            if cut is not None:
                block.content = cut
                block.flags.append(FLAG_REPETITION)

    if _cut_repeated_blocks(blocks, strict=not truncated):
        page_flags.append(FLAG_REPEATED_BLOCKS)
    if truncated:
        page_flags.append(FLAG_TRUNCATED)
        if blocks:
            blocks[-1].flags.append(FLAG_TRUNCATED)
    if not blocks:
        page_flags.append(FLAG_EMPTY)
    for flag in (FLAG_REPETITION, FLAG_LEAKED_TOKENS, FLAG_BAD_BOX):
        if any(flag in b.flags for b in blocks):
            page_flags.append(flag)
    return ParsedPage(flags=page_flags, blocks=blocks)


def _parse_block(part: str, index: int) -> Block:
    flags: list[str] = []
    match = _HEADER.match(part)
    label_text, box_text = match.group(1), match.group(2)
    rest = part[match.end() :]
    stripped = rest.lstrip()
    marker = next((t for t in _CONTROL if stripped.startswith(t)), None)

    if label_text and box_text is None and marker is None and label_text.lower() not in LABEL_ROLES:
        # No box, no <CHILD>, not a label we know: this is content without a header.
        label_text, rest = None, part
        stripped = rest.lstrip()

    label = normalize_label(label_text) if label_text else ""
    if not label:
        flags.append(FLAG_NO_LABEL)
    bbox = parse_box(box_text, flags) if box_text is not None else None

    if marker is not None:
        content: str | None = _clean_content(stripped[len(marker) :], flags)
    elif stripped:
        flags.append(FLAG_NO_CHILD_MARKER)
        content = _clean_content(stripped, flags)
    else:
        content = None
    return Block(index, label, role_of(label), bbox, content, flags)


def parse_header(text: str) -> tuple[str, Box | None]:
    """A block header's text (``label [x1, y1, x2, y2]``, what follows ``<BLOCK>``) -> its
    normalised label ("" when none) and box (None when missing or unusable)."""
    match = _HEADER.match(text)
    label = normalize_label(match.group(1)) if match.group(1) else ""
    box = parse_box(match.group(2), []) if match.group(2) is not None else None
    return label, box


def parse_box(text: str, flags: list[str]) -> Box | None:
    """`[x1, y1, x2, y2]` -> ints on the 0-1000 grid, clamped and ordered; None when unusable."""
    plain = _PLAIN_BOX.fullmatch(text)
    if plain:
        x1, y1, x2, y2 = (int(v) for v in plain.groups())
        if x1 < x2 <= GRID and y1 < y2 <= GRID:
            return (x1, y1, x2, y2)
    numbers = _NUMBER.findall(text)
    if len(numbers) != 4:
        flags.append(FLAG_BAD_BOX)
        return None
    values = []
    for number in numbers:
        value = float(number)
        if not math.isfinite(value):
            flags.append(FLAG_BAD_BOX)
            return None
        values.append(round(value))
    clamped = [min(max(v, 0), GRID) for v in values]
    if clamped != values:
        flags.append(FLAG_BOX_CLAMPED)
    x1, y1, x2, y2 = clamped
    if x1 > x2 or y1 > y2:
        flags.append(FLAG_BOX_SWAPPED)
        x1, x2 = min(x1, x2), max(x1, x2)
        y1, y2 = min(y1, y2), max(y1, y2)
    if x1 == x2 or y1 == y2:
        flags.append(FLAG_BAD_BOX)
        return None
    return (x1, y1, x2, y2)


def _clean_content(content: str, flags: list[str]) -> str:
    # Leaked control tokens: we keep the text and drop the tag (and a header `label [box]` right
    # before it). Cutting the block at the tag would lose real text whenever the model merely
    # echoed a token; dropping only the tag loses nothing but the markup.
    if CHILD in content or FORK in content:
        flags.append(FLAG_LEAKED_TOKENS)
        content = _LEAKED_HEADER.sub(_drop_leaked_header, content)
        content = content.replace(CHILD, "").replace(FORK, "")
    return content.strip()


def _drop_leaked_header(match: re.Match[str]) -> str:
    label = match.group(1)
    if label and normalize_label(label) not in LABEL_ROLES:
        return label + " "  # an ordinary word before a stray box: keep the word
    return " "


# --- repetition loops ------------------------------------------------------------------------

_PROBE = 12
_MAX_UNIT = 2000
_MAX_CANDIDATES = 12


def cut_repetition(text: str, strict: bool = True) -> str | None:
    """If `text` ends in a loop (one unit repeated to the end), return it with the loop cut to a
    single unit; else None. `strict` (page not truncated) asks for a longer loop."""
    min_repeats, min_chars = (10, 200) if strict else (4, 80)
    n = len(text)
    if n < min_chars:
        return None
    probe = text[-_PROBE:]
    # rfind(probe, 0, hi) gives the nearest earlier occurrence; its distance is a candidate period.
    hi = n - 1
    for _ in range(_MAX_CANDIDATES):
        pos = text.rfind(probe, 0, hi)
        if pos < 0:
            return None
        period = n - len(probe) - pos
        if period > _MAX_UNIT:
            return None
        start = _loop_start(text, period)
        if n - start >= min_chars and n - start >= min_repeats * period:
            return text[: start + period].rstrip()
        if n - start >= len(probe) + period:
            # The probe lies in a short periodic run inside a longer unit (a rule of dashes in
            # a table row): every earlier spot in that run would match too. Widen the probe to
            # the whole run and what precedes it, and search again from the end.
            if n - start + _PROBE > min(n - 1, _MAX_UNIT):
                return None
            probe = text[start - _PROBE :]
            hi = n - 1
        else:
            hi = pos + len(probe) - 1
    return None


def _loop_start(text: Sequence[Hashable], period: int) -> int:
    """Earliest index from which `text` (a string, or a list of blocks' keys) is periodic with
    `period` up to its end."""
    start = len(text) - period
    # Galloping over whole units (slice compares run in C), then character by character.
    k = 1
    while k >= 1:
        step = k * period
        if (
            start - step >= 0
            and text[start - step : start] == text[start - step + period : start + period]
        ):
            start -= step
            k *= 2
        else:
            k //= 2
    while start > 0 and text[start - 1] == text[start - 1 + period]:
        start -= 1
    return start


_MAX_BLOCK_PERIOD = 4


def _cut_repeated_blocks(blocks: list[Block], strict: bool) -> bool:
    """A group of 1-4 identical blocks repeated to the end of the page: keep one group, flag its
    last block."""
    min_repeats = 5 if strict else 3
    # A page that stopped by itself rarely loops: there, blocks repeat only if their boxes do too.
    keys = [
        (b.label, b.content, b.bbox) if strict else (b.label, b.content or b.bbox) for b in blocks
    ]
    n = len(keys)
    for period in range(1, _MAX_BLOCK_PERIOD + 1):
        if n < min_repeats * period:
            break
        start = _loop_start(keys, period)
        if (n - start) // period >= min_repeats:
            del blocks[start + period :]
            blocks[-1].flags.append(FLAG_REPETITION)
            return True
    return False


def bbox_to_pixels(bbox: Box | None, width: int, height: int) -> Box | None:
    """0-1000 grid -> pixels of the page image (outward rounding, clamped); None if empty."""
    if bbox is None or width <= 0 or height <= 0:
        return None
    x1, y1, x2, y2 = bbox
    px1 = min(max(math.floor(x1 * width / GRID), 0), width)
    py1 = min(max(math.floor(y1 * height / GRID), 0), height)
    px2 = min(max(math.ceil(x2 * width / GRID), 0), width)
    py2 = min(max(math.ceil(y2 * height / GRID), 0), height)
    if px2 <= px1 or py2 <= py1:
        return None
    return (px1, py1, px2, py2)
