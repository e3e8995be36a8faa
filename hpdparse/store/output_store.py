"""Output stores and document folders opened from what the user gave: a local path, or a URL
(s3://bucket/prefix, through fsspec: `hpdparse.store.fsspec_folder`). `OutputStore`: the root
under which every document gets its folder (`convert -o OUT`), and which folder each input file
gets: its stem, or stem-<hash> when that is taken."""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hpdparse.remote import join, output_location
from hpdparse.sources.location import UrlSource
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.local import LocalFolder

OWNER_READS = 8
"""Folders whose owner (raw/document.json) is read at once when a run assigns folders."""


def open_document_folder(location: str | os.PathLike[str]) -> DocumentFolder:
    """The document folder at `location` (a local folder or a URL), e.g. for `hpdparse
    render`."""
    where = output_location(location)
    if isinstance(where, Path):
        return LocalFolder(where)
    from hpdparse.store.fsspec_folder import FsspecFolder

    return FsspecFolder(where)


class OutputStore:
    """Where the document folders of a run go: OUT/<name>/ per document, OUT a local folder or
    a URL such as s3://bucket/prefix."""

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.root = output_location(location)

    def folder(self, name: str) -> DocumentFolder:
        """The document folder called `name` (it may not exist yet)."""
        root = self.root
        return open_document_folder(root / name if isinstance(root, Path) else join(root, name))

    def assign_folders(
        self, sources: list[Path | UrlSource]
    ) -> dict[Path | UrlSource, DocumentFolder]:
        """Give every source its own folder, deterministically.

        A source gets ``<stem>`` unless another source already owns that folder: owned by the
        source that the folder's ``raw/document.json`` records (from any earlier run into the
        same OUT), or claimed earlier in this run (sources taken in sorted order of absolute
        path). Otherwise it gets ``<stem>-<first 8 hex digits of sha256(absolute path)>``. So a
        file keeps its folder when the input list changes, and two files with the same stem
        never share one. The folders' owners are read together, once per stem (on an object
        store a GET each, `OWNER_READS` at a time, not one after the other).
        """
        ordered = sorted({source.absolute() for source in sources}, key=str)
        stems = sorted({stem_of(source) for source in ordered})
        with ThreadPoolExecutor(OWNER_READS, thread_name_prefix="hpdparse-owner") as pool:
            owned = pool.map(lambda name: self.folder(name).owner(), stems)
            owners = dict(zip(stems, owned, strict=True))
        # Folders already owned by one of these sources go to their owners first.
        names = {src: stem_of(src) for src in ordered if owners[stem_of(src)] == str(src)}
        claimed = set(names.values())
        for src in ordered:
            if src in names:
                continue
            stem = stem_of(src)
            free = stem not in claimed and owners[stem] is None
            digest = hashlib.sha256(str(src).encode("utf-8")).hexdigest()[:8]
            names[src] = stem if free else f"{stem}-{digest}"
            claimed.add(names[src])
        return {source: self.folder(names[source.absolute()]) for source in sources}


def stem_of(path: Path | UrlSource) -> str:
    return path.stem or path.name or "document"
