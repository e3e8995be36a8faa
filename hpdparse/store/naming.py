"""Which folder under OUT each input file gets: its stem, or stem-<hash> when that is taken."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

SourceKey = Any
"""A source: a `Path`, or a `hpdparse.sources.location.UrlSource` (name, stem, absolute())."""


def _short_hash(path: SourceKey) -> str:
    return hashlib.sha256(str(path.absolute()).encode("utf-8")).hexdigest()[:8]


def assign_folder_names(
    sources: list[SourceKey], owner_of: Callable[[str], str | None]
) -> dict[SourceKey, str]:
    """Give every source its own folder name under OUT, deterministically.

    A source gets ``<stem>`` unless another source already owns that folder: owned by the source
    that `owner_of(name)` reports (what the folder's ``raw/document.json`` records, from any
    earlier run into the same OUT), or claimed earlier in this run (sources taken in sorted order
    of absolute path). Otherwise it gets ``<stem>-<first 8 hex digits of sha256(absolute
    path)>``. So a file keeps its folder when the input list changes, and two files with the same
    stem never share one.
    """
    ordered = sorted({s.absolute() for s in sources}, key=str)
    owners = {src: owner_of(stem_of(src)) for src in ordered}
    result: dict[SourceKey, str] = {}
    claimed: set[str] = set()
    # Folders already owned by one of these sources go to their owners first.
    for src in ordered:
        if owners[src] == str(src):
            result[src] = stem_of(src)
            claimed.add(stem_of(src))
    for src in ordered:
        if src in result:
            continue
        stem = stem_of(src)
        free = stem not in claimed and owners[src] is None
        name = stem if free else f"{stem}-{_short_hash(src)}"
        claimed.add(name)
        result[src] = name
    return {s: result[s.absolute()] for s in sources}


def stem_of(path: SourceKey) -> str:
    return path.stem or path.name or "document"
