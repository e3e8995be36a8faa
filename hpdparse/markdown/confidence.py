"""The confidence of a rendered page's blocks and of the page (hpd/confidence.py computes them
from the raw page's token log-probabilities; this module matches them to the parsed blocks and
writes them into the document JSON)."""

from __future__ import annotations

from typing import Any

from hpdparse.hpd.confidence import BlockScore, page_confidence, score_segment, segment_of_blocks
from hpdparse.hpd.stream import FLAG_NO_HEADER, FLAG_PARSE_ERROR, ParsedPage
from hpdparse.store.raw_pages import RawPage


def block_scores(page: RawPage, parsed: ParsedPage) -> list[BlockScore | None]:
    """The score of each of `parsed`'s blocks; all None when the page has no log-probabilities
    (saved before they were recorded) or they do not match its text."""
    none: list[BlockScore | None] = [None] * len(parsed.blocks)
    logprobs = page.result.logprobs
    if logprobs is None or FLAG_PARSE_ERROR in parsed.flags:
        return none
    blocks = parsed.blocks
    first_free = bool(blocks) and FLAG_NO_HEADER in blocks[0].flags
    segments = segment_of_blocks(page.text, logprobs, first_free)
    if not segments:
        return none
    scores = [score_segment(logprobs.segments[s]) for s in segments]
    return (scores + none)[: len(blocks)]


def scored_page(page: RawPage, parsed: ParsedPage) -> tuple[list[BlockScore | None], float | None]:
    """The blocks' scores and the page's confidence (None when not scored)."""
    scores = block_scores(page, parsed)
    return scores, page_confidence(scores)


def add_to_blocks(blocks_json: list[dict[str, Any]], scores: list[BlockScore | None]) -> None:
    """Give every block of the JSON its `confidence` and `confidence_figures` (null when the
    block was not scored)."""
    for block in blocks_json:
        index = block["index"]
        score = scores[index] if 0 <= index < len(scores) else None
        figures = score.to_json() if score is not None else None
        block["confidence"] = figures.pop("confidence") if figures else None
        block["confidence_figures"] = figures
