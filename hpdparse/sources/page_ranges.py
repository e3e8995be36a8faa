"""1-based page selections such as "1-3,7,10-"."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class PageRanges:
    """A set of 1-based page numbers such as "1-3,7,10-" (open ends allowed: "10-", "-5");
    no ranges: every page."""

    ranges: tuple[tuple[int, int | None], ...] = ()

    @property
    def is_all(self) -> bool:
        return not self.ranges

    def select(self, page_count: int) -> list[int]:
        """The ascending, unique 1-based page numbers of a document with `page_count` pages that
        these ranges name (pages past the end are left out; may be empty)."""
        if self.is_all:
            return list(range(1, page_count + 1))
        chosen: set[int] = set()
        for start, end in self.ranges:
            last = page_count if end is None else min(end, page_count)
            chosen.update(range(start, last + 1))
        return sorted(chosen)

    def __str__(self) -> str:
        parts = []
        for start, end in self.ranges:
            if end is None:
                parts.append(f"{start}-")
            elif start == end:
                parts.append(str(start))
            else:
                parts.append(f"{start}-{end}")
        return ",".join(parts) or "all"


_RANGE_ITEM = re.compile(r"^(\d+)?\s*(-)?\s*(\d+)?$")


def parse_page_ranges(spec: str | None) -> PageRanges:
    """Parse a 1-based page selection: "1-3,7,10-" (10 to the end), "-5" (1 to 5).

    None means every page. Raises ValueError with a one-line message on a bad spec.
    """
    if spec is None:
        return PageRanges()
    if not spec.strip():
        raise ValueError("empty page range (expected e.g. 1-3,7,10-)")
    ranges: list[tuple[int, int | None]] = []
    for raw in spec.split(","):
        item = raw.strip()
        match = _RANGE_ITEM.match(item)
        if not item or not match or not (match.group(1) or match.group(3)):
            raise ValueError(f"invalid page range {item!r} in {spec!r} (expected e.g. 1-3,7,10-)")
        first, dash, last = match.groups()
        start = int(first) if first else 1
        end: int | None = int(last) if last else (None if dash else start)
        if start < 1 or (end is not None and end < 1):
            raise ValueError(f"invalid page range {item!r} in {spec!r}: pages are numbered from 1")
        if end is not None and end < start:
            raise ValueError(f"invalid page range {item!r} in {spec!r}: {start} is after {end}")
        ranges.append((start, end))
    return PageRanges(tuple(ranges))
