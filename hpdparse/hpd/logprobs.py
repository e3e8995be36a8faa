"""The log-probabilities of a page's output tokens, cut into the page's blocks, and their compact
encoding in a raw page record.

An engine reports the log-probability of every token it chose (the spliced page: a ``<CHILD>``
carries its ``<FORK>``'s). `PageLogprobs.split` cuts them where the text parser
(hpd/stream.py) cuts the text: segment 0 is what precedes the first ``<BLOCK>`` (content without
a header), and every ``<BLOCK>`` token starts a segment whose header runs up to and including its
first ``<CHILD>`` or ``<FORK>`` (plain mode writes ``<FORK>`` where fork mode splices ``<CHILD>``),
its content after it. A block without ``<CHILD>`` has a header only. The k-th segment is the
text's k-th ``"<BLOCK>"`` part, so blocks are matched to their tokens without a tokenizer.

Encoding (`to_json`): each value as an unsigned 16-bit integer of round(-logprob * 1000),
clamped to 0..65535, little-endian, base64: 2 bytes a token, exact to 0.0005 nats; log-
probabilities below -65.535 read back as -65.535.
"""

from __future__ import annotations

import base64
import math
import sys
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

ENCODING = "u16-millinats-b64"


class LogprobsJson(TypedDict):
    """A page's log-probabilities as raw/page-NNNN.json holds them."""

    encoding: str
    segments: list[list[int]]  # [header length, content length] of each segment
    values: str  # ENCODING of every value, segment after segment


SCALE = 1000.0  # quantisation step: 1/SCALE nats
_MAX = 65535

T = TypeVar("T")


@dataclass(frozen=True)
class Segment:
    """The log-probabilities of one block's tokens: its header, then its content."""

    header: tuple[float, ...]
    content: tuple[float, ...]


@dataclass(frozen=True)
class PageLogprobs:
    """A page's token log-probabilities by text segment (see the module docstring)."""

    segments: tuple[Segment, ...]

    @classmethod
    def split(
        cls,
        tokens: Sequence[T],
        logprobs: Sequence[float],
        is_block: Callable[[T], bool],
        is_marker: Callable[[T], bool],
    ) -> PageLogprobs:
        """Cut a page's tokens (ids, or token texts) and their log-probabilities into segments.
        `is_block` tells a ``<BLOCK>`` token, `is_marker` a ``<CHILD>`` or ``<FORK>``.

        A block's header runs from its ``<BLOCK>`` up to and including its first marker (all of
        it without one), its content on to the next ``<BLOCK>``. Slices, not a Python step per
        token (host time per page)."""
        if len(tokens) != len(logprobs):
            raise ValueError(f"{len(tokens)} tokens but {len(logprobs)} log-probabilities")
        starts = [i for i, token in enumerate(tokens) if is_block(token)]
        values = [float(v) for v in logprobs]
        segments = [Segment((), tuple(values[: starts[0] if starts else len(values)]))]
        for k, start in enumerate(starts):
            end = starts[k + 1] if k + 1 < len(starts) else len(values)
            cut = next((i + 1 for i in range(start + 1, end) if is_marker(tokens[i])), end)
            segments.append(Segment(tuple(values[start:cut]), tuple(values[cut:end])))
        return cls(tuple(segments))

    @classmethod
    def of_ids(
        cls, token_ids: Sequence[int], logprobs: Sequence[float] | None, ids: Any
    ) -> PageLogprobs | None:
        """`split` for token ids, with `ids` the protocol's (hpd.prompt.TokenIds); None when
        there are no log-probabilities."""
        if logprobs is None:
            return None
        block, markers = ids.block, {ids.child, ids.fork}
        return cls.split(token_ids, logprobs, lambda token: token == block, markers.__contains__)

    def to_json(self) -> LogprobsJson:
        """The compact record saved in raw/page-NNNN.json."""
        flat = [v for s in self.segments for v in (*s.header, *s.content)]
        quantised = array("H", map(_quantise, flat))
        if sys.byteorder == "big":
            quantised.byteswap()
        data = quantised.tobytes()
        return {
            "encoding": ENCODING,
            "segments": [[len(s.header), len(s.content)] for s in self.segments],
            "values": base64.b64encode(data).decode("ascii"),
        }

    @classmethod
    def from_json(cls, data: Any) -> PageLogprobs | None:
        """The record `to_json` wrote, or None when `data` is not one (absent, other encoding,
        counts that do not match the values)."""
        if not isinstance(data, dict) or data.get("encoding") != ENCODING:
            return None
        try:
            quantised = array("H", base64.b64decode(data["values"], validate=True))
            if sys.byteorder == "big":
                quantised.byteswap()
            values = [-v / SCALE for v in quantised]
            counts = [(int(h), int(c)) for h, c in data["segments"]]
        except (KeyError, TypeError, ValueError):
            return None
        if sum(h + c for h, c in counts) != len(values) or any(min(p) < 0 for p in counts):
            return None
        segments, at = [], 0
        for h, c in counts:
            segments.append(Segment(tuple(values[at : at + h]), tuple(values[at + h : at + h + c])))
            at += h + c
        return cls(tuple(segments))


def _quantise(value: float) -> int:
    """-value in 1/SCALE nats, clamped to 0.._MAX (-inf and NaN: _MAX)."""
    if not math.isfinite(value):
        return 0 if value > 0 else _MAX
    return min(max(round(-value * SCALE), 0), _MAX)
