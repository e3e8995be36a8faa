"""`--text-layer verify`: each text-like block of a rendered page checked against the PDF's own
text inside its box (sources/text_layer.py), recorded in the document JSON; a block that
disagrees with a trusted text layer has its confidence lowered to its similarity, so the page
can be flagged (`--flag-below`). The Markdown is never changed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hpdparse.hpd.confidence import BlockScore
from hpdparse.sources.text_layer import TEXT_ROLES, PageText, box_text, similarity

AGREE = 0.9  # a block agrees with its trusted text layer at this similarity or above


def verify_page(
    blocks_json: list[dict[str, Any]], text: PageText, scores: list[BlockScore | None]
) -> dict[str, int]:
    """Give each text-like block with a box its ``text_layer`` record, lower the score of each
    block that disagrees (in `scores`, by block index), and return the page's counts: blocks
    checked, with a trusted text layer, disagreeing."""
    counts = {"checked": 0, "trusted": 0, "disagree": 0}
    for block in blocks_json:
        if block.get("role") not in TEXT_ROLES or not block.get("bbox"):
            continue
        found = box_text(text, tuple(block["bbox"]))
        agreement = similarity(block.get("text") or "", found.text) if found.text else None
        disagrees = found.trusted and agreement is not None and agreement < AGREE
        block["text_layer"] = {
            "found": bool(found.text),
            "trusted": found.trusted,
            "reason": found.reason,
            "similarity": round(agreement, 4) if agreement is not None else None,
            "agrees": (not disagrees) if found.trusted else None,
        }
        counts["checked"] += 1
        counts["trusted"] += found.trusted
        counts["disagree"] += disagrees
        index = block["index"]
        score = scores[index] if 0 <= index < len(scores) else None
        if disagrees and score is not None and agreement is not None:
            lowered = min(score.confidence, agreement)
            scores[index] = dataclasses.replace(score, confidence=lowered)
    return counts


def disagree_share(counts: dict[str, int]) -> float | None:
    """The share of blocks with a trusted text layer that disagree with it (None: none had one)."""
    return round(counts["disagree"] / counts["trusted"], 4) if counts["trusted"] else None
