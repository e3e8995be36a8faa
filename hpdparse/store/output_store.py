"""Output stores and document folders opened from what the user gave: a local path, or a URL
(s3://bucket/prefix, through fsspec: `hpdparse.store.fsspec_folder`). `OutputStore`: the root
under which every document gets its folder (`convert -o OUT`)."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from hpdparse.remote import join, output_location
from hpdparse.store.document_folder import DocumentFolder
from hpdparse.store.local import LocalFolder
from hpdparse.store.naming import assign_folder_names, stem_of

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

    def assign_folders(self, sources: list[Path]) -> dict[Path, DocumentFolder]:
        """Every source's own folder, stable across runs (see `naming.assign_folder_names`).
        The folders' owners are read together, once per stem (on an object store a GET each,
        `OWNER_READS` at a time, not one after the other)."""
        stems = sorted({stem_of(source) for source in sources})
        with ThreadPoolExecutor(OWNER_READS, thread_name_prefix="hpdparse-owner") as pool:
            owners = dict(zip(stems, pool.map(self._owner, stems), strict=True))
        names = assign_folder_names(sources, owners.__getitem__)
        return {source: self.folder(name) for source, name in names.items()}

    def _owner(self, name: str) -> str | None:
        return self.folder(name).owner()
