"""`--text-layer verify`: each text-like block of a rendered page checked against the PDF's own
text inside its box (sources/text_layer.py), recorded in the document JSON; a block that
disagrees with a trusted text layer has its confidence lowered to its similarity, so the page
can be flagged (`--flag-below`). The Markdown is never changed.
"""

from __future__ import annotations

import dataclasses

from hpdparse.hpd.confidence import BlockScore
from hpdparse.hpd.stream import Block, TextCheck, TextLayerCounts
from hpdparse.sources.text_layer import TEXT_ROLES, PageText, box_text, similarity

AGREE = 0.9  # a block agrees with its trusted text layer at this similarity or above


def verify_page(
    blocks: list[Block], text: PageText, scores: list[BlockScore | None]
) -> TextLayerCounts:
    """Give each text-like block with a box its `text_check`, lower the score of each block that
    disagrees (in `scores`, by block index), and return the page's counts."""
    counts = TextLayerCounts()
    for block in blocks:
        if block.role not in TEXT_ROLES or not block.bbox:
            continue
        found = box_text(text, block.bbox)
        agreement = similarity(block.text or "", found.text) if found.text else None
        disagrees = found.trusted and agreement is not None and agreement < AGREE
        block.text_check = TextCheck(
            found=bool(found.text),
            trusted=found.trusted,
            reason=found.reason,
            similarity=round(agreement, 4) if agreement is not None else None,
            agrees=(not disagrees) if found.trusted else None,
        )
        counts.checked += 1
        counts.trusted += found.trusted
        counts.disagree += disagrees
        score = scores[block.index] if 0 <= block.index < len(scores) else None
        if disagrees and score is not None and agreement is not None:
            lowered = min(score.confidence, agreement)
            scores[block.index] = dataclasses.replace(score, confidence=lowered)
    if counts.trusted:
        counts.disagree_share = round(counts.disagree / counts.trusted, 4)
    return counts
