"""Block and page confidence from the model's own token log-probabilities.

A block is scored on its content tokens (what follows ``<CHILD>``); a block without content (an
image, a list container) on its header tokens (``<BLOCK>label [box]``). Its figures are the
token count, the mean and the minimum token log-probability and the mean of its `WEAKEST`
lowest; its confidence is exp(that weakest-tokens mean): the geometric mean probability of the
tokens the model was least sure of. One unsure token is what makes a block wrong, so the few
weakest tokens tell more than the mean over a long block (tests/tinymodel/calibration.py and
benchmarks/bench_confidence.py measure it).

A page's confidence is its weakest content block's (blocks without content count only on a
page that has no content block): one wrong block is enough to send a page to a person.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hpdparse.hpd.logprobs import PageLogprobs, Segment
from hpdparse.hpd.protocol import BLOCK

WEAKEST = 3  # the tokens a block's confidence is taken from
DEFAULT_FLAG_BELOW = 0.5  # --flag-below: chosen from benchmarks/bench_confidence.py


@dataclass(frozen=True)
class BlockScore:
    """The confidence of one block and the figures it comes from."""

    scored: str  # "content" or "header": which tokens were scored
    tokens: int
    mean_logprob: float
    min_logprob: float
    weakest_logprob: float  # the mean of the WEAKEST lowest
    confidence: float  # 0-1


def score_segment(segment: Segment) -> BlockScore | None:
    """The score of one block's tokens; None when it has none."""
    scored, values = ("content", segment.content) if segment.content else ("header", segment.header)
    if not values:
        return None
    lowest = sorted(values)[:WEAKEST]
    weakest = sum(lowest) / len(lowest)
    return BlockScore(
        scored=scored,
        tokens=len(values),
        mean_logprob=sum(values) / len(values),
        min_logprob=lowest[0],
        weakest_logprob=weakest,
        confidence=math.exp(weakest),
    )


def segment_of_blocks(raw: str, logprobs: PageLogprobs, first_has_no_header: bool) -> list[int]:
    """For each block hpd.stream.parse_page made of `raw`, the index of its segment; [] when the
    log-probabilities do not cut the text the way the parser did (then nothing is scored).

    The parser makes one block of each ``<BLOCK>`` part, in order, after a block for the text
    before the first ``<BLOCK>`` when there is any (`first_has_no_header`); it may cut blocks
    from the end (repeated blocks), never from the middle."""
    parts = raw.count(BLOCK) + 1
    if parts != len(logprobs.segments):
        return []
    first = 0 if first_has_no_header else 1
    return list(range(first, parts))


def page_confidence(scores: Sequence[BlockScore | None]) -> float | None:
    """The weakest content block's confidence (a page without content: its weakest block's);
    None when no block was scored."""
    content = [s.confidence for s in scores if s is not None and s.scored == "content"]
    if content:
        return min(content)
    header = [s.confidence for s in scores if s is not None]
    return min(header) if header else None
