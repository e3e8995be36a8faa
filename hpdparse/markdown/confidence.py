"""The confidence of a rendered page's blocks (hpd/confidence.py computes it and the page's
from the raw page's token log-probabilities; this module matches them to the parsed blocks)."""

from __future__ import annotations

from hpdparse.hpd.confidence import BlockScore, score_segment, segment_of_blocks
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
